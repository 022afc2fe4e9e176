//! Locks on the memory node as [`Cache`] takes them: the per-key mode lock (a CAS loop from
//! 0 to a value unique per acquisition) and the check, shared with the application's lock,
//! that a lock CAS returned its own unique value.

use super::*;

impl<N: Nic> Cache<N> {
    /// Take `key`'s mode lock; `false` if caching was disabled meanwhile (the holder may be
    /// a dead CN: the coordinator frees its locks only after the sync).
    ///
    /// The lock word is this CN's index + 1 in its low byte and a per-acquisition nonce
    /// above it, so a CAS that returns exactly the value it writes can only be a second
    /// execution of this very CAS whose first execution took the lock: acquired
    /// ([`Cache::cas_replayed`]).
    pub(super) async fn lock_mode(&self, w: &Worker<N>, key: u64) -> ProtocolResult<bool> {
        let lock = self.layout.mode_lock(key);
        let me = mode_lock_value(self.me, self.lock_nonce.fetch_add(1, Relaxed));
        loop {
            let seen = w.nic.try_cas(lock, 0, me, "mode lock").await?;
            if seen == 0 || self.cas_replayed(w, seen == me, "mode lock") {
                break;
            }
            if self.disabled.load(Relaxed) {
                return Ok(false);
            }
            self.stats().mode_lock_retries += 1;
            w.nic.sleep(Nanos(self.config.cpu.poll_ns)).await;
        }
        Ok(true)
    }

    pub(super) async fn unlock_mode(&self, w: &Worker<N>, key: u64) -> ProtocolResult<()> {
        w.nic.try_write_word(self.layout.mode_lock(key), 0, "mode unlock").await
    }

    /// A lock CAS returned the unique value it writes (`own`): only a second execution of
    /// that very CAS can see it, after its first execution took the lock, so the lock is
    /// held. The InfiniBand responder answers a retransmitted atomic from its saved result
    /// and never runs it twice, and the simulator's atomics run once; Soft-RoCE in the VM
    /// left locks holding their taker's value while the taker saw a failure (NEEDS.md
    /// 'Atomic operations'), so this is counted (`cas_replays`) and traced.
    pub(in crate::difache) fn cas_replayed(&self, w: &Worker<N>, own: bool, what: &'static str) -> bool {
        if own {
            self.stats().cas_replays += 1;
            w.nic.mark(what, u64::MAX);
        }
        own
    }
}

/// A mode-lock word: the CN's index + 1 in the low byte (what crash recovery matches a dead
/// CN's locks by) and `nonce` above it, unique per acquisition on this CN.
fn mode_lock_value(cn: usize, nonce: u64) -> u64 {
    debug_assert!(cn < 255);
    nonce << 8 | (cn as u64 + 1)
}

/// The CN whose acquisition wrote mode-lock word `w` (`None` for a free lock).
pub(in crate::difache) fn mode_lock_cn(w: u64) -> Option<u64> {
    (w & 0xff).checked_sub(1)
}

#[cfg(test)]
mod tests {
    use super::{mode_lock_cn, mode_lock_value};

    /// Crash recovery finds a dead CN's mode locks by the low byte; the nonce keeps values
    /// of one CN distinct (what `Cache::cas_replayed` relies on) and never zero.
    #[test]
    fn mode_lock_values_are_unique_and_name_their_cn() {
        for cn in [0usize, 1, 31] {
            let a = mode_lock_value(cn, 0);
            let b = mode_lock_value(cn, 1);
            assert_ne!(a, b);
            for v in [a, b, mode_lock_value(cn, u64::MAX >> 8)] {
                assert_ne!(v, 0);
                assert_eq!(mode_lock_cn(v), Some(cn as u64));
            }
        }
        assert_ne!(mode_lock_value(0, 1), mode_lock_value(1, 1));
        assert_eq!(mode_lock_cn(0), None);
    }
}
