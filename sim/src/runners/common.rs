//! Helpers every runner uses: the cluster layout and the simulator configuration.

use dmsim_protocols::nic::{Cluster, NodeId, NodeKind};

use crate::choice::Strategy;
use crate::engine::{Outcome, SimConfig, StopReason};
use crate::scenario::{load::resolve_profile, ClusterSpec, Point};
use crate::trace::TraceSink;

/// Memory nodes are `0..m`, compute nodes `m..m+c`.
pub fn memory_node(spec: &ClusterSpec, i: u16) -> NodeId {
    assert!(i < spec.memory_nodes);
    NodeId(i)
}

pub fn compute_node(spec: &ClusterSpec, i: u16) -> NodeId {
    assert!(i < spec.compute_nodes);
    NodeId(spec.memory_nodes + i)
}

/// The cluster with the given region sizes per kind.
pub fn cluster(spec: &ClusterSpec, memory_region_bytes: u64, compute_region_bytes: u64) -> Cluster {
    let mut kinds = vec![NodeKind::Memory; spec.memory_nodes as usize];
    kinds.extend(std::iter::repeat_n(NodeKind::Compute, spec.compute_nodes as usize));
    let region_size_bytes = kinds
        .iter()
        .map(|k| match k {
            NodeKind::Memory | NodeKind::Symmetric => memory_region_bytes.next_multiple_of(8),
            NodeKind::Compute => compute_region_bytes.next_multiple_of(8),
        })
        .collect();
    Cluster { kinds, region_size_bytes }
}

/// The simulator configuration for a point (profile resolved, cores and share per node).
pub fn sim_config(point: &Point, cluster: Cluster, trace: TraceSink) -> SimConfig {
    let spec = &point.config.cluster;
    let profile = resolve_profile(spec).expect("validated at load");
    let mut config = SimConfig::new(cluster, profile, point.seed);
    config.strategy = Strategy::Random { seed: point.seed };
    config.trace = trace;
    config.torn_large_verbs = spec.torn_large_verbs;
    for i in 0..spec.memory_nodes as usize {
        config.cores[i] = spec.memory_node_cores;
        config.cpu_share[i] = spec.memory_node_cpu_share;
    }
    config.time_ns_max = point.config.run.time_ns_max;
    config.events_max = point.config.run.events_max;
    config
}

/// A run that did not finish is an error naming why.
pub fn require_finished(outcome: &Outcome) -> Result<(), String> {
    match &outcome.stop {
        StopReason::Finished => Ok(()),
        StopReason::Stalled { main_tasks_alive } => {
            Err(format!("run stalled at {} with {main_tasks_alive} client tasks blocked", outcome.end_time))
        }
        StopReason::TimeLimit => Err(format!("run hit run.time_ns_max at {}", outcome.end_time)),
        StopReason::EventLimit => Err(format!("run hit run.events_max after {} events", outcome.events)),
        StopReason::Violation { message } => {
            Err(format!("invariant violated at {}: {message}", outcome.end_time))
        }
    }
}

/// Percentile (0..=100) of an unsorted sample, nearest-rank; 0 for an empty sample.
pub fn percentile(samples: &mut [u64], pct: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable();
    let rank = ((pct / 100.0) * samples.len() as f64).ceil().max(1.0) as usize;
    samples[rank.min(samples.len()) - 1] as f64
}
