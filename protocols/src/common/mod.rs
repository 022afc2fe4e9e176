//! Pieces every protocol shares, so a new protocol writes only what is its own.
//!
//! * [`bench`] — the micro-benchmark client's observer, the history [`bench::Logger`] and the
//!   unique write stamps every protocol's client loop shares.
//! * [`error`] — errors as values with their context (node, verb, address, protocol step) and
//!   a node's first-error slot.
//! * [`rpc`] — request/reply messaging over `Nic::send`/`recv`: request ids, reply ports,
//!   deferred replies, notifications, timeouts, N-task servers.
//! * [`sync_ext`] — executor-agnostic `timeout` and `select2`.
//! * [`shape`] — the run shape of a benchmark (threads, operations, cache size) from the
//!   scenario's equivalent spellings, validated with field paths.
//! * [`lookup`] — lookup-only hash maps with one fixed hasher (never iterated).
//! * [`local_latch`] — the timing of a compute server's local latches across sockets
//!   (hand-off per acquisition, waiters queueing, optimistic readers waiting out a holder).
//! * [`memo`] — the last few results of a pure, expensive planning step (bulk-loaded trees),
//!   shared by every plan of a process.
//! * [`metrics`] — metrics that mean the same for every protocol: per-node throughput and
//!   fairness, cumulative operations over time, percentiles.

pub mod bench;
pub mod error;
pub mod local_latch;
pub mod lookup;
pub mod memo;
pub mod metrics;
pub mod rpc;
pub mod shape;
pub mod sync_ext;
