//! The B-link tree over ScaleStore on memory + compute nodes (SELCC's Fig. 17 series): the
//! memory nodes run no workers and never evict, the compute nodes do all the operations and
//! evict back to them, the checks pass; the shapes the plan cannot run are refused by name.

mod support;

use std::path::PathBuf;

use support::run_scenario;

fn scenario() -> serde_json::Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/scalestore/blink-dm-fuzz-small.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn column(csv: &str, name: &str) -> f64 {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let i = header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no column {name}"));
    lines.next().unwrap().split(',').nth(i).unwrap().parse().unwrap()
}

#[test]
fn compute_nodes_do_the_work_and_evict_to_the_memory_nodes() {
    let (out, dir) = run_scenario("ss-tree-dm-ok", &scenario());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = std::fs::read_to_string(dir.join("out/data.csv")).unwrap();
    // 3 compute nodes x 2 workers x 12 measured operations; the 2 memory nodes run none.
    assert_eq!(column(&csv, "ops"), 72.0);
    // Caches of 8 frames over a tree of about 20 pages: pages leave the compute nodes.
    assert!(column(&csv, "evictions_per_latch") > 0.0);
    assert!(column(&csv, "page_messages_per_latch") > 0.0);
    let summary = std::fs::read_to_string(dir.join("out/summary.json")).unwrap();
    assert!(!summary.contains("violation"), "{summary}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shapes_the_plan_cannot_run_are_refused_by_name() {
    let mut inserts = scenario();
    inserts["workload"]["proportions"] = serde_json::json!({ "read": 0.5, "insert": 0.5 });
    let mut mixed = scenario();
    mixed["cluster"]["symmetric_nodes"] = serde_json::json!(2);
    let mut partitioned = scenario();
    partitioned["protocol_options"]["partitioned"] = serde_json::json!(true);
    for (name, json, field) in [
        ("inserts", inserts, "workload.proportions.insert"),
        ("mixed", mixed, "cluster"),
        ("partitioned", partitioned, "protocol_options.partitioned"),
    ] {
        let (out, dir) = run_scenario(&format!("ss-tree-dm-{name}"), &json);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} must be refused");
        assert!(stderr.contains(field), "{name}: the message names {field}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
