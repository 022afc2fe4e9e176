//! Range queries: a depth-first walk in byte order with sibling leaves read in doorbell batches.

use super::*;

impl<N: Nic> Tree<N> {
    /// Up to `count` live keys at or above `from`, ascending, with their values. Walks the tree
    /// depth-first in byte order; runs of sibling leaves are read in doorbell batches (SMART
    /// reads one leaf per record: "at least 100 RDMA_READs" for a 100-record scan).
    pub async fn scan(&self, w: &mut Worker<N>, from: u64, count: usize) -> ProtocolResult<Vec<(u64, u64)>> {
        w.op.traversed = true;
        let mut out = Vec::new();
        // (slot address, entry, key prefix so far, bytes of it known)
        let mut stack = vec![(self.layout.root_ptr(), self.layout.root_entry(), 0u64, 0usize)];
        while let Some((at, entry, prefix, known)) = stack.pop() {
            if out.len() >= count {
                break;
            }
            if entry.is_null() {
                continue;
            }
            if entry.is_leaf() {
                // Gather this leaf and the next sibling leaves on the same memory node.
                let mut run = vec![(at, entry, prefix, known)];
                while run.len() < MAX_BATCH.min(count - out.len())
                    && stack
                        .last()
                        .is_some_and(|(_, e, _, _)| e.is_leaf() && e.addr().node == entry.addr().node)
                {
                    run.push(stack.pop().expect("checked"));
                }
                let len = self.layout.leaf_bytes();
                let verbs: Vec<Verb> = run
                    .iter()
                    .enumerate()
                    .map(|(i, (_, e, _, _))| Verb::Read {
                        remote: e.addr(),
                        local_bytes: self.leaf_buf(w, i),
                        len_bytes: len as u32,
                    })
                    .collect();
                self.io(w, &verbs, "scan leaves").await?;
                for (i, (at, e, p, k)) in run.iter().enumerate() {
                    let view = LeafView::parse(&self.local_words(self.leaf_buf(w, i), (len / 8) as usize));
                    let checked = view.consistent || self.config.mutant == Mutant::ChecksumSkipped;
                    if !view.valid() || !checked {
                        // Moved or torn: re-read its slot and come back to it before the rest.
                        w.op.retries += 1;
                        for later in run[i + 1..].iter().rev() {
                            stack.push(*later);
                        }
                        let fresh = if view.valid() { *e } else { self.read_entry(w, *at).await? };
                        stack.push((*at, fresh, *p, *k));
                        break;
                    }
                    let first = if self.config.mutant == Mutant::ScanExcludesStart {
                        from.saturating_add(1)
                    } else {
                        from
                    };
                    if view.key >= first
                        && view.value & crate::smart::layout::TOMBSTONE == 0
                        && out.len() < count
                    {
                        out.push((view.key, view.value));
                    }
                }
                continue;
            }
            let mut c = Cursor { at, entry, depth: known, cached: None };
            let Some(f) = self.read_node(w, &mut c).await? else {
                w.op.retries += 1;
                let fresh = self.read_entry(w, at).await?;
                stack.push((at, fresh, prefix, known));
                continue;
            };
            let mut prefix = prefix;
            let mut depth = f.header.depth();
            for i in 0..f.header.partial_len() {
                prefix |= (f.header.partial(i) as u64) << (56 - 8 * depth);
                depth += 1;
            }
            let mut children: Vec<(usize, Entry)> =
                f.slots.iter().copied().enumerate().filter(|(_, e)| !e.is_null()).collect();
            children.sort_by_key(|(_, e)| e.partial());
            for (i, e) in children.into_iter().rev() {
                let child_prefix = prefix | (e.partial() as u64) << (56 - 8 * depth);
                let span = if depth >= 7 { 0 } else { u64::MAX >> (8 * (depth + 1)) };
                if child_prefix | span < from {
                    continue;
                }
                stack.push((c.entry.addr().add(SLOTS_OFFSET + 8 * i as u64), e, child_prefix, depth + 1));
            }
        }
        Ok(out)
    }
}
