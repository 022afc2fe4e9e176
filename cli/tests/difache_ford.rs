//! FORD's transactions over DiFache (`workload.transactions`, `protocols/src/difache/bench/ford.rs`;
//! Fig. 14 bottom at `scenarios/difache/fig14-ford.json`) in a small contended run: every
//! variant commits, both abort paths happen, the committed transactions pass the
//! serializability check (`run.check`), the caches serve the reads; a transaction workload
//! mixed with batched operations is refused by name.

mod support;

use serde_json::{json, Value};

fn scenario(batch: u32) -> Value {
    json!({
        "paper": "difache", "name": "tiny-ford",
        "protocol": "difache",
        "cluster": { "memory_nodes": 1, "compute_nodes": 3, "nic_profile": "cx4_100g" },
        "protocol_options": { "index_buckets": 256, "cache_objects": 128 },
        "workload": { "objects": 60, "object_bytes": 128, "threads_per_node": 4, "ops_per_thread": 150,
                      "zipf_theta": 0.99, "batch": batch,
                      "transactions": { "read_only_ratio": 0.8, "max_objects": 6, "max_writes": 3 } },
        "sweep": {
            "series": { "path": "protocol_options.variant", "values": ["nocache", "noac", "difache", "cmcache"] }
        },
        "plot": { "y_metric": "throughput_mops" },
        "run": { "seed": 3, "check": true }
    })
}

#[test]
fn every_variant_commits_serializable_transactions_and_both_aborts_happen() {
    let (out, dir) = support::run_scenario("ford-run", &scenario(1));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/summary.json")).unwrap()).unwrap();
    let points = summary["results"].as_array().expect("results");
    assert_eq!(points.len(), 4);
    let metric = |series: &str, name: &str| {
        let p = points.iter().find(|p| p["series"] == series).unwrap_or_else(|| panic!("no {series}"));
        p["metrics"][name].as_f64().unwrap_or_else(|| panic!("{series}: no {name}"))
    };
    for series in ["nocache", "noac", "difache", "cmcache"] {
        // 12 clients x 150 transactions, each committed or aborted.
        let commits = metric(series, "ops");
        let aborts = metric(series, "lock_aborts") + metric(series, "validation_aborts");
        assert_eq!(commits + aborts, 1800.0, "{series}: every transaction ends once");
        assert!(commits > 500.0, "{series}: {commits} commits (contended: about half abort)");
        assert!(metric(series, "lock_aborts") > 0.0, "{series}: no lock conflict in a Zipf 0.99 run");
        assert!(metric(series, "validation_aborts") > 0.0, "{series}: no validation abort");
        assert!(metric(series, "history_reads_checked") > 1000.0, "{series}: reads not checked");
        let per_txn = metric(series, "objects_per_txn");
        assert!((2.5..=4.5).contains(&per_txn), "{series}: {per_txn} objects per transaction (uniform 1..6)");
    }
    assert_eq!(metric("nocache", "read_hit_ratio"), 0.0);
    for series in ["noac", "difache", "cmcache"] {
        assert!(metric(series, "read_hit_ratio") > 0.5, "{series}: the cache serves the reads");
    }
}

#[test]
fn transactions_refuse_batched_operations_by_name() {
    let (out, _) = support::run_scenario("ford-refused", &scenario(2));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("workload.transactions") && err.contains("batch"), "{err}");
}
