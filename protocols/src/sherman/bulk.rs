//! Bulk load: the tree over the sorted initial keys, built bottom-up before any client runs
//! ([CHOICE]: Sherman's benchmark inserts sorted keys one by one, which with 50/50 splits leaves
//! leaves about half full (DEX spec §8 item 15); building the same shape directly saves
//! simulating millions of inserts. `bulk_fill` sets the fill). `bulk_shape: inserts` instead
//! builds every node exactly as inserting the loaded keys one by one in the workload's load
//! order leaves it ([`inserted_shape`]: Sherman's own benchmark warms up with hashed keys, i.e.
//! in random order).

use std::collections::BTreeMap;

use super::config::Config;
use super::layout::{Gaddr, Layout, KEY_MAX};
use super::node::{Node, Slot};

/// The initial value of the bulk-loaded key of rank `rank` (unique, never a tombstone).
pub fn bulk_value(rank: u64) -> u64 {
    1 << 62 | (rank + 1)
}

/// The bulk-loaded tree: every node with its address, and the root.
pub struct BulkTree {
    pub nodes: Vec<(Gaddr, Node)>,
    pub root: Gaddr,
    /// Level-1 nodes (what a full index cache would hold).
    pub level1: u64,
    /// Marlin: the bulk-loaded items `(address, key, value)` ([`attach_items`]).
    pub items: Vec<(Gaddr, u64, u64)>,
}

/// Entries per bulk leaf and children per bulk internal node.
pub fn fills(config: &Config) -> (usize, usize) {
    let v = config.versions;
    let leaf = ((v.leaf_cap() as f64 * config.bulk_fill) as usize).clamp(1, config.leaf_split() - 1);
    // `internal_split - 1` separators at most, plus the leftmost child.
    let inner = ((v.internal_cap() as f64 * config.bulk_fill) as usize).clamp(2, config.internal_split());
    (leaf, inner)
}

/// How many nodes the bulk load needs for `n` keys: (all, level 1).
pub fn node_count(config: &Config, n: u64) -> (u64, u64) {
    node_count_cut(config, n, 1)
}

/// [`node_count`] with the leaves cut into `parts` partitions.
pub fn node_count_cut(config: &Config, n: u64, parts: u64) -> (u64, u64) {
    let (leaf, inner) = fills(config);
    let mut count = n.div_ceil(leaf as u64).max(1) + parts.saturating_sub(1);
    let mut total = count;
    let mut level1 = 0;
    let mut level = 0;
    while count > 1 {
        count = count.div_ceil(inner as u64);
        total += count;
        level += 1;
        if level == 1 {
            level1 = count;
        }
    }
    (total, level1)
}

/// Build the tree over `keys` (ascending, distinct), nodes placed round-robin over memory nodes.
pub fn build(config: &Config, layout: &Layout, keys: &[u64]) -> BulkTree {
    build_cut(config, layout, keys, &[])
}

/// [`build`] where a leaf starts at every bound in `cuts` (P-Sherman's partition boundaries; DEX: "each leaf
/// node is exclusively owned by exactly one partition"), even when no key lies between two.
pub fn build_cut(config: &Config, layout: &Layout, keys: &[u64], cuts: &[u64]) -> BulkTree {
    let (leaf_fill, inner_fill) = fills(config);
    // (lowest fence, keys) per leaf: each partition's keys in runs of `leaf_fill`.
    let mut chunks: Vec<(u64, &[u64])> = Vec::new();
    let mut start = 0usize;
    for (p, lo) in std::iter::once(0u64).chain(cuts.iter().copied()).enumerate() {
        let end = cuts.get(p).map_or(keys.len(), |hi| keys.partition_point(|k| k < hi));
        let part = &keys[start.min(end)..end];
        if part.is_empty() {
            chunks.push((lo, part));
        }
        for (j, c) in part.chunks(leaf_fill).enumerate() {
            chunks.push((if j == 0 { lo } else { c[0] }, c));
        }
        start = end;
    }
    assemble(config, layout, &chunks, |_, n| vec![inner_fill; n.div_ceil(inner_fill)])
}

/// The tree over `keys` (ascending, distinct) with every node's fence and size as `shape`
/// gives them.
pub fn build_shaped(config: &Config, layout: &Layout, keys: &[u64], shape: &Shape) -> BulkTree {
    let mut chunks: Vec<(u64, &[u64])> = Vec::new();
    let mut at = 0;
    for (lowest, n) in &shape.leaves {
        chunks.push((*lowest, &keys[at..at + n]));
        at += n;
    }
    assert_eq!(at, keys.len(), "the shape's leaves must tile the keys");
    assemble(config, layout, &chunks, |height, _| shape.inner[height as usize - 1].clone())
}

/// Leaves from `chunks`, then each level above in groups of the sizes `groups(height, nodes
/// below)` returns (they tile the level below), nodes placed round-robin over memory nodes.
fn assemble(
    config: &Config,
    layout: &Layout,
    chunks: &[(u64, &[u64])],
    groups: impl Fn(u8, usize) -> Vec<usize>,
) -> BulkTree {
    let v = config.versions;
    let mns = layout.memory_nodes.len() as u64;
    let mut next = 0u64;
    let mut place = || {
        let a = layout.frame((next % mns) as usize, next / mns);
        next += 1;
        a
    };
    let mut nodes: Vec<(Gaddr, Node)> = Vec::new();
    // The current level as (lowest, address) per node, left to right.
    let mut level: Vec<(u64, Gaddr)> = Vec::new();
    let mut rank = 0u64;
    let first_leaf = nodes.len();
    for (lowest, chunk) in chunks.iter().copied() {
        let mut node = Node::empty_leaf(v, lowest, KEY_MAX);
        node.version = 1;
        for (j, k) in chunk.iter().enumerate() {
            node.slots[j] = Slot { key: *k, value: bulk_value(rank), version: 0 };
            rank += 1;
        }
        let addr = place();
        level.push((lowest, addr));
        nodes.push((addr, node));
    }
    link(&mut nodes[first_leaf..], &level);
    let mut height = 0u8;
    let mut level1 = 0;
    while level.len() > 1 {
        height += 1;
        let first = nodes.len();
        let mut upper = Vec::new();
        let mut at = 0;
        for size in groups(height, level.len()) {
            let group = &level[at..(at + size).min(level.len())];
            at += size;
            if group.is_empty() {
                break;
            }
            let lowest = if upper.is_empty() { 0 } else { group[0].0 };
            let node = Node {
                level: height,
                leftmost: group[0].1,
                sibling: Gaddr::NULL,
                lowest,
                highest: KEY_MAX,
                version: 1,
                slots: Vec::new(),
                children: group[1..].iter().map(|(k, a)| (*k, *a)).collect(),
            };
            let addr = place();
            upper.push((lowest, addr));
            nodes.push((addr, node));
        }
        assert_eq!(at.min(level.len()), level.len(), "each level's groups must tile the level below");
        link(&mut nodes[first..], &upper);
        if height == 1 {
            level1 = upper.len() as u64;
        }
        level = upper;
    }
    BulkTree { root: level[0].1, nodes, level1, items: Vec::new() }
}

/// Every node's size, level by level in key order: leaf `i` has lowest fence `leaves[i].0`
/// and `leaves[i].1` entries, node `j` of level `l + 1` has `inner[l][j]` children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    pub leaves: Vec<(u64, usize)>,
    pub inner: Vec<Vec<usize>>,
}

impl Shape {
    /// All nodes and level-1 nodes, as [`node_count`] gives them for a fill.
    pub fn node_count(&self) -> (u64, u64) {
        let inner: usize = self.inner.iter().map(Vec::len).sum();
        ((self.leaves.len() + inner) as u64, self.inner.first().map_or(0, |l| l.len() as u64))
    }
}

/// The tree inserting `arrivals` (distinct, in insertion order) one by one into an empty tree
/// leaves, split as the protocol splits (`tree.rs` `leaf_store`, `split.rs`): a leaf that
/// reaches `leaf_split` entries keeps the lower half of its sorted keys and a new right leaf
/// takes the rest, its first key the separator; an internal node that reaches
/// `internal_split` separators keeps the lower half, pushes the middle one up and a new right
/// node takes the rest; the root splits into a new root. The empty tree has a leaf starting at
/// 0 and one at every bound in `cuts` (P-Sherman's partitions), so no leaf crosses a bound.
pub fn inserted_shape(arrivals: &[u64], cuts: &[u64], leaf_split: usize, internal_split: usize) -> Shape {
    // Every leaf's keys live in one slab of `leaf_split` words per leaf (a Vec per leaf made
    // loading 1 M keys spend most of its time in the allocator); a leaf is its lowest fence
    // mapped to its slab slot and key count.
    let mut slab: Vec<u64> = Vec::with_capacity(arrivals.len() / leaf_split.max(1) * 2 * leaf_split);
    let new_slot = |slab: &mut Vec<u64>| {
        slab.resize(slab.len() + leaf_split, 0);
        slab.len() / leaf_split - 1
    };
    // Levels 1.. by lowest fence, each node holding its separators (level 0, the leaves, is
    // `leaves`; its place here stays empty so `levels[l]` is level `l`).
    let mut levels: Vec<BTreeMap<u64, Vec<u64>>> = vec![BTreeMap::new()];
    let mut leaves: BTreeMap<u64, (usize, usize)> = BTreeMap::from([(0, (new_slot(&mut slab), 0))]);
    for &cut in cuts.iter().filter(|c| **c > 0) {
        leaves.insert(cut, (new_slot(&mut slab), 0));
        add_separator(&mut levels, cut, internal_split);
    }
    for &k in arrivals {
        let (_, (slot, count)) = leaves.range_mut(..=k).next_back().expect("the first leaf starts at 0");
        let start = *slot * leaf_split;
        slab[start + *count] = k;
        *count += 1;
        if *count < leaf_split {
            continue;
        }
        // Keep the lower half of the sorted keys; a new right leaf takes the rest and starts
        // at its first key.
        let keep = leaf_split / 2;
        *count = keep;
        slab[start..start + leaf_split].sort_unstable();
        let separator = slab[start + keep];
        let upper = new_slot(&mut slab);
        slab.copy_within(start + keep..start + leaf_split, upper * leaf_split);
        leaves.insert(separator, (upper, leaf_split - keep));
        add_separator(&mut levels, separator, internal_split);
    }
    Shape {
        leaves: leaves.into_iter().map(|(lowest, (_, count))| (lowest, count)).collect(),
        inner: levels[1..].iter().map(|l| l.values().map(|s| s.len() + 1).collect()).collect(),
    }
}

/// A fixed pseudo-random order of `keys` (Fisher-Yates driven by SplitMix64 from a constant):
/// the tree a random-order load leaves, the same in every run.
pub fn shuffle(keys: &mut [u64]) {
    let mut state: u64 = 0x5348_4552_4d41_4e21;
    for i in (1..keys.len()).rev() {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let j = (crate::workload::mix64(state) % (i as u64 + 1)) as usize;
        keys.swap(i, j);
    }
}

/// A new node starting at `separator` on the level below level 1: insert the separator into
/// its parent, splitting upwards (and growing a root) as `internal_split` demands.
fn add_separator(levels: &mut Vec<BTreeMap<u64, Vec<u64>>>, mut separator: u64, internal_split: usize) {
    let mut l = 1;
    loop {
        if l == levels.len() {
            levels.push(BTreeMap::from([(0, vec![separator])]));
            return;
        }
        let (_, seps) = levels[l].range_mut(..=separator).next_back().expect("level starts at 0");
        let i = seps.partition_point(|s| *s < separator);
        seps.insert(i, separator);
        if seps.len() < internal_split {
            return;
        }
        let m = seps.len() / 2;
        let right = seps.split_off(m + 1);
        separator = seps.pop().expect("m < len");
        levels[l].insert(separator, right);
        l += 1;
    }
}

/// Marlin: how many items the bulk-loaded leaves of each memory node hold (an item lives on
/// its leaf's memory node).
pub fn items_per_memory_node(tree: &BulkTree, layout: &Layout) -> Vec<u64> {
    let mut n = vec![0u64; layout.memory_nodes.len()];
    for (addr, node) in tree.nodes.iter().filter(|(_, n)| n.is_leaf()) {
        let mn = layout.memory_nodes.iter().position(|m| *m == addr.node()).unwrap_or(0);
        n[mn] += node.slots.iter().filter(|s| s.value != 0).count() as u64;
    }
    n
}

/// Marlin: give every bulk-loaded entry an item on its leaf's memory node (`layout.items`
/// set) and make the slot point to it.
pub fn attach_items(tree: &mut BulkTree, layout: &Layout) {
    let mut next = vec![0u64; layout.memory_nodes.len()];
    for (addr, node) in tree.nodes.iter_mut().filter(|(_, n)| n.is_leaf()) {
        let mn = layout.memory_nodes.iter().position(|m| *m == addr.node()).unwrap_or(0);
        for slot in node.slots.iter_mut().filter(|s| s.value != 0) {
            let item = layout.item(mn, next[mn]);
            next[mn] += 1;
            tree.items.push((item, slot.key, slot.value));
            slot.value = item.0;
        }
    }
}

/// Siblings and highest fences along one level.
fn link(nodes: &mut [(Gaddr, Node)], level: &[(u64, Gaddr)]) {
    for (node, (lowest, addr)) in nodes.iter_mut().zip(level.iter().skip(1)) {
        node.1.highest = *lowest;
        node.1.sibling = *addr;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiles(shape: &Shape, n: usize) {
        assert_eq!(shape.leaves.iter().map(|l| l.1).sum::<usize>(), n);
        let mut below = shape.leaves.len();
        for level in &shape.inner {
            assert_eq!(level.iter().sum::<usize>(), below, "a level's children tile the level below");
            below = level.len();
        }
        assert_eq!(below, 1, "one root");
    }

    #[test]
    fn ascending_inserts_leave_half_full_leaves() {
        let keys: Vec<u64> = (1..=1000).collect();
        let shape = inserted_shape(&keys, &[], 30, 60);
        tiles(&shape, 1000);
        let (last, full) = shape.leaves.split_last().unwrap();
        assert!(full.iter().all(|l| l.1 == 15), "{full:?}");
        assert!((15..30).contains(&last.1));
    }

    #[test]
    fn random_inserts_leave_leaves_about_ln2_full() {
        let mut keys: Vec<u64> = (1..=40_000).collect();
        shuffle(&mut keys);
        let shape = inserted_shape(&keys, &[], 53, 60);
        tiles(&shape, 40_000);
        let fill = 40_000.0 / (shape.leaves.len() as f64 * 53.0);
        // Yao's random-insertion B-tree: ln 2 ≈ 0.69 of capacity.
        assert!((0.62..0.76).contains(&fill), "leaf fill {fill}");
        assert!(shape.leaves.iter().all(|l| l.1 >= 26 && l.1 < 53));
        // Partitioned: a leaf starts at every bound, none holds keys from both sides of one.
        let cuts = [10_000, 20_000, 30_000];
        let shape = inserted_shape(&keys, &cuts, 53, 4);
        tiles(&shape, 40_000);
        for c in cuts {
            assert!(shape.leaves.iter().any(|l| l.0 == c), "no leaf starts at {c}");
        }
    }

    /// The leaves as a plain simulation keeps them (every leaf's keys, sorted at a split): the
    /// rank-based [`inserted_shape`] must leave the same tree.
    fn reference_shape(arrivals: &[u64], cuts: &[u64], leaf_split: usize, internal_split: usize) -> Shape {
        let mut levels: Vec<BTreeMap<u64, Vec<u64>>> = vec![BTreeMap::new()];
        let mut leaves: BTreeMap<u64, Vec<u64>> = BTreeMap::from([(0, Vec::new())]);
        for &cut in cuts.iter().filter(|c| **c > 0) {
            leaves.insert(cut, Vec::new());
            add_separator(&mut levels, cut, internal_split);
        }
        for &k in arrivals {
            let (_, keys) = leaves.range_mut(..=k).next_back().unwrap();
            keys.push(k);
            if keys.len() == leaf_split {
                keys.sort_unstable();
                let upper = keys.split_off(keys.len() / 2);
                let separator = upper[0];
                leaves.insert(separator, upper);
                add_separator(&mut levels, separator, internal_split);
            }
        }
        Shape {
            leaves: leaves.iter().map(|(lo, keys)| (*lo, keys.len())).collect(),
            inner: levels[1..].iter().map(|l| l.values().map(|s| s.len() + 1).collect()).collect(),
        }
    }

    #[test]
    fn rank_based_shape_matches_the_plain_simulation() {
        for (n, leaf_split, internal_split, stride) in [(5_000u64, 53, 60, 1), (3_000, 7, 4, 3), (1, 2, 3, 1)]
        {
            let mut keys: Vec<u64> = (1..=n).map(|i| i * stride).collect();
            let ascending = keys.clone();
            shuffle(&mut keys);
            let cuts = [n * stride / 3, n * stride / 3 + 1, 2 * n * stride / 3];
            for arrivals in [&ascending, &keys] {
                for cuts in [&cuts[..], &[]] {
                    assert_eq!(
                        inserted_shape(arrivals, cuts, leaf_split, internal_split),
                        reference_shape(arrivals, cuts, leaf_split, internal_split),
                        "n {n}, splits {leaf_split}/{internal_split}, cuts {cuts:?}"
                    );
                }
            }
        }
    }
}
