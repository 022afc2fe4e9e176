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
//! Idle runtime workers poll both CQs (`Poller`) and wake the waiting futures.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use dmsim_protocols::memory::Region;
use dmsim_protocols::nic::{self, BatchResult, Message, Nanos, NicError, NicResult, NodeId, Verb, MAX_BATCH};

use crate::config::HwConfig;
use crate::error::HwError;
use crate::info::NodeInfo;
use crate::runtime::{Poller, Runtime};
use crate::verbs::{
    Access, Completion, ConnectParams, Context as Device, Cq, LocalBuf, Mr, Pd, Qp, QpCaps, RemoteBuf,
    RemoteQp, SendOp, SendWr,
};

const SLOT_BITS: u32 = 12;
const GEN_MASK: u64 = 0xff_ffff;

fn encode(qp_index: usize, slot: u32, gen: u32, wr_index: usize) -> u64 {
    ((qp_index as u64) << 44) | ((slot as u64) << 32) | ((gen as u64 & GEN_MASK) << 8) | wr_index as u64
}

fn decode(wr_id: u64) -> (usize, u32, u32, usize) {
    (
        (wr_id >> 44) as usize,
        ((wr_id >> 32) & 0xfff) as u32,
        ((wr_id >> 8) & GEN_MASK) as u32,
        (wr_id & 0xff) as usize,
    )
}

enum SlotState {
    Free,
    Pending { waker: Option<Waker>, first_error: Option<Completion>, abandoned: bool },
    Done(Result<(), Completion>),
}

struct Slot {
    gen: u32,
    wr_count: u32,
    state: SlotState,
}

struct Slots {
    entries: Vec<Slot>,
    free: Vec<u32>,
    outstanding_wrs: u32,
}

/// One QP and the completion slots of its send queue.
pub(crate) struct QpState {
    qp: Arc<Qp>,
    index: usize,
    target: NodeId,
    name: String,
    cap: u32,
    slots: Mutex<Slots>,
}

impl QpState {
    fn new(qp: Arc<Qp>, index: usize, target: NodeId, name: String, cap: u32) -> QpState {
        let entries = (0..cap).map(|_| Slot { gen: 0, wr_count: 0, state: SlotState::Free }).collect();
        let free = (0..cap).rev().collect();
        QpState {
            qp,
            index,
            target,
            name,
            cap,
            slots: Mutex::new(Slots { entries, free, outstanding_wrs: 0 }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn acquire(&self, wr_count: u32) -> NicResult<(u32, u32)> {
        let mut s = self.lock();
        if s.outstanding_wrs + wr_count > self.cap {
            return Err(NicError::QpOverflow { qp: self.name.clone(), cap: self.cap });
        }
        // Every pending slot holds at least one work request, so a slot is free whenever the
        // work-request cap is not reached.
        let slot =
            s.free.pop().ok_or_else(|| NicError::QpOverflow { qp: self.name.clone(), cap: self.cap })?;
        s.outstanding_wrs += wr_count;
        let e = &mut s.entries[slot as usize];
        e.gen = (e.gen + 1) & GEN_MASK as u32;
        e.wr_count = wr_count;
        e.state = SlotState::Pending { waker: None, first_error: None, abandoned: false };
        Ok((slot, e.gen))
    }

    /// The post failed: nothing is in flight for this slot.
    fn cancel(&self, slot: u32) {
        let mut s = self.lock();
        let wr_count = s.entries[slot as usize].wr_count;
        s.outstanding_wrs -= wr_count;
        s.entries[slot as usize].state = SlotState::Free;
        s.free.push(slot);
    }

    /// Records one completion; true if it finished a batch.
    fn complete(&self, c: Completion, slot: u32, gen: u32, wr_index: usize) -> bool {
        let mut s = self.lock();
        let Slots { entries, free, outstanding_wrs } = &mut *s;
        let Some(e) = entries.get_mut(slot as usize) else { return false };
        if e.gen != gen {
            return false;
        }
        let last = wr_index + 1 >= e.wr_count as usize;
        let SlotState::Pending { waker, first_error, abandoned } = &mut e.state else { return false };
        if !c.ok() && first_error.is_none() {
            *first_error = Some(c);
        }
        if !last {
            return false;
        }
        *outstanding_wrs -= e.wr_count;
        let result = first_error.map_or(Ok(()), Err);
        let waker = waker.take();
        if *abandoned {
            e.state = SlotState::Free;
            free.push(slot);
        } else {
            e.state = SlotState::Done(result);
        }
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
        true
    }
}

/// Waits for a slot. The slot stays reserved (and its scratch words intact) until this value
/// is dropped; a wait dropped before completion leaves the slot to the poller.
struct SlotWait<'a> {
    qs: &'a QpState,
    slot: u32,
    gen: u32,
}

impl Future for SlotWait<'_> {
    type Output = Result<(), Completion>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.qs.lock();
        let e = &mut s.entries[self.slot as usize];
        if e.gen != self.gen {
            return Poll::Ready(Ok(()));
        }
        match &mut e.state {
            SlotState::Pending { waker, .. } => {
                *waker = Some(cx.waker().clone());
                Poll::Pending
            }
            SlotState::Done(result) => Poll::Ready(*result),
            SlotState::Free => Poll::Ready(Ok(())),
        }
    }
}

impl SlotWait<'_> {
    /// Copies the slot's scratch results before the slot is released (call when Ready).
    fn results(&self, node: &NodeState, verbs: &[Verb]) -> BatchResult {
        let mut values = [0u64; MAX_BATCH];
        let base = node.scratch_offset(self.qs.index, self.slot);
        for (i, v) in verbs.iter().enumerate() {
            if matches!(v, Verb::Cas { .. } | Verb::Faa { .. }) {
                values[i] = node.scratch_mr.region().load(base + 8 * i as u64);
            }
        }
        BatchResult::new(&values[..verbs.len()])
    }
}

impl Drop for SlotWait<'_> {
    fn drop(&mut self) {
        let mut s = self.qs.lock();
        let e = &mut s.entries[self.slot as usize];
        if e.gen != self.gen {
            return;
        }
        match &mut e.state {
            // Timed out or cancelled: the poller frees the slot when the completion arrives.
            SlotState::Pending { abandoned, waker, .. } => {
                *abandoned = true;
                *waker = None;
            }
            SlotState::Done(_) => {
                e.state = SlotState::Free;
                s.free.push(self.slot);
            }
            SlotState::Free => {}
        }
    }
}

#[derive(Default)]
struct Inbox {
    queues: BTreeMap<u16, VecDeque<Message>>,
    waiters: BTreeMap<u16, Vec<Waker>>,
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
    /// `DMSIM_HW_TRACE=1`: one stderr line per verb batch, message and mark (debugging runs).
    trace: bool,
    /// Loopback responder QPs: kept alive, never posted to.
    _resp: Vec<Arc<Qp>>,
}

fn msg_buf_bytes(config: &HwConfig) -> u64 {
    8 + (config.max_message_bytes as u64).div_ceil(8) * 8
}

impl NodeState {
    fn scratch_offset(&self, qp_index: usize, slot: u32) -> u64 {
        ((qp_index as u64 * self.config.qp_depth as u64) + slot as u64) * (MAX_BATCH as u64 * 8)
    }
    fn msg_offset(&self, peer: NodeId, k: u32) -> u64 {
        (peer.index() as u64 * self.config.message_depth as u64 + k as u64) * msg_buf_bytes(&self.config)
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

    async fn batch(&self, channel: u16, verbs: &[Verb]) -> NicResult<BatchResult> {
        let target = nic::validate_batch(&self.cluster, self.me, verbs)?;
        if self.gone[target.index()].load(Ordering::Acquire) {
            return Err(NicError::PeerGone { node: target });
        }
        let channels = self.config.channels.max(1);
        let qs = &self.qps[self.verb_qp[target.index()][(channel % channels) as usize]];
        let (slot, gen) = qs.acquire(verbs.len() as u32)?;
        let peer = self.peers[target.index()];
        let scratch = self.scratch_offset(qs.index, slot);
        let mut wrs = Vec::with_capacity(verbs.len());
        for (i, verb) in verbs.iter().enumerate() {
            let remote = |offset: u64| RemoteBuf { addr: peer.addr + offset, rkey: peer.rkey };
            let word = scratch + 8 * i as u64;
            let (op, mr, local_offset, len) = match *verb {
                Verb::Read { remote: r, local_bytes, len_bytes } => {
                    (SendOp::Read(remote(r.offset_bytes)), &self.region_mr, local_bytes, len_bytes)
                }
                Verb::Write { remote: r, local_bytes, len_bytes } => {
                    (SendOp::Write(remote(r.offset_bytes)), &self.region_mr, local_bytes, len_bytes)
                }
                Verb::WriteWord { remote: r, value } => {
                    self.scratch_mr.region().store(word, value);
                    (SendOp::Write(remote(r.offset_bytes)), &self.scratch_mr, word, 8)
                }
                Verb::Cas { remote: r, expect, swap } => (
                    SendOp::Cas { remote: remote(r.offset_bytes), compare: expect, swap },
                    &self.scratch_mr,
                    word,
                    8,
                ),
                Verb::Faa { remote: r, add } => {
                    (SendOp::Faa { remote: remote(r.offset_bytes), add }, &self.scratch_mr, word, 8)
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
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let _in_flight = InFlight(&self.in_flight);
        if let Err(e) = qs.qp.post_send(&wrs) {
            qs.cancel(slot);
            return Err(NicError::QpError { qp: qs.name.clone(), detail: e.to_string() });
        }
        let wait = SlotWait { qs, slot, gen };
        let mut wait = std::pin::pin!(wait);
        let outcome = self.runtime.timeout(self.config.verb_timeout, wait.as_mut()).await;
        let names: Vec<&str> = verbs.iter().map(|v| v.name()).collect();
        if self.trace {
            let state = match &outcome {
                Ok(Ok(())) => format!("ok {:?}", wait.results(self, verbs).as_slice()),
                Ok(Err(c)) => c.status_str(),
                Err(()) => "timeout".into(),
            };
            eprintln!("[{} {}] {} {:?} -> {state}", self.me, self.runtime.now(), names.join("+"), verbs);
        }
        match outcome {
            Err(()) => {
                Err(self.timeout_error(qs, &names.join("+"), encode(qs.index, slot, gen, verbs.len() - 1)))
            }
            Ok(Err(c)) => {
                let (_, _, _, i) = decode(c.wr_id);
                Err(self.completion_error(qs, &c, names.get(i).copied().unwrap_or("?")))
            }
            // The slot (and so its scratch words) is released only when `wait` drops, after this.
            Ok(Ok(())) => Ok(wait.results(self, verbs)),
        }
    }

    async fn send(&self, to: NodeId, port: u16, bytes: Vec<u8>) -> NicResult<()> {
        if to.index() >= self.cluster.node_count() {
            return Err(NicError::BadAddress {
                node: to,
                offset_bytes: 0,
                len_bytes: 0,
                region_size_bytes: 0,
            });
        }
        if to == self.me {
            // A message to oneself never touches the NIC.
            self.deliver(Message { from: self.me, port, bytes });
            return Ok(());
        }
        if self.gone[to.index()].load(Ordering::Acquire) {
            return Err(NicError::PeerGone { node: to });
        }
        let Some(index) = self.msg_qp[to.index()] else { return Err(NicError::PeerGone { node: to }) };
        let qs = &self.qps[index];
        if bytes.len() > self.config.max_message_bytes as usize {
            return Err(NicError::QpError {
                qp: qs.name.clone(),
                detail: format!(
                    "message of {} bytes exceeds the {}-byte maximum",
                    bytes.len(),
                    self.config.max_message_bytes
                ),
            });
        }
        let (slot, gen) = qs.acquire(1)?;
        let offset = self.msg_offset(to, slot);
        let region = self.msg_send_mr.region();
        region.store(offset, port as u64 | ((bytes.len() as u64) << 16));
        let words: Vec<u64> = bytes
            .chunks(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(w)
            })
            .collect();
        region.write_words(offset + 8, &words);
        let len = 8 + 8 * words.len() as u32;
        let local = match LocalBuf::new(&self.msg_send_mr, offset, len) {
            Ok(l) => l,
            Err(e) => {
                qs.cancel(slot);
                return Err(NicError::QpError { qp: qs.name.clone(), detail: e.to_string() });
            }
        };
        let wr_id = encode(qs.index, slot, gen, 0);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let _in_flight = InFlight(&self.in_flight);
        if let Err(e) = qs.qp.post_send(&[SendWr { wr_id, op: SendOp::Send, local, signaled: true }]) {
            qs.cancel(slot);
            return Err(NicError::QpError { qp: qs.name.clone(), detail: e.to_string() });
        }
        if self.trace {
            eprintln!("[{} {}] SEND {to} port {port} {} bytes", self.me, self.runtime.now(), bytes.len());
        }
        let wait = SlotWait { qs, slot, gen };
        match self.runtime.timeout(self.config.verb_timeout, wait).await {
            Err(()) => Err(self.timeout_error(qs, "SEND", wr_id)),
            Ok(Err(c)) => Err(self.completion_error(qs, &c, "SEND")),
            Ok(Ok(())) => Ok(()),
        }
    }

    fn deliver(&self, message: Message) {
        let waiters = {
            let mut inbox = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
            let port = message.port;
            inbox.queues.entry(port).or_default().push_back(message);
            inbox.waiters.remove(&port).unwrap_or_default()
        };
        waiters.into_iter().for_each(Waker::wake);
    }

    fn handle_recv(&self, c: Completion) {
        let peer = NodeId((c.wr_id >> 32) as u16);
        let k = c.wr_id as u32;
        if !c.ok() {
            // Flushed because the connection failed: the buffer is not reposted.
            if c.peer_unreachable() || c.flushed() {
                self.gone[peer.index()].store(true, Ordering::Release);
            }
            return;
        }
        let offset = self.msg_offset(peer, k);
        let region = self.msg_recv_mr.region();
        let header = region.load(offset);
        let port = (header & 0xffff) as u16;
        let len = ((header >> 16) as usize).min(self.config.max_message_bytes as usize);
        let mut words = vec![0u64; len.div_ceil(8)];
        region.read_words(offset + 8, &mut words);
        let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        bytes.truncate(len);
        if self.trace {
            eprintln!("[{} {}] RECV from {peer} port {port} {len} bytes", self.me, self.runtime.now());
        }
        // Repost before delivering so the sender is not held up by RNR.
        self.post_recv_buffer(peer, k);
        self.deliver(Message { from: peer, port, bytes });
    }

    fn post_recv_buffer(&self, peer: NodeId, k: u32) {
        let Some(index) = self.msg_qp[peer.index()] else { return };
        let offset = self.msg_offset(peer, k);
        let buf = LocalBuf::new(&self.msg_recv_mr, offset, msg_buf_bytes(&self.config) as u32);
        if let Ok(buf) = buf {
            // A failure means the QP is in error: the peer is gone, and send() will say so.
            if self.qps[index].qp.post_recv(((peer.0 as u64) << 32) | k as u64, &buf).is_err() {
                self.gone[peer.index()].store(true, Ordering::Release);
            }
        }
    }

    fn recv(&self, port: u16) -> Recv<'_> {
        Recv { node: self, port }
    }
}

struct InFlight<'a>(&'a AtomicUsize);
impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Recv<'a> {
    node: &'a NodeState,
    port: u16,
}

impl Future for Recv<'_> {
    type Output = Message;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Message> {
        let mut inbox = self.node.inbox.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = inbox.queues.get_mut(&self.port).and_then(VecDeque::pop_front) {
            return Poll::Ready(m);
        }
        let waiters = inbox.waiters.entry(self.port).or_default();
        if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
            waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl Poller for NodeState {
    fn poll(&self) -> usize {
        // One poller at a time keeps completions of one QP in order (message FIFO per port).
        let Ok(_guard) = self.poll_lock.try_lock() else { return 0 };
        let mut buf = [Completion { wr_id: 0, status: 0, vendor_err: 0, byte_len: 0, qp_num: 0 }; 16];
        let mut delivered = 0;
        while let Ok(n @ 1..) = self.send_cq.poll(&mut buf) {
            for c in &buf[..n] {
                let (index, slot, gen, wr_index) = decode(c.wr_id);
                if let Some(qs) = self.qps.get(index) {
                    if qs.complete(*c, slot, gen, wr_index) {
                        delivered += 1;
                    }
                }
            }
        }
        while let Ok(n @ 1..) = self.recv_cq.poll(&mut buf) {
            for c in &buf[..n] {
                self.handle_recv(*c);
                delivered += 1;
            }
        }
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
            eprintln!("[{} {}] mark {label} {value}", self.node.me, self.node.runtime.now());
        }
    }
}

// ------------------------------------------------------------------------------------------
// Construction: local resources first (their numbers go into the info line), then connection.

/// Resources created before the exchange.
pub(crate) struct LocalSetup {
    me: NodeId,
    size: usize,
    config: HwConfig,
    port: u8,
    gid_index: Option<u8>,
    mtu: u32,
    max_rd_atomic: u8,
    pub(crate) info: NodeInfo,
    device: Arc<Device>,
    region_mr: Arc<Mr>,
    scratch_mr: Arc<Mr>,
    msg_send_mr: Arc<Mr>,
    msg_recv_mr: Arc<Mr>,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    verb: Vec<Vec<Arc<Qp>>>,
    resp: Vec<Arc<Qp>>,
    msg: Vec<Option<Arc<Qp>>>,
}

/// Picks the RoCE GID index when none was given: the first IPv4-mapped GID (RoCE v2 over
/// IPv4 on rxe and on ConnectX with default settings), else 0.
fn auto_gid_index(device: &Device, port: u8) -> u8 {
    (0..16u8)
        .find(|&i| device.gid(port, i).is_ok_and(|g| g[..10] == [0; 10] && g[10] == 0xff && g[11] == 0xff))
        .unwrap_or(0)
}

pub(crate) fn setup_local(
    me: NodeId,
    cluster: &nic::Cluster,
    device_name: Option<&str>,
    port: u8,
    gid_index: Option<u8>,
    config: &HwConfig,
) -> Result<LocalSetup, HwError> {
    let size = cluster.node_count();
    let device = Device::open(device_name)?;
    let dev_err = |what: String| HwError::Device { device: device.name().to_string(), what };
    let port_info = device.port(port)?;
    if !port_info.active {
        return Err(dev_err(format!("port {port} is not ACTIVE")));
    }
    let caps = device.caps()?;
    if !caps.atomics {
        return Err(dev_err("device does not support atomics (atomic_cap NONE)".into()));
    }
    if config.qp_depth == 0 || config.qp_depth > (1 << SLOT_BITS) || config.qp_depth > caps.max_qp_wr {
        return Err(HwError::Config(format!(
            "qp_depth {} must be in 1..={}",
            config.qp_depth,
            caps.max_qp_wr.min(1 << SLOT_BITS)
        )));
    }
    let gid_index = match gid_index {
        Some(i) => Some(i),
        None if port_info.ethernet => Some(auto_gid_index(&device, port)),
        None => None,
    };
    let gid = match gid_index {
        Some(i) => device.gid(port, i)?,
        None => [0; 16],
    };
    let pd = Pd::new(&device)?;
    let channels = config.channels.max(1) as usize;
    let qp_count = size * channels + channels + size;
    let send_cq = Cq::new(&device, (qp_count as u32 * config.qp_depth + 64).min(caps.max_cqe))?;
    let recv_cq = Cq::new(&device, (size as u32 * config.message_depth + 64).min(caps.max_cqe))?;
    let region_bytes = cluster.region_size_bytes[me.index()].max(8);
    let region_mr = Mr::register(&pd, Arc::new(Region::new(region_bytes)), Access::Remote)?;
    let scratch_bytes = qp_count as u64 * config.qp_depth as u64 * MAX_BATCH as u64 * 8;
    let scratch_mr = Mr::register(&pd, Arc::new(Region::new(scratch_bytes)), Access::Local)?;
    let msg_bytes = size as u64 * config.message_depth as u64 * msg_buf_bytes(config);
    let msg_send_mr = Mr::register(&pd, Arc::new(Region::new(msg_bytes)), Access::Local)?;
    let msg_recv_mr = Mr::register(&pd, Arc::new(Region::new(msg_bytes)), Access::Local)?;
    let verb_caps = QpCaps { max_send_wr: config.qp_depth, max_recv_wr: 1 };
    let mut verb = Vec::with_capacity(size);
    for _ in 0..size {
        let per: Result<Vec<_>, _> =
            (0..channels).map(|_| Qp::new_rc(&pd, &send_cq, &recv_cq, verb_caps)).collect();
        verb.push(per?);
    }
    let resp: Vec<Arc<Qp>> = (0..channels)
        .map(|_| Qp::new_rc(&pd, &send_cq, &recv_cq, QpCaps { max_send_wr: 1, max_recv_wr: 1 }))
        .collect::<Result<_, _>>()?;
    let msg_caps = QpCaps { max_send_wr: config.message_depth, max_recv_wr: config.message_depth };
    let msg: Vec<Option<Arc<Qp>>> =
        (0..size)
            .map(|j| {
                if j == me.index() {
                    Ok(None)
                } else {
                    Qp::new_rc(&pd, &send_cq, &recv_cq, msg_caps).map(Some)
                }
            })
            .collect::<Result<_, _>>()?;
    let info = NodeInfo {
        lid: port_info.lid,
        gid,
        psn: (me.0 as u32).wrapping_mul(7919).wrapping_add(0x1234) & 0xff_ffff,
        addr: region_mr.addr(),
        len: region_mr.len_bytes(),
        rkey: region_mr.rkey(),
        channels: channels as u16,
        verb: verb.iter().flatten().map(|q| q.qpn()).collect(),
        resp: resp.iter().map(|q| q.qpn()).collect(),
        msg: msg.iter().map(|q| q.as_ref().map_or(0, |q| q.qpn())).collect(),
    };
    Ok(LocalSetup {
        me,
        size,
        config: config.clone(),
        port,
        gid_index,
        mtu: port_info.active_mtu,
        max_rd_atomic: caps.max_qp_rd_atom.clamp(1, 16) as u8,
        info,
        device,
        region_mr,
        scratch_mr,
        msg_send_mr,
        msg_recv_mr,
        send_cq,
        recv_cq,
        verb,
        resp,
        msg,
    })
}

/// Connects every QP to its partner described in `infos` and returns the node's first handle.
pub(crate) fn connect(
    setup: LocalSetup,
    cluster: nic::Cluster,
    infos: &[NodeInfo],
    runtime: Runtime,
) -> Result<HwNic, HwError> {
    let me = setup.me;
    let channels = setup.config.channels.max(1) as usize;
    let params = ConnectParams {
        port: setup.port,
        gid_index: setup.gid_index,
        mtu: setup.mtu,
        local_psn: setup.info.psn,
        max_rd_atomic: setup.max_rd_atomic,
        timeout: setup.config.ack_timeout,
        retry_cnt: setup.config.retry_count,
        rnr_retry: 7,
    };
    let remote =
        |j: usize, qpn: u32| RemoteQp { qpn, psn: infos[j].psn, lid: infos[j].lid, gid: infos[j].gid };
    let mut peers = Vec::with_capacity(setup.size);
    for (j, info) in infos.iter().enumerate() {
        if info.channels as usize != channels {
            return Err(HwError::Bootstrap(format!(
                "rank {j} uses {} channels, rank {} uses {channels}",
                info.channels, me.0
            )));
        }
        if info.len < cluster.region_size_bytes[j] {
            return Err(HwError::Bootstrap(format!(
                "rank {j} registered {} bytes but the cluster shape says {}",
                info.len, cluster.region_size_bytes[j]
            )));
        }
        peers.push(PeerRegion { addr: info.addr, rkey: info.rkey });
    }
    let mut qps = Vec::new();
    let mut verb_qp = vec![Vec::with_capacity(channels); setup.size];
    let device = setup.device.name().to_string();
    for (j, per) in setup.verb.iter().enumerate() {
        for (c, qp) in per.iter().enumerate() {
            if j == me.index() {
                let partner = &setup.resp[c];
                qp.connect(&remote(j, partner.qpn()), &params)?;
                partner.connect(&remote(j, qp.qpn()), &params)?;
            } else {
                qp.connect(&remote(j, infos[j].verb[me.index() * channels + c]), &params)?;
            }
            let index = qps.len();
            let name = format!("n{}->n{j}/c{c} ({device} qp {:#x})", me.0, qp.qpn());
            qps.push(QpState::new(qp.clone(), index, NodeId(j as u16), name, setup.config.qp_depth));
            verb_qp[j].push(index);
        }
    }
    let mut msg_qp = vec![None; setup.size];
    for (j, qp) in setup.msg.iter().enumerate() {
        let Some(qp) = qp else { continue };
        qp.connect(&remote(j, infos[j].msg[me.index()]), &params)?;
        let index = qps.len();
        let name = format!("n{}<->n{j}/msg ({device} qp {:#x})", me.0, qp.qpn());
        qps.push(QpState::new(qp.clone(), index, NodeId(j as u16), name, setup.config.message_depth));
        msg_qp[j] = Some(index);
    }
    let node = Arc::new(NodeState {
        me,
        device: device.clone(),
        gone: (0..setup.size).map(|_| AtomicBool::new(false)).collect(),
        cluster,
        config: setup.config,
        runtime: runtime.clone(),
        region_mr: setup.region_mr,
        scratch_mr: setup.scratch_mr,
        msg_send_mr: setup.msg_send_mr,
        msg_recv_mr: setup.msg_recv_mr,
        peers,
        qps,
        verb_qp,
        msg_qp,
        send_cq: setup.send_cq,
        recv_cq: setup.recv_cq,
        inbox: Mutex::new(Inbox::default()),
        poll_lock: Mutex::new(()),
        in_flight: AtomicUsize::new(0),
        trace: std::env::var("DMSIM_HW_TRACE").is_ok_and(|v| v != "0" && !v.is_empty()),
        _resp: setup.resp,
    });
    for j in 0..node.cluster.node_count() {
        if j != me.index() {
            for k in 0..node.config.message_depth {
                node.post_recv_buffer(NodeId(j as u16), k);
            }
        }
    }
    // Weak: the node owns the runtime handle, so a strong poller would be a reference cycle.
    runtime.add_poller(Arc::new(WeakPoller(Arc::downgrade(&node))));
    Ok(HwNic { node, channel: 0 })
}
