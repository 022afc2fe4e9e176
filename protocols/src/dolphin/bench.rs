//! The YCSB client loop of one thread: draw an operation, run it, count its verbs, log it for
//! the history checkers.
//!
//! A lookup logs the value it found (0: absent); an update, insert or delete logs its unique
//! write stamp (a delete: the stamp with the tombstone bit) without a replaced value — Dolphin's
//! writers never read the value they overwrite (blind WRITEs ordered by the NIC), so the
//! checkers search the write order; a scan logs one read per returned key and the scan itself
//! for the no-skipped-key check.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::layout::TOMBSTONE;
use super::tree::{Client, Shared};
use crate::common::bench::{write_stamp, ThreadSpan};
use crate::harness::{LoggedOp, OpLog};
use crate::nic::Nic;
use crate::sherman::stats::OpStats;
use crate::workload::scan_check::ScanRecord;
use crate::workload::window::Gate;
use crate::workload::ycsb::{OpKind, YcsbStream};

pub struct KvLogger {
    pub log: OpLog,
    pub client: u32,
}

impl KvLogger {
    fn push(&self, key: u64, write: Option<u64>, seen: Option<u64>, invoke: u64, ret: u64) {
        self.log.lock().push(LoggedOp {
            client: self.client,
            key,
            write,
            seen,
            invoke_ns: invoke,
            return_ns: Some(ret),
        });
    }
}

/// (key, written value, value read).
type Access = (u64, Option<u64>, Option<u64>);

fn kind_index(kind: OpKind) -> usize {
    match kind {
        OpKind::Read => 0,
        OpKind::Update => 1,
        OpKind::Insert => 2,
        OpKind::Scan { .. } => 3,
        OpKind::Delete => 4,
    }
}

/// One client thread; stops at its first error (kept in the node's error slot).
pub async fn run_client<N: Nic>(
    mut c: Client<N>,
    thread: u32,
    stream: YcsbStream,
    logger: Option<KvLogger>,
    gate: Gate,
) {
    let node = c.nic.node();
    let mut sequence = 0u64;
    // This thread's measured ops (for `thread_mops`).
    let mut measured = ThreadSpan::default();
    for op in stream {
        if gate.closed(c.nic.now().0) {
            break;
        }
        c.cur = OpStats::default();
        let start = c.nic.now().0;
        let mut stamp = || {
            sequence += 1;
            write_stamp(node, thread, sequence)
        };
        let mut found = false;
        let result: Result<Vec<Access>, _> = match op.kind {
            OpKind::Read => c.get(op.key).await.map(|v| {
                found = v != 0 && v & TOMBSTONE == 0;
                vec![(op.key, None, Some(v))]
            }),
            OpKind::Update | OpKind::Insert => {
                let s = stamp();
                c.store(op.key, s).await.map(|_| vec![(op.key, Some(s), None)])
            }
            OpKind::Delete => {
                let s = TOMBSTONE | stamp();
                c.store(op.key, s).await.map(|_| vec![(op.key, Some(s), None)])
            }
            OpKind::Scan { len } => c
                .scan(op.key, len as usize)
                .await
                .map(|rows| rows.into_iter().map(|(k, v)| (k, None, Some(v))).collect()),
        };
        let accesses = match result {
            Ok(a) => a,
            Err(e) => {
                c.shared.errors.record(e);
                return;
            }
        };
        let end = c.nic.now().0;
        if let (Some(l), OpKind::Scan { len }) = (&logger, op.kind) {
            let scan = ScanRecord {
                client: l.client,
                from: op.key,
                limit: len,
                keys: accesses.iter().map(|a| a.0).collect(),
                invoke_ns: start,
                return_ns: end,
            };
            c.shared.stats.lock().unwrap_or_else(|e| e.into_inner()).scans.push(scan);
        }
        if let Some(l) = &logger {
            for (key, write, seen) in accesses {
                l.push(key, write, seen, start, end);
            }
        }
        if gate.measured(start, end, op.warmup) {
            record(&c.shared, op.kind, &c.cur, start, end, found);
            measured.record(start, end);
        }
        c.shared.ops_done.fetch_add(1, Ordering::Relaxed);
    }
    if gate.ran_out(c.nic.now().0) {
        c.shared.stats.lock().unwrap_or_else(|e| e.into_inner()).window_short_threads += 1;
    }
    if let (Some(first), Some(rate)) = (measured.first(), measured.rate_per_ns()) {
        let mut stats = c.shared.stats.lock().unwrap_or_else(|e| e.into_inner());
        stats.thread_rate_sum += rate;
        stats.first_op_start_max_ns = stats.first_op_start_max_ns.max(first);
    }
}

fn record(shared: &Arc<Shared>, kind: OpKind, cur: &OpStats, start: u64, end: u64, found: bool) {
    let mut stats = shared.stats.lock().unwrap_or_else(|e| e.into_inner());
    let k = kind_index(kind);
    let mut one = cur.clone();
    one.ops = 1;
    one.latency_ns_total = end - start;
    one.found = found as u64;
    stats.kinds[k].merge(&one);
    stats.latencies[k].push(end - start);
    stats.first_op_start_ns = Some(stats.first_op_start_ns.map_or(start, |s| s.min(start)));
    stats.last_op_end_ns = stats.last_op_end_ns.max(end);
}
