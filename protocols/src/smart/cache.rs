//! The compute-side cache of internal nodes (SMART `RadixCache`): copies of fetched nodes,
//! found by the key prefix their slots discriminate, evicted first-in first-out.
//!
//! SMART keeps a local radix tree over key-prefix bytes whose leaves point at `CacheEntry`s
//! (`{depth, addr, records[]}`); a lookup returns the deepest cached node holding a slot for
//! the key's next byte. A map keyed by `(depth, prefix)` answers the same question with at most
//! eight probes. Admission and eviction go through one FIFO queue per compute node; its lock is
//! the centralized contention point DEX measures (the caller holds [`super::tree::Tree`]'s
//! FIFO latch around [`RadixCache::admit`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use super::layout::{key_byte, Entry, NodeType, SLOTS_OFFSET};
use crate::nic::RemoteAddr;

/// A cached copy of one internal node.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedNode {
    /// The node's base address (its rev_ptr word).
    pub addr: RemoteAddr,
    /// The key byte its slots discriminate (header depth + prefix length).
    pub depth: usize,
    pub node_type: NodeType,
    /// The node's slots as fetched (`node_type.slots()` of them).
    pub slots: Vec<Entry>,
}

impl CachedNode {
    /// The remote address of slot `i`.
    pub fn slot_addr(&self, i: usize) -> RemoteAddr {
        self.addr.add(SLOTS_OFFSET + 8 * i as u64)
    }

    /// Bytes this copy costs in the cache.
    pub fn bytes(&self) -> u64 {
        SLOTS_OFFSET + 8 * self.slots.len() as u64
    }
}

/// Where a cache lookup starts the traversal.
#[derive(Clone, Debug)]
pub struct CacheHit {
    pub node: Arc<CachedNode>,
    pub slot: usize,
}

type CacheKey = (usize, u64);

fn prefix(key: u64, depth: usize) -> u64 {
    if depth == 0 {
        0
    } else {
        key & !(u64::MAX >> (8 * depth))
    }
}

#[derive(Default)]
pub struct RadixCache {
    capacity_bytes: u64,
    bytes: u64,
    /// Admission counter: tells a FIFO record from a later copy under the same key.
    admitted: u64,
    map: BTreeMap<CacheKey, (u64, Arc<CachedNode>)>,
    fifo: VecDeque<(CacheKey, u64)>,
    pub evictions: u64,
}

impl RadixCache {
    pub fn new(capacity_bytes: u64) -> RadixCache {
        RadixCache { capacity_bytes, ..RadixCache::default() }
    }

    /// The deepest cached node with a non-empty slot for `key`'s next byte.
    pub fn lookup(&self, key: u64) -> Option<CacheHit> {
        (0..8).rev().find_map(|depth| {
            let (_, node) = self.map.get(&(depth, prefix(key, depth)))?;
            let byte = key_byte(key, depth);
            let slot = node.slots.iter().position(|e| !e.is_null() && e.partial() == byte)?;
            Some(CacheHit { node: node.clone(), slot })
        })
    }

    /// Cache a fetched node that discriminates `key`'s byte `node.depth`; evict the oldest
    /// copies while over capacity.
    pub fn admit(&mut self, key: u64, node: CachedNode) {
        if node.bytes() > self.capacity_bytes {
            return;
        }
        let k = (node.depth, prefix(key, node.depth));
        self.admitted += 1;
        self.bytes += node.bytes();
        if let Some((_, old)) = self.map.insert(k, (self.admitted, Arc::new(node))) {
            self.bytes -= old.bytes();
        }
        self.fifo.push_back((k, self.admitted));
        while self.bytes > self.capacity_bytes {
            let Some((k, generation)) = self.fifo.pop_front() else { break };
            if self.map.get(&k).is_some_and(|(g, _)| *g == generation) {
                if let Some((_, old)) = self.map.remove(&k) {
                    self.bytes -= old.bytes();
                    self.evictions += 1;
                }
            }
        }
    }

    /// Drop the cached copy `node` (if it is still the one cached under its prefix).
    pub fn invalidate(&mut self, key: u64, node: &CachedNode) {
        let k = (node.depth, prefix(key, node.depth));
        if self.map.get(&k).is_some_and(|(_, n)| n.addr == node.addr) {
            if let Some((_, old)) = self.map.remove(&k) {
                self.bytes -= old.bytes();
            }
        }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::NodeId;

    fn node(addr: u64, depth: usize, partials: &[u8]) -> CachedNode {
        let target = RemoteAddr::new(NodeId(0), 8192);
        let mut slots = vec![Entry::NULL; 4];
        for (i, p) in partials.iter().enumerate() {
            slots[i] = Entry::leaf(*p, target);
        }
        CachedNode { addr: RemoteAddr::new(NodeId(0), addr), depth, node_type: NodeType::N4, slots }
    }

    #[test]
    fn deepest_match_wins_and_fifo_evicts_oldest() {
        let key = 0x0102_0300_0000_0000u64;
        let mut c = RadixCache::new(2 * 48);
        c.admit(key, node(64, 0, &[1]));
        c.admit(key, node(4096, 2, &[3]));
        let hit = c.lookup(key).unwrap();
        assert_eq!((hit.node.depth, hit.slot), (2, 0));
        assert!(c.lookup(0x0102_0400_0000_0000).is_some_and(|h| h.node.depth == 0));
        c.admit(0x0500_0000_0000_0000, node(8192, 1, &[0]));
        assert_eq!(c.len(), 2, "the root copy, admitted first, was evicted");
        assert!(c.lookup(0x0102_0400_0000_0000).is_none());
        let n = c.lookup(key).unwrap().node;
        c.invalidate(key, &n);
        assert!(c.lookup(key).is_none());
    }
}
