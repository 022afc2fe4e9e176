//! The YCSB point workload over a pre-allocated record array, shared by ScaleStore's two
//! in-memory baselines (`namdb`, `farm`; spec §5.5): "a pre-allocated array (key-value pairs
//! collocated), i.e., no collisions, which allows them to use a single one-sided read to fetch
//! remote data".
//!
//! * [`Workload`] — the `workload` section: records, workers, read ratio, Zipf skew, and an
//!   optional open-loop target ([`super::open_loop`]).
//! * [`Layout`] — records range-partitioned over the symmetric nodes (record `k` lives on node
//!   `k / per_node`), each record three 64-byte cache lines (8 B key + 128 B value plus the
//!   protocol's latch or version words), then one scratch slot per worker.
//! * [`run_worker`] — one worker thread: closed loop, or open loop with coordinated-omission
//!   correction; logs every operation for the per-key linearizability checker.
//!
//! [CHOICE] Keys are Zipf ranks without scrambling (rank r is record r − 1), as ScaleStore's
//! own bench draws pages (spec §8 A16): the hottest records share the first node, which is
//! what the paper blames for NAM-DB's loss under skew ("the higher the skew the more requests
//! are routed to a subset of the nodes").

use std::future::Future;
use std::sync::{Arc, Mutex};

use rand_chacha::rand_core::Rng;
use serde::{Deserialize, Serialize};

use super::open_loop::{wait_until, OpenLoop, OpenLoopSpec};
use super::rng_for_thread;
use super::zipf::{unit_f64, Zipf};
use crate::common::bench::write_stamp;
use crate::common::error::ProtocolResult;
use crate::harness::{parse_typed, report_error, LoggedOp, NodeReport, OpLog, PointSpec, Problem};
use crate::memory::PayloadSpan;
use crate::nic::Nanos;
use crate::nic::{Nic, NodeId, RemoteAddr};
use std::collections::BTreeMap;

/// Bytes of one record slot: three cache lines (136 B of key and value, plus latch/versions).
pub const RECORD_BYTES: u64 = 192;
pub const LINE_BYTES: u64 = 64;
/// What a read logs when the copies of the stamp inside one record disagree: a torn read.
/// No write stores it (stamps have a node byte ≥ 1 in bits 48..), so the checker flags it.
pub const TORN: u64 = u64::MAX;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Workload {
    /// Records in the whole array (the paper: 1B over 5 nodes; scaled).
    pub records: u64,
    pub threads_per_node: u32,
    pub ops_per_thread: u64,
    /// Operations per worker before measurement starts.
    pub warmup_ops: u64,
    pub read_ratio: f64,
    /// 0: uniform; otherwise Zipf over all records (rank r is record r − 1).
    pub zipf_theta: f64,
    /// Open-loop Poisson arrivals at a target throughput (Fig. 13); absent: closed loop.
    pub open_loop: Option<OpenLoopSpec>,
    /// Timed run (the paper's fixed-length phases): every worker runs for `warmup_ns` unmeasured,
    /// then starts operations for `measure_ns` more (`ops_per_thread` and `warmup_ops` are then
    /// ignored); `throughput_mops` counts the operations completed inside the window.
    /// Absent: each worker runs its `warmup_ops + ops_per_thread` operations.
    pub measure_ns: Option<u64>,
    pub warmup_ns: u64,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            records: 1_000,
            threads_per_node: 2,
            ops_per_thread: 100,
            warmup_ops: 0,
            read_ratio: 0.5,
            zipf_theta: 0.0,
            open_loop: None,
            measure_ns: None,
            warmup_ns: 0,
        }
    }
}

impl Workload {
    pub fn validate(&self, nodes: u16) -> Vec<String> {
        let mut out = Vec::new();
        if self.records < nodes.max(1) as u64 || self.records > 1 << 32 {
            out.push("records: must be in nodes..=2^32 (every node holds at least one)".into());
        }
        if self.threads_per_node == 0 || self.threads_per_node > 256 {
            out.push("threads_per_node: must be in 1..=256".into());
        }
        if !(0.0..=1.0).contains(&self.read_ratio) {
            out.push("read_ratio: must be in [0, 1]".into());
        }
        if !(0.0..10.0).contains(&self.zipf_theta) {
            out.push("zipf_theta: must be in [0, 10)".into());
        }
        if let Some(o) = &self.open_loop {
            out.extend(o.validate());
        }
        if self.measure_ns == Some(0)
            || self.measure_ns.is_some_and(|m| m.saturating_add(self.warmup_ns) > 1 << 50)
        {
            out.push("measure_ns: must be in 1..2^50 with warmup_ns".into());
        }
        if self.measure_ns.is_none() && self.warmup_ns != 0 {
            out.push("warmup_ns: only with measure_ns (a timed run)".into());
        }
        out
    }
}

/// Where records and scratch slots live.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub nodes: u64,
    pub records: u64,
    /// Records per node (the last node may hold fewer).
    pub per_node: u64,
    pub threads: u64,
}

impl Layout {
    pub fn new(nodes: u16, records: u64, threads: u32) -> Layout {
        let nodes = nodes.max(1) as u64;
        Layout { nodes, records, per_node: records.div_ceil(nodes), threads: threads as u64 }
    }

    /// The node that holds record `key`.
    pub fn home(&self, key: u64) -> NodeId {
        NodeId((key / self.per_node) as u16)
    }

    /// The first byte of record `key`'s slot on its home.
    pub fn record(&self, key: u64) -> RemoteAddr {
        RemoteAddr::new(self.home(key), (key % self.per_node) * RECORD_BYTES)
    }

    /// Worker `thread`'s scratch slot (one record) in its own node's region.
    pub fn scratch(&self, thread: u32) -> u64 {
        (self.per_node + thread as u64) * RECORD_BYTES
    }

    pub fn region_bytes(&self) -> u64 {
        (self.per_node + self.threads) * RECORD_BYTES
    }

    /// The record lines: only their first two words (latch or version, and one stamp copy)
    /// carry meaning; the rest is opaque key/value payload.
    pub fn payload_span(&self) -> PayloadSpan {
        PayloadSpan { start_bytes: 0, stride_bytes: LINE_BYTES, kept_bytes: 16, lines: self.per_node * 3 }
    }
}

/// What a worker's operations cost, per node (measured operations only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub ops: u64,
    pub reads: u64,
    /// Operations on a record of the worker's own node.
    pub local_ops: u64,
    /// One-sided verbs posted (loopback verbs to the own node included).
    pub rdma_ops: u64,
    /// Two-sided messages (requests and replies).
    pub messages: u64,
    /// Attempts repeated after a latch or validation failure (with back-off).
    pub retries: u64,
    /// Updates the owner rejected because the record changed since it was read (FaRM).
    pub aborts: u64,
    /// Open loop: operations that started after their scheduled time.
    pub late_starts: u64,
    /// Earliest start of a measured operation (ns).
    pub measure_start_ns: Option<u64>,
    /// Timed runs (`workload.measure_ns`): the measured window's length, and the operations
    /// that completed inside it (whenever they started).
    #[serde(default)]
    pub measure_ns: Option<u64>,
    #[serde(default)]
    pub completed_in_window: u64,
}

impl Stats {
    pub fn merge(&mut self, o: &Stats) {
        self.ops += o.ops;
        self.reads += o.reads;
        self.local_ops += o.local_ops;
        self.rdma_ops += o.rdma_ops;
        self.messages += o.messages;
        self.retries += o.retries;
        self.aborts += o.aborts;
        self.late_starts += o.late_starts;
        self.completed_in_window += o.completed_in_window;
        self.measure_ns = self.measure_ns.or(o.measure_ns);
        self.measure_start_ns = match (self.measure_start_ns, o.measure_start_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// The metrics both baselines report.
    pub fn metrics(&self, samples: &mut [u64], elapsed_ns: u64) -> std::collections::BTreeMap<String, f64> {
        use crate::common::metrics::percentile;
        let ops = self.ops.max(1) as f64;
        let mut m = std::collections::BTreeMap::new();
        let throughput = match self.measure_ns {
            // Timed: what completed inside the window, every worker running throughout (the
            // paper's fixed-length phases).
            Some(window) => self.completed_in_window as f64 / window as f64 * 1e3,
            // Counted: all measured operations over the span from the first measured start to
            // the run's end (the last worker's last operation).
            None => {
                let span = elapsed_ns.saturating_sub(self.measure_start_ns.unwrap_or(0)) as f64 * 1e-9;
                self.ops as f64 / span.max(1e-12) / 1e6
            }
        };
        m.insert("throughput_mops".into(), throughput);
        m.insert("ops".into(), self.ops as f64);
        m.insert("local_ratio".into(), self.local_ops as f64 / ops);
        m.insert("rdma_ops_per_op".into(), self.rdma_ops as f64 / ops);
        m.insert("messages_per_op".into(), self.messages as f64 / ops);
        m.insert("retries_per_op".into(), self.retries as f64 / ops);
        m.insert("aborts_per_op".into(), self.aborts as f64 / ops);
        m.insert("late_start_ratio".into(), self.late_starts as f64 / ops);
        if !samples.is_empty() {
            m.insert("latency_us_p50".into(), percentile(samples, 50.0) / 1e3);
            m.insert("latency_us_p99".into(), percentile(samples, 99.0) / 1e3);
            m.insert("latency_us_p999".into(), percentile(samples, 99.9) / 1e3);
        }
        m
    }
}

/// Per-operation costs a worker counts while it runs one operation.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpCost {
    pub rdma_ops: u64,
    pub messages: u64,
    pub retries: u64,
    pub aborts: u64,
}

/// One worker of a baseline: a point read and a point update of one record.
pub trait ArrayWorker: Send {
    type N: Nic;
    fn nic(&self) -> &Self::N;
    /// The value (stamp) the read returned, or [`TORN`].
    fn read(&mut self, key: u64) -> impl Future<Output = ProtocolResult<u64>> + Send;
    /// Install `stamp` as the record's value; returns the stamp it replaced.
    fn write(&mut self, key: u64, stamp: u64) -> impl Future<Output = ProtocolResult<u64>> + Send;
    /// This operation's costs so far (the loop takes and resets them after each operation).
    fn cost(&mut self) -> &mut OpCost;
}

/// Where a node's workers report.
#[derive(Clone, Default)]
pub struct Sink {
    pub stats: Arc<Mutex<Stats>>,
    pub latencies: Arc<Mutex<Vec<u64>>>,
    pub log: Option<OpLog>,
    pub errors: Arc<crate::common::error::ErrorSlot>,
}

/// One worker thread (`thread` of its node), `workload.warmup_ops + ops_per_thread` operations.
/// Stops at its first error (kept in `sink.errors`).
pub async fn run_worker<W: ArrayWorker>(
    mut w: W,
    layout: Layout,
    thread: u32,
    workload: Workload,
    seed: u64,
    sink: Sink,
) {
    let me = w.nic().node();
    let client = me.0 as u32 * layout.threads as u32 + thread;
    let mut rng = rng_for_thread(seed, me.0, thread);
    let zipf = (workload.zipf_theta > 0.0).then(|| Zipf::new(layout.records, workload.zipf_theta));
    let mut schedule = workload.open_loop.as_ref().map(|o| {
        let workers = layout.nodes * layout.threads;
        OpenLoop::new(o.target_mops, workers, w.nic().now().0, seed, me.0, thread)
    });
    let mut sequence = 0;
    // Timed run: the window [from, to) on this worker's clock.
    let t0 = w.nic().now().0;
    let window = workload.measure_ns.map(|m| (t0 + workload.warmup_ns, t0 + workload.warmup_ns + m));
    if window.is_some() {
        sink.stats.lock().unwrap_or_else(|e| e.into_inner()).measure_ns = workload.measure_ns;
    }
    let counted = workload.warmup_ops + workload.ops_per_thread;
    for i in 0.. {
        if window.is_none() && i == counted {
            break;
        }
        let key = match &zipf {
            Some(z) => z.sample(|| rng.next_u64()) - 1,
            None => ((rng.next_u64() as u128 * layout.records as u128) >> 64) as u64,
        };
        let read = unit_f64(rng.next_u64()) < workload.read_ratio;
        let scheduled = match schedule.as_mut() {
            Some(s) => {
                let at = s.next_start();
                wait_until(w.nic(), at).await;
                Some(at)
            }
            None => None,
        };
        let invoke = w.nic().now().0;
        let start = scheduled.unwrap_or(invoke);
        let measured = match window {
            Some((_, to)) if start >= to => break,
            Some((from, _)) => start >= from,
            None => i >= workload.warmup_ops,
        };
        if measured && window.is_none() && i == workload.warmup_ops {
            let mut s = sink.stats.lock().unwrap_or_else(|e| e.into_inner());
            s.measure_start_ns = Some(s.measure_start_ns.map_or(start, |t| t.min(start)));
        }
        let stamp = (!read).then(|| {
            sequence += 1;
            write_stamp(me, thread, sequence)
        });
        let seen = match stamp {
            None => w.read(key).await,
            Some(v) => w.write(key, v).await,
        };
        let seen = match seen {
            Ok(v) => v,
            Err(e) => {
                sink.errors.record(e);
                return;
            }
        };
        let end = w.nic().now().0;
        if let Some(log) = &sink.log {
            log.lock().push(LoggedOp {
                client,
                key,
                write: stamp,
                seen: Some(seen),
                invoke_ns: invoke,
                return_ns: Some(end),
            });
        }
        let cost = std::mem::take(w.cost());
        if window.is_some_and(|(from, to)| end > from && end <= to) {
            // Whatever completes inside the window counts, also an operation a worker behind
            // schedule started before it (open loop, or a long one at its start).
            sink.stats.lock().unwrap_or_else(|e| e.into_inner()).completed_in_window += 1;
        }
        if measured {
            sink.latencies.lock().unwrap_or_else(|e| e.into_inner()).push(end - start);
            let mut s = sink.stats.lock().unwrap_or_else(|e| e.into_inner());
            s.ops += 1;
            s.reads += read as u64;
            s.local_ops += (layout.home(key) == me) as u64;
            s.late_starts += (invoke > start) as u64;
            s.rdma_ops += cost.rdma_ops;
            s.messages += cost.messages;
            s.retries += cost.retries;
            s.aborts += cost.aborts;
        }
    }
}

/// Exponential back-off with full jitter (the paper: competitors "compete in a busy polling
/// manner (with exponential back-off)"): attempt `n` (from 1) waits uniformly in
/// `[0, min(base · 2^(n−1), cap)]` ns, drawn from the worker's seeded stream.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Backoff {
    pub base_ns: u64,
    pub cap_ns: u64,
}

impl Default for Backoff {
    /// [CHOICE] Not given by the paper; chosen before any run.
    fn default() -> Self {
        Backoff { base_ns: 500, cap_ns: 64_000 }
    }
}

impl Backoff {
    pub fn delay(&self, attempt: u32, random: u64) -> u64 {
        let bound = self.base_ns.saturating_mul(1u64 << attempt.saturating_sub(1).min(30)).min(self.cap_ns);
        random % (bound + 1)
    }
}

// ---- What both baselines' definitions share (`namdb/def.rs`, `farm/def.rs`). ----

/// Parse the sections both baselines share and check the cluster shape.
pub fn common_plan(point: &PointSpec, name: &str) -> Result<(Workload, Layout), Vec<Problem>> {
    let mut out = Vec::new();
    if point.memory_nodes != 0 || point.compute_nodes != 0 {
        out.push(Problem::new(
            "cluster",
            format!("{name} runs on symmetric nodes only: set symmetric_nodes, and memory_nodes and compute_nodes to 0"),
        ));
    }
    if point.symmetric_nodes == 0 {
        out.push(Problem::new("cluster.symmetric_nodes", "must be at least 1"));
    }
    let workload: Workload = match parse_typed(&point.workload, "workload") {
        Ok(w) => w,
        Err(p) => {
            out.push(p);
            return Err(out);
        }
    };
    out.extend(workload.validate(point.symmetric_nodes).iter().map(|p| at("workload", p)));
    if !out.is_empty() {
        return Err(out);
    }
    let layout = Layout::new(point.symmetric_nodes, workload.records, workload.threads_per_node);
    const REGION_MAX: u64 = 64 << 30;
    if layout.region_bytes() > REGION_MAX {
        return Err(vec![Problem::new(
            "workload.records",
            format!("{} bytes per node (at most 64 GiB)", layout.region_bytes()),
        )]);
    }
    Ok((workload, layout))
}

pub fn at(prefix: &str, text: &str) -> Problem {
    match text.split_once(": ") {
        Some((field, reason)) if !field.contains(' ') => Problem::new(format!("{prefix}.{field}"), reason),
        _ => Problem::new(prefix, text),
    }
}

/// A node's report of either baseline.
#[derive(Clone, Serialize, Deserialize)]
pub struct Report {
    pub stats: Stats,
}

/// The metrics of either baseline from its nodes' reports.
pub fn array_metrics(reports: &[NodeReport], elapsed: Nanos) -> BTreeMap<String, f64> {
    let mut total = Stats::default();
    for r in reports.iter().filter_map(|r| r.extra_as::<Report>()) {
        total.merge(&r.stats);
    }
    let mut samples: Vec<u64> = reports.iter().flat_map(|r| r.samples.iter().copied()).collect();
    total.metrics(&mut samples, elapsed.0)
}

pub fn array_ops(reports: &[NodeReport]) -> u64 {
    reports.iter().filter_map(|r| r.extra_as::<Report>()).map(|r| r.stats.ops).sum()
}

/// A node's report from its sink.
pub fn collect(sink: &Sink) -> NodeReport {
    let stats = sink.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut report = NodeReport {
        samples: std::mem::take(&mut *sink.latencies.lock().unwrap_or_else(|e| e.into_inner())),
        history: sink.log.as_ref().map(|l| l.snapshot()).unwrap_or_default(),
        error: report_error(sink.errors.first()),
        ..NodeReport::default()
    };
    report.set_typed_extra(Report { stats });
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_range_partitioned_in_three_line_slots() {
        let l = Layout::new(3, 10, 2);
        assert_eq!(l.per_node, 4);
        assert_eq!(l.record(5), RemoteAddr::new(NodeId(1), 192));
        assert_eq!(l.home(9), NodeId(2));
        assert_eq!(l.scratch(1), 5 * 192);
        assert_eq!(l.region_bytes(), 6 * 192);
        assert!(l.payload_span().problems(l.region_bytes()).is_none());
        let b = Backoff { base_ns: 100, cap_ns: 250 };
        assert_eq!(b.delay(1, 1_000_001), 1_000_001 % 101);
        assert_eq!(b.delay(9, 251), 0);
    }
}
