//! One compute node of the GAM-like baseline: its block cache, its request worker (GAM's
//! serialized queue), the client API (`read`, `write`, `fence`), the invalidation/recall
//! handler, and the TSO store buffers with their drainers.
//!
//! ```text
//!   client thread t ──read/write──▶ worker queue (worker_ns per step, `compute_workers` servers)
//!        │ hit: copy under the cache lock             │ miss: Request ──▶ home ──▶ Reply
//!        │ TSO write: store buffer t ──▶ drainer t ───┘
//!   INV_PORT ──▶ inv handler: Invalidate (drop a Shared copy, ack) / Recall (ack with data)
//! ```
//!
//! Every access takes effect at one instant under the node's cache lock; handlers change line
//! states under the same lock and never wait for anything remote, so they cannot deadlock with
//! a fetch. Races and how they are settled:
//! 1. *An Invalidate crosses a Shared grant.* The home replied Shared to us, then served a
//!    writer and sent us an Invalidate that arrives first (different ports, no order). The line
//!    is still fetching: we ack at once (never defer an Invalidate: our own request may queue
//!    behind the writer at the home, which waits for this ack) and mark the line. When the
//!    Shared reply lands, its data may already be overwritten, so we drop it and fetch again
//!    (`fetch_retries`). An Invalidate for an *old* copy evicted silently looks the same and
//!    costs one needless retry.
//! 2. *A Recall crosses an Exclusive grant.* The home granted us Exclusive, then served another
//!    node and recalls us before the grant arrives. We cannot answer without the data, so the
//!    recall is deferred on the fetching line and answered right after our access is applied.
//!    No deadlock: the grant is already on its way.
//! 3. *A Recall overtakes our write-back.* An evicting line keeps its frame (state
//!    `WritingBack`) until the home acknowledges the write-back, so the recall is answered from
//!    the frame; the home then finds the write-back stale and ignores its data.
//! 4. *The home serves the write-back before we hear of it.* It clears the block and may grant
//!    it to another node, whose writes our copy no longer sees. So an evicting line serves no
//!    access, reads included, from the moment the write-back leaves (found by the fuzzer: a
//!    node read its evicting copy while another node held the block Exclusive).
//!
//! Messages go through [`crate::common::rpc`]: each client thread and drainer is an
//! [`rpc::Client`] with its own reply port; the invalidation handler is an [`rpc::Handler`].
//! Errors: the client API returns [`ProtocolResult`]s; a failure is also recorded on the node
//! ([`NodeState::first_error`]) and wakes every waiter, so a thread waiting for a line another
//! thread was fetching, or a fence waiting for a failed drainer, fails with it.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use crate::common::error::{ErrorSlot, ProtocolError, ProtocolResult};
use crate::common::rpc::{self, Client, Incoming};
use crate::nic::{Nanos, Nic, NodeId};
use crate::sync::Notify;

use super::check::Oracle;
use super::config::{Config, Variant};
use super::layout::Layout;
use super::message::{Grant, Msg, RequestKind, HOME_PORT, INV_PORT, REPLY_PORT_BASE};
use super::mutants::Mutant;
use super::stats::{AccessTrace, Stats};
use super::store_buffer::StoreBuffer;

/// Channels (queue-pair sets): clients `1..1+T`, drainers `1+T..1+2T`, handlers from 3000.
pub const CHANNEL_CLIENT_BASE: u16 = 1;
pub const CHANNEL_INV_BASE: u16 = 3000;

/// A cached block's MSI state (GAM: Shared / Exclusive(dirty) / Invalid), plus the one
/// transitional state a copy can be observed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineState {
    Invalid,
    Shared,
    Exclusive,
    /// The Exclusive copy is being written back (race 4): no access is served from it — the
    /// home may already have taken the data and granted the block elsewhere — and its frame
    /// stays only to answer a Recall that overtook the write-back (race 3). Gone at
    /// `WriteBackDone`.
    WritingBack,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Busy {
    /// A thread has a request out for this block (one per block per node: later threads wait,
    /// as GAM merges "previously-sent similar requests").
    Fetching,
    /// The Exclusive copy is being written back; the frame stays until the home acks.
    Evicting,
}

#[derive(Debug)]
struct Line {
    frame: Option<u32>,
    state: LineState,
    busy: Option<Busy>,
    invalidated_while_fetching: bool,
    /// A Recall (its `downgrade` flag) that met this line fetching (race 2).
    deferred_recall: Option<bool>,
    lru_tick: u64,
}

impl Line {
    fn fetching() -> Line {
        Line {
            frame: None,
            state: LineState::Invalid,
            busy: Some(Busy::Fetching),
            invalidated_while_fetching: false,
            deferred_recall: None,
            lru_tick: 0,
        }
    }

    fn can_serve(&self, write: bool) -> bool {
        if self.frame.is_none() {
            return false;
        }
        if write {
            self.state == LineState::Exclusive && self.busy.is_none()
        } else {
            matches!(self.state, LineState::Shared | LineState::Exclusive)
        }
    }
}

/// Lines, an LRU order over lines with frames, and free frames.
#[derive(Default)]
struct Cache {
    lines: BTreeMap<u64, Line>,
    /// tick → block, oldest first.
    lru: BTreeMap<u64, u64>,
    tick: u64,
    free: Vec<u32>,
}

impl Cache {
    fn touch(&mut self, block: u64) {
        let line = self.lines.get_mut(&block).expect("touching an uncached block");
        if line.frame.is_some() {
            self.lru.remove(&line.lru_tick);
            self.tick += 1;
            line.lru_tick = self.tick;
            self.lru.insert(self.tick, block);
        }
    }

    fn assign_frame(&mut self, block: u64, frame: u32) {
        let line = self.lines.get_mut(&block).expect("a frame for an uncached block");
        assert!(line.frame.is_none(), "block {block} already has a frame");
        line.frame = Some(frame);
        self.tick += 1;
        line.lru_tick = self.tick;
        self.lru.insert(self.tick, block);
    }

    fn remove(&mut self, block: u64) -> Line {
        let line = self.lines.remove(&block).expect("removing an uncached block");
        if line.frame.is_some() {
            self.lru.remove(&line.lru_tick);
        }
        line
    }
}

/// Non-generic shared state of one compute node (what checkers read).
pub struct NodeState {
    pub node: NodeId,
    /// This node's bit in sharer sets.
    pub me: u8,
    pub config: Config,
    pub layout: Layout,
    cache: Mutex<Cache>,
    /// Wakes threads waiting for a busy line or a frame.
    changed: Notify,
    /// When each request-worker server is next free (ns).
    workers_free_ns: Mutex<Vec<u64>>,
    pub stats: Mutex<Stats>,
    pub oracle: Option<Arc<Oracle>>,
    pub(super) buffers: Vec<StoreBuffer>,
    pub(super) errors: ErrorSlot,
}

impl NodeState {
    /// Visit every cached line's state (for [`super::check::check_swmr`]).
    pub fn for_each_line(&self, mut f: impl FnMut(u64, LineState)) {
        let cache = self.cache.lock().unwrap();
        for (block, line) in &cache.lines {
            f(*block, line.state);
        }
    }

    /// The state of `block` here (Invalid when not cached).
    pub fn line_state(&self, block: u64) -> LineState {
        self.cache.lock().unwrap().lines.get(&block).map_or(LineState::Invalid, |l| l.state)
    }

    pub fn stats(&self) -> Stats {
        self.stats.lock().unwrap().clone()
    }

    /// The first error this node's clients or background tasks hit, if any. A bench client
    /// stops at its first `Err`; a runner reports this after the run.
    pub fn first_error(&self) -> Option<ProtocolError> {
        self.errors.first()
    }

    /// Record `error` (if first) and wake every waiter so it sees it. Returns `error`.
    pub fn fail(&self, error: ProtocolError) -> ProtocolError {
        self.errors.record(error.clone());
        self.changed.notify_all();
        for buffer in &self.buffers {
            buffer.changed.notify_all();
        }
        error
    }
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

/// A client thread's (or drainer's) context: its own QP channel and reply port.
pub struct Worker<N: Nic> {
    pub nic: N,
    pub thread: u32,
    client: Client<N>,
    /// What the last access did (for tests: a read miss is one RPC).
    pub last: AccessTrace,
}

/// What an access does once it holds a valid line.
pub(super) enum Access<'a> {
    Read {
        offset_bytes: u32,
        out: &'a mut [u64],
    },
    /// `replaced`: filled with the words the write overwrites, at the instant it takes effect
    /// (for the history checkers).
    Write {
        offset_bytes: u32,
        words: &'a [u64],
        replaced: Option<&'a mut [u64]>,
    },
}

impl Access<'_> {
    fn is_write(&self) -> bool {
        matches!(self, Access::Write { .. })
    }
}

impl<N: Nic> Node<N> {
    pub fn new(nic: N, config: Config, layout: Layout, oracle: Option<Arc<Oracle>>) -> Arc<Node<N>> {
        let problems = config.validate();
        assert!(problems.is_empty(), "invalid GAM config: {problems:?}");
        assert_eq!(layout.gcl_size_bytes, config.gcl_size_bytes as u64, "layout and config disagree");
        assert_eq!(layout.cache_frames, config.cache_frames as u64, "layout and config disagree");
        assert!(
            nic.local().size_bytes() >= layout.compute_region_bytes(),
            "compute region of {} bytes, GAM needs {}",
            nic.local().size_bytes(),
            layout.compute_region_bytes()
        );
        let node = nic.node();
        let cache = Cache { free: (0..config.cache_frames).rev().collect(), ..Cache::default() };
        let state = NodeState {
            node,
            me: layout.compute_index(node),
            cache: Mutex::new(cache),
            changed: Notify::new(),
            workers_free_ns: Mutex::new(vec![0; config.compute_workers as usize]),
            stats: Mutex::new(Stats::default()),
            oracle,
            buffers: (0..config.threads_per_node).map(|_| StoreBuffer::default()).collect(),
            errors: ErrorSlot::new(),
            config,
            layout,
        };
        Arc::new(Node { nic: nic.qp(0), state: Arc::new(state) })
    }

    /// The context of client thread `thread`.
    pub fn worker(&self, thread: u32) -> Worker<N> {
        assert!(thread < self.config.threads_per_node, "thread {thread} of {}", self.config.threads_per_node);
        self.make_worker(thread, thread)
    }

    /// Drainer `k` of `thread` gets its own QP and reply slot, after the client threads'.
    pub(super) fn drainer_worker(&self, thread: u32, k: u32) -> Worker<N> {
        let c = &self.config;
        self.make_worker(thread, c.threads_per_node + thread * c.drain_depth + k)
    }

    fn make_worker(&self, thread: u32, slot: u32) -> Worker<N> {
        let nic = self.nic.qp(CHANNEL_CLIENT_BASE + slot as u16);
        Worker {
            client: Client::new(nic.clone(), REPLY_PORT_BASE + slot as u16),
            nic,
            thread,
            last: AccessTrace::default(),
        }
    }

    // ================================ client API ================================

    /// Read `out.len()` words at `offset_bytes` of `block`. Fails at once if the node failed.
    pub async fn read(
        &self,
        w: &mut Worker<N>,
        block: u64,
        offset_bytes: u32,
        out: &mut [u64],
    ) -> ProtocolResult<AccessTrace> {
        self.check_bounds(offset_bytes, out.len());
        self.errors.check()?;
        let start = w.nic.now().0;
        self.worker_step(&w.nic).await;
        w.nic.cpu(Nanos(self.config.cpu.access_ns)).await;
        let forwarded = match self.config.variant {
            Variant::Tso => self.read_store_buffer(w.thread, block, offset_bytes, out).await?,
            Variant::Seq => false,
        };
        let trace = if forwarded {
            AccessTrace { hit: true, ..AccessTrace::default() }
        } else {
            self.access(w, block, Access::Read { offset_bytes, out }).await.map_err(|e| self.fail(e))?
        };
        let mut stats = self.stats.lock().unwrap();
        stats.record_access(&trace);
        stats.record_op(false, start, w.nic.now().0);
        w.last = trace;
        Ok(trace)
    }

    /// Write `words` at `offset_bytes` of `block`. SEQ: returns when the write is performed.
    /// TSO: returns once it is in the thread's store buffer (its trace is recorded at drain; a
    /// failed drain shows up in the next operation, `fence` or `finish`).
    pub async fn write(
        &self,
        w: &mut Worker<N>,
        block: u64,
        offset_bytes: u32,
        words: &[u64],
    ) -> ProtocolResult<AccessTrace> {
        self.write_replacing(w, block, offset_bytes, words, None).await
    }

    /// [`Node::write`], and under SEQ also the words it overwrote, read at the instant the write
    /// takes effect in the only valid copy (TSO writes take effect later, at drain: `replaced`
    /// is left untouched).
    pub async fn write_replacing(
        &self,
        w: &mut Worker<N>,
        block: u64,
        offset_bytes: u32,
        words: &[u64],
        replaced: Option<&mut [u64]>,
    ) -> ProtocolResult<AccessTrace> {
        self.check_bounds(offset_bytes, words.len());
        assert!(!words.is_empty());
        self.errors.check()?;
        let start = w.nic.now().0;
        let trace = match self.config.variant {
            Variant::Seq => {
                self.worker_step(&w.nic).await;
                w.nic.cpu(Nanos(self.config.cpu.access_ns)).await;
                let access = Access::Write { offset_bytes, words, replaced };
                let trace = self.access(w, block, access).await.map_err(|e| self.fail(e))?;
                self.stats.lock().unwrap().record_access(&trace);
                trace
            }
            Variant::Tso => {
                w.nic.cpu(Nanos(self.config.cpu.enqueue_ns)).await;
                self.buffer_write(w.thread, block, offset_bytes, words).await?;
                AccessTrace { hit: true, ..AccessTrace::default() }
            }
        };
        self.stats.lock().unwrap().record_op(true, start, w.nic.now().0);
        w.last = trace;
        Ok(trace)
    }

    /// Wait until every write of this thread is performed (a no-op under SEQ).
    pub async fn fence(&self, w: &Worker<N>) -> ProtocolResult<()> {
        let buffer = &self.buffers[w.thread as usize];
        loop {
            if buffer.state.lock().unwrap().entries.is_empty() {
                return Ok(());
            }
            self.errors.check()?;
            buffer.changed.notified().await;
        }
    }

    /// Fence, then let the thread's drainer exit.
    pub async fn finish(&self, w: &Worker<N>) -> ProtocolResult<()> {
        let fenced = self.fence(w).await;
        let buffer = &self.buffers[w.thread as usize];
        buffer.state.lock().unwrap().closed = true;
        buffer.changed.notify_all();
        fenced
    }

    fn check_bounds(&self, offset_bytes: u32, words: usize) {
        assert!(offset_bytes.is_multiple_of(8), "unaligned access at {offset_bytes}");
        assert!(
            offset_bytes as u64 + words as u64 * 8 <= self.layout.gcl_size_bytes,
            "access {offset_bytes}+{} beyond the block",
            words * 8
        );
    }

    // ================================ the worker queue ================================

    /// One step of the node's request worker: FIFO over `compute_workers` servers, each step
    /// `worker_ns`. This is GAM's serialized queue (§7.1.2 [P]); on hardware `cpu` is free, the
    /// work being real.
    pub(super) async fn worker_step(&self, nic: &N) {
        let work = self.config.cpu.worker_ns;
        if work == 0 {
            return;
        }
        let now = nic.now().0;
        let done = {
            let mut free = self.workers_free_ns.lock().unwrap();
            let (i, _) = free.iter().enumerate().min_by_key(|(i, f)| (**f, *i)).expect("at least one worker");
            free[i] = now.max(free[i]) + work;
            free[i]
        };
        nic.cpu(Nanos(done - now)).await;
    }

    // ================================ access ================================

    /// Apply `access` to `frame` (caller holds the cache lock): the instant it takes effect.
    fn apply(&self, frame: u32, block: u64, access: &mut Access<'_>) {
        let region = self.nic.local();
        let base = self.layout.frame_offset(frame);
        match access {
            Access::Read { offset_bytes, out } => {
                region.read_words(base + *offset_bytes as u64, out);
                if let Some(oracle) = &self.oracle {
                    oracle.check_read(self.node, block, *offset_bytes as usize / 8, out);
                }
            }
            Access::Write { offset_bytes, words, replaced } => {
                if let Some(old) = replaced {
                    region.read_words(base + *offset_bytes as u64, old);
                }
                region.write_words(base + *offset_bytes as u64, words);
                if let Some(oracle) = &self.oracle {
                    oracle.commit(block, *offset_bytes as usize / 8, words);
                }
            }
        }
    }

    fn frame_words(&self, frame: u32) -> Vec<u64> {
        let mut words = vec![0; self.layout.words_per_block()];
        self.nic.local().read_words(self.layout.frame_offset(frame), &mut words);
        words
    }

    /// Hit, or fetch the block with the right state and then apply. On an error the line stays
    /// busy: the node is failed, and waiters for the line fail with the recorded error.
    pub(super) async fn access(
        &self,
        w: &mut Worker<N>,
        block: u64,
        mut access: Access<'_>,
    ) -> ProtocolResult<AccessTrace> {
        enum Step {
            Done,
            Wait,
            Fetch { have_copy: bool },
        }
        let write = access.is_write();
        let mut trace = AccessTrace { hit: true, ..AccessTrace::default() };
        loop {
            let step = {
                let mut cache = self.cache.lock().unwrap();
                let step = match cache.lines.get_mut(&block) {
                    Some(line) if line.can_serve(write) => Step::Done,
                    Some(line) if line.busy.is_some() => Step::Wait,
                    Some(line) => {
                        line.busy = Some(Busy::Fetching);
                        line.invalidated_while_fetching = false;
                        Step::Fetch { have_copy: line.state == LineState::Shared }
                    }
                    None => {
                        cache.lines.insert(block, Line::fetching());
                        Step::Fetch { have_copy: false }
                    }
                };
                if let Step::Done = step {
                    let frame = cache.lines[&block].frame.expect("a servable line has a frame");
                    cache.touch(block);
                    self.apply(frame, block, &mut access);
                }
                step
            };
            let have_copy = match step {
                Step::Done => return Ok(trace),
                Step::Wait => {
                    self.errors.check()?;
                    self.changed.notified().await;
                    continue;
                }
                Step::Fetch { have_copy } => have_copy,
            };
            trace.hit = false;
            self.ensure_frame(w, block, &mut trace).await?;
            let kind = if write { RequestKind::Write { have_copy } } else { RequestKind::Read };
            let reply = self.rpc(w, block, kind, None, &mut trace).await?;
            let Msg::Reply { grant, invalidations, data, .. } = reply else {
                panic!("expected a Reply for block {block}, got {reply:?}")
            };
            if write {
                assert_eq!(grant, Grant::Exclusive, "a write was granted {grant:?}");
            }
            self.worker_step(&w.nic).await;
            trace.invalidations += invalidations;
            let (applied, recall_ack) = self.install(block, grant, data, &mut access);
            self.changed.notify_all();
            if let Some(ack) = recall_ack {
                self.send_home(&w.nic, ack).await?;
            }
            if applied {
                return Ok(trace);
            }
            trace.retries += 1;
        }
    }

    /// The reply for a fetching line arrived: install it and apply the access, unless an
    /// Invalidate crossed a Shared grant (race 1). Returns (applied, deferred recall's Ack).
    fn install(
        &self,
        block: u64,
        grant: Grant,
        data: Option<Vec<u64>>,
        access: &mut Access<'_>,
    ) -> (bool, Option<Msg>) {
        let mut cache = self.cache.lock().unwrap();
        let line = cache.lines.get_mut(&block).expect("a fetching line stays cached");
        assert_eq!(line.busy, Some(Busy::Fetching), "block {block}: reply for a line not fetching");
        let frame = line.frame.expect("a line has its frame before it asks");
        match &data {
            Some(words) => self.nic.local().write_words(self.layout.frame_offset(frame), words),
            // The home grants without data only if it still counts us a sharer, i.e. we acked
            // no Invalidate since our Shared grant: the copy is intact.
            None => assert_eq!(line.state, LineState::Shared, "block {block}: granted without data, no copy"),
        }
        line.busy = None;
        let crossed = std::mem::take(&mut line.invalidated_while_fetching);
        if grant == Grant::Shared && crossed {
            assert!(line.deferred_recall.is_none(), "a Recall for a Shared grant");
            line.state = LineState::Invalid;
            return (false, None);
        }
        // [CHOICE] An Invalidate that crossed an Exclusive grant was for an older copy: the home
        // removed us from the sharers before serving this request.
        line.state = match grant {
            Grant::Shared => LineState::Shared,
            Grant::Exclusive => LineState::Exclusive,
        };
        let recall = line.deferred_recall.take();
        cache.touch(block);
        self.apply(frame, block, access);
        let ack = recall.map(|downgrade| {
            assert_eq!(grant, Grant::Exclusive, "a Recall crossed a Shared grant");
            let words = self.frame_words(frame);
            let line = cache.lines.get_mut(&block).unwrap();
            line.state = if downgrade { LineState::Shared } else { LineState::Invalid };
            Msg::Ack { block, data: Some(words) }
        });
        (true, ack)
    }

    /// Give the fetching line of `block` a frame: a free one, an idle victim's (Shared/Invalid:
    /// silent), or an Exclusive victim's after writing it back (one RPC).
    async fn ensure_frame(
        &self,
        w: &mut Worker<N>,
        block: u64,
        trace: &mut AccessTrace,
    ) -> ProtocolResult<()> {
        enum Plan {
            Ready,
            Wait,
            Evict { victim: u64, words: Vec<u64> },
        }
        loop {
            let plan = {
                let mut cache = self.cache.lock().unwrap();
                if cache.lines[&block].frame.is_some() {
                    Plan::Ready
                } else if let Some(frame) = cache.free.pop() {
                    cache.assign_frame(block, frame);
                    Plan::Ready
                } else {
                    let victim =
                        cache.lru.values().copied().find(|b| *b != block && cache.lines[b].busy.is_none());
                    match victim {
                        None => Plan::Wait,
                        Some(victim) => {
                            let line = cache.lines.get_mut(&victim).unwrap();
                            if line.state == LineState::Exclusive {
                                line.busy = Some(Busy::Evicting);
                                if self.config.mutant != Mutant::EvictingLineServesReads {
                                    line.state = LineState::WritingBack;
                                }
                                let frame = line.frame.unwrap();
                                Plan::Evict { victim, words: self.frame_words(frame) }
                            } else {
                                let old = cache.remove(victim);
                                cache.assign_frame(block, old.frame.unwrap());
                                self.stats.lock().unwrap().evictions += 1;
                                Plan::Ready
                            }
                        }
                    }
                }
            };
            match plan {
                Plan::Ready => return Ok(()),
                Plan::Wait => {
                    self.errors.check()?;
                    self.changed.notified().await
                }
                Plan::Evict { victim, words } => {
                    let reply = self.rpc(w, victim, RequestKind::WriteBack, Some(words), trace).await?;
                    assert!(
                        matches!(reply, Msg::WriteBackDone { .. }),
                        "expected WriteBackDone, got {reply:?}"
                    );
                    self.worker_step(&w.nic).await;
                    {
                        let mut cache = self.cache.lock().unwrap();
                        let old = cache.remove(victim);
                        assert_eq!(old.busy, Some(Busy::Evicting));
                        assert!(old.deferred_recall.is_none());
                        let frame = old.frame.unwrap();
                        if cache.lines[&block].frame.is_none() {
                            cache.assign_frame(block, frame);
                        } else {
                            cache.free.push(frame);
                        }
                        let mut stats = self.stats.lock().unwrap();
                        stats.evictions += 1;
                        stats.writebacks += 1;
                    }
                    self.changed.notify_all();
                }
            }
        }
    }

    /// Call `block`'s home with a request and wait for its answer (the RPC layer matches it by
    /// request id on this worker's reply port).
    async fn rpc(
        &self,
        w: &mut Worker<N>,
        block: u64,
        kind: RequestKind,
        data: Option<Vec<u64>>,
        trace: &mut AccessTrace,
    ) -> ProtocolResult<Msg> {
        let home = self.layout.home(block);
        let msg = Msg::Request { block, kind, data };
        trace.rpcs += 1;
        {
            let mut stats = self.stats.lock().unwrap();
            stats.rpcs += 1;
            stats.messages_sent += 1;
        }
        let reply: Msg = w.client.call(home, HOME_PORT, &msg).await?;
        assert!(
            matches!(reply, Msg::Reply { .. } | Msg::WriteBackDone { .. }),
            "unexpected {reply:?} as a reply"
        );
        assert_eq!(reply.block(), block, "a reply about another block");
        Ok(reply)
    }

    async fn send_home(&self, nic: &N, ack: Msg) -> ProtocolResult<()> {
        let home = self.layout.home(ack.block());
        self.stats.lock().unwrap().messages_sent += 1;
        rpc::notify(nic, home, HOME_PORT, &ack).await
    }

    // ================================ handlers ================================

    /// An invalidation/recall handler task (see the [`rpc::Handler`] impl below).
    pub async fn run_inv_handler(self: Arc<Self>, nic: N) {
        rpc::serve_one(nic, INV_PORT, self).await
    }

    /// Apply an Invalidate or Recall; the Ack to send now, if any (pure in the cache state).
    fn on_invalidation(&self, msg: Msg) -> Option<Msg> {
        let mut cache = self.cache.lock().unwrap();
        match msg {
            Msg::Invalidate { block } => {
                self.stats.lock().unwrap().invalidations_received += 1;
                if let Some(line) = cache.lines.get_mut(&block) {
                    // The home invalidates only nodes it counts as sharers and waits for their
                    // acks before it grants: never a copy we own or are writing back.
                    assert!(
                        !matches!(line.state, LineState::Exclusive | LineState::WritingBack),
                        "an Invalidate for our {:?} block {block}",
                        line.state
                    );
                    if line.busy == Some(Busy::Fetching) {
                        line.invalidated_while_fetching = true;
                    }
                    if self.config.mutant != Mutant::InvalidateKeepsCopy {
                        line.state = LineState::Invalid;
                    }
                }
                Some(Msg::Ack { block, data: None })
            }
            Msg::Recall { block, downgrade } => {
                self.stats.lock().unwrap().recalls_received += 1;
                let line = cache.lines.get_mut(&block).expect("a Recall for a block we never asked for");
                if line.busy == Some(Busy::Fetching) {
                    assert_ne!(line.state, LineState::Exclusive);
                    assert!(line.deferred_recall.is_none(), "two Recalls for one grant");
                    line.deferred_recall = Some(downgrade);
                    self.stats.lock().unwrap().recalls_deferred += 1;
                    return None;
                }
                let frame = line.frame.expect("an Exclusive line has a frame");
                // A Recall that overtook our write-back (race 3) is answered from the frame,
                // which still holds the data being written back. Its line then becomes what
                // the home will count it: a sharer after a downgrade (the home queues our
                // write-back behind the read and finds it stale), else nothing.
                match line.state {
                    LineState::Exclusive | LineState::WritingBack => {
                        line.state = if downgrade { LineState::Shared } else { LineState::Invalid }
                    }
                    other => panic!("a Recall for block {block} we do not own ({other:?})"),
                }
                Some(Msg::Ack { block, data: Some(self.frame_words(frame)) })
            }
            other => panic!("an invalidation handler received {other:?}"),
        }
    }

    /// Daemon tasks of this node: invalidation handlers, and TSO drainers.
    pub fn daemons(self: &Arc<Self>) -> Vec<crate::nic::Task> {
        let mut tasks: Vec<crate::nic::Task> = Vec::new();
        for i in 0..self.config.inv_handlers {
            let nic = self.nic.qp(CHANNEL_INV_BASE + i as u16);
            tasks.push(Box::pin(self.clone().run_inv_handler(nic)));
        }
        if self.config.variant == Variant::Tso {
            for thread in 0..self.config.threads_per_node {
                for k in 0..self.config.drain_depth {
                    tasks.push(Box::pin(self.clone().run_drainer(thread, k)));
                }
            }
        }
        tasks
    }
}

/// The invalidation/recall handler: GAM's worker serves these too, so each message takes a
/// worker step; the Ack goes home as a notification.
impl<N: Nic> rpc::Handler<N> for Node<N> {
    type Msg = Msg;

    async fn handle(&self, nic: &N, incoming: Incoming<Msg>) -> ProtocolResult<()> {
        let msg = incoming.msg;
        assert_eq!(incoming.from, self.layout.home(msg.block()), "an invalidation from a non-home");
        self.worker_step(nic).await;
        match self.on_invalidation(msg) {
            Some(ack) => self.send_home(nic, ack).await,
            None => Ok(()),
        }
    }

    fn failed(&self, error: ProtocolError) {
        self.fail(error);
    }
}
