//! Executor-agnostic async primitives for tasks on one node: a shared/exclusive [`Latch`], a
//! [`Channel`], and a [`Notify`]. They are built on wakers and `std::sync::Mutex`, so the same
//! protocol code runs on the simulator's single-threaded executor and on the hardware runtime's
//! OS threads.
//!
//! Waiters are served in FIFO order and the latch is handed off directly to the next waiter(s)
//! (no barging), so wake-up order is a pure function of arrival order — deterministic in the
//! simulator and starvation-free everywhere.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// One queued waiter: set `granted` then wake.
struct Slot {
    granted: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Slot {
    fn new() -> Arc<Slot> {
        Arc::new(Slot { granted: AtomicBool::new(false), waker: Mutex::new(None) })
    }
    fn grant(&self) {
        self.granted.store(true, Ordering::Release);
        if let Some(w) = self.waker.lock().unwrap().take() {
            w.wake();
        }
    }
    fn poll_granted(&self, cx: &mut Context<'_>) -> bool {
        if self.granted.load(Ordering::Acquire) {
            return true;
        }
        *self.waker.lock().unwrap() = Some(cx.waker().clone());
        // Re-check: a grant may have raced with storing the waker.
        self.granted.load(Ordering::Acquire)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Shared,
    Exclusive,
}

/// The waiter queue lives behind a box allocated on the first wait: most latches (a cache of
/// millions of frames, issue #15) never see one, and an inline `VecDeque` cost 32 bytes each.
#[derive(Default)]
struct LatchState {
    readers: u32,
    writer: bool,
    queue: Option<Box<Waiters>>,
}

/// Whether a latch held by `readers` readers and `writer` admits a holder in `mode`.
fn grants(readers: u32, writer: bool, mode: Mode) -> bool {
    match mode {
        Mode::Shared => !writer,
        Mode::Exclusive => !writer && readers == 0,
    }
}

/// Queued waiters, oldest first.
type Waiters = VecDeque<(Mode, Arc<Slot>)>;

impl LatchState {
    fn no_waiters(&self) -> bool {
        self.queue.as_ref().is_none_or(|q| q.is_empty())
    }
    fn waiters(&self) -> usize {
        self.queue.as_ref().map_or(0, |q| q.len())
    }
    fn enqueue(&mut self, mode: Mode, slot: Arc<Slot>) {
        self.queue.get_or_insert_with(Box::default).push_back((mode, slot));
    }
    fn compatible(&self, mode: Mode) -> bool {
        grants(self.readers, self.writer, mode)
    }
    fn take(&mut self, mode: Mode) {
        match mode {
            Mode::Shared => self.readers += 1,
            Mode::Exclusive => self.writer = true,
        }
    }
    /// Hand the latch to the longest-waiting compatible waiters.
    fn hand_off(&mut self) {
        let LatchState { readers, writer, queue } = self;
        let Some(queue) = queue.as_mut() else { return };
        while let Some(&(mode, _)) = queue.front() {
            if !grants(*readers, *writer, mode) {
                break;
            }
            let (_, slot) = queue.pop_front().unwrap();
            match mode {
                Mode::Shared => *readers += 1,
                Mode::Exclusive => *writer = true,
            }
            slot.grant();
        }
    }
}

/// A "may have changed" mark for checkers that run after every simulator event: set (relaxed,
/// one store) by whatever might change the watched state, taken (read and cleared) by the
/// checker, which then looks again only at what was marked.
#[derive(Default)]
pub struct TouchMark(AtomicBool);

impl TouchMark {
    pub fn mark(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether marked since the last call (and clear it).
    pub fn take(&self) -> bool {
        self.0.load(Ordering::Relaxed) && self.0.swap(false, Ordering::Relaxed)
    }
}

/// [`TouchMark`]s for a group of items by index (a node's cache frames), taken all at once as
/// the list of items marked: a checker then visits only those instead of testing every item's
/// mark (scanning a cache's marks was the largest cost of SELCC's per-event check, issue #15).
#[derive(Default)]
pub struct TouchSet {
    /// Some item was marked since the last take.
    any: TouchMark,
    /// Bit `i % 64` of word `i / 64`: item `i` was marked.
    words: Box<[AtomicU64]>,
}

impl TouchSet {
    pub fn new(items: usize) -> TouchSet {
        TouchSet {
            any: TouchMark::default(),
            words: (0..items.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Item `i` may have changed (a relaxed load, and an OR only when not marked yet).
    pub fn mark(&self, i: u32) {
        let (word, bit) = (&self.words[i as usize / 64], 1u64 << (i % 64));
        if word.load(Ordering::Relaxed) & bit == 0 {
            word.fetch_or(bit, Ordering::Relaxed);
        }
        self.any.mark();
    }

    /// Append the items marked since the last call to `out`, ascending, and clear the marks.
    /// Returns whether any was.
    pub fn take(&self, out: &mut Vec<u32>) -> bool {
        if !self.any.take() {
            return false;
        }
        for (k, word) in self.words.iter().enumerate() {
            if word.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut bits = word.swap(0, Ordering::Relaxed);
            while bits != 0 {
                out.push(k as u32 * 64 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
        true
    }

    /// Clear every mark.
    pub fn clear(&self) {
        self.any.take();
        self.words.iter().for_each(|w| w.store(0, Ordering::Relaxed));
    }
}

/// A local shared/exclusive latch without data (the data lives in registered memory).
#[derive(Default)]
pub struct Latch {
    state: Mutex<LatchState>,
    /// Set by every operation that may change the state (never by [`Latch::snapshot`]), so an
    /// invariant checker that runs after every simulator event looks again only at latches that
    /// may have changed.
    mark: LatchMark,
}

/// Where a latch records that it may have changed: its own mark ([`Latch::take_touched`]), or
/// its item's mark in a group (a node's cache frames, [`TouchSet::take`]) — one or the other,
/// so a cache frame's latch carries no mark of its own (issue #15: frame size).
enum LatchMark {
    Own(TouchMark),
    Group(Arc<TouchSet>, u32),
}

impl Default for LatchMark {
    fn default() -> Self {
        LatchMark::Own(TouchMark::default())
    }
}

impl Latch {
    pub fn new() -> Latch {
        Latch::default()
    }

    /// A latch whose operations mark item `index` of `group` instead of a mark of its own.
    pub fn in_group(group: Arc<TouchSet>, index: u32) -> Latch {
        Latch { state: Mutex::default(), mark: LatchMark::Group(group, index) }
    }

    /// Record that this latch, or what it guards, may have changed (also used by the owner of
    /// a grouped latch for state kept beside it, e.g. a cache frame's metadata).
    pub fn mark_touched(&self) {
        match &self.mark {
            LatchMark::Own(mark) => mark.mark(),
            LatchMark::Group(group, index) => group.mark(*index),
        }
    }

    /// The state, locked for an operation that may change it.
    fn state(&self) -> std::sync::MutexGuard<'_, LatchState> {
        self.mark_touched();
        self.state.lock().unwrap()
    }

    /// Whether an operation may have changed the state since the last call (and clear that).
    /// Only for a latch with its own mark; a grouped latch's changes are taken from its group.
    pub fn take_touched(&self) -> bool {
        match &self.mark {
            LatchMark::Own(mark) => mark.take(),
            LatchMark::Group(..) => panic!("take_touched on a grouped latch: take its group's marks"),
        }
    }

    /// Take the latch now if a new arrival would be granted it at once (compatible, no waiter
    /// queued ahead).
    pub fn try_lock(&self, mode: Mode) -> bool {
        let mut s = self.state();
        if s.no_waiters() && s.compatible(mode) {
            s.take(mode);
            true
        } else {
            false
        }
    }

    /// Wait for the latch in `mode`. Cancel-safe: dropping the future before or after the grant
    /// leaves the latch consistent.
    pub fn lock(&self, mode: Mode) -> LatchWait<'_> {
        LatchWait { latch: self, mode, slot: None, done: false }
    }

    pub fn unlock(&self, mode: Mode) {
        let mut s = self.state();
        match mode {
            Mode::Shared => {
                assert!(s.readers > 0, "shared unlock of a latch with no readers");
                s.readers -= 1;
            }
            Mode::Exclusive => {
                assert!(s.writer, "exclusive unlock of a latch with no writer");
                s.writer = false;
            }
        }
        s.hand_off();
    }

    /// Shared → exclusive if the caller is the only reader and nobody waits; else no change.
    pub fn try_upgrade(&self) -> bool {
        let mut s = self.state();
        assert!(s.readers > 0 && !s.writer, "upgrade without holding the latch shared");
        if s.readers == 1 && s.no_waiters() {
            s.readers = 0;
            s.writer = true;
            true
        } else {
            false
        }
    }

    /// Exclusive → shared, letting queued readers in behind us.
    pub fn downgrade(&self) {
        let mut s = self.state();
        assert!(s.writer, "downgrade without holding the latch exclusive");
        s.writer = false;
        s.readers += 1;
        s.hand_off();
    }

    /// (readers, writer, waiters): for invariant checks and tests.
    pub fn snapshot(&self) -> (u32, bool, usize) {
        let s = self.state.lock().unwrap();
        (s.readers, s.writer, s.waiters())
    }
}

pub struct LatchWait<'a> {
    latch: &'a Latch,
    mode: Mode,
    slot: Option<Arc<Slot>>,
    done: bool,
}

impl Future for LatchWait<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        assert!(!self.done, "LatchWait polled after completion");
        if self.slot.is_none() {
            let mut s = self.latch.state();
            if s.no_waiters() && s.compatible(self.mode) {
                s.take(self.mode);
                drop(s);
                self.done = true;
                return Poll::Ready(());
            }
            let slot = Slot::new();
            s.enqueue(self.mode, slot.clone());
            drop(s);
            self.slot = Some(slot);
        }
        if self.slot.as_ref().unwrap().poll_granted(cx) {
            self.done = true;
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for LatchWait<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let Some(slot) = self.slot.take() else { return };
        let mut s = self.latch.state();
        if slot.granted.load(Ordering::Acquire) {
            drop(s);
            self.latch.unlock(self.mode);
        } else {
            if let Some(queue) = s.queue.as_mut() {
                queue.retain(|(_, q)| !Arc::ptr_eq(q, &slot));
            }
            s.hand_off();
        }
    }
}

/// A mutex that remembers whether it was locked since the last [`Watched::take_touched`]: an
/// invariant checker that runs after every simulator event re-reads only what may have changed.
/// [`Watched::peek`] (for observers) does not count as a touch.
#[derive(Default)]
pub struct Watched<T> {
    value: Mutex<T>,
    touched: TouchMark,
}

impl<T> Watched<T> {
    pub fn new(value: T) -> Watched<T> {
        Watched { value: Mutex::new(value), touched: TouchMark::default() }
    }

    /// Lock for reading or writing (marks the value touched).
    pub fn lock(&self) -> std::sync::LockResult<std::sync::MutexGuard<'_, T>> {
        self.touched.mark();
        self.value.lock()
    }

    /// Lock for an observer that does not change the value.
    pub fn peek(&self) -> std::sync::MutexGuard<'_, T> {
        self.value.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the value was locked by [`Watched::lock`] since the last call (and clear that).
    pub fn take_touched(&self) -> bool {
        self.touched.take()
    }
}

/// An unbounded multi-producer multi-consumer FIFO channel.
pub struct Channel<T> {
    state: Mutex<ChannelState<T>>,
}

struct ChannelState<T> {
    items: VecDeque<T>,
    receivers: VecDeque<Waker>,
    closed: bool,
}

impl<T> Default for Channel<T> {
    fn default() -> Self {
        Channel {
            state: Mutex::new(ChannelState {
                items: VecDeque::new(),
                receivers: VecDeque::new(),
                closed: false,
            }),
        }
    }
}

impl<T> Channel<T> {
    pub fn new() -> Channel<T> {
        Channel::default()
    }

    pub fn push(&self, item: T) {
        let mut s = self.state.lock().unwrap();
        s.items.push_back(item);
        if let Some(w) = s.receivers.pop_front() {
            drop(s);
            w.wake();
        }
    }

    pub fn try_pop(&self) -> Option<T> {
        self.state.lock().unwrap().items.pop_front()
    }

    pub fn len(&self) -> usize {
        self.state.lock().unwrap().items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Wake every receiver; `pop` then returns `None` once the channel is drained.
    pub fn close(&self) {
        let mut s = self.state.lock().unwrap();
        s.closed = true;
        let waiters: Vec<Waker> = s.receivers.drain(..).collect();
        drop(s);
        waiters.into_iter().for_each(Waker::wake);
    }

    /// The next item, or `None` when closed and empty.
    pub fn pop(&self) -> impl Future<Output = Option<T>> + '_ {
        std::future::poll_fn(move |cx| {
            let mut s = self.state.lock().unwrap();
            if let Some(item) = s.items.pop_front() {
                return Poll::Ready(Some(item));
            }
            if s.closed {
                return Poll::Ready(None);
            }
            s.receivers.push_back(cx.waker().clone());
            Poll::Pending
        })
    }
}

/// A one-shot or repeated signal: `notified()` waits until the next `notify_all()` after it was
/// first polled, or returns at once if a permit is stored by `notify_one`.
#[derive(Default)]
pub struct Notify {
    state: Mutex<(u64, Vec<Waker>)>,
}

impl Notify {
    pub fn new() -> Notify {
        Notify::default()
    }

    pub fn notify_all(&self) {
        let mut s = self.state.lock().unwrap();
        s.0 += 1;
        let waiters = std::mem::take(&mut s.1);
        drop(s);
        waiters.into_iter().for_each(Waker::wake);
    }

    /// Wait for the next `notify_all`.
    pub fn notified(&self) -> impl Future<Output = ()> + '_ {
        let mut epoch = None;
        std::future::poll_fn(move |cx| {
            let mut s = self.state.lock().unwrap();
            let start = *epoch.get_or_insert(s.0);
            if s.0 != start {
                return Poll::Ready(());
            }
            s.1.push(cx.waker().clone());
            Poll::Pending
        })
    }
}

/// Run futures concurrently inside one task and collect their outputs in order (executor-agnostic:
/// each poll polls every unfinished future with the task's waker).
pub async fn join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(move |cx| {
        let mut pending = false;
        for (f, out) in futures.iter_mut().zip(outputs.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *out = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(outputs.iter_mut().map(|o| o.take().unwrap()).collect())
        }
    })
    .await
}

/// Run two futures concurrently inside one task; both outputs, once both are done.
pub async fn join<A: std::future::Future, B: std::future::Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (Box::pin(a), Box::pin(b));
    let (mut out_a, mut out_b) = (None, None);
    std::future::poll_fn(move |cx| {
        if out_a.is_none() {
            if let std::task::Poll::Ready(v) = a.as_mut().poll(cx) {
                out_a = Some(v);
            }
        }
        if out_b.is_none() {
            if let std::task::Poll::Ready(v) = b.as_mut().poll(cx) {
                out_b = Some(v);
            }
        }
        if out_a.is_some() && out_b.is_some() {
            std::task::Poll::Ready((out_a.take().unwrap(), out_b.take().unwrap()))
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn poll_once<F: Future>(f: Pin<&mut F>, flag: &Arc<Flag>) -> Poll<F::Output> {
        let waker = Waker::from(flag.clone());
        f.poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn latch_hands_off_fifo_and_blocks_barging() {
        // Goal: a queued writer is not overtaken by later readers, and unlock hands off directly.
        // Method: poll futures by hand with flag wakers.
        let latch = Latch::new();
        assert!(latch.try_lock(Mode::Shared));
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let mut w = Box::pin(latch.lock(Mode::Exclusive));
        assert!(poll_once(w.as_mut(), &flag).is_pending());
        assert!(!latch.try_lock(Mode::Shared), "a reader must not barge past a queued writer");
        latch.unlock(Mode::Shared);
        assert!(flag.0.load(Ordering::SeqCst), "the writer was woken");
        assert!(poll_once(w.as_mut(), &flag).is_ready());
        assert_eq!(latch.snapshot(), (0, true, 0));
        latch.downgrade();
        assert_eq!(latch.snapshot(), (1, false, 0));
        assert!(latch.try_upgrade());
        latch.unlock(Mode::Exclusive);
        assert_eq!(latch.snapshot(), (0, false, 0));
    }

    #[test]
    fn dropped_waiter_leaves_latch_consistent() {
        // Goal: cancelling a wait, granted or not, neither leaks the latch nor strands others.
        let latch = Latch::new();
        assert!(latch.try_lock(Mode::Exclusive));
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let mut a = Box::pin(latch.lock(Mode::Exclusive));
        let mut b = Box::pin(latch.lock(Mode::Shared));
        assert!(poll_once(a.as_mut(), &flag).is_pending());
        assert!(poll_once(b.as_mut(), &flag).is_pending());
        latch.unlock(Mode::Exclusive); // grants a
        drop(a); // granted but never observed: must release and hand to b
        assert!(poll_once(b.as_mut(), &flag).is_ready());
        assert_eq!(latch.snapshot(), (1, false, 0));
    }

    #[test]
    fn channel_is_fifo_and_closes() {
        let ch = Channel::new();
        ch.push(1);
        ch.push(2);
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let mut p = Box::pin(ch.pop());
        assert_eq!(poll_once(p.as_mut(), &flag), Poll::Ready(Some(1)));
        assert_eq!(ch.try_pop(), Some(2));
        let mut p = Box::pin(ch.pop());
        assert!(poll_once(p.as_mut(), &flag).is_pending());
        ch.close();
        assert!(flag.0.load(Ordering::SeqCst));
        assert_eq!(poll_once(p.as_mut(), &flag), Poll::Ready(None));
    }
}
