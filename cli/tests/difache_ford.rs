//! FORD's transactions over DiFache (`workload.transactions`, `protocols/src/difache/bench/ford.rs`;
//! Fig. 14 bottom at `scenarios/difache/fig14-ford.json`) in a small contended run: every
//! variant commits, both abort paths happen, the committed transactions pass the
//! serializability check (`run.check`), the caches serve the reads; a transaction workload
//! mixed with batched operations is refused by name. FORD's TPC-C (`transactions.tpcc`,
//! `bench/tpcc.rs`; Fig. 14 bottom's third panel at `scenarios/difache/fig14-tpcc.json`) on a
//! small database: every variant commits serializable transactions.

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

/// Run `scenario` (it must succeed) and return its points' results.
fn points(tag: &str, scenario: &Value) -> Vec<Value> {
    let (out, dir) = support::run_scenario(tag, scenario);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/summary.json")).unwrap()).unwrap();
    summary["results"].as_array().expect("results").clone()
}

/// Metric `name` of the point of series `series`.
fn metric(points: &[Value], series: &str, name: &str) -> f64 {
    let p = points.iter().find(|p| p["series"] == series).unwrap_or_else(|| panic!("no {series}"));
    p["metrics"][name].as_f64().unwrap_or_else(|| panic!("{series}: no {name}"))
}

#[test]
fn every_variant_commits_serializable_transactions_and_both_aborts_happen() {
    let points = points("ford-run", &scenario(1));
    assert_eq!(points.len(), 4);
    let metric = |series: &str, name: &str| metric(&points, series, name);
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

fn tpcc_scenario() -> Value {
    json!({
        "paper": "difache", "name": "tiny-ford-tpcc",
        "protocol": "difache",
        "cluster": { "memory_nodes": 1, "compute_nodes": 3, "nic_profile": "cx4_100g" },
        "protocol_options": { "index_buckets": 256, "cache_objects": 128 },
        "workload": { "objects": 1, "object_bytes": 128, "threads_per_node": 3, "ops_per_thread": 25,
                      "transactions": { "tpcc": { "warehouses": 2, "districts": 2, "customers": 10,
                                                  "items": 20, "order_slots": 21 } } },
        "sweep": {
            "series": { "path": "protocol_options.variant", "values": ["nocache", "noac", "difache", "cmcache"] }
        },
        "plot": { "y_metric": "throughput_mops" },
        "run": { "seed": 5, "check": true }
    })
}

#[test]
fn tpcc_commits_serializable_transactions_on_every_variant() {
    let points = points("ford-tpcc", &tpcc_scenario());
    let metric = |series: &str, name: &str| metric(&points, series, name);
    for series in ["nocache", "noac", "difache", "cmcache"] {
        // 9 clients x 25 transactions, each committed or aborted.
        let commits = metric(series, "ops");
        let aborts = metric(series, "lock_aborts") + metric(series, "validation_aborts");
        assert_eq!(commits + aborts, 225.0, "{series}: every transaction ends once");
        // 4 districts, 2 warehouses: Payment and NewOrder collide on them often.
        assert!(commits > 50.0 && aborts > 10.0, "{series}: {commits} commits, {aborts} aborts");
        assert!(metric(series, "history_reads_checked") > 1000.0, "{series}: reads not checked");
        // NewOrder touches 14-34 rows and Payment 4; StockLevel and Delivery hundreds.
        let per_txn = metric(series, "objects_per_txn");
        assert!((8.0..=60.0).contains(&per_txn), "{series}: {per_txn} rows per transaction");
        assert!((0.5..1.0).contains(&metric(series, "read_write_share")), "{series}: 88 % write");
        // About 14 NewOrders and Payments per district: 21 slots are not reused.
        assert_eq!(metric(series, "tpcc_wraps"), 0.0, "{series}: order slots reused");
    }
    // Items and customers are reread: the caches serve some (DiFache's adaptive caching keeps
    // most rows off in a run this short).
    for series in ["noac", "difache", "cmcache"] {
        assert!(metric(series, "read_hit_ratio") > 0.05, "{series}: no read served by the cache");
    }
}

#[test]
fn a_batch_larger_than_the_qp_window_goes_sixteen_at_a_time() {
    // 40 objects per batched call: more READs than one QP keeps outstanding (16), so the
    // benchmark issues them in groups; before, the run stopped at the NIC's QP overflow.
    let scenario = json!({
        "paper": "difache", "name": "tiny-batch-40",
        "protocol": "difache",
        "cluster": { "memory_nodes": 1, "compute_nodes": 2, "nic_profile": "cx4_100g" },
        "protocol_options": { "index_buckets": 256, "cache_objects": 128 },
        "workload": { "objects": 80, "object_bytes": 64, "threads_per_node": 2, "ops_per_thread": 20,
                      "read_ratio": 0.7, "batch": 40 },
        "sweep": { "series": { "path": "protocol_options.variant", "values": ["nocache", "difache"] } },
        "plot": { "y_metric": "throughput_mops" },
        "run": { "seed": 2, "check": true }
    });
    let points = points("batch-40", &scenario);
    for series in ["nocache", "difache"] {
        let reads = metric(&points, series, "history_reads_checked");
        // 4 clients x 20 operations x 40 objects, 70 % reads and every write reads first.
        assert!(reads >= 0.7 * 3200.0, "{series}: {reads} reads checked");
    }
}
