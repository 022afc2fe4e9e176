//! The scenario's `faults` section: what `dmsim run` (and, under the swarm's own draws,
//! `dmsim fuzz`) does to a run besides running it.
//!
//! ```json
//! "faults": {
//!   "send_delay": { "permille": 50, "max_ns": 2000 },
//!   "verb_delay": { "permille": 20, "max_ns": 20000 },
//!   "response_delay": { "permille": 20, "max_ns": 20000 },
//!   "send_drop": { "permille": 20, "retransmit_ns": 10000 },
//!   "pauses": [ { "compute_node": 1, "from_ns": 100000, "until_ns": 150000 } ],
//!   "compute_crashes": [ { "compute_node": 2, "at_ns": 400000 } ],
//!   "memory_crashes": [ { "memory_node": 0, "at_ns": 900000, "restart_ns": 1900000 } ],
//!   "qp_errors": [ { "compute_node": 0, "memory_node": 0, "at_ns": 900000 } ]
//! }
//! ```
//!
//! Nodes are named by kind and index (`compute_node: 0` is the first node with clients:
//! compute nodes, then symmetric ones). Semantics are the engine's ([`crate::engine::FaultPlan`]):
//! a crash the protocol has no recovery for ends the run there as "unrecoverable".

use dmsim_protocols::nic::NodeId;
use serde::{Deserialize, Serialize};

use super::{ClusterSpec, Problem, RunSpec};
use crate::engine::FaultPlan;

/// The longest delay or retransmission time a scenario may ask for (10 s of virtual time).
const MAX_DELAY_NS: u64 = 10_000_000_000;
/// At most this many timed faults of each kind.
const MAX_LISTED: usize = 64;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultsSpec {
    /// Each SEND is delayed by up to `max_ns` more with probability `permille`/1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_delay: Option<SendDelay>,
    /// Each SEND is lost once (an RC retransmission after `retransmit_ns`) with probability
    /// `permille`/1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_drop: Option<SendDrop>,
    /// Each one-sided verb (READ, WRITE, atomic) arrives up to `max_ns` late with probability
    /// `permille`/1000 (a lost packet the RC NIC retransmits; per-QP order holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb_delay: Option<SendDelay>,
    /// Each one-sided verb's response reaches the requester up to `max_ns` late with
    /// probability `permille`/1000 (the verb took effect on time; a slower path or a congested
    /// queue: other queue pairs' responses overtake it, per-QP order holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_delay: Option<SendDelay>,
    /// A client node's tasks are not run in `[from_ns, until_ns)`; its NIC keeps serving.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pauses: Vec<Pause>,
    /// A client node stops at `at_ns` (its memory stays readable); for good, or until
    /// `restart_ns`, when its memory is reset and its tasks start afresh.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compute_crashes: Vec<ComputeCrash>,
    /// A memory node stops at `at_ns`: verbs reaching it fail after `timeout_ns`; with
    /// `restart_ns` it serves again from then (what its memory keeps is the protocol's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_crashes: Vec<MemoryCrash>,
    /// The queue pair between a client node and a memory node fails at `at_ns`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qp_errors: Vec<QpError>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendDelay {
    pub permille: u32,
    pub max_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendDrop {
    pub permille: u32,
    pub retransmit_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pause {
    pub compute_node: u16,
    pub from_ns: u64,
    pub until_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputeCrash {
    pub compute_node: u16,
    pub at_ns: u64,
    /// The node restarts then: its memory is reset (the protocol says to what) and its tasks
    /// start again. Absent: it stays down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_ns: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryCrash {
    pub memory_node: u16,
    pub at_ns: u64,
    /// The node serves again from then (the protocol says what its memory keeps). Absent: it
    /// stays down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_ns: Option<u64>,
    /// How long a verb that reaches the node while it is down waits before it fails (the
    /// requester's RC timeout); default 20 µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ns: Option<u64>,
}

/// Default [`MemoryCrash::timeout_ns`].
pub const VERB_TIMEOUT_NS: u64 = 20_000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QpError {
    pub compute_node: u16,
    pub memory_node: u16,
    pub at_ns: u64,
}

impl FaultsSpec {
    /// Every problem, each naming its field (`faults.compute_crashes[0].compute_node: ...`).
    pub fn check(&self, cluster: &ClusterSpec, run: &RunSpec) -> Vec<Problem> {
        let mut out = Vec::new();
        let clients = cluster.compute_nodes as u32 + cluster.symmetric_nodes as u32;
        let memories = cluster.memory_nodes as u32;
        let permille = |out: &mut Vec<Problem>, at: &str, v: u32| {
            if v > 1000 {
                out.push(Problem::new(at, format!("{v} is not a per-mille rate (0..=1000)")));
            }
        };
        let bounded = |out: &mut Vec<Problem>, at: &str, v: u64| {
            if v > MAX_DELAY_NS {
                out.push(Problem::new(at, format!("{v} ns is over the {MAX_DELAY_NS} ns limit")));
            }
        };
        let client = |out: &mut Vec<Problem>, at: String, i: u16| {
            if i as u32 >= clients {
                out.push(Problem::new(
                    at,
                    format!("no compute node {i}: the cluster has {clients} (numbered from 0)"),
                ));
            }
        };
        let memory = |out: &mut Vec<Problem>, at: String, i: u16| {
            if i as u32 >= memories {
                out.push(Problem::new(
                    at,
                    format!("no memory node {i}: the cluster has {memories} (numbered from 0)"),
                ));
            }
        };
        let within = |out: &mut Vec<Problem>, at: String, t: u64| {
            if t >= run.time_ns_max {
                out.push(Problem::new(
                    at,
                    format!(
                        "{t} ns is not before run.time_ns_max ({} ns): the fault would never happen",
                        run.time_ns_max
                    ),
                ));
            }
        };
        if let Some(d) = &self.send_delay {
            permille(&mut out, "faults.send_delay.permille", d.permille);
            bounded(&mut out, "faults.send_delay.max_ns", d.max_ns);
        }
        if let Some(d) = &self.send_drop {
            permille(&mut out, "faults.send_drop.permille", d.permille);
            bounded(&mut out, "faults.send_drop.retransmit_ns", d.retransmit_ns);
            if d.retransmit_ns == 0 {
                out.push(Problem::new("faults.send_drop.retransmit_ns", "must be positive"));
            }
        }
        if let Some(d) = &self.verb_delay {
            permille(&mut out, "faults.verb_delay.permille", d.permille);
            bounded(&mut out, "faults.verb_delay.max_ns", d.max_ns);
        }
        if let Some(d) = &self.response_delay {
            permille(&mut out, "faults.response_delay.permille", d.permille);
            bounded(&mut out, "faults.response_delay.max_ns", d.max_ns);
        }
        if let (Some(a), Some(b)) = (&self.send_delay, &self.send_drop) {
            if a.permille + b.permille > 1000 {
                out.push(Problem::new(
                    "faults.send_drop.permille",
                    "send_delay.permille + send_drop.permille must be at most 1000",
                ));
            }
        }
        let lists = [
            ("pauses", self.pauses.len()),
            ("compute_crashes", self.compute_crashes.len()),
            ("memory_crashes", self.memory_crashes.len()),
            ("qp_errors", self.qp_errors.len()),
        ];
        for (name, len) in lists {
            if len > MAX_LISTED {
                out.push(Problem::new(format!("faults.{name}"), format!("at most {MAX_LISTED} entries")));
            }
        }
        for (i, p) in self.pauses.iter().enumerate() {
            client(&mut out, format!("faults.pauses[{i}].compute_node"), p.compute_node);
            within(&mut out, format!("faults.pauses[{i}].from_ns"), p.from_ns);
            if p.until_ns <= p.from_ns {
                out.push(Problem::new(
                    format!("faults.pauses[{i}].until_ns"),
                    "must be after from_ns (a pause that never ends is a compute_crashes entry)",
                ));
            }
        }
        let restart = |out: &mut Vec<Problem>, at: String, crash: u64, restart: Option<u64>| {
            if restart.is_some_and(|r| r <= crash) {
                out.push(Problem::new(at, "must be after at_ns"));
            }
        };
        for (i, c) in self.compute_crashes.iter().enumerate() {
            client(&mut out, format!("faults.compute_crashes[{i}].compute_node"), c.compute_node);
            within(&mut out, format!("faults.compute_crashes[{i}].at_ns"), c.at_ns);
            restart(&mut out, format!("faults.compute_crashes[{i}].restart_ns"), c.at_ns, c.restart_ns);
            if self.compute_crashes[..i].iter().any(|o| o.compute_node == c.compute_node) {
                out.push(Problem::new(
                    format!("faults.compute_crashes[{i}].compute_node"),
                    format!("compute node {} already crashes", c.compute_node),
                ));
            }
        }
        let for_good = self.compute_crashes.iter().filter(|c| c.restart_ns.is_none()).count();
        if clients > 0 && for_good as u32 >= clients {
            out.push(Problem::new("faults.compute_crashes", "at least one compute node must survive"));
        }
        for (i, c) in self.memory_crashes.iter().enumerate() {
            memory(&mut out, format!("faults.memory_crashes[{i}].memory_node"), c.memory_node);
            within(&mut out, format!("faults.memory_crashes[{i}].at_ns"), c.at_ns);
            restart(&mut out, format!("faults.memory_crashes[{i}].restart_ns"), c.at_ns, c.restart_ns);
            if self.memory_crashes[..i].iter().any(|o| o.memory_node == c.memory_node) {
                out.push(Problem::new(
                    format!("faults.memory_crashes[{i}].memory_node"),
                    format!("memory node {} already crashes", c.memory_node),
                ));
            }
            if c.timeout_ns.is_some_and(|t| t == 0 || t > MAX_DELAY_NS) {
                out.push(Problem::new(
                    format!("faults.memory_crashes[{i}].timeout_ns"),
                    format!("must be in 1..={MAX_DELAY_NS}"),
                ));
            }
        }
        for (i, q) in self.qp_errors.iter().enumerate() {
            client(&mut out, format!("faults.qp_errors[{i}].compute_node"), q.compute_node);
            memory(&mut out, format!("faults.qp_errors[{i}].memory_node"), q.memory_node);
            within(&mut out, format!("faults.qp_errors[{i}].at_ns"), q.at_ns);
        }
        out
    }

    /// The engine's plan for a cluster of `cluster`'s shape (memory nodes first, then compute,
    /// then symmetric). Assumes [`FaultsSpec::check`] passed.
    pub fn plan(&self, cluster: &ClusterSpec) -> FaultPlan {
        let client = |i: u16| NodeId(cluster.memory_nodes + i);
        let mut plan = FaultPlan::default();
        if let Some(d) = &self.send_delay {
            plan.send_delay_permille = d.permille;
            plan.send_delay_ns_max = d.max_ns;
        }
        if let Some(d) = &self.send_drop {
            plan.send_drop_permille = d.permille;
            plan.send_retransmit_ns = d.retransmit_ns;
        }
        if let Some(d) = &self.verb_delay {
            plan.verb_delay_permille = d.permille;
            plan.verb_delay_ns_max = d.max_ns;
        }
        if let Some(d) = &self.response_delay {
            plan.response_delay_permille = d.permille;
            plan.response_delay_ns_max = d.max_ns;
        }
        plan.pauses.extend(self.pauses.iter().map(|p| (client(p.compute_node), p.from_ns, p.until_ns)));
        plan.pauses.extend(self.compute_crashes.iter().map(|c| (client(c.compute_node), c.at_ns, u64::MAX)));
        plan.memory_crashes = self.memory_crashes.iter().map(|c| (NodeId(c.memory_node), c.at_ns)).collect();
        plan.restarts.extend(
            self.compute_crashes.iter().filter_map(|c| Some((client(c.compute_node), c.restart_ns?))),
        );
        plan.restarts
            .extend(self.memory_crashes.iter().filter_map(|c| Some((NodeId(c.memory_node), c.restart_ns?))));
        plan.restarts.sort_by_key(|&(n, at)| (at, n));
        if let Some(t) = self.memory_crashes.iter().filter_map(|c| c.timeout_ns).min() {
            plan.verb_timeout_ns = t;
        }
        plan.qp_errors =
            self.qp_errors.iter().map(|q| (client(q.compute_node), NodeId(q.memory_node), q.at_ns)).collect();
        plan
    }
}

/// `extra` added to `base`: rates from `extra` where it sets them, every timed fault of both.
pub fn merge_plans(base: &FaultPlan, extra: &FaultPlan) -> FaultPlan {
    let mut out = base.clone();
    if extra.send_delay_permille > 0 {
        out.send_delay_permille = extra.send_delay_permille;
        out.send_delay_ns_max = extra.send_delay_ns_max;
    }
    if extra.send_drop_permille > 0 {
        out.send_drop_permille = extra.send_drop_permille;
        out.send_retransmit_ns = extra.send_retransmit_ns;
    }
    if extra.verb_delay_permille > 0 {
        out.verb_delay_permille = extra.verb_delay_permille;
        out.verb_delay_ns_max = extra.verb_delay_ns_max;
    }
    if extra.response_delay_permille > 0 {
        out.response_delay_permille = extra.response_delay_permille;
        out.response_delay_ns_max = extra.response_delay_ns_max;
    }
    out.pauses.extend(extra.pauses.iter().copied());
    out.memory_crashes.extend(extra.memory_crashes.iter().copied());
    out.restarts.extend(extra.restarts.iter().copied());
    out.restarts.sort_by_key(|&(n, at)| (at, n));
    out.qp_errors.extend(extra.qp_errors.iter().copied());
    out
}
