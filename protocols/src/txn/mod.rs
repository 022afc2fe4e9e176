//! # Transactions and TPC-C over SELCC (SELCC §6.4, Fig. 19a)
//!
//! The paper's recipe for porting transaction processing to disaggregated memory: tuples
//! heap-organised in GCLs, local latches replaced by SELCC latches, timestamps from an RDMA
//! FAA on a global generator. Here three engines — 2PL no-wait, TO and OCC — run TPC-C's five
//! transactions with the B-link tree (`blink/`) as the index, over the same page/latch
//! trait the tree uses, so they run over SELCC (`protocol: "tpcc"`) and SEL (`"tpcc-sel"`).
//!
//! Read top-down:
//! * [`heap`] — a heap page's CC words and tuples; tuple addresses;
//! * [`pages`] — the page trait plus SELCC's `Atomic` (the timestamp FAA);
//! * [`engine`] — 2PL no-wait, TO, OCC: read, read-for-update, write, insert, commit, abort;
//! * [`tpcc`] — the schema, keys, widths and initial population; [`client`] — NewOrder,
//!   Payment, the terminal loop and its counters;
//! * [`wal`] — a node's write-ahead log with group commit on its storage device; [`twopc`] —
//!   partitioned SELCC with two-phase commit (Fig. 19b);
//! * [`check`] — serializability (dependency-graph cycle check over recorded versions) and the
//!   TPC-C consistency conditions; [`mutants`] — planted bugs; [`def`] — the definition.
//!
//! SELCC and the tree are used only through their public APIs; their own checks (coherence
//! invariants, read-latest oracle, the tree's structure) run beneath these.

pub mod check;
pub mod client;
pub mod def;
pub mod engine;
pub mod heap;
pub mod mutants;
pub mod pages;
pub mod tpcc;
pub mod twopc;
pub mod wal;

#[cfg(test)]
mod upgrade_tests;

pub use def::{Tpcc, TpccPlan};
