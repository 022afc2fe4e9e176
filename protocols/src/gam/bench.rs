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

use crate::common::bench::{write_stamp, Logger, Observer};
use crate::harness::OpLog;
use crate::nic::{Nic, Task};
use crate::workload::micro::{MicroSpec, MicroStream};
use crate::workload::rng_for_thread;

use super::check::Oracle;
use super::config::{Config, Variant};
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
    node_tasks_logged(nic, config, layout, spec, seed, oracle, None)
}

/// [`node_tasks`] whose clients, with `log`, record every operation in it for the history
/// checkers (client ids `compute index · threads + thread`). Under TSO a write takes effect at
/// drain, after it returned, so it has no linearization point inside its interval: TSO runs
/// are checked by the oracle and the invariants, not by histories, and `log` must be `None`.
pub fn node_tasks_logged<N: Nic>(
    nic: N,
    config: &Config,
    layout: &Layout,
    spec: &MicroSpec,
    seed: u64,
    oracle: Option<Arc<Oracle>>,
    log: Option<OpLog>,
) -> NodeTasks<N> {
    assert!(log.is_none() || config.variant == Variant::Seq, "GAM logs histories under SEQ only");
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
            let task: Task = match &log {
                None => Box::pin(run_client(node.clone(), thread, stream)),
                Some(log) => {
                    let client = compute_index as u32 * spec.threads_per_node + thread;
                    let logger = Logger::new(log.clone(), client, config.gcl_size_bytes as u64);
                    Box::pin(run_observed_client(node.clone(), thread, stream, logger))
                }
            };
            task
        })
        .collect();
    NodeTasks { daemons: node.daemons(), node, mains }
}

/// One client thread: its operations in order, then a fence. Stops at the first error (kept
/// in the node's [`super::NodeState::first_error`]).
pub async fn run_client<N: Nic>(node: Arc<Node<N>>, thread: u32, stream: MicroStream) {
    run_observed_client(node, thread, stream, ()).await
}

/// [`run_client`], telling `observer` about every operation (under SEQ a write's replaced words
/// come from the instant it took effect; TSO writes report none).
pub async fn run_observed_client<N: Nic, O: Observer>(
    node: Arc<Node<N>>,
    thread: u32,
    stream: MicroStream,
    mut observer: O,
) {
    let mut w = node.worker(thread);
    let mut sequence = 0u64;
    let mut buffer = Vec::new();
    let mut replaced = Vec::new();
    for op in stream {
        let words = (op.len_bytes / 8) as usize;
        buffer.clear();
        let stamp = op.write.then(|| {
            sequence += 1;
            write_stamp(node.node, thread, sequence)
        });
        observer.invoke(&op, stamp, w.nic.now());
        let done = match stamp {
            Some(stamp) => {
                buffer.resize(words, stamp);
                replaced.clear();
                let seq = node.config.variant == Variant::Seq && observer.wants_replaced();
                if seq {
                    replaced.resize(words, 0);
                }
                let into = seq.then_some(replaced.as_mut_slice());
                let r = node.write_replacing(&mut w, op.gcl_index, op.offset_bytes, &buffer, into).await;
                observer.accessed(&op, &replaced);
                r
            }
            None => {
                buffer.resize(words, 0);
                let r = node.read(&mut w, op.gcl_index, op.offset_bytes, &mut buffer).await;
                observer.accessed(&op, &buffer);
                r
            }
        };
        if done.is_err() {
            return;
        }
        observer.complete(&op, w.nic.now());
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
