//! Eager top-down splits: the new right node is written at once and cached, the separator goes
//! into the cached parent; a shared node or parent changes only under its RDMA lock and only if
//! the cached copy is still the remote one; a root split swings the root pointer by CAS.

use super::*;

/// Outcome of the remote part of a split.
pub(super) enum Remote {
    Done,
    /// The cached parent is not the remote one (or is full there): refresh it.
    Stale,
}
/// A full node's halves: (left, right, separator).
pub(super) fn halves(node: &Node, mutant: Mutant) -> (Node, Node, u64) {
    let mut left = node.clone();
    let mut right;
    let sep;
    if node.is_leaf() {
        let mut live: Vec<Slot> = node.slots.iter().copied().filter(|s| s.value != 0).collect();
        live.sort_unstable_by_key(|s| s.key);
        let m = live.len() / 2;
        sep = live[m].key;
        right = Node::empty_leaf(VERSIONS, sep, node.highest);
        let end = if mutant == Mutant::SplitDropsEntry { live.len() - 1 } else { live.len() };
        for (i, s) in live[m..end].iter().enumerate() {
            right.slots[i] = *s;
        }
        left.slots = vec![Slot::default(); VERSIONS.leaf_cap()];
        for (i, s) in live[..m].iter().enumerate() {
            left.slots[i] = *s;
        }
    } else {
        let m = node.children.len() / 2;
        let (k, c) = node.children[m];
        sep = k;
        right = Node {
            level: node.level,
            leftmost: c,
            sibling: Gaddr::NULL,
            lowest: sep,
            highest: node.highest,
            version: 0,
            slots: Vec::new(),
            children: node.children[m + 1..].to_vec(),
        };
        left.children.truncate(m);
    }
    right.version = 1;
    right.sibling = node.sibling;
    if mutant != Mutant::SplitKeepsFence {
        left.highest = sep;
    }
    (left, right, sep)
}

/// The child addresses of an inner node.
pub(super) fn child_addrs(node: &Node) -> Vec<Gaddr> {
    std::iter::once(node.leftmost).chain(node.children.iter().map(|(_, c)| *c)).collect()
}

impl<N: Nic> Client<N> {
    /// Split HOT frame `f` (full); the caller restarts its traversal afterwards.
    pub(super) async fn split(&mut self, f: FrameId) -> ProtocolResult<()> {
        let mutant = self.mutant();
        let prepared = {
            let mut c = self.shared.cache();
            let frame = &c.frames[f];
            if frame.state != State::Hot || frame.busy {
                Some(None)
            } else if let Some(p) = frame.parent {
                if c.frames[p].busy || self.free.is_empty() {
                    Some(None)
                } else {
                    let (mut left, mut right, sep) = halves(&frame.node, mutant);
                    let addr = frame.addr;
                    let right_addr = self.shared.allocate(self.shared.mn_index(addr));
                    left.sibling = right_addr;
                    right.sibling = frame.node.sibling;
                    let cur_shared = frame.shared;
                    let (p_addr, p_node, p_shared) =
                        (c.frames[p].addr, c.frames[p].node.clone(), c.frames[p].shared);
                    c.frames[f].busy = true;
                    c.frames[p].busy = true;
                    Some(Some((p, addr, left, right_addr, right, sep, cur_shared, p_addr, p_node, p_shared)))
                }
            } else {
                None
            }
        };
        let Some(prepared) = prepared else {
            return self.split_root(f).await;
        };
        let Some((p, addr, mut left, right_addr, right, sep, cur_shared, p_addr, mut p_node, p_shared)) =
            prepared
        else {
            self.backoff().await;
            return Ok(());
        };
        let i = p_node.children.partition_point(|(k, _)| *k < sep);
        p_node.children.insert(i, (sep, right_addr));
        let remote = self
            .split_remote(addr, &mut left, right_addr, &right, p_addr, &mut p_node, cur_shared, p_shared)
            .await;
        let stale = {
            let mut c = self.shared.cache();
            c.frames[f].busy = false;
            c.frames[p].busy = false;
            match remote? {
                Remote::Stale => true,
                Remote::Done => {
                    self.cur.splits += 1;
                    let right_f = self.free.pop().expect("checked before the split");
                    c.frames[f].node = left;
                    c.frames[f].version += 1;
                    c.frames[f].dirty |= !cur_shared;
                    c.frames[p].node = p_node;
                    c.frames[p].version += 1;
                    c.frames[p].dirty |= !p_shared;
                    let right_shared = self.shared.parts().is_shared(right.lowest, right.highest);
                    let moved: Vec<Gaddr> = if right.is_leaf() { Vec::new() } else { child_addrs(&right) };
                    c.install(right_f, right_addr, right, Some(p), right_shared);
                    for a in moved {
                        if let Some(cf) = c.frames[f].swizzled.remove(&a) {
                            c.frames[right_f].swizzled.insert(a, cf);
                            c.frames[cf].parent = Some(right_f);
                        }
                    }
                    false
                }
            }
        };
        if stale {
            self.refresh(p).await?;
        }
        Ok(())
    }

    /// The RDMA part of a split under parent `p_addr`: lock and verify shared nodes, write the
    /// new right node, the left one if shared, the parent if shared, unlock.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn split_remote(
        &mut self,
        addr: Gaddr,
        left: &mut Node,
        right_addr: Gaddr,
        right: &Node,
        p_addr: Gaddr,
        p_node: &mut Node,
        cur_shared: bool,
        p_shared: bool,
    ) -> ProtocolResult<Remote> {
        let mutant = self.mutant();
        let locking = (p_shared || cur_shared) && mutant != Mutant::SharedWithoutLock;
        if locking {
            self.lock_remote(p_addr).await?;
            if cur_shared {
                self.lock_remote(addr).await?;
            }
            let remote_p = self.read_remote(p_addr, false).await?;
            let expected = p_node.version;
            let ok = match &remote_p {
                Some(r) => {
                    (mutant == Mutant::SharedSkipVerify || r.version == expected)
                        && r.children.len() + 1 < self.config().internal_split()
                }
                None => false,
            };
            let cur_ok = if cur_shared && ok {
                let remote_cur = self.read_remote(addr, false).await?;
                remote_cur.is_some_and(|r| r.version == left.version || mutant == Mutant::SharedSkipVerify)
            } else {
                true
            };
            if !ok || !cur_ok {
                if cur_shared {
                    self.unlock_remote(addr).await?;
                }
                self.unlock_remote(p_addr).await?;
                return Ok(Remote::Stale);
            }
        }
        self.write_node(right_addr, right, "write split sibling").await?;
        if cur_shared {
            left.version = left.version.wrapping_add(1);
            self.write_node(addr, left, "write split shared node").await?;
        }
        if p_shared {
            p_node.version = p_node.version.wrapping_add(1);
            self.write_node(p_addr, p_node, "write shared parent").await?;
        }
        if locking {
            if cur_shared {
                self.unlock_remote(addr).await?;
            }
            self.unlock_remote(p_addr).await?;
        }
        Ok(Remote::Done)
    }

    /// Split the root: flush the cached tree, split under the root's RDMA lock, write the new
    /// root and swing the root pointer by CAS.
    pub(super) async fn split_root(&mut self, f: FrameId) -> ProtocolResult<()> {
        self.flush_subtree(f).await?;
        let root = {
            // The I/O flag on the root keeps this server's threads from caching it mid-split.
            let mut c = self.shared.cache();
            let root = c.root_addr;
            if c.root.is_some() || c.table.contains_key(&root) {
                None
            } else {
                c.table.insert(root, Entry::Io);
                Some(root)
            }
        };
        let Some(root) = root else {
            self.backoff().await;
            return Ok(());
        };
        self.lock_remote(root).await?;
        let current = self.read_root_pointer().await?;
        let node = if current == root { self.read_remote(root, false).await? } else { None };
        let full = |n: &Node| {
            if n.is_leaf() {
                n.live_count() >= self.config().leaf_split()
            } else {
                n.children.len() + 1 >= self.config().internal_split()
            }
        };
        if let Some(node) = node.filter(full) {
            self.cur.splits += 1;
            let (mut left, mut right, sep) = halves(&node, self.mutant());
            let mn = self.shared.mn_index(root);
            let right_addr = self.shared.allocate(mn);
            let new_root = self.shared.allocate(mn);
            left.sibling = right_addr;
            right.sibling = node.sibling;
            left.version = left.version.wrapping_add(1);
            self.write_node(right_addr, &right, "write split sibling").await?;
            self.write_node(root, &left, "write split root").await?;
            let top = Node::new_root(root, sep, right_addr, node.level + 1);
            self.write_node(new_root, &top, "write new root").await?;
            let cas = Verb::Cas { remote: self.shared.layout.root_ptr(), expect: root.0, swap: new_root.0 };
            self.batch(&[cas], "swing root pointer").await?;
        }
        self.unlock_remote(root).await?;
        let now = self.read_root_pointer().await?;
        let mut c = self.shared.cache();
        c.root_addr = now;
        Self::clear_io(&mut c, root);
        Ok(())
    }
}
