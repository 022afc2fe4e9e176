//! Headers of [`Cache`]: find or allocate `key`'s header (its mode discovered from the other
//! CNs' headers under the mode lock), place it in the hopscotch index, pin and unpin it, and
//! choose eviction victims (disabled objects in the same neighbourhood first). A child module
//! of `cache`, sharing its private state.

use super::*;

impl<N: Nic> Cache<N> {
    /// The header of `key`, allocated if needed (§4.3 default cache modes), pinned; `None` if
    /// caching was disabled while waiting for the mode lock.
    pub async fn header(&self, w: &Worker<N>, key: u64) -> ProtocolResult<Option<u32>> {
        loop {
            if let Some(h) = index::lookup_local(self.nic.local(), key, self.layout.index_buckets) {
                self.add(h, HDR_PIN, 1);
                return Ok(Some(h));
            }
            let adaptive = self.config.variant.adaptive();
            let mut mode = mode_word(
                true,
                self.config.interval_first,
                encode_threshold(self.config.threshold_default),
                key,
            );
            if adaptive {
                if !self.lock_mode(w, key).await? {
                    return Ok(None);
                }
                mode = self.discover_mode(w, key).await?;
            }
            let placed = self.place(key, mode);
            if adaptive {
                self.unlock_mode(w, key).await?;
            }
            match placed {
                Some(h) => return Ok(Some(h)),
                None => {
                    self.stats().alloc_retries += 1;
                    w.nic.sleep(Nanos(self.config.cpu.poll_ns)).await;
                }
            }
        }
    }

    /// Take a header and insert `key` (synchronous: no other task runs in between on the
    /// simulator). `None`: everything busy or pinned, try again.
    pub(super) fn place(&self, key: u64, mode: u64) -> Option<u32> {
        let region = self.nic.local();
        let (buckets, slots) = (self.layout.index_buckets, self.layout.index_slots);
        if let Some(h) = index::lookup_local(region, key, buckets) {
            self.add(h, HDR_PIN, 1);
            return Some(h);
        }
        let hdr = self.take_header()?;
        for (word, value) in [
            (HDR_VALID, 0),
            (HDR_MODE, mode),
            (HDR_COUNTS, 0),
            (HDR_KEY, key + 1),
            (HDR_FILL, 0),
            (HDR_PIN, 1),
        ] {
            self.store(hdr, word, value);
        }
        let done = match index::insert(region, key, hdr, buckets, slots) {
            Insert::Inserted => true,
            Insert::Existing(_) | Insert::Busy => false,
            Insert::Full => self.evict_neighbour(key, hdr),
        };
        if done {
            self.nic.mark("difache alloc key<<32|hdr", key << 32 | hdr as u64);
            self.stats().allocations += 1;
            Some(hdr)
        } else {
            self.release_header(hdr);
            None
        }
    }

    pub(super) fn release_header(&self, hdr: u32) {
        for word in [HDR_VALID, HDR_MODE, HDR_COUNTS, HDR_KEY, HDR_FILL, HDR_PIN] {
            self.store(hdr, word, 0);
        }
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(hdr);
    }

    /// Victim preference (§6): unpinned, caching disabled first, then the fewest operations.
    /// The MODE word is not tag-checked: a word another key's switcher left here (the
    /// hardware-only race of `Cache::own_mode`) only changes which header is evicted, never
    /// what an access does.
    pub(super) fn victim_rank(&self, hdr: u32) -> Option<(bool, u64)> {
        (self.load(hdr, HDR_PIN) == 0)
            .then(|| (self.load(hdr, HDR_MODE) & MODE_ON != 0, self.load(hdr, HDR_COUNTS) & 0xffff))
    }

    pub(super) fn evict_neighbour(&self, key: u64, hdr: u32) -> bool {
        let region = self.nic.local();
        let buckets = self.layout.index_buckets;
        let best = index::occupants(region, key, buckets)
            .into_iter()
            .filter_map(|(slot, k, h)| self.victim_rank(h).map(|r| (r, slot, k, h)))
            .min_by_key(|(r, slot, _, _)| (*r, *slot));
        let Some((_, slot, old, victim)) = best else { return false };
        if !index::replace(region, slot, old, key, hdr, buckets) {
            return false;
        }
        self.nic.mark("difache evict neighbour key<<32|hdr", old << 32 | victim as u64);
        self.release_header(victim);
        self.stats().evictions += 1;
        true
    }

    /// A free header, evicting one (clock hand, disabled objects first) if none is free.
    pub(super) fn take_header(&self) -> Option<u32> {
        if let Some(h) = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Some(h);
        }
        let n = self.layout.cache_objects as u32;
        let mut hand = self.hand.lock().unwrap_or_else(|e| e.into_inner());
        let window: Vec<u32> = (0..n.min(16)).map(|i| (*hand + i) % n).collect();
        let victim =
            window.iter().filter_map(|&h| self.victim_rank(h).map(|r| (r.0, h))).min_by_key(|(on, _)| *on)?.1;
        *hand = (victim + 1) % n;
        let key = self.load(victim, HDR_KEY).checked_sub(1)?;
        match index::remove(self.nic.local(), key, self.layout.index_buckets) {
            Ok(Some(h)) if h == victim => {}
            _ => return None,
        }
        for word in [HDR_VALID, HDR_MODE, HDR_COUNTS, HDR_KEY, HDR_FILL] {
            self.store(victim, word, 0);
        }
        self.nic.mark("difache evict key<<32|hdr", key << 32 | victim as u64);
        self.stats().evictions += 1;
        Some(victim)
    }

    pub fn unpin(&self, hdr: u32) {
        self.add(hdr, HDR_PIN, u64::MAX);
    }

    // ---- read and write (Fig. 5) ----

    /// Pass the cache's gate and find or place `key`'s header: `Some(hdr)` (pinned, the gate
    /// held: the caller unpins and leaves), or `None` — caching disabled by a CN-list sync, or
    /// no header could be placed — with the gate released: the operation bypasses the cache.
    pub(super) async fn enter_header(&self, w: &Worker<N>, key: u64) -> ProtocolResult<Option<u32>> {
        if !self.enter() {
            return Ok(None);
        }
        w.nic.cpu(Nanos(self.config.cpu.lookup_ns)).await;
        let found = self.header(w, key).await;
        if !matches!(found, Ok(Some(_))) {
            self.leave();
        }
        found
    }
}
