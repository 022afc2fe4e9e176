//! The single-threaded task executor: a slab of boxed futures, wakers that carry only a task
//! index, and the ready list.
//!
//! The ready list is its own thread-local, apart from the world, because wakers fire while the
//! engine holds the world borrowed (a verb completing wakes its task). A waker used after its
//! run ended, or on another thread, finds no run and does nothing.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::Waker;

use dmsim_protocols::nic::NodeId;

pub type TaskFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A task's bookkeeping in the world; its future lives in the run loop's slab
/// ([`crate::engine::world::Slab`]), so polling it needs no world borrow.
pub struct TaskSlot {
    pub node: NodeId,
    /// A main task keeps the run alive; daemons (handlers, evictors) do not.
    pub main: bool,
    pub alive: bool,
    /// Its node restarted since it was spawned: it never runs again.
    pub crashed: bool,
}

/// Tasks that were woken and not yet polled, in wake order, without duplicates.
#[derive(Default)]
pub struct ReadyList {
    pub list: Vec<u32>,
    queued: Vec<bool>,
    pub active: bool,
}

impl ReadyList {
    #[inline]
    pub fn push(&mut self, task: u32) {
        if !self.active {
            return;
        }
        let i = task as usize;
        if i >= self.queued.len() {
            self.queued.resize(i + 1, false);
        }
        if !self.queued[i] {
            self.queued[i] = true;
            self.list.push(task);
        }
    }

    /// Remove and return the task at `index` (order of the rest preserved).
    #[inline]
    pub fn take(&mut self, index: usize) -> u32 {
        let task = self.list.remove(index);
        self.queued[task as usize] = false;
        task
    }

    pub fn reset(&mut self, active: bool) {
        self.list.clear();
        self.queued.clear();
        self.active = active;
    }
}

thread_local! {
    pub static READY: RefCell<ReadyList> = RefCell::new(ReadyList::default());
    /// The task being polled (u32::MAX outside a poll).
    pub static CURRENT_TASK: Cell<u32> = const { Cell::new(u32::MAX) };
    /// The current virtual time, mirrored here so `Nic::now` needs no world borrow.
    pub static NOW_NS: Cell<u64> = const { Cell::new(0) };
}

#[inline]
pub fn wake_task(task: u32) {
    READY.with(|r| r.borrow_mut().push(task));
}

pub fn current_task() -> u32 {
    let t = CURRENT_TASK.with(Cell::get);
    assert!(t != u32::MAX, "a simulator future was polled outside the simulator's executor");
    t
}

/// Wakes one task by index. Built once per task (an `Arc`), cloned per poll.
struct TaskWaker(u32);

impl std::task::Wake for TaskWaker {
    fn wake(self: std::sync::Arc<Self>) {
        wake_task(self.0);
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        wake_task(self.0);
    }
}

pub fn waker_for(task: u32) -> Waker {
    Waker::from(std::sync::Arc::new(TaskWaker(task)))
}
