//! The SELCC figure scenarios (`scenarios/selcc/fig*.json`, `gcl-size.json`) at toy scale: each
//! file loads and validates, and a point or two of it, with the keyspace and op counts shrunk,
//! shows the paper's qualitative trend. Fast enough for a debug build (a few seconds in all).
//!
//! Shrinking keeps the ratios the scenarios keep (cache : data, threads per node, skew): only
//! `gcl_count` and `ops_per_node` are divided.

use std::collections::BTreeMap;
use std::path::PathBuf;

use dmsim::registry;
use dmsim_sim::runners::{self, RunOptions};
use dmsim_sim::scenario::{self, Point, Scenario};
use dmsim_sim::trace::TraceSink;
use serde_json::{json, Value};

fn scenario_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/selcc").join(name)
}

fn load(name: &str) -> Scenario {
    scenario::load(&scenario_path(name), &registry::sim()).unwrap_or_else(|e| panic!("{e}"))
}

/// The point at (panel, series, x) display names (`None` = the axis is absent or take the first).
fn find(s: &Scenario, panel: Option<&str>, series: Option<&str>, x: Option<&str>) -> Point {
    let matches = |axis: &Option<(usize, String)>, want: Option<&str>| match (axis, want) {
        (_, None) => true,
        (Some((_, name)), Some(w)) => name == w,
        (None, Some(_)) => false,
    };
    s.points
        .iter()
        .find(|p| {
            matches(&p.panel, panel)
                && matches(&p.series, series)
                && match (&p.x, x) {
                    (_, None) => true,
                    (Some((_, name, _)), Some(w)) => name == w,
                    (None, Some(_)) => false,
                }
        })
        .unwrap_or_else(|| panic!("no point {panel:?}/{series:?}/{x:?} in {}", s.file.name))
        .clone()
}

/// Divide the keyspace by `key_div` and set ops per node (dropping the other op-count form).
fn shrink(mut p: Point, key_div: u64, ops_per_node: u64) -> Point {
    let w = p.config.workload.as_object_mut().expect("workload object");
    let g = w["gcl_count"].as_u64().unwrap();
    w.insert("gcl_count".into(), json!(g / key_div));
    w.remove("ops_per_thread");
    w.insert("ops_per_node".into(), json!(ops_per_node));
    p.config.compare_with.clear();
    let problems = scenario::load::check_point(&p.config, &registry::sim());
    assert!(problems.is_empty(), "{problems:?}");
    p
}

fn run(p: &Point) -> BTreeMap<String, f64> {
    runners::run(&registry::sim(), p, RunOptions { trace: TraceSink::Off })
        .unwrap_or_else(|e| panic!("run failed: {e}"))
        .metrics
}

fn mops(p: &Point) -> f64 {
    run(p)["throughput_mops"]
}

#[test]
fn every_selcc_figure_scenario_loads_and_validates() {
    // Goal: the committed figure files stay valid as runners evolve (every point passes `check`).
    let mut names: Vec<String> = std::fs::read_dir(scenario_path(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| (n.starts_with("fig") || n == "gcl-size.json") && n.ends_with(".json"))
        .collect();
    names.sort();
    assert!(names.len() >= 8, "expected fig12..fig18 and gcl-size, got {names:?}");
    for n in names {
        let s = load(&n);
        assert_eq!(s.file.paper, "selcc");
        assert!(matches!(s.file.protocol.as_str(), "selcc" | "sel" | "blink" | "tpcc"));
        assert!(!s.file.paper_values.is_empty(), "{n} has no paper values");
        assert!(!s.file.scaling_note.is_empty() && !s.file.calibration_note.is_empty(), "{n} notes");
    }
}

#[test]
fn fig12_read_intensive_throughput_grows_with_compute_nodes() {
    // Read-intensive scales "regardless of the sharing ratio" (Fig. 12b): 4 CNs beat 1 CN by >2x.
    let s = load("fig12.json");
    let one = shrink(find(&s, Some("(b) read-intensive"), Some("100% / 8GB"), Some("1")), 10, 300);
    let four = shrink(find(&s, Some("(b) read-intensive"), Some("100% / 8GB"), Some("4")), 10, 300);
    let (a, b) = (mops(&one), mops(&four));
    assert!(b > 2.0 * a, "1 CN {a:.2} Mops vs 4 CNs {b:.2} Mops");
}

#[test]
fn gcl_size_larger_lines_cost_throughput() {
    // The GCL-size table: bigger payloads, lower pure-write throughput (8.82 → 4.30 in the paper).
    let s = load("gcl-size.json");
    let small = mops(&shrink(find(&s, None, None, Some("512B")), 10, 300));
    let large = mops(&shrink(find(&s, None, None, Some("8KB")), 10, 300));
    assert!(large < 0.8 * small, "512B {small:.2} vs 8KB {large:.2}");
}

#[test]
fn fig14_sel_collapses_on_a_hot_spot_where_selcc_does_not() {
    // Fig. 14 write-intensive at 128 threads: SEL's atomics serialize on the hot latch; SELCC
    // moves the conflict to local latches and wins.
    let s = load("fig14.json");
    let sel = run(&shrink(find(&s, Some("write-intensive"), Some("SEL"), Some("128")), 10, 128));
    let selcc = run(&shrink(find(&s, Some("write-intensive"), Some("SELCC"), Some("128")), 10, 128));
    assert!(
        selcc["throughput_mops"] > sel["throughput_mops"],
        "SELCC {:.2} vs SEL {:.2}",
        selcc["throughput_mops"],
        sel["throughput_mops"]
    );
    assert_eq!(sel["cache_hit_ratio"], 0.0, "SEL never caches");
    assert!(sel["retries_per_op"] > 0.2, "SEL retries on the hot latch: {}", sel["retries_per_op"]);
}

#[test]
fn fig15a_infinite_lease_trades_fairness_for_throughput() {
    // γ = Inf keeps the hot line at one node (fast, unfair); γ = 0 hands it over on every conflict.
    let s = load("fig15a.json");
    let zero = run(&shrink(find(&s, None, None, Some("0")), 1, 200));
    let inf = run(&shrink(find(&s, None, None, Some("Inf")), 1, 200));
    assert!(inf["throughput_mops"] > 1.2 * zero["throughput_mops"], "{inf:?} vs {zero:?}");
    assert!(inf["fairness_jain"] < zero["fairness_jain"], "{inf:?} vs {zero:?}");
}

/// A B-tree (YCSB) point at toy scale: keyspace divided by `key_div`, `ops_per_node` measured
/// ops after 50 warm-up ops per thread (a timed window, as Fig. 17's, is dropped).
fn shrink_ycsb(mut p: Point, key_div: u64, ops_per_node: u64) -> Point {
    let w = p.config.workload.as_object_mut().expect("workload object");
    w.remove("window");
    w.remove("ops_per_thread");
    let k = w["keyspace"].as_u64().unwrap();
    w.insert("keyspace".into(), json!(k / key_div));
    w.insert("ops_per_node".into(), json!(ops_per_node));
    w.insert("warmup_ops_per_thread".into(), json!(50));
    let problems = scenario::load::check_point(&p.config, &registry::sim());
    assert!(problems.is_empty(), "{problems:?}");
    p
}

#[test]
fn fig18_dirty_bounds_step_reports_its_speedup() {
    // The B-tree ablation's last step, through the runner's `compare_with` reference run:
    // dynamic dirty boundaries flush a one-word update instead of the whole 2 KiB node (at toy
    // scale the speedup itself is noise).
    let s = load("fig18.json");
    let p = shrink_ycsb(find(&s, None, Some("+ dirty boundaries"), Some("0%")), 4, 400);
    let m = run(&p);
    assert!(m["speedup_vs_prev"] > 0.8, "dirty-bounds speedup {}", m["speedup_vs_prev"]);
    assert!(m["latch_flushed_bytes_per_op"] < 256.0, "{m:?}");
}

#[test]
fn fig18_forwarding_step_runs_with_synchronous_eviction() {
    // The ablation's first step runs with batched eviction off: the front-end threads evict
    // (issue #10 item 7 once made this panic), and forwarding beats the baseline on writes.
    let s = load("fig18.json");
    let p = shrink_ycsb(find(&s, None, Some("+ GCL forwarding"), Some("0%")), 4, 400);
    let m = run(&p);
    assert!(m["speedup_vs_prev"] > 1.0, "{m:?}");
    assert!(m["latch_rt_evict_per_op"] > 0.0, "the front-end threads evict: {m:?}");
}

#[test]
fn fig17_selcc_tree_beats_the_sel_tree() {
    // Fig. 17's robust trend: the B-link tree over SELCC caches inner nodes and beats the same
    // tree over SEL, whose every operation latches the root by RDMA.
    let s = load("fig17.json");
    let p = shrink_ycsb(find(&s, Some("uniform"), Some("SELCC"), Some("50%")), 4, 400);
    let m = run(&p);
    assert!(m["speedup_vs_sel"] > 2.0, "{m:?}");
    assert!(m["splits"] == 0.0 && m["ops"] == 8.0 * 400.0, "updates of loaded keys only: {m:?}");
}

#[test]
fn fig17_runs_the_authors_sherman_and_keys() {
    // Fig. 17's Sherman is the SELCC authors' fork (session 13): a lock-free node READ is
    // bracketed by READs of its front and rear version words, so a cached-index lookup is three
    // READs (one in Sherman's own code). And the skewed panel's keys are the authors' unhashed
    // zipf ranks: the hot keys share the first leaf, whose writers conflict, so the same tree
    // over SEL collapses on it (here below a fifth of its uniform throughput).
    let s = load("fig17.json");
    let p = shrink_ycsb(find(&s, Some("uniform"), Some("Sherman"), Some("100%")), 4, 400);
    let m = run(&p);
    assert!((2.99..3.1).contains(&m["reads_per_op"]), "{m:?}");
    let sel =
        |panel| run(&shrink_ycsb(find(&s, Some(panel), Some("SEL"), Some("0%")), 4, 400))["throughput_mops"];
    let (uniform, skewed) = (sel("uniform"), sel("skewed"));
    assert!(skewed < uniform / 5.0, "SEL uniform {uniform} vs skewed {skewed} Mops");
}

/// The minimal reproduction of issue #10 item 7 (NEEDS.md figure runs item 1): one compute
/// node, two reader threads, 40 frames over 200 GCLs, with `batched_eviction` as given.
fn sync_evict_repro(batched: bool) -> BTreeMap<String, f64> {
    let text = json!({
        "paper": "tmp", "name": "repro-hit-rdma", "protocol": "selcc",
        "cluster": { "memory_nodes": 1, "compute_nodes": 1, "nic_profile": "cx3_fdr56" },
        "protocol_options": { "batched_eviction": batched },
        "workload": { "gcl_count": 200, "cache_frames": 40, "sharing_ratio": 1.0, "read_ratio": 1.0,
                      "threads_per_node": 2, "ops_per_node": 2000 }
    })
    .to_string();
    let s =
        scenario::load_str("repro-hit-rdma.json", &text, &registry::sim()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.points.len(), 1);
    run(&s.points[0])
}

#[test]
fn synchronous_eviction_runs_with_sensible_metrics() {
    // Goal: the issue #10 item 7 reproduction finishes (it panicked "a hit does no RDMA"), and
    // its metrics say what a read-only, uniform 40-of-200 cache should: every miss is a 1-round-
    // trip remote fetch that evicted one Shared line first (1 more round trip, counted apart),
    // and hits do no RDMA.
    let m = sync_evict_repro(false);
    assert_eq!(m["ops"], 2000.0, "{m:?}");
    let hits = m["cache_hit_ratio"];
    assert!((0.1..0.35).contains(&hits), "hit ratio {hits} for 40 of 200 lines: {m:?}");
    assert_eq!((m["rt_hit"], m["rt_hit_max"]), (0.0, 0.0), "{m:?}");
    assert_eq!((m["rt_remote_fetch"], m["rt_remote_fetch_max"]), (1.0, 1.0), "{m:?}");
    assert!((m["rt_per_op"] - (1.0 - hits)).abs() < 1e-9, "ownership round trips only: {m:?}");
    assert_eq!(m["invalidation_ratio"], 0.0, "one compute node: {m:?}");
    // Every eviction is synchronous (no drain here) and releases a Shared line with one FAA.
    let evictions = m["evictions_per_op"];
    assert!(evictions > 0.5 && evictions <= 1.0 - hits, "{m:?}");
    assert_eq!(m["rt_evict_per_op"], evictions, "{m:?}");
    assert!(m["throughput_mops"] > 0.0 && m["latency_us_avg"] > 0.0, "{m:?}");

    // The same point with batched eviction: no eviction on the critical path, so no metric
    // for it, and faster.
    let b = sync_evict_repro(true);
    assert_eq!(b["ops"], 2000.0, "{b:?}");
    assert!(!b.contains_key("rt_evict_per_op"), "{b:?}");
    assert!(b["latency_us_avg"] < m["latency_us_avg"], "batched {b:?} vs synchronous {m:?}");
}

#[test]
fn runs_are_deterministic_and_pass_the_invariant_checker() {
    // Same point and seed → same trace hash; with `check`, invariants hold after every event.
    let s = load("fig13.json");
    let mut p = shrink(find(&s, Some("write-intensive"), Some("SELCC"), Some("16")), 20, 100);
    let a = runners::run(&registry::sim(), &p, RunOptions { trace: TraceSink::Off }).unwrap();
    let b = runners::run(&registry::sim(), &p, RunOptions { trace: TraceSink::Off }).unwrap();
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a.metrics, b.metrics);
    p.config.run.check = true;
    runners::run(&registry::sim(), &p, RunOptions { trace: TraceSink::Off }).unwrap();
}

#[test]
fn payload_free_runs_measure_exactly_what_full_runs_measure() {
    // Goal: a measuring run stores only latch and header words of each GCL and frame (issue
    // 15), and that changes nothing a figure reads: same events, trace hash and metrics as
    // with every payload byte stored (`run.full_payload`), on a write-heavy point with
    // forwarding, eviction and wide dirty ranges, for SELCC and SEL.
    for (series, file) in [("SELCC", "fig13.json"), ("SEL", "fig13.json")] {
        let s = load(file);
        let elided = shrink(find(&s, Some("write-intensive"), Some(series), Some("16")), 20, 200);
        let mut full = elided.clone();
        full.config.run.full_payload = true;
        let a = runners::run(&registry::sim(), &elided, RunOptions { trace: TraceSink::Off }).unwrap();
        let b = runners::run(&registry::sim(), &full, RunOptions { trace: TraceSink::Off }).unwrap();
        assert!(a.events > 1000, "{series}: a real run ({} events)", a.events);
        assert_eq!((a.events, a.trace_hash), (b.events, b.trace_hash), "{series}");
        assert_eq!(a.metrics, b.metrics, "{series}");
    }
}

#[test]
fn bad_selcc_options_name_their_field() {
    let base = std::fs::read_to_string(scenario_path("gcl-size.json")).unwrap();
    let mut doc: Value = serde_json::from_str(&base).unwrap();
    // Its thread-count series would overwrite the workloads below; the claims name that series.
    doc["sweep"].as_object_mut().unwrap().remove("series");
    doc.as_object_mut().unwrap().remove("paper_values");
    let cases = [
        ("protocol_options", json!({"forwarding": "yes"}), "protocol_options.forwarding"),
        ("protocol_options", json!({"fowarding": true}), "protocol_options.fowarding"),
        ("protocol_options", json!({"cache_frames": 10}), "protocol_options.cache_frames"),
        ("protocol_options", json!({"preset": "nope"}), "protocol_options.preset"),
        (
            "workload",
            json!({"gcl_count": 100, "read_ratio": 1.5, "cache_ratio": 0.5, "threads_per_node": 2, "ops_per_node": 10}),
            "workload.read_ratio",
        ),
        (
            "workload",
            json!({"gcl_count": 100, "read_ratio": 0.5, "cache_ratio": 0.5, "threads_total": 12, "ops_per_node": 10}),
            "workload.threads_total",
        ),
        (
            "workload",
            json!({"gcl_count": 100, "read_ratio": 0.5, "cache_frames": 4, "threads_per_node": 8, "ops_per_node": 10}),
            "workload.cache_frames",
        ),
        ("compare_with", json!({"x": {"workload.read_ratio": 7}}), "compare_with.x.workload.read_ratio"),
        (
            "cluster",
            json!({"memory_nodes": 1, "compute_nodes": 2, "symmetric_nodes": 1, "nic_profile": "cx3_fdr56"}),
            "cluster.symmetric_nodes",
        ),
        (
            "cluster",
            json!({"memory_nodes": 1, "compute_nodes": 2, "nic_profile": "cx3_fdr56", "device_memory": true}),
            "cluster.device_memory",
        ),
    ];
    for (section, value, path) in cases {
        let saved = doc[section].clone();
        doc[section] = value;
        let err = scenario::load_str("t.json", &doc.to_string(), &registry::sim()).expect_err(path);
        assert!(err.problems.iter().any(|p| p.path == path), "{path}: got {err}");
        if saved.is_null() {
            doc.as_object_mut().unwrap().remove(section);
        } else {
            doc[section] = saved;
        }
    }
}

#[test]
fn out_of_range_profile_values_and_a_zero_poll_are_one_error_each_not_one_per_point() {
    // Goal: values that would overflow the clock (a 2^64 − 1 jitter, a 1e-300 Mops rate) or
    // stop it (poll every 0 ns) are refused at load, each as one line however many points share it.
    let base = std::fs::read_to_string(scenario_path("gcl-size.json")).unwrap();
    let cases = [
        (
            "cluster",
            "nic_overrides",
            json!({"jitter_ns_max": u64::MAX}),
            "cluster.nic_overrides.jitter_ns_max",
        ),
        (
            "cluster",
            "nic_overrides",
            json!({"rate_mops_read": 1e-300}),
            "cluster.nic_overrides.rate_mops_read",
        ),
        ("protocol_options", "cpu", json!({"poll_ns": 0}), "protocol_options.cpu.poll_ns"),
    ];
    for (section, field, value, path) in cases {
        let mut doc: Value = serde_json::from_str(&base).unwrap();
        doc[section][field] = value;
        let err = scenario::load_str("t.json", &doc.to_string(), &registry::sim()).expect_err(path);
        assert_eq!(err.problems.len(), 1, "{path}: {err}");
        assert_eq!(err.problems[0].path, path);
        assert!(err.problems[0].reason.ends_with("and 9 more points"), "{path}: {err}");
    }
}
