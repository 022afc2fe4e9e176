//! The simulator's side of the registry: every protocol definition behind one object-safe
//! trait, looked up by the scenario's `protocol` name. The CLI builds the registry (one line
//! per protocol); nothing in this crate names a protocol.

use std::collections::BTreeMap;
use std::sync::Arc;

use dmsim_protocols::harness::{CheckLevel, Mutant, Plan, PointSpec, Problem, Protocol};
use dmsim_protocols::nic::Cluster;

use super::common::point_spec;
use super::simulate::{check_histories, simulate, SimulateOptions, Simulated};
use crate::engine::{SimConfig, StopReason};
use crate::scenario::PointConfig;
use dmsim_protocols::harness::{Clock, Violation};

/// One simulation of a protocol, judged: the run, its metrics if it finished, and the history
/// checkers' verdict over its logs.
pub struct Judged {
    pub run: Simulated,
    /// The plan's metrics (only if the run finished).
    pub metrics: Option<BTreeMap<String, f64>>,
    /// Client operations completed.
    pub ops: u64,
    /// The history checkers' coverage metrics, or the first violation they found.
    pub histories: Result<BTreeMap<String, f64>, Violation>,
}

impl Judged {
    /// The earliest protocol error any node reported (the cause of whatever else failed).
    pub fn protocol_error(&self) -> Result<(), String> {
        match dmsim_protocols::harness::first_error(&self.run.reports) {
            Some(e) => Err(format!("protocol error: {e}")),
            None => Ok(()),
        }
    }

    /// The point's result, or why the run failed: the earliest protocol error, a run that did
    /// not finish, the end-of-run check, then the history checkers, in that order.
    ///
    /// A fault the protocol has no recovery for is a result, not a failure: its `stop` says
    /// "unrecoverable: …", its metrics cover the run up to the fault and carry
    /// `unrecoverable = 1`.
    pub fn into_result(self) -> Result<super::PointResult, String> {
        self.protocol_error()?;
        if let StopReason::Unrecoverable { message } = &self.run.outcome.stop {
            let mut metrics = self.metrics.clone().unwrap_or_default();
            metrics.insert("unrecoverable".into(), 1.0);
            let mut result = super::PointResult::simulated(&self.run.outcome, metrics, self.ops);
            result.stop = message.clone();
            return Ok(result);
        }
        super::common::require_finished(&self.run.outcome)?;
        self.run.verified.as_ref().map_err(|v| format!("end-of-run check: {v}"))?;
        let history = self.histories.map_err(|v| format!("history check: {v}"))?;
        let mut metrics = self.metrics.unwrap_or_default();
        metrics.extend(history);
        Ok(super::PointResult::simulated(&self.run.outcome, metrics, self.ops))
    }
}

/// A protocol definition as the simulator, the fuzzer and the scenario loader use it.
pub trait SimProtocol: Send + Sync {
    fn names(&self) -> &'static [&'static str];
    fn about(&self) -> &'static str;
    fn mutants(&self) -> &'static [Mutant];
    /// Problems with `spec` (empty: it plans).
    fn check(&self, spec: &PointSpec) -> Vec<Problem>;
    /// Plan `spec` and run it once; `config` builds the simulator configuration for the plan's
    /// cluster.
    fn simulate(
        &self,
        spec: &PointSpec,
        config: &dyn Fn(Cluster) -> SimConfig,
        options: SimulateOptions,
    ) -> Result<Judged, Vec<Problem>>;
}

/// Any [`Protocol`] as a [`SimProtocol`].
pub struct Driver<P: Protocol>(pub P);

impl<P: Protocol> SimProtocol for Driver<P> {
    fn names(&self) -> &'static [&'static str] {
        self.0.names()
    }

    fn about(&self) -> &'static str {
        self.0.about()
    }

    fn mutants(&self) -> &'static [Mutant] {
        self.0.mutants()
    }

    fn check(&self, spec: &PointSpec) -> Vec<Problem> {
        self.0.plan(spec).err().unwrap_or_default()
    }

    fn simulate(
        &self,
        spec: &PointSpec,
        config: &dyn Fn(Cluster) -> SimConfig,
        options: SimulateOptions,
    ) -> Result<Judged, Vec<Problem>> {
        let plan = self.0.plan(spec)?;
        let mut sim = config(plan.cluster());
        sim.faults.mark_unrecoverable(&spec.protocol, |kind| plan.recovers_from(kind));
        if spec.payload_free {
            sim.payload_spans = plan.payload_spans();
        }
        let run = simulate(&plan, sim, options);
        let ended = run.finished() || matches!(run.outcome.stop, StopReason::Unrecoverable { .. });
        let metrics = (ended && options.metrics).then(|| plan.metrics(&run.reports, run.outcome.end_time));
        let ops = if options.metrics { plan.ops(&run.reports) } else { 0 };
        let clocks = vec![Clock::default(); run.reports.len()];
        let histories = check_histories(&run.reports, &clocks);
        Ok(Judged { run, metrics, ops, histories })
    }
}

/// Every registered protocol, by name.
#[derive(Clone, Default)]
pub struct Registry {
    entries: Vec<Arc<dyn SimProtocol>>,
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Register `protocol` under all its names.
    pub fn with<P: Protocol>(mut self, protocol: P) -> Registry {
        self.add(Arc::new(Driver(protocol)));
        self
    }

    /// Register an already wrapped protocol.
    pub fn add(&mut self, protocol: Arc<dyn SimProtocol>) {
        for name in protocol.names() {
            assert!(self.get(name).is_none(), "protocol name {name:?} registered twice");
        }
        self.entries.push(protocol);
    }

    pub fn get(&self, name: &str) -> Option<&dyn SimProtocol> {
        self.entries.iter().find(|e| e.names().contains(&name)).map(|e| e.as_ref())
    }

    /// Every name, in registration order.
    pub fn names(&self) -> Vec<&'static str> {
        self.entries.iter().flat_map(|e| e.names().iter().copied()).collect()
    }

    /// A shared handle on the protocol named `name`.
    pub fn get_arc(&self, name: &str) -> Option<Arc<dyn SimProtocol>> {
        self.entries.iter().find(|e| e.names().contains(&name)).cloned()
    }

    /// The protocol of `config`, or a problem at `protocol` listing the known names.
    pub fn lookup(&self, name: &str) -> Result<&dyn SimProtocol, Problem> {
        self.get(name).ok_or_else(|| {
            Problem::new(
                "protocol",
                format!("unknown protocol {name:?} (known: {})", self.names().join(", ")),
            )
        })
    }

    /// Protocol-specific validation of a resolved point, including its `compare_with`
    /// references (each validated as the point it becomes).
    pub fn check(&self, config: &PointConfig) -> Vec<Problem> {
        let protocol = match self.lookup(&config.protocol) {
            Ok(p) => p,
            Err(p) => return vec![p],
        };
        let level = if config.run.check { CheckLevel::Full } else { CheckLevel::Off };
        let mut out = protocol.check(&point_spec(config, 1, level, false, "none"));
        for (name, overrides) in &config.compare_with {
            let at = format!("compare_with.{name}");
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                out.push(Problem::new(at.clone(), "name must be letters, digits and _"));
            }
            match super::compare::reference(config, overrides) {
                Err(p) => out.push(p.under(&at)),
                Ok(r) => {
                    for p in crate::scenario::load::check_point(&r, self) {
                        out.push(p.under(&at));
                    }
                }
            }
        }
        out
    }
}
