//! DiFache (Zhang et al., arXiv 2505.18013): a compute-node-side object cache for RDMA
//! disaggregated memory with *decentralized* coherence, and the baselines that share its
//! client loop. Spec: `shared/specs/difache.md`; every gap filled is a [CHOICE] in `NEEDS.md`.
//!
//! Read top-down beside the spec:
//!
//! * [`config`] — variants (DiFache, noAC, no cache, noCC), owner tracking, sizes, the workload.
//! * [`layout`] — the same offsets on every CN (index, headers, buffers) and on every MN
//!   (objects, application locks, owner sets, mode locks). Spec §3.1.
//! * [`index`] — the hopscotch index: 64-byte groups of four buckets + lock, 16-bucket
//!   neighbourhoods, one-READ remote lookup. Spec §3.1.2, §3.2.
//! * [`cache`] — header allocation with default-mode discovery (§3.3), the mode check and
//!   switch (§3.4), read hit / miss (§3.6), write with flush-then-invalidate by broadcast or
//!   owner sets (§3.7), eviction; atomics that switch the object off first (§3.8,
//!   `cache/atomic.rs`); batched and nested calls (§4.5, `cache/batch.rs`).
//! * [`profit`] — the caching-profit model (§3.5, reconstructed) and latency samples.
//! * [`cmcache`] — the CMCache baseline: read misses and writes by RPC to a centralized manager
//!   (a dedicated CN or memory node 0) that serializes them per object and invalidates owners.
//! * [`recovery`] — compute-node failures: heartbeat timeouts, the coordinator's CN list, caching
//!   disabled while the survivors sync and drop their caches, the dead CNs' locks freed.
//! * [`bench`] — the micro-benchmark clients (lock, read, validate, write, unlock); batched
//!   and nested operations in `bench/batched.rs`.
//! * [`trace`] — synthetic stand-ins for the Twitter cache traces (Figs. 11, 13 right), from
//!   each cluster's published statistics.
//! * [`check`] — the regular-register history check and the per-event invariants (spec §4).
//! * [`mutants`] — planted bugs, including the races spec §9 suspects.
//! * [`def`] — the definition every command consumes.

pub mod bench;
pub mod cache;
pub mod check;
pub mod cmcache;
pub mod config;
pub mod def;
pub mod index;
pub mod layout;
pub mod mutants;
pub mod profit;
pub mod recovery;
pub mod stats;
pub mod trace;

pub use config::{Config, Variant, Workload};
pub use def::{Difache, DifachePlan};
