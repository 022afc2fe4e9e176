//! # SELCC and SEL
//!
//! SELCC (Wang, Wang, Aref: "Cache Coherence Over Disaggregated Memory"; spec
//! `shared/specs/selcc.md`) keeps compute-node caches coherent with one-sided RDMA only: each
//! Global Cache Line (GCL) starts with an 8-byte latch word that is both a shared/exclusive
//! latch and the directory ([`latch`]). Nodes keep the latch after use (lazy release) and settle
//! conflicts with invalidation messages between compute nodes ([`handler`]). SEL, the uncached
//! baseline, is the same latch acquired and released around every access ([`config::Mode::Sel`]).
//!
//! Read top-down beside the spec:
//! * [`config`] — every optimization as a switch (ablations), mutants;
//! * [`latch`] — §3.1 the latch word and the pure acquire transitions;
//! * [`layout`] — §2 where GCLs, frames, reply slots and ring slots live;
//! * [`frame`], [`cache`] — §3.2 frames, memos, MSI mapping; §2 sharded hash + LRU;
//! * [`ops`] — Table 1 API, lock/unlock, frames, release; `ownership.rs`: §3.3–3.4 acquire and upgrade;
//! * [`message`], [`handler`] — §3.5 invalidations, the three cases, drop/defer/resend;
//!   `sharers.rs` — Case 3 without waiting: the writer keeps CASing while sharers release;
//! * [`fairness`] — §5.3 lease, priority slot, priority matching;
//! * [`dirty`], [`evict`] — §5.2 dirty bounds, batched eviction with a ring per QP;
//! * [`stats`], [`check`] — metrics; invariants and the read-latest oracle for check mode;
//! * [`recovery`] — §6.5 compute-node crashes: heartbeats, a lease, the stale-ownership scan;
//! * [`sel`] — SEL as the authors run it: per-thread global latch, reader count, no backoff;
//! * [`bench`] — per-node tasks for the §7.1 micro-benchmark.
//!
//! Spec disagreements and choices are marked [CHOICE]/[GAP] where they are made; the main ones
//! are listed in `NEEDS.md` beside this file.

pub mod bench;
pub mod cache;
pub mod check;
pub mod check_incremental;
pub mod config;
pub mod def;
pub mod dirty;
pub mod evict;
pub mod fairness;
pub mod frame;
pub mod handler;
mod join;
pub mod latch;
pub mod layout;
pub mod message;
pub mod metrics;
pub mod mutants;
pub mod node;
pub mod ops;
mod ownership;
pub mod recorded;
pub mod recovery;
pub mod sel;
mod sharers;
pub mod stats;

pub use config::{Config, Mode, Mutant};
pub use def::{Selcc, SelccPlan};
pub use layout::{setup_memory_node, Gaddr, Layout};
pub use node::{Handle, Node, NodeState, Worker};

/// A compute node's position among the cluster's compute nodes: its bit in the latch word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComputeIndex(pub u8);
