//! # NAM-DB-like baseline (ScaleStore §6.7, Figs. 12–13; spec §5.5)
//!
//! ScaleStore's first in-memory competitor, with transactions disabled: records live in a
//! pre-allocated array range-partitioned over the symmetric nodes' memory, and every access
//! goes through the NIC, even to a record of the worker's own node ("NAM-DB requires two RDMA
//! atomics even when accessing local data"). Each record has a latch word taken with RDMA
//! atomics: "shared and exclusive latches which are (un)latched with RDMA atomics".
//!
//! ```text
//!  read  (3 round trips):  FAA latch +1 ──▶ READ 136 B ──▶ FAA latch −1
//!                          (old has X: FAA −1, back off, retry)
//!  write (3 round trips):  CAS latch 0→X ──▶ WRITE 136 B ──▶ FAA latch −X
//!                          (CAS fails: back off, retry)
//!  record slot (3 lines):  [latch | key, value …][value …][value …, pad]
//! ```
//!
//! Read top-down: [`config`] → [`node`] (the worker) → [`def`] (the definition, invariants)
//! → [`mutants`]. Shared with FaRM: `workload::record_array` (layout, YCSB loop, open loop).

pub mod config;
pub mod def;
pub mod mutants;
pub mod node;

pub use config::Config;
pub use def::{NamDb, NamDbPlan};
