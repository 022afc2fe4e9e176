//! `SimNic`: the simulator's implementation of the NIC trait.
//!
//! A handle is `(node, channel, Arc<Env>)`; everything that changes lives in the run's world
//! (a thread-local), which the futures below reach on each poll. Each future posts its work on
//! its first poll and then waits for the engine to wake its task; spurious polls are harmless.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use dmsim_protocols::memory::Region;
use dmsim_protocols::nic::{
    BatchResult, Cluster, Message, Nanos, Nic, NicError, NicResult, NodeId, RemoteAddr, Verb, MAX_BATCH,
    MAX_MESSAGE_BYTES,
};

use crate::engine::executor::{current_task, NOW_NS};
use crate::engine::world::{try_with_world, with_world};

/// What every handle of one simulation shares and never changes.
pub struct Env {
    pub cluster: Cluster,
    pub regions: Vec<Arc<Region>>,
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
                    Poll::Ready(Ok(result))
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
