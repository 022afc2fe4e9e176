//! [`Pages`] over plain local memory, for unit tests of the tree's logic: one thread, no
//! contention, futures that are always ready. It shows the tree needs nothing of SELCC beyond
//! the trait, and lets a test run thousands of operations and check the structure in
//! milliseconds. Pages are laid out as GCLs would be (latch, header, data), so
//! [`super::check::check_tree`] reads them unchanged.

use std::sync::{Arc, Mutex};

use super::pages::{Latch, PageId, Pages};
use crate::common::error::ProtocolResult;
use crate::nic::{NodeId, RemoteAddr};

/// Words before a page's data: the latch and header words of a GCL.
const PREFIX_WORDS: usize = 2;

/// Shared local pages: page `i` at byte offset `i · stride` of a pretend node 0.
#[derive(Clone)]
pub struct MemPages {
    words: usize,
    /// Report [`Pages::one_latch_at_a_time`] (to test the tree's path for SEL).
    pub one_latch: bool,
    pages: Arc<Mutex<Vec<Vec<u64>>>>,
}

/// A held page: which, and how.
pub struct MemGuard {
    index: usize,
    mode: Latch,
}

impl MemPages {
    pub fn new(page_words: usize) -> MemPages {
        MemPages { words: page_words, one_latch: false, pages: Arc::new(Mutex::new(Vec::new())) }
    }

    fn stride(&self) -> u64 {
        ((PREFIX_WORDS + self.words) * 8) as u64
    }

    fn index(&self, page: PageId) -> usize {
        (page.addr().offset_bytes / self.stride()) as usize
    }

    /// A fresh page, synchronously (for setting up a tree).
    pub fn allocate_now(&self) -> PageId {
        let mut pages = self.pages.lock().unwrap();
        pages.push(vec![0; PREFIX_WORDS + self.words]);
        PageId::of(RemoteAddr::new(NodeId(0), (pages.len() as u64 - 1) * self.stride()))
    }

    /// Write words of a page directly (setup).
    pub fn store(&self, page: PageId, at: usize, words: &[u64]) {
        let i = self.index(page);
        self.pages.lock().unwrap()[i][PREFIX_WORDS + at..PREFIX_WORDS + at + words.len()]
            .copy_from_slice(words);
    }

    /// The word at `addr` as a GCL address (what `check_tree` reads).
    pub fn word(&self, addr: RemoteAddr) -> u64 {
        let i = (addr.offset_bytes / self.stride()) as usize;
        let w = ((addr.offset_bytes % self.stride()) / 8) as usize;
        self.pages.lock().unwrap().get(i).map_or(0, |p| p[w])
    }
}

impl Pages for MemPages {
    type Guard = MemGuard;

    fn page_words(&self) -> usize {
        self.words
    }

    async fn lock(&mut self, page: PageId, mode: Latch) -> ProtocolResult<MemGuard> {
        let index = self.index(page);
        let mut pages = self.pages.lock().unwrap();
        let latch = &mut pages[index][0];
        // One thread: a page is never wanted while held (the tree takes one at a time, plus a
        // private new page), so a conflict here is a tree bug.
        assert_eq!(*latch, 0, "page {page} locked twice");
        *latch = if mode == Latch::X { 1 } else { 2 };
        Ok(MemGuard { index, mode })
    }

    async fn unlock(&mut self, guard: MemGuard) -> ProtocolResult<()> {
        self.pages.lock().unwrap()[guard.index][0] = 0;
        Ok(())
    }

    fn read(&self, guard: &MemGuard, at: usize, out: &mut [u64]) {
        let pages = self.pages.lock().unwrap();
        out.copy_from_slice(&pages[guard.index][PREFIX_WORDS + at..PREFIX_WORDS + at + out.len()]);
    }

    fn write(&self, guard: &mut MemGuard, at: usize, words: &[u64]) {
        assert_eq!(guard.mode, Latch::X, "write under a shared latch");
        let mut pages = self.pages.lock().unwrap();
        pages[guard.index][PREFIX_WORDS + at..PREFIX_WORDS + at + words.len()].copy_from_slice(words);
    }

    async fn allocate(&mut self) -> ProtocolResult<Option<PageId>> {
        Ok(Some(self.allocate_now()))
    }

    async fn cpu(&self, _ns: u64) {}

    async fn backoff(&self, _ns: u64) {}

    fn now(&self) -> u64 {
        0
    }

    fn one_latch_at_a_time(&self) -> bool {
        self.one_latch
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::future::Future;
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    use super::*;
    use crate::blink::check::check_tree;
    use crate::blink::node::{Image, KEY_MAX};
    use crate::blink::tree::{Shared, Tree, TreeConfig};

    /// Run a future that never waits (every `MemPages` future is ready at once).
    fn now<T>(f: impl Future<Output = T>) -> T {
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("a MemPages operation waited"),
        }
    }

    fn empty_tree(split_at: u32) -> (Tree<MemPages>, MemPages, PageId) {
        tree_over(MemPages::new(32), split_at)
    }

    fn tree_over(pages: MemPages, split_at: u32) -> (Tree<MemPages>, MemPages, PageId) {
        let meta = pages.allocate_now();
        let root = pages.allocate_now();
        pages.store(root, 0, &Image::leaf(0, KEY_MAX).encode());
        pages.store(meta, 0, &[root.0]);
        let config = TreeConfig { split_at: Some(split_at), ..TreeConfig::default() };
        let tree = Tree::new(pages.clone(), Arc::new(Shared::new(config, meta, root)));
        (tree, pages, meta)
    }

    #[test]
    fn thousands_of_random_stores_keep_the_structure_and_every_key() {
        // Goal: inserts and updates in random order split leaves, inner nodes and the root many
        // times over; afterwards the structure check passes, every key holds its last value,
        // lookups find them and a full scan returns them in order. Both split paths: nested
        // latches (SELCC) and one latch at a time (SEL).
        for one_latch in [false, true] {
            random_stores(MemPages { one_latch, ..MemPages::new(32) });
        }
    }

    fn random_stores(pages: MemPages) {
        let (mut tree, pages, meta) = tree_over(pages, 4);
        let mut x = 7u64;
        let mut model = BTreeMap::new();
        for i in 1..=3000u64 {
            // A fixed pseudo-random order (FNV hashes of a Weyl sequence).
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let key = 1 + (crate::workload::ycsb::fnv_hash64(x) % 4999);
            let old = now(tree.store(key, i)).unwrap();
            assert_eq!(old, model.insert(key, i).unwrap_or(0), "store of {key} replaced the wrong value");
        }
        let contents = check_tree(&|a| pages.word(a), meta, 32).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(contents, model);
        for (k, v) in model.iter().step_by(7) {
            assert_eq!(now(tree.lookup(*k)).unwrap(), *v);
        }
        assert_eq!(now(tree.lookup(5001)).unwrap(), 0);
        let all = now(tree.scan(0, usize::MAX)).unwrap();
        assert_eq!(all, model.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
        let some = now(tree.scan(2500, 10)).unwrap();
        assert_eq!(some, model.range(2500..).take(10).map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
    }

    #[test]
    fn the_structure_check_names_a_broken_fence() {
        // Goal: the checker is not vacuous: shrinking one leaf's high fence is reported.
        let (mut tree, pages, meta) = empty_tree(3);
        for k in 1..=40u64 {
            now(tree.store(k * 10, k)).unwrap();
        }
        assert!(check_tree(&|a| pages.word(a), meta, 32).is_ok());
        // Page 1 (the first root) stays the leftmost leaf through every split: lower its high
        // fence by one.
        let leaf = PageId::of(RemoteAddr::new(NodeId(0), pages.stride()));
        let high = pages.word(crate::selcc::Layout::data(leaf.addr()).add(16));
        pages.store(leaf, 2, &[high - 1]);
        let err = check_tree(&|a| pages.word(a), meta, 32).unwrap_err();
        assert!(err.contains("fences"), "{err}");
    }
}
