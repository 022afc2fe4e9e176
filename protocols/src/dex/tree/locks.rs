//! The cost of the cooling structure's local locks (Fig. 4, Fig. 9's first step).
//!
//! The cache's state changes in synchronous steps (`cache.rs`), so a lock here is a timing
//! model, not a latch: each lock keeps the end times of the critical sections reserved on it,
//! and a thread entering one at virtual time `t` waits for the sections ahead of it and then
//! holds the lock for `cpu.cooling_lock_ns` (its cache line moving to this core) plus half that
//! per other thread still queued: the artifact's lock ([ART] `util/lock.h`) is a
//! test-and-test-and-set spinlock, whose every waiter re-reads the line after a release, and
//! those reads are served one at a time before the next owner's CAS gets through (Boyd-Wickizer
//! et al., "Non-scalable locks are dangerous", Linux Symposium 2012: the hand-off grows linearly
//! with the spinning cores, which is how such a lock collapses). The waiting is spinning, so it
//! is charged as CPU. A victim probe is a try-lock ([ART] `random_evict_to_remote`): a held
//! bucket is skipped. A cooling-map bucket costs one line transfer and is taken uncontended
//! (see [`CoolingLocks::contended`]); one lock over every cooling page queues every thread of
//! the server.

use std::collections::VecDeque;

use super::*;
use crate::dex::config::Cooling;

/// Reserved critical sections per lock: the end time of each one not yet over.
pub struct CoolingLocks {
    locks: Vec<VecDeque<u64>>,
    /// Whether threads queue on the locks. Not for the cooling map: the paper's has ~530 to
    /// ~4,400 buckets per compute server (31 MB to 256 MB caches, 10% cooling, 6 slots), so 36
    /// threads rarely meet on one; our scaled-down caches have 4 to a few hundred, which would
    /// invent contention the paper's map does not have. Each section still costs its hold.
    contended: bool,
}

impl CoolingLocks {
    pub fn new(cooling: Cooling, buckets: usize) -> CoolingLocks {
        let (n, contended) = match cooling {
            Cooling::Map => (buckets, false),
            Cooling::SingleLockMap | Cooling::Fifo => (1, true),
        };
        CoolingLocks { locks: vec![VecDeque::new(); n.max(1)], contended }
    }

    /// Reserve one critical section on the lock of `bucket` for a thread arriving at `t`;
    /// returns when it ends. `try_only`: a try-lock, which gives up (`None`) if the lock is held.
    pub fn enter(&mut self, bucket: usize, t: u64, hold_ns: u64, try_only: bool) -> Option<u64> {
        if !self.contended {
            return Some(t + hold_ns);
        }
        let n = self.locks.len();
        let q = &mut self.locks[bucket % n];
        while q.front().is_some_and(|end| *end <= t) {
            q.pop_front();
        }
        if try_only && !q.is_empty() {
            return None;
        }
        let start = q.back().copied().unwrap_or(t).max(t);
        let end = start + hold_ns + hold_ns * q.len() as u64 / 2;
        q.push_back(end);
        Some(end)
    }
}

impl<N: Nic> Client<N> {
    /// One critical section on the lock of cooling bucket `bucket`, in the synchronous step
    /// now running: the wait and the hold are owed as CPU (the step's other CPU comes first).
    pub(super) fn cooling_section(&mut self, bucket: usize) {
        self.cooling_lock(bucket, false);
    }

    /// A try-lock of bucket `bucket` ([ART] a victim probe): `false` if another thread holds
    /// it, which costs one look at the lock's line.
    pub(super) fn cooling_try(&mut self, bucket: usize) -> bool {
        self.cooling_lock(bucket, true)
    }

    fn cooling_lock(&mut self, bucket: usize, try_only: bool) -> bool {
        let hold = self.config().cpu.cooling_lock_ns;
        if hold == 0 {
            return true;
        }
        let t = self.nic.now().0 + self.cpu_owed;
        let end = self
            .shared
            .cooling_locks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .enter(bucket, t, hold, try_only);
        match end {
            Some(end) => {
                self.cur.lock_wait_ns += end - t - hold;
                self.cpu_owed += end - t;
                true
            }
            None => {
                self.cpu_owed += hold;
                false
            }
        }
    }
}
