//! The compute-side index cache (§3.5): copies of internal nodes, exact and special, keyed by
//! (depth, prefix), so one cached special node routes to every leaf of its 256-key window
//! ("1 cache item : N remote items"). No full keys and no leaves are cached.
//!
//! A cached node is always a valid starting point for keys with its prefix — nodes are never
//! freed and a push-down only adds a node *above* one — so only slot contents can be stale:
//! an empty slot that is now filled (re-read before concluding "absent"), a leaf that split
//! (its `[min, max]` or `rev_ptr` tells), a child that got a new parent (its `rev_ptr` tells).
//!
//! Capacity in bytes as the authors' `CacheEntry` (`1 + 8 + 8·records`, `records` = the slots of
//! the node's ART type, see [`type_capacity`]), FIFO eviction as their `RadixCache`.

use std::collections::{BTreeMap, VecDeque};

use super::layout::{prefix, slot_offset, Gaddr, NodeImage, NODE_SLOTS};

#[derive(Clone, Debug)]
pub struct Cached {
    pub addr: Gaddr,
    pub node: NodeImage,
    admitted: u64,
}

/// The authors' `CacheEntry::content_size()`: `1 + 8 + 8·records`, where `records` is the
/// capacity of the node's type (`node_type_to_num`), not its used slots.
pub fn entry_bytes(node: &NodeImage) -> u64 {
    1 + 8 + 8 * type_capacity(node) as u64
}

/// The capacity of the node type the authors' code would give `node`: new nodes (exact and
/// special) are created as `NODE_16`; an exact node's type grows to the next power of two
/// that holds its children (`num_to_node_type`), up to `NODE_256`. A special node stays
/// `NODE_16` in the code (17 leaves `assert(false)`); ours has 256 direct slots and can hold
/// more, counted as the next type up.
pub fn type_capacity(node: &NodeImage) -> usize {
    node.records().max(16).next_power_of_two().min(NODE_SLOTS)
}

/// Memory-node bytes of `node` at the authors' sizes: an exact node is allocated at
/// `allocationPageSize` (8 + 8 + 256·8 = 2,064 B) whatever its type; a special node at
/// 8 + 8 + 16·8 = 144 B (`out_of_place_write_node_with_two_leaf`). Their 256-byte allocation
/// alignment is not counted.
pub fn authors_node_bytes(node: &NodeImage) -> u64 {
    if node.special {
        8 + 8 + 8 * type_capacity(node) as u64
    } else {
        8 + 8 + 8 * NODE_SLOTS as u64
    }
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
