//! Bulk load: the tree over the sorted initial keys, built bottom-up before any client runs
//! ([CHOICE]: Sherman's benchmark inserts sorted keys one by one, which with 50/50 splits leaves
//! leaves about half full (DEX spec §8 item 15); building the same shape directly saves
//! simulating millions of inserts. `bulk_fill` sets the fill).

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
    let v = config.versions;
    let (leaf_fill, inner_fill) = fills(config);
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
        for group in level.chunks(inner_fill) {
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
        link(&mut nodes[first..], &upper);
        if height == 1 {
            level1 = upper.len() as u64;
        }
        level = upper;
    }
    BulkTree { root: level[0].1, nodes, level1, items: Vec::new() }
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
