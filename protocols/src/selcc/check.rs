//! Invariants for check mode (SELCC spec §4), as functions over shared state that a simulator
//! can call after every event, plus the [`Oracle`] that checks every read against the latest
//! write in XUnLock order (S4).
//!
//! Documented transients (where a memo may legitimately disagree with the latch word):
//! * a frame with `transit` set has latch verbs in flight from its node;
//! * a frame with `acquiring` set belongs to a thread inside a global acquire (its CAS/FAA may
//!   have landed before the completion arrived, or a victim's handover/downgrade named it);
//! * a GCL in a node's `releasing` map has release verbs in flight from that node;
//! * a Case-1 handover in a node's `handovers` map: the new owner may hold the forwarded copy as
//!   Modified before the handover FAA lands (spec §4 S3 "careful").

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

/// One node's view of one GCL, gathered for the cross-node checks.
#[derive(Clone, Copy, Debug)]
struct Copy {
    node: ComputeIndex,
    memo: Memo,
    transit: bool,
    acquiring: bool,
    readers: u32,
    writers: u32,
}

/// Check S1, S2, S3 and directory soundness across all compute nodes. `latch_word(g)` reads the
/// latch word of `g` from its memory node's region.
pub fn check_coherence(
    nodes: &[&NodeState],
    layout: &Layout,
    latch_word: &dyn Fn(Gaddr) -> u64,
) -> Result<(), Violation> {
    let mut lines: BTreeMap<Gaddr, Vec<Copy>> = BTreeMap::new();
    let mut handovers: BTreeMap<Gaddr, Vec<(ComputeIndex, ComputeIndex)>> = BTreeMap::new();
    let mut releasing: BTreeMap<Gaddr, Vec<ComputeIndex>> = BTreeMap::new();
    for state in nodes {
        check_memorised_messages(state)?;
        for frame in state.cache.frames.iter() {
            let meta = frame.meta();
            let Some(g) = meta.gcl else { continue };
            lines.entry(g).or_default().push(Copy {
                node: state.me,
                memo: meta.memo,
                transit: meta.transit,
                acquiring: meta.acquiring,
                readers: meta.section_readers,
                writers: meta.section_writers,
            });
        }
        for (g, to) in state.handovers.lock().unwrap().iter() {
            handovers.entry(*g).or_default().push((state.me, *to));
            lines.entry(*g).or_default();
        }
        for g in state.releasing.lock().unwrap().keys() {
            releasing.entry(*g).or_default().push(state.me);
            lines.entry(*g).or_default();
        }
    }
    let n = layout.compute_count();
    for (g, copies) in &lines {
        let g = *g;
        let fail = |invariant: &'static str, detail: String| Err(Violation { invariant, gcl: g, detail });
        // S1: one writer in a critical section, and then no reader anywhere.
        let writers: u32 = copies.iter().map(|c| c.writers).sum();
        let readers: u32 = copies.iter().map(|c| c.readers).sum();
        if writers > 1 || (writers == 1 && readers > 0) {
            return fail("S1 single writer", format!("{writers} writers and {readers} readers in sections"));
        }
        // S2: at most one Modified copy, and no Shared copy beside it.
        let modified: Vec<_> = copies.iter().filter(|c| c.memo == Memo::Modified).collect();
        // A Shared memo mid-transition (`transit`: a Case-3 release FAA in flight; `acquiring`: an
        // upgrade fallback's release FAA in flight) may outlive its latch bit by the completion's
        // flight time, while its task holds the local latch exclusively so nobody reads the copy.
        // Found by `dmsim fuzz scenarios/selcc/fuzz-small.json` (seeds 79, 164, 217 of 300).
        let shared = copies.iter().filter(|c| c.memo == Memo::Shared && !c.transit && !c.acquiring).count();
        if modified.len() > 1 || (modified.len() == 1 && shared > 0) {
            return fail(
                "S2 one Modified copy",
                format!("{} Modified and {shared} Shared copies", modified.len()),
            );
        }
        // S3: memo soundness with respect to the latch word.
        let word = latch_word(g);
        let holder = latch::exclusive_holder(word, n);
        let handing = handovers.get(&g).map(Vec::as_slice).unwrap_or(&[]);
        // A copy in transit or mid-acquire (its CAS/FAA may have landed, e.g. an upgrade) is
        // exempt until its thread observes the completion.
        for c in copies.iter().filter(|c| !c.transit && !c.acquiring) {
            match c.memo {
                Memo::Modified => {
                    // A forwarded owner may see its copy before the handover FAA (possibly one of
                    // a chain of handovers) lands.
                    let handed_to_us = handing.iter().any(|(_, to)| *to == c.node);
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
                || releasing.get(&g).is_some_and(|r| r.contains(&node))
                || handing.iter().any(|(from, to)| *from == node || *to == node)
        };
        if let Some(owner) = holder {
            let knows = copies.iter().any(|c| c.node == owner && c.memo == Memo::Modified);
            if !knows && !busy(owner) && handing.is_empty() {
                return fail(
                    "S3 latch owner knows",
                    format!("latch {word:#x} names node {} without M", owner.0),
                );
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
    }
    Ok(())
}

/// Liveness of deferral (§5.1.1, §5.3.1): a memorised message has someone to serve it — a
/// holder of the frame's local latch (who passes it on when it leaves) or the retry server's
/// queue. A message memorised in an idle frame that nobody will look at again is stranded: its
/// sender polls for a reply until the line happens to be touched or evicted.
pub fn check_memorised_messages(state: &NodeState) -> Result<(), Violation> {
    let queued = state.retry_queued.lock().unwrap();
    for frame in state.cache.frames.iter() {
        let (pending, g) = {
            let meta = frame.meta();
            (meta.pending, meta.gcl)
        };
        let (Some(msg), Some(g)) = (pending, g) else { continue };
        if frame.latch.snapshot() == (0, false, 0) && !queued.contains_key(&g) {
            return Err(Violation {
                invariant: "L2 memorised message has a server",
                gcl: g,
                detail: format!(
                    "node {} keeps a {:?} message from node {} (seq {}) in an idle frame, not queued \
                     for the retry server",
                    state.me.0, msg.kind, msg.sender.0, msg.seq
                ),
            });
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
        if let Some(expected) = oracle.shadow.lock().unwrap().get(&g) {
            for (i, value) in expected.iter().enumerate() {
                let actual = word(Layout::data(g).add(i as u64 * WORD));
                if actual != *value {
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
}

impl Oracle {
    pub fn new(gcl_size_bytes: u32) -> Oracle {
        Oracle {
            gcl_words: gcl_size_bytes as usize / 8,
            shadow: Mutex::new(BTreeMap::new()),
            violations: Mutex::new(Vec::new()),
            reads_checked: Mutex::new(0),
        }
    }

    pub fn commit(&self, g: Gaddr, writes: &[(u32, u64)], _at: Nanos) {
        if writes.is_empty() {
            return;
        }
        let mut shadow = self.shadow.lock().unwrap();
        let words = shadow.entry(g).or_insert_with(|| vec![0; self.gcl_words]);
        for &(word, value) in writes {
            words[word as usize] = value;
        }
    }

    pub fn check_read(&self, node: NodeId, g: Gaddr, word: u32, value: u64, at: Nanos) {
        *self.reads_checked.lock().unwrap() += 1;
        let expected = self.shadow.lock().unwrap().get(&g).map_or(0, |w| w[word as usize]);
        if expected != value {
            self.violations.lock().unwrap().push(Violation {
                invariant: "S4 read returns the latest write",
                gcl: g,
                detail: format!(
                    "{node} read word {word} = {value:#x} at {at}, latest write is {expected:#x}"
                ),
            });
        }
    }

    pub fn violations(&self) -> Vec<Violation> {
        self.violations.lock().unwrap().clone()
    }

    pub fn reads_checked(&self) -> u64 {
        *self.reads_checked.lock().unwrap()
    }
}
