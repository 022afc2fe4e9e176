//! The compute-side index cache (§3.5): copies of internal nodes, exact and special, keyed by
//! (depth, prefix), so one cached special node routes to every leaf of its 256-key window
//! ("1 cache item : N remote items"). No full keys and no leaves are cached.
//!
//! A cached node is always a valid starting point for keys with its prefix — nodes are never
//! freed and a push-down only adds a node *above* one — so only slot contents can be stale:
//! an empty slot that is now filled (re-read before concluding "absent"), a leaf that split
//! (its `[min, max]` or `rev_ptr` tells), a child that got a new parent (its `rev_ptr` tells).
//!
//! Capacity in bytes as the authors' `CacheEntry` (`1 + 8 + 8·records`), FIFO eviction as
//! their `RadixCache`.

use std::collections::{BTreeMap, VecDeque};

use super::layout::{prefix, slot_offset, Gaddr, NodeImage, NODE_SLOTS};

#[derive(Clone, Debug)]
pub struct Cached {
    pub addr: Gaddr,
    pub node: NodeImage,
    admitted: u64,
}

pub fn entry_bytes(node: &NodeImage) -> u64 {
    1 + 8 + 8 * node.records() as u64
}

#[derive(Debug)]
pub struct IndexCache {
    capacity: u64,
    used: u64,
    map: BTreeMap<(u8, u64), Cached>,
    fifo: VecDeque<((u8, u64), u64)>,
    admissions: u64,
    pub evictions: u64,
    /// The most bytes ever held (what "the index cache needed" is measured by).
    pub peak: u64,
}

impl IndexCache {
    pub fn new(capacity: u64) -> IndexCache {
        IndexCache {
            capacity,
            used: 0,
            map: BTreeMap::new(),
            fifo: VecDeque::new(),
            admissions: 0,
            evictions: 0,
            peak: 0,
        }
    }

    /// The deepest cached node on `key`'s path.
    pub fn deepest(&self, key: u64) -> Option<Cached> {
        (0..=7u8).rev().find_map(|d| self.map.get(&(d, prefix(key, d))).cloned())
    }

    /// Admit (or refresh) a node copy at the back of the FIFO queue, evicting from the front.
    /// Queue entries carry the admission number so a refreshed node's older entry is skipped.
    pub fn admit(&mut self, addr: Gaddr, node: &NodeImage) {
        let id = (node.depth, node.prefix);
        let bytes = entry_bytes(node);
        if let Some(old) = self.map.remove(&id) {
            self.used -= entry_bytes(&old.node);
        }
        if bytes > self.capacity {
            return;
        }
        while self.used + bytes > self.capacity {
            let Some((victim, admitted)) = self.fifo.pop_front() else { break };
            if self.map.get(&victim).is_some_and(|c| c.admitted == admitted) {
                let old = self.map.remove(&victim).expect("present");
                self.used -= entry_bytes(&old.node);
                self.evictions += 1;
            }
        }
        self.admissions += 1;
        self.fifo.push_back((id, self.admissions));
        self.used += bytes;
        self.peak = self.peak.max(self.used);
        self.map.insert(id, Cached { addr, node: node.clone(), admitted: self.admissions });
    }

    /// A re-read slot word of a cached node.
    pub fn refresh_slot(&mut self, depth: u8, pfx: u64, slot: usize, word: u64) {
        if let Some(c) = self.map.get_mut(&(depth, pfx)) {
            let before = entry_bytes(&c.node);
            c.node.slots[slot] = word;
            let after = entry_bytes(&c.node);
            self.used = self.used + after - before;
            self.peak = self.peak.max(self.used);
        }
    }

    /// The word now known at slot address `slot` (a failed CAS returned it), in whichever
    /// cached node holds that slot.
    pub fn set_slot(&mut self, slot: Gaddr, word: u64) {
        let hit = self.map.iter().find_map(|(id, c)| {
            let start = c.addr.offset + slot_offset(0);
            let inside =
                c.addr.mn == slot.mn && slot.offset >= start && slot.offset < start + 8 * NODE_SLOTS as u64;
            inside.then(|| (*id, ((slot.offset - start) / 8) as usize))
        });
        if let Some(((depth, pfx), i)) = hit {
            self.refresh_slot(depth, pfx, i, word);
        }
    }

    pub fn used(&self) -> u64 {
        self.used
    }

    pub fn entries(&self) -> impl Iterator<Item = &Cached> {
        self.map.values()
    }
}
