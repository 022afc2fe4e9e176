//! DEX (B. Lu, K. Huang, C.-J. M. Liang, T. Wang, E. Lo, PVLDB 17(10), 2024): a B+-tree on
//! disaggregated memory with compute-side logical partitioning, a path-aware cache of inner
//! nodes and leaves, and cost-aware offloading to memory-server threads. Spec: `shared/specs/dex.md`;
//! facts the paper leaves open come from the artifact (baotonglu/dex), marked [ART] there.
//!
//! Read top-down:
//!
//! * [`partition`] — the key space cut into equal ranges, one per compute server; which nodes
//!   are shared; how YCSB requests are routed to their owner; a planned repartitioning's map.
//! * [`bulk`] — the bulk-loaded tree: leaves cut at partition boundaries, level-M subtrees on
//!   one memory server. Nodes are Sherman's 1 KB word-aligned nodes ([`crate::sherman::node`],
//!   per-line versions) with fences `[lowest, highest)`.
//! * [`cache`] — frames, mapping table with the I/O flag, swizzled pointers, cooling map.
//! * [`tree`] — Algorithm 1's traversal, admission, cooling, eager splits under RDMA locks for
//!   shared nodes, refresh of stale shared nodes, lookups, writes and scans; the timing of the
//!   local latches (`tree/locks.rs`) and logical repartitioning (`tree/repartition.rs`).
//! * [`offload`] — the offload RPC: cost model, wire format, the memory server's handler.
//! * [`bench`] — the YCSB client loop; [`check`] — cache and tree invariants; [`mutants`].
//! * [`def`] — the definition (`protocol: "dex"`): options, plan, metrics, verify.
//!
//! Choices, simplifications and what is missing: `NEEDS.md` in this folder.

pub mod bench;
pub mod bulk;
pub mod cache;
pub mod check;
pub mod config;
pub mod def;
pub mod mutants;
pub mod offload;
pub mod partition;
pub mod tree;

pub use config::Config;
pub use def::{Dex, DexPlan};
