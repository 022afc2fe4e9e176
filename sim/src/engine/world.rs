//! The world of one run: tasks, events, the fabric state, inboxes, the choice source, the
//! trace. Lives in a thread-local while the run is going so that `SimNic` futures can reach it.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::task::{Context, Waker};

use dmsim_protocols::memory::Region;
use dmsim_protocols::nic::{Cluster, Message, Nanos, NodeId};

use super::executor::{self, waker_for, TaskFuture, TaskSlot, CURRENT_TASK, NOW_NS, READY};
use super::queue::{EventKind, EventQueue};
use super::ssd::{SsdReq, SsdStore};
use super::verbs::Op;
use super::watch::Watches;
use super::{Outcome, StopReason};
use crate::choice::{ChoiceKind, ChoiceSource};
use crate::fabric::{LookupMap, NodeFabric, Params, Profile, QpState, TearOrder};
use crate::trace::Trace;

thread_local! {
    pub static WORLD: RefCell<Option<Box<World>>> = const { RefCell::new(None) };
}

/// Run `f` on the installed world. Panics outside a run: simulator futures only make sense
/// inside one.
#[inline]
pub fn with_world<R>(f: impl FnOnce(&mut World) -> R) -> R {
    WORLD.with(|w| {
        let mut w = w.borrow_mut();
        let world = w.as_mut().expect("no simulation is running on this thread");
        f(world)
    })
}

/// Like [`with_world`], but `None` when no run is installed (for `Drop` impls).
pub fn try_with_world<R>(f: impl FnOnce(&mut World) -> R) -> Option<R> {
    WORLD.with(|w| w.try_borrow_mut().ok().and_then(|mut w| w.as_mut().map(|world| f(world))))
}

pub fn install(world: Box<World>) {
    READY.with(|r| {
        let mut r = r.borrow_mut();
        r.reset(true);
        for (i, slot) in world.tasks.iter().enumerate() {
            if slot.alive {
                r.push(i as u32);
            }
        }
    });
    NOW_NS.with(|n| n.set(world.now_ns));
    WORLD.with(|w| {
        let mut w = w.borrow_mut();
        assert!(w.is_none(), "one run per thread at a time");
        *w = Some(world);
    });
}

/// The task futures, indexed by task: owned by the run loop, outside the world, so a poll holds
/// no world borrow and needs no move in or out of it. Tasks spawned during a poll wait in
/// [`World::spawned`] until the loop's next world access moves them here.
pub type Slab = Vec<Option<TaskFuture>>;

/// Drop every task future while the world is still installed (their `Drop`s may look at it),
/// then take the world out.
pub fn uninstall_after_dropping_tasks(slab: Slab) -> Box<World> {
    READY.with(|r| r.borrow_mut().reset(false));
    drop(slab);
    let spawned: Vec<(u32, TaskFuture)> = with_world(|w| std::mem::take(&mut w.spawned));
    drop(spawned);
    WORLD.with(|w| w.borrow_mut().take()).expect("world installed")
}

/// What the run loop does next ([`World::next`]).
pub enum Next {
    /// Poll this task (its future may be gone: a stale wake of a finished task).
    Poll(u32),
    /// An instant wrote memory: run the checker.
    Check,
    Stop(StopReason),
}

/// Poll `task`'s future from `slab` with its cached waker; true if it finished (its future is
/// dropped here, outside any world borrow). No future: a stale wake, nothing to do.
#[inline]
pub fn poll_task(task: u32, slab: &mut Slab, wakers: &mut Vec<Waker>) -> bool {
    let Some(future) = slab[task as usize].as_mut() else { return false };
    while wakers.len() <= task as usize {
        wakers.push(waker_for(wakers.len() as u32));
    }
    CURRENT_TASK.with(|c| c.set(task));
    let poll = future.as_mut().poll(&mut Context::from_waker(&wakers[task as usize]));
    CURRENT_TASK.with(|c| c.set(u32::MAX));
    if poll.is_ready() {
        slab[task as usize] = None;
    }
    poll.is_ready()
}

pub enum Step {
    Continue,
    Stop(StopReason),
}

/// Verbs executed, by class and in total (for events/s and protocol counts).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerbCounts {
    pub read: u64,
    pub write: u64,
    pub atomic: u64,
    pub send: u64,
    pub batches: u64,
    pub bytes: u64,
}

/// A node's port: queued messages and the tasks waiting for one.
#[derive(Default)]
pub struct Inbox {
    pub messages: VecDeque<Message>,
    pub waiters: VecDeque<u32>,
}

/// How READs/WRITEs over 64 bytes land (`verbs.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TearMode {
    /// At once.
    Off,
    /// 64-byte pieces at choice-drawn times within the transfer (`SimConfig::torn_large_verbs`).
    AnyOrder,
    /// 64-byte pieces in increasing address order over the transfer (profile `tear_order`).
    Ascending,
}

pub struct World {
    pub now_ns: u64,
    pub queue: EventQueue,
    pub tasks: Vec<TaskSlot>,
    /// Futures spawned since the run loop last took them ([`World::next`]).
    pub spawned: Vec<(u32, TaskFuture)>,
    pub main_alive: usize,
    pub ops: Vec<Op>,
    pub free_ops: Vec<u32>,
    pub regions: Vec<Arc<Region>>,
    /// Each node's NIC device memory (empty regions: none).
    pub device_regions: Vec<Arc<Region>>,
    pub device_bytes: Vec<u64>,
    pub cluster: Cluster,
    pub params: Params,
    pub nodes: Vec<NodeFabric>,
    pub qps: LookupMap<(u16, u16, u16), u32>,
    pub qp_states: Vec<QpState>,
    pub atomic_free_ps: LookupMap<(u16, u64), u64>,
    pub inboxes: LookupMap<(u16, u16), Inbox>,
    pub choice: ChoiceSource,
    pub trace: Trace,
    pub tear: TearMode,
    pub watches: Watches,
    pub ssds: Vec<SsdStore>,
    pub ssd_reqs: Vec<SsdReq>,
    pub free_ssd_reqs: Vec<u32>,
    pub events: u64,
    pub time_ns_max: u64,
    pub events_max: u64,
    pub marks: BTreeMap<&'static str, u64>,
    pub verbs: VerbCounts,
    pub faults: super::FaultPlan,
    /// Crashes not yet applied ([`World::faults_due`]), in time order.
    pub crashes_pending: Vec<(NodeId, u64)>,
    /// Restarts not yet applied, in time order.
    pub restarts_pending: Vec<super::fault::Restart>,
}

impl World {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cluster: &Cluster,
        profile: &Profile,
        regions: Vec<Arc<Region>>,
        device_regions: Vec<Arc<Region>>,
        ssd_bytes: &[u64],
        choice: ChoiceSource,
        trace: Trace,
        torn_large_verbs: bool,
        cores: &[Option<u32>],
        cpu_share: &[f64],
        time_ns_max: u64,
        events_max: u64,
    ) -> World {
        assert_eq!(cores.len(), cluster.node_count(), "one core setting per node");
        assert_eq!(cpu_share.len(), cluster.node_count(), "one cpu share per node");
        let params = Params::from_profile(profile);
        let tear = match (torn_large_verbs, params.tear_order) {
            (true, _) => TearMode::AnyOrder,
            (false, TearOrder::Ascending) => TearMode::Ascending,
            (false, TearOrder::None) => TearMode::Off,
        };
        let device_bytes = device_regions.iter().map(|r| r.size_bytes()).collect();
        let ssds = (0..cluster.node_count())
            .map(|i| SsdStore::new(ssd_bytes.get(i).copied().unwrap_or(0)))
            .collect();
        let nodes = (0..cluster.node_count())
            .map(|i| NodeFabric {
                cores_free_ns: cores[i].map(|c| vec![0; c.max(1) as usize]),
                cpu_share_ppm: (cpu_share[i] * 1e6).round().max(1.0) as u64,
                ..Default::default()
            })
            .collect();
        World {
            now_ns: 0,
            queue: EventQueue::default(),
            tasks: Vec::new(),
            spawned: Vec::new(),
            main_alive: 0,
            ops: Vec::new(),
            free_ops: Vec::new(),
            regions,
            device_regions,
            device_bytes,
            cluster: cluster.clone(),
            params,
            nodes,
            qps: LookupMap::default(),
            qp_states: Vec::new(),
            atomic_free_ps: LookupMap::default(),
            inboxes: LookupMap::default(),
            choice,
            trace,
            tear,
            watches: Watches::default(),
            ssds,
            ssd_reqs: Vec::new(),
            free_ssd_reqs: Vec::new(),
            events: 0,
            time_ns_max,
            events_max,
            marks: BTreeMap::new(),
            verbs: VerbCounts::default(),
            faults: super::FaultPlan::default(),
            crashes_pending: Vec::new(),
            restarts_pending: Vec::new(),
        }
    }

    pub fn spawn(&mut self, node: NodeId, future: TaskFuture, main: bool) -> u32 {
        let id = self.tasks.len() as u32;
        self.tasks.push(TaskSlot { node, main, alive: true, crashed: false });
        self.spawned.push((id, future));
        if main {
            self.main_alive += 1;
        }
        executor::wake_task(id);
        id
    }

    pub fn finish_task(&mut self, task: u32) {
        let slot = &mut self.tasks[task as usize];
        assert!(slot.alive, "task {task} finished twice");
        slot.alive = false;
        if slot.main {
            self.main_alive -= 1;
        }
    }

    /// One world access between two polls: record how the last poll ended (`finished`), hand
    /// new futures to the loop's slab, then pick the next ready task — popping instants until
    /// one is ready, the run ends, or (with `checking`) an instant wrote memory.
    #[inline]
    pub fn next(&mut self, finished: Option<u32>, slab: &mut Slab, checking: bool) -> Next {
        if let Some(task) = finished {
            self.finish_task(task);
        }
        self.take_spawned(slab);
        loop {
            if let Some(task) = self.pick_ready() {
                // A restart (in `pop_instant`) may have spawned it since.
                self.take_spawned(slab);
                return Next::Poll(task);
            }
            if let Some(reason) = self.stop_reason() {
                return Next::Stop(reason);
            }
            let writes_before = checking.then(|| self.memory_writes());
            if let Step::Stop(reason) = self.pop_instant() {
                return Next::Stop(reason);
            }
            // An instant that wrote no memory cannot change what a checker sees: protocol
            // state changes only in task code (checked after each poll).
            if writes_before.is_some_and(|before| before != self.memory_writes()) {
                return Next::Check;
            }
        }
    }

    /// Hand futures spawned since the last call to the loop's slab.
    #[inline]
    fn take_spawned(&mut self, slab: &mut Slab) {
        if !self.spawned.is_empty() {
            for (id, future) in self.spawned.drain(..) {
                if slab.len() <= id as usize {
                    slab.resize_with(id as usize + 1, || None);
                }
                slab[id as usize] = Some(future);
            }
        }
    }

    /// Which ready task runs next, through the choice source.
    pub fn pick_ready(&mut self) -> Option<u32> {
        READY.with(|r| {
            let mut r = r.borrow_mut();
            if !self.faults.pauses.is_empty() {
                self.hold_paused(&mut r);
            }
            if r.list.is_empty() {
                return None;
            }
            let index = self.choice.choose_ready(&r.list);
            Some(r.take(index))
        })
    }

    pub fn stop_reason(&mut self) -> Option<StopReason> {
        (self.main_alive == 0).then_some(StopReason::Finished)
    }

    /// Pop and process every event at the earliest pending instant.
    /// Write operations on every node's memory and device memory so far.
    pub fn memory_writes(&mut self) -> u64 {
        self.regions.iter().chain(&self.device_regions).map(|r| r.writes()).fold(0, u64::wrapping_add)
    }

    pub fn pop_instant(&mut self) -> Step {
        let next = self.queue.peek_time();
        if let Some(fault_ns) = self.next_fault_ns().filter(|f| next.is_none_or(|n| *f <= n)) {
            if fault_ns <= self.time_ns_max {
                if let Some(stop) = self.faults_due(fault_ns.max(self.now_ns)) {
                    return Step::Stop(stop);
                }
                self.now_ns = self.now_ns.max(fault_ns);
                NOW_NS.with(|n| n.set(self.now_ns));
                return Step::Continue;
            }
        }
        let Some(time_ns) = next else {
            return Step::Stop(StopReason::Stalled { main_tasks_alive: self.main_alive });
        };
        if time_ns > self.time_ns_max {
            return Step::Stop(StopReason::TimeLimit);
        }
        assert!(time_ns >= self.now_ns, "time went backwards: {time_ns} < {}", self.now_ns);
        self.now_ns = time_ns;
        NOW_NS.with(|n| n.set(time_ns));
        loop {
            if self.events >= self.events_max {
                // The bound stops the run only when another event of this instant is due.
                if self.queue.peek_time() == Some(time_ns) {
                    return Step::Stop(StopReason::EventLimit);
                }
                break;
            }
            let Some(kind) = self.queue.pop_at(time_ns) else { break };
            self.events += 1;
            let (a, b) = kind.hash_words();
            self.trace.hash_event(time_ns, a, b);
            match kind {
                EventKind::Wake { task } => executor::wake_task(task),
                EventKind::Arrive { op, verb } => self.arrive(op, verb as usize),
                EventKind::Exec { op, verb, chunk } => self.exec(op, verb as usize, chunk),
                EventKind::Done { op, verb } => self.done(op, verb as usize),
                EventKind::SsdDone { req } => self.ssd_done(req),
            }
        }
        Step::Continue
    }

    /// Wake `task` at `time_ns` (a timer).
    pub fn wake_at(&mut self, time_ns: u64, task: u32) {
        debug_assert!(time_ns >= self.now_ns);
        self.queue.push(time_ns, EventKind::Wake { task });
    }

    /// Reserve CPU on `node` for `work_ns`; returns when it completes.
    pub fn cpu(&mut self, node: NodeId, work_ns: u64) -> u64 {
        let now = self.now_ns;
        self.nodes[node.index()].cpu(now, work_ns)
    }

    /// One jitter draw in picoseconds.
    pub fn jitter_ps(&mut self) -> u64 {
        let max = self.params.jitter_ns_max;
        if max == 0 {
            return 0;
        }
        self.choice.choose(ChoiceKind::Jitter, max + 1) * crate::fabric::PS_PER_NS
    }

    pub fn mark(&mut self, node: NodeId, label: &'static str, value: u64) {
        *self.marks.entry(label).or_insert(0) += 1;
        let now = self.now_ns;
        self.trace.hash_event(now, 5, value ^ label.len() as u64);
        self.trace.line(now, node.0, "MARK", |l| {
            use std::fmt::Write;
            let _ = write!(l, "{label} {value}");
        });
    }

    pub fn finish(&mut self, stop: StopReason) -> Outcome {
        let trace_error = self.trace.finish().err();
        Outcome {
            stop,
            end_time: Nanos(self.now_ns),
            events: self.events,
            trace_hash: self.trace.hash(),
            trace_lines: self.trace.take_lines(),
            trace_error,
            choice_log: self.choice.take_log(),
            decisions: self.choice.decisions(),
            ready_decisions: self.choice.ready_decisions(),
            marks: std::mem::take(&mut self.marks),
            verbs: self.verbs.clone(),
            fabric_waits_ps: self
                .cluster
                .kinds
                .iter()
                .zip(&self.nodes)
                .map(|(k, n)| (*k, n.waits_ps))
                .collect(),
        }
    }
}
