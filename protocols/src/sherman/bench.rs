//! The YCSB client loop of one thread: draw an operation, run it, count its verbs, log it for
//! the history checkers.
//!
//! History keys are the index keys themselves. A lookup logs the value it found (0 for a key
//! never stored, the tombstone for a deleted one); an update/insert logs its unique write stamp
//! and the value it replaced (read under the leaf lock); a delete writes a unique tombstone;
//! (Marlin: no replaced value, its writes are blind); a scan logs one read per returned key, and the scan itself for the no-skipped-key check
//! ([`crate::workload::scan_check`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::node::TOMBSTONE;
use super::stats::OpStats;
use super::tree::{Client, Shared};
use crate::common::bench::{write_stamp, ThreadSpan};
use crate::harness::{LoggedOp, OpLog};
use crate::nic::Nic;
use crate::workload::scan_check::ScanRecord;
use crate::workload::window::Gate;
use crate::workload::ycsb::{OpKind, YcsbStream};

/// History logging of one client: its log and its cluster-wide client id.
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
    // Whether this thread has started measuring (then the leaf cache's counters were reset).
    let mut measuring = false;
    for op in stream {
        if gate.closed(c.nic.now().0) {
            break;
        }
        c.cur = OpStats::default();
        let start = c.nic.now().0;
        let warmup = gate.warmup(start, op.warmup);
        let mut stamp = || {
            sequence += 1;
            write_stamp(node, thread, sequence)
        };
        if !warmup && !measuring {
            measuring = true;
            if let Some(lc) = &c.leaf_cache {
                // The leaf cache's counters cover the measured operations, as Sherman's.
                lc.cache.reset_stats_once();
            }
        }
        let mut found = false;
        let result = match op.kind {
            OpKind::Read => c.lookup(op.key).await.map(|v| {
                found = v != 0 && v & TOMBSTONE == 0;
                vec![(op.key, None, v)]
            }),
            OpKind::Update | OpKind::Insert => {
                let s = stamp();
                c.store(op.key, s).await.map(|old| vec![(op.key, Some(s), old)])
            }
            OpKind::Delete => {
                let s = TOMBSTONE | stamp();
                c.store(op.key, s).await.map(|old| vec![(op.key, Some(s), old)])
            }
            OpKind::Scan { len } => c
                .scan(op.key, len as usize)
                .await
                .map(|rows| rows.into_iter().map(|(k, v)| (k, None, v)).collect()),
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
            // Marlin's writes are blind (a CAS on the item pointer, no value read): no
            // replaced value is logged, as for Dolphin.
            let blind = c.shared.config.items;
            for (key, write, seen) in accesses {
                let seen = if blind && write.is_some() { None } else { Some(seen) };
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
