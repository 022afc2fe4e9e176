//! DEX's invariants.
//!
//! After every simulator event (check mode), over each compute server's cache:
//!
//! * **path contiguity**: a HOT frame is swizzled into a HOT parent (or is the root), and every
//!   swizzled pointer names a HOT frame of that node, whose parent is the frame holding the
//!   pointer, and which the node really has as a child;
//! * **clean cooling**: a COOLING page is clean, has no swizzled children and sits in exactly
//!   one cooling-map bucket, none over its slots;
//! * **one copy**: the mapping table names each frame under its own node ID, and no two live
//!   frames hold the same node;
//! * **ownership**: every cached leaf lies inside one of this server's ranges (two after a move
//!   to a server that owns a partition already); only non-shared pages are ever dirty;
//! * **repartition safety** (the old owner, once it handed a range over).
//!
//! After a run with histories: **scans complete** (a key live for the whole run between a
//! scan's start and its last returned key was returned). After a quiesced run, over memory:
//! the tree's structure (Sherman's `check_tree`: fences, sorted separators, reachability),
//! every RDMA lock free, no leaf crossing a partition boundary, and no key a completed write
//! stored missing.

use serde::{Deserialize, Serialize};

use super::cache::{Cache, Entry, State};
use super::partition::Partitions;
use crate::harness::Memory;
use crate::sherman::layout::{Gaddr, Layout, NODE_WORDS};
use crate::sherman::node::Node;

pub fn check_cache(c: &Cache, parts: Partitions, cn: u16) -> Result<(), String> {
    let mut holders: Vec<(Gaddr, usize)> = Vec::with_capacity(c.frames.len());
    for (i, f) in c.frames.iter().enumerate() {
        if f.state == State::Free {
            continue;
        }
        holders.push((f.addr, i));
        if f.dirty && f.shared {
            return Err(format!("shared node {} is dirty in frame {i}", f.addr));
        }
        if f.node.is_leaf() && !parts.owns(cn, f.node.lowest, f.node.highest) {
            return Err(format!(
                "server {cn} caches leaf {} [{}, {}) outside its partition {:?}",
                f.addr,
                f.node.lowest,
                f.node.highest,
                parts.ranges(cn)
            ));
        }
        if f.state == State::Hot {
            match f.parent {
                Some(p) => {
                    let pf = &c.frames[p];
                    if pf.state != State::Hot || pf.swizzled.get(&f.addr) != Some(&i) {
                        return Err(format!(
                            "HOT node {} (frame {i}) hangs under frame {p} ({:?}) that does not swizzle it",
                            f.addr, pf.state
                        ));
                    }
                }
                None if c.root == Some(i) => {}
                None => {
                    return Err(format!("HOT node {} (frame {i}) has no parent and is not the root", f.addr))
                }
            }
            for (a, cf) in &f.swizzled {
                let child = &c.frames[*cf];
                if child.state != State::Hot || child.addr != *a || child.parent != Some(i) {
                    return Err(format!(
                        "frame {i} ({}) swizzles {a} to frame {cf}, which holds {} ({:?}, parent {:?})",
                        f.addr, child.addr, child.state, child.parent
                    ));
                }
                let is_child = !f.node.is_leaf()
                    && (f.node.leftmost == *a || f.node.children.iter().any(|(_, x)| x == a));
                if !is_child {
                    return Err(format!("frame {i} ({}) swizzles {a}, which is not its child", f.addr));
                }
            }
        } else if !f.swizzled.is_empty() && !f.busy {
            return Err(format!("{:?} node {} (frame {i}) still has swizzled children", f.state, f.addr));
        }
        if f.state == State::Cooling {
            if f.dirty {
                return Err(format!("COOLING node {} (frame {i}) is dirty", f.addr));
            }
            let n: usize = c.buckets.iter().map(|b| b.iter().filter(|x| **x == i).count()).sum();
            if n != 1 {
                return Err(format!("COOLING node {} (frame {i}) is in {n} cooling-map slots", f.addr));
            }
        }
    }
    holders.sort_unstable();
    if let Some(w) = holders.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(format!("node {} is cached twice (frames {} and {})", w[0].0, w[0].1, w[1].1));
    }
    for b in &c.buckets {
        if b.len() > c.bucket_slots {
            return Err(format!("a cooling-map bucket holds {} pages (slots: {})", b.len(), c.bucket_slots));
        }
    }
    for (a, e) in &c.table {
        if let Entry::Frame(f) = e {
            let fr = &c.frames[*f];
            if fr.addr != *a || fr.state == State::Free {
                return Err(format!(
                    "mapping table sends {a} to frame {f} holding {} ({:?})",
                    fr.addr, fr.state
                ));
            }
        }
    }
    Ok(())
}

/// Repartition safety (spec invariant 13), on the old owner once it handed a range over: every
/// page it still caches that overlaps the moved range is clean, one crossing the new boundary
/// is marked shared, and one inside the range is an inner node (the right half of a split of a
/// boundary node, cached where it was made, as for any partition: never routed to again).
pub fn check_moved_out(c: &Cache, parts: Partitions, cn: u16) -> Result<(), String> {
    let Some(m) = parts.moved.filter(|m| m.from == cn) else { return Ok(()) };
    let (mid, hi) = parts.moved_range().expect("a move is planned");
    for (i, f) in c.frames.iter().enumerate() {
        if f.state == State::Free || f.node.highest <= mid || f.node.lowest >= hi {
            continue;
        }
        let inside = f.node.lowest >= mid;
        if f.dirty || (!inside && !f.shared) || (inside && f.node.is_leaf()) {
            return Err(format!(
                "after handing [{mid}, {hi}) to server {} it still caches node {} [{}, {}) (frame {i}, {:?}, shared {}, dirty {})",
                m.to, f.addr, f.node.lowest, f.node.highest, f.state, f.shared, f.dirty
            ));
        }
    }
    Ok(())
}

/// One completed scan as its client saw it: the start key, how many entries it asked for and
/// the keys it returned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScanRecord {
    pub client: u32,
    pub from: u64,
    pub requested: u32,
    pub keys: Vec<u64>,
}

/// Scan completeness (the per-key checkers see only the keys a scan returned, not the ones it
/// skipped): a key that is live for the whole run — bulk-loaded and never the target of a
/// delete — and lies between a scan's start and the last key it returned must be among them.
pub fn check_scans_complete(
    loaded: &[u64],
    history: &[crate::harness::LoggedOp],
    scans: &[ScanRecord],
) -> Result<(), String> {
    use std::collections::BTreeSet;
    let deleted: BTreeSet<u64> = history
        .iter()
        .filter(|o| o.write.is_some_and(|v| v & crate::sherman::node::TOMBSTONE != 0))
        .map(|o| o.key)
        .collect();
    let mut stable: Vec<u64> = loaded.iter().copied().filter(|k| !deleted.contains(k)).collect();
    stable.sort_unstable();
    for s in scans {
        let Some(&last) = s.keys.last() else { continue };
        let got: BTreeSet<u64> = s.keys.iter().copied().collect();
        let lo = stable.partition_point(|k| *k < s.from);
        let hi = stable.partition_point(|k| *k <= last);
        if let Some(missed) = stable[lo..hi].iter().find(|k| !got.contains(k)) {
            return Err(format!(
                "client {}'s scan from {} ({} of {} entries, up to {last}) skipped key {missed}, live for the whole run",
                s.client,
                s.from,
                s.keys.len(),
                s.requested
            ));
        }
    }
    Ok(())
}

fn read(layout: &Layout, memory: Memory, addr: Gaddr) -> Result<Node, String> {
    if !layout.is_frame(addr) {
        return Err(format!("pointer {addr} names no node frame"));
    }
    let r = addr.remote();
    let words: Vec<u64> = (0..NODE_WORDS).map(|i| memory(r.add(i as u64 * 8))).collect();
    Node::decode(super::config::VERSIONS, &words).map_err(|t| format!("node {addr} is torn at rest ({t:?})"))
}

/// Every leaf reachable from the root lies inside one partition.
pub fn check_leaf_ownership(layout: &Layout, parts: Partitions, memory: Memory) -> Result<(), String> {
    let mut stack = vec![Gaddr(memory(layout.root_ptr()))];
    while let Some(a) = stack.pop() {
        let n = read(layout, memory, a)?;
        if n.is_leaf() {
            if parts.is_shared(n.lowest, n.highest) {
                return Err(format!("leaf {a} [{}, {}) crosses a partition boundary", n.lowest, n.highest));
            }
        } else {
            stack.push(n.leftmost);
            stack.extend(n.children.iter().map(|(_, c)| *c));
        }
    }
    Ok(())
}
