//! Dolphin's definition (`protocol: "dolphin"`): the hybrid index on YCSB, on any backend.
//!
//! `workload` is [`YcsbWorkload`] (`cache_ratio`/`cache_frames` size the index cache relative
//! to the bulk-loaded tree's internal nodes). `protocol_options` is any subset of [`Config`]
//! over the preset `default` = `dolphin`:
//!
//! | field | default | meaning |
//! |---|---|---|
//! | `cache` / `cache_bytes` | true / unbounded | the compute-side index cache (bytes as the authors' `CacheEntry`) |
//! | `leaf_split_at` | 65 | a leaf splits when an insert finds no empty slot among the first this many |
//! | `bulk_fill` | 0.5 | fill of bulk-loaded leaves ("50% full") |
//! | `split_rule` | `even` | `even` (the paper: `n/2` keys stay) or `code_three_quarters` (the code's `n/4·3`) |
//! | `bulk_shape` | `fill` | `fill` (`bulk_fill`), `ascending_inserts` (leaves as sorted inserts with `split_rule` leave them) or `inserts` (as inserting the loaded keys in load order leaves them) |
//! | `cpu.{leaf_ns, node_ns, cache_ns}` | 200, 40, 100 | compute CPU per leaf image, node step, cache access |
//! | `arena_slack_bytes` | 256 KiB | spare allocation room per compute node per memory node |
//!
//! Metrics: as Sherman's (`throughput_mops`, `thread_mops`, `latency_ns_{avg,p50,p99}`, verbs per op, and the
//! same per operation type), plus the memory accounting of Table II: `ms_bytes_per_key`
//! (memory-node bytes of the bulk-loaded tree per key), `ms_bytes_per_key_authors_sizes` (the
//! same tree with its internal nodes at the authors' sizes: 2,064 B exact, 144 B special),
//! `cs_full_cache_bytes_per_key` (the index cache holding every internal node,
//! `1 + 8 + 8·records` per node, `records` the capacity of the node's ART type), `cs_cache_peak_bytes`
//! (the most one compute node's cache held in the run), `ms_allocated_bytes` (leaves and nodes
//! the run added), `leaves`, `special_nodes`, `art_nodes`, `splits`, `cache_hit_ratio`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::bench::{run_client, KvLogger};
use super::bulk::{build, inserted_leaf_sizes, Image, LeafCut};
use super::check::{check_cache, walk};
use super::config::{BulkShape, Config};
use super::layout::{Layout, LEAF_BYTES, NODE_BYTES, TOMBSTONE};
use super::tree::{Client, Shared, CLIENT_BUFFER_BYTES};
use crate::common::metrics::percentile;
use crate::common::shape;
use crate::harness::{
    merge_options, parse_typed, report_error, CheckLevel, Invariants, LoggedOp, Memory, NodeReport, NodeRun,
    OpLog, Plan, PointSpec, Problem, Protocol, Violation,
};
use crate::nic::{Cluster, Nanos, Nic, NodeKind, Task};
use crate::sherman::stats::{OpStats, Stats, KINDS};
use crate::workload::rng_for_thread;
use crate::workload::scan_check::check_report_scans;
use crate::workload::window::Gate;
use crate::workload::ycsb::{YcsbStream, YcsbWorkload};

/// The largest memory-node region a point may ask for.
const MEMORY_REGION_MAX_BYTES: u64 = 16 << 30;

#[derive(Clone, Copy)]
pub struct Dolphin;

impl Protocol for Dolphin {
    type Plan = DolphinPlan;

    fn names(&self) -> &'static [&'static str] {
        &["dolphin"]
    }

    fn about(&self) -> &'static str {
        "Dolphin: a hybrid ART/B+-tree index with MS-RNIC write synchronization (MSST'24), on YCSB"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<DolphinPlan, Vec<Problem>> {
        DolphinPlan::new(point)
    }
}

const RESERVED: &[(&str, &str)] = &[("mutant", "dmsim fuzz --mutant")];

pub struct DolphinPlan {
    workload: YcsbWorkload,
    config: Config,
    layout: Layout,
    cluster: Cluster,
    threads: u32,
    ops_per_thread: u64,
    seed: u64,
    check: CheckLevel,
    image: Arc<Image>,
}

/// A compute node's report.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct DolphinReport {
    stats: Stats,
    cache_peak_bytes: u64,
    cache_evictions: u64,
    allocated_bytes: u64,
}

fn problem_at(prefix: &str, text: &str) -> Problem {
    match text.split_once(": ") {
        Some((field, reason)) if !field.contains(' ') => Problem::new(format!("{prefix}.{field}"), reason),
        _ => Problem::new(prefix, text),
    }
}

impl DolphinPlan {
    pub fn new(point: &PointSpec) -> Result<DolphinPlan, Vec<Problem>> {
        let w: YcsbWorkload = parse_typed(&point.workload, "workload").map_err(|p| vec![p])?;
        let presets = [("default", Config::dolphin()), ("dolphin", Config::dolphin())];
        let mut config: Config =
            merge_options(&point.protocol_options, "protocol_options", &presets, RESERVED)
                .map_err(|p| vec![p])?;
        let mut out = Vec::new();
        w.check(&mut out);
        out.extend(config.validate().iter().map(|p| problem_at("protocol_options", p)));
        point.no_symmetric("Dolphin", &mut out);
        if point.memory_nodes == 0 || point.memory_nodes > 256 {
            out.push(Problem::new("cluster.memory_nodes", "must be in 1..=256 (8 bits of a slot entry)"));
        }
        if point.compute_nodes == 0 {
            out.push(Problem::new("cluster.compute_nodes", "must be at least 1"));
        }
        config.mutant = super::mutants::named(&point.mutant).ok_or_else(|| {
            vec![Problem::new("mutant", format!("Dolphin has no mutant {:?}", point.mutant))]
        })?;
        if !out.is_empty() {
            return Err(out);
        }
        let keys = w.load_keys();
        // Leaves as the loaded keys, inserted one by one, leave them: ascending, or in the
        // workload's load order (key index 0 first).
        let (split, rule) = (config.split_at(), config.split_rule);
        let cut = match config.bulk_shape {
            BulkShape::Fill => LeafCut::Every(config.bulk_leaf_keys()),
            BulkShape::AscendingInserts => LeafCut::Sizes(inserted_leaf_sizes(&keys, split, rule)),
            BulkShape::Inserts => {
                let arrivals: Vec<u64> = (0..w.bulk_load()).map(|i| w.key(i)).collect();
                LeafCut::Sizes(inserted_leaf_sizes(&arrivals, split, rule))
            }
        };
        let image = build(&keys, point.memory_nodes as usize, &cut);
        let nodes = image.exact_nodes + image.special_nodes + 1;
        let run = shape::resolve(&w.shape_fields(), point.compute_nodes, nodes, false, &mut out);
        if let Some(frames) = run.cache_frames {
            config.cache_bytes = (frames as u64 * image.internal_cache_bytes).div_ceil(nodes.max(1));
        }
        if !out.is_empty() {
            return Err(out);
        }
        let mns = point.memory_nodes as u64;
        // Room for what the run's stores can allocate: a leaf and a node each (a push-down or
        // a case-1 split), twice over for lost CAS races, spread over the memory nodes.
        let p = w.proportions();
        let share = p.update + p.insert + p.delete;
        let stores = (run
            .ops_per_thread
            .saturating_add(w.warmup_ops_per_thread)
            .saturating_mul(run.threads_per_node as u64)) as f64
            * share;
        let per_mn = (2.0 * stores * (LEAF_BYTES + NODE_BYTES) as f64 / mns as f64) as u64;
        let arena_bytes = per_mn.saturating_add(config.arena_slack_bytes);
        if arena_bytes > MEMORY_REGION_MAX_BYTES {
            return Err(vec![Problem::new(
                "workload",
                format!(
                    "the room for this run's stores needs more than {} GiB per memory node: fewer operations or threads",
                    MEMORY_REGION_MAX_BYTES >> 30
                ),
            )]);
        }
        let layout = Layout {
            memory_nodes: mns as usize,
            image_bytes: image.bytes.clone(),
            arena_bytes: arena_bytes.next_multiple_of(64),
            compute_nodes: point.compute_nodes as usize,
        };
        if layout.region_bytes() > MEMORY_REGION_MAX_BYTES {
            return Err(vec![Problem::new(
                "workload.keyspace",
                format!(
                    "the tree and the room for this run's stores need more than {} GiB per memory node: scale down",
                    MEMORY_REGION_MAX_BYTES >> 30
                ),
            )]);
        }
        let cluster = point.cluster(layout.region_bytes(), CLIENT_BUFFER_BYTES * run.threads_per_node as u64);
        Ok(DolphinPlan {
            workload: w,
            config,
            layout,
            cluster,
            threads: run.threads_per_node,
            ops_per_thread: run.ops_per_thread,
            seed: point.seed,
            check: point.check,
            image: Arc::new(image),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    fn reports(reports: &[NodeReport]) -> Vec<DolphinReport> {
        reports.iter().filter_map(|r| r.extra_as::<DolphinReport>()).collect()
    }

    fn totals(reports: &[NodeReport]) -> Stats {
        let mut total = Stats::new();
        for r in Self::reports(reports) {
            if !r.stats.kinds.is_empty() {
                total.merge(&r.stats);
            }
        }
        total
    }

    /// The bulk load as writes by one extra client at time 0, so histories start from it.
    fn load_history(&self) -> Vec<LoggedOp> {
        let loader = self.cluster.compute_nodes().len() as u32 * self.threads;
        let write = |(key, value): &(u64, u64)| LoggedOp {
            client: loader,
            key: *key,
            write: Some(*value),
            seen: None,
            invoke_ns: 0,
            return_ns: Some(0),
        };
        self.image.loaded.iter().map(write).collect()
    }
}

impl Plan for DolphinPlan {
    type State = Shared;

    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    fn setup<N: Nic>(&self, nic: &N) {
        let me = nic.node();
        if self.cluster.kinds[me.index()] != NodeKind::Memory {
            return;
        }
        for (offset, words) in self.image.chunks(me.0) {
            nic.local().write_words(offset, &words);
        }
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun<Shared> {
        let me = nic.node();
        if self.cluster.kinds[me.index()] == NodeKind::Memory {
            let history = if self.check.histories() && me.0 == 0 { self.load_history() } else { Vec::new() };
            return NodeRun {
                collect: Box::new(move || NodeReport { history, ..NodeReport::default() }),
                ..NodeRun::empty()
            };
        }
        let compute = self.cluster.compute_nodes();
        let cn = compute.iter().position(|n| *n == me).unwrap_or(0);
        let shared = Arc::new(Shared::new(self.config.clone(), self.layout.clone(), cn));
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
                let client = Client::new(nic.qp(t as u16), shared.clone(), t);
                let logger =
                    log.as_ref().map(|l| KvLogger { log: l.clone(), client: cn as u32 * self.threads + t });
                let task: Task =
                    Box::pin(run_client(client, t, stream, logger, Gate::new(self.workload.window)));
                task
            })
            .collect();
        let watched = shared.clone();
        let state = shared.clone();
        NodeRun {
            mains,
            daemons: Vec::new(),
            progress: Some(Arc::new(move || watched.ops_done.load(std::sync::atomic::Ordering::Relaxed))),
            state: Some(state),
            collect: Box::new(move || {
                let stats = shared.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let samples = stats.latencies.concat();
                let (peak, evictions) = {
                    let c = shared.cache.lock().unwrap_or_else(|e| e.into_inner());
                    (c.peak, c.evictions)
                };
                let report = DolphinReport {
                    stats,
                    cache_peak_bytes: peak,
                    cache_evictions: evictions,
                    allocated_bytes: shared.allocated.load(std::sync::atomic::Ordering::Relaxed),
                };
                NodeReport {
                    extra: serde_json::to_value(&report).unwrap_or(serde_json::Value::Null),
                    samples,
                    history: log.map(|l| l.snapshot()).unwrap_or_default(),
                    error: report_error(shared.errors.first()),
                    ..NodeReport::default()
                }
            }),
        }
    }

    fn metrics(&self, reports: &[NodeReport], elapsed: Nanos) -> BTreeMap<String, f64> {
        let stats = Self::totals(reports);
        let gate = Gate::new(self.workload.window);
        let span_s = gate.span_s(elapsed.saturating_sub(Nanos(stats.first_op_start_ns.unwrap_or(0))).0);
        let mut m = BTreeMap::new();
        if gate.is_timed() {
            m.insert("window_threads_out_of_ops".into(), stats.window_short_threads as f64);
        }
        let total = stats.total();
        let mut all: Vec<u64> = stats.latencies.concat();
        per_op_metrics(&mut m, "", &total, &mut all);
        m.insert("throughput_mops".into(), total.ops as f64 / span_s.max(1e-12) / 1e6);
        // As Sherman's and SMART's: every thread's measured ops over its own measured time,
        // summed (free of the skew between threads' warm-up ends and of the last straggler).
        m.insert("thread_mops".into(), stats.thread_rate_sum * 1e3);
        let lookups = total.cache_hits + total.cache_misses;
        m.insert("cache_hit_ratio".into(), total.cache_hits as f64 / lookups.max(1) as f64);
        m.insert("splits".into(), total.splits as f64);
        for (i, name) in KINDS.iter().enumerate() {
            let k = &stats.kinds[i];
            if k.ops > 0 {
                let mut lat = stats.latencies[i].clone();
                per_op_metrics(&mut m, &format!("{name}_"), k, &mut lat);
            }
        }
        // Memory accounting (Table II).
        let loaded = self.image.loaded.len().max(1) as f64;
        let image_bytes: u64 = self.image.bytes.iter().sum::<u64>() + NODE_BYTES;
        m.insert("ms_bytes_per_key".into(), image_bytes as f64 / loaded);
        m.insert("ms_bytes_per_key_authors_sizes".into(), self.image.authors_bytes as f64 / loaded);
        m.insert("cs_full_cache_bytes_per_key".into(), self.image.internal_cache_bytes as f64 / loaded);
        let rs = Self::reports(reports);
        m.insert(
            "cs_cache_peak_bytes".into(),
            rs.iter().map(|r| r.cache_peak_bytes).max().unwrap_or(0) as f64,
        );
        m.insert("cache_evictions".into(), rs.iter().map(|r| r.cache_evictions).sum::<u64>() as f64);
        m.insert("ms_allocated_bytes".into(), rs.iter().map(|r| r.allocated_bytes).sum::<u64>() as f64);
        m.insert("leaves".into(), self.image.leaves as f64);
        m.insert("special_nodes".into(), self.image.special_nodes as f64);
        m.insert("art_nodes".into(), self.image.exact_nodes as f64);
        let lookups = &stats.kinds[0];
        if lookups.ops > 0 {
            m.insert("lookup_found_ratio".into(), lookups.found as f64 / lookups.ops as f64);
        }
        m
    }

    fn ops(&self, reports: &[NodeReport]) -> u64 {
        Self::totals(reports).total().ops
    }

    fn invariants(&self, states: Vec<Option<Arc<Shared>>>) -> Option<Invariants> {
        // The walk visits the whole tree: after every event it is for checking runs only (a
        // measuring `dmsim run` of 100 k keys would take hours).
        if !self.check.full() {
            return None;
        }
        let caches: Vec<Arc<Shared>> = states.into_iter().flatten().collect();
        Some(Box::new(move |memory: Memory, _| {
            let contents = walk(memory, false).map_err(|m| Violation::new("tree structure", m))?;
            for s in &caches {
                let cache = s.cache.lock().unwrap_or_else(|e| e.into_inner());
                check_cache(memory, &cache, &contents.reachable)
                    .map_err(|m| Violation::new("cached path agrees after validation", m))?;
            }
            Ok(())
        }))
    }

    fn verify(&self, reports: &[NodeReport], memory: Option<Memory>) -> Result<(), Violation> {
        if let Some(e) = crate::harness::first_error(reports) {
            return Err(Violation::new("no protocol error", e.to_string()));
        }
        let scans_of =
            |r: &NodeReport| r.extra_as::<DolphinReport>().map(|d| d.stats.scans).unwrap_or_default();
        check_report_scans(reports, scans_of, |v| v != 0 && v & TOMBSTONE == 0, [])
            .map_err(|m| Violation::new("no scan skips a live key", m))?;
        let Some(memory) = memory else { return Ok(()) };
        let contents = walk(memory, true).map_err(|m| Violation::new("tree structure at quiescence", m))?;
        crate::harness::check_no_lost_key(reports, |key| contents.keys.contains_key(&key))
    }
}

fn per_op_metrics(m: &mut BTreeMap<String, f64>, prefix: &str, s: &OpStats, latencies: &mut [u64]) {
    let per = |x: u64| x as f64 / s.ops.max(1) as f64;
    m.insert(format!("{prefix}ops"), s.ops as f64);
    m.insert(format!("{prefix}reads_per_op"), per(s.reads));
    m.insert(format!("{prefix}writes_per_op"), per(s.writes));
    m.insert(format!("{prefix}atomics_per_op"), per(s.atomics));
    m.insert(format!("{prefix}two_sided_per_op"), 0.0);
    m.insert(format!("{prefix}bytes_per_op"), per(s.bytes));
    m.insert(format!("{prefix}retries_per_op"), per(s.retries));
    m.insert(format!("{prefix}latency_ns_avg"), per(s.latency_ns_total));
    m.insert(format!("{prefix}latency_ns_p50"), percentile(latencies, 50.0));
    m.insert(format!("{prefix}latency_ns_p99"), percentile(latencies, 99.0));
}
