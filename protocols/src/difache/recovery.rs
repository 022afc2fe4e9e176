//! Compute-node failures (spec §3.9, paper §5 "Fault Tolerance"): "considering cached objects
//! and cache metadata on failed nodes as cleared, without recovery"; failures are detected
//! "through RDMA operation timeouts"; the coordinator updates the CN list, which, as for CN
//! scaling, "temporarily disables caching on all CNs, causing new data accesses to directly go
//! through the network, then synchronizes the latest list to them ... Caching is re-enabled
//! after this process." The paper's coordinator is ZooKeeper; here [CHOICE] (NEEDS.md):
//!
//! * **The CN list** is one word on memory node 0 (the reliable coordinator's state): a dead
//!   bitmap (bits 0..32), SYNCING (bit 32) and an epoch (bits 33..64).
//! * **Timeouts.** A crashed node's NIC still serves one-sided verbs in the simulator (its
//!   memory stays readable), so an invalidation sent to it never times out. Each CN's monitor
//!   FAAs a heartbeat word every `heartbeat_ns` instead, and a CN whose heartbeat stalls for
//!   `lease_ns` has "timed out": the monitor that notices CASes it into the dead bitmap, raises
//!   SYNCING and bumps the epoch (the paper's request to shut the node down).
//! * **Sync.** A monitor that sees a new epoch disables caching locally (new operations go to
//!   the memory node: reads fetch, writes flush and still invalidate the live CNs), waits until
//!   its cached operations in flight are done (those spinning on a dead switcher's flag or mode
//!   lock give up and bypass), drops every header — the cached objects *and* the cache
//!   metadata, since a dead switcher may have left modes half switched — and writes the epoch
//!   into its synced word.
//! * **Coordinator.** The lowest live CN's monitor acts for the coordinator: once every live
//!   CN has synced the epoch it frees the mode locks and the application locks the dead nodes
//!   held (the micro-benchmark's locks name their holder; an application would recover its own
//!   locks) and clears SYNCING; every CN then re-enables caching. All of it is idempotent, so
//!   the next lowest CN can redo it if the coordinator dies meanwhile.
//!
//! Why every copy is dropped: a writer that dies between its owner-set collect and its
//! invalidations leaves valid copies whose CNs are no longer in the owner set; after the sync
//! no copy from before the failure survives. The application lock the dead writer held keeps
//! other writers of that object out until then.

use std::sync::atomic::Ordering::Relaxed;

use crate::common::error::{NicExt, ProtocolError, ProtocolResult};
use crate::nic::{Nanos, Nic, NicError, RemoteAddr, Verb};

use super::cache::Cache;
use super::index;
use super::layout::*;
use super::mutants::Mutant;

/// The monitor's QP channel (clients use 1..=threads).
pub const CHANNEL_MONITOR: u16 = 3000;
/// Bits of the CN-list word.
pub const DEAD_MASK: u64 = 0xffff_ffff;
pub const SYNCING: u64 = 1 << 32;
const EPOCH_ONE: u64 = 1 << 33;
/// At most this many compute nodes with crash recovery (the dead bitmap's width).
pub const MAX_CNS: u16 = 32;

impl<N: Nic> Cache<N> {
    /// The monitor daemon of this CN; a failure ends up in the node's error slot.
    pub async fn run_monitor(self: std::sync::Arc<Self>) {
        let nic = self.nic.qp(CHANNEL_MONITOR);
        if let Err(e) = self.monitor(&nic).await {
            self.errors.record(e);
        }
    }

    async fn monitor(&self, nic: &N) -> ProtocolResult<()> {
        let n = self.layout.compute_nodes as usize;
        let mut seen: Vec<(u64, Nanos)> = vec![(u64::MAX, nic.now()); n];
        let mut synced = 0u64;
        loop {
            if self.joining.load(Relaxed) {
                match self.join(nic).await {
                    Err(e) if self.mn_timeout(&e) => self.suspect.store(true, Relaxed),
                    r => r?,
                }
            }
            if !self.joining.load(Relaxed) {
                match self.round(nic, &mut seen, &mut synced).await {
                    Err(e) if self.mn_timeout(&e) => self.suspect.store(true, Relaxed),
                    r => r?,
                }
            }
            if self.suspect.swap(false, Relaxed) {
                self.recover_memory(nic).await?;
                // Nobody could beat while the memory node was down: every lease starts afresh.
                let now = nic.now();
                seen.iter_mut().for_each(|s| *s = (u64::MAX, now));
            }
            nic.sleep(Nanos(self.config.heartbeat_ns)).await;
        }
    }

    /// One heartbeat period of the monitor: beat, read the CN list, sync a new epoch, act for
    /// the coordinator, look for dead CNs.
    async fn round(&self, nic: &N, seen: &mut [(u64, Nanos)], synced: &mut u64) -> ProtocolResult<()> {
        let n = self.layout.compute_nodes as usize;
        let words_at = self.layout.monitor_buffer();
        let lease = Nanos(self.config.lease_ns);
        {
            self.beat(nic).await?;
            if self.config.node_restarts {
                // Every memory node, every round: a CN whose clients touch no object of a
                // failed memory node still times out and fences (owner sets die with it).
                self.probe_others(nic).await?;
            }
            let len = self.layout.membership_words() * 8;
            let read =
                Verb::Read { remote: self.layout.membership(), local_bytes: words_at, len_bytes: len as u32 };
            nic.try_batch(&[read], "read the CN list").await?;
            // The heartbeats' age is measured from this read (a sync below may take long).
            let read_at = nic.now();
            let mut words = vec![0u64; self.layout.membership_words() as usize];
            self.nic.local().read_words(words_at, &mut words);
            let mut list = words[0];
            if list >> self.me & 1 != 0 {
                return Err(ProtocolError::message(
                    self.nic.node(),
                    nic.now(),
                    "READ",
                    self.layout.membership().node,
                    0,
                    "removed from the CN list while alive (a stall longer than lease_ns)",
                    NicError::PeerGone { node: self.nic.node() },
                ));
            }
            self.dead.store(list & DEAD_MASK, Relaxed);
            let epoch = list / EPOCH_ONE;
            if epoch != *synced {
                self.disabled.store(true, Relaxed);
                let at = nic.now().0;
                self.stats.lock().unwrap_or_else(|e| e.into_inner()).first_disable_ns.get_or_insert(at);
                self.drain(nic).await?;
                let keep = (self.config.mutant == Mutant::MnFailureKeepsCache && self.mn_round.load(Relaxed))
                    || (self.config.mutant == Mutant::RestartKeepsCache
                        && epoch == self.fence_epoch.load(Relaxed));
                if !keep {
                    self.drop_all();
                }
                nic.try_write_word(self.layout.synced(self.me), epoch, "synced").await?;
                *synced = epoch;
                words[1 + self.me] = epoch;
            }
            if list & SYNCING == 0 && epoch == *synced {
                if self.config.node_restarts && epoch >= self.fence_epoch.load(Relaxed) {
                    if self.fenced.swap(false, Relaxed) {
                        self.nic.mark("difache unfenced, epoch", epoch);
                    }
                    self.mn_round.store(false, Relaxed);
                }
                if !self.fenced.load(Relaxed) {
                    self.disabled.store(false, Relaxed);
                }
            } else if list & SYNCING != 0 && self.coordinates(list) {
                let live = (0..n).filter(|&c| list >> c & 1 == 0);
                if live.clone().all(|c| words[1 + c] == epoch) {
                    self.release_locks(nic, list & DEAD_MASK).await?;
                    self.beat_if_due(nic).await?;
                    let back =
                        nic.try_cas(self.layout.membership(), list, list & !SYNCING, "re-enable").await?;
                    if back == list {
                        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
                        stats.recoveries += 1;
                        stats.last_reenable_ns = Some(nic.now().0);
                        drop(stats);
                        self.nic.mark("difache caching re-enabled, epoch", epoch);
                    }
                }
            }
            // Timeouts: a live CN whose heartbeat has not moved for a lease.
            let now = read_at;
            let live: Vec<usize> = (0..n).filter(|&c| c != self.me && list >> c & 1 == 0).collect();
            for c in live {
                let beat = words[1 + n + c];
                if beat != seen[c].0 {
                    seen[c] = (beat, now);
                    continue;
                }
                if now.saturating_sub(seen[c].1) < lease {
                    continue;
                }
                let next = (list | 1 << c | SYNCING) + EPOCH_ONE;
                let back = nic.try_cas(self.layout.membership(), list, next, "remove a dead CN").await?;
                if back != list {
                    break; // someone changed the list first: look again next round
                }
                list = next;
                self.stats.lock().unwrap_or_else(|e| e.into_inner()).crashes_detected += 1;
                self.nic.mark("difache CN declared dead", c as u64);
            }
        }
        Ok(())
    }

    /// A restarted CN rejoins in two steps. First its previous incarnation must be dead on the
    /// CN list and a sync round must have completed since: then every live CN has dropped the
    /// copies a write it died in may have left outside the owner sets, and the coordinator has
    /// freed its locks (the application lock it died holding keeps the object's writers out
    /// until then). If the lease has not declared it dead yet, it declares itself. Then it
    /// clears its dead bit with a new epoch and SYNCING — a sync round, as for CN scaling — and
    /// stays fenced until that round completes.
    async fn join(&self, nic: &N) -> ProtocolResult<()> {
        let words_at = self.layout.monitor_buffer();
        let me = 1u64 << self.me;
        // Seen dead with SYNCING clear: the round that declared it dead has completed.
        let mut released = false;
        loop {
            self.beat(nic).await?;
            let read = Verb::Read { remote: self.layout.membership(), local_bytes: words_at, len_bytes: 8 };
            nic.try_batch(&[read], "read the CN list").await?;
            let list = self.nic.local().load(words_at);
            released |= list & me != 0 && list & SYNCING == 0;
            let (next, what) = if list & me == 0 {
                ((list | me | SYNCING) + EPOCH_ONE, "declare the old incarnation dead")
            } else if released {
                // Another round may be running: the new epoch restarts it with us in.
                (((list & !me) | SYNCING) + EPOCH_ONE, "rejoin")
            } else {
                // The round that frees the old incarnation's locks is still running.
                nic.sleep(Nanos(self.config.heartbeat_ns)).await;
                continue;
            };
            if nic.try_cas(self.layout.membership(), list, next, what).await? == list && next & me == 0 {
                self.fence_epoch.store(next / EPOCH_ONE, Relaxed);
                self.joining.store(false, Relaxed);
                self.stats.lock().unwrap_or_else(|e| e.into_inner()).rejoins += 1;
                self.nic.mark("difache rejoined, epoch", next / EPOCH_ONE);
                return Ok(());
            }
        }
    }

    /// A memory node timed out (the paper: "all remote data accesses time out"): fence this CN
    /// (no operation starts), let the operations in flight fail or finish, drop every cached
    /// object — the restarted memory node will have lost the owner sets and mode locks — and
    /// probe every memory node until all answer. Then ask for a sync round (new epoch,
    /// SYNCING) and stay fenced until it completes: by then every live CN has dropped the
    /// copies the lost owner sets no longer cover.
    async fn recover_memory(&self, nic: &N) -> ProtocolResult<()> {
        self.fence_epoch.store(u64::MAX, Relaxed);
        self.fenced.store(true, Relaxed);
        self.disabled.store(true, Relaxed);
        self.mn_round.store(true, Relaxed);
        let at = nic.now().0;
        {
            let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
            stats.mn_failures += 1;
            stats.first_disable_ns.get_or_insert(at);
        }
        self.nic.mark("difache memory node failure, fenced", at);
        while self.inflight.load(Relaxed) != 0 || self.bypass_writes.load(Relaxed) != 0 {
            nic.sleep(Nanos(self.config.cpu.poll_ns)).await;
            // Keep beating if memory node 0 answers (another one may be the failed one), or
            // the lease would declare this CN dead while it drains.
            match self.beat_if_due(nic).await {
                Err(e) if self.mn_timeout(&e) => {}
                r => r?,
            }
        }
        if self.config.mutant != Mutant::MnFailureKeepsCache {
            self.drop_all();
        }
        loop {
            // Timeouts reported from here on may be older than the probe's answers: this
            // recovery covers them; a later failure raises `suspect` again.
            self.suspect.store(false, Relaxed);
            match self.probe(nic).await {
                Ok(()) => break,
                Err(e) if self.mn_timeout(&e) => nic.sleep(Nanos(self.config.heartbeat_ns)).await,
                Err(e) => return Err(e),
            }
        }
        let words_at = self.layout.monitor_buffer();
        loop {
            let read = Verb::Read { remote: self.layout.membership(), local_bytes: words_at, len_bytes: 8 };
            nic.try_batch(&[read], "read the CN list").await?;
            let list = self.nic.local().load(words_at);
            let next = (list | SYNCING) + EPOCH_ONE;
            if nic.try_cas(self.layout.membership(), list, next, "memory node back").await? == list {
                self.fence_epoch.store(next / EPOCH_ONE, Relaxed);
                self.stats.lock().unwrap_or_else(|e| e.into_inner()).mn_rounds += 1;
                self.nic.mark("difache memory node back, epoch", next / EPOCH_ONE);
                return Ok(());
            }
        }
    }

    /// Beat (on memory node 0) and read one word of every other memory node.
    async fn probe(&self, nic: &N) -> ProtocolResult<()> {
        self.beat(nic).await?;
        self.probe_others(nic).await
    }

    /// Read one word of every memory node but 0.
    async fn probe_others(&self, nic: &N) -> ProtocolResult<()> {
        let local = self.layout.monitor_buffer();
        for mn in 1..self.layout.memory_nodes {
            let remote = RemoteAddr::new(crate::nic::NodeId(mn), 0);
            nic.try_batch(&[Verb::Read { remote, local_bytes: local, len_bytes: 8 }], "probe a memory node")
                .await?;
        }
        Ok(())
    }

    /// Whether this CN acts for the coordinator: the lowest CN not in `list`'s dead bitmap.
    fn coordinates(&self, list: u64) -> bool {
        (0..self.me).all(|c| list >> c & 1 != 0)
    }

    /// Wait until no cached operation of this CN is in flight (new ones bypass), beating.
    async fn drain(&self, nic: &N) -> ProtocolResult<()> {
        let writes = |c: &Self| c.config.node_restarts && c.bypass_writes.load(Relaxed) != 0;
        while self.inflight.load(Relaxed) != 0 || writes(self) {
            nic.sleep(Nanos(self.config.cpu.poll_ns)).await;
            self.beat_if_due(nic).await?;
        }
        Ok(())
    }

    async fn beat(&self, nic: &N) -> ProtocolResult<()> {
        nic.try_faa(self.layout.heartbeat(self.me), 1, "heartbeat").await?;
        self.beat_at.store(nic.now().0, Relaxed);
        Ok(())
    }

    /// Keep beating during long work of the monitor (a sync, a lock scan).
    async fn beat_if_due(&self, nic: &N) -> ProtocolResult<()> {
        if nic.now().0.saturating_sub(self.beat_at.load(Relaxed)) >= self.config.heartbeat_ns {
            self.beat(nic).await?;
        }
        Ok(())
    }

    /// Drop every header and its copy (synchronous; no cached operation is in flight).
    fn drop_all(&self) {
        let region = self.nic.local();
        let mut dropped = 0;
        for h in 0..self.layout.cache_objects as u32 {
            let base = self.layout.header(h);
            if let Some(key) = region.load(base + HDR_KEY).checked_sub(1) {
                let _ = index::remove(region, key, self.layout.index_buckets);
                dropped += 1;
            }
            for word in [HDR_VALID, HDR_MODE, HDR_COUNTS, HDR_KEY, HDR_FILL, HDR_PIN] {
                region.store(base + word, 0);
            }
        }
        self.reset_free_list();
        if let Some(t) = &self.tracker {
            t.dropped(self.me);
        }
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).headers_dropped += dropped;
        self.nic.mark("difache cache dropped, headers", dropped);
    }

    /// Free the mode locks and application locks held by CNs in `dead` (CAS: idempotent).
    async fn release_locks(&self, nic: &N, dead: u64) -> ProtocolResult<()> {
        let m = self.layout.memory_nodes;
        let cn_of_stamp = |w: u64| ((w >> 48) as u16).checked_sub(1 + m).map(|c| c as u64);
        for mn in 0..m {
            // Mode locks hold their CN's index + 1 in the low byte; application locks the
            // writer's stamp.
            let tables = [
                (self.layout.mode_locks_base(mn), self.layout.mode_locks, true),
                (self.layout.app_locks_base(mn), self.layout.app_lock_slots(), false),
            ];
            for (base, slots, mode) in tables {
                self.release_in(nic, base, slots, |w| {
                    let cn = if mode { super::cache::mode_lock_cn(w) } else { cn_of_stamp(w) };
                    cn.is_some_and(|c| c < 32 && dead >> c & 1 != 0)
                })
                .await?;
            }
        }
        Ok(())
    }

    async fn release_in(
        &self,
        nic: &N,
        base: RemoteAddr,
        slots: u64,
        held_by_dead: impl Fn(u64) -> bool,
    ) -> ProtocolResult<()> {
        let chunk_words = MONITOR_CHUNK_BYTES / 8;
        let local = self.layout.monitor_buffer() + self.layout.membership_words() * 8;
        let mut first = 0;
        while first < slots {
            self.beat_if_due(nic).await?;
            let count = chunk_words.min(slots - first);
            let read =
                Verb::Read { remote: base.add(first * 8), local_bytes: local, len_bytes: (count * 8) as u32 };
            nic.try_batch(&[read], "scan locks").await?;
            let mut words = vec![0u64; count as usize];
            self.nic.local().read_words(local, &mut words);
            for (i, &w) in words.iter().enumerate() {
                if w != 0 && held_by_dead(w) {
                    self.beat_if_due(nic).await?;
                    let at = base.add((first + i as u64) * 8);
                    if nic.try_cas(at, w, 0, "free a dead CN's lock").await? == w {
                        self.stats.lock().unwrap_or_else(|e| e.into_inner()).locks_released += 1;
                    }
                }
            }
            first += count;
        }
        Ok(())
    }
}
