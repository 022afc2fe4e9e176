//! # dmsim-sim: the deterministic simulator
//!
//! A tour, in the order a run flows:
//!
//! ```text
//!  scenario JSON ──▶ scenario::load (validated config, field-path errors)
//!        │
//!        ▼
//!  engine::Sim ── SimConfig { cluster, fabric::Profile, choice::Strategy, trace } ──┐
//!        │ spawn tasks: protocol code generic over N: Nic, here N = SimNic          │
//!        ▼                                                                          │
//!  run loop: (time_ns, seq) event queue · ready tasks picked by the choice source  │
//!        │  verbs walk the fabric model (links, NIC rate caps, atomic unit, cores) │
//!        ▼                                                                          │
//!  Outcome { stop, events, trace_hash, choice_log, … } ──▶ report (CSV, SVG, JSON) ┘
//! ```
//!
//! * [`engine`] — the executor and event loop; [`simnic`] — `impl Nic for SimNic`.
//! * [`fabric`] — the timing model and NIC profiles.
//! * [`choice`] — the one recorded source of nondeterminism (random, replay, PCT).
//! * [`trace`] — the rolling hash and the one-line-per-event trace.
//!
//! Architecture invariants: one run is one thread (rayon only across runs); virtual time is
//! integer nanoseconds; nothing here reads the wall clock or iterates a hash map.

#![forbid(unsafe_code)]

pub mod check;
pub mod choice;
pub mod engine;
pub mod fabric;
pub mod fuzz;
pub mod report;
pub mod runners;
pub mod scenario;
pub mod simnic;
pub mod trace;

pub use engine::{Outcome, Sim, SimConfig, StopReason};
pub use simnic::SimNic;
