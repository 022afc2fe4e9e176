//! The benchmark entry point: per-node tasks for a runner to spawn (§7.1 micro-benchmark).
//!
//! ```ignore
//! let layout = Layout::new(&cluster, &config, spec.gcl_count, 0);
//! // size regions with layout.region_sizes(&cluster.kinds), build the simulator, then:
//! for mn in cluster.memory_nodes() { setup_memory_node(&layout, mn, sim.nic(mn).local()) }
//! for cn in cluster.compute_nodes() {
//!     let tasks = bench::node_tasks(sim.nic(cn), &config, &layout, &spec, seed, &options, oracle.clone());
//!     for t in tasks.mains { sim.spawn_main(cn, t) }
//!     for t in tasks.daemons { sim.spawn_daemon(cn, t) }
//!     nodes.push(tasks.node);
//! }
//! sim.run();
//! let total = bench::cluster_stats(&nodes);
//! ```

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::nic::{Nic, Task};

use super::check::Oracle;
use super::config::Config;
use super::layout::Layout;
use super::node::Node;
use super::ops::daemons;
use super::stats::Stats;
use crate::workload::micro::{MicroSpec, MicroStream};
use crate::workload::rng_for_thread;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BenchOptions {
    /// When a node's last worker finishes, release every cached GCL (flushing dirty data) so that
    /// memory can be checked against the oracle at the end.
    pub drain_at_end: bool,
}

/// One compute node's tasks and the node itself (for stats and checkers).
pub struct NodeTasks<N: Nic> {
    pub node: Arc<Node<N>>,
    /// Front-end worker threads: the run ends when all of them finish.
    pub mains: Vec<Task>,
    /// Handlers, the retry server and the evictor: dropped at the end of the run.
    pub daemons: Vec<Task>,
}

/// Build a node on `nic` and its tasks for the micro-benchmark `spec`.
pub fn node_tasks<N: Nic>(
    nic: N,
    config: &Config,
    layout: &Layout,
    spec: &MicroSpec,
    seed: u64,
    options: &BenchOptions,
    oracle: Option<Arc<Oracle>>,
) -> NodeTasks<N> {
    assert_eq!(spec.gcl_size_bytes, config.gcl_size_bytes, "workload and protocol disagree on GCL size");
    assert_eq!(spec.threads_per_node, config.threads_per_node, "workload and protocol disagree on threads");
    assert!(spec.gcl_count <= layout.prealloc_gcl_count, "workload uses more GCLs than were laid out");
    let node = Node::new(nic, config.clone(), layout.clone(), oracle);
    *node.workers_running.lock().unwrap() = spec.threads_per_node;
    let compute_index = node.me.0 as usize;
    let compute_count = layout.compute_count();
    let mains = (0..spec.threads_per_node)
        .map(|thread| {
            let rng = rng_for_thread(seed, node.node.0, thread);
            let stream = MicroStream::new(spec, compute_index, compute_count, rng);
            let task: Task = Box::pin(run_worker(node.clone(), thread, stream, options.drain_at_end));
            task
        })
        .collect();
    NodeTasks { daemons: daemons(&node), node, mains }
}

/// One front-end thread: lock, access, unlock, `ops_per_thread` times.
pub async fn run_worker<N: Nic>(node: Arc<Node<N>>, thread: u32, stream: MicroStream, drain_at_end: bool) {
    let mut w = node.worker(thread);
    let mut sequence = 0u64;
    let mut buffer = Vec::new();
    for op in stream {
        let g = node.layout.gcl(op.gcl_index);
        let words = (op.len_bytes / 8) as usize;
        if op.write {
            let mut h = node.xlock(&mut w, g).await;
            sequence += 1;
            // A value unique to this write (node, thread, sequence), so reads are checkable.
            let stamp = (node.node.0 as u64 + 1) << 48 | (thread as u64) << 32 | sequence;
            buffer.clear();
            buffer.resize(words, stamp);
            node.write(&mut h, op.offset_bytes, &buffer);
            node.xunlock(&mut w, h).await;
        } else {
            let h = node.slock(&mut w, g).await;
            buffer.clear();
            buffer.resize(words, 0);
            node.read(&h, op.offset_bytes, &mut buffer);
            node.sunlock(&mut w, h).await;
        }
    }
    let last = {
        let mut running = node.workers_running.lock().unwrap();
        *running -= 1;
        *running == 0
    };
    if last && drain_at_end {
        node.drain(&w.nic).await;
    }
}

/// Totals over nodes.
pub fn cluster_stats<N: Nic>(nodes: &[Arc<Node<N>>]) -> Stats {
    let mut total = Stats::default();
    for node in nodes {
        total.merge(&node.stats());
    }
    total
}
