//! The concurrent B-link tree (Lehman & Yao) over any [`Pages`]: one latch held at a time
//! while descending (a node found not to cover the key is left by its right link), the leaf
//! X-latched for a store, splits that write the new right sibling and the shrunk node under
//! both X latches before either is released, and the separator posted to the parent level
//! afterwards (the new node is reachable by its right link meanwhile). Nodes never merge.
//!
//! The root's address lives in word 0 of a meta page; each compute node keeps a hint of it and
//! re-reads the meta page when the hint has been split (its right link is set) or is too low
//! for the level an insert must reach.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::mutants::Mutant;
use super::node::{capacity, header, key_at, Image, HEADER_WORDS, KEY_MAX};
use super::pages::{Latch, PageId, Pages};
use super::stats::Stats;
use crate::common::error::{ErrorSlot, ProtocolResult};

/// Levels a path remembers (a tree of 2-entry nodes over 2^32 keys stays below).
pub const MAX_LEVELS: usize = 40;

/// The tree's own knobs (`protocol_options` beside SELCC's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeConfig {
    /// Entries a node holds before it splits (at most the page's capacity, at least 2;
    /// `None` = the capacity). A fuzzing knob: small nodes split at every level quickly.
    pub split_at: Option<u32>,
    /// Fill of bulk-loaded nodes ([CHOICE] 0.7: what random-order inserts leave, Yao 1978 ≈ 69 %).
    pub bulk_fill: f64,
    /// Compute-side CPU per node visited (search of a node image), ns.
    pub node_ns: u64,
    /// Wait before re-reading the meta page while a new root is being installed, ns.
    pub root_backoff_ns: u64,
    /// Bytes of value the client generates before each store. The tree stores a one-word
    /// stamp; this only charges the client's CPU. ScaleStore's YCSB runner fills each update's
    /// value with "randomly generated strings of 128 bytes" (paper §6.1; `ycsb.cpp` and
    /// `ycsb_in_memory_tree.cpp` call `getRandString` per update), except in the GAM
    /// comparison, whose runner stores "a hard-coded value" (§6.4). Default 0.
    pub value_bytes: u64,
    /// CPU per generated value byte. [CHOICE, derived] `getRandString` draws one 64-bit
    /// Mersenne Twister number per byte (`getRand(48, 123)`), 8 bytes of generator output; the
    /// Mersenne Twister costs 2.29 cycles per output byte (Lemire's testingRNG table), so ~18
    /// cycles per draw plus the modulo and two range checks: ~20 cycles, 6-9 ns at the testbed
    /// Xeon Gold 5120's 2.2-3.2 GHz. 8 ns.
    pub value_byte_ns: u64,
    #[serde(skip)]
    pub mutant: Mutant,
}

impl Default for TreeConfig {
    fn default() -> Self {
        TreeConfig {
            split_at: None,
            bulk_fill: 0.7,
            node_ns: 200,
            root_backoff_ns: 1000,
            value_bytes: 0,
            value_byte_ns: 8,
            mutant: Mutant::None,
        }
    }
}

impl TreeConfig {
    /// The split threshold for pages of `page_words` words.
    pub fn max_entries(&self, page_words: usize) -> usize {
        let cap = capacity(page_words);
        self.split_at.map_or(cap, |s| (s as usize).min(cap))
    }

    pub fn validate(&self, page_words: usize) -> Vec<String> {
        let mut out = Vec::new();
        if capacity(page_words) < 3 {
            out.push(format!(
                "gcl_size_bytes: a node needs room for {HEADER_WORDS} header words and 3 entries ({} bytes)",
                (HEADER_WORDS + 6) * 8
            ));
        }
        if self.split_at.is_some_and(|s| s < 3) {
            out.push("split_at: must be at least 3".into());
        }
        if !(self.bulk_fill > 0.0 && self.bulk_fill <= 1.0) {
            out.push("bulk_fill: must be in (0, 1]".into());
        }
        if self.value_bytes > 1 << 20 || self.value_byte_ns > 1_000 {
            out.push(
                "value_bytes: at most 1 MiB of generated value, at most 1,000 ns per byte (value_byte_ns)"
                    .into(),
            );
        }
        out
    }
}

/// What every thread of one compute node shares.
pub struct Shared {
    pub config: TreeConfig,
    pub meta: PageId,
    /// The last root this node saw (0 = read the meta page).
    pub root_hint: AtomicU64,
    pub stats: Mutex<Stats>,
    pub ops_done: AtomicU64,
    pub errors: ErrorSlot,
}

impl Shared {
    pub fn new(config: TreeConfig, meta: PageId, root: PageId) -> Shared {
        Shared {
            config,
            meta,
            root_hint: AtomicU64::new(root.0),
            stats: Mutex::new(Stats::default()),
            ops_done: AtomicU64::new(0),
            errors: ErrorSlot::new(),
        }
    }
}

/// Per-operation counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpCounts {
    pub nodes: u64,
    pub move_rights: u64,
    pub splits: u64,
    pub root_reads: u64,
}

/// One thread's handle on the tree.
pub struct Tree<P: Pages> {
    pub pages: P,
    pub shared: Arc<Shared>,
    pub cur: OpCounts,
    max_entries: usize,
    /// A page allocated for a split or root that was not published (reused by the next one).
    spare: Option<PageId>,
}

type Path = [PageId; MAX_LEVELS];

impl<P: Pages> Tree<P> {
    pub fn new(pages: P, shared: Arc<Shared>) -> Tree<P> {
        let max_entries = shared.config.max_entries(pages.page_words());
        Tree { pages, shared, cur: OpCounts::default(), max_entries, spare: None }
    }

    fn mutant(&self) -> Mutant {
        self.shared.config.mutant
    }

    // ---------------------------------------------------------------- operations

    /// The value stored under `key` (0 if none).
    pub async fn lookup(&mut self, key: u64) -> ProtocolResult<u64> {
        let mut path = [PageId::NULL; MAX_LEVELS];
        let (_, g, n) = self.find(key, 0, Latch::S, &mut path).await?;
        self.pages.unlock(g).await?;
        Ok(match n.search(key) {
            Ok(i) => n.vals[i],
            Err(_) => 0,
        })
    }

    /// Insert or update `key`; returns the value replaced (0 if none).
    pub async fn store(&mut self, key: u64, value: u64) -> ProtocolResult<u64> {
        assert!(key != KEY_MAX && value != 0, "key {key:#x} or value 0 is reserved");
        let mut path = [PageId::NULL; MAX_LEVELS];
        if self.mutant() == Mutant::StaleWriteBack {
            // Planted bug: read under S, drop the latch, write the stale image back under X.
            let (page, g, mut n) = self.find(key, 0, Latch::S, &mut path).await?;
            self.pages.unlock(g).await?;
            let old = match n.search(key) {
                Ok(i) => std::mem::replace(&mut n.vals[i], value),
                Err(i) => {
                    n.keys.insert(i, key);
                    n.vals.insert(i, value);
                    0
                }
            };
            if n.count() <= self.max_entries {
                let mut g = self.pages.lock(page, Latch::X).await?;
                self.pages.write(&mut g, 0, &n.encode());
                self.pages.unlock(g).await?;
                return Ok(old);
            }
        }
        loop {
            let (page, mut g, mut n) = self.find(key, 0, Latch::X, &mut path).await?;
            return match n.search(key) {
                Ok(i) => {
                    // An update writes one word: SELCC's dirty bounds flush just that.
                    let old = n.vals[i];
                    self.pages.write(&mut g, key_at(i) + 1, &[value]);
                    self.pages.unlock(g).await?;
                    Ok(old)
                }
                Err(i) if n.count() < self.max_entries => {
                    self.insert_at(&mut g, &mut n, i, key, value);
                    self.pages.unlock(g).await?;
                    Ok(0)
                }
                Err(_) => {
                    let Some((sep, right)) = self.split(page, g, n, key, value).await? else { continue };
                    let posted = if self.mutant() == Mutant::ParentSeparatorOffByOne { sep + 1 } else { sep };
                    self.post(1, posted, right, page, &mut path).await?;
                    Ok(0)
                }
            };
        }
    }

    /// Up to `len` entries with keys ≥ `from`, ascending, one leaf latched at a time.
    pub async fn scan(&mut self, from: u64, len: usize) -> ProtocolResult<Vec<(u64, u64)>> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut path = [PageId::NULL; MAX_LEVELS];
        let (_, mut g, mut n) = self.find(from, 0, Latch::S, &mut path).await?;
        loop {
            // After a concurrent split a later leaf may repeat keys already returned.
            let floor = out.last().map_or(from, |(k, _)| k + 1);
            for (k, v) in n.keys.iter().zip(&n.vals) {
                if *k >= floor && out.len() < len {
                    out.push((*k, *v));
                }
            }
            let next = n.right;
            self.pages.unlock(g).await?;
            if out.len() >= len || next.is_null() {
                return Ok(out);
            }
            (g, n) = self.load(next, Latch::S).await?;
        }
    }

    // ---------------------------------------------------------------- traversal

    /// Lock `page` and decode it.
    async fn load(&mut self, page: PageId, mode: Latch) -> ProtocolResult<(P::Guard, Image)> {
        let g = self.pages.lock(page, mode).await?;
        let mut head = [0u64; HEADER_WORDS];
        self.pages.read(&g, 0, &mut head);
        let count = (head[0] & 0xffff) as usize;
        let mut words = vec![0u64; key_at(count.min(capacity(self.pages.page_words())))];
        self.pages.read(&g, 0, &mut words);
        self.pages.cpu(self.shared.config.node_ns).await;
        self.cur.nodes += 1;
        let n = Image::decode(&words).unwrap_or_else(|e| panic!("B-link page {page}: {e}"));
        Ok((g, n))
    }

    /// Lock `page` in `mode` and move right until the node covers `key` (B-link).
    async fn move_right(
        &mut self,
        mut page: PageId,
        key: u64,
        mode: Latch,
    ) -> ProtocolResult<(PageId, P::Guard, Image)> {
        loop {
            let (g, n) = self.load(page, mode).await?;
            if key >= n.high && !n.right.is_null() && self.mutant() != Mutant::MissingHighKeyCheck {
                self.pages.unlock(g).await?;
                self.cur.move_rights += 1;
                page = n.right;
                continue;
            }
            return Ok((page, g, n));
        }
    }

    /// The root from the meta page (and remember it).
    async fn read_root(&mut self) -> ProtocolResult<PageId> {
        let g = self.pages.lock(self.shared.meta, Latch::S).await?;
        let mut root = [0u64];
        self.pages.read(&g, 0, &mut root);
        self.pages.unlock(g).await?;
        self.cur.root_reads += 1;
        self.shared.root_hint.store(root[0], Ordering::Relaxed);
        Ok(PageId(root[0]))
    }

    /// The node at `level` covering `key`, latched in `mode`; `path[l]` is set to the node
    /// passed at each level `l` above it.
    async fn find(
        &mut self,
        key: u64,
        level: u8,
        mode: Latch,
        path: &mut Path,
    ) -> ProtocolResult<(PageId, P::Guard, Image)> {
        let mut fresh = false;
        'restart: loop {
            let hint = PageId(self.shared.root_hint.load(Ordering::Relaxed));
            let mut page = if hint.is_null() || fresh { self.read_root().await? } else { hint };
            let mut top = true;
            loop {
                let (p, g, n) = self.move_right(page, key, Latch::S).await?;
                if top && !n.right.is_null() {
                    // The hinted root has split: look up the new one next time.
                    self.shared.root_hint.store(0, Ordering::Relaxed);
                }
                top = false;
                if n.level < level {
                    // The root we know is below the level we must reach: a new root is being
                    // installed (its splitter holds the meta page soon).
                    self.pages.unlock(g).await?;
                    if fresh {
                        self.pages.backoff(self.shared.config.root_backoff_ns).await;
                    }
                    fresh = true;
                    continue 'restart;
                }
                if n.level == level {
                    if mode == Latch::S {
                        return Ok((p, g, n));
                    }
                    self.pages.unlock(g).await?;
                    return self.move_right(p, key, mode).await;
                }
                path[n.level as usize] = p;
                let child = n.child(key);
                self.pages.unlock(g).await?;
                if n.level - 1 == level {
                    return self.move_right(child, key, mode).await;
                }
                page = child;
            }
        }
    }

    // ---------------------------------------------------------------- changes

    /// Insert entry `(key, value)` at position `i` of the X-latched node `n`, writing only the
    /// header and the entries that moved.
    fn insert_at(&self, g: &mut P::Guard, n: &mut Image, i: usize, key: u64, value: u64) {
        let i = if self.mutant() == Mutant::InsertUnsorted { n.count() } else { i };
        n.keys.insert(i, key);
        n.vals.insert(i, value);
        let words = n.encode();
        self.pages.write(g, 0, &[header(n.level, n.count())]);
        self.pages.write(g, key_at(i), &words[key_at(i)..]);
    }

    /// Split the full, X-latched node `n` at `page`, adding `(key, value)` to the half that
    /// covers it; both halves are written before either latch is released. Returns the
    /// separator (the new node's low fence) and the new node, or `None` when a one-latch
    /// backend found the node changed before it could publish the split (the caller retries).
    async fn split(
        &mut self,
        page: PageId,
        mut g: P::Guard,
        n: Image,
        key: u64,
        value: u64,
    ) -> ProtocolResult<Option<(u64, PageId)>> {
        let new = match self.spare.take() {
            Some(p) => p,
            None => match self.pages.allocate().await? {
                Some(p) => p,
                None => {
                    panic!("B-link: the memory nodes have no free GCL for a split (the plan sized too few)")
                }
            },
        };
        let mid = n.count() / 2;
        let sep = n.keys[mid];
        let mutant = self.mutant();
        let mut right = Image {
            level: n.level,
            low: sep,
            high: n.high,
            right: n.right,
            keys: n.keys[mid..].to_vec(),
            vals: n.vals[mid..].to_vec(),
        };
        let mut left = Image {
            level: n.level,
            low: n.low,
            high: sep,
            right: if mutant == Mutant::SplitWithoutRightLink { n.right } else { new },
            keys: n.keys[..mid].to_vec(),
            vals: n.vals[..mid].to_vec(),
        };
        if mutant == Mutant::SplitKeepsUpperHalf {
            left.keys = n.keys.clone();
            left.vals = n.vals.clone();
        }
        let half = if key >= sep && mutant != Mutant::InsertIntoWrongHalf { &mut right } else { &mut left };
        let at = half.search(key).unwrap_or_else(|i| i);
        half.keys.insert(at, key);
        half.vals.insert(at, value);
        if self.pages.one_latch_at_a_time() {
            // The backend gives a thread one page at a time (SEL per thread): write the new
            // sibling while nothing links to it, then publish the split only if the old node
            // did not change meanwhile; otherwise keep the page for the next split and retry.
            self.pages.unlock(g).await?;
            let mut gn = self.pages.lock(new, Latch::X).await?;
            self.pages.write(&mut gn, 0, &right.encode());
            self.pages.unlock(gn).await?;
            let (mut g, again) = self.load(page, Latch::X).await?;
            if again != n && self.mutant() != Mutant::SplitWithoutRecheck {
                self.pages.unlock(g).await?;
                self.spare = Some(new);
                return Ok(None);
            }
            self.pages.write(&mut g, 0, &left.encode());
            self.pages.unlock(g).await?;
            self.cur.splits += 1;
            return Ok(Some((sep, new)));
        }
        self.cur.splits += 1;
        if mutant == Mutant::SiblingWrittenAfterPublish {
            // Planted bug: the old node (with its right link) is released first.
            self.pages.write(&mut g, 0, &left.encode());
            self.pages.unlock(g).await?;
            let mut gn = self.pages.lock(new, Latch::X).await?;
            self.pages.write(&mut gn, 0, &right.encode());
            self.pages.unlock(gn).await?;
            return Ok(Some((sep, new)));
        }
        let mut gn = self.pages.lock(new, Latch::X).await?;
        self.pages.write(&mut gn, 0, &right.encode());
        self.pages.write(&mut g, 0, &left.encode());
        self.pages.unlock(gn).await?;
        self.pages.unlock(g).await?;
        Ok(Some((sep, new)))
    }

    /// Post separator `sep` → `child` (the new right sibling of `left`) into `level`, splitting
    /// upwards as needed, or install a new root if `left` was the root.
    async fn post(
        &mut self,
        mut level: u8,
        mut sep: u64,
        mut child: PageId,
        mut left: PageId,
        path: &mut Path,
    ) -> ProtocolResult<()> {
        loop {
            assert!((level as usize) < MAX_LEVELS, "B-link tree above {MAX_LEVELS} levels");
            let remembered = path[level as usize];
            let (p, mut g, mut n) = if !remembered.is_null() {
                if self.mutant() == Mutant::ParentWithoutMoveRight {
                    let (g, n) = self.load(remembered, Latch::X).await?;
                    (remembered, g, n)
                } else {
                    self.move_right(remembered, sep, Latch::X).await?
                }
            } else {
                if self.install_root(level, sep, child, left).await? {
                    return Ok(());
                }
                let mut above = [PageId::NULL; MAX_LEVELS];
                let found = self.find(sep, level, Latch::X, &mut above).await?;
                let from = level as usize + 1;
                path[from..].copy_from_slice(&above[from..]);
                found
            };
            let i = match n.search(sep) {
                Ok(_) => panic!("B-link: separator {sep} posted twice to level {level} (page {p})"),
                Err(i) => i,
            };
            if n.count() < self.max_entries {
                self.insert_at(&mut g, &mut n, i, sep, child.0);
                self.pages.unlock(g).await?;
                return Ok(());
            }
            let Some((up_sep, up)) = self.split(p, g, n, sep, child.0).await? else { continue };
            level += 1;
            sep = up_sep;
            child = up;
            left = p;
        }
    }

    /// If `left` is still the root, make a new root above it holding `left` and `child`.
    async fn install_root(
        &mut self,
        level: u8,
        sep: u64,
        child: PageId,
        left: PageId,
    ) -> ProtocolResult<bool> {
        // The new root is written before the meta page is latched (one latch at a time); if
        // `left` turns out not to be the root any more, the page is kept for the next split.
        let new = match self.spare.take() {
            Some(p) => p,
            None => match self.pages.allocate().await? {
                Some(p) => p,
                None => panic!("B-link: the memory nodes have no free GCL for a new root"),
            },
        };
        let image = Image {
            level,
            low: 0,
            high: KEY_MAX,
            right: PageId::NULL,
            keys: vec![0, sep],
            vals: vec![left.0, child.0],
        };
        let mut g = self.pages.lock(new, Latch::X).await?;
        self.pages.write(&mut g, 0, &image.encode());
        self.pages.unlock(g).await?;
        let mut meta = self.pages.lock(self.shared.meta, Latch::X).await?;
        let mut root = [0u64];
        self.pages.read(&meta, 0, &mut root);
        if PageId(root[0]) != left {
            self.pages.unlock(meta).await?;
            self.shared.root_hint.store(root[0], Ordering::Relaxed);
            self.spare = Some(new);
            return Ok(false);
        }
        if self.mutant() != Mutant::RootNotInstalled {
            self.pages.write(&mut meta, 0, &[new.0]);
            self.shared.root_hint.store(new.0, Ordering::Relaxed);
        }
        self.pages.unlock(meta).await?;
        Ok(true)
    }
}
