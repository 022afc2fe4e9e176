//! The operations of one client (§3.6–§3.8): hybrid pathfinding, get, update/insert/delete
//! (one upserting `store`), the three insert cases, both SMO cases, and scan.
//!
//! * **Pathfinding** ([`Client::descend`]): start at the deepest cached node on the key's path
//!   (or the root), match one byte exactly per ART node, check a child's compressed prefix,
//!   range-search the last byte in a special node; stop at a leaf entry, an empty slot or a
//!   child whose prefix the key leaves. Nothing is concluded from a *cached* slot word alone:
//!   an empty or mismatching cached slot is re-read first.
//! * **Get**: one READ of the leaf; its `rev_ptr` and `[min, max]` validate a cached route;
//!   a stale one backtracks through the parent (re-read it, re-pick, re-read the leaf: +2 RTTs).
//! * **IDU** (MS-RNIC write synchronization): FAA(Spear, +1) ‖ READ keys (RTT 1), then WRITE the
//!   value ‖ FAA(−1) (RTT 2); an insert first claims an empty key slot with CAS (RTT 2, value
//!   RTT 3). Concurrent writers of one value word are ordered by the memory node's NIC.
//! * **Insert cases** (Fig. 4): (a) a free slot in the key's leaf; (b) no leaf for the key's
//!   first 7 bytes: a new leaf in the empty slot, or, where a slot holds a child whose prefix
//!   the key leaves, a new ART node above that child holding both ("push-down"); (c) a full
//!   leaf: split, then retry.
//! * **SMO** (Spear exclusive, drained): case 1 (parent is an ART node): new leaf E and new
//!   special node D, CAS the parent slot C → D; case 2 (parent is special): new leaf E, CAS
//!   its empty slot in D. Then the old leaf is rewritten (shrunk range, moved slots cleared) —
//!   one WRITE whose range line lands first, which is what lets lock-free readers trust a leaf
//!   image by its `[min, max]`. E is born SMO-locked so no writer changes a moved key while a
//!   stale reader may still find it in the old leaf.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::cache::IndexCache;
use super::config::Config;
use super::layout::*;
use super::mutants::Mutant;
use crate::common::error::{ErrorSlot, NicExt, ProtocolResult};
use crate::nic::{BatchResult, Nanos, Nic, Verb};
use crate::sherman::stats::{OpStats, Stats};

mod scan;

/// Most leaves one scan step reads together (at most `MAX_BATCH` per memory node).
pub const SCAN_BATCH: usize = 8;

/// Local scratch per client: one node image and `SCAN_BATCH` leaf images.
pub const CLIENT_BUFFER_BYTES: u64 = NODE_BYTES + SCAN_BATCH as u64 * LEAF_BYTES + 64;

/// What one compute node shares among its clients.
pub struct Shared {
    pub config: Config,
    pub layout: Layout,
    pub cn: usize,
    pub cache: Mutex<IndexCache>,
    /// Next free byte per memory node in this compute node's arena.
    alloc: Mutex<(Vec<u64>, usize)>,
    /// Bytes this compute node allocated for new leaves and nodes.
    pub allocated: AtomicU64,
    pub errors: ErrorSlot,
    pub stats: Mutex<Stats>,
    pub ops_done: AtomicU64,
}

impl Shared {
    pub fn new(config: Config, layout: Layout, cn: usize) -> Shared {
        let capacity = if config.cache { config.cache_bytes } else { 0 };
        let mns = layout.memory_nodes;
        Shared {
            cache: Mutex::new(IndexCache::new(capacity)),
            alloc: Mutex::new((vec![0; mns], cn)),
            allocated: AtomicU64::new(0),
            errors: ErrorSlot::new(),
            stats: Mutex::new(Stats::new()),
            ops_done: AtomicU64::new(0),
            config,
            layout,
            cn,
        }
    }

    /// `bytes` from this node's arena, memory nodes in turn ([CHOICE] as Sherman's chunked
    /// allocator: no verb).
    fn allocate(&self, bytes: u64) -> Gaddr {
        let mut a = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        let mns = a.0.len();
        for _ in 0..mns {
            let mn = a.1 % mns;
            a.1 += 1;
            if a.0[mn] + bytes <= self.layout.arena_bytes {
                let offset = self.layout.arena_start(self.cn) + a.0[mn];
                a.0[mn] += bytes;
                self.allocated.fetch_add(bytes, Ordering::Relaxed);
                return Gaddr { mn: mn as u16, offset };
            }
        }
        panic!("Dolphin arena exhausted on compute node {}: the plan sized it too small", self.cn)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, IndexCache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Where pathfinding stopped.
enum Found {
    /// A leaf entry in `slot` of node `parent`.
    Leaf { addr: Gaddr, slot: Gaddr, parent: Gaddr, parent_depth: u8, parent_special: bool, via_cache: bool },
    /// An empty slot of an ART node (read fresh): the key is absent (insert case b).
    Empty { slot: Gaddr },
    /// `slot` (read fresh) holds `child` whose prefix the key leaves at some byte in
    /// `parent_depth + 1 .. child_depth`.
    Mismatch { slot: Gaddr, child: u64, child_prefix: u64, child_depth: u8, parent_depth: u8 },
}

/// What a leaf image says about a key.
enum Verdict {
    Use,
    /// The leaf (reached fresh, hanging above depth 7) is another window's.
    OtherWindow,
    /// Stale route: the parent was refreshed, go again.
    Retry,
}

pub struct Client<N: Nic> {
    pub nic: N,
    pub shared: Arc<Shared>,
    buf: u64,
    pub cur: OpStats,
}

impl<N: Nic> Client<N> {
    pub fn new(nic: N, shared: Arc<Shared>, thread: u32) -> Client<N> {
        Client { nic, shared, buf: thread as u64 * CLIENT_BUFFER_BYTES, cur: OpStats::default() }
    }

    fn config(&self) -> &Config {
        &self.shared.config
    }

    fn mutant(&self) -> Mutant {
        self.shared.config.mutant
    }

    async fn batch(&mut self, verbs: &[Verb], during: &'static str) -> ProtocolResult<BatchResult> {
        self.cur.count_verbs(verbs);
        self.nic.try_batch(verbs, during).await
    }

    /// `verbs` to several memory nodes, one doorbell batch per node posted together
    /// ([`NicExt::try_batches_by_target`]), as the authors' `read_batches_sync`.
    async fn batches(&mut self, verbs: &[Verb], during: &'static str) -> ProtocolResult<()> {
        self.cur.count_verbs(verbs);
        self.nic.try_batches_by_target(verbs, during).await
    }

    fn local_words(&self, offset: u64, n: usize) -> Vec<u64> {
        let mut w = vec![0u64; n];
        self.nic.local().read_words(offset, &mut w);
        w
    }

    fn leaf_buf(&self) -> u64 {
        self.buf + NODE_BYTES
    }

    async fn read_word(&mut self, at: Gaddr, during: &'static str) -> ProtocolResult<u64> {
        let b = self.buf;
        self.batch(&[Verb::Read { remote: at.remote(), local_bytes: b, len_bytes: 8 }], during).await?;
        Ok(self.nic.local().load(b))
    }

    async fn cas(&mut self, at: Gaddr, expect: u64, swap: u64, during: &'static str) -> ProtocolResult<u64> {
        let r = self.batch(&[Verb::Cas { remote: at.remote(), expect, swap }], during).await?;
        Ok(r.get(0))
    }

    async fn faa(&mut self, at: Gaddr, add: u64, during: &'static str) -> ProtocolResult<u64> {
        let r = self.batch(&[Verb::Faa { remote: at.remote(), add }], during).await?;
        Ok(r.get(0))
    }

    /// READ an internal node and admit it to the cache.
    async fn read_node(&mut self, addr: Gaddr) -> ProtocolResult<NodeImage> {
        let b = self.buf;
        let read = Verb::Read { remote: addr.remote(), local_bytes: b, len_bytes: NODE_READ_BYTES };
        self.batch(&[read], "read internal node").await?;
        let node = NodeImage::decode(&self.local_words(b, NODE_WORDS));
        self.nic.cpu(Nanos(self.config().cpu.cache_ns)).await;
        self.shared.cache().admit(addr, &node);
        Ok(node)
    }

    /// Write a whole object (its own batch; objects may live on different memory nodes).
    async fn write_words(&mut self, at: Gaddr, words: &[u64], during: &'static str) -> ProtocolResult<()> {
        let b = if words.len() as u64 * 8 > LEAF_BYTES { self.buf } else { self.leaf_buf() };
        self.nic.local().write_words(b, words);
        let write = Verb::Write { remote: at.remote(), local_bytes: b, len_bytes: words.len() as u32 * 8 };
        self.batch(&[write], during).await.map(|_| ())
    }

    // ---- pathfinding ----------------------------------------------------------------------

    /// Where a walk for `key` starts: the deepest cached internal node covering it, else the
    /// root read fresh; `true` if from the cache.
    async fn start_node(&mut self, key: u64) -> ProtocolResult<(Gaddr, NodeImage, bool)> {
        self.nic.cpu(Nanos(self.config().cpu.cache_ns)).await;
        let hit = if self.config().cache { self.shared.cache().deepest(key) } else { None };
        Ok(match hit {
            Some(c) => {
                self.cur.cache_hits += 1;
                (c.addr, c.node, true)
            }
            None => {
                self.cur.cache_misses += 1;
                (ROOT, self.read_node(ROOT).await?, false)
            }
        })
    }

    async fn descend(&mut self, key: u64) -> ProtocolResult<Found> {
        let (mut addr, mut node, mut via_cache) = self.start_node(key).await?;
        loop {
            self.nic.cpu(Nanos(self.config().cpu.node_ns)).await;
            let Some(i) = node.pick(key) else {
                // A special node always has slot 0 (its first leaf starts at byte 0x00); a
                // cached copy without it is stale.
                self.cur.retries += 1;
                node = self.read_node(addr).await?;
                via_cache = false;
                continue;
            };
            let slot = addr.plus(slot_offset(i));
            let mut e = node.slots[i];
            if e == 0 && via_cache && self.mutant() != Mutant::CachedNullIsAbsent {
                e = self.refresh_slot(&node, slot, i).await?;
                node.slots[i] = e;
                via_cache = false;
                if node.special {
                    continue; // the floor may now pick another slot
                }
            }
            let Some(kind) = entry_kind(e) else {
                return Ok(Found::Empty { slot });
            };
            if kind == Kind::Leaf {
                return Ok(Found::Leaf {
                    addr: entry_addr(e),
                    slot,
                    parent: addr,
                    parent_depth: node.depth,
                    parent_special: node.special,
                    via_cache,
                });
            }
            let child = self.read_node(entry_addr(e)).await?;
            if via_cache && child.rev != slot.word() {
                // The cached slot is stale (the child has a new parent): re-read it.
                self.cur.retries += 1;
                let fresh = self.refresh_slot(&node, slot, i).await?;
                node.slots[i] = fresh;
                via_cache = false;
                continue;
            }
            if prefix(key, child.depth) != child.prefix {
                if via_cache {
                    let fresh = self.refresh_slot(&node, slot, i).await?;
                    via_cache = false;
                    if fresh != e {
                        node.slots[i] = fresh;
                        continue;
                    }
                }
                return Ok(Found::Mismatch {
                    slot,
                    child: e,
                    child_prefix: child.prefix,
                    child_depth: child.depth,
                    parent_depth: node.depth,
                });
            }
            addr = entry_addr(e);
            node = child;
            via_cache = false;
        }
    }

    /// Re-read slot `i` of `node` (at `slot`) and update the cached copy.
    async fn refresh_slot(&mut self, node: &NodeImage, slot: Gaddr, i: usize) -> ProtocolResult<u64> {
        let w = self.read_word(slot, "re-read a cached slot").await?;
        self.shared.cache().refresh_slot(node.depth, node.prefix, i, w);
        Ok(w)
    }

    /// Judge a leaf image for `key` reached through `found`; a stale route refreshes the
    /// parent (backtracking) and asks for a retry.
    async fn judge(&mut self, key: u64, leaf: &LeafImage, found: &Found) -> ProtocolResult<Verdict> {
        let Found::Leaf { addr, slot, parent, parent_special, mut via_cache, .. } = *found else {
            unreachable!("judge is called on leaves")
        };
        self.nic.cpu(Nanos(self.config().cpu.leaf_ns)).await;
        if self.mutant() == Mutant::SkipRangeCheck {
            return Ok(Verdict::Use);
        }
        let mut stale_rev = via_cache && leaf.rev != slot.word();
        let other_window = prefix(leaf.min, SPECIAL_DEPTH) != prefix(key, SPECIAL_DEPTH);
        if via_cache && !parent_special && (stale_rev || other_window) {
            // Conclude nothing from a cached slot: re-read it; unchanged, the route is fresh.
            let w = self.read_word(slot, "re-read a cached slot").await?;
            self.shared.cache().set_slot(slot, w);
            if w != entry(Kind::Leaf, addr) {
                self.cur.retries += 1;
                return Ok(Verdict::Retry);
            }
            via_cache = false;
            stale_rev = false;
        }
        if !stale_rev && leaf.covers(key) {
            return Ok(Verdict::Use);
        }
        if other_window && !via_cache && !parent_special {
            return Ok(Verdict::OtherWindow);
        }
        // Backtrack: the parent (special: a split added a leaf; ART node: the slot changed).
        self.cur.retries += 1;
        if self.cur.retries > 64 {
            // Someone's SMO is between its steps: let it run.
            self.nic.sleep(Nanos(500)).await;
            self.shared.errors.check()?;
        }
        self.read_node(parent).await?;
        Ok(Verdict::Retry)
    }

    // ---- get ------------------------------------------------------------------------------

    /// The key's value (0 if absent; a tombstone if deleted).
    pub async fn get(&mut self, key: u64) -> ProtocolResult<u64> {
        loop {
            let found = self.descend(key).await?;
            let Found::Leaf { addr, .. } = found else { return Ok(0) };
            let b = self.leaf_buf();
            let read = Verb::Read { remote: addr.remote(), local_bytes: b, len_bytes: LEAF_BYTES as u32 };
            self.batch(&[read], "read leaf").await?;
            let leaf = LeafImage::decode(&self.local_words(b, LEAF_WORDS));
            match self.judge(key, &leaf, &found).await? {
                Verdict::Use => return Ok(leaf.slot_of(key).map_or(0, |x| leaf.values[x])),
                Verdict::OtherWindow => return Ok(0),
                Verdict::Retry => {}
            }
        }
    }

    // ---- insert / update / delete ----------------------------------------------------------

    /// FAA(Spear, +1) ‖ READ the leaf's keys: (old lock word, image).
    async fn enter(&mut self, addr: Gaddr) -> ProtocolResult<(u64, LeafImage)> {
        let b = self.leaf_buf();
        let read = Verb::Read { remote: addr.remote(), local_bytes: b, len_bytes: LEAF_KEYS_BYTES };
        if self.mutant() == Mutant::NoSpear {
            self.batch(&[read], "read leaf keys").await?;
            return Ok((0, LeafImage::decode(&self.local_words(b, L_VALUES))));
        }
        let faa = Verb::Faa { remote: addr.plus(LOCK_BYTES).remote(), add: 1 };
        let r = self.batch(&[faa, read], "Spear enter + read leaf keys").await?;
        Ok((r.get(0), LeafImage::decode(&self.local_words(b, L_VALUES))))
    }

    async fn leave(&mut self, addr: Gaddr) -> ProtocolResult<()> {
        if self.mutant() != Mutant::NoSpear {
            self.faa(addr.plus(LOCK_BYTES), u64::MAX, "Spear leave").await?;
        }
        Ok(())
    }

    /// Poll the lock word until no SMO holds it.
    async fn wait_smo(&mut self, addr: Gaddr) -> ProtocolResult<()> {
        loop {
            self.nic.sleep(Nanos(1_000)).await;
            self.shared.errors.check()?;
            let w = self.read_word(addr.plus(LOCK_BYTES), "wait for an SMO").await?;
            if (w as i64) >= SMO_UP_LIMIT {
                return Ok(());
            }
        }
    }

    /// WRITE `value` into slot `x` and leave Spear, in one doorbell batch (RTT 2).
    async fn write_value(&mut self, addr: Gaddr, x: usize, value: u64) -> ProtocolResult<()> {
        let write = Verb::WriteWord { remote: addr.plus(value_word(x)).remote(), value };
        let release = Verb::Faa { remote: addr.plus(LOCK_BYTES).remote(), add: u64::MAX };
        match self.mutant() {
            Mutant::NoSpear => self.batch(&[write], "write value").await.map(|_| ()),
            Mutant::ReleaseBeforeWrite => {
                self.batch(&[release], "Spear leave").await?;
                self.batch(&[write], "write value").await.map(|_| ())
            }
            _ => self.batch(&[write, release], "write value + Spear leave").await.map(|_| ()),
        }
    }

    /// Update, insert or delete (a tombstone value): the key holds `value` afterwards.
    pub async fn store(&mut self, key: u64, value: u64) -> ProtocolResult<()> {
        loop {
            self.shared.errors.check()?;
            let found = self.descend(key).await?;
            let (addr, slot, parent, parent_special, parent_depth) = match found {
                Found::Empty { slot } => {
                    if self.new_leaf(key, value, slot).await? {
                        return Ok(());
                    }
                    continue;
                }
                Found::Mismatch { slot, child, child_prefix, child_depth, parent_depth } => {
                    if self
                        .push_down(key, value, slot, child, child_prefix, child_depth, parent_depth)
                        .await?
                    {
                        return Ok(());
                    }
                    continue;
                }
                Found::Leaf { addr, slot, parent, parent_special, parent_depth, .. } => {
                    (addr, slot, parent, parent_special, parent_depth)
                }
            };
            let (old, leaf) = self.enter(addr).await?;
            if (old as i64) < SMO_UP_LIMIT {
                self.leave(addr).await?;
                self.cur.retries += 1;
                self.wait_smo(addr).await?;
                continue;
            }
            match self.judge(key, &leaf, &found).await? {
                Verdict::Retry => {
                    self.leave(addr).await?;
                    continue;
                }
                Verdict::OtherWindow => {
                    self.leave(addr).await?;
                    let e = entry(Kind::Leaf, addr);
                    let pfx = prefix(leaf.min, SPECIAL_DEPTH);
                    if self.push_down(key, value, slot, e, pfx, SPECIAL_DEPTH, parent_depth).await? {
                        return Ok(());
                    }
                    continue;
                }
                Verdict::Use => {}
            }
            if let Some(x) = leaf.slot_of(key) {
                return self.write_value(addr, x, value).await;
            }
            // Insert case (a): claim an empty key slot, lowest first.
            let mut claimed = None;
            for x in (0..self.config().split_at()).filter(|x| leaf.keys[*x] == 0) {
                let at = addr.plus(key_word(x));
                let old = if self.mutant() == Mutant::InsertWithoutCas {
                    let w = Verb::WriteWord { remote: at.remote(), value: key };
                    self.batch(&[w], "claim key slot").await?;
                    0
                } else {
                    self.cas(at, 0, key, "claim key slot").await?
                };
                if old == 0 || old == key {
                    claimed = Some(x);
                    break;
                }
                self.cur.retries += 1;
            }
            if let Some(x) = claimed {
                return self.write_value(addr, x, value).await;
            }
            // Insert case (c): the leaf is full; split it (Spear exclusive), then retry.
            self.split(addr, slot, parent, parent_special).await?;
        }
    }

    /// Insert case (b), empty slot: a new leaf for the key's window, then CAS it in.
    async fn new_leaf(&mut self, key: u64, value: u64, slot: Gaddr) -> ProtocolResult<bool> {
        let (lo, hi) = window(key);
        let mut leaf = LeafImage::new(lo, hi, slot.word());
        leaf.keys[0] = key;
        leaf.values[0] = value;
        let addr = self.shared.allocate(LEAF_BYTES);
        self.write_words(addr, &leaf.encode(), "write new leaf").await?;
        let old = self.cas(slot, 0, entry(Kind::Leaf, addr), "link new leaf").await?;
        if old != 0 {
            self.cur.retries += 1;
            self.shared.cache().set_slot(slot, old);
        }
        Ok(old == 0)
    }

    /// Insert case (b), a child whose prefix the key leaves: a new ART node at the first
    /// differing byte, holding the child and a new leaf for the key, CAS'd into `slot`; then
    /// the child's `rev_ptr` moves to its new slot.
    #[allow(clippy::too_many_arguments)]
    async fn push_down(
        &mut self,
        key: u64,
        value: u64,
        slot: Gaddr,
        child: u64,
        child_prefix: u64,
        child_depth: u8,
        parent_depth: u8,
    ) -> ProtocolResult<bool> {
        let Some(m) = first_difference(key, child_prefix, parent_depth + 1, child_depth) else {
            // The prefixes agree after all (a concurrent change): go again.
            self.cur.retries += 1;
            return Ok(false);
        };
        let naddr = self.shared.allocate(NODE_BYTES);
        let laddr = self.shared.allocate(LEAF_BYTES);
        let (kb, cb) = (byte(key, m), byte(child_prefix, m));
        let mut node = NodeImage::new(m, false, prefix(key, m), slot.word());
        node.slots[cb] = child;
        node.slots[kb] = entry(Kind::Leaf, laddr);
        let (lo, hi) = window(key);
        let mut leaf = LeafImage::new(lo, hi, naddr.plus(slot_offset(kb)).word());
        leaf.keys[0] = key;
        leaf.values[0] = value;
        self.write_words(laddr, &leaf.encode(), "write new leaf").await?;
        self.write_words(naddr, &node.encode(), "write new ART node").await?;
        let old = self.cas(slot, child, entry(Kind::Exact, naddr), "link new ART node").await?;
        if old != child {
            self.cur.retries += 1;
            self.shared.cache().set_slot(slot, old);
            return Ok(false);
        }
        if self.mutant() != Mutant::PushdownKeepsRevPtr {
            let rev = entry_addr(child);
            self.cas(rev, slot.word(), naddr.plus(slot_offset(cb)).word(), "move rev_ptr").await?;
        }
        Ok(true)
    }

    /// Split the leaf at `addr` (reached through `slot` of `parent`), holding one shared Spear
    /// count; returns with none.
    async fn split(
        &mut self,
        addr: Gaddr,
        slot: Gaddr,
        parent: Gaddr,
        parent_special: bool,
    ) -> ProtocolResult<()> {
        let lock = addr.plus(LOCK_BYTES);
        let old = self.faa(lock, SMO_STATUS as u64, "Spear SMO enter").await?;
        if (old as i64) < SMO_UP_LIMIT {
            // Another SMO holds it: undo both counts and wait.
            self.faa(lock, (-SMO_STATUS - 1) as u64, "Spear SMO back off").await?;
            self.cur.retries += 1;
            return self.wait_smo(addr).await;
        }
        if self.mutant() != Mutant::SmoNoDrain {
            while self.read_word(lock, "Spear drain").await? != (SMO_STATUS + 1) as u64 {
                self.nic.sleep(Nanos(500)).await;
                self.shared.errors.check()?;
            }
        }
        let b = self.leaf_buf();
        let read = Verb::Read { remote: addr.remote(), local_bytes: b, len_bytes: LEAF_BYTES as u32 };
        self.batch(&[read], "SMO read leaf").await?;
        self.nic.cpu(Nanos(self.config().cpu.leaf_ns)).await;
        let leaf = LeafImage::decode(&self.local_words(b, LEAF_WORDS));
        let mut items: Vec<(usize, u64, u64)> = (0..LEAF_SLOTS)
            .filter(|x| leaf.keys[*x] != 0)
            .map(|x| (x, leaf.keys[x], leaf.values[x]))
            .collect();
        items.sort_by_key(|i| i.1);
        let release_old = (-SMO_STATUS - 1) as u64;
        if items.len() < 2 {
            self.faa(lock, release_old, "Spear SMO leave").await?;
            return Ok(());
        }
        // The paper: "evenly distributes ... placing the larger portion into the new leaf
        // node"; the code keeps `cnt / 4 * 3` (`split_rule`).
        let m = self.config().split_rule.keep(items.len()).clamp(1, items.len() - 1);
        let split_key = items[m].1;
        let moved =
            if self.mutant() == Mutant::SplitDropsLast { &items[m..items.len() - 1] } else { &items[m..] };
        let mut new = LeafImage::new(split_key, leaf.max, 0);
        new.lock = if self.mutant() == Mutant::NewLeafUnlocked { 0 } else { SMO_STATUS as u64 };
        for (s, (_, k, v)) in moved.iter().enumerate() {
            new.keys[s] = *k;
            new.values[s] = *v;
        }
        let mut shrunk = leaf.clone();
        if self.mutant() != Mutant::SplitKeepsMax {
            shrunk.max = split_key - 1;
        }
        for (x, _, _) in &items[m..] {
            shrunk.keys[*x] = 0;
            shrunk.values[*x] = 0;
        }
        let eaddr = self.shared.allocate(LEAF_BYTES);
        let j = byte(split_key, SPECIAL_DEPTH);
        if parent_special {
            // Case 2 (Fig. 4(e)): the parent is special; E goes into its empty slot j.
            let eslot = parent.plus(slot_offset(j));
            new.rev = eslot.word();
            self.write_words(eaddr, &new.encode(), "SMO write new leaf").await?;
            let old = self.cas(eslot, 0, entry(Kind::Leaf, eaddr), "SMO link new leaf").await?;
            if old != 0 {
                self.faa(lock, release_old, "Spear SMO leave").await?;
                self.cur.retries += 1;
                return Ok(());
            }
            self.shared.cache().set_slot(eslot, entry(Kind::Leaf, eaddr));
        } else {
            // Case 1 (Fig. 4(d)): a new special node D above the old leaf and E.
            let daddr = self.shared.allocate(NODE_BYTES);
            let c0 = byte(leaf.min, SPECIAL_DEPTH);
            let mut d = NodeImage::new(SPECIAL_DEPTH, true, prefix(leaf.min, SPECIAL_DEPTH), slot.word());
            d.slots[c0] = entry(Kind::Leaf, addr);
            d.slots[j] = entry(Kind::Leaf, eaddr);
            new.rev = daddr.plus(slot_offset(j)).word();
            shrunk.rev = daddr.plus(slot_offset(c0)).word();
            self.write_words(eaddr, &new.encode(), "SMO write new leaf").await?;
            self.write_words(daddr, &d.encode(), "SMO write special node").await?;
            let expect = entry(Kind::Leaf, addr);
            let old = self.cas(slot, expect, entry(Kind::Special, daddr), "SMO link special node").await?;
            if old != expect {
                self.faa(lock, release_old, "Spear SMO leave").await?;
                self.cur.retries += 1;
                return Ok(());
            }
        }
        let words = shrunk.encode();
        self.write_words(addr, &words[..L_LOCK], "SMO rewrite old leaf").await?;
        self.faa(lock, release_old, "Spear SMO leave").await?;
        if new.lock != 0 {
            self.faa(eaddr.plus(LOCK_BYTES), (-SMO_STATUS) as u64, "Spear SMO leave new leaf").await?;
        }
        self.cur.splits += 1;
        Ok(())
    }
}
