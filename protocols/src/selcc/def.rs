//! SELCC's and SEL's definition: how a scenario point becomes a run, on any backend
//! (spec `shared/specs/selcc.md` §6–§8; the §7.1 micro-benchmark).
//!
//! `protocol: "selcc"` runs SELCC, `protocol: "sel"` the uncached SEL baseline (same latch word,
//! acquire/release around every access). The `workload` is the micro-benchmark plus the run
//! shape ([`crate::common::shape`]); `protocol_options` is any subset of [`Config`]'s fields
//! (every optimization switch of the ablations, nested `cpu` costs) over a preset:
//!
//! ```json
//! "workload": { "gcl_count": 24000, "cache_ratio": 0.175, "sharing_ratio": 1.0,
//!               "read_ratio": 0.5, "zipf_theta": 0.99, "locality": 0.0,
//!               "threads_per_node": 8, "ops_per_node": 16000 },
//! "protocol_options": { "preset": "ablation_base", "forwarding": true, "lease_gamma": null }
//! ```
//!
//! Presets: `default` (SELCC with every optimization, or SEL for `"sel"`) and `ablation_base`
//! (SELCC with the Fig. 18 optimizations off). Extras for the paper's figures:
//! * `write_only_nodes: k` — the first k compute nodes only write (Fig. 15b single writer);
//! * `timeline_at_ns` / `timeline_node` — metric `timeline_cum_ops` (Fig. 15b curves);
//! * `sharing_model: "per_node_working_set"` — `gcl_count` is each node's working set (sr·G
//!   shared + (1−sr)·G private per node) instead of the total (default `fixed_total`).
//!
//! Check mode: histories log every access (writes log the value they replace); `Full` adds the
//! read-latest oracle and the coherence invariants after every event ([`super::check`]); a
//! quiesced run must leave every latch free and memory equal to the latest writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::bench::{self, BenchOptions};
use super::check::{check_quiescent, Oracle};
use super::check_incremental::IncrementalCheck;
use super::layout::{setup_memory_node, Gaddr, Layout};
use super::metrics::metrics;
use super::recorded::recorded_worker;
use super::stats::Stats;
use super::{latch, ops, Config, Node, NodeState};
use crate::common::shape;
use crate::harness::{
    join_path, merge_options, parse_typed, report_error, CheckLevel, FaultKind, Invariants, Memory,
    MemoryWrites, NodeReport, NodeRun, OpLog, Plan, PointSpec, Problem, Protocol, Violation,
};
use crate::nic::{Cluster, Nanos, Nic, NodeKind, RemoteAddr, Task};
use crate::workload::micro::{MicroSpec, MicroStream};
use crate::workload::rng_for_thread;
use crate::workload::scenario::{MicroWorkload, SharingModel};

/// The most simulated memory (all regions) one point may allocate.
const MEMORY_BUDGET_BYTES: u64 = 3 << 30;

/// The registration.
#[derive(Clone, Copy)]
pub struct Selcc;

impl Protocol for Selcc {
    type Plan = SelccPlan;

    fn names(&self) -> &'static [&'static str] {
        &["selcc", "sel"]
    }

    fn about(&self) -> &'static str {
        "SELCC: cache coherence by RDMA latch words (and SEL, its uncached baseline)"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<SelccPlan, Vec<Problem>> {
        SelccPlan::new(point)
    }
}

/// Fields of `Config` that the workload or the harness decides (so they can never disagree).
const RESERVED: &[(&str, &str)] = &[
    ("gcl_size_bytes", "workload.gcl_size_bytes"),
    ("cache_frames", "workload.cache_frames or workload.cache_ratio"),
    ("threads_per_node", "workload.threads_per_node or workload.threads_total"),
    ("mode", "the scenario's protocol (selcc or sel)"),
    ("mutant", "dmsim fuzz --mutant"),
];

/// SELCC's micro-benchmark as a backend-independent plan. With `quiesce` each compute node
/// drains its cache at the end (flushing dirty lines, releasing latches); the memory nodes then
/// count latch words still held, so leaked ownership is a failed run on either backend.
pub struct SelccPlan {
    config: Config,
    spec: MicroSpec,
    layout: Layout,
    cluster: Cluster,
    seed: u64,
    check: CheckLevel,
    quiesce: bool,
    write_only_nodes: u16,
    timeline: Option<(u64, Option<u16>)>,
    /// `CheckLevel::Full` only: knows the latest write of every word (one process).
    oracle: Option<Arc<Oracle>>,
}

/// A SELCC node's report: a memory node's end-of-run view or a compute node's statistics.
#[derive(Clone, Serialize, Deserialize)]
enum Report {
    Memory { latches_held: u64 },
    Compute(Box<Stats>),
}

impl SelccPlan {
    pub fn new(point: &PointSpec) -> Result<SelccPlan, Vec<Problem>> {
        let w: MicroWorkload = parse_typed(&point.workload, "workload").map_err(|p| vec![p])?;
        let presets: Vec<(&str, Config)> = match point.protocol.as_str() {
            "sel" => vec![("default", Config::sel())],
            _ => vec![("default", Config::selcc()), ("ablation_base", Config::ablation_base())],
        };
        let mut c: Config = merge_options(&point.protocol_options, "protocol_options", &presets, RESERVED)
            .map_err(|p| vec![p])?;
        c.mutant = super::mutants::named(&point.mutant)
            .ok_or_else(|| vec![Problem::new("mutant", format!("SELCC has no mutant {:?}", point.mutant))])?;
        let mut out = Vec::new();
        let nodes = point.compute_nodes as u32;
        let run = shape::resolve(&w.shape_fields(), point.compute_nodes, w.gcl_count, true, &mut out);
        w.check(point.compute_nodes, &mut out);
        if nodes == 0 {
            out.push(Problem::new("cluster.compute_nodes", "SELCC needs at least 1 compute node"));
        }
        if nodes as usize > latch::MAX_COMPUTE_NODES {
            out.push(Problem::new(
                "cluster.compute_nodes",
                format!("SELCC's reader bitmap holds at most {} compute nodes", latch::MAX_COMPUTE_NODES),
            ));
        }
        point.no_symmetric("SELCC", &mut out);
        if point.memory_nodes == 0 {
            out.push(Problem::new("cluster.memory_nodes", "must be at least 1"));
        }
        c.gcl_size_bytes = w.gcl_size_bytes;
        c.threads_per_node = run.threads_per_node;
        c.cache_frames = run.cache_frames.unwrap_or(0);
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
            ops_per_thread: run.ops_per_thread,
            access_bytes: w.access_bytes,
        };
        for problem in spec.validate(nodes.max(1) as usize) {
            let (field, reason) = problem.split_once(": ").unwrap_or(("", &problem));
            out.push(Problem::new(join_path("workload", field), reason));
        }
        if out.is_empty() {
            // What the backend stores per GCL in memory and per frame (payload-free: the latch
            // and header words only, `Layout::payload_span`).
            let (gcl_bytes, frame_bytes) = if point.payload_free {
                (16, 8)
            } else {
                (w.gcl_size_bytes as u64 + 16, w.gcl_size_bytes as u64 + 8)
            };
            let compute = (c.cache_frames as u64).saturating_mul(frame_bytes).saturating_mul(nodes as u64);
            let total = gcl_total.saturating_mul(gcl_bytes).saturating_add(compute);
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
        if !out.is_empty() {
            return Err(out);
        }
        let shape = point.cluster(0, 0);
        let layout = Layout::new(&shape, &c, spec.gcl_count, 0);
        let cluster = Cluster { region_size_bytes: layout.region_sizes(&shape.kinds), kinds: shape.kinds };
        let oracle = point.check.full().then(|| Arc::new(Oracle::new(c.gcl_size_bytes)));
        Ok(SelccPlan {
            config: c,
            spec,
            layout,
            cluster,
            seed: point.seed,
            check: point.check,
            quiesce: point.quiesce,
            write_only_nodes: w.write_only_nodes,
            timeline: w.timeline_at_ns.map(|at| (at, w.timeline_node)),
            oracle,
        })
    }

    fn memory_node<N: Nic>(&self, nic: N) -> NodeRun<NodeState> {
        // Memory nodes run no coherence logic; at the end they count latch words still held
        // and, for the history checkers, report every non-zero data word (writes never store 0).
        let node = nic.node();
        let layout = self.layout.clone();
        let count = self.spec.gcl_count;
        // Memory is final only after the compute nodes drained.
        let histories = self.check.histories() && self.quiesce;
        let words_per_gcl = self.config.gcl_size_bytes as u64 / 8;
        let mut run = NodeRun::empty();
        run.collect = Box::new(move || {
            let region = nic.local();
            let mine: Vec<(u64, Gaddr)> =
                (0..count).map(|g| (g, layout.gcl(g))).filter(|(_, at)| at.node == node).collect();
            let held =
                mine.iter().filter(|(_, at)| region.load(Layout::latch(*at).offset_bytes) != 0).count();
            let mut report = NodeReport::default();
            report.set_typed_extra(Report::Memory { latches_held: held as u64 });
            report.counters.insert("latches_held_at_end".into(), held as f64);
            if histories {
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
        run
    }

    /// The compute node's stats of every report, by compute index.
    fn compute_stats(reports: &[NodeReport]) -> Vec<Stats> {
        reports
            .iter()
            .filter_map(|r| match r.extra_ref::<Report>().as_deref() {
                Some(Report::Compute(s)) => Some((**s).clone()),
                _ => None,
            })
            .collect()
    }
}

/// SELCC's check after every event: S8 (no reader bit beyond the compute nodes: a borrow or
/// carry in the latch word) over the first `gcl_count` GCLs, S1–S3 and directory soundness
/// over every compute node's state ([`check_coherence`]), and the oracle's read-latest check.
pub fn invariants(
    layout: &Layout,
    states: Vec<Arc<NodeState>>,
    oracle: Arc<Oracle>,
    gcl_count: u64,
) -> Invariants {
    if states.first().is_some_and(|s| s.config.sel_per_thread()) {
        return super::sel::invariants(layout, states, oracle, gcl_count);
    }
    let layout = layout.clone();
    let compute = layout.compute_count();
    let valid = if compute >= 64 { u64::MAX } else { (1u64 << compute) - 1 };
    let latches: Vec<(u64, RemoteAddr)> = (0..gcl_count).map(|i| (i, Layout::latch(layout.gcl(i)))).collect();
    let mut coherence = IncrementalCheck::new(verify_incremental_every());
    // Crash recovery: a node in the dead set no longer counts — its frozen cache is not a copy
    // and its ownership in any latch word is stale (the recovery scan removes it).
    let dead_at = layout.dead_set();
    let mut dead_seen = 0u64;
    let mut live: Vec<Arc<NodeState>> = states.clone();
    // Most checks follow a task step that wrote no memory: then no latch word moved, and the
    // scans below over every latch word (S8, the coherence check's named lines) are skipped.
    let mut writes_seen: Option<MemoryWrites> = None;
    Box::new(move |word: Memory, writes: MemoryWrites| {
        let memory_changed = writes_seen != Some(writes);
        writes_seen = Some(writes);
        let dead = dead_at.map_or(0, word);
        if dead != dead_seen {
            dead_seen = dead;
            live = states.iter().filter(|s| dead & latch::bit(s.me) == 0).cloned().collect();
            coherence = IncrementalCheck::new(verify_incremental_every());
        }
        if memory_changed {
            for (i, l) in &latches {
                let value = word(*l);
                if latch::readers(value) & !valid != 0 {
                    return Err(Violation::new(
                        "S8 latch bits in range",
                        format!(
                            "GCL {i}: latch {value:#x} has reader bits beyond the {compute} compute nodes"
                        ),
                    ));
                }
            }
        }
        let masked = |a: RemoteAddr| {
            let v = word(a);
            if dead != 0 && layout.is_gcl(a) {
                super::recovery::strip_all(v, dead, compute)
            } else {
                v
            }
        };
        let checked = if dead == 0 {
            coherence.check(&live, &layout, word, memory_changed)
        } else {
            coherence.check(&live, &layout, &masked, memory_changed)
        };
        checked.map_err(|v| Violation::new(v.invariant, v.to_string()))?;
        match oracle.violations().first() {
            Some(v) => Err(Violation::new(v.invariant, v.to_string())),
            None => Ok(()),
        }
    })
}

/// How often the incremental coherence check is compared with the full one (`0`: never).
/// Debug builds (the test suite) compare on every 7th call; `DMSIM_VERIFY_INCREMENTAL_CHECK=N`
/// sets it for any build (`1` = every event, for a campaign that doubts the checker).
fn verify_incremental_every() -> u64 {
    let default = if cfg!(debug_assertions) { 7 } else { 0 };
    std::env::var("DMSIM_VERIFY_INCREMENTAL_CHECK").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

impl Plan for SelccPlan {
    type State = NodeState;

    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    fn payload_spans(&self) -> Vec<Option<crate::memory::PayloadSpan>> {
        self.cluster.kinds.iter().map(|k| self.layout.payload_span(*k)).collect()
    }

    fn setup<N: Nic>(&self, nic: &N) {
        if self.cluster.kinds[nic.node().index()] == NodeKind::Memory {
            setup_memory_node(&self.layout, nic.node(), nic.local());
        }
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun<NodeState> {
        if self.cluster.kinds[nic.node().index()] == NodeKind::Memory {
            return self.memory_node(nic);
        }
        let me = nic.node();
        let index = self.cluster.compute_nodes().iter().position(|n| *n == me).unwrap_or(0);
        let mut spec = self.spec.clone();
        if index < self.write_only_nodes as usize {
            spec.read_ratio = 0.0;
        }
        let log = self.check.histories().then(OpLog::new);
        let (node, mains, daemons) = match &log {
            None => {
                let options = BenchOptions { drain_at_end: self.quiesce };
                let t = bench::node_tasks(
                    nic,
                    &self.config,
                    &self.layout,
                    &spec,
                    self.seed,
                    &options,
                    self.oracle.clone(),
                );
                (t.node, t.mains, t.daemons)
            }
            Some(log) => {
                // Client ids are `index · threads + thread`.
                let node = Node::new(nic, self.config.clone(), self.layout.clone(), self.oracle.clone());
                let threads = spec.threads_per_node;
                *node.workers_running.lock().unwrap_or_else(|e| e.into_inner()) = threads;
                let compute_count = self.layout.compute_count();
                let mains = (0..threads)
                    .map(|thread| {
                        let rng = rng_for_thread(self.seed, node.node.0, thread);
                        let stream = MicroStream::new(&spec, index, compute_count, rng);
                        let client = index as u32 * threads + thread;
                        let task: Task = Box::pin(recorded_worker(
                            node.clone(),
                            thread,
                            client,
                            stream,
                            log.clone(),
                            self.quiesce,
                        ));
                        task
                    })
                    .collect();
                let daemons = ops::daemons(&node);
                (node, mains, daemons)
            }
        };
        let watched = node.clone();
        let state = node.state.clone();
        NodeRun {
            progress: Some(Arc::new(move || watched.stats().ops)),
            mains,
            daemons,
            collect: Box::new(move || {
                let mut report = NodeReport {
                    error: report_error(node.first_error()),
                    history: log.map(|l| l.snapshot()).unwrap_or_default(),
                    ..NodeReport::default()
                };
                report.set_typed_extra(Report::Compute(Box::new(node.stats())));
                report
            }),
            state: Some(state),
        }
    }

    fn metrics(&self, reports: &[NodeReport], _elapsed: Nanos) -> BTreeMap<String, f64> {
        let per_node = Self::compute_stats(reports);
        let mut m = metrics(&per_node, &self.config, self.write_only_nodes, self.timeline);
        if self.quiesce {
            let held: f64 = reports.iter().filter_map(|r| r.counters.get("latches_held_at_end")).sum();
            m.insert("latches_held_at_end".into(), held);
        }
        m
    }

    fn ops(&self, reports: &[NodeReport]) -> u64 {
        Self::compute_stats(reports).iter().map(|s| s.ops).sum()
    }

    fn recovers_from(&self, fault: FaultKind) -> bool {
        fault == FaultKind::ComputeCrash && self.config.crash_recovery
    }

    fn invariants(&self, states: Vec<Option<Arc<NodeState>>>) -> Option<Invariants> {
        let oracle = self.oracle.clone()?;
        let states: Vec<Arc<NodeState>> = states.into_iter().flatten().collect();
        Some(invariants(&self.layout, states, oracle, self.spec.gcl_count))
    }

    fn verify(&self, reports: &[NodeReport], memory: Option<Memory>) -> Result<(), Violation> {
        if let Some(v) = self.oracle.as_ref().and_then(|o| o.violations().first().cloned()) {
            return Err(Violation::new(v.invariant, v.to_string()));
        }
        if !self.quiesce {
            return Ok(());
        }
        let held: f64 = reports.iter().filter_map(|r| r.counters.get("latches_held_at_end")).sum();
        if held > 0.0 {
            return Err(Violation::new(
                "S8 quiescent latch is free",
                format!("{held} latch words held at the end"),
            ));
        }
        if let (Some(word), Some(oracle)) = (memory, &self.oracle) {
            let gcls: Vec<Gaddr> = (0..self.spec.gcl_count).map(|i| self.layout.gcl(i)).collect();
            check_quiescent(&self.layout, &gcls, word, oracle)
                .map_err(|v| Violation::new(v.invariant, v.to_string()))?;
        }
        Ok(())
    }
}

impl SelccPlan {
    /// The resolved protocol configuration (for tests and reports).
    pub fn config(&self) -> &Config {
        &self.config
    }
}
