//! SMART's definition (`protocol: "smart"`): the index on any backend.
//!
//! `workload` is [`IndexWorkload`] (keys, op mix, skew, run shape, cache ratio).
//! `protocol_options` is any subset of [`Config`]'s fields over a preset (`default` = `smart`,
//! every option of the repository's build on; `no_rdwc` without read delegation and write
//! combining), e.g. `{ "value_bytes": 64, "cpu": { "cache_admit_ns": 400 } }`:
//!
//! | field | default | meaning |
//! |---|---|---|
//! | `value_bytes` | 8 | value size; above 32 a leaf exceeds 64 B and reads of it can tear |
//! | `fine_grain_nodes` | true | node types 4/8/…/256 (SMART's build) or 4/16/48/256 |
//! | `cache` / `cache_bytes` | true / 1 MiB | the internal-node cache (`workload.cache_ratio` wins) |
//! | `read_delegation` / `write_combining` | true / true | sharing remote work per key per node |
//! | `coroutines_per_thread` | 8 | concurrent operations per thread on its QP (SMART's `kCoroCnt`); `ops_per_thread` is per coroutine |
//! | `arena_slack_bytes` | 64 KiB | spare allocation room per compute node per memory node |
//! | `cpu.{op_ns, node_search_ns, cache_lookup_ns, cache_admit_ns}` | 100, 40, 60, 250 | compute CPU |
//!
//! Memory metrics (Dolphin Table II): `memory_bytes_per_key` (the memory nodes' regions per
//! loaded key), `bulk_nodes`, and `cs_full_cache_bytes_per_key` (a cache holding every
//! internal node but the root, entries counted as the authors' `CacheEntry::content_size()`).
//!
//! Check mode: every lookup, insert, update and delete is logged for the per-key
//! linearizability and write-chain checkers; `verify` walks the tree in memory
//! ([`super::check::walk`]), checks every bulk-loaded key is still there and that each key's
//! final value is the end of its write chain.

use crate::workload::window::Gate;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::bench::{run_client, Logging};
use super::bulk::{build, Image};
use super::check::{chain_ends, walk};
use super::config::Config;
use super::layout::{Layout, LEAF_HEADER_WORDS, NODE_BYTES, TOMBSTONE};
use super::stats::{OpKind, Stats};
use super::tree::{scratch_bytes, Tree};
use super::workload::{Owned, Workload};
use crate::common::memo::Memo;
use crate::common::metrics::percentile;
use crate::common::shape;
use crate::harness::{
    merge_options, report_error, CheckLevel, Memory, NodeReport, NodeRun, OpLog, Plan, PointSpec, Problem,
    Protocol, Violation,
};
use crate::nic::{Cluster, Nanos, Nic, NodeId, NodeKind};
use crate::workload::partition::Partitions;
use crate::workload::rng_for_thread;
use crate::workload::scan_check::{check_report_scans, KeyWrite};

/// The registration.
#[derive(Clone, Copy)]
pub struct Smart;

impl Protocol for Smart {
    type Plan = SmartPlan;

    fn names(&self) -> &'static [&'static str] {
        &["smart"]
    }

    fn about(&self) -> &'static str {
        "SMART: the disaggregated-memory adaptive radix tree (OSDI'23), DEX's and Dolphin's baseline"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<SmartPlan, Vec<Problem>> {
        SmartPlan::new(point)
    }
}

const RESERVED: &[(&str, &str)] = &[
    ("threads_per_node", "workload.threads_per_node or workload.threads_total"),
    ("mutant", "dmsim fuzz --mutant"),
];

/// Bulk images by (loaded keys, memory nodes, value words, fine-grained node types).
type ImageKey = (Vec<u64>, Vec<NodeId>, usize, bool);
static IMAGES: Memo<ImageKey, Image> = Memo::new(4);

pub struct SmartPlan {
    workload: Workload,
    config: Config,
    layout: Arc<Layout>,
    image: Arc<Image>,
    cluster: Cluster,
    ops_per_thread: u64,
    seed: u64,
    check: CheckLevel,
    /// P-SMART's partitions (one per compute node).
    parts: Option<Arc<Partitions>>,
}

#[derive(Serialize, Deserialize)]
enum SmartReport {
    Memory,
    Compute(Stats),
}

fn problem_at(prefix: &str, text: &str) -> Problem {
    match text.split_once(": ") {
        Some((field, reason)) if !field.contains(' ') => Problem::new(format!("{prefix}.{field}"), reason),
        _ => Problem::new(prefix, text),
    }
}

impl SmartPlan {
    pub fn new(point: &PointSpec) -> Result<SmartPlan, Vec<Problem>> {
        let w = Workload::parse(&point.workload).map_err(|p| vec![p])?;
        let presets =
            [("default", Config::smart()), ("smart", Config::smart()), ("no_rdwc", Config::no_rdwc())];
        let mut config: Config =
            merge_options(&point.protocol_options, "protocol_options", &presets, RESERVED)
                .map_err(|p| vec![p])?;
        let mut out = Vec::new();
        w.check(&mut out);
        let run = shape::resolve(&w.shape_fields(), point.compute_nodes, w.loaded_count(), false, &mut out);
        config.threads_per_node = run.threads_per_node;
        if let Some(bytes) = w.cache_bytes() {
            config.cache_bytes = bytes;
        }
        config.mutant = super::mutants::named(&point.mutant)
            .ok_or_else(|| vec![Problem::new("mutant", format!("SMART has no mutant {:?}", point.mutant))])?;
        out.extend(config.validate().iter().map(|p| problem_at("protocol_options", p)));
        point.no_symmetric("SMART", &mut out);
        if point.memory_nodes == 0 {
            out.push(Problem::new("cluster.memory_nodes", "must be at least 1"));
        }
        if point.memory_nodes > 256 {
            out.push(Problem::new("cluster.memory_nodes", "slot entries address at most 256 memory nodes"));
        }
        if point.compute_nodes == 0 {
            out.push(Problem::new("cluster.compute_nodes", "must be at least 1"));
        }
        if run.threads_per_node > u16::MAX as u32 {
            out.push(Problem::new("workload.threads_per_node", "at most 65535 (one QP channel each)"));
        }
        if config.key_valued_updates && point.check.histories() {
            out.push(Problem::new(
                "protocol_options.key_valued_updates",
                "repeats each key's value, which the history checker cannot attribute: run it unchecked",
            ));
        }
        if config.partitioned {
            if let Workload::Ycsb(y) = &w {
                y.check_partitioned(&mut out);
            }
        }
        if !out.is_empty() {
            return Err(out);
        }
        let mns: Vec<_> = point.cluster(0, 0).memory_nodes();
        let keys = w.loaded_keys();
        let parts =
            config.partitioned.then(|| Arc::new(Partitions::new(&keys, point.compute_nodes as usize)));
        let image = IMAGES.get_or((keys, mns.clone(), config.value_words(), config.fine_grain_nodes), |k| {
            build(&k.0, &k.1, k.2, k.3)
        });
        // Room for what the run's inserts can allocate (a leaf and a node each, twice over for
        // lost races), spread over the memory nodes, plus slack.
        let leaf_bytes = ((LEAF_HEADER_WORDS + config.value_words()) * 8) as u64;
        let lanes = run.threads_per_node as u64 * config.coroutines_per_thread as u64;
        // In f64: a scenario's op count times its lanes may not fit a u64 (the arena then
        // saturates and the cluster's memory check reports it).
        let inserts = run.ops_per_thread as f64 * lanes as f64 * w.insert_fraction();
        let per_mn = (2.0 * inserts * (NODE_BYTES + leaf_bytes) as f64 / mns.len() as f64) as u64;
        let layout = Layout {
            memory_nodes: mns,
            image_end: image.end.clone(),
            arena_bytes: per_mn
                .saturating_add(config.arena_slack_bytes)
                .min(u64::MAX - 63)
                .next_multiple_of(64),
            compute_count: point.compute_nodes as usize,
            value_words: config.value_words(),
        };
        let compute_bytes = scratch_bytes(&layout).saturating_mul(lanes);
        let cluster = point.cluster(layout.memory_region_bytes(), compute_bytes);
        Ok(SmartPlan {
            workload: w,
            config,
            layout: Arc::new(layout),
            image,
            cluster,
            ops_per_thread: run.ops_per_thread,
            seed: point.seed,
            check: point.check,
            parts,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    fn totals(reports: &[NodeReport]) -> Stats {
        let mut total = Stats::new();
        for r in reports {
            if let Some(SmartReport::Compute(s)) = r.extra_as::<SmartReport>() {
                total.merge(&s);
            }
        }
        total
    }
}

fn report(r: SmartReport) -> NodeReport {
    NodeReport { extra: serde_json::to_value(r).unwrap_or(serde_json::Value::Null), ..NodeReport::default() }
}

impl Plan for SmartPlan {
    type State = ();

    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    fn setup<N: Nic>(&self, nic: &N) {
        if let Some(m) = self.layout.memory_nodes.iter().position(|n| *n == nic.node()) {
            for (offset, words) in self.image.chunks(m) {
                nic.local().write_words(offset, words);
            }
        }
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun<()> {
        if self.cluster.kinds[nic.node().index()] == NodeKind::Memory {
            return NodeRun { collect: Box::new(|| report(SmartReport::Memory)), ..NodeRun::empty() };
        }
        let compute_index = nic.node().index() - self.layout.memory_nodes.len();
        let threads = self.config.threads_per_node;
        let mut tree = Tree::new(nic.clone(), self.config.clone(), self.layout.clone(), compute_index);
        tree.partition = self.parts.as_ref().map(|p| p.range(compute_index));
        let tree = Arc::new(tree);
        let owned = self.parts.as_ref().map(|p| Owned {
            members: Arc::new(self.workload.partition_members(p, compute_index)),
            parts: p.clone(),
            me: compute_index,
        });
        let log = self.check.histories().then(OpLog::new);
        // Each coroutine is its own client: its own stream (threads × coroutines "threads" to
        // the generators) and history client id.
        let coros = self.config.coroutines_per_thread;
        let computes = self.layout.compute_count as u16;
        let mut mains = Vec::new();
        for thread in 0..threads {
            for coro in 0..coros {
                let lane = thread * coros + coro;
                let client = compute_index as u32 * threads * coros + lane;
                let rng = rng_for_thread(self.seed, nic.node().0, lane);
                let (ops, lanes) = (self.ops_per_thread, threads * coros);
                let stream = self.workload.stream(
                    compute_index as u16,
                    computes,
                    lane,
                    lanes,
                    ops,
                    rng,
                    owned.as_ref(),
                );
                let logging = log.clone().map(|log| Logging { log, client });
                let task: crate::nic::Task = Box::pin(run_client(
                    tree.clone(),
                    thread,
                    coro,
                    stream,
                    logging,
                    Gate::new(self.workload.window()),
                ));
                mains.push(task);
            }
        }
        let watched = tree.clone();
        NodeRun {
            mains,
            daemons: Vec::new(),
            progress: Some(Arc::new(move || watched.stats().total().ops)),
            state: None,
            collect: Box::new(move || NodeReport {
                error: report_error(tree.errors.first()),
                history: log.map(|l| l.snapshot()).unwrap_or_default(),
                ..report(SmartReport::Compute(tree.stats()))
            }),
        }
    }

    fn metrics(&self, reports: &[NodeReport], elapsed: Nanos) -> BTreeMap<String, f64> {
        let total = Self::totals(reports);
        let gate = Gate::new(self.workload.window());
        let span_s = gate.span_s(elapsed.saturating_sub(Nanos(total.first_op_start_ns.unwrap_or(0))).0);
        let mut m = BTreeMap::new();
        if gate.is_timed() {
            m.insert("window_threads_out_of_ops".into(), total.window_short_clients as f64);
        }
        let all = total.total();
        let per = |x: u64, n: u64| x as f64 / n.max(1) as f64;
        m.insert("throughput_mops".into(), all.ops as f64 / span_s.max(1e-12) / 1e6);
        m.insert("ops".into(), all.ops as f64);
        m.insert("thread_mops".into(), total.thread_rate_sum * 1e3);
        let put = |m: &mut BTreeMap<String, f64>, prefix: &str, k: &super::stats::KindStats| {
            let n = k.ops;
            m.insert(format!("{prefix}reads_per_op"), per(k.verbs.reads, n));
            m.insert(format!("{prefix}writes_per_op"), per(k.verbs.writes, n));
            m.insert(format!("{prefix}atomics_per_op"), per(k.verbs.atomics, n));
            m.insert(format!("{prefix}two_sided_per_op"), 0.0);
            m.insert(format!("{prefix}bytes_per_op"), per(k.verbs.bytes(), n));
            m.insert(format!("{prefix}retries_per_op"), per(k.retries, n));
            let mut lat = k.latencies_ns.clone();
            m.insert(format!("{prefix}latency_ns_avg"), per(k.latency_ns_total, n));
            m.insert(format!("{prefix}latency_ns_p50"), percentile(&mut lat, 50.0));
            m.insert(format!("{prefix}latency_ns_p99"), percentile(&mut lat, 99.0));
        };
        put(&mut m, "", &all);
        for kind in OpKind::ALL {
            let k = total.kind(kind);
            if k.ops > 0 {
                m.insert(format!("{}_ops", kind.name()), k.ops as f64);
                put(&mut m, &format!("{}_", kind.name()), k);
            }
        }
        m.insert("cache_hit_ratio".into(), per(all.cache_hits, all.traversals));
        let lookups = total.kind(OpKind::Lookup);
        m.insert("delegated_ratio".into(), per(lookups.shared, lookups.ops));
        let writes: u64 =
            [OpKind::Update, OpKind::Insert, OpKind::Delete].iter().map(|k| total.kind(*k).ops).sum();
        let combined: u64 =
            [OpKind::Update, OpKind::Insert, OpKind::Delete].iter().map(|k| total.kind(*k).shared).sum();
        m.insert("combined_ratio".into(), per(combined, writes));
        m.insert("cache_evictions".into(), total.cache_evictions as f64);
        m.insert("cache_bytes_used".into(), total.cache_bytes as f64);
        m.insert("scan_order_violations".into(), total.scan_order_violations as f64);
        let region: u64 = self.layout.memory_region_bytes() * self.layout.memory_nodes.len() as u64;
        m.insert("memory_bytes_per_key".into(), region as f64 / self.workload.loaded_count().max(1) as f64);
        m.insert("bulk_nodes".into(), self.image.nodes as f64);
        let loaded = self.workload.loaded_count().max(1) as f64;
        m.insert("cs_full_cache_bytes_per_key".into(), self.image.full_cache_bytes as f64 / loaded);
        m
    }

    fn ops(&self, reports: &[NodeReport]) -> u64 {
        Self::totals(reports).total().ops
    }

    fn verify(&self, reports: &[NodeReport], memory: Option<Memory>) -> Result<(), Violation> {
        let total = Self::totals(reports);
        if total.scan_order_violations > 0 {
            return Err(Violation::new(
                "scans ascend",
                format!("{} scans returned keys out of order", total.scan_order_violations),
            ));
        }
        // A checking run (histories logged, on either backend) or a quiesced simulation.
        let logged = reports.iter().any(|r| !r.history.is_empty());
        if logged || memory.is_some() {
            // Bulk-loaded keys are live from time 0 (their value word is 0, the histories' start).
            let loaded = self.workload.loaded_keys().into_iter().map(|key| KeyWrite {
                key,
                invoke_ns: 0,
                return_ns: Some(0),
                live: true,
            });
            let scans_of = |r: &NodeReport| match r.extra_as::<SmartReport>() {
                Some(SmartReport::Compute(s)) => s.scans,
                _ => Vec::new(),
            };
            check_report_scans(reports, scans_of, |v| v & TOMBSTONE == 0, loaded)
                .map_err(|m| Violation::new("no scan skips a live key", m))?;
        }
        let Some(memory) = memory else { return Ok(()) };
        let tree = walk(memory, self.layout.root_entry(), self.layout.root_ptr(), self.layout.value_words)
            .map_err(|m| Violation::new("tree structure", m))?;
        for key in self.workload.loaded_keys() {
            if !tree.contains_key(&key) {
                return Err(Violation::new(
                    "no lost key",
                    format!("bulk-loaded key {key:#x} is not reachable"),
                ));
            }
        }
        let history: Vec<_> = reports.iter().flat_map(|r| r.history.iter()).collect();
        if reports.iter().all(|r| r.error.is_none()) {
            for (key, last) in chain_ends(&history) {
                let held = tree.get(&key).copied().unwrap_or(0);
                if held != last {
                    return Err(Violation::new(
                        "final value",
                        format!("key {key:#x} holds {held:#x} but its last write stored {last:#x}"),
                    ));
                }
            }
        }
        Ok(())
    }
}
