//! Request/reply messaging over [`Nic::send`]/[`Nic::recv`], for protocols whose servers are
//! CPU handlers (GAM's home directory today; CMCache, DEX offloading, ScaleStore next).
//!
//! ```text
//!  caller task (Client: own reply port)              server node (port P, N handler tasks)
//!  call(to, P, req) ──Request{reply port, id}──────▶ recv ─ cost → nic.cpu ─ handle(Incoming)
//!        recv(reply port) ◀──Reply{id}──────────────  reply(ReplyTo, rep)   (now or later,
//!        (other ids: stale, skipped)                   from any task: ReplyTo is plain data)
//!  notify(to, P, msg) ──Notify────────────────────▶ handle(Incoming { reply_to: None })
//! ```
//!
//! Why this shape:
//! * **Reply ports, not a dispatcher.** Each [`Client`] owns one port and waits on it itself, so a
//!   call costs exactly one SEND and one receive — no extra task, no extra wake-up. (That is also
//!   what keeps GAM's simulator traces identical to its hand-rolled version.)
//! * **Request ids.** A reply names its request; a reply that arrives after its caller gave up
//!   (timeout) is recognised by its id and skipped.
//! * **Deferred replies.** A request carries a [`ReplyTo`]; a server may keep it and answer when
//!   some later message completes the work (GAM replies after the last invalidation ack).
//! * **One envelope word.** Every message is one 8-byte envelope plus the body ([`Wire`]), so
//!   bodies get [`MAX_BODY_BYTES`] of the NIC's [`MAX_MESSAGE_BYTES`]. Longer data goes by
//!   one-sided verbs or in chunks; an oversize message is the NIC's error on every backend.
//! * **Timeouts in virtual time.** [`Client::call_within`] bounds the wait with `nic.sleep`
//!   ([`super::sync_ext::timeout`]), so it is deterministic in the simulator.
//!
//! Errors are [`ProtocolError`]s naming the node, SEND/RECV and the node and port. A malformed
//! envelope or body is a bug in the sender (every node runs the same code) and panics.

use std::future::Future;
use std::sync::Arc;

use crate::nic::{Nanos, Nic, NicError, NodeId, Task, MAX_MESSAGE_BYTES};

use super::error::{NicExt, ProtocolError, ProtocolResult};
use super::sync_ext::timeout;

/// Bytes of the envelope in front of every body.
pub const ENVELOPE_BYTES: usize = 8;
/// The largest body that fits one message.
pub const MAX_BODY_BYTES: usize = MAX_MESSAGE_BYTES - ENVELOPE_BYTES;

const KIND_REQUEST: u64 = 1;
const KIND_REPLY: u64 = 2;
const KIND_NOTIFY: u64 = 3;

/// A message body's encoding. `decode` may panic on malformed bytes (a sender bug).
pub trait Wire: Sized + Send {
    /// Bytes `encode` appends.
    fn encoded_len(&self) -> usize;
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(bytes: &[u8]) -> Self;
}

/// Raw bytes as a body.
impl Wire for Vec<u8> {
    fn encoded_len(&self) -> usize {
        self.len()
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
    fn decode(bytes: &[u8]) -> Self {
        bytes.to_vec()
    }
}

/// Where the reply to a request goes: the caller's node, its reply port, the request id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyTo {
    pub node: NodeId,
    pub port: u16,
    pub id: u32,
}

/// A request (`reply_to` set) or a notification, as a server receives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incoming<M> {
    pub from: NodeId,
    pub reply_to: Option<ReplyTo>,
    pub msg: M,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Envelope {
    Request { reply_port: u16, id: u32 },
    Reply { id: u32 },
    Notify,
}

impl Envelope {
    fn word(self) -> u64 {
        match self {
            Envelope::Request { reply_port, id } => {
                KIND_REQUEST | (reply_port as u64) << 16 | (id as u64) << 32
            }
            Envelope::Reply { id } => KIND_REPLY | (id as u64) << 32,
            Envelope::Notify => KIND_NOTIFY,
        }
    }

    /// The envelope and the body after it.
    fn split(bytes: &[u8]) -> (Envelope, &[u8]) {
        assert!(bytes.len() >= ENVELOPE_BYTES, "RPC message of {} bytes: no envelope", bytes.len());
        let (head, body) = bytes.split_at(ENVELOPE_BYTES);
        let word = u64::from_le_bytes(head.try_into().expect("eight bytes"));
        let envelope = match word & 0xff {
            KIND_REQUEST => Envelope::Request { reply_port: (word >> 16) as u16, id: (word >> 32) as u32 },
            KIND_REPLY => Envelope::Reply { id: (word >> 32) as u32 },
            KIND_NOTIFY => Envelope::Notify,
            kind => panic!("RPC envelope of unknown kind {kind}"),
        };
        (envelope, body)
    }

    fn frame<M: Wire>(self, msg: &M) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(ENVELOPE_BYTES + msg.encoded_len());
        bytes.extend_from_slice(&self.word().to_le_bytes());
        msg.encode(&mut bytes);
        bytes
    }
}

/// Send `msg` one-way to `(to, port)`.
pub async fn notify<N: Nic, M: Wire>(nic: &N, to: NodeId, port: u16, msg: &M) -> ProtocolResult<()> {
    nic.try_send(to, port, Envelope::Notify.frame(msg), "rpc notify").await
}

/// Answer the request `to` came with (from any task of the server node, at any time).
pub async fn reply<N: Nic, M: Wire>(nic: &N, to: ReplyTo, msg: &M) -> ProtocolResult<()> {
    nic.try_send(to.node, to.port, Envelope::Reply { id: to.id }.frame(msg), "rpc reply").await
}

/// The next request or notification on this node's `port`.
pub async fn recv<N: Nic, M: Wire>(nic: &N, port: u16) -> ProtocolResult<Incoming<M>> {
    let message = nic.try_recv(port, "rpc serve").await?;
    let (envelope, body) = Envelope::split(&message.bytes);
    let reply_to = match envelope {
        Envelope::Request { reply_port, id } => Some(ReplyTo { node: message.from, port: reply_port, id }),
        Envelope::Notify => None,
        Envelope::Reply { .. } => panic!("a reply from {} arrived on server port {port}", message.from),
    };
    Ok(Incoming { from: message.from, reply_to, msg: M::decode(body) })
}

/// One caller: a NIC handle and a reply port that only this client receives on.
pub struct Client<N: Nic> {
    nic: N,
    reply_port: u16,
    last_id: u32,
    stale: u64,
}

impl<N: Nic> Client<N> {
    /// A client receiving replies on `reply_port` (unique to it on its node).
    pub fn new(nic: N, reply_port: u16) -> Client<N> {
        Client { nic, reply_port, last_id: 0, stale: 0 }
    }

    pub fn nic(&self) -> &N {
        &self.nic
    }

    pub fn reply_port(&self) -> u16 {
        self.reply_port
    }

    /// Replies skipped because their call had already given up.
    pub fn stale_replies(&self) -> u64 {
        self.stale
    }

    /// Send `req` to `(to, port)` and wait for its reply, without a bound.
    pub async fn call<Req: Wire, Rep: Wire>(
        &mut self,
        to: NodeId,
        port: u16,
        req: &Req,
    ) -> ProtocolResult<Rep> {
        let id = self.send_request(to, port, req).await?;
        self.wait_reply(to, port, id, None).await
    }

    /// [`Client::call`] bounded by `bound` of this node's clock: past it, a
    /// [`NicError::Timeout`]; a reply that comes later is skipped by the next call.
    pub async fn call_within<Req: Wire, Rep: Wire>(
        &mut self,
        to: NodeId,
        port: u16,
        req: &Req,
        bound: Nanos,
    ) -> ProtocolResult<Rep> {
        let deadline = self.nic.now() + bound;
        let id = self.send_request(to, port, req).await?;
        self.wait_reply(to, port, id, Some((deadline, bound))).await
    }

    /// One-way message from this client's NIC handle.
    pub async fn notify<M: Wire>(&self, to: NodeId, port: u16, msg: &M) -> ProtocolResult<()> {
        notify(&self.nic, to, port, msg).await
    }

    async fn send_request<Req: Wire>(&mut self, to: NodeId, port: u16, req: &Req) -> ProtocolResult<u32> {
        self.last_id = self.last_id.wrapping_add(1);
        let id = self.last_id;
        let bytes = Envelope::Request { reply_port: self.reply_port, id }.frame(req);
        self.nic.try_send(to, port, bytes, "rpc call").await?;
        Ok(id)
    }

    async fn wait_reply<Rep: Wire>(
        &mut self,
        to: NodeId,
        port: u16,
        id: u32,
        deadline: Option<(Nanos, Nanos)>,
    ) -> ProtocolResult<Rep> {
        loop {
            let receive = self.nic.try_recv(self.reply_port, "rpc call");
            let message = match deadline {
                None => receive.await?,
                Some((at, bound)) => {
                    let left = at.saturating_sub(self.nic.now());
                    match timeout(&self.nic, left, receive).await {
                        Ok(message) => message?,
                        Err(_) => {
                            let source =
                                NicError::Timeout { what: format!("reply to request {id}"), after: bound };
                            let (node, now) = (self.nic.node(), self.nic.now());
                            return Err(ProtocolError::message(
                                node, now, "CALL", to, port, "rpc call", source,
                            ));
                        }
                    }
                }
            };
            match Envelope::split(&message.bytes) {
                (Envelope::Reply { id: got }, body) if got == id && message.from == to => {
                    return Ok(Rep::decode(body))
                }
                (Envelope::Reply { .. }, _) => self.stale += 1,
                (other, _) => panic!("{other:?} from {} on reply port {}", message.from, self.reply_port),
            }
        }
    }
}

/// The server side: what one handler task does with each message on its port.
pub trait Handler<N: Nic>: Send + Sync + 'static {
    type Msg: Wire;

    /// CPU to charge with `nic.cpu` before handling (on memory nodes this queues for a modelled
    /// core). `None`: the handler charges its own work, if any.
    fn cost(&self, _msg: &Incoming<Self::Msg>) -> Option<Nanos> {
        None
    }

    /// Serve one request or notification; reply now with [`reply`], or keep its `reply_to`.
    fn handle(&self, nic: &N, msg: Incoming<Self::Msg>) -> impl Future<Output = ProtocolResult<()>> + Send;

    /// This handler task hit `error` and stops: record it where the node's owner reads it.
    fn failed(&self, error: ProtocolError);
}

/// One handler task: receive on `port`, charge [`Handler::cost`], [`Handler::handle`]; stops at
/// its first error (given to [`Handler::failed`]). An idle receive that times out (a backend's
/// optional bound) is not an error: it waits again.
pub async fn serve_one<N: Nic, H: Handler<N>>(nic: N, port: u16, handler: Arc<H>) {
    loop {
        let incoming = match recv::<N, H::Msg>(&nic, port).await {
            Ok(incoming) => incoming,
            Err(e) if matches!(e.source, NicError::Timeout { .. }) => continue,
            Err(e) => return handler.failed(e),
        };
        if let Some(cost) = handler.cost(&incoming) {
            nic.cpu(cost).await;
        }
        if let Err(e) = handler.handle(&nic, incoming).await {
            return handler.failed(e);
        }
    }
}

/// `tasks` handler tasks on `port`, task `i` on channel `channel_base + i` (its own QPs), for
/// a runner to spawn as daemons.
pub fn serve<N: Nic, H: Handler<N>>(
    nic: &N,
    port: u16,
    channel_base: u16,
    tasks: u16,
    handler: Arc<H>,
) -> Vec<Task> {
    (0..tasks)
        .map(|i| {
            let task: Task = Box::pin(serve_one(nic.qp(channel_base + i), port, handler.clone()));
            task
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_round_trip_and_cost_one_word() {
        let body = vec![1u8, 2, 3];
        for envelope in [
            Envelope::Request { reply_port: 0xbeef, id: u32::MAX },
            Envelope::Reply { id: 7 },
            Envelope::Notify,
        ] {
            let bytes = envelope.frame(&body);
            assert_eq!(bytes.len(), ENVELOPE_BYTES + body.len());
            assert_eq!(Envelope::split(&bytes), (envelope, &body[..]));
        }
    }
}
