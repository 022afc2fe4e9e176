//! GAM's definition (`protocol: "gam"`): the RPC directory baseline on the §7.1 micro-benchmark,
//! on any backend.
//!
//! `workload` is the SELCC micro-benchmark's (the same fields and defaults, the same run shape
//! from [`crate::common::shape`]), so one scenario's `workload` drives both protocols (the GAM
//! series of SELCC's Fig. 13/14). GAM keeps one sharing model (`fixed_total`).
//! `protocol_options` is any subset of [`Config`]'s fields over a preset (`default` = SEQ,
//! `tso`), e.g. `{ "variant": "tso", "cpu": { "worker_ns": 300 } }`:
//!
//! | field | default | meaning |
//! |---|---|---|
//! | `variant` | `"seq"` | `"tso"` (store buffers) or `"seq"` (each write waits) |
//! | `cache_frames` | 4096 | cached blocks per compute node (`workload.cache_frames`/`cache_ratio` win) |
//! | `handler_tasks` | `cluster.memory_node_cores` (1 if unmodelled) | directory handlers per memory node |
//! | `compute_workers` | 1 | request-worker servers per compute node (1 = GAM's serialized queue) |
//! | `inv_handlers` | 1 | invalidation handler tasks per compute node |
//! | `write_buffer_entries` | 16 | TSO store-buffer entries per thread |
//! | `drain_depth` | 1 | TSO writes of one thread in flight at once (1 = strict TSO; more = GAM's asynchronous writes, PSO across blocks) |
//! | `cpu.{worker_ns, access_ns, enqueue_ns}` | 200, 100, 50 | compute-side CPU costs |
//! | `cpu.{handler_service_ns, handler_copy_ns_per_kib}` | 600, 150 | home CPU per message / per KiB |
//!
//! Check mode (`Full`): every read is checked against the latest write (the oracle) and the
//! directory's single-writer rule over every node after every event ([`super::check`]). Under
//! SEQ, `run.check` also logs every client operation (a write with the words it replaced) for
//! the linearizability and sequential-consistency checkers, on both backends.
//! Metrics use SELCC's names where they mean the same (`throughput_mops`, `cache_hit_ratio`,
//! `invalidation_ratio`), plus `rpcs_per_op`, `messages_per_op`, ….

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::bench::{home_tasks, node_tasks_logged};
use super::check::{check_swmr, Oracle};
use super::directory::{Directory, HomeStats};
use super::layout::MAX_COMPUTE_NODES;
use super::stats::Stats;
use super::{Config, Layout, NodeState, Variant};
use crate::common::shape;
use crate::harness::{
    merge_options, parse_typed, report_error, CheckLevel, Invariants, Memory, NodeReport, NodeRun, OpLog,
    Plan, PointSpec, Problem, Protocol, Violation,
};
use crate::nic::{Cluster, Nanos, Nic, NodeKind};
use crate::workload::micro::MicroSpec;
use crate::workload::scenario::MicroWorkload;

/// The registration.
#[derive(Clone, Copy)]
pub struct Gam;

impl Protocol for Gam {
    type Plan = GamPlan;

    fn names(&self) -> &'static [&'static str] {
        &["gam"]
    }

    fn about(&self) -> &'static str {
        "GAM-like RPC directory coherence (TSO or SEQ), SELCC's baseline"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<GamPlan, Vec<Problem>> {
        GamPlan::new(point)
    }
}

const RESERVED: &[(&str, &str)] = &[
    ("gcl_size_bytes", "workload.gcl_size_bytes"),
    ("threads_per_node", "workload.threads_per_node or workload.threads_total"),
    ("mutant", "dmsim fuzz --mutant"),
];

/// GAM on the micro-benchmark: memory nodes run the home directory handlers, compute nodes the
/// clients with their caches. Throughput is over the run's elapsed time from the first
/// operation (on hardware, per-node clocks are not comparable, so the slowest node's).
pub struct GamPlan {
    spec: MicroSpec,
    config: Config,
    layout: Layout,
    cluster: Cluster,
    seed: u64,
    check: CheckLevel,
    oracle: Option<Arc<Oracle>>,
}

/// A GAM node's report: a home's counters or a compute node's.
#[derive(Serialize, Deserialize)]
enum GamReport {
    Home(HomeStats),
    Compute(Stats),
}

/// "field: reason" from a protocol validator → a problem at `prefix.field`.
fn problem_at(prefix: &str, text: &str) -> Problem {
    match text.split_once(": ") {
        Some((field, reason)) if !field.contains(' ') => Problem::new(format!("{prefix}.{field}"), reason),
        _ => Problem::new(prefix, text),
    }
}

impl GamPlan {
    pub fn new(point: &PointSpec) -> Result<GamPlan, Vec<Problem>> {
        let w: MicroWorkload = parse_typed(&point.workload, "workload").map_err(|p| vec![p])?;
        let presets = [("default", Config::seq()), ("seq", Config::seq()), ("tso", Config::tso())];
        let mut config: Config =
            merge_options(&point.protocol_options, "protocol_options", &presets, RESERVED)
                .map_err(|p| vec![p])?;
        let set = |field: &str| point.protocol_options.get(field).is_some();
        let mut out = Vec::new();
        w.check_plain("gam", &mut out);
        let run = shape::resolve(&w.shape_fields(), point.compute_nodes, w.gcl_count, false, &mut out);
        let spec = MicroSpec {
            gcl_count: w.gcl_count,
            gcl_size_bytes: w.gcl_size_bytes,
            sharing_ratio: w.sharing_ratio,
            read_ratio: w.read_ratio,
            zipf_theta: w.zipf_theta,
            locality: w.locality,
            threads_per_node: run.threads_per_node,
            ops_per_thread: run.ops_per_thread,
            access_bytes: w.access_bytes,
        };
        config.gcl_size_bytes = spec.gcl_size_bytes;
        config.threads_per_node = spec.threads_per_node;
        if let Some(frames) = run.cache_frames {
            config.cache_frames = frames;
        }
        if !set("handler_tasks") {
            config.handler_tasks = point.memory_node_cores.unwrap_or(1);
        }
        config.mutant = super::mutants::named(&point.mutant)
            .ok_or_else(|| vec![Problem::new("mutant", format!("GAM has no mutant {:?}", point.mutant))])?;
        let compute = point.compute_nodes as usize;
        // `MicroSpec::validate` partitions the blocks by the sharing ratio, which overflows when
        // the ratio is out of range: report that alone first.
        if (0.0..=1.0).contains(&spec.sharing_ratio) {
            out.extend(spec.validate(compute.max(1)).iter().map(|p| problem_at("workload", p)));
        } else {
            out.push(Problem::new(
                "workload.sharing_ratio",
                format!("{} is outside [0, 1]", spec.sharing_ratio),
            ));
        }
        for p in config.validate() {
            // Fields the plan copies from the workload are reported there.
            let prefix = if p.starts_with("threads_per_node") || p.starts_with("gcl_size_bytes") {
                "workload"
            } else {
                "protocol_options"
            };
            out.push(problem_at(prefix, &p));
        }
        if compute > MAX_COMPUTE_NODES {
            out.push(Problem::new(
                "cluster.compute_nodes",
                "GAM sharer bitmaps allow at most 64 compute nodes",
            ));
        }
        point.no_symmetric("GAM", &mut out);
        if point.memory_nodes == 0 {
            out.push(Problem::new("cluster.memory_nodes", "must be at least 1"));
        }
        if spec.gcl_count == 0 {
            out.push(Problem::new("workload.gcl_count", "must be at least 1"));
        }
        if !out.is_empty() {
            return Err(out);
        }
        let shape = point.cluster(0, 0);
        let layout = Layout::new(&shape, config.gcl_size_bytes, spec.gcl_count, config.cache_frames);
        let cluster = point.cluster(layout.memory_region_bytes(), layout.compute_region_bytes());
        let oracle = point.check.full().then(|| Arc::new(Oracle::new(config.gcl_size_bytes)));
        Ok(GamPlan { spec, config, layout, cluster, seed: point.seed, check: point.check, oracle })
    }

    fn totals(reports: &[NodeReport]) -> (Stats, HomeStats) {
        let mut total = Stats::default();
        let mut home = HomeStats::default();
        for r in reports {
            match serde_json::from_value::<GamReport>(r.extra.clone()) {
                Ok(GamReport::Home(h)) => home.merge(&h),
                Ok(GamReport::Compute(s)) => total.merge(&s),
                Err(_) => {}
            }
        }
        (total, home)
    }

    /// The resolved configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether clients log their operations for the history checkers: with `run.check`, under
    /// SEQ (a TSO write returns before it takes effect; see `bench::node_tasks_logged`).
    fn logs_histories(&self) -> bool {
        self.check.histories() && self.config.variant == Variant::Seq
    }
}

fn report(r: GamReport) -> NodeReport {
    NodeReport { extra: serde_json::to_value(r).unwrap_or(serde_json::Value::Null), ..NodeReport::default() }
}

impl Plan for GamPlan {
    type State = NodeState;

    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun<NodeState> {
        if self.cluster.kinds[nic.node().index()] == NodeKind::Memory {
            let home = home_tasks(nic, &self.config, &self.layout);
            let directory: Arc<Mutex<Directory>> = home.directory;
            return NodeRun {
                progress: None,
                mains: Vec::new(),
                daemons: home.daemons,
                collect: Box::new(move || {
                    let directory = directory.lock().unwrap_or_else(|e| e.into_inner());
                    let error = report_error(directory.first_error());
                    NodeReport { error, ..report(GamReport::Home(directory.stats.clone())) }
                }),
                state: None,
            };
        }
        let log = self.logs_histories().then(OpLog::new);
        let (config, layout, spec) = (&self.config, &self.layout, &self.spec);
        let tasks = node_tasks_logged(nic, config, layout, spec, self.seed, self.oracle.clone(), log.clone());
        let node = tasks.node;
        let watched = node.clone();
        NodeRun {
            progress: Some(Arc::new(move || watched.stats().ops)),
            mains: tasks.mains,
            daemons: tasks.daemons,
            state: Some(node.state.clone()),
            collect: Box::new(move || NodeReport {
                error: report_error(node.first_error()),
                history: log.map(|l| l.snapshot()).unwrap_or_default(),
                ..report(GamReport::Compute(node.stats()))
            }),
        }
    }

    fn metrics(&self, reports: &[NodeReport], elapsed: Nanos) -> BTreeMap<String, f64> {
        let (total, home) = Self::totals(reports);
        let span_s = elapsed.saturating_sub(Nanos(total.first_op_start_ns.unwrap_or(0))).as_secs_f64();
        let reads_checked = self.oracle.as_ref().map(|o| o.reads_checked());
        metrics(&total, &home, span_s, reads_checked)
    }

    fn ops(&self, reports: &[NodeReport]) -> u64 {
        Self::totals(reports).0.ops
    }

    fn invariants(&self, states: Vec<Option<Arc<NodeState>>>) -> Option<Invariants> {
        let oracle = self.oracle.clone()?;
        let states: Vec<Arc<NodeState>> = states.into_iter().flatten().collect();
        Some(Box::new(move |_memory: Memory, _| {
            let refs: Vec<&NodeState> = states.iter().map(|s| s.as_ref()).collect();
            check_swmr(&refs).map_err(|m| Violation::new("SWMR one writer per block", m))?;
            match oracle.violations().first() {
                Some(v) => Err(Violation::new("read-latest", v.clone())),
                None => Ok(()),
            }
        }))
    }

    fn verify(&self, _reports: &[NodeReport], _memory: Option<Memory>) -> Result<(), Violation> {
        match self.oracle.as_ref().and_then(|o| o.violations().first().cloned()) {
            Some(v) => Err(Violation::new("read-latest", v)),
            None => Ok(()),
        }
    }
}

/// The metrics from the compute nodes' and homes' counters over `span_s` seconds.
fn metrics(
    total: &Stats,
    home: &HomeStats,
    span_s: f64,
    reads_checked: Option<u64>,
) -> BTreeMap<String, f64> {
    let ops = total.ops;
    let per_op = |x: u64| x as f64 / ops.max(1) as f64;
    let home_messages = home.replies + home.invalidations_sent + home.recalls_sent;
    let mut metrics = BTreeMap::new();
    metrics.insert("throughput_mops".into(), ops as f64 / span_s.max(1e-12) / 1e6);
    metrics.insert("ops".into(), ops as f64);
    metrics.insert("cache_hit_ratio".into(), total.hit_ratio());
    metrics.insert("invalidation_ratio".into(), total.invalidation_ratio());
    metrics.insert("rpcs_per_op".into(), total.rpcs_per_op());
    metrics.insert("messages_per_op".into(), per_op(total.messages_sent + home_messages));
    metrics.insert("latency_ns_avg".into(), per_op(total.latency_ns_total));
    metrics.insert("fetch_retries_per_op".into(), per_op(total.fetch_retries));
    metrics.insert("writebacks_per_op".into(), per_op(total.writebacks));
    metrics.insert("home_queued_ratio".into(), home.queued as f64 / home.requests.max(1) as f64);
    metrics.insert("buffer_forwards_per_op".into(), per_op(total.buffer_forwards));
    if let Some(reads) = reads_checked {
        metrics.insert("reads_checked".into(), reads as f64);
    }
    metrics
}
