//! Atomic operations on cached objects (spec §3.8): "DiFache switches the cache mode of the
//! accessed object to off and performs a remote atomic operation", because an invalidation
//! is not atomic with the memory node's atomic unit. A child module of `cache`.
//!
//! The operation is a CAS on word 1 of the object at its memory node (word 0 is the
//! application's tag). Per variant:
//! * DiFache: count the access as a write, switch the object off on every CN unless it is
//!   off, CAS at the memory node, then — as a bypass write does ([CHOICE], spec §9.6) —
//!   if the local MODE word changed since (a switch to on began and may have let a CN cache
//!   the old value), invalidate the owners and the local copy.
//! * DiFache-noAC (always on, [CHOICE]): CAS, then invalidate the owners and the local copy,
//!   as a write invalidates after its flush; the writer keeps no copy (it knows one word).
//! * caching disabled by a CN-list sync: the same as noAC.
//! * no cache: the CAS alone. noCC: the CAS alone (its copies stay stale: no coherence).
//! * CMCache: not offered (the workload refuses it at load time).

use super::*;

impl<N: Nic> Cache<N> {
    /// CAS word 1 of object `key` from `expect` to `new` at its memory node; returns the old
    /// value. The caller serializes it with the object's writes (the application's lock), as
    /// a NIC atomic is not atomic against a WRITE.
    pub async fn cas_object(&self, w: &Worker<N>, key: u64, expect: u64, new: u64) -> ProtocolResult<u64> {
        let word = self.layout.object(key).add(8);
        self.stats().atomics += 1;
        let cas = w.nic.try_cas(word, expect, new, "object atomic");
        if !self.config.variant.caches() || !self.config.variant.coherent() {
            return cas.await;
        }
        let Some(hdr) = self.enter_header(w, key).await? else {
            return self.update_uncached(w, key, cas).await;
        };
        if let Some(t) = &self.tracker {
            t.begin(key);
        }
        let r: ProtocolResult<u64> = async {
            // The MODE word the CAS runs under (adaptive), `None`: invalidate after it.
            let off = if self.config.variant.adaptive() { self.switch_off(w, hdr, key).await? } else { None };
            let old = cas.await?;
            let invalidate = match off {
                None => true,
                Some(st) => {
                    let changed = self.load(hdr, HDR_MODE) != st;
                    if changed {
                        self.stats().bypass_rechecks += 1;
                    }
                    changed
                }
            };
            if invalidate {
                self.invalidate_owners(w, key, self.whole()).await?;
                self.store(hdr, HDR_VALID, 0);
            }
            Ok(old)
        }
        .await;
        if let (Some(t), true) = (&self.tracker, r.is_ok() || !self.config.node_restarts) {
            t.end(key);
        }
        self.unpin(hdr);
        self.leave();
        r
    }

    /// Count the access as a write and switch `key` off on every CN until its settled MODE
    /// word is off; that word, or `None` if a CN-list sync began meanwhile (the switch may not
    /// have happened: the caller invalidates as noAC does).
    async fn switch_off(&self, w: &Worker<N>, hdr: u32, key: u64) -> ProtocolResult<Option<u64>> {
        let mut st = self.check_mode(w, hdr, key, false).await?;
        while st & MODE_ON != 0 && self.config.mutant != Mutant::AtomicWhileCaching {
            self.stats().atomic_switches += 1;
            self.switch_mode(w, hdr, key, false, threshold_of(st)).await?;
            if self.disabled.load(Relaxed) {
                return Ok(None);
            }
            st = self.own_mode(w, hdr, key).await?;
        }
        Ok(Some(st))
    }
}
