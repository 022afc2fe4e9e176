//! Structure changes (`Tree.cpp`: the split half of `leaf_page_store` and
//! `internal_page_store`, `update_new_root`): a full node splits into a new right sibling
//! written first, then the shrunk node (whole, new version) with its unlock, then the
//! separator goes into the parent the same way, growing a new root by CAS on the root pointer
//! when the root splits.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::Client;
use crate::common::error::ProtocolResult;
use crate::nic::{Nanos, Nic, RemoteAddr, Verb};
use crate::sherman::layout::{Gaddr, NODE_BYTES};
use crate::sherman::locks::LocalLock;
use crate::sherman::mutants::Mutant;
use crate::sherman::node::{Node, Slot};

impl<N: Nic> Client<N> {
    /// The new right sibling of a splitting leaf whose live slots, sorted, are `live`: split at
    /// the middle one (returned with the sibling's address); the sibling takes the leaf's upper
    /// bound and link and is still empty. Sherman's and Marlin's leaf splits.
    pub(super) fn right_sibling(&mut self, node: &Node, live: &[Slot]) -> (usize, Gaddr, Node) {
        let m = live.len() / 2;
        let sibling_addr = self.shared.allocate(self.alloc_hint);
        self.alloc_hint += 1;
        let mut sibling = Node::empty_leaf(self.config().versions, live[m].key, node.highest);
        sibling.version = 1;
        sibling.sibling = node.sibling;
        (m, sibling_addr, sibling)
    }

    /// Split a full leaf (already changed in `node`): new right sibling with the upper half.
    pub(super) async fn split_leaf(
        &mut self,
        page: Gaddr,
        mut node: Node,
        local: Arc<LocalLock>,
        lock_addr: RemoteAddr,
    ) -> ProtocolResult<()> {
        self.cur.splits += 1;
        let v = self.config().versions;
        let mut live: Vec<Slot> = node.slots.iter().copied().filter(|s| s.value != 0).collect();
        live.sort_unstable_by_key(|s| s.key);
        let (m, sibling_addr, mut sibling) = self.right_sibling(&node, &live);
        let split_key = live[m].key;
        let upper_end = if self.mutant() == Mutant::SplitDropsEntry { live.len() - 1 } else { live.len() };
        for (i, s) in live[m..upper_end].iter().enumerate() {
            sibling.slots[i] = *s;
        }
        node.slots = vec![Slot::default(); v.leaf_cap()];
        for (i, s) in live[..m].iter().enumerate() {
            node.slots[i] = *s;
        }
        if self.mutant() != Mutant::SplitKeepsFence {
            node.highest = split_key;
        }
        node.sibling = sibling_addr;
        node.version = node.version.wrapping_add(1);
        self.finish_split(page, node, sibling_addr, sibling, split_key, local, lock_addr).await
    }

    /// Write the new sibling, then the old node + unlock, then insert the separator above.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn finish_split(
        &mut self,
        page: Gaddr,
        node: Node,
        sibling_addr: Gaddr,
        sibling: Node,
        split_key: u64,
        local: Arc<LocalLock>,
        lock_addr: RemoteAddr,
    ) -> ProtocolResult<()> {
        let v = self.config().versions;
        let level = node.level;
        if level == 0 && self.leaf_cache.is_some() {
            // The new sibling first, then the shrunk leaf, both through DiFache.
            if let Err(e) = self.write_leaf_cached(sibling_addr, &sibling).await {
                local.release();
                return Err(e);
            }
            self.write_leaf_cached_and_unlock(page, &node, local, lock_addr).await?;
            return self.publish_split(page, level, split_key, sibling_addr).await;
        }
        let sib_off = self.buf + NODE_BYTES;
        self.nic.local().write_words(sib_off, &sibling.encode(v));
        let write_sibling =
            Verb::Write { remote: sibling_addr.remote(), local_bytes: sib_off, len_bytes: NODE_BYTES as u32 };
        let before = self.mutant() != Mutant::SplitBeforeSibling;
        if before {
            if let Err(e) = self.batch(&[write_sibling], "write split sibling").await {
                local.release();
                return Err(e);
            }
        }
        self.nic.local().write_words(self.buf, &node.encode(v));
        self.write_and_unlock(local, lock_addr, page.remote(), self.buf, NODE_BYTES as u32).await?;
        if before {
            return self.publish_split(page, level, split_key, sibling_addr).await;
        }
        // The planted bug: the separator goes up (and the shrunk node is out) before the
        // sibling exists, so readers routed to it find an unwritten frame.
        self.publish_split(page, level, split_key, sibling_addr).await?;
        self.nic.local().write_words(sib_off, &sibling.encode(v));
        self.batch(&[write_sibling], "write split sibling").await.map(|_| ())
    }

    /// Insert separator `key → right` one level above `left` (at `level`).
    pub(super) async fn publish_split(
        &mut self,
        left: Gaddr,
        level: u8,
        key: u64,
        right: Gaddr,
    ) -> ProtocolResult<()> {
        let parent_level = level + 1;
        let mut parent = self.path.get(parent_level as usize).copied().unwrap_or(Gaddr::NULL);
        loop {
            if !parent.is_null() {
                if self.internal_store(parent, parent_level, key, right).await? {
                    return Ok(());
                }
                // Misrouted by a torn read: find the parent again from the root.
                self.cur.retries += 1;
                parent = Gaddr::NULL;
                continue;
            }
            let root = self.refresh_root().await?;
            if root == left {
                if self.grow_root(left, key, right, parent_level).await? {
                    return Ok(());
                }
                continue;
            }
            let root_node = self.read_node(root).await?;
            if root_node.level < parent_level {
                // The root is at our level but is not us: another split of this level is
                // growing the tree right now. Wait for its new root.
                self.cur.retries += 1;
                self.nic.sleep(Nanos(1_000)).await;
                continue;
            }
            parent = self.descend(key, parent_level).await?;
        }
    }

    /// `update_new_root`: write a new root above `left` and CAS the root pointer to it.
    pub(super) async fn grow_root(
        &mut self,
        left: Gaddr,
        key: u64,
        right: Gaddr,
        level: u8,
    ) -> ProtocolResult<bool> {
        let v = self.config().versions;
        let root_addr = self.shared.allocate(self.alloc_hint);
        self.alloc_hint += 1;
        let root = Node::new_root(left, key, right, level);
        let off = self.buf + NODE_BYTES;
        self.nic.local().write_words(off, &root.encode(v));
        let write =
            Verb::Write { remote: root_addr.remote(), local_bytes: off, len_bytes: NODE_BYTES as u32 };
        self.batch(&[write], "write new root").await?;
        let cas = Verb::Cas { remote: self.shared.layout.root_ptr(), expect: left.0, swap: root_addr.0 };
        let old = self.batch(&[cas], "swap root pointer").await?.get(0);
        if old == left.0 {
            self.shared.root.store(root_addr.0, Ordering::Relaxed);
            Ok(true)
        } else {
            // The frame is leaked, as in Sherman.
            self.cur.retries += 1;
            Ok(false)
        }
    }

    // ---- internal writes ----------------------------------------------------------------

    /// `internal_page_store`: insert `key → child` into the internal node at `level` covering it.
    /// `false`: `page` lies right of the key (the caller descends again).
    pub(super) async fn internal_store(
        &mut self,
        page: Gaddr,
        level: u8,
        key: u64,
        child: Gaddr,
    ) -> ProtocolResult<bool> {
        let mut page = page;
        loop {
            let (local, lock_addr, mut node) = self.lock_and_read(page, false, false).await?;
            if key < node.lowest
                || node.level != level
                || (key >= node.highest && !self.shared.layout.is_frame(node.sibling))
            {
                self.unlock(local, lock_addr).await?;
                return Ok(false);
            }
            if key >= node.highest && !node.sibling.is_null() {
                self.unlock(local, lock_addr).await?;
                page = node.sibling;
                continue;
            }
            let i = node.children.partition_point(|(k, _)| *k < key);
            if i < node.children.len() && node.children[i].0 == key {
                node.children[i].1 = child;
            } else {
                node.children.insert(i, (key, child));
            }
            node.version = node.version.wrapping_add(1);
            if node.children.len() < self.config().internal_split() {
                let v = self.config().versions;
                self.nic.local().write_words(self.buf, &node.encode(v));
                self.write_and_unlock(local, lock_addr, page.remote(), self.buf, NODE_BYTES as u32).await?;
                return Ok(true);
            }
            self.cur.splits += 1;
            let m = node.children.len() / 2;
            let (split_key, sib_leftmost) = node.children[m];
            let sibling_addr = self.shared.allocate(self.alloc_hint);
            self.alloc_hint += 1;
            let sibling = Node {
                level: node.level,
                leftmost: sib_leftmost,
                sibling: node.sibling,
                lowest: split_key,
                highest: node.highest,
                version: 1,
                slots: Vec::new(),
                children: node.children[m + 1..].to_vec(),
            };
            node.children.truncate(m);
            if self.mutant() != Mutant::SplitKeepsFence {
                node.highest = split_key;
            }
            node.sibling = sibling_addr;
            Box::pin(self.finish_split(page, node, sibling_addr, sibling, split_key, local, lock_addr))
                .await?;
            return Ok(true);
        }
    }
}
