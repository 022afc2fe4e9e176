//! The tree's structural invariants, read from memory after a quiesced run (every compute
//! node has drained its cache, so memory holds the latest node images): the root spans the
//! whole key range; every level is one chain of right links with contiguous fences from 0 to
//! +∞; keys sorted, unique and inside their node's fences; every internal entry's range equals
//! its child's fences (so every split was posted and every leaf is reachable from the root, each
//! once); every latch word on the way free. Returns the leaves' contents.

use std::collections::{BTreeMap, BTreeSet};

use super::node::{Image, KEY_MAX};
use super::pages::PageId;
use crate::harness::Memory;
use crate::selcc::Layout;

fn read(memory: Memory, page: PageId, words: usize) -> Result<Image, String> {
    if page.is_null() {
        return Err("a null child pointer".into());
    }
    let g = page.addr();
    if memory(Layout::latch(g)) != 0 {
        return Err(format!("page {page}: latch word {:#x} still held at the end", memory(Layout::latch(g))));
    }
    let data = Layout::data(g);
    let image: Vec<u64> = (0..words).map(|i| memory(data.add(i as u64 * 8))).collect();
    Image::decode(&image).map_err(|e| format!("page {page}: {e}"))
}

/// The leaves' contents if the tree rooted at the meta page's root is well formed.
pub fn check_tree(memory: Memory, meta: PageId, page_words: usize) -> Result<BTreeMap<u64, u64>, String> {
    let meta_latch = memory(Layout::latch(meta.addr()));
    if meta_latch != 0 {
        return Err(format!("meta page latch {meta_latch:#x} still held at the end"));
    }
    let root = PageId(memory(Layout::data(meta.addr())));
    let r = read(memory, root, page_words)?;
    if r.low != 0 || r.high != KEY_MAX || !r.right.is_null() {
        return Err(format!("root {root} spans [{}, {:#x}) with right link {}", r.low, r.high, r.right));
    }
    let mut expected: BTreeMap<PageId, (u64, u64)> = BTreeMap::from([(root, (0, KEY_MAX))]);
    let mut first = root;
    let mut seen = BTreeSet::new();
    let mut contents = BTreeMap::new();
    for level in (0..=r.level).rev() {
        let mut below: BTreeMap<PageId, (u64, u64)> = BTreeMap::new();
        let mut next_first = PageId::NULL;
        let mut page = first;
        let mut prev_high = 0u64;
        while !page.is_null() {
            if !seen.insert(page) {
                return Err(format!("page {page} reached twice (a right-link cycle or a shared child)"));
            }
            let n = read(memory, page, page_words)?;
            if n.level != level {
                return Err(format!("page {page} of level {} in the chain of level {level}", n.level));
            }
            if n.low != prev_high || n.low >= n.high {
                return Err(format!(
                    "level {level}: page {page} has fences [{}, {}) after a neighbour ending at {prev_high}",
                    n.low, n.high
                ));
            }
            match expected.remove(&page) {
                Some(f) if f == (n.low, n.high) => {}
                Some(f) => {
                    return Err(format!(
                        "page {page}: its parent entry covers [{}, {}), its fences are [{}, {})",
                        f.0, f.1, n.low, n.high
                    ))
                }
                None => return Err(format!("page {page} (level {level}) has no parent entry")),
            }
            if n.keys.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!("page {page}: keys not strictly ascending: {:?}", n.keys));
            }
            if let Some(k) = n.keys.iter().find(|k| !n.covers(**k)) {
                return Err(format!("page {page}: key {k} outside its fences [{}, {})", n.low, n.high));
            }
            if n.is_leaf() {
                contents.extend(n.keys.iter().copied().zip(n.vals.iter().copied()));
            } else {
                if n.keys.first() != Some(&n.low) {
                    return Err(format!("internal page {page}: first key is not its low fence {}", n.low));
                }
                for i in 0..n.count() {
                    let hi = n.keys.get(i + 1).copied().unwrap_or(n.high);
                    if below.insert(PageId(n.vals[i]), (n.keys[i], hi)).is_some() {
                        return Err(format!("page {} is the child of two entries", PageId(n.vals[i])));
                    }
                }
                if next_first.is_null() {
                    next_first = PageId(n.vals[0]);
                }
            }
            prev_high = n.high;
            page = n.right;
        }
        if prev_high != KEY_MAX {
            return Err(format!("level {level} ends at {prev_high}, not +∞"));
        }
        if let Some((p, f)) = expected.iter().next() {
            return Err(format!("page {p} (entry [{}, {})) is not in the chain of its level", f.0, f.1));
        }
        expected = below;
        first = next_first;
    }
    Ok(contents)
}
