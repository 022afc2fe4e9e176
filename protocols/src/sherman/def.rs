//! Sherman's definition (`protocol: "sherman"`): the B+-tree on YCSB, on any backend.
//!
//! `workload` is [`YcsbWorkload`] (mix, distribution, keyspace, bulk load, warm-up, run shape;
//! `cache_frames`/`cache_ratio` size the index cache in level-1 nodes, the ratio relative to
//! the bulk-loaded tree's level-1 nodes). `protocol_options` is any subset of [`Config`] over a
//! preset (`default` = `sherman`: node versions; `line`: per-64-byte-line versions):
//!
//! | field | default | meaning |
//! |---|---|---|
//! | `versions` | `"node"` | `"node"` (front/rear node + entry versions, word-aligned: 30 leaf entries), `"packed"` (the same, leaf entries packed as the authors' `Tree.h`: 53) or `"line"` |
//! | `locks` | 32768 | lock words per memory node (256 KiB device memory / 8) |
//! | `on_chip_locks` | true | locks in NIC device memory (`cluster.device_memory: true`) |
//! | `hierarchical_locks`, `max_handover` | true, 8 | local lock table with hand-over |
//! | `combine_unlock` | true | write-back and unlock in one doorbell batch |
//! | `cache_nodes` | 2²⁰ | level-1 nodes cached per compute node |
//! | `leaf_split_at`, `internal_split_at` | capacity | split thresholds (a fuzzing knob) |
//! | `bulk_fill` | 0.5 | fill of bulk-loaded nodes |
//! | `bulk_shape` | `"fill"` | `"fill"` (`bulk_fill`), `"inserts"` (every node as inserting the loaded keys in load order leaves it) or `"random_inserts"` (the same in a fixed random order: Sherman's warm-up, the DEX artifact's load) |
//! | `cpu.{node_ns, cache_ns}` | 200, 100 | compute-side CPU per node image / cache access |
//! | `partitioned` | false | P-Sherman: keys range-partitioned over compute nodes, leaf writes lock locally only |
//! | `lock_version` | false | DEX's Sherman: `[version, lock]` slots, lock-free READs bracketed by two slot READs |
//! | `skip_unshared_brackets` | false | P-Sherman with `lock_version`: internal nodes inside the partition are READ unbracketed too |
//! | `version_reads` | false | the SELCC authors' Sherman: a lock-free READ is front version, node, rear version (three READs) |
//! | `parallel_scan` | false | Sherman's `range_query`: the leaves a cached level-1 node routes the scan to, READ together (one batch per memory node, ≤ 32 leaves a round) |
//! | `leaf_cache` | absent | DiFache caches the leaves (`leaf_cache.rs`; DiFache Fig. 14 top): `{variant: "difache" \| "noac", cache_objects, index_buckets, owner_tracking, cpu}`; histories are then checked as regular registers (DiFache's memory-node consistency) |
//!
//! Metrics (all per measured operation; warm-up excluded): `throughput_mops`, `thread_mops`
//! (per-thread rates summed, the DEX artifact's throughput), `ops`,
//! `reads_per_op`, `writes_per_op`, `atomics_per_op`, `two_sided_per_op` (always 0),
//! `bytes_per_op` (payload bytes of all verbs), `retries_per_op`, `cache_hit_ratio`,
//! `handovers_per_op`, `splits`, `bulk_memory_bytes_per_key` (also as Dolphin's
//! `ms_bytes_per_key_authors_sizes`), `cs_full_cache_bytes_per_key`
//! (the index cache holding every level-1 node, 1 KB each), `latency_ns_{avg,p50,p99}`, and the same per operation type
//! with the prefix `lookup_`, `update_`, `insert_`, `scan_`, `delete_` (types that ran).
//! With `leaf_cache` (DiFache's verbs are not in the `*_per_op` verb counts above):
//! `leaf_read_hit_ratio`, `leaf_reads_per_op`, `leaf_read_misses_per_op`, `leaf_writes_per_op`,
//! `leaf_invalidations_per_op`, `leaf_remote_lookups_per_op`, `leaf_switches_on`/`_off`,
//! `leaf_evictions`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::bench::{run_client, KvLogger};
use super::bulk::{
    attach_items, build_cut, build_shaped, inserted_shape, items_per_memory_node, node_count_cut, shuffle,
    BulkTree, Shape,
};
use super::cache::IndexCache;
use super::check::{check_leaves_owned, check_locks_free, check_tree};
use super::config::{BulkShape, Config};
use super::layout::{ItemSpace, Layout, ITEM_BYTES, NODE_BYTES};
use super::leaf_cache::{self, LeafCache};
use super::node::TOMBSTONE;
use super::stats::{OpStats, Stats, KINDS};
use super::tree::{compute_region_bytes, Client, Shared};
use crate::common::memo::Memo;
use crate::common::metrics::percentile;
use crate::common::shape;
use crate::harness::{
    merge_options, parse_typed, report_error, CheckLevel, LoggedOp, Memory, NodeReport, NodeRun, Plan,
    PointSpec, Problem, Protocol, Violation,
};
use crate::nic::{Cluster, Nanos, Nic, NodeId, NodeKind, Task};
use crate::workload::partition::Partitions;
use crate::workload::rng_for_thread;
use crate::workload::scan_check::check_report_scans;
use crate::workload::window::Gate;
use crate::workload::ycsb::{key_name, KeyOrder, YcsbStream, YcsbWorkload};

/// The largest memory-node region a point may ask for (the tree, its split slabs, the locks).
const MEMORY_REGION_MAX_BYTES: u64 = 16 << 30;

#[derive(Clone, Copy)]
pub struct Sherman;

impl Protocol for Sherman {
    type Plan = ShermanPlan;

    fn names(&self) -> &'static [&'static str] {
        &["sherman"]
    }

    fn about(&self) -> &'static str {
        "Sherman: a write-optimised B+-tree on disaggregated memory (SIGMOD'22), on YCSB"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<ShermanPlan, Vec<Problem>> {
        ShermanPlan::new(point)
    }
}

const RESERVED: &[(&str, &str)] = &[("mutant", "dmsim fuzz --mutant")];

/// What an insertion shape derives from: the loaded keys (`key_name` of `0..loaded`) in load
/// order or shuffled, the partition bounds and the split thresholds.
#[derive(PartialEq)]
struct ShapeKey {
    key_order: KeyOrder,
    keyspace: u64,
    loaded: u64,
    random: bool,
    cuts: Vec<u64>,
    leaf_split: usize,
    internal_split: usize,
}
static SHAPES: Memo<ShapeKey, Shape> = Memo::new(4);

pub struct ShermanPlan {
    workload: YcsbWorkload,
    config: Config,
    layout: Layout,
    cluster: Cluster,
    threads: u32,
    ops_per_thread: u64,
    seed: u64,
    check: CheckLevel,
    tree: Arc<BulkTree>,
    /// P-Sherman's partitions (one per compute node).
    parts: Option<Arc<Partitions>>,
    /// `leaf_cache`: DiFache's layout over this point's memory.
    leaf_layout: Option<crate::difache::layout::Layout>,
}

/// "field: reason" → a problem at `prefix.field`.
fn problem_at(prefix: &str, text: &str) -> Problem {
    match text.split_once(": ") {
        Some((field, reason)) if !field.contains(' ') => Problem::new(format!("{prefix}.{field}"), reason),
        _ => Problem::new(prefix, text),
    }
}

impl ShermanPlan {
    pub fn new(point: &PointSpec) -> Result<ShermanPlan, Vec<Problem>> {
        Self::new_variant(point, false)
    }

    /// Sherman, or Marlin (`marlin`: leaves of item pointers, `protocols/src/marlin/`).
    pub fn new_variant(point: &PointSpec, marlin: bool) -> Result<ShermanPlan, Vec<Problem>> {
        let w: YcsbWorkload = parse_typed(&point.workload, "workload").map_err(|p| vec![p])?;
        let presets: &[(&str, Config)] = if marlin {
            &[
                ("default", Config::sherman()),
                ("marlin", Config::sherman()),
                ("line", Config::line_versions()),
            ]
        } else {
            &[
                ("default", Config::sherman()),
                ("sherman", Config::sherman()),
                ("line", Config::line_versions()),
            ]
        };
        let mut config: Config =
            merge_options(&point.protocol_options, "protocol_options", presets, RESERVED)
                .map_err(|p| vec![p])?;
        config.items = marlin;
        let mut out = Vec::new();
        w.check(&mut out);
        out.extend(config.validate().iter().map(|p| problem_at("protocol_options", p)));
        point.no_symmetric("Sherman", &mut out);
        if point.memory_nodes == 0 {
            out.push(Problem::new("cluster.memory_nodes", "must be at least 1"));
        }
        if point.compute_nodes == 0 {
            out.push(Problem::new("cluster.compute_nodes", "must be at least 1"));
        }
        if marlin {
            config.marlin_mutant = crate::marlin::mutants::named(&point.mutant).ok_or_else(|| {
                vec![Problem::new("mutant", format!("Marlin has no mutant {:?}", point.mutant))]
            })?;
        } else {
            config.mutant = super::mutants::named(&point.mutant).ok_or_else(|| {
                vec![Problem::new("mutant", format!("Sherman has no mutant {:?}", point.mutant))]
            })?;
        }
        if config.partitioned {
            w.check_partitioned(&mut out);
        }
        if !out.is_empty() {
            return Err(out);
        }
        let keys = w.load_keys();
        let parts =
            config.partitioned.then(|| Arc::new(Partitions::new(&keys, point.compute_nodes as usize)));
        let mut cuts = parts.as_ref().map(|p| p.bounds().to_vec()).unwrap_or_default();
        // The fill's node count reserves room for every partition's leaves, mutant or not.
        let parts_planned = cuts.len() as u64 + 1;
        if config.mutant == super::mutants::Mutant::PartitionLeafStraddles {
            cuts.clear();
        }
        // `bulk_shape: inserts` / `random_inserts`: the nodes as inserting the loaded keys one
        // by one leaves them. Looked up by what the arrivals derive from, so a plan that finds
        // the shape does not rebuild (and shuffle) the arrival order.
        let inserted = (config.bulk_shape != BulkShape::Fill).then(|| {
            let key = ShapeKey {
                key_order: w.key_order,
                keyspace: w.keyspace,
                loaded: w.bulk_load(),
                random: config.bulk_shape == BulkShape::RandomInserts,
                cuts: cuts.clone(),
                leaf_split: config.leaf_split(),
                internal_split: config.internal_split(),
            };
            SHAPES.get_or(key, |k| {
                let mut arrivals: Vec<u64> =
                    (0..k.loaded).map(|i| key_name(k.key_order, k.keyspace, i)).collect();
                if k.random {
                    shuffle(&mut arrivals);
                }
                inserted_shape(&arrivals, &k.cuts, k.leaf_split, k.internal_split)
            })
        });
        let (frames, level1) = inserted
            .as_ref()
            .map_or_else(|| node_count_cut(&config, w.bulk_load(), parts_planned), |s| s.node_count());
        let run = shape::resolve(&w.shape_fields(), point.compute_nodes, level1.max(1), false, &mut out);
        if let Some(n) = run.cache_frames {
            config.cache_nodes = n;
        }
        if !out.is_empty() {
            return Err(out);
        }
        let mns = point.memory_nodes as u64;
        // Room for every split a compute node may cause: each store of a new key can split at
        // most one leaf, a split leaf needs half a leaf of new keys, and internal splits and new
        // roots are rarer still. Twice a fair share of the cluster's stores, plus slack.
        let p = w.proportions();
        let store_share = p.update + p.insert + p.delete;
        let stores = run.ops_per_thread.saturating_add(w.warmup_ops_per_thread) as f64
            * run.threads_per_node as f64
            * store_share;
        let half_leaf = (config.leaf_split() / 2).max(1) as f64;
        let per_cn = ((2.0 * stores / half_leaf).ceil() as u64).saturating_add(64);
        let mut layout = Layout {
            versions: config.versions,
            memory_nodes: (0..point.memory_nodes).map(NodeId).collect(),
            bulk_frames: frames.div_ceil(mns),
            slab_frames: per_cn.div_ceil(mns) + 4,
            compute_nodes: point.compute_nodes,
            locks: config.locks,
            on_chip_locks: config.on_chip_locks,
            lock_version: config.lock_version,
            items: None,
        };
        let mut tree = match &inserted {
            Some(shape) => build_shaped(&config, &layout, &keys, shape),
            None => build_cut(&config, &layout, &keys, &cuts),
        };
        if marlin {
            // Every store writes one new item (never freed); all of a compute node's may land
            // on one memory node.
            let bulk_items = items_per_memory_node(&tree, &layout).into_iter().max().unwrap_or(0);
            layout.items =
                Some(ItemSpace { bulk_items, slab_items: (stores.ceil() as u64).saturating_add(64) });
        }
        if layout.checked_memory_region_bytes().is_none_or(|bytes| bytes > MEMORY_REGION_MAX_BYTES) {
            return Err(vec![Problem::new(
                "workload.ops_per_thread",
                format!(
                    "room for the splits of this many stores needs more than {} GiB of simulated memory per memory node: lower ops_per_thread, threads or the insert share",
                    MEMORY_REGION_MAX_BYTES >> 30
                ),
            )]);
        }
        if marlin {
            attach_items(&mut tree, &layout);
        }
        let tree = Arc::new(tree);
        let leaf_layout = config.leaf_cache.as_ref().map(|c| {
            let mns = point.memory_nodes;
            leaf_cache::layout(
                c,
                mns,
                point.compute_nodes,
                run.threads_per_node,
                layout.memory_region_bytes(),
            )
        });
        let buffers = compute_region_bytes(run.threads_per_node, marlin, config.parallel_scan);
        let cluster = match &leaf_layout {
            Some(l) => point
                .cluster(l.memory_region_bytes().max(layout.memory_region_bytes()), buffer_base(l) + buffers),
            None => point.cluster(layout.memory_region_bytes(), buffers),
        };
        Ok(ShermanPlan {
            workload: w,
            config,
            layout,
            cluster,
            threads: run.threads_per_node,
            ops_per_thread: run.ops_per_thread,
            seed: point.seed,
            check: point.check,
            tree,
            parts,
            leaf_layout,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
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
        if self.config.items {
            for (_, key, value) in &self.tree.items {
                out.push(LoggedOp {
                    client: loader,
                    key: *key,
                    write: Some(*value),
                    // Blind, as Marlin's own writes (no write order is built).
                    seen: None,
                    invoke_ns: 0,
                    return_ns: Some(0),
                });
            }
            return out;
        }
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

impl Plan for ShermanPlan {
    type State = ();

    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    fn setup<N: Nic>(&self, nic: &N) {
        let me = nic.node();
        if self.cluster.kinds[me.index()] != NodeKind::Memory {
            return;
        }
        let v = self.config.versions;
        for (addr, node) in &self.tree.nodes {
            if addr.node() == me {
                nic.local().write_words(addr.offset(), &node.encode(v));
            }
        }
        for (item, key, value) in &self.tree.items {
            if item.node() == me {
                nic.local().write_words(item.offset(), &[*key, *value]);
            }
        }
        if self.layout.root_ptr().node == me {
            nic.local().store(self.layout.root_ptr().offset_bytes, self.tree.root.0);
        }
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun<()> {
        let me = nic.node();
        if self.cluster.kinds[me.index()] == NodeKind::Memory {
            let history = if self.check.histories() && me == self.layout.memory_nodes[0] {
                self.load_history()
            } else {
                Vec::new()
            };
            if self.config.leaf_cache.is_some() {
                let extra = Stats { leaf_log: history, ..Stats::default() };
                let extra = serde_json::to_value(&extra).unwrap_or(serde_json::Value::Null);
                return NodeRun {
                    collect: Box::new(move || NodeReport { extra, ..NodeReport::default() }),
                    ..NodeRun::empty()
                };
            }
            return NodeRun {
                collect: Box::new(move || NodeReport { history, ..NodeReport::default() }),
                ..NodeRun::empty()
            };
        }
        let compute = self.cluster.compute_nodes();
        let cn = compute.iter().position(|n| *n == me).unwrap_or(0);
        let cache_rng = rng_for_thread(self.seed ^ 0x5ca1_ab1e, me.0, u32::MAX);
        let cache = IndexCache::new(self.config.cache_nodes as usize, cache_rng);
        let mut shared = Shared::new(self.config.clone(), self.layout.clone(), cn, cache);
        shared.partition = self.parts.as_ref().map(|p| p.range(cn));
        let leaf_cache = match (&self.leaf_layout, &self.config.leaf_cache) {
            (Some(l), Some(o)) => {
                shared.buffer_base = buffer_base(l);
                let mut config = o.difache();
                if self.config.mutant == super::mutants::Mutant::LeafCacheSkipsInvalidation {
                    config.variant = crate::difache::Variant::Nocc;
                }
                Some(crate::difache::cache::Cache::new(nic.clone(), l.clone(), config, None))
            }
            _ => None,
        };
        let shared = Arc::new(shared);
        let members = self.parts.as_ref().map(|p| Arc::new(self.workload.partition_members(p, cn)));
        let log = self.check.histories().then(crate::harness::OpLog::new);
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
                let stream = match (&self.parts, &members) {
                    (Some(p), Some(m)) => stream.partitioned(p.clone(), cn, m.clone()),
                    _ => stream,
                };
                let mut client = Client::new(nic.qp(t as u16), shared.clone(), t);
                if let Some(c) = &leaf_cache {
                    client.leaf_cache = Some(LeafCache::new(c.clone(), client.nic.clone(), t));
                }
                let logger =
                    log.as_ref().map(|l| KvLogger { log: l.clone(), client: cn as u32 * self.threads + t });
                let task: Task =
                    Box::pin(run_client(client, t, stream, logger, Gate::new(self.workload.window)));
                task
            })
            .collect();
        let watched = shared.clone();
        NodeRun {
            mains,
            daemons: Vec::new(),
            progress: Some(Arc::new(move || watched.ops_done.load(std::sync::atomic::Ordering::Relaxed))),
            state: None,
            collect: Box::new(move || {
                let mut stats = shared.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let mut leaf_error = None;
                if let Some(c) = &leaf_cache {
                    let mut s = c.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    s.event_samples = Default::default();
                    stats.leaf_cache = Some(s);
                    leaf_error = c.errors.first();
                }
                let samples = stats.latencies.concat();
                let mut history = log.map(|l| l.snapshot()).unwrap_or_default();
                if stats.leaf_cache.is_some() {
                    stats.leaf_log = std::mem::take(&mut history);
                }
                NodeReport {
                    extra: serde_json::to_value(&stats).unwrap_or(serde_json::Value::Null),
                    samples,
                    history,
                    error: report_error(shared.errors.first().or(leaf_error)),
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
        let total = stats.total();
        let mut all: Vec<u64> = stats.latencies.concat();
        per_op_metrics(&mut m, "", &total, &mut all);
        m.insert("throughput_mops".into(), total.ops as f64 / span_s.max(1e-12) / 1e6);
        // The DEX artifact's definition (`newbench.cpp`, which runs Sherman too): every
        // thread's measured ops over its own measured time, summed.
        m.insert("thread_mops".into(), stats.thread_rate_sum * 1e3);
        let lookups = total.cache_hits + total.cache_misses;
        m.insert("cache_hit_ratio".into(), total.cache_hits as f64 / lookups.max(1) as f64);
        m.insert("splits".into(), total.splits as f64);
        // Memory-node bytes per key of the bulk-loaded tree (Dolphin Table II's measure).
        let loaded = self.workload.bulk_load().max(1) as f64;
        // Marlin: also a Spear word per node and a 16-byte item per key.
        let nodes = self.tree.nodes.len() as f64;
        let bytes = if self.config.items {
            nodes * (1024.0 + 8.0) + self.tree.items.len() as f64 * ITEM_BYTES as f64
        } else {
            nodes * 1024.0
        };
        m.insert("bulk_memory_bytes_per_key".into(), bytes / loaded);
        // Under Dolphin's name too (its Table II compares the two): our nodes are the authors' 1 KB.
        m.insert("ms_bytes_per_key_authors_sizes".into(), bytes / loaded);
        // The index cache that holds every level-1 node of the loaded tree: the artifact sizes
        // its cache in pages (`IndexCache.h`: `all_page_cnt = MB / sizeof(InternalPage)`), so
        // that is level-1 nodes x 1 KB (Dolphin Table II's "cache for best performance").
        let level1 = self.tree.nodes.iter().filter(|(_, n)| n.level == 1).count() as f64;
        m.insert("cs_full_cache_bytes_per_key".into(), level1 * NODE_BYTES as f64 / loaded);
        for (i, name) in KINDS.iter().enumerate() {
            let k = &stats.kinds[i];
            if k.ops > 0 {
                let mut lat = stats.latencies[i].clone();
                per_op_metrics(&mut m, &format!("{name}_"), k, &mut lat);
            }
        }
        if let Some(d) = &stats.leaf_cache {
            leaf_cache_metrics(&mut m, d, total.ops);
        }
        if gate.is_timed() {
            m.insert("window_threads_out_of_ops".into(), stats.window_short_threads as f64);
        }
        let lookups = &stats.kinds[0];
        if lookups.ops > 0 {
            m.insert("lookup_found_ratio".into(), lookups.found as f64 / lookups.ops as f64);
        }
        m
    }

    fn ops(&self, reports: &[NodeReport]) -> u64 {
        Self::totals(reports).total().ops
    }

    fn verify(&self, reports: &[NodeReport], memory: Option<Memory>) -> Result<(), Violation> {
        if let Some(e) = crate::harness::first_error(reports) {
            return Err(Violation::new("no protocol error", e.to_string()));
        }
        check_report_scans(
            reports,
            |r| serde_json::from_value::<Stats>(r.extra.clone()).map(|s| s.scans).unwrap_or_default(),
            |v| v != 0 && v & TOMBSTONE == 0,
            [],
        )
        .map_err(|m| Violation::new("no scan skips a live key", m))?;
        let Some(memory) = memory else {
            if self.config.leaf_cache.is_some() {
                return check_leaf_cache_history(reports, |_| true);
            }
            return Ok(());
        };
        let contents = check_tree(&self.layout, memory).map_err(|m| Violation::new("tree structure", m))?;
        if let Some(p) = &self.parts {
            check_leaves_owned(&self.layout, memory, p.bounds())
                .map_err(|m| Violation::new("each leaf in one partition", m))?;
        }
        check_locks_free(&self.layout, memory).map_err(|m| Violation::new("locks free at end", m))?;
        if self.config.items {
            crate::marlin::check::check_items(&self.layout, memory)
                .map_err(|m| Violation::new("Marlin slots, items and Spear words", m))?;
        }
        if self.config.leaf_cache.is_some() {
            return check_leaf_cache_history(reports, |key| contents.contains_key(&key));
        }
        // No lost key: every key a completed write stored (or the bulk load) is in a leaf.
        crate::harness::check_no_lost_key(reports, |key| contents.contains_key(&key))
    }
}

/// `leaf_cache`: the histories at the consistency DiFache promises (memory-node consistency,
/// DiFache §3.2), [`super::check::check_regular_chained`] (two lookups on different compute
/// nodes may see a write's new and then its old value while its invalidations are in flight,
/// which the linearizability checker would reject), and every key a completed write stored is
/// `held` by a leaf at the end.
fn check_leaf_cache_history(reports: &[NodeReport], held: impl Fn(u64) -> bool) -> Result<(), Violation> {
    let logs: Vec<(crate::harness::Clock, Vec<LoggedOp>)> = reports
        .iter()
        .filter_map(|r| Some((r.clock, serde_json::from_value::<Stats>(r.extra.clone()).ok()?.leaf_log)))
        .collect();
    let log = crate::harness::on_reference_clock(logs.iter().map(|(c, l)| (*c, l.as_slice())));
    super::check::check_regular_chained(&log)?;
    match log.iter().find(|o| o.write.is_some() && o.return_ns.is_some() && !held(o.key)) {
        Some(op) => Err(Violation::new(
            "no lost key",
            format!("key {} was stored (client {}) but no leaf holds it", op.key, op.client),
        )),
        None => Ok(()),
    }
}

/// `leaf_cache`: DiFache's events per measured operation (its verbs are not in Sherman's
/// `reads_per_op` etc., which count the tree's own), and the share of leaf reads it served locally.
fn leaf_cache_metrics(m: &mut BTreeMap<String, f64>, d: &crate::difache::stats::Stats, ops: u64) {
    use crate::difache::profit::Event;
    let per = |x: u64| x as f64 / ops.max(1) as f64;
    let e = |ev: Event| d.events[ev as usize];
    let reads = e(Event::ReadHit) + e(Event::ReadMiss) + e(Event::ReadBypass);
    m.insert("leaf_read_hit_ratio".into(), e(Event::ReadHit) as f64 / reads.max(1) as f64);
    m.insert("leaf_reads_per_op".into(), per(reads));
    m.insert("leaf_read_misses_per_op".into(), per(e(Event::ReadMiss)));
    m.insert("leaf_writes_per_op".into(), per(e(Event::WriteCached) + e(Event::WriteBypass)));
    m.insert("leaf_invalidations_per_op".into(), per(d.invalidations));
    m.insert("leaf_remote_lookups_per_op".into(), per(d.remote_lookups));
    m.insert("leaf_switches_on".into(), d.switches_on as f64);
    m.insert("leaf_switches_off".into(), d.switches_off as f64);
    m.insert("leaf_evictions".into(), d.evictions as f64);
}

/// `leaf_cache`: Sherman's buffers start after DiFache's compute-node region (64-byte aligned).
fn buffer_base(l: &crate::difache::layout::Layout) -> u64 {
    l.compute_region_bytes().next_multiple_of(64)
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
    m.insert(format!("{prefix}handovers_per_op"), per(s.handovers));
    m.insert(format!("{prefix}latency_ns_avg"), per(s.latency_ns_total));
    m.insert(format!("{prefix}latency_ns_p50"), percentile(latencies, 50.0));
    m.insert(format!("{prefix}latency_ns_p99"), percentile(latencies, 99.0));
}
