//! Shared harness for the SELCC integration tests: builds a small cluster (memory nodes first,
//! then compute nodes), lays out GCLs, starts every compute node's daemons, and installs the
//! SELCC invariants (S1–S3, directory soundness) plus the read-latest oracle as the
//! simulator's after-every-event checker.

#![allow(dead_code)]

use std::sync::Arc;

use dmsim_protocols::harness::MemoryWrites;
use dmsim_protocols::nic::{Cluster, NodeId, NodeKind};
use dmsim_protocols::selcc::check::{check_quiescent, Oracle};
use dmsim_protocols::selcc::{bench, setup_memory_node, Config, Layout, Node};
use dmsim_protocols::workload::micro::MicroSpec;
use dmsim_sim::choice::Strategy;
use dmsim_sim::fabric::Profile;
use dmsim_sim::{Outcome, Sim, SimConfig, SimNic, StopReason};

pub struct Harness {
    pub sim: Sim,
    pub layout: Layout,
    pub nodes: Vec<Arc<Node<SimNic>>>,
    pub oracle: Arc<Oracle>,
    pub memory: Vec<NodeId>,
    pub compute: Vec<NodeId>,
}

pub fn quiet_profile() -> Profile {
    let mut p = Profile::named("cx3_fdr56").expect("profile");
    p.jitter_ns_max = 0;
    p
}

/// `memory` memory nodes then `compute` compute nodes; `gcls` pre-allocated GCLs.
pub fn harness(memory: usize, compute: usize, config: &Config, gcls: u64, strategy: Strategy) -> Harness {
    harness_with(memory, compute, config, gcls, strategy, quiet_profile(), true)
}

pub fn harness_with(
    memory: usize,
    compute: usize,
    config: &Config,
    gcls: u64,
    strategy: Strategy,
    profile: Profile,
    check: bool,
) -> Harness {
    let mut kinds = vec![NodeKind::Memory; memory];
    kinds.extend(std::iter::repeat_n(NodeKind::Compute, compute));
    let shape = Cluster { kinds: kinds.clone(), region_size_bytes: vec![0; kinds.len()] };
    let layout = Layout::new(&shape, config, gcls, 4);
    let cluster = Cluster { region_size_bytes: layout.region_sizes(&kinds), kinds };
    let mut sim_config = SimConfig::new(cluster.clone(), profile, 1);
    sim_config.strategy = strategy;
    // These runs take milliseconds of virtual time; a livelock shows up as TimeLimit quickly.
    sim_config.time_ns_max = 500_000_000;
    let mut sim = Sim::new(sim_config);
    let memory_nodes = cluster.memory_nodes();
    let compute_nodes = cluster.compute_nodes();
    for &mn in &memory_nodes {
        setup_memory_node(&layout, mn, &sim.region(mn));
    }
    let oracle = Arc::new(Oracle::new(config.gcl_size_bytes));
    let mut nodes = Vec::new();
    for &cn in &compute_nodes {
        let node = Node::new(sim.nic(cn), config.clone(), layout.clone(), Some(oracle.clone()));
        for task in dmsim_protocols::selcc::ops::daemons(&node) {
            sim.spawn_daemon(cn, task);
        }
        nodes.push(node);
    }
    if check {
        install_checker(&mut sim, &layout, &nodes, &oracle);
    }
    Harness { sim, layout, nodes, oracle, memory: memory_nodes, compute: compute_nodes }
}

/// After every event: the coherence invariants over all nodes and the oracle's read checks.
pub fn install_checker(sim: &mut Sim, layout: &Layout, nodes: &[Arc<Node<SimNic>>], oracle: &Arc<Oracle>) {
    let states = nodes.iter().map(|n| n.state.clone()).collect();
    let mut check =
        dmsim_protocols::selcc::def::invariants(layout, states, oracle.clone(), layout.prealloc_gcl_count);
    let regions: Vec<_> = (0..sim.cluster().node_count()).map(|i| sim.region(NodeId(i as u16))).collect();
    sim.set_checker(move |_now| {
        let word = |a: dmsim_protocols::nic::RemoteAddr| regions[a.node.index()].load(a.offset_bytes);
        let writes = MemoryWrites::of(regions.iter().map(|r| &**r));
        check(&word, writes).map_err(|v| v.to_string())
    });
}

impl Harness {
    pub fn node(&self, i: usize) -> Arc<Node<SimNic>> {
        self.nodes[i].clone()
    }

    pub fn run(&mut self) -> Outcome {
        self.sim.run()
    }

    /// Every latch free and memory equal to the latest writes (after all nodes drained).
    pub fn check_quiescent(&self, gcl_count: u64) -> Result<(), String> {
        let gcls: Vec<_> = (0..gcl_count).map(|i| self.layout.gcl(i)).collect();
        let regions: Vec<_> =
            (0..self.sim.cluster().node_count()).map(|i| self.sim.region(NodeId(i as u16))).collect();
        let word = |a: dmsim_protocols::nic::RemoteAddr| regions[a.node.index()].load(a.offset_bytes);
        check_quiescent(&self.layout, &gcls, &word, &self.oracle).map_err(|v| v.to_string())
    }

    /// Spawn the micro-benchmark on every compute node (draining at the end).
    pub fn spawn_micro(&mut self, spec: &MicroSpec, seed: u64) {
        for (i, node) in self.nodes.clone().into_iter().enumerate() {
            *node.workers_running.lock().unwrap() = spec.threads_per_node;
            for thread in 0..spec.threads_per_node {
                let rng = dmsim_protocols::workload::rng_for_thread(seed, node.node.0, thread);
                let stream =
                    dmsim_protocols::workload::micro::MicroStream::new(spec, i, self.nodes.len(), rng);
                self.sim.spawn_main(self.compute[i], bench::run_worker(node.clone(), thread, stream, true));
            }
        }
    }
}

pub fn assert_finished(outcome: &Outcome) {
    assert_eq!(outcome.stop, StopReason::Finished, "run did not finish cleanly");
}
