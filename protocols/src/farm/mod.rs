//! # FaRM-like baseline (ScaleStore §6.7, Figs. 12–13; spec §5.5)
//!
//! ScaleStore's second in-memory competitor, re-implemented as the paper describes it: records
//! in a pre-allocated array range-partitioned over the symmetric nodes; "lock-free one-sided
//! reads … we validate the versions stored in every CPU cache line. For updates, the lock-free
//! one-sided read is used to copy the record to a thread-local buffer, the record is then
//! modified and sent back to the owner. The owner checks the version(s) of the modified record
//! against the local version(s), if they are equal the modified record is installed."
//!
//! ```text
//!  record slot:  line 0 [header = version<<1 | lock, stamp, key/value …]
//!                line 1 [version, stamp, value …]   line 2 [version, stamp, value …]
//!  remote read:  READ 160 B; consistent iff header unlocked and every line's version equals
//!                the header's; else back off and READ again
//!  remote write: validated READ (version v) ──SEND Update{key, v, record}──▶ owner handler:
//!                header still v and unlocked? lock, write lines with v+1, copy, unlock at v+1,
//!                reply Installed{replaced} : reply Changed (the worker backs off, starts over)
//!  local record: the same, on the worker's own memory (no NIC: FaRM exploits locality)
//! ```
//!
//! Read top-down: [`config`] → [`node`] (install, worker, handler) → [`def`] → [`mutants`].
//! Shared with NAM-DB: `workload::record_array` (layout, YCSB loop, open loop).

pub mod config;
pub mod def;
pub mod mutants;
pub mod node;

pub use config::Config;
pub use def::{Farm, FarmPlan};
