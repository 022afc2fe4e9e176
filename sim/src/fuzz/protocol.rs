//! The fuzz target of any registered protocol: its scenario point, varied per seed by the
//! swarm, run through the same definition `dmsim run` uses, with every checker on.
//!
//! Checks, in the order they can fire:
//! 1. after every event: the protocol's invariants ([`Plan::invariants`], e.g. SELCC's
//!    coherence invariants and read-latest oracle, GAM's single writer);
//! 2. protocol assertions (a panic is the checker `"panic"`);
//! 3. after the run: per-key linearizability and sequential consistency of the clients'
//!    logged history (write order rebuilt from the values each write replaced);
//! 4. the protocol's end-of-run check ([`Plan::verify`]) once every node quiesced;
//! 5. liveness: a run that does not finish within the scenario's virtual-time bound, or stalls,
//!    is a violation — unless a fault the protocol has no recovery for ended it
//!    ([`StopReason::Unrecoverable`]: the verdict "unrecoverable: <protocol> has no recovery for
//!    <fault>"). A protocol that recovers from a crash must let its survivors finish.
//!
//! [`Plan::invariants`]: dmsim_protocols::harness::Plan::invariants
//! [`Plan::verify`]: dmsim_protocols::harness::Plan::verify

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use dmsim_protocols::harness::{CheckLevel, Mutant};
use dmsim_protocols::nic::NodeId;
use serde_json::Value;

use super::swarm::{draw, FuzzSpec, Swarm};
use super::target::{
    describe_stop, Failure, Faults, FuzzTarget, RunRequest, RunResult, Verdict, LAST_TRACE_LINES,
};
use crate::engine::StopReason;
use crate::runners::common::{point_spec, sim_config_for};
use crate::runners::{Exchange, Registry, SimProtocol, SimulateOptions};
use crate::scenario::load::{check_point, resolve_point, DistinctProblems};
use crate::scenario::{PointConfig, Problem, ScenarioFile};
use crate::trace::TraceSink;

/// How many swarm combinations loading validates exhaustively.
const COMBINATIONS_CHECKED: usize = 4096;

/// A scenario, validated for fuzzing.
#[derive(Clone)]
pub struct ProtocolTarget {
    pub file: ScenarioFile,
    raw: Value,
    pub spec: FuzzSpec,
    protocol: Arc<dyn SimProtocol>,
    /// Points already resolved, by their overrides' JSON: a swarm draws from few corners, and
    /// re-parsing the scenario for every schedule was ~4 % of a `fuzz-small` campaign (#15).
    /// Clones share it: the result is a pure function of the overrides.
    points: Arc<Mutex<BTreeMap<String, Result<PointConfig, Problem>>>>,
}

/// Enough for every corner combination a swarm plans in (`COMBINATIONS_CHECKED`) and then
/// some; a swarm that draws from value ranges stops filling the cache here, not memory.
const POINTS_CACHED: usize = 4096;

impl ProtocolTarget {
    /// Parse and validate a scenario (its JSON text); every problem carries its field path.
    pub fn from_json(text: &str, registry: &Registry) -> Result<ProtocolTarget, Vec<Problem>> {
        let raw: Value = crate::scenario::strict_json::parse(text)
            .map_err(|e| vec![Problem::new("", format!("malformed JSON: {e}"))])?;
        let file: ScenarioFile = crate::scenario::load::parse_typed(&raw, "").map_err(|p| vec![p])?;
        let mut problems = Vec::new();
        if file.sweep.panels.is_some() || file.sweep.series.is_some() || file.sweep.x.is_some() {
            problems.push(Problem::new(
                "sweep",
                "fuzzing runs one configuration: put its variation in fuzz.swarm",
            ));
        }
        let Some(protocol) = registry.get_arc(&file.protocol) else {
            return Err(vec![registry
                .lookup(&file.protocol)
                .err()
                .unwrap_or_else(|| Problem::new("protocol", "unknown"))]);
        };
        let spec = match FuzzSpec::parse(&file.fuzz) {
            Ok(s) => s,
            Err(mut p) => {
                problems.append(&mut p);
                return Err(problems);
            }
        };
        if file.cluster.compute_nodes == 0 && file.cluster.symmetric_nodes == 0 {
            problems.push(Problem::new(
                "cluster.compute_nodes",
                "fuzzing needs at least 1 compute node (or symmetric node)",
            ));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        // Every combination of the swarm's corners when there are few enough (a swarm that draws
        // cluster sizes and cache sizes must plan in every pairing); else each corner alone.
        let combos = spec.combinations(COMBINATIONS_CHECKED).unwrap_or_else(|| {
            let mut alone = vec![Vec::new()];
            alone.extend(spec.corners().into_iter().map(|c| vec![c]));
            alone
        });
        let mut distinct = DistinctProblems::default();
        for overrides in combos {
            let context = || {
                if overrides.is_empty() {
                    String::new()
                } else {
                    let shown: Vec<String> = overrides.iter().map(|(p, v)| format!("{p} = {v}")).collect();
                    format!(" (with fuzz.swarm {})", shown.join(", "))
                }
            };
            match resolve_point(&raw, &overrides) {
                Err(p) => distinct.add(p, context, "swarm combinations"),
                Ok(config) => {
                    for p in check_point(&config, registry) {
                        distinct.add(p, context, "swarm combinations");
                    }
                }
            }
            if distinct.len() >= 10 {
                break;
            }
        }
        if !distinct.is_empty() {
            return Err(distinct.into_problems());
        }
        Ok(ProtocolTarget { file, raw, spec, protocol, points: Arc::default() })
    }

    /// The swarm configuration of `seed` (a pure function of the seed and the scenario).
    pub fn swarm(&self, seed: u64, faults: Faults) -> Swarm {
        self.swarm_and_point(seed, faults).0
    }

    /// The swarm of `seed` and the point it makes, resolved once (resolving re-parses the
    /// scenario: twice per schedule was ~5 % of a `fuzz-small` campaign).
    fn swarm_and_point(&self, seed: u64, faults: Faults) -> (Swarm, Result<PointConfig, Problem>) {
        let resolved: RefCell<Option<Result<PointConfig, Problem>>> = RefCell::new(None);
        // The nodes with clients (compute, then symmetric) of the point the overrides make.
        let clients = |overrides: &[(String, Value)]| {
            let point = self.resolve(overrides);
            let nodes = match &point {
                Ok(point) => {
                    let c = &point.cluster;
                    (0..c.compute_nodes + c.symmetric_nodes).map(|i| NodeId(c.memory_nodes + i)).collect()
                }
                Err(_) => vec![NodeId(self.file.cluster.memory_nodes)],
            };
            *resolved.borrow_mut() = Some(point);
            nodes
        };
        let swarm = draw(&self.spec, seed, faults, &clients);
        let point = resolved.into_inner().unwrap_or_else(|| self.point_config(&swarm));
        (swarm, point)
    }

    /// The point a seed runs: the scenario with the seed's swarm applied.
    pub fn point_config(&self, swarm: &Swarm) -> Result<PointConfig, Problem> {
        self.resolve(&swarm.overrides)
    }

    /// [`resolve_point`] of this scenario, remembered (the result is a pure function of the
    /// overrides).
    fn resolve(&self, overrides: &[(String, Value)]) -> Result<PointConfig, Problem> {
        let key = serde_json::to_string(overrides).expect("overrides are JSON values");
        if let Some(point) = self.points.lock().unwrap().get(&key) {
            return point.clone();
        }
        let point = resolve_point(&self.raw, overrides);
        let mut points = self.points.lock().unwrap();
        if points.len() < POINTS_CACHED {
            points.insert(key, point.clone());
        }
        point
    }

    /// Whether `name` is one of this protocol's mutants (or `"none"`).
    pub fn knows_mutant(&self, name: &str) -> bool {
        name == "none" || self.protocol.mutants().iter().any(|m| m.name == name)
    }
}

impl FuzzTarget for ProtocolTarget {
    fn mutants(&self) -> Vec<(&'static str, &'static str)> {
        self.protocol.mutants().iter().map(|m: &Mutant| (m.name, m.breaks)).collect()
    }

    fn describe_swarm(&self, seed: u64, faults: Faults) -> String {
        self.swarm(seed, faults).to_string()
    }

    fn run(&self, request: &RunRequest) -> RunResult {
        let (swarm, config) = self.swarm_and_point(request.seed, request.faults);
        // A combination loading could not check exhaustively may not plan: a failed schedule
        // naming the draw, never a crash of the campaign.
        let unplanned = |problems: String| RunResult {
            verdict: Verdict::Violation(Failure {
                checker: "swarm".into(),
                message: format!(
                    "seed {} draws a point that does not plan ({swarm}): {problems}",
                    request.seed
                ),
                at_ns: 0,
                last_trace: Vec::new(),
            }),
            choice_log: Default::default(),
            trace_hash: 0,
            decisions: 0,
            ready_decisions: 0,
            events: 0,
            end_ns: 0,
            swarm: swarm.to_string(),
            trace_lines: Vec::new(),
            marks: BTreeMap::new(),
        };
        let config = match config {
            Ok(c) => c,
            Err(p) => return unplanned(p.to_string()),
        };
        let spec = point_spec(&config, request.seed, CheckLevel::Full, true, &request.mutant);
        let make = |cluster| {
            let trace = if request.trace { TraceSink::Memory(Vec::new()) } else { TraceSink::Off };
            let mut sim = sim_config_for(&config, request.seed, cluster, trace);
            sim.strategy = request.strategy.clone();
            sim.record_choices = true;
            // The scenario's own faults, plus the families the campaign draws.
            sim.faults = crate::scenario::faults::merge_plans(&sim.faults, &swarm.faults);
            sim
        };
        let options = SimulateOptions {
            exchange: Exchange::Direct,
            invariants: self.spec.check_every_event,
            catch_panics: true,
            // The verdict reads no metrics.
            metrics: false,
        };
        let judged = match self.protocol.simulate(&spec, &make, options) {
            Ok(j) => j,
            Err(problems) => return unplanned(dmsim_protocols::harness::options::problems_line(&problems)),
        };
        let outcome = &judged.run.outcome;
        let at_ns = outcome.end_time.0;
        let mut verdict = Verdict::Pass;
        // The first violation found wins.
        let fail = |verdict: &mut Verdict, checker: String, message: String| {
            if !matches!(verdict, Verdict::Violation(_)) {
                *verdict = Verdict::Violation(Failure { checker, message, at_ns, last_trace: Vec::new() });
            }
        };
        if let Some(message) = &judged.run.panic {
            fail(&mut verdict, "panic".into(), message.clone());
        } else if let StopReason::Violation { message } = &outcome.stop {
            match &judged.run.invariant {
                Some(v) => fail(&mut verdict, v.invariant.clone(), v.message.clone()),
                None => fail(&mut verdict, "invariant".into(), message.clone()),
            }
        }
        if let Err(e) = judged.protocol_error() {
            fail(&mut verdict, "protocol error".into(), e);
        }
        if let Err(v) = &judged.histories {
            fail(&mut verdict, v.invariant.clone(), v.message.clone());
        }
        if let Err(v) = &judged.run.verified {
            fail(&mut verdict, v.invariant.clone(), v.message.clone());
        }
        if let (Verdict::Pass, StopReason::Unrecoverable { message }) = (&verdict, &outcome.stop) {
            verdict = Verdict::Crash(message.clone());
        } else if matches!(verdict, Verdict::Pass) && !matches!(outcome.stop, StopReason::Finished) {
            // Survivors of a crash the protocol recovers from must finish too.
            let crashed = match swarm.crash.filter(|(_, at)| *at <= at_ns) {
                Some((node, at)) => format!(" after node {} crashed at {at} ns", node.0),
                None => String::new(),
            };
            fail(
                &mut verdict,
                "liveness".into(),
                format!("the run {}{crashed}", describe_stop(&outcome.stop)),
            )
        }
        let mut trace_lines = judged.run.outcome.trace_lines.clone();
        if let Verdict::Violation(f) = &mut verdict {
            let skip = trace_lines.len().saturating_sub(LAST_TRACE_LINES);
            f.last_trace = trace_lines[skip..].to_vec();
        }
        if !request.trace {
            trace_lines.clear();
        }
        let outcome = judged.run.outcome;
        RunResult {
            verdict,
            choice_log: outcome.choice_log,
            trace_hash: outcome.trace_hash,
            decisions: outcome.decisions,
            ready_decisions: outcome.ready_decisions,
            events: outcome.events,
            end_ns: outcome.end_time.0,
            swarm: swarm.to_string(),
            trace_lines,
            marks: outcome.marks,
        }
    }
}
