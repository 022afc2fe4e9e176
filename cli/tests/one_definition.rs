//! One protocol definition, one meaning: a scenario resolves to the same options, the same
//! cluster and the same schedule under `dmsim run` and under `dmsim fuzz` (its default random
//! strategy, no faults, the swarm left out), for every registered protocol with a fuzz
//! scenario. Before the harness these were three hand-built drivers that merged options
//! differently.

use dmsim::registry;
use dmsim_protocols::harness::{CheckLevel, Plan, Protocol};
use dmsim_sim::choice::Strategy;
use dmsim_sim::fuzz::{Faults, FuzzTarget, ProtocolTarget, RunRequest, Verdict};
use dmsim_sim::runners::common::{point_spec, sim_config_for};
use dmsim_sim::runners::SimulateOptions;
use dmsim_sim::scenario;
use dmsim_sim::trace::TraceSink;
use serde_json::Value;

const EVENTS: usize = 1000;

/// The scenario text without its swarm (the fuzzer then runs the point unvaried), with enough
/// operations for more than [`EVENTS`] trace lines.
fn unvaried(path: &str) -> String {
    let text =
        std::fs::read_to_string(format!("{}/../scenarios/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    doc["fuzz"]["swarm"] = serde_json::json!({});
    doc["workload"]["ops_per_thread"] = serde_json::json!(100);
    doc.to_string()
}

fn same_under_run_and_fuzz<P: Protocol>(
    path: &str,
    protocol: P,
    same_options: impl Fn(&P::Plan, &P::Plan) -> bool,
) {
    let text = unvaried(path);
    let registry = registry::sim();
    let loaded = scenario::load_str(path, &text, &registry).unwrap_or_else(|e| panic!("{e}"));
    let point = &loaded.points[0];
    let target = ProtocolTarget::from_json(&text, &registry).unwrap();
    let swarm = target.swarm(point.seed, Faults::default());
    let fuzzed = target.point_config(&swarm).unwrap();

    // Options and cluster: the plans each command builds from its resolved point.
    let run_plan =
        protocol.plan(&point_spec(&point.config, point.seed, CheckLevel::Off, false, "none")).unwrap();
    let fuzz_plan = protocol.plan(&point_spec(&fuzzed, point.seed, CheckLevel::Full, true, "none")).unwrap();
    assert!(same_options(&run_plan, &fuzz_plan), "{path}: options differ between run and fuzz");
    assert_eq!(run_plan.cluster(), fuzz_plan.cluster(), "{path}: cluster differs");

    // Schedule: the run's trace against the fuzzer's, event by event.
    let sim = registry.get(&point.config.protocol).unwrap();
    let spec = point_spec(&point.config, point.seed, CheckLevel::Off, false, "none");
    let config = |cluster| sim_config_for(&point.config, point.seed, cluster, TraceSink::Memory(Vec::new()));
    let run = sim.simulate(&spec, &config, SimulateOptions::MEASURE).unwrap();
    let fuzz = target.run(&RunRequest {
        seed: point.seed,
        strategy: Strategy::Random { seed: point.seed },
        mutant: "none".into(),
        faults: Faults::default(),
        trace: true,
    });
    assert_eq!(fuzz.verdict, Verdict::Pass, "{path}");
    let (a, b) = (&run.run.outcome.trace_lines, &fuzz.trace_lines);
    assert!(a.len() >= EVENTS && b.len() >= EVENTS, "{path}: {} and {} events", a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).take(EVENTS).enumerate() {
        assert_eq!(x, y, "{path}: event {i} differs between run and fuzz");
    }
}

#[test]
fn selcc_means_the_same_under_run_and_fuzz() {
    same_under_run_and_fuzz("selcc/fuzz-small.json", dmsim_protocols::selcc::Selcc, |a, b| {
        a.config() == b.config()
    });
}

#[test]
fn gam_means_the_same_under_run_and_fuzz() {
    same_under_run_and_fuzz("gam/fuzz-small.json", dmsim_protocols::gam::Gam, |a, b| {
        a.config() == b.config()
    });
}
