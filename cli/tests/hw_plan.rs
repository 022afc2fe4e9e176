//! The backend-independent plans `dmsim hw run` executes, run here in the simulator: the same
//! per-node tasks and report/metrics code as on hardware, so a hardware run's logic is tested
//! without a NIC.

use std::path::Path;

use dmsim::registry;
use dmsim_protocols::harness::{Plan, Protocol};
use dmsim_sim::runners::common::point_spec;
use dmsim_sim::runners::{rehearse_hardware, RunOptions};
use dmsim_sim::scenario;
use dmsim_sim::trace::TraceSink;

#[test]
fn selcc_plan_drains_and_frees_every_latch() {
    // Goal: the SELCC hardware plan (drain at end, memory nodes count held latches after the
    // compute nodes finish) reports work done and no latch left held.
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hw/vm/scenarios/selcc-3node.json");
    let s = scenario::load(&file, &registry::sim()).expect("scenario loads");
    let point = &s.points[0];
    let spec = point_spec(&point.config, point.seed, Default::default(), true, "none");
    let plan = dmsim_protocols::selcc::Selcc.plan(&spec).expect("plan builds");
    assert_eq!(plan.cluster().node_count(), 3);
    let result = rehearse_hardware(&registry::sim(), point, "none").expect("run finishes");
    assert_eq!(result.ops, 2 * 2 * 1000);
    assert_eq!(result.metrics["latches_held_at_end"], 0.0);
    assert!(result.metrics["throughput_mops"] > 0.0);
    assert!(result.metrics["invalidation_ratio"] > 0.0, "hot lines must conflict: {:?}", result.metrics);
}

fn selcc_point_with(options: serde_json::Value) -> scenario::Point {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hw/vm/scenarios/selcc-3node.json");
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    json["run"]["check"] = serde_json::json!(true);
    json["protocol_options"] = options.clone();
    // Tests run as threads of one process: the counter keeps two calls with the same options
    // from writing (and truncating) one file while the other reads it.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!(
        "dmsim-hw-plan-{}-{call}-{}.json",
        std::process::id(),
        options_tag(&options)
    ));
    std::fs::write(&path, json.to_string()).unwrap();
    scenario::load(&path, &registry::sim()).expect("scenario loads").points[0].clone()
}

#[test]
fn selcc_plan_with_check_passes_the_history_checkers() {
    // Goal: with `check: true` the hardware plan logs every operation (writes with the value
    // they replaced), memory nodes report the final data, and the merged history passes the
    // write-chain, linearizability and sequential-consistency checkers — the checks rank 0
    // runs after a hardware run.
    let point = selcc_point_with(serde_json::json!({}));
    let result = rehearse_hardware(&registry::sim(), &point, "none").expect("run passes");
    // 4000 one-word operations plus one final read per key touched.
    assert!(result.metrics["history_ops"] > 4000.0, "{:?}", result.metrics);
    assert!(result.metrics["history_keys_checked"] > 10.0, "{:?}", result.metrics);
    assert_eq!(result.metrics["history_clock_uncertainty_us"], 0.0);
}

#[test]
fn selcc_plan_history_check_catches_a_lost_write_back() {
    // Goal: without the simulator's per-event oracle (hardware has none), the history alone
    // exposes a protocol bug: releasing a Modified line without flushing it loses writes.
    let point = selcc_point_with(serde_json::json!({}));
    let err = rehearse_hardware(&registry::sim(), &point, "release-without-flush").expect_err("must fail");
    eprintln!("{err}");
    assert!(err.contains("history check"), "{err}");
}

fn options_tag(options: &serde_json::Value) -> String {
    options.to_string().chars().filter(|c| c.is_ascii_alphanumeric()).collect()
}

#[test]
fn gam_plan_runs_the_baseline_with_its_homes_on_memory_nodes() {
    // Goal: the GAM hardware plan (home directories as memory-node daemons, clients on compute
    // nodes, counters gathered as reports) does the work and its metrics agree with the
    // simulator runner's on the same point: same protocol code, same metrics code.
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hw/vm/scenarios/selcc-3node.json");
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    json["protocol"] = serde_json::json!("gam");
    json["run"].as_object_mut().unwrap().remove("check");
    let path = std::env::temp_dir().join(format!("dmsim-hw-plan-{}-gam.json", std::process::id()));
    std::fs::write(&path, json.to_string()).unwrap();
    let point = scenario::load(&path, &registry::sim()).expect("scenario loads").points[0].clone();
    let result = rehearse_hardware(&registry::sim(), &point, "none").expect("run finishes");
    let direct = dmsim_sim::runners::run(&registry::sim(), &point, RunOptions { trace: TraceSink::Off })
        .expect("runner");
    assert_eq!(result.ops, 2 * 2 * 1000);
    for metric in ["cache_hit_ratio", "invalidation_ratio", "rpcs_per_op", "messages_per_op"] {
        assert!(result.metrics[metric] > 0.0, "{metric}: {:?}", result.metrics);
        // Same protocol and workload; the plan starts its clients from a coordinator task (as
        // on hardware), so the interleaving differs a little from the direct runner's.
        let (a, b) = (result.metrics[metric], direct.metrics[metric]);
        assert!((a - b).abs() <= 0.1 * a.max(b), "{metric}: plan {a} vs runner {b}");
    }
}

#[test]
fn reports_larger_than_a_message_arrive_in_chunks() {
    // Goal: the end-of-run exchange (the same code `dmsim hw run` uses between processes) moves
    // reports far larger than MAX_MESSAGE_BYTES — here a 4000-operation history — which as one
    // SEND once hung hardware runs; the simulator enforces the same message limit.
    let point = selcc_point_with(serde_json::json!({}));
    let result = rehearse_hardware(&registry::sim(), &point, "none").expect("run passes");
    let per_node_log_bytes = result.metrics["history_ops"] / 2.0 * 60.0;
    assert!(per_node_log_bytes > 10.0 * dmsim_protocols::nic::MAX_MESSAGE_BYTES as f64);
}

#[test]
fn gam_seq_plan_with_check_passes_the_history_checkers() {
    // Goal: GAM gets the history checkers from the common client logger: under SEQ with
    // `run.check` every operation is logged (a write with the words it replaced at the instant
    // it took effect) and the merged history passes write chain, linearizability and SC on the
    // hardware path (per-node logs gathered over the NIC).
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hw/vm/scenarios/selcc-3node.json");
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    json["protocol"] = serde_json::json!("gam");
    json["protocol_options"] = serde_json::json!({ "variant": "seq" });
    json["run"]["check"] = serde_json::json!(true);
    let path = std::env::temp_dir().join(format!("dmsim-hw-plan-{}-gam-check.json", std::process::id()));
    std::fs::write(&path, json.to_string()).unwrap();
    let point = scenario::load(&path, &registry::sim()).expect("scenario loads").points[0].clone();
    let result = rehearse_hardware(&registry::sim(), &point, "none").expect("run passes");
    assert!(result.metrics["history_ops"] >= 4000.0, "{:?}", result.metrics);
    assert!(result.metrics["history_keys_checked"] > 10.0, "{:?}", result.metrics);
}

#[test]
fn blink_plan_runs_as_on_hardware_and_a_lost_split_fails_it() {
    // Goal: the B-link tree's VM scenario as `dmsim hw run` drives it (reports over the NIC,
    // end-of-run checks, no per-event oracle) does its operations over SELCC and SEL and passes;
    // with splits that forget the right link, the end-of-run checks fail the run.
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hw/vm/scenarios/blink-3node.json");
    let s = scenario::load(&file, &registry::sim()).expect("scenario loads");
    assert_eq!(s.points.len(), 2);
    for point in &s.points {
        let result = rehearse_hardware(&registry::sim(), point, "none").expect("run passes");
        assert_eq!(result.ops, 2 * 2 * 300);
        assert!(result.metrics["splits"] > 0.0, "{:?}", result.metrics);
        assert!(result.metrics["history_keys_checked"] > 100.0, "{:?}", result.metrics);
    }
    let err =
        rehearse_hardware(&registry::sim(), &s.points[0], "split-without-right-link").expect_err("must fail");
    assert!(err.contains("check"), "{err}");
}

#[test]
fn blink_scalestore_on_memory_and_compute_nodes_runs_as_on_hardware() {
    // Goal: SELCC Fig. 17's ScaleStore shape (directories on memory nodes, compute nodes
    // caching and evicting back) as `dmsim hw run` drives it: reports over the NIC, end-of-run
    // history checks only; every compute node's operations are done, and the memory nodes'
    // reports (no workers) do not break the merge.
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/scalestore/blink-dm-fuzz-small.json");
    let s = scenario::load(&file, &registry::sim()).expect("scenario loads");
    let result = rehearse_hardware(&registry::sim(), &s.points[0], "none").expect("run passes");
    assert_eq!(result.ops, 3 * 2 * 12, "3 compute nodes x 2 workers x 12 operations");
    assert!(result.metrics["history_keys_checked"] > 0.0, "{:?}", result.metrics);
}
