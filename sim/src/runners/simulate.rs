//! Running a [`Plan`] in the simulator: every node in one `Sim`, one thread.
//!
//! [`simulate`] is the one way every command runs a protocol here: `dmsim run` measures with
//! it, the fuzzer judges schedules with it (guarded against panics, invariants after every
//! event), and the tests call it. Nodes are built in node order — first `setup` on every node,
//! then each node's clients and daemons — so a plan's trace depends only on the plan.
//!
//! With [`Exchange::OverNic`] the nodes end as on hardware: DONE, clock pings, GO and chunked
//! reports over the NIC ([`dmsim_protocols::harness::gather`]), so that exchange is tested
//! without hardware. Figure runs and the fuzzer collect the reports directly: the exchange adds
//! events after the measurement and would only slow the fuzzer down.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use dmsim_protocols::harness::gather::{gather, Gathered};
use dmsim_protocols::harness::{Clock, MemoryWrites, NodeReport, Plan, Violation};
use dmsim_protocols::nic::{Nic, NodeId, RemoteAddr};
use dmsim_protocols::sync::Channel;

use crate::check::merge::merge;
use crate::check::{check_linearizability, check_sequential_consistency};
use crate::engine::{Outcome, Sim, SimConfig, StopReason};
use crate::fuzz::target::run_guarded;

/// How the nodes' reports reach the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    /// Read each node's report after the run (no extra events).
    Direct,
    /// The hardware runner's end-of-run exchange over the simulated NIC.
    OverNic,
}

/// How to run.
#[derive(Clone, Copy, Debug)]
pub struct SimulateOptions {
    pub exchange: Exchange,
    /// Install the plan's invariants after every event (when it has any).
    pub invariants: bool,
    /// Turn a panic inside the run into a result (the fuzzer) instead of unwinding (tests).
    pub catch_panics: bool,
    /// Compute the plan's metrics and operation count after the run (the fuzzer needs neither).
    pub metrics: bool,
}

impl SimulateOptions {
    pub const MEASURE: SimulateOptions =
        SimulateOptions { exchange: Exchange::Direct, invariants: true, catch_panics: false, metrics: true };
}

/// What one simulation produced.
pub struct Simulated {
    pub outcome: Outcome,
    /// A panic inside the run (with [`SimulateOptions::catch_panics`]).
    pub panic: Option<String>,
    /// The first invariant the plan's check found broken (the run stopped there).
    pub invariant: Option<Violation>,
    /// Every node's report, by node (collected however the run stopped).
    pub reports: Vec<NodeReport>,
    /// The plan's end-of-run check ([`Plan::verify`]); `Ok` when the run did not finish.
    pub verified: Result<(), Violation>,
}

impl Simulated {
    /// Whether the clients all finished.
    pub fn finished(&self) -> bool {
        matches!(self.outcome.stop, StopReason::Finished)
    }
}

/// Run `plan` once under `config` (whose cluster must be `plan.cluster()`).
pub fn simulate<P: Plan>(plan: &P, config: SimConfig, options: SimulateOptions) -> Simulated {
    let mut sim = Sim::new(config);
    let nodes = sim.cluster().node_count();
    for i in 0..nodes {
        plan.setup(&sim.nic(NodeId(i as u16)));
    }
    let mut states = Vec::with_capacity(nodes);
    let mut collects = Vec::with_capacity(nodes);
    let gathered: Arc<Mutex<Option<Result<Gathered, String>>>> = Arc::new(Mutex::new(None));
    for i in 0..nodes {
        let node = NodeId(i as u16);
        let nic = sim.nic(node);
        let run = plan.node(nic.clone());
        states.push(run.state);
        match options.exchange {
            Exchange::Direct => {
                for t in run.mains {
                    sim.spawn_main(node, t);
                }
                for t in run.daemons {
                    sim.spawn_daemon(node, t);
                }
                collects.push(Some(run.collect));
            }
            Exchange::OverNic => {
                for t in run.daemons {
                    sim.spawn_daemon(node, t);
                }
                let slot = gathered.clone();
                let collect = run.collect;
                let mains = run.mains;
                sim.spawn_main(node, async move {
                    let start = nic.now();
                    let done = Arc::new(Channel::new());
                    let clients = mains.len();
                    for m in mains {
                        let done = done.clone();
                        nic.spawn(async move {
                            m.await;
                            done.push(());
                        });
                    }
                    for _ in 0..clients {
                        done.pop().await;
                    }
                    let elapsed = nic.now().saturating_sub(start);
                    let result = gather(&nic, nodes, elapsed, collect).await;
                    if node.index() == 0 || result.is_err() {
                        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
                        if slot.as_ref().is_none_or(|o| o.is_ok()) {
                            *slot = Some(result);
                        }
                    }
                });
                collects.push(None);
            }
        }
    }
    // Restarted nodes' new incarnations: reports after every node's first one.
    for node in sim.restarting_nodes() {
        assert!(options.exchange == Exchange::Direct, "node restarts are not exchanged over the NIC");
        let nic = sim.nic(node);
        let reset = plan.restart_reset(nic.clone());
        let run = plan.restart_node(nic);
        let tasks =
            run.mains.into_iter().map(|t| (t, true)).chain(run.daemons.into_iter().map(|t| (t, false)));
        sim.on_restart(node, reset, tasks.collect());
        collects.push(Some(run.collect));
    }
    let regions: Vec<_> = (0..nodes).map(|i| sim.region(NodeId(i as u16))).collect();
    let seen: Rc<RefCell<Option<Violation>>> = Rc::new(RefCell::new(None));
    if options.invariants {
        if let Some(mut check) = plan.invariants(states) {
            let regions = regions.clone();
            let seen = seen.clone();
            sim.set_checker(move |_now| {
                let word = |a: RemoteAddr| regions[a.node.index()].load(a.offset_bytes);
                let writes = MemoryWrites::of(regions.iter().map(|r| &**r));
                check(&word, writes).map_err(|v| {
                    let message = v.to_string();
                    *seen.borrow_mut() = Some(v);
                    message
                })
            });
        }
    }
    let (outcome, panic) = if options.catch_panics { run_guarded(&mut sim) } else { (sim.run(), None) };
    let mut reports: Vec<NodeReport> = match options.exchange {
        Exchange::Direct => collects.into_iter().map(|c| c.map(|c| c()).unwrap_or_default()).collect(),
        Exchange::OverNic => {
            let result = gathered.lock().unwrap_or_else(|e| e.into_inner()).take();
            match result {
                Some(Ok(g)) => g.reports,
                _ => vec![NodeReport::default(); nodes],
            }
        }
    };
    let finished = matches!(outcome.stop, StopReason::Finished);
    if !finished {
        // Memory is not final unless every client finished (and quiesced).
        reports.iter_mut().for_each(|r| r.final_values = None);
    }
    let invariant = seen.borrow_mut().take();
    // The end-of-run check sees memory as the run left it.
    let verified = if finished && panic.is_none() {
        let word = |a: RemoteAddr| regions[a.node.index()].load(a.offset_bytes);
        plan.verify(&reports, Some(&word))
    } else {
        Ok(())
    };
    Simulated { outcome, panic, invariant, reports, verified }
}

/// Runs the history checkers (write chain, linearizability, sequential consistency) over the
/// nodes' logs, each on its clock (`clocks[i]` for `reports[i]`). No logs: no metrics. A
/// violation, or a key the checkers could not decide, is an error naming it.
pub fn check_histories(reports: &[NodeReport], clocks: &[Clock]) -> Result<BTreeMap<String, f64>, Violation> {
    let mut metrics = BTreeMap::new();
    if reports.iter().all(|r| r.history.is_empty()) {
        return Ok(metrics);
    }
    let logs: Vec<(Clock, &[dmsim_protocols::harness::LoggedOp])> =
        reports.iter().zip(clocks).map(|(r, c)| (*c, r.history.as_slice())).collect();
    let finals = reports.iter().filter_map(|r| r.final_values.as_ref()).fold(None, |acc, f| {
        let mut all: BTreeMap<u64, u64> = acc.unwrap_or_default();
        all.extend(f.iter().map(|(k, v)| (*k, *v)));
        Some(all)
    });
    let as_violation = |v: crate::check::Violation| Violation::new(v.checker.to_string(), v.to_string());
    let history = merge(&logs, finals.as_ref()).map_err(as_violation)?;
    let lin = check_linearizability(&history).map_err(as_violation)?;
    // Cross-key sequential consistency needs each key's write order; histories of blind writes
    // (no replaced values logged) get per-key linearizability only.
    let sc = if history.has_write_order() {
        check_sequential_consistency(&history).map_err(as_violation)?
    } else {
        Default::default()
    };
    for report in [&lin, &sc] {
        if let Some(u) = report.unknown.first() {
            return Err(Violation::new(
                "history check",
                format!(
                    "{} of {} keys undecided, e.g. {}: {}",
                    report.unknown.len(),
                    report.keys_checked() + report.unknown.len(),
                    u.key,
                    u.reason
                ),
            ));
        }
    }
    metrics.insert("history_ops".into(), history.records().len() as f64);
    metrics.insert("history_keys_checked".into(), lin.keys_checked() as f64);
    let uncertainty = clocks.iter().map(|c| c.uncertainty_ns).max().unwrap_or(0);
    metrics.insert("history_clock_uncertainty_us".into(), uncertainty as f64 / 1e3);
    Ok(metrics)
}
