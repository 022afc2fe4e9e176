//! Bulk load ("we warm up the tree ... 50% full"): the index over the sorted initial keys,
//! built before any client runs ([CHOICE] instead of simulating the inserts; the shape is what
//! inserts with splits would leave: path-compressed ART nodes over 256-key windows,
//! a window of one leaf hanging directly in its first distinguishing slot, a window of several
//! leaves under a special node). Leaves hold a fixed number of keys ([`LeafCut::Every`]), or
//! what inserting the keys one by one in their load order leaves ([`inserted_leaf_sizes`]).
//! Objects are placed round-robin over memory nodes.

use std::collections::BTreeMap;

use super::config::SplitRule;
use super::layout::{
    byte, entry, first_difference, prefix, slot_offset, window, Gaddr, Kind, LeafImage, NodeImage,
    IMAGE_START, LEAF_BYTES, NODE_BYTES, ROOT, SPECIAL_DEPTH,
};

/// The value of the bulk-loaded key of rank `rank` (unique, never 0, never a tombstone).
pub fn bulk_value(rank: u64) -> u64 {
    1 << 62 | (rank + 1)
}

enum Obj {
    Leaf(LeafImage),
    Node(NodeImage),
}

/// The image: every object with its address, and counts for the metrics.
pub struct Image {
    objects: Vec<(Gaddr, Obj)>,
    /// Bytes used per memory node past `IMAGE_START`.
    pub bytes: Vec<u64>,
    pub leaves: u64,
    pub exact_nodes: u64,
    pub special_nodes: u64,
    /// Bytes the authors' cache would need to hold every internal node (`1 + 8 + 8·records`).
    pub internal_cache_bytes: u64,
    /// Memory-node bytes of the whole tree (root included) with internal nodes at the
    /// authors' sizes ([`super::cache::authors_node_bytes`]) and 1,088 B leaves.
    pub authors_bytes: u64,
    /// (key, value) of every loaded key.
    pub loaded: Vec<(u64, u64)>,
}

impl Image {
    /// Words to write at each address on memory node `mn`.
    pub fn chunks(&self, mn: u16) -> impl Iterator<Item = (u64, Vec<u64>)> + '_ {
        self.objects.iter().filter(move |(a, _)| a.mn == mn).map(|(a, o)| {
            let words = match o {
                Obj::Leaf(l) => l.encode(),
                Obj::Node(n) => n.encode(),
            };
            (a.offset, words)
        })
    }
}

struct Builder {
    objects: Vec<(Gaddr, Obj)>,
    cursor: Vec<u64>,
    next: usize,
}

impl Builder {
    fn place(&mut self, bytes: u64) -> Gaddr {
        let mn = self.next % self.cursor.len();
        self.next += 1;
        let a = Gaddr { mn: mn as u16, offset: IMAGE_START + self.cursor[mn] };
        self.cursor[mn] += bytes;
        a
    }

    fn set_rev(&mut self, child: usize, rev: Gaddr) {
        match &mut self.objects[child].1 {
            Obj::Leaf(l) => l.rev = rev.word(),
            Obj::Node(n) => n.rev = rev.word(),
        }
    }

    /// Fill `node` (object `at`, depth `d`) with `children` (window key, entry, object index),
    /// ascending, all sharing the node's prefix.
    fn fill(&mut self, at: usize, d: u8, children: &[(u64, u64, usize)]) {
        let addr = self.objects[at].0;
        let mut i = 0;
        while i < children.len() {
            let b = byte(children[i].0, d);
            let j = i + children[i..].iter().take_while(|c| byte(c.0, d) == b).count();
            let group = &children[i..j];
            let slot = addr.plus(slot_offset(b));
            let e = if group.len() == 1 {
                self.set_rev(group[0].2, slot);
                group[0].1
            } else {
                let m = first_difference(group[0].0, group[group.len() - 1].0, d + 1, SPECIAL_DEPTH)
                    .expect("distinct windows differ above the last byte");
                let naddr = self.place(NODE_BYTES);
                let node = NodeImage::new(m, false, prefix(group[0].0, m), slot.word());
                self.objects.push((naddr, Obj::Node(node)));
                let idx = self.objects.len() - 1;
                self.fill(idx, m, group);
                entry(Kind::Exact, naddr)
            };
            if let Obj::Node(n) = &mut self.objects[at].1 {
                n.slots[b] = e;
            }
            i = j;
        }
    }
}

/// How a window's keys are cut into leaves.
pub enum LeafCut {
    /// Runs of this many keys (the last run of a window shorter).
    Every(usize),
    /// Every leaf's key count, in key order (windows never share a leaf).
    Sizes(Vec<usize>),
}

/// The key count of every leaf, in key order, after inserting `arrivals` (distinct, non-zero,
/// in insertion order) one by one into an empty tree whose leaves hold `split_at` keys: an
/// insert into a full leaf first splits it as the protocol's SMO does (the sorted keys cut at
/// `rule.keep(split_at)`, the upper part a new leaf starting at its first key), then lands in
/// the half it belongs to. Each 256-key window starts as one leaf and never shares one.
pub fn inserted_leaf_sizes(arrivals: &[u64], split_at: usize, rule: SplitRule) -> Vec<usize> {
    let mut windows: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for k in arrivals {
        windows.entry(window(*k).0).or_default().push(*k);
    }
    let m = rule.keep(split_at).clamp(1, split_at.saturating_sub(1).max(1));
    let mut sizes = Vec::new();
    for (lo, keys) in windows {
        // Leaves of the window, ascending: (lowest key it may hold, its keys).
        let mut leaves: Vec<(u64, Vec<u64>)> = vec![(lo, Vec::new())];
        for k in keys {
            let mut at = leaves.partition_point(|l| l.0 <= k) - 1;
            if leaves[at].1.len() >= split_at {
                let full = &mut leaves[at].1;
                full.sort_unstable();
                let upper = full.split_off(m);
                leaves.insert(at + 1, (upper[0], upper));
                if k >= leaves[at + 1].0 {
                    at += 1;
                }
            }
            leaves[at].1.push(k);
        }
        sizes.extend(leaves.iter().map(|l| l.1.len()));
    }
    sizes
}

/// The tree over `keys` (ascending, distinct, non-zero), cut into leaves by `cut`.
pub fn build(keys: &[u64], memory_nodes: usize, cut: &LeafCut) -> Image {
    let mut b = Builder { objects: Vec::new(), cursor: vec![0; memory_nodes], next: 1 };
    b.objects.push((ROOT, Obj::Node(NodeImage::new(0, false, 0, 0))));
    let (mut leaves, mut specials) = (0u64, 0u64);
    let mut loaded = Vec::with_capacity(keys.len());
    // One child per 256-key window: (window min, entry, object index).
    let mut children: Vec<(u64, u64, usize)> = Vec::new();
    let mut i = 0;
    let mut next_size = 0;
    while i < keys.len() {
        let (lo, hi) = window(keys[i]);
        let j = i + keys[i..].iter().take_while(|k| **k <= hi).count();
        let chunks: Vec<&[u64]> = match cut {
            LeafCut::Every(fill) => keys[i..j].chunks((*fill).max(1)).collect(),
            LeafCut::Sizes(sizes) => {
                let mut chunks = Vec::new();
                let mut at = i;
                while at < j {
                    let n = sizes[next_size];
                    next_size += 1;
                    assert!(n > 0 && at + n <= j, "leaf sizes must tile each window");
                    chunks.push(&keys[at..at + n]);
                    at += n;
                }
                chunks
            }
        };
        let mut made = Vec::new();
        for (c, chunk) in chunks.iter().enumerate() {
            let min = if c == 0 { lo } else { chunk[0] };
            let max = chunks.get(c + 1).map_or(hi, |n| n[0] - 1);
            let mut leaf = LeafImage::new(min, max, 0);
            for (s, k) in chunk.iter().enumerate() {
                let v = bulk_value(loaded.len() as u64);
                leaf.keys[s] = *k;
                leaf.values[s] = v;
                loaded.push((*k, v));
            }
            let addr = b.place(LEAF_BYTES);
            b.objects.push((addr, Obj::Leaf(leaf)));
            made.push((min, addr, b.objects.len() - 1));
            leaves += 1;
        }
        if made.len() == 1 {
            children.push((lo, entry(Kind::Leaf, made[0].1), made[0].2));
        } else {
            let saddr = b.place(NODE_BYTES);
            let mut node = NodeImage::new(SPECIAL_DEPTH, true, lo, 0);
            for (min, addr, idx) in &made {
                let s = byte(*min, SPECIAL_DEPTH);
                node.slots[s] = entry(Kind::Leaf, *addr);
                b.set_rev(*idx, saddr.plus(slot_offset(s)));
            }
            b.objects.push((saddr, Obj::Node(node)));
            children.push((lo, entry(Kind::Special, saddr), b.objects.len() - 1));
            specials += 1;
        }
        i = j;
    }
    b.fill(0, 0, &children);
    let mut exact = 0;
    let mut internal_cache_bytes = 0;
    let mut authors_bytes = 0;
    for (_, o) in &b.objects {
        match o {
            Obj::Node(n) => {
                exact += (!n.special) as u64;
                internal_cache_bytes += super::cache::entry_bytes(n);
                authors_bytes += super::cache::authors_node_bytes(n);
            }
            Obj::Leaf(_) => authors_bytes += LEAF_BYTES,
        }
    }
    Image {
        bytes: b.cursor,
        objects: b.objects,
        leaves,
        exact_nodes: exact,
        special_nodes: specials,
        internal_cache_bytes,
        authors_bytes,
        loaded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascending_inserts_leave_what_the_split_keeps() {
        // One window of 256 keys, leaves of 65: ascending inserts split every full leaf, so all
        // leaves but the last keep what the rule keeps; the last holds the rest (below 66).
        let keys: Vec<u64> = (256..512).collect();
        assert_eq!(inserted_leaf_sizes(&keys, 65, SplitRule::Even), vec![32, 32, 32, 32, 32, 32, 64]);
        assert_eq!(inserted_leaf_sizes(&keys, 65, SplitRule::CodeThreeQuarters), vec![48, 48, 48, 48, 64]);
    }

    #[test]
    fn random_inserts_tile_each_window_and_fill_between_the_split_and_full() {
        // Two windows, keys arriving in a scrambled order (a multiplicative permutation).
        let keys: Vec<u64> = (0..512u64).map(|i| 256 + (i * 167) % 512).collect();
        let sizes = inserted_leaf_sizes(&keys, 65, SplitRule::Even);
        assert_eq!(sizes.iter().sum::<usize>(), 512);
        assert!(sizes.iter().all(|n| (1..=65).contains(n)));
        // Each window's leaves sum to its 256 keys.
        let mut acc = 0;
        let first: usize = sizes
            .iter()
            .take_while(|n| {
                acc += **n;
                acc <= 256
            })
            .sum();
        assert_eq!(first, 256);
        // Fuller than ascending inserts (32 per leaf), as random-order B-tree loads are.
        assert!(sizes.len() < 16, "{sizes:?}");
        // The image takes the cut: as many leaves as sizes, every key loaded once.
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        let image = build(&sorted, 2, &LeafCut::Sizes(sizes.clone()));
        assert_eq!(image.leaves, sizes.len() as u64);
        assert_eq!(image.loaded.len(), 512);
    }
}
