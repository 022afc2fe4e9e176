//! A point as a *plan*: the cluster shape, each node's tasks for any `N: Nic`, and how the
//! nodes' reports combine into metrics. The simulator runs every node of a plan in one `Sim`
//! ([`run_in_sim`]); `dmsim hw run` runs one node per process on real RDMA and gathers the
//! reports at rank 0 over the NIC itself. Same protocol code, same metrics code, both backends.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use dmsim_protocols::nic::{Cluster, Nanos, Nic, NodeId, Task};
use serde::{Deserialize, Serialize};

use super::common::{require_finished, sim_config};
use super::gather::{gather, Gathered};
use super::{PointResult, RunOptions};
use crate::check::merge::{merge, Clock, LoggedOp};
use crate::check::{check_linearizability, check_sequential_consistency};
use crate::engine::Sim;
use crate::scenario::Point;
use dmsim_protocols::sync::Channel;

/// What one node measured: named counters and raw latency samples (ns).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    pub counters: BTreeMap<String, f64>,
    pub samples: Vec<u64>,
    /// Protocol-specific structured statistics (e.g. SELCC's `Stats`).
    #[serde(default)]
    pub extra: serde_json::Value,
    /// This node's clients' operations on its own clock, for the history checkers (empty when
    /// the plan records none).
    #[serde(default)]
    pub history: Vec<LoggedOp>,
    /// A memory node's non-zero data words after the run drained, by history key.
    #[serde(default)]
    pub final_values: Option<BTreeMap<u64, u64>>,
    /// The first protocol error the node hit (its clients stopped there): the run failed.
    #[serde(default)]
    pub error: Option<String>,
}

/// One node's part of a run.
pub struct NodeRun {
    /// Client tasks: the run ends when all of them (on all nodes) finish.
    pub mains: Vec<Task>,
    /// Servers and background tasks: dropped at the end.
    pub daemons: Vec<Task>,
    /// Called after the mains finished: this node's report.
    pub collect: Box<dyn FnOnce() -> NodeReport + Send>,
    /// Client operations completed so far, if the plan can tell: on hardware a watchdog calls
    /// it to turn a protocol that stopped making progress into an error instead of a hang.
    pub progress: Option<Progress>,
}

/// See [`NodeRun::progress`].
pub type Progress = std::sync::Arc<dyn Fn() -> u64 + Send + Sync>;

impl NodeRun {
    pub fn empty() -> NodeRun {
        NodeRun {
            mains: Vec::new(),
            daemons: Vec::new(),
            collect: Box::new(NodeReport::default),
            progress: None,
        }
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

/// Run every node of `plan` in one simulation. Each node runs as on hardware: its clients as
/// tasks, then the report exchange over the NIC ([`super::gather`]), so that exchange is tested
/// here too. Node 0's clock is every node's clock in the simulator, so the history checkers get
/// exact clocks (the measured offsets are ignored).
pub fn run_in_sim<P: Plan>(plan: &P, point: &Point, options: RunOptions) -> Result<PointResult, String> {
    let cluster = plan.cluster();
    let nodes = cluster.node_count();
    let mut sim = Sim::new(sim_config(point, cluster, options.trace));
    let outcome_slot: Arc<Mutex<Option<Result<Gathered, String>>>> = Arc::new(Mutex::new(None));
    for i in 0..nodes {
        let node = NodeId(i as u16);
        let nic = sim.nic(node);
        plan.setup(&nic);
        let run = plan.node(nic.clone());
        for t in run.daemons {
            sim.spawn_daemon(node, t);
        }
        let slot = outcome_slot.clone();
        sim.spawn_main(node, async move {
            let start = nic.now();
            let done = Arc::new(Channel::new());
            let clients = run.mains.len();
            for m in run.mains {
                let done = done.clone();
                nic.spawn(async move {
                    m.await;
                    done.push(());
                });
            }
            for _ in 0..clients {
                done.pop().await;
            }
            let elapsed = nic.now().saturating_sub(start);
            let gathered = gather(&nic, nodes, elapsed, run.collect).await;
            if node.index() == 0 || gathered.is_err() {
                let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
                if slot.as_ref().is_none_or(|o| o.is_ok()) {
                    *slot = Some(gathered);
                }
            }
        });
    }
    let outcome = sim.run();
    require_finished(&outcome)?;
    let gathered = outcome_slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Gathered { reports, .. } = gathered.ok_or("node 0 gathered no reports")??;
    if let Some(e) = reports.iter().find_map(|r| r.error.clone()) {
        return Err(format!("protocol error: {e}"));
    }
    let mut metrics = plan.metrics(&reports, outcome.end_time);
    metrics.extend(check_histories(&reports, &vec![Clock::default(); reports.len()])?);
    Ok(PointResult::simulated(&outcome, metrics, plan.ops(&reports)))
}

/// Runs the history checkers (write chain, linearizability, sequential consistency) over the
/// nodes' logs, each on its clock (`clocks[i]` for `reports[i]`). No logs: no metrics. A
/// violation, or a key the checkers could not decide, is an error naming it.
pub fn check_histories(reports: &[NodeReport], clocks: &[Clock]) -> Result<BTreeMap<String, f64>, String> {
    let mut metrics = BTreeMap::new();
    if reports.iter().all(|r| r.history.is_empty()) {
        return Ok(metrics);
    }
    let logs: Vec<(Clock, &[LoggedOp])> =
        reports.iter().zip(clocks).map(|(r, c)| (*c, r.history.as_slice())).collect();
    let finals = reports.iter().filter_map(|r| r.final_values.as_ref()).fold(None, |acc, f| {
        let mut all: BTreeMap<u64, u64> = acc.unwrap_or_default();
        all.extend(f.iter().map(|(k, v)| (*k, *v)));
        Some(all)
    });
    let history = merge(&logs, finals.as_ref()).map_err(|v| format!("history check: {v}"))?;
    let lin = check_linearizability(&history).map_err(|v| format!("history check: {v}"))?;
    let sc = check_sequential_consistency(&history).map_err(|v| format!("history check: {v}"))?;
    for report in [&lin, &sc] {
        if let Some(u) = report.unknown.first() {
            return Err(format!(
                "history check: {} of {} keys undecided, e.g. {}: {}",
                report.unknown.len(),
                report.keys_checked() + report.unknown.len(),
                u.key,
                u.reason
            ));
        }
    }
    metrics.insert("history_ops".into(), history.records().len() as f64);
    metrics.insert("history_keys_checked".into(), lin.keys_checked() as f64);
    let uncertainty = clocks.iter().map(|c| c.uncertainty_ns).max().unwrap_or(0);
    metrics.insert("history_clock_uncertainty_us".into(), uncertainty as f64 / 1e3);
    Ok(metrics)
}
