//! The hardware runtime: a node's protocol tasks on OS threads that also poll the NIC.
//!
//! ```text
//!   worker thread ×T                       shared
//!  ┌────────────────────────────┐   ┌──────────────────────────┐
//!  │ pop ready task → poll it   │◀──│ run queue (woken tasks)  │
//!  │ idle: poll pollers (CQs) ──┼──▶│ wakers of verb futures   │
//!  │       fire due timers      │◀──│ timers (sleep, bounds)   │
//!  │       spin, then park      │   └──────────────────────────┘
//!  └────────────────────────────┘
//! ```
//!
//! Tasks are `Send` futures ([`dmsim_protocols::nic::Task`]); any worker may poll any task.
//! Completion polling is done by whichever worker is idle, through [`Poller`]s the NIC installs,
//! which wake the futures whose work requests completed. Nothing here is specific to libibverbs,
//! so the executor is tested in the default build.
//!
//! Why spin before parking: an RDMA completion arrives microseconds after posting; a parked
//! thread would add a scheduler wake-up to every verb. A worker spins (with `yield_now`, so
//! other processes sharing the cores still run) while any poller reports work in flight, and
//! parks in short slices otherwise, so that incoming messages are still noticed promptly.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use dmsim_protocols::nic::{Nanos, Task};

/// Something a worker polls when it has no task to run (a completion queue).
pub trait Poller: Send + Sync {
    /// Deliver whatever has completed; returns how many events were delivered.
    fn poll(&self) -> usize;
    /// True while work requests are outstanding (workers then spin instead of parking).
    fn busy(&self) -> bool;
}

/// Longest a worker parks before re-polling (bounds the delay in noticing incoming messages).
const PARK_SLICE: Duration = Duration::from_micros(200);
fn yield_every() -> u32 {
    static V: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        std::env::var("DMSIM_HW_YIELD_EVERY").ok().and_then(|v| v.parse().ok()).unwrap_or(64).max(1)
    })
}
/// Idle polls before a worker with nothing in flight parks.
const SPIN_ROUNDS: u32 = 256;

struct TaskCell {
    future: Mutex<Option<Task>>,
    queued: AtomicBool,
    shared: Weak<Shared>,
}

impl Wake for TaskCell {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(shared) = self.shared.upgrade() {
            let mut queue = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.push_back(self.clone());
            shared.queued.store(queue.len(), Ordering::Release);
            drop(queue);
            shared.notify();
        }
    }
}

/// A timer's key: deadline, then a sequence number for uniqueness. Timers live in a
/// `BTreeMap` rather than a heap so that a dropped `Sleep` (a verb that completed before its
/// bound) removes its entry: the map holds only live timers, however many verbs a node issues.
type TimerKey = (Instant, u64);

struct Shared {
    queue: Mutex<VecDeque<Arc<TaskCell>>>,
    /// Tasks in `queue`, readable without its lock (a verb spinning inline checks it).
    queued: AtomicUsize,
    wakeup: Condvar,
    timers: Mutex<BTreeMap<TimerKey, Waker>>,
    timer_seq: AtomicU64,
    pollers: RwLock<Vec<Arc<dyn Poller>>>,
    live_tasks: AtomicUsize,
    /// Workers waiting on `wakeup`; a wake-up notifies (a futex syscall) only if one is.
    parked: AtomicUsize,
    start: Instant,
}

impl Shared {
    fn notify(&self) {
        if self.parked.load(Ordering::Acquire) > 0 {
            self.wakeup.notify_one();
        }
    }
}

/// A handle to the runtime: cheap to clone, usable from any thread and inside tasks.
#[derive(Clone)]
pub struct Runtime {
    shared: Arc<Shared>,
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime::new()
    }
}

impl Runtime {
    pub fn new() -> Runtime {
        Runtime {
            shared: Arc::new(Shared {
                queue: Mutex::new(VecDeque::new()),
                queued: AtomicUsize::new(0),
                wakeup: Condvar::new(),
                timers: Mutex::new(BTreeMap::new()),
                timer_seq: AtomicU64::new(0),
                pollers: RwLock::new(Vec::new()),
                live_tasks: AtomicUsize::new(0),
                parked: AtomicUsize::new(0),
                start: Instant::now(),
            }),
        }
    }

    /// Time since the runtime was created (the hardware `Nic::now`).
    pub fn now(&self) -> Nanos {
        Nanos(self.shared.start.elapsed().as_nanos() as u64)
    }

    /// Installs a poller that idle workers call.
    pub fn add_poller(&self, poller: Arc<dyn Poller>) {
        self.shared.pollers.write().unwrap_or_else(|e| e.into_inner()).push(poller);
    }

    /// Queues `task`; it runs on the workers of the next (or current) `block_on`.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let cell = Arc::new(TaskCell {
            future: Mutex::new(Some(Box::pin(task))),
            queued: AtomicBool::new(false),
            shared: Arc::downgrade(&self.shared),
        });
        self.shared.live_tasks.fetch_add(1, Ordering::AcqRel);
        cell.wake_by_ref();
    }

    /// True if some task is ready to run (woken and not yet picked up by a worker). A future
    /// that busy-waits inline checks this to give the worker back when there is other work.
    pub fn has_ready_tasks(&self) -> bool {
        self.shared.queued.load(Ordering::Acquire) > 0
    }

    /// Tasks spawned and not yet finished.
    pub fn live_tasks(&self) -> usize {
        self.shared.live_tasks.load(Ordering::Acquire)
    }

    /// A future that is ready once `duration` has passed.
    pub fn sleep(&self, duration: Duration) -> Sleep {
        Sleep { timer: self.timer_at(Instant::now() + duration), yielded: false }
    }

    /// A future that is ready at `deadline`. Unlike [`Runtime::sleep`] it does not yield first:
    /// its first poll only registers the timer (one map insert), or is ready if the deadline
    /// has passed.
    pub fn timer_at(&self, deadline: Instant) -> Timer {
        Timer { runtime: self.clone(), deadline, registered: None }
    }

    fn set_timer(&self, key: Option<TimerKey>, deadline: Instant, waker: Waker) -> TimerKey {
        let mut timers = self.shared.timers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(key) = key {
            timers.remove(&key);
        }
        let key = (deadline, self.shared.timer_seq.fetch_add(1, Ordering::Relaxed));
        timers.insert(key, waker);
        drop(timers);
        // A parked worker re-checks timers within PARK_SLICE anyway; wake it for accuracy.
        self.shared.notify();
        key
    }

    fn cancel_timer(&self, key: TimerKey) {
        self.shared.timers.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
    }

    /// Drops every queued task, timer and poller. Tasks hold NIC handles and the NIC holds the
    /// runtime, so without this a finished cluster would keep its device resources alive.
    pub fn clear(&self) {
        let tasks: Vec<_> = {
            let mut queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.queued.store(0, Ordering::Release);
            queue.drain(..).collect()
        };
        for t in tasks {
            t.future.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
        let timers = std::mem::take(&mut *self.shared.timers.lock().unwrap_or_else(|e| e.into_inner()));
        drop(timers);
        self.shared.pollers.write().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Runs `main` and every spawned task on `threads` worker threads (the caller's thread is
    /// one of them) until `main` finishes; returns its output. Tasks still pending then stay
    /// queued (a later `block_on` continues them).
    pub fn block_on<T: Send + 'static>(
        &self,
        threads: usize,
        main: impl Future<Output = T> + Send + 'static,
    ) -> T {
        let output: Arc<Mutex<Option<T>>> = Arc::new(Mutex::new(None));
        let done = Arc::new(AtomicBool::new(false));
        {
            let output = output.clone();
            let done = done.clone();
            let shared = Arc::downgrade(&self.shared);
            self.spawn(async move {
                let value = main.await;
                *output.lock().unwrap_or_else(|e| e.into_inner()) = Some(value);
                done.store(true, Ordering::Release);
                if let Some(shared) = shared.upgrade() {
                    shared.wakeup.notify_all();
                }
            });
        }
        std::thread::scope(|scope| {
            for _ in 1..threads.max(1) {
                scope.spawn(|| self.work(&done));
            }
            self.work(&done);
        });
        let value = output.lock().unwrap_or_else(|e| e.into_inner()).take();
        value.expect("block_on: main task finished without output")
    }

    fn work(&self, done: &AtomicBool) {
        let shared = &self.shared;
        let mut idle_rounds = 0u32;
        while !done.load(Ordering::Acquire) {
            let next = {
                let mut queue = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
                let next = queue.pop_front();
                shared.queued.store(queue.len(), Ordering::Release);
                next
            };
            if let Some(task) = next {
                self.run_task(task);
                idle_rounds = 0;
                // Keep completions and due timers flowing even when tasks are always ready (a
                // task polling for a reply with short sleeps is always back in the queue).
                self.poll_nic();
                self.fire_timers();
                continue;
            }
            let delivered = self.poll_nic() + self.fire_timers();
            if delivered > 0 {
                idle_rounds = 0;
                continue;
            }
            idle_rounds = idle_rounds.saturating_add(1);
            let busy = shared.pollers.read().unwrap_or_else(|e| e.into_inner()).iter().any(|p| p.busy());
            if busy || idle_rounds < SPIN_ROUNDS {
                // Spin on the CQ; give the core away now and then (sched_yield is a syscall,
                // and other processes may share the cores).
                if idle_rounds.is_multiple_of(yield_every()) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            let park = self.next_timer_in().map_or(PARK_SLICE, |d| d.min(PARK_SLICE));
            let queue = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            if queue.is_empty() && !done.load(Ordering::Acquire) {
                shared.parked.fetch_add(1, Ordering::AcqRel);
                let _unused = shared.wakeup.wait_timeout(queue, park).unwrap_or_else(|e| e.into_inner());
                shared.parked.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    fn run_task(&self, task: Arc<TaskCell>) {
        let mut slot = task.future.lock().unwrap_or_else(|e| e.into_inner());
        // Clear before polling so that a wake during the poll queues the task again.
        task.queued.store(false, Ordering::Release);
        let Some(future) = slot.as_mut() else { return };
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        if future.as_mut().poll(&mut cx).is_ready() {
            *slot = None;
            self.shared.live_tasks.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn poll_nic(&self) -> usize {
        // Under the read lock rather than on a clone: this runs on every idle round, and a
        // clone is an allocation. Pollers never add or clear pollers.
        let pollers = self.shared.pollers.read().unwrap_or_else(|e| e.into_inner());
        pollers.iter().map(|p| p.poll()).sum()
    }

    /// Wakes the tasks whose timers are due; returns how many. For a future that busy-waits
    /// inline, so that the tasks a worker's idle loop would wake meanwhile are not held up.
    pub fn fire_due_timers(&self) -> usize {
        self.fire_timers()
    }

    fn fire_timers(&self) -> usize {
        let now = Instant::now();
        let mut fired = Vec::new();
        {
            let mut timers = self.shared.timers.lock().unwrap_or_else(|e| e.into_inner());
            while let Some(entry) = timers.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                fired.push(entry.remove());
            }
        }
        let n = fired.len();
        fired.into_iter().for_each(Waker::wake);
        n
    }

    fn next_timer_in(&self) -> Option<Duration> {
        let timers = self.shared.timers.lock().unwrap_or_else(|e| e.into_inner());
        timers.keys().next().map(|k| k.0.saturating_duration_since(Instant::now()))
    }
}

/// [`Runtime::sleep`].
pub struct Sleep {
    timer: Timer,
    yielded: bool,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.yielded {
            // Always yield once, even if the deadline has passed: protocols poll for a reply
            // with `loop { check; sleep(100 ns) }`, and a sleep that never suspends would keep
            // the worker from polling the CQs (and running the peer-serving handlers) forever.
            // The timer is armed on the next poll, and only if the deadline is still ahead.
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Pin::new(&mut self.timer).poll(cx)
    }
}

/// A future that suspends once and is ready on its next poll (lets other tasks and the CQ
/// pollers run).
pub struct YieldNow(bool);

/// [`YieldNow`].
pub fn yield_now() -> YieldNow {
    YieldNow(false)
}

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// [`Runtime::timer_at`].
pub struct Timer {
    runtime: Runtime,
    deadline: Instant,
    /// The registered timer and the waker it holds.
    registered: Option<(TimerKey, Waker)>,
}

impl Future for Timer {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        let (key, stale) = match &self.registered {
            Some((key, waker)) => (Some(*key), !waker.will_wake(cx.waker())),
            None => (None, true),
        };
        if stale {
            let key = self.runtime.set_timer(key, self.deadline, cx.waker().clone());
            self.registered = Some((key, cx.waker().clone()));
        }
        Poll::Pending
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        if let Some((key, _)) = self.registered.take() {
            self.runtime.cancel_timer(key);
        }
    }
}

/// Races `future` against a deadline: `Err(())` once `deadline` passes first. The timer is
/// armed only if `future` is still pending after its first poll.
pub struct Deadline<F> {
    future: Pin<Box<F>>,
    deadline: Instant,
    timer: Option<Timer>,
    runtime: Runtime,
}

impl Runtime {
    /// `future`, bounded by `timeout`.
    pub fn timeout<F: Future>(&self, timeout: Duration, future: F) -> Deadline<F> {
        Deadline {
            future: Box::pin(future),
            deadline: Instant::now() + timeout,
            timer: None,
            runtime: self.clone(),
        }
    }
}

impl<F: Future> Future for Deadline<F> {
    type Output = Result<F::Output, ()>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(v) = self.future.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        let this = &mut *self;
        let timer = this.timer.get_or_insert_with(|| this.runtime.timer_at(this.deadline));
        match Pin::new(timer).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(())),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn spawned_tasks_and_sleeps_run_to_completion_on_several_threads() {
        // Goal: tasks spawned from tasks run, sleeps end no earlier than asked, and block_on
        // returns main's value. Method: 20 tasks each sleep then bump a counter; main waits for
        // the counter by polling with short sleeps.
        let rt = Runtime::new();
        let counter = Arc::new(AtomicU32::new(0));
        let rt2 = rt.clone();
        let c2 = counter.clone();
        let start = Instant::now();
        let value = rt.block_on(2, async move {
            for i in 0..20u64 {
                let c = c2.clone();
                let rt3 = rt2.clone();
                rt2.spawn(async move {
                    rt3.sleep(Duration::from_millis(1 + i % 3)).await;
                    c.fetch_add(1, Ordering::AcqRel);
                });
            }
            while c2.load(Ordering::Acquire) < 20 {
                rt2.sleep(Duration::from_micros(300)).await;
            }
            42
        });
        assert_eq!(value, 42);
        assert_eq!(counter.load(Ordering::Acquire), 20);
        assert!(start.elapsed() >= Duration::from_millis(1));
        assert_eq!(rt.live_tasks(), 0);
    }

    #[test]
    fn pollers_wake_waiting_tasks() {
        // Goal: a task waiting on an event that only a poller can observe is woken by it, as a
        // verb future is by a completion.
        struct Flag {
            set: AtomicBool,
            waker: Mutex<Option<Waker>>,
            polls: AtomicU32,
        }
        impl Poller for Flag {
            fn poll(&self) -> usize {
                // The "completion" arrives on the 100th poll.
                if self.polls.fetch_add(1, Ordering::AcqRel) == 100 {
                    self.set.store(true, Ordering::Release);
                    if let Some(w) = self.waker.lock().unwrap().take() {
                        w.wake();
                        return 1;
                    }
                }
                0
            }
            fn busy(&self) -> bool {
                !self.set.load(Ordering::Acquire)
            }
        }
        struct WaitFlag(Arc<Flag>);
        impl Future for WaitFlag {
            type Output = ();
            fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
                *self.0.waker.lock().unwrap() = Some(cx.waker().clone());
                if self.0.set.load(Ordering::Acquire) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }
        }
        let rt = Runtime::new();
        let flag =
            Arc::new(Flag { set: AtomicBool::new(false), waker: Mutex::new(None), polls: AtomicU32::new(0) });
        rt.add_poller(flag.clone());
        rt.block_on(1, WaitFlag(flag.clone()));
        assert!(flag.polls.load(Ordering::Acquire) > 100);
    }

    #[test]
    fn a_task_polling_with_tiny_sleeps_does_not_starve_the_others() {
        // Goal: `loop { if done { break } sleep(1 ns) }` (how protocols wait for a one-sided
        // reply) must let the task that sets `done` run, on a single worker thread. Found on
        // SELCC over rxe: two nodes each spun waiting for the other's handler.
        let rt = Runtime::new();
        let flag = Arc::new(AtomicBool::new(false));
        let (rt2, f2) = (rt.clone(), flag.clone());
        rt.block_on(1, async move {
            let setter = f2.clone();
            rt2.spawn(async move { setter.store(true, Ordering::Release) });
            while !f2.load(Ordering::Acquire) {
                rt2.sleep(Duration::from_nanos(1)).await;
            }
        });
        assert!(flag.load(Ordering::Acquire));
    }

    #[test]
    fn timers_fire_while_other_tasks_are_always_ready() {
        // Goal: a sleeper wakes on time although another task never leaves the run queue (it
        // polls with zero-length sleeps, as protocols poll for replies). Found by a scratch test:
        // a 1 ms sleep was still asleep after 5 s when timers fired only on an idle worker.
        let rt = Runtime::new();
        let rt2 = rt.clone();
        let woke = Arc::new(AtomicBool::new(false));
        let w2 = woke.clone();
        let start = Instant::now();
        rt.block_on(1, async move {
            let (rt3, w3) = (rt2.clone(), w2.clone());
            rt2.spawn(async move {
                rt3.sleep(Duration::from_millis(1)).await;
                w3.store(true, Ordering::Release);
            });
            while !w2.load(Ordering::Acquire) && start.elapsed() < Duration::from_secs(5) {
                rt2.sleep(Duration::ZERO).await;
            }
        });
        assert!(woke.load(Ordering::Acquire), "the sleeper never woke");
        assert!(start.elapsed() < Duration::from_secs(1), "woke after {:?}", start.elapsed());
    }

    #[test]
    fn completed_bounds_leave_no_timers_behind() {
        // Goal: a verb bound (a Deadline around a future that completes) must not leave an
        // entry per verb behind, or a node issuing millions of verbs grows without limit.
        let rt = Runtime::new();
        let rt2 = rt.clone();
        rt.block_on(1, async move {
            for _ in 0..1000 {
                let r = rt2.timeout(Duration::from_secs(60), rt2.sleep(Duration::from_micros(1))).await;
                assert_eq!(r, Ok(()));
            }
        });
        assert_eq!(rt.shared.timers.lock().unwrap().len(), 0);
    }

    #[test]
    fn a_deadline_around_a_ready_future_arms_no_timer() {
        // Goal: the bound of a verb that is already complete when first polled costs no timer
        // (the map insert/remove and the notify a timer costs per verb); one that is still
        // pending arms exactly one, removed when it completes.
        let rt = Runtime::new();
        let rt2 = rt.clone();
        rt.block_on(1, async move {
            let r = rt2.timeout(Duration::from_secs(60), std::future::ready(7)).await;
            assert_eq!(r, Ok(7));
            assert_eq!(rt2.shared.timers.lock().unwrap().len(), 0);
            let mut pending = Box::pin(rt2.timeout(Duration::from_secs(60), yield_now()));
            let first = std::future::poll_fn(|cx| Poll::Ready(pending.as_mut().poll(cx))).await;
            assert!(first.is_pending());
            assert_eq!(rt2.shared.timers.lock().unwrap().len(), 1);
            assert_eq!(pending.as_mut().await, Ok(()));
            drop(pending);
            assert_eq!(rt2.shared.timers.lock().unwrap().len(), 0);
        });
    }

    #[test]
    fn ready_tasks_are_visible_to_a_spinning_future() {
        // Goal: `has_ready_tasks` says when another task waits for the worker, so a verb that
        // polls its CQ inline gives the worker back instead of delaying that task.
        let rt = Runtime::new();
        let rt2 = rt.clone();
        rt.block_on(1, async move {
            assert!(!rt2.has_ready_tasks());
            rt2.spawn(async {});
            assert!(rt2.has_ready_tasks());
            yield_now().await;
            assert!(!rt2.has_ready_tasks());
        });
    }

    #[test]
    fn a_timer_fires_at_its_deadline_without_yielding_first() {
        let rt = Runtime::new();
        let rt2 = rt.clone();
        let start = Instant::now();
        rt.block_on(1, async move { rt2.timer_at(Instant::now() + Duration::from_millis(2)).await });
        assert!(start.elapsed() >= Duration::from_millis(2));
        assert_eq!(rt.shared.timers.lock().unwrap().len(), 0);
    }

    #[test]
    fn timeout_fires_when_the_future_never_completes() {
        let rt = Runtime::new();
        let rt2 = rt.clone();
        let r = rt.block_on(1, async move {
            rt2.timeout(Duration::from_millis(5), std::future::pending::<()>()).await
        });
        assert_eq!(r, Err(()));
    }
}
