//! Protocol errors as values: a failed verb or message becomes a [`ProtocolError`] naming the
//! node that saw it, the verb, the remote address (or node and port), the protocol step and the
//! [`NicError`] underneath, and travels up with `?` to the operation's caller.
//!
//! Why a context type and not bare `NicError`s: a QP error deep inside an acquire says nothing
//! about *which* latch, GCL or peer; the runner has to report something a person can act on.
//! Tasks that have no caller (handlers, evictors, drainers) record their error in the node's
//! [`ErrorSlot`] and stop; the node's owner reads [`ErrorSlot::first`]. Tasks of a node that wait
//! on one of those (a release in flight, a store buffer draining) look at the slot when they
//! wake, so one failure stops the node's clients instead of leaving them waiting forever.
//!
//! [`NicExt`] gives every `Nic` fallible verbs that attach the context at the call site:
//! `nic.try_faa(addr, 1, "release").await?`.

use std::fmt;
use std::future::Future;
use std::sync::Mutex;

use crate::nic::{BatchResult, Message, Nanos, Nic, NicError, NodeId, RemoteAddr, Verb};

/// Where a failed operation was aimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A one-sided verb's remote address (a batch: its first verb's).
    Memory(RemoteAddr),
    /// A message's destination (SEND) or the port waited on (RECV, the local node).
    Port { node: NodeId, port: u16 },
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Memory(addr) => write!(f, "{addr}"),
            Target::Port { node, port } => write!(f, "{node} port {port}"),
        }
    }
}

/// A NIC failure with the protocol context it happened in. One pointer wide (the context is
/// boxed), so `Result`s stay small in the futures that carry them; fields read through `Deref`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(Box<ErrorInfo>);

/// What a [`ProtocolError`] says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorInfo {
    /// The node whose verb or message failed.
    pub node: NodeId,
    /// "CAS", "FAA", "READ", "WRITE", "WRITEW", a batch as "CAS+READ", "SEND", "RECV".
    pub verb: String,
    pub target: Target,
    /// The protocol step, e.g. "acquire exclusive" or "invalidation".
    pub during: &'static str,
    /// When the node saw it (its clock).
    pub at: Nanos,
    pub source: NicError,
}

impl std::ops::Deref for ProtocolError {
    type Target = ErrorInfo;
    fn deref(&self) -> &ErrorInfo {
        &self.0
    }
}

impl From<ErrorInfo> for ProtocolError {
    fn from(info: ErrorInfo) -> Self {
        ProtocolError(Box::new(info))
    }
}

impl ProtocolError {
    /// A failed batch (or single verb).
    pub fn batch(node: NodeId, at: Nanos, verbs: &[Verb], during: &'static str, source: NicError) -> Self {
        let verb = verbs.iter().map(Verb::name).collect::<Vec<_>>().join("+");
        let target = match verbs.first() {
            Some(v) => Target::Memory(v.remote()),
            None => Target::Port { node, port: 0 },
        };
        ErrorInfo { node, verb, target, during, at, source }.into()
    }

    /// A failed SEND to `(to, port)` or RECV on this node's `port` (`to == node`).
    pub fn message(
        node: NodeId,
        at: Nanos,
        verb: &'static str,
        to: NodeId,
        port: u16,
        during: &'static str,
        source: NicError,
    ) -> Self {
        ErrorInfo { node, verb: verb.into(), target: Target::Port { node: to, port }, during, at, source }
            .into()
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} {} failed during {} at {}: {}",
            self.node, self.verb, self.target, self.during, self.at, self.source
        )
    }
}

impl std::error::Error for ProtocolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

pub type ProtocolResult<T> = Result<T, ProtocolError>;

/// The first error a node's background tasks hit (the first one wins; later ones are usually
/// consequences). Read by the node's owner: runners, bench workers deciding to stop.
#[derive(Debug, Default)]
pub struct ErrorSlot {
    first: Mutex<Option<ProtocolError>>,
}

impl ErrorSlot {
    pub fn new() -> ErrorSlot {
        ErrorSlot::default()
    }

    /// Keep `error` if it is the first; returns whether it was.
    pub fn record(&self, error: ProtocolError) -> bool {
        let mut first = self.first.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_some() {
            return false;
        }
        *first = Some(error);
        true
    }

    pub fn first(&self) -> Option<ProtocolError> {
        self.first.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn is_set(&self) -> bool {
        self.first.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// `Err(first)` once an error is recorded: for waits that would otherwise never end.
    pub fn check(&self) -> ProtocolResult<()> {
        self.first().map_or(Ok(()), Err)
    }
}

/// Fallible verbs and messages that attach [`ProtocolError`] context (`during` names the
/// protocol step). Same futures as the plain [`Nic`] methods underneath: no extra polls, no
/// extra events.
pub trait NicExt: Nic {
    fn try_batch(
        &self,
        verbs: &[Verb],
        during: &'static str,
    ) -> impl Future<Output = ProtocolResult<BatchResult>> + Send {
        async move {
            self.batch(verbs)
                .await
                .map_err(|e| ProtocolError::batch(self.node(), self.now(), verbs, during, e))
        }
    }

    /// `verbs` to several targets in [`crate::nic::rounds_by_target`]'s rounds: each round's
    /// batches posted together and waited for together; the first error, if any.
    fn try_batches_by_target(
        &self,
        verbs: &[Verb],
        during: &'static str,
    ) -> impl Future<Output = ProtocolResult<()>> + Send
    where
        Self: Sync,
    {
        async move {
            for round in crate::nic::rounds_by_target(verbs) {
                let done =
                    crate::sync::join_all(round.iter().map(|b| self.try_batch(b, during)).collect()).await;
                done.into_iter().try_for_each(|r| r.map(|_| ()))?;
            }
            Ok(())
        }
    }

    fn try_faa(
        &self,
        remote: RemoteAddr,
        add: u64,
        during: &'static str,
    ) -> impl Future<Output = ProtocolResult<u64>> + Send {
        async move { self.try_batch(&[Verb::Faa { remote, add }], during).await.map(|r| r.get(0)) }
    }

    fn try_cas(
        &self,
        remote: RemoteAddr,
        expect: u64,
        swap: u64,
        during: &'static str,
    ) -> impl Future<Output = ProtocolResult<u64>> + Send {
        async move { self.try_batch(&[Verb::Cas { remote, expect, swap }], during).await.map(|r| r.get(0)) }
    }

    fn try_write_word(
        &self,
        remote: RemoteAddr,
        value: u64,
        during: &'static str,
    ) -> impl Future<Output = ProtocolResult<()>> + Send {
        async move { self.try_batch(&[Verb::WriteWord { remote, value }], during).await.map(|_| ()) }
    }

    fn try_send(
        &self,
        to: NodeId,
        port: u16,
        bytes: Vec<u8>,
        during: &'static str,
    ) -> impl Future<Output = ProtocolResult<()>> + Send {
        async move {
            self.send(to, port, bytes)
                .await
                .map_err(|e| ProtocolError::message(self.node(), self.now(), "SEND", to, port, during, e))
        }
    }

    fn try_recv(
        &self,
        port: u16,
        during: &'static str,
    ) -> impl Future<Output = ProtocolResult<Message>> + Send {
        async move {
            self.recv(port).await.map_err(|e| {
                ProtocolError::message(self.node(), self.now(), "RECV", self.node(), port, during, e)
            })
        }
    }
}

impl<N: Nic> NicExt for N {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_node_verb_address_and_step() {
        let verbs = [
            Verb::Cas { remote: RemoteAddr::new(NodeId(0), 0x40), expect: 0, swap: 1 },
            Verb::Read { remote: RemoteAddr::new(NodeId(0), 0x40), local_bytes: 0, len_bytes: 64 },
        ];
        let e = ProtocolError::batch(
            NodeId(2),
            Nanos(5),
            &verbs,
            "acquire exclusive",
            NicError::PeerGone { node: NodeId(0) },
        );
        assert_eq!(
            e.to_string(),
            "n2: CAS+READ n0+0x40 failed during acquire exclusive at 5ns: peer n0 is gone"
        );
        let slot = ErrorSlot::new();
        assert!(slot.check().is_ok());
        assert!(slot.record(e.clone()));
        let later: ProtocolError = ErrorInfo { during: "later", ..(*e).clone() }.into();
        assert!(!slot.record(later), "the first error wins");
        assert_eq!(slot.check(), Err(e));
    }
}
