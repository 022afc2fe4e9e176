//! The event queue: a binary min-heap totally ordered by `(time_ns, seq)`.
//!
//! Push and pop are O(log n). `seq` is assigned here and strictly rises, so no two events
//! compare equal and the pop order never depends on the heap's internal layout.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// Wake a task (timer expiry, CPU work done).
    Wake { task: u32 },
    /// Verb `verb` of operation `op` reaches the target's ingress.
    Arrive { op: u32, verb: u8 },
    /// Verb `verb` (chunk `chunk` if torn) executes at the target's memory.
    Exec { op: u32, verb: u8, chunk: u16 },
    /// The response to verb `verb` reaches the initiator.
    Done { op: u32, verb: u8 },
    /// SSD command `req` completes (its data moves now).
    SsdDone { req: u32 },
}

impl EventKind {
    /// Two words describing the event for the rolling hash.
    #[inline]
    pub fn hash_words(self) -> (u64, u64) {
        match self {
            EventKind::Wake { task } => (1, task as u64),
            EventKind::Arrive { op, verb } => (2, (op as u64) << 8 | verb as u64),
            EventKind::Exec { op, verb, chunk } => (3, (op as u64) << 24 | (chunk as u64) << 8 | verb as u64),
            EventKind::Done { op, verb } => (4, (op as u64) << 8 | verb as u64),
            EventKind::SsdDone { req } => (6, req as u64),
        }
    }
}

/// An event keyed by `time_ns << 64 | seq` in one `u128`, so the heap compares one integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    key: u128,
    pub kind: EventKind,
}

impl Event {
    #[inline]
    pub fn time_ns(&self) -> u64 {
        (self.key >> 64) as u64
    }
}

impl Ord for Event {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap and we want the earliest first.
        other.key.cmp(&self.key)
    }
}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Event>,
    seq: u64,
}

impl EventQueue {
    #[inline]
    pub fn push(&mut self, time_ns: u64, kind: EventKind) {
        self.seq += 1;
        self.heap.push(Event { key: (time_ns as u128) << 64 | self.seq as u128, kind });
    }

    #[inline]
    pub fn pop(&mut self) -> Option<Event> {
        self.heap.pop()
    }

    #[inline]
    pub fn peek_time(&self) -> Option<u64> {
        self.heap.peek().map(Event::time_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_by_time_then_scheduling_order() {
        // Goal: equal times pop in push order; earlier times first regardless of push order.
        let mut q = EventQueue::default();
        q.push(10, EventKind::Wake { task: 1 });
        q.push(5, EventKind::Wake { task: 2 });
        q.push(10, EventKind::Wake { task: 3 });
        q.push(5, EventKind::Wake { task: 4 });
        let order: Vec<u32> = std::iter::from_fn(|| q.pop())
            .map(|e| match e.kind {
                EventKind::Wake { task } => task,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(order, vec![2, 4, 1, 3]);
    }
}
