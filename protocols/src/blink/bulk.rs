//! The bulk-loaded tree the run starts from, built by the plan and written into memory-node
//! GCLs at setup: pre-allocated GCL 0 is the meta page (the root's address), nodes follow
//! level by level from the leaves, each `bulk_fill` full.

use super::node::{Image, KEY_MAX};
use super::pages::PageId;

/// The value the bulk load stores under its key number `i`: unique, non-zero, and apart from
/// every client's write stamp (`common::bench::write_stamp` stays below 2^62).
pub fn load_value(i: u64) -> u64 {
    1 << 62 | (i + 1)
}

/// Nodes as (pre-allocated GCL index, image); index 0 is the meta page.
pub struct BulkTree {
    pub nodes: Vec<(u64, Image)>,
    pub root: u64,
}

/// Nodes the bulk load of `keys` keys needs (without the meta page).
pub fn node_count(keys: u64, per_node: usize) -> u64 {
    let per = per_node.max(2) as u64;
    let mut level = keys.div_ceil(per).max(1);
    let mut total = level;
    while level > 1 {
        level = level.div_ceil(per);
        total += level;
    }
    total
}

/// Build over `keys` (ascending, with their values); `page` maps a GCL index to its page id.
pub fn build(keys: &[(u64, u64)], per_node: usize, page: impl Fn(u64) -> PageId) -> BulkTree {
    let per = per_node.max(2);
    let mut next = 1u64;
    let mut nodes = Vec::new();
    // (low fence, gcl index) of the level just built.
    let mut level_nodes: Vec<(u64, u64)> = Vec::new();
    let chunks: Vec<&[(u64, u64)]> = if keys.is_empty() { vec![&[]] } else { keys.chunks(per).collect() };
    let mut images: Vec<Image> = chunks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let low = if i == 0 { 0 } else { c[0].0 };
            Image {
                level: 0,
                low,
                high: KEY_MAX,
                right: PageId::NULL,
                keys: c.iter().map(|e| e.0).collect(),
                vals: c.iter().map(|e| e.1).collect(),
            }
        })
        .collect();
    let mut level = 0u8;
    loop {
        let first = next;
        next += images.len() as u64;
        let count = images.len();
        for i in 0..count {
            if i + 1 < count {
                images[i].high = images[i + 1].low;
                images[i].right = page(first + i as u64 + 1);
            }
        }
        level_nodes.clear();
        for (i, img) in images.drain(..).enumerate() {
            level_nodes.push((img.low, first + i as u64));
            nodes.push((first + i as u64, img));
        }
        if level_nodes.len() == 1 {
            return BulkTree { nodes, root: level_nodes[0].1 };
        }
        level += 1;
        images = level_nodes
            .chunks(per)
            .map(|c| Image {
                level,
                low: c[0].0,
                high: KEY_MAX,
                right: PageId::NULL,
                keys: c.iter().map(|e| e.0).collect(),
                vals: c.iter().map(|e| page(e.1).0).collect(),
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_chain_and_counts_agree() {
        let keys: Vec<(u64, u64)> = (1..=50).map(|k| (k * 10, load_value(k))).collect();
        let t = build(&keys, 4, |i| PageId(i + 100));
        assert_eq!(t.nodes.len() as u64, node_count(50, 4));
        let root = &t.nodes.iter().find(|(i, _)| *i == t.root).unwrap().1;
        assert_eq!((root.low, root.high, root.right), (0, KEY_MAX, PageId::NULL));
        assert!(root.level >= 2);
        let leaves: Vec<&Image> = t.nodes.iter().map(|(_, n)| n).filter(|n| n.is_leaf()).collect();
        assert_eq!(leaves.iter().map(|n| n.count()).sum::<usize>(), 50);
        assert!(leaves.windows(2).all(|w| w[0].high == w[1].low));
        assert_eq!(build(&[], 4, PageId).nodes.len(), 1);
    }
}
