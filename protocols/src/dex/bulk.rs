//! The bulk-loaded tree, built bottom-up before any client runs ([CHOICE], as Sherman's
//! `bulk.rs`: the shape sorted single inserts with 50/50 splits leave, `bulk_fill` full),
//! with DEX's two placement rules:
//!
//! * leaves are cut at partition boundaries, so every leaf belongs to exactly one compute
//!   server (each partition gets at least one leaf, even with no keys);
//! * every subtree rooted at level `subtree_level` (M) lives on one memory server; nodes at or
//!   above M go round-robin over the memory servers (a tree lower than M lives on one).

use super::config::{Config, VERSIONS};
use super::partition::Partitions;
use crate::sherman::bulk::bulk_value;
use crate::sherman::layout::{Gaddr, Layout, KEY_MAX};
use crate::sherman::node::{Node, Slot};

pub struct BulkTree {
    pub nodes: Vec<(Gaddr, Node)>,
    pub root: Gaddr,
    /// Frames used on each memory node.
    pub frames_per_mn: Vec<u64>,
}

struct Proto {
    lowest: u64,
    keys: Vec<u64>,
    children: Vec<usize>,
    mn: usize,
}

fn fills(config: &Config) -> (usize, usize) {
    let leaf = ((VERSIONS.leaf_cap() as f64 * config.bulk_fill) as usize).clamp(1, config.leaf_split() - 1);
    let inner =
        ((VERSIONS.internal_cap() as f64 * config.bulk_fill) as usize).clamp(2, config.internal_split() - 1);
    (leaf, inner)
}

/// The levels of the tree over `keys` (ascending): leaves first, each node's lowest fence.
fn shape(config: &Config, parts: Partitions, keys: &[u64]) -> Vec<Vec<Proto>> {
    let (leaf_fill, inner_fill) = fills(config);
    let mut leaves = Vec::new();
    let mut rest = keys;
    for (lo, hi) in parts.segments() {
        let n = rest.iter().take_while(|k| **k < hi).count();
        let (mine, after) = rest.split_at(n);
        rest = after;
        if mine.is_empty() {
            leaves.push(Proto { lowest: lo, keys: Vec::new(), children: Vec::new(), mn: 0 });
        }
        for (i, chunk) in mine.chunks(leaf_fill).enumerate() {
            let lowest = if i == 0 { lo } else { chunk[0] };
            leaves.push(Proto { lowest, keys: chunk.to_vec(), children: Vec::new(), mn: 0 });
        }
    }
    let mut levels = vec![leaves];
    while levels.last().map(|l| l.len()).unwrap_or(0) > 1 {
        let below = levels.last().expect("non-empty");
        let upper: Vec<Proto> = (0..below.len())
            .collect::<Vec<_>>()
            .chunks(inner_fill)
            .map(|g| Proto { lowest: below[g[0]].lowest, keys: Vec::new(), children: g.to_vec(), mn: 0 })
            .collect();
        levels.push(upper);
    }
    levels
}

/// How many frames each memory node needs for the bulk load.
pub fn frames_needed(config: &Config, parts: Partitions, keys: &[u64], mns: usize) -> Vec<u64> {
    let mut levels = shape(config, parts, keys);
    place(config, &mut levels, mns)
}

fn place(config: &Config, levels: &mut [Vec<Proto>], mns: usize) -> Vec<u64> {
    let top = levels.len() - 1;
    let mut rr = 0usize;
    let mut count = vec![0u64; mns];
    for level in (0..=top).rev() {
        let (lower, upper) = levels.split_at_mut(level + 1);
        let this = &mut lower[level];
        if level >= config.subtree_level as usize || level == top {
            for p in this.iter_mut() {
                p.mn = rr % mns;
                rr += 1;
            }
        }
        if let Some(parents) = upper.first() {
            if level < config.subtree_level as usize && level != top {
                for parent in parents {
                    for &c in &parent.children {
                        this[c].mn = parent.mn;
                    }
                }
            }
        }
        for p in this.iter() {
            count[p.mn] += 1;
        }
    }
    count
}

pub fn build(config: &Config, parts: Partitions, layout: &Layout, keys: &[u64]) -> BulkTree {
    let mns = layout.memory_nodes.len();
    let mut levels = shape(config, parts, keys);
    let frames_per_mn = place(config, &mut levels, mns);
    let mut next = vec![0u64; mns];
    let addrs: Vec<Vec<Gaddr>> = levels
        .iter()
        .map(|l| {
            l.iter()
                .map(|p| {
                    let a = layout.frame(p.mn, next[p.mn]);
                    next[p.mn] += 1;
                    a
                })
                .collect()
        })
        .collect();
    let mut rank = 0u64;
    let mut nodes = Vec::new();
    for (level, protos) in levels.iter().enumerate() {
        for (i, p) in protos.iter().enumerate() {
            let highest = protos.get(i + 1).map(|n| n.lowest).unwrap_or(KEY_MAX);
            let sibling = addrs[level].get(i + 1).copied().unwrap_or(Gaddr::NULL);
            let mut node = if level == 0 {
                let mut n = Node::empty_leaf(VERSIONS, p.lowest, highest);
                for (j, k) in p.keys.iter().enumerate() {
                    n.slots[j] = Slot { key: *k, value: bulk_value(rank), version: 0 };
                    rank += 1;
                }
                n
            } else {
                let below = &levels[level - 1];
                Node {
                    level: level as u8,
                    leftmost: addrs[level - 1][p.children[0]],
                    sibling: Gaddr::NULL,
                    lowest: p.lowest,
                    highest,
                    version: 1,
                    slots: Vec::new(),
                    children: p.children[1..]
                        .iter()
                        .map(|c| (below[*c].lowest, addrs[level - 1][*c]))
                        .collect(),
                }
            };
            node.version = 1;
            node.sibling = sibling;
            nodes.push((addrs[level][i], node));
        }
    }
    let top = levels.len() - 1;
    BulkTree { root: addrs[top][0], nodes, frames_per_mn }
}
