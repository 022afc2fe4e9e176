//! Injected faults: what the fuzzer may do to a run besides reordering it.
//!
//! * **SEND delay / drop.** Each two-sided message draws one [`ChoiceKind::Fault`] decision
//!   (only when a rate is set, so fault-free runs keep their choice logs). Option 0 is "no fault",
//!   so shrinking a log toward 0 removes faults. A *drop* models what an RC queue pair does with a
//!   lost packet: the NIC retransmits after `send_retransmit_ns`; per-QP FIFO still holds because
//!   later messages on the QP are clamped behind it.
//! * **Verb delay.** The same for one-sided verbs (READ, WRITE, atomics), opt-in (`verb-delay`):
//!   a lost request packet that the RC NIC retransmits after its timeout, up to
//!   `verb_delay_ns_max` later; later verbs on the queue pair wait behind it (per-QP order), so
//!   only verbs on *other* queue pairs overtake it. Its own decision per verb, drawn only when a
//!   rate is set.
//! * **Response delay.** Opt-in (`response-delay`): a one-sided verb takes effect at the
//!   target on time, but its response reaches the requester up to `response_delay_ns_max`
//!   late — it took a slower path (RoCEv2 hashes each queue pair to an ECMP path by its UDP
//!   source port) or waited in a congested switch queue. Later completions on the queue pair
//!   wait behind it (per-QP order); other queue pairs' responses overtake it, so a READ that
//!   saw memory before another QP's WRITE may complete after that WRITE's acknowledgement.
//!   Its own decision per verb, drawn only when a rate is set.
//! * **Pause.** A node's tasks are not polled in `[from_ns, until_ns)`: a descheduled process or
//!   a GC pause. Its NIC keeps serving one-sided verbs and queueing messages, as hardware does.
//! * **Crash.** A pause that never ends (`until_ns == u64::MAX`): the node's tasks never run
//!   again; its memory stays readable (no NIC failure is modelled). At the crash its main tasks
//!   stop counting towards the end of the run, so the survivors can finish.
//! * **Restart.** A crashed compute node with a `restart_ns` comes back then: its old tasks
//!   never run again (even when a completion wakes them), the plan's reset runs on its memory
//!   (by default the whole region is zeroed), and its tasks for the new incarnation start.
//! * **Memory-node crash.** While a memory node is down (`[at, restart)`) a verb that reaches
//!   its memory does not take effect and its batch fails (`NicError::Timeout`) `verb_timeout_ns`
//!   later; so does a verb posted before the restart that reaches it after (its queue pair died
//!   with the old incarnation). At the restart the plan's reset runs on its memory. A verb
//!   posted after the restart is served (reconnection is not modelled).
//! * **Unrecoverable faults.** A fault the protocol declares no recovery for
//!   (`Plan::recovers_from`) — a compute-node crash of most protocols, and every memory-node
//!   crash and QP error, which no protocol here recovers from — ends the run at the fault with
//!   [`super::StopReason::Unrecoverable`] naming the protocol and the fault. The engine models
//!   memory-node crashes and QP errors only as that end (what a protocol would do after one is
//!   not defined anywhere in the code base).
//!
//! Cost when no fault is planned: one `is_empty` check per task pick and one branch per posted
//! verb (SEND or one-sided).

use std::fmt::Write as _;

use dmsim_protocols::nic::NodeId;

use super::executor::ReadyList;
use super::queue::EventKind;
use super::world::World;
use crate::choice::ChoiceKind;
use crate::fabric::PS_PER_NS;

/// The faults one run may suffer. `Default` is none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Per-mille chance that a SEND is delayed by up to `send_delay_ns_max` more.
    pub send_delay_permille: u32,
    pub send_delay_ns_max: u64,
    /// Per-mille chance that a SEND is lost once and retransmitted after `send_retransmit_ns`.
    pub send_drop_permille: u32,
    pub send_retransmit_ns: u64,
    /// Per-mille chance that a one-sided verb's request arrives up to `verb_delay_ns_max` late.
    pub verb_delay_permille: u32,
    pub verb_delay_ns_max: u64,
    /// Per-mille chance that a one-sided verb's response reaches the requester up to
    /// `response_delay_ns_max` late (the verb took effect on time).
    pub response_delay_permille: u32,
    pub response_delay_ns_max: u64,
    /// `(node, from_ns, until_ns)`: the node's tasks are not polled in that window
    /// (`until_ns == u64::MAX`: a crash).
    pub pauses: Vec<(NodeId, u64, u64)>,
    /// `(memory node, at_ns)`.
    pub memory_crashes: Vec<(NodeId, u64)>,
    /// `(node, at_ns)`: a crashed node (compute or memory) restarts, in time order.
    pub restarts: Vec<(NodeId, u64)>,
    /// How long a verb to a crashed memory node waits before it fails (0: 20 µs).
    pub verb_timeout_ns: u64,
    /// `(node, peer, at_ns)`: the queue pair between the two nodes fails.
    pub qp_errors: Vec<(NodeId, NodeId, u64)>,
    /// `(at_ns, what)`: faults the protocol does not recover from; the run ends at the first.
    /// Filled by the runner from the faults above ([`FaultPlan::mark_unrecoverable`]).
    pub unrecoverable: Vec<(u64, String)>,
}

impl FaultPlan {
    /// `(node, at_ns)` of every crash, in time order.
    pub fn crashes(&self) -> Vec<(NodeId, u64)> {
        let mut out: Vec<(NodeId, u64)> =
            self.pauses.iter().filter(|p| p.2 == u64::MAX).map(|&(n, at, _)| (n, at)).collect();
        out.sort_by_key(|&(n, at)| (at, n));
        out
    }

    /// Whether any fault is planned.
    pub fn is_empty(&self) -> bool {
        self == &FaultPlan::default()
    }

    /// Fill [`FaultPlan::unrecoverable`]: every planned fault `recovers` says `protocol` has no
    /// recovery for, as "unrecoverable: <protocol> has no recovery for <fault> (...)".
    pub fn mark_unrecoverable(
        &mut self,
        protocol: &str,
        recovers: impl Fn(dmsim_protocols::harness::FaultKind) -> bool,
    ) {
        use dmsim_protocols::harness::FaultKind;
        let line = |kind: FaultKind, what: String| {
            format!("unrecoverable: {protocol} has no recovery for {} ({what})", kind.describe())
        };
        let mut out = Vec::new();
        if !recovers(FaultKind::ComputeCrash) {
            for (node, at) in self.crashes() {
                out.push((at, line(FaultKind::ComputeCrash, format!("node {} at {at} ns", node.0))));
            }
        }
        for &(node, at) in &self.memory_crashes {
            // A memory node that never restarts is unrecoverable for every protocol here.
            let restarts = self.restarts.iter().any(|r| r.0 == node && r.1 > at);
            if !recovers(FaultKind::MemoryCrash) || !restarts {
                out.push((at, line(FaultKind::MemoryCrash, format!("node {} at {at} ns", node.0))));
            }
        }
        if !recovers(FaultKind::QpError) {
            for &(a, b, at) in &self.qp_errors {
                out.push((at, line(FaultKind::QpError, format!("nodes {}–{} at {at} ns", a.0, b.0))));
            }
        }
        out.sort();
        self.unrecoverable = out;
    }
}

/// Decision range of the per-SEND fault draw (per mille).
const FAULT_OPTIONS: u64 = 1000;

impl FaultPlan {
    /// Whether a verb to `target` posted at `posted_ns` fails when it reaches memory at
    /// `now_ns`: the node crashed by then and had not restarted before the verb was posted.
    pub fn memory_down(&self, target: NodeId, posted_ns: u64, now_ns: u64) -> bool {
        self.memory_crashes.iter().any(|&(node, at)| {
            node == target
                && at <= now_ns
                && !self.restarts.iter().any(|&(n, r)| n == node && r > at && r <= posted_ns)
        })
    }

    /// The failed verb's wait ([`FaultPlan::verb_timeout_ns`]).
    pub fn timeout_ns(&self) -> u64 {
        if self.verb_timeout_ns == 0 {
            20_000
        } else {
            self.verb_timeout_ns
        }
    }

    /// Until when `node` is paused at `now_ns`, if it is.
    pub fn paused_until(&self, node: NodeId, now_ns: u64) -> Option<u64> {
        self.pauses
            .iter()
            .filter(|(n, from, until)| *n == node && *from <= now_ns && now_ns < *until)
            .map(|(_, _, until)| *until)
            .max()
    }
}

impl World {
    /// Extra one-way picoseconds for a SEND from `source` to `target` (0 = no fault).
    pub(super) fn send_fault_ps(&mut self, source: NodeId, target: NodeId) -> u64 {
        let plan = &self.faults;
        let drop = plan.send_drop_permille.min(FAULT_OPTIONS as u32) as u64;
        let any = (plan.send_delay_permille as u64 + drop).min(FAULT_OPTIONS);
        if any == 0 {
            return 0;
        }
        let draw = self.choice.choose(ChoiceKind::Fault, FAULT_OPTIONS);
        let (what, extra_ns) = if draw >= FAULT_OPTIONS - drop {
            ("drop+resend", self.faults.send_retransmit_ns)
        } else if draw >= FAULT_OPTIONS - any {
            let max = self.faults.send_delay_ns_max;
            ("delay", self.choice.choose(ChoiceKind::Fault, max + 1))
        } else {
            return 0;
        };
        let now = self.now_ns;
        self.trace.hash_event(now, 6, extra_ns);
        self.trace.line(now, target.0, "FAULT", |l| {
            let _ = write!(l, "{what} SEND n{}>n{} +{extra_ns}ns", source.0, target.0);
        });
        extra_ns * PS_PER_NS
    }

    /// The extra delay of one one-sided verb's request from `source` to `target`, in
    /// picoseconds: 0, or a verb-delay fault drawn from the plan.
    pub(super) fn verb_fault_ps(&mut self, source: NodeId, target: NodeId) -> u64 {
        let (rate, max) = (self.faults.verb_delay_permille, self.faults.verb_delay_ns_max);
        self.one_sided_fault_ps(rate, max, 11, (source, target), "verb")
    }

    /// The extra delay of one one-sided verb's response from `target` back to `source`, in
    /// picoseconds: 0, or a response-delay fault drawn from the plan.
    pub(super) fn response_fault_ps(&mut self, source: NodeId, target: NodeId) -> u64 {
        let (rate, max) = (self.faults.response_delay_permille, self.faults.response_delay_ns_max);
        self.one_sided_fault_ps(rate, max, 12, (target, source), "response")
    }

    /// One draw of a one-sided delay family: nothing unless `permille` is set, then "no fault"
    /// or up to `max_ns`, hashed under `tag` and traced at the receiving node of `(from, to)`.
    fn one_sided_fault_ps(
        &mut self,
        permille: u32,
        max_ns: u64,
        tag: u64,
        (from, to): (NodeId, NodeId),
        what: &str,
    ) -> u64 {
        let rate = permille.min(FAULT_OPTIONS as u32) as u64;
        if rate == 0 {
            return 0;
        }
        if self.choice.choose(ChoiceKind::Fault, FAULT_OPTIONS) < FAULT_OPTIONS - rate {
            return 0;
        }
        let extra_ns = self.choice.choose(ChoiceKind::Fault, max_ns + 1);
        let now = self.now_ns;
        self.trace.hash_event(now, tag, extra_ns);
        self.trace.line(now, to.0, "FAULT", |l| {
            let _ = write!(l, "delay {what} n{}>n{} +{extra_ns}ns", from.0, to.0);
        });
        extra_ns * PS_PER_NS
    }

    /// Before the events of instant `time_ns`: the first unrecoverable fault due ends the run;
    /// crashes due take their node's main tasks out of the count the run waits for.
    pub(super) fn faults_due(&mut self, time_ns: u64) -> Option<super::StopReason> {
        if let Some((at, what)) = self.faults.unrecoverable.first() {
            if *at <= time_ns {
                let (at, message) = (*at, what.clone());
                self.now_ns = self.now_ns.max(at);
                self.trace.hash_event(self.now_ns, 7, at);
                return Some(super::StopReason::Unrecoverable { message });
            }
        }
        while let Some(&(node, at)) = self.crashes_pending.first() {
            if at > time_ns {
                break;
            }
            self.crashes_pending.remove(0);
            self.trace.hash_event(at, 8, node.0 as u64);
            self.trace.line(at, node.0, "FAULT", |l| {
                let _ = write!(l, "crash n{}", node.0);
            });
            for slot in self.tasks.iter_mut().filter(|t| t.node == node && t.main && t.alive) {
                slot.main = false;
                self.main_alive -= 1;
            }
        }
        while self.restarts_pending.first().is_some_and(|r| r.at_ns <= time_ns) {
            let restart = self.restarts_pending.remove(0);
            self.restart(restart);
        }
        None
    }

    /// `restart.node` comes back: its old tasks are gone for good, its memory is reset, its new
    /// tasks start.
    fn restart(&mut self, restart: Restart) {
        let (node, at) = (restart.node, restart.at_ns);
        self.trace.hash_event(at, 9, node.0 as u64);
        self.trace.line(at, node.0, "FAULT", |l| {
            let _ = write!(l, "restart n{}", node.0);
        });
        for slot in self.tasks.iter_mut().filter(|t| t.node == node && t.alive) {
            slot.crashed = true;
        }
        // The crash's endless pause ends here (the old tasks are held as crashed instead).
        for pause in self.faults.pauses.iter_mut().filter(|p| p.0 == node && p.1 <= at && p.2 == u64::MAX) {
            pause.2 = at;
        }
        match restart.reset {
            Some(reset) => reset(),
            None => self.regions[node.index()].zero(),
        }
        for (future, main) in restart.tasks {
            self.spawn(node, future, main);
        }
    }

    /// The earliest fault instant still to come (so a run waiting only for it reaches it).
    pub(super) fn next_fault_ns(&self) -> Option<u64> {
        let stop = self.faults.unrecoverable.first().map(|u| u.0);
        let crash = self.crashes_pending.first().map(|c| c.1);
        let restart = self.restarts_pending.first().map(|r| r.at_ns);
        stop.into_iter().chain(crash).chain(restart).min()
    }

    /// Take ready tasks of paused nodes off the ready list; each is woken when its pause ends
    /// (never, for a crashed node).
    pub(super) fn hold_paused(&mut self, ready: &mut ReadyList) {
        let mut i = 0;
        while i < ready.list.len() {
            let task = ready.list[i];
            if self.tasks[task as usize].crashed {
                ready.take(i); // a task of a node's previous incarnation: never again
                continue;
            }
            let node = self.tasks[task as usize].node;
            match self.faults.paused_until(node, self.now_ns) {
                Some(until) => {
                    ready.take(i);
                    if until != u64::MAX {
                        self.queue.push(until, EventKind::Wake { task });
                    }
                }
                None => i += 1,
            }
        }
    }
}

/// A planned restart ([`FaultPlan::restarts`]): what resets the node's memory (`None`: zero
/// it) and the new incarnation's tasks (`true`: main).
pub struct Restart {
    pub node: NodeId,
    pub at_ns: u64,
    pub reset: Option<Box<dyn FnOnce() + Send>>,
    pub tasks: Vec<(super::executor::TaskFuture, bool)>,
}

/// After a panic unwound out of [`super::Sim::run`] (a protocol or engine assertion): take the
/// run's world off this thread (dropping its tasks), reset the executor's thread-locals, and
/// return what the run produced up to the panic, stopped as a violation with `message`.
/// Used by the fuzzer, which treats assertions as checks; without it the next run on this thread
/// would find the old world installed.
pub fn recover_after_panic(message: String) -> super::Outcome {
    use super::executor::CURRENT_TASK;
    use super::world::{uninstall_after_dropping_tasks, WORLD};
    CURRENT_TASK.with(|c| c.set(u32::MAX));
    let installed = WORLD.with(|w| w.try_borrow().map(|w| w.is_some()).unwrap_or(false));
    assert!(installed, "recover_after_panic: no run was in progress on this thread");
    // The run loop's futures came back to the world while the panic unwound (`SlabGuard`).
    let mut world = uninstall_after_dropping_tasks(Vec::new());
    world.finish(super::StopReason::Violation { message })
}
