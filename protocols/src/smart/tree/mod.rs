//! The compute side of SMART: one [`Tree`] per compute node (cache, delegation and combining
//! tables, allocation arenas) and a [`Worker`] per client thread. Lookups, upserts (insert,
//! update, delete as a tombstone) and scans follow `Tree::search` / `Tree::insert` /
//! `Tree::range_query` of dmemsys/SMART step by step; the module docs of [`super`] map them to
//! the paper.

mod change;
mod scan;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::cache::{CacheHit, CachedNode, RadixCache};
use super::config::{Config, Mutant};
use super::layout::{
    key_byte, leaf_words, pack_addr, unpack_addr, Entry, Header, Layout, LeafView, NodeType, LEAF_LOCK,
    LEAF_VALID, LEAF_VERSION_ONE, NODE_BYTES, SLOTS_OFFSET,
};
use super::local_table::{Entered, RoundTable};
use super::stats::{KindStats, OpKind, Stats, VerbCounts};
use crate::common::bench::ThreadSpan;
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
    /// P-SMART: the key range `[lo, hi)` this compute node owns, and a local lock per key its
    /// writes hold instead of the leaf's RDMA lock.
    pub partition: Option<(u64, u64)>,
    key_locks: Mutex<BTreeMap<u64, Arc<Latch>>>,
    pub errors: ErrorSlot,
    stats: Mutex<Stats>,
    /// Per client thread (all its coroutines), for `thread_mops` (the DEX artifact's
    /// per-thread rates summed).
    thread_spans: Mutex<Vec<ThreadSpan>>,
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
            partition: None,
            key_locks: Mutex::new(BTreeMap::new()),
            errors: ErrorSlot::new(),
            stats: Mutex::new(Stats::new()),
            thread_spans: Mutex::new(vec![ThreadSpan::default(); config.threads_per_node as usize]),
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
        let spans = self.thread_spans.lock().unwrap_or_else(|e| e.into_inner());
        s.thread_rate_sum = spans.iter().filter_map(ThreadSpan::rate_per_ns).sum();
        s
    }

    /// Record a finished operation of `kind` that started at `start` (a warm-up one is only
    /// forgotten).
    pub fn record(&self, w: &mut Worker<N>, kind: OpKind, start: Nanos, shared: bool, warmup: bool) {
        let op = std::mem::take(&mut w.op);
        if warmup {
            return;
        }
        let end = w.nic.now();
        let latency = end.saturating_sub(start).0;
        {
            let mut spans = self.thread_spans.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(span) = spans.get_mut(w.thread as usize) {
                span.record(start.0, end.0);
            }
        }
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

    pub fn note_scan(&self, scan: crate::workload::scan_check::ScanRecord) {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).scans.push(scan);
    }

    pub fn note_window_short(&self) {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).window_short_clients += 1;
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
        if let Some((lo, hi)) = self.partition {
            if key < lo || key >= hi {
                let error = ErrorInfo {
                    node: w.nic.node(),
                    verb: "-".into(),
                    target: Target::Port { node: w.nic.node(), port: 0 },
                    during: "write: a key another compute node owns (misrouted)",
                    at: w.nic.now(),
                    source: NicError::BadBatch { reason: "P-SMART partition violated" },
                };
                return (Err(error.into()), false);
            }
        }
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
        if self.partition.is_none() || self.config.mutant == Mutant::PartitionKeyUnlocked {
            return self.write_remote_unlocked(w, key, value).await;
        }
        // P-SMART: this node's writes of `key` one at a time (with write combining on, rounds
        // already are), so a leaf read inside is the value the write replaces.
        let latch = {
            let mut locks = self.key_locks.lock().unwrap_or_else(|e| e.into_inner());
            locks.entry(key).or_insert_with(|| Arc::new(Latch::new())).clone()
        };
        latch.lock(Mode::Exclusive).await;
        let r = self.write_remote_unlocked(w, key, value).await;
        latch.unlock(Mode::Exclusive);
        r
    }

    /// Grow the node at `c` (read with `header`) to a type that covers slot `i`, so readers
    /// see what was put behind its old type; the cached copy of the node is dropped.
    async fn expose_slot(
        &self,
        w: &mut Worker<N>,
        key: u64,
        c: &Cursor,
        header: Header,
        i: usize,
    ) -> ProtocolResult<()> {
        self.grow(w, c, header, NodeType::for_slot(i, self.config.fine_grain_nodes)).await?;
        self.invalidate(key, c);
        Ok(())
    }

    async fn write_remote_unlocked(&self, w: &mut Worker<N>, key: u64, value: u64) -> WriteOutcome {
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
                    // SMART returns without locking when the leaf already holds the value
                    // (`leaf->get_value() == v` in Tree.cpp's insert).
                    if leaf.value == value {
                        return Ok(value);
                    }
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
                        self.expose_slot(w, key, &c, f.header, i).await?;
                    }
                    return Ok(0);
                }
                w.op.retries += 1;
                if old.partial() == byte {
                    if i >= exposed && self.config.mutant != Mutant::WriteBehindUnexposed {
                        // Another insert put this byte behind the node's type and may not have
                        // grown it yet: readers cannot see the slot. Grow it before writing
                        // through it, or this write could return while a later lookup misses
                        // its key (found by the fuzzer, NEEDS.md 'Insert behind').
                        self.expose_slot(w, key, &c, f.header, i).await?;
                    }
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
}
