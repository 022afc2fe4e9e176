//! Marlin's leaf operations (`protocols/src/marlin/mod.rs` has the protocol, the spec mapping
//! and the RTT profile). Everything above the leaves — internal nodes, their CAS locks, the
//! index cache of level-1 nodes, the separator insert after a split and root growth — is
//! Sherman's (`tree.rs`, `tree/split.rs`), unchanged.
//!
//! A leaf slot is `[key, item pointer]` (Sherman's entry words, the value word holding the
//! pointer). A slot is *empty* (key 0), *claimed* (key set, pointer 0: an insert in flight,
//! read as absent) or *published* (pointer to an immutable 16-byte item `[key, value]`).
//! Every frame has a Spear word outside the frame (`Layout::spear_addr`), changed by FAA only.
//!
//! * lookup: READ leaf (lock-free, versions checked), READ item — 2 RTTs.
//! * update / delete: FAA(Spear, +1) ‖ READ leaf; WRITE new item; CAS(pointer, old → new) ‖
//!   FAA(Spear, −1) — 3 RTTs. A lost CAS (a concurrent update won) starts again.
//! * insert: FAA ‖ READ leaf; WRITE item ‖ CAS(key word of the lowest empty slot, 0 → key);
//!   CAS(pointer, 0 → item) ‖ FAA(−1) — 3 RTTs. A key CAS that meets another key tries the
//!   next empty slot of the image (one RTT each); one that meets its own key (a racing insert
//!   of the same key) publishes into that slot.
//! * leaf split (SMO): FAA(Spear, SMO_STATUS) while holding one shared count, wait until the
//!   word is `SMO_STATUS + 1` (every other IDU gone), READ the leaf, WRITE the new right
//!   sibling, WRITE the shrunk leaf ‖ FAA(−SMO_STATUS − 1), then Sherman's separator insert.
//! * scan: READ each leaf along the siblings and one READ per item (per leaf, rounds of one
//!   doorbell batch of at most `MAX_BATCH` = 8 READs per memory node, a round's batches
//!   posted together: `crate::nic::rounds_by_target`).

use super::Client;
use crate::common::error::ProtocolResult;
use crate::marlin::{Mutant, SMO_STATUS, SMO_UP_LIMIT};
use crate::nic::{Nanos, Nic, RemoteAddr, Verb};
use crate::sherman::layout::{Gaddr, Versions, ITEM_BYTES, NODE_BYTES, NODE_WORDS};
use crate::sherman::node::{Node, TOMBSTONE};

/// Where a thread's item READs and WRITEs land: the fourth kilobyte of its buffer.
const ITEM_BUFFER: u64 = 3 * NODE_BYTES;
/// A word READ (Spear polling): the upper half of the entry write-back kilobyte.
const WORD_BUFFER: u64 = 2 * NODE_BYTES + NODE_BYTES / 2 + 64;

/// Physical word of leaf slot `i`'s key (its pointer follows).
fn key_word(v: Versions, i: usize) -> usize {
    match v {
        Versions::Node => v.leaf_entry(i) + 1,
        Versions::Line => v.leaf_entry(i),
        Versions::Packed => unreachable!("Config::validate keeps Marlin off packed leaves"),
    }
}

/// How one attempt on a leaf ended.
enum Attempt {
    Done,
    /// Try the same leaf again (an SMO was in the way, a CAS lost, the leaf split).
    Again,
    /// The key lies right of this leaf: move to its sibling.
    Right(Gaddr),
    /// Not this leaf (stale cache entry or misroute): route again.
    Route,
}

impl<N: Nic> Client<N> {
    fn marlin_mutant(&self) -> Mutant {
        self.config().marlin_mutant
    }

    fn spear(&self, page: Gaddr) -> RemoteAddr {
        self.shared.layout.spear_addr(page)
    }

    fn slot_addr(&self, page: Gaddr, word: usize) -> RemoteAddr {
        page.remote().add(word as u64 * 8)
    }

    async fn read_word(&mut self, remote: RemoteAddr, during: &'static str) -> ProtocolResult<u64> {
        let off = self.buf + WORD_BUFFER;
        self.batch(&[Verb::Read { remote, local_bytes: off, len_bytes: 8 }], during).await?;
        Ok(self.nic.local().load(off))
    }

    /// FAA(Spear, −1).
    async fn spear_leave(&mut self, page: Gaddr) -> ProtocolResult<()> {
        if self.marlin_mutant() == Mutant::NoSpear {
            return Ok(());
        }
        let faa = Verb::Faa { remote: self.spear(page), add: u64::MAX };
        self.batch(&[faa], "Spear leave").await.map(|_| ())
    }

    /// Poll the Spear word until no SMO holds it.
    async fn wait_smo(&mut self, page: Gaddr) -> ProtocolResult<()> {
        loop {
            self.nic.sleep(Nanos(1_000)).await;
            self.shared.errors.check()?;
            let w = self.read_word(self.spear(page), "wait for an SMO").await?;
            if (w as i64) >= SMO_UP_LIMIT {
                return Ok(());
            }
        }
    }

    /// READ the items of `ptrs` (one doorbell batch per memory node): their `(key, value)`.
    async fn read_items(&mut self, ptrs: &[Gaddr]) -> ProtocolResult<Vec<(u64, u64)>> {
        let mut out = vec![(0, 0); ptrs.len()];
        let base = self.buf + ITEM_BUFFER;
        self.read_each(ptrs, base, ITEM_BYTES, "read items").await?;
        for (i, item) in out.iter_mut().enumerate() {
            let w = self.local_words(base + i as u64 * ITEM_BYTES, 2);
            *item = (w[0], w[1]);
        }
        Ok(out)
    }

    /// A published pointer the version check let through that names no item: only a torn
    /// image can carry one.
    fn item_ptr(&self, word: u64) -> Option<Gaddr> {
        let g = Gaddr(word);
        self.shared.layout.is_item(g).then_some(g)
    }

    // ---- lookup and scan ----------------------------------------------------------------

    /// The key's value (0 if absent or only claimed; a tombstone if deleted): READ the leaf,
    /// then its item.
    pub(super) async fn marlin_lookup(&mut self, key: u64) -> ProtocolResult<u64> {
        loop {
            let leaf = self.find_leaf(key).await?;
            if !leaf.covers(key) {
                return Ok(0);
            }
            let Some(i) = leaf.find(key) else { return Ok(0) };
            let Some(ptr) = self.item_ptr(leaf.slots[i].value) else {
                self.cur.retries += 1;
                continue;
            };
            // Items are immutable once published: the value was the key's at the leaf READ.
            return Ok(self.read_items(&[ptr]).await?[0].1);
        }
    }

    /// Up to `n` live entries with keys ≥ `from`, ascending: each leaf along the siblings,
    /// then its items (only as many as still wanted; more if some are tombstones).
    pub(super) async fn marlin_scan(&mut self, from: u64, n: usize) -> ProtocolResult<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        let mut leaf = self.find_leaf(from).await?;
        loop {
            let mut cands: Vec<(u64, Gaddr)> = leaf
                .slots
                .iter()
                .filter(|s| s.value != 0 && s.key >= from && leaf.covers(s.key))
                .filter_map(|s| self.item_ptr(s.value).map(|p| (s.key, p)))
                .collect();
            cands.sort_unstable();
            let mut next = 0;
            while next < cands.len() && out.len() < n {
                let take = (n - out.len()).min(cands.len() - next);
                let chunk = &cands[next..next + take];
                let ptrs: Vec<Gaddr> = chunk.iter().map(|c| c.1).collect();
                let items = self.read_items(&ptrs).await?;
                for ((key, _), (_, value)) in chunk.iter().zip(items) {
                    if value != 0 && value & TOMBSTONE == 0 {
                        out.push((*key, value));
                    }
                }
                next += take;
            }
            if out.len() >= n || !self.shared.layout.is_frame(leaf.sibling) {
                return Ok(out);
            }
            leaf = self.read_node_checked(leaf.sibling, false, false).await?;
        }
    }

    // ---- insert, update, delete ---------------------------------------------------------

    /// Insert or overwrite `key` with `value` (a tombstone deletes), blind.
    pub(super) async fn marlin_store(&mut self, key: u64, value: u64) -> ProtocolResult<()> {
        // One item per store, written again by every attempt until it is published.
        let mut item: Option<Gaddr> = None;
        loop {
            self.path.clear();
            let cached = self.cache_lookup(key);
            let mut page = match cached {
                Some((leaf, _)) if self.shared.layout.is_frame(leaf) => leaf,
                Some((_, id)) => {
                    self.cache_invalidate(id);
                    continue;
                }
                None => self.descend(key, 0).await?,
            };
            let mut from_cache = cached.map(|c| c.1);
            loop {
                let item = *item.get_or_insert_with(|| {
                    let mn = self.shared.layout.memory_nodes.iter().position(|m| *m == page.node());
                    self.shared.allocate_item(mn.unwrap_or(0))
                });
                match self.marlin_leaf_store(page, key, value, item, from_cache.is_some()).await? {
                    Attempt::Done => return Ok(()),
                    Attempt::Again => {}
                    Attempt::Right(sibling) => {
                        page = sibling;
                        from_cache = None;
                    }
                    Attempt::Route => {
                        match from_cache {
                            Some(id) => self.cache_invalidate(id),
                            None => self.cur.retries += 1,
                        }
                        break;
                    }
                }
            }
        }
    }

    /// One attempt on the leaf at `page`, publishing `item` (already allocated). A leaf the
    /// index cache routed to that does not cover the key means a stale entry: route again
    /// (Sherman's rule), rather than walking the siblings from it.
    async fn marlin_leaf_store(
        &mut self,
        page: Gaddr,
        key: u64,
        value: u64,
        item: Gaddr,
        from_cache: bool,
    ) -> ProtocolResult<Attempt> {
        let v = self.config().versions;
        let spear = self.spear(page);
        let read = Verb::Read { remote: page.remote(), local_bytes: self.buf, len_bytes: NODE_BYTES as u32 };
        if self.marlin_mutant() == Mutant::NoSpear {
            self.batch(&[read], "read leaf").await?;
        } else {
            let faa = Verb::Faa { remote: spear, add: 1 };
            let old = self.batch(&[faa, read], "Spear enter + read leaf").await?.get(0);
            if (old as i64) < SMO_UP_LIMIT {
                self.spear_leave(page).await?;
                self.cur.retries += 1;
                self.wait_smo(page).await?;
                return Ok(Attempt::Again);
            }
        }
        self.nic.cpu(Nanos(self.config().cpu.node_ns)).await;
        let words = self.local_words(self.buf, NODE_WORDS);
        let node = match Node::decode(v, &words) {
            Ok(n) => n,
            Err(_) => {
                // Only without Spear (the mutant) can a split's WRITE be in flight here.
                self.spear_leave(page).await?;
                self.cur.retries += 1;
                return Ok(Attempt::Again);
            }
        };
        if !node.is_leaf() || key < node.lowest || (from_cache && !node.covers(key)) {
            self.spear_leave(page).await?;
            return Ok(Attempt::Route);
        }
        if key >= node.highest {
            self.spear_leave(page).await?;
            return Ok(if self.shared.layout.is_frame(node.sibling) {
                Attempt::Right(node.sibling)
            } else {
                Attempt::Route
            });
        }
        // The item, written before it is published (RTT 2, with the key claim for inserts).
        let item_off = self.buf + ITEM_BUFFER;
        self.nic.local().write_words(item_off, &[key, value]);
        let write_item =
            Verb::Write { remote: item.remote(), local_bytes: item_off, len_bytes: ITEM_BYTES as u32 };
        let early_publish = self.marlin_mutant() == Mutant::PublishBeforeItem;
        let slot = match node.slots.iter().position(|s| s.key == key) {
            Some(i) => {
                // Update or delete (or an insert racing another insert of the same key).
                if !early_publish {
                    self.batch(&[write_item], "write item").await?;
                }
                i
            }
            None => {
                let used = node.slots.iter().filter(|s| s.key != 0).count();
                let empty: Vec<usize> = (0..node.slots.len()).filter(|i| node.slots[*i].key == 0).collect();
                if empty.is_empty() || (used + 1 >= self.config().leaf_split() && used >= 2) {
                    self.marlin_split(page).await?;
                    return Ok(Attempt::Again);
                }
                match self.claim(page, key, &empty, (!early_publish).then_some(write_item)).await? {
                    Some(i) => i,
                    None => {
                        // Every empty slot of the image was taken meanwhile: split next time.
                        self.spear_leave(page).await?;
                        self.cur.retries += 1;
                        return Ok(Attempt::Again);
                    }
                }
            }
        };
        // RTT 3: publish ‖ leave.
        let expect = if node.slots[slot].key == key { node.slots[slot].value } else { 0 };
        let cas = Verb::Cas { remote: self.slot_addr(page, key_word(v, slot) + 1), expect, swap: item.0 };
        let leave = Verb::Faa { remote: spear, add: u64::MAX };
        let old = match self.marlin_mutant() {
            Mutant::NoSpear => self.batch(&[cas], "publish item").await?.get(0),
            Mutant::ReleaseBeforeCas => {
                self.batch(&[leave], "Spear leave").await?;
                self.batch(&[cas], "publish item").await?.get(0)
            }
            _ => self.batch(&[cas, leave], "publish item + Spear leave").await?.get(0),
        };
        if early_publish {
            self.batch(&[write_item], "write item").await?;
        }
        if old == expect {
            return Ok(Attempt::Done);
        }
        // A concurrent update or same-key insert published first: start again (Spear is free).
        self.cur.retries += 1;
        Ok(Attempt::Again)
    }

    /// Claim an empty slot for `key`: CAS the key word of the lowest empty slot of the image,
    /// the first CAS in one batch with the item WRITE. A slot that turns out to hold `key`
    /// (a racing insert of it) is used as is. `None`: no empty slot left.
    async fn claim(
        &mut self,
        page: Gaddr,
        key: u64,
        empty: &[usize],
        write_item: Option<Verb>,
    ) -> ProtocolResult<Option<usize>> {
        let v = self.config().versions;
        let mut first = write_item;
        for &i in empty {
            let remote = self.slot_addr(page, key_word(v, i));
            let claim = if self.marlin_mutant() == Mutant::ClaimByWrite {
                Verb::WriteWord { remote, value: key }
            } else {
                Verb::Cas { remote, expect: 0, swap: key }
            };
            let old = match first.take() {
                // One doorbell batch when the item lives on the leaf's memory node (where the
                // store allocates it unless it moved right to a sibling on another one).
                Some(w) if w.remote().node == page.node() => {
                    self.batch(&[w, claim], "write item + claim slot").await?.get(1)
                }
                Some(w) => {
                    self.batch(&[w], "write item").await?;
                    self.batch(&[claim], "claim slot").await?.get(0)
                }
                None => self.batch(&[claim], "claim slot").await?.get(0),
            };
            if self.marlin_mutant() == Mutant::ClaimByWrite || old == 0 {
                return Ok(Some(i));
            }
            if old == key && self.marlin_mutant() != Mutant::ClaimSkipsOwnKey {
                return Ok(Some(i));
            }
            self.cur.retries += 1;
        }
        Ok(None)
    }

    /// Split the leaf at `page` while holding one shared Spear count; returns holding none.
    async fn marlin_split(&mut self, page: Gaddr) -> ProtocolResult<()> {
        let spear = self.spear(page);
        let enter = Verb::Faa { remote: spear, add: SMO_STATUS as u64 };
        let old = self.batch(&[enter], "Spear SMO enter").await?.get(0);
        // Our own shared count (none in the mutant, whose IDUs skip Spear).
        let held = if self.marlin_mutant() == Mutant::NoSpear { 0 } else { 1 };
        let release = (-SMO_STATUS - held) as u64;
        if (old as i64) < SMO_UP_LIMIT {
            // Another SMO holds it: undo both counts and wait for it.
            self.batch(&[Verb::Faa { remote: spear, add: release }], "Spear SMO back off").await?;
            self.cur.retries += 1;
            return self.wait_smo(page).await;
        }
        if self.marlin_mutant() != Mutant::SmoNoDrain {
            while self.read_word(spear, "Spear drain").await? != (SMO_STATUS + held) as u64 {
                self.nic.sleep(Nanos(500)).await;
                self.shared.errors.check()?;
            }
        }
        let v = self.config().versions;
        let mut node = self.read_node_checked(page, false, false).await?;
        let mut live: Vec<_> = node.slots.iter().copied().filter(|s| s.value != 0).collect();
        live.sort_unstable_by_key(|s| s.key);
        if live.len() < 2 || !node.is_leaf() {
            self.batch(&[Verb::Faa { remote: spear, add: release }], "Spear SMO leave").await?;
            return Ok(());
        }
        self.cur.splits += 1;
        let (m, sibling_addr, mut sibling) = self.right_sibling(&node, &live);
        let split_key = live[m].key;
        for (i, s) in live[m..].iter().enumerate() {
            sibling.slots[i] = *s;
        }
        node.slots = vec![Default::default(); v.leaf_cap()];
        for (i, s) in live[..m].iter().enumerate() {
            node.slots[i] = *s;
        }
        node.highest = split_key;
        node.sibling = sibling_addr;
        node.version = node.version.wrapping_add(1);
        let sib_off = self.buf + NODE_BYTES;
        self.nic.local().write_words(sib_off, &sibling.encode(v));
        let write_sibling =
            Verb::Write { remote: sibling_addr.remote(), local_bytes: sib_off, len_bytes: NODE_BYTES as u32 };
        self.batch(&[write_sibling], "SMO write sibling").await?;
        self.nic.local().write_words(self.buf, &node.encode(v));
        let write_node =
            Verb::Write { remote: page.remote(), local_bytes: self.buf, len_bytes: NODE_BYTES as u32 };
        let leave = Verb::Faa { remote: spear, add: release };
        self.batch(&[write_node, leave], "SMO write leaf + Spear SMO leave").await?;
        self.publish_split(page, 0, split_key, sibling_addr).await
    }
}
