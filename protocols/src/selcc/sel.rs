//! SEL as the SELCC authors run it: the uncached shared-exclusive latch baseline, acquired and
//! released by every front-end thread on its own ([REPO] `ruihong123/SELCC`, build
//! `ACCESS_MODE 0`).
//!
//! What [REPO] does (`storage/DDSM.cpp`, `#elif ACCESS_MODE == 0`: `SELCC_Shared_Lock`,
//! `SELCC_Exclusive_Lock`, `SELCC_Shared_UnLock`, `SELCC_Exclusive_UnLock`; `storage/rdma.cc`,
//! `global_Rlock_and_read_page_without_INVALID`, `global_Wlock_and_read_page_without_INVALID`,
//! `global_RUnlock` (the `ACCESS_MODE == 0` one) and `global_write_page_and_Wunlock`):
//! * no cache handle and no node-local latch: each thread reads the page into its thread-local
//!   buffer (`Get_local_read_mr`) and copies it into a fresh buffer (memcpy of the page);
//! * exclusive: `batch[CAS(0 → tag), READ page]`, `goto retry` at once when the CAS fails
//!   (`tag = (node_id/2 + 100) << 56`: the compute index in the top byte);
//! * shared: `batch[FAA(+1), READ page]` (a reader *count*, not a per-node bit); if the old word
//!   has a writer tag (`old >> 56 >= 100`), a synchronous `FAA(−1)` and `goto retry` at once;
//! * no backoff: the `retry_cnt % INVALIDATION_INTERVAL == 1` block is all comments in this
//!   build, and the default `r_time` never gives up;
//! * exclusive release: memcpy back, then `batch[WRITE dirty range, FAA(−tag)]` (signalled,
//!   waited for; `DIRTY_ONLY_FLUSH` is defined, so only the dirty bounds are written);
//! * shared release: one synchronous `FAA(−1)` (`async = false` from `SELCC_Shared_UnLock`).
//!
//! Here the word keeps SELCC's exclusive field (`latch::ex`, top 6 bits, index + 1) and the low
//! bits count readers (`latch.rs`, "SEL's encoding"). Each thread's private buffer is cache frame
//! number `thread` (SEL never caches, so no frame is ever assigned to a GCL). The SELCC
//! mutants that touch these steps apply here too: the release ones through
//! [`Node::release_verbs`]/[`Node::post_release`], `ReadThroughModified` at the shared retry.
//!
//! [`Config::sel_node_latch`](super::Config::sel_node_latch) keeps dmsim's earlier SEL (threads
//! of a node serialised on the frame's local latch, one reader bit per node, backoff C·RTT/N_r).

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use crate::common::error::{NicExt, ProtocolResult};
use crate::harness::{Invariants, Memory, Violation};
use crate::nic::{Nanos, Nic, RemoteAddr, Verb};
use crate::sync::Mode;

use super::check::Oracle;
use super::config::Mutant;
use super::dirty::Dirty;
use super::frame::Memo;
use super::latch;
use super::layout::{Gaddr, Layout, WORD};
use super::node::{Handle, Node, NodeState};
use super::stats::{OpCase, OpTrace};
use super::ComputeIndex;

/// Where a thread is with its one GCL (what the invariants read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Posting latch atomics (a shared acquirer's `+1` may have landed, its undo not yet).
    Acquiring,
    /// Inside the critical section: the acquire's completion was seen.
    Held,
    /// Release verbs posted, completion not yet seen (the FAA may have landed).
    Releasing,
}

/// One thread's latch on one GCL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hold {
    pub gcl: Gaddr,
    pub mode: Mode,
    pub step: Step,
}

/// Per-thread SEL state of one node, indexed by thread.
#[derive(Debug, Default)]
pub struct SelThreads {
    holds: Mutex<Vec<Option<Hold>>>,
}

impl SelThreads {
    pub fn new(threads: u32) -> SelThreads {
        SelThreads { holds: Mutex::new(vec![None; threads as usize]) }
    }

    fn set(&self, thread: u32, hold: Option<Hold>) {
        self.holds.lock().unwrap()[thread as usize] = hold;
    }
}

/// SEL's reader count: the low bits of the word (`latch.rs`, SEL's encoding).
#[inline]
pub fn reader_count(word: u64) -> u64 {
    latch::readers(word)
}

/// One reader in the count.
pub const ONE_READER: u64 = 1;

impl<N: Nic> Node<N> {
    /// Lock `g` as [REPO]'s SEL does: the thread acquires the global latch itself.
    pub(super) async fn sel_lock(
        &self,
        w: &mut super::node::Worker<N>,
        g: Gaddr,
        mode: Mode,
    ) -> ProtocolResult<Handle> {
        w.op = OpTrace::new(mode == Mode::Exclusive, w.nic.now());
        w.op.case = OpCase::RemoteFetch;
        let frame = w.thread;
        let buffer = self.frame_offset(frame);
        let me = self.me;
        let read = Verb::Read {
            remote: Layout::body(g),
            local_bytes: buffer,
            len_bytes: self.layout.frame_stride_bytes() as u32,
        };
        self.sel.set(w.thread, Some(Hold { gcl: g, mode, step: Step::Acquiring }));
        let mut retries = 0u32;
        let acquired = loop {
            let verbs = match mode {
                Mode::Exclusive => {
                    [Verb::Cas { remote: Layout::latch(g), expect: 0, swap: latch::ex(me) }, read]
                }
                Mode::Shared => [Verb::Faa { remote: Layout::latch(g), add: ONE_READER }, read],
            };
            let during = if mode == Mode::Exclusive { "SEL acquire exclusive" } else { "SEL acquire shared" };
            let old = match w.nic.try_batch(&verbs, during).await {
                Ok(r) => r.get(0),
                Err(e) => break Err(e),
            };
            w.op.round_trips += 1;
            let got = match mode {
                Mode::Exclusive => old == 0,
                Mode::Shared => {
                    latch::ex_field(old) == 0 || self.config.mutant == Mutant::ReadThroughModified
                }
            };
            if got {
                break Ok(());
            }
            if mode == Mode::Shared {
                // [REPO]: a synchronous FAA(−1) before the next attempt.
                let undo = 0u64.wrapping_sub(ONE_READER);
                if let Err(e) = w.nic.try_faa(Layout::latch(g), undo, "SEL undo shared acquire").await {
                    break Err(e);
                }
                w.op.round_trips += 1;
            }
            retries += 1;
            w.op.retries += 1;
            w.op.case = OpCase::Retried;
            assert!(retries < self.config.retry_limit, "SEL acquire of {g} stuck after {retries} retries");
        };
        if retries > 0 {
            self.stats.lock().unwrap().latch_retries += retries as u64;
        }
        if let Err(e) = acquired {
            self.sel.set(w.thread, None);
            return Err(self.fail(e));
        }
        self.sel.set(w.thread, Some(Hold { gcl: g, mode, step: Step::Held }));
        // [REPO] copies the page out of the thread's read buffer into a fresh one.
        w.nic.cpu(self.page_copy_ns()).await;
        Ok(Handle { gcl: g, mode, frame, latch_mode: mode, data_offset: buffer + WORD, staged: Vec::new() })
    }

    /// Unlock: shared `FAA(−1)`; exclusive `batch[WRITE dirty range, FAA(−tag)]`, waited for.
    pub(super) async fn sel_unlock(&self, w: &mut super::node::Worker<N>, h: Handle) -> ProtocolResult<()> {
        assert_eq!(h.frame, w.thread, "a SEL handle used by another thread");
        if h.mode == Mode::Exclusive {
            if let Some(oracle) = &self.oracle {
                oracle.commit(h.gcl, &h.staged, w.nic.now());
            }
            // [REPO] copies the page back into the thread's buffer before the WRITE.
            w.nic.cpu(self.page_copy_ns()).await;
        }
        self.sel.set(w.thread, Some(Hold { gcl: h.gcl, mode: h.mode, step: Step::Releasing }));
        let header = self.frame_offset(h.frame);
        let verbs = match h.mode {
            Mode::Shared => {
                vec![Verb::Faa { remote: Layout::latch(h.gcl), add: 0u64.wrapping_sub(ONE_READER) }]
            }
            Mode::Exclusive => {
                let dirty = Dirty::from_header(self.nic.local().load(header));
                self.release_verbs(h.gcl, Memo::Modified, dirty, header + WORD)
            }
        };
        let released = self.post_release(&w.nic, &verbs).await;
        self.nic.local().store(header, Dirty::CLEAN.to_header());
        self.sel.set(w.thread, None);
        released.map_err(|e| self.fail(e))?;
        let now = w.nic.now();
        self.stats.lock().unwrap().record_op(&w.op, now, self.config.timeline_bucket_ns);
        Ok(())
    }

    /// CPU time of one page memcpy ([REPO] `memcpy(..., kLeafPageSize)` in `DDSM.cpp`).
    fn page_copy_ns(&self) -> Nanos {
        Nanos(self.config.cpu.memcpy_ns_per_kib * self.layout.gcl_size_bytes / 1024)
    }
}

/// One node's holds, for the checker.
#[derive(Clone, Copy, Debug)]
struct Seen {
    node: ComputeIndex,
    hold: Hold,
}

thread_local! {
    static SCRATCH: RefCell<Vec<Seen>> = const { RefCell::new(Vec::new()) };
}

/// SEL's invariants after every event, over the first `gcl_count` GCLs:
/// * torn word: the exclusive field names a compute node or nobody, and the reader count is at
///   most the cluster's threads (a borrow or carry would break either);
/// * S1: at most one thread holds a GCL exclusively, and then no thread holds it shared;
/// * exclusive holder ⇒ the word names its node, and a named node has a thread acquiring,
///   holding or releasing the GCL exclusively (no leaked ownership);
/// * a writer in the word ⇒ no thread holds the GCL shared;
/// * reader count = threads holding shared, plus at most one per thread whose `+1` or `−1` is in
///   flight (acquiring or releasing shared);
/// * and the oracle's read-latest check (S4).
pub fn invariants(
    layout: &Layout,
    states: Vec<Arc<NodeState>>,
    oracle: Arc<Oracle>,
    gcl_count: u64,
) -> Invariants {
    let compute = layout.compute_count();
    let threads = compute as u64 * layout.threads_per_node;
    let latches: Vec<(u64, RemoteAddr)> = (0..gcl_count).map(|i| (i, Layout::latch(layout.gcl(i)))).collect();
    Box::new(move |word: Memory, _| {
        SCRATCH.with(|cell| {
            let mut fresh = Vec::new();
            let mut borrowed = cell.try_borrow_mut();
            let seen: &mut Vec<Seen> = match borrowed.as_mut() {
                Ok(v) => v,
                Err(_) => &mut fresh,
            };
            seen.clear();
            for state in &states {
                for hold in state.sel.holds.lock().unwrap().iter().flatten() {
                    seen.push(Seen { node: state.me, hold: *hold });
                }
            }
            for (i, l) in &latches {
                let value = word(*l);
                let on_line = || seen.iter().filter(|s| s.hold.gcl == *l);
                if value == 0 && on_line().next().is_none() {
                    continue;
                }
                check_line(value, on_line(), compute, threads)
                    .map_err(|(invariant, detail)| Violation::new(invariant, format!("GCL {i}: {detail}")))?;
            }
            Ok(())
        })?;
        match oracle.violations().first() {
            Some(v) => Err(Violation::new(v.invariant, v.to_string())),
            None => Ok(()),
        }
    })
}

/// The checks of one GCL: its latch word and the holds of every thread on it.
fn check_line<'a>(
    word: u64,
    holds: impl Iterator<Item = &'a Seen> + Clone,
    compute: usize,
    threads: u64,
) -> Result<(), (&'static str, String)> {
    let field = latch::ex_field(word);
    let count = reader_count(word);
    if field as usize > compute {
        return Err(("SEL latch not torn", format!("latch {word:#x}: the exclusive field names no node")));
    }
    if count > threads {
        return Err(("SEL latch not torn", format!("latch {word:#x}: {count} readers, {threads} threads")));
    }
    let count_of = |mode: Mode, step: Step| {
        holds.clone().filter(|s| s.hold.mode == mode && s.hold.step == step).count() as u64
    };
    let held_ex = count_of(Mode::Exclusive, Step::Held);
    let held_sh = count_of(Mode::Shared, Step::Held);
    if held_ex > 1 || (held_ex == 1 && held_sh > 0) {
        return Err(("S1 single writer", format!("{held_ex} exclusive and {held_sh} shared holders")));
    }
    let holder = latch::exclusive_holder(word, compute);
    for s in holds.clone().filter(|s| s.hold.mode == Mode::Exclusive && s.hold.step == Step::Held) {
        if holder != Some(s.node) {
            return Err((
                "SEL exclusive holder named by the latch",
                format!("node {} holds it exclusively, latch {word:#x}", s.node.0),
            ));
        }
    }
    if let Some(owner) = holder {
        if !holds.clone().any(|s| s.node == owner && s.hold.mode == Mode::Exclusive) {
            return Err((
                "SEL latch owner knows",
                format!("latch {word:#x} names node {} and none of its threads", owner.0),
            ));
        }
        if held_sh > 0 {
            return Err((
                "SEL no reader beside a writer",
                format!("latch {word:#x} has a writer and {held_sh} threads hold it shared"),
            ));
        }
    }
    let in_flight = count_of(Mode::Shared, Step::Acquiring) + count_of(Mode::Shared, Step::Releasing);
    if count < held_sh || count > held_sh + in_flight {
        return Err((
            "SEL reader count matches shared holders",
            format!("latch {word:#x}: count {count}, {held_sh} holders, {in_flight} in flight"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::NodeId;

    fn seen(node: u8, mode: Mode, step: Step) -> Seen {
        Seen { node: ComputeIndex(node), hold: Hold { gcl: RemoteAddr::new(NodeId(0), 64), mode, step } }
    }

    fn check(word: u64, holds: &[Seen]) -> Result<(), &'static str> {
        check_line(word, holds.iter(), 4, 8).map_err(|(invariant, _)| invariant)
    }

    #[test]
    fn reader_count_and_writer_field_match_the_holds() {
        // Goal: the checker accepts exactly the words a correct SEL can produce.
        let a = ComputeIndex(1);
        let (sh, ex) = (Mode::Shared, Mode::Exclusive);
        assert_eq!(check(latch::ex(a), &[seen(1, ex, Step::Held)]), Ok(()));
        // Two threads of one node reading: a count of 2, not a bit.
        assert_eq!(check(2, &[seen(1, sh, Step::Held), seen(1, sh, Step::Held)]), Ok(()));
        // A failed reader's transient +1 beside the writer.
        let transient = latch::ex(a) + 1;
        assert_eq!(check(transient, &[seen(1, ex, Step::Held), seen(2, sh, Step::Acquiring)]), Ok(()));
        assert_eq!(
            check(transient, &[seen(1, ex, Step::Held), seen(2, sh, Step::Held)]),
            Err("S1 single writer")
        );
        assert_eq!(check(2, &[seen(1, sh, Step::Held)]), Err("SEL reader count matches shared holders"));
        assert_eq!(check(latch::ex(a), &[]), Err("SEL latch owner knows"));
        assert_eq!(check(0, &[seen(1, ex, Step::Held)]), Err("SEL exclusive holder named by the latch"));
        assert_eq!(check(latch::ex(ComputeIndex(9)), &[]), Err("SEL latch not torn"));
        assert_eq!(check(9, &[]), Err("SEL latch not torn"));
    }
}
