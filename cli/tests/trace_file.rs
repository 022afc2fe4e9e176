//! Trace files in the Twitter cache-trace format: `dmsim trace synth` writes one reproducibly,
//! `dmsim trace stats` reads one back, a DiFache run replays one (`workload.trace_file`), and a
//! missing file or a bad line is a clear error, not a panic.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn dmsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dmsim")).current_dir(repo()).args(args).output().expect("dmsim runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dmsim-trace-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_shipped_sample_is_what_synth_writes() {
    let dir = scratch("synth");
    let out = dir.join("s.csv");
    let o = dmsim(&[
        "trace",
        "synth",
        "--cluster",
        "22",
        "--ops",
        "4000",
        "--objects",
        "2000",
        "--clients",
        "16",
        "--rate",
        "1000",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sample = repo().join("scenarios/traces/cluster22-synthetic-sample.csv");
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(sample).unwrap(), "regenerate the sample");
    let s = dmsim(&["trace", "stats", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&s.stdout);
    assert!(text.contains("requests     4000") && text.contains("client ids   0..16"), "{text}");
    let bad = dmsim(&["trace", "synth", "--cluster", "5", "--ops", "1"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("cluster 5 has no published statistics"), "{}", stderr(&bad));
}

#[test]
fn a_difache_run_replays_the_file() {
    let dir = scratch("run");
    let o = dmsim(&["run", "scenarios/difache/trace-file.json", "--out", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    for r in summary["results"].as_array().unwrap() {
        let m = &r["metrics"];
        // 16 clients x 2,000 operations, all from the file: 8 passes over each CN's 2,000.
        assert_eq!(m["trace_requests"].as_f64(), Some(32_000.0), "{m}");
        assert_eq!(m["trace_passes"].as_f64(), Some(8.0), "{m}");
        assert!(m["throughput_mops"].as_f64().unwrap() > 0.0);
    }
}

/// The trace-file scenario pointing at `path`, written into `dir`.
fn scenario_with(dir: &Path, path: &str) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("scenarios/difache/trace-file.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["workload"]["trace_file"] = serde_json::Value::String(path.to_string());
    v.as_object_mut().unwrap().remove("sweep");
    v.as_object_mut().unwrap().remove("plot");
    let file = dir.join("scenario.json");
    std::fs::write(&file, v.to_string()).unwrap();
    file
}

#[test]
fn a_missing_file_or_a_bad_line_is_a_clear_error() {
    let dir = scratch("bad");
    let missing = dir.join("nope.csv");
    let s = scenario_with(&dir, missing.to_str().unwrap());
    let o = dmsim(&["run", s.to_str().unwrap(), "--out", dir.join("o1").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("workload.trace_file") && stderr(&o).contains("nope.csv"), "{}", stderr(&o));
    // A bad line past the first 1,000 (checked before the run) stops the run with its line.
    let late = dir.join("late.csv");
    let mut text = String::new();
    for i in 0..1_500 {
        text += &format!("{},k{},4,64,{},get,0\n", i / 100, i % 50, i % 16);
    }
    text += "15,k1,4,64,3,frobnicate,0\n";
    std::fs::write(&late, text).unwrap();
    let s = scenario_with(&dir, late.to_str().unwrap());
    let o = dmsim(&["run", s.to_str().unwrap(), "--out", dir.join("o2").to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("line 1501: operation \"frobnicate\""), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn an_index_replays_the_file_through_its_ycsb_stream() {
    // Dolphin Fig. 9's scenario, shrunk to one small point that replays the shipped sample.
    let dir = scratch("ycsb");
    let text = std::fs::read_to_string(repo().join("scenarios/dolphin/fig9.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let o = v.as_object_mut().unwrap();
    for k in ["sweep", "plot", "paper_values"] {
        o.remove(k);
    }
    v["cluster"]["compute_nodes"] = 2.into();
    v["workload"]["keyspace"] = 20_000.into();
    v["workload"]["threads_per_node"] = 2.into();
    v["workload"]["ops_per_thread"] = 100.into();
    v["workload"]["warmup_ops_per_thread"] = 50.into();
    v["workload"].as_object_mut().unwrap().remove("window");
    v["workload"]["trace"] =
        serde_json::json!({"cluster": 22, "file": "scenarios/traces/cluster22-synthetic-sample.csv"});
    let file = dir.join("scenario.json");
    std::fs::write(&file, v.to_string()).unwrap();
    let o = dmsim(&["run", file.to_str().unwrap(), "--out", dir.join("out").to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/summary.json")).unwrap()).unwrap();
    let m = &summary["results"][0]["metrics"];
    // 2 CNs x 2 threads x 100 measured operations, lookups and updates as the file says.
    assert_eq!(m["ops"].as_f64(), Some(400.0), "{m}");
    let lookups = m["lookup_ops"].as_f64().unwrap_or(0.0);
    assert!(lookups > 200.0 && lookups < 400.0, "{m}");
    v["workload"]["trace"]["file"] = "no/such/trace.csv".into();
    std::fs::write(&file, v.to_string()).unwrap();
    let o = dmsim(&["run", file.to_str().unwrap(), "--out", dir.join("out2").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("workload.trace.file"), "{}", stderr(&o));
}
