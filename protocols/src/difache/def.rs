//! DiFache's definition (`protocol: "difache"`): the cache and its baselines on the synthetic
//! micro-benchmark, on any backend.
//!
//! `protocol_options` is any subset of [`Config`]'s fields over a preset (`default`/`difache`,
//! `noac`, `nocache`, `nocc`), e.g. `{ "preset": "noac", "owner_tracking": "owner_sets" }`.
//! `workload` is [`Workload`] (objects, object_bytes, threads_per_node, ops_per_thread,
//! read_ratio, zipf_theta). Memory nodes run no task (all accesses are one-sided).
//!
//! `run.check` logs every application read and write; `verify` checks them as regular
//! registers ([`super::check::check_regular`]) for the coherent variants. The fuzzer
//! (`CheckLevel::Full`) adds the per-event invariants of [`super::check::invariants`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::bench::{run_client, Requests, TraceFeed, Window};
use super::cache::Cache;
use super::check::{check_memory, check_regular, invariants, Checks, Tracker};
use super::cmcache::{self, Manager};
use super::config::{Config, ManagerPlace, Variant, Workload, EVENT_NAMES};
use super::layout::{part_tag, Layout};
use super::profit::Event;
use super::profit::EVENTS;
use super::stats::{Stats, SWITCH_OFF, SWITCH_ON};
use crate::common::metrics::percentile;
use crate::common::rpc;
use crate::harness::{
    merge_options, on_reference_clock, parse_typed, report_error, CheckLevel, Clock, FaultKind, Invariants,
    LoggedOp, Memory, NodeReport, NodeRun, OpLog, Plan, PointSpec, Problem, Protocol, Violation,
};
use crate::nic::{Cluster, Nanos, Nic, NodeId, NodeKind, Task};
use crate::txn::check::serializable;
use crate::txn::engine::TxnRecord;

#[derive(Clone, Copy)]
pub struct Difache;

impl Protocol for Difache {
    type Plan = DifachePlan;

    fn names(&self) -> &'static [&'static str] {
        &["difache"]
    }

    fn about(&self) -> &'static str {
        "DiFache decentralized-coherence CN cache (and no cache, noCC, DiFache-noAC) on the micro-benchmark"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<DifachePlan, Vec<Problem>> {
        DifachePlan::new(point)
    }
}

/// Percentiles of every event type's latency reported as `<event>_us_p<P>` (Fig. 12).
const PERCENTILES: [u32; 7] = [1, 10, 25, 50, 75, 90, 99];

const RESERVED: &[(&str, &str)] = &[("mutant", "dmsim fuzz --mutant")];

pub struct DifachePlan {
    config: Config,
    workload: Workload,
    layout: Layout,
    cluster: Cluster,
    seed: u64,
    check: CheckLevel,
    tracker: Option<Arc<Tracker>>,
    /// The measured window, shared by every node of the run (benchmark bookkeeping).
    window: Arc<Window>,
}

#[derive(Serialize, Deserialize)]
struct Report {
    stats: Stats,
    #[serde(default)]
    log: Vec<LoggedOp>,
}

fn at(prefix: &str, text: &str) -> Problem {
    match text.split_once(": ") {
        Some((field, reason)) if !field.contains(' ') => Problem::new(format!("{prefix}.{field}"), reason),
        _ => Problem::new(prefix, text),
    }
}

impl DifachePlan {
    pub fn new(point: &PointSpec) -> Result<DifachePlan, Vec<Problem>> {
        let mut workload: Workload = parse_typed(&point.workload, "workload").map_err(|p| vec![p])?;
        // FORD's TPC-C: one object per row of its tables.
        if let Some(t) = workload.transactions.as_ref().and_then(|t| t.tpcc.as_ref()) {
            if t.validate().is_empty() {
                workload.objects = t.rows();
            }
        }
        let presets = [
            ("default", Config::paper()),
            ("difache", Config::paper()),
            ("noac", Config::with_variant(Variant::Noac)),
            ("nocache", Config::with_variant(Variant::Nocache)),
            ("nocc", Config::with_variant(Variant::Nocc)),
            ("cmcache", Config::with_variant(Variant::Cmcache)),
        ];
        let mut config: Config =
            merge_options(&point.protocol_options, "protocol_options", &presets, RESERVED)
                .map_err(|p| vec![p])?;
        let mut out: Vec<Problem> = workload.validate().iter().map(|p| at("workload", p)).collect();
        out.extend(config.validate().iter().map(|p| at("protocol_options", p)));
        config.mutant = match super::mutants::named(&point.mutant) {
            Some(m) => m,
            None => {
                out.push(Problem::new("mutant", format!("difache has no mutant {:?}", point.mutant)));
                Default::default()
            }
        };
        if workload.atomic_ratio > 0.0 && config.variant.centralized() {
            out.push(Problem::new("workload.atomic_ratio", "CMCache has no atomic operations: use 0"));
        }
        if workload.transactions.is_some() && (config.crash_recovery || config.node_restarts) {
            out.push(Problem::new(
                "workload.transactions",
                "FORD's transactions run without crash_recovery and node_restarts",
            ));
        }
        if (workload.batch > 1 || workload.parts > 1) && config.variant.centralized() {
            out.push(Problem::new(
                "workload.batch",
                "CMCache has no batched or nested calls: use batch 1, parts 1",
            ));
        }
        if (workload.batch > 1 || workload.parts > 1) && (config.crash_recovery || config.node_restarts) {
            out.push(Problem::new(
                "workload.batch",
                "batched and nested accesses run without crash_recovery and node_restarts",
            ));
        }
        point.no_symmetric("DiFache", &mut out);
        if point.memory_nodes == 0 || point.memory_nodes > 1024 {
            out.push(Problem::new("cluster.memory_nodes", "must be in 1..=1024"));
        }
        if point.compute_nodes == 0 || point.compute_nodes > 1024 {
            out.push(Problem::new("cluster.compute_nodes", "must be in 1..=1024"));
        }
        if config.crash_recovery && point.compute_nodes > super::recovery::MAX_CNS {
            out.push(Problem::new(
                "protocol_options.crash_recovery",
                format!("the CN list holds at most {} compute nodes", super::recovery::MAX_CNS),
            ));
        }
        if !out.is_empty() {
            return Err(out);
        }
        workload.resolve(point.memory_nodes as u64);
        if workload.trace.is_some() {
            // [CHOICE] A trace's cache holds at most its (capped) working set: large-value
            // clusters would otherwise need gigabytes of buffers per CN.
            config.cache_objects = config.cache_objects.min(workload.objects as u32);
            config.track_key = workload.tracked_key();
        }
        let mut layout = Layout::new(point.memory_nodes, point.compute_nodes, &workload, &config);
        let stage_bytes = config.manager.threads as u64 * layout.object_bytes;
        let mut memory_bytes = layout.memory_region_bytes();
        if config.variant.centralized() {
            layout.manager = Some(match config.manager.place {
                ManagerPlace::Cn => (NodeId(point.memory_nodes + point.compute_nodes), 0),
                ManagerPlace::Mn => {
                    memory_bytes += stage_bytes;
                    (NodeId(0), layout.memory_region_bytes())
                }
            });
        }
        const REGION_MAX: u64 = 8 << 30;
        if memory_bytes > REGION_MAX {
            return Err(vec![Problem::new(
                "workload.objects",
                format!(
                    "objects x object_bytes needs {} bytes per memory node (at most 8 GiB)",
                    memory_bytes
                ),
            )]);
        }
        if layout.compute_region_bytes() > REGION_MAX {
            // With batches, the clients' scratch lanes can be what overflows.
            let field = if workload.batch > 1 { "workload.batch" } else { "protocol_options.cache_objects" };
            return Err(vec![Problem::new(
                field,
                format!(
                    "the cache and the clients' buffers need {} bytes per compute node (at most 8 GiB)",
                    layout.compute_region_bytes()
                ),
            )]);
        }
        let mut cluster = point.cluster(memory_bytes, layout.compute_region_bytes());
        if config.variant.centralized() && config.manager.place == ManagerPlace::Cn {
            // The manager's dedicated compute node, after the application's (no clients).
            cluster.kinds.push(NodeKind::Compute);
            cluster.region_size_bytes.push(stage_bytes.next_multiple_of(8));
        }
        let tracker = point.check.full().then(|| Arc::new(Tracker::default()));
        let window = Window::new(&workload);
        Ok(DifachePlan {
            config,
            workload,
            layout,
            cluster,
            seed: point.seed,
            check: point.check,
            tracker,
            window,
        })
    }

    /// Fig. 13 (right): the tracked object's accesses by type, its switches, and its read-hit
    /// share in the timeline window.
    fn tracked_metrics(&self, key: u64, tracked: &mut [(u64, u8)], m: &mut BTreeMap<String, f64>) {
        tracked.sort_unstable();
        let count = |kinds: &[u8], from: u64, to: u64| {
            tracked.iter().filter(|(t, k)| kinds.contains(k) && (from..to).contains(t)).count() as f64
        };
        let accesses = [0u8, 1, 2, 3, 4];
        let reads = [Event::ReadHit as u8, Event::ReadMiss as u8, Event::ReadBypass as u8];
        let hits = [Event::ReadHit as u8];
        let all = count(&accesses, 0, u64::MAX);
        m.insert("tracked_key".into(), key as f64);
        m.insert("tracked_accesses".into(), all);
        m.insert("tracked_read_ratio".into(), count(&reads, 0, u64::MAX) / all.max(1.0));
        m.insert("tracked_read_hit_share".into(), count(&hits, 0, u64::MAX) / all.max(1.0));
        m.insert("tracked_switches_on".into(), count(&[SWITCH_ON], 0, u64::MAX));
        m.insert("tracked_switches_off".into(), count(&[SWITCH_OFF], 0, u64::MAX));
        // Re-enables: a switch on after a switch off; the first one's gap after its switch off.
        let mut off_at = None;
        let (mut reenables, mut gap) = (0.0, None);
        for &(t, k) in tracked.iter() {
            if k == SWITCH_OFF {
                off_at = Some(t);
            } else if k == SWITCH_ON {
                if let Some(o) = off_at.take() {
                    reenables += 1.0;
                    gap.get_or_insert(t - o);
                }
            }
        }
        m.insert("tracked_reenables".into(), reenables);
        if let Some(g) = gap {
            m.insert("tracked_first_reenable_gap_us".into(), g as f64 / 1e3);
        }
        if let Some(&(t, _)) = tracked.iter().find(|(_, k)| *k == SWITCH_ON) {
            m.insert("tracked_first_on_us".into(), t as f64 / 1e3);
        }
        if self.config.timeline_window_ns > 0 {
            let (from, to) =
                (self.config.timeline_at_ns, self.config.timeline_at_ns + self.config.timeline_window_ns);
            let n = count(&accesses, from, to);
            m.insert("tracked_window_accesses".into(), n);
            m.insert("tracked_window_hit_share".into(), count(&hits, from, to) / n.max(1.0));
        }
    }

    fn checks(&self) -> Checks {
        Checks {
            adaptive: self.config.variant.adaptive(),
            owner_sets: self.config.owner_sets(self.layout.compute_nodes as usize),
            coherent: self.config.variant.coherent(),
            centralized: self.config.variant.centralized(),
        }
    }

    /// CMCache's manager: `threads` handler tasks serving the RPC port until the clients finish.
    fn manager<N: Nic>(&self, nic: N) -> NodeRun<()> {
        let manager = Manager::new(self.layout.clone(), self.config.clone(), self.window.clone());
        let threads = self.config.manager.threads;
        let daemons = rpc::serve(&nic, cmcache::PORT, cmcache::CHANNEL_BASE, threads, manager.clone());
        NodeRun {
            mains: Vec::new(),
            daemons,
            progress: None,
            state: None,
            collect: Box::new(move || {
                let stats = manager.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
                NodeReport {
                    extra: serde_json::to_value(Report { stats, log: Vec::new() })
                        .unwrap_or(serde_json::Value::Null),
                    error: report_error(manager.errors.first()),
                    ..NodeReport::default()
                }
            }),
        }
    }

    fn parse(reports: &[NodeReport]) -> Vec<Report> {
        reports.iter().filter_map(|r| r.extra_as::<Report>()).collect()
    }

    /// Every client's logged operations on one clock. On hardware each process logs on its
    /// own clock; comparing raw times across processes faked stale reads (the VM test failed
    /// on DiFache and CMCache with "reads" 1-16 ms stale: the processes' clock offsets).
    fn history(reports: &[NodeReport]) -> Vec<LoggedOp> {
        let logs: Vec<(Clock, Vec<LoggedOp>)> =
            reports.iter().filter_map(|r| Some((r.clock, r.extra_as::<Report>()?.log))).collect();
        on_reference_clock(logs.iter().map(|(c, l)| (*c, l.as_slice())))
    }

    /// `nic.node()`'s tasks; `incarnation` counts its restarts (distinct stamps and clients).
    fn incarnation<N: Nic>(&self, nic: N, incarnation: u32) -> NodeRun<()> {
        if self.layout.manager.is_some_and(|(m, _)| m == nic.node()) {
            return self.manager(nic);
        }
        if self.cluster.kinds[nic.node().index()] != NodeKind::Compute {
            return NodeRun::empty();
        }
        let cache = Cache::new(nic, self.layout.clone(), self.config.clone(), self.tracker.clone());
        if incarnation > 0 {
            cache.set_joining();
        }
        let latencies = Arc::new(Mutex::new(Vec::new()));
        let log = self.check.histories().then(OpLog::new);
        let cn = self.layout.cn_index(cache.nic.node()) as u32;
        let feed = self.workload.trace_file.as_deref().map(|path| {
            let nodes = self.layout.compute_nodes.max(1) as u32;
            TraceFeed::open(path, cn, nodes, self.workload.threads_per_node)
        });
        let mains = (0..self.workload.threads_per_node)
            .map(|t| {
                let clients = self.layout.compute_nodes as u32 * self.workload.threads_per_node;
                let client = cn * self.workload.threads_per_node + t + incarnation * clients;
                let task: Task = Box::pin(run_client(
                    cache.clone(),
                    t,
                    self.workload.clone(),
                    Requests { seed: self.seed, trace: feed.clone(), incarnation },
                    log.clone().map(|l| (l, client)),
                    latencies.clone(),
                    self.window.clone(),
                ));
                task
            })
            .collect();
        let watched = cache.clone();
        let daemons: Vec<Task> =
            if self.config.crash_recovery { vec![Box::pin(cache.clone().run_monitor())] } else { Vec::new() };
        NodeRun {
            mains,
            daemons,
            progress: Some(Arc::new(move || watched.stats.lock().unwrap_or_else(|e| e.into_inner()).ops)),
            state: None,
            collect: Box::new(move || {
                let stats = cache.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let log = log.map(|l| l.snapshot()).unwrap_or_default();
                let mut counters = BTreeMap::new();
                let mut error = report_error(cache.errors.first());
                if let Some(feed) = &feed {
                    let (served, passes) = feed.counts();
                    counters.insert("trace_requests".to_string(), served as f64);
                    counters.insert("trace_passes".to_string(), passes as f64);
                    error = error.or_else(|| feed.error.lock().unwrap_or_else(|e| e.into_inner()).clone());
                }
                NodeReport {
                    counters,
                    samples: std::mem::take(&mut *latencies.lock().unwrap_or_else(|e| e.into_inner())),
                    extra: serde_json::to_value(Report { stats, log }).unwrap_or(serde_json::Value::Null),
                    error,
                    ..NodeReport::default()
                }
            }),
        }
    }
}

impl Plan for DifachePlan {
    type State = ();

    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    fn setup<N: Nic>(&self, nic: &N) {
        let me = nic.node();
        if self.cluster.kinds[me.index()] != NodeKind::Memory {
            return;
        }
        for key in (0..self.layout.objects).filter(|&k| self.layout.home(k) == me) {
            for part in 0..self.layout.parts {
                let at = self.layout.object(key).offset_bytes + part * self.layout.part_bytes();
                nic.local().store(at, part_tag(key, part));
            }
        }
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun<()> {
        self.incarnation(nic, 0)
    }

    /// A restarted CN's new incarnation: fenced until it rejoined the CN list (`recovery.rs`).
    fn restart_node<N: Nic>(&self, nic: N) -> NodeRun<()> {
        self.incarnation(nic, 1)
    }

    /// A restarted memory node keeps the objects and the application's locks ([CHOICE]: the
    /// application's data is persistent or replicated) and the coordinator's words ([CHOICE]:
    /// the coordinator's state, hosted on memory node 0, survives like a ZooKeeper ensemble's);
    /// DiFache's own state there — owner sets and mode locks — is lost (§5: "as owner sets and
    /// mode locks are lost"). A restarted CN's memory is zeroed (a fresh process): its cache is
    /// empty (the mutant `restart-keeps-cache` keeps it).
    fn restart_reset<N: Nic>(&self, nic: N) -> Option<Box<dyn FnOnce() + Send>> {
        let node = nic.node();
        if self.cluster.kinds[node.index()] == NodeKind::Memory {
            let (layout, tracker) = (self.layout.clone(), self.tracker.clone());
            return Some(Box::new(move || {
                let region = nic.local();
                for key in (0..layout.objects).filter(|&k| layout.home(k) == node) {
                    region.store(layout.owner_set(key).offset_bytes, 0);
                }
                let base = layout.mode_locks_base(node.0).offset_bytes;
                for slot in 0..layout.mode_locks {
                    region.store(base + slot * 8, 0);
                }
                if let Some(t) = tracker {
                    t.memory_restarted();
                }
            }));
        }
        if self.config.mutant == super::mutants::Mutant::RestartKeepsCache {
            return Some(Box::new(|| {}));
        }
        None
    }

    fn metrics(&self, reports: &[NodeReport], elapsed: Nanos) -> BTreeMap<String, f64> {
        let mut total = Stats::default();
        for r in Self::parse(reports) {
            total.merge(&r.stats);
        }
        let mut samples: Vec<u64> = reports.iter().flat_map(|r| r.samples.iter().copied()).collect();
        let span = elapsed.saturating_sub(Nanos(total.first_op_ns.unwrap_or(0))).as_secs_f64();
        let ops = total.ops.max(1) as f64;
        let mut m = BTreeMap::new();
        // Timed mode: the measured window is the same for every client.
        let tput = if self.workload.measure_us > 0 {
            total.ops as f64 / self.workload.measure_us as f64
        } else {
            total.ops as f64 / span.max(1e-12) / 1e6
        };
        m.insert("throughput_mops".into(), tput);
        m.insert("ops".into(), total.ops as f64);
        // Objects (or parts) accessed per second: every operation touches `batch` of them.
        m.insert("objects_mops".into(), tput * self.workload.batch as f64);
        let e = total.events;
        let reads = (e[0] + e[1] + e[3]).max(1) as f64;
        m.insert("read_hit_ratio".into(), e[0] as f64 / reads);
        m.insert("cached_write_ratio".into(), e[2] as f64 / (e[2] + e[4]).max(1) as f64);
        m.insert("write_cached_share".into(), e[2] as f64 / e.iter().sum::<u64>().max(1) as f64);
        for (i, name) in EVENT_NAMES.iter().enumerate().take(EVENTS) {
            m.insert(format!("{name}_us_avg"), total.event_ns[i] as f64 / e[i].max(1) as f64 / 1e3);
            m.insert(format!("{name}_count"), e[i] as f64);
            let mut lat = total.event_samples[i].clone();
            if !lat.is_empty() {
                for p in PERCENTILES {
                    m.insert(format!("{name}_us_p{p}"), percentile(&mut lat, p as f64) / 1e3);
                }
                if self.config.plot_event == *name {
                    let at = percentile(&mut lat, self.config.plot_percentile as f64) / 1e3;
                    m.insert("plot_latency_us".into(), at);
                }
            }
        }
        m.insert("invalidations_per_op".into(), total.invalidations as f64 / ops);
        m.insert("remote_lookups_per_op".into(), total.remote_lookups as f64 / ops);
        m.insert("mode_switches".into(), (total.switches_on + total.switches_off) as f64);
        m.insert("evictions".into(), total.evictions as f64);
        if self.workload.trace_file.is_some() {
            // Requests taken from the file (all of the run, warm-up included), and how many times
            // the compute nodes started it over, at most.
            for name in ["trace_requests", "trace_passes"] {
                let v = reports.iter().filter_map(|r| r.counters.get(name));
                let v = if name == "trace_passes" { v.fold(0.0, |a: f64, b| a.max(*b)) } else { v.sum() };
                m.insert(name.into(), v);
            }
        }
        if self.workload.transactions.is_some() {
            // FORD (Fig. 14 bottom): `throughput_mops` counts committed transactions.
            m.insert("objects_mops".into(), tput * total.txn_objects as f64 / ops);
            m.insert("objects_per_txn".into(), total.txn_objects as f64 / ops);
            m.insert("read_write_share".into(), total.txn_read_write as f64 / ops);
            let attempts = (total.ops + total.txn_lock_aborts + total.txn_validation_aborts).max(1) as f64;
            m.insert(
                "abort_ratio".into(),
                (total.txn_lock_aborts + total.txn_validation_aborts) as f64 / attempts,
            );
            m.insert("lock_aborts".into(), total.txn_lock_aborts as f64);
            m.insert("validation_aborts".into(), total.txn_validation_aborts as f64);
            if self.workload.transactions.as_ref().is_some_and(|t| t.tpcc.is_some()) {
                m.insert("tpcc_wraps".into(), total.tpcc_wraps as f64);
            }
        }
        m.insert("validation_retries_per_op".into(), total.validation_retries as f64 / ops);
        // Diagnostics: where a write's time goes under the application's lock.
        let takes = total.app_lock_takes.max(1) as f64;
        m.insert("app_lock_retries_per_op".into(), total.app_lock_retries as f64 / ops);
        m.insert("app_lock_wait_us_avg".into(), total.app_lock_wait_ns as f64 / takes / 1e3);
        m.insert("app_lock_hold_us_avg".into(), total.app_lock_hold_ns as f64 / takes / 1e3);
        // Object 0 (the most popular one): its lock's hold time, and its summed holds over the
        // measured window (near 1: every write to it queues, a closed loop's ceiling). Every
        // hold released after the window opened counts whole, also one begun before it or
        // released after it closed, so the ratio can pass 1 (CMCache's reach 3.2 in Fig. 11).
        let hot = total.hot_lock_takes.max(1) as f64;
        m.insert("hot_lock_hold_us_avg".into(), total.hot_lock_hold_ns as f64 / hot / 1e3);
        m.insert("hot_lock_writes_per_op".into(), total.hot_lock_takes as f64 / ops);
        if self.workload.measure_us > 0 {
            let busy = total.hot_lock_hold_ns as f64 / (self.workload.measure_us as f64 * 1e3);
            m.insert("hot_lock_busy".into(), busy);
        }
        m.insert("owner_rechecks_lost".into(), total.owner_rechecks_lost as f64);
        m.insert("bypass_rechecks".into(), total.bypass_rechecks as f64);
        if self.workload.atomic_ratio > 0.0 {
            m.insert("atomics_per_op".into(), total.atomics as f64 / ops);
            m.insert("atomic_switches".into(), total.atomic_switches as f64);
            m.insert("atomic_stale_reads".into(), total.atomic_stale_reads as f64);
        }
        // Only when one happened (the hardware-only race of `Cache::own_mode`; the simulator
        // cannot produce it), so the simulator's outputs keep their keys.
        if total.mode_repairs > 0 {
            m.insert("mode_repairs".into(), total.mode_repairs as f64);
        }
        if total.cas_replays > 0 {
            m.insert("cas_replays".into(), total.cas_replays as f64);
        }
        m.insert("manager_rpcs_per_op".into(), total.rpcs as f64 / ops);
        m.insert("manager_waits".into(), total.manager_waits as f64);
        if self.config.crash_recovery {
            m.insert("crashes_detected".into(), total.crashes_detected as f64);
            m.insert("recoveries".into(), total.recoveries as f64);
            m.insert("locks_released".into(), total.locks_released as f64);
            m.insert("headers_dropped".into(), total.headers_dropped as f64);
            if let Some(t) = total.first_disable_ns {
                m.insert("caching_disabled_at_us".into(), t as f64 / 1e3);
            }
            if let Some(t) = total.last_reenable_ns {
                m.insert("caching_reenabled_at_us".into(), t as f64 / 1e3);
            }
            if self.config.node_restarts {
                m.insert("memory_failures_handled".into(), total.mn_failures as f64);
                m.insert("memory_sync_rounds".into(), total.mn_rounds as f64);
                m.insert("rejoins".into(), total.rejoins as f64);
                m.insert("timed_out_ops".into(), total.timeouts as f64);
            }
        }
        let bucket = self.config.timeline_bucket_ns;
        if bucket > 0 && self.config.timeline_window_ns > 0 {
            let first = (self.config.timeline_at_ns / bucket) as usize;
            let count = (self.config.timeline_window_ns / bucket) as usize;
            let ops: u64 = total.timeline.iter().skip(first).take(count).sum();
            m.insert("window_mops".into(), ops as f64 / (self.config.timeline_window_ns as f64 / 1e3));
        }
        if let Some(key) = self.config.track_key {
            self.tracked_metrics(key, &mut total.tracked, &mut m);
        }
        if self.check.histories() && self.config.variant.coherent() {
            let log = Self::history(reports);
            if let Ok(n) = check_regular(&log) {
                m.insert("history_reads_checked".into(), n as f64);
            }
            m.insert(
                "history_writes_acknowledged".into(),
                log.iter().filter(|o| o.write.is_some() && o.return_ns.is_some()).count() as f64,
            );
        }
        if !samples.is_empty() {
            m.insert("latency_us_p50".into(), percentile(&mut samples, 50.0) / 1e3);
            m.insert("latency_us_p99".into(), percentile(&mut samples, 99.0) / 1e3);
            let mean = samples.iter().sum::<u64>() as f64 / samples.len() as f64;
            m.insert("latency_us_avg".into(), mean / 1e3);
        }
        m
    }

    fn ops(&self, reports: &[NodeReport]) -> u64 {
        Self::parse(reports).iter().map(|r| r.stats.ops).sum()
    }

    fn recovers_from(&self, fault: FaultKind) -> bool {
        match fault {
            FaultKind::ComputeCrash => self.config.crash_recovery,
            FaultKind::MemoryCrash => self.config.crash_recovery && self.config.node_restarts,
            FaultKind::QpError => false,
        }
    }

    fn invariants(&self, _states: Vec<Option<Arc<()>>>) -> Option<Invariants> {
        let tracker = self.tracker.clone()?;
        let (layout, checks) = (self.layout.clone(), self.checks());
        Some(Box::new(move |memory: Memory, _| {
            invariants(&layout, checks, &tracker, memory).map_err(|(name, m)| Violation::new(name, m))
        }))
    }

    fn verify(&self, reports: &[NodeReport], memory: Option<Memory>) -> Result<(), Violation> {
        if !self.config.variant.coherent() {
            return Ok(());
        }
        let stale: u64 = Self::parse(reports).iter().map(|r| r.stats.atomic_stale_reads).sum();
        if stale > 0 {
            return Err(Violation::new(
                "atomics see the latest value (a CAS under the application's lock finds the value its client read)",
                format!("{stale} atomic CAS(es) found another value than the client had just read under the lock: a stale read"),
            ));
        }
        let log = Self::history(reports);
        check_regular(&log)
            .map_err(|m| Violation::new("regular reads (no stale read after a completed write)", m))?;
        if self.workload.transactions.is_some() && self.check.histories() {
            let txns: Vec<TxnRecord> = Self::parse(reports).into_iter().flat_map(|r| r.stats.txns).collect();
            serializable(&txns)
                .map_err(|m| Violation::new("FORD's committed transactions are serializable", m))?;
        }
        if let Some(memory) = memory {
            check_memory(&self.layout, &log, memory)
                .map_err(|m| Violation::new("no acknowledged write lost (memory at the end)", m))?;
        }
        if let (Some(memory), Some(tracker)) = (memory, &self.tracker) {
            invariants(&self.layout, self.checks(), tracker, memory)
                .map_err(|(name, m)| Violation::new(name, m))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(clock: Clock, log: Vec<LoggedOp>) -> NodeReport {
        let extra = serde_json::to_value(Report { stats: Stats::default(), log }).unwrap();
        NodeReport { extra, clock, ..NodeReport::default() }
    }

    fn op(client: u32, write: Option<u64>, seen: Option<u64>, invoke_ns: u64, return_ns: u64) -> LoggedOp {
        LoggedOp { client, key: 1, write, seen, invoke_ns, return_ns: Some(return_ns) }
    }

    #[test]
    fn reads_are_checked_on_the_reference_clock_not_on_each_process_clock() {
        // Goal: on hardware CN1's clock started 50 µs after the reference, so its write at local
        // [40, 60] µs really ran at [90, 110] µs, overlapping CN0's read of the initial value at
        // [100, 101] µs. Compared raw, the write "completed" 40 µs before the read: a false
        // stale read, which is what failed the VM test on DiFache and CMCache.
        let read = report(Clock::default(), vec![op(0, None, Some(0), 100_000, 101_000)]);
        let write = op(2, Some(7), None, 40_000, 60_000);
        let late = Clock { offset_ns: -50_000, uncertainty_ns: 2_000 };
        let raw: Vec<LoggedOp> = [read.clone(), report(late, vec![write])]
            .iter()
            .flat_map(|r| r.extra_as::<Report>().expect("a DiFache report").log)
            .collect();
        assert!(check_regular(&raw).is_err(), "the raw times must look stale, or this test shows nothing");
        assert_eq!(DifachePlan::history(&[read.clone(), report(late, vec![write])]).len(), 2);
        assert_eq!(check_regular(&DifachePlan::history(&[read.clone(), report(late, vec![write])])), Ok(1));
        // A real stale read stays one: the same write, done 100 µs earlier on the reference clock.
        let early = op(2, Some(7), None, 0, 10_000);
        let e = check_regular(&DifachePlan::history(&[read, report(late, vec![early])])).unwrap_err();
        assert!(e.contains("read object 1 = 0x0"), "{e}");
    }
}
