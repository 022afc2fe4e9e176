//! ScaleStore's in-memory baselines (`namdb`, `farm`; issue 16): tiny closed- and open-loop
//! runs through the `dmsim` binary with histories checked, and the fuzz targets' mutants caught
//! while the correct protocols pass the same campaigns (`scenarios/{namdb,farm}/fuzz-small.json`,
//! seeds from 1 in order). No timing assertions.
//!
//! Measured with `dmsim fuzz scenarios/<p>/fuzz-small.json --seeds 300 --mutant M`: see
//! `protocols/src/namdb/NEEDS.md` and `protocols/src/farm/NEEDS.md`.

use std::path::PathBuf;
use std::process::Command;

use dmsim::registry;
use dmsim_sim::fuzz::campaign::{run_campaign, CampaignSpec, StrategyKind};
use dmsim_sim::fuzz::{CampaignSummary, Faults, FuzzTarget, ProtocolTarget};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dmsim-baselines-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn tiny(protocol: &str, open_loop: bool) -> String {
    let open = if open_loop { r#", "open_loop": { "target_mops": 2.0 }"# } else { "" };
    format!(
        r#"{{
  "paper": "scalestore", "name": "tiny-{protocol}",
  "protocol": "{protocol}",
  "cluster": {{ "memory_nodes": 0, "compute_nodes": 0, "symmetric_nodes": 3, "nic_profile": "cx5_100g" }},
  "workload": {{ "records": 30, "threads_per_node": 2, "ops_per_thread": 40, "warmup_ops": 5,
                 "read_ratio": 0.5, "zipf_theta": 1.25{open} }},
  "sweep": {{ "x": {{ "path": "workload.read_ratio", "values": [1.0, 0.05] }} }},
  "plot": {{ "y_metric": "throughput_mops" }},
  "run": {{ "seed": 3, "check": true }}
}}"#
    )
}

fn column(csv: &str, name: &str) -> Vec<f64> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let i = header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no column {name}: {header:?}"));
    lines.map(|l| l.split(',').nth(i).unwrap().parse().unwrap()).collect()
}

#[test]
fn tiny_closed_and_open_loop_runs_of_both_baselines_pass_their_history_checks() {
    for protocol in ["namdb", "farm"] {
        for open_loop in [false, true] {
            let dir = scratch(&format!("{protocol}-{open_loop}"));
            let file = dir.join("scenario.json");
            std::fs::write(&file, tiny(protocol, open_loop)).unwrap();
            let out = Command::new(env!("CARGO_BIN_EXE_dmsim"))
                .args(["run", file.to_str().unwrap(), "--out", dir.join("out").to_str().unwrap(), "-j", "1"])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{protocol} open_loop={open_loop}: {stderr}");
            let csv = std::fs::read_to_string(dir.join("out/data.csv")).unwrap();
            // 3 nodes x 2 workers x 40 measured operations per point, all of them measured.
            assert_eq!(column(&csv, "ops"), vec![240.0, 240.0], "{protocol}");
            for (read_only, rdma) in
                [(true, column(&csv, "rdma_ops_per_op")[0]), (false, column(&csv, "rdma_ops_per_op")[1])]
            {
                if protocol == "namdb" {
                    // Every access is latch + transfer + unlatch through the NIC (the write's
                    // check-mode READ of the value it replaces adds one), more with retries.
                    assert!(rdma >= 3.0, "namdb read_only={read_only}: {rdma} verbs per op");
                } else {
                    // Local records cost no verb; remote reads one READ each.
                    assert!(rdma > 0.0, "farm: {rdma}");
                }
            }
            if protocol == "farm" {
                assert!(column(&csv, "messages_per_op")[1] > 0.0, "farm updates go to the owner");
            }
            assert!(column(&csv, "latency_us_p50").iter().all(|l| *l > 0.0));
            let summary = std::fs::read_to_string(dir.join("out/summary.json")).unwrap();
            assert!(!summary.contains("violation"), "{protocol}: {summary}");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

fn target(protocol: &str) -> ProtocolTarget {
    let path = format!("{}/../scenarios/{protocol}/fuzz-small.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("scenario file");
    ProtocolTarget::from_json(&text, &registry::sim()).unwrap_or_else(|p| panic!("{path}: {p:?}"))
}

fn campaign(target: &ProtocolTarget, mutant: &str, seeds: u64, stop_at_first: bool) -> CampaignSummary {
    let spec = CampaignSpec {
        seeds: (1..=seeds).collect(),
        strategy: StrategyKind::Random,
        mutant: mutant.to_string(),
        faults: Faults::parse("none").unwrap(),
        stop_after: stop_at_first.then_some(1),
        progress: false,
    };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    pool.install(|| run_campaign(target, &spec)).summary
}

#[test]
fn every_baseline_mutant_is_caught_and_the_correct_protocols_pass() {
    for protocol in ["namdb", "farm"] {
        let target = target(protocol);
        let mutants = target.mutants();
        assert!(mutants.len() >= 3, "{protocol}: {} mutants", mutants.len());
        let mut missed = Vec::new();
        for (name, breaks) in &mutants {
            assert!(!breaks.is_empty());
            match campaign(&target, name, 300, true).first_failing_seed {
                Some(seed) => eprintln!("{protocol} {name}: caught at seed {seed}"),
                None => missed.push(*name),
            }
        }
        assert!(missed.is_empty(), "{protocol} mutants not caught in 300 schedules: {missed:?}");
        let summary = campaign(&target, "none", 300, false);
        assert_eq!(summary.schedules, 300);
        assert_eq!(summary.violations, 0, "{protocol} false alarm: {:?}", summary.failures);
    }
}

/// ScaleStore's own series of Figs. 12 and 13 (record mode, `scalestore/record_bench.rs`): the
/// baselines' records packed 4 per page, 5 pages per node, each node caching 8 of the 15 pages
/// (eviction to the storage devices), closed and open loop, counted and timed; histories
/// checked. No timing assertions.
#[test]
fn tiny_record_mode_runs_of_scalestore_pass_their_history_checks() {
    for (open_loop, timed) in [(false, false), (true, false), (false, true), (true, true)] {
        let dir = scratch(&format!("scalestore-{open_loop}-{timed}"));
        let open = if open_loop { r#", "open_loop": { "target_mops": 2.0 }"# } else { "" };
        let time = if timed { r#", "warmup_ns": 20000, "measure_ns": 100000"# } else { "" };
        let scenario = format!(
            r#"{{
  "paper": "scalestore", "name": "tiny-scalestore-records",
  "protocol": "scalestore",
  "cluster": {{ "memory_nodes": 0, "compute_nodes": 0, "symmetric_nodes": 3, "nic_profile": "cx5_100g",
               "ssd_bytes_per_node": 1048576 }},
  "protocol_options": {{ "page_bytes": 256, "eviction": {{ "batch": 2, "sample": 8 }} }},
  "workload": {{ "records": 60, "records_per_page": 4, "pages_per_node": 5, "keys_per_page": 4,
                 "cache_pages_per_node": 8, "threads_per_node": 2, "ops_per_thread": 40, "warmup_ops": 5,
                 "read_ratio": 0.5, "zipf_theta": 1.25{open}{time} }},
  "sweep": {{ "x": {{ "path": "workload.read_ratio", "values": [1.0, 0.05] }} }},
  "plot": {{ "y_metric": "throughput_mops" }},
  "run": {{ "seed": 3, "check": true }}
}}"#
        );
        let file = dir.join("scenario.json");
        std::fs::write(&file, scenario).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_dmsim"))
            .args(["run", file.to_str().unwrap(), "--out", dir.join("out").to_str().unwrap(), "-j", "1"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "open_loop={open_loop} timed={timed}: {stderr}");
        let csv = std::fs::read_to_string(dir.join("out/data.csv")).unwrap();
        if !timed {
            // 3 nodes x 2 workers x 40 measured operations per point.
            assert_eq!(column(&csv, "ops"), vec![240.0, 240.0]);
        }
        assert!(column(&csv, "throughput_mops").iter().all(|t| *t > 0.0), "{csv}");
        assert!(column(&csv, "latency_us_p50").iter().all(|l| *l > 0.0));
        let summary = std::fs::read_to_string(dir.join("out/summary.json")).unwrap();
        assert!(!summary.contains("violation"), "{summary}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
