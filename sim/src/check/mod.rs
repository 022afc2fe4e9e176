//! Checkers: does a run's behaviour match what the protocol promises?
//!
//! ```text
//!  client tasks ──invoke/complete──▶ HistoryRecorder ──snapshot──▶ History ─┬─▶ linearizability (per key)
//!  simulator    ──record_commit───▶  (write order, optional)               └─▶ sequential (all keys)
//!  engine loop  ──every event──────▶ InvariantSet ──▶ protocol invariants over live state
//! ```
//!
//! Every checker answers `Ok` or a [`Violation`] that names the checker, the keys, the operations
//! involved and explains in a paragraph why no correct execution could have produced them.
//!
//! # The checkers
//!
//! * [`linearizability`] — each key on its own must behave like one atomic 8-byte register under
//!   reads, writes, CAS and FAA, respecting real time (an operation that returned before another
//!   was invoked takes effect first). Linearizability is compositional, so checking keys one by one
//!   is exact. Per key, the cheapest applicable method runs:
//!   1. *write order* (the simulator recorded it): every operation is placed at the commit it wrote
//!      or read, and one sweep checks that placement against real time — O(n log n);
//!   2. *zones* (reads and writes only, unique write values, no write order): Gibbons–Korach
//!      clusters — each value's write and reads must fit in a window no other value's window
//!      overlaps — O(n log n);
//!   3. *search* (anything else, e.g. CAS/FAA or repeated values without a write order): Wing & Gong
//!      depth-first search with Lowe's memoisation of (linearized set, value), iterative, capped at
//!      128 operations per key and a state budget; beyond the cap the key is reported `Unknown`.
//!
//!   It catches stale reads, reads of never-written values, lost updates, CAS that succeed on stale
//!   values, reordered writes, and (with a write order) a memory order contradicting real time.
//!   It cannot see anything across keys.
//! * [`sequential`] — sequential consistency across keys, given the write order: the graph of
//!   program order, reads-from, write order and from-read edges must be acyclic (Kahn's algorithm,
//!   O(V + E)); a cycle is reported edge by edge. It catches message-passing and store-buffer
//!   shapes. It ignores real time, so it does not subsume linearizability. Conversely, when clients
//!   are sequential and times honest, program order is part of real time and per-key
//!   linearizability already implies SC (locality); SC earns its keep for protocols that promise
//!   only SC, and for histories whose clocks cannot be compared (several hardware nodes).
//! * [`invariant`] — protocol invariants (SWMR per line, latch word agrees with the memos, …)
//!   registered as closures over the protocol's state and run on every event. Their cost is the
//!   implementor's; the set adds one virtual call each.
//!
//! # What a history must provide
//!
//! See [`history`]: sequential client ids, unique write values per key for the fast paths, pending
//! operations left pending (never dropped), and — for the write-order method and the SC checker —
//! a commit for *every* change of value, recorded where it becomes visible to readers.

use std::fmt;

use dmsim_protocols::nic::Nanos;

pub mod history;
pub mod invariant;
pub mod linearizability;
pub mod merge;
mod order;
pub mod sequential;
#[cfg(test)]
mod testkit;

pub use history::{
    ClientId, Commit, Completion, History, HistoryRecorder, HistorySink, Key, Op, OpId, Record,
};
pub use invariant::{FnInvariant, Invariant, InvariantSet};
pub use linearizability::{check_linearizability, check_linearizability_with, LinearizabilityOptions};
pub use sequential::check_sequential_consistency;

/// A checker's proof that the run misbehaved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The checker or invariant that failed, e.g. `"linearizability"`.
    pub checker: &'static str,
    pub keys: Vec<Key>,
    /// The operations the explanation refers to, as recorded.
    pub ops: Vec<Record>,
    /// Virtual time of the failure, for invariants checked as the run goes.
    pub at: Option<Nanos>,
    pub explanation: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} violated", self.checker)?;
        if !self.keys.is_empty() {
            let keys: Vec<String> = self.keys.iter().map(Key::to_string).collect();
            write!(f, " on {}", keys.join(", "))?;
        }
        if let Some(at) = self.at {
            write!(f, " at {at}")?;
        }
        writeln!(f, ": {}", self.explanation)?;
        for op in &self.ops {
            writeln!(f, "    {op}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Violation {}

/// A key a checker could not decide, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unknown {
    pub key: Key,
    pub reason: String,
}

/// What a history checker covered when it found no violation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Keys decided (found correct) by each method.
    pub keys_by_write_order: usize,
    pub keys_by_zones: usize,
    pub keys_by_search: usize,
    /// Keys neither proven correct nor shown wrong. A report with unknowns is not a pass.
    pub unknown: Vec<Unknown>,
}

impl Report {
    pub fn keys_checked(&self) -> usize {
        self.keys_by_write_order + self.keys_by_zones + self.keys_by_search
    }

    /// Whether every key was decided.
    pub fn is_complete(&self) -> bool {
        self.unknown.is_empty()
    }
}
