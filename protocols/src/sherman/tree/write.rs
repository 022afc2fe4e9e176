//! Writes (`Tree.cpp`: `lock_and_read_page`, `write_page_and_unlock`, `leaf_page_store`):
//! the hierarchical lock (local lock, then the on-chip CAS unless handed over), entry
//! write-back combined with the unlock, DEX's `[version, lock]` slots, the store into a leaf,
//! and with `leaf_cache` the whole-leaf DiFache writes.

use std::sync::Arc;

use super::{Client, Store, SLOT_BUFFER};
use crate::common::error::ProtocolResult;
use crate::nic::{Nic, RemoteAddr, Verb};
use crate::sherman::layout::{Gaddr, NODE_BYTES};
use crate::sherman::locks::LocalLock;
use crate::sherman::mutants::Mutant;
use crate::sherman::node::{entry_write_words, Node, Slot};

impl<N: Nic> Client<N> {
    /// `leaf_cache`: `node` (its version already new) as the whole leaf at `page`, by a DiFache
    /// write (flush, then invalidate the other compute nodes' copies); the caller holds the
    /// leaf's lock (or, for a split's new sibling, no one else can reach the frame yet).
    pub(super) async fn write_leaf_cached(&mut self, page: Gaddr, node: &Node) -> ProtocolResult<()> {
        let lc = self.leaf_cache.as_ref().expect("leaf_cache is on");
        self.nic.local().write_words(lc.buffer(), &node.encode(self.config().versions));
        lc.write(page).await.map(|_| ())
    }

    /// `leaf_cache`: write `node` to `page` through DiFache, then release the lock as
    /// [`Client::unlock`] does (hand-over or the unlock WRITE).
    pub(super) async fn write_leaf_cached_and_unlock(
        &mut self,
        page: Gaddr,
        node: &Node,
        local: Arc<LocalLock>,
        lock_addr: RemoteAddr,
    ) -> ProtocolResult<()> {
        if let Err(e) = self.write_leaf_cached(page, node).await {
            local.release();
            return Err(e);
        }
        self.unlock(local, lock_addr).await
    }

    // ---- locking ------------------------------------------------------------------------

    pub(super) fn partition_error(&self, during: &'static str) -> crate::common::error::ProtocolError {
        crate::common::error::ErrorInfo {
            node: self.nic.node(),
            verb: "-".into(),
            target: crate::common::error::Target::Port { node: self.nic.node(), port: 0 },
            during,
            at: self.nic.now(),
            source: crate::nic::NicError::BadBatch { reason: "P-Sherman partition violated" },
        }
        .into()
    }

    /// Take the lock of `page`: local lock, then the global one unless it was handed over.
    /// `local_only` (a P-Sherman leaf, written by this compute node alone): no global lock,
    /// unless a hand-over passed one in (two pages can share a lock word).
    pub(super) async fn lock(
        &mut self,
        page: Gaddr,
        local_only: bool,
    ) -> ProtocolResult<(Arc<LocalLock>, RemoteAddr)> {
        let lock_addr = self.shared.layout.lock_addr(page);
        let local = self.shared.locks.entry(lock_addr);
        // With hierarchical locks off, `hand_over` below never grants, so nothing is inherited.
        let handed = local.acquire().await;
        self.global_held = true;
        if handed {
            self.cur.handovers += 1;
            return Ok((local, lock_addr));
        }
        if local_only {
            self.global_held = false;
            return Ok((local, lock_addr));
        }
        if self.mutant() == Mutant::NoGlobalLock {
            return Ok((local, lock_addr));
        }
        loop {
            let cas = Verb::Cas { remote: lock_addr, expect: 0, swap: self.tag };
            let old = self.batch(&[cas], "lock node").await?.get(0);
            if old == 0 {
                return Ok((local, lock_addr));
            }
            self.cur.retries += 1;
        }
    }

    pub(super) fn hand_over(&self, local: &LocalLock) -> bool {
        if self.config().hierarchical_locks {
            local.can_hand_over(self.config().max_handover)
        } else {
            local.clear_hand_over();
            false
        }
    }

    /// Release without writing anything.
    pub(super) async fn unlock(
        &mut self,
        local: Arc<LocalLock>,
        lock_addr: RemoteAddr,
    ) -> ProtocolResult<()> {
        if !self.global_held {
            local.clear_hand_over();
            local.release();
            return Ok(());
        }
        if !self.hand_over(&local) && self.mutant() != Mutant::NoGlobalLock {
            let r = self.batch(&[Verb::WriteWord { remote: lock_addr, value: 0 }], "unlock").await;
            if r.is_err() {
                local.release();
            }
            r?;
        }
        local.release();
        Ok(())
    }

    /// Write `words` (already in the local buffer at `local_off`) to `remote` and release the
    /// lock: one batch when combining (`write_page_and_unlock`), the write alone when handing
    /// over.
    pub(super) async fn write_and_unlock(
        &mut self,
        local: Arc<LocalLock>,
        lock_addr: RemoteAddr,
        remote: RemoteAddr,
        local_off: u64,
        len_bytes: u32,
    ) -> ProtocolResult<()> {
        let write = Verb::Write { remote, local_bytes: local_off, len_bytes };
        let unlock = Verb::WriteWord { remote: lock_addr, value: 0 };
        let r = if !self.global_held {
            local.clear_hand_over();
            self.batch(&[write], "write back (local lock)").await.map(|_| ())
        } else if self.hand_over(&local) {
            if self.mutant() == Mutant::HandoverWithoutWriteBack {
                Ok(())
            } else {
                self.batch(&[write], "write back (hand-over)").await.map(|_| ())
            }
        } else if self.mutant() == Mutant::NoGlobalLock {
            self.batch(&[write], "write back").await.map(|_| ())
        } else if self.mutant() == Mutant::UnlockBeforeWriteBack {
            let r = self.batch(&[unlock], "unlock").await;
            match r {
                Ok(_) => self.batch(&[write], "write back").await.map(|_| ()),
                Err(e) => Err(e),
            }
        } else if self.config().lock_version {
            self.write_bump_unlock(write, lock_addr).await
        } else if self.config().combine_unlock {
            self.batch(&[write, unlock], "write back + unlock").await.map(|_| ())
        } else {
            match self.batch(&[write], "write back").await {
                Ok(_) => self.batch(&[unlock], "unlock").await.map(|_| ()),
                Err(e) => Err(e),
            }
        };
        local.release();
        r
    }

    /// DEX's Sherman (`lock_version`, [ART] `write_page_and_unlock` under `LOCK_VERSION`):
    /// READ the slot's version, then write the node and `[version + 1, 0]` over the slot, in
    /// one batch when combining. The version changes before or with the release, so a
    /// lock-free reader whose READs straddle this write sees a changed or locked slot.
    pub(super) async fn write_bump_unlock(
        &mut self,
        write: Verb,
        lock_addr: RemoteAddr,
    ) -> ProtocolResult<()> {
        // The version word precedes the lock word in its slot (`Layout::lock_word`).
        let slot = RemoteAddr::new(lock_addr.node, lock_addr.offset_bytes - 8);
        let slot_buf = self.buf + SLOT_BUFFER;
        let read = Verb::Read { remote: slot, local_bytes: slot_buf, len_bytes: 8 };
        self.batch(&[read], "read lock version").await?;
        let version = self.nic.local().load(slot_buf);
        let out = slot_buf + 16;
        self.nic.local().write_words(out, &[version.wrapping_add(1), 0]);
        let bump = Verb::Write { remote: slot, local_bytes: out, len_bytes: 16 };
        if self.config().combine_unlock {
            self.batch(&[write, bump], "write back + version + unlock").await.map(|_| ())
        } else {
            self.batch(&[write], "write back").await?;
            self.batch(&[bump], "version + unlock").await.map(|_| ())
        }
    }

    /// Lock `page` and read it (no writer can be in flight, so the versions agree); a failed
    /// read gives the local lock back before returning its error.
    pub(super) async fn lock_and_read(
        &mut self,
        page: Gaddr,
        local_only: bool,
        leaf: bool,
    ) -> ProtocolResult<(Arc<LocalLock>, RemoteAddr, Node)> {
        let (local, lock_addr) = self.lock(page, local_only).await?;
        let read = if leaf {
            self.read_leaf_plain(page).await
        } else {
            self.read_node_checked(page, false, false).await
        };
        match read {
            Ok(node) => Ok((local, lock_addr, node)),
            Err(e) => {
                local.release();
                Err(e)
            }
        }
    }

    // ---- leaf writes --------------------------------------------------------------------

    pub(super) async fn leaf_store(
        &mut self,
        page: Gaddr,
        key: u64,
        value: u64,
        from_cache: bool,
    ) -> ProtocolResult<Store> {
        let mut page = page;
        let mut from_cache = from_cache;
        loop {
            let partition = self.shared.partition;
            let (local, lock_addr, mut node) = self.lock_and_read(page, partition.is_some(), true).await?;
            let trust_cache = from_cache && self.mutant() == Mutant::StaleCacheEntry;
            if from_cache && !node.covers(key) && !trust_cache {
                self.unlock(local, lock_addr).await?;
                return Ok(Store::Stale);
            }
            if (key < node.lowest || !node.is_leaf()) && !trust_cache {
                self.unlock(local, lock_addr).await?;
                return Ok(Store::Stale);
            }
            if key >= node.highest && !self.shared.layout.is_frame(node.sibling) && !trust_cache {
                // Routed by a torn image: restart from the root.
                self.unlock(local, lock_addr).await?;
                return Ok(Store::Stale);
            }
            if key >= node.highest && !node.sibling.is_null() && !trust_cache {
                self.unlock(local, lock_addr).await?;
                page = node.sibling;
                from_cache = false;
                continue;
            }
            if let Some((lo, hi)) = partition {
                // Only the owner may write a leaf under the local lock alone.
                if node.lowest < lo || node.highest > hi {
                    local.release();
                    return Err(self.partition_error("leaf store: a leaf that crosses a partition bound"));
                }
            }
            let v = self.config().versions;
            let (slot, replaced) = match node.find(key) {
                Some(i) => (i, node.slots[i].value),
                None => match node.slots.iter().position(|s| s.value == 0) {
                    Some(i) => (i, 0),
                    None => unreachable!("a leaf splits before it is full"),
                },
            };
            let old = node.slots[slot];
            node.slots[slot] = Slot { key, value, version: old.version.wrapping_add(1) };
            if node.live_count() < self.config().leaf_split() && self.leaf_cache.is_some() {
                // Through DiFache the whole leaf is the object: a new node version.
                node.version = node.version.wrapping_add(1);
                self.write_leaf_cached_and_unlock(page, &node, local, lock_addr).await?;
                return Ok(Store::Done { replaced });
            } else if node.live_count() < self.config().leaf_split() {
                let words = if self.mutant() == Mutant::PackedWriteZeroesNeighbours {
                    let mut alone = vec![Slot::default(); slot + 1];
                    alone[slot] = node.slots[slot];
                    entry_write_words(v, &alone, slot)
                } else {
                    entry_write_words(v, &node.slots, slot)
                };
                let n = words.len();
                let off = self.buf + 2 * NODE_BYTES;
                self.nic.local().write_words(off, &words);
                let remote = page.remote().add(v.leaf_entry(slot) as u64 * 8);
                self.write_and_unlock(local, lock_addr, remote, off, n as u32 * 8).await?;
                return Ok(Store::Done { replaced });
            }
            self.split_leaf(page, node, local, lock_addr).await?;
            return Ok(Store::Done { replaced });
        }
    }
}
