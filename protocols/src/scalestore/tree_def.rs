//! The B-link tree of `blink/` over ScaleStore's page API (`protocol: "blink-scalestore"`):
//! ScaleStore's distributed B-tree of §5, so that an operation is a YCSB lookup or update
//! through the tree, as in the paper's figures. The tree is unchanged; its pages are
//! ScaleStore pages ([`super::pages::ScaleStorePages`]), latched S/X through the coherence
//! protocol.
//!
//! The cluster is `symmetric_nodes` nodes, each running `workload.threads_per_node` workers
//! and `handler_tasks` message handlers — or, as SELCC's Fig. 17 ran ScaleStore (SELCC §7.1,
//! as `scalestore-dm` does for the micro-benchmark), `memory_nodes` directories that hold
//! every page and run no workers, and `compute_nodes` that run the workers, cache
//! `cache_ratio` of the pages and evict them back to the directories (no storage device, no
//! inserts: a compute node owns no PID to allocate a split page from; `handler_tasks` defaults
//! to `cluster.memory_node_cores`, 1 in SELCC's setup). The bulk-loaded tree's pages are spread round-robin
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
use super::phases::{merge_timeline, Elastic, PhasedStream, Phases};
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
use crate::workload::window::Gate;
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
    /// Operations completed per `phases.timeline_bucket_ns`.
    #[serde(default)]
    timeline: Vec<u64>,
}

pub struct BlinkScaleStorePlan {
    workload: YcsbWorkload,
    config: Config,
    tree: TreeConfig,
    layout: Layout,
    cluster: Cluster,
    /// Directories without workers (SELCC's memory nodes, ids `0..memory_nodes`); 0 when the
    /// nodes are symmetric.
    memory_nodes: u64,
    threads: u32,
    ops_per_thread: u64,
    seed: u64,
    check: CheckLevel,
    quiesce: bool,
    bulk: Arc<BulkTree>,
    /// `partitioned`: the key ranges of the nodes' workers, and each range's key indexes.
    parts: Option<Arc<Partitions>>,
    members: Vec<Arc<Vec<u64>>>,
    phases: Phases,
    elastic: Option<Elastic>,
    loaded: Vec<(u64, u64)>,
    /// Pre-allocated pages (meta page + bulk load): each one's global page, and how many each
    /// directory holds (its slots `0..preloaded[d]`; the rest is its pool).
    placement: Vec<u64>,
    preloaded: Vec<u64>,
    /// Frames each node may cache (`u64::MAX`: every page), and an elastic run's compute
    /// nodes' cache.
    capacity: u64,
    compute_capacity: u64,
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
        let mut flag = |name: &str| match options.remove(name) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(b),
            Some(_) => Err(vec![Problem::new(join_path("protocol_options", name), "must be true or false")]),
        };
        let partitioned = flag("partitioned")?;
        // Fig. 9: "every node accesses only data from its local partition" — each partition's
        // leaves start at the directory of the node that works on it.
        let local_partitions = flag("local_partitions")?;
        let phases: Phases = match options.remove("phases") {
            None => Phases::default(),
            Some(v) => parse_typed(&v, "protocol_options.phases").map_err(|p| vec![p])?,
        };
        let elastic: Option<Elastic> = match options.remove("elastic") {
            None => None,
            Some(v) => Some(parse_typed(&v, "protocol_options.elastic").map_err(|p| vec![p])?),
        };
        let presets = [("default", Config::default())];
        let mut config: Config =
            merge_options(&Value::Object(options), "protocol_options", &presets, RESERVED)
                .map_err(|p| vec![p])?;
        let mut out = Vec::new();
        let nodes =
            point.symmetric_nodes as usize + point.memory_nodes as usize + point.compute_nodes as usize;
        for p in config.validate(nodes) {
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
        // Memory + compute nodes: SELCC's disaggregated setup (directories on the memory nodes).
        let disaggregated = point.memory_nodes != 0 || point.compute_nodes != 0;
        if disaggregated {
            if point.memory_nodes == 0 || point.compute_nodes == 0 || point.symmetric_nodes != 0 {
                out.push(Problem::new(
                    "cluster",
                    "blink-scalestore runs on symmetric_nodes, or on memory_nodes (directories) and compute_nodes (workers) together, not a mix",
                ));
            }
            if point.memory_nodes as u32 + point.compute_nodes as u32 > 64 {
                out.push(Problem::new("cluster", "at most 64 nodes (sharer bitmaps of 64 bits)"));
            }
            for (bad, name, why) in [
                (partitioned, "protocol_options.partitioned", "partitions are symmetric nodes' key ranges"),
                (elastic.is_some(), "protocol_options.elastic", "an elastic run sets its own storage nodes"),
                (
                    w.proportions().insert > 0.0,
                    "workload.proportions.insert",
                    "a compute node owns no PID to allocate a split page from",
                ),
            ] {
                if bad {
                    out.push(Problem::new(name, format!("not on memory + compute nodes: {why}")));
                }
            }
        } else if point.symmetric_nodes == 0 || point.symmetric_nodes > 64 {
            out.push(Problem::new(
                "cluster.symmetric_nodes",
                "must be in 1..=64 (sharer bitmaps of 64 bits)",
            ));
        }
        if disaggregated {
            config.handlers_from_memory_cores(point);
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
        for p in phases.validate() {
            let (field, reason) = p.split_once(": ").unwrap_or(("", &p));
            out.push(Problem::new(join_path("protocol_options.phases", field), reason));
        }
        if local_partitions && !partitioned {
            out.push(Problem::new("protocol_options.local_partitions", "needs protocol_options.partitioned"));
        }
        if phases.shift_every_ns > 0 && !partitioned {
            out.push(Problem::new(
                "protocol_options.phases.shift_every_ns",
                "a workload shift moves nodes between partitions: needs protocol_options.partitioned",
            ));
        }
        if let Some(e) = &elastic {
            for p in e.validate(point.symmetric_nodes as u64) {
                let (field, reason) = p.split_once(": ").unwrap_or(("", &p));
                out.push(Problem::new(join_path("protocol_options.elastic", field), reason));
            }
            if partitioned {
                out.push(Problem::new("protocol_options.elastic", "runs without partitioned access"));
            }
            if w.proportions().insert > 0.0 {
                // A compute node has no directory, so no pool to allocate split pages from.
                out.push(Problem::new("workload.proportions.insert", "an elastic run has no inserts"));
            }
        }
        if !out.is_empty() {
            return Err(out);
        }
        tree.mutant = crate::blink::mutants::Mutant::None;
        let memory_nodes = if disaggregated { point.memory_nodes as u64 } else { 0 };
        let nodes = if disaggregated {
            memory_nodes + point.compute_nodes as u64
        } else {
            point.symmetric_nodes as u64
        };
        // Nodes that run workers.
        let working = if disaggregated { point.compute_nodes } else { point.symmetric_nodes };
        let per_node = ((tree.max_entries(page_words) as f64 * tree.bulk_fill).floor() as usize).max(2);
        let bulk_nodes = node_count(w.bulk_load(), per_node);
        let run = shape::resolve(&w.shape_fields(), working, bulk_nodes, false, &mut out);
        // Room for every split, as `blink/def.rs` sizes it, in every node's own pool (a node
        // allocates only PIDs of its own directory, and under skew one node may split most).
        let p = w.proportions();
        let stores = run.ops_per_thread.saturating_add(w.warmup_ops_per_thread) as f64
            * run.threads_per_node as f64
            * working as f64
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
        let homes =
            if disaggregated { memory_nodes } else { elastic.as_ref().map_or(nodes, |e| e.storage_nodes) };
        let loaded: Vec<(u64, u64)> = {
            let mut keys: Vec<(u64, u64)> = (0..w.bulk_load()).map(|i| (w.key(i), load_value(i))).collect();
            keys.sort_unstable();
            keys
        };
        let parts = partitioned.then(|| {
            let keys: Vec<u64> = loaded.iter().map(|(k, _)| *k).collect();
            Arc::new(Partitions::new(&keys, nodes as usize))
        });
        // Directory and slot of each pre-allocated page: round-robin, or with `local_partitions`
        // each leaf at the node whose partition holds its first key (the bulk load numbers the
        // leaves 1..=L in key order, `per_node` keys each, the meta page 0).
        let mut slots = vec![0u64; homes as usize];
        let placement: Vec<(u64, u64)> = (0..prealloc)
            .map(|i| {
                let first_key = (i as usize).checked_sub(1).and_then(|l| loaded.get(l * per_node));
                let d = match (&parts, first_key, local_partitions) {
                    (Some(p), Some((k, _)), true) if i <= loaded.len().div_ceil(per_node) as u64 => {
                        p.owner(*k) as u64
                    }
                    _ => i % homes,
                };
                slots[d as usize] += 1;
                (d, slots[d as usize] - 1)
            })
            .collect();
        let layout = Layout {
            nodes,
            homes,
            threads: run.threads_per_node as u64,
            pages_per_node: slots.iter().copied().max().unwrap_or(0) + extra,
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
        let compute_capacity =
            elastic.as_ref().map_or(capacity, |e| (e.compute_cache_ratio * prealloc as f64).ceil() as u64);
        if capacity.min(compute_capacity) < layout.total_pages() {
            layout.providers = config.eviction.providers as u64;
            if capacity.min(compute_capacity) < layout.threads * 2 + 2 {
                out.push(Problem::new(
                    "workload.cache_frames",
                    format!(
                        "{capacity} frames per node: at least 2 per worker + 2 (a worker latches a page and fetches its child)"
                    ),
                ));
            }
            // Disaggregated: the compute nodes evict to the memory nodes' memory, which holds
            // every page (SELCC §7.1: "eliminating SSD access").
            if !disaggregated && layout.ssd_bytes() > point.ssd_bytes_per_node {
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
        // A partitioned run lists every key under its partition's owner (`members`, 8 bytes a key).
        if partitioned && w.keyspace.saturating_mul(8) > MEMORY_BUDGET_BYTES {
            out.push(Problem::new(
                "workload.keyspace",
                format!(
                    "a partitioned run lists every key by partition: at most {} keys (got {})",
                    MEMORY_BUDGET_BYTES / 8,
                    w.keyspace
                ),
            ));
        }
        if !out.is_empty() {
            return Err(out);
        }
        let cluster = point.cluster(layout.region_bytes(), layout.region_bytes());
        let placement: Vec<u64> =
            placement.iter().map(|(d, slot)| d * layout.pages_per_node + slot).collect();
        let bulk = build(&loaded, per_node, |i| page_id(&layout, placement[i as usize]));
        let members = match &parts {
            Some(p) => {
                let mut members = vec![Vec::new(); nodes as usize];
                for i in 0..w.keyspace {
                    members[p.owner(w.key(i))].push(i);
                }
                members.into_iter().map(Arc::new).collect()
            }
            None => Vec::new(),
        };
        Ok(BlinkScaleStorePlan {
            workload: w,
            config,
            tree,
            layout,
            cluster,
            memory_nodes,
            threads: run.threads_per_node,
            ops_per_thread: run.ops_per_thread,
            seed: point.seed,
            check: point.check,
            quiesce: point.quiesce,
            bulk: Arc::new(bulk),
            loaded,
            capacity,
            compute_capacity,
            placement,
            preloaded: slots,
            parts,
            members,
            phases,
            elastic,
            states: Mutex::new(Vec::new()),
            owed: point.check.full().then(Owed::default),
        })
    }

    /// The global page of pre-allocated page `i`.
    fn placed(&self, i: u64) -> u64 {
        self.placement[i as usize]
    }

    /// Node `me`'s cache and the window its workers run in (an elastic run's storage nodes
    /// run none: an empty window).
    fn role(&self, me: NodeId) -> (u64, (u64, u64)) {
        if self.memory_nodes > 0 {
            return match me.0 as u64 >= self.memory_nodes {
                true => (self.capacity, (0, u64::MAX)),
                false => (u64::MAX, (0, 0)),
            };
        }
        let Some(e) = &self.elastic else { return (self.capacity, (0, u64::MAX)) };
        match (me.0 as u64).checked_sub(e.storage_nodes) {
            None => (self.capacity, (0, 0)),
            Some(c) => (self.compute_capacity, e.window(c, self.layout.nodes - e.storage_nodes)),
        }
    }

    fn meta(&self) -> PageId {
        page_id(&self.layout, self.placed(0))
    }

    fn parse(reports: &[NodeReport]) -> Vec<Report> {
        reports.iter().filter_map(|r| r.extra_as::<Report>()).collect()
    }

    /// Memory as the tree's structure check reads it: page `g`'s words from a node holding it
    /// Hot (copies agree) or evicting it, its latch word free unless some node holds it latched.
    fn tree_memory<'a>(
        &'a self,
        states: &'a [&'a NodeState],
        memory: Memory<'a>,
    ) -> impl Fn(RemoteAddr) -> u64 + 'a {
        let stride = self.layout.page_bytes + PREFIX_BYTES;
        move |a: RemoteAddr| {
            let g = a.offset_bytes / stride;
            let word = (a.offset_bytes % stride) / 8;
            let frames = || states.iter().map(|s| s.frames.get(g as usize).copied().flatten());
            if word == 0 {
                // Free (0), or which node holds it how: 1 << 48 | node << 32 | latch. (A pin
                // may outlive the run: the run ends when the requester has its page, before the
                // sender's completion.)
                return frames()
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
            // A Hot copy, else one a provider is evicting (a disaggregated run can end with
            // its directory's read-back in flight: the evicting copy is still the page).
            let holding = |state| frames().position(|f| f.is_some_and(|f| f.state == state));
            match holding(FrameState::Hot).or_else(|| holding(FrameState::Evicting)) {
                Some(n) => memory(RemoteAddr::new(NodeId(n as u16), self.layout.frame(g) + (word - 2) * 8)),
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
        let meta = self.placed(0);
        if self.layout.directory(meta) == me {
            let root = page_id(&self.layout, self.placed(self.bulk.root));
            nic.local().store(self.layout.frame(meta), root.0);
        }
        for (i, image) in &self.bulk.nodes {
            let g = self.placed(*i);
            if self.layout.directory(g) == me {
                nic.local().write_words(self.layout.frame(g), &image.encode());
            }
        }
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun<Mutex<NodeState>> {
        let me = nic.node();
        let nodes = self.layout.nodes;
        // A directory's pre-allocated slots come first; the rest is its pool. A compute node
        // (elastic runs) has neither.
        let used = self.preloaded.get(me.index()).copied().unwrap_or(self.layout.pages_per_node);
        let config = self.config.clone();
        let (capacity, active) = self.role(me);
        let node = Node::new(nic, self.layout.clone(), config, self.owed.clone(), capacity, Some(used));
        self.states.lock().unwrap_or_else(|e| e.into_inner()).push(node.state.clone());
        let pool = Arc::new(Pool::new(used, self.layout.pages_per_node));
        let root = page_id(&self.layout, self.placed(self.bulk.root));
        let shared = Arc::new(Shared::new(self.tree.clone(), self.meta(), root));
        let mut log = self.check.histories().then(OpLog::new);
        if let (Some(l), 0) = (&log, me.0) {
            let loader = nodes as u32 * self.threads;
            l.lock().extend(load_history(&self.loaded, loader));
        }
        let timeline = Arc::new(Mutex::new(Vec::new()));
        let workers = if active.0 < active.1 { self.threads } else { 0 };
        let mains: Vec<Task> = (0..workers)
            .map(|t| {
                let stream = |partition: usize, rng| {
                    let s = YcsbStream::new(
                        &self.workload,
                        me.0 - self.memory_nodes as u16,
                        (nodes - self.memory_nodes) as u16,
                        t,
                        self.threads,
                        self.ops_per_thread,
                        rng,
                    );
                    match &self.parts {
                        Some(p) => s.partitioned(p.clone(), partition, self.members[partition].clone()),
                        None => s,
                    }
                };
                // The home partition's stream is the one an unshifted run draws from; a shift
                // adds one stream per other partition, each with a stream of its own.
                let mut streams = vec![stream(me.index(), rng_for_thread(self.seed, me.0, t))];
                if self.phases.shift_every_ns > 0 {
                    streams = (0..nodes as usize)
                        .map(|k| {
                            let p = (me.index() + k) % nodes as usize;
                            let seed = self.seed.wrapping_add((k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                            stream(p, rng_for_thread(seed, me.0, t))
                        })
                        .collect();
                }
                let clock = node.clone();
                let stream = PhasedStream::new(
                    streams,
                    0,
                    self.phases.clone(),
                    active,
                    move || clock.nic.now().0,
                    timeline.clone(),
                );
                let pages = ScaleStorePages::new(node.clone(), t, pool.clone());
                let mut tree = Tree::new(pages, shared.clone());
                let logger =
                    log.as_ref().map(|l| KvLogger { log: l.clone(), client: me.0 as u32 * self.threads + t });
                let failed = node.clone();
                let gate = Gate::new(self.workload.window);
                let task: Task = Box::pin(async move {
                    if active.0 > 0 {
                        // A compute node that joins later (Fig. 10).
                        tree.pages.worker.nic.sleep(Nanos(active.0)).await;
                    }
                    run_ops(&mut tree, me, t, stream, logger, gate, move || failed.errors.is_set()).await;
                });
                task
            })
            .collect();
        // Memory nodes (disaggregated runs) cache every page: no page provider.
        let daemons = node.daemons(me.0 as u64 >= self.memory_nodes);
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
                let timeline = timeline.lock().unwrap_or_else(|e| e.into_inner()).clone();
                NodeReport {
                    extra: serde_json::to_value(Report { tree, pages, timeline }).unwrap_or(Value::Null),
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
        let mut timeline = Vec::new();
        for r in &parsed {
            tree.merge(&r.tree);
            pages.merge(&r.pages);
            merge_timeline(&mut timeline, &r.timeline);
        }
        let mut m = tree_metrics(&tree, elapsed, Gate::new(self.workload.window));
        if let Some(w) = self.phases.window_mops(&timeline) {
            m.insert("window_mops".into(), w);
        }
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
        if pages.local_line_ns > 0 {
            // The ablation (`protocol_options.local`): local latch and list lines, ns per latch.
            m.insert("local_line_ns_per_latch".into(), pages.local_line_ns as f64 / latches);
        }
        if self.layout.providers > 0 {
            m.insert("ssd_reads_per_latch".into(), pages.ssd_reads as f64 / latches);
            m.insert("ssd_writes_per_latch".into(), pages.ssd_writes as f64 / latches);
            m.insert("evictions_per_latch".into(), pages.evictions as f64 / latches);
            m.insert("pulls_per_latch".into(), pages.pulls as f64 / latches);
            m.insert("frame_waits_per_latch".into(), pages.frame_waits as f64 / latches);
            // Frames in use at the end over the cluster's cache (the paper's "cache utilization").
            // (Memory nodes of a disaggregated run are unbounded and not counted.)
            let capacity = (0..self.layout.nodes)
                .map(|n| self.role(NodeId(n as u16)).0)
                .filter(|&c| c != u64::MAX)
                .sum::<u64>() as f64;
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
        if self.layout.providers > 0 && self.memory_nodes == 0 {
            // Evicted pages live on the storage devices, which the check's memory view does
            // not read: the structure and lost-key checks need every page in some memory (a
            // disaggregated run evicts to the memory nodes' memory: checked).
            return Ok(());
        }
        let guards: Vec<_> = states.iter().map(|s| s.lock().unwrap_or_else(|e| e.into_inner())).collect();
        let views: Vec<&NodeState> = guards.iter().map(|g| &**g).collect();
        let read = self.tree_memory(&views, memory);
        let page_words = (self.config.page_bytes / 8) as usize;
        let contents =
            check_tree(&read, self.meta(), page_words).map_err(|m| Violation::new("tree structure", m))?;
        debug_assert_eq!(page_index(&self.layout, self.meta()), self.placed(0));
        for (k, _) in &self.loaded {
            if !contents.contains_key(k) {
                return Err(Violation::new("no lost key", format!("bulk-loaded key {k} is in no leaf")));
            }
        }
        crate::harness::check_no_lost_key(reports, |key| contents.contains_key(&key))
    }
}
