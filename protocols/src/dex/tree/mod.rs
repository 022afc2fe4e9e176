//! DEX's index operations on one compute server (paper §4–§5, Algorithm 1).
//!
//! * **Traversal** (`descend`) starts at the cached root and follows swizzled pointers; a
//!   pointer that is not swizzled probes the mapping table: a COOLING page gets its second
//!   chance (re-swizzled), the I/O flag or a frame in flight means restart, and a miss puts the
//!   I/O flag, fetches the node (one 1 KB READ, or for a shared node lock word + node + lock word
//!   (Alg. 1 lines 3–6)), checks the parent did not change meanwhile and the fences cover the
//!   key (else the cached parent is stale: `refresh`), and installs it. Inner nodes are always
//!   admitted; a leaf with probability P_A once the cache has filled, else it is used from the
//!   READ buffer (a write goes back with one 1 KB WRITE while the I/O flag is held).
//! * **Writes** change cached leaves in place and mark them dirty: no RDMA at all. Leaves are
//!   never shared, so they need no RDMA lock.
//! * **Splits** are eager: a write traversal splits every full node it meets, top-down. The new
//!   right node is written at once (and cached); the separator goes into the cached parent. A
//!   shared parent (or a shared node being split) is changed under its RDMA lock (CAS 0 → tag on
//!   its lock word), only if the cached copy is still the remote one (same version), and written
//!   back before unlocking; otherwise the split is abandoned and the stale parent refreshed. A
//!   root split flushes the cache's tree, splits under the root's lock and swings the root
//!   pointer by CAS.
//! * **Cooling** (`ensure_free`): when a thread's free-page set runs low it takes a never-used
//!   frame; once the cache has filled it first samples frames and cools the end of their
//!   cached path (path-aware delegation, dirty pages written back first; a push into a full
//!   bucket frees that bucket's head), as the artifact's `opportunistic_sample`, and only if
//!   that freed nothing evicts the head of a random cooling-map bucket (probing a few).
//! * **Refresh** of a stale cached node flushes its whole cached subtree (dirty pages written
//!   back, frames freed) so the next traversal fetches fresh copies ([CHOICE]: the paper
//!   re-fetches the path and invalidates stale nodes; dropping the subtree keeps the cached
//!   paths contiguous without patching swizzled pointers).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::sync::TouchMark;

use rand_chacha::rand_core::Rng;
use rand_chacha::ChaCha8Rng;

use super::cache::{Cache, Entry, FrameId, State};
use super::config::{Config, VERSIONS};
use super::mutants::Mutant;
use super::offload::{Collector, OpCode};
use super::partition::Partitions;
use crate::common::error::{ErrorSlot, NicExt, ProtocolResult};
use crate::nic::{Nanos, Nic, RemoteAddr, Verb};
use crate::sherman::layout::{Gaddr, Layout, NODE_BYTES, NODE_WORDS};
use crate::sherman::node::{Node, Slot};
use crate::sherman::stats::{OpStats, Stats};
use crate::workload::zipf::unit_f64;

mod cooling;
mod locks;
mod offload;
mod repartition;
mod scan;
mod split;

pub use repartition::{HANDOFF_OFFSET, MOVE_DONE, MOVE_NONE, MOVE_SWITCHED};

/// Per thread: a READ buffer, a WRITE buffer, a word.
const THREAD_BUFFER_BYTES: u64 = 3 * NODE_BYTES;

pub fn compute_region_bytes(threads: u32) -> u64 {
    threads as u64 * THREAD_BUFFER_BYTES
}

/// What one compute server shares among its threads.
pub struct Shared {
    pub config: Config,
    pub layout: Layout,
    /// The partition map this server started with (a planned move not yet made).
    parts_before: Partitions,
    /// Where this server is in a repartitioning ([`MOVE_NONE`], [`MOVE_SWITCHED`]: routing
    /// changed, flush under way, [`MOVE_DONE`]).
    pub move_state: AtomicU8,
    /// Operations that started before this server switched its routing and are still running.
    pub before_switch: AtomicU64,
    /// Repartitioning measurements for the node report.
    pub counters: Mutex<std::collections::BTreeMap<String, f64>>,
    /// This server's index among compute servers (= its partition).
    pub cn: u16,
    cache: Mutex<Cache>,
    /// Set on every hand-out of the cache ([`Shared::cache`]): the per-event invariant check
    /// looks again only at a server whose cache may have changed (most events are the fabric's).
    cache_touched: TouchMark,
    alloc: Mutex<Vec<u64>>,
    pub errors: ErrorSlot,
    pub stats: Mutex<Stats>,
    pub ops_done: AtomicU64,
    /// Threads still running (the last one flushes the cache when quiescing).
    pub active: AtomicU64,
    /// The first offload that met a node not covering its key (a half-done split).
    pub torn: Mutex<Option<String>>,
    /// Completed scans, when the run logs histories (`check::check_scans_complete`).
    pub scans: Mutex<Vec<crate::dex::check::ScanRecord>>,
    /// The timing of the cooling structure's locks.
    cooling_locks: Mutex<locks::CoolingLocks>,
    /// The timing of the cached leaves' write latches.
    leaf_latches: Mutex<locks::LeafLatches>,
}

impl Shared {
    pub fn new(
        config: Config,
        layout: Layout,
        parts: Partitions,
        cn: u16,
        cache: Cache,
        threads: u32,
    ) -> Shared {
        let mns = layout.memory_nodes.len();
        let cooling_locks = Mutex::new(locks::CoolingLocks::new(config.cooling));
        Shared {
            config,
            layout,
            parts_before: parts,
            move_state: AtomicU8::new(MOVE_NONE),
            before_switch: AtomicU64::new(0),
            counters: Mutex::new(std::collections::BTreeMap::new()),
            cn,
            cache: Mutex::new(cache),
            cache_touched: TouchMark::default(),
            alloc: Mutex::new(vec![0; mns]),
            errors: ErrorSlot::new(),
            stats: Mutex::new(Stats::new()),
            ops_done: AtomicU64::new(0),
            active: AtomicU64::new(threads as u64),
            torn: Mutex::new(None),
            scans: Mutex::new(Vec::new()),
            cooling_locks,
            leaf_latches: Mutex::new(locks::LeafLatches::new()),
        }
    }

    /// The partition map this server routes by now.
    pub fn parts(&self) -> Partitions {
        if self.move_state.load(Ordering::Acquire) == MOVE_NONE {
            self.parts_before
        } else {
            self.parts_before.after_move()
        }
    }

    /// The map the cache invariants hold against: while a flush is under way the old owner may
    /// still cache the moving range.
    pub fn parts_for_check(&self) -> Partitions {
        if self.move_state.load(Ordering::Acquire) == MOVE_DONE {
            self.parts_before.after_move()
        } else {
            self.parts_before
        }
    }

    /// The cache, locked for a step that may change it.
    pub fn cache(&self) -> MutexGuard<'_, Cache> {
        self.cache_touched.mark();
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cache for the invariant checker, which changes nothing: `None` if it was not handed
    /// out since the last call and `again` is false.
    pub fn cache_for_check(&self, again: bool) -> Option<MutexGuard<'_, Cache>> {
        let touched = self.cache_touched.take();
        (touched || again).then(|| self.cache.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A fresh frame on memory node `mn` (the splitting node's: [ART] keeps a level-M subtree on
    /// one memory server), from this server's slab; no verb (carved locally, as Sherman).
    fn allocate(&self, mn: usize) -> Gaddr {
        let mut next = self.alloc.lock().unwrap_or_else(|e| e.into_inner());
        let mns = next.len();
        for i in 0..mns {
            let m = (mn + i) % mns;
            if next[m] < self.layout.slab_frames {
                let frame = self.layout.slab_start(self.cn as usize) + next[m];
                next[m] += 1;
                return self.layout.frame(m, frame);
            }
        }
        panic!("DEX slab exhausted on compute server {}: the plan sized it too small", self.cn)
    }

    fn mn_index(&self, addr: Gaddr) -> usize {
        self.layout.memory_nodes.iter().position(|m| *m == addr.node()).unwrap_or(0)
    }

    /// The RDMA lock word of node `addr` (one per frame, after the frames).
    pub fn lock_word(&self, addr: Gaddr) -> RemoteAddr {
        self.layout.lock_word(addr.node(), addr.offset() / NODE_BYTES)
    }
}

/// The leaf a traversal ended at.
enum Leaf {
    /// A HOT frame: use it before the next await.
    Cached(FrameId),
    /// A leaf not admitted: its image, with the I/O flag held.
    Uncached(Gaddr, Node),
    /// The operation ran on a memory server: the value found or replaced.
    Offloaded(u64),
}

/// What a write to a cached leaf did.
enum Store {
    /// Written: the value replaced.
    Done(u64),
    /// No room: split first.
    Full,
    /// Its latch was held: restart from the root.
    Restart,
}

enum Step {
    Leaf(Leaf),
    Restart,
    /// An offload fell back (a split is needed): finish this operation without offloading.
    NoOffload,
}

/// A missed node to fetch.
struct Miss {
    child: Gaddr,
    shared: bool,
    parent: FrameId,
    parent_addr: Gaddr,
    parent_version: u64,
    child_level: u8,
    admit: bool,
    /// Sample this fetch's latency for the offload cost model.
    sample: bool,
}

/// What the synchronous walk asks for next.
enum Action {
    Leaf(FrameId),
    /// Walk again (state changed under the lock, e.g. a second chance at the root).
    Again,
    Backoff,
    Refresh(FrameId),
    Split(FrameId),
    FetchRoot(Gaddr),
    Fetch(Miss),
    Offload(Miss, OpCode),
}

/// `[lo, hi)` that `parent` routes to its child for `key`.
fn slot_range(parent: &Node, key: u64) -> (u64, u64) {
    let i = parent.children.partition_point(|(k, _)| *k <= key);
    let lo = if i == 0 { parent.lowest } else { parent.children[i - 1].0 };
    let hi = parent.children.get(i).map(|(k, _)| *k).unwrap_or(parent.highest);
    (lo, hi)
}

/// One client thread.
pub struct Client<N: Nic> {
    pub nic: N,
    pub shared: Arc<Shared>,
    tag: u64,
    buf: u64,
    pub cur: OpStats,
    rng: ChaCha8Rng,
    /// The thread-local free-page set.
    free: Vec<FrameId>,
    /// CPU owed for the synchronous steps since the last charge.
    cpu_owed: u64,
    thread: u32,
    /// Offload cost model state.
    collector: Collector,
}

impl<N: Nic> Client<N> {
    pub fn new(nic: N, shared: Arc<Shared>, thread: u32, rng: ChaCha8Rng) -> Client<N> {
        let tag = ((shared.cn as u64 + 1) << 32) | (thread as u64 + 1);
        Client {
            nic,
            shared,
            tag,
            buf: thread as u64 * THREAD_BUFFER_BYTES,
            cur: OpStats::default(),
            rng,
            free: Vec::new(),
            cpu_owed: 0,
            thread,
            collector: Collector::default(),
        }
    }

    fn config(&self) -> &Config {
        &self.shared.config
    }

    fn mutant(&self) -> Mutant {
        self.shared.config.mutant
    }

    async fn batch(
        &mut self,
        verbs: &[Verb],
        during: &'static str,
    ) -> ProtocolResult<crate::nic::BatchResult> {
        for v in verbs {
            match v {
                Verb::Read { .. } => self.cur.reads += 1,
                Verb::Write { .. } | Verb::WriteWord { .. } => self.cur.writes += 1,
                _ => self.cur.atomics += 1,
            }
            self.cur.bytes += v.payload_bytes() as u64;
        }
        self.nic.try_batch(verbs, during).await
    }

    /// Charge the CPU owed (after the synchronous step it paid for).
    pub async fn settle_cpu(&mut self) {
        if self.cpu_owed > 0 {
            let ns = std::mem::take(&mut self.cpu_owed);
            self.nic.cpu(Nanos(ns)).await;
        }
    }

    async fn backoff(&mut self) {
        self.cur.retries += 1;
        self.settle_cpu().await;
        self.nic.cpu(Nanos(self.config().cpu.backoff_ns)).await;
    }

    // ---- remote memory --------------------------------------------------------------------

    /// Alg. 1 `remote_read`: `None` when a shared node is locked or changed under the read.
    async fn read_remote(&mut self, addr: Gaddr, shared: bool) -> ProtocolResult<Option<Node>> {
        let word = self.buf + 2 * NODE_BYTES;
        let lock = self.shared.lock_word(addr);
        if shared {
            self.batch(&[Verb::Read { remote: lock, local_bytes: word, len_bytes: 8 }], "read lock word")
                .await?;
            if self.nic.local().load(word) != 0 {
                return Ok(None);
            }
        }
        let read = Verb::Read { remote: addr.remote(), local_bytes: self.buf, len_bytes: NODE_BYTES as u32 };
        self.batch(&[read], "read node").await?;
        let mut words = vec![0u64; NODE_WORDS];
        self.nic.local().read_words(self.buf, &mut words);
        let node = Node::decode(VERSIONS, &words).ok();
        if shared {
            self.batch(&[Verb::Read { remote: lock, local_bytes: word, len_bytes: 8 }], "re-read lock word")
                .await?;
            if self.nic.local().load(word) != 0 {
                return Ok(None);
            }
        }
        Ok(node)
    }

    /// Write a whole node image (the caller bumped its version).
    async fn write_node(&mut self, addr: Gaddr, node: &Node, during: &'static str) -> ProtocolResult<()> {
        let off = self.buf + NODE_BYTES;
        self.nic.local().write_words(off, &node.encode(VERSIONS));
        let write = Verb::Write { remote: addr.remote(), local_bytes: off, len_bytes: NODE_BYTES as u32 };
        self.batch(&[write], during).await.map(|_| ())
    }

    /// The RDMA "global lock" of a shared node: CAS its lock word 0 → tag until it swaps.
    async fn lock_remote(&mut self, addr: Gaddr) -> ProtocolResult<()> {
        let lock = self.shared.lock_word(addr);
        loop {
            let cas = Verb::Cas { remote: lock, expect: 0, swap: self.tag };
            if self.batch(&[cas], "lock shared node").await?.get(0) == 0 {
                return Ok(());
            }
            self.backoff().await;
        }
    }

    async fn unlock_remote(&mut self, addr: Gaddr) -> ProtocolResult<()> {
        let lock = self.shared.lock_word(addr);
        self.batch(&[Verb::WriteWord { remote: lock, value: 0 }], "unlock shared node").await.map(|_| ())
    }

    async fn read_root_pointer(&mut self) -> ProtocolResult<Gaddr> {
        let word = self.buf + 2 * NODE_BYTES;
        let read = Verb::Read { remote: self.shared.layout.root_ptr(), local_bytes: word, len_bytes: 8 };
        self.batch(&[read], "read root pointer").await?;
        Ok(Gaddr(self.nic.local().load(word)))
    }

    // ---- traversal ------------------------------------------------------------------------

    fn clear_io(c: &mut Cache, addr: Gaddr) {
        if c.table.get(&addr) == Some(&Entry::Io) {
            c.table.remove(&addr);
        }
        c.io_ranges.remove(&addr);
    }

    /// Descend to the leaf covering `key`. `write`: split full nodes on the way (eager split);
    /// `admit_leaf`: admit a missed leaf whatever P_A says; `op`: the point operation an
    /// eligible miss may offload (`None`: scans, or after a fallback).
    async fn descend(
        &mut self,
        key: u64,
        write: bool,
        admit_leaf: bool,
        mut op: Option<OpCode>,
    ) -> ProtocolResult<Leaf> {
        loop {
            match self.descend_once(key, write, admit_leaf, op).await? {
                Step::Leaf(l) => return Ok(l),
                Step::Restart => {}
                Step::NoOffload => op = None,
            }
        }
    }

    /// The synchronous part of a traversal: walk the cached tree under the cache lock as far
    /// as it goes and say what must happen next.
    fn walk(&mut self, key: u64, write: bool, admit_leaf: bool, op: Option<OpCode>) -> Action {
        let node_ns = self.config().cpu.node_ns;
        let internal_split = self.config().internal_split();
        let leaf_admission = self.config().leaf_admission;
        let parts = self.shared.parts();
        let no_io = self.mutant() == Mutant::NoIoFlag;
        let shared = self.shared.clone();
        let mut c = shared.cache();
        let mut cur = match c.root {
            Some(f) => f,
            None => {
                let root = c.root_addr;
                return match c.table.get(&root).copied() {
                    Some(Entry::Frame(f)) if c.frames[f].state == State::Cooling => {
                        let b = c.reheat(f, None);
                        self.cooling_section(b);
                        Action::Again
                    }
                    Some(_) => Action::Backoff,
                    None => {
                        if !no_io {
                            c.table.insert(root, Entry::Io);
                        }
                        self.cur.cache_misses += 1;
                        Action::FetchRoot(root)
                    }
                };
            }
        };
        if c.frames[cur].addr != c.root_addr {
            // The root moved (a root split): the cached one is an ordinary, maybe stale node.
            return Action::Refresh(cur);
        }
        loop {
            self.cpu_owed += node_ns;
            let frame = &c.frames[cur];
            if frame.busy {
                return Action::Backoff;
            }
            if !frame.node.covers(key) {
                // Only the root gets here uncovered: another server split it.
                return Action::Refresh(cur);
            }
            if frame.node.is_leaf() {
                self.cur.cache_hits += 1;
                return Action::Leaf(cur);
            }
            if write && frame.node.children.len() + 1 >= internal_split {
                return Action::Split(cur);
            }
            let child = frame.node.child_for(key);
            let (lo, hi) = slot_range(&frame.node, key);
            let child_level = frame.node.level - 1;
            let parent_addr = frame.addr;
            let parent_version = frame.version;
            let eligible = op.is_some()
                && (1..=self.shared.config.subtree_level).contains(&child_level)
                && !parts.is_shared(lo, hi);
            if let Some(&cf) = frame.swizzled.get(&child) {
                if !c.frames[cf].node.covers(key) {
                    return Action::Refresh(cur);
                }
                if eligible
                    && self.mutant() == Mutant::OffloadCachedSubtree
                    && self.decide_offload(child_level, true).0
                {
                    c.frames[cur].pins += 1;
                    let miss = Miss {
                        child,
                        shared: false,
                        parent: cur,
                        parent_addr,
                        parent_version,
                        child_level,
                        admit: true,
                        sample: false,
                    };
                    return Action::Offload(miss, op.expect("eligible"));
                }
                self.cur.cache_hits += 1;
                cur = cf;
                continue;
            }
            match c.table.get(&child).copied() {
                Some(Entry::Frame(f)) if c.frames[f].state == State::Cooling => {
                    if !c.frames[f].node.covers(key) {
                        return Action::Refresh(cur);
                    }
                    self.cur.cache_hits += 1;
                    let b = c.reheat(f, Some(cur));
                    self.cooling_section(b);
                    cur = f;
                    continue;
                }
                // HOT under another parent: our copy of `cur` routes like a stale one.
                Some(Entry::Frame(f)) if c.frames[f].state == State::Hot => return Action::Refresh(cur),
                Some(_) => return Action::Backoff,
                None => {}
            }
            self.cur.cache_misses += 1;
            let mut sample = false;
            if eligible {
                let (offload, s) = self.decide_offload(child_level, c.filled);
                sample = s;
                if offload && c.quiet(lo, hi) {
                    c.table.insert(child, Entry::Io);
                    c.io_ranges.insert(child, (lo, hi));
                    c.frames[cur].pins += 1;
                    let miss = Miss {
                        child,
                        shared: false,
                        parent: cur,
                        parent_addr,
                        parent_version,
                        child_level,
                        admit: true,
                        sample,
                    };
                    return Action::Offload(miss, op.expect("eligible"));
                } else {
                    // An offload that must wait for a quiet subtree fetches instead, untimed.
                    sample &= !offload;
                }
            }
            let admit =
                child_level > 0 || admit_leaf || !c.filled || unit_f64(self.rng.next_u64()) < leaf_admission;
            if !admit || !self.free.is_empty() {
                if !no_io {
                    c.table.insert(child, Entry::Io);
                    c.io_ranges.insert(child, (lo, hi));
                }
                return Action::Fetch(Miss {
                    child,
                    shared: parts.is_shared(lo, hi),
                    parent: cur,
                    parent_addr,
                    parent_version,
                    child_level,
                    admit,
                    sample,
                });
            }
            return Action::Again;
        }
    }

    async fn descend_once(
        &mut self,
        key: u64,
        write: bool,
        admit_leaf: bool,
        op: Option<OpCode>,
    ) -> ProtocolResult<Step> {
        self.ensure_free(1).await?;
        let parts = self.shared.parts();
        match self.walk(key, write, admit_leaf, op) {
            Action::Offload(m, op) => {
                return Ok(match self.offload(m, op, key).await? {
                    Some(v) => Step::Leaf(Leaf::Offloaded(v)),
                    None => Step::NoOffload,
                });
            }
            Action::Leaf(f) => return Ok(Step::Leaf(Leaf::Cached(f))),
            Action::Again => {}
            Action::Backoff => self.backoff().await,
            Action::Refresh(f) => self.refresh(f).await?,
            Action::Split(f) => self.split(f).await?,
            Action::FetchRoot(root) => {
                self.settle_cpu().await;
                let node = self.read_remote(root, parts.is_shared(0, u64::MAX)).await?;
                let installed = {
                    let mut c = self.shared.cache();
                    match node {
                        Some(n) if c.root.is_none() && c.root_addr == root && n.lowest == 0 => {
                            let f = self.free.pop().expect("ensured");
                            let shared = parts.is_shared(n.lowest, n.highest);
                            c.install(f, root, n, None, shared);
                            self.cpu_owed += self.config().cpu.install_ns;
                            true
                        }
                        _ => {
                            Self::clear_io(&mut c, root);
                            false
                        }
                    }
                };
                if !installed {
                    self.backoff().await;
                }
            }
            Action::Fetch(m) => {
                self.settle_cpu().await;
                let start = self.nic.now().0;
                let node = self.read_remote(m.child, m.shared).await?;
                let outcome = {
                    let mut c = self.shared.cache();
                    let p = &c.frames[m.parent];
                    let parent_ok = p.state == State::Hot
                        && p.addr == m.parent_addr
                        && p.version == m.parent_version
                        && !p.busy;
                    match node {
                        Some(n) if parent_ok => {
                            if !n.covers(key) || n.level != m.child_level {
                                Self::clear_io(&mut c, m.child);
                                Action::Refresh(m.parent)
                            } else if !m.admit {
                                return Ok(Step::Leaf(Leaf::Uncached(m.child, n)));
                            } else {
                                let f = self.free.pop().expect("checked before the fetch");
                                let node_shared = parts.is_shared(n.lowest, n.highest);
                                self.cur.inner_fetches += u64::from(m.child_level > 0);
                                c.install(f, m.child, n, Some(m.parent), node_shared);
                                self.cpu_owed += self.config().cpu.install_ns;
                                if m.sample {
                                    // The fetch's cost: READ plus install, as the artifact times
                                    // its whole `cold_to_hot`.
                                    let took = self.nic.now().0 - start + self.config().cpu.install_ns;
                                    self.collector.fetch.push(took, self.config().offload.window as usize);
                                }
                                Action::Again
                            }
                        }
                        _ => {
                            Self::clear_io(&mut c, m.child);
                            Action::Backoff
                        }
                    }
                };
                match outcome {
                    Action::Refresh(f) => self.refresh(f).await?,
                    Action::Backoff => self.backoff().await,
                    _ => {}
                }
            }
        }
        Ok(Step::Restart)
    }

    // ---- operations -----------------------------------------------------------------------

    /// The value stored for `key` (0 if none; a tombstone if deleted).
    pub async fn lookup(&mut self, key: u64) -> ProtocolResult<u64> {
        let mut restarts = 0;
        loop {
            let leaf = self.descend(key, false, false, Some(OpCode::Lookup)).await?;
            let v = match leaf {
                Leaf::Offloaded(v) => v,
                Leaf::Cached(f) => {
                    let (addr, v) = {
                        let c = self.shared.cache();
                        let n = &c.frames[f].node;
                        (c.frames[f].addr, n.find(key).map(|i| n.slots[i].value).unwrap_or(0))
                    };
                    if !self.leaf_read_latch(addr) {
                        restarts += 1;
                        self.leaf_restart(restarts).await;
                        continue;
                    }
                    v
                }
                Leaf::Uncached(addr, n) => {
                    Self::clear_io(&mut self.shared.cache(), addr);
                    n.find(key).map(|i| n.slots[i].value).unwrap_or(0)
                }
            };
            self.settle_cpu().await;
            return Ok(v);
        }
    }

    /// Write `key` into cached leaf `f` under its write latch.
    fn apply_store(&mut self, f: FrameId, key: u64, value: u64) -> Store {
        let split_at = self.config().leaf_split();
        let dirty = self.mutant() != Mutant::ModifyWithoutDirty;
        let (addr, i) = {
            let c = self.shared.cache();
            let node = &c.frames[f].node;
            let i = match node.find(key) {
                Some(i) => i,
                None if node.live_count() >= split_at => return Store::Full,
                None => match node.slots.iter().position(|s| s.value == 0) {
                    Some(i) => i,
                    None => return Store::Full,
                },
            };
            (c.frames[f].addr, i)
        };
        if !self.leaf_write_latch(addr) {
            return Store::Restart;
        }
        let mut c = self.shared.cache();
        let frame = &mut c.frames[f];
        let replaced = frame.node.slots[i].value;
        frame.node.slots[i] = Slot { key, value, version: 0 };
        frame.version += 1;
        frame.dirty |= dirty;
        Store::Done(replaced)
    }

    /// Insert or overwrite `key` (a tombstone deletes); the value replaced.
    pub async fn store(&mut self, key: u64, value: u64) -> ProtocolResult<u64> {
        let mut admit = false;
        let mut restarts = 0;
        loop {
            match self.descend(key, true, admit, (!admit).then_some(OpCode::Store(value))).await? {
                Leaf::Offloaded(replaced) => return Ok(replaced),
                Leaf::Cached(f) => match self.apply_store(f, key, value) {
                    Store::Done(replaced) => {
                        self.settle_cpu().await;
                        return Ok(replaced);
                    }
                    Store::Full => self.split(f).await?,
                    Store::Restart => {
                        restarts += 1;
                        self.leaf_restart(restarts).await;
                    }
                },
                Leaf::Uncached(addr, mut n) => {
                    let slot = match n.find(key) {
                        Some(i) => Some(i),
                        None if n.live_count() >= self.config().leaf_split() => None,
                        None => n.slots.iter().position(|s| s.value == 0),
                    };
                    let Some(i) = slot else {
                        // A full leaf splits through the cache: admit it.
                        Self::clear_io(&mut self.shared.cache(), addr);
                        admit = true;
                        continue;
                    };
                    let replaced = n.slots[i].value;
                    n.slots[i] = Slot { key, value, version: 0 };
                    n.version = n.version.wrapping_add(1);
                    self.settle_cpu().await;
                    let r = if self.mutant() == Mutant::NonAdmittedNoWriteBack {
                        Ok(())
                    } else {
                        self.write_node(addr, &n, "write back non-admitted leaf").await
                    };
                    Self::clear_io(&mut self.shared.cache(), addr);
                    r?;
                    return Ok(replaced);
                }
            }
        }
    }
}
