//! The event queue, totally ordered by `(time_ns, seq)`: a timing wheel over the next
//! [`WHEEL_NS`] nanoseconds, one slot per nanosecond, backed by a binary heap for later events.
//!
//! `seq` is assigned here and strictly rises, so no two events compare equal and the pop order
//! never depends on the structure's layout. Events are never scheduled before the last one popped
//! (the engine's clock only moves forward), so the wheel's window starts at the last popped time
//! (`base`): an event inside the window goes to its time's slot, FIFO within the slot — push order
//! is `seq` order — and a later one to the heap. When `base` moves, heap events that entered the
//! window move to their slots before anything else can be pushed there, so each slot stays in
//! `seq` order. Most events of an RDMA model fall within a few microseconds (verb legs, polls),
//! so a push is an append and a pop a bitmap scan. The binary heap this replaced spent ~40 % of
//! the engine's time in `pop` on the hold model (`dmsim bench engine`); with the wheel the same
//! figure set of SELCC takes ~14 % fewer CPU-seconds (`results/selcc/REPORT.md`, session 12).

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

/// An event keyed by `time_ns << 64 | seq` in one `u128`, so ordering is one integer compare.
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

/// Nanoseconds the wheel covers (a power of two): longer than a verb's round trip and the
/// protocols' poll periods, so the heap sees only long timers.
pub const WHEEL_NS: u64 = 4096;
const WORDS: usize = (WHEEL_NS / 64) as usize;

/// No node (end of a slot's list or of the free list).
const NIL: u32 = u32::MAX;

pub struct EventQueue {
    /// Per slot, the first and last node of its FIFO list: slot `t % WHEEL_NS` holds the events
    /// at time `t`, for `t` in `[base, base + WHEEL_NS)`.
    slots: Vec<(u32, u32)>,
    /// Nodes of the slot lists: an event and the next node (16 bytes: the slot gives the time,
    /// the position the order). One pool, reused last-freed-first, so the events in flight stay
    /// in few cache lines.
    nodes: Vec<(EventKind, u32)>,
    free: u32,
    /// Bit per slot: non-empty.
    occupied: [u64; WORDS],
    in_wheel: usize,
    /// The last popped event's time (0 before the first pop): no event is earlier.
    base: u64,
    /// Events at `base + WHEEL_NS` or later.
    later: BinaryHeap<Event>,
    seq: u64,
}

impl Default for EventQueue {
    fn default() -> EventQueue {
        EventQueue {
            slots: vec![(NIL, NIL); WHEEL_NS as usize],
            nodes: Vec::new(),
            free: NIL,
            occupied: [0; WORDS],
            in_wheel: 0,
            base: 0,
            later: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl EventQueue {
    #[inline]
    pub fn push(&mut self, time_ns: u64, kind: EventKind) {
        assert!(
            time_ns >= self.base,
            "event scheduled at {time_ns} ns, before the last popped event ({} ns)",
            self.base
        );
        self.seq += 1;
        let event = Event { key: (time_ns as u128) << 64 | self.seq as u128, kind };
        if time_ns - self.base < WHEEL_NS {
            self.slot_in(event);
        } else {
            self.later.push(event);
        }
    }

    #[inline]
    fn slot_in(&mut self, event: Event) {
        let node = if self.free != NIL {
            let node = self.free;
            self.free = self.nodes[node as usize].1;
            self.nodes[node as usize] = (event.kind, NIL);
            node
        } else {
            self.nodes.push((event.kind, NIL));
            (self.nodes.len() - 1) as u32
        };
        let slot = (event.time_ns() % WHEEL_NS) as usize;
        let (head, tail) = self.slots[slot];
        if head == NIL {
            self.slots[slot] = (node, node);
            self.occupied[slot / 64] |= 1 << (slot % 64);
        } else {
            self.nodes[tail as usize].1 = node;
            self.slots[slot].1 = node;
        }
        self.in_wheel += 1;
    }

    /// The slot of the earliest event in the wheel (`None`: the wheel is empty).
    #[inline]
    fn first_slot(&self) -> Option<usize> {
        if self.in_wheel == 0 {
            return None;
        }
        // Scan the ring from base's slot: the rest of its word, the words after, wrap around.
        let start = (self.base % WHEEL_NS) as usize;
        let (w0, b0) = (start / 64, start % 64);
        let head = self.occupied[w0] & (!0u64 << b0);
        if head != 0 {
            return Some(w0 * 64 + head.trailing_zeros() as usize);
        }
        for i in 1..=WORDS {
            let w = (w0 + i) % WORDS;
            let bits = if w == w0 { self.occupied[w] & !(!0u64 << b0) } else { self.occupied[w] };
            if bits != 0 {
                return Some(w * 64 + bits.trailing_zeros() as usize);
            }
        }
        unreachable!("in_wheel counts an event no slot holds")
    }

    #[inline]
    fn slot_time(&self, slot: usize) -> u64 {
        self.base + (slot as u64).wrapping_sub(self.base % WHEEL_NS) % WHEEL_NS
    }

    /// The earliest event: its time and kind.
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, EventKind)> {
        let slot = match self.first_slot() {
            Some(slot) => slot,
            None => {
                // The wheel is empty: jump to the heap's earliest event.
                let next = self.later.peek()?.time_ns();
                self.advance(next);
                self.first_slot().expect("the earliest later event entered the wheel")
            }
        };
        let time = self.slot_time(slot);
        Some((time, self.pop_slot(slot, time)))
    }

    /// The earliest event's kind if it is at `time` (one scan where peek-then-pop takes two).
    #[inline]
    pub fn pop_at(&mut self, time: u64) -> Option<EventKind> {
        match self.first_slot() {
            Some(slot) => (self.slot_time(slot) == time).then(|| self.pop_slot(slot, time)),
            None => match self.later.peek() {
                Some(e) if e.time_ns() == time => self.pop().map(|(_, kind)| kind),
                _ => None,
            },
        }
    }

    /// Take the first event of `slot`, whose events are at `time`.
    #[inline]
    fn pop_slot(&mut self, slot: usize, time: u64) -> EventKind {
        if time != self.base {
            self.advance(time);
        }
        let node = self.slots[slot].0;
        let (kind, next) = self.nodes[node as usize];
        self.nodes[node as usize].1 = self.free;
        self.free = node;
        if next == NIL {
            self.slots[slot] = (NIL, NIL);
            self.occupied[slot / 64] &= !(1 << (slot % 64));
        } else {
            self.slots[slot].0 = next;
        }
        self.in_wheel -= 1;
        kind
    }

    /// Move the window to start at `time` and pull in the later events it now covers.
    fn advance(&mut self, time: u64) {
        self.base = time;
        while self.later.peek().is_some_and(|e| e.time_ns() - time < WHEEL_NS) {
            let event = self.later.pop().unwrap();
            self.slot_in(event);
        }
    }

    /// The earliest event's time, without removing it (nothing moves, so events may still be
    /// pushed between the last popped time and that time).
    #[inline]
    pub fn peek_time(&self) -> Option<u64> {
        match self.first_slot() {
            Some(slot) => Some(self.slot_time(slot)),
            None => self.later.peek().map(Event::time_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task_of(e: (u64, EventKind)) -> u32 {
        match e.1 {
            EventKind::Wake { task } => task,
            _ => unreachable!(),
        }
    }

    #[test]
    fn pops_by_time_then_scheduling_order() {
        // Goal: equal times pop in push order; earlier times first regardless of push order.
        let mut q = EventQueue::default();
        q.push(10, EventKind::Wake { task: 1 });
        q.push(5, EventKind::Wake { task: 2 });
        q.push(10, EventKind::Wake { task: 3 });
        q.push(5, EventKind::Wake { task: 4 });
        let order: Vec<u32> = std::iter::from_fn(|| q.pop()).map(task_of).collect();
        assert_eq!(order, vec![2, 4, 1, 3]);
    }

    #[test]
    fn matches_a_binary_heap_on_interleaved_pushes_and_pops() {
        // Goal: the wheel pops exactly what a (time, seq) min-heap pops, on a long
        // interleaving of pushes (at or after the current time, as the engine does) and pops,
        // with peeks between them, popped by `pop` or `pop_at`; both the small and the large time
        // differences occur.
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut q = EventQueue::default();
        let mut reference = BinaryHeap::new();
        let (mut seq, mut now, mut rng) = (0u64, 0u64, 0x2545_f491_4f6c_dd1du64);
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for step in 0..200_000u32 {
            let r = next();
            if r % 3 != 0 || reference.is_empty() {
                let delay = match r >> 60 {
                    0 => 0,
                    1..=3 => (r >> 8) % (1u64 << ((r >> 20) % 40)),
                    _ => (r >> 8) % 2_000,
                };
                seq += 1;
                q.push(now + delay, EventKind::Wake { task: step });
                reference.push(Reverse((now + delay, seq, step)));
            } else {
                let Reverse((time, _, task)) = reference.pop().unwrap();
                assert_eq!(q.peek_time(), Some(time));
                let event = if r & 8 == 0 {
                    q.pop().unwrap()
                } else {
                    assert_eq!(q.pop_at(time.wrapping_sub(1)), None);
                    (time, q.pop_at(time).unwrap())
                };
                assert_eq!((event.0, task_of(event)), (time, task));
                now = time;
            }
        }
        while let Some(Reverse((time, _, task))) = reference.pop() {
            let event = q.pop().unwrap();
            assert_eq!((event.0, task_of(event)), (time, task));
        }
        assert_eq!(q.pop(), None);
        assert_eq!(q.peek_time(), None);
    }

    #[test]
    #[should_panic(expected = "before the last popped event")]
    fn an_event_in_the_past_is_refused() {
        let mut q = EventQueue::default();
        q.push(10, EventKind::Wake { task: 1 });
        q.pop();
        q.push(9, EventKind::Wake { task: 2 });
    }
}
