//! Sherman (Q. Wang, Y. Lu, J. Shu, SIGMOD'22): a write-optimised B+-tree on disaggregated
//! memory, written against the NIC trait. Facts (layouts, constants, the lock protocol) come
//! from the authors' code (thustorage/Sherman, `Tree.h`/`Tree.cpp`); the DEX spec
//! (`shared/specs/dex.md` § baselines, Table 2) is what the scenarios compare with.
//!
//! Read top-down:
//!
//! * [`layout`] — 1 KB nodes as 128 words; Sherman's front/rear node versions with entry
//!   versions, or one version per 64-byte line; global addresses; the lock table; regions.
//! * [`node`] — a node decoded from a READ (the version check) and encoded for a write.
//! * [`locks`] — hierarchical on-chip locks: CAS on a device-memory word, the compute node's
//!   local lock table, hand-over up to 8 times.
//! * [`cache`] — the index cache of level-1 internal nodes.
//! * [`tree`] — lookup, scan, insert/update/delete with leaf and internal splits and root growth;
//!   entry-granular write-back combined with the unlock in one doorbell batch.
//! * [`leaf_cache`] — the leaves through DiFache (`leaf_cache` option; DiFache's Fig. 14 top).
//! * [`bulk`] — the bulk-loaded tree.
//! * [`bench`] — the YCSB client loop and its history log; [`stats`] its counters.
//! * [`check`] — structural invariants after a run; [`mutants`] — planted bugs.
//! * [`def`] — the definition (`protocol: "sherman"`): options, plan, metrics, verify.
//!
//! Open choices and known gaps: `NEEDS.md` in this folder.

pub mod bench;
pub mod bulk;
pub mod cache;
pub mod check;
pub mod config;
pub mod def;
pub mod layout;
pub mod leaf_cache;
pub mod locks;
pub mod mutants;
pub mod node;
pub mod stats;
pub mod tree;

pub use config::Config;
pub use def::{Sherman, ShermanPlan};
