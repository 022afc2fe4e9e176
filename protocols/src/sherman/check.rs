//! Structural invariants of the tree in memory after a quiesced run (`Plan::verify`): every
//! level is a chain of nodes with contiguous fences from 0 to +∞, separators sorted and inside
//! their node's fences, every node referenced by exactly the parent entry whose range equals its
//! fences (so every leaf is reachable from the root), leaf keys inside their fences and unique,
//! no key that a completed write stored missing from the leaves, and every lock word free.

use std::collections::{BTreeMap, BTreeSet};

use super::layout::{Gaddr, Layout, KEY_MAX, NODE_WORDS};
use super::node::Node;
use crate::harness::{LoggedOp, Memory, Violation};

/// Per key, at memory-node consistency (Sherman with `leaf_cache`): the writes form one chain
/// (each replaced the value the previous one wrote, read under the leaf lock; the first replaced
/// 0), so no update was lost; and every read returns the value of the chain's latest write
/// among those completed before the read was invoked, or of a later one already invoked when it
/// returned (a *regular* register). Ordering by the chain rather than by return times keeps
/// the check sound when a lock is handed over: the next writer may return before the previous.
pub fn check_regular_chained(log: &[LoggedOp]) -> Result<(), Violation> {
    let mut keys: BTreeMap<u64, (Vec<&LoggedOp>, Vec<&LoggedOp>)> = BTreeMap::new();
    for op in log {
        let e = keys.entry(op.key).or_default();
        if op.write.is_some() {
            e.0.push(op);
        } else {
            e.1.push(op);
        }
    }
    let chain_err = |m: String| Violation::new("write chain (no lost update)", m);
    for (key, (writes, reads)) in keys {
        // The chain: replaced value → the write that replaced it.
        let mut next: BTreeMap<u64, &LoggedOp> = BTreeMap::new();
        for w in writes.iter().filter(|w| w.seen.is_some()) {
            let seen = w.seen.unwrap_or(0);
            if let Some(other) = next.insert(seen, w) {
                return Err(chain_err(format!(
                    "key {key}: clients {} and {} both replaced value {seen:#x}: one write was lost",
                    other.client, w.client
                )));
            }
        }
        let mut order: Vec<&LoggedOp> = Vec::new();
        let mut value = 0;
        while let Some(w) = next.remove(&value) {
            order.push(w);
            value = w.write.unwrap_or(0);
        }
        if let Some((seen, w)) = next.iter().next() {
            return Err(chain_err(format!(
                "key {key}: client {}'s write replaced {seen:#x}, which no write of the chain from 0 wrote",
                w.client
            )));
        }
        for r in reads {
            let (Some(ret), Some(seen)) = (r.return_ns, r.seen) else { continue };
            let last = order.iter().rposition(|w| w.return_ns.is_some_and(|t| t < r.invoke_ns));
            let mut allowed = vec![last.map_or(0, |i| order[i].write.unwrap_or(0))];
            let later = last.map_or(0, |i| i + 1);
            allowed.extend(order[later..].iter().filter(|w| w.invoke_ns <= ret).filter_map(|w| w.write));
            // A write that never got to read under the lock (failed) may still have landed.
            allowed.extend(
                writes.iter().filter(|w| w.seen.is_none() && w.invoke_ns <= ret).filter_map(|w| w.write),
            );
            if !allowed.contains(&seen) {
                return Err(Violation::new(
                    "regular reads (no stale read after a completed write)",
                    format!(
                        "client {} read key {key} = {seen:#x} in [{}, {ret}] ns; allowed {allowed:x?} (the chain's latest write completed before it: {:?})",
                        r.client,
                        r.invoke_ns,
                        last.map(|i| (order[i].client, order[i].invoke_ns, order[i].return_ns))
                    ),
                ));
            }
        }
    }
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn op(client: u32, write: Option<u64>, seen: u64, inv: u64, ret: u64) -> LoggedOp {
        LoggedOp { client, key: 7, write, seen: Some(seen), invoke_ns: inv, return_ns: Some(ret) }
    }

    #[test]
    fn regular_chained_allows_overlap_and_hand_over_and_rejects_stale_and_lost() {
        let load = op(9, Some(1), 0, 0, 0);
        // w2 replaced 1, then w3 (handed the lock) replaced 2 and returned first.
        let (w2, w3) = (op(1, Some(2), 1, 10, 30), op(2, Some(3), 2, 12, 25));
        let base = [load, w2, w3];
        let with = |r: LoggedOp| base.iter().copied().chain([r]).collect::<Vec<_>>();
        // After both returned, only 3 (by return times alone w2 = 2 would look latest).
        assert!(check_regular_chained(&with(op(3, None, 3, 31, 32))).is_ok());
        assert!(check_regular_chained(&with(op(3, None, 2, 31, 32))).is_err());
        // Overlapping: old or new, either order across clients.
        assert!(check_regular_chained(&with(op(3, None, 1, 11, 20))).is_ok());
        assert!(check_regular_chained(&with(op(3, None, 3, 11, 20))).is_ok());
        // A second write replacing 1: lost update.
        let lost = with(op(4, Some(5), 1, 40, 41));
        assert!(check_regular_chained(&lost).unwrap_err().to_string().contains("lost"));
        // A write replacing a value nobody wrote.
        assert!(check_regular_chained(&with(op(4, Some(5), 99, 40, 41))).is_err());
    }
}
