//! Helpers every run uses: the simulator configuration of a point and the finished check.

use dmsim_protocols::harness::{CheckLevel, PointSpec};
use dmsim_protocols::nic::Cluster;

use crate::choice::Strategy;
use crate::engine::{Outcome, SimConfig, StopReason};
use crate::scenario::{load::resolve_profile, Point, PointConfig};
use crate::trace::TraceSink;

/// The simulator configuration for a point (profile resolved, cores and share per node).
pub fn sim_config(point: &Point, cluster: Cluster, trace: TraceSink) -> SimConfig {
    sim_config_for(&point.config, point.seed, cluster, trace)
}

/// [`sim_config`] from a point's resolved configuration and seed.
pub fn sim_config_for(config: &PointConfig, seed: u64, cluster: Cluster, trace: TraceSink) -> SimConfig {
    let spec = &config.cluster;
    let profile = resolve_profile(spec).expect("validated at load");
    let mut sim = SimConfig::new(cluster, profile, seed);
    sim.strategy = Strategy::Random { seed };
    sim.trace = trace;
    sim.torn_large_verbs = spec.torn_large_verbs;
    for i in 0..(spec.memory_nodes as usize).min(sim.cores.len()) {
        sim.cores[i] = spec.memory_node_cores;
        sim.cpu_share[i] = spec.memory_node_cpu_share;
    }
    if let Some(cores) = spec.compute_node_cores {
        sim.model_compute_cores(cores);
    }
    if spec.device_memory {
        sim.enable_device_memory();
    }
    sim.ssd_bytes.iter_mut().for_each(|b| *b = spec.ssd_bytes_per_node);
    sim.time_ns_max = config.run.time_ns_max;
    sim.events_max = config.run.events_max;
    sim.faults = config.faults.plan(spec);
    sim
}

/// The point as its protocol sees it.
pub fn point_spec(
    config: &PointConfig,
    seed: u64,
    check: CheckLevel,
    quiesce: bool,
    mutant: &str,
) -> PointSpec {
    PointSpec {
        protocol: config.protocol.clone(),
        memory_nodes: config.cluster.memory_nodes,
        compute_nodes: config.cluster.compute_nodes,
        symmetric_nodes: config.cluster.symmetric_nodes,
        memory_node_cores: config.cluster.memory_node_cores,
        ssd_bytes_per_node: config.cluster.ssd_bytes_per_node,
        protocol_options: config.protocol_options.clone(),
        workload: config.workload.clone(),
        seed,
        check,
        quiesce,
        mutant: mutant.to_string(),
        // Only a measuring run may leave payload unstored: histories and oracles read it back.
        payload_free: check == CheckLevel::Off && !config.run.full_payload,
    }
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
        StopReason::Unrecoverable { message } => Err(message.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{ClusterSpec, RunSpec};
    use dmsim_protocols::nic::NodeKind;

    #[test]
    fn cluster_knobs_reach_the_simulator() {
        // Goal: compute-node cores, device memory and per-node SSDs are scenario knobs.
        let cluster = ClusterSpec {
            memory_nodes: 1,
            compute_nodes: 2,
            nic_profile: "cx5_100g".into(),
            nic_overrides: Default::default(),
            memory_node_cores: Some(2),
            memory_node_cpu_share: 1.0,
            torn_large_verbs: false,
            symmetric_nodes: 0,
            compute_node_cores: Some(4),
            device_memory: true,
            ssd_bytes_per_node: 1 << 20,
        };
        let config = PointConfig {
            protocol: "x".into(),
            cluster,
            protocol_options: Default::default(),
            workload: Default::default(),
            compare_with: Default::default(),
            run: RunSpec::default(),
            faults: Default::default(),
        };
        let shape = Cluster {
            kinds: vec![NodeKind::Memory, NodeKind::Compute, NodeKind::Compute],
            region_size_bytes: vec![64; 3],
        };
        let sim = sim_config_for(&config, 1, shape, TraceSink::Off);
        assert_eq!(sim.cores, vec![Some(2), Some(4), Some(4)]);
        assert!(sim.device_memory_bytes[0] > 0);
        assert_eq!(sim.device_memory_bytes[1], 0);
        assert_eq!(sim.ssd_bytes, vec![1 << 20; 3]);
    }
}
