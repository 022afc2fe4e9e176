//! The adaptive-caching half of [`Cache`]: the per-object mode check with its statistics
//! (Fig. 9) and mode switches under the memory node's mode lock (`lock.rs`). A child module of `cache`, so
//! it shares the cache's private state; the read/write paths call it.

use super::*;
use crate::difache::stats::{SWITCH_OFF, SWITCH_ON};

impl<N: Nic> Cache<N> {
    // ---- the mode check (Fig. 9) ----

    /// Wait out a switch, count the access, and switch the mode at the interval's end. Returns
    /// the MODE word the operation proceeds under.
    pub(super) async fn check_mode(
        &self,
        w: &Worker<N>,
        hdr: u32,
        key: u64,
        read: bool,
    ) -> ProtocolResult<u64> {
        if !self.config.variant.adaptive() {
            return Ok(self.load(hdr, HDR_MODE) | MODE_ON);
        }
        let st = self.own_mode(w, hdr, key).await?;
        if st & SWITCHING == 0 && self.load(hdr, HDR_MODE) != st {
            return Ok(st); // gave up waiting (caching disabled)
        }
        let on = st & MODE_ON != 0;
        let hit = read && on && self.load(hdr, HDR_VALID) != 0 && self.load(hdr, HDR_FILL) == 0;
        let addend = TOTAL | if read { READ } else { 0 } | if hit { HIT } else { 0 };
        let new = self.add(hdr, HDR_COUNTS, addend).wrapping_add(addend);
        let total = new & 0xffff;
        if total != interval_of(st).max(1) {
            return Ok(st);
        }
        // This access closed the interval (L3-L10).
        self.store(hdr, HDR_COUNTS, 0);
        let reads = (new >> 16) & 0xffff;
        let read_ratio = reads as f64 / total as f64;
        let mut threshold = decode_threshold(threshold_of(st));
        let target = if on {
            let hit_rate = ((new >> 32) & 0xffff) as f64 / reads.max(1) as f64;
            if let Some(l) = self.samples.lock().unwrap_or_else(|e| e.into_inner()).medians() {
                threshold = break_even(hit_rate, &l);
            }
            (read_ratio < threshold).then_some(false)
        } else {
            (read_ratio >= threshold).then_some(true)
        };
        let Some(target) = target else { return Ok(st) };
        self.switch_mode(w, hdr, key, target, encode_threshold(threshold)).await?;
        self.own_mode(w, hdr, key).await
    }

    /// [`Self::settled_mode`], repaired first if the word is not `key`'s (hardware only).
    ///
    /// **The race** (NEEDS.md, "hardware-only race: remote MODE CAS vs header recycling"): a
    /// switcher of the header's previous key k CASes this word remotely while this CN recycles
    /// the header for `key` (`take_header` stores 0, `place` stores `key`'s word) without k's
    /// mode lock. A NIC atomic is atomic only against other NIC atomics (`nic/mod.rs`): on
    /// hardware it is a read then a write, and our stores can land between them; the NIC then
    /// writes k's word (flagged) back, and the switcher's second CAS, seeing its own flag,
    /// stores k's new word. The header, indexed under `key`, then carries k's mode and tag:
    /// `key` would run cached here while it is off elsewhere (off-mode writers do not
    /// invalidate: stale reads), or the reverse. Switchers and default-mode discovery of
    /// `key` skip this header meanwhile (`remote_headers` checks the tag), so its copy may
    /// also have missed their invalidations. In the simulator a NIC atomic is one instant, so
    /// this never happens and the loop below takes one comparison.
    ///
    /// **Waiting** on a flag with another key's tag (in `settled_mode`) is safe: it was raised
    /// by that key's switcher, which holds that key's mode lock and clears it with its second
    /// CAS (same tag, so the CAS matches) without needing anything from this CN's threads; our
    /// thread pins the header, so it is not recycled again meanwhile. If that switcher dies,
    /// recovery disables caching and `settled_mode` gives up as for our own key. Waiting also
    /// means the repair never races that second CAS; the loop re-checks all the same.
    pub(super) async fn own_mode(&self, w: &Worker<N>, hdr: u32, key: u64) -> ProtocolResult<u64> {
        loop {
            let st = self.settled_mode(w, hdr).await?;
            if st >> 32 == tag(key) {
                return Ok(st);
            }
            // Caching disabled (a sync): give up as `settled_mode` does, with an off word of
            // our tag — it differs from the stored word, so the caller sees a gave-up word and a
            // write invalidates like a cached write.
            let off = (st & 0xffff_ffff & !(MODE_ON | SWITCHING)) | (tag(key) << 32);
            if self.disabled.load(Relaxed) || !self.repair_mode(w, hdr, key).await? {
                return Ok(off);
            }
        }
    }

    /// Give `hdr` (indexed under `key`, pinned) `key`'s mode again, as if it were allocated
    /// now: under `key`'s mode lock, the mode of the other CNs' headers, else the default
    /// (`discover_mode`, as `header` does). Invalidates the copy: switches of `key` skipped
    /// this header while it carried another tag. `false` if caching was disabled while waiting
    /// for the lock.
    async fn repair_mode(&self, w: &Worker<N>, hdr: u32, key: u64) -> ProtocolResult<bool> {
        if !self.lock_mode(w, key).await? {
            return Ok(false);
        }
        let mode = self.discover_mode(w, key).await?;
        // Another local thread may have repaired it while we waited for the lock.
        if self.load(hdr, HDR_MODE) >> 32 != tag(key) {
            self.store(hdr, HDR_VALID, 0);
            // The counters are this header's since `place`, but the interval may differ now:
            // start a new one so that it can close.
            self.store(hdr, HDR_COUNTS, 0);
            self.store(hdr, HDR_MODE, mode);
            w.nic.mark("difache mode repair", key);
            self.stats().mode_repairs += 1;
        }
        self.unlock_mode(w, key).await?;
        Ok(true)
    }

    /// The MODE word once no switch is in progress (whatever the word's tag: see
    /// [`Self::own_mode`] for why waiting on another key's flag is safe). If caching is
    /// disabled meanwhile (the switcher may be dead), a mode word with caching off: the
    /// operation goes to the memory node, and a write reads it as a mode change and
    /// invalidates like a cached write.
    pub(super) async fn settled_mode(&self, w: &Worker<N>, hdr: u32) -> ProtocolResult<u64> {
        loop {
            let st = self.load(hdr, HDR_MODE);
            if st & SWITCHING == 0 {
                return Ok(st);
            }
            if self.disabled.load(Relaxed) {
                return Ok(st & !(MODE_ON | SWITCHING));
            }
            w.nic.sleep(Nanos(self.config.cpu.poll_ns)).await;
        }
    }

    /// Switch `key` to `target` on every CN holding a header (L13-L27).
    pub(super) async fn switch_mode(
        &self,
        w: &Worker<N>,
        hdr: u32,
        key: u64,
        target: bool,
        threshold: u64,
    ) -> ProtocolResult<()> {
        if !self.lock_mode(w, key).await? {
            return Ok(());
        }
        let st = self.load(hdr, HDR_MODE);
        if (st & MODE_ON != 0) == target || st >> 32 != tag(key) {
            return self.unlock_mode(w, key).await;
        }
        let remote = self.remote_headers(w, key).await?;
        let flagged = if self.config.mutant == Mutant::SwitchWithoutFlag {
            remote
        } else {
            let results =
                join_all(remote.iter().map(|&(c, h, m)| self.cas_mode(w, c, h, m, m | SWITCHING)).collect())
                    .await;
            let mut flagged = Vec::new();
            for (r, &(c, h, m)) in results.into_iter().zip(&remote) {
                if r? {
                    flagged.push((c, h, m | SWITCHING));
                }
            }
            self.store(hdr, HDR_MODE, st | SWITCHING);
            flagged
        };
        let new = mode_word(target, self.config.interval_after, threshold, key);
        let results = join_all(
            flagged
                .iter()
                .map(|&(c, h, m)| async move {
                    let valid = RemoteAddr::new(self.layout.cn(c), self.layout.header(h) + HDR_VALID);
                    w.nic
                        .try_batch(&[Verb::WriteWord { remote: valid, value: 0 }], "switch invalidate")
                        .await?;
                    self.cas_mode(w, c, h, m, new).await
                })
                .collect(),
        )
        .await;
        for r in results {
            r?;
        }
        self.store(hdr, HDR_VALID, 0);
        self.store(hdr, HDR_MODE, new);
        w.nic.mark("difache switched", key << 1 | target as u64);
        {
            let mut stats = self.stats();
            if target {
                stats.switches_on += 1;
            } else {
                stats.switches_off += 1;
            }
            if self.config.track_key == Some(key) {
                stats.tracked.push((w.nic.now().0, if target { SWITCH_ON } else { SWITCH_OFF }));
            }
        }
        self.unlock_mode(w, key).await
    }

    /// CAS a remote MODE word from `old` to `new`; false if the header was recycled.
    pub(super) async fn cas_mode(
        &self,
        w: &Worker<N>,
        cn: usize,
        hdr: u32,
        old: u64,
        new: u64,
    ) -> ProtocolResult<bool> {
        let remote = RemoteAddr::new(self.layout.cn(cn), self.layout.header(hdr) + HDR_MODE);
        let mut expect = old;
        loop {
            let seen = w.nic.try_cas(remote, expect, new, "switch mode").await?;
            if seen == expect {
                return Ok(true);
            }
            if seen >> 32 != old >> 32 {
                return Ok(false);
            }
            expect = seen;
        }
    }
}
