//! The compute-side cache (SELCC §2 [P]: "a lightweight hash table with LRU replacement policy
//! and is sharded to support high concurrency"): frames in the node's registered region, a
//! sharded index `GCL → frame`, one LRU list per shard, and a global free list that the evictor
//! refills (§5.2).
//!
//! Lock order: shard → frame meta. Nothing takes a shard lock while holding a frame's meta.
//! The index is a `HashMap` with a fixed hasher and is never iterated, so no run depends on
//! hash order (DESIGN "no HashMap iteration order").

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use super::frame::{Frame, FrameMeta, Memo, PackedGcl};
use super::layout::Gaddr;
use crate::common::lookup::LookupMap;
use crate::sync::TouchSet;

const NIL: u32 = u32::MAX;

/// The shard of GCL `g`: FNV-1a over its node and offset bytes, then a final mix. Its own
/// function (not a `Hasher`) because the shard decides which LRU a line lives in, so it is
/// part of the protocol's behaviour and must never change with a map's hasher.
fn shard_of(g: Gaddr, shards: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in g.node.0.to_ne_bytes().iter().chain(g.offset_bytes.to_ne_bytes().iter()) {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    ((h ^ (h >> 33)) % shards as u64) as usize
}

/// An intrusive doubly linked LRU list over frame indexes; links live in `links[frame]`.
/// Head = most recently used.
#[derive(Debug)]
pub struct Lru {
    head: u32,
    tail: u32,
    len: u32,
}

fn get(links: &[AtomicU64], i: u32) -> (u32, u32) {
    let v = links[i as usize].load(Relaxed);
    ((v >> 32) as u32, v as u32)
}

fn set(links: &[AtomicU64], i: u32, prev: u32, next: u32) {
    links[i as usize].store((prev as u64) << 32 | next as u64, Relaxed);
}

impl Default for Lru {
    fn default() -> Self {
        Lru { head: NIL, tail: NIL, len: 0 }
    }
}

impl Lru {
    pub fn len(&self) -> u32 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push_front(&mut self, links: &[AtomicU64], i: u32) {
        assert!(i != NIL);
        set(links, i, NIL, self.head);
        if self.head != NIL {
            let (_, next) = get(links, self.head);
            set(links, self.head, i, next);
        } else {
            self.tail = i;
        }
        self.head = i;
        self.len += 1;
    }

    pub fn remove(&mut self, links: &[AtomicU64], i: u32) {
        assert!(self.len > 0, "remove from an empty LRU");
        let (prev, next) = get(links, i);
        if prev != NIL {
            let (pp, _) = get(links, prev);
            set(links, prev, pp, next);
        } else {
            assert_eq!(self.head, i, "frame {i} is not in this LRU");
            self.head = next;
        }
        if next != NIL {
            let (_, nn) = get(links, next);
            set(links, next, prev, nn);
        } else {
            assert_eq!(self.tail, i, "frame {i} is not in this LRU");
            self.tail = prev;
        }
        set(links, i, NIL, NIL);
        self.len -= 1;
    }

    pub fn touch(&mut self, links: &[AtomicU64], i: u32) {
        if self.head != i {
            self.remove(links, i);
            self.push_front(links, i);
        }
    }

    /// The least recently used frame, if any.
    pub fn tail(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    /// The frame used just more recently than `i` (towards the head), if any.
    pub fn more_recent(links: &[AtomicU64], i: u32) -> Option<u32> {
        let prev = get(links, i).0;
        (prev != NIL).then_some(prev)
    }

    /// From least to most recently used.
    pub fn iter_from_tail<'a>(&self, links: &'a [AtomicU64]) -> impl Iterator<Item = u32> + 'a {
        let mut cur = self.tail;
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let i = cur;
            cur = get(links, i).0;
            Some(i)
        })
    }
}

#[derive(Default)]
struct Shard {
    /// Keyed by the packed GCL: a 16-byte entry instead of 24 (issue #15: bytes per frame).
    index: LookupMap<PackedGcl, u32>,
    lru: Lru,
}

pub struct Cache {
    pub frames: Box<[Frame]>,
    /// Marks the frames whose meta or local latch may have changed (see [`Cache::take_touched`]).
    touched: Arc<TouchSet>,
    links: Box<[AtomicU64]>,
    shards: Box<[Mutex<Shard>]>,
    free: Mutex<Vec<u32>>,
    /// Where the evictor resumes its walk over shards.
    cursor: Mutex<usize>,
}

/// The outcome of `pin_or_assign`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The GCL had a frame (memo may still be I).
    Found(u32),
    /// A free frame was assigned to the GCL (memo I).
    Assigned(u32),
    /// No frame is free: evict first.
    Full,
}

impl Cache {
    pub fn new(frame_count: u32, shard_count: u32) -> Cache {
        assert!(frame_count > 0 && shard_count > 0);
        let touched = Arc::new(TouchSet::new(frame_count as usize));
        Cache {
            frames: (0..frame_count).map(|i| Frame::in_group(touched.clone(), i)).collect(),
            touched,
            links: (0..frame_count).map(|_| AtomicU64::new(u64::MAX)).collect(),
            shards: (0..shard_count).map(|_| Mutex::new(Shard::default())).collect(),
            // Pop from the end: hand out frame 0 first.
            free: Mutex::new((0..frame_count).rev().collect()),
            cursor: Mutex::new(0),
        }
    }

    pub fn frame(&self, i: u32) -> &Frame {
        &self.frames[i as usize]
    }

    /// Append the frames that may have changed since the last call to `out`, ascending, and
    /// clear their marks; whether any did. For the incremental invariant checker.
    pub fn take_touched(&self, out: &mut Vec<u32>) -> bool {
        self.touched.take(out)
    }

    /// Clear every frame's mark (a checker about to read every frame).
    pub fn clear_touched(&self) {
        self.touched.clear();
    }

    pub fn free_count(&self) -> usize {
        self.free.lock().unwrap().len()
    }

    /// Find `g`'s frame and pin it, without assigning one.
    pub fn pin(&self, g: Gaddr) -> Option<u32> {
        let mut shard = self.shards[shard_of(g, self.shards.len())].lock().unwrap();
        let i = *shard.index.get(&PackedGcl::pack(g))?;
        shard.lru.touch(&self.links, i);
        let mut meta = self.frames[i as usize].meta();
        assert_eq!(meta.gcl(), Some(g), "index and frame disagree");
        meta.pins += 1;
        Some(i)
    }

    /// Find `g`'s frame, or assign a free one; pin it either way.
    pub fn pin_or_assign(&self, g: Gaddr) -> Lookup {
        let mut shard = self.shards[shard_of(g, self.shards.len())].lock().unwrap();
        let key = PackedGcl::pack(g);
        if let Some(&i) = shard.index.get(&key) {
            shard.lru.touch(&self.links, i);
            let mut meta = self.frames[i as usize].meta();
            assert_eq!(meta.gcl(), Some(g), "index and frame disagree");
            meta.pins += 1;
            return Lookup::Found(i);
        }
        let Some(i) = self.free.lock().unwrap().pop() else { return Lookup::Full };
        {
            let mut meta = self.frames[i as usize].meta();
            meta.assign(g);
            meta.pins = 1;
        }
        shard.index.insert(key, i);
        shard.lru.push_front(&self.links, i);
        Lookup::Assigned(i)
    }

    pub fn unpin(&self, i: u32) {
        let mut meta = self.frames[i as usize].meta();
        assert!(meta.pins > 0, "unpin of an unpinned frame {i}");
        meta.pins -= 1;
    }

    /// Take up to `max` victims from the LRU tails (§5.2 [P]), starting at the evictor's cursor.
    /// A victim is unpinned with an idle local latch; it leaves the index at once, so later
    /// lookups miss, and comes back with its meta intact for the caller to release.
    pub fn take_victims(&self, max: usize) -> Vec<(u32, FrameMeta)> {
        let mut victims = Vec::new();
        let shard_count = self.shards.len();
        let mut cursor = self.cursor.lock().unwrap();
        for step in 0..shard_count {
            if victims.len() >= max {
                break;
            }
            let s = (*cursor + step) % shard_count;
            let mut shard = self.shards[s].lock().unwrap();
            // Walk from the tail without copying the list: a removed frame's more recent
            // neighbour is read before the removal.
            let mut next = shard.lru.tail();
            while let Some(i) = next {
                if victims.len() >= max {
                    break;
                }
                next = Lru::more_recent(&self.links, i);
                let frame = &self.frames[i as usize];
                let mut meta = frame.meta();
                if meta.pins > 0 || meta.acquiring || meta.transit || frame.latch.snapshot() != (0, false, 0)
                {
                    continue;
                }
                let g = meta.gcl().expect("an indexed frame caches a GCL");
                shard.index.remove(&PackedGcl::pack(g));
                shard.lru.remove(&self.links, i);
                let taken = std::mem::replace(&mut *meta, FrameMeta::free());
                // Keep the frame visibly busy until the caller frees it.
                meta.pins = 1;
                victims.push((i, taken));
            }
        }
        *cursor = (*cursor + 1) % shard_count;
        victims
    }

    /// Return a victim's frame to the free list once its data is no longer needed.
    pub fn release_frame(&self, i: u32) {
        {
            let mut meta = self.frames[i as usize].meta();
            assert_eq!(meta.pins, 1, "releasing frame {i} that someone still uses");
            assert!(meta.gcl().is_none());
            meta.pins = 0;
        }
        self.free.lock().unwrap().push(i);
    }

    /// Drop `g` from the index (used by `Free`). The caller holds the frame pinned and latched.
    pub fn forget(&self, g: Gaddr, i: u32) {
        let mut shard = self.shards[shard_of(g, self.shards.len())].lock().unwrap();
        assert_eq!(shard.index.remove(&PackedGcl::pack(g)), Some(i));
        shard.lru.remove(&self.links, i);
        let mut meta = self.frames[i as usize].meta();
        assert_eq!(meta.memo, Memo::Invalid, "forgetting a frame that still owns its line");
        meta.clear_gcl();
    }

    /// Return a frame dropped with `forget` once its last pin goes away.
    pub fn recycle(&self, i: u32) {
        {
            let meta = self.frames[i as usize].meta();
            assert!(meta.gcl().is_none() && meta.pins == 0);
        }
        self.free.lock().unwrap().push(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::{NodeId, RemoteAddr};

    #[test]
    fn lru_orders_by_recency() {
        let links: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(u64::MAX)).collect();
        let mut lru = Lru::default();
        for i in 0..4 {
            lru.push_front(&links, i);
        }
        lru.touch(&links, 1);
        assert_eq!(lru.iter_from_tail(&links).collect::<Vec<_>>(), vec![0, 2, 3, 1]);
        lru.remove(&links, 2);
        lru.remove(&links, 0);
        assert_eq!(lru.iter_from_tail(&links).collect::<Vec<_>>(), vec![3, 1]);
        assert_eq!(lru.len(), 2);
    }

    #[test]
    fn victims_skip_pinned_and_leave_the_index() {
        // Goal: eviction never takes a frame a thread is using, and a taken victim misses.
        let cache = Cache::new(3, 2);
        let g = |i: u64| RemoteAddr::new(NodeId(0), 64 + 80 * i);
        for i in 0..3 {
            assert!(matches!(cache.pin_or_assign(g(i)), Lookup::Assigned(_)));
        }
        assert_eq!(cache.pin_or_assign(g(3)), Lookup::Full);
        let f0 = cache.pin(g(0)).unwrap();
        cache.unpin(f0);
        cache.unpin(f0); // g(0) idle
        let f2 = cache.pin(g(2)).unwrap();
        cache.unpin(f2);
        cache.unpin(f2); // g(2) idle; g(1) stays pinned
        let victims = cache.take_victims(3);
        let taken: Vec<_> = victims.iter().map(|(_, m)| m.gcl().unwrap()).collect();
        assert_eq!(taken.len(), 2);
        assert!(!taken.contains(&g(1)));
        assert_eq!(cache.pin(g(0)), None);
        for (i, _) in victims {
            cache.release_frame(i);
        }
        assert_eq!(cache.free_count(), 2);
    }
}
