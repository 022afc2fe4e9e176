//! Waiting on a local word without per-poll events (`Nic::wait_word`).
//!
//! A protocol that busy-polls a reply flag with period `P` from `t0` reads it at `t0 + k·P`.
//! Modelled literally that is one timer event (and one scheduling decision) per poll, even
//! though nothing can change between two NIC writes to the word. Here a waiter is registered
//! on its word; when a verb changes a watched word at time `tw`, each waiter not yet woken is
//! woken at its next poll time `t0 + k·P ≥ tw` (smallest such k), and re-reads the word then —
//! exactly what its poll loop would have seen at that poll. If the word no longer satisfies the
//! condition (written and changed back), the waiter re-arms for the next write.
//!
//! The registry is a `BTreeMap` keyed by `(node, offset)`, so a large WRITE finds its watched
//! words with a range query, and an empty registry costs one check per verb. Local CPU stores
//! do not go through the engine and wake nobody (the trait documents this).

use std::collections::BTreeMap;

use dmsim_protocols::nic::wait::next_poll_ns;
use dmsim_protocols::nic::NodeId;

use super::queue::EventKind;
use super::world::World;

/// One registered waiter.
#[derive(Clone, Debug)]
pub struct Watcher {
    pub id: u64,
    pub task: u32,
    pub t0_ns: u64,
    pub period_ns: u64,
    /// The poll time it was woken for, once a write has been seen.
    pub woken_for_ns: Option<u64>,
}

/// Every waiter, by watched word; `Nic::wait_write` waiters by watched range (few: message
/// handlers), scanned on every notified write.
#[derive(Default)]
pub struct Watches {
    by_word: BTreeMap<(u16, u64), Vec<Watcher>>,
    ranges: Vec<(u16, u64, u64, Watcher)>,
    next_id: u64,
}

impl Watcher {
    /// A write seen at `now`: if not woken yet, the poll time to wake at and the task.
    fn wake(&mut self, now: u64) -> Option<(u64, u32)> {
        if self.woken_for_ns.is_some() {
            return None;
        }
        let at = next_poll_ns(self.t0_ns, self.period_ns, now);
        self.woken_for_ns = Some(at);
        Some((at, self.task))
    }
}

impl Watches {
    /// A fresh waiter with its poll grid `t0 + k·period`, not yet woken.
    fn new_watcher(&mut self, task: u32, t0_ns: u64, period_ns: u64) -> Watcher {
        self.next_id += 1;
        Watcher { id: self.next_id, task, t0_ns, period_ns: period_ns.max(1), woken_for_ns: None }
    }
}

impl World {
    /// Register `task` as waiting on `(node, offset)` with its poll grid `t0 + k·period`.
    pub fn watch_register(
        &mut self,
        node: NodeId,
        offset: u64,
        task: u32,
        t0_ns: u64,
        period_ns: u64,
    ) -> u64 {
        let watcher = self.watches.new_watcher(task, t0_ns, period_ns);
        let id = watcher.id;
        self.watches.by_word.entry((node.0, offset)).or_default().push(watcher);
        id
    }

    /// True if waiter `id` was woken for a poll time that has come (it should read the word).
    pub fn watch_due(&self, node: NodeId, offset: u64, id: u64) -> bool {
        let now = self.now_ns;
        self.watches
            .by_word
            .get(&(node.0, offset))
            .and_then(|ws| ws.iter().find(|w| w.id == id))
            .is_some_and(|w| w.woken_for_ns.is_some_and(|t| t <= now))
    }

    /// The waiter read the word and keeps waiting: arm it for the next write.
    pub fn watch_rearm(&mut self, node: NodeId, offset: u64, id: u64) {
        if let Some(w) =
            self.watches.by_word.get_mut(&(node.0, offset)).and_then(|ws| ws.iter_mut().find(|w| w.id == id))
        {
            w.woken_for_ns = None;
        }
    }

    /// The waiter is done (or dropped).
    pub fn watch_cancel(&mut self, node: NodeId, offset: u64, id: u64) {
        if let Some(ws) = self.watches.by_word.get_mut(&(node.0, offset)) {
            ws.retain(|w| w.id != id);
            if ws.is_empty() {
                self.watches.by_word.remove(&(node.0, offset));
            }
        }
    }

    /// Register `task` as waiting for a write into `[lo, hi)` of `node` (`Nic::wait_write`).
    pub fn watch_register_range(
        &mut self,
        node: NodeId,
        lo: u64,
        hi: u64,
        task: u32,
        t0_ns: u64,
        period_ns: u64,
    ) -> u64 {
        let watcher = self.watches.new_watcher(task, t0_ns, period_ns);
        let id = watcher.id;
        self.watches.ranges.push((node.0, lo, hi, watcher));
        id
    }

    /// True if range waiter `id` was woken for a sweep time that has come.
    pub fn watch_range_due(&self, id: u64) -> bool {
        let now = self.now_ns;
        self.watches.ranges.iter().any(|(_, _, _, w)| w.id == id && w.woken_for_ns.is_some_and(|t| t <= now))
    }

    /// The range waiter is done (or dropped).
    pub fn watch_cancel_range(&mut self, id: u64) {
        self.watches.ranges.retain(|(_, _, _, w)| w.id != id);
    }

    /// A verb changed `len` bytes at `offset` of `node`'s host region: wake the waiters on
    /// those words, and on ranges overlapping them, at their next poll times.
    #[inline]
    pub fn watch_notify(&mut self, node: NodeId, offset: u64, len: u64) {
        if self.watches.by_word.is_empty() && self.watches.ranges.is_empty() {
            return;
        }
        let now = self.now_ns;
        let end = offset + len.max(1);
        let range = (node.0, offset)..(node.0, end);
        let mut wakes = Vec::new();
        for (_, ws) in self.watches.by_word.range_mut(range) {
            wakes.extend(ws.iter_mut().filter_map(|w| w.wake(now)));
        }
        for (n, lo, hi, w) in self.watches.ranges.iter_mut() {
            if *n == node.0 && *lo < end && offset < *hi {
                wakes.extend(w.wake(now));
            }
        }
        for (at, task) in wakes {
            self.queue.push(at, EventKind::Wake { task });
        }
    }
}
