//! Client operations as each node logs them, for the history checkers.
//!
//! On hardware no one sees the true order of writes, so a node logs, per accessed 8-byte word,
//! what its client did on the node's own clock; a write also logs the value it *replaced*
//! (read under exclusive ownership). The checkers (in the simulator crate) rebuild each key's
//! write order from those replaced values and check linearizability and sequential consistency.
//! The simulator uses the same logs on its one clock, so both backends check the same thing.

use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

/// One operation on one word as a node logged it, on the node's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedOp {
    /// Globally unique sequential client (e.g. node index × threads + thread).
    pub client: u32,
    pub key: u64,
    /// `Some(value)` for a write of `value`; `None` for a read.
    pub write: Option<u64>,
    /// A write: the value it replaced, read under exclusive ownership (`None` if it never got
    /// that far). A read: the value it returned (`None` while pending).
    pub seen: Option<u64>,
    pub invoke_ns: u64,
    /// `None`: the operation never returned.
    pub return_ns: Option<u64>,
}

/// How a node's clock maps onto the reference clock: `reference = local - offset_ns`, give or
/// take `uncertainty_ns`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clock {
    pub offset_ns: i64,
    pub uncertainty_ns: u64,
}

impl Clock {
    /// `t` of this node's clock on the reference clock, moved `widen_ns` later (negative:
    /// earlier); signed, since a node's clock may start after the reference.
    pub fn to_reference(&self, t: u64, widen_ns: i64) -> i128 {
        t as i128 - self.offset_ns as i128 + widen_ns as i128
    }

    /// An interval of this node's clock on the reference clock, widened by the uncertainty on
    /// both sides, so the true interval lies inside it (a check stays sound: no false alarm
    /// from a clock error).
    pub fn widened(&self, invoke: u64, ret: Option<u64>) -> (i128, Option<i128>) {
        let u = self.uncertainty_ns as i64;
        (self.to_reference(invoke, -u), ret.map(|r| self.to_reference(r, u)))
    }
}

/// Widened intervals ([`Clock::widened`]) shifted by one common amount so that no time is
/// negative, which changes no order; in input order.
pub fn rebased(intervals: Vec<(i128, Option<i128>)>) -> impl Iterator<Item = (u64, Option<u64>)> {
    let base = intervals.iter().map(|i| i.0).min().unwrap_or(0).min(0);
    intervals.into_iter().map(move |(invoke, ret)| ((invoke - base) as u64, ret.map(|r| (r - base) as u64)))
}

/// Logged operations of several nodes on one clock ([`Clock::widened`], [`rebased`]), for
/// checkers that compare times across nodes. With identity clocks (the simulator) the
/// operations come back as logged.
pub fn on_reference_clock<'a>(logs: impl IntoIterator<Item = (Clock, &'a [LoggedOp])>) -> Vec<LoggedOp> {
    let ops: Vec<(Clock, LoggedOp)> =
        logs.into_iter().flat_map(|(c, log)| log.iter().map(move |op| (c, *op))).collect();
    let intervals = ops.iter().map(|(c, op)| c.widened(op.invoke_ns, op.return_ns)).collect();
    ops.into_iter()
        .zip(rebased(intervals))
        .map(|((_, op), (invoke_ns, return_ns))| LoggedOp { invoke_ns, return_ns, ..op })
        .collect()
}

/// A node's log of client operations, shared by its clients.
#[derive(Clone, Default)]
pub struct OpLog(Arc<Mutex<Vec<LoggedOp>>>);

impl OpLog {
    pub fn new() -> OpLog {
        OpLog::default()
    }

    pub fn lock(&self) -> MutexGuard<'_, Vec<LoggedOp>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Everything logged so far (operations still in flight have no return time).
    pub fn snapshot(&self) -> Vec<LoggedOp> {
        self.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_times_are_shifted_widened_and_never_negative() {
        let op = |invoke_ns, return_ns| LoggedOp {
            client: 0,
            key: 1,
            write: None,
            seen: Some(0),
            invoke_ns,
            return_ns,
        };
        let ahead = Clock { offset_ns: 1_000, uncertainty_ns: 10 };
        let behind = Clock { offset_ns: -500, uncertainty_ns: 0 };
        let a = [op(1_005, Some(1_100))];
        let b = [op(0, None)];
        let moved = on_reference_clock([(ahead, &a[..]), (behind, &b[..])]);
        // `ahead`'s op is at [5, 100] on the reference, widened to [-5, 110]; the common base
        // of 5 makes it [0, 115] and moves `behind`'s op from 500 to 505.
        assert_eq!((moved[0].invoke_ns, moved[0].return_ns), (0, Some(115)));
        assert_eq!((moved[1].invoke_ns, moved[1].return_ns), (505, None));
        let same = on_reference_clock([(Clock::default(), &a[..])]);
        assert_eq!(same, a.to_vec(), "identity clocks (the simulator) change nothing");
    }
}
