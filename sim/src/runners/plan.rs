//! A point as a *plan*: the cluster shape, each node's tasks for any `N: Nic`, and how the
//! nodes' reports combine into metrics. The simulator runs every node of a plan in one `Sim`
//! ([`run_in_sim`]); `dmsim hw run` runs one node per process on real RDMA and gathers the
//! reports at rank 0 over the NIC itself. Same protocol code, same metrics code, both backends.

use std::collections::BTreeMap;

use dmsim_protocols::nic::{Cluster, Nanos, Nic, NodeId, Task};
use serde::{Deserialize, Serialize};

use super::common::{require_finished, sim_config};
use super::{PointResult, RunOptions};
use crate::engine::Sim;
use crate::scenario::Point;

/// What one node measured: named counters and raw latency samples (ns).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    pub counters: BTreeMap<String, f64>,
    pub samples: Vec<u64>,
    /// Protocol-specific structured statistics (e.g. SELCC's `Stats`).
    #[serde(default)]
    pub extra: serde_json::Value,
}

/// One node's part of a run.
pub struct NodeRun {
    /// Client tasks: the run ends when all of them (on all nodes) finish.
    pub mains: Vec<Task>,
    /// Servers and background tasks: dropped at the end.
    pub daemons: Vec<Task>,
    /// Called after the mains finished: this node's report.
    pub collect: Box<dyn FnOnce() -> NodeReport + Send>,
}

impl NodeRun {
    pub fn empty() -> NodeRun {
        NodeRun { mains: Vec::new(), daemons: Vec::new(), collect: Box::new(NodeReport::default) }
    }
}

/// A protocol's run, independent of the backend.
pub trait Plan {
    /// Node kinds and region sizes, identical on every rank.
    fn cluster(&self) -> Cluster;
    /// Write whatever a node's region must hold before any task runs (e.g. latch words).
    fn setup<N: Nic>(&self, _nic: &N) {}
    /// `nic.node()`'s tasks.
    fn node<N: Nic>(&self, nic: N) -> NodeRun;
    /// Metrics from every node's report (indexed by node) and the run's elapsed time.
    fn metrics(&self, reports: &[NodeReport], elapsed: Nanos) -> BTreeMap<String, f64>;
    /// Client operations in the reports (for ops per wall-clock second).
    fn ops(&self, reports: &[NodeReport]) -> u64 {
        reports.iter().map(|r| r.samples.len() as u64).sum()
    }
}

/// Run every node of `plan` in one simulation.
pub fn run_in_sim<P: Plan>(plan: &P, point: &Point, options: RunOptions) -> Result<PointResult, String> {
    let cluster = plan.cluster();
    let nodes = cluster.node_count();
    let mut sim = Sim::new(sim_config(point, cluster, options.trace));
    let mut collects = Vec::with_capacity(nodes);
    for i in 0..nodes {
        let node = NodeId(i as u16);
        let nic = sim.nic(node);
        plan.setup(&nic);
        let run = plan.node(nic);
        for t in run.mains {
            sim.spawn_main(node, t);
        }
        for t in run.daemons {
            sim.spawn_daemon(node, t);
        }
        collects.push(run.collect);
    }
    let outcome = sim.run();
    require_finished(&outcome)?;
    let reports: Vec<NodeReport> = collects.into_iter().map(|c| c()).collect();
    Ok(PointResult {
        metrics: plan.metrics(&reports, outcome.end_time),
        events: outcome.events,
        end_time_ns: outcome.end_time.0,
        trace_hash: outcome.trace_hash,
        stop: format!("{:?}", outcome.stop),
        ops: plan.ops(&reports),
    })
}
