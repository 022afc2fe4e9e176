//! The B-link tree's definition: `protocol: "blink"` runs it over SELCC, `"blink-sel"` over
//! SEL (the same tree, the same page adapter; the SELCC node in `Mode::Sel`). The workload is
//! YCSB ([`YcsbWorkload`]; `cache_ratio` is relative to the bulk-loaded tree's nodes).
//! `protocol_options` is any subset of SELCC's [`Config`] over its presets (`default`,
//! `ablation_base` for Fig. 18), plus `tree` ([`TreeConfig`]):
//!
//! ```json
//! "protocol_options": { "preset": "ablation_base", "forwarding": true,
//!                       "gcl_size_bytes": 2048, "tree": { "split_at": 4 } }
//! ```
//!
//! `blink-sel` runs SEL as the authors do (`selcc/sel.rs`: every thread latches by RDMA into
//! its one private page buffer), so the tree holds one latch at a time there
//! ([`super::pages::Pages::one_latch_at_a_time`]: a split writes the new sibling first and
//! publishes it only if the old node is unchanged). `sel_node_latch: true` selects dmsim's
//! node-latched SEL instead.
//!
//! Checks: histories of every lookup, store and scanned key (the bulk load logged as writes at
//! time 0) for per-key linearizability; `Full` adds SELCC's coherence invariants and the
//! read-latest oracle after every event; after a quiesced run the tree's structure
//! ([`super::check`]), no lost key, no scan that skipped a live key.
//!
//! Metrics: `throughput_mops`, `ops`, `latency_ns_{avg,p50,p99}`, `nodes_per_op`,
//! `move_rights_per_op`, `splits`, the same per kind with prefixes `lookup_`, `update_`,
//! `insert_`, `scan_`, and SELCC's own per latch acquisition (warm-up included) with the prefix
//! `latch_`: hit, invalidation and eviction ratios, messages, round trips, flushed bytes, the
//! latch latency (`latch_latency_us_avg`), and per §3.2–3.5 path its share of acquisitions
//! (`latch_share_<path>`) and mean round trips (`latch_rt_<path>`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::bench::{run_client, KvLogger};
use super::bulk::{build, load_value, node_count, BulkTree};
use super::check::check_tree;
use super::node::capacity;
use super::pages::{PageId, SelccPages};
use super::stats::{KindStats, Stats, KINDS};
use super::tree::{Shared, Tree, TreeConfig};
use crate::common::metrics::percentile;
use crate::common::shape;
use crate::harness::{
    join_path, merge_options, parse_typed, report_error, CheckLevel, Invariants, LoggedOp, Memory,
    NodeReport, NodeRun, OpLog, Plan, PointSpec, Problem, Protocol, Violation,
};
use crate::nic::{Cluster, Nanos, Nic, NodeKind, Task};
use crate::selcc::check::Oracle;
use crate::selcc::{latch, ops, setup_memory_node, Config, Layout, Node, NodeState};
use crate::workload::rng_for_thread;
use crate::workload::scan_check::{check_report_scans, ScanRecord};
use crate::workload::window::Gate;
use crate::workload::ycsb::{YcsbStream, YcsbWorkload};

/// A compute node's report: the tree's counters and SELCC's beneath them.
#[derive(serde::Serialize, serde::Deserialize)]
struct Report {
    tree: Stats,
    latch: crate::selcc::stats::Stats,
}

/// The most simulated memory (all regions) one point may allocate.
const MEMORY_BUDGET_BYTES: u64 = 3 << 30;

#[derive(Clone, Copy)]
pub struct Blink;

impl Protocol for Blink {
    type Plan = BlinkPlan;

    fn names(&self) -> &'static [&'static str] {
        &["blink", "blink-sel"]
    }

    fn about(&self) -> &'static str {
        "a concurrent B-link tree whose nodes are GCLs latched by SELCC (blink) or SEL (blink-sel), on YCSB"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<BlinkPlan, Vec<Problem>> {
        BlinkPlan::new(point)
    }
}

const RESERVED: &[(&str, &str)] = &[
    ("cache_frames", "workload.cache_frames or workload.cache_ratio"),
    ("threads_per_node", "workload.threads_per_node or workload.threads_total"),
    ("mode", "the scenario's protocol (blink or blink-sel)"),
    ("mutant", "dmsim fuzz --mutant (SELCC's mutants are the selcc protocol's)"),
];

pub struct BlinkPlan {
    workload: YcsbWorkload,
    config: Config,
    tree: TreeConfig,
    layout: Layout,
    cluster: Cluster,
    threads: u32,
    ops_per_thread: u64,
    seed: u64,
    check: CheckLevel,
    quiesce: bool,
    bulk: Arc<BulkTree>,
    loaded: Vec<(u64, u64)>,
    oracle: Option<Arc<Oracle>>,
}

impl BlinkPlan {
    pub fn new(point: &PointSpec) -> Result<BlinkPlan, Vec<Problem>> {
        let w: YcsbWorkload = parse_typed(&point.workload, "workload").map_err(|p| vec![p])?;
        let mut options = match &point.protocol_options {
            Value::Null => serde_json::Map::new(),
            Value::Object(m) => m.clone(),
            _ => return Err(vec![Problem::new("protocol_options", "must be an object of options")]),
        };
        let mut tree = tree_options(&mut options)?;
        let sel = point.protocol == "blink-sel";
        let presets: Vec<(&str, Config)> = if sel {
            vec![("default", Config::sel())]
        } else {
            vec![("default", Config::selcc()), ("ablation_base", Config::ablation_base())]
        };
        let mut c: Config = merge_options(&Value::Object(options), "protocol_options", &presets, RESERVED)
            .map_err(|p| vec![p])?;
        tree.mutant = super::mutants::named(&point.mutant).ok_or_else(|| {
            vec![Problem::new("mutant", format!("the B-link tree has no mutant {:?}", point.mutant))]
        })?;
        let mut out = Vec::new();
        w.check(&mut out);
        if w.proportions().delete > 0.0 {
            out.push(Problem::new(
                "workload.proportions.delete",
                "the B-link tree has no delete (nodes never merge)",
            ));
        }
        point.no_symmetric("The B-link tree", &mut out);
        if point.memory_nodes == 0 {
            out.push(Problem::new("cluster.memory_nodes", "must be at least 1"));
        }
        if point.compute_nodes == 0 || point.compute_nodes as usize > latch::MAX_COMPUTE_NODES {
            out.push(Problem::new(
                "cluster.compute_nodes",
                format!("must be in 1..={} (SELCC's reader bitmap)", latch::MAX_COMPUTE_NODES),
            ));
        }
        let page_words = (c.gcl_size_bytes / 8) as usize;
        for p in tree.validate(page_words) {
            let (field, reason) = p.split_once(": ").unwrap_or(("", &p));
            let at = if field == "gcl_size_bytes" {
                "protocol_options".to_string()
            } else {
                "protocol_options.tree".into()
            };
            out.push(Problem::new(join_path(&at, field), reason));
        }
        if !out.is_empty() {
            return Err(out);
        }
        let per_node = ((tree.max_entries(page_words) as f64 * tree.bulk_fill).floor() as usize).max(2);
        let bulk_nodes = node_count(w.bulk_load(), per_node);
        let run = shape::resolve(&w.shape_fields(), point.compute_nodes, bulk_nodes, true, &mut out);
        c.threads_per_node = run.threads_per_node;
        c.cache_frames = run.cache_frames.unwrap_or(0);
        for p in c.validate() {
            let (field, reason) = p.split_once(": ").unwrap_or(("", &p));
            let path = match field {
                "cache_frames" => "workload.cache_frames".to_string(),
                "threads_per_node" => "workload.threads_per_node".to_string(),
                f => join_path("protocol_options", f),
            };
            out.push(Problem::new(path, reason));
        }
        // Room for every split: each new key splits at most one leaf per half-node of inserts,
        // internal splits and new roots at most as many again.
        let p = w.proportions();
        let stores = run.ops_per_thread.saturating_add(w.warmup_ops_per_thread) as f64
            * run.threads_per_node as f64
            * point.compute_nodes as f64
            * (p.update + p.insert);
        let new_keys = stores.min((w.keyspace - w.bulk_load().min(w.keyspace)) as f64 + stores * p.insert);
        let half = (tree.max_entries(page_words) / 2).max(1) as f64;
        let extra = (2.0 * new_keys / half).ceil();
        if extra.is_nan() || extra >= 1e9 {
            return Err(vec![Problem::new(
                "workload",
                format!("this run's stores could split about {extra:.0} pages (at most 10^9): fewer operations or threads"),
            )]);
        }
        let extra = extra as u64 + 16;
        let mns = point.memory_nodes.max(1) as u64;
        let prealloc = 1 + bulk_nodes;
        let stride = c.gcl_size_bytes as u64 + 16;
        let total = (prealloc + extra + 2 * mns)
            .saturating_mul(stride)
            .saturating_add(c.cache_frames as u64 * stride * point.compute_nodes as u64);
        if total > MEMORY_BUDGET_BYTES {
            out.push(Problem::new(
                "workload",
                format!(
                    "needs {} MiB of simulated memory, over the {} MiB budget",
                    total >> 20,
                    MEMORY_BUDGET_BYTES >> 20
                ),
            ));
        }
        if !out.is_empty() {
            return Err(out);
        }
        let shape = point.cluster(0, 0);
        let layout = Layout::new(&shape, &c, prealloc, extra.div_ceil(mns) + 2);
        let cluster = Cluster { region_size_bytes: layout.region_sizes(&shape.kinds), kinds: shape.kinds };
        let loaded: Vec<(u64, u64)> = {
            let mut keys: Vec<(u64, u64)> = (0..w.bulk_load()).map(|i| (w.key(i), load_value(i))).collect();
            keys.sort_unstable();
            keys
        };
        let bulk = build(&loaded, per_node, |i| PageId::of(layout.gcl(i)));
        let oracle = point.check.full().then(|| Arc::new(Oracle::new(c.gcl_size_bytes)));
        if let Some(o) = &oracle {
            // The oracle knows every word the bulk load wrote, as if written at time 0.
            o.commit(layout.gcl(0), &[(0, PageId::of(layout.gcl(bulk.root)).0)], Nanos::ZERO);
            for (i, image) in &bulk.nodes {
                let words: Vec<(u32, u64)> =
                    image.encode().into_iter().enumerate().map(|(k, v)| (k as u32, v)).collect();
                o.commit(layout.gcl(*i), &words, Nanos::ZERO);
            }
        }
        Ok(BlinkPlan {
            workload: w,
            config: c,
            tree,
            layout,
            cluster,
            threads: run.threads_per_node,
            ops_per_thread: run.ops_per_thread,
            seed: point.seed,
            check: point.check,
            quiesce: point.quiesce,
            bulk: Arc::new(bulk),
            loaded,
            oracle,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    fn meta(&self) -> PageId {
        PageId::of(self.layout.gcl(0))
    }

    fn totals(reports: &[NodeReport]) -> Stats {
        let mut total = Stats::default();
        for r in reports {
            if let Ok(s) = serde_json::from_value::<Report>(r.extra.clone()) {
                total.merge(&s.tree);
            }
        }
        total
    }

    /// SELCC's own counters of every compute node (latch operations, warm-up included).
    fn latch_stats(reports: &[NodeReport]) -> Vec<crate::selcc::stats::Stats> {
        reports
            .iter()
            .filter_map(|r| serde_json::from_value::<Report>(r.extra.clone()).ok())
            .map(|r| r.latch)
            .collect()
    }

    /// The bulk load as writes by one extra client at time 0.
    fn load_history(&self) -> Vec<LoggedOp> {
        let loader = self.cluster.compute_nodes().len() as u32 * self.threads;
        load_history(&self.loaded, loader)
    }
}

impl Plan for BlinkPlan {
    type State = NodeState;

    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    fn setup<N: Nic>(&self, nic: &N) {
        let me = nic.node();
        if self.cluster.kinds[me.index()] != NodeKind::Memory {
            return;
        }
        setup_memory_node(&self.layout, me, nic.local());
        let meta = self.layout.gcl(0);
        if meta.node == me {
            nic.local().store(Layout::data(meta).offset_bytes, PageId::of(self.layout.gcl(self.bulk.root)).0);
        }
        for (i, image) in &self.bulk.nodes {
            let g = self.layout.gcl(*i);
            if g.node == me {
                nic.local().write_words(Layout::data(g).offset_bytes, &image.encode());
            }
        }
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun<NodeState> {
        let me = nic.node();
        if self.cluster.kinds[me.index()] == NodeKind::Memory {
            let history = if self.check.histories() && me == self.layout.memory_nodes[0] {
                self.load_history()
            } else {
                Vec::new()
            };
            return NodeRun {
                collect: Box::new(move || NodeReport { history, ..NodeReport::default() }),
                ..NodeRun::empty()
            };
        }
        let compute = self.cluster.compute_nodes();
        let cn = compute.iter().position(|n| *n == me).unwrap_or(0);
        let node = Node::new(nic, self.config.clone(), self.layout.clone(), self.oracle.clone());
        *node.workers_running.lock().unwrap_or_else(|e| e.into_inner()) = self.threads;
        let root = PageId::of(self.layout.gcl(self.bulk.root));
        let shared = Arc::new(Shared::new(self.tree.clone(), self.meta(), root));
        let log = self.check.histories().then(OpLog::new);
        let mains: Vec<Task> = (0..self.threads)
            .map(|t| {
                let rng = rng_for_thread(self.seed, me.0, t);
                let stream = YcsbStream::new(
                    &self.workload,
                    cn as u16,
                    compute.len() as u16,
                    t,
                    self.threads,
                    self.ops_per_thread,
                    rng,
                );
                let tree = Tree::new(SelccPages::new(node.clone(), t), shared.clone());
                let logger =
                    log.as_ref().map(|l| KvLogger { log: l.clone(), client: cn as u32 * self.threads + t });
                let task: Task = Box::pin(run_client(
                    tree,
                    t,
                    stream,
                    logger,
                    self.quiesce,
                    Gate::new(self.workload.window),
                ));
                task
            })
            .collect();
        let watched = shared.clone();
        let state = node.state.clone();
        NodeRun {
            mains,
            daemons: ops::daemons(&node),
            progress: Some(Arc::new(move || watched.ops_done.load(std::sync::atomic::Ordering::Relaxed))),
            state: Some(state),
            collect: Box::new(move || {
                let stats = shared.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let error = shared.errors.first().or_else(|| node.first_error());
                let report = Report { tree: stats, latch: node.stats() };
                NodeReport {
                    extra: serde_json::to_value(&report).unwrap_or(Value::Null),
                    history: log.map(|l| l.snapshot()).unwrap_or_default(),
                    error: report_error(error),
                    ..NodeReport::default()
                }
            }),
        }
    }

    fn metrics(&self, reports: &[NodeReport], elapsed: Nanos) -> BTreeMap<String, f64> {
        let stats = Self::totals(reports);
        let mut m = tree_metrics(&stats, elapsed, Gate::new(self.workload.window));
        // SELCC's view, per latch operation (warm-up included): how the tree's accesses hit.
        let latch = crate::selcc::metrics::metrics(&Self::latch_stats(reports), &self.config, 0, None);
        for name in [
            "cache_hit_ratio",
            "invalidation_ratio",
            "messages_per_op",
            "retries_per_op",
            "rt_per_op",
            "evictions_per_op",
            "rt_evict_per_op",
            "flushed_bytes_per_op",
            "latency_us_avg",
        ] {
            if let Some(v) = latch.get(name) {
                m.insert(format!("latch_{name}"), *v);
            }
        }
        // Which §3.2–3.5 path the latch operations took, and their round trips per path.
        for (name, v) in &latch {
            if name.starts_with("share_") || (name.starts_with("rt_") && !name.ends_with("_max")) {
                m.insert(format!("latch_{name}"), *v);
            }
        }
        m
    }

    fn ops(&self, reports: &[NodeReport]) -> u64 {
        Self::totals(reports).total().ops
    }

    fn invariants(&self, states: Vec<Option<Arc<NodeState>>>) -> Option<Invariants> {
        let oracle = self.oracle.clone()?;
        let states: Vec<Arc<NodeState>> = states.into_iter().flatten().collect();
        Some(crate::selcc::def::invariants(&self.layout, states, oracle, self.layout.prealloc_gcl_count))
    }

    fn verify(&self, reports: &[NodeReport], memory: Option<Memory>) -> Result<(), Violation> {
        if let Some(e) = crate::harness::first_error(reports) {
            return Err(Violation::new("no protocol error", e.to_string()));
        }
        if let Some(v) = self.oracle.as_ref().and_then(|o| o.violations().first().cloned()) {
            return Err(Violation::new(v.invariant, v.to_string()));
        }
        check_tree_scans(reports, |r| {
            serde_json::from_value::<Report>(r.extra.clone()).map(|s| s.tree.scans).unwrap_or_default()
        })?;
        let Some(memory) = memory else { return Ok(()) };
        if !self.quiesce {
            return Ok(());
        }
        let page_words = (self.config.gcl_size_bytes / 8) as usize;
        debug_assert!(capacity(page_words) >= 3);
        let contents =
            check_tree(memory, self.meta(), page_words).map_err(|m| Violation::new("tree structure", m))?;
        for (k, _) in &self.loaded {
            if !contents.contains_key(k) {
                return Err(Violation::new("no lost key", format!("bulk-loaded key {k} is in no leaf")));
            }
        }
        crate::harness::check_no_lost_key(reports, |key| contents.contains_key(&key))
    }
}

/// The tree's `protocol_options.tree` (removed from `options`) over [`TreeConfig`]'s defaults.
pub fn tree_options(options: &mut serde_json::Map<String, Value>) -> Result<TreeConfig, Vec<Problem>> {
    Ok(match options.remove("tree") {
        None => TreeConfig::default(),
        Some(v) => {
            let mut base = serde_json::to_value(TreeConfig::default()).unwrap_or(Value::Null);
            if let (Value::Object(b), Value::Object(o)) = (&mut base, &v) {
                b.extend(o.clone());
            } else {
                return Err(vec![Problem::new("protocol_options.tree", "must be an object")]);
            }
            parse_typed(&base, "protocol_options.tree").map_err(|p| vec![p])?
        }
    })
}

/// The tree's metrics over its merged counters (any page store).
pub fn tree_metrics(stats: &Stats, elapsed: Nanos, gate: Gate) -> BTreeMap<String, f64> {
    let span_s = gate.span_s(elapsed.saturating_sub(Nanos(stats.first_op_start_ns.unwrap_or(0))).0);
    let mut m = BTreeMap::new();
    if gate.is_timed() {
        m.insert("window_threads_out_of_ops".into(), stats.window_short_threads as f64);
    }
    let total = stats.total();
    let mut all: Vec<u64> = stats.latencies.concat();
    per_kind(&mut m, "", &total, &mut all);
    m.insert("throughput_mops".into(), total.ops as f64 / span_s.max(1e-12) / 1e6);
    m.insert("splits".into(), stats.splits_all as f64);
    m.insert("root_reads".into(), stats.root_reads as f64);
    for (i, name) in KINDS.iter().enumerate() {
        let k = &stats.kinds[i];
        if k.ops > 0 {
            let mut lat = stats.latencies[i].clone();
            per_kind(&mut m, &format!("{name}_"), k, &mut lat);
        }
    }
    if stats.kinds[0].ops > 0 {
        m.insert("lookup_found_ratio".into(), stats.kinds[0].found as f64 / stats.kinds[0].ops as f64);
    }
    m
}

/// The bulk load as writes by client `loader` at time 0 (for the history checkers).
pub fn load_history(loaded: &[(u64, u64)], loader: u32) -> Vec<LoggedOp> {
    loaded
        .iter()
        .map(|(k, v)| LoggedOp {
            client: loader,
            key: *k,
            write: Some(*v),
            seen: Some(0),
            invoke_ns: 0,
            return_ns: Some(0),
        })
        .collect()
}

/// Every report's scans (`scans_of` parses them) against every logged write, on the reference
/// clock: no scan skipped a key live throughout it. The tree has no deletes.
pub fn check_tree_scans(
    reports: &[NodeReport],
    scans_of: impl Fn(&NodeReport) -> Vec<ScanRecord>,
) -> Result<(), Violation> {
    check_report_scans(reports, scans_of, |_| true, [])
        .map_err(|m| Violation::new("no scan skips a live key", m))
}

fn per_kind(m: &mut BTreeMap<String, f64>, prefix: &str, s: &KindStats, latencies: &mut [u64]) {
    let per = |x: u64| x as f64 / s.ops.max(1) as f64;
    m.insert(format!("{prefix}ops"), s.ops as f64);
    m.insert(format!("{prefix}nodes_per_op"), per(s.nodes));
    m.insert(format!("{prefix}move_rights_per_op"), per(s.move_rights));
    m.insert(format!("{prefix}latency_ns_avg"), per(s.latency_ns_total));
    m.insert(format!("{prefix}latency_ns_p50"), percentile(latencies, 50.0));
    m.insert(format!("{prefix}latency_ns_p99"), percentile(latencies, 99.0));
    m.insert(format!("{prefix}latency_ns_p999"), percentile(latencies, 99.9));
}
