//! SELCC's micro-benchmark clients with every operation logged for the history checkers, on
//! any backend: an [`Observer`] of [`super::bench::run_observed_worker`].
//!
//! One [`LoggedOp`] per accessed word. A write also logs the value it replaced (read under the
//! exclusive latch), which is how the checkers (`dmsim_sim::check::merge`) rebuild each key's write order where
//! no simulator can watch the commits (on hardware). Keys are `gcl_index · words_per_gcl + word`.

use std::sync::Arc;

use super::bench::{run_observed_worker, Observer};
use super::Node;
use crate::harness::{LoggedOp, OpLog};
use crate::nic::{Nanos, Nic};
use crate::workload::micro::{MicroOp, MicroStream};

/// Logs one client's operations into its node's [`OpLog`].
struct Recorder {
    log: OpLog,
    client: u32,
    words_per_gcl: u64,
    /// Index of the current operation's first entry (one entry per word, contiguous).
    first: usize,
}

impl Observer for Recorder {
    fn wants_replaced(&self) -> bool {
        true
    }

    fn invoke(&mut self, op: &MicroOp, stamp: Option<u64>, now: Nanos) {
        let key = op.gcl_index * self.words_per_gcl + op.offset_bytes as u64 / 8;
        let mut log = self.log.lock();
        self.first = log.len();
        log.extend((0..op.len_bytes as u64 / 8).map(|i| LoggedOp {
            client: self.client,
            key: key + i,
            write: stamp,
            seen: None,
            invoke_ns: now.0,
            return_ns: None,
        }));
    }

    fn accessed(&mut self, op: &MicroOp, words: &[u64]) {
        let mut log = self.log.lock();
        for (entry, word) in log[self.first..].iter_mut().zip(words).take(op.len_bytes as usize / 8) {
            entry.seen = Some(*word);
        }
    }

    fn complete(&mut self, op: &MicroOp, now: Nanos) {
        let mut log = self.log.lock();
        let n = op.len_bytes as usize / 8;
        log[self.first..self.first + n].iter_mut().for_each(|e| e.return_ns = Some(now.0));
    }
}

/// One front-end thread whose operations land in `log` as `client`.
pub async fn recorded_worker<N: Nic>(
    node: Arc<Node<N>>,
    thread: u32,
    client: u32,
    stream: MicroStream,
    log: OpLog,
    drain_at_end: bool,
) {
    let words_per_gcl = node.config.gcl_size_bytes as u64 / 8;
    let recorder = Recorder { log, client, words_per_gcl, first: 0 };
    run_observed_worker(node, thread, stream, drain_at_end, recorder).await
}
