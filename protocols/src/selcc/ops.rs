//! The Table 1 API (SELCC §5 [P]) and the acquisition paths behind it (§3.3–§3.4):
//! `lock` = local latch + ownership verification table (§3.2) + global acquire if needed;
//! `unlock` = local release only (lazy release, §3.2), unless SEL, or the lease says otherwise.
//!
//! Every operation returns a [`ProtocolResult`]. A failed lock gives back the local latch and
//! pin it took (the frame's memo says what ownership is really held) and records the error on
//! the node; the caller should stop using the node.

use std::sync::Arc;

use crate::common::error::{NicExt, ProtocolResult};
use crate::nic::{Nanos, Nic, RemoteAddr, Verb};
use crate::sync::Mode;

use super::cache::Lookup;
use super::config::{Mode as ProtocolMode, Mutant};
use super::dirty::{flush_range, Dirty};
use super::frame::{FrameMeta, Memo};
use super::latch;
use super::layout::{Gaddr, Layout, WORD};
use super::message::ReplyStatus;
use super::node::{Handle, Node, Worker};

/// Global acquire attempts of a try-latch before it gives up ([REPO]
/// `global_Wlock_and_read_page_with_INVALID(…, r_times = 5)` behind `TrySELCC_*_Lock`).
pub const TRY_ATTEMPTS: u32 = 5;

impl<N: Nic> Node<N> {
    // ================================ Table 1 ================================

    /// `SELCC_SLock(gaddr) -> handle`.
    pub async fn slock(&self, w: &mut Worker<N>, g: Gaddr) -> ProtocolResult<Handle> {
        self.lock(w, g, Mode::Shared).await
    }

    /// `SELCC_XLock(gaddr) -> handle`.
    pub async fn xlock(&self, w: &mut Worker<N>, g: Gaddr) -> ProtocolResult<Handle> {
        self.lock(w, g, Mode::Exclusive).await
    }

    /// `SELCC_SUnLock(handle)`.
    pub async fn sunlock(&self, w: &mut Worker<N>, h: Handle) -> ProtocolResult<()> {
        assert_eq!(h.mode, Mode::Shared);
        self.unlock(w, h).await
    }

    /// `SELCC_XUnLock(handle)`: the write serialisation point (§4 [P], Fig. 11).
    pub async fn xunlock(&self, w: &mut Worker<N>, h: Handle) -> ProtocolResult<()> {
        assert_eq!(h.mode, Mode::Exclusive);
        self.unlock(w, h).await
    }

    /// `Allocate() -> gaddr` [GAP] (spec B11): one FAA on a memory node's bump word, memory
    /// nodes taken round-robin per worker; GCLs this node freed are reused first. `None` when the
    /// memory nodes are full.
    pub async fn allocate(&self, w: &mut Worker<N>) -> ProtocolResult<Option<Gaddr>> {
        if let Some(g) = self.freed.lock().unwrap().pop() {
            return Ok(Some(g));
        }
        let stride = self.layout.gcl_stride_bytes();
        let m = self.layout.memory_nodes.len();
        for attempt in 0..m {
            let mn = self.layout.memory_nodes[(w.thread as usize + w.seq as usize + attempt) % m];
            let old =
                w.nic.try_faa(RemoteAddr::new(mn, 0), stride, "allocate").await.map_err(|e| self.fail(e))?;
            if old + stride <= self.layout.memory_region_bytes() {
                let g = RemoteAddr::new(mn, old);
                assert!(self.layout.is_gcl(g));
                return Ok(Some(g));
            }
        }
        Ok(None)
    }

    /// `Free(gaddr)` [GAP] (spec B11): take the GCL exclusively (invalidating every cached copy),
    /// release it, and keep it for this node's next `allocate`.
    pub async fn free(&self, w: &mut Worker<N>, g: Gaddr) -> ProtocolResult<()> {
        if self.config.sel_per_thread() {
            // SEL caches nothing: taking and giving back the latch is all there is to wait for.
            let h = self.xlock(w, g).await?;
            self.xunlock(w, h).await?;
            self.freed.lock().unwrap().push(g);
            return Ok(());
        }
        let h = self.xlock(w, g).await?;
        let frame = h.frame;
        if let Err(e) = self.release_global(&w.nic, frame, g).await {
            self.cache.frame(frame).meta().section_writers -= 1;
            self.unlock_frame(frame, Mode::Exclusive);
            self.cache.unpin(frame);
            return Err(self.fail(e));
        }
        self.cache.forget(g, frame);
        self.cache.frame(frame).latch.unlock(Mode::Exclusive);
        let pending = {
            let mut meta = self.cache.frame(frame).meta();
            meta.section_writers -= 1;
            meta.pins -= 1;
            assert_eq!(meta.pins, 0, "Free while another thread uses the GCL");
            meta.pending.take().map(|m| *m)
        };
        let replied = match pending {
            Some(msg) => self.reply(&w.nic, &msg, ReplyStatus::Dropped, 0).await,
            None => Ok(()),
        };
        self.cache.recycle(frame);
        self.frame_freed.notify_all();
        self.freed.lock().unwrap().push(g);
        replied.map_err(|e| self.fail(e))
    }

    /// `Atomic(gaddr, args)`: one RDMA FAA on remote memory, no caching (§5 [P]).
    pub async fn atomic_faa(&self, w: &mut Worker<N>, addr: RemoteAddr, add: u64) -> ProtocolResult<u64> {
        w.nic.try_faa(addr, add, "atomic").await.map_err(|e| self.fail(e))
    }

    /// `Atomic(gaddr, args)` as a CAS; returns the old value.
    pub async fn atomic_cas(
        &self,
        w: &mut Worker<N>,
        addr: RemoteAddr,
        expect: u64,
        swap: u64,
    ) -> ProtocolResult<u64> {
        w.nic.try_cas(addr, expect, swap, "atomic").await.map_err(|e| self.fail(e))
    }

    // ================================ lock / unlock ================================

    /// Lock `g` in `mode`, returning a handle to the local copy. Fails at once if the node has
    /// already failed.
    pub async fn lock(&self, w: &mut Worker<N>, g: Gaddr, mode: Mode) -> ProtocolResult<Handle> {
        assert!(self.layout.is_gcl(g), "{g} is not a GCL");
        self.errors.check()?;
        if self.config.sel_per_thread() {
            return self.sel_lock(w, g, mode).await;
        }
        w.try_attempts = None;
        let h = self.lock_or_try(w, g, mode).await?;
        Ok(h.expect("a blocking lock always acquires"))
    }

    /// `TrySELCC_SLock`/`TrySELCC_XLock` [REPO] (not in the paper's Table 1; spec B12 [GAP]):
    /// `lock` that never waits on another holder. `None` when the local latch is taken, the cache
    /// has no free frame, or the global acquire fails [`TRY_ATTEMPTS`] times; its invalidations
    /// ask busy victims to drop rather than memorise them. No-wait 2PL holds these latches to
    /// commit (`txn/engine.rs`), so a waiting acquire could deadlock: two nodes each holding the
    /// line the other's message waits for.
    pub async fn try_lock(&self, w: &mut Worker<N>, g: Gaddr, mode: Mode) -> ProtocolResult<Option<Handle>> {
        assert!(self.layout.is_gcl(g), "{g} is not a GCL");
        assert!(!self.config.sel_per_thread(), "SEL's per-thread buffer holds one latch: no try-latch");
        self.errors.check()?;
        w.try_attempts = Some(TRY_ATTEMPTS);
        let h = self.lock_or_try(w, g, mode).await;
        w.try_attempts = None;
        h
    }

    /// `lock`, or (with `w.try_attempts`) `try_lock`.
    async fn lock_or_try(&self, w: &mut Worker<N>, g: Gaddr, mode: Mode) -> ProtocolResult<Option<Handle>> {
        w.op = super::stats::OpTrace::new(mode == Mode::Exclusive, w.nic.now());
        w.nic.cpu(Nanos(self.config.cpu.lookup_ns)).await;
        let frame = match self.pin_frame(w, g, w.try_attempts.is_some()).await.map_err(|e| self.fail(e))? {
            Some(frame) => frame,
            None => return Ok(None),
        };
        let latch_mode = match self.lock_frame(w, g, frame, mode).await {
            Ok(Some(latch_mode)) => latch_mode,
            Ok(None) => {
                self.cache.unpin(frame);
                return Ok(None);
            }
            Err(e) => {
                self.cache.unpin(frame);
                return Err(self.fail(e));
            }
        };
        let f = self.cache.frame(frame);
        {
            let mut meta = f.meta();
            assert_eq!(meta.gcl(), Some(g), "a pinned frame changed GCL");
            match mode {
                Mode::Shared => {
                    assert!(meta.memo != Memo::Invalid, "shared section without ownership");
                    assert_eq!(meta.section_writers, 0, "S1: reader beside a local writer");
                    meta.section_readers += 1;
                }
                Mode::Exclusive => {
                    assert_eq!(meta.memo, Memo::Modified, "exclusive section without Modified ownership");
                    assert_eq!(
                        (meta.section_writers, meta.section_readers),
                        (0, 0),
                        "S1: local writer overlap"
                    );
                    meta.section_writers += 1;
                }
            }
        }
        Ok(Some(Handle {
            gcl: g,
            mode,
            frame,
            latch_mode,
            data_offset: self.frame_offset(frame) + WORD,
            staged: Vec::new(),
        }))
    }

    /// `lock` between pinning the frame and building the handle: take the local latch and, if
    /// needed, global ownership. Returns the local latch mode held; on error, or `None` (a try
    /// that failed), holds none.
    async fn lock_frame(
        &self,
        w: &mut Worker<N>,
        g: Gaddr,
        frame: u32,
        mode: Mode,
    ) -> ProtocolResult<Option<Mode>> {
        let f = self.cache.frame(frame);
        let sel = self.config.mode == ProtocolMode::Sel;
        loop {
            // Ownership verification (§3.2 [P] table): a reader with a valid memo needs only the
            // local shared latch; everything else takes it exclusively, so that one thread per
            // frame runs the global acquire (spec B6: a second +BIT(me) would carry).
            let want = {
                let meta = f.meta();
                let need_exclusive =
                    sel || mode == Mode::Exclusive || meta.memo == Memo::Invalid || self.lease_due(&meta);
                if need_exclusive {
                    Mode::Exclusive
                } else {
                    Mode::Shared
                }
            };
            let waited = !f.latch.try_lock(want);
            if waited && w.try_attempts.is_some() {
                return Ok(None);
            }
            if waited {
                f.latch.lock(want).await;
                w.nic.cpu(Nanos(self.config.cpu.latch_handoff_ns)).await;
            }
            {
                // §5.3.1 [P] lease counters. [CHOICE] a reader that meets a memorised message
                // counts as waiting too: overlapping local readers never wait on each other, yet
                // they keep a Case-3 writer out just the same.
                let mut meta = f.meta();
                let counts = waited || (mode == Mode::Shared && meta.pending.is_some());
                meta.lease = meta.lease.on_local_access(counts, mode == Mode::Exclusive);
            }
            if want == Mode::Shared {
                if f.meta().memo != Memo::Invalid {
                    return Ok(Some(Mode::Shared));
                }
                // Invalidated while we waited: go round again for the exclusive path.
                self.unlock_frame(frame, Mode::Shared);
                continue;
            }
            let lease_due = self.lease_due(&f.meta());
            let mut owned = Ok(true);
            if lease_due {
                owned = self.lease_release(&w.nic, frame).await.map(|_| true);
            }
            if owned.is_ok() {
                owned = self.ensure_ownership(w, frame, g, mode).await;
            }
            match owned {
                Ok(true) => {}
                Ok(false) => {
                    f.meta().acquiring = false;
                    self.unlock_frame(frame, Mode::Exclusive);
                    return Ok(None);
                }
                Err(e) => {
                    f.meta().acquiring = false;
                    self.unlock_frame(frame, Mode::Exclusive);
                    return Err(e);
                }
            }
            if mode == Mode::Shared && !sel {
                f.latch.downgrade();
                return Ok(Some(Mode::Shared));
            }
            return Ok(Some(Mode::Exclusive));
        }
    }

    /// Unlock: release the local latch only (lazy release, §3.2 [P]); SEL releases the global
    /// latch too; a lease past γ releases it early (§5.3.1). The local latch and pin are given
    /// back even when the global release fails.
    pub async fn unlock(&self, w: &mut Worker<N>, h: Handle) -> ProtocolResult<()> {
        if self.config.sel_per_thread() {
            return self.sel_unlock(w, h).await;
        }
        let f = self.cache.frame(h.frame);
        {
            let mut meta = f.meta();
            match h.mode {
                Mode::Shared => meta.section_readers -= 1,
                Mode::Exclusive => meta.section_writers -= 1,
            }
        }
        let mut released = Ok(());
        if h.mode == Mode::Exclusive && self.config.crash_recovery && !h.staged.is_empty() {
            // Crash recovery: the write is acknowledged only once memory holds it (`recovery.rs`).
            if let Some(oracle) = &self.oracle {
                oracle.stage_durable(h.gcl, &h.staged);
            }
            let len_bytes = self.config.gcl_size_bytes;
            let through =
                [Verb::Write { remote: Layout::data(h.gcl), local_bytes: h.data_offset, len_bytes }];
            released = w.nic.try_batch(&through, "write through").await.map(|_| ());
        }
        if h.mode == Mode::Exclusive {
            if let Some(oracle) = &self.oracle {
                oracle.commit(h.gcl, &h.staged, w.nic.now());
            }
        }
        if self.config.mode == ProtocolMode::Sel {
            // `sel_node_latch`: dmsim's earlier SEL.
            assert_eq!(h.latch_mode, Mode::Exclusive);
            released = self.release_global(&w.nic, h.frame, h.gcl).await;
        } else if released.is_err() {
        } else if h.latch_mode == Mode::Exclusive && self.lease_due(&f.meta()) {
            released = self.lease_release(&w.nic, h.frame).await;
        }
        // A memorised message waits for an idle latch (γ = Inf) — hand it to the retry server.
        self.unlock_frame(h.frame, h.latch_mode);
        self.cache.unpin(h.frame);
        released.map_err(|e| self.fail(e))?;
        let now = w.nic.now();
        self.stats.lock().unwrap().record_op(&w.op, now, self.config.timeline_bucket_ns);
        Ok(())
    }

    // ================================ frames ================================

    /// Pin `g`'s frame, assigning a free one on a miss and evicting when none is free (§5.2).
    /// `try_only` (a try-latch): `None` instead of waiting for the evictor or evicting twice.
    async fn pin_frame(&self, w: &mut Worker<N>, g: Gaddr, try_only: bool) -> ProtocolResult<Option<u32>> {
        let mut evicted = false;
        loop {
            match self.cache.pin_or_assign(g) {
                Lookup::Found(i) | Lookup::Assigned(i) => {
                    if self.config.batched_eviction
                        && self.cache.free_count() < self.config.free_frames_low() as usize
                    {
                        self.evict_wanted.notify_all();
                    }
                    return Ok(Some(i));
                }
                Lookup::Full if self.config.batched_eviction => {
                    if try_only {
                        self.evict_wanted.notify_all();
                        return Ok(None);
                    }
                    // The eviction worker is behind: wait for it (eviction on the critical
                    // path, which batching is meant to avoid).
                    let freed = self.frame_freed.notified();
                    self.evict_wanted.notify_all();
                    if self.cache.free_count() == 0 {
                        self.errors.check()?;
                        freed.await;
                    }
                }
                // A try-latch evicts once: a node whose frames are all pinned by transactions
                // holding their latches must not wait for one of them.
                Lookup::Full if try_only && evicted => return Ok(None),
                Lookup::Full => {
                    self.evict_sync(w).await?;
                    evicted = true;
                }
            }
        }
    }

    /// The lease is due past γ — and, when messages are memorised, only with one memorised: a
    /// release nobody waits for would give up a line a starved writer won (priority matching)
    /// to no one ([REPO] processes the lease only while a message is buffered). Without
    /// memorising, the senders of dropped messages retry, and the release is what they need.
    pub(super) fn lease_due(&self, meta: &FrameMeta) -> bool {
        self.config.mode == ProtocolMode::Selcc
            && meta.memo != Memo::Invalid
            && (meta.pending.is_some() || !self.config.defer_messages)
            && meta.lease.exceeded(self.config.threads_per_node, self.config.lease_gamma)
    }

    /// §5.3.1 [P]: "the local thread proactively release[s] the global latch and reset[s] the
    /// counters" — serving the memorised message (handover to its sender) if there is one.
    /// Caller holds the frame's local latch exclusively.
    pub(super) async fn lease_release(&self, nic: &N, frame: u32) -> ProtocolResult<()> {
        let (pending, g) = {
            let mut meta = self.cache.frame(frame).meta();
            meta.lease = Default::default();
            (meta.pending.take().map(|m| *m), meta.gcl().expect("lease on a free frame"))
        };
        self.stats.lock().unwrap().lease_releases += 1;
        match pending {
            Some(msg) => self.serve(nic, frame, msg).await,
            None => self.release_global(nic, frame, g).await,
        }
    }

    // ================================ release ================================

    /// The verbs that give up this node's ownership of `g` (§3.4 [P] Release Modified/Shared):
    /// WRITE of the dirty range then FAA, on one QP so the WRITE lands first (S7). `data_local`
    /// is where the data to flush sits locally (the frame, or an eviction ring slot).
    pub(super) fn release_verbs(&self, g: Gaddr, memo: Memo, dirty: Dirty, data_local: u64) -> Vec<Verb> {
        match memo {
            Memo::Invalid => Vec::new(),
            Memo::Shared => {
                vec![Verb::Faa { remote: Layout::latch(g), add: latch::release_shared_delta(self.me) }]
            }
            Memo::Modified => {
                let mut verbs = Vec::with_capacity(2);
                if let Some(write) = self.flush_verb(g, dirty, data_local) {
                    if self.config.mutant != Mutant::ReleaseWithoutFlush {
                        verbs.push(write);
                    }
                }
                verbs.push(if self.config.mutant == Mutant::ReleaseExclusiveByCas {
                    Verb::Cas { remote: Layout::latch(g), expect: latch::ex(self.me), swap: 0 }
                } else {
                    Verb::Faa { remote: Layout::latch(g), add: latch::release_exclusive_delta(self.me) }
                });
                verbs
            }
        }
    }

    /// WRITE of the dirty range (the whole data with dynamic bounds off), if any.
    pub(super) fn flush_verb(&self, g: Gaddr, dirty: Dirty, data_local: u64) -> Option<Verb> {
        let size = self.layout.gcl_size_bytes as u32;
        let (offset, len) = flush_range(dirty, size, self.config.dirty_bounds)?;
        self.stats.lock().unwrap().flushed_bytes += len as u64;
        Some(Verb::Write {
            remote: Layout::data(g).add(offset as u64),
            local_bytes: data_local + offset as u64,
            len_bytes: len,
        })
    }

    /// Post release verbs (possibly for several GCLs of one memory node) and wait for them.
    /// Returns the number of doorbell batches waited for one after another (serial round trips).
    pub(super) async fn post_release(&self, nic: &N, verbs: &[Verb]) -> ProtocolResult<u32> {
        if verbs.is_empty() {
            return Ok(0);
        }
        if self.config.mutant == Mutant::ReleaseBeforeFlush {
            // Planted bug: latch FAAs a round trip before the data they publish.
            let (atomics, writes): (Vec<Verb>, Vec<Verb>) =
                verbs.iter().partition(|v| matches!(v, Verb::Faa { .. }));
            nic.try_batch(&atomics, "release").await?;
            if writes.is_empty() {
                return Ok(1);
            }
            nic.try_batch(&writes, "release flush").await?;
            return Ok(2);
        }
        let mut batches = 0;
        for chunk in verbs.chunks(crate::nic::MAX_BATCH) {
            nic.try_batch(chunk, "release").await?;
            batches += 1;
        }
        Ok(batches)
    }

    /// Give up this node's ownership of the GCL in `frame` (SEL unlock, lease, naive conflict
    /// handling, Free). Caller holds the local latch exclusively.
    pub(super) async fn release_global(&self, nic: &N, frame: u32, g: Gaddr) -> ProtocolResult<()> {
        let memo = {
            let mut meta = self.cache.frame(frame).meta();
            assert_eq!(meta.gcl(), Some(g));
            if meta.memo != Memo::Invalid {
                meta.transit = true;
            }
            meta.flushing = meta.memo == Memo::Modified;
            meta.memo
        };
        if memo == Memo::Invalid {
            return Ok(());
        }
        let header_offset = self.frame_offset(frame);
        let dirty = Dirty::from_header(self.nic.local().load(header_offset));
        let verbs = self.release_verbs(g, memo, dirty, header_offset + WORD);
        self.post_release(nic, &verbs).await?;
        self.nic.local().store(header_offset, Dirty::CLEAN.to_header());
        let mut meta = self.cache.frame(frame).meta();
        meta.memo = Memo::Invalid;
        meta.transit = false;
        meta.flushing = false;
        meta.starved_priority = 0;
        Ok(())
    }
}

/// Tasks to hand to a runner for one node: its daemons (handlers, retry server, evictor).
pub fn daemons<N: Nic>(node: &Arc<Node<N>>) -> Vec<crate::nic::Task> {
    let mut tasks: Vec<crate::nic::Task> = Vec::new();
    if node.config.mode == ProtocolMode::Selcc {
        for (h, port) in node.handler_ports().into_iter().enumerate() {
            let nic = node.nic.qp(super::node::CHANNEL_HANDLER_BASE + h as u16);
            tasks.push(Box::pin(node.clone().run_handler(nic, port)));
        }
        let nic = node.nic.qp(super::node::CHANNEL_RETRY);
        tasks.push(Box::pin(node.clone().run_retry_server(nic)));
    }
    if node.config.batched_eviction {
        let nic = node.nic.qp(super::node::CHANNEL_EVICTOR);
        tasks.push(Box::pin(node.clone().run_evictor(nic)));
    }
    if node.config.crash_recovery {
        let nic = node.nic.qp(super::recovery::CHANNEL_MONITOR);
        tasks.push(Box::pin(node.clone().run_monitor(nic)));
    }
    tasks
}
