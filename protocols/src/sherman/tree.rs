//! The B+-tree operations of one client thread (`Tree.cpp`: `search`, `insert`, `del`,
//! `range_query`, `leaf_page_store`, `internal_page_store`, `update_new_root`).
//!
//! * **Reads are lock-free**: READ the whole 1 KB node, accept it if its versions agree, else
//!   READ again. A leaf found through the index cache whose fences do not cover the key means
//!   the cache entry is stale: drop it and restart from the root.
//! * **Writes lock the leaf** (hierarchical lock, [`super::locks`]), READ it, change one entry
//!   and write back *only that entry* together with the unlock in one doorbell batch. A full
//!   leaf splits: the new right sibling is written first, then the shrunk node (whole, new node
//!   version) + unlock, then the separator goes into the parent the same way (internal nodes are
//!   always written whole), growing a new root by CAS on the root pointer when the root splits
//!   (`tree/split.rs`). Locks, write-back and the store into a leaf: `tree/write.rs`.
//! * Keys never leave a leaf (no merges; a delete leaves a tombstone, see [`super::node`]).
//! * Range scans walk leaf siblings, or READ a round of leaves together first (`tree/scan.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::cache::IndexCache;
use super::config::Config;
use super::layout::{Gaddr, Layout, NODE_BYTES, NODE_WORDS};
use super::leaf_cache::LeafCache;
use super::locks::LocalLocks;
use super::mutants::Mutant;
use super::node::Node;
use super::stats::{OpStats, Stats};
use crate::common::error::{ErrorSlot, NicExt, ProtocolResult};
use crate::nic::{BatchResult, Nanos, Nic, RemoteAddr, Verb};

mod marlin;
mod scan;
mod split;
mod write;

/// Local buffer words per thread: the node image, the sibling image, the entry write-back
/// (Marlin: a fourth kilobyte for items).
const THREAD_BUFFER_BYTES: u64 = 3 * NODE_BYTES;
const MARLIN_THREAD_BUFFER_BYTES: u64 = 4 * NODE_BYTES;

/// Leaves a parallel scan READs in one round (Sherman's `kParaFetch`), each into its own
/// kilobyte after the thread's other buffers.
const SCAN_ROUND_LEAVES: usize = 32;

fn thread_buffer_bytes(items: bool, parallel_scan: bool) -> u64 {
    let base = if items { MARLIN_THREAD_BUFFER_BYTES } else { THREAD_BUFFER_BYTES };
    base + if parallel_scan { SCAN_ROUND_LEAVES as u64 * NODE_BYTES } else { 0 }
}
/// Two 16-byte lock slots (the one read, the one written; `lock_version`) in the upper half of
/// the entry write-back kilobyte, which an entry (at most 4 words) never reaches.
const SLOT_BUFFER: u64 = 2 * NODE_BYTES + NODE_BYTES / 2;

pub fn compute_region_bytes(threads: u32, items: bool, parallel_scan: bool) -> u64 {
    threads as u64 * thread_buffer_bytes(items, parallel_scan)
}

/// What one compute node shares among its client threads.
pub struct Shared {
    pub config: Config,
    pub layout: Layout,
    /// This compute node's index among compute nodes.
    pub cn: usize,
    pub cache: Mutex<IndexCache>,
    pub locks: LocalLocks,
    /// The root as this node last saw it (0: read the root pointer).
    pub root: AtomicU64,
    /// P-Sherman: the key range `[lo, hi)` this compute node owns (it writes only those keys).
    pub partition: Option<(u64, u64)>,
    /// Next free frame per memory node in this node's slab.
    alloc: Mutex<Vec<u64>>,
    /// Marlin: next free item per memory node in this node's item slab.
    item_alloc: Mutex<Vec<u64>>,
    pub errors: ErrorSlot,
    pub stats: Mutex<Stats>,
    pub ops_done: AtomicU64,
    /// Where the client threads' buffers start in the compute node's region (after DiFache's
    /// index, headers and buffers with `leaf_cache`; else 0).
    pub buffer_base: u64,
}

impl Shared {
    pub fn new(config: Config, layout: Layout, cn: usize, cache: IndexCache) -> Shared {
        let mns = layout.memory_nodes.len();
        Shared {
            config,
            layout,
            cn,
            cache: Mutex::new(cache),
            locks: LocalLocks::default(),
            root: AtomicU64::new(0),
            partition: None,
            alloc: Mutex::new(vec![0; mns]),
            item_alloc: Mutex::new(vec![0; mns]),
            errors: ErrorSlot::new(),
            stats: Mutex::new(Stats::new()),
            ops_done: AtomicU64::new(0),
            buffer_base: 0,
        }
    }

    /// A fresh frame from this node's slab, round-robin over memory nodes ([CHOICE]: Sherman
    /// takes 32 MB chunks from memory nodes in turn and carves them locally; no verb either way).
    fn allocate(&self, hint: usize) -> Gaddr {
        let mut next = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        let mns = next.len();
        for i in 0..mns {
            let mn = (hint + i) % mns;
            if next[mn] < self.layout.slab_frames {
                let frame = self.layout.slab_start(self.cn) + next[mn];
                next[mn] += 1;
                return self.layout.frame(mn, frame);
            }
        }
        panic!("Sherman slab exhausted on compute node {}: the plan sized it too small", self.cn)
    }

    /// Marlin: a fresh item from this node's item slab, on memory node `mn` if it has room
    /// ([CHOICE]: the leaf's memory node), else the next one with room. No verb.
    fn allocate_item(&self, mn: usize) -> Gaddr {
        let slab = self.layout.items.map_or(0, |i| i.slab_items);
        let mut next = self.item_alloc.lock().unwrap_or_else(|e| e.into_inner());
        let mns = next.len();
        for i in 0..mns {
            let m = (mn + i) % mns;
            if next[m] < slab {
                let item = self.layout.item(m, self.layout.item_slab_start(self.cn) + next[m]);
                next[m] += 1;
                return item;
            }
        }
        panic!("Marlin item slab exhausted on compute node {}: the plan sized it too small", self.cn)
    }
}

/// The outcome of a write on a leaf.
enum Store {
    Done {
        replaced: u64,
    },
    /// The leaf came from the cache and does not cover the key.
    Stale,
}

/// One client thread.
pub struct Client<N: Nic> {
    pub nic: N,
    pub shared: Arc<Shared>,
    tag: u64,
    buf: u64,
    /// Counters of the operation in progress.
    pub cur: OpStats,
    /// Node addresses visited per level on the last descent (Sherman's `path_stack`).
    path: Vec<Gaddr>,
    alloc_hint: usize,
    /// The lock held (at most one at a time) includes the global lock word: false for a
    /// P-Sherman leaf locked only locally.
    global_held: bool,
    /// DiFache's cache of leaves (`leaf_cache`), this thread's door to it.
    pub leaf_cache: Option<LeafCache<N>>,
}

impl<N: Nic> Client<N> {
    pub fn new(nic: N, shared: Arc<Shared>, thread: u32) -> Client<N> {
        let tag = ((shared.cn as u64 + 1) << 32) | (thread as u64 + 1);
        let buf = shared.buffer_base
            + thread as u64 * thread_buffer_bytes(shared.config.items, shared.config.parallel_scan);
        let alloc_hint = thread as usize;
        Client {
            nic,
            shared,
            tag,
            buf,
            cur: OpStats::default(),
            path: Vec::new(),
            alloc_hint,
            global_held: true,
            leaf_cache: None,
        }
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

    /// READ `len` bytes at each of `addrs` into consecutive `len`-byte slots from `local`:
    /// one doorbell batch per memory node, posted together ([`NicExt::try_batches_by_target`],
    /// as the authors' `read_batches_sync`).
    pub(super) async fn read_each(
        &mut self,
        addrs: &[Gaddr],
        local: u64,
        len: u64,
        during: &'static str,
    ) -> ProtocolResult<()> {
        let reads: Vec<Verb> = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| Verb::Read {
                remote: a.remote(),
                local_bytes: local + i as u64 * len,
                len_bytes: len as u32,
            })
            .collect();
        self.cur.count_verbs(&reads);
        self.nic.try_batches_by_target(&reads, during).await
    }

    fn local_words(&self, offset: u64, n: usize) -> Vec<u64> {
        let mut w = vec![0u64; n];
        self.nic.local().read_words(offset, &mut w);
        w
    }

    // ---- reading ------------------------------------------------------------------------

    /// READ a node until its versions agree (the mutant accepts the first image). `bracket`
    /// (DEX's Sherman, `lock_version`): READ the node's `[version, lock]` slot before and
    /// after the node ([ART] `page_search` under `LOCK_VERSION`): READ again while the slot
    /// is locked before, or if after it the version changed *and* the slot is locked. That is
    /// the artifact's after-check, kept as the paper ran it (a textbook optimistic lock, DEX's
    /// [46], retries on either); the node and entry versions still catch a torn image.
    /// `split` (`version_reads`, the SELCC authors' Sherman): READ the front node version
    /// word, then the node, then the rear node version word, one after the other, and READ all
    /// three again unless the two words agree.
    async fn read_node_checked(&mut self, addr: Gaddr, bracket: bool, split: bool) -> ProtocolResult<Node> {
        let v = self.config().versions;
        let slot = self.shared.layout.version_addr(addr);
        let slot_buf = self.buf + SLOT_BUFFER;
        let front = addr.remote();
        let rear = RemoteAddr::new(front.node, front.offset_bytes + (NODE_BYTES - 8));
        loop {
            if split {
                let read = Verb::Read { remote: front, local_bytes: slot_buf, len_bytes: 8 };
                self.batch(&[read], "read front version").await?;
            }
            let before = if bracket {
                let read = Verb::Read { remote: slot, local_bytes: slot_buf, len_bytes: 16 };
                self.batch(&[read], "read lock version").await?;
                let w = self.local_words(slot_buf, 2);
                if w[1] != 0 {
                    self.cur.retries += 1;
                    continue;
                }
                Some(w[0])
            } else {
                None
            };
            let read =
                Verb::Read { remote: addr.remote(), local_bytes: self.buf, len_bytes: NODE_BYTES as u32 };
            self.batch(&[read], "read node").await?;
            if split {
                let read = Verb::Read { remote: rear, local_bytes: slot_buf + 8, len_bytes: 8 };
                self.batch(&[read], "read rear version").await?;
            }
            self.nic.cpu(Nanos(self.config().cpu.node_ns)).await;
            if split {
                let w = self.local_words(slot_buf, 2);
                if w[0] != w[1] && self.mutant() != Mutant::SkipVersionCheck {
                    self.cur.retries += 1;
                    continue;
                }
            }
            if let Some(version) = before {
                let read = Verb::Read { remote: slot, local_bytes: slot_buf, len_bytes: 16 };
                self.batch(&[read], "re-read lock version").await?;
                let w = self.local_words(slot_buf, 2);
                if w[0] != version && w[1] != 0 && self.mutant() != Mutant::SkipVersionCheck {
                    self.cur.retries += 1;
                    continue;
                }
            }
            if let Some(node) = self.decode_buffer(v) {
                return Ok(node);
            }
        }
    }

    /// The node image in the thread's buffer if its versions agree (the mutant takes any
    /// image); a torn one counts a retry.
    fn decode_buffer(&mut self, v: super::layout::Versions) -> Option<Node> {
        let words = self.local_words(self.buf, NODE_WORDS);
        match Node::decode(v, &words) {
            Ok(node) => Some(node),
            Err(torn) if self.mutant() == Mutant::SkipVersionCheck => {
                Some(Node::decode_unchecked(v, &words, torn))
            }
            Err(_) => {
                self.cur.retries += 1;
                None
            }
        }
    }

    /// A lock-free READ of an index node: bracketed by the lock slot with `lock_version`.
    async fn read_node(&mut self, addr: Gaddr) -> ProtocolResult<Node> {
        self.read_index_node(addr, false).await
    }

    /// A lock-free READ of an index node whose key range is known to lie inside this compute
    /// node's partition when `unshared`: with `skip_unshared_brackets` (P-Sherman) it is not
    /// bracketed (DEX §8: "non-shared nodes do not require RDMA-based synchronization").
    async fn read_index_node(&mut self, addr: Gaddr, unshared: bool) -> ProtocolResult<Node> {
        let skip = unshared && self.config().partitioned && self.config().skip_unshared_brackets;
        let bracket = self.config().lock_version && !skip;
        self.read_node_checked(addr, bracket, self.config().version_reads).await
    }

    /// Whether key range `[lo, hi)` lies inside this compute node's partition (P-Sherman).
    fn unshared(&self, lo: u64, hi: u64) -> bool {
        self.shared.partition.is_some_and(|(plo, phi)| plo <= lo && hi <= phi)
    }

    /// A lock-free READ of a leaf: bracketed with `lock_version` unless P-Sherman, whose
    /// leaves have no RDMA lock (DEX Table 2: P-Sherman 1.0 READs per lookup).
    async fn read_leaf(&mut self, addr: Gaddr) -> ProtocolResult<Node> {
        if self.leaf_cache.is_some() {
            return self.read_leaf_cached(addr).await;
        }
        let bracket = self.config().lock_version && !self.config().partitioned;
        self.read_node_checked(addr, bracket, self.config().version_reads).await
    }

    /// A leaf READ without the `lock_version` bracket (a scan's walk along siblings, the READ
    /// under the leaf's lock), through DiFache with `leaf_cache`.
    pub(super) async fn read_leaf_plain(&mut self, addr: Gaddr) -> ProtocolResult<Node> {
        if self.leaf_cache.is_some() {
            return self.read_leaf_cached(addr).await;
        }
        self.read_node_checked(addr, false, false).await
    }

    /// `leaf_cache`: the leaf through DiFache (a hit copies the cached image, a miss fetches
    /// it), into the thread's node buffer, until its versions agree: a miss whose fetch raced
    /// a writer's flush can install a torn image, valid until the writer's invalidation lands
    /// (DiFache promises no stale copy once a write *returns*), so a torn image is read again.
    async fn read_leaf_cached(&mut self, addr: Gaddr) -> ProtocolResult<Node> {
        let v = self.config().versions;
        loop {
            let lc = self.leaf_cache.as_ref().expect("leaf_cache is on");
            lc.read(addr).await?;
            let from = lc.buffer();
            self.nic.local().copy_from(self.buf, self.nic.local(), from, NODE_BYTES);
            self.nic.cpu(Nanos(self.config().cpu.node_ns)).await;
            if let Some(node) = self.decode_buffer(v) {
                return Ok(node);
            }
        }
    }

    async fn root(&mut self) -> ProtocolResult<Gaddr> {
        let cached = self.shared.root.load(Ordering::Relaxed);
        if cached != 0 {
            return Ok(Gaddr(cached));
        }
        self.refresh_root().await
    }

    async fn refresh_root(&mut self) -> ProtocolResult<Gaddr> {
        let read = Verb::Read { remote: self.shared.layout.root_ptr(), local_bytes: self.buf, len_bytes: 8 };
        self.batch(&[read], "read root pointer").await?;
        let root = self.nic.local().load(self.buf);
        self.shared.root.store(root, Ordering::Relaxed);
        Ok(Gaddr(root))
    }

    fn cache_lookup(&mut self, key: u64) -> Option<(Gaddr, u64)> {
        if self.config().cache_nodes == 0 {
            return None;
        }
        let hit = self.shared.cache.lock().unwrap_or_else(|e| e.into_inner()).lookup(key);
        if hit.is_some() {
            self.cur.cache_hits += 1;
        } else {
            self.cur.cache_misses += 1;
        }
        hit
    }

    fn cache_invalidate(&mut self, id: u64) {
        self.shared.cache.lock().unwrap_or_else(|e| e.into_inner()).invalidate(id);
        // Sherman counts a stale hit as a miss.
        self.cur.cache_hits -= 1;
        self.cur.cache_misses += 1;
        self.cur.retries += 1;
    }

    fn cache_add(&self, node: &Node) {
        if node.level == 1 && self.config().cache_nodes > 0 {
            self.shared.cache.lock().unwrap_or_else(|e| e.into_inner()).add(node);
        }
    }

    fn record_path(&mut self, level: u8, addr: Gaddr) {
        let l = level as usize;
        if self.path.len() <= l {
            self.path.resize(l + 1, Gaddr::NULL);
        }
        self.path[l] = addr;
    }

    /// Descend from the root to the node at `level` covering `key`, recording the path.
    /// Returns its address (not read when `level` is 0: writers lock before reading).
    async fn descend(&mut self, key: u64, level: u8) -> ProtocolResult<Gaddr> {
        self.path.clear();
        let mut p = self.root().await?;
        // The root's and a right sibling's ranges are unknown before the READ; a child's is
        // its parent's separator keys.
        let whole = self.unshared(0, u64::MAX);
        let mut unshared = whole;
        loop {
            let node = self.read_index_node(p, unshared).await?;
            unshared = whole;
            self.record_path(node.level, p);
            if node.level < level {
                // A stale root below the level we need: the tree grew since we cached it.
                self.cur.retries += 1;
                p = self.refresh_root().await?;
                self.path.clear();
                continue;
            }
            self.cache_add(&node);
            if key >= node.highest {
                if p.0 == self.shared.root.load(Ordering::Relaxed) {
                    // The root split: learn the new one next time (Sherman broadcasts it).
                    self.shared.root.store(0, Ordering::Relaxed);
                }
                if !self.shared.layout.is_frame(node.sibling) {
                    // Only a torn image the version check missed ends a level early.
                    self.cur.retries += 1;
                    p = self.refresh_root().await?;
                    self.path.clear();
                    continue;
                }
                p = node.sibling;
                continue;
            }
            if key < node.lowest {
                self.cur.retries += 1;
                p = self.refresh_root().await?;
                self.path.clear();
                continue;
            }
            if node.level == level {
                return Ok(p);
            }
            p = node.child_for(key);
            let (lo, hi) = node.child_range(key);
            unshared = self.unshared(lo, hi);
            if !self.shared.layout.is_frame(p) {
                // Only a torn image the version check missed can route to a non-node.
                self.cur.retries += 1;
                p = self.refresh_root().await?;
                self.path.clear();
                continue;
            }
            if node.level == level + 1 && level == 0 {
                return Ok(p);
            }
        }
    }

    /// The leaf covering `key`, read lock-free (the start of lookups and scans).
    async fn find_leaf(&mut self, key: u64) -> ProtocolResult<Node> {
        let mut from_cache = self.cache_lookup(key);
        let mut p = match from_cache {
            Some((leaf, _)) if self.shared.layout.is_frame(leaf) => leaf,
            Some((_, id)) => {
                self.cache_invalidate(id);
                from_cache = None;
                self.descend(key, 0).await?
            }
            None => self.descend(key, 0).await?,
        };
        loop {
            let node = self.read_leaf(p).await?;
            if let Some((_, id)) = from_cache {
                if self.mutant() == Mutant::StaleCacheEntry {
                    // The planted bug: trust the cached route, neither restart nor move right.
                    return Ok(node);
                }
                if !node.covers(key) {
                    self.cache_invalidate(id);
                    from_cache = None;
                    p = self.descend(key, 0).await?;
                    continue;
                }
            }
            if key >= node.highest && !node.sibling.is_null() && self.mutant() != Mutant::NoSiblingChase {
                p = if self.shared.layout.is_frame(node.sibling) {
                    node.sibling
                } else {
                    self.cur.retries += 1;
                    self.descend(key, 0).await?
                };
                continue;
            }
            return Ok(node);
        }
    }

    // ---- operations ---------------------------------------------------------------------

    /// The value stored for `key` as the leaf holds it: 0 if never stored, a tombstone if
    /// deleted (callers report both as absent).
    pub async fn lookup(&mut self, key: u64) -> ProtocolResult<u64> {
        if self.config().items {
            return self.marlin_lookup(key).await;
        }
        let leaf = self.find_leaf(key).await?;
        if !leaf.covers(key) {
            return Ok(0);
        }
        Ok(leaf.find(key).map(|i| leaf.slots[i].value).unwrap_or(0))
    }

    /// Insert or overwrite `key` with `value` (a tombstone deletes); returns the value replaced
    /// (0 if none), read under the lock. Marlin's writes are blind: 0.
    pub async fn store(&mut self, key: u64, value: u64) -> ProtocolResult<u64> {
        if self.config().items {
            return self.marlin_store(key, value).await.map(|_| 0);
        }
        if let Some((lo, hi)) = self.shared.partition {
            if key < lo || key >= hi {
                return Err(self.partition_error("store: a key another compute node owns (misrouted)"));
            }
        }
        if let Some((leaf, id)) = self.cache_lookup(key) {
            self.path.clear();
            if !self.shared.layout.is_frame(leaf) {
                // A cached torn image (node versions only): drop it, go from the root.
                self.cache_invalidate(id);
                return Box::pin(self.store(key, value)).await;
            }
            match self.leaf_store(leaf, key, value, true).await? {
                Store::Done { replaced } => return Ok(replaced),
                Store::Stale => self.cache_invalidate(id),
            }
        }
        loop {
            let leaf = self.descend(key, 0).await?;
            match self.leaf_store(leaf, key, value, false).await? {
                Store::Done { replaced } => return Ok(replaced),
                // Routed left of the key's leaf (only a torn internal node can do that).
                Store::Stale => self.cur.retries += 1,
            }
        }
    }
}
