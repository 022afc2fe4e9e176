//! Messages: SEND/RECV over one RC connection per peer, delivered to per-port inboxes.
//!
//! Each peer has `message_depth` receive buffers posted and as many send slots (the slots of its
//! message QP). A buffer holds one header word (port, length) and the payload; a receive
//! completion is reposted before its message is delivered, so a sender never waits on RNR.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Waker};

use dmsim_protocols::nic::{Message, NicError, NicResult, NodeId};

use super::slots::{encode, SlotWait};
use super::{InFlight, NodeState, VerbWait};
use crate::config::HwConfig;
use crate::verbs::{Completion, LocalBuf, SendOp, SendWr};

#[derive(Default)]
pub(super) struct Inbox {
    queues: BTreeMap<u16, VecDeque<Message>>,
    waiters: BTreeMap<u16, Vec<Waker>>,
}

pub(super) fn msg_buf_bytes(config: &HwConfig) -> u64 {
    8 + (config.max_message_bytes as u64).div_ceil(8) * 8
}

impl NodeState {
    fn msg_offset(&self, peer: NodeId, k: u32) -> u64 {
        (peer.index() as u64 * self.config.message_depth as u64 + k as u64) * msg_buf_bytes(&self.config)
    }

    pub(super) async fn send(&self, to: NodeId, port: u16, bytes: Vec<u8>) -> NicResult<()> {
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
            let (me, now, len) = (self.me, self.runtime.now(), bytes.len());
            crate::trace::line(move || format!("[{me} {now}] SEND {to} port {port} {len} bytes"));
        }
        let wait = SlotWait { qs, slot, gen };
        match VerbWait::new(self, &wait).await {
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

    pub(super) fn handle_recv(&self, c: Completion) {
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
            let (me, now) = (self.me, self.runtime.now());
            crate::trace::line(move || format!("[{me} {now}] RECV from {peer} port {port} {len} bytes"));
        }
        // Repost before delivering so the sender is not held up by RNR.
        self.post_recv_buffer(peer, k);
        self.deliver(Message { from: peer, port, bytes });
    }

    pub(super) fn post_recv_buffer(&self, peer: NodeId, k: u32) {
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

    pub(super) fn recv(&self, port: u16) -> Recv<'_> {
        Recv { node: self, port }
    }
}

pub(super) struct Recv<'a> {
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
