//! The SELCC fuzz target: the §7.1 micro-benchmark on a small cluster (a few compute nodes, a
//! handful of hot GCLs, mixed reads and writes of unique values), in check mode.
//!
//! Checks, in the order they can fire:
//! 1. after every event: SELCC's S1–S3 and directory soundness (`selcc::check::check_coherence`),
//!    the oracle's read-latest check (S4), and S8's "no reader bit beyond the compute nodes"
//!    (a borrow or carry in the latch word);
//! 2. protocol assertions (a panic is the checker `"panic"`);
//! 3. after the run: per-key linearizability and sequential consistency of the client history
//!    (write order = XUnLock order, which the simulator knows), then, when every node drained,
//!    S6/S7/S8 at quiescence (memory holds the latest writes, every latch is free);
//! 4. liveness: a run that does not finish within the scenario's virtual-time bound, or stalls,
//!    is a violation — unless a node crashed, which SELCC cannot recover from (reported as such).
//!
//! Swarm testing (TigerBeetle VOPR style): each seed draws its own read ratio, skew, locality,
//! cache size (eviction-heavy or not), fabric jitter, lease threshold, message deferral and fault
//! rates from the ranges in the scenario, and [`FuzzTarget::describe_swarm`] prints them.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use dmsim_protocols::nic::{Cluster, Nic, NodeId, NodeKind};
use dmsim_protocols::selcc::check::{check_coherence, check_quiescent, Oracle};
use dmsim_protocols::selcc::{latch, ops, setup_memory_node, Config, Layout, Mutant, Node, NodeState};
use dmsim_protocols::workload::micro::{MicroSpec, MicroStream};
use dmsim_protocols::workload::rng_for_thread;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use serde_json::Value;

use super::target::{
    describe_stop, run_guarded, Failure, Faults, FuzzTarget, RunRequest, RunResult, Verdict, LAST_TRACE_LINES,
};
use crate::check::{
    check_linearizability, check_sequential_consistency, ClientId, HistoryRecorder, HistorySink, Key, Op,
};
use crate::engine::{FaultPlan, Sim, SimConfig, StopReason};
use crate::fabric::Profile;
use crate::scenario::load::{parse_typed, resolve_profile};
use crate::scenario::{Problem, ScenarioFile};
use crate::simnic::SimNic;
use crate::trace::TraceSink;

/// Every mutant: CLI name, variant, what it breaks. The `match` in [`describe`] keeps this list
/// complete: a new `Mutant` variant fails to compile until it is described here.
pub const MUTANTS: &[(&str, Mutant)] = &[
    ("release-before-flush", Mutant::ReleaseBeforeFlush),
    ("forward-without-dirty-bounds", Mutant::ForwardWithoutDirtyBounds),
    ("read-through-modified", Mutant::ReadThroughModified),
    ("reader-keeps-bit", Mutant::ReaderKeepsBit),
    ("downgrade-forward-before-faa", Mutant::DowngradeForwardBeforeFaa),
    ("release-without-flush", Mutant::ReleaseWithoutFlush),
    ("handler-without-local-latch", Mutant::HandlerWithoutLocalLatch),
    ("release-exclusive-by-cas", Mutant::ReleaseExclusiveByCas),
    ("reuse-frame-before-flush", Mutant::ReuseFrameBeforeFlush),
    ("drop-without-reply", Mutant::DropWithoutReply),
    ("upgrade-without-fallback", Mutant::UpgradeWithoutFallback),
];

/// One line on what `mutant` breaks.
pub fn describe(mutant: Mutant) -> &'static str {
    match mutant {
        Mutant::None => "the correct protocol",
        Mutant::ReleaseBeforeFlush => {
            "exclusive release posts the latch FAA a round trip before the dirty WRITE"
        }
        Mutant::ForwardWithoutDirtyBounds => "Case-1 forwarding drops the old owner's dirty bounds",
        Mutant::ReadThroughModified => {
            "a reader meeting a Modified copy keeps its bit and reads stale memory"
        }
        Mutant::ReaderKeepsBit => "a reader meeting a writer does not undo its +BIT FAA before invalidating",
        Mutant::DowngradeForwardBeforeFaa => {
            "Case 2 forwards the copy before the downgrade FAA instead of after"
        }
        Mutant::ReleaseWithoutFlush => "releasing a Modified copy skips the dirty WRITE",
        Mutant::HandlerWithoutLocalLatch => "the invalidation handler serves without the frame's local latch",
        Mutant::ReleaseExclusiveByCas => {
            "exclusive release by CAS, lost when a failed reader's bit is in the word"
        }
        Mutant::ReuseFrameBeforeFlush => {
            "batched eviction flushes from a frame that is reused before the WRITE"
        }
        Mutant::DropWithoutReply => "a dropped invalidation gets no \"dropped\" reply",
        Mutant::UpgradeWithoutFallback => "upgrade retries its CAS forever instead of release-then-acquire",
    }
}

/// The mutant named `name` (`"none"` is the correct protocol).
pub fn mutant_named(name: &str) -> Option<Mutant> {
    if name == "none" {
        return Some(Mutant::None);
    }
    MUTANTS.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
}

/// The `workload` section of a SELCC fuzz scenario: fixed sizes plus the ranges each seed's swarm
/// draws from.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FuzzWorkload {
    /// Pre-allocated GCLs, all shared (hot lines).
    #[serde(default = "default_gcl_count")]
    pub gcl_count: u64,
    #[serde(default = "default_ops")]
    pub ops_per_thread: u64,
    /// `[low, high]`: each seed draws its read ratio uniformly in between.
    #[serde(default = "default_read_ratio")]
    pub read_ratio: [f64; 2],
    /// Each seed picks one.
    #[serde(default = "default_zipf")]
    pub zipf_theta: Vec<f64>,
    #[serde(default = "default_locality")]
    pub locality: [f64; 2],
    /// Each seed picks one; small values force eviction.
    #[serde(default = "default_cache_frames")]
    pub cache_frames: Vec<u32>,
    /// Fabric jitter bound per seed, picked from these (ns).
    #[serde(default = "default_jitter")]
    pub jitter_ns_max: Vec<u64>,
    /// Lease threshold γ per seed (`null` = Inf).
    #[serde(default = "default_lease")]
    pub lease_gamma: Vec<Option<u32>>,
    /// Message deferral on or off per seed.
    #[serde(default = "default_defer")]
    pub defer_messages: Vec<bool>,
    /// Roughly how long a run lasts (ns): faults are placed in `[0, horizon_ns)`.
    #[serde(default = "default_horizon")]
    pub horizon_ns: u64,
    /// Check the invariants after every event (off: only the history and quiescence checks).
    #[serde(default = "yes")]
    pub check_every_event: bool,
}

fn default_gcl_count() -> u64 {
    3
}
fn default_ops() -> u64 {
    6
}
fn default_read_ratio() -> [f64; 2] {
    [0.2, 0.8]
}
fn default_zipf() -> Vec<f64> {
    vec![0.0, 0.99]
}
fn default_locality() -> [f64; 2] {
    [0.0, 0.5]
}
fn default_cache_frames() -> Vec<u32> {
    vec![6, 32]
}
fn default_jitter() -> Vec<u64> {
    vec![0, 300, 3000]
}
fn default_lease() -> Vec<Option<u32>> {
    vec![None, Some(2), Some(256)]
}
fn default_defer() -> Vec<bool> {
    vec![true, false]
}
fn default_horizon() -> u64 {
    100_000
}
fn yes() -> bool {
    true
}

/// What one seed drew.
#[derive(Clone, Debug, PartialEq)]
pub struct Swarm {
    pub read_ratio: f64,
    pub zipf_theta: f64,
    pub locality: f64,
    pub cache_frames: u32,
    pub jitter_ns_max: u64,
    pub lease_gamma: Option<u32>,
    pub defer_messages: bool,
    pub faults: FaultPlan,
    /// `(compute index, at_ns)` of a crash, if one was drawn.
    pub crash: Option<(usize, u64)>,
}

impl std::fmt::Display for Swarm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "reads={:.2} zipf={} locality={:.2} frames={} jitter≤{}ns lease={} defer={}",
            self.read_ratio,
            self.zipf_theta,
            self.locality,
            self.cache_frames,
            self.jitter_ns_max,
            self.lease_gamma.map_or("inf".to_string(), |g| g.to_string()),
            self.defer_messages
        )?;
        let p = &self.faults;
        if p.send_delay_permille > 0 {
            write!(f, " delay={}‰≤{}ns", p.send_delay_permille, p.send_delay_ns_max)?;
        }
        if p.send_drop_permille > 0 {
            write!(f, " drop={}‰(rto {}ns)", p.send_drop_permille, p.send_retransmit_ns)?;
        }
        for (node, from, until) in &p.pauses {
            if *until == u64::MAX {
                write!(f, " crash=n{}@{from}ns", node.0)?;
            } else {
                write!(f, " pause=n{}@{from}..{until}ns", node.0)?;
            }
        }
        Ok(())
    }
}

/// A SELCC fuzz scenario, validated.
#[derive(Clone, Debug)]
pub struct SelccTarget {
    pub file: ScenarioFile,
    pub workload: FuzzWorkload,
    pub config: Config,
    pub profile: Profile,
    pub time_ns_max: u64,
    pub events_max: u64,
}

/// Deliberately different from the workload streams (which use the seed directly).
const SWARM_SALT: u64 = 0x5157_4152_4d00_0001;

impl SelccTarget {
    /// Parse and validate a scenario (its JSON text); every problem carries its field path.
    pub fn from_json(text: &str) -> Result<SelccTarget, Vec<Problem>> {
        let raw: Value = serde_json::from_str(text).map_err(|e| {
            vec![Problem::new("", format!("malformed JSON at line {} column {}: {e}", e.line(), e.column()))]
        })?;
        let file: ScenarioFile = parse_typed(&raw, "").map_err(|p| vec![p])?;
        let mut problems = Vec::new();
        if file.protocol != "selcc" {
            problems
                .push(Problem::new("protocol", format!("fuzzing knows \"selcc\", not {:?}", file.protocol)));
        }
        if file.cluster.memory_nodes == 0 {
            problems.push(Problem::new("cluster.memory_nodes", "must be at least 1"));
        }
        if file.cluster.compute_nodes < 2 {
            problems.push(Problem::new("cluster.compute_nodes", "coherence needs at least 2 compute nodes"));
        }
        let profile = match resolve_profile(&file.cluster) {
            Ok(p) => Some(p),
            Err(mut p) => {
                problems.append(&mut p);
                None
            }
        };
        // protocol_options: fields of selcc::Config over the SELCC defaults.
        let mut merged = serde_json::to_value(Config::selcc()).expect("config serializes");
        match &file.protocol_options {
            Value::Null => {}
            Value::Object(options) => {
                for (k, v) in options {
                    if merged.get(k).is_none() {
                        problems.push(Problem::new(format!("protocol_options.{k}"), "unknown SELCC option"));
                    }
                    merged[k] = v.clone();
                }
            }
            _ => problems.push(Problem::new("protocol_options", "must be an object")),
        }
        let config: Option<Config> = match parse_typed(&merged, "protocol_options") {
            Ok(c) => Some(c),
            Err(p) => {
                problems.push(p);
                None
            }
        };
        let workload: Option<FuzzWorkload> = match parse_typed(&file.workload, "workload") {
            Ok(w) => Some(w),
            Err(p) => {
                problems.push(p);
                None
            }
        };
        let (Some(profile), Some(config), Some(workload)) = (profile, config, workload) else {
            return Err(problems);
        };
        problems.extend(validate(&config, &workload, file.cluster.compute_nodes as usize));
        if !problems.is_empty() {
            return Err(problems);
        }
        let (time_ns_max, events_max) = (file.run.time_ns_max, file.run.events_max);
        Ok(SelccTarget { file, workload, config, profile, time_ns_max, events_max })
    }

    /// The swarm configuration of `seed` (a pure function of the seed and the scenario).
    pub fn swarm(&self, seed: u64, faults: Faults) -> Swarm {
        let w = &self.workload;
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ SWARM_SALT);
        let mut unit = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let between = |r: [f64; 2], u: f64| r[0] + (r[1] - r[0]) * u;
        let read_ratio = between(w.read_ratio, unit());
        let locality = between(w.locality, unit());
        let pick = |n: usize, u: f64| ((u * n as f64) as usize).min(n - 1);
        let zipf_theta = w.zipf_theta[pick(w.zipf_theta.len(), unit())];
        let cache_frames = w.cache_frames[pick(w.cache_frames.len(), unit())];
        let jitter_ns_max = w.jitter_ns_max[pick(w.jitter_ns_max.len(), unit())];
        let lease_gamma = w.lease_gamma[pick(w.lease_gamma.len(), unit())];
        let defer_messages = w.defer_messages[pick(w.defer_messages.len(), unit())];
        let compute = self.file.cluster.compute_nodes as usize;
        let memory = self.file.cluster.memory_nodes;
        let horizon = w.horizon_ns.max(1);
        let mut plan = FaultPlan::default();
        // Rates are drawn even when a family is off, so enabling one family never changes what
        // the others draw for the same seed.
        let (delay_rate, delay_max) = ([0, 50, 200][pick(3, unit())], [2_000, 20_000][pick(2, unit())]);
        let (drop_rate, rto) = ([0, 20, 100][pick(3, unit())], [10_000, 50_000][pick(2, unit())]);
        let pause_count = pick(3, unit());
        let mut pauses = Vec::new();
        for _ in 0..2 {
            let node = NodeId(memory + pick(compute, unit()) as u16);
            let from = (unit() * horizon as f64) as u64;
            let length = 2_000 + (unit() * 48_000.0) as u64;
            pauses.push((node, from, from + length));
        }
        let crash_at = (unit() * horizon as f64) as u64;
        let crash_node = pick(compute, unit());
        let crash_drawn = unit() < 0.5;
        if faults.delay {
            plan.send_delay_permille = delay_rate;
            plan.send_delay_ns_max = delay_max;
        }
        if faults.drop {
            plan.send_drop_permille = drop_rate;
            plan.send_retransmit_ns = rto;
        }
        if faults.pause {
            plan.pauses.extend(pauses.into_iter().take(pause_count));
        }
        let crash = (faults.crash && crash_drawn).then_some((crash_node, crash_at));
        if let Some((index, at)) = crash {
            plan.pauses.push((NodeId(memory + index as u16), at, u64::MAX));
        }
        Swarm {
            read_ratio,
            zipf_theta,
            locality,
            cache_frames,
            jitter_ns_max,
            lease_gamma,
            defer_messages,
            faults: plan,
            crash,
        }
    }
}

fn validate(config: &Config, w: &FuzzWorkload, compute: usize) -> Vec<Problem> {
    let mut out = Vec::new();
    for p in config.validate() {
        out.push(Problem::new(format!("protocol_options.{p}"), "invalid"));
    }
    if config.mode != dmsim_protocols::selcc::Mode::Selcc {
        out.push(Problem::new("protocol_options.mode", "fuzzing runs SELCC mode"));
    }
    if config.mutant != Mutant::None {
        out.push(Problem::new(
            "protocol_options.mutant",
            "choose mutants with --mutant, not in the scenario",
        ));
    }
    if w.gcl_count == 0 {
        out.push(Problem::new("workload.gcl_count", "must be at least 1"));
    }
    for (name, r) in [("read_ratio", w.read_ratio), ("locality", w.locality)] {
        if !(0.0..=1.0).contains(&r[0]) || !(0.0..=1.0).contains(&r[1]) || r[0] > r[1] {
            out.push(Problem::new(format!("workload.{name}"), "must be [low, high] within [0, 1]"));
        }
    }
    let lists: [(&str, usize); 5] = [
        ("zipf_theta", w.zipf_theta.len()),
        ("cache_frames", w.cache_frames.len()),
        ("jitter_ns_max", w.jitter_ns_max.len()),
        ("lease_gamma", w.lease_gamma.len()),
        ("defer_messages", w.defer_messages.len()),
    ];
    for (name, len) in lists {
        if len == 0 {
            out.push(Problem::new(format!("workload.{name}"), "needs at least one value"));
        }
    }
    for (i, frames) in w.cache_frames.iter().enumerate() {
        let c = Config { cache_frames: *frames, ..config.clone() };
        for p in c.validate() {
            out.push(Problem::new(format!("workload.cache_frames[{i}]"), p));
        }
    }
    if w.zipf_theta.iter().any(|t| !(t.is_finite() && *t >= 0.0)) {
        out.push(Problem::new("workload.zipf_theta", "values must be finite and ≥ 0"));
    }
    let spec = micro_spec(config, w, 0.5, 0.0, 0.0);
    for p in spec.validate(compute) {
        out.push(Problem::new("workload", p));
    }
    out
}

fn micro_spec(
    config: &Config,
    w: &FuzzWorkload,
    read_ratio: f64,
    zipf_theta: f64,
    locality: f64,
) -> MicroSpec {
    MicroSpec {
        gcl_count: w.gcl_count,
        gcl_size_bytes: config.gcl_size_bytes,
        sharing_ratio: 1.0,
        read_ratio,
        zipf_theta,
        locality,
        threads_per_node: config.threads_per_node,
        ops_per_thread: w.ops_per_thread,
        // One word per operation: each history key is one 8-byte word.
        access_bytes: 8,
    }
}

/// What the after-every-event checker saw first.
type Seen = Rc<RefCell<Option<(String, String)>>>;

impl FuzzTarget for SelccTarget {
    fn mutants(&self) -> Vec<(&'static str, &'static str)> {
        MUTANTS.iter().map(|(n, m)| (*n, describe(*m))).collect()
    }

    fn describe_swarm(&self, seed: u64, faults: Faults) -> String {
        self.swarm(seed, faults).to_string()
    }

    fn run(&self, request: &RunRequest) -> RunResult {
        let mutant =
            mutant_named(&request.mutant).unwrap_or_else(|| panic!("unknown mutant {:?}", request.mutant));
        let swarm = self.swarm(request.seed, request.faults);
        let w = &self.workload;
        let config = Config {
            cache_frames: swarm.cache_frames,
            lease_gamma: swarm.lease_gamma,
            defer_messages: swarm.defer_messages,
            mutant,
            ..self.config.clone()
        };
        let spec = micro_spec(&config, w, swarm.read_ratio, swarm.zipf_theta, swarm.locality);

        // Cluster: memory nodes first, then compute nodes (as the runners lay them out).
        let cluster_spec = &self.file.cluster;
        let mut kinds = vec![NodeKind::Memory; cluster_spec.memory_nodes as usize];
        kinds.extend(std::iter::repeat_n(NodeKind::Compute, cluster_spec.compute_nodes as usize));
        let shape = Cluster { kinds: kinds.clone(), region_size_bytes: vec![0; kinds.len()] };
        let layout = Layout::new(&shape, &config, w.gcl_count, 0);
        let cluster = Cluster { region_size_bytes: layout.region_sizes(&kinds), kinds };
        let mut profile = self.profile.clone();
        profile.jitter_ns_max = swarm.jitter_ns_max;
        let mut sim_config = SimConfig::new(cluster.clone(), profile, request.seed);
        sim_config.strategy = request.strategy.clone();
        sim_config.record_choices = true;
        sim_config.trace = if request.trace { TraceSink::Memory(Vec::new()) } else { TraceSink::Off };
        sim_config.torn_large_verbs = cluster_spec.torn_large_verbs;
        sim_config.time_ns_max = self.time_ns_max;
        sim_config.events_max = self.events_max;
        sim_config.faults = swarm.faults.clone();
        let mut sim = Sim::new(sim_config);
        for mn in cluster.memory_nodes() {
            setup_memory_node(&layout, mn, &sim.region(mn));
        }

        let oracle = Arc::new(Oracle::new(config.gcl_size_bytes));
        let recorder = HistoryRecorder::with_write_order();
        let compute = cluster.compute_nodes();
        let mut nodes: Vec<Arc<Node<SimNic>>> = Vec::new();
        for (index, &cn) in compute.iter().enumerate() {
            let node = Node::new(sim.nic(cn), config.clone(), layout.clone(), Some(oracle.clone()));
            for task in ops::daemons(&node) {
                sim.spawn_daemon(cn, task);
            }
            *node.workers_running.lock().unwrap() = config.threads_per_node;
            for thread in 0..config.threads_per_node {
                let stream =
                    MicroStream::new(&spec, index, compute.len(), rng_for_thread(request.seed, cn.0, thread));
                let client = ClientId(index as u32 * config.threads_per_node + thread);
                let words = config.gcl_size_bytes as u64 / 8;
                sim.spawn_main(cn, worker(node.clone(), thread, stream, recorder.clone(), client, words));
            }
            nodes.push(node);
        }
        let seen: Seen = Rc::new(RefCell::new(None));
        if w.check_every_event {
            install_checker(&mut sim, &layout, &nodes, &oracle, seen.clone(), w.gcl_count);
        }

        let (outcome, panic) = run_guarded(&mut sim);
        let at_ns = outcome.end_time.0;
        let mut verdict = Verdict::Pass;
        // The first violation found wins.
        let fail = |verdict: &mut Verdict, checker: String, message: String| {
            if !matches!(verdict, Verdict::Violation(_)) {
                *verdict = Verdict::Violation(Failure { checker, message, at_ns, last_trace: Vec::new() });
            }
        };
        // 1–2: what stopped the run.
        if let Some(message) = panic {
            fail(&mut verdict, "panic".into(), message);
        } else if let StopReason::Violation { message } = &outcome.stop {
            let (checker, detail) = seen.borrow().clone().unwrap_or(("invariant".into(), message.clone()));
            fail(&mut verdict, checker, detail);
        }
        if let Some(v) = oracle.violations().first() {
            fail(&mut verdict, v.invariant.to_string(), v.to_string());
        }
        // 3: the history (pending operations stay pending: checked on every stop).
        if matches!(verdict, Verdict::Pass) {
            let history = recorder.snapshot();
            if let Err(v) = check_linearizability(&history) {
                fail(&mut verdict, "linearizability".into(), v.to_string());
            } else if let Err(v) = check_sequential_consistency(&history) {
                fail(&mut verdict, "sequential consistency".into(), v.to_string());
            }
        }
        let crashed = swarm.crash.filter(|(_, at)| *at <= outcome.end_time.0);
        if matches!(verdict, Verdict::Pass) {
            match &outcome.stop {
                StopReason::Finished => {
                    let gcls: Vec<_> = (0..w.gcl_count).map(|i| layout.gcl(i)).collect();
                    let regions: Vec<_> =
                        (0..cluster.node_count()).map(|i| sim.region(NodeId(i as u16))).collect();
                    let word =
                        |a: dmsim_protocols::nic::RemoteAddr| regions[a.node.index()].load(a.offset_bytes);
                    if let Err(v) = check_quiescent(&layout, &gcls, &word, &oracle) {
                        fail(&mut verdict, v.invariant.to_string(), v.to_string());
                    }
                }
                stop => match crashed {
                    Some((index, at)) => {
                        verdict = Verdict::Crash(format!(
                            "crash: protocol defines no recovery (compute node {index} crashed at {at}ns; run {})",
                            describe_stop(stop)
                        ));
                    }
                    None => fail(&mut verdict, "liveness".into(), format!("the run {}", describe_stop(stop))),
                },
            }
        }
        let mut trace_lines = outcome.trace_lines;
        if let Verdict::Violation(f) = &mut verdict {
            let skip = trace_lines.len().saturating_sub(LAST_TRACE_LINES);
            f.last_trace = trace_lines[skip..].to_vec();
        }
        if !request.trace {
            trace_lines.clear();
        }
        RunResult {
            verdict,
            choice_log: outcome.choice_log,
            trace_hash: outcome.trace_hash,
            decisions: outcome.decisions,
            ready_decisions: outcome.ready_decisions,
            events: outcome.events,
            end_ns: outcome.end_time.0,
            swarm: swarm.to_string(),
            trace_lines,
            marks: outcome.marks,
        }
    }
}

/// After every event: S1–S3 and directory soundness, S4 (oracle), S8 bits in range.
fn install_checker(
    sim: &mut Sim,
    layout: &Layout,
    nodes: &[Arc<Node<SimNic>>],
    oracle: &Arc<Oracle>,
    seen: Seen,
    gcl_count: u64,
) {
    let states: Vec<Arc<NodeState>> = nodes.iter().map(|n| n.state.clone()).collect();
    let regions: Vec<_> = (0..sim.cluster().node_count()).map(|i| sim.region(NodeId(i as u16))).collect();
    let layout = layout.clone();
    let oracle = oracle.clone();
    let compute = layout.compute_count();
    let valid = if compute >= 64 { u64::MAX } else { (1u64 << compute) - 1 };
    let latches: Vec<_> = (0..gcl_count).map(|i| (i, Layout::latch(layout.gcl(i)))).collect();
    sim.set_checker(move |_now| {
        let report = |checker: &str, detail: String| {
            *seen.borrow_mut() = Some((checker.to_string(), detail.clone()));
            Err(detail)
        };
        for (i, l) in &latches {
            let word = regions[l.node.index()].load(l.offset_bytes);
            if latch::readers(word) & !valid != 0 {
                return report(
                    "S8 latch bits in range",
                    format!("GCL {i}: latch {word:#x} has reader bits beyond the {compute} compute nodes"),
                );
            }
        }
        let views: Vec<&NodeState> = states.iter().map(|s| s.as_ref()).collect();
        let word = |g: dmsim_protocols::nic::RemoteAddr| regions[g.node.index()].load(g.offset_bytes);
        if let Err(v) = check_coherence(&views, &layout, &word) {
            return report(v.invariant, v.to_string());
        }
        if let Some(v) = oracle.violations().first() {
            return report(v.invariant, v.to_string());
        }
        Ok(())
    });
}

/// One client thread: the micro-benchmark's operations, each recorded in the history (writes
/// commit at XUnLock, the write serialisation point of SELCC §4), then drain if last.
async fn worker(
    node: Arc<Node<SimNic>>,
    thread: u32,
    stream: MicroStream,
    recorder: HistoryRecorder,
    client: ClientId,
    words_per_gcl: u64,
) {
    let mut w = node.worker(thread);
    let mut sequence = 0u64;
    for op in stream {
        let g = node.layout.gcl(op.gcl_index);
        let key = Key(op.gcl_index * words_per_gcl + op.offset_bytes as u64 / 8);
        if op.write {
            sequence += 1;
            // Unique per (node, thread, sequence) and never 0 (the initial value).
            let value = (node.node.0 as u64 + 1) << 48 | (thread as u64) << 32 | sequence;
            let id = recorder.invoke(client, Op::Write { key, value }, w.nic.now());
            let mut h = node.xlock(&mut w, g).await.unwrap_or_else(|e| panic!("{e}"));
            w.nic.mark("write", key.0);
            node.write(&mut h, op.offset_bytes, &[value]);
            recorder.record_commit(key, value, w.nic.now());
            node.xunlock(&mut w, h).await.unwrap_or_else(|e| panic!("{e}"));
            recorder.complete(id, w.nic.now(), None);
        } else {
            let id = recorder.invoke(client, Op::Read { key }, w.nic.now());
            let h = node.slock(&mut w, g).await.unwrap_or_else(|e| panic!("{e}"));
            let mut out = [0u64];
            node.read(&h, op.offset_bytes, &mut out);
            w.nic.mark("read", key.0);
            node.sunlock(&mut w, h).await.unwrap_or_else(|e| panic!("{e}"));
            recorder.complete(id, w.nic.now(), Some(out[0]));
        }
    }
    let last = {
        let mut running = node.workers_running.lock().unwrap();
        *running -= 1;
        *running == 0
    };
    if last {
        node.drain(&w.nic).await.unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Counts of each mark label, for campaign summaries (sometimes-assertions).
pub fn merge_marks(into: &mut BTreeMap<String, u64>, marks: &BTreeMap<&'static str, u64>) {
    for (k, v) in marks {
        *into.entry(k.to_string()).or_insert(0) += v;
    }
}
