//! Sherman's hierarchical on-chip locks (§4.3 of the paper; `Tree.cpp` `try_lock_addr`,
//! `acquire_local_lock`, `can_hand_over`).
//!
//! * **Global**: one 8-byte word per lock in the memory node's NIC device memory, indexed by a
//!   hash of the node's address; taken by CAS 0 → thread tag, released by writing 0 (in the same
//!   doorbell batch as the write-back when combining). [CHOICE] a plain 8-byte CAS, as the
//!   authors' code does (`cas_dm_sync`): masked CAS is not needed and is `Unsupported` on the
//!   hardware backend.
//! * **Local**: every compute node keeps a FIFO lock per global lock word. A thread takes the
//!   local lock first; when it releases with local waiters queued it may *hand over* the global
//!   lock without releasing it, at most `max_handover` times in a row (Sherman: 8), so one hot
//!   lock does not starve other compute nodes.

use std::sync::{Arc, Mutex};

use crate::common::lookup::LookupMap;
use crate::nic::RemoteAddr;
use crate::sync::{Latch, Mode};

#[derive(Default)]
struct Handover {
    /// The next holder inherits the global lock.
    hand_over: bool,
    /// Acquisitions since the global lock was last taken by CAS.
    hand_time: u8,
}

#[derive(Default)]
pub struct LocalLock {
    latch: Latch,
    state: Mutex<Handover>,
}

/// A compute node's local lock table, keyed by the global lock word's address.
#[derive(Default)]
pub struct LocalLocks {
    table: Mutex<LookupMap<(u16, u64), Arc<LocalLock>>>,
}

impl LocalLocks {
    pub fn entry(&self, lock: RemoteAddr) -> Arc<LocalLock> {
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        t.entry((lock.node.0, lock.offset_bytes)).or_default().clone()
    }
}

impl LocalLock {
    /// Wait for the local lock; `true` if the previous holder handed the global lock over.
    pub async fn acquire(&self) -> bool {
        self.latch.lock(Mode::Exclusive).await;
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.hand_time = s.hand_time.saturating_add(1);
        s.hand_over
    }

    /// Decide at release whether the global lock passes to the next local waiter.
    pub fn can_hand_over(&self, max_handover: u8) -> bool {
        let waiters = self.latch.snapshot().2;
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.hand_over = waiters > 0 && s.hand_time < max_handover;
        if !s.hand_over {
            s.hand_time = 0;
        }
        s.hand_over
    }

    /// Release without handing over (the hierarchical locks are off, or the caller released the
    /// global lock itself).
    pub fn clear_hand_over(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.hand_over = false;
        s.hand_time = 0;
    }

    pub fn release(&self) {
        self.latch.unlock(Mode::Exclusive);
    }
}
