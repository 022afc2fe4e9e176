//! One symmetric node: its workers' page accesses (local hot path, remote invocation with
//! conflict resolution on the requester's side) and its message-handler tasks polling the
//! mailboxes remote workers write with RDMA WRITE.

use std::sync::{Arc, Mutex};

use crate::common::error::{ErrorSlot, NicExt, ProtocolError, ProtocolResult};
use crate::common::sync_ext::timeout;
use crate::nic::wait::WordCond;
use crate::nic::{Nanos, Nic, NodeId, RemoteAddr, Verb};
use crate::sync::Notify;

use super::baselines::{self, Gate};
use super::config::Config;
use super::directory::{own, Decision};
use super::layout::Layout;
use super::local::{Lines, Touch};
use super::message::{Code, Kind, Request, Response, SEQ_MASK};
use super::mutants::Mutant;
use super::state::{bits, epoch_after, DirEntry, Frame, FrameState, NodeState, Owed, SSD};
use super::stats::Stats;

pub struct Node<N: Nic> {
    pub nic: N,
    pub layout: Layout,
    pub config: Config,
    pub state: Arc<Mutex<NodeState>>,
    /// Local workers waiting for a frame another local worker is fetching, or for a free one.
    pub(super) settled: Notify,
    /// Frames this node may cache (`u64::MAX`: no eviction).
    pub capacity: u64,
    /// Page providers waiting for the cache to fill up.
    pub(super) pressure: Notify,
    /// Free frames the providers keep (spec §3.11's free limit).
    pub(super) free_target: u64,
    pub errors: ErrorSlot,
    pub stats: Mutex<Stats>,
    /// The invariants' bookkeeping (check mode).
    pub(super) owed: Option<Owed>,
    /// Baselines only (`config.conflicts`): the directory's per-page gate (`baselines.rs`).
    pub(super) gate: Mutex<Gate>,
    /// The ablation's local latch lines (`local.rs`; unused by default).
    pub(super) lines: Mutex<Lines>,
}

/// A worker's NIC handle (its own channel) and per-target request sequence numbers.
pub struct Worker<N: Nic> {
    pub nic: N,
    pub index: u32,
    seq: Vec<u16>,
    /// Busy polling's back-off jitter state (`baselines::back_off`).
    pub(super) jitter: u64,
}

/// What remote invocation does once the page is here.
#[derive(Clone, Copy)]
enum Then {
    /// Run the one-record operation in the install step (`access`).
    Touch(u64, Access),
    /// Leave the frame latched for the requester (`lock_page`).
    Latch,
}

/// What an operation does to its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write(u64),
}

/// Post `verbs` as one batch, waiting while the QP has too many outstanding: a handler's
/// replies are posted by concurrent tasks on its one QP, and a burst (eviction lists with
/// read-backs, many requesters) may fill it.
pub(super) async fn post_all<N: Nic>(nic: &N, verbs: &[Verb], during: &'static str) -> ProtocolResult<()> {
    loop {
        match nic.batch(verbs).await {
            Ok(_) => return Ok(()),
            Err(crate::nic::NicError::QpOverflow { .. }) => nic.sleep(Nanos(100)).await,
            Err(e) => return Err(ProtocolError::batch(nic.node(), nic.now(), verbs, during, e)),
        }
    }
}

impl<N: Nic> Node<N> {
    /// `capacity`: frames this node may cache (`u64::MAX`: every page, no eviction).
    /// `loaded`: with eviction, this node's first `loaded` pages were written into its memory
    /// by the plan's setup (a bulk-loaded tree) and start there, dirty, whatever the cache's
    /// size: the page providers write the overflow to the device.
    pub fn new(
        nic: N,
        layout: Layout,
        config: Config,
        owed: Option<Owed>,
        capacity: u64,
        loaded: Option<u64>,
    ) -> Arc<Node<N>> {
        let me = nic.node();
        let first = me.0 as u64 * layout.pages_per_node;
        // [CHOICE] Every page starts at its directory, node-shared with it as the only holder
        // (spec §8 A2). With eviction, in memory as far as its cache leaves room for the
        // providers' target and a frame per worker, the rest only on its storage device, which
        // holds every page at the start (the load; records start at 0) — or, for a plan that
        // loads pages into memory, those pages in memory and dirty, the rest (unused pool
        // pages) on the device.
        let (resident, dirty) = match loaded {
            Some(n) if layout.providers > 0 => (n.min(layout.pages_per_node), true),
            _ => (layout.pages_per_node.min(capacity.saturating_sub(Self::reserve(&layout, &config))), false),
        };
        let mut frames = vec![None; layout.total_pages() as usize];
        let home = (me.0 as u64) < layout.homes;
        let resident = if home { resident } else { 0 };
        for g in first..first + resident {
            frames[g as usize] = Some(Frame::hot(false, 0));
        }
        let entry = DirEntry {
            exclusive: false,
            holders: 1 << me.0,
            epoch: 0,
            anchor: me.0,
            on_ssd: !dirty,
            unconfirmed: false,
        };
        let mut dir = vec![entry; if home { layout.pages_per_node as usize } else { 0 }];
        for e in &mut dir[resident as usize..] {
            e.holders = 0;
            e.anchor = SSD;
            e.on_ssd = true;
        }
        let state = NodeState::new(frames, dir);
        let free_target = Self::free_target(capacity, &layout, &config);
        Arc::new(Node {
            nic,
            layout,
            config,
            state: Arc::new(Mutex::new(state)),
            settled: Notify::new(),
            capacity,
            pressure: Notify::new(),
            free_target,
            errors: ErrorSlot::new(),
            stats: Mutex::new(Stats::default()),
            owed,
            gate: Mutex::new(Gate::default()),
            lines: Mutex::new(Lines::default()),
        })
    }

    /// Free frames the providers keep: `free_percent` of the cache, at least one per worker
    /// and one eviction batch per provider, at most a quarter of the cache. The paper's 1 % of
    /// 150 GB (~390 K frames) is far more than its 20 workers need and than the pages its
    /// providers can have in flight; a scaled-down cache's 1 % is not: a round chooses at most
    /// the frames missing from the target, so a 20-frame target caps a provider at 20 pages
    /// per storage write (78 µs), a rate the paper's providers never hit. A batch per provider
    /// keeps the code's batching (32 pages) at any scale.
    fn free_target(capacity: u64, layout: &Layout, config: &Config) -> u64 {
        if capacity == u64::MAX {
            return 0;
        }
        let e = &config.eviction;
        let target = ((capacity as f64 * e.free_percent / 100.0).ceil() as u64)
            .max(layout.threads)
            .max(layout.providers * layout.batch);
        target.min(capacity / 4).max(1)
    }

    /// Frames kept free at the start: the providers' target plus one per worker.
    fn reserve(layout: &Layout, config: &Config) -> u64 {
        if layout.providers == 0 {
            return 0;
        }
        layout.threads + config.eviction.batch as u64
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, NodeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn stats(&self) -> std::sync::MutexGuard<'_, Stats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ablation (`config.local`): charge what `touches` cost thread `thread` (workers,
    /// then handlers and providers by mailbox index) on the node's shared latch and list
    /// lines, as CPU (the waits are spinning). Nothing, and no await, by default.
    pub(super) async fn charge_lines(&self, nic: &N, thread: u32, touches: &[Touch]) {
        let o = &self.config.local;
        if !o.active() {
            return;
        }
        let owed = {
            let mut l = self.lines.lock().unwrap_or_else(|e| e.into_inner());
            l.charge(o, thread, nic.now().0, touches)
        };
        if owed > 0 {
            self.stats().local_line_ns += owed;
            nic.cpu(Nanos(owed)).await;
        }
    }

    pub(super) fn me(&self) -> NodeId {
        self.nic.node()
    }

    pub(super) fn mutant(&self) -> Mutant {
        self.config.mutant
    }

    /// The node's daemons: its message-handler tasks and, if `providers`, its page providers.
    pub fn daemons(self: &Arc<Self>, providers: bool) -> Vec<crate::nic::Task> {
        let tasks = self.config.handler_tasks;
        let mut daemons: Vec<crate::nic::Task> =
            (0..tasks).map(|i| -> crate::nic::Task { Box::pin(self.clone().handler(i, tasks)) }).collect();
        if providers {
            for i in 0..self.layout.providers as u16 {
                daemons.push(Box::pin(self.clone().provider(i)));
            }
        }
        daemons
    }

    pub fn worker(&self, index: u32) -> Worker<N> {
        self.agent(index, index as u16)
    }

    /// A sender of requests with mailbox index `index` (workers, then page providers) on its
    /// own channel `qp`.
    pub(super) fn agent(&self, index: u32, qp: u16) -> Worker<N> {
        Worker { nic: self.nic.qp(qp), index, seq: vec![0; self.layout.nodes as usize], jitter: 0 }
    }

    /// The record's word in this node's frame: read it, or replace it; returns the old value.
    fn touch(&self, key: u64, access: Access) -> u64 {
        let at = self.layout.record(self.me(), key).offset_bytes;
        let old = self.nic.local().load(at);
        if let Access::Write(v) = access {
            self.nic.local().store(at, v);
        }
        old
    }

    /// One operation on `key`'s record through the page API: the local hot path if this node
    /// holds the page in a sufficient mode, else remote invocation. Returns the value read or
    /// replaced, and whether it was a hot-path hit.
    pub async fn access(&self, w: &mut Worker<N>, key: u64, access: Access) -> ProtocolResult<(u64, bool)> {
        let g = key / self.layout.keys_per_page;
        let exclusive = matches!(access, Access::Write(_));
        loop {
            enum Next {
                Done(u64),
                Wait,
                Remote(bool),
            }
            let next = {
                let mut st = self.lock();
                match st.frames[g as usize] {
                    Some(f) if f.state == FrameState::Hot && (f.exclusive || !exclusive) => {
                        Next::Done(self.touch(key, access))
                    }
                    Some(f) if f.state != FrameState::Hot => Next::Wait,
                    Some(f) => {
                        st.frames[g as usize] =
                            Some(Frame { state: FrameState::Upgrading, answered: false, ..f });
                        Next::Remote(true)
                    }
                    None => {
                        // R1: the frame exists (fetching) before the request leaves.
                        st.set(g, Some(Frame::fetching(exclusive)));
                        self.after_insert(&st);
                        Next::Remote(false)
                    }
                }
            };
            match next {
                Next::Done(v) => {
                    self.charge_lines(&w.nic, w.index, &[Touch::Lookup, Touch::Access]).await;
                    self.nic.cpu(Nanos(self.config.hit_ns())).await;
                    return Ok((v, true));
                }
                Next::Wait => {
                    // Bounded, so a wake-up lost between threads on hardware only costs time.
                    let _ = timeout(&w.nic, Nanos::from_us(20), self.settled.notified()).await;
                }
                Next::Remote(has_copy) => {
                    let touches: &[Touch] =
                        if has_copy { &[Touch::Lookup] } else { &[Touch::Lookup, Touch::Insert] };
                    self.charge_lines(&w.nic, w.index, touches).await;
                    let v = self.remote(w, g, exclusive, Then::Touch(key, access), has_copy).await;
                    self.settled.notify_all();
                    let v = v?;
                    self.nic.cpu(Nanos(self.config.hit_ns())).await;
                    return Ok((v, false));
                }
            }
        }
    }

    /// Remote invocation (Fig. 2 lower half, Fig. 3–5): ask the directory, fetch from the
    /// source it names, invalidate the holders it lists, install, operate.
    async fn remote(
        &self,
        w: &mut Worker<N>,
        g: u64,
        exclusive: bool,
        then: Then,
        mut has_copy: bool,
    ) -> ProtocolResult<u64> {
        let dir = self.layout.directory(g);
        let me = self.me();
        if has_copy {
            self.stats().upgrades += 1;
        }
        let mut refusals = 0;
        loop {
            let mut from_ssd = false;
            let resp = if dir == me {
                // Baselines: wait for the page's gate (FIFO: bypassing queued remote requests).
                baselines::enter_local(self, w, g).await;
                // R4: the directory's own workers take the same path, without messages.
                loop {
                    let decision = {
                        let mut st = self.lock();
                        let slot = (g % self.layout.pages_per_node) as usize;
                        let d = own(
                            &mut st,
                            me.0,
                            me.0,
                            g,
                            slot,
                            exclusive,
                            has_copy,
                            self.mutant(),
                            self.owed.as_ref(),
                        );
                        if let Decision::Reply { from_ssd: true, .. } = &d {
                            note_ssd_read(&st, &self.layout, &self.stats, g, me.0);
                        }
                        d
                    };
                    match decision {
                        Decision::Reply { response, from_ssd: ssd, .. } => {
                            from_ssd = ssd;
                            break response;
                        }
                        Decision::Requeue => w.nic.sleep(Nanos(self.config.poll_ns)).await,
                    }
                }
            } else {
                let req = Request { kind: Kind::Own, page: g, exclusive, has_copy, epoch: 0, seq: 0 };
                let resp = self.call(w, dir, req).await?;
                if resp.code == Code::Retry {
                    // Busy polling: a transfer is in flight; back off and ask again.
                    baselines::back_off(self, w, refusals).await;
                    refusals += 1;
                    continue;
                }
                resp
            };
            if from_ssd {
                // The directory's own worker reads the page from its device into its frame.
                let (at, len) = (self.layout.frame(g), self.layout.page_bytes as u32);
                w.nic.ssd_read(self.layout.ssd_offset(g), at, len).await.map_err(|e| {
                    ProtocolError::message(me, w.nic.now(), "SSDR", me, 0, "scalestore page", e)
                })?;
                self.stats().ssd_reads += 1;
            }
            {
                let mut st = self.lock();
                let f = st.frames[g as usize].as_mut().expect("own frame while fetching");
                f.grant = Some(resp.epoch);
                f.answered = true;
                f.by_copy = resp.source.is_some() && !resp.take;
            }
            match (resp.source, resp.invalidate != 0, resp.page_sent) {
                (Some(_), _, _) if resp.take => self.stats().exclusive_conflicts += 1,
                (_, true, _) => self.stats().shared_conflicts += 1,
                _ => self.stats().base_cases += 1,
            }
            if let Some(source) = resp.source {
                let kind = if resp.take { Kind::Take } else { Kind::Copy };
                let req =
                    Request { kind, page: g, exclusive, has_copy: false, epoch: resp.epoch as u64, seq: 0 };
                let got = self.call(w, NodeId(source), req).await?;
                match got.code {
                    Code::WithPage => {}
                    Code::CopyFailed => {
                        // The sharer lost its copy to a later exclusive request: ask again.
                        self.stats().copy_restarts += 1;
                        has_copy = false;
                        baselines::done(self, w, g).await?; // Baselines: give up the turn first.
                        continue;
                    }
                    code => {
                        panic!("owner stability: n{me} was sent to n{source} for page {g} and got {code:?}")
                    }
                }
            } else if !resp.page_sent {
                let lost =
                    self.lock().frames[g as usize].is_some_and(|f| f.lost || f.state == FrameState::Fetching);
                assert!(!lost, "n{me} was granted page {g} without a page but has no copy");
            }
            // The ablation's page transfer without the handler's write: tell the handler that
            // sent the page (the source, else a remote directory) and wait for its ack.
            let sender = resp.source.or((resp.page_sent && dir != me).then_some(dir.0));
            if let (true, Some(n)) = (self.config.transfer_done_message, sender) {
                let req = Request {
                    kind: Kind::Transferred,
                    page: g,
                    exclusive,
                    has_copy: false,
                    epoch: 0,
                    seq: 0,
                };
                self.call(w, NodeId(n), req).await?;
            }
            let mut targets = resp.invalidate;
            if self.mutant() == Mutant::SkipInvalidations {
                targets = 0;
            }
            if self.mutant() == Mutant::FirstSharerOnly && targets != 0 {
                targets &= 1u64 << targets.trailing_zeros();
            }
            let install = |node: &Self| match then {
                Then::Touch(key, access) => node.install(g, key, access, resp.epoch),
                Then::Latch => {
                    node.install_latched(g, exclusive, resp.epoch);
                    0
                }
            };
            if self.mutant() == Mutant::WriteBeforeAcks {
                let v = install(self);
                self.invalidate(w, g, targets, resp.epoch).await?;
                baselines::done(self, w, g).await?;
                return Ok(v);
            }
            self.invalidate(w, g, targets, resp.epoch).await?;
            let v = install(self);
            // Baselines: the acknowledgment that frees the page at its directory.
            baselines::done(self, w, g).await?;
            return Ok(v);
        }
    }

    /// Invalidations in parallel (spec §3.6): post them all, then collect the acks.
    async fn invalidate(&self, w: &mut Worker<N>, g: u64, targets: u64, epoch: u32) -> ProtocolResult<()> {
        let mut sent = Vec::new();
        for n in bits(targets) {
            let req = Request {
                kind: Kind::Inval,
                page: g,
                exclusive: true,
                has_copy: false,
                epoch: epoch as u64,
                seq: 0,
            };
            sent.push((NodeId(n), self.post(w, NodeId(n), req).await?));
        }
        for (n, seq) in sent {
            self.response(w, n, seq).await?;
        }
        Ok(())
    }

    /// The page is here: make the frame Hot in the requested mode and run the operation in the
    /// same step (so each chain member operates before it passes the page on, R2).
    fn install(&self, g: u64, key: u64, access: Access, epoch: u32) -> u64 {
        let mut st = self.lock();
        let f = st.frames[g as usize].expect("frame while fetching");
        let exclusive = matches!(access, Access::Write(_));
        let doomed = !exclusive
            && f.inval.is_some_and(|i| epoch_after(i, f.grant.unwrap_or(epoch)))
            && self.mutant() != Mutant::InstallDoomed;
        // Pins outlive the install: a handler may be writing this frame out (the directory's
        // copy to a shared requester) while the page arrives; its completion unpins.
        let mut hot = Frame::hot(exclusive, f.grant.unwrap_or(epoch));
        hot.pins = f.pins;
        hot.last_epoch = st.epoch;
        st.set(g, Some(hot));
        let v = self.touch(key, access);
        if doomed {
            // Invalidated while it arrived: serve this one read, keep no copy (once unpinned).
            match st.frames[g as usize].as_mut() {
                Some(f) if f.pins > 0 => f.state = FrameState::Doomed,
                _ => st.set(g, None),
            }
        }
        v
    }

    /// Page-latch mode: the page is here; make the frame Hot in the requested mode, latched
    /// for the requesting worker (so a transfer waits until its operation is done, R2). A
    /// shared fetch invalidated in flight becomes `Doomed`: it serves this latch holder only.
    fn install_latched(&self, g: u64, exclusive: bool, epoch: u32) {
        let mut st = self.lock();
        let f = st.frames[g as usize].expect("frame while fetching");
        let doomed = !exclusive
            && f.inval.is_some_and(|i| epoch_after(i, f.grant.unwrap_or(epoch)))
            && self.mutant() != Mutant::InstallDoomed;
        let mut hot = Frame::hot(exclusive, f.grant.unwrap_or(epoch));
        hot.latch = if exclusive { -1 } else { 1 };
        hot.pins = f.pins;
        hot.last_epoch = st.epoch;
        if doomed {
            hot.state = FrameState::Doomed;
        }
        st.set(g, Some(hot));
    }

    /// A handler's page WRITE out of frame `g` completed.
    pub(super) fn unpin(&self, g: u64) {
        let mut st = self.lock();
        let f = st.frames[g as usize].as_mut().expect("a pinned frame stays");
        f.pins -= 1;
        if f.pins == 0 && f.latch == 0 && f.state == FrameState::Doomed {
            st.set(g, None);
        }
        drop(st);
        self.settled.notify_all();
    }

    /// Page-latch mode (the guards of spec §3.12): latch page `g` for this worker, shared or
    /// exclusive, with the ownership that needs (local hot path, else remote invocation).
    /// Latched frames are not handed away: a handler re-polls a transfer or invalidation until
    /// the latch is released (R2). Returns whether it was a hot-path hit.
    pub async fn lock_page(&self, w: &mut Worker<N>, g: u64, exclusive: bool) -> ProtocolResult<bool> {
        loop {
            enum Next {
                Done,
                Wait,
                Full,
                Remote(bool),
            }
            let next = {
                let mut st = self.lock();
                let (epoch, full) = (st.epoch, st.used >= self.capacity);
                match st.frames[g as usize].as_mut() {
                    Some(f) if f.state == FrameState::Hot && !f.wanted && (f.exclusive || !exclusive) => {
                        f.last_epoch = f.last_epoch.max(epoch);
                        if exclusive && f.latch == 0 && f.pins == 0 {
                            f.latch = -1;
                            Next::Done
                        } else if !exclusive && f.latch >= 0 {
                            f.latch += 1;
                            Next::Done
                        } else {
                            Next::Wait
                        }
                    }
                    Some(f) if f.state == FrameState::Hot && !f.wanted && f.latch == 0 && f.pins == 0 => {
                        // An upgrade: the old copy stays unchanged until the answer comes.
                        *f = Frame { state: FrameState::Upgrading, answered: false, latch: -1, ..*f };
                        Next::Remote(true)
                    }
                    Some(_) => Next::Wait,
                    None if full => Next::Full,
                    None => {
                        // R1: the frame exists (fetching, latched) before the request leaves.
                        st.set(g, Some(Frame { latch: -1, ..Frame::fetching(exclusive) }));
                        self.after_insert(&st);
                        Next::Remote(false)
                    }
                }
            };
            match next {
                Next::Done => {
                    let touches = [Touch::Lookup, Touch::Access, Touch::Latch(g, exclusive)];
                    self.charge_lines(&w.nic, w.index, &touches).await;
                    self.nic.cpu(Nanos(self.config.hit_ns())).await;
                    let mut s = self.stats();
                    s.latches += 1;
                    s.latch_hits += 1;
                    return Ok(true);
                }
                Next::Wait => {
                    let _ = timeout(&w.nic, Nanos::from_us(20), self.settled.notified()).await;
                }
                Next::Full => self.wait_for_frame(w).await,
                Next::Remote(has_copy) => {
                    let touches: &[Touch] =
                        if has_copy { &[Touch::Lookup] } else { &[Touch::Lookup, Touch::Insert] };
                    self.charge_lines(&w.nic, w.index, touches).await;
                    let r = self.remote(w, g, exclusive, Then::Latch, has_copy).await;
                    self.settled.notify_all();
                    r?;
                    if exclusive {
                        // An upgrade may have served copies of the old page while it waited:
                        // no write until their page WRITEs have read it (they unpin).
                        self.wait_unpinned(w, g).await;
                    }
                    self.charge_lines(&w.nic, w.index, &[Touch::Latch(g, exclusive)]).await;
                    self.nic.cpu(Nanos(self.config.hit_ns())).await;
                    self.stats().latches += 1;
                    return Ok(false);
                }
            }
        }
    }

    /// Wait until no handler's page WRITE reads frame `g` (this worker holds it exclusively).
    /// Under the `no-pins` mutant nothing pins a frame, so this returns at once.
    async fn wait_unpinned(&self, w: &Worker<N>, g: u64) {
        while self.lock().frames[g as usize].is_some_and(|f| f.pins > 0) {
            self.stats().pin_waits += 1;
            let _ = timeout(&w.nic, Nanos::from_us(20), self.settled.notified()).await;
        }
    }

    /// Release a latch taken by [`Node::lock_page`] (a doomed copy goes with it).
    pub fn unlock_page(&self, g: u64) {
        let mut st = self.lock();
        let f = st.frames[g as usize].as_mut().expect("a latched frame stays");
        match f.state {
            FrameState::Doomed => st.set(g, None),
            FrameState::Hot if f.latch < 0 => f.latch = 0,
            FrameState::Hot if f.latch > 0 => f.latch -= 1,
            s => panic!("page {g} unlatched in state {s:?} with latch {}", f.latch),
        }
        drop(st);
        self.settled.notify_all();
    }

    /// A frame was inserted: wake the page providers once free frames fall below their target.
    fn after_insert(&self, st: &NodeState) {
        if self.capacity.saturating_sub(st.used) < self.free_target {
            self.pressure.notify_all();
        }
    }

    /// The cache is full: wake the page providers and wait for a frame.
    async fn wait_for_frame(&self, w: &Worker<N>) {
        self.stats().frame_waits += 1;
        self.pressure.notify_all();
        let _ = timeout(&w.nic, Nanos::from_us(20), self.settled.notified()).await;
    }

    pub(super) async fn post(&self, w: &mut Worker<N>, to: NodeId, req: Request) -> ProtocolResult<u16> {
        self.post_after(w, to, req, None).await
    }

    /// Post `req`, after `before` on the same channel if given (an eviction list).
    pub(super) async fn post_after(
        &self,
        w: &mut Worker<N>,
        to: NodeId,
        mut req: Request,
        before: Option<Verb>,
    ) -> ProtocolResult<u16> {
        let seq = &mut w.seq[to.index()];
        *seq = seq.wrapping_add(1).max(1);
        req.seq = *seq;
        let (arg, head) = req.encode();
        let at = self.layout.request(self.me(), w.index);
        w.nic.cpu(Nanos(self.config.cpu.request_ns)).await;
        self.stats().messages += 1;
        let box_addr = RemoteAddr::new(to, at);
        let verbs = [
            Verb::WriteWord { remote: box_addr, value: arg },
            Verb::WriteWord { remote: box_addr.add(8), value: head },
        ];
        let verbs = if matches!(req.kind, Kind::Take | Kind::Inval) { &verbs[..] } else { &verbs[1..] };
        match before {
            Some(v) => {
                let all: Vec<Verb> = std::iter::once(v).chain(verbs.iter().copied()).collect();
                w.nic.try_batch(&all, "scalestore eviction list").await?;
            }
            None => {
                w.nic.try_batch(verbs, "scalestore request").await?;
            }
        }
        Ok(req.seq)
    }

    pub(super) async fn response(&self, w: &Worker<N>, from: NodeId, seq: u16) -> ProtocolResult<Response> {
        let at = self.layout.response(w.index, from);
        let cond = WordCond::MaskEq { mask: SEQ_MASK, value: (seq as u64) << 48 };
        let head = w.nic.wait_word(at + 8, cond, Nanos(self.config.poll_ns), None).await.map_err(|e| {
            crate::common::error::ProtocolError::message(
                self.me(),
                w.nic.now(),
                "POLL",
                from,
                0,
                "scalestore response",
                e,
            )
        })?;
        // The argument after the head (see `Region::load_acquire`).
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        Ok(Response::decode(self.nic.local().load(at), head))
    }

    async fn call(&self, w: &mut Worker<N>, to: NodeId, req: Request) -> ProtocolResult<Response> {
        let seq = self.post(w, to, req).await?;
        self.response(w, to, seq).await
    }
}

/// Diagnostic (Figs. 12/13): the directory answered `requester`'s request for page `g` from its
/// storage device while other nodes held the page in memory (its anchor had left: copies are
/// only asked of the anchor, `directory::own`).
pub(super) fn note_ssd_read(st: &NodeState, layout: &Layout, stats: &Mutex<Stats>, g: u64, requester: u16) {
    let slot = (g % layout.pages_per_node) as usize;
    if st.dir[slot].holders & !(1u64 << requester) != 0 {
        stats.lock().unwrap_or_else(|e| e.into_inner()).ssd_reads_with_sharers += 1;
    }
}
