//! The `dmsim` binary at its boundary: bad input gets one clear line and exit 2, runs are
//! reproducible from (scenario, seed), and results land where they should.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dmsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dmsim")).args(args).output().expect("dmsim runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dmsim-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn tiny() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tiny.json")).unwrap()
}

/// Write `text` as a scenario, run it, and return (exit code, stderr).
fn run_text(name: &str, text: &str) -> (i32, String) {
    let dir = scratch(name);
    let file = dir.join("scenario.json");
    std::fs::write(&file, text).unwrap();
    let out = dmsim(&["run", file.to_str().unwrap(), "--out", dir.join("out").to_str().unwrap()]);
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn assert_bad_input(name: &str, text: &str, path: &str, reason: &str) {
    // Goal: exit 2, every stderr line "error: <file>: <path>: <reason>", no panic/backtrace.
    let (code, stderr) = run_text(name, text);
    assert_eq!(code, 2, "{name}: stderr: {stderr}");
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{name}: {stderr}");
    let line = stderr.lines().next().unwrap_or_default();
    assert!(line.starts_with("error: ") && line.contains("scenario.json: "), "{name}: {line}");
    assert!(line.contains(&format!(": {path}: ")), "{name}: expected path {path:?} in {line:?}");
    assert!(line.contains(reason), "{name}: expected {reason:?} in {line:?}");
}

#[test]
fn bad_scenarios_name_the_field_and_exit_2() {
    let t = tiny();
    assert_bad_input("malformed", "{ \"paper\": ", "(top level)", "malformed JSON");
    assert_bad_input(
        "unknown-field",
        &t.replace("\"nic_profile\"", "\"nodes\": 3, \"nic_profile\""),
        "cluster.nodes",
        "unknown field `nodes`",
    );
    assert_bad_input(
        "wrong-type",
        &t.replace("\"compute_nodes\": 2", "\"compute_nodes\": \"two\""),
        "cluster.compute_nodes",
        "invalid type",
    );
    assert_bad_input(
        "zero-nodes",
        &t.replace("\"compute_nodes\": 2", "\"compute_nodes\": 0"),
        "cluster.compute_nodes",
        "at least 1",
    );
    assert_bad_input("profile", &t.replace("cx3_fdr56", "cx9"), "cluster.nic_profile", "unknown profile");
    assert_bad_input("workload", &t.replace("\"faa\"", "\"fetch\""), "workload.verb", "unknown variant");
    assert_bad_input(
        "override",
        &t.replace(
            "\"nic_profile\": \"cx3_fdr56\"",
            "\"nic_profile\": \"cx3_fdr56\", \"nic_overrides\": {\"link_bandwidth_gbps\": -1}",
        ),
        "cluster.nic_overrides.link_bandwidth_gbps",
        "must be a number in [0.001, 100000], got -1.0",
    );
    assert_bad_input("sweep", &t.replace("[1, 2]", "[1, 0]"), "workload.threads_per_node", "x 0");
    assert_bad_input("protocol", &t.replace("nic_micro", "selcc9"), "protocol", "unknown protocol");
}

#[test]
fn a_sweep_of_too_many_points_is_one_error_and_a_large_one_expands_linearly() {
    // Goal: a sweep that expands past the point limit is bad input naming `sweep` and the count;
    // one under it dry-runs and lists every point (expansion no longer copies the axes into each
    // point, which made 80,000 points take minutes).
    let with_values = |n: usize| {
        let values: Vec<String> = (1..=n).map(|v| v.to_string()).collect();
        tiny()
            .replace("workload.threads_per_node", "workload.ops_per_thread")
            .replace("\"values\": [1, 2]", &format!("\"values\": [{}]", values.join(", ")))
    };
    assert_bad_input("too-many-points", &with_values(100_001), "sweep", "expands to 100001 points");
    let dir = scratch("many-points");
    let file = dir.join("scenario.json");
    std::fs::write(&file, with_values(20_000)).unwrap();
    let out = dmsim(&["run", file.to_str().unwrap(), "--dry-run"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("point 19999:"));
}

/// Run `text` as a scenario and return each paper-vs-sim row's trend verdict.
fn trend_verdicts(name: &str, text: &str) -> Vec<Option<bool>> {
    let dir = scratch(name);
    let file = dir.join("scenario.json");
    std::fs::write(&file, text).unwrap();
    let out = dir.join("out");
    let o = dmsim(&["run", file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    summary["paper_vs_sim"].as_array().unwrap().iter().map(|r| r["trend_holds"].as_bool()).collect()
}

#[test]
fn quiet_runs_print_no_progress_lines_but_the_same_results() {
    // Goal: `--quiet` drops the per-point progress lines and nothing else: same summary.
    let dir = scratch("quiet");
    let file = dir.join("scenario.json");
    std::fs::write(&file, tiny()).unwrap();
    let (loud, quiet) = (dir.join("loud"), dir.join("quiet"));
    let a = dmsim(&["run", file.to_str().unwrap(), "--out", loud.to_str().unwrap()]);
    let b = dmsim(&["run", file.to_str().unwrap(), "--out", quiet.to_str().unwrap(), "--quiet"]);
    assert!(a.status.success() && b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let progress = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).matches(" x=").count();
    assert!(progress(&a) > 0, "the default run shows its points");
    assert_eq!(progress(&b), 0, "{}", String::from_utf8_lossy(&b.stderr));
    let results = |d: &Path| {
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap()).unwrap();
        s["results"].clone()
    };
    assert_eq!(results(&loud), results(&quiet));
}

#[test]
fn a_within_x_trend_holds_inside_its_tolerance_and_fails_outside() {
    // Goal: `within_x:<x>` ("stable") compares this x's value with another x's under the row's
    // tolerance: generous, it holds; a millionth, it fails (1 and 2 threads differ).
    let rows = r#""paper_values": [
        {"claim": "stable", "x": "2", "metric": "throughput_mops", "trend": "within_x:1", "tolerance": 100.0},
        {"claim": "exactly", "x": "2", "metric": "throughput_mops", "trend": "within_x:1", "tolerance": 0.000001}
      ],
      "plot""#;
    let text = tiny().replace("\"plot\"", rows);
    assert_eq!(trend_verdicts("within-x", &text), [Some(true), Some(false)]);
}

#[test]
fn a_within_series_trend_holds_inside_its_tolerance_and_fails_outside() {
    // Goal: `within:<series>` ("similar to") compares this series' value with another series' at
    // the same x under the row's tolerance: generous, it holds; a millionth, it fails (a
    // same-address FAA and a read run at different rates).
    let series = r#""sweep": {
        "series": { "values": [{"workload.verb": "faa"}, {"workload.verb": "read"}], "names": ["faa", "read"] },
        "x": { "path": "workload.threads_per_node", "values": [1, 2] } },"#;
    let rows = r#""paper_values": [
        {"claim": "similar", "series": "read", "x": "2", "metric": "throughput_mops", "trend": "within:faa", "tolerance": 1000.0},
        {"claim": "exactly", "series": "read", "x": "2", "metric": "throughput_mops", "trend": "within:faa", "tolerance": 0.000001}
      ],
      "plot""#;
    let text = tiny()
        .replace(r#""sweep": { "x": { "path": "workload.threads_per_node", "values": [1, 2] } },"#, series)
        .replace("\"plot\"", rows);
    assert!(text.contains("\"names\": [\"faa\""), "the sweep was replaced");
    assert_eq!(trend_verdicts("within-series", &text), [Some(true), Some(false)]);
}

#[test]
fn aggregate_and_ratio_rows_compare_a_derived_value() {
    // Goal: `aggregate` compares the max/min/mean over every x (two x values here, so the mean
    // is halfway between max and min), `ratio_to` divides by another series at the same x,
    // `divide_by` by another metric at the same cell, and their above:/below: trends are judged
    // on the derived value.
    let series = r#""sweep": {
        "series": { "values": [{"workload.verb": "faa"}, {"workload.verb": "read"}], "names": ["faa", "read"] },
        "x": { "path": "workload.threads_per_node", "values": [1, 2] } },"#;
    let rows = r#""paper_values": [
        {"claim": "max", "series": "read", "metric": "throughput_mops", "aggregate": "max", "trend": "above:0"},
        {"claim": "min", "series": "read", "metric": "throughput_mops", "aggregate": "min", "trend": "below:0"},
        {"claim": "mean", "series": "read", "metric": "throughput_mops", "aggregate": "mean", "value": 1.0},
        {"claim": "self", "series": "read", "x": "2", "metric": "throughput_mops", "ratio_to": "read", "value": 1.0},
        {"claim": "bad", "series": "read", "x": "2", "metric": "throughput_mops", "ratio_to": "faa", "trend": "increasing"},
        {"claim": "div", "series": "read", "x": "2", "metric": "latency_ns_p99", "divide_by": "latency_ns_p50", "trend": "above:0.999"},
        {"claim": "p99", "series": "read", "x": "2", "metric": "latency_ns_p99", "value": 1.0},
        {"claim": "p50", "series": "read", "x": "2", "metric": "latency_ns_p50", "value": 1.0},
        {"claim": "typo", "series": "read", "x": "2", "metric": "latency_ns_p99", "divide_by": "latency_ns_p5", "value": 1.0}
      ],
      "plot""#;
    let text = tiny()
        .replace(r#""sweep": { "x": { "path": "workload.threads_per_node", "values": [1, 2] } },"#, series)
        .replace("\"plot\"", rows);
    assert_eq!(
        trend_verdicts("aggregate", &text),
        [Some(true), Some(false), None, None, None, Some(true), None, None, None]
    );
    let out = std::env::temp_dir().join(format!("dmsim-cli-test-{}-aggregate/out", std::process::id()));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let rows = summary["paper_vs_sim"].as_array().unwrap();
    let sim = |i: usize| rows[i]["sim"].as_f64().unwrap();
    assert!(sim(0) > sim(1), "two thread counts run at different rates");
    assert!((sim(2) - (sim(0) + sim(1)) / 2.0).abs() < 1e-9);
    assert_eq!(sim(3), 1.0);
    assert!(rows[4]["note"].as_str().unwrap().contains("only above:V or below:V"));
    // `divide_by` divides by another metric at the same cell; a denominator the cell lacks
    // is named in the row's note (not a silent "not simulated").
    assert!(sim(6) > 0.0 && sim(7) > 0.0);
    assert!((sim(5) - sim(6) / sim(7)).abs() < 1e-12, "p99 / p50");
    assert!(rows[8]["note"].as_str().unwrap().contains("divide_by: no metric \"latency_ns_p5\""));
    assert_eq!(rows[8]["not_simulated"].as_bool(), Some(false));
}

#[test]
fn missing_file_and_bad_flags_exit_2() {
    let out = dmsim(&["run", "/nonexistent/scenario.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: /nonexistent/scenario.json: "));
    let out = dmsim(&["run"]);
    assert_eq!(out.status.code(), Some(2));
    let out = dmsim(&["profiles", "cx9"]);
    assert_eq!(out.status.code(), Some(2));
}

fn hash_of(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default().to_string();
    assert!(last.starts_with("trace-hash: "), "last line is the hash: {stdout}");
    last
}

#[test]
fn runs_are_reproducible_and_write_results() {
    // Goal: same scenario + seed → same trace-hash; another seed → another; all four files.
    let dir = scratch("repro");
    let file = dir.join("tiny.json");
    std::fs::write(&file, tiny()).unwrap();
    let run = |seed: &str, out: &str| {
        let o =
            dmsim(&["run", file.to_str().unwrap(), "--seed", seed, "--out", dir.join(out).to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o
    };
    let a = hash_of(&run("5", "a"));
    let b = hash_of(&run("5", "b"));
    let c = hash_of(&run("6", "c"));
    assert_eq!(a, b);
    assert_ne!(a, c);
    for f in ["data.csv", "summary.json", "plot.svg", "paper-vs-sim.md"] {
        assert!(dir.join("a").join(f).exists(), "{f} written");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("a/summary.json")).unwrap()).unwrap();
    assert_eq!(summary["points"], 2);
    assert_eq!(format!("trace-hash: {}", summary["trace_hash"].as_str().unwrap()), a);
}

#[test]
fn bench_engine_prints_events_per_second() {
    // Long enough (~0.1 s) for CPU time, which advances at scheduler ticks, to be meaningful.
    let out = dmsim(&["bench", "engine", "--tasks", "10", "--events", "300000"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    // "events/CPU-s: engine E, bare heap B, engine/bare R"; success means the bare-heap loop
    // replayed the engine's events (same count and trace hash).
    let last = stdout.lines().last().unwrap().strip_prefix("events/CPU-s: engine ").unwrap();
    let rates: Vec<f64> =
        last.split(", ").map(|part| part.rsplit(' ').next().unwrap().parse().unwrap()).collect();
    assert_eq!(rates.len(), 3, "{stdout}");
    assert!(rates.iter().all(|r| *r > 0.0), "{stdout}");
}

#[test]
fn bench_run_and_bench_fuzz_do_the_work_run_and_fuzz_do() {
    // Goal: `bench run` computes exactly what `dmsim run` does (same trace hash per scenario),
    // `bench fuzz` is deterministic and finds the correct protocol clean; bad input exits 2.
    let dir = scratch("bench");
    let file = dir.join("tiny.json");
    std::fs::write(&file, tiny()).unwrap();
    let ran = dmsim(&["run", file.to_str().unwrap(), "--out", dir.join("out").to_str().unwrap()]);
    let run_hash = hash_of(&ran).strip_prefix("trace-hash: ").unwrap().to_string();
    let bench = dmsim(&["bench", "run", file.to_str().unwrap()]);
    assert!(bench.status.success(), "{}", String::from_utf8_lossy(&bench.stderr));
    let stdout = String::from_utf8_lossy(&bench.stdout);
    assert!(stdout.lines().next().unwrap().ends_with(&format!("trace-hash {run_hash}")), "{stdout}");

    let fuzz_scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/selcc/fuzz-small.json");
    let fuzz = || {
        let out = dmsim(&["bench", "fuzz", fuzz_scenario.to_str().unwrap(), "--seeds", "20"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(stdout.contains("20 schedules") && stdout.contains(" 0 violations"), "{stdout}");
        assert!(stdout.contains("schedules/CPU-s "), "{stdout}");
        hash_of(&out)
    };
    assert_eq!(fuzz(), fuzz());

    let missing = dmsim(&["bench", "fuzz", dir.join("nope.json").to_str().unwrap()]);
    assert_eq!(missing.status.code(), Some(2));
    let missing = dmsim(&["bench", "run", dir.join("nope.json").to_str().unwrap()]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn compare_puts_two_runs_side_by_side_and_rejects_what_it_cannot_read() {
    // Goal: `dmsim compare` joins two results directories of one scenario by point (the
    // sim-vs-hardware report), with both values and their ratio; an unreadable side is exit 2.
    let dir = scratch("compare");
    let file = dir.join("scenario.json");
    std::fs::write(&file, tiny()).unwrap();
    for (seed, out) in [("1", "a"), ("2", "b")] {
        let o =
            dmsim(&["run", file.to_str().unwrap(), "--seed", seed, "--out", dir.join(out).to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let (a, b) = (dir.join("a"), dir.join("b"));
    let o = dmsim(&["compare", a.to_str().unwrap(), b.to_str().unwrap(), "--names", "one,two"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("| point | metric | one | two | two/one |"), "{text}");
    assert!(text.lines().filter(|l| l.starts_with("| 0")).count() > 1, "{text}");
    let o = dmsim(&["compare", a.to_str().unwrap(), b.to_str().unwrap(), "--metrics", "nosuch"]);
    assert_eq!(o.status.code(), Some(2), "a metric no point has is a typo");
    assert!(String::from_utf8_lossy(&o.stderr).contains("nosuch"));
    let o = dmsim(&["compare", a.to_str().unwrap(), dir.join("missing").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).starts_with("error: "),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_run_replaces_its_results_directory_whole() {
    // Goal: the results directory is the new run's, all of it: a file an earlier run left there
    // is gone, and no staging directory is left beside it.
    let dir = scratch("whole-dir");
    let file = dir.join("scenario.json");
    std::fs::write(&file, tiny()).unwrap();
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("stale.csv"), "from an older run").unwrap();
    let o = dmsim(&["run", file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.join("summary.json").exists() && !out.join("stale.csv").exists());
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains("dmsim-tmp")), "staging litter: {names:?}");
}

#[test]
fn duplicate_keys_and_endless_inputs_are_bad_input() {
    // Goal: a key given twice (serde_json would keep the last silently) and a file with no end
    // are exit 2 with one line naming the problem, for run, fuzz and replay alike.
    let dir = scratch("strict-input");
    let file = dir.join("dup.json");
    std::fs::write(&file, tiny().replacen("{", "{\"name\": \"twice\",", 1)).unwrap();
    for args in [vec!["run", file.to_str().unwrap()], vec!["fuzz", file.to_str().unwrap(), "--seeds", "1"]] {
        let o = dmsim(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("duplicate key \"name\""), "{args:?}");
    }
    for args in [["run", "/dev/zero"], ["replay", "/dev/zero"]] {
        let o = dmsim(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("larger than 64 MiB"), "{args:?}");
    }
}

#[test]
fn a_scenario_can_name_a_profile_file_such_as_a_calibrated_one() {
    // Goal: `nic_profile: "<file>.json"` (relative to the scenario) loads a profile file — what
    // `dmsim hw calibrate --out` writes — and its values take effect; a broken file is exit 2
    // naming the field and the file.
    let dir = scratch("profile-file");
    let out = dmsim(&["profiles", "cx3_fdr56"]);
    let mut profile: serde_json::Value = serde_json::from_slice(&out.stdout).expect("profiles prints JSON");
    let run = |name: &str, profile_text: &str| {
        std::fs::write(dir.join("nic.json"), profile_text).unwrap();
        let scenario = tiny().replace("\"cx3_fdr56\"", "\"nic.json\"");
        let file = dir.join("scenario.json");
        std::fs::write(&file, scenario).unwrap();
        let o = dmsim(&["run", file.to_str().unwrap(), "--out", dir.join(name).to_str().unwrap()]);
        let summary = std::fs::read_to_string(dir.join(name).join("summary.json")).unwrap_or_default();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned(), summary)
    };
    let (code, stderr, fast) = run("fast", &profile.to_string());
    assert_eq!(code, Some(0), "{stderr}");
    profile["latency_ns_atomic"] = serde_json::json!(profile["latency_ns_atomic"].as_u64().unwrap() * 10);
    let (code, stderr, slow) = run("slow", &profile.to_string());
    assert_eq!(code, Some(0), "{stderr}");
    assert_ne!(fast, slow, "a 10x atomic latency must change the results");
    let (code, stderr, _) = run("broken", "{ \"name\": 3 }");
    assert_eq!(code, Some(2), "{stderr}");
    let line = stderr.lines().next().unwrap_or_default();
    assert!(line.contains("cluster.nic_profile") && line.contains("nic.json"), "{line}");
}

#[test]
fn a_perfetto_trace_is_trace_event_json_with_tracks_slices_flows_and_counters() {
    // Goal: `--trace-format perfetto` writes Chrome trace-event JSON that a viewer opens: one
    // process per node, named tracks, each task's doorbell batches as slices from post to
    // completion, every executed verb and delivered message as a slice at its target with a
    // flow from the batch that posted it, and atomics' words as counters.
    let dir = scratch("perfetto");
    let out = dmsim(&[
        "run",
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/selcc/fuzz-small.json").to_str().unwrap(),
        "--out",
        dir.join("out").to_str().unwrap(),
        "--trace-format",
        "perfetto",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(dir.join("out/traces/point-000.json")).unwrap();
    let trace: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let events = trace["traceEvents"].as_array().expect("a traceEvents array");
    let phase = |e: &serde_json::Value| e["ph"].as_str().unwrap_or_default().to_string();
    for e in events {
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "every event on a track: {e}");
        match phase(e).as_str() {
            "M" => assert!(e["args"]["name"].is_string(), "{e}"),
            "X" => assert!(e["ts"].as_f64().unwrap() >= 0.0 && e["dur"].as_f64().unwrap() >= 0.0, "{e}"),
            "s" | "f" | "C" => assert!(e["ts"].is_f64() || e["ts"].is_u64(), "{e}"),
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    let names: Vec<&str> =
        events.iter().filter(|e| phase(e) == "M").filter_map(|e| e["args"]["name"].as_str()).collect();
    for wanted in ["node 0", "node 4", "memory", "messages", "counters"] {
        assert!(names.contains(&wanted), "track {wanted:?} named: {names:?}");
    }
    assert!(names.iter().any(|n| n.starts_with("task ")), "task tracks: {names:?}");
    let slices = |name: &str| events.iter().filter(|e| phase(e) == "X" && e["name"] == name).count();
    assert!(slices("CAS") + slices("FAA") > 0 && slices("READ") > 0 && slices("RECV") > 0);
    assert!(slices("SEND") > 0, "message sends are batch slices on the sender's task track");
    let ids = |p: &str| -> std::collections::BTreeSet<u64> {
        events.iter().filter(|e| phase(e) == p).map(|e| e["id"].as_u64().unwrap()).collect()
    };
    let (starts, ends) = (ids("s"), ids("f"));
    assert!(!starts.is_empty());
    assert!(starts.is_subset(&ends), "every flow that leaves a batch arrives somewhere");
    assert!(events.iter().any(|e| phase(e) == "C"), "latch words as counters");
}

/// Every scenario file in the repository (`scenarios/<protocol>/*.json`, `hw/vm/scenarios/`).
fn shipped_scenarios() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["scenarios", "hw/vm/scenarios"] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "json")
                    && !path.ends_with("scenarios/schema.json")
                {
                    files.push(path);
                }
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_shipped_scenario_matches_the_committed_schema() {
    // Goal: `scenarios/schema.json` is what `dmsim schema` prints (regenerate it with
    // `dmsim schema > scenarios/schema.json`), and every shipped scenario validates against it.
    let out = dmsim(&["schema"]);
    assert!(out.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("schema is JSON");
    let committed_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/schema.json");
    let committed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(committed_path).unwrap()).unwrap();
    assert_eq!(printed, committed, "scenarios/schema.json is stale: regenerate it with `dmsim schema`");
    let files = shipped_scenarios();
    assert!(files.len() > 40, "found {} scenario files", files.len());
    for file in files {
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let problems = dmsim_sim::scenario::schema::validate(&printed, &doc);
        assert!(problems.is_empty(), "{}: {problems:?}", file.display());
    }
}
