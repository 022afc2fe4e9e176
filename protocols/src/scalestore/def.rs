//! ScaleStore's definition (`protocol: "scalestore"`), on any backend.
//!
//! The cluster is `symmetric_nodes` nodes (no memory or compute nodes): each runs
//! `workload.threads_per_node` workers and `handler_tasks` message handlers, caches pages and
//! is the directory of `workload.pages_per_node` of them. `protocol_options` is any subset of
//! [`Config`] (`page_bytes`, `handler_tasks`, `poll_ns`, `cpu.{local_op_ns, handler_ns,
//! request_ns}`, `conflicts` with the baselines' `backoff_ns`/`backoff_max_ns`); `workload` is
//! [`Workload`].
//!
//! `run.check` logs every operation for the per-key linearizability checker; the fuzzer
//! (`CheckLevel::Full`) adds the invariants of [`super::check`] after every event and the
//! convergence check after the quiesced run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::bench::run_client;
use super::config::{Config, Workload};
use super::layout::Layout;
use super::node::Node;
use super::record_bench::run_record_client;
use super::state::{NodeState, Owed};
use super::stats::Stats;
use crate::common::metrics::percentile;
use crate::harness::{
    merge_options, parse_typed, report_error, CheckLevel, Invariants, Memory, NodeReport, NodeRun, OpLog,
    Plan, PointSpec, Problem, Protocol, Violation,
};
use crate::nic::{Cluster, Nanos, Nic, Task};

#[derive(Clone, Copy)]
pub struct ScaleStore;

impl Protocol for ScaleStore {
    type Plan = ScaleStorePlan;

    fn names(&self) -> &'static [&'static str] {
        &["scalestore"]
    }

    fn about(&self) -> &'static str {
        "ScaleStore: symmetric nodes, directory-based page caching with anticipatory chaining (in-memory slice)"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<ScaleStorePlan, Vec<Problem>> {
        ScaleStorePlan::new(point)
    }
}

const RESERVED: &[(&str, &str)] = &[("mutant", "dmsim fuzz --mutant")];

/// The node's state as the invariants see it.
pub type State = Mutex<NodeState>;

pub struct ScaleStorePlan {
    config: Config,
    workload: Workload,
    layout: Layout,
    cluster: Cluster,
    seed: u64,
    check: CheckLevel,
    quiesce: bool,
    /// Check mode, one process: every node's state, for the end-of-run convergence check.
    states: Mutex<Vec<Arc<State>>>,
    owed: Option<Owed>,
}

/// A node's report (`NodeReport::extra`): its counters.
#[derive(Serialize, Deserialize)]
pub(super) struct Report {
    pub stats: Stats,
}

/// Every node's counters, parsed back.
pub(super) fn parse_reports(reports: &[NodeReport]) -> Vec<Report> {
    reports.iter().filter_map(|r| r.extra_as::<Report>()).collect()
}

/// What a node of `scalestore` or `scalestore-dm` reports at the end.
pub(super) fn node_report<N: Nic>(
    node: &Node<N>,
    latencies: &Mutex<Vec<u64>>,
    log: Option<OpLog>,
) -> NodeReport {
    let mut stats = node.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
    stats.frames_used = node.state.lock().unwrap_or_else(|e| e.into_inner()).used;
    NodeReport {
        samples: std::mem::take(&mut *latencies.lock().unwrap_or_else(|e| e.into_inner())),
        history: log.map(|l| l.snapshot()).unwrap_or_default(),
        extra: serde_json::to_value(Report { stats }).unwrap_or(serde_json::Value::Null),
        error: report_error(node.errors.first()),
        ..NodeReport::default()
    }
}

/// The record-operation metrics over the merged counters `total`; `capacity`: the cluster's
/// cache in frames when pages are evicted.
pub(super) fn page_metrics(
    total: &Stats,
    reports: &[NodeReport],
    elapsed: Nanos,
    capacity: Option<f64>,
) -> BTreeMap<String, f64> {
    let span = elapsed.saturating_sub(Nanos(total.measure_start_ns.unwrap_or(0))).as_secs_f64();
    let ops = total.ops.max(1) as f64;
    let mut m = BTreeMap::new();
    match total.measure_ns {
        // Record mode's timed runs: what completed inside the window (`record_bench.rs`).
        Some(window) => {
            let mops = total.completed_in_window as f64 / window.max(1) as f64 * 1e3;
            m.insert("throughput_mops".into(), mops);
            m.insert("throughput_kops".into(), mops * 1e3);
            m.insert("late_start_ratio".into(), total.late_starts as f64 / ops);
            m.insert("ssd_reads_with_sharers_per_op".into(), total.ssd_reads_with_sharers as f64 / ops);
        }
        None => {
            m.insert("throughput_mops".into(), total.ops as f64 / span.max(1e-12) / 1e6);
            m.insert("throughput_kops".into(), total.ops as f64 / span.max(1e-12) / 1e3);
        }
    }
    m.insert("ops".into(), total.ops as f64);
    m.insert("hit_ratio".into(), total.hits as f64 / ops);
    m.insert("messages_per_op".into(), total.messages as f64 / ops);
    m.insert("page_transfers_per_op".into(), total.page_transfers as f64 / ops);
    m.insert("exclusive_conflicts_per_op".into(), total.exclusive_conflicts as f64 / ops);
    m.insert("shared_conflicts_per_op".into(), total.shared_conflicts as f64 / ops);
    m.insert("upgrades_per_op".into(), total.upgrades as f64 / ops);
    m.insert("copy_restarts".into(), total.copy_restarts as f64);
    m.insert("handler_requeues_per_op".into(), total.requeues as f64 / ops);
    if let Some(capacity) = capacity {
        m.insert("ssd_reads_per_op".into(), total.ssd_reads as f64 / ops);
        m.insert("ssd_writes_per_op".into(), total.ssd_writes as f64 / ops);
        m.insert("evictions_per_op".into(), total.evictions as f64 / ops);
        m.insert("eviction_declines_per_op".into(), total.eviction_declines as f64 / ops);
        m.insert("pulls_per_op".into(), total.pulls as f64 / ops);
        m.insert("frame_waits_per_op".into(), total.frame_waits as f64 / ops);
        // Frames in use at the end over the cluster's cache (the paper's "cache utilization").
        m.insert("cache_utilization".into(), total.frames_used as f64 / capacity);
    }
    let mut samples: Vec<u64> = reports.iter().flat_map(|r| r.samples.iter().copied()).collect();
    if !samples.is_empty() {
        m.insert("latency_us_p50".into(), percentile(&mut samples, 50.0) / 1e3);
        m.insert("latency_us_p99".into(), percentile(&mut samples, 99.0) / 1e3);
        m.insert("latency_us_p999".into(), percentile(&mut samples, 99.9) / 1e3);
    }
    m
}

fn at(prefix: &str, text: &str) -> Problem {
    match text.split_once(": ") {
        Some((field, reason)) if !field.contains(' ') => Problem::new(format!("{prefix}.{field}"), reason),
        _ => Problem::new(prefix, text),
    }
}

impl ScaleStorePlan {
    pub fn new(point: &PointSpec) -> Result<ScaleStorePlan, Vec<Problem>> {
        let workload: Workload = parse_typed(&point.workload, "workload").map_err(|p| vec![p])?;
        let presets = [("default", Config::default())];
        let mut config: Config =
            merge_options(&point.protocol_options, "protocol_options", &presets, RESERVED)
                .map_err(|p| vec![p])?;
        let mut out: Vec<Problem> = workload.validate().iter().map(|p| at("workload", p)).collect();
        out.extend(config.validate(point.symmetric_nodes as usize).iter().map(|p| at("protocol_options", p)));
        config.mutant = match super::mutants::named(&point.mutant) {
            Some(m) => m,
            None => {
                out.push(Problem::new("mutant", format!("scalestore has no mutant {:?}", point.mutant)));
                Default::default()
            }
        };
        if point.memory_nodes != 0 || point.compute_nodes != 0 {
            out.push(Problem::new(
                "cluster",
                "scalestore runs on symmetric nodes only: set symmetric_nodes, and memory_nodes and compute_nodes to 0",
            ));
        }
        if point.symmetric_nodes == 0 || point.symmetric_nodes > 64 {
            out.push(Problem::new(
                "cluster.symmetric_nodes",
                "must be in 1..=64 (sharer bitmaps of 64 bits)",
            ));
        }
        if !out.is_empty() {
            return Err(out);
        }
        let layout = Layout {
            nodes: point.symmetric_nodes as u64,
            homes: point.symmetric_nodes as u64,
            threads: workload.threads_per_node as u64,
            pages_per_node: workload.pages_per_node,
            page_bytes: config.page_bytes,
            keys_per_page: workload.keys_per_page,
            providers: 0,
            batch: config.eviction.batch as u64,
        };
        if workload.records > 0 {
            if let Some(p) = super::record_bench::RecordMap::new(&layout, &workload).problem() {
                return Err(vec![at("workload", &p)]);
            }
        }
        let mut layout = layout;
        if workload.cache_pages_per_node != 0 && workload.cache_pages_per_node < layout.total_pages() {
            layout.providers = config.eviction.providers as u64;
        }
        const REGION_MAX: u64 = 64 << 30;
        if layout.region_bytes() > REGION_MAX {
            return Err(vec![Problem::new(
                "workload.pages_per_node",
                format!(
                    "every node has a frame per page: {} bytes per node (at most 64 GiB)",
                    layout.region_bytes()
                ),
            )]);
        }
        if layout.providers > 0 && config.conflicts != super::baselines::Conflicts::Chaining {
            return Err(vec![Problem::new(
                "protocol_options.conflicts",
                "the FIFO-queue and busy-polling baselines run without eviction (their gate does not order eviction lists): give no cache_pages_per_node below the data",
            )]);
        }
        if layout.ssd_bytes() > point.ssd_bytes_per_node {
            return Err(vec![Problem::new(
                "cluster.ssd_bytes_per_node",
                format!(
                    "a cache smaller than the data evicts to each directory's storage device, which must hold its {} pages: at least {} bytes (got {})",
                    layout.pages_per_node,
                    layout.ssd_bytes(),
                    point.ssd_bytes_per_node
                ),
            )]);
        }
        let extra = super::baselines::extra_bytes(&layout, config.conflicts);
        let cluster = point.cluster(layout.region_bytes() + extra, 0);
        Ok(ScaleStorePlan {
            config,
            workload,
            layout,
            cluster,
            seed: point.seed,
            check: point.check,
            quiesce: point.quiesce,
            states: Mutex::new(Vec::new()),
            owed: point.check.full().then(Owed::default),
        })
    }

    fn parse(reports: &[NodeReport]) -> Vec<Report> {
        parse_reports(reports)
    }
}

impl Plan for ScaleStorePlan {
    type State = State;

    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    fn payload_spans(&self) -> Vec<Option<crate::memory::PayloadSpan>> {
        self.cluster.kinds.iter().map(|_| Some(self.layout.payload_span())).collect()
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun<State> {
        let capacity = match self.layout.providers {
            0 => u64::MAX,
            _ => self.workload.cache_pages_per_node,
        };
        let node =
            Node::new(nic, self.layout.clone(), self.config.clone(), self.owed.clone(), capacity, None);
        let me = node.nic.node();
        if self.check.full() {
            self.states.lock().unwrap_or_else(|e| e.into_inner()).push(node.state.clone());
        }
        let latencies = Arc::new(Mutex::new(Vec::new()));
        let log = self.check.histories().then(OpLog::new);
        let threads = self.workload.threads_per_node;
        let mains = (0..threads)
            .map(|t| {
                let client = me.0 as u32 * threads + t;
                let (w, seed, log) = (self.workload.clone(), self.seed, log.clone().map(|l| (l, client)));
                let task: Task = if w.records > 0 {
                    Box::pin(run_record_client(node.clone(), t, w, seed, log, latencies.clone()))
                } else {
                    Box::pin(run_client(node.clone(), t, w, seed, log, latencies.clone()))
                };
                task
            })
            .collect();
        let daemons = node.daemons(true);
        let watched = node.clone();
        NodeRun {
            mains,
            daemons,
            progress: Some(Arc::new(move || watched.stats.lock().unwrap_or_else(|e| e.into_inner()).ops)),
            state: Some(node.state.clone()),
            collect: Box::new(move || node_report(&node, &latencies, log)),
        }
    }

    fn metrics(&self, reports: &[NodeReport], elapsed: Nanos) -> BTreeMap<String, f64> {
        let mut total = Stats::default();
        let parsed = Self::parse(reports);
        for r in &parsed {
            total.merge(&r.stats);
        }
        let capacity = (self.layout.providers > 0)
            .then(|| (self.workload.cache_pages_per_node * self.layout.nodes) as f64);
        let mut m = page_metrics(&total, reports, elapsed, capacity);
        let per_node: Vec<&Stats> = parsed.iter().map(|r| &r.stats).collect();
        super::stats::per_node_metrics(&per_node, reports, &mut m);
        m
    }

    fn ops(&self, reports: &[NodeReport]) -> u64 {
        Self::parse(reports).iter().map(|r| r.stats.ops).sum()
    }

    fn invariants(&self, states: Vec<Option<Arc<State>>>) -> Option<Invariants> {
        if !self.check.full() {
            return None;
        }
        Some(super::check::hook(&self.layout, self.owed.as_ref()?, states))
    }

    fn verify(&self, reports: &[NodeReport], _memory: Option<Memory>) -> Result<(), Violation> {
        let states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        super::check::verify_records(&self.layout, reports, &states, self.quiesce, self.owed.as_ref())
    }
}
