//! The hopscotch cache index (§4.1, Fig. 6): the same array at offset 0 of every compute node,
//! so a remote writer reads a key's whole neighbourhood with one RDMA READ.
//!
//! A bucket is 16 bytes: word 0 the key + 1 (0 = empty), word 1 the header number (bits 0..32)
//! and the hop bitmap (bits 32..48: bit i set iff bucket `b + i` holds a key whose home is `b`).
//! Four buckets form a 64-byte group; bit 63 of the group's first bucket word 1 is the group's
//! lock ([CHOICE]: the paper's "mutex" folded into padding). Inserts lock the groups they touch
//! in ascending order; a remote reader that sees any lock held retries (§4.1). Values are
//! written before keys and keys cleared before values, so a lock-free reader never returns the
//! value of another key.

use crate::memory::Region;

pub const NEIGHBOURHOOD: usize = 16;
pub const GROUP_BUCKETS: usize = 4;
pub const BUCKET_BYTES: u64 = 16;
pub const GROUP_BYTES: u64 = 64;
const LOCK: u64 = 1 << 63;
const HOP_SHIFT: u32 = 32;
const HDR_MASK: u64 = 0xffff_ffff;

/// The one fixed hash (splitmix64's finalizer): every compute node computes the same home.
pub use crate::workload::mix64 as mix;

/// The home bucket of `key` in an index of `buckets` home buckets.
pub fn home(key: u64, buckets: u64) -> u64 {
    mix(key) % buckets
}

fn key_word(slot: u64) -> u64 {
    slot * BUCKET_BYTES
}
fn meta_word(slot: u64) -> u64 {
    slot * BUCKET_BYTES + 8
}
fn lock_word(group: u64) -> u64 {
    meta_word(group * GROUP_BUCKETS as u64)
}

/// The byte range `[offset, offset + len)` a remote lookup of `key` reads: every group holding
/// a bucket of the neighbourhood.
pub fn lookup_range(key: u64, buckets: u64) -> (u64, u32) {
    let h = home(key, buckets);
    let g0 = h / GROUP_BUCKETS as u64;
    let g1 = (h + NEIGHBOURHOOD as u64 - 1) / GROUP_BUCKETS as u64;
    (g0 * GROUP_BYTES, ((g1 - g0 + 1) * GROUP_BYTES) as u32)
}

/// What a remote lookup found in the groups it read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remote {
    Found(u32),
    Absent,
    /// A group was locked mid-update: read again.
    Locked,
}

/// Parse the words a remote READ of [`lookup_range`] returned.
pub fn parse_remote(words: &[u64], key: u64, buckets: u64) -> Remote {
    let h = home(key, buckets);
    let first = (h / GROUP_BUCKETS as u64) * GROUP_BUCKETS as u64;
    for g in (0..words.len()).step_by(GROUP_BYTES as usize / 8) {
        if words[g + 1] & LOCK != 0 {
            return Remote::Locked;
        }
    }
    for i in 0..NEIGHBOURHOOD as u64 {
        let at = ((h + i - first) * 2) as usize;
        if words[at] == key + 1 {
            return Remote::Found((words[at + 1] & HDR_MASK) as u32);
        }
    }
    Remote::Absent
}

/// The lock-free local lookup: no false positives.
pub fn lookup_local(region: &Region, key: u64, buckets: u64) -> Option<u32> {
    let h = home(key, buckets);
    (0..NEIGHBOURHOOD as u64)
        .map(|i| h + i)
        .find(|&s| region.load(key_word(s)) == key + 1)
        .map(|s| (region.load(meta_word(s)) & HDR_MASK) as u32)
}

/// Outcome of [`insert`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    Inserted,
    Existing(u32),
    /// No free bucket could be moved into the neighbourhood: evict (see [`occupants`]).
    Full,
    /// Another local thread holds a group lock: retry later.
    Busy,
}

/// Holds group locks `[first, next)`, released on drop.
struct Locks<'a> {
    region: &'a Region,
    first: u64,
    next: u64,
}

impl Locks<'_> {
    fn take(&mut self, through_slot: u64) -> bool {
        while self.next <= through_slot / GROUP_BUCKETS as u64 {
            let w = lock_word(self.next);
            let old = self.region.load(w);
            if old & LOCK != 0 || self.region.cas_local(w, old, old | LOCK) != old {
                return false;
            }
            self.next += 1;
        }
        true
    }
}

impl Drop for Locks<'_> {
    fn drop(&mut self) {
        for g in self.first..self.next {
            let w = lock_word(g);
            let old = self.region.load(w);
            self.region.store(w, old & !LOCK);
        }
    }
}

fn set_meta(region: &Region, slot: u64, f: impl Fn(u64) -> u64) {
    let w = meta_word(slot);
    let old = region.load(w);
    region.store(w, (f(old & !LOCK) & !LOCK) | (old & LOCK));
}

/// Hopscotch insert of `key → hdr` (Herlihy et al.), locking groups in ascending order.
pub fn insert(region: &Region, key: u64, hdr: u32, buckets: u64, slots: u64) -> Insert {
    let h = home(key, buckets);
    let mut locks = Locks { region, first: h / GROUP_BUCKETS as u64, next: h / GROUP_BUCKETS as u64 };
    let mut free = None;
    for s in h..slots {
        if !locks.take(s) {
            return Insert::Busy;
        }
        let k = region.load(key_word(s));
        if k == key + 1 {
            return Insert::Existing((region.load(meta_word(s)) & HDR_MASK) as u32);
        }
        if k == 0 {
            // Keys are unique, but a duplicate may sit past the first free bucket.
            if free.is_none() {
                free = Some(s);
            }
            if s >= h + NEIGHBOURHOOD as u64 - 1 {
                break;
            }
        } else if free.is_some() && s >= h + NEIGHBOURHOOD as u64 - 1 {
            break;
        }
    }
    let Some(mut free) = free else { return Insert::Full };
    while free - h >= NEIGHBOURHOOD as u64 {
        // A bucket in (free - H, free) whose key may move to `free` and stay in its neighbourhood.
        let candidate = (free + 1 - NEIGHBOURHOOD as u64..free).find_map(|j| {
            let k = region.load(key_word(j));
            let hj = if k == 0 { return None } else { home(k - 1, buckets) };
            (free - hj < NEIGHBOURHOOD as u64 && hj <= j).then_some((j, k, hj))
        });
        let Some((j, k, hj)) = candidate else { return Insert::Full };
        let val = region.load(meta_word(j)) & HDR_MASK;
        set_meta(region, free, |m| (m & !HDR_MASK) | val);
        region.store(key_word(free), k);
        set_meta(region, hj, |m| m | 1 << (HOP_SHIFT as u64 + free - hj));
        region.store(key_word(j), 0);
        set_meta(region, hj, |m| m & !(1 << (HOP_SHIFT as u64 + j - hj)));
        free = j;
    }
    set_meta(region, free, |m| (m & !HDR_MASK) | hdr as u64);
    region.store(key_word(free), key + 1);
    set_meta(region, h, |m| m | 1 << (HOP_SHIFT as u64 + free - h));
    Insert::Inserted
}

/// Replace `victim` (which must sit in `key`'s neighbourhood) by `key → hdr`: clear the old key,
/// then fill value and key (§4.1 eviction). Returns false if a lock is busy.
pub fn replace(region: &Region, victim: u64, old_key: u64, key: u64, hdr: u32, buckets: u64) -> bool {
    let h = home(key, buckets);
    let ho = home(old_key, buckets);
    let lo = h.min(ho);
    let mut locks = Locks { region, first: lo / GROUP_BUCKETS as u64, next: lo / GROUP_BUCKETS as u64 };
    if !locks.take(victim.max(h)) {
        return false;
    }
    region.store(key_word(victim), 0);
    set_meta(region, ho, |m| m & !(1 << (HOP_SHIFT as u64 + victim - ho)));
    set_meta(region, victim, |m| (m & !HDR_MASK) | hdr as u64);
    region.store(key_word(victim), key + 1);
    set_meta(region, h, |m| m | 1 << (HOP_SHIFT as u64 + victim - h));
    true
}

/// A group lock another local thread holds: try again later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Busy;

/// Remove `key`; returns its header.
pub fn remove(region: &Region, key: u64, buckets: u64) -> Result<Option<u32>, Busy> {
    let h = home(key, buckets);
    let Some(s) = (h..h + NEIGHBOURHOOD as u64).find(|&s| region.load(key_word(s)) == key + 1) else {
        return Ok(None);
    };
    let mut locks = Locks { region, first: h / GROUP_BUCKETS as u64, next: h / GROUP_BUCKETS as u64 };
    if !locks.take(s) {
        return Err(Busy);
    }
    let hdr = (region.load(meta_word(s)) & HDR_MASK) as u32;
    region.store(key_word(s), 0);
    set_meta(region, h, |m| m & !(1 << (HOP_SHIFT as u64 + s - h)));
    Ok(Some(hdr))
}

/// The occupied buckets of `key`'s neighbourhood: (slot, key, header), eviction candidates.
pub fn occupants(region: &Region, key: u64, buckets: u64) -> Vec<(u64, u64, u32)> {
    let h = home(key, buckets);
    (h..h + NEIGHBOURHOOD as u64)
        .filter_map(|s| {
            let k = region.load(key_word(s));
            (k != 0).then(|| (s, k - 1, (region.load(meta_word(s)) & HDR_MASK) as u32))
        })
        .collect()
}

/// Every (key, header) in an index read through `load` (byte offset → word).
pub fn entries(load: &dyn Fn(u64) -> u64, slots: u64) -> Vec<(u64, u32)> {
    (0..slots)
        .filter_map(|s| {
            let k = load(key_word(s));
            (k != 0).then(|| (k - 1, (load(meta_word(s)) & HDR_MASK) as u32))
        })
        .collect()
}

/// Invariant 8 of the spec: keys within their neighbourhood, hop bits exact, no duplicates.
/// Skipped while any group is locked (an update in progress).
pub fn check(load: &dyn Fn(u64) -> u64, buckets: u64, slots: u64) -> Result<(), String> {
    if (0..slots / GROUP_BUCKETS as u64).any(|g| load(lock_word(g)) & LOCK != 0) {
        return Ok(());
    }
    let mut expected = vec![0u64; slots as usize];
    let mut seen = std::collections::BTreeSet::new();
    for s in 0..slots {
        let k = load(key_word(s));
        if k == 0 {
            continue;
        }
        let h = home(k - 1, buckets);
        if s < h || s >= h + NEIGHBOURHOOD as u64 {
            return Err(format!("key {} in bucket {s}, outside its neighbourhood from {h}", k - 1));
        }
        if !seen.insert(k) {
            return Err(format!("key {} twice in the index", k - 1));
        }
        expected[h as usize] |= 1 << (s - h);
    }
    for s in 0..slots {
        let hop = (load(meta_word(s)) >> HOP_SHIFT) & 0xffff;
        if hop != expected[s as usize] {
            return Err(format!("bucket {s} hop bits {hop:#x}, occupants say {:#x}", expected[s as usize]));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(buckets: u64) -> (Region, u64) {
        let slots = (buckets + NEIGHBOURHOOD as u64 - 1).next_multiple_of(4);
        (Region::new(slots * BUCKET_BYTES), slots)
    }

    #[test]
    fn insert_lookup_remove_keep_the_structure() {
        let (r, slots) = table(64);
        let load = |o: u64| r.load(o);
        let mut inserted = Vec::new();
        for key in 0..200u64 {
            match insert(&r, key, key as u32 + 7, 64, slots) {
                Insert::Inserted => inserted.push(key),
                Insert::Full => {}
                other => panic!("{other:?}"),
            }
            check(&load, 64, slots).unwrap();
        }
        assert!(inserted.len() > 48, "hopscotch fills most of the table: {}", inserted.len());
        for &key in &inserted {
            assert_eq!(lookup_local(&r, key, 64), Some(key as u32 + 7));
            let (off, len) = lookup_range(key, 64);
            let mut words = vec![0; len as usize / 8];
            r.read_words(off, &mut words);
            assert_eq!(parse_remote(&words, key, 64), Remote::Found(key as u32 + 7));
        }
        assert_eq!(insert(&r, inserted[0], 1, 64, slots), Insert::Existing(inserted[0] as u32 + 7));
        for &key in inserted.iter().step_by(2) {
            assert_eq!(remove(&r, key, 64), Ok(Some(key as u32 + 7)));
            assert_eq!(lookup_local(&r, key, 64), None);
            check(&load, 64, slots).unwrap();
        }
    }

    #[test]
    fn a_locked_group_makes_remote_readers_retry() {
        let (r, _) = table(16);
        let (off, len) = lookup_range(3, 16);
        r.store(lock_word(off / GROUP_BYTES), LOCK);
        let mut words = vec![0; len as usize / 8];
        r.read_words(off, &mut words);
        assert_eq!(parse_remote(&words, 3, 16), Remote::Locked);
    }

    #[test]
    fn replace_evicts_a_neighbour() {
        let (r, slots) = table(16);
        let mut keys = Vec::new();
        for key in 0..100u64 {
            if insert(&r, key, key as u32, 16, slots) == Insert::Inserted {
                keys.push(key);
            }
        }
        let fresh = 1000u64;
        assert_eq!(insert(&r, fresh, 9, 16, slots), Insert::Full);
        let (slot, old, _) = occupants(&r, fresh, 16)[0];
        assert!(replace(&r, slot, old, fresh, 9, 16));
        assert_eq!(lookup_local(&r, fresh, 16), Some(9));
        assert_eq!(lookup_local(&r, old, 16), None);
        check(&|o| r.load(o), 16, slots).unwrap();
    }
}
