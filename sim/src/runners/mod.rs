//! Runners: turn one scenario point into a simulation, run it, and return its metrics.
//!
//! Each protocol (or microbenchmark) has one file here that parses its `workload` and
//! `protocol_options` sections with field paths ([`check`]) and builds the run ([`run`]).
//! Adding a protocol to `dmsim run` means adding one arm to each `match` below.

pub mod common;
pub mod gam;
pub mod gather;
pub mod nic_micro;
pub mod plan;
pub mod selcc;
pub mod selcc_recorded;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::scenario::{Point, PointConfig, Problem};
use crate::trace::TraceSink;

/// Protocol names `dmsim run` knows.
pub const PROTOCOLS: &[&str] = &["nic_micro", "selcc", "sel", "gam"];

/// What one point produced.
#[derive(Clone, Debug, Serialize)]
pub struct PointResult {
    pub metrics: BTreeMap<String, f64>,
    pub events: u64,
    pub end_time_ns: u64,
    pub trace_hash: u64,
    pub stop: String,
    /// Simulated client operations (for ops per wall-clock second).
    pub ops: u64,
}

impl PointResult {
    /// A simulation's result: its `metrics` and `ops`, the rest from the engine's outcome.
    pub fn simulated(
        outcome: &crate::engine::Outcome,
        metrics: BTreeMap<String, f64>,
        ops: u64,
    ) -> PointResult {
        PointResult {
            metrics,
            events: outcome.events,
            end_time_ns: outcome.end_time.0,
            trace_hash: outcome.trace_hash,
            stop: format!("{:?}", outcome.stop),
            ops,
        }
    }
}

/// Options for one point's run that do not change its result.
pub struct RunOptions {
    pub trace: TraceSink,
}

/// Runner-specific validation of a resolved point.
pub fn check(config: &PointConfig) -> Vec<Problem> {
    match config.protocol.as_str() {
        "nic_micro" => nic_micro::check(config),
        "gam" => gam::check(config),
        "selcc" | "sel" => selcc::check(config),
        other => vec![Problem::new(
            "protocol",
            format!("unknown protocol {other:?} (known: {})", PROTOCOLS.join(", ")),
        )],
    }
}

/// Run one point. Errors are run-time failures (a stalled or violated run), never bad input,
/// which [`check`] has already rejected.
pub fn run(point: &Point, options: RunOptions) -> Result<PointResult, String> {
    match point.config.protocol.as_str() {
        "nic_micro" => nic_micro::run(point, options),
        "gam" => gam::run(point, options),
        "selcc" | "sel" => selcc::run(point, options),
        other => Err(format!("unknown protocol {other:?}")),
    }
}
