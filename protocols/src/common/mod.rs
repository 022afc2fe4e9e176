//! Pieces every protocol's definition shares, so a new protocol writes only what is its own.
//!
//! * [`shape`] — the run shape of a benchmark (threads, operations, cache size) from the
//!   scenario's equivalent spellings, validated with field paths.
//! * [`lookup`] — lookup-only hash maps with one fixed hasher (never iterated).
//! * [`metrics`] — metrics that mean the same for every protocol: per-node throughput and
//!   fairness, cumulative operations over time, `compare_with` speedups.

pub mod lookup;
pub mod metrics;
pub mod shape;
