//! `impl Nic for HwNic` over libibverbs.
//!
//! ```text
//!  node i                                             node j
//!  verb QP (i→j, c) ═══════════ one RC connection ═══ verb QP (j→i, c)
//!  verb QP (i→i, c) ═══ loopback ═══ resp QP (i, c)   (verbs on its own region go via the NIC,
//!                                                      so they stay atomic against remote ones)
//!  msg  QP (i↔j)    ═══════════ one RC connection ═══ msg QP (j↔i)    (SEND/RECV, all ports)
//!  send CQ ← every send queue      recv CQ ← every msg QP's receive queue
//! ```
//!
//! A batch takes a completion *slot* on its QP, posts its verbs as one chained list whose last
//! work request alone is signaled, and waits for that slot. Atomics' old values (and the value
//! of an inline `WriteWord`) live in the slot's scratch words. The `wr_id` of every work request
//! names `(qp index, slot, generation, index in batch)`, so an error completion of any verb of
//! the batch — errors complete even when unsignaled — is charged to the right batch and verb.
//! A batch's future first polls the CQs itself while its worker has nothing else to run
//! (`VerbWait`); after that, idle runtime workers poll both CQs (`Poller`) and wake it.
//!
//! Here: the node's shared state, verb batches and their wait, the `Nic` impl. `slots` holds
//! the completion slots, `messages` SEND/RECV and the inboxes, `setup` the construction,
//! `local` the seam extensions that need no new verb (unsignaled posts, `wait_word`, the
//! storage file). Masked atomics are refused with `NicError::Unsupported` (they need mlx5
//! extended atomics, which this backend does not bind); device memory is emulated by a second
//! registered region (see `HwConfig::device_memory_bytes`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use dmsim_protocols::memory::Region;
use dmsim_protocols::nic::{self, BatchResult, Message, Nanos, NicError, NicResult, NodeId, Verb, MAX_BATCH};

/// What an atomic's result word holds until the device writes the old value into it
/// (checked at completion; a protocol word equal to it would be misread as a fault).
const UNWRITTEN: u64 = 0x5eed_dead_5eed_dead;

/// A batch's verb names, `READ+CAS`, for errors and trace lines.
fn batch_names(verbs: &[Verb]) -> String {
    verbs.iter().map(|v| v.name()).collect::<Vec<_>>().join("+")
}

mod local;
mod messages;
mod setup;
mod slots;

pub(crate) use setup::{connect, setup_local};

use messages::Inbox;
use slots::{decode, encode, QpState, SlotWait};

use crate::config::HwConfig;
use crate::runtime::{Poller, Runtime, Timer};
use crate::verbs::{Completion, Cq, LocalBuf, Mr, Qp, RemoteBuf, SendOp, SendWr};

/// How long a verb's future polls the CQ itself before suspending: `DMSIM_HW_SPIN_US`
/// microseconds (default 200; 0 turns inline polling off).
fn spin_budget() -> Duration {
    static V: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        let us = std::env::var("DMSIM_HW_SPIN_US").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
        Duration::from_micros(us)
    })
}

/// Waits for a posted batch, bounded by `verb_timeout` (`Err(())` when it passes).
///
/// The fast path costs no timer and no trip through the run queue: on its first poll the future
/// polls the CQs itself (`NodeState::spin`) for up to [`spin_budget`], as long as no other task
/// is ready — the worker would otherwise spin on the same CQs in its idle loop (and fire due
/// timers, which the spin does too), and a wake-up through the queue adds a waker clone, a queue
/// round trip and a re-poll of the task. As soon as another task is ready the future goes behind
/// it, done or not, so the order in which tasks run is the one a suspending verb gives. Only if
/// the batch is still outstanding does it leave its waker in the slot and arm the
/// `verb_timeout` timer (measured from the start of the wait, give or take 16 CQ polls), so
/// every wait stays bounded.
struct VerbWait<'a, 'w> {
    node: &'a NodeState,
    wait: &'w SlotWait<'a>,
    /// When the wait started, read only once it takes a while (under emulation a clock read
    /// costs as much as a CQ poll): by `NodeState::spin`, or when suspending.
    started: Option<Instant>,
    spun: bool,
    timer: Option<Timer>,
}

impl<'a, 'w> VerbWait<'a, 'w> {
    fn new(node: &'a NodeState, wait: &'w SlotWait<'a>) -> Self {
        VerbWait { node, wait, started: None, spun: false, timer: None }
    }
}

impl Future for VerbWait<'_, '_> {
    type Output = Result<Result<(), Completion>, ()>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if !this.spun {
            this.spun = true;
            let budget = spin_budget();
            if !budget.is_zero() {
                if let Spin::Done(r) = this.node.spin(this.wait, budget, &mut this.started) {
                    return Poll::Ready(Ok(r));
                }
            }
            // Other tasks are ready: go behind them even if the batch has finished, as a
            // suspended verb would (and as the simulator orders a completion after them).
            if this.wait.check(Some(cx.waker())).is_some() {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
        } else if let Some(r) = this.wait.check(Some(cx.waker())) {
            return Poll::Ready(Ok(r));
        }
        let deadline = *this.started.get_or_insert_with(Instant::now) + this.node.config.verb_timeout;
        let timer = this.timer.get_or_insert_with(|| this.node.runtime.timer_at(deadline));
        match Pin::new(timer).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(())),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct PeerRegion {
    addr: u64,
    rkey: u32,
}

/// Everything one node's handles share.
pub(crate) struct NodeState {
    me: NodeId,
    device: String,
    cluster: nic::Cluster,
    config: HwConfig,
    runtime: Runtime,
    region_mr: Arc<Mr>,
    /// Emulated device memory (`HwConfig::device_memory_bytes`), if any: kept registered for
    /// the peers' verbs (this node reaches it only by verbs too, like real on-chip memory).
    _device_mr: Option<Arc<Mr>>,
    /// The storage file (`HwConfig::ssd_path`), if any.
    ssd: Option<std::fs::File>,
    /// Every node's device memory region (`rkey` 0 and size 0: none).
    device_peers: Vec<PeerRegion>,
    device_bytes: Vec<u64>,
    scratch_mr: Arc<Mr>,
    msg_send_mr: Arc<Mr>,
    msg_recv_mr: Arc<Mr>,
    peers: Vec<PeerRegion>,
    qps: Vec<QpState>,
    /// `verb_qp[target][channel]` → index into `qps`.
    verb_qp: Vec<Vec<usize>>,
    /// `msg_qp[peer]` → index into `qps` (None for this node).
    msg_qp: Vec<Option<usize>>,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    gone: Vec<AtomicBool>,
    inbox: Mutex<Inbox>,
    poll_lock: Mutex<()>,
    in_flight: AtomicUsize,
    /// `DMSIM_HW_TRACE`: one line per verb batch, message and mark (debugging runs), to
    /// stderr or a ring (`crate::trace`).
    trace: bool,
    /// Loopback responder QPs: kept alive, never posted to.
    _resp: Vec<Arc<Qp>>,
}

impl NodeState {
    fn scratch_offset(&self, qp_index: usize, slot: u32) -> u64 {
        ((qp_index as u64 * self.config.qp_depth as u64) + slot as u64) * (MAX_BATCH as u64 * 8)
    }
    fn completion_error(&self, qs: &QpState, c: &Completion, verb: &str) -> NicError {
        let target = qs.target;
        if c.peer_unreachable() {
            self.gone[target.index()].store(true, Ordering::Release);
            return NicError::PeerGone { node: target };
        }
        if c.flushed() && self.gone[target.index()].load(Ordering::Acquire) {
            return NicError::PeerGone { node: target };
        }
        NicError::QpError {
            qp: qs.name.clone(),
            detail: format!("{verb} (wr_id {:#x}): {}", c.wr_id, c.status_str()),
        }
    }

    fn timeout_error(&self, qs: &QpState, what: &str, wr_id: u64) -> NicError {
        NicError::Timeout {
            what: format!("{what} on {} (wr_id {wr_id:#x})", qs.name),
            after: Nanos(self.config.verb_timeout.as_nanos() as u64),
        }
    }

    /// The QP and slot a batch of `verbs` on `channel` goes out on, and its work requests.
    fn prepare(&self, channel: u16, verbs: &[Verb]) -> NicResult<(&QpState, u32, u32, Vec<SendWr>)> {
        let target = nic::validate_batch_in(&self.cluster, &self.device_bytes, self.me, verbs)?;
        if verbs.iter().any(|v| v.is_masked()) {
            return Err(NicError::Unsupported {
                feature: "masked atomics",
                detail: format!(
                    "{}: needs mlx5 extended atomics (mlx5dv), which dmsim-hw does not bind; \
                     dmsim_protocols::nic::masked::emulate is an explicit CAS-loop emulation",
                    self.device
                ),
            });
        }
        if self.gone[target.index()].load(Ordering::Acquire) {
            return Err(NicError::PeerGone { node: target });
        }
        let channels = self.config.channels.max(1);
        let qs = &self.qps[self.verb_qp[target.index()][(channel % channels) as usize]];
        let (slot, gen) = qs.acquire(verbs.len() as u32)?;
        let (host, device) = (self.peers[target.index()], self.device_peers[target.index()]);
        let scratch = self.scratch_offset(qs.index, slot);
        let mut wrs = Vec::with_capacity(verbs.len());
        // `offset_bytes` carries the device bit for device addresses: pick the region by it.
        // The peer's base address came over the network: add with a check, not a wrap.
        let remote = |offset: u64| -> NicResult<RemoteBuf> {
            let peer = if offset & nic::RemoteAddr::DEVICE_BIT != 0 { device } else { host };
            let within = offset & !nic::RemoteAddr::DEVICE_BIT;
            match peer.addr.checked_add(within) {
                Some(addr) => Ok(RemoteBuf { addr, rkey: peer.rkey }),
                None => Err(NicError::QpError {
                    qp: qs.name.clone(),
                    detail: format!("remote address {:#x} + offset {within:#x} overflows", peer.addr),
                }),
            }
        };
        // One verb's work request: the op, the local region, offset and length.
        let build = |verb: &Verb, word: u64| -> NicResult<(SendOp, &Arc<Mr>, u64, u32)> {
            Ok(match *verb {
                Verb::Read { remote: r, local_bytes, len_bytes } => {
                    (SendOp::Read(remote(r.offset_bytes)?), &self.region_mr, local_bytes, len_bytes)
                }
                Verb::Write { remote: r, local_bytes, len_bytes } => {
                    (SendOp::Write(remote(r.offset_bytes)?), &self.region_mr, local_bytes, len_bytes)
                }
                Verb::WriteWord { remote: r, value } => {
                    let target = remote(r.offset_bytes)?;
                    self.scratch_mr.region().store(word, value);
                    (SendOp::Write(target), &self.scratch_mr, word, 8)
                }
                Verb::Cas { remote: r, expect, swap } => {
                    self.scratch_mr.region().store(word, UNWRITTEN);
                    (
                        SendOp::Cas { remote: remote(r.offset_bytes)?, compare: expect, swap },
                        &self.scratch_mr,
                        word,
                        8,
                    )
                }
                Verb::Faa { remote: r, add } => {
                    self.scratch_mr.region().store(word, UNWRITTEN);
                    (SendOp::Faa { remote: remote(r.offset_bytes)?, add }, &self.scratch_mr, word, 8)
                }
                Verb::MaskedCas { .. } | Verb::MaskedFaa { .. } => unreachable!("refused above"),
            })
        };
        for (i, verb) in verbs.iter().enumerate() {
            let built = build(verb, scratch + 8 * i as u64);
            let (op, mr, local_offset, len) = match built {
                Ok(b) => b,
                Err(e) => {
                    qs.cancel(slot);
                    return Err(e);
                }
            };
            let local = match LocalBuf::new(mr, local_offset, len) {
                Ok(l) => l,
                Err(e) => {
                    qs.cancel(slot);
                    return Err(NicError::QpError { qp: qs.name.clone(), detail: e.to_string() });
                }
            };
            wrs.push(SendWr {
                wr_id: encode(qs.index, slot, gen, i),
                op,
                local,
                signaled: i + 1 == verbs.len(),
            });
        }
        Ok((qs, slot, gen, wrs))
    }

    async fn batch(&self, channel: u16, verbs: &[Verb]) -> NicResult<BatchResult> {
        let (qs, slot, gen, wrs) = self.prepare(channel, verbs)?;
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let _in_flight = InFlight(&self.in_flight);
        if let Err(e) = qs.qp.post_send(&wrs) {
            qs.cancel(slot);
            return Err(NicError::QpError { qp: qs.name.clone(), detail: e.to_string() });
        }
        drop(wrs);
        let wait = SlotWait { qs, slot, gen };
        let outcome = VerbWait::new(self, &wait).await;
        let names = || batch_names(verbs);
        if self.trace {
            let state = match &outcome {
                Ok(Ok(())) => Ok(wait.results(self, verbs)),
                Ok(Err(c)) => Err(c.status_str()),
                Err(()) => Err("timeout".into()),
            };
            let (me, now, verbs) = (self.me, self.runtime.now(), verbs.to_vec());
            crate::trace::line(move || {
                let state = state.map_or_else(|e| e, |r| format!("ok {:?}", r.as_slice()));
                format!("[{me} {now}] {} {verbs:?} -> {state}", batch_names(&verbs))
            });
        }
        match outcome {
            Err(()) => Err(self.timeout_error(qs, &names(), encode(qs.index, slot, gen, verbs.len() - 1))),
            Ok(Err(c)) => {
                let (_, _, _, i) = decode(c.wr_id);
                Err(self.completion_error(qs, &c, verbs.get(i).map_or("?", |v| v.name())))
            }
            // The slot (and so its scratch words) is released only when `wait` drops, after this.
            Ok(Ok(())) => {
                let results = wait.results(self, verbs);
                match verbs.iter().zip(results.as_slice()).position(|(v, &r)| v.is_atomic() && r == UNWRITTEN)
                {
                    None => Ok(results),
                    Some(i) => Err(self.unwritten_error(qs, &verbs[i])),
                }
            }
        }
    }

    /// An atomic whose completion reported success but whose old value never arrived: its
    /// result word still holds [`UNWRITTEN`]. Checked because Soft-RoCE in the VM let lock
    /// CASes take effect again after their holders' releases (DiFache NEEDS.md 'Atomic
    /// operations'), and a completion without its response was one explanation; 100 traced
    /// VM runs never tripped it. Nothing sound can be returned — the atomic may or may not
    /// run yet — so the batch fails with the device named as the culprit.
    fn unwritten_error(&self, qs: &QpState, verb: &Verb) -> NicError {
        crate::trace::line({
            let (me, now, verb) = (self.me, self.runtime.now(), *verb);
            move || format!("[{me} {now}] UNWRITTEN atomic result {verb:?}")
        });
        NicError::QpError {
            qp: qs.name.clone(),
            detail: format!(
                "{} completed successfully but the device never wrote its old value (a device or \
                 driver fault: the atomic may still take effect later); {verb:?}",
                verb.name()
            ),
        }
    }

    /// Polls the CQs from the calling task while the worker has nothing else to run: until
    /// `wait`'s batch finishes, another task is ready (woken by a completion, a message or a
    /// due timer — the idle loop's work, done here), or `budget` has passed since `started`
    /// (set on the first clock read, after a few polls).
    fn spin(&self, wait: &SlotWait<'_>, budget: Duration, started: &mut Option<Instant>) -> Spin {
        let mut rounds = 0u32;
        loop {
            self.poll();
            if self.runtime.has_ready_tasks() {
                return Spin::Yield;
            }
            if let Some(r) = wait.check(None) {
                return Spin::Done(r);
            }
            if self.runtime.fire_due_timers() > 0 {
                return Spin::Yield;
            }
            rounds = rounds.wrapping_add(1);
            // Reading the clock costs as much as a CQ poll under emulation: every 16th round.
            if rounds.is_multiple_of(16) && started.get_or_insert_with(Instant::now).elapsed() >= budget {
                return Spin::Yield;
            }
            std::hint::spin_loop();
        }
    }
}

/// How [`NodeState::spin`] ended.
enum Spin {
    /// The batch finished and no other task is ready: the caller continues at once.
    Done(Result<(), Completion>),
    /// Another task is ready (it runs first, as it would have if the verb had suspended right
    /// away), or the budget is spent.
    Yield,
}

struct InFlight<'a>(&'a AtomicUsize);
impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Poller for NodeState {
    fn poll(&self) -> usize {
        // One poller at a time keeps completions of one QP in order (message FIFO per port).
        let Ok(_guard) = self.poll_lock.try_lock() else { return 0 };
        // A poll that returns fewer than it asked for emptied the CQ: no second call.
        const POLL: usize = 16;
        let mut delivered = 0;
        while let Ok(POLL) = self.send_cq.poll_each(POLL, |c| {
            let (index, slot, gen, wr_index) = decode(c.wr_id);
            if self.qps.get(index).is_some_and(|qs| qs.complete(c, slot, gen, wr_index)) {
                delivered += 1;
            }
        }) {}
        while let Ok(POLL) = self.recv_cq.poll_each(POLL, |c| {
            self.handle_recv(c);
            delivered += 1;
        }) {}
        delivered
    }

    fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }
}

struct WeakPoller(std::sync::Weak<NodeState>);

impl Poller for WeakPoller {
    fn poll(&self) -> usize {
        self.0.upgrade().map_or(0, |n| n.poll())
    }
    fn busy(&self) -> bool {
        self.0.upgrade().is_some_and(|n| n.busy())
    }
}

/// The NIC of one node on real RDMA, bound to one channel.
#[derive(Clone)]
pub struct HwNic {
    node: Arc<NodeState>,
    channel: u16,
}

impl HwNic {
    /// The runtime this node's tasks run on.
    pub fn runtime(&self) -> &Runtime {
        &self.node.runtime
    }
    /// The backend configuration.
    pub fn config(&self) -> &HwConfig {
        &self.node.config
    }
    /// The RDMA device this node uses.
    pub fn device(&self) -> &str {
        &self.node.device
    }
}

impl HwNic {
    /// Diagnostics for `calibrate`: posts `verbs` as one batch `iterations` times, one at a
    /// time, on this handle's QP and polls the CQs from the calling thread until each finishes —
    /// no task, waker, timer or run queue, as perftest's loop does: the floor this process and
    /// QP reach. Per batch: (start, work requests built, `post_send` returned, completion
    /// seen). Call outside
    /// `block_on`, so that no worker polls the CQs meanwhile.
    pub(crate) fn spin_latency(&self, verbs: &[Verb], iterations: u32) -> NicResult<Vec<[Instant; 4]>> {
        let node = &*self.node;
        let mut out = Vec::with_capacity(iterations as usize);
        for _ in 0..iterations {
            let start = Instant::now();
            let (qs, slot, gen, wrs) = node.prepare(self.channel, verbs)?;
            let built = Instant::now();
            if let Err(e) = qs.qp.post_send(&wrs) {
                qs.cancel(slot);
                return Err(NicError::QpError { qp: qs.name.clone(), detail: e.to_string() });
            }
            let posted = Instant::now();
            let wait = SlotWait { qs, slot, gen };
            let deadline = posted + node.config.verb_timeout;
            let mut rounds = 0u32;
            let outcome = loop {
                node.poll();
                if let Some(r) = wait.check(None) {
                    break Some(r);
                }
                rounds = rounds.wrapping_add(1);
                if rounds.is_multiple_of(16) && Instant::now() >= deadline {
                    break None;
                }
            };
            let done = Instant::now();
            match outcome {
                Some(Ok(())) => out.push([start, built, posted, done]),
                Some(Err(c)) => return Err(node.completion_error(qs, &c, "spin_latency")),
                None => return Err(node.timeout_error(qs, "spin_latency", encode(qs.index, slot, gen, 0))),
            }
        }
        Ok(out)
    }

    /// An SSD read (`write: false`) or write on the node's storage file. The file I/O blocks
    /// this worker, so the task yields after it to let the others (and the CQ pollers) run.
    fn ssd(
        &self,
        write: bool,
        ssd_offset: u64,
        local_bytes: u64,
        len_bytes: u32,
    ) -> impl Future<Output = NicResult<()>> + Send {
        let node = self.node.clone();
        async move {
            node.ssd_io(write, ssd_offset, local_bytes, len_bytes)?;
            crate::runtime::yield_now().await;
            Ok(())
        }
    }
}

impl nic::Nic for HwNic {
    fn node(&self) -> NodeId {
        self.node.me
    }
    fn cluster(&self) -> &nic::Cluster {
        &self.node.cluster
    }
    fn local(&self) -> &Region {
        self.node.region_mr.region()
    }
    fn qp(&self, channel: u16) -> Self {
        HwNic { node: self.node.clone(), channel }
    }
    fn channel(&self) -> u16 {
        self.channel
    }
    fn now(&self) -> Nanos {
        self.node.runtime.now()
    }
    fn sleep(&self, duration: Nanos) -> impl Future<Output = ()> + Send {
        self.node.runtime.sleep(Duration::from_nanos(duration.0))
    }
    fn cpu(&self, _duration: Nanos) -> impl Future<Output = ()> + Send {
        // The work was real: nothing to charge. Yield once, so that a task charging CPU in a
        // loop still lets the other tasks and the CQ pollers run.
        crate::runtime::yield_now()
    }
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.node.runtime.spawn(task)
    }
    fn batch(&self, verbs: &[Verb]) -> impl Future<Output = NicResult<BatchResult>> + Send {
        self.node.batch(self.channel, verbs)
    }
    fn send(&self, to: NodeId, port: u16, bytes: Vec<u8>) -> impl Future<Output = NicResult<()>> + Send {
        self.node.send(to, port, bytes)
    }
    fn recv(&self, port: u16) -> impl Future<Output = NicResult<Message>> + Send {
        let node = &self.node;
        async move {
            let Some(bound) = node.config.recv_timeout else { return Ok(node.recv(port).await) };
            match node.runtime.timeout(bound, node.recv(port)).await {
                Ok(m) => Ok(m),
                Err(()) => Err(NicError::Timeout {
                    what: format!("recv on {} port {port}", node.me),
                    after: Nanos(bound.as_nanos() as u64),
                }),
            }
        }
    }
    fn mark(&self, label: &'static str, value: u64) {
        if self.node.trace {
            let (me, now) = (self.node.me, self.node.runtime.now());
            crate::trace::line(move || format!("[{me} {now}] mark {label} {value}"));
        }
    }
    fn post_unsignaled(&self, verbs: &[Verb]) -> NicResult<()> {
        self.node.post_unsignaled(self.channel, verbs)
    }
    fn device_memory_bytes(&self, node: NodeId) -> u64 {
        self.node.device_bytes.get(node.index()).copied().unwrap_or(0)
    }
    fn wait_word(
        &self,
        offset_bytes: u64,
        until: nic::WordCond,
        period: Nanos,
        timeout: Option<Nanos>,
    ) -> impl Future<Output = NicResult<u64>> + Send {
        self.node.wait_word(offset_bytes, until, period, timeout)
    }
    fn ssd_bytes(&self) -> u64 {
        self.node.ssd.as_ref().map_or(0, |_| self.node.config.ssd_bytes)
    }
    fn ssd_read(
        &self,
        ssd_offset: u64,
        local_bytes: u64,
        len_bytes: u32,
    ) -> impl Future<Output = NicResult<()>> + Send {
        self.ssd(false, ssd_offset, local_bytes, len_bytes)
    }
    fn ssd_write(
        &self,
        ssd_offset: u64,
        local_bytes: u64,
        len_bytes: u32,
    ) -> impl Future<Output = NicResult<()>> + Send {
        self.ssd(true, ssd_offset, local_bytes, len_bytes)
    }
}
