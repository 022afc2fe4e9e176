//! The client loop: one thread's operations in order, each timed and counted, and — when the
//! run checks histories — logged per key for the linearizability checkers (a lookup logs the
//! value word it returned; a write logs its unique stamp and the value it replaced; a delete
//! writes a tombstone stamp, so every value stays unique). Scans are not logged per key; the
//! loop checks that each scan's keys ascend and, when logging, records the scan for the
//! no-skipped-key check ([`crate::workload::scan_check`]).

use std::sync::Arc;

use super::layout::TOMBSTONE;
use super::stats::OpKind;
use super::tree::Tree;
use super::workload::OpStream;
use crate::common::bench::write_stamp;
use crate::harness::{LoggedOp, OpLog};
use crate::nic::{Nanos, Nic};
use crate::workload::scan_check::ScanRecord;
use crate::workload::window::Gate;

/// Where a thread logs its operations: the node's log and the thread's cluster-wide client id.
#[derive(Clone)]
pub struct Logging {
    pub log: OpLog,
    pub client: u32,
}

/// Coroutine `coro` of client thread `thread` (SMART runs 8 per thread on the thread's QP).
pub async fn run_client<N: Nic>(
    tree: Arc<Tree<N>>,
    thread: u32,
    coro: u32,
    stream: OpStream,
    logging: Option<Logging>,
    gate: Gate,
) {
    let mut w = tree.worker(thread, coro);
    // Stamps are unique per (node, thread, sequence): a thread's coroutines interleave theirs.
    let coros = tree.config.coroutines_per_thread as u64;
    let node = w.nic.node();
    let mut sequence = coro as u64;
    for op in stream {
        if tree.errors.is_set() {
            return;
        }
        if gate.closed(w.nic.now().0) {
            break;
        }
        let start = w.nic.now();
        let write = match op.kind {
            OpKind::Update | OpKind::Insert | OpKind::Delete => {
                sequence += coros;
                let stamp = write_stamp(node, thread, sequence);
                Some(match op.kind {
                    OpKind::Delete => stamp | TOMBSTONE,
                    // Never 0 (the bulk load's value) nor a tombstone.
                    OpKind::Update if tree.config.key_valued_updates => (op.key & !TOMBSTONE).max(1),
                    _ => stamp,
                })
            }
            OpKind::Lookup | OpKind::Scan => None,
        };
        let logged = logging.as_ref().filter(|_| op.kind != OpKind::Scan).map(|l| {
            let mut log = l.log.lock();
            log.push(LoggedOp {
                client: l.client,
                key: op.key,
                write,
                seen: None,
                invoke_ns: start.0,
                return_ns: None,
            });
            log.len() - 1
        });
        w.nic.cpu(Nanos(tree.config.cpu.op_ns)).await;
        let (result, shared) = match (op.kind, write) {
            (OpKind::Scan, _) => match tree.scan(&mut w, op.key, op.scan_len as usize).await {
                Ok(rows) => {
                    if rows.windows(2).any(|p| p[0].0 >= p[1].0) {
                        tree.note_scan_disorder();
                    }
                    if let Some(l) = &logging {
                        tree.note_scan(ScanRecord {
                            client: l.client,
                            from: op.key,
                            limit: op.scan_len,
                            keys: rows.iter().map(|r| r.0).collect(),
                            invoke_ns: start.0,
                            return_ns: w.nic.now().0,
                        });
                    }
                    (Ok(0), false)
                }
                Err(e) => (Err(e), false),
            },
            (_, Some(value)) => tree.write(&mut w, op.key, value).await,
            (_, None) => tree.lookup(&mut w, op.key).await,
        };
        match result {
            Ok(seen) => {
                if let (Some(l), Some(i)) = (&logging, logged) {
                    let mut log = l.log.lock();
                    log[i].seen = Some(seen);
                    log[i].return_ns = Some(w.nic.now().0);
                }
                let counted = gate.measured(start.0, w.nic.now().0, op.warmup);
                tree.record(&mut w, op.kind, start, shared, !counted);
            }
            Err(e) => {
                tree.errors.record(e);
                return;
            }
        }
    }
    if gate.ran_out(w.nic.now().0) {
        tree.note_window_short();
    }
}
