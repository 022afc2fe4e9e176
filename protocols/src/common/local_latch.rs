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
//! An optimistic version latch whose users restart instead of waiting (optimistic lock
//! coupling, Leis et al., DaMoN 2016) has its own pair: [`LatchTimes::try_write`] (the
//! upgrade CAS) and [`LatchTimes::try_read`] (read, then validate). A failed attempt still
//! loads the line while the holder has it, so, like a spinning waiter above, it costs the
//! hand-off half a transfer; readers leave the line shared in their socket, so the next
//! writer's CAS pays the cross-socket transfer if a reader there saw it.
//!
//! Deterministic: ordered maps, integer nanoseconds, no clock but the `t` passed in.

use std::collections::{BTreeMap, VecDeque};

/// A line moving from a core on the same socket (DEX's "~100ns" local DRAM access); the
/// frozen default of every protocol that times local latches (DEX, ScaleStore's ablation).
pub const LINE_NS: u64 = 100;
/// [CHOICE] A line moving from a core on the other socket: 2× the same-socket transfer, an
/// estimate (dex/NEEDS.md 'Local latches').
pub const REMOTE_LINE_NS: u64 = 200;
/// One `_mm_pause` after a failed optimistic read: ~140 cycles since Skylake (Intel's
/// optimisation manual) at the DEX testbed's 3.1 GHz.
pub const PAUSE_NS: u64 = 45;

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
    /// Sockets (bit per socket) that loaded the line since the last holder took it.
    readers: u32,
    /// The end of the latest section ever reserved (optimistic validation).
    last_end: u64,
}

impl Latch {
    fn drop_ended(&mut self, t: u64) {
        while self.ends.front().is_some_and(|end| *end <= t) {
            self.ends.pop_front();
        }
    }

    /// Moving the line to a core on `socket` for writing.
    fn write_transfer(&self, socket: u32, hand: HandOff) -> u64 {
        let other_holder = self.last_socket.is_some_and(|s| s != socket);
        let other_readers = self.readers & !(1 << socket) != 0;
        if other_holder || other_readers {
            hand.remote_ns
        } else {
            hand.local_ns
        }
    }

    /// Moving the line to a core on `socket` for reading: nothing if a core there already
    /// shares it.
    fn read_transfer(&self, socket: u32, hand: HandOff) -> u64 {
        match self.last_socket {
            _ if self.readers & (1 << socket) != 0 => 0,
            Some(s) if s != socket => hand.remote_ns,
            _ => hand.local_ns,
        }
    }

    /// An attempt that finds the latch held at `t` (the section holding it is the last
    /// reserved one): it loads the line, which delays the hand-off by half a transfer.
    fn failed_attempt(&mut self, socket: u32, hand: HandOff) -> u64 {
        let transfer = self.read_transfer(socket, hand);
        self.readers |= 1 << socket;
        if let Some(end) = self.ends.back_mut() {
            *end += transfer / 2;
            self.last_end = self.last_end.max(*end);
        }
        transfer
    }
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
        l.drop_ended(t);
        let transfer = l.write_transfer(socket, hand);
        l.last_socket = Some(socket);
        l.readers = 0;
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
        l.last_end = l.last_end.max(end);
        Some(Section { start, end })
    }

    /// Latch `id` if no section holds it at `t`; else the failed attempt's cost.
    fn free_or_attempt(&mut self, id: u64, t: u64, socket: u32, hand: HandOff) -> Result<&mut Latch, u64> {
        let l = self.latches.entry(id).or_default();
        l.drop_ended(t);
        if l.ends.is_empty() {
            Ok(l)
        } else {
            Err(l.failed_attempt(socket, hand))
        }
    }

    /// A writer's upgrade CAS on optimistic latch `id` at `t`: the section (hand-off plus
    /// `hold_ns`) if the latch is free, else `Err` with what the failed look at the line cost
    /// this thread (it must restart).
    pub fn try_write(
        &mut self,
        id: u64,
        t: u64,
        socket: u32,
        hand: HandOff,
        hold_ns: u64,
    ) -> Result<Section, u64> {
        let l = self.free_or_attempt(id, t, socket, hand)?;
        let transfer = l.write_transfer(socket, hand);
        l.last_socket = Some(socket);
        l.readers = 0;
        let end = t + transfer + hold_ns;
        l.ends.push_back(end);
        l.last_end = l.last_end.max(end);
        Ok(Section { start: t, end })
    }

    /// An optimistic read of what latch `id` guards, from `t - read_ns` (the version load) to
    /// `t` (the validation): `Ok` with the cost of loading the line if no section overlapped
    /// the read, else `Err` with the cost of the failed attempt (the reader must restart).
    pub fn try_read(
        &mut self,
        id: u64,
        t: u64,
        read_ns: u64,
        socket: u32,
        hand: HandOff,
    ) -> Result<u64, u64> {
        let l = self.free_or_attempt(id, t, socket, hand)?;
        if l.last_end > t.saturating_sub(read_ns) {
            // A writer held it during the read: validation sees a new version.
            l.readers |= 1 << socket;
            return Err(0);
        }
        let transfer = l.read_transfer(socket, hand);
        l.readers |= 1 << socket;
        Ok(transfer)
    }

    /// When an optimistic reader arriving at `t` finds latch `id` free (`t` if it is).
    pub fn free_at(&mut self, id: u64, t: u64) -> u64 {
        match self.latches.get_mut(&id) {
            None => t,
            Some(l) => {
                l.drop_ended(t);
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

    #[test]
    fn optimistic_attempts_restart_and_slow_the_holder() {
        let mut l = LatchTimes::new();
        // A reader on socket 1 with nothing ever held: a local load, the line now shared there.
        assert_eq!(l.try_read(7, 100, 40, 1, H), Ok(100));
        assert_eq!(l.try_read(7, 150, 40, 1, H), Ok(0));
        // A writer on socket 0 must take the line back from socket 1's readers.
        assert_eq!(l.try_write(7, 200, 0, H, 40), Ok(Section { start: 200, end: 440 }));
        // A writer and a reader on socket 1 find it held: each pays a remote load and delays
        // the release by half of it.
        assert_eq!(l.try_write(7, 300, 1, H, 40), Err(200));
        assert_eq!(l.try_read(7, 300, 40, 1, H), Err(0));
        assert_eq!(l.free_at(7, 300), 540);
        // A read that began before the release and validated after it fails; one that began
        // after it succeeds, sharing the line already in its socket.
        assert_eq!(l.try_read(7, 560, 40, 0, H), Err(0));
        assert_eq!(l.try_read(7, 600, 40, 1, H), Ok(0));
    }
}
