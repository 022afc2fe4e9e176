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
//! * **Local loads race NIC writes.** On hardware a remote WRITE lands in this node's region
//!   while its CPU reads it, between any two loads. The simulator applies NIC writes between
//!   task steps, so a step's loads look atomic there and **the fuzzer cannot find this class
//!   of bug**: read a flag word first ([`crate::memory::Region::load_acquire`]) and the data
//!   its sender wrote before it afterwards (ScaleStore's mailboxes, session 21: the other
//!   order paired an old argument with a new head on Soft-RoCE).
//! * **Doorbell batch.** [`Nic::batch`] posts up to [`MAX_BATCH`] verbs to *one* target on this
//!   handle's QP as one chained work-request list: they execute in order and complete together
//!   (one round trip plus the serialization of all payloads).
//! * **Outstanding work requests.** Each QP has a cap; a verb posted beyond it fails with
//!   [`NicError::QpOverflow`] (as `ibv_post_send` does), so protocols must bound themselves.
//! * **Messages.** [`Nic::send`] delivers a byte message to `(node, port)`; [`Nic::recv`] waits for
//!   the next message on one of this node's ports. Messages between one pair of nodes on one port
//!   arrive in send order. Handlers that run on memory nodes charge their work with [`Nic::cpu`],
//!   which queues for the node's modelled cores.
//! * **Errors are values.** Timeouts, QP errors and bad addresses are [`NicError`]s; a feature
//!   the device lacks is [`NicError::Unsupported`], never a silent emulation.
//!
//! # Extensions for the index and caching papers (Sherman, SMART, DEX, Dolphin, DiFache, ScaleStore)
//!
//! * **Masked atomics** ([`Verb::MaskedCas`], [`Verb::MaskedFaa`]): Mellanox extended atomics.
//!   They run on the per-word atomic unit like CAS/FAA. Backends without them (libibverbs
//!   without mlx5dv, Soft-RoCE) answer [`NicError::Unsupported`]; [`masked::emulate`] is the
//!   explicit, caller-chosen CAS-loop emulation. The arithmetic is in [`masked`].
//! * **Device memory**: a second, small address space per node on the NIC itself
//!   ([`RemoteAddr::device`], [`Space::Device`]), with its own (faster) atomic unit and shorter
//!   latency. Its size per node is [`Nic::device_memory_bytes`] (0: none, and every device
//!   address is [`NicError::BadAddress`]). It is reachable only by verbs, even from its own node.
//! * **Unsignaled posts** ([`Nic::post_unsignaled`]): post without waiting. Per-QP order holds:
//!   later verbs on the same QP execute after it. Each counts against the QP's outstanding cap
//!   until it completes, so a QP cannot fill up with unreaped work requests.
//! * **Waiting on a local word** ([`Nic::wait_word`]): the semantics of a poll loop with period
//!   `P` (reads at `t0 + k·P`) without its per-poll cost; see [`wait`].
//! * **Storage** ([`Nic::ssd_read`], [`Nic::ssd_write`]): a block device per node, moving bytes
//!   between it and the local region; [`Nic::ssd_bytes`] is its size (0: none).
//! * **Node kinds**: [`NodeKind::Symmetric`] nodes have both a cache/clients and shared memory
//!   (ScaleStore). [`Cluster::compute_nodes`] and [`Cluster::memory_nodes`] return only their
//!   own kind; [`Cluster::client_nodes`] and [`Cluster::home_nodes`] include symmetric nodes.

use std::fmt;
use std::future::Future;

use crate::memory::Region;

pub mod masked;
mod validate;
pub mod wait;

pub use validate::{check_range, check_range_in, validate_batch, validate_batch_in};
pub use wait::WordCond;

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

/// Which memory of a node an address names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Space {
    /// The node's registered host memory (its [`Region`]).
    Host,
    /// The NIC's on-chip device memory (ConnectX-5: 256 KiB).
    Device,
}

impl RemoteAddr {
    /// The top offset bit marks device memory. Keeping the space inside `offset_bytes` leaves
    /// every existing address (and its hash, order and trace text) unchanged; no region comes
    /// near 2^63 bytes.
    pub const DEVICE_BIT: u64 = 1 << 63;

    pub const fn new(node: NodeId, offset_bytes: u64) -> Self {
        RemoteAddr { node, offset_bytes }
    }

    /// Byte `offset_bytes` of `node`'s NIC device memory.
    pub const fn device(node: NodeId, offset_bytes: u64) -> Self {
        RemoteAddr { node, offset_bytes: offset_bytes | Self::DEVICE_BIT }
    }

    pub const fn space(self) -> Space {
        if self.offset_bytes & Self::DEVICE_BIT != 0 {
            Space::Device
        } else {
            Space::Host
        }
    }

    /// The offset inside its space (without the device bit).
    pub const fn offset_in_space(self) -> u64 {
        self.offset_bytes & !Self::DEVICE_BIT
    }

    /// The address `delta_bytes` further on the same node.
    pub const fn add(self, delta_bytes: u64) -> Self {
        RemoteAddr { node: self.node, offset_bytes: self.offset_bytes + delta_bytes }
    }
}

impl fmt::Display for RemoteAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.space() {
            Space::Host => write!(f, "{}+{:#x}", self.node, self.offset_bytes),
            Space::Device => write!(f, "{}+dm:{:#x}", self.node, self.offset_in_space()),
        }
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

/// What a node is for. Memory nodes have much DRAM and few (modelled) cores; compute nodes run
/// clients with a small cache; symmetric nodes (ScaleStore) do both: clients and a cache, and a
/// share of the global memory that peers reach by verbs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Compute,
    Memory,
    Symmetric,
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
    /// Nodes of kind `Compute` only (not symmetric ones): protocols with separate compute and
    /// memory pools (SELCC, GAM, DEX) lay themselves out over these.
    pub fn compute_nodes(&self) -> Vec<NodeId> {
        self.nodes_of(NodeKind::Compute).collect()
    }
    /// Nodes of kind `Memory` only (not symmetric ones).
    pub fn memory_nodes(&self) -> Vec<NodeId> {
        self.nodes_of(NodeKind::Memory).collect()
    }
    /// Nodes of kind `Symmetric`.
    pub fn symmetric_nodes(&self) -> Vec<NodeId> {
        self.nodes_of(NodeKind::Symmetric).collect()
    }
    /// Nodes that run clients: `Compute` and `Symmetric`, in id order.
    pub fn client_nodes(&self) -> Vec<NodeId> {
        self.ids_where(|k| matches!(k, NodeKind::Compute | NodeKind::Symmetric))
    }
    /// Nodes that hold shared memory peers reach by verbs: `Memory` and `Symmetric`, in id order.
    pub fn home_nodes(&self) -> Vec<NodeId> {
        self.ids_where(|k| matches!(k, NodeKind::Memory | NodeKind::Symmetric))
    }
    fn ids_where(&self, keep: impl Fn(NodeKind) -> bool) -> Vec<NodeId> {
        self.kinds.iter().enumerate().filter(|(_, k)| keep(**k)).map(|(i, _)| NodeId(i as u16)).collect()
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
    /// Masked compare-and-swap (Mellanox extended atomics): swaps iff
    /// `old & compare_mask == expect & compare_mask`, and then replaces only the bits of
    /// `swap_mask` with those of `swap`. Returns the old value. See [`masked::cas`].
    MaskedCas { remote: RemoteAddr, expect: u64, compare_mask: u64, swap: u64, swap_mask: u64 },
    /// Masked fetch-and-add: field-wise add, where a set bit of `boundary_mask` marks the most
    /// significant bit of a field, so carries do not cross fields. Returns the old value. See
    /// [`masked::faa`].
    MaskedFaa { remote: RemoteAddr, add: u64, boundary_mask: u64 },
}

impl Verb {
    pub fn remote(&self) -> RemoteAddr {
        match *self {
            Verb::Read { remote, .. }
            | Verb::Write { remote, .. }
            | Verb::WriteWord { remote, .. }
            | Verb::Cas { remote, .. }
            | Verb::Faa { remote, .. }
            | Verb::MaskedCas { remote, .. }
            | Verb::MaskedFaa { remote, .. } => remote,
        }
    }

    /// True for the verbs that run on the target's atomic unit.
    pub fn is_atomic(&self) -> bool {
        self.class() == VerbClass::Atomic
    }

    /// True for the masked (extended) atomics.
    pub fn is_masked(&self) -> bool {
        matches!(self, Verb::MaskedCas { .. } | Verb::MaskedFaa { .. })
    }

    /// Bytes carried on the wire (payload only).
    pub fn payload_bytes(&self) -> u32 {
        match *self {
            Verb::Read { len_bytes, .. } | Verb::Write { len_bytes, .. } => len_bytes,
            Verb::WriteWord { .. }
            | Verb::Cas { .. }
            | Verb::Faa { .. }
            | Verb::MaskedCas { .. }
            | Verb::MaskedFaa { .. } => 8,
        }
    }

    pub fn class(&self) -> VerbClass {
        match self {
            Verb::Read { .. } => VerbClass::Read,
            Verb::Write { .. } | Verb::WriteWord { .. } => VerbClass::Write,
            Verb::Cas { .. } | Verb::Faa { .. } | Verb::MaskedCas { .. } | Verb::MaskedFaa { .. } => {
                VerbClass::Atomic
            }
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Verb::Read { .. } => "READ",
            Verb::Write { .. } => "WRITE",
            Verb::WriteWord { .. } => "WRITEW",
            Verb::Cas { .. } => "CAS",
            Verb::Faa { .. } => "FAA",
            Verb::MaskedCas { .. } => "MCAS",
            Verb::MaskedFaa { .. } => "MFAA",
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

/// `verbs` (to any targets) as rounds of doorbell batches: a round holds at most one batch per
/// target, of at most [`MAX_BATCH`] verbs, targets in the order they first appear and each
/// target's verbs in their given order; what does not fit goes to the next round. Posting a
/// round's batches together keeps each QP within one batch of outstanding verbs (the
/// Sherman-derived DSMs' `read_batches_sync` posts a batch per node, then polls them all).
pub fn rounds_by_target(verbs: &[Verb]) -> Vec<Vec<Vec<Verb>>> {
    let mut rounds: Vec<Vec<Vec<Verb>>> = Vec::new();
    // Per target, in first-appearance order: how many of its verbs went out so far.
    let mut sent: Vec<(NodeId, usize)> = Vec::new();
    for v in verbs {
        let node = v.remote().node;
        let at = match sent.iter().position(|(n, _)| *n == node) {
            Some(at) => at,
            None => {
                sent.push((node, 0));
                sent.len() - 1
            }
        };
        let round = sent[at].1 / MAX_BATCH;
        sent[at].1 += 1;
        if rounds.len() <= round {
            rounds.push(Vec::new());
        }
        let batches = &mut rounds[round];
        match batches.iter_mut().find(|b| b[0].remote().node == node) {
            Some(b) => b.push(*v),
            None => batches.push(vec![*v]),
        }
    }
    rounds
}

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
    /// The device or backend lacks a feature (e.g. masked atomics on Soft-RoCE, or no storage
    /// device configured). `feature` names it; `detail` says what would provide it.
    Unsupported { feature: &'static str, detail: String },
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
            NicError::Unsupported { feature, detail } => {
                write!(f, "{feature} not supported on this device ({detail})")
            }
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
    /// Charge `duration` of local CPU work. On nodes whose cores are modelled (memory nodes, and
    /// compute/symmetric nodes when the run models theirs), this queues for a core; elsewhere it
    /// is a sleep. Hardware does nothing (the work was real).
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

    /// Post up to [`MAX_BATCH`] verbs to one target on this handle's QP and return without
    /// waiting for them. Later verbs on the same QP execute after them (per-QP FIFO); results
    /// (old values, READ data) are not reported, so use it for releases and log appends whose
    /// outcome the caller does not need. Each verb counts against the QP's outstanding cap until
    /// it completes: posting more than the cap allows is [`NicError::QpOverflow`], and a
    /// backend may bound unsignaled work requests further (`unsignaled_max` in the simulator's
    /// profile). A failure after the post (hardware: an error completion) puts the QP in the
    /// error state, so the next verb on that QP reports it.
    fn post_unsignaled(&self, verbs: &[Verb]) -> NicResult<()>;

    /// Bytes of NIC device memory `node` has (0: none). See [`Space::Device`].
    fn device_memory_bytes(&self, node: NodeId) -> u64 {
        let _ = node;
        0
    }

    /// Wait until the word at `offset_bytes` of this node's region satisfies `until`, as a
    /// poll loop with period `period` started now (`t0`) would: the value is read at
    /// `t0 + k·period` and the first read that satisfies `until` ends the wait. Returns that
    /// value. With `timeout`, the first read at or after `t0 + timeout` that does not satisfy
    /// it ends the wait with [`NicError::Timeout`]. A `period` of 0 counts as 1 ns.
    ///
    /// This default *is* that poll loop. The simulator overrides it to wake only at the first
    /// poll time at or after a verb changes the word (the same timing, no per-poll events);
    /// hardware spins with bounded backoff. Only NIC writes (remote WRITEs, atomics, READ data
    /// landing here) wake a simulator waiter early; a store by a local task is seen at the next
    /// poll time after the next NIC write or at the timeout — use [`crate::sync::Notify`]
    /// between local tasks.
    fn wait_word(
        &self,
        offset_bytes: u64,
        until: WordCond,
        period: Nanos,
        timeout: Option<Nanos>,
    ) -> impl Future<Output = NicResult<u64>> + Send {
        wait::poll_loop(self, offset_bytes, until, period, timeout)
    }

    /// Sleep until a NIC write lands in `[offset_bytes, offset_bytes + len_bytes)` of this node's
    /// region, as a task sweeping that range every `period` from now (`t0`) would notice it: at
    /// the first sweep time `t0 + k·period` after the write (`Ok(true)`), or at the first sweep
    /// time at or after `t0 + timeout` (`Ok(false)`). For a task serving several mailboxes (a
    /// message handler) that would otherwise sleep and sweep again. It may return `true` for a
    /// write that changed nothing the caller cares about: callers sweep again either way.
    ///
    /// This default (hardware) sleeps one period and returns `true`: the caller's loop is
    /// then exactly the sweep loop it stands for. (Comparing snapshots of the range instead
    /// would lose a write that lands between the caller's sweep and the first snapshot; a NIC
    /// DMAs at any instruction.) The simulator, where a task's poll is atomic, wakes the task
    /// only at the first sweep time after a verb writes into the range, with no per-sweep
    /// events; [`wait::sweep_loop`] is the timing it must match. As with [`Nic::wait_word`],
    /// local stores wake nobody.
    fn wait_write(
        &self,
        offset_bytes: u64,
        len_bytes: u64,
        period: Nanos,
        timeout: Option<Nanos>,
    ) -> impl Future<Output = NicResult<bool>> + Send {
        let _ = timeout;
        let valid = check_range(self.cluster(), RemoteAddr::new(self.node(), offset_bytes), len_bytes.max(8));
        let sleep = self.sleep(Nanos(period.0.max(1)));
        async move {
            valid?;
            sleep.await;
            Ok(true)
        }
    }

    /// Bytes of this node's storage device (0: none).
    fn ssd_bytes(&self) -> u64 {
        0
    }

    /// Read `len_bytes` at byte `ssd_offset` of this node's storage device into the local
    /// region at `local_bytes`. The data lands when the future completes.
    fn ssd_read(
        &self,
        ssd_offset: u64,
        local_bytes: u64,
        len_bytes: u32,
    ) -> impl Future<Output = NicResult<()>> + Send {
        let _ = (ssd_offset, local_bytes, len_bytes);
        std::future::ready(Err(no_storage()))
    }

    /// Write `len_bytes` from the local region at `local_bytes` to byte `ssd_offset` of this
    /// node's storage device; durable when the future completes. The local bytes must stay
    /// unchanged until then (as for any DMA).
    fn ssd_write(
        &self,
        ssd_offset: u64,
        local_bytes: u64,
        len_bytes: u32,
    ) -> impl Future<Output = NicResult<()>> + Send {
        let _ = (ssd_offset, local_bytes, len_bytes);
        std::future::ready(Err(no_storage()))
    }

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
    /// Masked compare-and-swap ([`Verb::MaskedCas`]); returns the old value.
    fn masked_cas(
        &self,
        remote: RemoteAddr,
        expect: u64,
        compare_mask: u64,
        swap: u64,
        swap_mask: u64,
    ) -> impl Future<Output = NicResult<u64>> + Send {
        let verb = Verb::MaskedCas { remote, expect, compare_mask, swap, swap_mask };
        async move { self.batch(&[verb]).await.map(|r| r.get(0)) }
    }
    /// Masked fetch-and-add ([`Verb::MaskedFaa`]); returns the old value.
    fn masked_faa(
        &self,
        remote: RemoteAddr,
        add: u64,
        boundary_mask: u64,
    ) -> impl Future<Output = NicResult<u64>> + Send {
        async move { self.batch(&[Verb::MaskedFaa { remote, add, boundary_mask }]).await.map(|r| r.get(0)) }
    }
}

/// The error of a backend (or node) without a storage device.
pub fn no_storage() -> NicError {
    NicError::Unsupported { feature: "storage device", detail: "this node has no SSD configured".into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_hold_one_batch_per_target_in_first_appearance_order() {
        let read = |node: u16, offset_bytes: u64| Verb::Read {
            remote: RemoteAddr::new(NodeId(node), offset_bytes),
            local_bytes: 0,
            len_bytes: 8,
        };
        // Ten verbs to node 2, one to node 1 in between: round 1 is node 2's first eight and
        // node 1's one, round 2 node 2's last two.
        let mut verbs: Vec<Verb> = (0..3).map(|i| read(2, 8 * i)).collect();
        verbs.push(read(1, 0));
        verbs.extend((3..10).map(|i| read(2, 8 * i)));
        let rounds = rounds_by_target(&verbs);
        assert_eq!(rounds.len(), 2);
        let nodes =
            |r: &Vec<Vec<Verb>>| r.iter().map(|b| (b[0].remote().node.0, b.len())).collect::<Vec<_>>();
        assert_eq!(nodes(&rounds[0]), vec![(2, 8), (1, 1)]);
        assert_eq!(nodes(&rounds[1]), vec![(2, 2)]);
        let offsets: Vec<u64> =
            rounds[0][0].iter().chain(&rounds[1][0]).map(|v| v.remote().offset_bytes).collect();
        assert_eq!(offsets, (0..10).map(|i| 8 * i).collect::<Vec<u64>>());
        assert!(rounds_by_target(&[]).is_empty());
    }

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
