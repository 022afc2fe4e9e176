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

use crate::common::bench::write_stamp;
pub use crate::common::bench::Observer;

/// One front-end thread: lock, access, unlock, `ops_per_thread` times.
pub async fn run_worker<N: Nic>(node: Arc<Node<N>>, thread: u32, stream: MicroStream, drain_at_end: bool) {
    run_observed_worker(node, thread, stream, drain_at_end, ()).await
}

/// [`run_worker`], telling `observer` about every operation. Stops at the first error (its
/// own or another task's on this node); the node keeps it in [`super::NodeState::first_error`].
pub async fn run_observed_worker<N: Nic, O: Observer>(
    node: Arc<Node<N>>,
    thread: u32,
    stream: MicroStream,
    drain_at_end: bool,
    mut observer: O,
) {
    let mut w = node.worker(thread);
    let mut sequence = 0u64;
    let mut buffer = Vec::new();
    for op in stream {
        if node.errors.is_set() {
            return;
        }
        let g = node.layout.gcl(op.gcl_index);
        let words = (op.len_bytes / 8) as usize;
        // A value unique to each write (node, thread, sequence), so reads are checkable.
        let stamp = op.write.then(|| {
            sequence += 1;
            write_stamp(node.node, thread, sequence)
        });
        observer.invoke(&op, stamp, w.nic.now());
        if let Some(stamp) = stamp {
            let Ok(mut h) = node.xlock(&mut w, g).await else { return };
            buffer.clear();
            if observer.wants_replaced() {
                buffer.resize(words, 0);
                node.read(&h, op.offset_bytes, &mut buffer);
            }
            observer.accessed(&op, &buffer);
            buffer.clear();
            buffer.resize(words, stamp);
            node.write(&mut h, op.offset_bytes, &buffer);
            if node.xunlock(&mut w, h).await.is_err() {
                return;
            }
        } else {
            let Ok(h) = node.slock(&mut w, g).await else { return };
            buffer.clear();
            buffer.resize(words, 0);
            node.read(&h, op.offset_bytes, &mut buffer);
            observer.accessed(&op, &buffer);
            if node.sunlock(&mut w, h).await.is_err() {
                return;
            }
        }
        observer.complete(&op, w.nic.now());
    }
    let last = {
        let mut running = node.workers_running.lock().unwrap();
        *running -= 1;
        *running == 0
    };
    if last && drain_at_end {
        // An error is kept in the node's slot.
        if node.drain(&w.nic).await.is_ok() && node.config.crash_recovery {
            let _ = node.await_peers(&w.nic).await;
        }
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
