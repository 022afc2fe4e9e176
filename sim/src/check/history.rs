//! Histories of client operations: what each client asked for, when, and what came back.
//!
//! A [`History`] is a list of [`Record`]s, one per client operation, each with its invocation
//! time and — if it returned before the run ended — its return time and returned value. It may
//! also carry the **write order** per key: the sequence of values in the order they took effect,
//! which only the simulator knows ([`History::record_commit`]). The checkers in this module read
//! histories; they never mutate them.
//!
//! [`HistoryRecorder`] is the shared handle tasks use while a run is in progress. It is a cheap
//! clone over `Arc<Mutex<History>>`: the simulator is single-threaded, so the lock is never
//! contended, and the `Arc` keeps it usable from `Send + Sync` protocol code.
//!
//! Conventions the checkers rely on:
//! * A [`ClientId`] is a *sequential* process: it has at most one operation in flight. Tasks that
//!   issue operations concurrently need distinct client ids. The recorder asserts this.
//! * An operation that never returns (the run ended, its node crashed, its verb timed out) stays
//!   *pending*: it may or may not have taken effect, and the checkers consider both.
//! * Writes should use values unique per key (and different from the key's initial value): the
//!   fast checkers need them to know which write a read observed. Without uniqueness the checkers
//!   fall back to a bounded search.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use dmsim_protocols::nic::Nanos;

/// A logical address: the key a client operation names (not a `RemoteAddr`; a protocol maps keys
/// to lines and nodes however it likes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(pub u64);

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "k{}", self.0)
    }
}

/// A sequential client process (a thread or coroutine issuing one operation at a time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub u32);

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}

/// Index of a record in its [`History`] (dense, in invocation order of recording).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u32);

impl OpId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op#{}", self.0)
    }
}

/// What a client asked for. Values are 8-byte words; `Faa` wraps on overflow like the NIC does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Returns the current value.
    Read { key: Key },
    /// Sets the value; returns nothing.
    Write { key: Key, value: u64 },
    /// If the value is `expect`, sets it to `swap`. Returns the old value either way; the CAS
    /// succeeded iff `old == expect`.
    Cas { key: Key, expect: u64, swap: u64 },
    /// Adds `add` (wrapping). Returns the old value.
    Faa { key: Key, add: u64 },
}

impl Op {
    pub fn key(&self) -> Key {
        match *self {
            Op::Read { key } | Op::Write { key, .. } | Op::Cas { key, .. } | Op::Faa { key, .. } => key,
        }
    }

    /// Whether a completed operation of this kind returns a value (all but `Write` do).
    pub fn returns_value(&self) -> bool {
        !matches!(self, Op::Write { .. })
    }

    /// Whether the operation can change the value at all. A CAS that swaps a value for itself
    /// and an FAA of zero cannot, and the checkers treat them as reads.
    pub fn can_mutate(&self) -> bool {
        match *self {
            Op::Read { .. } => false,
            Op::Write { .. } => true,
            Op::Cas { expect, swap, .. } => expect != swap,
            Op::Faa { add, .. } => add != 0,
        }
    }

    /// The value after applying this operation to `current`.
    pub fn apply(&self, current: u64) -> u64 {
        match *self {
            Op::Read { .. } => current,
            Op::Write { value, .. } => value,
            Op::Cas { expect, swap, .. } => {
                if current == expect {
                    swap
                } else {
                    current
                }
            }
            Op::Faa { add, .. } => current.wrapping_add(add),
        }
    }
}

/// How an operation returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub at: Nanos,
    /// The recorder's event counter at the return; see [`Record::invoke_seq`].
    pub seq: u64,
    /// The value read (`Read`) or the old value (`Cas`, `Faa`); `None` for `Write`.
    pub value: Option<u64>,
}

/// One client operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub id: OpId,
    pub client: ClientId,
    pub op: Op,
    pub invoke_at: Nanos,
    /// The recorder's event counter at the invocation. Invocations and returns are numbered in the
    /// order they were recorded, which in the simulator is the order the engine ran them. The
    /// checkers order events by `(time, seq)`: two events in the same nanosecond are ordered as
    /// they happened, not treated as concurrent — otherwise a read invoked in the very nanosecond a
    /// conflicting write returned could never be called stale.
    pub invoke_seq: u64,
    /// `None` while (or if it stayed) pending.
    pub completion: Option<Completion>,
}

impl Record {
    pub fn is_pending(&self) -> bool {
        self.completion.is_none()
    }

    /// The value the operation returned, if it completed and returns one.
    pub fn returned(&self) -> Option<u64> {
        self.completion.and_then(|c| c.value)
    }

    /// Whether this operation certainly changed the value: a completed write, a completed CAS
    /// that succeeded, a completed FAA — excluding no-op variants (see [`Op::can_mutate`]).
    pub fn surely_mutated(&self) -> bool {
        if self.is_pending() || !self.op.can_mutate() {
            return false;
        }
        match self.op {
            Op::Read { .. } => false,
            Op::Write { .. } | Op::Faa { .. } => true,
            Op::Cas { expect, .. } => self.returned() == Some(expect),
        }
    }
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ", self.id, self.client)?;
        match self.op {
            Op::Read { key } => write!(f, "read({key})")?,
            Op::Write { key, value } => write!(f, "write({key}, {value})")?,
            Op::Cas { key, expect, swap } => write!(f, "cas({key}, {expect}→{swap})")?,
            Op::Faa { key, add } => write!(f, "faa({key}, +{add})")?,
        }
        match self.completion {
            Some(Completion { at, value: Some(value), .. }) => {
                write!(f, " → {value} [{}, {}]", self.invoke_at, at)
            }
            Some(Completion { at, value: None, .. }) => write!(f, " [{}, {}]", self.invoke_at, at),
            None => write!(f, " [{}, pending)", self.invoke_at),
        }
    }
}

/// One entry of a key's write order: `value` became the key's value at time `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commit {
    pub value: u64,
    pub at: Nanos,
}

/// A recorded run: client operations and, optionally, the ground-truth write order.
#[derive(Clone, Debug, Default)]
pub struct History {
    records: Vec<Record>,
    /// `Some` iff the write order is recorded. Keys absent from the map had no committed write.
    commits: Option<BTreeMap<Key, Vec<Commit>>>,
    initial_values: BTreeMap<Key, u64>,
    /// For each client, its pending operation if it has one (enforces sequential clients).
    in_flight: BTreeMap<ClientId, OpId>,
    /// Set by [`History::allow_overlapping_clients`]: `in_flight` is not enforced.
    overlapping_clients: bool,
    /// Invocations and returns recorded so far.
    seq_next: u64,
}

impl History {
    /// A history without a write order: checkers must infer one.
    pub fn new() -> History {
        History::default()
    }

    /// A history whose producer promises to call [`History::record_commit`] for *every* change of
    /// value of every key, in the order the changes took effect.
    pub fn with_write_order() -> History {
        History { commits: Some(BTreeMap::new()), ..History::default() }
    }

    /// Lets one client's operations overlap in time. For histories merged from several clocks
    /// ([`super::merge`]), where each operation's interval is widened by the clocks' uncertainty
    /// so that consecutive operations of one client may overlap. The checkers then treat them
    /// as concurrent for real-time order (weaker, never wrong); program order for sequential
    /// consistency still follows the order records were invoked in.
    pub fn allow_overlapping_clients(&mut self) {
        assert!(self.records.is_empty(), "allow_overlapping_clients after operations were recorded");
        self.overlapping_clients = true;
    }

    /// Every key starts at 0 unless set otherwise here (before any operation on it).
    pub fn set_initial_value(&mut self, key: Key, value: u64) {
        assert!(
            !self.records.iter().any(|r| r.op.key() == key),
            "initial value of {key} set after operations on it were recorded"
        );
        self.initial_values.insert(key, value);
    }

    pub fn initial_value(&self, key: Key) -> u64 {
        self.initial_values.get(&key).copied().unwrap_or(0)
    }

    /// Records the invocation of `op` by `client` at `at`.
    ///
    /// Panics if `client` already has an operation in flight: clients are sequential.
    pub fn invoke(&mut self, client: ClientId, op: Op, at: Nanos) -> OpId {
        let id = OpId(u32::try_from(self.records.len()).expect("history longer than u32::MAX operations"));
        if !self.overlapping_clients {
            let previous = self.in_flight.insert(client, id);
            assert!(
                previous.is_none(),
                "{client} invoked {op:?} while {} is still in flight",
                previous.unwrap()
            );
        }
        self.records.push(Record {
            id,
            client,
            op,
            invoke_at: at,
            invoke_seq: self.seq_next,
            completion: None,
        });
        self.seq_next += 1;
        id
    }

    /// Records that `id` returned at `at` with `value` (`None` exactly for writes).
    pub fn complete(&mut self, id: OpId, at: Nanos, value: Option<u64>) {
        let record = &mut self.records[id.index()];
        assert!(record.completion.is_none(), "{id} completed twice");
        assert!(
            at >= record.invoke_at,
            "{id} returned at {at}, before its invocation at {}",
            record.invoke_at
        );
        assert_eq!(
            value.is_some(),
            record.op.returns_value(),
            "{id}: {:?} must complete with a value iff it returns one",
            record.op
        );
        record.completion = Some(Completion { at, seq: self.seq_next, value });
        self.seq_next += 1;
        if !self.overlapping_clients {
            let removed = self.in_flight.remove(&record.client);
            assert_eq!(removed, Some(id));
        }
    }

    /// Records that `key` took the value `value` at `at`, in the true order of effects: once for
    /// every write that took effect (even one storing the value already there), every successful
    /// CAS and every FAA — but not for the no-ops of [`Op::can_mutate`] (CAS `v→v`, FAA of 0). Call it at
    /// the point where the change becomes the one all later readers must see (for a cached
    /// protocol that is the store into the exclusively held line, not the write-back).
    pub fn record_commit(&mut self, key: Key, value: u64, at: Nanos) {
        let commits = self.commits.as_mut().expect("record_commit on a history without a write order");
        let list = commits.entry(key).or_default();
        if let Some(last) = list.last() {
            assert!(at >= last.at, "commit to {key} at {at} precedes the previous commit at {}", last.at);
        }
        list.push(Commit { value, at });
    }

    pub fn records(&self) -> &[Record] {
        &self.records
    }

    pub fn record(&self, id: OpId) -> &Record {
        &self.records[id.index()]
    }

    pub fn has_write_order(&self) -> bool {
        self.commits.is_some()
    }

    /// The write order of `key`: `None` if the history does not record one, else the commits
    /// (possibly none).
    pub fn commits(&self, key: Key) -> Option<&[Commit]> {
        self.commits.as_ref().map(|c| c.get(&key).map(Vec::as_slice).unwrap_or(&[]))
    }

    /// Record indices grouped by key, keys ascending, each group in recording order.
    pub fn by_key(&self) -> BTreeMap<Key, Vec<OpId>> {
        let mut groups: BTreeMap<Key, Vec<OpId>> = BTreeMap::new();
        for record in &self.records {
            groups.entry(record.op.key()).or_default().push(record.id);
        }
        if let Some(commits) = &self.commits {
            // A key may have commits but no recorded operation (a protocol bug, or a foreign
            // writer); the checkers must still look at it.
            for key in commits.keys() {
                groups.entry(*key).or_default();
            }
        }
        groups
    }
}

/// The narrow interface workload code records through. [`HistoryRecorder`] implements it; a
/// no-op implementation lets performance runs skip recording.
///
/// [CHOICE] This trait only needs `Nanos`, so it can move to `protocols` if workloads or
/// protocol code (which cannot depend on `sim`) must record commits themselves.
pub trait HistorySink {
    fn invoke(&self, client: ClientId, op: Op, at: Nanos) -> OpId;
    fn complete(&self, id: OpId, at: Nanos, value: Option<u64>);
    fn record_commit(&self, key: Key, value: u64, at: Nanos);
}

/// A shared, cloneable handle on a [`History`] under construction.
#[derive(Clone, Debug, Default)]
pub struct HistoryRecorder {
    inner: Arc<Mutex<History>>,
}

impl HistoryRecorder {
    pub fn new() -> HistoryRecorder {
        HistoryRecorder::default()
    }

    /// See [`History::with_write_order`].
    pub fn with_write_order() -> HistoryRecorder {
        HistoryRecorder { inner: Arc::new(Mutex::new(History::with_write_order())) }
    }

    pub fn set_initial_value(&self, key: Key, value: u64) {
        self.lock().set_initial_value(key, value);
    }

    /// A copy of the history so far (pending operations stay pending in the copy).
    pub fn snapshot(&self) -> History {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, History> {
        // A poisoned lock means a task panicked mid-record; the panic is the report.
        self.inner.lock().expect("history recorder lock poisoned")
    }
}

impl HistorySink for HistoryRecorder {
    fn invoke(&self, client: ClientId, op: Op, at: Nanos) -> OpId {
        self.lock().invoke(client, op, at)
    }

    fn complete(&self, id: OpId, at: Nanos, value: Option<u64>) {
        self.lock().complete(id, at, value);
    }

    fn record_commit(&self, key: Key, value: u64, at: Nanos) {
        self.lock().record_commit(key, value, at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_clones_share_one_history() {
        // Goal: two clones of a recorder write into the same history, pending ops stay pending.
        let recorder = HistoryRecorder::with_write_order();
        let other = recorder.clone();
        let w = recorder.invoke(ClientId(1), Op::Write { key: Key(7), value: 1 }, Nanos(5));
        let r = other.invoke(ClientId(2), Op::Read { key: Key(7) }, Nanos(6));
        other.record_commit(Key(7), 1, Nanos(8));
        recorder.complete(w, Nanos(10), None);
        let history = other.snapshot();
        assert_eq!(history.records().len(), 2);
        assert!(!history.record(w).is_pending());
        assert!(history.record(r).is_pending());
        assert_eq!(history.commits(Key(7)), Some(&[Commit { value: 1, at: Nanos(8) }][..]));
        assert_eq!(history.commits(Key(8)), Some(&[][..]));
    }

    #[test]
    #[should_panic(expected = "still in flight")]
    fn client_with_two_ops_in_flight_is_rejected() {
        // Goal: a client id is a sequential process; a second concurrent invoke is a wiring bug.
        let mut history = History::new();
        history.invoke(ClientId(1), Op::Read { key: Key(1) }, Nanos(0));
        history.invoke(ClientId(1), Op::Read { key: Key(2) }, Nanos(1));
    }

    #[test]
    #[should_panic(expected = "with a value iff")]
    fn read_completed_without_value_is_rejected() {
        // Goal: the recorder checks the shape of a completion against its operation.
        let mut history = History::new();
        let id = history.invoke(ClientId(1), Op::Read { key: Key(1) }, Nanos(0));
        history.complete(id, Nanos(1), None);
    }
}
