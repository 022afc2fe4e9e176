//! What every micro-benchmark client loop shares: the unique value each write stores, the
//! [`Observer`] that watches a client's operations, and the [`Logger`] observer that records
//! them for the history checkers. SELCC's and GAM's client loops (`<p>/bench.rs`) call the
//! observer at the same three points, so histories come with any protocol that does.

use crate::harness::{LoggedOp, OpLog};
use crate::nic::{Nanos, NodeId};
use crate::workload::micro::MicroOp;

/// The value write number `sequence` (from 1) of `thread` on `node` stores in every word it
/// covers: unique per write and never 0 (the initial value), so every read names its write.
pub fn write_stamp(node: NodeId, thread: u32, sequence: u64) -> u64 {
    (node.0 as u64 + 1) << 48 | (thread as u64) << 32 | sequence
}

/// One client thread's measured phase: first start, last end and operations (coroutines of
/// the thread may finish out of order). Its rate, operations over its own span, is what the
/// DEX artifact sums into a throughput (`thread_mops` of Sherman, SMART and DEX).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ThreadSpan(Option<(u64, u64, u64)>);

impl ThreadSpan {
    /// A measured operation ran from `start` to `end` (ns).
    pub fn record(&mut self, start: u64, end: u64) {
        let span = self.0.get_or_insert((start, end, 0));
        span.0 = span.0.min(start);
        span.1 = span.1.max(end);
        span.2 += 1;
    }

    /// The first measured start, if any operation was measured.
    pub fn first(&self) -> Option<u64> {
        self.0.map(|(first, _, _)| first)
    }

    /// Measured operations per ns of the thread's own span (`None`: nothing measured).
    pub fn rate_per_ns(&self) -> Option<f64> {
        self.0.map(|(first, last, n)| n as f64 / (last - first).max(1) as f64)
    }
}

/// Watches a client's operations, e.g. to log them for history checkers. Every method
/// defaults to doing nothing; `()` is the observer that watches nothing.
pub trait Observer: Send {
    /// Whether `accessed` should see the words a write replaces (costs a local copy per write;
    /// the protocol reads them while it holds the word exclusively).
    fn wants_replaced(&self) -> bool {
        false
    }
    /// Operation `op` starts, at `now`; a write will store `stamp` in every word it covers.
    fn invoke(&mut self, _op: &MicroOp, _stamp: Option<u64>, _now: Nanos) {}
    /// While the protocol holds the data: a read saw `words`; a write replaces `words` (empty
    /// unless [`Observer::wants_replaced`]).
    fn accessed(&mut self, _op: &MicroOp, _words: &[u64]) {}
    /// Operation `op` returned, at `now`.
    fn complete(&mut self, _op: &MicroOp, _now: Nanos) {}
}

impl Observer for () {}

/// Logs one client's operations into its node's [`OpLog`]: one [`LoggedOp`] per accessed word,
/// keyed `block · words_per_block + word`; a write also logs the value it replaced, which is how
/// the checkers rebuild each key's write order where no simulator watches the commits.
pub struct Logger {
    log: OpLog,
    client: u32,
    words_per_block: u64,
    /// Index of the current operation's first entry (one entry per word, contiguous).
    first: usize,
}

impl Logger {
    /// `client` must be unique in the cluster (e.g. compute index × threads + thread).
    pub fn new(log: OpLog, client: u32, block_bytes: u64) -> Logger {
        Logger { log, client, words_per_block: block_bytes / 8, first: 0 }
    }
}

impl Observer for Logger {
    fn wants_replaced(&self) -> bool {
        true
    }

    fn invoke(&mut self, op: &MicroOp, stamp: Option<u64>, now: Nanos) {
        let key = op.gcl_index * self.words_per_block + op.offset_bytes as u64 / 8;
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
