//! The deterministic discrete-event engine.
//!
//! One run is one thread: the world lives in a thread-local for the duration of [`Sim::run`],
//! tasks are polled one at a time, and virtual time only moves when the next event is popped.
//!
//! ```text
//!   ┌──────────── run loop ────────────┐
//!   │ 1. pop all events at time t      │  queue: timing wheel ordered by (time_ns, seq)
//!   │    (verb arrive/exec/done, wake) │
//!   │ 2. while tasks are ready:        │  ready: wake order; the choice source picks which
//!   │      pick one (choice source),   │         of the ready tasks runs next
//!   │      poll it                     │
//!   │ 3. check invariants (check mode) │
//!   └──────────────────────────────────┘
//! ```
//!
//! Events are totally ordered by `(time_ns, seq)`; `seq` rises with every scheduled event, so
//! two events at one instant run in the order they were scheduled. Every other source of
//! nondeterminism (which ready task runs, jitter, faults) is a recorded decision of the
//! [`ChoiceSource`]. Nothing reads the wall clock and no map is iterated.

pub mod executor;
mod fault;
mod queue;
mod ssd;
mod verbs;
mod watch;
pub(crate) mod world;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use dmsim_protocols::memory::{PayloadSpan, Region};
use dmsim_protocols::nic::{Cluster, Nanos, NodeId};

use crate::choice::{ChoiceLog, ChoiceSource, Strategy};
use crate::fabric::Profile;
use crate::simnic::{Env, SimNic};
use crate::trace::{Trace, TraceSink};
pub use fault::{recover_after_panic, FaultPlan, Restart};
pub use world::VerbCounts;
use world::{with_world, Next, Slab, World, WORLD};

/// Everything a run needs besides the tasks.
pub struct SimConfig {
    pub cluster: Cluster,
    pub profile: Profile,
    pub strategy: Strategy,
    /// Keep the choice log (needed for replay files; costs memory on long runs).
    pub record_choices: bool,
    pub trace: TraceSink,
    /// Tear READs/WRITEs longer than 64 bytes into chunks that land at choice-drawn times
    /// (any order). Without it the profile's `tear_order` decides (default: at once).
    pub torn_large_verbs: bool,
    /// Modelled cores per node (`None`: every task has its own core). Memory nodes usually
    /// have them; [`SimConfig::model_compute_cores`] gives compute nodes cores too.
    pub cores: Vec<Option<u32>>,
    /// Share of each modelled core available to the node (1.0 = dedicated; stranded ≪ 1).
    pub cpu_share: Vec<f64>,
    /// Stop at this virtual time even if main tasks remain.
    pub time_ns_max: u64,
    /// Stop after this many events (a bound on every run).
    pub events_max: u64,
    /// Injected faults (message delay/drop, pauses, crashes); none by default.
    pub faults: FaultPlan,
    /// Bytes of NIC device memory per node (0 = none, the default).
    /// [`SimConfig::enable_device_memory`] gives home nodes the profile's capacity.
    pub device_memory_bytes: Vec<u64>,
    /// Bytes of the storage device per node (0 = none, the default).
    pub ssd_bytes: Vec<u64>,
    /// Per node, the payload span whose bytes are not stored (empty: every byte stored).
    pub payload_spans: Vec<Option<PayloadSpan>>,
}

impl SimConfig {
    /// Defaults: random choices from `seed`, no trace, unmodelled cores, 60 s virtual bound.
    pub fn new(cluster: Cluster, profile: Profile, seed: u64) -> SimConfig {
        let n = cluster.node_count();
        SimConfig {
            cluster,
            profile,
            strategy: Strategy::Random { seed },
            record_choices: false,
            trace: TraceSink::Off,
            torn_large_verbs: false,
            cores: vec![None; n],
            cpu_share: vec![1.0; n],
            time_ns_max: 60_000_000_000,
            events_max: u64::MAX,
            faults: FaultPlan::default(),
            device_memory_bytes: vec![0; n],
            ssd_bytes: vec![0; n],
            payload_spans: Vec::new(),
        }
    }

    /// Give every home node (`Memory` and `Symmetric`) the profile's device memory
    /// (`device_memory_bytes`; 0 on NICs without it).
    pub fn enable_device_memory(&mut self) {
        for node in self.cluster.home_nodes() {
            self.device_memory_bytes[node.index()] = self.profile.device_memory_bytes;
        }
    }

    /// Model `cores` cores (at a full share) on every client node (`Compute` and `Symmetric`):
    /// `cpu()` there then queues FCFS like on memory nodes instead of running at once.
    pub fn model_compute_cores(&mut self, cores: u32) {
        for node in self.cluster.client_nodes() {
            self.cores[node.index()] = Some(cores.max(1));
        }
    }
}

/// Why a run stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// Every main task finished.
    Finished,
    /// No event and no ready task, but main tasks remain: a deadlock or lost wake-up.
    Stalled {
        main_tasks_alive: usize,
    },
    TimeLimit,
    EventLimit,
    /// The checker reported a violation.
    Violation {
        message: String,
    },
    /// A fault the protocol has no recovery for happened ("unrecoverable: <protocol> has no
    /// recovery for <fault> (...)"): not a violation; the run ends there.
    Unrecoverable {
        message: String,
    },
}

/// What a run produced.
#[derive(Debug)]
pub struct Outcome {
    pub stop: StopReason,
    pub end_time: Nanos,
    pub events: u64,
    pub trace_hash: u64,
    pub trace_lines: Vec<String>,
    pub trace_error: Option<String>,
    pub choice_log: ChoiceLog,
    pub decisions: u64,
    /// Scheduling decisions among ≥ 2 ready tasks (PCT's racy steps).
    pub ready_decisions: u64,
    pub marks: BTreeMap<&'static str, u64>,
    pub verbs: VerbCounts,
    /// Per node: its kind and the picoseconds queued at each of its fabric resources
    /// ([`crate::fabric::Wait`] order).
    pub fabric_waits_ps: Vec<(dmsim_protocols::nic::NodeKind, crate::fabric::WaitTotals)>,
}

type Checker = Box<dyn FnMut(Nanos) -> Result<(), String>>;

/// A simulation, built then run once.
pub struct Sim {
    world: Option<Box<World>>,
    env: Arc<Env>,
    checker: Option<Checker>,
}

impl Sim {
    pub fn new(config: SimConfig) -> Sim {
        let regions: Vec<Arc<Region>> = (config.cluster.region_size_bytes.iter().enumerate())
            .map(|(i, &size)| match config.payload_spans.get(i).copied().flatten() {
                Some(span) => Arc::new(Region::with_elided_payload(size, span)),
                None => Arc::new(Region::new(size)),
            })
            .collect();
        let n = config.cluster.node_count();
        let device_regions: Vec<Arc<Region>> = (0..n)
            .map(|i| Arc::new(Region::new(config.device_memory_bytes.get(i).copied().unwrap_or(0) / 8 * 8)))
            .collect();
        let ssd_bytes: Vec<u64> = (0..n).map(|i| config.ssd_bytes.get(i).copied().unwrap_or(0)).collect();
        let env = Arc::new(Env {
            cluster: config.cluster.clone(),
            regions: regions.clone(),
            device_bytes: device_regions.iter().map(|r| r.size_bytes()).collect(),
            device_regions: device_regions.clone(),
            ssd_bytes: ssd_bytes.clone(),
        });
        let choice = ChoiceSource::new(config.strategy.clone(), config.record_choices);
        let trace = Trace::new(config.trace);
        let mut world = World::new(
            &config.cluster,
            &config.profile,
            regions,
            device_regions,
            &ssd_bytes,
            choice,
            trace,
            config.torn_large_verbs,
            &config.cores,
            &config.cpu_share,
            config.time_ns_max,
            config.events_max,
        );
        world.crashes_pending = config.faults.crashes();
        world.restarts_pending = (config.faults.restarts.iter())
            .map(|&(node, at_ns)| Restart { node, at_ns, reset: None, tasks: Vec::new() })
            .collect();
        world.faults = config.faults;
        Sim { world: Some(Box::new(world)), env, checker: None }
    }

    /// A NIC handle for `node` on channel 0.
    pub fn nic(&self, node: NodeId) -> SimNic {
        assert!(node.index() < self.env.cluster.node_count(), "no node {node}");
        SimNic::new(node, 0, self.env.clone())
    }

    pub fn region(&self, node: NodeId) -> Arc<Region> {
        self.env.regions[node.index()].clone()
    }

    /// `node`'s NIC device memory (empty if it has none); for tests and checkers — protocols
    /// reach it only by verbs.
    pub fn device_region(&self, node: NodeId) -> Arc<Region> {
        self.env.device_regions[node.index()].clone()
    }

    pub fn cluster(&self) -> &Cluster {
        &self.env.cluster
    }

    /// A task the run waits for.
    pub fn spawn_main(&mut self, node: NodeId, task: impl Future<Output = ()> + Send + 'static) {
        self.world.as_mut().expect("spawn before run").spawn(node, Box::pin(task), true);
    }

    /// A background task (handler, evictor) dropped when the main tasks are done.
    pub fn spawn_daemon(&mut self, node: NodeId, task: impl Future<Output = ()> + Send + 'static) {
        self.world.as_mut().expect("spawn before run").spawn(node, Box::pin(task), false);
    }

    /// The nodes that restart during the run (each once), in time order.
    pub fn restarting_nodes(&self) -> Vec<NodeId> {
        self.world.as_ref().map(|w| w.restarts_pending.iter().map(|r| r.node).collect()).unwrap_or_default()
    }

    /// What `node`'s restart does: `reset` its memory (`None`: zero it), then start `tasks` (`true`: main).
    pub fn on_restart(
        &mut self,
        node: NodeId,
        reset: Option<Box<dyn FnOnce() + Send>>,
        tasks: Vec<(executor::TaskFuture, bool)>,
    ) {
        let world = self.world.as_mut().expect("on_restart before run");
        let restart = world.restarts_pending.iter_mut().find(|r| r.node == node).expect("a planned restart");
        restart.reset = reset;
        restart.tasks = tasks;
    }

    /// Check mode: `checker` runs after every task poll and after every instant that wrote
    /// memory (the state a checker can see changes at no other point); an `Err` stops the run
    /// as a violation.
    pub fn set_checker(&mut self, checker: impl FnMut(Nanos) -> Result<(), String> + 'static) {
        self.checker = Some(Box::new(checker));
    }

    /// Run to completion (or a bound). A run happens once per `Sim`.
    pub fn run(&mut self) -> Outcome {
        let world = self.world.take().expect("a Sim runs once");
        world::install(world);
        let mut slab = SlabGuard(Slab::new());
        let stop = run_loop(&mut self.checker, &mut slab.0);
        let mut world = world::uninstall_after_dropping_tasks(std::mem::take(&mut slab.0));
        world.finish(stop)
    }
}

/// The run loop's futures. If a panic unwinds out of the loop, they go back to the installed
/// world instead of being dropped mid-unwind, so [`recover_after_panic`] drops them as it drops
/// every task: with the world installed, after the executor stopped taking wakes.
struct SlabGuard(Slab);

impl Drop for SlabGuard {
    fn drop(&mut self) {
        let futures = std::mem::take(&mut self.0);
        // Empty after a normal run; with no world installed they are simply dropped.
        let _ = world::try_with_world(|w| {
            let live = futures.into_iter().enumerate().filter_map(|(i, f)| Some((i as u32, f?)));
            w.spawned.extend(live);
        });
    }
}

/// The hot loop. See the module docs for its shape. Between two polls it touches the world
/// once ([`World::next`]); the futures live in `slab`, outside the world.
fn run_loop(checker: &mut Option<Checker>, slab: &mut Slab) -> StopReason {
    let mut wakers = Vec::new();
    let checking = checker.is_some();
    let mut finished = None;
    loop {
        match with_world(|w| w.next(finished.take(), slab, checking)) {
            Next::Poll(task) => {
                if world::poll_task(task, slab, &mut wakers) {
                    finished = Some(task);
                }
            }
            Next::Check => {}
            Next::Stop(reason) => return reason,
        }
        if let Some(reason) = run_checker(checker) {
            return reason;
        }
    }
}

fn run_checker(checker: &mut Option<Checker>) -> Option<StopReason> {
    let check = checker.as_mut()?;
    let now = Nanos(executor::NOW_NS.with(|n| n.get()));
    check(now).err().map(|message| StopReason::Violation { message })
}

/// True while a simulation is running on this thread.
pub fn in_simulation() -> bool {
    WORLD.with(|w| w.try_borrow().map(|w| w.is_some()).unwrap_or(true))
}
