//! `workload.window`: every YCSB client loop measures one shared, timed window. Each index runs
//! a small point of one of its own scenarios under a window; the run must count exactly the
//! operations that started and ended inside it (throughput × window = operations), no client may
//! run out of operations, and a checked run must still pass its history checks. A window with
//! warm-up operations is refused with the field named.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn dmsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dmsim")).current_dir(repo()).args(args).output().expect("dmsim runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dmsim-window-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One point of `scenario` (its sweep, claims and plot dropped), as `protocol`, under a window.
fn windowed(scenario: &str, protocol: Option<&str>, window: Value) -> Value {
    let text = std::fs::read_to_string(repo().join(scenario)).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    let o = v.as_object_mut().unwrap();
    for k in ["sweep", "plot", "paper_values", "compare_with"] {
        o.remove(k);
    }
    if let Some(p) = protocol {
        o.insert("protocol".into(), p.into());
    }
    let w = v["workload"].as_object_mut().unwrap();
    w.remove("ops_per_node");
    w.insert("ops_per_thread".into(), 100_000.into());
    w.insert("warmup_ops_per_thread".into(), 0.into());
    w.insert("window".into(), window);
    v
}

fn run(name: &str, scenario: &Value) -> Result<Value, String> {
    let dir = scratch(name);
    let file = dir.join("scenario.json");
    std::fs::write(&file, scenario.to_string()).unwrap();
    let o = dmsim(&["run", file.to_str().unwrap(), "--out", dir.join("out").to_str().unwrap()]);
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    let text = std::fs::read_to_string(dir.join("out/summary.json")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(serde_json::from_str::<Value>(&text).unwrap()["results"][0]["metrics"].clone())
}

#[test]
fn every_ycsb_index_measures_one_window() {
    // (scenario, protocol override): the fuzz scenarios log and check histories.
    let cases: &[(&str, Option<&str>)] = &[
        ("scenarios/sherman/fuzz-small.json", None),
        ("scenarios/marlin/fuzz-small.json", None),
        ("scenarios/dolphin/fuzz-small.json", None),
        ("scenarios/dex/fuzz-small.json", None),
        ("scenarios/smart/dolphin-fig6.json", None),
        ("scenarios/selcc/fig17.json", Some("blink")),
        ("scenarios/scalestore/fig7.json", Some("blink-scalestore")),
    ];
    let measure_us = 100.0;
    for (scenario, protocol) in cases {
        let s = windowed(scenario, *protocol, json!({"warmup_us": 60, "measure_us": 100}));
        let m = run(&scenario.replace('/', "_"), &s).unwrap_or_else(|e| panic!("{scenario}: {e}"));
        let ops = m["ops"].as_f64().unwrap();
        let mops = m["throughput_mops"].as_f64().unwrap();
        assert!(ops >= 10.0, "{scenario}: only {ops} operations measured: {m}");
        assert!(
            (mops * measure_us - ops).abs() < 1e-6 * ops,
            "{scenario}: {mops} Mops over {measure_us} µs is not {ops} ops"
        );
        assert_eq!(m["window_threads_out_of_ops"].as_f64(), Some(0.0), "{scenario}: {m}");
    }
}

#[test]
fn a_short_stream_is_reported_and_warmup_operations_are_refused() {
    let mut s =
        windowed("scenarios/dolphin/fuzz-small.json", None, json!({"warmup_us": 10, "measure_us": 100_000}));
    s["workload"]["ops_per_thread"] = 5.into();
    let m = run("short", &s).unwrap();
    let threads = m["window_threads_out_of_ops"].as_f64().unwrap();
    assert!(threads >= 1.0, "clients that ran out before the close are counted: {m}");
    s["workload"]["warmup_ops_per_thread"] = 3.into();
    let err = run("refused", &s).unwrap_err();
    assert!(err.contains("workload.warmup_ops_per_thread") && err.contains("workload.window"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    s["workload"]["warmup_ops_per_thread"] = 0.into();
    s["workload"]["window"]["measure_us"] = 0.into();
    let err = run("zero", &s).unwrap_err();
    assert!(err.contains("workload.window.measure_us"), "{err}");
}
