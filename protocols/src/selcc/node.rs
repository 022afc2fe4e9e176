//! One compute node's SELCC instance: the shared state its workers, handlers and evictor use,
//! the per-thread [`Worker`] context, and the [`Handle`] the Table 1 API returns.
//!
//! ```text
//!            ┌────────────────────────── Node<N> (Arc) ──────────────────────────┐
//!  worker t ─┤ cache: frames (memo, local latch, lease, pending msg) + index + LRU │
//!  handler  ─┤ releasing: GCLs whose release/handover verbs are in flight          │
//!  evictor  ─┤ stats, oracle (check mode), errors (the first one a task hit)         │
//!            └─────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! Errors: every public operation returns a [`ProtocolResult`]; a failure is also recorded in
//! [`NodeState::errors`] (the first one wins) and wakes the node's waiters, which then fail with
//! it: a failed release never ends, so whoever waits for it must not wait forever.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use crate::common::error::{ErrorSlot, NicExt, ProtocolError, ProtocolResult};
use crate::nic::{Nanos, Nic, NicError, NodeId, RemoteAddr, WordCond};
use crate::sync::{join_all, Channel, Mode, Notify, Watched};

use super::cache::Cache;
use super::check::Oracle;
use super::config::Config;
use super::frame::Memo;
use super::layout::{Gaddr, Layout, WORD};
use super::message::{parse_reply, reply_flag, InvKind, InvMsg, ReplyStatus, INVALIDATION_PORT};
use super::stats::{OpTrace, Stats};
use super::ComputeIndex;

/// The sequence-number field of a reply flag (`message::reply_flag`: bits 16..48).
const REPLY_SEQ_MASK: u64 = 0xffff_ffff << 16;
/// Polls between checks that the node has not failed while waiting for replies.
const ERROR_CHECK_POLLS: u64 = 5_000;

/// Channels (queue-pair sets) per role, so each concurrent worker owns its QPs (NIC trait docs).
pub const CHANNEL_WORKER_BASE: u16 = 1;
pub const CHANNEL_HANDLER_BASE: u16 = 1000;
pub const CHANNEL_RETRY: u16 = 1500;
pub const CHANNEL_EVICTOR: u16 = 2000;

/// Non-generic shared state of one compute node (what checkers read).
pub struct NodeState {
    pub node: NodeId,
    pub me: ComputeIndex,
    pub config: Config,
    pub layout: Layout,
    pub cache: Cache,
    pub stats: Mutex<Stats>,
    /// GCLs with latch-releasing verbs (eviction, lease release, handover, Case-3 release) in
    /// flight from this node, with counts. A new global acquire of such a GCL waits: otherwise
    /// our own CAS could meet our own not-yet-landed ownership (and invalidate ourselves).
    pub releasing: Watched<BTreeMap<Gaddr, u32>>,
    /// Case-1 handovers in flight from this node: GCL → new owner. Lets invariant S3 accept a
    /// forwarded owner whose handover FAA has not landed yet (spec §4 S3, "careful").
    pub handovers: Watched<BTreeMap<Gaddr, ComputeIndex>>,
    pub release_done: Notify,
    pub frame_freed: Notify,
    pub evict_wanted: Notify,
    /// GCLs whose memorised message should be re-tried by the retry server.
    pub retry: Channel<Gaddr>,
    /// GCLs pushed on `retry` and not yet taken by the retry server, with counts (what the
    /// "a memorised message has a server" check reads).
    pub retry_queued: Watched<BTreeMap<Gaddr, u32>>,
    pub oracle: Option<Arc<Oracle>>,
    /// Eviction credits (outstanding WRs) per memory node and free ring slots.
    pub(super) ring: Mutex<Ring>,
    pub(super) ring_freed: Notify,
    /// Workers still running (the last one drains the cache in benchmark runs).
    pub workers_running: Mutex<u32>,
    /// GCLs this node freed, reused by its next `allocate`.
    pub freed: Mutex<Vec<Gaddr>>,
    /// The first error any of this node's tasks hit (see the module docs).
    pub errors: ErrorSlot,
    /// SEL as [REPO] runs it: what each thread holds (`sel.rs`; unused otherwise).
    pub sel: super::sel::SelThreads,
    /// Crash recovery: compute indices this node knows were declared dead (`recovery.rs`).
    pub dead_set: std::sync::atomic::AtomicU64,
}

impl NodeState {
    /// The first error this node's operations or background tasks hit, if any. A bench worker
    /// stops at its first `Err`; a runner reports this after the run.
    pub fn first_error(&self) -> Option<ProtocolError> {
        self.errors.first()
    }

    /// Record `error` (if first) and wake every waiter, so tasks blocked on what the failed task
    /// would have done look at the slot and stop. Returns `error` for `map_err`.
    pub fn fail(&self, error: ProtocolError) -> ProtocolError {
        self.errors.record(error.clone());
        self.release_done.notify_all();
        self.frame_freed.notify_all();
        self.ring_freed.notify_all();
        error
    }
}

pub(super) struct Ring {
    pub credits: Vec<u32>,
    pub free_slots: Vec<Vec<u32>>,
}

/// One compute node: shared state plus a NIC handle on channel 0.
pub struct Node<N: Nic> {
    pub nic: N,
    pub state: Arc<NodeState>,
}

impl<N: Nic> Deref for Node<N> {
    type Target = NodeState;
    fn deref(&self) -> &NodeState {
        &self.state
    }
}

/// A lock handle (Table 1): points at the local copy while the lock is held.
#[derive(Debug)]
pub struct Handle {
    pub gcl: Gaddr,
    pub mode: Mode,
    pub(super) frame: u32,
    /// The local latch mode actually held (SEL holds it exclusively even for readers).
    pub(super) latch_mode: Mode,
    /// Offset of the frame's data in the local region.
    pub data_offset: u64,
    /// Writes made through this handle, committed to the oracle at XUnLock (check mode).
    pub(super) staged: Vec<(u32, u64)>,
}

/// Per-thread context: its own channel, reply slot and the op being measured.
pub struct Worker<N: Nic> {
    pub nic: N,
    pub thread: u32,
    pub(super) reply_offset: u64,
    pub(super) seq: u32,
    pub(super) op: OpTrace,
    /// During a try-latch: the global acquire gives up after this many failed attempts.
    pub(super) try_attempts: Option<u32>,
}

impl<N: Nic> Worker<N> {
    /// The trace of this worker's current or last operation (case, round trips, messages).
    pub fn last_op(&self) -> &OpTrace {
        &self.op
    }
}

impl<N: Nic> Node<N> {
    /// A node on `nic` (any channel). `oracle` enables the read-latest check.
    pub fn new(nic: N, config: Config, layout: Layout, oracle: Option<Arc<Oracle>>) -> Arc<Node<N>> {
        let problems = config.validate();
        assert!(problems.is_empty(), "invalid SELCC config: {problems:?}");
        assert!(
            nic.local().size_bytes() >= layout.compute_region_bytes(),
            "compute region of {} bytes, SELCC needs {}",
            nic.local().size_bytes(),
            layout.compute_region_bytes()
        );
        let node = nic.node();
        let me = layout.compute_index(node);
        let memory_count = layout.memory_nodes.len();
        let ring = Ring {
            credits: vec![config.evict_ring_slots; memory_count],
            free_slots: (0..memory_count).map(|_| (0..config.evict_ring_slots).rev().collect()).collect(),
        };
        let state = NodeState {
            node,
            me,
            cache: Cache::new(config.cache_frames, config.cache_shards),
            stats: Mutex::new(Stats::default()),
            releasing: Watched::new(BTreeMap::new()),
            handovers: Watched::new(BTreeMap::new()),
            release_done: Notify::new(),
            frame_freed: Notify::new(),
            evict_wanted: Notify::new(),
            retry: Channel::new(),
            retry_queued: Watched::new(BTreeMap::new()),
            oracle,
            ring: Mutex::new(ring),
            ring_freed: Notify::new(),
            workers_running: Mutex::new(0),
            freed: Mutex::new(Vec::new()),
            errors: ErrorSlot::new(),
            sel: super::sel::SelThreads::new(config.threads_per_node),
            dead_set: std::sync::atomic::AtomicU64::new(0),
            config,
            layout,
        };
        Arc::new(Node { nic: nic.qp(0), state: Arc::new(state) })
    }

    /// The context for front-end thread `thread` (0-based, below `threads_per_node`).
    pub fn worker(&self, thread: u32) -> Worker<N> {
        assert!(thread < self.config.threads_per_node, "thread {thread} of {}", self.config.threads_per_node);
        Worker {
            nic: self.nic.qp(CHANNEL_WORKER_BASE + thread as u16),
            thread,
            reply_offset: self.layout.reply_slot_offset(thread),
            seq: 0,
            op: OpTrace::new(false, Nanos::ZERO),
            try_attempts: None,
        }
    }

    pub fn frame_offset(&self, frame: u32) -> u64 {
        self.layout.frame_offset(frame)
    }

    pub fn stats(&self) -> Stats {
        self.stats.lock().unwrap().clone()
    }

    // ---- releasing bookkeeping ----

    pub(super) fn begin_release(&self, g: Gaddr) {
        *self.releasing.lock().unwrap().entry(g).or_insert(0) += 1;
    }

    pub(super) fn end_release(&self, g: Gaddr) {
        {
            let mut map = self.releasing.lock().unwrap();
            let count = map.get_mut(&g).expect("end_release without begin_release");
            *count -= 1;
            if *count == 0 {
                map.remove(&g);
            }
        }
        self.release_done.notify_all();
    }

    /// Wait until none of this node's releasing verbs for `g` are in flight (or one failed).
    pub(super) async fn wait_not_releasing(&self, g: Gaddr) -> ProtocolResult<()> {
        loop {
            let done = self.release_done.notified();
            if !self.releasing.lock().unwrap().contains_key(&g) {
                return Ok(());
            }
            self.errors.check()?;
            done.await;
        }
    }

    // ---- the local latch and memorised messages ----

    /// Ask the retry server to serve `g`'s memorised message.
    pub(super) fn request_retry(&self, g: Gaddr) {
        *self.retry_queued.lock().unwrap().entry(g).or_insert(0) += 1;
        self.retry.push(g);
    }

    /// The retry server took `g` off its queue.
    pub(super) fn retry_taken(&self, g: Gaddr) {
        let mut queued = self.retry_queued.lock().unwrap();
        let count = queued.get_mut(&g).expect("retry_taken without request_retry");
        *count -= 1;
        if *count == 0 {
            queued.remove(&g);
        }
    }

    /// Release `frame`'s local latch, and if that leaves the latch idle with a memorised
    /// message in the frame, hand the message to the retry server. Every holder of a frame's
    /// latch must release it this way: a handler memorises a message only when it finds the
    /// latch busy, trusting the holder to pass the message on when it leaves (γ = Inf path of
    /// §5.3.1). A holder that drops the latch without looking strands the message, and its
    /// sender polls for a reply until something else touches or evicts the line — forever if
    /// the sender holds what this node's threads wait for.
    pub(super) fn unlock_frame(&self, frame: u32, mode: Mode) {
        let f = self.cache.frame(frame);
        f.latch.unlock(mode);
        self.retry_if_idle(frame);
    }

    /// If `frame` holds a memorised message and its latch is idle, queue it for the retry
    /// server. (Racing holders and handlers each look after their own write, so at least one
    /// of them sees the other's: the unlocker the memo, the memoriser the idle latch.)
    pub(super) fn retry_if_idle(&self, frame: u32) {
        let f = self.cache.frame(frame);
        let pending = {
            let meta = f.meta();
            meta.pending.as_ref().and(meta.gcl())
        };
        if let Some(g) = pending {
            if f.latch.snapshot() == (0, false, 0) {
                self.request_retry(g);
            }
        }
    }

    // ---- messages ----

    /// The flag word for `responder` in a requester's reply slot.
    fn reply_addr(&self, msg: &InvMsg, responder: ComputeIndex) -> RemoteAddr {
        RemoteAddr::new(self.layout.compute_node(msg.sender), msg.reply_offset + responder.0 as u64 * WORD)
    }

    /// Reply to `msg` with a bare flag (§3.5 [P], Fig. 9: written by RDMA into the sender's
    /// reply buffer).
    pub(super) async fn reply(
        &self,
        nic: &N,
        msg: &InvMsg,
        status: ReplyStatus,
        peer_round_trips: u8,
    ) -> ProtocolResult<()> {
        let flag = reply_flag(msg.seq, peer_round_trips, status);
        nic.try_write_word(self.reply_addr(msg, self.me), flag, "invalidation reply").await
    }

    /// The forward verbs: `header | data` into the requester's frame, then the flag (one
    /// doorbell batch; per-QP order puts the flag after the data).
    pub(super) fn forward_verbs(
        &self,
        msg: &InvMsg,
        frame: u32,
        peer_round_trips: u8,
    ) -> [crate::nic::Verb; 2] {
        let to = self.layout.compute_node(msg.sender);
        [
            crate::nic::Verb::Write {
                remote: RemoteAddr::new(to, msg.frame_offset),
                local_bytes: self.frame_offset(frame),
                len_bytes: self.layout.frame_stride_bytes() as u32,
            },
            crate::nic::Verb::WriteWord {
                remote: self.reply_addr(msg, self.me),
                value: reply_flag(msg.seq, peer_round_trips, ReplyStatus::Forwarded),
            },
        ]
    }

    /// The ports of this node's handler tasks, one task each.
    pub(super) fn handler_ports(&self) -> Vec<u16> {
        match self.config.handler_tasks {
            None => (0..self.layout.compute_count())
                .map(|i| ComputeIndex(i as u8))
                .filter(|&i| i != self.me)
                .map(|i| self.invalidation_port(i))
                .collect(),
            Some(n) => (0..n).map(|k| INVALIDATION_PORT + k as u16).collect(),
        }
    }

    /// The port `sender`'s invalidations go to on every compute node: one sender's messages
    /// stay on one port, so one handler serves them in order ([REPO]: a handler per peer QP).
    pub(super) fn invalidation_port(&self, sender: ComputeIndex) -> u16 {
        match self.config.handler_tasks {
            None => INVALIDATION_PORT + sender.0 as u16,
            Some(n) => INVALIDATION_PORT + (sender.0 as u32 % n.max(1)) as u16,
        }
    }

    /// A new invalidation of `kind` for `targets` (a compute-index bitmap), answered in the reply
    /// words at `reply_offset`, with the worker's next seq; counts its messages.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new_invalidation(
        &self,
        w: &mut Worker<N>,
        targets: u64,
        kind: InvKind,
        g: Gaddr,
        frame: u32,
        priority: u8,
        reply_offset: u64,
    ) -> InvMsg {
        assert!(
            targets != 0 && targets & super::latch::bit(self.me) == 0,
            "invalidating nobody or ourselves"
        );
        w.seq = w.seq.wrapping_add(1).max(1);
        let count = targets.count_ones();
        w.op.messages += count;
        self.stats.lock().unwrap().messages_sent += count as u64;
        InvMsg {
            kind,
            priority: if self.config.priority_aging { priority } else { 0 },
            sender: self.me,
            gcl: g,
            frame_offset: self.frame_offset(frame),
            reply_offset,
            seq: w.seq,
            no_wait: w.try_attempts.is_some(),
        }
    }

    /// SEND `msg` to every compute index in `targets`, posted together (as a thread posts several
    /// SENDs before polling their completions).
    pub(super) async fn post_invalidations(&self, nic: &N, targets: u64, msg: &InvMsg) -> ProtocolResult<()> {
        let bytes = msg.encode();
        let port = self.invalidation_port(self.me);
        let sends: Vec<_> = super::latch::bits_iter(targets)
            .map(|target| nic.try_send(self.layout.compute_node(target), port, bytes.clone(), "invalidation"))
            .collect();
        join_all(sends).await.into_iter().collect()
    }

    /// Send one invalidation to every compute index in `targets` and wait for all replies.
    /// Returns the combined status: `Forwarded`/`Granted` from a single owner, `Released` if
    /// every sharer released, else `Dropped`. Gives up if the node failed meanwhile.
    pub(super) async fn invalidate(
        &self,
        w: &mut Worker<N>,
        targets: u64,
        kind: InvKind,
        g: Gaddr,
        frame: u32,
        priority: u8,
    ) -> ProtocolResult<ReplyStatus> {
        let count = targets.count_ones();
        let reply_offset = w.reply_offset;
        let msg = self.new_invalidation(w, targets, kind, g, frame, priority, reply_offset);
        self.post_invalidations(&w.nic, targets, &msg).await?;
        // One step for the (parallel) sends.
        w.op.round_trips += 1;
        // Poll the reply flags (§3.5 [P]: "the sender busy-polls").
        let mut pending = targets;
        let mut combined: Option<ReplyStatus> = None;
        let mut peer_steps = 0u8;
        loop {
            // A dead node never answers (crash recovery). It may have handed the line to us
            // (its handover or downgrade FAA landed) and died before replying: then the latch
            // names us and memory holds the data (write-through); else retry the atomic.
            pending &= !self.dead_set.load(std::sync::atomic::Ordering::Relaxed);
            if pending == 0 && combined.is_none() {
                let word = w.nic.try_faa(Layout::latch(g), 0, "latch after a dead peer").await?;
                let n = self.layout.compute_count();
                let granted = match kind {
                    InvKind::ReaderVsModified => {
                        super::latch::readers(word) & super::latch::bit(self.me) != 0
                            && super::latch::ex_field(word) == 0
                    }
                    _ => super::latch::exclusive_holder(word, n) == Some(self.me),
                };
                return Ok(if granted { ReplyStatus::Granted } else { ReplyStatus::Dropped });
            }
            for target in super::latch::bits_iter(pending) {
                let flag = w.nic.local().load(w.reply_offset + target.0 as u64 * WORD);
                if let Some((status, steps)) = parse_reply(flag, w.seq) {
                    pending &= !super::latch::bit(target);
                    peer_steps = peer_steps.max(steps);
                    self.count_reply(status);
                    combined = Some(match (combined, status) {
                        (None, s) => s,
                        (Some(ReplyStatus::Released), ReplyStatus::Released) => ReplyStatus::Released,
                        _ => ReplyStatus::Dropped,
                    });
                    if count > 1 {
                        assert!(
                            matches!(status, ReplyStatus::Released | ReplyStatus::Dropped),
                            "a broadcast is only ever answered by releases or drops"
                        );
                    }
                }
            }
            if pending == 0 {
                break;
            }
            self.errors.check()?;
            // Wait for the first pending flag rather than sleeping `poll_ns` and looking again:
            // the NIC wakes us at the first poll time (start + k·poll_ns) at or after the reply
            // lands, so the timing is the poll loop's without an event per poll. The bound lets
            // a node that failed meanwhile stop waiting (checked above).
            let next = super::latch::bits_iter(pending).next().expect("a pending target");
            let offset = w.reply_offset + next.0 as u64 * WORD;
            let poll = Nanos(self.config.cpu.poll_ns);
            let until = WordCond::MaskEq { mask: REPLY_SEQ_MASK, value: (w.seq as u64) << 16 };
            match w.nic.wait_word(offset, until, poll, Some(Nanos(poll.0 * ERROR_CHECK_POLLS))).await {
                Ok(_) | Err(NicError::Timeout { .. }) => {}
                Err(e) => {
                    let at = RemoteAddr::new(self.node, offset);
                    let verb = [crate::nic::Verb::Read { remote: at, local_bytes: offset, len_bytes: 8 }];
                    return Err(ProtocolError::batch(self.node, w.nic.now(), &verb, "wait for reply", e));
                }
            }
        }
        w.op.round_trips += peer_steps as u32;
        Ok(combined.expect("at least one reply"))
    }

    fn count_reply(&self, status: ReplyStatus) {
        let mut stats = self.stats.lock().unwrap();
        match status {
            ReplyStatus::Forwarded => stats.replies_forwarded += 1,
            ReplyStatus::Granted => stats.replies_granted += 1,
            ReplyStatus::Released => stats.replies_released += 1,
            ReplyStatus::Dropped => stats.replies_dropped += 1,
        }
    }

    // ---- data access through a handle ----

    /// Read `out.len()` words at `offset_bytes` of the locked GCL's data (checked against the
    /// oracle in check mode: S4 read-latest).
    pub fn read(&self, h: &Handle, offset_bytes: u32, out: &mut [u64]) {
        self.check_bounds(offset_bytes, out.len());
        self.nic.local().read_words(h.data_offset + offset_bytes as u64, out);
        if let Some(oracle) = &self.oracle {
            let first = offset_bytes / 8;
            // A writer sees its own staged writes (checked here, not against the oracle).
            let staged = |word: u32| {
                let own = h.staged.iter().rev().find(|(w, _)| *w == word).map(|(_, v)| *v);
                if let Some(v) = own {
                    assert_eq!(v, out[(word - first) as usize], "a writer lost its own write");
                }
                own.is_some()
            };
            oracle.check_read_span(self.node, h.gcl, first, out, staged, self.nic.now());
        }
    }

    /// Write `words` at `offset_bytes` of the data; needs an exclusive handle. Widens the dirty
    /// bounds (§5.2.2).
    pub fn write(&self, h: &mut Handle, offset_bytes: u32, words: &[u64]) {
        assert_eq!(h.mode, Mode::Exclusive, "write through a shared handle");
        self.check_bounds(offset_bytes, words.len());
        assert!(!words.is_empty());
        let region = self.nic.local();
        region.write_words(h.data_offset + offset_bytes as u64, words);
        let header = h.data_offset - WORD;
        let dirty =
            super::dirty::Dirty::from_header(region.load(header)).mark(offset_bytes, words.len() as u32 * 8);
        region.store(header, dirty.to_header());
        if !self.config.sel_per_thread() {
            let meta = self.cache.frame(h.frame).meta();
            assert_eq!(meta.memo, Memo::Modified, "writing without Modified ownership");
        }
        // Crash recovery writes staged words through at XUnLock.
        if self.oracle.is_some() || self.config.crash_recovery {
            for (i, value) in words.iter().enumerate() {
                h.staged.push((offset_bytes / 8 + i as u32, *value));
            }
        }
    }

    fn check_bounds(&self, offset_bytes: u32, words: usize) {
        assert!(offset_bytes.is_multiple_of(8), "unaligned access at {offset_bytes}");
        assert!(
            offset_bytes as u64 + words as u64 * 8 <= self.layout.gcl_size_bytes,
            "access {offset_bytes}+{} beyond the GCL",
            words * 8
        );
    }
}
