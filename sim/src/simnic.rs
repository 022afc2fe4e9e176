//! `SimNic`: the simulator's implementation of the NIC trait.
//!
//! A handle is `(node, channel, Arc<Env>)`; everything that changes lives in the run's world
//! (a thread-local), which the futures below reach on each poll. Each future posts its work on
//! its first poll and then waits for the engine to wake its task; spurious polls are harmless.
//!
//! `wait_word` registers a waiter with the engine (`engine/watch.rs`) instead of polling, and
//! `ssd_read`/`ssd_write` submit a command to the node's SSD model (`engine/ssd.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use dmsim_protocols::memory::Region;
use dmsim_protocols::nic::wait::{next_poll_ns, timeout_error};
use dmsim_protocols::nic::{
    check_range, BatchResult, Cluster, Message, Nanos, Nic, NicError, NicResult, NodeId, RemoteAddr, Verb,
    WordCond, MAX_BATCH, MAX_MESSAGE_BYTES,
};

use crate::engine::executor::{current_task, NOW_NS};
use crate::engine::world::{try_with_world, with_world};

/// What every handle of one simulation shares and never changes.
pub struct Env {
    pub cluster: Cluster,
    pub regions: Vec<Arc<Region>>,
    pub device_regions: Vec<Arc<Region>>,
    pub device_bytes: Vec<u64>,
    pub ssd_bytes: Vec<u64>,
}

#[derive(Clone)]
pub struct SimNic {
    node: NodeId,
    channel: u16,
    env: Arc<Env>,
}

impl SimNic {
    pub(crate) fn new(node: NodeId, channel: u16, env: Arc<Env>) -> SimNic {
        SimNic { node, channel, env }
    }
}

const NO_VERB: Verb = Verb::WriteWord { remote: RemoteAddr::new(NodeId(0), 0), value: 0 };

impl Nic for SimNic {
    fn node(&self) -> NodeId {
        self.node
    }
    fn cluster(&self) -> &Cluster {
        &self.env.cluster
    }
    fn local(&self) -> &Region {
        &self.env.regions[self.node.index()]
    }
    fn qp(&self, channel: u16) -> Self {
        SimNic { node: self.node, channel, env: self.env.clone() }
    }
    fn channel(&self) -> u16 {
        self.channel
    }
    fn now(&self) -> Nanos {
        Nanos(NOW_NS.with(|n| n.get()))
    }
    fn sleep(&self, duration: Nanos) -> impl Future<Output = ()> + Send {
        Timer { node: self.node, work_ns: duration.0, cpu: false, deadline_ns: None }
    }
    fn cpu(&self, duration: Nanos) -> impl Future<Output = ()> + Send {
        Timer { node: self.node, work_ns: duration.0, cpu: true, deadline_ns: None }
    }
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let node = self.node;
        with_world(|w| w.spawn(node, Box::pin(task), false));
    }
    fn batch(&self, verbs: &[Verb]) -> impl Future<Output = NicResult<BatchResult>> + Send {
        let mut array = [NO_VERB; MAX_BATCH];
        let len = verbs.len();
        if len <= MAX_BATCH {
            array[..len].copy_from_slice(verbs);
        }
        OpFuture { node: self.node, channel: self.channel, work: Work::Batch { verbs: array, len }, op: None }
    }
    fn send(&self, to: NodeId, port: u16, bytes: Vec<u8>) -> impl Future<Output = NicResult<()>> + Send {
        let too_long = (bytes.len() > MAX_MESSAGE_BYTES).then(|| NicError::QpError {
            qp: format!("{}→{to} channel {}", self.node, self.channel),
            detail: format!("message of {} bytes exceeds the {MAX_MESSAGE_BYTES}-byte maximum", bytes.len()),
        });
        let op = OpFuture {
            node: self.node,
            channel: self.channel,
            work: Work::Send { to, port, bytes },
            op: None,
        };
        async move {
            if let Some(e) = too_long {
                return Err(e);
            }
            op.await.map(|_| ())
        }
    }
    fn recv(&self, port: u16) -> impl Future<Output = NicResult<Message>> + Send {
        RecvFuture { node: self.node, port, task: None }
    }
    fn mark(&self, label: &'static str, value: u64) {
        let node = self.node;
        with_world(|w| w.mark(node, label, value));
    }
    fn post_unsignaled(&self, verbs: &[Verb]) -> NicResult<()> {
        if verbs.len() > MAX_BATCH {
            return Err(NicError::BadBatch { reason: "more than MAX_BATCH verbs" });
        }
        let (node, channel) = (self.node, self.channel);
        with_world(|w| w.post_unsignaled(node, channel, verbs))
    }
    fn device_memory_bytes(&self, node: NodeId) -> u64 {
        self.env.device_bytes.get(node.index()).copied().unwrap_or(0)
    }
    fn wait_word(
        &self,
        offset_bytes: u64,
        until: WordCond,
        period: Nanos,
        timeout: Option<Nanos>,
    ) -> impl Future<Output = NicResult<u64>> + Send {
        let valid = check_range(&self.env.cluster, RemoteAddr::new(self.node, offset_bytes), 8);
        WaitWord {
            node: self.node,
            region: self.env.regions[self.node.index()].clone(),
            offset: offset_bytes,
            until,
            period_ns: period.0.max(1),
            timeout,
            state: match valid {
                Ok(()) => WaitState::Start,
                Err(e) => WaitState::Invalid(Some(e)),
            },
        }
    }
    fn wait_write(
        &self,
        offset_bytes: u64,
        len_bytes: u64,
        period: Nanos,
        timeout: Option<Nanos>,
    ) -> impl Future<Output = NicResult<bool>> + Send {
        let valid =
            check_range(&self.env.cluster, RemoteAddr::new(self.node, offset_bytes), len_bytes.max(8));
        WaitWrite {
            node: self.node,
            lo: offset_bytes,
            hi: offset_bytes + len_bytes.max(8),
            period_ns: period.0.max(1),
            timeout,
            state: match valid {
                Ok(()) => WaitState::Start,
                Err(e) => WaitState::Invalid(Some(e)),
            },
        }
    }
    fn ssd_bytes(&self) -> u64 {
        self.env.ssd_bytes[self.node.index()]
    }
    fn ssd_read(
        &self,
        ssd_offset: u64,
        local_bytes: u64,
        len_bytes: u32,
    ) -> impl Future<Output = NicResult<()>> + Send {
        SsdFuture { node: self.node, write: false, ssd_offset, local_bytes, len: len_bytes as u64, req: None }
    }
    fn ssd_write(
        &self,
        ssd_offset: u64,
        local_bytes: u64,
        len_bytes: u32,
    ) -> impl Future<Output = NicResult<()>> + Send {
        SsdFuture { node: self.node, write: true, ssd_offset, local_bytes, len: len_bytes as u64, req: None }
    }
}

enum WaitState {
    Invalid(Option<NicError>),
    Start,
    /// Registered as watcher `id`; times out at the poll time `deadline_ns`.
    Waiting {
        id: u64,
        deadline_ns: Option<u64>,
    },
    Over,
}

/// `wait_word`: read at `t0`; then sleep in the engine's watch registry until a verb changes
/// the word (woken at the next poll time) or the deadline's poll time comes.
struct WaitWord {
    node: NodeId,
    region: Arc<Region>,
    offset: u64,
    until: WordCond,
    period_ns: u64,
    timeout: Option<Nanos>,
    state: WaitState,
}

impl Future for WaitWord {
    type Output = NicResult<u64>;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        let now = NOW_NS.with(|n| n.get());
        let (node, offset) = (self.node, self.offset);
        match std::mem::replace(&mut self.state, WaitState::Over) {
            WaitState::Invalid(e) => Poll::Ready(Err(e.expect("polled after completion"))),
            WaitState::Over => panic!("WaitWord polled after completion"),
            WaitState::Start => {
                let word = self.region.load(offset);
                if self.until.holds(word) {
                    return Poll::Ready(Ok(word));
                }
                let deadline_ns = self.timeout.map(|t| next_poll_ns(now, self.period_ns, now + t.0));
                if deadline_ns == Some(now) {
                    return Poll::Ready(Err(timeout_error(node, offset, self.timeout.unwrap())));
                }
                let (task, period) = (current_task(), self.period_ns);
                let id = with_world(|w| {
                    if let Some(deadline) = deadline_ns {
                        w.wake_at(deadline, task);
                    }
                    w.watch_register(node, offset, task, now, period)
                });
                self.state = WaitState::Waiting { id, deadline_ns };
                Poll::Pending
            }
            WaitState::Waiting { id, deadline_ns } => {
                let timed_out = deadline_ns.is_some_and(|d| now >= d);
                // Read only at a poll time the engine woke us for (a spurious poll of the task
                // in between is not a poll of the loop this stands for).
                if !timed_out && !with_world(|w| w.watch_due(node, offset, id)) {
                    self.state = WaitState::Waiting { id, deadline_ns };
                    return Poll::Pending;
                }
                let word = self.region.load(offset);
                if self.until.holds(word) {
                    with_world(|w| w.watch_cancel(node, offset, id));
                    return Poll::Ready(Ok(word));
                }
                if timed_out {
                    with_world(|w| w.watch_cancel(node, offset, id));
                    return Poll::Ready(Err(timeout_error(node, offset, self.timeout.unwrap())));
                }
                with_world(|w| w.watch_rearm(node, offset, id));
                self.state = WaitState::Waiting { id, deadline_ns };
                Poll::Pending
            }
        }
    }
}

impl Drop for WaitWord {
    fn drop(&mut self) {
        if let WaitState::Waiting { id, .. } = self.state {
            let (node, offset) = (self.node, self.offset);
            try_with_world(|w| w.watch_cancel(node, offset, id));
        }
    }
}

/// `wait_write`: register on the range at `t0`; woken at the first sweep time after a verb
/// writes into it, or at the deadline's sweep time.
struct WaitWrite {
    node: NodeId,
    lo: u64,
    hi: u64,
    period_ns: u64,
    timeout: Option<Nanos>,
    state: WaitState,
}

impl Future for WaitWrite {
    type Output = NicResult<bool>;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        let now = NOW_NS.with(|n| n.get());
        match std::mem::replace(&mut self.state, WaitState::Over) {
            WaitState::Invalid(e) => Poll::Ready(Err(e.expect("polled after completion"))),
            WaitState::Over => panic!("WaitWrite polled after completion"),
            WaitState::Start => {
                let deadline_ns = self.timeout.map(|t| next_poll_ns(now, self.period_ns, now + t.0));
                if deadline_ns == Some(now) {
                    return Poll::Ready(Ok(false));
                }
                let (task, node, lo, hi, period) =
                    (current_task(), self.node, self.lo, self.hi, self.period_ns);
                let id = with_world(|w| {
                    if let Some(deadline) = deadline_ns {
                        w.wake_at(deadline, task);
                    }
                    w.watch_register_range(node, lo, hi, task, now, period)
                });
                self.state = WaitState::Waiting { id, deadline_ns };
                Poll::Pending
            }
            WaitState::Waiting { id, deadline_ns } => {
                // A write seen and its sweep time come, or the deadline: either ends the wait
                // (a spurious poll of the task in between is not a sweep).
                if with_world(|w| w.watch_range_due(id)) {
                    with_world(|w| w.watch_cancel_range(id));
                    return Poll::Ready(Ok(true));
                }
                if deadline_ns.is_some_and(|d| now >= d) {
                    with_world(|w| w.watch_cancel_range(id));
                    return Poll::Ready(Ok(false));
                }
                self.state = WaitState::Waiting { id, deadline_ns };
                Poll::Pending
            }
        }
    }
}

impl Drop for WaitWrite {
    fn drop(&mut self) {
        if let WaitState::Waiting { id, .. } = self.state {
            try_with_world(|w| w.watch_cancel_range(id));
        }
    }
}

/// `ssd_read` / `ssd_write`: submit on first poll, complete when the engine's command does.
struct SsdFuture {
    node: NodeId,
    write: bool,
    ssd_offset: u64,
    local_bytes: u64,
    len: u64,
    req: Option<u32>,
}

impl Future for SsdFuture {
    type Output = NicResult<()>;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(req) = self.req {
            if with_world(|w| w.ssd_take(req)) {
                self.req = None;
                return Poll::Ready(Ok(()));
            }
            return Poll::Pending;
        }
        let task = current_task();
        let (node, write, ssd, local, len) =
            (self.node, self.write, self.ssd_offset, self.local_bytes, self.len);
        match with_world(|w| w.ssd_submit(node, write, ssd, local, len, task)) {
            Ok(req) => {
                self.req = Some(req);
                Poll::Pending
            }
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl Drop for SsdFuture {
    fn drop(&mut self) {
        if let Some(req) = self.req {
            try_with_world(|w| w.ssd_abandon(req));
        }
    }
}

/// `sleep` and `cpu`: resolve the deadline on first poll, then wait for the wake.
struct Timer {
    node: NodeId,
    work_ns: u64,
    cpu: bool,
    deadline_ns: Option<u64>,
}

impl Future for Timer {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        let now = NOW_NS.with(|n| n.get());
        match self.deadline_ns {
            Some(deadline) if now >= deadline => Poll::Ready(()),
            Some(_) => Poll::Pending,
            None => {
                let (node, work, cpu) = (self.node, self.work_ns, self.cpu);
                let task = current_task();
                let deadline = with_world(|w| {
                    let deadline = if cpu { w.cpu(node, work) } else { w.now_ns + work };
                    w.wake_at(deadline, task);
                    deadline
                });
                self.deadline_ns = Some(deadline);
                Poll::Pending
            }
        }
    }
}

// The verbs stay inline (no box): this future is created for every verb a protocol posts.
#[allow(clippy::large_enum_variant)]
enum Work {
    Batch { verbs: [Verb; MAX_BATCH], len: usize },
    Send { to: NodeId, port: u16, bytes: Vec<u8> },
    Posted,
}

/// A batch or a SEND: post on first poll, complete when the engine finishes the op.
struct OpFuture {
    node: NodeId,
    channel: u16,
    work: Work,
    op: Option<u32>,
}

impl Future for OpFuture {
    type Output = NicResult<BatchResult>;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(op) = self.op {
            return match with_world(|w| w.take_result(op)) {
                Some(result) => {
                    self.op = None;
                    Poll::Ready(result)
                }
                None => Poll::Pending,
            };
        }
        let (node, channel) = (self.node, self.channel);
        let task = current_task();
        let posted = match std::mem::replace(&mut self.work, Work::Posted) {
            Work::Batch { verbs, len } => {
                if len > MAX_BATCH {
                    Err(NicError::BadBatch { reason: "more than MAX_BATCH verbs" })
                } else {
                    with_world(|w| w.post_batch(node, channel, &verbs[..len], task))
                }
            }
            Work::Send { to, port, bytes } => {
                with_world(|w| w.post_send(node, channel, to, port, bytes, task))
            }
            Work::Posted => panic!("OpFuture polled after completion"),
        };
        match posted {
            Ok(op) => {
                self.op = Some(op);
                Poll::Pending
            }
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl Drop for OpFuture {
    fn drop(&mut self) {
        if let Some(op) = self.op {
            try_with_world(|w| w.abandon(op));
        }
    }
}

struct RecvFuture {
    node: NodeId,
    port: u16,
    task: Option<u32>,
}

impl Future for RecvFuture {
    type Output = NicResult<Message>;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        let task = current_task();
        let (node, port) = (self.node, self.port);
        match with_world(|w| w.recv(node, port, task)) {
            Some(message) => {
                self.task = None;
                Poll::Ready(Ok(message))
            }
            None => {
                self.task = Some(task);
                Poll::Pending
            }
        }
    }
}

impl Drop for RecvFuture {
    fn drop(&mut self) {
        if let Some(task) = self.task {
            let (node, port) = (self.node, self.port);
            try_with_world(|w| w.cancel_recv(node, port, task));
        }
    }
}
