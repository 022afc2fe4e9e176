//! Invariants for check mode (SELCC spec §4), as functions over shared state that a simulator
//! can call after every event, plus the [`Oracle`] that checks every read against the latest
//! write in XUnLock order (S4).
//!
//! Documented transients (where a memo may legitimately disagree with the latch word). Each is
//! exempt only while the copy is *sealed*: its task holds the frame's local latch exclusively and
//! no thread is in a section, so nobody can read or write the copy; a wrong memo is caught the
//! moment the latch opens.
//! * a sealed Shared copy with `transit` set has its release FAA in flight (Case 3, a lease);
//! * a sealed Shared copy with `acquiring` set belongs to a thread inside an upgrade (its CAS
//!   may have landed before the completion arrived) or an upgrade fallback's release;
//! * a sealed Modified copy with `flushing` set has its flush + latch FAA in flight (a Case-2
//!   downgrade or a release): memory already holds its data;
//! * a Case-1 handover in a node's `handovers` map: the new owner may hold the forwarded copy as
//!   Modified before the handover FAA lands (spec §4 S3 "careful");
//! * for directory soundness only (liveness, not safety): a GCL in a node's `releasing` map has
//!   release verbs in flight, and a node mid-transition (`transit`/`acquiring`) may not yet know
//!   what the latch names.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;

use crate::nic::{Nanos, NodeId};

use super::frame::Memo;
use super::latch;
use super::layout::{Gaddr, Layout, WORD};
use super::node::NodeState;
use super::ComputeIndex;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub invariant: &'static str,
    pub gcl: Gaddr,
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} violated on GCL {}: {}", self.invariant, self.gcl, self.detail)
    }
}

/// One node's view of one GCL, gathered for the cross-node checks. `seq` is the gathering
/// order, so sorting by `(gcl, seq)` groups the copies of a line in the order they were found.
#[derive(Clone, Copy, Debug)]
pub(super) struct Copy {
    pub(super) gcl: Gaddr,
    pub(super) seq: u32,
    pub(super) node: ComputeIndex,
    pub(super) memo: Memo,
    pub(super) transit: bool,
    pub(super) acquiring: bool,
    /// A Modified copy whose flush and latch FAA are in flight (a Case-2 downgrade or a
    /// release), with the frame's local latch held exclusively and no thread in a section:
    /// nobody can read or write this copy, and memory already holds its data.
    pub(super) flushing: bool,
    /// The frame's local latch is held exclusively and no thread is in a section: nobody can
    /// read or write the copy (the window every documented transient lives in).
    pub(super) sealed: bool,
    pub(super) readers: u32,
    pub(super) writers: u32,
}

/// Buffers reused across calls of [`check_coherence`] (it runs after every simulator event, so
/// it must not allocate). Each list is sorted by `(gcl, seq)` before the per-line checks.
#[derive(Default)]
struct Scratch {
    copies: Vec<Copy>,
    /// `(gcl, seq, from, to)` for every Case-1 handover in flight.
    handovers: Vec<(Gaddr, u32, ComputeIndex, ComputeIndex)>,
    /// `(gcl, seq, node)` for every release in flight.
    releasing: Vec<(Gaddr, u32, ComputeIndex)>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Check S1, S2, S3 and directory soundness across all compute nodes, and L2
/// ([`check_memorised_messages`]) on every node first. `latch_word(g)` reads the latch word of
/// `g` from its memory node's region.
pub fn check_coherence(
    nodes: &[&NodeState],
    layout: &Layout,
    latch_word: &dyn Fn(Gaddr) -> u64,
) -> Result<(), Violation> {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => check_coherence_with(&mut scratch, nodes, layout, latch_word),
        // Re-entered (from `latch_word`): fall back to fresh buffers.
        Err(_) => check_coherence_with(&mut Scratch::default(), nodes, layout, latch_word),
    })
}

fn check_coherence_with(
    scratch: &mut Scratch,
    nodes: &[&NodeState],
    layout: &Layout,
    latch_word: &dyn Fn(Gaddr) -> u64,
) -> Result<(), Violation> {
    let Scratch { copies, handovers, releasing } = scratch;
    copies.clear();
    handovers.clear();
    releasing.clear();
    let mut seq = 0u32;
    let mut next = || {
        seq += 1;
        seq
    };
    for state in nodes {
        // One pass over the frames gathers the copies and checks L2 (`check_memorised_messages`,
        // inlined so each frame's meta is locked once): L2 cannot fail after gathering has
        // started on a later node, and gathering cannot fail, so the first violation is the
        // same as checking L2 node by node before the line checks.
        let queued = state.retry_queued.peek();
        for frame in state.cache.frames.iter() {
            let (g, memo, transit, acquiring, flushing, readers, writers, pending) = {
                let meta = frame.peek_meta();
                let Some(g) = meta.gcl() else { continue };
                (
                    g,
                    meta.memo,
                    meta.transit,
                    meta.acquiring,
                    meta.flushing,
                    meta.section_readers,
                    meta.section_writers,
                    meta.pending.as_deref().copied(),
                )
            };
            let sealed = readers == 0 && writers == 0 && frame.latch.snapshot().1;
            let flushing = flushing && memo == Memo::Modified && sealed;
            if let Some(msg) = pending {
                if frame.latch.snapshot() == (0, false, 0) && !queued.contains_key(&g) {
                    return Err(stranded_message(state, g, &msg));
                }
            }
            copies.push(Copy {
                gcl: g,
                seq: next(),
                node: state.me,
                memo,
                transit,
                acquiring,
                flushing,
                sealed,
                readers: readers.into(),
                writers: writers.into(),
            });
        }
        drop(queued);
        for (g, to) in state.handovers.peek().iter() {
            handovers.push((*g, next(), state.me, *to));
        }
        for g in state.releasing.peek().keys() {
            releasing.push((*g, next(), state.me));
        }
    }
    copies.sort_unstable_by_key(|c| (c.gcl, c.seq));
    handovers.sort_unstable_by_key(|h| (h.0, h.1));
    releasing.sort_unstable_by_key(|r| (r.0, r.1));
    let n = layout.compute_count();
    // Walk the GCLs named by any of the three lists in ascending order (as the per-line maps of
    // the checks' definition would).
    let (mut ci, mut hi, mut ri) = (0, 0, 0);
    loop {
        let g =
            [copies.get(ci).map(|c| c.gcl), handovers.get(hi).map(|h| h.0), releasing.get(ri).map(|r| r.0)]
                .into_iter()
                .flatten()
                .min();
        let Some(g) = g else { break };
        let run = |from: usize, len: usize, at: &dyn Fn(usize) -> Gaddr| {
            let mut to = from;
            while to < len && at(to) == g {
                to += 1;
            }
            to
        };
        let ce = run(ci, copies.len(), &|i| copies[i].gcl);
        let he = run(hi, handovers.len(), &|i| handovers[i].0);
        let re = run(ri, releasing.len(), &|i| releasing[i].0);
        check_line(g, &copies[ci..ce], &handovers[hi..he], &releasing[ri..re], n, latch_word)?;
        (ci, hi, ri) = (ce, he, re);
    }
    Ok(())
}

/// The cross-node checks of one GCL: its cached copies, the handovers and releases in flight.
pub(super) fn check_line(
    g: Gaddr,
    copies: &[Copy],
    handing: &[(Gaddr, u32, ComputeIndex, ComputeIndex)],
    releasing: &[(Gaddr, u32, ComputeIndex)],
    n: usize,
    latch_word: &dyn Fn(Gaddr) -> u64,
) -> Result<(), Violation> {
    let fail = |invariant: &'static str, detail: String| Err(Violation { invariant, gcl: g, detail });
    // S1: one writer in a critical section, and then no reader anywhere.
    let writers: u32 = copies.iter().map(|c| c.writers).sum();
    let readers: u32 = copies.iter().map(|c| c.readers).sum();
    if writers > 1 || (writers == 1 && readers > 0) {
        return fail("S1 single writer", format!("{writers} writers and {readers} readers in sections"));
    }
    // S2: one Modified copy and nothing beside it — except copies whose flush + latch FAA are
    // in flight (`flushing`: a Case-2 downgrade or a release). Why that is sound (paper §3.5
    // Case 2 and §3.3 release; found by `dmsim fuzz scenarios/selcc/fuzz-small.json`: 15 of
    // 20,000 schedules flagged downgrades, 1 of 100,000 more a release): the victim posts
    // `[WRITE dirty range, FAA]` as one batch on one QP, so memory holds the copy's data before
    // the FAA gives up exclusivity. From the FAA's landing until its completion arrives, another
    // node may take the latch (shared, or exclusive after a release) and READ memory — the
    // current data — while the victim's memo still says Modified. The copy cannot change in that
    // window: its task holds the frame's local latch exclusively, no thread is in a section, and
    // the memo becomes Shared/Invalid before that latch is released. The flagged schedules with
    // this check off pass linearizability, sequential consistency, the read-latest oracle and
    // the quiescence check (memory = latest writes, every latch free).
    let modified = copies.iter().filter(|c| c.memo == Memo::Modified && !c.flushing).count();
    // A sealed Shared memo mid-transition (`transit`: a Case-3 or lease release FAA in flight;
    // `acquiring`: an upgrade's CAS or its fallback's release FAA in flight) may outlive its
    // latch bit by the completion's flight time; nobody can read the copy meanwhile. Found by
    // `dmsim fuzz scenarios/selcc/fuzz-small.json` (seeds 79, 164, 217 of 300).
    let shared = copies.iter().filter(|c| c.memo == Memo::Shared && !shared_in_transition(c)).count();
    if modified > 1 || (modified == 1 && shared > 0) {
        return fail("S2 one Modified copy", format!("{modified} Modified and {shared} Shared copies"));
    }
    // S3: memo soundness with respect to the latch word.
    let word = latch_word(g);
    let holder = latch::exclusive_holder(word, n);
    for c in copies {
        match c.memo {
            // A Modified memo is set only once its CAS (or the forward) completed and dropped
            // only after its release completed: no exemption beyond a flush in flight and a
            // handover to us in flight.
            Memo::Modified if c.flushing => {}
            Memo::Shared if shared_in_transition(c) => {}
            Memo::Modified => {
                // A forwarded owner may see its copy before the handover FAA (possibly one of
                // a chain of handovers) lands.
                let handed_to_us = handing.iter().any(|h| h.3 == c.node);
                if holder != Some(c.node) && !handed_to_us {
                    return fail(
                        "S3 memo M matches latch",
                        format!("node {} has M, latch {word:#x}", c.node.0),
                    );
                }
            }
            Memo::Shared => {
                if word & latch::bit(c.node) == 0 || latch::ex_field(word) != 0 {
                    return fail(
                        "S3 memo S matches latch",
                        format!("node {} has S, latch {word:#x}", c.node.0),
                    );
                }
            }
            Memo::Invalid => {}
        }
    }
    // Directory soundness: whoever the latch names knows it (or is mid-transition), so no
    // ownership leaks and no acquirer waits for a holder that will never answer.
    let busy = |node: ComputeIndex| {
        copies.iter().any(|c| c.node == node && (c.transit || c.acquiring))
            || releasing.iter().any(|r| r.2 == node)
            || handing.iter().any(|h| h.2 == node || h.3 == node)
    };
    if let Some(owner) = holder {
        let knows = copies.iter().any(|c| c.node == owner && c.memo == Memo::Modified);
        if !knows && !busy(owner) && handing.is_empty() {
            return fail("S3 latch owner knows", format!("latch {word:#x} names node {} without M", owner.0));
        }
    }
    if latch::ex_field(word) == 0 {
        for reader in latch::bits_iter(latch::readers(word)) {
            let knows = copies.iter().any(|c| c.node == reader && c.memo == Memo::Shared);
            if !knows && !busy(reader) {
                return fail("S3 reader bit owner knows", format!("bit {} set in {word:#x}", reader.0));
            }
        }
    }
    Ok(())
}

/// A Shared copy whose latch verb is in flight, sealed so nobody reads it (see the module docs).
fn shared_in_transition(c: &Copy) -> bool {
    c.sealed && (c.transit || c.acquiring)
}

pub(super) fn stranded_message(state: &NodeState, g: Gaddr, msg: &super::message::InvMsg) -> Violation {
    Violation {
        invariant: "L2 memorised message has a server",
        gcl: g,
        detail: format!(
            "node {} keeps a {:?} message from node {} (seq {}) in an idle frame, not queued \
             for the retry server",
            state.me.0, msg.kind, msg.sender.0, msg.seq
        ),
    }
}

/// Liveness of deferral (§5.1.1, §5.3.1): a memorised message has someone to serve it — a
/// holder of the frame's local latch (who passes it on when it leaves) or the retry server's
/// queue. A message memorised in an idle frame that nobody will look at again is stranded: its
/// sender polls for a reply until the line happens to be touched or evicted.
pub fn check_memorised_messages(state: &NodeState) -> Result<(), Violation> {
    let queued = state.retry_queued.peek();
    for frame in state.cache.frames.iter() {
        let (pending, g) = {
            let meta = frame.peek_meta();
            (meta.pending.as_deref().copied(), meta.gcl())
        };
        let (Some(msg), Some(g)) = (pending, g) else { continue };
        if frame.latch.snapshot() == (0, false, 0) && !queued.contains_key(&g) {
            return Err(stranded_message(state, g, &msg));
        }
    }
    Ok(())
}

/// At quiescence (all nodes drained): every latch is free and memory holds the latest writes.
pub fn check_quiescent(
    layout: &Layout,
    gcls: &[Gaddr],
    word: &dyn Fn(crate::nic::RemoteAddr) -> u64,
    oracle: &Oracle,
) -> Result<(), Violation> {
    for &g in gcls {
        let latch_value = word(Layout::latch(g));
        if latch_value != 0 {
            return Err(Violation {
                invariant: "S8 quiescent latch is free",
                gcl: g,
                detail: format!("latch {latch_value:#x}"),
            });
        }
        let expected = oracle.shadow.lock().unwrap().get(&g).cloned();
        if let Some(expected) = expected {
            for (i, value) in expected.iter().enumerate() {
                let actual = word(Layout::data(g).add(i as u64 * WORD));
                if actual != *value && !oracle.landed(g, i as u32, actual) {
                    return Err(Violation {
                        invariant: "S6/S7 memory holds the latest write",
                        gcl: g,
                        detail: format!("word {i}: memory {actual:#x}, latest write {value:#x}"),
                    });
                }
            }
        }
    }
    let _ = layout;
    Ok(())
}

/// Knows the latest committed value of every data word (writes commit at XUnLock, the write
/// serialisation point of §4 [P]) and records every read that disagrees (S4).
pub struct Oracle {
    gcl_words: usize,
    pub(super) shadow: Mutex<BTreeMap<Gaddr, Vec<u64>>>,
    violations: Mutex<Vec<Violation>>,
    reads_checked: Mutex<u64>,
    /// Crash recovery: writes whose write-through to memory is in flight, by GCL. Their writer
    /// may crash before XUnLock returns; a later read may then see them (the write took effect
    /// at the crash) or not (it never did): both are legal for a write that never returned.
    durable_pending: Mutex<BTreeMap<Gaddr, Vec<(u32, u64)>>>,
}

impl Oracle {
    pub fn new(gcl_size_bytes: u32) -> Oracle {
        Oracle {
            gcl_words: gcl_size_bytes as usize / 8,
            shadow: Mutex::new(BTreeMap::new()),
            violations: Mutex::new(Vec::new()),
            reads_checked: Mutex::new(0),
            durable_pending: Mutex::new(BTreeMap::new()),
        }
    }

    /// Crash recovery: `writes` to `g` are being written through; [`Oracle::commit`] follows.
    pub fn stage_durable(&self, g: Gaddr, writes: &[(u32, u64)]) {
        self.durable_pending.lock().unwrap().entry(g).or_default().extend_from_slice(writes);
    }

    pub fn commit(&self, g: Gaddr, writes: &[(u32, u64)], _at: Nanos) {
        if writes.is_empty() {
            return;
        }
        if let Some(pending) = self.durable_pending.lock().unwrap().get_mut(&g) {
            // Write values are unique: these are exactly this XUnLock's staged writes.
            pending.retain(|w| !writes.contains(w));
        }
        let mut shadow = self.shadow.lock().unwrap();
        let words = shadow.entry(g).or_insert_with(|| vec![0; self.gcl_words]);
        for &(word, value) in writes {
            words[word as usize] = value;
        }
    }

    /// S4 read-latest: the words `first..` of `g` read as `values` are the latest writes, except
    /// those `skip` says the reader staged itself. One lookup of the shadow for the whole span
    /// (a B-link page read is hundreds of words; per-word lookups were a tenth of fuzzing time).
    pub fn check_read_span(
        &self,
        node: NodeId,
        g: Gaddr,
        first: u32,
        values: &[u64],
        skip: impl Fn(u32) -> bool,
        at: Nanos,
    ) {
        let mut mismatches = Vec::new();
        let mut checked = 0;
        {
            let shadow = self.shadow.lock().unwrap();
            let words = shadow.get(&g);
            for (i, &value) in values.iter().enumerate() {
                let word = first + i as u32;
                if skip(word) {
                    continue;
                }
                checked += 1;
                let expected = words.map_or(0, |w| w[word as usize]);
                if expected != value {
                    mismatches.push((word, value, expected));
                }
            }
        }
        *self.reads_checked.lock().unwrap() += checked;
        for (word, value, expected) in mismatches {
            self.judge_read(node, g, word, value, expected, at);
        }
    }

    /// A read of `value` where the latest write is `expected`.
    fn judge_read(&self, node: NodeId, g: Gaddr, word: u32, value: u64, expected: u64, at: Nanos) {
        if expected != value {
            // The write-through of a writer that crashed before XUnLock returned landed: the
            // write took effect (at the crash).
            if self.landed(g, word, value) {
                self.commit(g, &[(word, value)], at);
                return;
            }
            self.violations.lock().unwrap().push(Violation {
                invariant: "S4 read returns the latest write",
                gcl: g,
                detail: format!(
                    "{node} read word {word} = {value:#x} at {at}, latest write is {expected:#x}"
                ),
            });
        }
    }

    /// Whether `value` in `g`'s `word` is the write-through of a writer that crashed before its
    /// XUnLock returned (a write that may have taken effect).
    pub fn landed(&self, g: Gaddr, word: u32, value: u64) -> bool {
        self.durable_pending.lock().unwrap().get(&g).is_some_and(|p| p.contains(&(word, value)))
    }

    pub fn violations(&self) -> Vec<Violation> {
        self.violations.lock().unwrap().clone()
    }

    pub fn reads_checked(&self) -> u64 {
        *self.reads_checked.lock().unwrap()
    }
}
