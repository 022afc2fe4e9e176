//! The runner-facing entry point (`selcc::bench::node_tasks`) in smoke mode, so it cannot rot:
//! a benchmark point on 2 memory + 4 compute nodes, metrics read at the end, and the paper's
//! headline direction (SELCC ≫ SEL on a skewed read-intensive workload, Fig. 14) as a sanity
//! check — not a calibrated number.

use std::sync::Arc;

use dmsim_protocols::nic::{Cluster, NodeKind};
use dmsim_protocols::selcc::bench::{cluster_stats, node_tasks, BenchOptions};
use dmsim_protocols::selcc::stats::{OpCase, Stats};
use dmsim_protocols::selcc::{setup_memory_node, Config, Layout};
use dmsim_protocols::workload::micro::MicroSpec;
use dmsim_sim::fabric::Profile;
use dmsim_sim::{Sim, SimConfig, StopReason};

/// One benchmark point, as a scenario runner would wire it.
fn point(config: &Config, spec: &MicroSpec, seed: u64) -> Stats {
    let mut kinds = vec![NodeKind::Memory; 2];
    kinds.extend([NodeKind::Compute; 4]);
    let shape = Cluster { kinds: kinds.clone(), region_size_bytes: vec![0; kinds.len()] };
    let layout = Layout::new(&shape, config, spec.gcl_count, 0);
    let cluster = Cluster { region_size_bytes: layout.region_sizes(&kinds), kinds };
    let mut sim = Sim::new(SimConfig::new(cluster.clone(), Profile::named("cx3_fdr56").unwrap(), seed));
    for mn in cluster.memory_nodes() {
        setup_memory_node(&layout, mn, &sim.region(mn));
    }
    let mut nodes = Vec::new();
    for cn in cluster.compute_nodes() {
        let tasks = node_tasks(sim.nic(cn), config, &layout, spec, seed, &BenchOptions::default(), None);
        for t in tasks.mains {
            sim.spawn_main(cn, t);
        }
        for t in tasks.daemons {
            sim.spawn_daemon(cn, t);
        }
        nodes.push(Arc::clone(&tasks.node));
    }
    assert_eq!(sim.run().stop, StopReason::Finished);
    cluster_stats(&nodes)
}

#[test]
fn skewed_read_intensive_point_reports_metrics() {
    let spec = MicroSpec {
        gcl_count: 2048,
        gcl_size_bytes: 1024,
        read_ratio: 0.95,
        zipf_theta: 0.99,
        threads_per_node: 4,
        ops_per_thread: 300,
        ..MicroSpec::default()
    };
    let base = Config { gcl_size_bytes: 1024, cache_frames: 512, threads_per_node: 4, ..Config::selcc() };
    let selcc = point(&base, &spec, 3);
    let sel = point(&Config { mode: dmsim_protocols::selcc::Mode::Sel, ..base }, &spec, 3);
    assert_eq!(selcc.ops, 4 * 4 * 300);
    assert!(selcc.hit_ratio() > 0.3, "skewed reads hit the cache: {}", selcc.hit_ratio());
    assert!(selcc.invalidation_ratio() > 0.0 && selcc.invalidation_ratio() < 0.5);
    assert_eq!(sel.hit_ratio(), 0.0);
    assert!(selcc.by_case[&OpCase::RemoteFetch].round_trips_min == 1);
    assert!(
        selcc.throughput_ops_per_s() > sel.throughput_ops_per_s(),
        "SELCC {:.0} ops/s (hit {:.2}) vs SEL {:.0} ops/s",
        selcc.throughput_ops_per_s(),
        selcc.hit_ratio(),
        sel.throughput_ops_per_s()
    );
    assert!(selcc.timeline.iter().sum::<u64>() == selcc.ops);
}
