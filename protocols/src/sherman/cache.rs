//! Sherman's index cache (`IndexCache.h`): copies of level-1 internal nodes (the parents of
//! leaves) on each compute node, so a lookup usually reaches its leaf with one READ. Entries
//! are never updated in place: a stale one is detected at the leaf (its fences do not cover
//! the key) and invalidated, and the operation restarts from the root. When full, a
//! pseudo-random entry is evicted (Sherman samples randomly too).

use std::collections::BTreeMap;

use rand_chacha::rand_core::Rng;
use rand_chacha::ChaCha8Rng;

use super::layout::Gaddr;
use super::node::Node;

pub struct IndexCache {
    capacity: usize,
    /// By the cached node's lowest key.
    entries: BTreeMap<u64, Node>,
    rng: ChaCha8Rng,
}

impl IndexCache {
    pub fn new(capacity: usize, rng: ChaCha8Rng) -> IndexCache {
        IndexCache { capacity, entries: BTreeMap::new(), rng }
    }

    /// The leaf a cached level-1 node routes `key` to, and the entry's id (its lowest key).
    pub fn lookup(&self, key: u64) -> Option<(Gaddr, u64)> {
        let (lowest, node) = self.entries.range(..=key).next_back()?;
        node.covers(key).then(|| (node.child_for(key), *lowest))
    }

    /// The leaves a cached level-1 node routes the keys `from..=last` to, in key order, up to
    /// its upper fence, and the entry's id; `None` if no cached node covers `from`.
    pub fn lookup_range(&self, from: u64, last: u64) -> Option<(Vec<Gaddr>, u64)> {
        let (lowest, node) = self.entries.range(..=from).next_back()?;
        if !node.covers(from) {
            return None;
        }
        let first = node.children.partition_point(|(k, _)| *k <= from);
        let mut leaves = vec![node.child_for(from)];
        leaves.extend(node.children[first..].iter().take_while(|(k, _)| *k <= last).map(|(_, a)| *a));
        Some((leaves, *lowest))
    }

    pub fn add(&mut self, node: &Node) {
        if self.capacity == 0 || node.level != 1 {
            return;
        }
        self.entries.insert(node.lowest, node.clone());
        while self.entries.len() > self.capacity {
            let probe = self.rng.next_u64();
            let victim = match self.entries.range(probe..).next() {
                Some((k, _)) => *k,
                None => *self.entries.keys().next().expect("over capacity means non-empty"),
            };
            self.entries.remove(&victim);
        }
    }

    pub fn invalidate(&mut self, id: u64) {
        self.entries.remove(&id);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
