//! Running scenario points: any registered protocol, through its one definition.
//!
//! A protocol registers a [`dmsim_protocols::harness::Protocol`]; the CLI puts it in a
//! [`Registry`]. [`run`] turns a point into a [`PointSpec`](dmsim_protocols::harness::PointSpec),
//! plans it, simulates it ([`simulate`]), computes the plan's metrics, runs the history checkers
//! when the run logged operations, and adds the `compare_with` reference runs. The fuzzer and
//! the hardware runner consume the same definition, so a scenario means the same everywhere.

pub mod common;
pub mod compare;
pub mod registry;
pub mod simulate;

use std::cell::Cell;
use std::collections::BTreeMap;

use dmsim_protocols::harness::options::problems_line;
use dmsim_protocols::harness::CheckLevel;
use serde::Serialize;

pub use registry::{Driver, Judged, Registry, SimProtocol};
pub use simulate::{check_histories, simulate, Exchange, SimulateOptions, Simulated};

use crate::scenario::Point;
use crate::trace::TraceSink;
use common::{point_spec, sim_config};

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

/// Throughputs besides `throughput_mops` that `compare_with` also divides: DEX's `thread_mops`
/// (each thread's own rate, summed, as the DEX artifact's benchmark measures).
const ALSO_COMPARED: &[&str] = &["thread_mops"];

/// Run one point and its `compare_with` references. Errors are run-time failures (a stalled or
/// violated run), never bad input, which the scenario loader has already rejected.
pub fn run(registry: &Registry, point: &Point, options: RunOptions) -> Result<PointResult, String> {
    let mut result = measure(registry, point, options.trace)?;
    for (name, overrides) in &point.config.compare_with {
        let config = compare::reference(&point.config, overrides).map_err(|p| p.to_string())?;
        let reference = Point { config, ..point.clone() };
        let r =
            measure(registry, &reference, TraceSink::Off).map_err(|e| format!("reference {name:?}: {e}"))?;
        result.ops += r.ops;
        result.events += r.events;
        let ref_mops = r.metrics.get("throughput_mops").copied().unwrap_or(0.0);
        let own = result.metrics.get("throughput_mops").copied().unwrap_or(0.0);
        result.metrics.insert(format!("ref_{name}_mops"), ref_mops);
        result.metrics.insert(format!("speedup_{name}"), if ref_mops > 0.0 { own / ref_mops } else { 0.0 });
        // Other throughput definitions a protocol reports get their own ratio,
        // `speedup_<name>_by_<metric>`, and the reference's value, `ref_<name>_<metric>`.
        for metric in ALSO_COMPARED {
            if let (Some(own), Some(theirs)) = (result.metrics.get(*metric).copied(), r.metrics.get(*metric))
            {
                let ratio = if *theirs > 0.0 { own / theirs } else { 0.0 };
                result.metrics.insert(format!("speedup_{name}_by_{metric}"), ratio);
                result.metrics.insert(format!("ref_{name}_{metric}"), *theirs);
            }
        }
    }
    Ok(result)
}

/// One simulation of `point` (no references): metrics, plus the history checkers' coverage
/// with `run.check`.
pub fn measure(registry: &Registry, point: &Point, trace: TraceSink) -> Result<PointResult, String> {
    let protocol = registry.lookup(&point.config.protocol).map_err(|p| p.to_string())?;
    let level = if point.config.run.check { CheckLevel::Full } else { CheckLevel::Off };
    let spec = point_spec(&point.config, point.seed, level, false, "none");
    let trace = Cell::new(Some(trace));
    let config = |cluster| sim_config(point, cluster, trace.take().unwrap_or(TraceSink::Off));
    let simulated =
        protocol.simulate(&spec, &config, SimulateOptions::MEASURE).map_err(|p| problems_line(&p))?;
    let waits = point.config.run.fabric_waits.then(|| fabric_wait_metrics(&simulated.run.outcome));
    let mut result = simulated.into_result()?;
    result.metrics.extend(waits.into_iter().flatten());
    Ok(result)
}

/// `run.fabric_waits`: per node kind and fabric resource, the run's queueing in nanoseconds
/// over every verb executed (kinds absent from the cluster give no column).
fn fabric_wait_metrics(outcome: &crate::engine::Outcome) -> BTreeMap<String, f64> {
    use dmsim_protocols::nic::NodeKind;
    let v = &outcome.verbs;
    let verbs = (v.read + v.write + v.atomic + v.send).max(1) as f64;
    let mut out = BTreeMap::new();
    for kind in [NodeKind::Compute, NodeKind::Memory, NodeKind::Symmetric] {
        let nodes: Vec<&crate::fabric::WaitTotals> =
            outcome.fabric_waits_ps.iter().filter(|(k, _)| *k == kind).map(|(_, w)| w).collect();
        if nodes.is_empty() {
            continue;
        }
        let name = match kind {
            NodeKind::Compute => "compute",
            NodeKind::Memory => "memory",
            NodeKind::Symmetric => "symmetric",
        };
        for wait in crate::fabric::Wait::ALL {
            let ps: u64 = nodes.iter().map(|w| w[wait as usize]).sum();
            out.insert(format!("fabric_wait_{name}_{}_ns_per_verb", wait.name()), ps as f64 / 1e3 / verbs);
        }
    }
    out
}

/// `point` as `dmsim hw run` runs it — every node quiesces at the end, `run.check` logs
/// histories only (no in-process oracle), the reports travel over the NIC in the end-of-run
/// exchange — but in the simulator, so the hardware path is tested without hardware. `mutant`
/// plants a bug (`"none"`: the correct protocol; tests show the hardware checks catch one).
pub fn rehearse_hardware(registry: &Registry, point: &Point, mutant: &str) -> Result<PointResult, String> {
    let protocol = registry.lookup(&point.config.protocol).map_err(|p| p.to_string())?;
    let level = if point.config.run.check { CheckLevel::Histories } else { CheckLevel::Off };
    let spec = point_spec(&point.config, point.seed, level, true, mutant);
    let config = |cluster| sim_config(point, cluster, TraceSink::Off);
    let options = SimulateOptions {
        exchange: Exchange::OverNic,
        invariants: false,
        catch_panics: false,
        metrics: true,
    };
    protocol.simulate(&spec, &config, options).map_err(|p| problems_line(&p))?.into_result()
}
