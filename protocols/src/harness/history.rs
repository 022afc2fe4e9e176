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
