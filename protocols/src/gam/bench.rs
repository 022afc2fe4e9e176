//! The benchmark entry point: home tasks per memory node and client tasks per compute node for
//! the §7.1 micro-benchmark, driven by the same [`MicroSpec`] as SELCC's bench.
//!
//! ```ignore
//! let layout = Layout::new(&cluster, config.gcl_size_bytes, spec.gcl_count, config.cache_frames);
//! // size regions with layout.region_sizes(&cluster.kinds), build the simulator, then:
//! for mn in cluster.memory_nodes() { let h = bench::home_tasks(sim.nic(mn), &config, &layout); … }
//! for cn in cluster.compute_nodes() { let t = bench::node_tasks(sim.nic(cn), &config, &layout, &spec, seed, None); … }
//! ```

use std::sync::{Arc, Mutex};

use crate::nic::{Nic, Task};
use crate::workload::micro::{MicroSpec, MicroStream};
use crate::workload::rng_for_thread;

use super::check::Oracle;
use super::config::Config;
use super::directory::{run_home, Directory};
use super::layout::Layout;
use super::node::Node;
use super::stats::Stats;

/// One memory node's directory and its handler tasks (daemons).
pub struct HomeTasks {
    pub directory: Arc<Mutex<Directory>>,
    pub daemons: Vec<Task>,
}

pub fn home_tasks<N: Nic>(nic: N, config: &Config, layout: &Layout) -> HomeTasks {
    assert!(nic.local().size_bytes() >= layout.memory_region_bytes(), "memory node region too small");
    let mut home = Directory::new(nic.node(), layout.clone());
    home.mutant = config.mutant;
    let directory = Arc::new(Mutex::new(home));
    let daemons = (0..config.handler_tasks)
        .map(|i| {
            let task: Task = Box::pin(run_home(nic.qp(i as u16), directory.clone(), config.clone()));
            task
        })
        .collect();
    HomeTasks { directory, daemons }
}

/// One compute node's tasks and the node itself.
pub struct NodeTasks<N: Nic> {
    pub node: Arc<Node<N>>,
    /// Client threads: the run ends when all of them finish (each fences at the end, so TSO
    /// writes are all performed by then).
    pub mains: Vec<Task>,
    /// Invalidation handlers and TSO drainers.
    pub daemons: Vec<Task>,
}

pub fn node_tasks<N: Nic>(
    nic: N,
    config: &Config,
    layout: &Layout,
    spec: &MicroSpec,
    seed: u64,
    oracle: Option<Arc<Oracle>>,
) -> NodeTasks<N> {
    assert_eq!(spec.gcl_size_bytes, config.gcl_size_bytes, "workload and protocol disagree on GCL size");
    assert_eq!(spec.threads_per_node, config.threads_per_node, "workload and protocol disagree on threads");
    assert!(spec.gcl_count <= layout.block_count, "workload uses more blocks than were laid out");
    let node = Node::new(nic, config.clone(), layout.clone(), oracle);
    let compute_index = node.me as usize;
    let compute_count = layout.compute_count();
    let mains = (0..spec.threads_per_node)
        .map(|thread| {
            let rng = rng_for_thread(seed, node.node.0, thread);
            let stream = MicroStream::new(spec, compute_index, compute_count, rng);
            let task: Task = Box::pin(run_client(node.clone(), thread, stream));
            task
        })
        .collect();
    NodeTasks { daemons: node.daemons(), node, mains }
}

/// One client thread: its operations in order, then a fence. Stops at the first error (kept
/// in the node's [`super::NodeState::first_error`]).
pub async fn run_client<N: Nic>(node: Arc<Node<N>>, thread: u32, stream: MicroStream) {
    let mut w = node.worker(thread);
    let mut sequence = 0u64;
    let mut buffer = Vec::new();
    for op in stream {
        let words = (op.len_bytes / 8) as usize;
        buffer.clear();
        if op.write {
            sequence += 1;
            // A value unique to this write (node, thread, sequence), so reads are checkable.
            let stamp = (node.node.0 as u64 + 1) << 48 | (thread as u64) << 32 | sequence;
            buffer.resize(words, stamp);
            if node.write(&mut w, op.gcl_index, op.offset_bytes, &buffer).await.is_err() {
                return;
            }
        } else {
            buffer.resize(words, 0);
            if node.read(&mut w, op.gcl_index, op.offset_bytes, &mut buffer).await.is_err() {
                return;
            }
        }
    }
    // An error is kept in the node's slot.
    let _ = node.finish(&w).await;
}

/// Totals over compute nodes.
pub fn cluster_stats<N: Nic>(nodes: &[Arc<Node<N>>]) -> Stats {
    let mut total = Stats::default();
    for node in nodes {
        total.merge(&node.stats());
    }
    total
}
