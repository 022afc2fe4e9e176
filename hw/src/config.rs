//! Tunables of the hardware backend, with the reasons for their defaults.

use std::path::PathBuf;
use std::time::Duration;

/// How a node's NIC resources are sized and bounded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HwConfig {
    /// Channels per target node: `Nic::qp(c)` uses QP `(this, target, c % channels)`. Folding
    /// extra channels onto fewer QPs only adds ordering, which the trait allows.
    pub channels: u16,
    /// Outstanding work requests per QP (the `QpOverflow` cap). Also the number of completion
    /// slots per QP, since every batch holds at least one work request.
    pub qp_depth: u32,
    /// Bound on one verb or batch. Soft-RoCE under emulation has millisecond tails; a real NIC
    /// answers in microseconds, so a dead peer is reported by the transport (`retry_cnt`) first.
    pub verb_timeout: Duration,
    /// Bound on one `recv`; `None` (the default) waits as long as the node runs. A handler
    /// waiting for requests is not a hang — it legitimately idles while peers work, and
    /// protocols end their handler loop on the first `recv` error (SELCC does), so a default
    /// bound would silently stop a node serving invalidations after an idle spell. Peer death
    /// is reported by the verbs and sends to that peer (transport retries, `verb_timeout`).
    pub recv_timeout: Option<Duration>,
    /// Largest `send` payload.
    pub max_message_bytes: u32,
    /// Receive buffers posted per peer, and send slots per peer.
    pub message_depth: u32,
    /// Local ACK timeout exponent (4.096 µs · 2^n): 14 ≈ 67 ms.
    pub ack_timeout: u8,
    /// Transport retries before a verb fails with "retry exceeded" (the peer is gone).
    pub retry_count: u8,
    /// Worker threads of the runtime. Keep 1: protocols change a node's state in synchronous
    /// steps between awaits (as the simulator runs them, one task at a time), so several OS
    /// threads polling one node's tasks would race CPU against CPU (e.g. DiFache's header
    /// writes); only NIC writes may interleave with a step on hardware.
    pub threads: usize,
    /// Bound on each bootstrap step (rendezvous, barriers).
    pub bootstrap_timeout: Duration,
    /// Bound on the closing barrier: how long a finished rank waits (still serving) for the
    /// slowest one.
    pub finish_timeout: Duration,
    /// Bytes of *emulated* NIC device memory this node offers (0: none). It is a second
    /// registered host-memory region reached through its own rkey: device addresses, bounds and
    /// atomics behave as on a NIC with on-chip memory, but the latency and atomic rate are host
    /// memory's. Real on-chip memory (`ibv_alloc_dm`, ConnectX-5+) is not bound; Soft-RoCE has none.
    pub device_memory_bytes: u64,
    /// The node's storage device: a plain file (created and sized to `ssd_bytes` at setup),
    /// read with `pread`, written with `pwrite` + `fdatasync` (no O_DIRECT). `None`: no storage,
    /// and `ssd_read`/`ssd_write` are `Unsupported`.
    pub ssd_path: Option<PathBuf>,
    /// Size of the storage file in bytes.
    pub ssd_bytes: u64,
}

impl Default for HwConfig {
    fn default() -> Self {
        HwConfig {
            channels: 4,
            qp_depth: 64,
            verb_timeout: Duration::from_secs(10),
            recv_timeout: None,
            max_message_bytes: 4096,
            message_depth: 32,
            ack_timeout: 14,
            retry_count: 7,
            threads: 1,
            bootstrap_timeout: Duration::from_secs(60),
            finish_timeout: Duration::from_secs(1800),
            device_memory_bytes: 0,
            ssd_path: None,
            ssd_bytes: 0,
        }
    }
}
