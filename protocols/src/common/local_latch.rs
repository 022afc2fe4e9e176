//! The timing of a compute server's local latches (spinlocks, optimistic version latches) on a
//! multi-socket machine, for protocols whose shared local structures change in synchronous
//! steps (so a latch there is a cost, not a wait on another task).
//!
//! Each latch keeps the end times of the critical sections reserved on it and the socket of
//! its last holder. A thread entering at virtual time `t` waits for the sections ahead of it,
//! then holds the latch for its own section plus the hand-off: the latch's cache line moving to
//! this core, `HandOff::local_ns` from a core on the same socket, `HandOff::remote_ns` from the
//! other socket, and half of that per section still reserved when it arrives (a test-and-test-and-set
//! spinlock: after a release every spinning core re-reads the line and those reads are served
//! one at a time before the next owner's CAS gets through; Boyd-Wickizer et al., "Non-scalable
//! locks are dangerous", Linux Symposium 2012). An optimistic reader does not queue: it waits
//! until the sections reserved so far are over ([`LatchTimes::free_at`]).
//!
//! Deterministic: ordered maps, integer nanoseconds, no clock but the `t` passed in.

use std::collections::{BTreeMap, VecDeque};

/// What moving a latch's cache line to a core costs (ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandOff {
    /// From a core on the same socket.
    pub local_ns: u64,
    /// From a core on another socket.
    pub remote_ns: u64,
}

#[derive(Default)]
struct Latch {
    /// End times of the reserved sections not yet over, in order.
    ends: VecDeque<u64>,
    /// The socket of the last holder (`None`: never taken).
    last_socket: Option<u32>,
}

/// The latches of one compute server, by id.
#[derive(Default)]
pub struct LatchTimes {
    latches: BTreeMap<u64, Latch>,
}

/// How a thread takes a latch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Threads wait for each other (a contended lock).
    Queued,
    /// A try-lock: gives up if the latch is held.
    TryOnly,
    /// No queueing: the section costs its hand-off and hold only.
    Unqueued,
}

/// One reservation: when the thread got the latch and when its section ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section {
    pub start: u64,
    pub end: u64,
}

impl LatchTimes {
    pub fn new() -> LatchTimes {
        LatchTimes::default()
    }

    /// Reserve a section of `hold_ns` (the holder's own work) on latch `id` for a thread on
    /// `socket` arriving at `t`; `None` only for a [`Mode::TryOnly`] that finds it held.
    pub fn acquire(
        &mut self,
        id: u64,
        t: u64,
        socket: u32,
        hand: HandOff,
        hold_ns: u64,
        mode: Mode,
    ) -> Option<Section> {
        self.reserve(id, t, socket, hand, |_| hold_ns, mode)
    }

    /// [`LatchTimes::acquire`] for a section whose work is writing `lines` more cache lines that
    /// the previous holder wrote (a linked list's head, tail and neighbour links): each moves
    /// to this core at the lock line's own cost.
    pub fn acquire_lines(
        &mut self,
        id: u64,
        t: u64,
        socket: u32,
        hand: HandOff,
        lines: u64,
        mode: Mode,
    ) -> Option<Section> {
        self.reserve(id, t, socket, hand, |transfer| lines * transfer, mode)
    }

    fn reserve(
        &mut self,
        id: u64,
        t: u64,
        socket: u32,
        hand: HandOff,
        hold: impl FnOnce(u64) -> u64,
        mode: Mode,
    ) -> Option<Section> {
        let l = self.latches.entry(id).or_default();
        while l.ends.front().is_some_and(|end| *end <= t) {
            l.ends.pop_front();
        }
        let transfer = match l.last_socket {
            Some(s) if s != socket => hand.remote_ns,
            _ => hand.local_ns,
        };
        l.last_socket = Some(socket);
        let hold_ns = hold(transfer);
        if mode == Mode::Unqueued {
            return Some(Section { start: t, end: t + transfer + hold_ns });
        }
        if mode == Mode::TryOnly && !l.ends.is_empty() {
            return None;
        }
        let start = l.ends.back().copied().unwrap_or(t).max(t);
        let end = start + transfer + transfer * l.ends.len() as u64 / 2 + hold_ns;
        l.ends.push_back(end);
        Some(Section { start, end })
    }

    /// When an optimistic reader arriving at `t` finds latch `id` free (`t` if it is).
    pub fn free_at(&mut self, id: u64, t: u64) -> u64 {
        match self.latches.get_mut(&id) {
            None => t,
            Some(l) => {
                while l.ends.front().is_some_and(|end| *end <= t) {
                    l.ends.pop_front();
                }
                l.ends.back().copied().unwrap_or(t).max(t)
            }
        }
    }
}

/// The socket of compute thread `thread` when threads are bound to cores in order and the
/// operating system numbers cores alternately across `sockets` sockets (so two threads land on
/// two sockets: DEX §8.2 "two compute threads (one in each NUMA node)" with the artifact's
/// `bindCore(id)`).
pub fn interleaved_socket(thread: u32, sockets: u32) -> u32 {
    thread % sockets.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: HandOff = HandOff { local_ns: 100, remote_ns: 200 };

    #[test]
    fn hand_offs_cost_more_across_sockets_and_queue() {
        let mut l = LatchTimes::new();
        // First taker: a local transfer.
        assert_eq!(l.acquire(1, 0, 0, H, 10, Mode::Queued), Some(Section { start: 0, end: 110 }));
        // Another socket arrives while held: waits, then a remote transfer plus half of one for
        // the section still reserved.
        assert_eq!(l.acquire(1, 50, 1, H, 10, Mode::Queued), Some(Section { start: 110, end: 420 }));
        // A third arrives with two sections reserved: remote again, plus two halves.
        assert_eq!(l.acquire(1, 60, 0, H, 10, Mode::Queued), Some(Section { start: 420, end: 830 }));
        // A try-lock while held gives up; a reader waits out every reserved section.
        assert_eq!(l.acquire(1, 100, 0, H, 10, Mode::TryOnly), None);
        assert_eq!(l.free_at(1, 100), 830);
        assert_eq!(l.free_at(1, 900), 900);
        assert_eq!(l.free_at(2, 5), 5);
        // Unqueued: only the transfer and the hold, whatever is reserved.
        assert_eq!(l.acquire(3, 0, 1, H, 0, Mode::Unqueued), Some(Section { start: 0, end: 100 }));
        assert_eq!(l.acquire(3, 0, 0, H, 0, Mode::Unqueued), Some(Section { start: 0, end: 200 }));
        // Two list lines behind a lock last held on the other socket: three remote transfers.
        assert_eq!(l.acquire_lines(3, 500, 1, H, 2, Mode::Queued), Some(Section { start: 500, end: 1100 }));
        assert_eq!(interleaved_socket(3, 2), 1);
        assert_eq!(interleaved_socket(3, 1), 0);
    }
}
