//! The B-link tree of `blink/` over ScaleStore's page API (`protocol: "blink-scalestore"`):
//! ScaleStore's distributed B-tree of §5, so that an operation is a YCSB lookup or update
//! through the tree, as in the paper's figures. The tree is unchanged; its pages are
//! ScaleStore pages ([`super::pages::ScaleStorePages`]), latched S/X through the coherence
//! protocol.
//!
//! The cluster is `symmetric_nodes` nodes, each running `workload.threads_per_node` workers
//! and `handler_tasks` message handlers. The bulk-loaded tree's pages are spread round-robin
//! over the nodes' directories (page `i` of the load at node `i mod n`, the meta page first, at
//! node 0), each starting node-shared at its directory; a node allocates split pages from its
//! own pool. Without `cache_frames`/`cache_ratio` every node can cache every page (in-memory
//! configurations). With them each node caches that many frames (`cache_ratio`: a share of
//! the pre-allocated pages) and page providers evict to the directories' storage devices
//! (`cluster.ssd_bytes_per_node` must hold a node's pages): the loaded pages start in their
//! directories' memory, dirty, and the providers write the overflow to the devices first (the
//! load), so warm-up must run long enough for that. The pool's unused pages start on the
//! device (a split allocating one reads it first: [CHOICE], rare in the figures' runs).
//!
//! `protocol_options` is ScaleStore's [`Config`] plus `tree` ([`TreeConfig`]); `workload` is
//! YCSB ([`YcsbWorkload`]; no deletes). Checks: per-key linearizability of every lookup, store
//! and scanned key (the bulk load logged as writes at time 0) and the no-skipped-key scan
//! check; `Full` adds ScaleStore's invariants after every event; after a quiesced run
//! ScaleStore's metadata convergence, the tree's structure (read from each page's holders) and
//! no lost key.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::check::converged;
use super::config::Config;
use super::layout::Layout;
use super::node::Node;
use super::pages::{page_id, page_index, Pool, ScaleStorePages, PREFIX_BYTES};
use super::state::{FrameState, NodeState, Owed};
use super::stats::Stats;
use crate::blink::bench::{run_ops, KvLogger};
use crate::blink::bulk::{build, load_value, node_count, BulkTree};
use crate::blink::check::check_tree;
use crate::blink::def::{check_tree_scans, load_history, tree_metrics, tree_options};
use crate::blink::pages::PageId;
use crate::blink::stats::Stats as TreeStats;
use crate::blink::tree::{Shared, Tree, TreeConfig};
use crate::common::shape;
use crate::harness::{
    join_path, merge_options, parse_typed, report_error, CheckLevel, Invariants, Memory, NodeReport, NodeRun,
    OpLog, Plan, PointSpec, Problem, Protocol, Violation,
};
use crate::nic::{Cluster, Nanos, Nic, NodeId, RemoteAddr, Task};
use crate::workload::partition::Partitions;
use crate::workload::rng_for_thread;
use crate::workload::ycsb::{YcsbStream, YcsbWorkload};

/// The most simulated memory (all regions) one point may allocate.
const MEMORY_BUDGET_BYTES: u64 = 3 << 30;

#[derive(Clone, Copy)]
pub struct BlinkScaleStore;

impl Protocol for BlinkScaleStore {
    type Plan = BlinkScaleStorePlan;

    fn names(&self) -> &'static [&'static str] {
        &["blink-scalestore"]
    }

    fn about(&self) -> &'static str {
        "the B-link tree over ScaleStore's page API (S/X page guards through its coherence protocol), on YCSB"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<BlinkScaleStorePlan, Vec<Problem>> {
        BlinkScaleStorePlan::new(point)
    }
}

const RESERVED: &[(&str, &str)] = &[("mutant", "dmsim fuzz --mutant (ScaleStore's mutants)")];

/// A node's report: the tree's counters and ScaleStore's beneath them.
#[derive(Serialize, Deserialize)]
struct Report {
    tree: TreeStats,
    pages: Stats,
}

pub struct BlinkScaleStorePlan {
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
    /// `partitioned`: the key ranges of the nodes' workers.
    parts: Option<Arc<Partitions>>,
    loaded: Vec<(u64, u64)>,
    /// Pre-allocated pages (meta page + bulk load), spread round-robin over the nodes.
    prealloc: u64,
    /// Frames each node may cache (`u64::MAX`: every page).
    capacity: u64,
    states: Mutex<Vec<Arc<Mutex<NodeState>>>>,
    owed: Option<Owed>,
}

impl BlinkScaleStorePlan {
    pub fn new(point: &PointSpec) -> Result<BlinkScaleStorePlan, Vec<Problem>> {
        let w: YcsbWorkload = parse_typed(&point.workload, "workload").map_err(|p| vec![p])?;
        let mut options = match &point.protocol_options {
            Value::Null => serde_json::Map::new(),
            Value::Object(m) => m.clone(),
            _ => return Err(vec![Problem::new("protocol_options", "must be an object of options")]),
        };
        let mut tree = tree_options(&mut options)?;
        // The paper's "partitionable" access (§6.2): each node's workers draw only keys of its
        // own key range (the ranges split the loaded keys evenly), as P-Sherman does.
        let partitioned = match options.remove("partitioned") {
            None => false,
            Some(Value::Bool(b)) => b,
            Some(_) => {
                return Err(vec![Problem::new("protocol_options.partitioned", "must be true or false")])
            }
        };
        let presets = [("default", Config::default())];
        let mut config: Config =
            merge_options(&Value::Object(options), "protocol_options", &presets, RESERVED)
                .map_err(|p| vec![p])?;
        let mut out = Vec::new();
        for p in config.validate() {
            let (field, reason) = p.split_once(": ").unwrap_or(("", &p));
            out.push(Problem::new(join_path("protocol_options", field), reason));
        }
        config.mutant = super::mutants::named(&point.mutant).unwrap_or_else(|| {
            out.push(Problem::new("mutant", format!("scalestore has no mutant {:?}", point.mutant)));
            Default::default()
        });
        w.check(&mut out);
        if config.conflicts != super::baselines::Conflicts::Chaining {
            out.push(Problem::new(
                "protocol_options.conflicts",
                "the FIFO and busy-polling baselines run with protocol scalestore only (not built for page latches)",
            ));
        }
        if w.proportions().delete > 0.0 {
            out.push(Problem::new(
                "workload.proportions.delete",
                "the B-link tree has no delete (nodes never merge)",
            ));
        }
        if point.memory_nodes != 0 || point.compute_nodes != 0 {
            out.push(Problem::new(
                "cluster",
                "blink-scalestore runs on symmetric nodes only: set symmetric_nodes, and memory_nodes and compute_nodes to 0",
            ));
        }
        if point.symmetric_nodes == 0 || point.symmetric_nodes > 64 {
            out.push(Problem::new(
                "cluster.symmetric_nodes",
                "must be in 1..=64 (sharer bitmaps of 64 bits)",
            ));
        }
        let page_words = (config.page_bytes / 8) as usize;
        for p in tree.validate(page_words) {
            let (field, reason) = p.split_once(": ").unwrap_or(("", &p));
            let at = if field == "gcl_size_bytes" {
                Problem::new("protocol_options.page_bytes", reason)
            } else {
                Problem::new(join_path("protocol_options.tree", field), reason)
            };
            out.push(at);
        }
        if partitioned {
            w.check_partitioned(&mut out);
        }
        if !out.is_empty() {
            return Err(out);
        }
        tree.mutant = crate::blink::mutants::Mutant::None;
        let nodes = point.symmetric_nodes as u64;
        let per_node = ((tree.max_entries(page_words) as f64 * tree.bulk_fill).floor() as usize).max(2);
        let bulk_nodes = node_count(w.bulk_load(), per_node);
        let run = shape::resolve(&w.shape_fields(), point.symmetric_nodes, bulk_nodes, false, &mut out);
        // Room for every split, as `blink/def.rs` sizes it, in every node's own pool (a node
        // allocates only PIDs of its own directory, and under skew one node may split most).
        let p = w.proportions();
        let stores = run.ops_per_thread.saturating_add(w.warmup_ops_per_thread) as f64
            * run.threads_per_node as f64
            * nodes as f64
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
        let prealloc = 1 + bulk_nodes;
        let layout = Layout {
            nodes,
            homes: nodes,
            threads: run.threads_per_node as u64,
            pages_per_node: prealloc.div_ceil(nodes) + extra,
            page_bytes: config.page_bytes,
            // The invariants compare every word of shared copies.
            keys_per_page: page_words as u64,
            providers: 0,
            batch: config.eviction.batch as u64,
        };
        let mut layout = layout;
        let capacity = match (w.cache_frames, w.cache_ratio) {
            (Some(f), _) => f as u64,
            (None, Some(r)) => (r * prealloc as f64).ceil() as u64,
            (None, None) => u64::MAX,
        };
        if capacity < layout.total_pages() {
            layout.providers = config.eviction.providers as u64;
            if capacity < layout.threads * 2 + 2 {
                out.push(Problem::new(
                    "workload.cache_frames",
                    format!(
                        "{capacity} frames per node: at least 2 per worker + 2 (a worker latches a page and fetches its child)"
                    ),
                ));
            }
            if layout.ssd_bytes() > point.ssd_bytes_per_node {
                out.push(Problem::new(
                    "cluster.ssd_bytes_per_node",
                    format!(
                        "a cache smaller than the tree evicts to each directory's storage device, which must hold its {} pages: at least {} bytes (got {})",
                        layout.pages_per_node,
                        layout.ssd_bytes(),
                        point.ssd_bytes_per_node
                    ),
                ));
            }
        }
        if layout.region_bytes().saturating_mul(nodes) > MEMORY_BUDGET_BYTES {
            out.push(Problem::new(
                "workload",
                format!(
                    "needs {} MiB of simulated memory (every node has a frame per page), over the {} MiB budget",
                    layout.region_bytes().saturating_mul(nodes) >> 20,
                    MEMORY_BUDGET_BYTES >> 20
                ),
            ));
        }
        if !out.is_empty() {
            return Err(out);
        }
        let cluster = point.cluster(layout.region_bytes(), 0);
        let loaded: Vec<(u64, u64)> = {
            let mut keys: Vec<(u64, u64)> = (0..w.bulk_load()).map(|i| (w.key(i), load_value(i))).collect();
            keys.sort_unstable();
            keys
        };
        let bulk = build(&loaded, per_node, |i| page_id(&layout, Self::placed(&layout, i)));
        let parts = partitioned.then(|| {
            let keys: Vec<u64> = loaded.iter().map(|(k, _)| *k).collect();
            Arc::new(Partitions::new(&keys, nodes as usize))
        });
        Ok(BlinkScaleStorePlan {
            workload: w,
            config,
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
            prealloc,
            capacity,
            parts,
            states: Mutex::new(Vec::new()),
            owed: point.check.full().then(Owed::default),
        })
    }

    /// The global page of pre-allocated page `i`: node `i mod n`, slot `i / n`.
    fn placed(layout: &Layout, i: u64) -> u64 {
        (i % layout.nodes) * layout.pages_per_node + i / layout.nodes
    }

    fn meta(&self) -> PageId {
        page_id(&self.layout, Self::placed(&self.layout, 0))
    }

    fn parse(reports: &[NodeReport]) -> Vec<Report> {
        reports.iter().filter_map(|r| r.extra_as::<Report>()).collect()
    }

    /// Memory as the tree's structure check reads it: page `g`'s words from a node holding it
    /// Hot (copies agree), its latch word free unless some node holds it latched.
    fn tree_memory<'a>(
        &'a self,
        states: &'a [&'a NodeState],
        memory: Memory<'a>,
    ) -> impl Fn(RemoteAddr) -> u64 + 'a {
        let stride = self.layout.page_bytes + PREFIX_BYTES;
        move |a: RemoteAddr| {
            let g = a.offset_bytes / stride;
            let word = (a.offset_bytes % stride) / 8;
            let frames = states.iter().map(|s| s.frames.get(g as usize).copied().flatten());
            if word == 0 {
                // Free (0), or which node holds it how: 1 << 48 | node << 32 | latch. (A pin
                // may outlive the run: the run ends when the requester has its page, before the
                // sender's completion.)
                return frames
                    .enumerate()
                    .find_map(|(n, f)| {
                        f.filter(|f| f.latch != 0)
                            .map(|f| 1 << 48 | (n as u64) << 32 | (f.latch as u16 as u64))
                    })
                    .unwrap_or(0);
            }
            if word == 1 {
                return 0;
            }
            let holder = frames.enumerate().find(|(_, f)| f.is_some_and(|f| f.state == FrameState::Hot));
            match holder {
                Some((n, _)) => {
                    memory(RemoteAddr::new(NodeId(n as u16), self.layout.frame(g) + (word - 2) * 8))
                }
                None => 0,
            }
        }
    }
}

impl Plan for BlinkScaleStorePlan {
    type State = Mutex<NodeState>;

    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    fn setup<N: Nic>(&self, nic: &N) {
        let me = nic.node();
        let meta = Self::placed(&self.layout, 0);
        if self.layout.directory(meta) == me {
            let root = page_id(&self.layout, Self::placed(&self.layout, self.bulk.root));
            nic.local().store(self.layout.frame(meta), root.0);
        }
        for (i, image) in &self.bulk.nodes {
            let g = Self::placed(&self.layout, *i);
            if self.layout.directory(g) == me {
                nic.local().write_words(self.layout.frame(g), &image.encode());
            }
        }
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun<Mutex<NodeState>> {
        let me = nic.node();
        let nodes = self.layout.nodes;
        // This node's pre-allocated slots are 0..ceil((prealloc − me) / n); the rest is its pool.
        let used = (self.prealloc + nodes - 1 - me.0 as u64) / nodes;
        let config = self.config.clone();
        let node = Node::new(nic, self.layout.clone(), config, self.owed.clone(), self.capacity, Some(used));
        self.states.lock().unwrap_or_else(|e| e.into_inner()).push(node.state.clone());
        let pool = Arc::new(Pool::new(used, self.layout.pages_per_node));
        let root = page_id(&self.layout, Self::placed(&self.layout, self.bulk.root));
        let shared = Arc::new(Shared::new(self.tree.clone(), self.meta(), root));
        let mut log = self.check.histories().then(OpLog::new);
        if let (Some(l), 0) = (&log, me.0) {
            let loader = nodes as u32 * self.threads;
            l.lock().extend(load_history(&self.loaded, loader));
        }
        let members = self.parts.as_ref().map(|p| Arc::new(self.workload.partition_members(p, me.index())));
        let mains: Vec<Task> = (0..self.threads)
            .map(|t| {
                let rng = rng_for_thread(self.seed, me.0, t);
                let stream = YcsbStream::new(
                    &self.workload,
                    me.0,
                    nodes as u16,
                    t,
                    self.threads,
                    self.ops_per_thread,
                    rng,
                );
                let stream = match (&self.parts, &members) {
                    (Some(p), Some(m)) => stream.partitioned(p.clone(), me.index(), m.clone()),
                    _ => stream,
                };
                let pages = ScaleStorePages::new(node.clone(), t, pool.clone());
                let mut tree = Tree::new(pages, shared.clone());
                let logger =
                    log.as_ref().map(|l| KvLogger { log: l.clone(), client: me.0 as u32 * self.threads + t });
                let failed = node.clone();
                let task: Task = Box::pin(async move {
                    run_ops(&mut tree, me, t, stream, logger, move || failed.errors.is_set()).await;
                });
                task
            })
            .collect();
        let daemons = node.daemons(true);
        let watched = shared.clone();
        let log_out = log.take();
        NodeRun {
            mains,
            daemons,
            progress: Some(Arc::new(move || watched.ops_done.load(std::sync::atomic::Ordering::Relaxed))),
            state: Some(node.state.clone()),
            collect: Box::new(move || {
                let tree = shared.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let mut pages = node.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
                pages.frames_used = node.state.lock().unwrap_or_else(|e| e.into_inner()).used;
                let error = shared.errors.first().or_else(|| node.errors.first());
                NodeReport {
                    extra: serde_json::to_value(Report { tree, pages }).unwrap_or(Value::Null),
                    history: log_out.map(|l| l.snapshot()).unwrap_or_default(),
                    error: report_error(error),
                    ..NodeReport::default()
                }
            }),
        }
    }

    fn metrics(&self, reports: &[NodeReport], elapsed: Nanos) -> BTreeMap<String, f64> {
        let parsed = Self::parse(reports);
        let mut tree = TreeStats::default();
        let mut pages = Stats::default();
        for r in &parsed {
            tree.merge(&r.tree);
            pages.merge(&r.pages);
        }
        let mut m = tree_metrics(&tree, elapsed);
        if let Some(t) = m.get("throughput_mops").copied() {
            m.insert("throughput_kops".into(), t * 1e3);
        }
        // ScaleStore's view, per page latch (warm-up included): how the tree's accesses hit.
        let latches = pages.latches.max(1) as f64;
        m.insert("page_hit_ratio".into(), pages.latch_hits as f64 / latches);
        m.insert("page_messages_per_latch".into(), pages.messages as f64 / latches);
        m.insert("page_transfers_per_latch".into(), pages.page_transfers as f64 / latches);
        m.insert("exclusive_conflicts_per_latch".into(), pages.exclusive_conflicts as f64 / latches);
        m.insert("shared_conflicts_per_latch".into(), pages.shared_conflicts as f64 / latches);
        m.insert("upgrades_per_latch".into(), pages.upgrades as f64 / latches);
        m.insert("handler_requeues_per_latch".into(), pages.requeues as f64 / latches);
        if self.layout.providers > 0 {
            m.insert("ssd_reads_per_latch".into(), pages.ssd_reads as f64 / latches);
            m.insert("ssd_writes_per_latch".into(), pages.ssd_writes as f64 / latches);
            m.insert("evictions_per_latch".into(), pages.evictions as f64 / latches);
            m.insert("pulls_per_latch".into(), pages.pulls as f64 / latches);
            m.insert("frame_waits_per_latch".into(), pages.frame_waits as f64 / latches);
            // Frames in use at the end over the cluster's cache (the paper's "cache utilization").
            let capacity = (self.capacity * self.layout.nodes) as f64;
            m.insert("cache_utilization".into(), pages.frames_used as f64 / capacity);
        }
        m
    }

    fn ops(&self, reports: &[NodeReport]) -> u64 {
        Self::parse(reports).iter().map(|r| r.tree.total().ops).sum()
    }

    fn invariants(&self, states: Vec<Option<Arc<Mutex<NodeState>>>>) -> Option<Invariants> {
        if !self.check.full() {
            return None;
        }
        Some(super::check::hook(&self.layout, self.owed.as_ref()?, states))
    }

    fn verify(&self, reports: &[NodeReport], memory: Option<Memory>) -> Result<(), Violation> {
        if let Some(e) = crate::harness::first_error(reports) {
            return Err(Violation::new("no protocol error", e.to_string()));
        }
        check_tree_scans(reports, |r| r.extra_as::<Report>().map(|s| s.tree.scans).unwrap_or_default())?;
        let Some(memory) = memory else { return Ok(()) };
        let states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        if !self.quiesce || states.len() != self.layout.nodes as usize {
            return Ok(());
        }
        if let Some(owed) = &self.owed {
            let refs: Vec<&Mutex<NodeState>> = states.iter().map(|s| s.as_ref()).collect();
            converged(&self.layout, &refs, owed).map_err(|(name, m)| Violation::new(name, m))?;
        }
        if self.layout.providers > 0 {
            // Evicted pages live on the storage devices, which the check's memory view does
            // not read: the structure and lost-key checks need every page in some memory.
            return Ok(());
        }
        let guards: Vec<_> = states.iter().map(|s| s.lock().unwrap_or_else(|e| e.into_inner())).collect();
        let views: Vec<&NodeState> = guards.iter().map(|g| &**g).collect();
        let read = self.tree_memory(&views, memory);
        let page_words = (self.config.page_bytes / 8) as usize;
        let contents =
            check_tree(&read, self.meta(), page_words).map_err(|m| Violation::new("tree structure", m))?;
        debug_assert_eq!(page_index(&self.layout, self.meta()), Self::placed(&self.layout, 0));
        for (k, _) in &self.loaded {
            if !contents.contains_key(k) {
                return Err(Violation::new("no lost key", format!("bulk-loaded key {k} is in no leaf")));
            }
        }
        crate::harness::check_no_lost_key(reports, |key| contents.contains_key(&key))
    }
}
