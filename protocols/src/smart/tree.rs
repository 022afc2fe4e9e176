//! The compute side of SMART: one [`Tree`] per compute node (cache, delegation and combining
//! tables, allocation arenas) and a [`Worker`] per client thread. Lookups, upserts (insert,
//! update, delete as a tombstone) and scans follow `Tree::search` / `Tree::insert` /
//! `Tree::range_query` of dmemsys/SMART step by step; the module docs of [`super`] map them to
//! the paper.

use std::sync::{Arc, Mutex};

use super::cache::{CacheHit, CachedNode, RadixCache};
use super::config::{Config, Mutant};
use super::layout::{
    key_byte, leaf_words, pack_addr, unpack_addr, Entry, Header, Layout, LeafView, NodeType, LEAF_LOCK,
    LEAF_VALID, LEAF_VERSION_ONE, NODE_BYTES, SLOTS_OFFSET,
};
use super::local_table::{Entered, RoundTable};
use super::stats::{KindStats, OpKind, Stats, VerbCounts};
use crate::common::error::{ErrorInfo, ErrorSlot, NicExt, ProtocolResult, Target};
use crate::nic::{BatchResult, Nanos, Nic, NicError, RemoteAddr, Verb, MAX_BATCH};
use crate::sync::{Latch, Mode};

/// What one remote lookup found: the leaf value word (0 when the key has no leaf).
pub type ReadOutcome = ProtocolResult<u64>;
/// What one write replaced: the previous value word of the key (0 when it had no leaf).
pub type WriteOutcome = ProtocolResult<u64>;

/// A compute node's shared SMART state.
pub struct Tree<N: Nic> {
    pub nic: N,
    pub config: Config,
    pub layout: Arc<Layout>,
    pub compute_index: usize,
    cache: Mutex<RadixCache>,
    /// SMART's centralized FIFO queue lock: admissions and evictions serialize on it.
    fifo: Latch,
    reads: RoundTable<(), ReadOutcome>,
    writes: RoundTable<u64, WriteOutcome>,
    arena: Mutex<Arena>,
    pub errors: ErrorSlot,
    stats: Mutex<Stats>,
}

/// Bump allocation in this compute node's arena of every memory node, round robin.
struct Arena {
    next: Vec<u64>,
    end: Vec<u64>,
    turn: usize,
}

/// Per-thread state: its QP handle, its scratch buffers and the current operation's counters.
pub struct Worker<N: Nic> {
    pub nic: N,
    pub thread: u32,
    scratch: u64,
    op: OpCounters,
}

#[derive(Default)]
struct OpCounters {
    verbs: VerbCounts,
    retries: u64,
    traversed: bool,
    cache_hit: bool,
}

/// Where a traversal stands: the slot `at` it read `entry` from, the key bytes consumed, and
/// the cached copy the entry came from (if it did).
struct Cursor {
    at: RemoteAddr,
    entry: Entry,
    depth: usize,
    cached: Option<Arc<CachedNode>>,
}

/// An internal node as fetched.
struct Fetched {
    header: Header,
    slots: Vec<Entry>,
    /// The slot entry's type was the node's.
    type_correct: bool,
}

/// Scratch bytes per thread: a node read buffer, a new-node buffer, leaf buffers, a word.
pub fn scratch_bytes(layout: &Layout) -> u64 {
    NODE_BYTES + 64 + layout.leaf_bytes() * (MAX_BATCH as u64 + 1) + 8
}

impl<N: Nic> Tree<N> {
    pub fn new(nic: N, config: Config, layout: Arc<Layout>, compute_index: usize) -> Tree<N> {
        let mns = layout.memory_nodes.len();
        let (next, end) = (0..mns).map(|m| layout.arena(m, compute_index)).unzip();
        let cache = RadixCache::new(if config.cache { config.cache_bytes } else { 0 });
        Tree {
            nic,
            layout,
            compute_index,
            cache: Mutex::new(cache),
            fifo: Latch::new(),
            reads: RoundTable::default(),
            writes: RoundTable::default(),
            arena: Mutex::new(Arena { next, end, turn: compute_index % mns.max(1) }),
            errors: ErrorSlot::new(),
            stats: Mutex::new(Stats::new()),
            config,
        }
    }

    /// Coroutine `coro` of client thread `thread`: the thread's QP, its own buffers.
    pub fn worker(&self, thread: u32, coro: u32) -> Worker<N> {
        let slot = thread as u64 * self.config.coroutines_per_thread as u64 + coro as u64;
        Worker {
            nic: self.nic.qp(thread as u16),
            thread,
            scratch: slot * scratch_bytes(&self.layout),
            op: OpCounters::default(),
        }
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        s.cache_evictions = cache.evictions;
        s.cache_bytes = cache.bytes();
        s
    }

    /// Record a finished operation of `kind` that started at `start` (a warm-up one is only
    /// forgotten).
    pub fn record(&self, w: &mut Worker<N>, kind: OpKind, start: Nanos, shared: bool, warmup: bool) {
        let op = std::mem::take(&mut w.op);
        if warmup {
            return;
        }
        let latency = w.nic.now().saturating_sub(start).0;
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        stats.first_op_start_ns = Some(stats.first_op_start_ns.map_or(start.0, |s| s.min(start.0)));
        let k: &mut KindStats = stats.kind_mut(kind);
        k.ops += 1;
        k.verbs.merge(&op.verbs);
        k.retries += op.retries;
        k.traversals += op.traversed as u64;
        k.cache_hits += op.cache_hit as u64;
        k.shared += shared as u64;
        k.latency_ns_total += latency;
        k.latencies_ns.push(latency);
    }

    pub fn note_scan_disorder(&self) {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).scan_order_violations += 1;
    }

    // ---------------------------------------------------------------- verbs and buffers

    async fn io(
        &self,
        w: &mut Worker<N>,
        verbs: &[Verb],
        during: &'static str,
    ) -> ProtocolResult<BatchResult> {
        w.op.verbs.count(verbs);
        w.nic.try_batch(verbs, during).await
    }

    fn node_buf(&self, w: &Worker<N>) -> u64 {
        w.scratch
    }
    fn new_node_buf(&self, w: &Worker<N>) -> u64 {
        w.scratch + NODE_BYTES
    }
    fn leaf_buf(&self, w: &Worker<N>, i: usize) -> u64 {
        w.scratch + NODE_BYTES + 64 + i as u64 * self.layout.leaf_bytes()
    }
    fn word_buf(&self, w: &Worker<N>) -> u64 {
        w.scratch + scratch_bytes(&self.layout) - 8
    }

    fn local_words(&self, offset: u64, n: usize) -> Vec<u64> {
        let mut out = vec![0; n];
        self.nic.local().read_words(offset, &mut out);
        out
    }

    fn alloc(&self, w: &Worker<N>, bytes: u64) -> ProtocolResult<RemoteAddr> {
        let mut a = self.arena.lock().unwrap_or_else(|e| e.into_inner());
        let m = a.turn % a.next.len();
        a.turn += 1;
        let at = a.next[m];
        if at + bytes > a.end[m] {
            let node = self.layout.memory_nodes[m];
            return Err(ErrorInfo {
                node: w.nic.node(),
                verb: "ALLOC".into(),
                target: Target::Memory(RemoteAddr::new(node, at)),
                during: "allocating in the compute node's arena (raise protocol_options.arena_slack_bytes)",
                at: w.nic.now(),
                source: NicError::BadAddress {
                    node,
                    offset_bytes: at,
                    len_bytes: bytes,
                    region_size_bytes: a.end[m],
                },
            }
            .into());
        }
        a.next[m] = at + bytes.next_multiple_of(8);
        Ok(RemoteAddr::new(self.layout.memory_nodes[m], at))
    }

    // ---------------------------------------------------------------- reading

    async fn read_entry(&self, w: &mut Worker<N>, at: RemoteAddr) -> ProtocolResult<Entry> {
        let local = self.word_buf(w);
        self.io(w, &[Verb::Read { remote: at, local_bytes: local, len_bytes: 8 }], "re-read slot").await?;
        Ok(Entry(self.nic.local().load(local)))
    }

    /// Read a leaf until its checksum holds; `None` if it is no longer valid for the slot `at`
    /// (cleared valid bit, or a cached slot whose leaf moved elsewhere). SMART `read_leaf`.
    async fn read_leaf(
        &self,
        w: &mut Worker<N>,
        leaf: RemoteAddr,
        at: RemoteAddr,
        from_cache: bool,
    ) -> ProtocolResult<Option<LeafView>> {
        let local = self.leaf_buf(w, 0);
        let len = self.layout.leaf_bytes();
        loop {
            self.io(
                w,
                &[Verb::Read { remote: leaf, local_bytes: local, len_bytes: len as u32 }],
                "read leaf",
            )
            .await?;
            let view = LeafView::parse(&self.local_words(local, (len / 8) as usize));
            // SMART also CASes a mismatched rev_ptr back to the slot it came from (lazy repair);
            // a reader on a path older than a split would undo the split's move. Not done here
            // (NEEDS.md).
            if !view.valid() || (from_cache && view.rev_ptr != at) {
                return Ok(None);
            }
            if !view.consistent && self.config.mutant != Mutant::ChecksumSkipped {
                w.op.retries += 1;
                continue;
            }
            return Ok(Some(view));
        }
    }

    /// Read the node `c.entry` points to, as many slots as its type says (and the rest if the
    /// header says it grew). `None` if it is deleted, or reached by a stale path (SMART
    /// `read_node`).
    async fn read_node(&self, w: &mut Worker<N>, c: &mut Cursor) -> ProtocolResult<Option<Fetched>> {
        let local = self.node_buf(w);
        let addr = c.entry.addr();
        let slots = c.entry.node_type().slots().max(1);
        let len = SLOTS_OFFSET + 8 * slots as u64;
        self.io(w, &[Verb::Read { remote: addr, local_bytes: local, len_bytes: len as u32 }], "read node")
            .await?;
        w.nic.cpu(Nanos(self.config.cpu.node_search_ns)).await;
        let head = self.local_words(local, 2);
        let header = Header(head[1]);
        let mut type_correct = true;
        let mut n = slots;
        if header.node_type() != c.entry.node_type() {
            type_correct = false;
            let stale_ok = self.config.mutant == Mutant::StaleCacheTypeUsed && c.cached.is_some();
            if header.node_type() > c.entry.node_type() && !stale_ok {
                let rest = header.node_type().slots() - slots;
                let verb = Verb::Read {
                    remote: addr.add(len),
                    local_bytes: local + len,
                    len_bytes: 8 * rest as u32,
                };
                self.io(w, &[verb], "read grown node").await?;
                w.op.retries += 1;
                n = header.node_type().slots();
            }
            if !stale_ok {
                c.entry = c.entry.with_type(header.node_type());
            }
        }
        let slots: Vec<Entry> = self.local_words(local + SLOTS_OFFSET, n).into_iter().map(Entry).collect();
        let rev_ptr = unpack_addr(head[0]);
        let valid = header.node_type() != NodeType::DELETED
            && header.depth() <= c.depth
            && (c.cached.is_none() || rev_ptr == c.at);
        Ok(valid.then_some(Fetched { header, slots, type_correct }))
    }

    // ---------------------------------------------------------------- the cache

    async fn start(&self, w: &mut Worker<N>, key: u64) -> Cursor {
        w.op.traversed = true;
        if self.config.cache {
            w.nic.cpu(Nanos(self.config.cpu.cache_lookup_ns)).await;
            let hit: Option<CacheHit> = self.cache.lock().unwrap_or_else(|e| e.into_inner()).lookup(key);
            if let Some(h) = hit {
                w.op.cache_hit = true;
                return Cursor {
                    at: h.node.slot_addr(h.slot),
                    entry: h.node.slots[h.slot],
                    depth: h.node.depth + 1,
                    cached: Some(h.node),
                };
            }
        }
        let root = self.layout.root_entry();
        Cursor { at: self.layout.root_ptr(), entry: root, depth: 0, cached: None }
    }

    fn invalidate(&self, key: u64, c: &Cursor) {
        if let Some(node) = &c.cached {
            self.cache.lock().unwrap_or_else(|e| e.into_inner()).invalidate(key, node);
        }
    }

    /// Cache a freshly read node (SMART admits it when the path depth equals its header depth).
    async fn admit(&self, w: &mut Worker<N>, key: u64, c: &Cursor, f: &Fetched) {
        if !self.config.cache || c.depth != f.header.depth() {
            return;
        }
        let node = CachedNode {
            addr: c.entry.addr(),
            depth: f.header.depth() + f.header.partial_len(),
            node_type: f.header.node_type(),
            slots: f.slots.iter().copied().take(f.header.node_type().slots()).collect(),
        };
        self.fifo.lock(Mode::Exclusive).await;
        w.nic.cpu(Nanos(self.config.cpu.cache_admit_ns)).await;
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).admit(key, node);
        self.fifo.unlock(Mode::Exclusive);
    }

    // ---------------------------------------------------------------- lookup

    /// The value word of `key` (0: never written; a tombstone: deleted), with read delegation.
    pub async fn lookup(&self, w: &mut Worker<N>, key: u64) -> (ReadOutcome, bool) {
        if !self.config.read_delegation {
            return (self.lookup_remote(w, key).await, false);
        }
        match self.reads.enter(key, ()).await {
            Entered::Done(r) => (r, true),
            Entered::Lead(members) => {
                let r = self.lookup_remote(w, key).await;
                members.into_iter().for_each(|m| m.finish(r.clone()));
                let late = self.reads.late_arrivals(key);
                if self.config.mutant == Mutant::DelegationAfterRead {
                    late.into_iter().for_each(|m| m.finish(r.clone()));
                    self.reads.hand_over(key, Vec::new());
                } else {
                    self.reads.hand_over(key, late);
                }
                (r, false)
            }
        }
    }

    async fn lookup_remote(&self, w: &mut Worker<N>, key: u64) -> ReadOutcome {
        let mut c = self.start(w, key).await;
        loop {
            if c.entry.is_null() {
                return Ok(0);
            }
            if c.entry.is_leaf() {
                match self.read_leaf(w, c.entry.addr(), c.at, c.cached.is_some()).await? {
                    None => {
                        self.invalidate(key, &c);
                        w.op.retries += 1;
                        c.entry = self.read_entry(w, c.at).await?;
                        c.cached = None;
                        continue;
                    }
                    Some(leaf) => return Ok(if leaf.key == key { leaf.value } else { 0 }),
                }
            }
            let Some(f) = self.read_node(w, &mut c).await? else {
                self.invalidate(key, &c);
                w.op.retries += 1;
                c.entry = self.read_entry(w, c.at).await?;
                c.cached = None;
                continue;
            };
            if c.cached.is_some() && !f.type_correct && self.config.mutant != Mutant::StaleCacheTypeUsed {
                self.invalidate(key, &c);
            }
            if f.header.mismatch(key).is_some() {
                return Ok(0);
            }
            // Only after the prefix matched: the cache files the copy under the key's prefix.
            self.admit(w, key, &c, &f).await;
            let depth = f.header.depth() + f.header.partial_len();
            let byte = key_byte(key, depth);
            let Some(i) = f.slots.iter().position(|e| !e.is_null() && e.partial() == byte) else {
                return Ok(0);
            };
            c = Cursor {
                at: c.entry.addr().add(SLOTS_OFFSET + 8 * i as u64),
                entry: f.slots[i],
                depth: depth + 1,
                cached: None,
            };
        }
    }

    // ---------------------------------------------------------------- writes

    /// Write `value` for `key` (insert, update, or a tombstone for delete), with write
    /// combining. Returns what the write replaced in the key's linearization order.
    pub async fn write(&self, w: &mut Worker<N>, key: u64, value: u64) -> (WriteOutcome, bool) {
        if !self.config.write_combining {
            return (self.write_remote(w, key, value).await, false);
        }
        match self.writes.enter(key, value).await {
            Entered::Done(r) => (r, true),
            Entered::Lead(members) => {
                // The round writes its last member's value; the others are overwritten at once,
                // in arrival order (each "replaced" its predecessor).
                let last = members.last().map_or(value, |m| m.payload);
                let r = self.write_remote(w, key, last).await;
                let mut previous = value;
                for m in members {
                    let payload = m.payload;
                    m.finish(r.clone().map(|_| previous));
                    previous = payload;
                }
                let late = self.writes.late_arrivals(key);
                if self.config.mutant == Mutant::CombiningDropsWrite {
                    for m in late {
                        let payload = m.payload;
                        m.finish(r.clone().map(|_| previous));
                        previous = payload;
                    }
                    self.writes.hand_over(key, Vec::new());
                } else {
                    self.writes.hand_over(key, late);
                }
                (r, false)
            }
        }
    }

    /// Publish `entry` in the slot `at` if it still holds `expect` (a CAS; the `cas-as-write`
    /// mutant writes blindly). Returns the slot's old value.
    async fn publish(
        &self,
        w: &mut Worker<N>,
        at: RemoteAddr,
        expect: Entry,
        entry: Entry,
    ) -> ProtocolResult<Entry> {
        if self.config.mutant == Mutant::CasAsWrite {
            self.io(w, &[Verb::WriteWord { remote: at, value: entry.0 }], "publish slot").await?;
            return Ok(expect);
        }
        let r =
            self.io(w, &[Verb::Cas { remote: at, expect: expect.0, swap: entry.0 }], "publish slot").await?;
        Ok(Entry(r.get(0)))
    }

    /// A new leaf for `key` whose parent slot will be `at`, written before it is published.
    async fn write_leaf(
        &self,
        w: &mut Worker<N>,
        key: u64,
        value: u64,
        at: RemoteAddr,
    ) -> ProtocolResult<RemoteAddr> {
        let addr = self.alloc(w, self.layout.leaf_bytes())?;
        let local = self.leaf_buf(w, 0);
        self.nic.local().write_words(local, &leaf_words(at, key, value, self.layout.value_words));
        let len = self.layout.leaf_bytes() as u32;
        self.io(w, &[Verb::Write { remote: addr, local_bytes: local, len_bytes: len }], "write leaf").await?;
        Ok(addr)
    }

    async fn write_remote(&self, w: &mut Worker<N>, key: u64, value: u64) -> WriteOutcome {
        let mut c = self.start(w, key).await;
        loop {
            if c.entry.is_null() {
                // Only a re-read slot can be empty here: put the leaf in it.
                let byte = key_byte(key, c.depth - 1);
                let leaf = self.write_leaf(w, key, value, c.at).await?;
                let old = self.publish(w, c.at, Entry::NULL, Entry::leaf(byte, leaf)).await?;
                if old.is_null() {
                    return Ok(0);
                }
                w.op.retries += 1;
                c.entry = old;
                continue;
            }
            if c.entry.is_leaf() {
                let Some(leaf) = self.read_leaf(w, c.entry.addr(), c.at, c.cached.is_some()).await? else {
                    self.invalidate(key, &c);
                    w.op.retries += 1;
                    c.entry = self.read_entry(w, c.at).await?;
                    c.cached = None;
                    continue;
                };
                if leaf.key == key {
                    return self.update_in_place(w, key, value, c.entry.addr(), leaf).await;
                }
                // Two keys meet: a new node holding the old leaf and the new one.
                let lcp = (c.depth..8).take_while(|&d| key_byte(key, d) == key_byte(leaf.key, d)).count();
                match self.split(w, key, value, &c, lcp, key_byte(leaf.key, c.depth + lcp)).await? {
                    None => return Ok(0),
                    Some(old) => {
                        w.op.retries += 1;
                        c.entry = old;
                        c.cached = None;
                        continue;
                    }
                }
            }
            let Some(f) = self.read_node(w, &mut c).await? else {
                self.invalidate(key, &c);
                w.op.retries += 1;
                c.entry = self.read_entry(w, c.at).await?;
                c.cached = None;
                continue;
            };
            if c.cached.is_some() && !f.type_correct && self.config.mutant != Mutant::StaleCacheTypeUsed {
                self.invalidate(key, &c);
            }
            let mismatch =
                f.header.mismatch(key).filter(|_| self.config.mutant != Mutant::InsertIgnoresPrefix);
            if let Some(i) = mismatch {
                // The key leaves the node's compressed prefix at byte i: a new parent takes the
                // shared part, the node keeps the rest (SMART's header split).
                let Some(lcp) = (f.header.depth() + i).checked_sub(c.depth) else {
                    // The node's prefix disagrees with bytes our path already matched: stale.
                    w.op.retries += 1;
                    c.entry = self.read_entry(w, c.at).await?;
                    c.cached = None;
                    continue;
                };
                match self.split(w, key, value, &c, lcp, f.header.partial(i)).await? {
                    None => {
                        self.invalidate(key, &c);
                        // A plain CAS of the whole header (SMART masks out the type bits): a
                        // concurrent growth only changes the type, so retry with it.
                        let header_at = c.entry.addr().add(8);
                        let mut current = f.header;
                        loop {
                            let verb =
                                Verb::Cas { remote: header_at, expect: current.0, swap: current.split(i).0 };
                            let old = Header(self.io(w, &[verb], "shorten split header").await?.get(0));
                            if old == current
                                || old.with_type(current.node_type())
                                    != f.header.with_type(current.node_type())
                            {
                                break;
                            }
                            w.op.retries += 1;
                            current = old;
                        }
                        return Ok(0);
                    }
                    Some(old) => {
                        w.op.retries += 1;
                        c.entry = old;
                        c.cached = None;
                        continue;
                    }
                }
            }
            self.admit(w, key, &c, &f).await;
            let depth = f.header.depth() + f.header.partial_len();
            let byte = key_byte(key, depth);
            let node = c.entry.addr();
            let slot_at = |i: usize| node.add(SLOTS_OFFSET + 8 * i as u64);
            if let Some(i) = f.slots.iter().position(|e| !e.is_null() && e.partial() == byte) {
                c = Cursor { at: slot_at(i), entry: f.slots[i], depth: depth + 1, cached: None };
                continue;
            }
            // An empty slot of the node's current type, else "insert behind" its last slot.
            let mut leaf = None;
            let mut next = None;
            let exposed = c.entry.node_type().slots();
            for i in (0..256).filter(|&i| i >= exposed || f.slots.get(i).is_some_and(|e| e.is_null())) {
                let addr = match leaf {
                    Some(a) => {
                        // Moving to another slot: the leaf's rev_ptr must follow.
                        let verb = Verb::WriteWord { remote: a, value: pack_addr(slot_at(i)) };
                        self.io(w, &[verb], "retarget new leaf").await?;
                        a
                    }
                    None => self.write_leaf(w, key, value, slot_at(i)).await?,
                };
                leaf = Some(addr);
                let old = self.publish(w, slot_at(i), Entry::NULL, Entry::leaf(byte, addr)).await?;
                if old.is_null() {
                    if i >= exposed {
                        self.grow(w, &c, f.header, NodeType::for_slot(i, self.config.fine_grain_nodes))
                            .await?;
                        self.invalidate(key, &c);
                    }
                    return Ok(0);
                }
                w.op.retries += 1;
                if old.partial() == byte {
                    next = Some(Cursor { at: slot_at(i), entry: old, depth: depth + 1, cached: None });
                    break;
                }
            }
            match next {
                Some(n) => c = n,
                None => {
                    // All 256 slots taken by other bytes cannot happen (one slot per byte).
                    return Err(ErrorInfo {
                        node: w.nic.node(),
                        verb: "CAS".into(),
                        target: Target::Memory(node),
                        during: "insert: a NODE_256 without a slot for the key's byte",
                        at: w.nic.now(),
                        source: NicError::BadBatch { reason: "corrupt node" },
                    }
                    .into());
                }
            }
        }
    }

    /// Replace the entry at `c.at` by a new NODE_4 whose prefix is the key's bytes
    /// `c.depth .. c.depth + lcp`, holding the old entry (under byte `old_byte`) and a new leaf
    /// for `key`. `None` on success; the slot's current entry if the CAS lost.
    async fn split(
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
    async fn grow(
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
    async fn update_in_place(
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
            if self.config.mutant == Mutant::LeafLockSkipped {
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

    // ---------------------------------------------------------------- scans

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
                    if view.key >= from && view.value & super::layout::TOMBSTONE == 0 && out.len() < count {
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
