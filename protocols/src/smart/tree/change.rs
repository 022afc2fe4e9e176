//! Structural changes a write may make: a new NODE_4 where a key meets a leaf or leaves a
//! compressed prefix (`split`), a node type grown in place (`grow`), and the in-place update of
//! a leaf under its embedded lock (`update_in_place`).

use super::*;

impl<N: Nic> Tree<N> {
    /// Replace the entry at `c.at` by a new NODE_4 whose prefix is the key's bytes
    /// `c.depth .. c.depth + lcp`, holding the old entry (under byte `old_byte`) and a new leaf
    /// for `key`. `None` on success; the slot's current entry if the CAS lost.
    pub(super) async fn split(
        &self,
        w: &mut Worker<N>,
        key: u64,
        value: u64,
        c: &Cursor,
        lcp: usize,
        old_byte: u8,
    ) -> ProtocolResult<Option<Entry>> {
        let node = self.alloc(w, NODE_BYTES)?;
        let new_byte = key_byte(key, c.depth + lcp);
        let leaf = self.write_leaf(w, key, value, node.add(SLOTS_OFFSET + 8)).await?;
        let header = Header::new(key, c.depth, lcp, NodeType::N4);
        let words = [
            pack_addr(c.at),
            header.0,
            c.entry.with_partial(old_byte).0,
            Entry::leaf(new_byte, leaf).0,
            0,
            0,
        ];
        let local = self.new_node_buf(w);
        self.nic.local().write_words(local, &words);
        let verb = Verb::Write { remote: node, local_bytes: local, len_bytes: 48 };
        self.io(w, &[verb], "write new node").await?;
        // Move the old target's rev_ptr first: from here on, cached copies of the slot no longer
        // validate it, so no reader can miss the new key once the slot is published.
        let moved_to = pack_addr(node.add(SLOTS_OFFSET));
        if self.config.mutant != Mutant::RevPtrNotMoved {
            let verb = Verb::Cas { remote: c.entry.addr(), expect: pack_addr(c.at), swap: moved_to };
            let old = self.io(w, &[verb], "move rev_ptr").await?.get(0);
            if old != pack_addr(c.at) {
                // Another split owns this target now.
                return Ok(Some(self.read_entry(w, c.at).await?));
            }
        }
        let mut expect = c.entry;
        loop {
            let entry = Entry::node(expect.partial(), NodeType::N4, node);
            let old = self.publish(w, c.at, expect, entry).await?;
            if old == expect {
                return Ok(None);
            }
            w.op.retries += 1;
            if old.is_null() || old.is_leaf() != c.entry.is_leaf() || old.addr() != c.entry.addr() {
                // Not a type change of our target: give the target back and start over.
                if self.config.mutant != Mutant::RevPtrNotMoved {
                    let verb = Verb::Cas { remote: c.entry.addr(), expect: moved_to, swap: pack_addr(c.at) };
                    self.io(w, &[verb], "return rev_ptr").await?;
                }
                return Ok(Some(old));
            }
            // A grow changed the target's type in the slot: keep the slot's newer entry.
            expect = old;
        }
    }

    /// After inserting behind the node's last exposed slot: CAS its larger type into the header
    /// and then into the parent slot, each until it is at least `next` (SMART `cas_node_type`
    /// batches both CASes, slot first; header first means a reader that sees the slot's new type
    /// never meets a header that hides the new key: NEEDS.md).
    pub(super) async fn grow(
        &self,
        w: &mut Worker<N>,
        c: &Cursor,
        header: Header,
        next: NodeType,
    ) -> ProtocolResult<()> {
        if self.config.mutant == Mutant::GrowthTypeNotPublished {
            return Ok(());
        }
        let node = c.entry.addr();
        // A plain CAS of the whole header word as read (SMART uses a masked CAS on the type
        // bits; a plain one needs no extended atomics, so it runs on Soft-RoCE too).
        let mut current = header;
        while current.node_type() < next {
            let verb = Verb::Cas { remote: node.add(8), expect: current.0, swap: current.with_type(next).0 };
            let old = Header(self.io(w, &[verb], "grow: header type").await?.get(0));
            if old == current {
                break;
            }
            w.op.retries += 1;
            current = old;
        }
        let (mut at, mut entry) = (c.at, c.entry);
        loop {
            let verb = Verb::Cas { remote: at, expect: entry.0, swap: entry.with_type(next).0 };
            let old = Entry(self.io(w, &[verb], "grow: slot type").await?.get(0));
            if old == entry {
                return Ok(());
            }
            w.op.retries += 1;
            // A split may have put a new node above ours: follow slot 0 down to our node.
            let (mut cur, mut cur_at) = (old, at);
            while !cur.is_null() && !cur.is_leaf() && cur.addr() != node {
                cur_at = cur.addr().add(SLOTS_OFFSET);
                cur = self.read_entry(w, cur_at).await?;
            }
            if cur.is_null() || cur.is_leaf() || cur.node_type() >= next {
                return Ok(());
            }
            (at, entry) = (cur_at, cur);
        }
    }

    /// SMART's in-place update with the embedded lock: set the lock bit, then one WRITE of the
    /// whole leaf (new value, checksum, lock cleared). Our lock CAS expects the whole meta word
    /// as last read (lock clear, same version), so success also proves the value read is the
    /// one this write replaces; SMART CASes only the lock bit (NEEDS.md).
    pub(super) async fn update_in_place(
        &self,
        w: &mut Worker<N>,
        key: u64,
        value: u64,
        leaf: RemoteAddr,
        mut seen: LeafView,
    ) -> WriteOutcome {
        let meta_at = leaf.add(8);
        let len = self.layout.leaf_bytes();
        let local = self.leaf_buf(w, 0);
        loop {
            // P-SMART: the key's owner node is the leaf's only writer and holds its local lock.
            if self.config.mutant == Mutant::LeafLockSkipped || self.partition.is_some() {
                break;
            }
            if seen.meta & LEAF_LOCK == 0 {
                let verb = Verb::Cas { remote: meta_at, expect: seen.meta, swap: seen.meta | LEAF_LOCK };
                if self.io(w, &[verb], "lock leaf").await?.get(0) == seen.meta {
                    break;
                }
            }
            // Locked, or written since we read it: read it again.
            w.op.retries += 1;
            seen = loop {
                self.io(
                    w,
                    &[Verb::Read { remote: leaf, local_bytes: local, len_bytes: len as u32 }],
                    "re-read leaf",
                )
                .await?;
                let view = LeafView::parse(&self.local_words(local, (len / 8) as usize));
                if view.consistent {
                    break view;
                }
                w.op.retries += 1;
            };
        }
        // Everything but the rev_ptr word: a split may move the rev_ptr while we hold the lock
        // (SMART writes the whole leaf and can put back a stale rev_ptr; NEEDS.md).
        let mut words = leaf_words(seen.rev_ptr, key, value, self.layout.value_words);
        words[1] = (seen.meta & !LEAF_LOCK).wrapping_add(LEAF_VERSION_ONE) | LEAF_VALID;
        self.nic.local().write_words(local, &words);
        let verb = Verb::Write { remote: leaf.add(8), local_bytes: local + 8, len_bytes: len as u32 - 8 };
        self.io(w, &[verb], "write leaf and unlock").await?;
        Ok(seen.value)
    }
}
