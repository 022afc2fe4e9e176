//! Structural invariants of the tree in memory after a quiesced run (`Plan::verify`): every
//! level is a chain of nodes with contiguous fences from 0 to +∞, separators sorted and inside
//! their node's fences, every node referenced by exactly the parent entry whose range equals its
//! fences (so every leaf is reachable from the root), leaf keys inside their fences and unique,
//! no key that a completed write stored missing from the leaves, and every lock word free.

use std::collections::{BTreeMap, BTreeSet};

use super::layout::{Gaddr, Layout, KEY_MAX, NODE_WORDS};
use super::node::Node;
use crate::harness::Memory;

pub(crate) fn read(layout: &Layout, memory: Memory, addr: Gaddr) -> Result<Node, String> {
    if !layout.is_frame(addr) {
        return Err(format!("pointer {addr} names no node frame"));
    }
    let r = addr.remote();
    let words: Vec<u64> = (0..NODE_WORDS).map(|i| memory(r.add(i as u64 * 8))).collect();
    Node::decode(layout.versions, &words).map_err(|t| format!("node {addr} is torn at rest ({t:?})"))
}

/// The leaves' contents (key → value, tombstones included) if the tree is well formed.
pub fn check_tree(layout: &Layout, memory: Memory) -> Result<BTreeMap<u64, u64>, String> {
    let root = Gaddr(memory(layout.root_ptr()));
    let root_node = read(layout, memory, root)?;
    if root_node.lowest != 0 || root_node.highest != KEY_MAX || !root_node.sibling.is_null() {
        return Err(format!("root {root} does not span the whole key range"));
    }
    // Expected fences of each node of the level below, from the parents.
    let mut expected: BTreeMap<Gaddr, (u64, u64)> = BTreeMap::new();
    expected.insert(root, (0, KEY_MAX));
    let mut first = root;
    let mut contents = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for level in (0..=root_node.level).rev() {
        let mut below: BTreeMap<Gaddr, (u64, u64)> = BTreeMap::new();
        let mut next_first = Gaddr::NULL;
        let mut addr = first;
        let mut prev_highest = 0u64;
        let mut count = 0usize;
        while !addr.is_null() {
            if !seen.insert(addr) {
                return Err(format!("node {addr} appears twice (a sibling cycle or shared child)"));
            }
            let node = read(layout, memory, addr)?;
            if node.level != level {
                return Err(format!(
                    "node {addr} at level {} sits in the chain of level {level}",
                    node.level
                ));
            }
            if node.lowest != prev_highest || node.lowest >= node.highest {
                return Err(format!(
                    "level {level}: node {addr} has fences [{}, {}) after a neighbour ending at {prev_highest}",
                    node.lowest, node.highest
                ));
            }
            match expected.remove(&addr) {
                Some(f) if f == (node.lowest, node.highest) => {}
                Some(f) => {
                    return Err(format!(
                        "node {addr} has fences [{}, {}) but its parent routes [{}, {}) to it",
                        node.lowest, node.highest, f.0, f.1
                    ))
                }
                None => return Err(format!("node {addr} at level {level} is not referenced by any parent")),
            }
            if level == 0 {
                for s in node.slots.iter().filter(|s| s.value != 0) {
                    if !node.covers(s.key) {
                        return Err(format!("leaf {addr} holds key {} outside its fences", s.key));
                    }
                    if contents.insert(s.key, s.value).is_some() {
                        return Err(format!("key {} is stored twice", s.key));
                    }
                }
            } else {
                let mut lo = node.lowest;
                let mut child = node.leftmost;
                if next_first.is_null() {
                    next_first = child;
                }
                for (k, c) in node.children.iter().chain(std::iter::once(&(node.highest, Gaddr::NULL))) {
                    if *k <= lo {
                        return Err(format!("node {addr}: separator {k} not above {lo}"));
                    }
                    if below.insert(child, (lo, *k)).is_some() {
                        return Err(format!("node {addr} references child {child} twice"));
                    }
                    lo = *k;
                    child = *c;
                }
            }
            prev_highest = node.highest;
            addr = node.sibling;
            count += 1;
        }
        if prev_highest != KEY_MAX {
            return Err(format!("level {level} ends at {prev_highest}, not +∞ ({count} nodes)"));
        }
        if let Some((a, _)) = expected.iter().next() {
            return Err(format!("node {a} is referenced at level {level} but not in its chain"));
        }
        expected = below;
        first = next_first;
    }
    Ok(contents)
}

/// Every lock word of every memory node is 0. Only for locks in host memory: the harness's
/// memory view does not reach NIC device memory.
pub fn check_locks_free(layout: &Layout, memory: Memory) -> Result<(), String> {
    if layout.on_chip_locks {
        return Ok(());
    }
    for mn in &layout.memory_nodes {
        for i in 0..layout.locks as u64 {
            let addr = layout.lock_word(*mn, i);
            let v = memory(addr);
            if v != 0 {
                return Err(format!("lock {i} of memory node {} still held by tag {v:#x}", mn.0));
            }
        }
    }
    Ok(())
}

/// P-Sherman: no leaf straddles a partition bound (`bounds`, ascending), so each leaf has one
/// writer compute node — what lets leaf writes skip the RDMA lock. Run after [`check_tree`].
pub fn check_leaves_owned(layout: &Layout, memory: Memory, bounds: &[u64]) -> Result<(), String> {
    let mut addr = Gaddr(memory(layout.root_ptr()));
    loop {
        let node = read(layout, memory, addr)?;
        if node.is_leaf() {
            break;
        }
        addr = node.leftmost;
    }
    while !addr.is_null() {
        let leaf = read(layout, memory, addr)?;
        if let Some(b) = bounds.iter().find(|b| leaf.lowest < **b && **b < leaf.highest) {
            return Err(format!(
                "leaf {addr} with fences [{}, {}) straddles the partition bound {b}",
                leaf.lowest, leaf.highest
            ));
        }
        addr = leaf.sibling;
    }
    Ok(())
}
