//! What the fuzzer needs from a protocol: build a small cluster for one schedule, run it in check
//! mode, judge it. Everything protocol-specific lives behind [`FuzzTarget`]; the campaign, the
//! shrinker and the replay command only see [`RunRequest`] and [`RunResult`].
//!
//! ```text
//!  RunRequest { seed, strategy, mutant, faults, trace }
//!      │ target.run()
//!      ▼
//!  swarm config drawn from the seed ─▶ Sim (check mode: invariants after every event,
//!      │                                    history recorder with write order)
//!      ▼
//!  Outcome ─▶ history checkers (per-key linearizability, SC) ─▶ RunResult { verdict, log, … }
//! ```
//!
//! A protocol assertion that fires (a `panic!` in protocol or engine code) is a verdict too, the
//! checker `"panic"`: the protocol's own assertions are checks, and a mutant may trip them first.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

use serde::{Deserialize, Serialize};

use crate::choice::{ChoiceLog, Strategy};
use crate::engine::{Outcome, Sim, StopReason};

/// Which fault families a campaign may inject; each seed's swarm draws the rates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Faults {
    /// Extra latency on some SEND messages.
    pub delay: bool,
    /// Some SEND messages lost once and retransmitted by the (RC) NIC.
    pub drop: bool,
    /// A compute node's tasks not polled for a while.
    pub pause: bool,
    /// A compute node stops for good.
    pub crash: bool,
    /// Extra latency on some one-sided verbs (READ, WRITE, atomics): a lost packet the RC NIC
    /// retransmits after its timeout. Per-QP order still holds.
    #[serde(default)]
    pub verb_delay: bool,
    /// Extra latency on some one-sided verbs' responses (the verb took effect on time): a
    /// slower path or a congested queue; other queue pairs' responses overtake it.
    #[serde(default)]
    pub response_delay: bool,
}

impl Faults {
    pub const NAMES: &'static [&'static str] =
        &["delay", "drop", "pause", "crash", "verb-delay", "response-delay"];

    /// Parse `none`, `all`, or a comma-separated subset of [`Faults::NAMES`]. `all` is every
    /// family, so it grows with the fuzzer (`verb-delay` in session 27, `response-delay` in
    /// session 28): a campaign meant to be re-run names its families (summaries and replay
    /// files record them by name).
    pub fn parse(text: &str) -> Result<Faults, String> {
        let mut faults = Faults::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "none" => {}
                "all" => {
                    faults = Faults {
                        delay: true,
                        drop: true,
                        pause: true,
                        crash: true,
                        verb_delay: true,
                        response_delay: true,
                    }
                }
                "delay" => faults.delay = true,
                "drop" => faults.drop = true,
                "pause" => faults.pause = true,
                "crash" => faults.crash = true,
                "verb-delay" => faults.verb_delay = true,
                "response-delay" => faults.response_delay = true,
                other => {
                    return Err(format!(
                        "unknown fault {other:?} (known: none, all, {})",
                        Faults::NAMES.join(", ")
                    ))
                }
            }
        }
        Ok(faults)
    }

    pub fn any(&self) -> bool {
        self.delay || self.drop || self.pause || self.crash || self.verb_delay || self.response_delay
    }
}

impl std::fmt::Display for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let on: Vec<&str> =
            [self.delay, self.drop, self.pause, self.crash, self.verb_delay, self.response_delay]
                .iter()
                .zip(Faults::NAMES)
                .filter(|(on, _)| **on)
                .map(|(_, n)| *n)
                .collect();
        if on.is_empty() {
            write!(f, "none")
        } else {
            write!(f, "{}", on.join(","))
        }
    }
}

/// One schedule to run.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// Draws the swarm configuration and the workload; with `Strategy::Random` also the choices.
    pub seed: u64,
    pub strategy: Strategy,
    /// A name from [`FuzzTarget::mutants`]; `"none"` is the correct protocol.
    pub mutant: String,
    pub faults: Faults,
    /// Keep trace lines in memory (for reports and snapshots; the hash is computed either way).
    pub trace: bool,
}

/// Why a schedule failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The checker or invariant, e.g. `"linearizability"`, `"S3 memo M matches latch"`, `"panic"`,
    /// `"liveness"`.
    pub checker: String,
    pub message: String,
    /// Virtual time of the failure (the run's end for after-the-run checkers).
    pub at_ns: u64,
    /// The last trace lines before the failure (empty unless the run was traced).
    pub last_trace: Vec<String>,
}

/// How a schedule ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Violation(Failure),
    /// A node crashed and the protocol defines no recovery: not a coherence violation, and no
    /// checker found one in what ran.
    Crash(String),
}

impl Verdict {
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Verdict::Violation(f) => Some(f),
            _ => None,
        }
    }
}

/// What one schedule produced.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub verdict: Verdict,
    pub choice_log: ChoiceLog,
    pub trace_hash: u64,
    pub decisions: u64,
    /// Racy scheduling steps (PCT's `k`).
    pub ready_decisions: u64,
    pub events: u64,
    pub end_ns: u64,
    /// The swarm configuration this seed drew, one line.
    pub swarm: String,
    pub trace_lines: Vec<String>,
    /// Protocol marks hit (sometimes-assertions), by label.
    pub marks: BTreeMap<&'static str, u64>,
}

/// A protocol the fuzzer can drive. Implementations must be deterministic in `RunRequest`.
pub trait FuzzTarget: Sync {
    /// `(name, one-line description)` of every mutant, without `"none"`.
    fn mutants(&self) -> Vec<(&'static str, &'static str)>;
    /// Run one schedule with every checker on.
    fn run(&self, request: &RunRequest) -> RunResult;
    /// The swarm line this seed draws (what [`RunResult::swarm`] will say), without running.
    fn describe_swarm(&self, seed: u64, faults: Faults) -> String;
}

/// How many trace lines a failure report keeps.
pub const LAST_TRACE_LINES: usize = 40;

thread_local! {
    /// Set while a fuzzed run is in progress on this thread: the panic hook records instead of
    /// printing, and the message becomes the verdict.
    static CAPTURE: RefCell<Option<Option<String>>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Install (once per process) a panic hook that stays quiet for fuzzed runs and defers to the
/// previous hook otherwise.
fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let captured = CAPTURE.with(|c| {
                let mut c = c.borrow_mut();
                match c.as_mut() {
                    Some(slot) => {
                        let location = info.location().map(|l| format!(" ({}:{})", l.file(), l.line()));
                        *slot =
                            Some(format!("{}{}", payload_text(info.payload()), location.unwrap_or_default()));
                        true
                    }
                    None => false,
                }
            });
            if !captured {
                previous(info);
            }
        }));
    });
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// Run `sim`, turning a panic inside the run into `StopReason::Violation` with checker name
/// `"panic"` (returned beside the outcome). The world is cleaned off this thread either way, so
/// the next run on it starts fresh.
pub fn run_guarded(sim: &mut Sim) -> (Outcome, Option<String>) {
    install_hook();
    CAPTURE.with(|c| *c.borrow_mut() = Some(None));
    let result = catch_unwind(AssertUnwindSafe(|| sim.run()));
    let message = CAPTURE.with(|c| c.borrow_mut().take()).flatten();
    match result {
        Ok(outcome) => (outcome, None),
        Err(payload) => {
            let message = message.unwrap_or_else(|| payload_text(payload.as_ref()));
            let outcome = crate::engine::recover_after_panic(message.clone());
            (outcome, Some(message))
        }
    }
}

/// The stop reason as a short phrase for reports.
pub fn describe_stop(stop: &StopReason) -> String {
    match stop {
        StopReason::Finished => "finished".into(),
        StopReason::Stalled { main_tasks_alive } => {
            format!("stalled with {main_tasks_alive} client tasks blocked")
        }
        StopReason::TimeLimit => "hit the virtual time limit".into(),
        StopReason::EventLimit => "hit the event limit".into(),
        StopReason::Violation { message } => format!("violation: {message}"),
        StopReason::Unrecoverable { message } => message.clone(),
    }
}
