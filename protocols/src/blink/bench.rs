//! One YCSB client thread over the tree: draw an operation, run it, count it, log it for the
//! history checkers. History keys are the index keys: a lookup logs the value it found (0 for
//! absent), a store its unique write stamp and the value it replaced (read under the leaf's X
//! latch), a scan one read per returned key plus the scan itself for the no-skipped-key check.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::stats::{KindStats, Stats};
use super::tree::{OpCounts, Shared, Tree};
use super::{Pages, SelccPages};
use crate::common::bench::write_stamp;
use crate::harness::{LoggedOp, OpLog};
use crate::nic::{Nic, NodeId};
use crate::workload::scan_check::ScanRecord;
use crate::workload::window::Gate;
use crate::workload::ycsb::{OpKind, YcsbOp, YcsbStream};

/// History logging of one client: its node's log and its cluster-wide client id.
pub struct KvLogger {
    pub log: OpLog,
    pub client: u32,
}

fn kind_index(kind: OpKind) -> usize {
    match kind {
        OpKind::Read => 0,
        OpKind::Update | OpKind::Delete => 1,
        OpKind::Insert => 2,
        OpKind::Scan { .. } => 3,
    }
}

/// One client thread on a SELCC/SEL node; the node's last thread drains its cache when
/// `drain_at_end` (so memory holds the final tree). Stops at its first error.
pub async fn run_client<N: Nic>(
    mut tree: Tree<SelccPages<N>>,
    thread: u32,
    stream: YcsbStream,
    logger: Option<KvLogger>,
    drain_at_end: bool,
    gate: Gate,
) {
    let node = tree.pages.node.clone();
    let failed = node.clone();
    run_ops(&mut tree, node.node, thread, stream, logger, gate, move || failed.errors.is_set()).await;
    let last = {
        let mut running = node.workers_running.lock().unwrap_or_else(|e| e.into_inner());
        *running -= 1;
        *running == 0
    };
    if last && drain_at_end {
        // An error is kept in the node's slot.
        let _ = node.drain(&tree.pages.worker.nic).await;
    }
}

/// The operations of one client thread over any page store (node `me`, for write stamps);
/// stops at the tree's first error or when `failed()` (the page store's own error slot).
pub async fn run_ops<P: Pages>(
    tree: &mut Tree<P>,
    me: NodeId,
    thread: u32,
    stream: impl IntoIterator<Item = YcsbOp>,
    logger: Option<KvLogger>,
    gate: Gate,
    failed: impl Fn() -> bool,
) {
    let mut sequence = 0u64;
    for op in stream {
        if tree.shared.errors.is_set() || failed() || gate.closed(tree.pages.now()) {
            break;
        }
        tree.cur = OpCounts::default();
        let start = tree.pages.now();
        let mut found = false;
        let result = match op.kind {
            OpKind::Read => tree.lookup(op.key).await.map(|v| {
                found = v != 0;
                vec![(op.key, None, v)]
            }),
            OpKind::Update | OpKind::Insert | OpKind::Delete => {
                let value_ns = tree.shared.config.value_bytes * tree.shared.config.value_byte_ns;
                if value_ns > 0 {
                    tree.pages.cpu(value_ns).await;
                }
                sequence += 1;
                let stamp = write_stamp(me, thread, sequence);
                tree.store(op.key, stamp).await.map(|old| vec![(op.key, Some(stamp), old)])
            }
            OpKind::Scan { len } => tree
                .scan(op.key, len as usize)
                .await
                .map(|rows| rows.into_iter().map(|(k, v)| (k, None, v)).collect()),
        };
        let accesses = match result {
            Ok(a) => a,
            Err(e) => {
                tree.shared.errors.record(e);
                break;
            }
        };
        let end = tree.pages.now();
        if let Some(l) = &logger {
            if let OpKind::Scan { len } = op.kind {
                let scan = ScanRecord {
                    client: l.client,
                    from: op.key,
                    limit: len,
                    keys: accesses.iter().map(|a| a.0).collect(),
                    invoke_ns: start,
                    return_ns: end,
                };
                tree.shared.stats.lock().unwrap_or_else(|e| e.into_inner()).scans.push(scan);
            }
            let mut log = l.log.lock();
            for (key, write, seen) in accesses {
                log.push(LoggedOp {
                    client: l.client,
                    key,
                    write,
                    seen: Some(seen),
                    invoke_ns: start,
                    return_ns: Some(end),
                });
            }
        }
        let warmup = !gate.measured(start, end, op.warmup);
        record(&tree.shared, op.kind, warmup, &tree.cur, start, end, found);
        tree.shared.ops_done.fetch_add(1, Ordering::Relaxed);
    }
    if gate.ran_out(tree.pages.now()) {
        tree.shared.stats.lock().unwrap_or_else(|e| e.into_inner()).window_short_threads += 1;
    }
}

fn record(
    shared: &Arc<Shared>,
    kind: OpKind,
    warmup: bool,
    cur: &OpCounts,
    start: u64,
    end: u64,
    found: bool,
) {
    let mut stats: std::sync::MutexGuard<'_, Stats> = shared.stats.lock().unwrap_or_else(|e| e.into_inner());
    stats.splits_all += cur.splits;
    stats.root_reads += cur.root_reads;
    if warmup {
        return;
    }
    let k = kind_index(kind);
    stats.kinds[k].merge(&KindStats {
        ops: 1,
        latency_ns_total: end - start,
        nodes: cur.nodes,
        move_rights: cur.move_rights,
        splits: cur.splits,
        found: found as u64,
    });
    stats.latencies[k].push(end - start);
    stats.first_op_start_ns = Some(stats.first_op_start_ns.map_or(start, |s| s.min(start)));
    stats.last_op_end_ns = stats.last_op_end_ns.max(end);
}
