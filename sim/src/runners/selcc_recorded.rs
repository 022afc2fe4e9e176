//! SELCC's micro-benchmark client with every operation logged for the history checkers, on
//! any backend.
//!
//! The same lock/access/unlock loop as `dmsim_protocols::selcc::bench::run_worker`, plus a
//! [`LoggedOp`] per accessed word: a write also logs the value it replaced (read under the
//! exclusive latch), which is how [`crate::check::merge`] rebuilds each key's write order where
//! no simulator can watch the commits (on hardware). Keys are `gcl_index · words_per_gcl + word`.

use std::sync::{Arc, Mutex};

use dmsim_protocols::nic::Nic;
use dmsim_protocols::selcc::Node;
use dmsim_protocols::workload::micro::MicroStream;

use crate::check::merge::LoggedOp;

/// A node's log of client operations, shared by its workers.
#[derive(Clone, Default)]
pub struct OpLog(Arc<Mutex<Vec<LoggedOp>>>);

impl OpLog {
    pub fn new() -> OpLog {
        OpLog::default()
    }

    /// Logs one entry per word of an access (contiguous: one lock); returns the first's index.
    fn push(&self, ops: impl Iterator<Item = LoggedOp>) -> usize {
        let mut log = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let first = log.len();
        log.extend(ops);
        first
    }

    /// Updates the `count` entries of one access, `f(word, entry)`.
    fn update(&self, first: usize, count: usize, f: impl Fn(usize, &mut LoggedOp)) {
        let mut log = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for (i, op) in log[first..first + count].iter_mut().enumerate() {
            f(i, op);
        }
    }

    /// Everything logged so far (operations still in flight have no return time).
    pub fn snapshot(&self) -> Vec<LoggedOp> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// One front-end thread: the stream's operations, each logged; the last thread of the node
/// drains its cache if `drain_at_end` (so memory can be checked afterwards).
pub async fn recorded_worker<N: Nic>(
    node: Arc<Node<N>>,
    thread: u32,
    client: u32,
    stream: MicroStream,
    log: OpLog,
    drain_at_end: bool,
) {
    let words_per_gcl = node.config.gcl_size_bytes as u64 / 8;
    let mut w = node.worker(thread);
    let mut sequence = 0u64;
    let mut buffer = Vec::new();
    for op in stream {
        let g = node.layout.gcl(op.gcl_index);
        let words = (op.len_bytes / 8) as usize;
        let first_key = op.gcl_index * words_per_gcl + op.offset_bytes as u64 / 8;
        let invoke_ns = w.nic.now().0;
        if op.write {
            sequence += 1;
            // Unique per (node, thread, sequence) and never 0 (the initial value).
            let stamp = (node.node.0 as u64 + 1) << 48 | (thread as u64) << 32 | sequence;
            let first = log.push((0..words as u64).map(|i| LoggedOp {
                client,
                key: first_key + i,
                write: Some(stamp),
                seen: None,
                invoke_ns,
                return_ns: None,
            }));
            let mut h = node.xlock(&mut w, g).await;
            buffer.clear();
            buffer.resize(words, 0);
            node.read(&h, op.offset_bytes, &mut buffer);
            log.update(first, words, |i, logged| logged.seen = Some(buffer[i]));
            buffer.iter_mut().for_each(|v| *v = stamp);
            w.nic.mark("write", first_key);
            node.write(&mut h, op.offset_bytes, &buffer);
            node.xunlock(&mut w, h).await;
            let at = w.nic.now().0;
            log.update(first, words, |_, logged| logged.return_ns = Some(at));
        } else {
            let first = log.push((0..words as u64).map(|i| LoggedOp {
                client,
                key: first_key + i,
                write: None,
                seen: None,
                invoke_ns,
                return_ns: None,
            }));
            let h = node.slock(&mut w, g).await;
            buffer.clear();
            buffer.resize(words, 0);
            node.read(&h, op.offset_bytes, &mut buffer);
            w.nic.mark("read", first_key);
            node.sunlock(&mut w, h).await;
            let at = w.nic.now().0;
            log.update(first, words, |i, logged| {
                logged.seen = Some(buffer[i]);
                logged.return_ns = Some(at);
            });
        }
    }
    let last = {
        let mut running = node.workers_running.lock().unwrap_or_else(|e| e.into_inner());
        *running -= 1;
        *running == 0
    };
    if last && drain_at_end {
        node.drain(&w.nic).await;
    }
}
