//! Dolphin's range scan from the index cache (the authors' `range_query`).

use super::*;

/// The last key a group of leaves to read covers (0 if empty).
fn hi_of(group: &[(usize, Gaddr, u64, u64)]) -> u64 {
    group.last().map_or(0, |g| g.3)
}

impl<N: Nic> Client<N> {
    /// Up to `len` (key, value) pairs with keys ≥ `from`, ascending, live values only.
    ///
    /// As the authors' `range_query`, the scan starts from the index cache: the deepest cached
    /// node on `cursor`'s path (a special node covers its whole 256-key window), walked in key
    /// order; when its subtree is done the next window is located in the cache again. The
    /// leaves a step must read are read together, one doorbell batch per memory node, all posted
    /// at once. Nothing is
    /// concluded from a cached image alone: an empty slot of a cached ART node re-reads the node,
    /// and every leaf is checked against the range its parent image assigns it (a leaf a cached
    /// special node lacks shows as its left neighbour's shrunk `max`), an internal child under a
    /// cached node against its `rev_ptr`; a mismatch re-reads the parent.
    pub async fn scan(&mut self, from: u64, len: usize) -> ProtocolResult<Vec<(u64, u64)>> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut cursor = from;
        let mut guard = 0u32;
        'windows: while out.len() < len {
            let (start, image, cached) = self.start_node(cursor).await?;
            let top_hi = image.hi();
            let first = image.pick(cursor).unwrap_or(0);
            // (address, image, next slot, image from the cache)
            let mut stack: Vec<(Gaddr, NodeImage, usize, bool)> = vec![(start, image, first, cached)];
            while out.len() < len {
                let Some((addr, node, i, cached)) = stack.last().cloned() else {
                    // The start node's subtree is done: the next window.
                    if top_hi == u64::MAX {
                        break 'windows;
                    }
                    cursor = cursor.max(top_hi + 1);
                    continue 'windows;
                };
                if i >= NODE_SLOTS {
                    stack.pop();
                    continue;
                }
                self.nic.cpu(Nanos(self.config().cpu.node_ns)).await;
                let e = node.slots[i];
                let Some(kind) = entry_kind(e) else {
                    if cached && !node.special && self.mutant() != Mutant::CachedNullIsAbsent {
                        // A cached empty slot may since hold a child: re-read the node.
                        let fresh = self.read_node(addr).await?;
                        *stack.last_mut().expect("non-empty") = (addr, fresh, i, false);
                        continue;
                    }
                    stack.last_mut().expect("non-empty").2 += 1;
                    continue;
                };
                let (lo, hi) = node.slot_range(i);
                if hi < cursor {
                    stack.last_mut().expect("non-empty").2 += 1;
                    continue;
                }
                let slot = addr.plus(slot_offset(i));
                if kind != Kind::Leaf {
                    let child = self.read_node(entry_addr(e)).await?;
                    if cached && child.rev != slot.word() {
                        // The cached slot is stale (the child has a new parent).
                        self.cur.retries += 1;
                        let fresh = self.read_node(addr).await?;
                        *stack.last_mut().expect("non-empty") = (addr, fresh, i, false);
                        continue;
                    }
                    let shift = 64 - 8 * child.depth as u32;
                    let child_hi =
                        if child.depth == 0 { u64::MAX } else { child.prefix | (u64::MAX >> (64 - shift)) };
                    stack.last_mut().expect("non-empty").2 += 1;
                    if child_hi < cursor || prefix(child.prefix, node.depth + 1) != prefix(lo, node.depth + 1)
                    {
                        continue;
                    }
                    let start = if child.prefix <= cursor { child.pick(cursor).unwrap_or(0) } else { 0 };
                    stack.push((entry_addr(e), child, start, false));
                    continue;
                }
                // The leaves this step must read: consecutive leaf slots from `i` whose range
                // starts at or before `cursor + remaining - 1` (every key there is among the
                // next `remaining` results), at most `SCAN_BATCH`.
                let need_to = cursor.saturating_add((len - out.len()) as u64 - 1);
                let mut group: Vec<(usize, Gaddr, u64, u64)> = vec![(i, entry_addr(e), lo, hi)];
                let mut j = i + 1;
                while group.len() < SCAN_BATCH && j < NODE_SLOTS && hi_of(&group) < need_to {
                    let ej = node.slots[j];
                    match entry_kind(ej) {
                        None if node.special => {}
                        Some(Kind::Leaf) => {
                            let (lj, hj) = node.slot_range(j);
                            if lj > need_to {
                                break;
                            }
                            group.push((j, entry_addr(ej), lj, hj));
                        }
                        _ => break,
                    }
                    j += 1;
                }
                self.read_leaves(&group).await?;
                let mut refreshed = false;
                let mut last_done = i;
                for (g, (x, _, lo, hi)) in group.iter().copied().enumerate() {
                    self.nic.cpu(Nanos(self.config().cpu.leaf_ns)).await;
                    let b = self.leaf_buf() + g as u64 * LEAF_BYTES;
                    let leaf = LeafImage::decode(&self.local_words(b, LEAF_WORDS));
                    let slot = addr.plus(slot_offset(x));
                    // Under an ART node a leaf covers its whole window; under a special node,
                    // the range the parent gives it. A leaf ending earlier means the parent
                    // image is older than a split: re-read the parent, look at this slot again.
                    let (lo, hi) = if node.special { (lo, hi) } else { window(leaf.min) };
                    let fits = leaf.min <= lo && leaf.max >= hi && leaf.rev == slot.word();
                    if !fits && self.mutant() != Mutant::SkipRangeCheck {
                        self.cur.retries += 1;
                        guard += 1;
                        if guard > 64 {
                            self.nic.sleep(Nanos(500)).await;
                            self.shared.errors.check()?;
                        }
                        let fresh = self.read_node(addr).await?;
                        *stack.last_mut().expect("non-empty") = (addr, fresh, x, false);
                        refreshed = true;
                        break;
                    }
                    let mut rows: Vec<(u64, u64)> = (0..LEAF_SLOTS)
                        .filter(|s| {
                            let k = leaf.keys[*s];
                            k != 0 && k >= cursor && k >= lo && k <= hi && k <= leaf.max && k >= leaf.min
                        })
                        .map(|s| (leaf.keys[s], leaf.values[s]))
                        .filter(|(_, v)| *v != 0 && v & TOMBSTONE == 0)
                        .collect();
                    rows.sort_unstable();
                    for r in rows {
                        if out.len() < len {
                            out.push(r);
                        }
                    }
                    last_done = x;
                    if hi == u64::MAX {
                        break 'windows;
                    }
                    cursor = cursor.max(hi + 1);
                    if out.len() >= len {
                        break;
                    }
                }
                if !refreshed {
                    stack.last_mut().expect("non-empty").2 = last_done + 1;
                }
            }
        }
        Ok(out)
    }

    /// READ the leaves of `group` into consecutive leaf buffers: one doorbell batch per memory
    /// node, all posted together (the authors' `read_batches_sync`).
    async fn read_leaves(&mut self, group: &[(usize, Gaddr, u64, u64)]) -> ProtocolResult<()> {
        let reads: Vec<Verb> = group
            .iter()
            .enumerate()
            .map(|(g, (_, a, _, _))| Verb::Read {
                remote: a.remote(),
                local_bytes: self.leaf_buf() + g as u64 * LEAF_BYTES,
                len_bytes: LEAF_BYTES as u32,
            })
            .collect();
        self.batches(&reads, "scan read leaves").await
    }
}
