//! Structural invariants over memory after a run, and the final state against the histories.
//!
//! [`walk`] visits the tree from the root and checks, at every node: it is not deleted, its
//! header depth is the number of key bytes its path consumed, its type agrees with the slot that
//! points to it and covers every occupied slot, slot bytes are distinct, and children's
//! rev_ptrs name the slot that holds them; at every leaf: checksum valid, valid bit set, lock
//! clear, and the key carries every byte of the path to it (so every key is reachable along its
//! prefix path). It returns the key → value map the tree holds.

use std::collections::BTreeMap;

use super::layout::{
    unpack_addr, Entry, Header, LeafView, NodeType, LEAF_HEADER_WORDS, LEAF_LOCK, SLOTS_OFFSET,
};
use crate::harness::{LoggedOp, Memory};
use crate::nic::RemoteAddr;

/// Every key → value word the tree holds, or what is broken.
pub fn walk(
    memory: Memory,
    root: Entry,
    root_at: RemoteAddr,
    value_words: usize,
) -> Result<BTreeMap<u64, u64>, String> {
    let mut out = BTreeMap::new();
    // (slot address, entry, path prefix, bytes known)
    let mut stack = vec![(root_at, root, 0u64, 0usize)];
    while let Some((at, e, prefix, known)) = stack.pop() {
        let addr = e.addr();
        let rev_ptr = unpack_addr(memory(addr));
        if rev_ptr != at {
            return Err(format!("{addr}: rev_ptr {rev_ptr} does not name its slot {at}"));
        }
        if e.is_leaf() {
            let words: Vec<u64> =
                (0..LEAF_HEADER_WORDS + value_words).map(|i| memory(addr.add(8 * i as u64))).collect();
            let leaf = LeafView::parse(&words);
            if !leaf.consistent || !leaf.valid() || leaf.meta & LEAF_LOCK != 0 {
                return Err(format!(
                    "leaf {addr} of key {:#x}: checksum ok {}, meta {:#x}",
                    leaf.key, leaf.consistent, leaf.meta
                ));
            }
            let path_mask = if known >= 8 { u64::MAX } else { !(u64::MAX >> (8 * known)) };
            if leaf.key & path_mask != prefix & path_mask {
                return Err(format!(
                    "key {:#x} at {addr} is off its path {prefix:#x} ({known} bytes)",
                    leaf.key
                ));
            }
            if out.insert(leaf.key, leaf.value).is_some() {
                return Err(format!("key {:#x} has two leaves", leaf.key));
            }
            continue;
        }
        let header = Header(memory(addr.add(8)));
        if header.node_type() == NodeType::DELETED || header.depth() != known {
            return Err(format!("node {addr}: header {header:?} reached after {known} key bytes"));
        }
        if header.node_type() != e.node_type() {
            return Err(format!(
                "node {addr}: header type {:?}, slot says {:?}",
                header.node_type(),
                e.node_type()
            ));
        }
        let mut prefix = prefix;
        let mut depth = known;
        for i in 0..header.partial_len() {
            prefix |= (header.partial(i) as u64) << (56 - 8 * depth);
            depth += 1;
        }
        if depth > 7 {
            return Err(format!("node {addr}: prefix runs past the key"));
        }
        let mut seen = [false; 256];
        for i in 0..256 {
            let slot = addr.add(SLOTS_OFFSET + 8 * i as u64);
            let child = Entry(memory(slot));
            if child.is_null() {
                continue;
            }
            if i >= header.node_type().slots() {
                return Err(format!("node {addr} of type {:?} has slot {i} occupied", header.node_type()));
            }
            if std::mem::replace(&mut seen[child.partial() as usize], true) {
                return Err(format!("node {addr}: two slots for byte {:#x}", child.partial()));
            }
            let child_prefix = prefix | (child.partial() as u64) << (56 - 8 * depth);
            stack.push((slot, child, child_prefix, depth + 1));
        }
    }
    Ok(out)
}

/// Per key, the last value of its write chain (each write names the value it replaced, from
/// the initial 0); keys never written are absent.
pub fn chain_ends(history: &[&LoggedOp]) -> BTreeMap<u64, u64> {
    let mut next: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for op in history {
        if let (Some(v), Some(prev), Some(_)) = (op.write, op.seen, op.return_ns) {
            next.insert((op.key, prev), v);
        }
    }
    let keys: std::collections::BTreeSet<u64> = next.keys().map(|(k, _)| *k).collect();
    keys.into_iter()
        .map(|k| {
            let mut v = 0;
            let mut steps = 0;
            while let Some(n) = next.get(&(k, v)) {
                v = *n;
                steps += 1;
                if steps > next.len() {
                    break;
                }
            }
            (k, v)
        })
        .collect()
}
