//! A point as a *plan*: the cluster shape, each node's tasks for any `N: Nic`, and how the
//! nodes' reports combine into metrics. The simulator runs every node of a plan in one `Sim`;
//! `dmsim hw run` runs one node per process on real RDMA and gathers the reports at rank 0 over
//! the NIC itself ([`super::gather`]). Same protocol code, same metrics code, both backends.
//!
//! Check mode adds two hooks a protocol may fill: [`Plan::invariants`] (after every simulator
//! event, over every node's state and memory) and [`Plan::verify`] (once, after the run).

use std::any::Any;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::history::{Clock, LoggedOp};
use crate::nic::{Cluster, Nanos, Nic, RemoteAddr, Task};

/// What one node measured: named counters, raw latency samples (ns), protocol statistics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    pub counters: BTreeMap<String, f64>,
    pub samples: Vec<u64>,
    /// Protocol-specific structured statistics (e.g. SELCC's `Stats`).
    #[serde(default)]
    pub extra: serde_json::Value,
    /// This node's clients' operations on its own clock, for the history checkers (empty when
    /// the run logs none).
    #[serde(default)]
    pub history: Vec<LoggedOp>,
    /// A memory node's non-zero data words after the run drained, by history key.
    #[serde(default)]
    pub final_values: Option<BTreeMap<u64, u64>>,
    /// The first protocol error the node hit (its clients stopped there) and when (ns on the
    /// node's clock): the run failed, whatever else it reports.
    #[serde(default)]
    pub error: Option<(u64, String)>,
    /// How this node's clock maps onto the reference clock (rank 0's). The simulator has one
    /// clock (the default, identity); on hardware the runner fills it in from its clock
    /// measurement before `verify`, so a protocol that compares its own logged times across
    /// nodes maps them first ([`crate::harness::on_reference_clock`]).
    #[serde(default)]
    pub clock: Clock,
    /// `extra` kept as the protocol's own value ([`NodeReport::set_typed_extra`]): the simulator
    /// hands reports over in memory, so a fuzzing schedule need not build and re-parse a JSON
    /// tree (issue #15: ~7 % of a SELCC `fuzz-small` schedule). Turned into `extra` by
    /// [`NodeReport::materialize`] before a report travels over the network (the hardware
    /// gather); never serialized itself.
    #[serde(skip)]
    pub typed: Option<TypedExtra>,
}

/// A protocol's report value and how to write it as JSON.
#[derive(Clone)]
pub struct TypedExtra {
    value: Arc<dyn Any + Send + Sync>,
    to_json: fn(&(dyn Any + Send + Sync)) -> serde_json::Value,
}

impl TypedExtra {
    fn json(&self) -> serde_json::Value {
        (self.to_json)(&*self.value)
    }
}

impl std::fmt::Debug for TypedExtra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TypedExtra({})", self.json())
    }
}

/// Two typed reports are equal when they write the same JSON (what a report compares as after
/// it travelled).
impl PartialEq for TypedExtra {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

impl NodeReport {
    /// Keep `value` as this report's protocol statistics, unserialized (see [`NodeReport::typed`]).
    pub fn set_typed_extra<T: Serialize + Send + Sync + 'static>(&mut self, value: T) {
        fn to_json<T: Serialize + 'static>(v: &(dyn Any + Send + Sync)) -> serde_json::Value {
            let v = v.downcast_ref::<T>().expect("a typed extra writes its own type");
            serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
        }
        self.typed = Some(TypedExtra { value: Arc::new(value), to_json: to_json::<T> });
    }

    /// Write a typed extra into `extra` (before the report is serialized).
    pub fn materialize(&mut self) {
        if let Some(typed) = self.typed.take() {
            self.extra = typed.json();
        }
    }

    /// `extra` read as the protocol's report type, without copying the JSON tree (`None`: it is
    /// another type, e.g. a memory node's report where a compute node's was expected).
    pub fn extra_as<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        match &self.typed {
            Some(typed) => T::deserialize(&typed.json()).ok(),
            None => T::deserialize(&self.extra).ok(),
        }
    }

    /// Like [`NodeReport::extra_as`], but borrowed when the report holds a `T` in memory (the
    /// simulator), parsed only when it travelled as JSON (hardware).
    pub fn extra_ref<T: serde::de::DeserializeOwned + Clone + 'static>(&self) -> Option<Cow<'_, T>> {
        if let Some(typed) = &self.typed {
            if let Some(v) = typed.value.downcast_ref::<T>() {
                return Some(Cow::Borrowed(v));
            }
        }
        self.extra_as::<T>().map(Cow::Owned)
    }
}

/// A node's first protocol error as a report carries it.
pub fn report_error(error: Option<crate::common::error::ProtocolError>) -> Option<(u64, String)> {
    error.map(|e| (e.at.0, e.to_string()))
}

/// The earliest error in `reports` (by time, then node): the cause of whatever else failed.
pub fn first_error(reports: &[NodeReport]) -> Option<&str> {
    reports.iter().filter_map(|r| r.error.as_ref()).min_by_key(|(at, _)| *at).map(|(_, e)| e.as_str())
}

/// Invariant "no lost key" of an index after a quiesced run: every key a completed write stored
/// is one `held` finds in the final structure.
pub fn check_no_lost_key(reports: &[NodeReport], held: impl Fn(u64) -> bool) -> Result<(), Violation> {
    let stored =
        reports.iter().flat_map(|r| &r.history).filter(|o| o.write.is_some() && o.return_ns.is_some());
    for op in stored {
        if !held(op.key) {
            return Err(Violation::new(
                "no lost key",
                format!("key {} was stored (client {}) but no leaf holds it", op.key, op.client),
            ));
        }
    }
    Ok(())
}

/// One node's part of a run. `S` is what the node shows the check-mode invariants.
pub struct NodeRun<S = ()> {
    /// Client tasks: the run ends when all of them (on all nodes) finish.
    pub mains: Vec<Task>,
    /// Servers and background tasks: dropped at the end.
    pub daemons: Vec<Task>,
    /// Called after every node's clients finished: this node's report.
    pub collect: Box<dyn FnOnce() -> NodeReport + Send>,
    /// Client operations completed so far, if the plan can tell: on hardware a watchdog calls
    /// it to turn a protocol that stopped making progress into an error instead of a hang.
    pub progress: Option<Progress>,
    /// The node's protocol state, for [`Plan::invariants`] (in one process only).
    pub state: Option<Arc<S>>,
}

/// See [`NodeRun::progress`].
pub type Progress = Arc<dyn Fn() -> u64 + Send + Sync>;

impl<S> NodeRun<S> {
    /// A node with no tasks that reports nothing.
    pub fn empty() -> NodeRun<S> {
        NodeRun {
            mains: Vec::new(),
            daemons: Vec::new(),
            collect: Box::new(NodeReport::default),
            progress: None,
            state: None,
        }
    }
}

/// A broken invariant or a failed end-of-run check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which one, e.g. `"S2 one Modified copy"`, `"latches free at end"`.
    pub invariant: String,
    pub message: String,
}

impl Violation {
    pub fn new(invariant: impl Into<String>, message: impl Into<String>) -> Violation {
        Violation { invariant: invariant.into(), message: message.into() }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.invariant, self.message)
    }
}

/// Any node's registered word, read directly (the simulator's view of all memory).
pub type Memory<'a> = &'a dyn Fn(RemoteAddr) -> u64;

/// How many writes every node's memory has taken so far, as the simulator counts them: two
/// checks that see the same value saw the same words, so a check may skip re-reading memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryWrites(pub u64);

impl MemoryWrites {
    /// The total over `regions` (each counts its own writes).
    pub fn of<'a>(regions: impl IntoIterator<Item = &'a crate::memory::Region>) -> MemoryWrites {
        MemoryWrites(regions.into_iter().map(|r| r.writes()).fold(0, u64::wrapping_add))
    }
}

/// A check run after every simulator event.
pub type Invariants = Box<dyn FnMut(Memory, MemoryWrites) -> Result<(), Violation>>;

/// A protocol's run, independent of the backend.
pub trait Plan: Send + Sync + 'static {
    /// What each node shows the invariants (`()` if the protocol has none).
    type State: Send + Sync + 'static;

    /// Node kinds and region sizes, identical on every rank.
    fn cluster(&self) -> Cluster;

    /// Per node, the span of its region holding opaque payload (lines whose bytes past the
    /// first few the protocol never interprets), so that a measuring run in the simulator
    /// may leave those bytes unstored ([`crate::memory::Region::with_elided_payload`]).
    /// Empty (the default): every byte is meaningful.
    fn payload_spans(&self) -> Vec<Option<crate::memory::PayloadSpan>> {
        Vec::new()
    }

    /// Write whatever a node's region must hold before any task runs (e.g. latch words).
    fn setup<N: Nic>(&self, _nic: &N) {}

    /// `nic.node()`'s tasks.
    fn node<N: Nic>(&self, nic: N) -> NodeRun<Self::State>;

    /// Metrics from every node's report (indexed by node) and the run's elapsed time.
    fn metrics(&self, reports: &[NodeReport], elapsed: Nanos) -> BTreeMap<String, f64>;

    /// Client operations in the reports (for ops per wall-clock second).
    fn ops(&self, reports: &[NodeReport]) -> u64 {
        reports.iter().map(|r| r.samples.len() as u64).sum()
    }

    /// Check mode (`CheckLevel::Full`): the invariants over every node's state (by node;
    /// `None` for nodes without state) and all memory, run after every event.
    fn invariants(&self, _states: Vec<Option<Arc<Self::State>>>) -> Option<Invariants> {
        None
    }

    /// After a run that finished: checks over the reports, and over all memory where one
    /// process sees it (the simulator). With `PointSpec::quiesce` the protocol had drained.
    fn verify(&self, _reports: &[NodeReport], _memory: Option<Memory>) -> Result<(), Violation> {
        Ok(())
    }

    /// What this plan leaves out of the scenario, to tell the operator (e.g. on hardware).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// A crashed node restarts (simulator faults with `restart_ns`): what resets its memory,
    /// run at the restart instant before its new tasks start. `None` (the default): the
    /// whole region is zeroed, as a restarted process's fresh registration would be.
    fn restart_reset<N: Nic>(&self, _nic: N) -> Option<Box<dyn FnOnce() + Send>> {
        None
    }

    /// The tasks of a restarted node's new incarnation (default: [`Plan::node`] again). Its
    /// report comes after every node's first report, in restart order.
    fn restart_node<N: Nic>(&self, nic: N) -> NodeRun<Self::State> {
        self.node(nic)
    }

    /// Whether the protocol, as planned, recovers from `fault` (default: from none). A fault
    /// it does not recover from ends the run at the fault as "unrecoverable", never as a
    /// violation or a hang.
    fn recovers_from(&self, _fault: FaultKind) -> bool {
        false
    }
}

/// A fault a scenario or the fuzzer may inject that a protocol must recover from to go on
/// (delays, drops and bounded pauses are only timing: every protocol must tolerate them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// A compute (client) node stops for good; its memory stays readable.
    ComputeCrash,
    /// A memory node stops serving verbs.
    MemoryCrash,
    /// A queue pair between two nodes goes to the error state.
    QpError,
}

impl FaultKind {
    pub fn describe(self) -> &'static str {
        match self {
            FaultKind::ComputeCrash => "a compute-node crash",
            FaultKind::MemoryCrash => "a memory-node crash",
            FaultKind::QpError => "a QP error",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct Stats {
        ops: u64,
        name: String,
    }

    #[test]
    fn a_typed_extra_reads_the_same_in_memory_and_after_travelling() {
        // Goal: the simulator's in-memory report and the hardware's JSON report give a protocol
        // the same statistics, and compare equal.
        let stats = Stats { ops: 7, name: "n".into() };
        let mut report = NodeReport::default();
        report.set_typed_extra(stats.clone());
        assert!(matches!(report.extra_ref::<Stats>(), Some(Cow::Borrowed(s)) if *s == stats));
        assert_eq!(report.extra_as::<Stats>(), Some(stats.clone()));
        let in_memory = report.clone();
        report.materialize();
        assert!(report.typed.is_none());
        assert!(matches!(report.extra_ref::<Stats>(), Some(Cow::Owned(s)) if s == stats));
        let travelled: NodeReport = serde_json::from_slice(&serde_json::to_vec(&report).unwrap()).unwrap();
        assert_eq!(travelled.extra_as::<Stats>(), Some(stats));
        // Another type reads as `None`, typed or not.
        assert_eq!(in_memory.extra_as::<u64>(), None);
        assert!(travelled.extra_ref::<u64>().is_none());
    }
}
