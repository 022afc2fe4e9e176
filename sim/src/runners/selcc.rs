//! SELCC and SEL on the §7.1 micro-benchmark (SELCC paper; spec `shared/specs/selcc.md` §6–§8).
//!
//! `protocol: "selcc"` runs SELCC, `protocol: "sel"` the uncached SEL baseline (same latch word,
//! acquire/release around every access). The `workload` section is the micro-benchmark plus the
//! run shape; `protocol_options` is any subset of [`Config`]'s fields (every optimization switch
//! of the ablations, nested `cpu` costs), applied on top of a preset:
//!
//! ```json
//! "workload": { "gcl_count": 24000, "cache_ratio": 0.175, "sharing_ratio": 1.0,
//!               "read_ratio": 0.5, "zipf_theta": 0.99, "locality": 0.0,
//!               "threads_per_node": 8, "ops_per_node": 16000 },
//! "protocol_options": { "preset": "ablation_base", "forwarding": true, "lease_gamma": null }
//! ```
//!
//! Derived run shapes: `threads_total` (split evenly over compute nodes) instead of
//! `threads_per_node`; `ops_per_node` (split over its threads) instead of `ops_per_thread`;
//! `cache_ratio` (frames per compute node as a fraction of `gcl_count`, the paper's
//! 8 GB : 48 GB = 0.175) instead of `cache_frames`.
//!
//! Extras for the paper's figures:
//! * `write_only_nodes: k` — the first k compute nodes only write (Fig. 15b single writer);
//! * `timeline_at_ns` / `timeline_node` — metric `timeline_cum_ops`: operations that node (or
//!   all nodes) completed by that virtual time, at the protocol's timeline bucket granularity
//!   (Fig. 15b cumulative curves; each x value re-runs the same deterministic simulation);
//! * `compare_with: { "<name>": { "<dotted.path>": value, … } }` — also run this point with the
//!   overrides applied (paths into `protocol`, `cluster`, `workload`, `protocol_options`) and emit
//!   `speedup_<name>` = throughput / reference throughput, so the paper's "N× over X" claims
//!   are first-class metrics;
//! * `sharing_model: "per_node_working_set"` — `gcl_count` is each node's working set (sr·G
//!   shared + (1−sr)·G private per node) instead of the total (default `fixed_total`);
//! * `check: true` — install the SELCC invariants and the read-latest oracle after every event
//!   (slow; for tests).
//!
//! Metrics: `throughput_mops`, `cache_hit_ratio`, `invalidation_ratio`, `latency_us_avg`,
//! `messages_per_op`, `retries_per_op`, `rt_<case>` (mean round trips per op in that case) and
//! `share_<case>` (fraction of ops), per-node `node<i>_mops`, `node_mops_min`/`max`,
//! `fairness_jain` (Jain's index over per-node throughput), `fairness_min_max` (min/max of
//! per-node ops completed when the first node finished), `writer_vs_reader` (with
//! `write_only_nodes`: writer nodes' mean ops over reader nodes' mean ops at that moment),
//! `timeline_cum_ops`, `speedup_<name>` and `ref_<name>_mops`.

use std::collections::BTreeMap;
use std::sync::Arc;

use dmsim_protocols::nic::{Cluster, NodeId};
use dmsim_protocols::selcc::bench::{self, BenchOptions};
use dmsim_protocols::selcc::check::{check_coherence, Oracle};
use dmsim_protocols::selcc::stats::{OpCase, Stats};
use dmsim_protocols::selcc::{ops, setup_memory_node, Config, Gaddr, Layout, Node, NodeState};
use dmsim_protocols::workload::micro::MicroSpec;
use dmsim_protocols::workload::micro::MicroStream;
use dmsim_protocols::workload::rng_for_thread;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::common::{cluster, require_finished, sim_config};
use super::plan::{check_histories, NodeReport};
use super::selcc_recorded::{recorded_worker, OpLog};
use super::{PointResult, RunOptions};
use crate::check::merge::Clock;
use crate::engine::Sim;
use crate::scenario::load::{join_path, parse_typed};
use crate::scenario::{Point, PointConfig, Problem};
use crate::simnic::SimNic;
use crate::trace::TraceSink;

/// The most simulated memory (all regions) one point may allocate.
const MEMORY_BUDGET_BYTES: u64 = 3 << 30;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Workload {
    /// GCLs allocated (24 M in the paper; scaled).
    gcl_count: u64,
    #[serde(default = "gcl_2k")]
    gcl_size_bytes: u32,
    #[serde(default = "one_f64")]
    sharing_ratio: f64,
    read_ratio: f64,
    #[serde(default)]
    zipf_theta: f64,
    #[serde(default)]
    locality: f64,
    #[serde(default)]
    threads_per_node: Option<u32>,
    #[serde(default)]
    threads_total: Option<u32>,
    #[serde(default)]
    ops_per_thread: Option<u64>,
    #[serde(default)]
    ops_per_node: Option<u64>,
    #[serde(default)]
    cache_frames: Option<u32>,
    #[serde(default)]
    cache_ratio: Option<f64>,
    #[serde(default = "eight")]
    access_bytes: u32,
    #[serde(default)]
    write_only_nodes: u16,
    #[serde(default)]
    timeline_at_ns: Option<u64>,
    #[serde(default)]
    timeline_node: Option<u16>,
    #[serde(default)]
    compare_with: BTreeMap<String, Map<String, Value>>,
    #[serde(default)]
    check: bool,
    #[serde(default)]
    sharing_model: SharingModel,
}

/// How the sharing ratio splits the data (spec B16 [GAP]: "follows GAM's benchmark").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum SharingModel {
    /// `gcl_count` GCLs in all: sr·G shared, the rest split into one private part per node, so
    /// each node's working set shrinks as sr falls and nodes are added.
    #[default]
    FixedTotal,
    /// `gcl_count` is each node's working set: sr·G shared by all plus (1−sr)·G private to it
    /// (total sr·G + C·(1−sr)·G). Hit ratios then do not depend on sr, which the paper's
    /// "great scalability regardless of the sharing ratio" for read-intensive loads implies.
    PerNodeWorkingSet,
}

fn gcl_2k() -> u32 {
    2048
}
fn one_f64() -> f64 {
    1.0
}
fn eight() -> u32 {
    8
}

/// Everything one run needs, resolved and validated.
#[derive(Clone, Debug)]
struct Plan {
    workload: Workload,
    config: Config,
    spec: MicroSpec,
}

/// Fields of `Config` that the workload decides (so the two can never disagree).
const FROM_WORKLOAD: &[(&str, &str)] = &[
    ("gcl_size_bytes", "workload.gcl_size_bytes"),
    ("cache_frames", "workload.cache_frames or workload.cache_ratio"),
    ("threads_per_node", "workload.threads_per_node or workload.threads_total"),
    ("mode", "the scenario's protocol (selcc or sel)"),
];

/// Merge `overlay` into `base` (objects recursively); unknown keys are errors at their path.
fn merge(base: &mut Value, overlay: &Map<String, Value>, at: &str) -> Result<(), Problem> {
    let object = base.as_object_mut().expect("merge into an object");
    for (k, v) in overlay {
        let path = join_path(at, k);
        let Some(slot) = object.get_mut(k) else {
            let known: Vec<&String> = object.keys().collect();
            return Err(Problem::new(path, format!("unknown option (known: {known:?})")));
        };
        match (slot.is_object(), v.as_object()) {
            (true, Some(inner)) => merge(slot, inner, &path)?,
            (true, None) => return Err(Problem::new(path, "expected an object")),
            _ => *slot = v.clone(),
        }
    }
    Ok(())
}

fn parse_config(config: &PointConfig) -> Result<Config, Problem> {
    let at = "protocol_options";
    let options = match &config.protocol_options {
        Value::Null => Map::new(),
        Value::Object(m) => m.clone(),
        _ => return Err(Problem::new(at, "must be an object of SELCC options")),
    };
    let mut options = options;
    let preset = match options.remove("preset") {
        None => "default".to_string(),
        Some(Value::String(s)) => s,
        Some(_) => return Err(Problem::new("protocol_options.preset", "must be a string")),
    };
    let base = match (config.protocol.as_str(), preset.as_str()) {
        ("sel", "default") => Config::sel(),
        ("selcc", "default") => Config::selcc(),
        ("selcc", "ablation_base") => Config::ablation_base(),
        (p, other) => {
            return Err(Problem::new(
                "protocol_options.preset",
                format!("unknown preset {other:?} for {p} (selcc: default, ablation_base; sel: default)"),
            ))
        }
    };
    for (field, source) in FROM_WORKLOAD {
        if options.contains_key(*field) {
            return Err(Problem::new(join_path(at, field), format!("set by {source}")));
        }
    }
    let mut value = serde_json::to_value(&base).expect("config serializes");
    merge(&mut value, &options, at)?;
    parse_typed(&value, at)
}

fn plan(config: &PointConfig) -> Result<Plan, Vec<Problem>> {
    let w: Workload = parse_typed(&config.workload, "workload").map_err(|p| vec![p])?;
    let mut c = parse_config(config).map_err(|p| vec![p])?;
    let mut out = Vec::new();
    let nodes = config.cluster.compute_nodes as u32;
    let threads = match (w.threads_per_node, w.threads_total) {
        (Some(t), None) => t,
        (None, Some(total)) => {
            if nodes == 0 || !total.is_multiple_of(nodes) || total < nodes {
                out.push(Problem::new(
                    "workload.threads_total",
                    format!("{total} threads do not split evenly over {nodes} compute nodes"),
                ));
            }
            total / nodes.max(1)
        }
        _ => {
            out.push(Problem::new("workload", "give exactly one of threads_per_node and threads_total"));
            1
        }
    };
    if threads == 0 || threads > 512 {
        out.push(Problem::new("workload.threads_per_node", "must be in 1..=512"));
    }
    let ops_per_thread = match (w.ops_per_thread, w.ops_per_node) {
        (Some(o), None) => o,
        (None, Some(o)) => o / threads.max(1) as u64,
        _ => {
            out.push(Problem::new("workload", "give exactly one of ops_per_thread and ops_per_node"));
            1
        }
    };
    if ops_per_thread == 0 {
        out.push(Problem::new("workload.ops_per_thread", "must give every thread at least one operation"));
    }
    if w.gcl_count == 0 {
        out.push(Problem::new("workload.gcl_count", "must be at least 1"));
    }
    if !(0.0..=1.0).contains(&w.sharing_ratio) {
        out.push(Problem::new("workload.sharing_ratio", format!("{} is outside [0, 1]", w.sharing_ratio)));
    }
    let frames = match (w.cache_frames, w.cache_ratio) {
        (Some(f), None) => f,
        (None, Some(r)) => {
            if !(r > 0.0 && r.is_finite()) {
                out.push(Problem::new("workload.cache_ratio", "must be a positive fraction of gcl_count"));
            }
            (r * w.gcl_count as f64).ceil().min(u32::MAX as f64) as u32
        }
        _ => {
            out.push(Problem::new("workload", "give exactly one of cache_frames and cache_ratio"));
            0
        }
    };
    if nodes as usize > dmsim_protocols::selcc::latch::MAX_COMPUTE_NODES {
        out.push(Problem::new(
            "cluster.compute_nodes",
            format!(
                "SELCC's reader bitmap holds at most {} compute nodes",
                dmsim_protocols::selcc::latch::MAX_COMPUTE_NODES
            ),
        ));
    }
    if w.write_only_nodes > config.cluster.compute_nodes {
        out.push(Problem::new("workload.write_only_nodes", "more than the compute nodes"));
    }
    if let Some(n) = w.timeline_node {
        if n >= config.cluster.compute_nodes {
            out.push(Problem::new("workload.timeline_node", "no such compute node"));
        }
    }
    if w.timeline_node.is_some() && w.timeline_at_ns.is_none() {
        out.push(Problem::new("workload.timeline_node", "needs workload.timeline_at_ns"));
    }
    c.gcl_size_bytes = w.gcl_size_bytes;
    c.threads_per_node = threads.max(1);
    c.cache_frames = frames;
    if c.timeline_bucket_ns == 0 {
        out.push(Problem::new("protocol_options.timeline_bucket_ns", "must be positive"));
    }
    for problem in c.validate() {
        let (field, reason) = problem.split_once(": ").unwrap_or(("", &problem));
        let path = match field {
            "gcl_size_bytes" => "workload.gcl_size_bytes".to_string(),
            "cache_frames" => "workload.cache_frames".to_string(),
            "threads_per_node" => "workload.threads_per_node".to_string(),
            f => join_path("protocol_options", f),
        };
        out.push(Problem::new(path, reason));
    }
    let (gcl_total, sharing_ratio) = match w.sharing_model {
        SharingModel::FixedTotal => (w.gcl_count, w.sharing_ratio),
        SharingModel::PerNodeWorkingSet if (0.0..=1.0).contains(&w.sharing_ratio) => {
            let shared = (w.sharing_ratio * w.gcl_count as f64).round() as u64;
            let total = shared + nodes.max(1) as u64 * (w.gcl_count - shared.min(w.gcl_count));
            // floor(ratio · total) = shared exactly: aim half a GCL above it.
            (total, if total == 0 { 0.0 } else { (shared as f64 + 0.5).min(total as f64) / total as f64 })
        }
        SharingModel::PerNodeWorkingSet => (w.gcl_count, w.sharing_ratio),
    };
    let spec = MicroSpec {
        gcl_count: gcl_total,
        gcl_size_bytes: w.gcl_size_bytes,
        sharing_ratio: sharing_ratio.min(1.0),
        read_ratio: w.read_ratio,
        zipf_theta: w.zipf_theta,
        locality: w.locality,
        threads_per_node: c.threads_per_node,
        ops_per_thread,
        access_bytes: w.access_bytes,
    };
    for problem in spec.validate(nodes.max(1) as usize) {
        let (field, reason) = problem.split_once(": ").unwrap_or(("", &problem));
        out.push(Problem::new(join_path("workload", field), reason));
    }
    if out.is_empty() {
        let stride = w.gcl_size_bytes as u64 + 16;
        let compute = frames as u64 * stride * nodes as u64;
        let total = gcl_total.saturating_mul(stride).saturating_add(compute);
        if total > MEMORY_BUDGET_BYTES {
            out.push(Problem::new(
                "workload",
                format!(
                    "needs {} MiB of simulated memory (GCLs + caches), over the {} MiB budget: scale gcl_count or the cache down",
                    total >> 20,
                    MEMORY_BUDGET_BYTES >> 20
                ),
            ));
        }
    }
    if out.is_empty() {
        Ok(Plan { workload: w, config: c, spec })
    } else {
        Err(out)
    }
}

/// The point's config with a `compare_with` entry's overrides applied.
fn reference(config: &PointConfig, overrides: &Map<String, Value>) -> Result<PointConfig, Problem> {
    let mut doc = serde_json::to_value(config).expect("point config serializes");
    for (path, v) in overrides {
        let parts: Vec<&str> = path.split('.').collect();
        if !["protocol", "cluster", "workload", "protocol_options"].contains(&parts[0]) {
            return Err(Problem::new(
                path.clone(),
                "must start with protocol, cluster, workload or protocol_options",
            ));
        }
        let mut cursor = &mut doc;
        for (i, part) in parts.iter().enumerate() {
            if part.is_empty() {
                return Err(Problem::new(path.clone(), "empty path segment"));
            }
            if cursor.is_null() {
                *cursor = Value::Object(Map::new());
            }
            let Some(object) = cursor.as_object_mut() else {
                return Err(Problem::new(
                    path.clone(),
                    format!("{:?} is not an object", parts[..i].join(".")),
                ));
            };
            if i + 1 == parts.len() {
                object.insert(part.to_string(), v.clone());
                break;
            }
            cursor = object.entry(part.to_string()).or_insert(Value::Null);
        }
    }
    // A reference never compares further.
    if let Some(w) = doc.get_mut("workload").and_then(Value::as_object_mut) {
        w.remove("compare_with");
    }
    parse_typed(&doc, "")
}

pub fn check(config: &PointConfig) -> Vec<Problem> {
    let plan = match plan(config) {
        Ok(p) => p,
        Err(problems) => return problems,
    };
    let mut out = Vec::new();
    for (name, overrides) in &plan.workload.compare_with {
        let at = format!("workload.compare_with.{name}");
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.push(Problem::new(at.clone(), "name must be letters, digits and _"));
        }
        match reference(config, overrides) {
            Err(p) => out.push(Problem::new(join_path(&at, &p.path), p.reason)),
            Ok(r) => {
                if !["selcc", "sel", "gam"].contains(&r.protocol.as_str()) {
                    out.push(Problem::new(
                        format!("{at}.protocol"),
                        format!("reference protocol {:?} is not selcc, sel or gam", r.protocol),
                    ));
                    continue;
                }
                for p in crate::scenario::load::check_point(&r) {
                    out.push(Problem::new(join_path(&at, &p.path), p.reason));
                }
            }
        }
    }
    out
}

/// What one simulation produced.
struct RunStats {
    /// The history checkers' coverage (`check: true` only).
    history_metrics: BTreeMap<String, f64>,
    total: Stats,
    per_node: Vec<Stats>,
    events: u64,
    end_time_ns: u64,
    trace_hash: u64,
    stop: String,
}

fn simulate(point: &Point, plan: &Plan, trace: TraceSink) -> Result<RunStats, String> {
    let spec = &point.config.cluster;
    let shape: Cluster = cluster(spec, 8, 8);
    let layout = Layout::new(&shape, &plan.config, plan.spec.gcl_count, 0);
    let cl = Cluster { region_size_bytes: layout.region_sizes(&shape.kinds), kinds: shape.kinds.clone() };
    let mut sim = Sim::new(sim_config(point, cl.clone(), trace));
    for mn in cl.memory_nodes() {
        setup_memory_node(&layout, mn, &sim.region(mn));
    }
    let oracle = plan.workload.check.then(|| Arc::new(Oracle::new(plan.config.gcl_size_bytes)));
    let mut nodes = Vec::new();
    let mut logs = Vec::new();
    for (i, cn) in cl.compute_nodes().into_iter().enumerate() {
        let mut node_spec = plan.spec.clone();
        if i < plan.workload.write_only_nodes as usize {
            node_spec.read_ratio = 0.0;
        }
        let log = plan.workload.check.then(OpLog::new);
        let tasks = compute_tasks(
            sim.nic(cn),
            plan,
            &layout,
            &node_spec,
            i,
            point.seed,
            false,
            log.clone(),
            oracle.clone(),
        );
        logs.extend(log);
        for t in tasks.mains {
            sim.spawn_main(cn, t);
        }
        for t in tasks.daemons {
            sim.spawn_daemon(cn, t);
        }
        nodes.push(tasks.node);
    }
    if let Some(oracle) = &oracle {
        install_checker(&mut sim, &layout, &nodes, oracle);
    }
    let outcome = sim.run();
    // A protocol error is the cause of whatever else went wrong: report the earliest.
    if let Some(e) = nodes.iter().filter_map(|n| n.first_error()).min_by_key(|e| (e.at, e.node)) {
        return Err(format!("protocol error: {e}"));
    }
    require_finished(&outcome)?;
    let mut history_metrics = BTreeMap::new();
    if !logs.is_empty() {
        // The same history checkers as on hardware, on the simulator's single clock (the run
        // ends without a drain, so memory is not final: no final-state reads).
        let reports: Vec<NodeReport> =
            logs.iter().map(|l| NodeReport { history: l.snapshot(), ..NodeReport::default() }).collect();
        history_metrics = check_histories(&reports, &vec![Clock::default(); reports.len()])?;
    }
    let per_node: Vec<Stats> = nodes.iter().map(|n| n.stats()).collect();
    Ok(RunStats {
        history_metrics,
        total: bench::cluster_stats(&nodes),
        per_node,
        events: outcome.events,
        end_time_ns: outcome.end_time.0,
        trace_hash: outcome.trace_hash,
        stop: format!("{:?}", outcome.stop),
    })
}

/// A compute node's tasks: the plain benchmark workers, or with `log` the recorded ones (every
/// operation logged for the history checkers; client ids are `index · threads + thread`).
#[allow(clippy::too_many_arguments)]
fn compute_tasks<N: dmsim_protocols::nic::Nic>(
    nic: N,
    plan: &Plan,
    layout: &Layout,
    spec: &MicroSpec,
    index: usize,
    seed: u64,
    drain_at_end: bool,
    log: Option<OpLog>,
    oracle: Option<Arc<Oracle>>,
) -> bench::NodeTasks<N> {
    let Some(log) = log else {
        let options = BenchOptions { drain_at_end };
        return bench::node_tasks(nic, &plan.config, layout, spec, seed, &options, oracle);
    };
    let node = Node::new(nic, plan.config.clone(), layout.clone(), oracle);
    let threads = spec.threads_per_node;
    *node.workers_running.lock().unwrap_or_else(|e| e.into_inner()) = threads;
    let compute_count = layout.compute_count();
    let mains = (0..threads)
        .map(|thread| {
            let stream =
                MicroStream::new(spec, index, compute_count, rng_for_thread(seed, node.node.0, thread));
            let client = index as u32 * threads + thread;
            let task: dmsim_protocols::nic::Task =
                Box::pin(recorded_worker(node.clone(), thread, client, stream, log.clone(), drain_at_end));
            task
        })
        .collect();
    bench::NodeTasks { daemons: ops::daemons(&node), node, mains }
}

/// After every event: SELCC's coherence invariants over all nodes, then the oracle's
/// read-latest checks (`check: true`; also what the SELCC tests install).
pub fn install_checker(sim: &mut Sim, layout: &Layout, nodes: &[Arc<Node<SimNic>>], oracle: &Arc<Oracle>) {
    let states: Vec<Arc<NodeState>> = nodes.iter().map(|n| n.state.clone()).collect();
    let regions: Vec<_> = (0..sim.cluster().node_count()).map(|i| sim.region(NodeId(i as u16))).collect();
    let layout = layout.clone();
    let oracle = oracle.clone();
    sim.set_checker(move |_now| {
        let views: Vec<&NodeState> = states.iter().map(|s| s.as_ref()).collect();
        let word = |g: dmsim_protocols::nic::RemoteAddr| regions[g.node.index()].load(g.offset_bytes);
        check_coherence(&views, &layout, &word).map_err(|v| v.to_string())?;
        match oracle.violations().first() {
            Some(v) => Err(v.to_string()),
            None => Ok(()),
        }
    });
}

fn case_name(case: OpCase) -> &'static str {
    match case {
        OpCase::Hit => "hit",
        OpCase::RemoteFetch => "remote_fetch",
        OpCase::Upgrade => "upgrade",
        OpCase::UpgradeFallback => "upgrade_fallback",
        OpCase::WriterVsModified => "writer_vs_modified",
        OpCase::ReaderVsModified => "reader_vs_modified",
        OpCase::WriterVsShared => "writer_vs_shared",
        OpCase::Retried => "retried",
    }
}

fn node_mops(s: &Stats) -> f64 {
    s.throughput_ops_per_s() / 1e6
}

fn metrics(run: &RunStats, plan: &Plan) -> BTreeMap<String, f64> {
    let t = &run.total;
    let ops = t.ops.max(1) as f64;
    let mut m = run.history_metrics.clone();
    m.insert("throughput_mops".into(), t.throughput_ops_per_s() / 1e6);
    m.insert("ops".into(), t.ops as f64);
    m.insert("cache_hit_ratio".into(), t.hit_ratio());
    m.insert("invalidation_ratio".into(), t.invalidation_ratio());
    m.insert("latency_us_avg".into(), t.latency_ns_total as f64 / ops / 1e3);
    m.insert("messages_per_op".into(), t.messages_sent as f64 / ops);
    m.insert("retries_per_op".into(), t.latch_retries as f64 / ops);
    m.insert("evictions_per_op".into(), t.evictions as f64 / ops);
    m.insert("flushed_bytes_per_op".into(), t.flushed_bytes as f64 / ops);
    m.insert("handovers_per_op".into(), t.handovers as f64 / ops);
    m.insert("lease_releases_per_op".into(), t.lease_releases as f64 / ops);
    let mut rt_total = 0u64;
    for (case, s) in &t.by_case {
        let name = case_name(*case);
        m.insert(format!("rt_{name}"), s.mean());
        m.insert(format!("rt_{name}_max"), s.round_trips_max as f64);
        m.insert(format!("share_{name}"), s.ops as f64 / ops);
        rt_total += s.round_trips;
    }
    m.insert("rt_per_op".into(), rt_total as f64 / ops);
    // Per-node throughput and fairness.
    let per: Vec<f64> = run.per_node.iter().map(node_mops).collect();
    for (i, v) in per.iter().enumerate() {
        m.insert(format!("node{i}_mops"), *v);
    }
    let (min, max) = per.iter().fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(*v), b.max(*v)));
    m.insert("node_mops_min".into(), if per.is_empty() { 0.0 } else { min });
    m.insert("node_mops_max".into(), max);
    let sum: f64 = per.iter().sum();
    let sq: f64 = per.iter().map(|v| v * v).sum();
    m.insert("fairness_jain".into(), if sq > 0.0 { sum * sum / (per.len() as f64 * sq) } else { 0.0 });
    // Ops each node had completed when the first node finished (by timeline buckets).
    let bucket = plan.config.timeline_bucket_ns.max(1);
    let first_end = run.per_node.iter().map(|s| s.last_op_end_ns).min().unwrap_or(0);
    let upto = (first_end / bucket) as usize;
    let done: Vec<u64> = run.per_node.iter().map(|s| s.timeline.iter().take(upto + 1).sum()).collect();
    let (dmin, dmax) = done.iter().fold((u64::MAX, 0u64), |(a, b), v| (a.min(*v), b.max(*v)));
    m.insert("fairness_min_max".into(), if dmax > 0 { dmin as f64 / dmax as f64 } else { 0.0 });
    if plan.workload.write_only_nodes > 0 && done.len() > plan.workload.write_only_nodes as usize {
        // Fig. 15b: writer nodes' mean ops over reader nodes' mean ops, when the first node finished.
        let k = plan.workload.write_only_nodes as usize;
        let writers = done[..k].iter().sum::<u64>() as f64 / k as f64;
        let readers = done[k..].iter().sum::<u64>() as f64 / (done.len() - k) as f64;
        m.insert("writer_vs_reader".into(), if readers > 0.0 { writers / readers } else { 0.0 });
    }
    if let Some(at) = plan.workload.timeline_at_ns {
        // Buckets wholly before `at` (bucket k covers [k·b, (k+1)·b)).
        let whole = (at / bucket) as usize;
        let count = |s: &Stats| s.timeline.iter().take(whole).sum::<u64>();
        let cum = match plan.workload.timeline_node {
            Some(n) => count(&run.per_node[n as usize]),
            None => run.per_node.iter().map(count).sum(),
        };
        m.insert("timeline_cum_ops".into(), cum as f64);
    }
    m
}

pub fn run(point: &Point, options: RunOptions) -> Result<PointResult, String> {
    let plan = plan(&point.config).map_err(|ps| {
        ps.iter().map(|p| format!("{}: {}", p.path, p.reason)).collect::<Vec<_>>().join("; ")
    })?;
    let main = simulate(point, &plan, options.trace)?;
    let mut metrics = metrics(&main, &plan);
    let mut ops = main.total.ops;
    let mut events = main.events;
    for (name, overrides) in &plan.workload.compare_with {
        let config = reference(&point.config, overrides).map_err(|p| format!("{}: {}", p.path, p.reason))?;
        let ref_point = Point { config, ..point.clone() };
        let ref_mops = if ["selcc", "sel"].contains(&ref_point.config.protocol.as_str()) {
            let ref_plan = self::plan(&ref_point.config).map_err(|ps| {
                ps.iter().map(|p| format!("{}: {}", p.path, p.reason)).collect::<Vec<_>>().join("; ")
            })?;
            let r = simulate(&ref_point, &ref_plan, TraceSink::Off)
                .map_err(|e| format!("reference {name:?}: {e}"))?;
            ops += r.total.ops;
            events += r.events;
            r.total.throughput_ops_per_s() / 1e6
        } else {
            // Another protocol (GAM): its own runner, on the same workload and cluster.
            let r = super::run(&ref_point, RunOptions { trace: TraceSink::Off })
                .map_err(|e| format!("reference {name:?}: {e}"))?;
            ops += r.ops;
            events += r.events;
            r.metrics.get("throughput_mops").copied().unwrap_or(0.0)
        };
        let own = metrics["throughput_mops"];
        metrics.insert(format!("ref_{name}_mops"), ref_mops);
        metrics.insert(format!("speedup_{name}"), if ref_mops > 0.0 { own / ref_mops } else { 0.0 });
    }
    Ok(PointResult {
        metrics,
        events,
        end_time_ns: main.end_time_ns,
        trace_hash: main.trace_hash,
        stop: main.stop,
        ops,
    })
}

/// SELCC's micro-benchmark as a backend-independent [`super::plan::Plan`], so `dmsim hw run`
/// runs the same protocol code, one process per node. Each compute node drains its cache at the
/// end (flushing dirty lines, releasing latches); the memory nodes then check that every latch
/// word is free and report it, so leaked ownership on hardware is a failed run.
pub struct SelccPlan {
    plan: Plan,
    layout: Layout,
    cluster: Cluster,
    seed: u64,
    notes: Vec<String>,
}

impl SelccPlan {
    pub fn new(point: &Point) -> Result<SelccPlan, String> {
        let plan = plan(&point.config).map_err(|ps| {
            ps.iter().map(|p| format!("{}: {}", p.path, p.reason)).collect::<Vec<_>>().join("; ")
        })?;
        // The reference runs of `compare_with` are simulations (a figure's "N× over X"); a
        // hardware run measures this point only.
        let mut notes = Vec::new();
        if !plan.workload.compare_with.is_empty() {
            let names: Vec<&str> = plan.workload.compare_with.keys().map(String::as_str).collect();
            notes.push(format!(
                "workload.compare_with ({}) ignored: a hardware run measures this point only; run the \
                 reference configuration as its own scenario",
                names.join(", ")
            ));
        }
        let shape: Cluster = cluster(&point.config.cluster, 8, 8);
        let layout = Layout::new(&shape, &plan.config, plan.spec.gcl_count, 0);
        let cluster = Cluster { region_size_bytes: layout.region_sizes(&shape.kinds), kinds: shape.kinds };
        Ok(SelccPlan { plan, layout, cluster, seed: point.seed, notes })
    }

    /// What this plan leaves out of the scenario on hardware, to tell the operator.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
}

impl super::plan::Plan for SelccPlan {
    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    fn setup<N: dmsim_protocols::nic::Nic>(&self, nic: &N) {
        if self.cluster.kinds[nic.node().index()] == dmsim_protocols::nic::NodeKind::Memory {
            setup_memory_node(&self.layout, nic.node(), nic.local());
        }
    }

    fn node<N: dmsim_protocols::nic::Nic>(&self, nic: N) -> super::plan::NodeRun {
        use super::plan::{NodeReport, NodeRun};
        let node = nic.node();
        if self.cluster.kinds[node.index()] == dmsim_protocols::nic::NodeKind::Memory {
            // Memory nodes run no coherence logic; at the end they count latch words still held.
            let layout = self.layout.clone();
            let region_nic = nic.clone();
            let count = self.plan.spec.gcl_count;
            let check = self.plan.workload.check;
            let words_per_gcl = self.plan.config.gcl_size_bytes as u64 / 8;
            let mut run = NodeRun::empty();
            run.collect = Box::new(move || {
                let region = region_nic.local();
                let mine: Vec<(u64, Gaddr)> =
                    (0..count).map(|g| (g, layout.gcl(g))).filter(|(_, at)| at.node == node).collect();
                let held =
                    mine.iter().filter(|(_, at)| region.load(Layout::latch(*at).offset_bytes) != 0).count();
                let mut report = NodeReport::default();
                report.counters.insert("latches_held_at_end".into(), held as f64);
                if check {
                    // Every data word that is not 0 (the initial value; writes never store 0),
                    // for the history checkers' final-state reads.
                    let mut finals = BTreeMap::new();
                    for (g, at) in &mine {
                        let data = Layout::data(*at).offset_bytes;
                        for word in 0..words_per_gcl {
                            let v = region.load(data + 8 * word);
                            if v != 0 {
                                finals.insert(g * words_per_gcl + word, v);
                            }
                        }
                    }
                    report.final_values = Some(finals);
                }
                report
            });
            return run;
        }
        let index = self.cluster.compute_nodes().iter().position(|n| *n == node).expect("a compute node");
        let mut spec = self.plan.spec.clone();
        if index < self.plan.workload.write_only_nodes as usize {
            spec.read_ratio = 0.0;
        }
        let log = self.plan.workload.check.then(OpLog::new);
        let tasks =
            compute_tasks(nic, &self.plan, &self.layout, &spec, index, self.seed, true, log.clone(), None);
        let handle = tasks.node.clone();
        NodeRun {
            progress: Some({
                let node = tasks.node.clone();
                std::sync::Arc::new(move || node.stats().ops)
            }),
            mains: tasks.mains,
            daemons: tasks.daemons,
            collect: Box::new(move || NodeReport {
                error: handle.first_error().map(|e| e.to_string()),
                extra: serde_json::to_value(handle.stats()).expect("stats serialize"),
                history: log.map(|l| l.snapshot()).unwrap_or_default(),
                ..NodeReport::default()
            }),
        }
    }

    fn metrics(
        &self,
        reports: &[super::plan::NodeReport],
        elapsed: dmsim_protocols::nic::Nanos,
    ) -> BTreeMap<String, f64> {
        let per_node: Vec<Stats> =
            reports.iter().filter_map(|r| serde_json::from_value::<Stats>(r.extra.clone()).ok()).collect();
        let mut total = Stats::default();
        for s in &per_node {
            total.merge(s);
        }
        let run = RunStats {
            history_metrics: BTreeMap::new(),
            total,
            per_node,
            events: 0,
            end_time_ns: elapsed.0,
            trace_hash: 0,
            stop: "Finished".into(),
        };
        let mut m = metrics(&run, &self.plan);
        let held: f64 = reports.iter().filter_map(|r| r.counters.get("latches_held_at_end")).sum();
        m.insert("latches_held_at_end".into(), held);
        m
    }

    fn ops(&self, reports: &[super::plan::NodeReport]) -> u64 {
        reports
            .iter()
            .filter_map(|r| serde_json::from_value::<Stats>(r.extra.clone()).ok())
            .map(|s| s.ops)
            .sum()
    }
}
