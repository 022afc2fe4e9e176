//! # The protocol definition: what `dmsim run`, `fuzz`, `replay` and `hw run` all consume
//!
//! A protocol registers **once** (one line in the CLI's registry) with a [`Protocol`]: its
//! scenario names, its mutants, and how a scenario point becomes a [`Plan`]. A plan is the
//! backend-independent form of a run — cluster shape, each node's tasks for any `N: Nic`, the
//! metrics from the nodes' [`NodeReport`]s, and, in check mode, the invariants over the nodes'
//! state and the post-run checks. The simulator runs every node of a plan in one process; the
//! hardware backend runs one node per process and gathers the reports over the NIC
//! ([`gather`]); the fuzzer runs plans under chosen schedules with every checker on.
//!
//! ```text
//!  scenario point ──▶ PointSpec ──Protocol::plan──▶ Plan
//!                                                    │ cluster() · setup(nic) · node(nic)
//!        ┌───────────────────────────┬───────────────┴──────────────┐
//!        ▼                           ▼                              ▼
//!   sim: all nodes, one Sim    fuzz: + invariants, faults     hw: one node per process
//!        └────────── NodeReports ──▶ Plan::metrics / verify / history checkers ◀──┘
//! ```
//!
//! Nothing here knows a backend: options arrive as JSON values with field paths for errors
//! ([`Problem`]), and the run's knobs that belong to the harness (check level, quiescing at the
//! end, the planted mutant) arrive in the [`PointSpec`].

pub mod gather;
pub mod history;
pub mod options;
pub mod plan;
pub mod point;
pub mod protocol;

pub use history::{on_reference_clock, Clock, LoggedOp, OpLog};
pub use options::{join_path, merge_options, parse_typed, Problem};
pub use plan::{
    check_no_lost_key, first_error, report_error, FaultKind, Invariants, Memory, MemoryWrites, NodeReport,
    NodeRun, Plan, Progress, Violation,
};
pub use point::{CheckLevel, PointSpec};
pub use protocol::{Mutant, Protocol};
