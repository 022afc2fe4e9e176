//! The cost of DEX's local latches: the cooling structure's locks (Fig. 4, Fig. 9's first
//! step) and each cached leaf's write latch (Fig. 11(b)), on `common::local_latch`.
//!
//! The cache's state changes in synchronous steps (`cache.rs`), so a latch here is a timing
//! model, not a wait on another task: a thread entering a section at virtual time `t` (its
//! clock plus the CPU it owes) waits for the sections reserved ahead of it and holds the latch
//! for the hand-off (the latch's cache line moving to its core: `cpu.cooling_lock_ns` = the
//! paper's "~100ns" from a core on the same socket, `cpu.remote_line_ns` from the other one)
//! plus half of that per thread still queued (the artifact's test-and-test-and-set spinlock,
//! [ART] `util/lock.h`). The waiting is spinning, so it is charged as CPU. Threads sit on
//! `cpu.sockets` sockets alternately ([ART] `bindCore(id)`; DEX §8.2: two threads are "one in
//! each NUMA node").
//!
//! * Cooling: a victim probe is a try-lock ([ART] `random_evict_to_remote`): a held bucket is
//!   skipped. A cooling-map bucket costs its hand-off but is not queued on (see
//!   [`CoolingLocks::queued`]); one lock over every cooling page (Fig. 4's FIFO queue, Fig. 9's
//!   single-lock map) queues every thread of the server.
//! * Leaves (`cpu.leaf_latch`, [ART] the leaf's `typeVersionLockObsolete`, a centralized
//!   version word, DEX §8.4 "Cache Size"): by default optimistic lock coupling as the
//!   artifact runs it — a write to a cached leaf CASes the latch and holds it for the
//!   hand-off plus its node search (`cpu.node_ns`); a writer that finds it held, and a lookup
//!   whose read of the leaf overlapped a writer, pause and restart the operation from the
//!   root (`yield`: `sched_yield()` from the third restart on). `queued` is the older model
//!   (writers queue, readers wait out the writers reserved).

use super::*;
use crate::common::local_latch::{interleaved_socket, HandOff, LatchTimes, Mode};
use crate::dex::config::{Cooling, LeafLatch};

/// The cooling structure's locks: bucket `b`'s lock is latch `b` (one latch in the
/// single-lock modes).
pub struct CoolingLocks {
    latches: LatchTimes,
    single: bool,
    /// Whether threads queue on the locks. Not for the cooling map: the paper's has ~530 to
    /// ~4,400 buckets per compute server (31 MB to 256 MB caches, 10% cooling, 6 slots), so 36
    /// threads rarely meet on one; our scaled-down caches have 4 to a few hundred, which would
    /// invent contention the paper's map does not have. Each section still costs its hand-off.
    queued: bool,
    /// Cache lines a section writes besides the lock's own, each last written by another
    /// holder. A bucket is one line with its lock ([ART] `hash_table.h`: the lock beside the
    /// slots), so 0 for the maps. The FIFO queue is a linked list ([16] LeanStore's cooling
    /// list): a push writes the tail pointer and the old tail's link, a pop the head pointer
    /// and the new head's link — the "intensive updates of the head/tail pointers" that DEX
    /// §5.2 blames for the queue's cache-line ping-pong.
    list_lines: u64,
}

impl CoolingLocks {
    pub fn new(cooling: Cooling) -> CoolingLocks {
        let single = cooling != Cooling::Map;
        let list_lines = if cooling == Cooling::Fifo { 2 } else { 0 };
        CoolingLocks { latches: LatchTimes::new(), single, queued: single, list_lines }
    }
}

/// Every compute server's leaf write latches, by the leaf's remote address.
pub type LeafLatches = LatchTimes;

/// What a leaf latch did to an operation (ns waited for it; ns of CPU owed).
enum LeafOutcome {
    Go {
        wait: u64,
        owed: u64,
    },
    /// It must restart, having spent this long (counted as waiting).
    Restart(u64),
}

impl<N: Nic> Client<N> {
    fn hand_off(&self) -> HandOff {
        let cpu = &self.config().cpu;
        HandOff { local_ns: cpu.cooling_lock_ns, remote_ns: cpu.remote_line_ns }
    }

    fn socket(&self) -> u32 {
        interleaved_socket(self.thread, self.config().cpu.sockets)
    }

    /// Where this thread is in virtual time: its clock plus the CPU it owes.
    fn virtual_now(&self) -> u64 {
        self.nic.now().0 + self.cpu_owed
    }

    /// One critical section on the lock of cooling bucket `bucket`, in the synchronous step
    /// now running: the wait and the hold are owed as CPU (the step's other CPU comes first).
    pub(super) fn cooling_section(&mut self, bucket: usize) {
        self.cooling_lock(bucket, false);
    }

    /// A try-lock of bucket `bucket` ([ART] a victim probe): `false` if another thread holds
    /// it, which costs one look at the lock's line. On the FIFO queue's one list there is no
    /// other bucket to probe, so the evictor waits for the lock instead (always `true`).
    pub(super) fn cooling_try(&mut self, bucket: usize) -> bool {
        self.cooling_lock(bucket, true)
    }

    fn cooling_lock(&mut self, bucket: usize, try_only: bool) -> bool {
        let hand = self.hand_off();
        if hand.local_ns == 0 {
            return true;
        }
        let (t, socket) = (self.virtual_now(), self.socket());
        let section = {
            let mut l = self.shared.cooling_locks.lock().unwrap_or_else(|e| e.into_inner());
            let id = if l.single { 0 } else { bucket as u64 };
            let one_list = l.list_lines > 0;
            let mode = match (l.queued, try_only && !one_list) {
                (false, _) => Mode::Unqueued,
                (true, false) => Mode::Queued,
                (true, true) => Mode::TryOnly,
            };
            let lines = l.list_lines;
            l.latches.acquire_lines(id, t, socket, hand, lines, mode)
        };
        match section {
            Some(s) => {
                self.cur.lock_wait_ns += s.start - t;
                self.cpu_owed += s.end - t;
                true
            }
            None => {
                self.cpu_owed += hand.local_ns;
                false
            }
        }
    }

    /// A write to cached leaf `leaf` (remote address) takes its write latch: `false` if the
    /// operation must restart from the root (the optimistic latch was held). The wait, the
    /// hand-off and a failed attempt's look at the line are owed as CPU (the node search,
    /// already owed by the walk, is the hold).
    pub(super) fn leaf_write_latch(&mut self, leaf: Gaddr) -> bool {
        let cpu = &self.config().cpu;
        let (kind, hold, pause) = (cpu.leaf_latch, cpu.node_ns, cpu.pause_ns);
        let (hand, t, socket) = (self.hand_off(), self.virtual_now(), self.socket());
        let mut latches = self.shared.leaf_latches.lock().unwrap_or_else(|e| e.into_inner());
        let outcome = match kind {
            LeafLatch::Off => LeafOutcome::Go { wait: 0, owed: 0 },
            LeafLatch::Queued => {
                let s = latches
                    .acquire(leaf.0, t, socket, hand, hold, Mode::Queued)
                    .expect("a blocking acquire always gets the latch");
                LeafOutcome::Go { wait: s.start - t, owed: s.end - t - hold }
            }
            LeafLatch::Optimistic => match latches.try_write(leaf.0, t, socket, hand, hold) {
                Ok(s) => LeafOutcome::Go { wait: 0, owed: s.end - t - hold },
                // [ART] `upgradeToWriteLockOrRestart`: `_mm_pause()`, then restart.
                Err(look) => LeafOutcome::Restart(look + pause),
            },
        };
        drop(latches);
        self.charge_leaf(outcome)
    }

    /// An optimistic read of cached leaf `leaf` (its search, `cpu.node_ns`, just owed by the
    /// walk): `false` if the operation must restart (a writer held the latch during the
    /// read). Queued: the reader waits out the writers reserved instead.
    pub(super) fn leaf_read_latch(&mut self, leaf: Gaddr) -> bool {
        let cpu = &self.config().cpu;
        let (kind, read_ns, pause) = (cpu.leaf_latch, cpu.node_ns, cpu.pause_ns);
        let (hand, t, socket) = (self.hand_off(), self.virtual_now(), self.socket());
        let mut latches = self.shared.leaf_latches.lock().unwrap_or_else(|e| e.into_inner());
        let outcome = match kind {
            LeafLatch::Off => LeafOutcome::Go { wait: 0, owed: 0 },
            LeafLatch::Queued => {
                let free = latches.free_at(leaf.0, t);
                LeafOutcome::Go { wait: free - t, owed: free - t }
            }
            LeafLatch::Optimistic => match latches.try_read(leaf.0, t, read_ns, socket, hand) {
                Ok(load) => LeafOutcome::Go { wait: 0, owed: load },
                // [ART] `readLockOrRestart` pauses when it sees the lock bit; a failed
                // validation restarts without one. Both are charged the pause.
                Err(look) => LeafOutcome::Restart(look + pause),
            },
        };
        drop(latches);
        self.charge_leaf(outcome)
    }

    /// Owe what a leaf latch cost; `false` if the operation must restart.
    fn charge_leaf(&mut self, outcome: LeafOutcome) -> bool {
        let (wait, owed, go) = match outcome {
            LeafOutcome::Go { wait, owed } => (wait, owed, true),
            LeafOutcome::Restart(ns) => (ns, ns, false),
        };
        self.cur.lock_wait_ns += wait;
        self.cpu_owed += owed;
        go
    }

    /// Before restart number `n` (from 1) of one operation after a leaf latch said so: [ART]
    /// `yield(restartCount)` (called with the count already bumped past 1): a pause for the first
    /// two, then `sched_yield()`. Settles the
    /// CPU owed so other threads move on meanwhile.
    pub(super) async fn leaf_restart(&mut self, n: u32) {
        let cpu = &self.config().cpu;
        self.cpu_owed += if n >= 3 { cpu.yield_ns } else { cpu.pause_ns };
        self.cur.retries += 1;
        self.settle_cpu().await;
    }
}
