//! Dolphin's invariants over the memory nodes' image (the simulator's view of all memory).
//!
//! [`walk`] follows slots from the root and checks, always (after every event in check mode):
//! * **ART**: a node's depth exceeds its parent's, its prefix extends the path to it, exact
//!   nodes sit above depth 7 and special nodes at 7; nothing is reachable twice;
//! * **special nodes consistent with their leaves**: slot 0 is used, the entry byte of a leaf
//!   is the last byte of its `min`, and its `max` is one below the next used slot (or the
//!   window's end) — unless an SMO holds the leaf (its range line lands before the new leaf is
//!   linked only in case 1; in case 2 the link comes first);
//! * **keys within a leaf's min/max** and inside its window (same first 7 bytes), a leaf
//!   hanging under an ART node spanning its whole window, and no key in two reachable leaves —
//!   each excused only while an SMO holds the leaf (moved keys are cleared after the link);
//! * **Spear** in its states: one SMO_STATUS and one shared count per client at most.
//!
//! At quiescence ([`walk`] with `quiescent`) also: every `rev_ptr` names the slot that points
//! to its node, every lock word is 0, and every claimed key has a value.
//!
//! [`check_cache`]: a cached slot that differs from memory leads to a node whose `rev_ptr`
//! differs from that slot (validation catches it) or to one still reachable in the tree (using
//! it is harmless) — a cached path agrees with the remote tree after validation.

use std::collections::{BTreeMap, BTreeSet};

use super::cache::IndexCache;
use super::layout::*;
use crate::harness::Memory;

pub struct Contents {
    /// key → value over every reachable leaf.
    pub keys: BTreeMap<u64, u64>,
    /// Every reachable object.
    pub reachable: BTreeSet<Gaddr>,
    pub leaves: u64,
}

fn words(memory: Memory, at: Gaddr, n: usize) -> Vec<u64> {
    (0..n).map(|i| memory(at.plus(i as u64 * 8).remote())).collect()
}

pub fn read_node(memory: Memory, at: Gaddr) -> NodeImage {
    NodeImage::decode(&words(memory, at, NODE_WORDS))
}

pub fn read_leaf(memory: Memory, at: Gaddr) -> LeafImage {
    LeafImage::decode(&words(memory, at, LEAF_WORDS))
}

fn smo_held(leaf: &LeafImage) -> bool {
    (leaf.lock as i64) < SMO_UP_LIMIT
}

pub fn walk(memory: Memory, quiescent: bool) -> Result<Contents, String> {
    let mut c = Contents { keys: BTreeMap::new(), reachable: BTreeSet::new(), leaves: 0 };
    c.reachable.insert(ROOT);
    let root = read_node(memory, ROOT);
    if root.depth != 0 || root.special || root.prefix != 0 {
        return Err(format!(
            "root header is depth {} special {} prefix {:#x}",
            root.depth, root.special, root.prefix
        ));
    }
    node(memory, ROOT, &root, quiescent, &mut c)?;
    Ok(c)
}

fn node(memory: Memory, at: Gaddr, n: &NodeImage, quiescent: bool, c: &mut Contents) -> Result<(), String> {
    if n.special && n.slots[0] == 0 {
        return Err(format!("special node {at:?} (prefix {:#x}) has no leaf at byte 0", n.prefix));
    }
    for i in 0..NODE_SLOTS {
        let e = n.slots[i];
        let Some(kind) = entry_kind(e) else {
            if e != 0 {
                return Err(format!("node {at:?} slot {i} holds a malformed entry {e:#x}"));
            }
            continue;
        };
        let slot = at.plus(slot_offset(i));
        let child = entry_addr(e);
        if !c.reachable.insert(child) {
            return Err(format!("{child:?} is reachable twice (again from {at:?} slot {i})"));
        }
        // The keys this slot routes: [lo, hi].
        let (lo, hi) = n.slot_range(i);
        if kind == Kind::Leaf {
            let leaf = read_leaf(memory, child);
            c.leaves += 1;
            leaf_checks(child, &leaf, (lo, hi), n.special, quiescent, c)?;
            if quiescent && leaf.rev != slot.word() {
                return Err(format!("leaf {child:?}: rev_ptr {:#x} is not its slot {slot:?}", leaf.rev));
            }
            continue;
        }
        let m = read_node(memory, child);
        let want_special = kind == Kind::Special;
        if m.special != want_special || m.depth <= n.depth || (m.special != (m.depth == SPECIAL_DEPTH)) {
            return Err(format!(
                "node {child:?} (depth {}, special {}) under {at:?} (depth {}) via a {kind:?} entry",
                m.depth, m.special, n.depth
            ));
        }
        if m.prefix != prefix(m.prefix, m.depth) || m.prefix < lo || m.prefix > hi {
            return Err(format!(
                "node {child:?} prefix {:#x} is outside its slot's range [{lo:#x}, {hi:#x}]",
                m.prefix
            ));
        }
        if quiescent && m.rev != slot.word() {
            return Err(format!("node {child:?}: rev_ptr {:#x} is not its slot {slot:?}", m.rev));
        }
        node(memory, child, &m, quiescent, c)?;
    }
    Ok(())
}

fn leaf_checks(
    at: Gaddr,
    leaf: &LeafImage,
    (lo, hi): (u64, u64),
    under_special: bool,
    quiescent: bool,
    c: &mut Contents,
) -> Result<(), String> {
    let lock = leaf.lock as i64;
    // Each client adds at most one SMO_STATUS (then backs off) and one shared count.
    if !(1024 * SMO_STATUS..=1 << 20).contains(&lock) {
        return Err(format!("leaf {at:?}: Spear word {lock} is in no state"));
    }
    if quiescent && lock != 0 {
        return Err(format!("leaf {at:?}: Spear word {lock} at quiescence"));
    }
    let held = smo_held(leaf);
    let (wlo, whi) = window(leaf.min);
    if under_special {
        if leaf.min != lo || (leaf.max != hi && !held) {
            return Err(format!(
                "leaf {at:?} has [{:#x}, {:#x}] but its special parent routes [{lo:#x}, {hi:#x}]",
                leaf.min, leaf.max
            ));
        }
    } else if (leaf.min != wlo || leaf.max != whi || wlo < lo || whi > hi) && !held {
        return Err(format!(
            "leaf {at:?} hanging under an ART node has [{:#x}, {:#x}], not its window inside [{lo:#x}, {hi:#x}]",
            leaf.min, leaf.max
        ));
    }
    for x in 0..LEAF_SLOTS {
        let k = leaf.keys[x];
        if k == 0 {
            continue;
        }
        let inside = leaf.covers(k) && k >= wlo && k <= whi;
        if !inside && !held {
            return Err(format!(
                "leaf {at:?} [{:#x}, {:#x}] holds key {k:#x} in slot {x}",
                leaf.min, leaf.max
            ));
        }
        if quiescent && leaf.values[x] == 0 {
            return Err(format!("leaf {at:?}: key {k:#x} in slot {x} has no value at quiescence"));
        }
        if c.keys.insert(k, leaf.values[x]).is_some() && !held {
            return Err(format!("key {k:#x} is in two reachable leaf slots (again in {at:?} slot {x})"));
        }
    }
    Ok(())
}

/// See the module docs. `reachable` from a [`walk`] of the same memory.
pub fn check_cache(memory: Memory, cache: &IndexCache, reachable: &BTreeSet<Gaddr>) -> Result<(), String> {
    for cached in cache.entries() {
        let header = words(memory, cached.addr, N_SLOTS);
        let mut remote = NodeImage::decode(&[header, vec![0; NODE_SLOTS]].concat());
        remote.rev = 0;
        if remote.depth != cached.node.depth
            || remote.prefix != cached.node.prefix
            || remote.special != cached.node.special
        {
            return Err(format!("cached node {:?} has a header memory does not", cached.addr));
        }
        for i in 0..NODE_SLOTS {
            let e = cached.node.slots[i];
            if e == 0 || e == memory(cached.addr.plus(slot_offset(i)).remote()) {
                continue;
            }
            let child = entry_addr(e);
            let rev = memory(child.remote());
            let slot = cached.addr.plus(slot_offset(i));
            if rev == slot.word() && !reachable.contains(&child) {
                return Err(format!(
                    "cached slot {i} of {:?} leads to {child:?}, which claims that slot but is unreachable",
                    cached.addr
                ));
            }
        }
    }
    Ok(())
}
