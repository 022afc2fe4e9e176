//! Compute-node crash recovery (SELCC §6.5 [P]): "During failure recovery, dedicated threads
//! scan the disaggregated memory to remove stale shared or exclusive ownerships associated with
//! the failed compute nodes." The paper names no failure detector and [REPO] has none (a
//! `TODO: heartbeat for failure recovery` in `memory_node_keeper.cpp`), so detection here is a
//! [CHOICE] (`NEEDS.md`), one-sided like the rest of SELCC:
//!
//! * **Heartbeats.** Every compute node's monitor task FAAs `+1` on its counter in the first
//!   memory node's membership words ([`Layout::heartbeat`]) every `heartbeat_ns`.
//! * **Lease.** The same task reads every counter and the dead set ([`Layout::dead_set`]); a
//!   counter that has not moved for `lease_ns` of this node's time marks its node dead: the
//!   monitor CASes the node's bit into the dead set, and the one whose CAS wins recovers it.
//!   Correct only if no live node's heartbeat stalls for a lease (pauses and message delays
//!   shorter than `lease_ns`); a node that finds itself in the dead set stops with an error.
//! * **Cleanup.** The recoverer scans every memory node's GCLs (up to its bump pointer), reading
//!   latch words with `FAA(+0)` in batches, and removes the dead node's reader bit and
//!   exclusive field with a CAS per word (idempotent, unlike an FAA, should two passes meet).
//!   It scans twice, the second time one lease later: a handover the dead node asked for whose
//!   message was still in flight may land after the first pass.
//! * **Survivors.** Invalidation handlers ignore messages from dead nodes; a requester stops
//!   waiting for replies from dead nodes and retries its atomic, which succeeds once the scan
//!   removed the stale ownership.
//!
//! Durability: SELCC caches write-back, so a crashed owner's dirty lines would die with it.
//! With crash recovery each XUnLock writes the line's data through to memory before it returns
//! (`ops.rs`): the acknowledged write is in memory whatever happens to the writer. The paper's
//! own answer, ARIES-style logs in disaggregated memory, is not built.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::common::error::{NicExt, ProtocolError, ProtocolResult};
use crate::nic::{Nanos, Nic, NicError, RemoteAddr, Verb, MAX_BATCH};

use super::config::Mutant;
use super::latch;
use super::layout::{Layout, MEMORY_HEADER_BYTES};
use super::node::Node;
use super::ComputeIndex;

/// The channel of the monitor task; cleanup tasks use the ones after it.
pub const CHANNEL_MONITOR: u16 = 2500;

/// `word` without compute index `dead`'s ownership (its reader bit; its exclusive field).
pub fn strip(word: u64, dead: ComputeIndex, compute_count: usize) -> u64 {
    let mut w = word & !latch::bit(dead);
    if latch::exclusive_holder(w, compute_count) == Some(dead) {
        w -= latch::ex(dead);
    }
    w
}

/// `word` without the ownership of every compute index in the `dead` bitmap.
pub fn strip_all(word: u64, dead: u64, compute_count: usize) -> u64 {
    latch::bits_iter(dead).fold(word, |w, i| strip(w, i, compute_count))
}

/// Read words with `FAA(+0)` (atomic against the protocol's atomics), `MAX_BATCH` at a time.
async fn read_words<N: Nic>(nic: &N, at: &[RemoteAddr], during: &'static str) -> ProtocolResult<Vec<u64>> {
    let mut out = Vec::with_capacity(at.len());
    for chunk in at.chunks(MAX_BATCH) {
        // A batch targets one node.
        let mut start = 0;
        while start < chunk.len() {
            let node = chunk[start].node;
            let end = chunk[start..].iter().position(|a| a.node != node).map_or(chunk.len(), |p| start + p);
            let verbs: Vec<Verb> =
                chunk[start..end].iter().map(|&remote| Verb::Faa { remote, add: 0 }).collect();
            let r = nic.try_batch(&verbs, during).await?;
            out.extend((0..verbs.len()).map(|i| r.get(i)));
            start = end;
        }
    }
    Ok(out)
}

impl<N: Nic> Node<N> {
    /// The compute indices this node knows to be dead.
    pub fn dead(&self) -> u64 {
        self.dead_set.load(Ordering::Relaxed)
    }

    /// The monitor daemon: heartbeat, lease check, and recovery of the nodes it declares dead.
    pub async fn run_monitor(self: Arc<Self>, nic: N) {
        if let Err(e) = self.monitor(&nic).await {
            self.fail(e);
        }
    }

    async fn monitor(self: &Arc<Self>, nic: &N) -> ProtocolResult<()> {
        let n = self.layout.compute_count();
        let (Some(mine), Some(dead_at)) = (self.layout.heartbeat(self.me), self.layout.dead_set()) else {
            return Ok(());
        };
        let mut watched: Vec<RemoteAddr> =
            (0..n).filter_map(|i| self.layout.heartbeat(ComputeIndex(i as u8))).collect();
        watched.push(dead_at);
        // Per compute index: the counter last seen and when it last moved (this node's clock).
        let mut seen: Vec<(u64, Nanos)> = vec![(u64::MAX, nic.now()); n];
        let lease = Nanos(self.config.lease_ns);
        loop {
            nic.try_faa(mine, 1, "heartbeat").await?;
            let values = read_words(nic, &watched, "read heartbeats").await?;
            let mut dead = values[n];
            self.dead_set.fetch_or(dead, Ordering::Relaxed);
            if dead & latch::bit(self.me) != 0 {
                let me = self.node;
                return Err(ProtocolError::message(
                    me,
                    nic.now(),
                    "FAA",
                    dead_at.node,
                    0,
                    "declared dead by the failure detector while alive (a stall longer than lease_ns)",
                    NicError::PeerGone { node: me },
                ));
            }
            let now = nic.now();
            for (i, &value) in values[..n].iter().enumerate() {
                let index = ComputeIndex(i as u8);
                if index == self.me || dead & latch::bit(index) != 0 {
                    continue;
                }
                if value != seen[i].0 {
                    seen[i] = (value, now);
                    continue;
                }
                if now.saturating_sub(seen[i].1) < lease {
                    continue;
                }
                // Declare it dead; the CAS that wins makes this node its recoverer.
                let old = nic.try_cas(dead_at, dead, dead | latch::bit(index), "declare dead").await?;
                if old == dead {
                    dead |= latch::bit(index);
                    self.dead_set.fetch_or(latch::bit(index), Ordering::Relaxed);
                    self.stats.lock().unwrap().crashes_recovered += 1;
                    let node = self.clone();
                    let cleaner = self.nic.qp(CHANNEL_MONITOR + 1 + i as u16);
                    nic.spawn(async move {
                        if let Err(e) = node.recover(&cleaner, index).await {
                            node.fail(e);
                        }
                    });
                } else {
                    dead = old;
                    self.dead_set.fetch_or(old, Ordering::Relaxed);
                }
            }
            nic.sleep(Nanos(self.config.heartbeat_ns)).await;
        }
    }

    /// Remove `dead`'s ownership from every latch word, twice (see the module docs), then add
    /// it to the recovered set.
    async fn recover(&self, nic: &N, dead: ComputeIndex) -> ProtocolResult<()> {
        if self.config.mutant != Mutant::SkipCrashCleanup {
            self.scan(nic, dead).await?;
            nic.sleep(Nanos(self.config.lease_ns)).await;
            self.scan(nic, dead).await?;
        }
        if let Some(at) = self.layout.recovered_set() {
            nic.try_faa(at, latch::bit(dead), "recovered").await?;
        }
        Ok(())
    }

    /// At the end of a benchmark run that drains (crash recovery): mark this node done, then
    /// wait until every compute node is done or dead and recovered, so the run's end-of-run
    /// checks see no ownership of a crashed node that nobody has detected yet.
    pub async fn await_peers(&self, nic: &N) -> ProtocolResult<()> {
        let (Some(done), Some(recovered)) = (self.layout.done_set(), self.layout.recovered_set()) else {
            return Ok(());
        };
        nic.try_faa(done, latch::bit(self.me), "done").await?;
        let n = self.layout.compute_count();
        let all = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        loop {
            let words = read_words(nic, &[done, recovered], "await peers").await?;
            if (words[0] | words[1]) & all == all {
                return Ok(());
            }
            self.errors.check()?;
            nic.sleep(Nanos(self.config.heartbeat_ns)).await;
        }
    }

    async fn scan(&self, nic: &N, dead: ComputeIndex) -> ProtocolResult<()> {
        let n = self.layout.compute_count();
        let stride = self.layout.gcl_stride_bytes();
        for &memory in &self.layout.memory_nodes {
            let bump = nic.try_faa(RemoteAddr::new(memory, 0), 0, "recovery: read bump pointer").await?;
            let end = bump.min(MEMORY_HEADER_BYTES + self.layout.memory_gcl_bytes);
            let latches: Vec<RemoteAddr> = (MEMORY_HEADER_BYTES..end)
                .step_by(stride as usize)
                .map(|offset| Layout::latch(RemoteAddr::new(memory, offset)))
                .collect();
            for chunk in latches.chunks(MAX_BATCH) {
                let words = read_words(nic, chunk, "recovery: read latch words").await?;
                for (&at, &word) in chunk.iter().zip(&words) {
                    let mut word = word;
                    while strip(word, dead, n) != word {
                        let old =
                            nic.try_cas(at, word, strip(word, dead, n), "recovery: clear ownership").await?;
                        if old == word {
                            self.stats.lock().unwrap().latches_recovered += 1;
                            break;
                        }
                        word = old;
                    }
                }
            }
        }
        Ok(())
    }
}
