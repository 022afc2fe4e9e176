//! Sherman through its scenario runner: every YCSB mix with the checkers on (histories,
//! structure, no lost key), determinism, the per-operation verb counts that Sherman's design
//! fixes (DEX Table 2's protocol logic), and bad options naming their field.

use dmsim::registry;
use dmsim_sim::runners::{self, PointResult, RunOptions};
use dmsim_sim::scenario::load_str;
use dmsim_sim::trace::TraceSink;
use serde_json::{json, Value};

fn scenario(workload: Value, options: Value, check: bool) -> String {
    json!({
        "paper": "test",
        "name": "sherman",
        "protocol": "sherman",
        "cluster": {"memory_nodes": 2, "compute_nodes": 2, "nic_profile": "cx5_100g", "device_memory": true},
        "workload": workload,
        "protocol_options": options,
        "run": {"seed": 3, "check": check},
    })
    .to_string()
}

fn run(text: &str) -> PointResult {
    let s = load_str("test.json", text, &registry::sim()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.points.len(), 1);
    runners::run(&registry::sim(), &s.points[0], RunOptions { trace: TraceSink::Off })
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_ycsb_mix_passes_the_checkers_with_splits() {
    // Goal: the tree stays linearizable per key and well formed under every mix. Method: 2 CNs
    // × 3 threads over 300 keys, leaves split at 6 entries (many splits, root growth), both
    // version schemes; `run.check` logs histories and runs verify.
    for preset in ["sherman", "line"] {
        for mix in ["a", "b", "c", "d", "e", "load", "insert_intensive", "scan_intensive"] {
            let w = json!({"mix": mix, "keyspace": 300, "threads_per_node": 3, "ops_per_thread": 60,
                           "scan_length": {"uniform": 20}});
            let r = run(&scenario(w, json!({"preset": preset, "leaf_split_at": 6, "cache_nodes": 8}), true));
            let m = &r.metrics;
            assert_eq!(r.ops, 2 * 3 * 60, "{preset} {mix}");
            assert!(m["history_keys_checked"] > 0.0, "{preset} {mix}: {m:?}");
            if mix == "load" || mix == "insert_intensive" {
                assert!(m["splits"] > 0.0, "{preset} {mix}: inserts must split leaves");
            }
        }
    }
}

#[test]
fn runs_are_deterministic() {
    let w = json!({"mix": "a", "keyspace": 2000, "threads_per_node": 4, "ops_per_thread": 200});
    let text = scenario(w, json!({}), false);
    let (a, b) = (run(&text), run(&text));
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a.metrics, b.metrics);
}

#[test]
fn verbs_per_operation_follow_the_design() {
    // Goal: with a warm index cache a lookup is one 1 KB leaf READ; an uncontended update is one
    // lock CAS, one leaf READ and one batch of two WRITEs (the entry and the unlock). Method:
    // uniform over many keys (no contention), warm-up first, one thread per node.
    let w = json!({"mix": "a", "distribution": "uniform", "keyspace": 20000, "threads_per_node": 1,
                   "ops_per_thread": 400, "warmup_ops_per_thread": 3000});
    let m = run(&scenario(w, json!({}), false)).metrics;
    assert!((m["lookup_reads_per_op"] - 1.0).abs() < 0.02, "{m:?}");
    assert!((m["lookup_bytes_per_op"] - 1024.0).abs() < 20.0, "{m:?}");
    assert!((m["update_atomics_per_op"] - 1.0).abs() < 0.02, "{m:?}");
    assert!((m["update_writes_per_op"] - 2.0).abs() < 0.02, "{m:?}");
    assert!((m["update_reads_per_op"] - 1.0).abs() < 0.02, "{m:?}");
    // Entry write-back (32 B) + unlock (8 B) + CAS (8 B) + leaf READ (1 KB).
    assert!((m["update_bytes_per_op"] - 1072.0).abs() < 20.0, "{m:?}");
    assert!(m["cache_hit_ratio"] > 0.97, "{m:?}");
}

#[test]
fn hand_over_saves_lock_cases_under_local_contention() {
    // Goal: the hierarchical lock hands a hot lock to local waiters instead of CASing again.
    // Method: one hot key (keyspace 1), 8 threads on one node, updates only.
    let w = |hier: bool| {
        let text = scenario(
            json!({"mix": "custom", "proportions": {"update": 1.0}, "keyspace": 1, "threads_per_node": 8,
                   "ops_per_thread": 50}),
            json!({"hierarchical_locks": hier}),
            false,
        );
        run(&text).metrics
    };
    let (on, off) = (w(true), w(false));
    assert!(on["handovers_per_op"] > 0.3, "{on:?}");
    assert_eq!(off["handovers_per_op"], 0.0);
    assert!(on["atomics_per_op"] < off["atomics_per_op"], "on {on:?} off {off:?}");
}

#[test]
fn bad_fields_name_their_path() {
    let bad = scenario(
        json!({"mix": "a", "keyspace": 0, "threads_per_node": 1, "ops_per_thread": 1}),
        json!({}),
        false,
    );
    let e = load_str("bad.json", &bad, &registry::sim()).unwrap_err().to_string();
    assert!(e.contains("workload.keyspace"), "{e}");
    let bad = scenario(
        json!({"mix": "a", "keyspace": 10, "threads_per_node": 1, "ops_per_thread": 1}),
        json!({"versions": "byte", "leaf_split_at": 1}),
        false,
    );
    let e = load_str("bad.json", &bad, &registry::sim()).unwrap_err().to_string();
    assert!(e.contains("protocol_options"), "{e}");
    let bad = scenario(
        json!({"mix": "a", "keyspace": 10, "threads_per_node": 1, "ops_per_thread": 1}),
        json!({"leaf_split_at": 1}),
        false,
    );
    let e = load_str("bad.json", &bad, &registry::sim()).unwrap_err().to_string();
    assert!(e.contains("protocol_options.leaf_split_at"), "{e}");
}
