//! DEX's definition (`protocol: "dex"`): the partitioned, cached B+-tree on YCSB, on any
//! backend.
//!
//! `workload` is [`YcsbWorkload`] (mix, distribution, keyspace, bulk load, warm-up, run shape;
//! `cache_frames` or `cache_ratio` sizes each compute server's cache, the ratio relative to the
//! raw data, 16 bytes per loaded key, as the paper's "256 MB ≈ 8 %"). `key_order` is ignored:
//! keys are routed into the partitions ([`super::partition`]). `protocol_options` is any subset
//! of [`Config`] over a preset (`default` = `dex`; `eager`: every page admitted):
//!
//! | field | default | meaning |
//! |---|---|---|
//! | `leaf_admission` | 0.1 | P_A for leaves once the cache has filled |
//! | `cooling_fraction`, `bucket_slots` | 0.1, 6 | cooling map size and FIFO slots per bucket |
//! | `cooling` | `map` | `map` (a lock per bucket), `single_lock_map`, `fifo` (one queue, one lock) |
//! | `samples_per_round`, `probe_buckets` | 2, 8 | pages sampled per cooling round; buckets probed for a victim |
//! | `leaf_split_at`, `internal_split_at` | capacity | split thresholds (a fuzzing knob) |
//! | `bulk_fill` | 0.5 | fill of bulk-loaded nodes |
//! | `subtree_level` | 3 | M: subtrees rooted at level M live on one memory server |
//! | `cpu.{node_ns, install_ns, backoff_ns}` | 40, 400, 200 | per cached node searched; per page installed; per restart |
//! | `cpu.cooling_lock_ns` | 100 | a local latch's hand-off from a core on the same socket: a cooling-lock section, a leaf write latch (`tree/locks.rs`) |
//! | `cpu.remote_line_ns`, `cpu.sockets` | 200, 2 | the hand-off from the other socket; sockets the threads alternate over |
//! | `cpu.leaf_latch` | `optimistic` | cached leaves' version latches: `optimistic` (the artifact's OLC: a held latch or an overlapped read restarts the operation), `queued` (writers queue, readers wait), `off` |
//! | `cpu.{pause_ns, yield_ns}` | 45, 300 | a restart's `_mm_pause` and, from the third restart of an operation, `sched_yield()` |
//! | `repartition.{at_ns, from, to, poll_ns}` | 0 (off), 0, none, 5000 | Fig. 10: at `at_ns` server `from` hands the upper half of its range to the last compute server, or to server `to` if given (`tree/repartition.rs`) |
//! | `offload.policy` | `cost` | `cost` (§6.1), `always` (Offload-only), `never` |
//! | `offload.{window, exploration, sample_rate, coefficient}` | 50, 0.01, 0.01, 1.2 | the cost model ([ART]) |
//! | `offload.ms_threads` | 4 | offload-serving threads per memory server |
//! | `offload.{ms_rpc_ns, ms_node_ns}` | 200, 400 | memory-side CPU per request and per node visited |
//!
//! Metrics (per measured operation; warm-up excluded): `throughput_mops` (measured operations
//! over the span from the first measured start to the run's end), `thread_mops` (the
//! artifact's: each thread's measured operations over its own measured span, summed),
//! `warmup_skew_us` (how much later the last thread began measuring than the first), `ops`,
//! `reads_per_op`, `writes_per_op`, `atomics_per_op`, `two_sided_per_op` (offload RPCs),
//! `bytes_per_op`, `retries_per_op`, `lock_wait_ns_per_op` (waiting for cooling locks and leaf latches),
//! `inner_fetches_per_op`, `inner_evictions_per_op`, `offloads_level1_per_op` (offloads under
//! a missed level-1 node),
//! `cache_hit_ratio` (node visits served by the cache),
//! `splits`, `latency_ns_{avg,p50,p99}`, and the same per operation type with the prefix
//! `lookup_`, `update_`, `insert_`, `scan_`, `delete_`. With repartitioning: `repartition_us`
//! (switch to hand-over), `repartition_drain_us`, `repartition_flushed_pages`,
//! `repartition_start_us`, `scaleout_thread_mops` (the scale-out server's thread rates summed);
//! with a receiver that owns a partition already, `receiver_thread_mops` instead,
//! `repartition_receive_us` (hand-off seen to routing switched), `repartition_received_at_us`
//! and `repartition_receiver_flushed_pages`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::bench::{run_client, Redraw, Routing};
use super::bulk::{build, frames_needed, BulkTree};
use super::cache::Cache;
use super::check::{check_cache, check_leaf_ownership, check_moved_out, check_scans_complete, ScanRecord};
use super::config::{Config, Cooling, VERSIONS};
use super::offload::serve;
use super::partition::{Partitions, MAX_PARTITIONS};
use super::tree::{compute_region_bytes, Client, Shared};
use crate::common::metrics::percentile;
use crate::common::shape;
use crate::harness::{
    merge_options, parse_typed, report_error, CheckLevel, Invariants, LoggedOp, Memory, NodeReport, NodeRun,
    Plan, PointSpec, Problem, Protocol, Violation,
};
use crate::nic::{Cluster, Nanos, Nic, NodeId, NodeKind, Task};
use crate::sherman::bench::KvLogger;
use crate::sherman::check::{check_locks_free, check_tree};
use crate::sherman::layout::Layout;
use crate::sherman::stats::{OpStats, Stats, KINDS};
use crate::workload::rng_for_thread;
use crate::workload::window::Gate;
use crate::workload::ycsb::{Distribution, KeyOrder, YcsbStream, YcsbWorkload, ZipfItems, YCSB_ITEM_COUNT};
use crate::workload::zipf::Zipf;

/// Where a node's report keeps DEX's scan log (`check::ScanRecord`). Not `scans`: that is a
/// field of the Sherman `Stats` the report also carries, of another record type, and a report
/// that failed to parse as `Stats` lost the node's metrics (every checked run with scans
/// reported 0 operations until session 29).
const SCAN_LOG: &str = "dex_scans";

#[derive(Clone, Copy)]
pub struct Dex;

impl Protocol for Dex {
    type Plan = DexPlan;

    fn names(&self) -> &'static [&'static str] {
        &["dex"]
    }

    fn about(&self) -> &'static str {
        "DEX: a partitioned, path-aware cached B+-tree on disaggregated memory (PVLDB'24), on YCSB"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<DexPlan, Vec<Problem>> {
        DexPlan::new(point)
    }
}

const RESERVED: &[(&str, &str)] = &[("mutant", "dmsim fuzz --mutant")];

pub struct DexPlan {
    workload: YcsbWorkload,
    config: Config,
    layout: Layout,
    parts: Partitions,
    cluster: Cluster,
    threads: u32,
    ops_per_thread: u64,
    cache_frames: u32,
    seed: u64,
    check: CheckLevel,
    quiesce: bool,
    tree: Arc<BulkTree>,
}

fn problem_at(prefix: &str, text: &str) -> Problem {
    match text.split_once(": ") {
        Some((field, reason)) if !field.contains(' ') => Problem::new(format!("{prefix}.{field}"), reason),
        _ => Problem::new(prefix, text),
    }
}

impl DexPlan {
    pub fn new(point: &PointSpec) -> Result<DexPlan, Vec<Problem>> {
        let mut w: YcsbWorkload = parse_typed(&point.workload, "workload").map_err(|p| vec![p])?;
        // Stream keys are indices + 1; the partitioning names the real keys.
        w.key_order = KeyOrder::Ordered;
        let presets = [("default", Config::dex()), ("dex", Config::dex()), ("eager", Config::eager())];
        let mut config: Config =
            merge_options(&point.protocol_options, "protocol_options", &presets, RESERVED)
                .map_err(|p| vec![p])?;
        let mut out = Vec::new();
        w.check(&mut out);
        out.extend(config.validate().iter().map(|p| problem_at("protocol_options", p)));
        point.no_symmetric("DEX", &mut out);
        if point.memory_nodes == 0 {
            out.push(Problem::new("cluster.memory_nodes", "must be at least 1"));
        }
        if point.compute_nodes == 0 || point.compute_nodes > MAX_PARTITIONS {
            out.push(Problem::new("cluster.compute_nodes", format!("must be in 1..={MAX_PARTITIONS}")));
        }
        config.mutant = super::mutants::named(&point.mutant)
            .ok_or_else(|| vec![Problem::new("mutant", format!("DEX has no mutant {:?}", point.mutant))])?;
        if !out.is_empty() {
            return Err(out);
        }
        // A repartitioning run keeps the last compute server for the scale-out (Fig. 10),
        // unless the range goes to a server that owns a partition already.
        let parts = if config.repartition.enabled() {
            let to = config.repartition.to;
            let count = match to {
                Some(_) => point.compute_nodes,
                None => point.compute_nodes.saturating_sub(1).max(1),
            };
            if point.compute_nodes < 2 {
                out.push(Problem::new(
                    "cluster.compute_nodes",
                    "repartitioning needs at least 2 compute servers (the old owner and the receiver)",
                ));
            }
            if config.repartition.from >= count {
                out.push(Problem::new(
                    "protocol_options.repartition.from",
                    format!("must name one of the {count} partitioned compute servers (0..{count})"),
                ));
            }
            if let Some(t) = to {
                if t >= count || t == config.repartition.from {
                    out.push(Problem::new(
                        "protocol_options.repartition.to",
                        format!("must name another of the {count} compute servers than `from` (or be absent: a scale-out server)"),
                    ));
                }
            }
            if w.keyspace < 2 * count as u64 {
                out.push(Problem::new("workload.keyspace", "too small to split a partition"));
            }
            if !out.is_empty() {
                return Err(out);
            }
            Partitions::with_move(count, config.repartition.from, to, w.keyspace)
        } else {
            Partitions::fixed(point.compute_nodes)
        };
        if !out.is_empty() {
            return Err(out);
        }
        let mut keys: Vec<u64> = (0..w.bulk_load()).map(|i| parts.load_key(i)).collect();
        keys.sort_unstable();
        let data_units = (w.bulk_load() * 16).div_ceil(1024).max(1);
        let run = shape::resolve(&w.shape_fields(), point.compute_nodes, data_units, true, &mut out);
        let cache_frames = run.cache_frames.unwrap_or(0);
        let mns = point.memory_nodes as usize;
        let per_mn = frames_needed(&config, parts, &keys, mns);
        let height = {
            let mut n = per_mn.iter().sum::<u64>();
            let mut h = 1u32;
            while n > 1 {
                n /= 2;
                h += 1;
            }
            h.min(16)
        };
        // Each thread keeps up to two free pages plus a few in flight; the cached paths need
        // room too, or every frame could end up pinned on some path.
        let min_frames = 4 * run.threads_per_node + 2 * height;
        if cache_frames < min_frames {
            out.push(Problem::new(
                "workload.cache_frames",
                format!(
                    "{cache_frames} cache frames per compute server is too few for {} threads: give at least {min_frames}",
                    run.threads_per_node
                ),
            ));
        }
        if !out.is_empty() {
            return Err(out);
        }
        let p = w.proportions();
        let store_share = p.update + p.insert + p.delete;
        let per_thread = run.ops_per_thread.saturating_add(w.warmup_ops_per_thread);
        let stores = per_thread as f64 * run.threads_per_node as f64 * store_share;
        let half_leaf = (config.leaf_split() / 2).max(1) as f64;
        let splits = (2.0 * stores / half_leaf).ceil();
        if splits.is_nan() || splits >= 1e9 {
            return Err(vec![Problem::new(
                "workload",
                format!(
                    "{} operations per thread x {} threads would need about {splits:.0} split nodes per compute node (at most 10^9)",
                    per_thread, run.threads_per_node
                ),
            )]);
        }
        let per_cn = splits as u64 + 64;
        let bulk_frames = per_mn.iter().copied().max().unwrap_or(1);
        // New nodes go on the splitting node's memory server: a slab that fits all of them.
        let slab_frames = per_cn + 4;
        let frames = bulk_frames + point.compute_nodes as u64 * slab_frames;
        let layout = Layout {
            versions: VERSIONS,
            memory_nodes: (0..point.memory_nodes).map(NodeId).collect(),
            bulk_frames,
            slab_frames,
            compute_nodes: point.compute_nodes,
            locks: (frames + 2).min(u32::MAX as u64) as u32,
            on_chip_locks: false,
            lock_version: false,
            items: None,
        };
        let tree = Arc::new(build(&config, parts, &layout, &keys));
        let cluster = point.cluster(layout.memory_region_bytes(), compute_region_bytes(run.threads_per_node));
        Ok(DexPlan {
            workload: w,
            config,
            layout,
            parts,
            cluster,
            threads: run.threads_per_node,
            ops_per_thread: run.ops_per_thread,
            cache_frames,
            seed: point.seed,
            check: point.check,
            quiesce: point.quiesce,
            tree,
        })
    }

    fn totals(reports: &[NodeReport]) -> Stats {
        let mut total = Stats::new();
        for r in reports {
            if let Ok(s) = serde_json::from_value::<Stats>(r.extra.clone()) {
                if !s.kinds.is_empty() {
                    total.merge(&s);
                }
            }
        }
        total
    }

    /// The bulk load as writes by one extra client at time 0, so histories start from it.
    fn load_history(&self) -> Vec<LoggedOp> {
        let loader = self.cluster.compute_nodes().len() as u32 * self.threads;
        let mut out = Vec::new();
        for (_, node) in &self.tree.nodes {
            for s in node.slots.iter().filter(|s| s.value != 0) {
                out.push(LoggedOp {
                    client: loader,
                    key: s.key,
                    write: Some(s.value),
                    seen: Some(0),
                    invoke_ns: 0,
                    return_ns: Some(0),
                });
            }
        }
        out
    }
}

impl Plan for DexPlan {
    type State = Shared;

    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    fn setup<N: Nic>(&self, nic: &N) {
        let me = nic.node();
        if self.cluster.kinds[me.index()] != NodeKind::Memory {
            return;
        }
        for (addr, node) in &self.tree.nodes {
            if addr.node() == me {
                nic.local().write_words(addr.offset(), &node.encode(VERSIONS));
            }
        }
        if self.layout.root_ptr().node == me {
            nic.local().store(self.layout.root_ptr().offset_bytes, self.tree.root.0);
        }
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun<Shared> {
        let me = nic.node();
        if self.cluster.kinds[me.index()] == NodeKind::Memory {
            let history = if self.check.histories() && me == self.layout.memory_nodes[0] {
                self.load_history()
            } else {
                Vec::new()
            };
            let daemons: Vec<Task> = (0..self.config.offload.ms_threads)
                .map(|w| {
                    let server: Task = Box::pin(serve(
                        nic.qp(w as u16),
                        self.config.offload.clone(),
                        self.config.leaf_split(),
                    ));
                    server
                })
                .collect();
            return NodeRun {
                daemons,
                collect: Box::new(move || NodeReport { history, ..NodeReport::default() }),
                ..NodeRun::empty()
            };
        }
        let compute = self.cluster.compute_nodes();
        let cn = compute.iter().position(|n| *n == me).unwrap_or(0) as u16;
        let cache = Cache::new(
            self.cache_frames as usize,
            self.config.cooling_fraction,
            self.config.bucket_slots as usize,
            self.config.cooling == Cooling::Fifo,
            self.tree.root,
        );
        let shared = Arc::new(Shared::new(
            self.config.clone(),
            self.layout.clone(),
            self.parts,
            cn,
            cache,
            self.threads,
        ));
        let log = self.check.histories().then(crate::harness::OpLog::new);
        let routing = Routing {
            keyspace: self.workload.keyspace,
            bulk_load: self.workload.bulk_load(),
            gate: Gate::new(self.workload.window),
        };
        let mains: Vec<Task> = (0..self.threads)
            .map(|t| {
                let stream = YcsbStream::new(
                    &self.workload,
                    cn,
                    compute.len() as u16,
                    t,
                    self.threads,
                    self.ops_per_thread,
                    rng_for_thread(self.seed, me.0, t),
                );
                let cache_rng = rng_for_thread(self.seed ^ 0xdec0_ded0_cafe, me.0, t);
                let redraw = (self.workload.distribution() == Distribution::Zipfian).then(|| Redraw {
                    zipf: Zipf::new(
                        match self.workload.zipf_items {
                            ZipfItems::Keyspace => self.workload.keyspace.max(1),
                            ZipfItems::Ycsb => YCSB_ITEM_COUNT,
                        },
                        self.workload.zipf_theta,
                    ),
                    rng: rng_for_thread(self.seed ^ 0x2edd_4a3f_91c0_7b15, me.0, t),
                });
                let client = Client::new(nic.qp(t as u16), shared.clone(), t, cache_rng);
                let logger =
                    log.as_ref().map(|l| KvLogger { log: l.clone(), client: cn as u32 * self.threads + t });
                let task: Task =
                    Box::pin(run_client(client, t, stream, routing, redraw, logger, self.quiesce));
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
                let counters = shared.counters.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let mut extra = serde_json::to_value(&stats).unwrap_or(serde_json::Value::Null);
                let scans = std::mem::take(&mut *shared.scans.lock().unwrap_or_else(|e| e.into_inner()));
                if let (false, Some(o)) = (scans.is_empty(), extra.as_object_mut()) {
                    o.insert(SCAN_LOG.into(), serde_json::to_value(&scans).unwrap_or_default());
                }
                NodeReport {
                    counters,
                    extra,
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
        // The artifact's definition: every thread's own rate, summed (no straggler or warm-up skew).
        m.insert("thread_mops".into(), stats.thread_rate_sum * 1e3);
        let skew = stats.first_op_start_max_ns.saturating_sub(stats.first_op_start_ns.unwrap_or(0));
        m.insert("warmup_skew_us".into(), skew as f64 / 1e3);
        let visits = total.cache_hits + total.cache_misses;
        m.insert("cache_hit_ratio".into(), total.cache_hits as f64 / visits.max(1) as f64);
        m.insert("splits".into(), total.splits as f64);
        m.insert("cache_frames".into(), self.cache_frames as f64);
        for (i, name) in KINDS.iter().enumerate() {
            let k = &stats.kinds[i];
            if k.ops > 0 {
                let mut lat = stats.latencies[i].clone();
                per_op_metrics(&mut m, &format!("{name}_"), k, &mut lat);
            }
        }
        let lookups = &stats.kinds[0];
        if lookups.ops > 0 {
            m.insert("lookup_found_ratio".into(), lookups.found as f64 / lookups.ops as f64);
        }
        // Repartitioning (Fig. 10): the mover's and the scale-out server's counters.
        for r in reports {
            for (name, v) in &r.counters {
                if name.starts_with("repartition_") || name.ends_with("_thread_mops") {
                    *m.entry(name.clone()).or_insert(0.0) += v;
                }
            }
        }
        m
    }

    fn ops(&self, reports: &[NodeReport]) -> u64 {
        Self::totals(reports).total().ops
    }

    fn invariants(&self, states: Vec<Option<Arc<Shared>>>) -> Option<Invariants> {
        if !self.check.full() {
            return None;
        }
        let states: Vec<Arc<Shared>> = states.into_iter().flatten().collect();
        // The partition maps each server's cache was last checked against (`None`: never
        // checked): a server whose cache was not handed out since, under the same maps, is not
        // checked again (the checks read nothing else).
        let mut checked: Vec<Option<(Partitions, Partitions)>> = vec![None; states.len()];
        Some(Box::new(move |_memory, _| {
            for (s, last) in states.iter().zip(checked.iter_mut()) {
                if let Some(m) = s.torn.lock().unwrap_or_else(|e| e.into_inner()).clone() {
                    return Err(Violation::new(
                        "offload sees no half-done split",
                        format!("compute server {}: {m}", s.cn),
                    ));
                }
                let parts = (s.parts_for_check(), s.parts());
                let Some(cache) = s.cache_for_check(*last != Some(parts)) else { continue };
                *last = Some(parts);
                check_cache(&cache, parts.0, s.cn).map_err(|m| {
                    Violation::new("cache structure", format!("compute server {}: {m}", s.cn))
                })?;
                if s.move_state.load(std::sync::atomic::Ordering::SeqCst) == super::tree::MOVE_DONE {
                    check_moved_out(&cache, parts.1, s.cn).map_err(|m| {
                        Violation::new("repartition safety", format!("compute server {}: {m}", s.cn))
                    })?;
                }
            }
            Ok(())
        }))
    }

    fn verify(&self, reports: &[NodeReport], memory: Option<Memory>) -> Result<(), Violation> {
        if let Some(e) = crate::harness::first_error(reports) {
            return Err(Violation::new("no protocol error", e.to_string()));
        }
        let mut scans: Vec<ScanRecord> = Vec::new();
        for v in reports.iter().filter_map(|r| r.extra.get(SCAN_LOG)) {
            let mut some = serde_json::from_value::<Vec<ScanRecord>>(v.clone())
                .map_err(|e| Violation::new("scans complete", format!("unreadable scan log: {e}")))?;
            scans.append(&mut some);
        }
        if !scans.is_empty() {
            let loaded: Vec<u64> = (0..self.workload.bulk_load()).map(|i| self.parts.load_key(i)).collect();
            let history: Vec<crate::harness::LoggedOp> =
                reports.iter().flat_map(|r| r.history.iter().cloned()).collect();
            check_scans_complete(&loaded, &history, &scans)
                .map_err(|m| Violation::new("scans complete", m))?;
        }
        let Some(memory) = memory else { return Ok(()) };
        if !self.quiesce {
            // Dirty pages may still sit in the caches: memory is not the tree yet.
            return Ok(());
        }
        let contents = check_tree(&self.layout, memory).map_err(|m| Violation::new("tree structure", m))?;
        check_locks_free(&self.layout, memory).map_err(|m| Violation::new("locks free at end", m))?;
        check_leaf_ownership(&self.layout, self.parts.after_move(), memory)
            .map_err(|m| Violation::new("leaf ownership", m))?;
        crate::harness::check_no_lost_key(reports, |key| contents.contains_key(&key))
    }
}

fn per_op_metrics(m: &mut BTreeMap<String, f64>, prefix: &str, s: &OpStats, latencies: &mut [u64]) {
    let per = |x: u64| x as f64 / s.ops.max(1) as f64;
    m.insert(format!("{prefix}ops"), s.ops as f64);
    m.insert(format!("{prefix}reads_per_op"), per(s.reads));
    m.insert(format!("{prefix}writes_per_op"), per(s.writes));
    m.insert(format!("{prefix}atomics_per_op"), per(s.atomics));
    m.insert(format!("{prefix}two_sided_per_op"), per(s.two_sided));
    m.insert(format!("{prefix}bytes_per_op"), per(s.bytes));
    m.insert(format!("{prefix}retries_per_op"), per(s.retries));
    m.insert(format!("{prefix}lock_wait_ns_per_op"), per(s.lock_wait_ns));
    m.insert(format!("{prefix}inner_fetches_per_op"), per(s.inner_fetches));
    m.insert(format!("{prefix}inner_evictions_per_op"), per(s.inner_evictions));
    m.insert(format!("{prefix}offloads_level1_per_op"), per(s.offloads_level1));
    m.insert(format!("{prefix}latency_ns_avg"), per(s.latency_ns_total));
    m.insert(format!("{prefix}latency_ns_p50"), percentile(latencies, 50.0));
    m.insert(format!("{prefix}latency_ns_p99"), percentile(latencies, 99.0));
}
