//! The NIC trait: the one seam between a protocol and the world.
//!
//! Everything a protocol does that costs time or crosses the network goes through [`Nic`]:
//! one-sided verbs on any node's registered memory, doorbell batches, two-sided messages,
//! time, local CPU work, task spawning, and the node's own registered memory. The simulator
//! (`dmsim-sim`) and the libibverbs backend (`dmsim-hw`) both implement it; protocol code is
//! generic over `N: Nic` and never knows which one runs it.
//!
//! ```text
//!   compute node 2                       memory node 0
//!  ┌──────────────────────┐   QP (2→0,c)  ┌──────────────────┐
//!  │ task ─ nic.qp(c) ────┼──────────────▶│ region (words)   │
//!  │ task ─ nic.qp(d) ────┼──────────────▶│  latch | data …  │
//!  │ region (words) ◀─────┼── WRITE from  └──────────────────┘
//!  │ inbox[port] ◀────────┼── SEND from other nodes
//!  └──────────────────────┘
//! ```
//!
//! # Semantics both backends honour
//!
//! * **Addresses.** A remote address is `(node, offset)` into that node's single registered
//!   region. Offsets and lengths are in bytes and must be multiples of 8: memory is a sequence of
//!   8-byte words ([`crate::memory::Region`]). A violation is [`NicError::Unaligned`] or
//!   [`NicError::BadAddress`], never a panic.
//! * **Queue pairs.** A handle is bound to one *channel* `c` (see [`Nic::qp`]); the queue pair
//!   used for a verb is `(this node, target node, c)`. Verbs on one QP execute at the target in
//!   post order (per-QP FIFO). There is **no order across QPs**, not even between two channels
//!   of the same task.
//! * **Atomics** (`cas`, `faa`) act on one aligned 8-byte word and are atomic only against other
//!   NIC atomics on that word. A local CPU store or a WRITE can interleave with them.
//! * **CAS returns the old value** whether or not it succeeded; success is `old == expect`.
//! * **Tearing.** A READ or WRITE longer than 64 bytes is not atomic against a concurrent WRITE
//!   of the same range: a reader may see some 64-byte chunks old and others new.
//! * **Doorbell batch.** [`Nic::batch`] posts up to [`MAX_BATCH`] verbs to *one* target on this
//!   handle's QP as one chained work-request list: they execute in order and complete together
//!   (one round trip plus the serialization of all payloads).
//! * **Outstanding work requests.** Each QP has a cap; a verb posted beyond it fails with
//!   [`NicError::QpOverflow`] (as `ibv_post_send` does), so protocols must bound themselves.
//! * **Messages.** [`Nic::send`] delivers a byte message to `(node, port)`; [`Nic::recv`] waits for
//!   the next message on one of this node's ports. Messages between one pair of nodes on one port
//!   arrive in send order. Handlers that run on memory nodes charge their work with [`Nic::cpu`],
//!   which queues for the node's modelled cores.
//! * **Errors are values.** Timeouts, QP errors and bad addresses are [`NicError`]s.

use std::fmt;
use std::future::Future;

use crate::memory::Region;

/// A node in the cluster (compute or memory). Dense: `0..node_count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u16);

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// Byte offset into a node's registered region, with the node it lives on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RemoteAddr {
    pub node: NodeId,
    pub offset_bytes: u64,
}

impl RemoteAddr {
    pub const fn new(node: NodeId, offset_bytes: u64) -> Self {
        RemoteAddr { node, offset_bytes }
    }

    /// The address `delta_bytes` further on the same node.
    pub const fn add(self, delta_bytes: u64) -> Self {
        RemoteAddr { node: self.node, offset_bytes: self.offset_bytes + delta_bytes }
    }
}

impl fmt::Display for RemoteAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}+{:#x}", self.node, self.offset_bytes)
    }
}

/// Virtual (simulator) or monotonic (hardware) time, in integer nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub u64);

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);
    pub const fn from_us(us: u64) -> Nanos {
        Nanos(us * 1_000)
    }
    pub const fn from_ms(ms: u64) -> Nanos {
        Nanos(ms * 1_000_000)
    }
    pub fn saturating_sub(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(other.0))
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
}

impl std::ops::Add for Nanos {
    type Output = Nanos;
    fn add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0 + rhs.0)
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0)
    }
}

/// What a node is for. Memory nodes have much DRAM and few (modelled) cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Compute,
    Memory,
}

/// The static shape of the cluster, identical on every node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// `kinds[i]` is the kind of `NodeId(i)`.
    pub kinds: Vec<NodeKind>,
    /// `region_size_bytes[i]` is the size of node i's registered region.
    pub region_size_bytes: Vec<u64>,
}

impl Cluster {
    pub fn node_count(&self) -> usize {
        self.kinds.len()
    }
    pub fn nodes_of(&self, kind: NodeKind) -> impl Iterator<Item = NodeId> + '_ {
        self.kinds.iter().enumerate().filter(move |(_, k)| **k == kind).map(|(i, _)| NodeId(i as u16))
    }
    pub fn compute_nodes(&self) -> Vec<NodeId> {
        self.nodes_of(NodeKind::Compute).collect()
    }
    pub fn memory_nodes(&self) -> Vec<NodeId> {
        self.nodes_of(NodeKind::Memory).collect()
    }
}

/// One work request. READ/WRITE move bytes between this node's region (`local_bytes`) and the
/// target's; atomics act on the target word and return its old value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Copy `len_bytes` from `remote` into the local region at `local_bytes`.
    Read { remote: RemoteAddr, local_bytes: u64, len_bytes: u32 },
    /// Copy `len_bytes` from the local region at `local_bytes` to `remote`.
    Write { remote: RemoteAddr, local_bytes: u64, len_bytes: u32 },
    /// Write one 8-byte word carried in the request (an inline WRITE).
    WriteWord { remote: RemoteAddr, value: u64 },
    /// Compare-and-swap; returns the old value whether or not it swapped.
    Cas { remote: RemoteAddr, expect: u64, swap: u64 },
    /// Fetch-and-add (wrapping); returns the old value.
    Faa { remote: RemoteAddr, add: u64 },
}

impl Verb {
    pub fn remote(&self) -> RemoteAddr {
        match *self {
            Verb::Read { remote, .. }
            | Verb::Write { remote, .. }
            | Verb::WriteWord { remote, .. }
            | Verb::Cas { remote, .. }
            | Verb::Faa { remote, .. } => remote,
        }
    }

    /// Bytes carried on the wire (payload only).
    pub fn payload_bytes(&self) -> u32 {
        match *self {
            Verb::Read { len_bytes, .. } | Verb::Write { len_bytes, .. } => len_bytes,
            Verb::WriteWord { .. } | Verb::Cas { .. } | Verb::Faa { .. } => 8,
        }
    }

    pub fn class(&self) -> VerbClass {
        match self {
            Verb::Read { .. } => VerbClass::Read,
            Verb::Write { .. } | Verb::WriteWord { .. } => VerbClass::Write,
            Verb::Cas { .. } | Verb::Faa { .. } => VerbClass::Atomic,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Verb::Read { .. } => "READ",
            Verb::Write { .. } => "WRITE",
            Verb::WriteWord { .. } => "WRITEW",
            Verb::Cas { .. } => "CAS",
            Verb::Faa { .. } => "FAA",
        }
    }
}

/// Verb classes the fabric prices differently (READ and atomics cost the NIC more).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VerbClass {
    Read,
    Write,
    Atomic,
    Send,
}

/// Most verbs in one doorbell batch.
pub const MAX_BATCH: usize = 8;

/// Results of a batch: one `u64` per verb (the old value for atomics, 0 otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchResult {
    values: [u64; MAX_BATCH],
    len: u8,
}

impl BatchResult {
    pub fn new(values: &[u64]) -> Self {
        assert!(values.len() <= MAX_BATCH);
        let mut out = BatchResult { values: [0; MAX_BATCH], len: values.len() as u8 };
        out.values[..values.len()].copy_from_slice(values);
        out
    }
    pub fn get(&self, i: usize) -> u64 {
        assert!(i < self.len as usize, "batch result {i} of {}", self.len);
        self.values[i]
    }
    pub fn as_slice(&self) -> &[u64] {
        &self.values[..self.len as usize]
    }
}

/// A message received on a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub from: NodeId,
    pub port: u16,
    pub bytes: Vec<u8>,
}

/// The largest message [`Nic::send`] carries on every backend (the hardware backend's default
/// receive-buffer size). Longer data goes in chunks or by one-sided verbs; the simulator
/// enforces the same limit, so a protocol that would fail on hardware fails in tests.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// Everything that can go wrong on a verb or message. Never a panic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NicError {
    /// The range lies (partly) outside the node's region, or the node does not exist.
    BadAddress { node: NodeId, offset_bytes: u64, len_bytes: u64, region_size_bytes: u64 },
    /// An offset or length is not a multiple of 8 bytes.
    Unaligned { offset_bytes: u64, len_bytes: u64 },
    /// A batch was empty, longer than [`MAX_BATCH`], or spanned several target nodes.
    BadBatch { reason: &'static str },
    /// More work requests outstanding on one QP than its cap.
    QpOverflow { qp: String, cap: u32 },
    /// The queue pair went to the error state (hardware: a failed completion status).
    QpError { qp: String, detail: String },
    /// A verb or message did not complete within the backend's bound.
    Timeout { what: String, after: Nanos },
    /// The peer is gone (crashed, disconnected) or was never reachable.
    PeerGone { node: NodeId },
}

impl fmt::Display for NicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NicError::BadAddress { node, offset_bytes, len_bytes, region_size_bytes } => write!(
                f,
                "bad address {node}+{offset_bytes:#x} len {len_bytes}: region is {region_size_bytes} bytes"
            ),
            NicError::Unaligned { offset_bytes, len_bytes } => {
                write!(f, "unaligned access at {offset_bytes:#x} len {len_bytes}: must be multiples of 8")
            }
            NicError::BadBatch { reason } => write!(f, "bad batch: {reason}"),
            NicError::QpOverflow { qp, cap } => {
                write!(f, "queue pair {qp}: more than {cap} outstanding work requests")
            }
            NicError::QpError { qp, detail } => write!(f, "queue pair {qp} in error: {detail}"),
            NicError::Timeout { what, after } => write!(f, "{what} timed out after {after}"),
            NicError::PeerGone { node } => write!(f, "peer {node} is gone"),
        }
    }
}

impl std::error::Error for NicError {}

pub type NicResult<T> = Result<T, NicError>;

/// A protocol task: `'static`, `Send` so the hardware runtime may run it on any thread.
pub type Task = std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The protocol's whole world. See the module docs for the semantics both backends honour.
///
/// A handle is cheap to clone and bound to one node and one channel (queue-pair set).
pub trait Nic: Clone + Send + Sync + 'static {
    /// The node this handle acts for.
    fn node(&self) -> NodeId;
    /// The cluster's static shape.
    fn cluster(&self) -> &Cluster;
    /// This node's registered region, which local tasks and remote verbs both touch.
    fn local(&self) -> &Region;
    /// The same node, on channel `channel`: verbs use QPs `(node, target, channel)`.
    /// Give each concurrent worker its own channel, as each thread owns its QPs on hardware.
    fn qp(&self, channel: u16) -> Self;
    /// This handle's channel.
    fn channel(&self) -> u16;

    /// Current time.
    fn now(&self) -> Nanos;
    /// Wait at least `duration`.
    fn sleep(&self, duration: Nanos) -> impl Future<Output = ()> + Send;
    /// Charge `duration` of local CPU work. On nodes whose cores are modelled (memory nodes),
    /// this queues for a core; elsewhere it is a sleep. Hardware does nothing (the work was real).
    fn cpu(&self, duration: Nanos) -> impl Future<Output = ()> + Send;
    /// Run `task` concurrently on this node.
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static);

    /// Post up to [`MAX_BATCH`] verbs to one target as one doorbell batch on this handle's QP.
    fn batch(&self, verbs: &[Verb]) -> impl Future<Output = NicResult<BatchResult>> + Send;

    /// Send `bytes` (at most [`MAX_MESSAGE_BYTES`]) to `(to, port)`; completes when the message
    /// is on the wire. A longer message is an error on every backend.
    fn send(&self, to: NodeId, port: u16, bytes: Vec<u8>) -> impl Future<Output = NicResult<()>> + Send;
    /// Wait for the next message on this node's `port`.
    fn recv(&self, port: u16) -> impl Future<Output = NicResult<Message>> + Send;

    /// A protocol-level trace mark (e.g. "acquire X", line 3). The simulator writes it into the
    /// trace and counts it; hardware may ignore it. Must be cheap when tracing is off.
    fn mark(&self, label: &'static str, value: u64);

    /// One READ into the local region.
    fn read(
        &self,
        remote: RemoteAddr,
        local_bytes: u64,
        len_bytes: u32,
    ) -> impl Future<Output = NicResult<()>> + Send {
        async move { self.batch(&[Verb::Read { remote, local_bytes, len_bytes }]).await.map(|_| ()) }
    }
    /// One WRITE from the local region.
    fn write(
        &self,
        remote: RemoteAddr,
        local_bytes: u64,
        len_bytes: u32,
    ) -> impl Future<Output = NicResult<()>> + Send {
        async move { self.batch(&[Verb::Write { remote, local_bytes, len_bytes }]).await.map(|_| ()) }
    }
    /// One inline 8-byte WRITE.
    fn write_word(&self, remote: RemoteAddr, value: u64) -> impl Future<Output = NicResult<()>> + Send {
        async move { self.batch(&[Verb::WriteWord { remote, value }]).await.map(|_| ()) }
    }
    /// Compare-and-swap; returns the old value.
    fn cas(&self, remote: RemoteAddr, expect: u64, swap: u64) -> impl Future<Output = NicResult<u64>> + Send {
        async move { self.batch(&[Verb::Cas { remote, expect, swap }]).await.map(|r| r.get(0)) }
    }
    /// Fetch-and-add; returns the old value.
    fn faa(&self, remote: RemoteAddr, add: u64) -> impl Future<Output = NicResult<u64>> + Send {
        async move { self.batch(&[Verb::Faa { remote, add }]).await.map(|r| r.get(0)) }
    }
}

/// Checks a batch against the cluster shape; both backends call it before posting.
/// `own` is the posting node: READ/WRITE local ranges must lie in its region.
pub fn validate_batch(cluster: &Cluster, own: NodeId, verbs: &[Verb]) -> NicResult<NodeId> {
    if verbs.is_empty() {
        return Err(NicError::BadBatch { reason: "empty batch" });
    }
    if verbs.len() > MAX_BATCH {
        return Err(NicError::BadBatch { reason: "more than MAX_BATCH verbs" });
    }
    let target = verbs[0].remote().node;
    for verb in verbs {
        let remote = verb.remote();
        if remote.node != target {
            return Err(NicError::BadBatch { reason: "a batch goes to one target node" });
        }
        let len_bytes = match *verb {
            Verb::Read { local_bytes, len_bytes, .. } | Verb::Write { local_bytes, len_bytes, .. } => {
                check_range(cluster, RemoteAddr::new(own, local_bytes), len_bytes as u64)?;
                len_bytes as u64
            }
            _ => 8,
        };
        check_range(cluster, remote, len_bytes)?;
    }
    Ok(target)
}

/// Checks that `[offset, offset+len)` is aligned and inside `addr.node`'s region.
pub fn check_range(cluster: &Cluster, addr: RemoteAddr, len_bytes: u64) -> NicResult<()> {
    if !addr.offset_bytes.is_multiple_of(8) || !len_bytes.is_multiple_of(8) {
        return Err(NicError::Unaligned { offset_bytes: addr.offset_bytes, len_bytes });
    }
    let region_size_bytes = cluster.region_size_bytes.get(addr.node.index()).copied().unwrap_or(0);
    let end = addr.offset_bytes.checked_add(len_bytes);
    if addr.node.index() >= cluster.node_count() || end.is_none_or(|end| end > region_size_bytes) {
        return Err(NicError::BadAddress {
            node: addr.node,
            offset_bytes: addr.offset_bytes,
            len_bytes,
            region_size_bytes,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Cluster {
        Cluster { kinds: vec![NodeKind::Memory, NodeKind::Compute], region_size_bytes: vec![64, 16] }
    }

    #[test]
    fn validate_batch_rejects_bad_shapes() {
        // Goal: every malformed batch is an error value naming the problem, never a panic.
        let c = cluster();
        let m = NodeId(0);
        assert!(matches!(validate_batch(&c, NodeId(1), &[]), Err(NicError::BadBatch { .. })));
        let many = [Verb::Faa { remote: RemoteAddr::new(m, 0), add: 1 }; MAX_BATCH + 1];
        assert!(matches!(validate_batch(&c, NodeId(1), &many), Err(NicError::BadBatch { .. })));
        let two_targets = [
            Verb::Faa { remote: RemoteAddr::new(m, 0), add: 1 },
            Verb::Faa { remote: RemoteAddr::new(NodeId(1), 0), add: 1 },
        ];
        assert!(matches!(validate_batch(&c, NodeId(1), &two_targets), Err(NicError::BadBatch { .. })));
        let unaligned = [Verb::Cas { remote: RemoteAddr::new(m, 4), expect: 0, swap: 1 }];
        assert!(matches!(validate_batch(&c, NodeId(1), &unaligned), Err(NicError::Unaligned { .. })));
        let outside = [Verb::Read { remote: RemoteAddr::new(m, 32), local_bytes: 0, len_bytes: 40 }];
        assert!(matches!(validate_batch(&c, NodeId(1), &outside), Err(NicError::BadAddress { .. })));
        let no_node = [Verb::Faa { remote: RemoteAddr::new(NodeId(7), 0), add: 1 }];
        assert!(matches!(validate_batch(&c, NodeId(1), &no_node), Err(NicError::BadAddress { .. })));
        let local_outside = [Verb::Read { remote: RemoteAddr::new(m, 0), local_bytes: 8, len_bytes: 16 }];
        assert!(matches!(validate_batch(&c, NodeId(1), &local_outside), Err(NicError::BadAddress { .. })));
        let fine = [Verb::Read { remote: RemoteAddr::new(m, 32), local_bytes: 0, len_bytes: 16 }];
        assert_eq!(validate_batch(&c, NodeId(1), &fine), Ok(m));
    }
}
