//! `run.fabric_waits`: the per-resource queueing breakdown names the resource a run waits on,
//! and asking for it changes no result (same trace hash, same metrics besides its columns).

mod support;

use std::path::PathBuf;

use support::run_scenario_with;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `scenarios/nic/atomic-contention.json` at 8 CNs x 8 threads, with or without the
/// breakdown; returns the data.csv rows as (column, value) maps and the trace hashes.
fn run(waits: bool) -> (Vec<Vec<(String, String)>>, String) {
    run_with(waits, &[])
}

fn run_with(waits: bool, extra: &[&str]) -> (Vec<Vec<(String, String)>>, String) {
    let text = std::fs::read_to_string(repo().join("scenarios/nic/atomic-contention.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["sweep"]["x"]["values"] = serde_json::json!([8]);
    json["run"] = serde_json::json!({ "fabric_waits": waits });
    let (out, dir) = run_scenario_with(&format!("fabric-waits-{waits}-{}", extra.len()), &json, extra);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = std::fs::read_to_string(dir.join("out/data.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines.map(|l| header.iter().cloned().zip(l.split(',').map(String::from)).collect()).collect();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let hash = stdout.lines().find(|l| l.starts_with("trace-hash")).unwrap_or_default().to_string();
    let _ = std::fs::remove_dir_all(&dir);
    (rows, hash)
}

fn get(row: &[(String, String)], column: &str) -> f64 {
    row.iter().find(|(c, _)| c == column).unwrap_or_else(|| panic!("no column {column}")).1.parse().unwrap()
}

#[test]
fn the_breakdown_names_the_atomic_unit_and_changes_no_result() {
    let (plain, plain_hash) = run(false);
    let (broken_down, hash) = run(true);
    assert_eq!(plain_hash, hash, "the breakdown must not change the run");
    assert!(!plain[0].iter().any(|(c, _)| c.starts_with("fabric_wait_")), "off by default");
    for (a, b) in plain.iter().zip(&broken_down) {
        for (column, value) in a {
            let other = &b.iter().find(|(c, _)| c == column).expect("every plain column stays").1;
            assert_eq!(value, other, "{column} moved");
        }
    }
    // Series 0: 64 threads on one word — its atomics queue at the memory node's per-word
    // unit, far more than anywhere else. Series 1 (different words): hardly at all.
    let same = &broken_down[0];
    let spread = &broken_down[1];
    let unit = get(same, "fabric_wait_memory_atomic_unit_ns_per_verb");
    assert!(unit > 1000.0, "64 same-word atomics in flight wait microseconds each: {unit}");
    for column in same.iter().map(|(c, _)| c).filter(|c| c.starts_with("fabric_wait_")) {
        if !column.contains("atomic_unit") {
            assert!(get(same, column) < unit, "{column} above the atomic unit");
        }
    }
    assert!(get(spread, "fabric_wait_memory_atomic_unit_ns_per_verb") < unit / 10.0);
    // `dmsim run --fabric-waits` asks for the same without editing the file.
    let (flagged, flagged_hash) = run_with(false, &["--fabric-waits"]);
    assert_eq!(flagged, broken_down);
    assert_eq!(flagged_hash, hash);
}
