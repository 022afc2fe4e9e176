//! NIC microbenchmarks: what the fabric model does, one verb at a time.
//!
//! Every compute-node thread (its own QP channel) issues `ops_per_thread` operations of one
//! kind against memory node 0, keeping `window` in flight, and records each latency:
//! * `read` / `write` of `payload_bytes`, `cas` / `faa` on its own word or, with
//!   `same_address`, all on one word;
//! * `send`: a one-way message to a port the memory node drains (a payload above
//!   [`MAX_MESSAGE_BYTES`] goes as that many full messages, back to back: the NIC contract's
//!   message limit, as an application would fragment it);
//! * `rpc`: a request served by a memory-node handler that charges `rpc_service_ns` of CPU on
//!   the node's modelled cores, then a reply — throughput follows the cores;
//! * `spin_lock`: SEL's shared-exclusive latch word reduced to the NIC: writer id in the high
//!   32 bits, reader count in the low 32 (the SELCC authors' SEL build uses the top byte).
//!   Exclusive: `CAS(0 → me)`, retried after `backoff_c`·RTT/retries (SELCC's T = C·RTT/N_r;
//!   0 = at once), held for `hold_ns`, released by `FAA(−me)`. Shared (a `read_ratio` share of
//!   the acquisitions): `FAA(+1)`; on a writer `FAA(−1)` and retry; released by `FAA(−1)`. With
//!   `payload_bytes` above 8 each attempt batches a READ of the data behind the word and an
//!   exclusive release batches its WRITE first. One op is one acquisition;
//!   `attempts_per_acquire` counts the attempts it took. With `one_spinner_per_node`, the
//!   threads of a compute node first take a node-local latch per lock, as the SEL baseline does
//!   (`protocols/src/selcc/config.rs`), so at most one thread per node spins on a word. With
//!   `locks` > 1 each acquisition picks lock k (Zipf `zipf_theta` over ranks, 0 = uniform),
//!   placed on memory node k mod `memory_nodes`, each word followed by its data.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};

use serde::Deserialize;

use crate::common::metrics::percentile;
use crate::harness::{
    parse_typed, Memory, NodeReport, NodeRun, Plan, PointSpec, Problem, Protocol, Violation,
};
use crate::nic::{Cluster, Nanos, Nic, NicError, NodeId, RemoteAddr, Verb, MAX_MESSAGE_BYTES};
use crate::sync::{Latch, Mode};
use crate::workload::zipf::{unit_f64, Zipf};

/// The registration.
#[derive(Clone, Copy)]
pub struct NicMicro;

impl Protocol for NicMicro {
    type Plan = MicroPlan;

    fn names(&self) -> &'static [&'static str] {
        &["nic_micro"]
    }

    fn about(&self) -> &'static str {
        "NIC microbenchmarks: one verb kind at a time against memory node 0"
    }

    fn plan(&self, point: &PointSpec) -> Result<MicroPlan, Vec<Problem>> {
        MicroPlan::new(point)
    }
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum MicroVerb {
    Read,
    Write,
    Cas,
    Faa,
    Send,
    Rpc,
    SpinLock,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Workload {
    verb: MicroVerb,
    #[serde(default = "eight")]
    payload_bytes: u32,
    #[serde(default = "one")]
    threads_per_node: u32,
    #[serde(default)]
    same_address: bool,
    #[serde(default = "thousand")]
    ops_per_thread: u32,
    #[serde(default = "one")]
    window: u32,
    #[serde(default = "thousand_u64")]
    rpc_service_ns: u64,
    /// Handler tasks per memory node for `rpc` (default: 4 per modelled core, else 16).
    #[serde(default)]
    rpc_handlers: Option<u32>,
    /// `spin_lock`: time the lock is held (CPU work in the critical section).
    #[serde(default)]
    hold_ns: u64,
    /// `spin_lock`: backoff after the k-th failed CAS is `backoff_c`·RTT/k (0: retry at once).
    #[serde(default)]
    backoff_c: u32,
    /// `spin_lock`: threads of a node serialise on a node-local latch before the remote CAS.
    #[serde(default)]
    one_spinner_per_node: bool,
    /// `spin_lock`: number of lock words (each with `payload_bytes` of data behind it).
    #[serde(default = "one")]
    locks: u32,
    /// `spin_lock` with `locks` > 1: Zipf exponent of the lock choice (0 = uniform).
    #[serde(default)]
    zipf_theta: f64,
    /// `spin_lock`: share of acquisitions that are shared (reader) ones.
    #[serde(default)]
    read_ratio: f64,
}

fn eight() -> u32 {
    8
}
fn one() -> u32 {
    1
}
fn thousand() -> u32 {
    1000
}
fn thousand_u64() -> u64 {
    1000
}

const RPC_PORT: u16 = 1;
const SEND_PORT: u16 = 2;
const REPLY_PORT_BASE: u16 = 1000;

fn check(point: &PointSpec, w: &Workload) -> Vec<Problem> {
    let mut out = Vec::new();
    if w.payload_bytes == 0 || !w.payload_bytes.is_multiple_of(8) || w.payload_bytes > 1 << 20 {
        out.push(Problem::new("workload.payload_bytes", "must be a positive multiple of 8, at most 1 MiB"));
    }
    if matches!(w.verb, MicroVerb::Cas | MicroVerb::Faa) && w.payload_bytes != 8 {
        out.push(Problem::new("workload.payload_bytes", "atomics are 8 bytes"));
    }
    if w.threads_per_node == 0 || w.threads_per_node > 256 {
        out.push(Problem::new("workload.threads_per_node", "must be in 1..=256"));
    }
    if w.ops_per_thread == 0 {
        out.push(Problem::new("workload.ops_per_thread", "must be at least 1"));
    }
    if w.window == 0 || w.window > crate::nic::MAX_BATCH as u32 * 2 {
        out.push(Problem::new("workload.window", "must be in 1..=16"));
    }
    if w.verb == MicroVerb::Rpc && w.payload_bytes as usize > MAX_MESSAGE_BYTES {
        out.push(Problem::new(
            "workload.payload_bytes",
            format!("an rpc request is one message: at most {MAX_MESSAGE_BYTES} bytes"),
        ));
    }
    if w.verb == MicroVerb::SpinLock && (w.window != 1 || w.same_address) {
        out.push(Problem::new(
            "workload",
            "spin_lock: window 1; its words are set by `locks`, not same_address",
        ));
    }
    let lock_fields = w.hold_ns != 0 || w.backoff_c != 0 || w.one_spinner_per_node || w.locks != 1;
    if w.verb != MicroVerb::SpinLock && (lock_fields || w.zipf_theta != 0.0 || w.read_ratio != 0.0) {
        out.push(Problem::new(
            "workload",
            "hold_ns, backoff_c, one_spinner_per_node, locks, zipf_theta, read_ratio: spin_lock only",
        ));
    }
    if !(0.0..=1.0).contains(&w.read_ratio) {
        out.push(Problem::new("workload.read_ratio", "must be in [0, 1]"));
    }
    if w.locks == 0 || w.locks > 1 << 20 {
        out.push(Problem::new("workload.locks", "must be in 1..=1048576"));
    }
    if !(w.zipf_theta >= 0.0 && w.zipf_theta.is_finite()) {
        out.push(Problem::new("workload.zipf_theta", "must be finite and >= 0"));
    }
    if w.rpc_handlers == Some(0) {
        out.push(Problem::new("workload.rpc_handlers", "must be at least 1"));
    }
    point.no_symmetric("nic_micro", &mut out);
    if point.memory_nodes == 0 {
        out.push(Problem::new("cluster.memory_nodes", "must be at least 1"));
    }
    let threads = point.compute_nodes as u64 * w.threads_per_node as u64;
    if threads > (u16::MAX - REPLY_PORT_BASE) as u64 {
        out.push(Problem::new("workload.threads_per_node", "too many threads in total"));
    }
    out
}

/// The microbenchmark as a backend-independent plan.
pub struct MicroPlan {
    w: Workload,
    spec: PointSpec,
}

impl MicroPlan {
    pub fn new(point: &PointSpec) -> Result<MicroPlan, Vec<Problem>> {
        let w: Workload = parse_typed(&point.workload, "workload").map_err(|p| vec![p])?;
        let problems = check(point, &w);
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(MicroPlan { w, spec: point.clone() })
    }

    fn slot_bytes(&self) -> u64 {
        self.w.payload_bytes as u64 * self.w.window as u64
    }
}

impl Plan for MicroPlan {
    type State = ();

    fn cluster(&self) -> Cluster {
        let threads = self.spec.compute_nodes as u64 * self.w.threads_per_node as u64;
        let slot = self.slot_bytes();
        // `spin_lock` puts each lock word at k / memory_nodes · stride and its data right after it.
        let per_node = (self.w.locks as u64).div_ceil(self.spec.memory_nodes.max(1) as u64);
        let memory = (threads * slot).max(per_node * lock_stride(&self.w)).max(4096);
        self.spec.cluster(memory, (self.w.threads_per_node as u64 * slot).max(4096))
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun {
        let (w, spec) = (&self.w, &self.spec);
        let mn = NodeId(0);
        let mut run = NodeRun::empty();
        if nic.node() == mn {
            if w.verb == MicroVerb::Rpc {
                let handlers = w.rpc_handlers.unwrap_or(spec.memory_node_cores.map_or(16, |c| c * 4));
                for _ in 0..handlers {
                    run.daemons.push(Box::pin(rpc_handler(nic.clone(), Nanos(w.rpc_service_ns))));
                }
            }
            if w.verb == MicroVerb::Send {
                let nic = nic.clone();
                run.daemons.push(Box::pin(async move { while nic.recv(SEND_PORT).await.is_ok() {} }));
            }
            return run;
        }
        if nic.node().0 < spec.memory_nodes {
            return run;
        }
        let c = nic.node().0 - spec.memory_nodes;
        let latencies = Arc::new(Mutex::new(Vec::new()));
        let errors: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
        let spin = w.verb == MicroVerb::SpinLock;
        let node_latches: Arc<Vec<Latch>> =
            Arc::new((0..if spin { w.locks } else { 0 }).map(|_| Latch::new()).collect());
        let attempts = Arc::new(AtomicU64::new(0));
        for t in 0..w.threads_per_node {
            let global = c as u64 * w.threads_per_node as u64 + t as u64;
            let nic = nic.qp(t as u16);
            let latencies = latencies.clone();
            let errors = errors.clone();
            let w = w.clone();
            let local = t as u64 * self.slot_bytes();
            let lock = SpinLockCtx {
                node_latches: node_latches.clone(),
                attempts: attempts.clone(),
                memory_nodes: spec.memory_nodes,
                rng: crate::workload::rng_for_thread(spec.seed, nic.node().0, t),
            };
            run.mains.push(Box::pin(async move {
                let (mine, error) = if w.verb == MicroVerb::SpinLock {
                    spin_lock_loop(nic.clone(), &w, global, local, lock).await
                } else {
                    client(nic.clone(), mn, &w, global, local).await
                };
                latencies.lock().unwrap_or_else(|e| e.into_inner()).extend(mine);
                if let Some(e) = error {
                    let what = format!("{:?} by {} thread {t}: {e}", w.verb, nic.node());
                    errors.lock().unwrap_or_else(|e| e.into_inner()).push(what);
                }
            }));
        }
        run.collect = Box::new(move || {
            let errors = std::mem::take(&mut *errors.lock().unwrap_or_else(|e| e.into_inner()));
            NodeReport {
                samples: std::mem::take(&mut *latencies.lock().unwrap_or_else(|e| e.into_inner())),
                extra: serde_json::json!({
                    "errors": errors,
                    "attempts": attempts.load(AtomicOrdering::Relaxed),
                }),
                ..NodeReport::default()
            }
        });
        run
    }

    fn verify(&self, reports: &[NodeReport], _memory: Option<Memory>) -> Result<(), Violation> {
        let errors: Vec<&str> = reports
            .iter()
            .filter_map(|r| r.extra.get("errors").and_then(|e| e.as_array()))
            .flatten()
            .filter_map(|e| e.as_str())
            .collect();
        match errors.first() {
            Some(first) => {
                Err(Violation::new("verbs succeed", format!("{} failed, first: {first}", errors.len())))
            }
            None => Ok(()),
        }
    }

    fn metrics(&self, reports: &[NodeReport], elapsed: Nanos) -> BTreeMap<String, f64> {
        let mut lat: Vec<u64> = reports.iter().flat_map(|r| r.samples.iter().copied()).collect();
        let ops = lat.len() as u64;
        let mut metrics = BTreeMap::new();
        let seconds = elapsed.as_secs_f64().max(1e-12);
        metrics.insert("throughput_mops".into(), ops as f64 / seconds / 1e6);
        metrics.insert("latency_ns_avg".into(), lat.iter().sum::<u64>() as f64 / ops.max(1) as f64);
        metrics.insert("latency_ns_p50".into(), percentile(&mut lat, 50.0));
        metrics.insert("latency_ns_p99".into(), percentile(&mut lat, 99.0));
        metrics
            .insert("bandwidth_gbps".into(), ops as f64 * self.w.payload_bytes as f64 * 8.0 / seconds / 1e9);
        if self.w.verb == MicroVerb::SpinLock {
            let attempts: u64 =
                reports.iter().filter_map(|r| r.extra.get("attempts").and_then(|a| a.as_u64())).sum();
            metrics.insert("attempts_per_acquire".into(), attempts as f64 / ops.max(1) as f64);
        }
        metrics
    }
}

/// A memory-node RPC server: receive, charge the service time on the node's cores, reply.
async fn rpc_handler<N: Nic>(nic: N, service: Nanos) {
    while let Ok(request) = nic.recv(RPC_PORT).await {
        nic.cpu(service).await;
        let reply_port = u16::from_le_bytes([request.bytes[0], request.bytes[1]]);
        if nic.send(request.from, reply_port, vec![0; 8]).await.is_err() {
            return;
        }
    }
}

/// One client thread: `window` operations in flight, one per sub-slot of its buffer, each
/// re-issued when it completes. Returns the latencies.
async fn client<N: Nic>(
    nic: N,
    mn: NodeId,
    w: &Workload,
    global: u64,
    local_base: u64,
) -> (Vec<u64>, Option<NicError>) {
    let mut latencies = Vec::with_capacity(w.ops_per_thread as usize);
    let per_lane = w.ops_per_thread.div_ceil(w.window);
    let lanes = (0..w.window).map(|lane| {
        let nic = nic.clone();
        let local = local_base + lane as u64 * w.payload_bytes as u64;
        let remote_base = if w.same_address {
            0
        } else {
            (global * w.window as u64 + lane as u64) * w.payload_bytes as u64
        };
        let reply_port = REPLY_PORT_BASE + (global * w.window as u64 + lane as u64) as u16;
        lane_loop(
            nic,
            mn,
            w.clone(),
            per_lane.min(w.ops_per_thread - lane * per_lane),
            local,
            remote_base,
            reply_port,
        )
    });
    // Lanes of one thread run interleaved on its QP; join them without an executor-specific API.
    let results = crate::sync::join_all(lanes.collect()).await;
    let mut error = None;
    for (r, e) in results {
        latencies.extend(r);
        error = error.or(e);
    }
    (latencies, error)
}

async fn lane_loop<N: Nic>(
    nic: N,
    mn: NodeId,
    w: Workload,
    ops: u32,
    local: u64,
    remote: u64,
    reply_port: u16,
) -> (Vec<u64>, Option<NicError>) {
    let mut out = Vec::with_capacity(ops as usize);
    let addr = RemoteAddr::new(mn, remote);
    for i in 0..ops as u64 {
        let start = nic.now();
        let result = match w.verb {
            MicroVerb::Read => nic.read(addr, local, w.payload_bytes).await,
            MicroVerb::Write => nic.write(addr, local, w.payload_bytes).await,
            MicroVerb::Cas => {
                nic.batch(&[Verb::Cas { remote: addr, expect: i, swap: i + 1 }]).await.map(|_| ())
            }
            MicroVerb::Faa => nic.faa(addr, 1).await.map(|_| ()),
            MicroVerb::Send => {
                let mut sent = Ok(());
                let mut left = w.payload_bytes as usize;
                while left > 0 && sent.is_ok() {
                    let len = left.min(MAX_MESSAGE_BYTES);
                    sent = nic.send(mn, SEND_PORT, vec![0; len]).await;
                    left -= len;
                }
                sent
            }
            MicroVerb::SpinLock => unreachable!("spin_lock runs spin_lock_loop"),
            MicroVerb::Rpc => {
                let mut request = vec![0; w.payload_bytes as usize];
                request[..2].copy_from_slice(&reply_port.to_le_bytes());
                match nic.send(mn, RPC_PORT, request).await {
                    Ok(()) => nic.recv(reply_port).await.map(|_| ()),
                    Err(e) => Err(e),
                }
            }
        };
        if let Err(e) = result {
            // The run fails with it ([`Plan::verify`]); the samples so far are kept.
            return (out, Some(e));
        }
        out.push(nic.now().0 - start.0);
    }
    (out, None)
}

/// What a `spin_lock` thread needs: its node's latches and CAS counter, its lock-choice stream.
struct SpinLockCtx {
    node_latches: Arc<Vec<Latch>>,
    attempts: Arc<AtomicU64>,
    memory_nodes: u16,
    rng: rand_chacha::ChaCha8Rng,
}

/// Bytes from one `spin_lock` word to the next on a memory node: the word, then its data.
fn lock_stride(w: &Workload) -> u64 {
    8 + if w.payload_bytes > 8 { w.payload_bytes as u64 } else { 0 }
}

/// One `spin_lock` thread: `ops_per_thread` acquisitions, each of one lock word (the only one,
/// or drawn by Zipf), shared or exclusive as the module doc says, retried until granted,
/// `hold_ns` held, then released. Records each acquisition's latency (first attempt posted to
/// release completed).
async fn spin_lock_loop<N: Nic>(
    nic: N,
    w: &Workload,
    global: u64,
    local: u64,
    mut ctx: SpinLockCtx,
) -> (Vec<u64>, Option<NicError>) {
    use rand_chacha::rand_core::Rng as _;
    let with_data = w.payload_bytes > 8;
    let len = w.payload_bytes;
    // Latch word: writer in the high 32 bits, reader count in the low 32 (as SELCC's SEL build).
    let writer = (global + 1) << 32;
    let zipf = (w.locks > 1 && w.zipf_theta > 0.0).then(|| Zipf::new(w.locks as u64, w.zipf_theta));
    let mn_count = ctx.memory_nodes.max(1) as u64;
    let mut out = Vec::with_capacity(w.ops_per_thread as usize);
    for _ in 0..w.ops_per_thread {
        let k = match &zipf {
            Some(z) => z.sample(|| ctx.rng.next_u64()) - 1,
            None if w.locks > 1 => ((ctx.rng.next_u64() as u128 * w.locks as u128) >> 64) as u64,
            None => 0,
        };
        let shared = w.read_ratio > 0.0 && unit_f64(ctx.rng.next_u64()) < w.read_ratio;
        let mn = NodeId((k % mn_count) as u16);
        let word = RemoteAddr::new(mn, k / mn_count * lock_stride(w));
        let data = word.add(8);
        let start = nic.now();
        if w.one_spinner_per_node {
            ctx.node_latches[k as usize].lock(Mode::Exclusive).await;
        }
        let mut retries = 0u64;
        let result = loop {
            let sent = nic.now();
            let atomic = if shared {
                Verb::Faa { remote: word, add: 1 }
            } else {
                Verb::Cas { remote: word, expect: 0, swap: writer }
            };
            let attempt = if with_data {
                nic.batch(&[atomic, Verb::Read { remote: data, local_bytes: local, len_bytes: len }]).await
            } else {
                nic.batch(&[atomic]).await
            };
            let old = match attempt {
                Ok(result) => result.get(0),
                Err(e) => break Err(e),
            };
            ctx.attempts.fetch_add(1, AtomicOrdering::Relaxed);
            if shared && old >> 32 == 0 || !shared && old == 0 {
                break Ok(());
            }
            if shared {
                // A writer holds it: take our reader count back, then retry.
                if let Err(e) = nic.faa(word, 1u64.wrapping_neg()).await {
                    break Err(e);
                }
            }
            retries += 1;
            if w.backoff_c > 0 {
                let rtt = nic.now().0 - sent.0;
                nic.sleep(Nanos(w.backoff_c as u64 * rtt / retries)).await;
            }
        };
        let result = match result {
            Ok(()) => {
                if w.hold_ns > 0 {
                    nic.sleep(Nanos(w.hold_ns)).await;
                }
                let release = Verb::Faa { remote: word, add: if shared { 1 } else { writer }.wrapping_neg() };
                if with_data && !shared {
                    let write = Verb::Write { remote: data, local_bytes: local, len_bytes: len };
                    nic.batch(&[write, release]).await.map(|_| ())
                } else {
                    nic.batch(&[release]).await.map(|_| ())
                }
            }
            Err(e) => Err(e),
        };
        if w.one_spinner_per_node {
            ctx.node_latches[k as usize].unlock(Mode::Exclusive);
        }
        if let Err(e) = result {
            return (out, Some(e));
        }
        out.push(nic.now().0 - start.0);
    }
    (out, None)
}
