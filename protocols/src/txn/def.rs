//! The protocol definition: `protocol: "tpcc"` runs TPC-C's five transactions with 2PL
//! no-wait, TO or OCC over SELCC, `"tpcc-sel"` over SEL (the SELCC node in SEL mode, as
//! `blink-sel`). The index is the B-link tree (`blink/`), bulk-loaded with every initial tuple's
//! address; the tuples sit in heap pages after the tree's nodes; one pre-allocated GCL holds
//! the global timestamp generator. `protocol_options` is SELCC's [`Config`] over its presets
//! plus `tree` ([`TreeConfig`]) and `cc` (`"2pl"`, `"to"`, `"occ"`):
//!
//! ```json
//! "protocol_options": { "cc": "occ", "gcl_size_bytes": 2048, "tree": { "split_at": 8 } }
//! ```
//!
//! Checks (`run.check`): serializability of the committed transactions' recorded versions
//! ([`super::check::serializable`]); `Full` adds SELCC's invariants and read-latest oracle after
//! every event; after a quiesced run the index's structure ([`crate::blink::check`]) and the
//! TPC-C consistency conditions over memory ([`super::check::consistent`]).
//!
//! Metrics: `throughput_ktps` (committed transactions per second / 1,000; `throughput_mops`
//! the same in millions, for `compare_with`), `committed`,
//! `aborts`, `abort_rate` (aborts per attempt), `gave_up`, `latency_ns_{avg,p50,p99}`,
//! `latch_sections_per_txn` (heap-page latch sections per attempt — for 2PL over SELCC the
//! latches it takes and holds to commit; the index's own latches not counted), `wal_flushes` (log writes to the storage device), `distributed_committed`
//! (committed transactions that ran 2PC), the same per kind (`new_order_`, `payment_`, `order_status_`, `delivery_`,
//! `stock_level_`).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::check::{consistent, serializable, Db};
use super::client::{run_terminal, Shared, Stats, Terminal, KINDS};
use super::engine::{Cc, Engine};
use super::heap::{per_page, place_per_node, stored_width, TupleRef, PAGE_HEADER};
use super::mutants::Mutant;
use super::tpcc::{
    customer_orders, population, Procedures, TpccWorkload, WarehouseChoice, DISTRICT_NEW_ORDER, HISTORY,
    NEW_ORDER, ORDER, ORDER_LINE, WAREHOUSE, WIDTH,
};
use super::twopc::{serve, Partitioning, Prepared, SERVER_PORT};
use super::wal::Wal;
use crate::blink::bulk::{build, node_count, BulkTree};
use crate::blink::check::check_tree;
use crate::blink::tree::{Shared as TreeShared, Tree, TreeConfig};
use crate::blink::{PageId, SelccPages};
use crate::common::error::ErrorSlot;
use crate::common::metrics::percentile;
use crate::common::shape;
use crate::harness::{
    join_path, merge_options, parse_typed, report_error, CheckLevel, Invariants, Memory, NodeReport, NodeRun,
    Plan, PointSpec, Problem, Protocol, Violation,
};
use crate::nic::{Cluster, Nanos, Nic, NodeKind, RemoteAddr, Task};
use crate::selcc::check::Oracle;
use crate::selcc::{latch, ops, setup_memory_node, Config, Layout, Node, NodeState};
use crate::workload::rng_for_thread;

/// The most simulated memory (all regions) one point may allocate.
const MEMORY_BUDGET_BYTES: u64 = 3 << 30;

#[derive(Clone, Copy)]
pub struct Tpcc;

impl Protocol for Tpcc {
    type Plan = TpccPlan;

    fn names(&self) -> &'static [&'static str] {
        &["tpcc", "tpcc-sel"]
    }

    fn about(&self) -> &'static str {
        "TPC-C (NewOrder, Payment, OrderStatus, Delivery, StockLevel) with 2PL no-wait, TO or OCC over SELCC (tpcc) or SEL (tpcc-sel), B-link tree index"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<TpccPlan, Vec<Problem>> {
        TpccPlan::new(point)
    }
}

const RESERVED: &[(&str, &str)] = &[
    ("cache_frames", "workload.cache_frames or workload.cache_ratio"),
    ("threads_per_node", "workload.threads_per_node or workload.threads_total"),
    ("mode", "the scenario's protocol (tpcc or tpcc-sel)"),
    ("mutant", "dmsim fuzz --mutant (SELCC's mutants are the selcc protocol's)"),
];

pub struct TpccPlan {
    workload: Arc<TpccWorkload>,
    config: Config,
    tree: TreeConfig,
    cc: Cc,
    mutant: Mutant,
    layout: Layout,
    cluster: Cluster,
    threads: u32,
    servers: u32,
    wal: bool,
    partitioned: bool,
    txns_per_thread: u64,
    seed: u64,
    check: CheckLevel,
    quiesce: bool,
    bulk: Arc<BulkTree>,
    /// Heap pages: (pre-allocated GCL index, page image).
    heap: Vec<(u64, Vec<u64>)>,
    timestamps: u64,
    oracle: Option<Arc<Oracle>>,
}

fn take_object(
    options: &mut serde_json::Map<String, Value>,
    name: &str,
    default: Value,
) -> Result<Value, Problem> {
    match options.remove(name) {
        None => Ok(default),
        Some(v) => {
            let mut base = default;
            if let (Value::Object(b), Value::Object(o)) = (&mut base, &v) {
                b.extend(o.clone());
                Ok(base)
            } else {
                Err(Problem::new(format!("protocol_options.{name}"), "must be an object"))
            }
        }
    }
}

impl TpccPlan {
    pub fn new(point: &PointSpec) -> Result<TpccPlan, Vec<Problem>> {
        let w: TpccWorkload = parse_typed(&point.workload, "workload").map_err(|p| vec![p])?;
        let mut options = match &point.protocol_options {
            Value::Null => serde_json::Map::new(),
            Value::Object(m) => m.clone(),
            _ => return Err(vec![Problem::new("protocol_options", "must be an object of options")]),
        };
        let tree_value = take_object(
            &mut options,
            "tree",
            serde_json::to_value(TreeConfig::default()).unwrap_or(Value::Null),
        )
        .map_err(|p| vec![p])?;
        let tree: TreeConfig = parse_typed(&tree_value, "protocol_options.tree").map_err(|p| vec![p])?;
        let cc: Cc = match options.remove("cc") {
            None => Cc::TwoPl,
            Some(v) => parse_typed(&v, "protocol_options.cc").map_err(|p| vec![p])?,
        };
        let flag = |options: &mut serde_json::Map<String, Value>, name: &str| -> Result<bool, Vec<Problem>> {
            match options.remove(name) {
                None => Ok(false),
                Some(v) => parse_typed(&v, &format!("protocol_options.{name}")).map_err(|p| vec![p]),
            }
        };
        let wal = flag(&mut options, "wal")?;
        let partitioned = flag(&mut options, "partitioned")?;
        let sel = point.protocol == "tpcc-sel";
        let presets: Vec<(&str, Config)> =
            if sel { vec![("default", Config::sel())] } else { vec![("default", Config::selcc())] };
        let mut c: Config = merge_options(&Value::Object(options), "protocol_options", &presets, RESERVED)
            .map_err(|p| vec![p])?;
        let mutant = super::mutants::named(&point.mutant)
            .ok_or_else(|| vec![Problem::new("mutant", format!("TPC-C has no mutant {:?}", point.mutant))])?;
        // A mutant breaks one engine; it runs that engine.
        let cc = mutant.engine().unwrap_or(cc);
        let mut out = Vec::new();
        w.check(&mut out);
        point.no_symmetric("TPC-C", &mut out);
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
        if per_page(page_words, stored_width(cc, WIDTH[3])) == 0 {
            out.push(Problem::new(
                "protocol_options.gcl_size_bytes",
                format!(
                    "a page must hold a CUSTOMER tuple ({} bytes with the header)",
                    (PAGE_HEADER + stored_width(cc, WIDTH[3])) * 8
                ),
            ));
        }
        let widths = w.widths();
        if per_page(page_words, stored_width(cc, widths[WAREHOUSE])) == 0 {
            out.push(Problem::new(
                "workload.warehouse_padding_bytes",
                format!(
                    "a page must hold a padded WAREHOUSE tuple ({} bytes with the header, the page {} bytes)",
                    (PAGE_HEADER + stored_width(cc, widths[WAREHOUSE])) * 8,
                    page_words * 8
                ),
            ));
        }
        if w.procedures == Procedures::Artifact
            && per_page(page_words, stored_width(cc, widths[DISTRICT_NEW_ORDER])) == 0
        {
            out.push(Problem::new(
                "protocol_options.gcl_size_bytes",
                format!(
                    "procedures artifact: a page must hold a DISTRICT-NEW-ORDER tuple ({} bytes with the header)",
                    (PAGE_HEADER + stored_width(cc, widths[DISTRICT_NEW_ORDER])) * 8
                ),
            ));
        }
        if partitioned && (cc != Cc::TwoPl || sel) {
            out.push(Problem::new(
                "protocol_options.partitioned",
                "partitioned SELCC with 2PC runs 2PL no-wait over SELCC (protocol tpcc, cc 2pl), as Fig. 19b",
            ));
        }
        if !out.is_empty() {
            return Err(out);
        }
        let mut rows = population(&w);
        // TO's tuples carry their write and read timestamps (0: loaded, never read).
        for (_, _, image) in &mut rows {
            image.resize(stored_width(cc, image.len()), 0);
        }
        let threads = {
            let mut ignored = Vec::new();
            shape::resolve(&w.shape_fields(), point.compute_nodes, 0, false, &mut ignored).threads_per_node
        };
        let owners = Partitioning::new(threads as u64, point.compute_nodes as u64);
        let (heap_pages, placed) = place_per_node(&mut rows, page_words, owners, partitioned);
        let per_node = ((tree.max_entries(page_words) as f64 * tree.bulk_fill).floor() as usize).max(2);
        let secondary = customer_orders(&w);
        let bulk_nodes = node_count((placed.len() + secondary.len()) as u64, per_node);
        let timestamps = 1 + bulk_nodes;
        let first_heap = timestamps + 1;
        let prealloc = first_heap + heap_pages.len() as u64;
        let run = shape::resolve(&w.shape_fields(), point.compute_nodes, prealloc, true, &mut out);
        // Partitioned: as many 2PC server threads per node as terminals, on SELCC workers after them.
        let servers = if partitioned { run.threads_per_node } else { 0 };
        c.threads_per_node = run.threads_per_node + servers;
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
        // Room for inserts: every committed NewOrder adds an ORDER, a NEW-ORDER and up to 15
        // ORDER-LINE rows, a Payment a HISTORY row; each thread keeps one open page per table;
        // the index splits at most once per half node of new keys (twice that with internal
        // splits).
        let terminals = run.threads_per_node as u64 * point.compute_nodes as u64;
        if partitioned && w.mix.payment > 0.0 && w.remote_payment_ratio > 0.0 {
            out.push(Problem::new(
                "workload.remote_payment_ratio",
                "partitioned: Payment does not go through 2PC, so its customers must be local (0)",
            ));
        }
        if partitioned && w.warehouse_choice == WarehouseChoice::Random {
            out.push(Problem::new(
                "workload.warehouse_choice",
                "partitioned: a terminal runs on its home warehouse (its node's), so `home`",
            ));
        }
        if partitioned && (w.warehouses as u64) < terminals {
            out.push(Problem::new(
                "workload.warehouses",
                "partitioned: at least one warehouse per terminal (a warehouse belongs to one node)",
            ));
        }
        let txns = run.ops_per_thread * terminals;
        let lines = w.ol_cnt[1] as u64;
        let tuples_pages = |table: usize, n: u64| {
            n.div_ceil(per_page(page_words, stored_width(cc, WIDTH[table])).max(1) as u64)
        };
        let insert_pages = tuples_pages(ORDER, txns)
            + tuples_pages(NEW_ORDER, txns)
            + tuples_pages(ORDER_LINE, txns * lines)
            + tuples_pages(HISTORY, txns)
            + 4 * terminals;
        let new_keys = txns * (2 + lines + w.customer_order_index as u64);
        let half = (tree.max_entries(page_words) / 2).max(1) as u64;
        let extra = insert_pages + (2 * new_keys).div_ceil(half) + 16;
        let mns = point.memory_nodes.max(1) as u64;
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
        let mut index: Vec<(u64, u64)> = placed
            .iter()
            .map(|(k, page, slot)| {
                (*k, TupleRef::new(PageId::of(layout.gcl(first_heap + *page as u64)), *slot).0)
            })
            .collect();
        index.sort_unstable();
        let secondary: Vec<(u64, u64)> = secondary
            .into_iter()
            .map(|(k, order)| {
                let at = index.binary_search_by_key(&order, |e| e.0).expect("a loaded order is indexed");
                (k, index[at].1)
            })
            .collect();
        index.extend(secondary);
        index.sort_unstable();
        let bulk = build(&index, per_node, |i| PageId::of(layout.gcl(i)));
        assert_eq!(bulk.nodes.len() as u64, bulk_nodes, "the bulk load's node count");
        let heap: Vec<(u64, Vec<u64>)> =
            heap_pages.into_iter().enumerate().map(|(i, p)| (first_heap + i as u64, p)).collect();
        let oracle = point.check.full().then(|| Arc::new(Oracle::new(c.gcl_size_bytes)));
        if let Some(o) = &oracle {
            let words = |image: &[u64]| -> Vec<(u32, u64)> {
                image.iter().enumerate().map(|(k, v)| (k as u32, *v)).collect()
            };
            o.commit(layout.gcl(0), &[(0, PageId::of(layout.gcl(bulk.root)).0)], Nanos::ZERO);
            for (i, image) in &bulk.nodes {
                o.commit(layout.gcl(*i), &words(&image.encode()), Nanos::ZERO);
            }
            for (i, image) in &heap {
                o.commit(layout.gcl(*i), &words(image), Nanos::ZERO);
            }
        }
        Ok(TpccPlan {
            workload: Arc::new(w),
            config: c,
            tree,
            cc,
            mutant,
            layout,
            cluster,
            threads: run.threads_per_node,
            servers,
            wal: wal || partitioned,
            partitioned,
            txns_per_thread: run.ops_per_thread,
            seed: point.seed,
            check: point.check,
            quiesce: point.quiesce,
            bulk: Arc::new(bulk),
            heap,
            timestamps,
            oracle,
        })
    }

    fn meta(&self) -> PageId {
        PageId::of(self.layout.gcl(0))
    }

    fn timestamp_word(&self) -> RemoteAddr {
        Layout::data(self.layout.gcl(self.timestamps))
    }

    fn totals(reports: &[NodeReport]) -> Stats {
        let mut total = Stats::default();
        for r in reports {
            if let Ok(s) = serde_json::from_value::<Stats>(r.extra.clone()) {
                total.merge(&s);
            }
        }
        total
    }
}

impl Plan for TpccPlan {
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
        for (i, image) in &self.heap {
            let g = self.layout.gcl(*i);
            if g.node == me {
                nic.local().write_words(Layout::data(g).offset_bytes, image);
            }
        }
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun<NodeState> {
        let me = nic.node();
        if self.cluster.kinds[me.index()] == NodeKind::Memory {
            return NodeRun::empty();
        }
        let compute = self.cluster.compute_nodes();
        let cn = compute.iter().position(|n| *n == me).unwrap_or(0) as u64;
        let node = Node::new(nic, self.config.clone(), self.layout.clone(), self.oracle.clone());
        *node.workers_running.lock().unwrap_or_else(|e| e.into_inner()) = self.threads;
        let root = PageId::of(self.layout.gcl(self.bulk.root));
        let tree_shared = Arc::new(TreeShared::new(self.tree.clone(), self.meta(), root));
        let shared = Arc::new(Shared {
            stats: Mutex::new(Stats::default()),
            done: AtomicU64::new(0),
            errors: ErrorSlot::new(),
        });
        let region = self.cluster.region_size_bytes[me.index()];
        let wal = self.wal.then(|| Arc::new(Wal::new(0, region.min(1 << 20))));
        let partitioning = Partitioning::new(self.threads as u64, compute.len() as u64);
        let engine_for = |t: u32, owner: u64| {
            let tree = Tree::new(SelccPages::new(node.clone(), t), tree_shared.clone());
            let mut engine = Engine::new(tree, self.cc, self.mutant, self.timestamp_word(), owner);
            engine.customer_order_index = self.workload.customer_order_index;
            engine.replicated_items = self.workload.replicated_items;
            engine.widths = self.workload.widths();
            engine.wal = wal.clone();
            engine.servers = self.servers;
            engine
        };
        let all_terminals = partitioning.terminals;
        let mains: Vec<Task> = (0..self.threads)
            .map(|t| {
                let terminal = cn * self.threads as u64 + t as u64;
                let engine = engine_for(t, terminal + 1);
                let term = Terminal {
                    partitioning,
                    node_index: cn,
                    thread: t,
                    compute: compute.clone(),
                    partitioned: self.partitioned,
                    workload: self.workload.clone(),
                    home: terminal % self.workload.warehouses as u64 + 1,
                    txns: self.txns_per_thread,
                    record: self.check.histories(),
                    drain_at_end: self.quiesce,
                };
                let rng = rng_for_thread(self.seed, me.0, t);
                let task: Task = Box::pin(run_terminal(engine, term, rng, shared.clone()));
                task
            })
            .collect();
        let wal_for_report = wal.clone();
        let prepared = Arc::new(Prepared::default());
        let mut daemons = ops::daemons(&node);
        for k in 0..self.servers {
            // Server threads lock as owners beyond every terminal.
            let owner = all_terminals + cn * self.servers as u64 + k as u64 + 1;
            let engine = engine_for(self.threads + k, owner);
            let port = SERVER_PORT + k as u16;
            let record = self.check.histories();
            daemons.push(Box::pin(serve(
                engine,
                port,
                prepared.clone(),
                shared.clone(),
                record,
                self.quiesce,
            )));
        }
        let watched = shared.clone();
        let state = node.state.clone();
        NodeRun {
            mains,
            daemons,
            progress: Some(Arc::new(move || watched.done.load(std::sync::atomic::Ordering::Relaxed))),
            state: Some(state),
            collect: Box::new(move || {
                let stats = shared.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let error = shared
                    .errors
                    .first()
                    .or_else(|| tree_shared.errors.first())
                    .or_else(|| node.first_error());
                let mut stats = stats;
                stats.wal_flushes = wal_for_report.as_ref().map_or(0, |w| w.flushes());
                NodeReport {
                    extra: serde_json::to_value(&stats).unwrap_or(Value::Null),
                    error: report_error(error),
                    ..NodeReport::default()
                }
            }),
        }
    }

    fn metrics(&self, reports: &[NodeReport], elapsed: Nanos) -> BTreeMap<String, f64> {
        let s = Self::totals(reports);
        let span_s = elapsed.saturating_sub(Nanos(s.first_start_ns.unwrap_or(0))).as_secs_f64().max(1e-12);
        let mut m = BTreeMap::new();
        let mut put =
            |prefix: &str, committed: u64, aborts: u64, gave_up: u64, lat_total: u64, lat: &mut Vec<u64>| {
                m.insert(format!("{prefix}committed"), committed as f64);
                m.insert(format!("{prefix}aborts"), aborts as f64);
                m.insert(format!("{prefix}gave_up"), gave_up as f64);
                m.insert(format!("{prefix}abort_rate"), aborts as f64 / (aborts + committed).max(1) as f64);
                m.insert(format!("{prefix}throughput_ktps"), committed as f64 / span_s / 1e3);
                // Million transactions per second: what the harness's `speedup_<name>` divides.
                m.insert(format!("{prefix}throughput_mops"), committed as f64 / span_s / 1e6);
                m.insert(format!("{prefix}latency_ns_avg"), lat_total as f64 / committed.max(1) as f64);
                m.insert(format!("{prefix}latency_ns_p50"), percentile(lat, 50.0));
                m.insert(format!("{prefix}latency_ns_p99"), percentile(lat, 99.0));
            };
        let k = &s.kinds;
        let mut all: Vec<u64> = s.latencies.concat();
        let sum = |f: &dyn Fn(&super::client::KindStats) -> u64| k.iter().map(f).sum::<u64>();
        let (committed, aborts) = (sum(&|x| x.committed), sum(&|x| x.aborts));
        put("", committed, aborts, sum(&|x| x.gave_up), sum(&|x| x.latency_ns_total), &mut all);
        for (i, name) in KINDS.iter().enumerate() {
            if k[i].committed + k[i].aborts > 0 {
                let mut lat = s.latencies[i].clone();
                put(
                    &format!("{name}_"),
                    k[i].committed,
                    k[i].aborts,
                    k[i].gave_up,
                    k[i].latency_ns_total,
                    &mut lat,
                );
            }
        }
        m.insert("wal_flushes".into(), s.wal_flushes as f64);
        m.insert("distributed_committed".into(), s.distributed as f64);
        m.insert(
            "latch_sections_per_txn".into(),
            s.latch_sections as f64 / (committed + aborts).max(1) as f64,
        );
        m
    }

    fn ops(&self, reports: &[NodeReport]) -> u64 {
        let s = Self::totals(reports);
        s.kinds.iter().map(|k| k.committed).sum()
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
        let s = Self::totals(reports);
        if self.check.histories() {
            serializable(&s.records)
                .map_err(|m| Violation::new("committed transactions are serializable", m))?;
        }
        let (Some(memory), true) = (memory, self.quiesce) else { return Ok(()) };
        let page_words = (self.config.gcl_size_bytes / 8) as usize;
        let index =
            check_tree(memory, self.meta(), page_words).map_err(|m| Violation::new("index structure", m))?;
        let db = Db { memory, index: &index, cc: self.cc, widths: self.workload.widths() };
        consistent(&db, &self.workload, &s).map_err(|m| Violation::new("TPC-C consistency", m))
    }
}
