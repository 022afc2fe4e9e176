//! ScaleStore on one node against Fig. 11's single-node systems (`scenarios/scalestore/fig11.json`):
//! `protocol_options.page_access: "swizzled"` removes exactly the PID translation from a hit,
//! the YCSB runner's value generation (`protocol_options.tree.value_bytes`) adds exactly its
//! CPU to an update, and a swizzled point with more than one node is refused by name. One worker,
//! every page cached, so the latencies are sums of the configured costs, not timings of a race.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dmsim-single-node-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn scenario(nodes: u32) -> String {
    format!(
        r#"{{
  "paper": "scalestore", "name": "tiny-single-node",
  "protocol": "blink-scalestore",
  "cluster": {{ "memory_nodes": 0, "compute_nodes": 0, "symmetric_nodes": {nodes}, "nic_profile": "cx5_nvme_scalestore" }},
  "protocol_options": {{ "tree": {{ "value_bytes": 128 }} }},
  "workload": {{ "mix": "custom", "proportions": {{ "read": 0.5, "update": 0.5 }}, "distribution": "uniform",
                 "keyspace": 20000, "threads_per_node": 1, "ops_per_thread": 400, "warmup_ops_per_thread": 200,
                 "cache_ratio": 1.25 }},
  "sweep": {{
    "series": {{ "path": "protocol_options.page_access", "values": ["translated", "swizzled"], "names": ["ScaleStore", "swizzled"] }},
    "x": {{ "path": "protocol_options.tree.value_bytes", "values": [0, 128] }}
  }},
  "plot": {{ "y_metric": "throughput_mops" }},
  "run": {{ "seed": 5, "check": true }}
}}"#
    )
}

fn run(dir: &Path, text: &str) -> std::process::Output {
    let file = dir.join("scenario.json");
    std::fs::write(&file, text).unwrap();
    Command::new(env!("CARGO_BIN_EXE_dmsim"))
        .args(["run", file.to_str().unwrap(), "--out", dir.join("out").to_str().unwrap(), "-j", "1"])
        .output()
        .unwrap()
}

#[test]
fn a_hit_loses_only_the_translation_and_an_update_pays_its_value() {
    let dir = scratch("costs");
    let out = run(&dir, &scenario(1));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/summary.json")).unwrap()).unwrap();
    let points = summary["results"].as_array().expect("results");
    assert_eq!(points.len(), 4);
    let metric = |series: &str, x: &str, name: &str| {
        let p = points
            .iter()
            .find(|p| p["series"] == series && p["x"] == x)
            .unwrap_or_else(|| panic!("no point {series} x={x}"));
        p["metrics"][name].as_f64().unwrap_or_else(|| panic!("{series} x={x} has no {name}: {p}"))
    };
    // 20,000 keys in 4 KB pages 70 % full: 113 leaves under the root, 2 levels. A lookup is
    // 2 x (300 ns page access + 200 ns node search); swizzled, 2 x (200 + 200).
    assert_eq!(metric("ScaleStore", "0", "lookup_latency_ns_p50"), 1000.0);
    assert_eq!(metric("swizzled", "0", "lookup_latency_ns_p50"), 800.0);
    // An update also generates its 128-byte value (8 ns a byte), in both systems.
    for series in ["ScaleStore", "swizzled"] {
        let update = |x| metric(series, x, "update_latency_ns_p50");
        assert_eq!(update("128") - update("0"), 1024.0, "{series}: value generation of 128 bytes");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn swizzled_page_access_is_refused_on_more_than_one_node() {
    let dir = scratch("refused");
    let out = run(&dir, &scenario(2));
    assert!(!out.status.success(), "a 2-node swizzled point must be refused");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("page_access") && stderr.contains("2 nodes"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
