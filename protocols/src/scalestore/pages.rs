//! The B-link tree's page trait ([`crate::blink::Pages`]) over ScaleStore's page API: the
//! guards of spec §3.12. `lock(page, S)` is a `SharedGuard` (node-shared or node-exclusive
//! ownership, a shared latch on the local frame), `lock(page, X)` an `ExclusiveGuard`
//! (node-exclusive ownership, the frame's exclusive latch); both come from the local hot path
//! when the node already owns the page in a sufficient mode, else from remote invocation with
//! anticipatory chaining ([`super::node::Node::lock_page`]). Reads and writes go to the local
//! frame; nothing is written back at unlock: the page stays cached until the coherence
//! protocol moves or invalidates it.
//!
//! [CHOICE] Pessimistic S/X page latches, not the paper's optimistic lock coupling: the tree
//! is the Lehman–Yao B-link tree of `blink/` (one latch at a time going down, move-right),
//! which needs no version validation, and both latch an inner page only for the time of
//! one node search. The ownership traffic is the same (an optimistic guard on a page not cached
//! fetches it in S mode, spec §8 A26); the local cost differs only by the latch word.
//!
//! Pages are allocated at the allocating node, which becomes their directory (paper §2.2:
//! "the node on which the page is initially created"); each node has a pool of free PIDs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::layout::Layout;
use super::local::Touch;
use super::node::{Node, Worker};
use crate::blink::pages::{Latch, PageId, Pages};
use crate::common::error::ProtocolResult;
use crate::nic::{Nanos, Nic, NodeId, RemoteAddr};

/// Bytes before a page's words in the address a [`PageId`] names: a GCL-shaped prefix (latch
/// word, header word), so the tree's structure check reads ScaleStore pages through the same
/// address arithmetic as SELCC's (see `tree_def.rs`).
pub const PREFIX_BYTES: u64 = 16;

/// A page id for global page `g`: the directory node and `g`'s slot in a GCL-like stride.
pub fn page_id(layout: &Layout, g: u64) -> PageId {
    PageId::of(RemoteAddr::new(layout.directory(g), g * (layout.page_bytes + PREFIX_BYTES)))
}

/// The global page index a [`PageId`] names.
pub fn page_index(layout: &Layout, page: PageId) -> u64 {
    page.addr().offset_bytes / (layout.page_bytes + PREFIX_BYTES)
}

/// A node's pool of free pages: its directory slots `next..end`.
pub struct Pool {
    next: AtomicU64,
    end: u64,
}

impl Pool {
    pub fn new(first_free_slot: u64, pages_per_node: u64) -> Pool {
        Pool { next: AtomicU64::new(first_free_slot), end: pages_per_node }
    }
}

/// A held guard: which page and how.
pub struct Guard {
    g: u64,
    exclusive: bool,
}

/// One worker thread's page access on a ScaleStore node.
pub struct ScaleStorePages<N: Nic> {
    pub node: Arc<Node<N>>,
    pub worker: Worker<N>,
    pool: Arc<Pool>,
}

impl<N: Nic> ScaleStorePages<N> {
    pub fn new(node: Arc<Node<N>>, thread: u32, pool: Arc<Pool>) -> ScaleStorePages<N> {
        let worker = node.worker(thread);
        ScaleStorePages { node, worker, pool }
    }
}

impl<N: Nic> Pages for ScaleStorePages<N> {
    type Guard = Guard;

    fn page_words(&self) -> usize {
        (self.node.layout.page_bytes / 8) as usize
    }

    async fn lock(&mut self, page: PageId, mode: Latch) -> ProtocolResult<Guard> {
        let g = page_index(&self.node.layout, page);
        let exclusive = mode == Latch::X;
        self.node.lock_page(&mut self.worker, g, exclusive).await?;
        Ok(Guard { g, exclusive })
    }

    async fn unlock(&mut self, guard: Guard) -> ProtocolResult<()> {
        // The ablation's pessimistic latches: a shared release writes the latch line.
        let release = [Touch::Unlatch(guard.g, guard.exclusive)];
        self.node.charge_lines(&self.worker.nic, self.worker.index, &release).await;
        self.node.unlock_page(guard.g);
        Ok(())
    }

    fn read(&self, guard: &Guard, at: usize, out: &mut [u64]) {
        self.node.nic.local().read_words(self.node.layout.frame(guard.g) + at as u64 * 8, out);
    }

    fn write(&self, guard: &mut Guard, at: usize, words: &[u64]) {
        assert!(guard.exclusive, "B-link write to page {} under a shared guard", guard.g);
        self.node.nic.local().write_words(self.node.layout.frame(guard.g) + at as u64 * 8, words);
    }

    async fn allocate(&mut self) -> ProtocolResult<Option<PageId>> {
        let slot = self.pool.next.fetch_add(1, Ordering::Relaxed);
        if slot >= self.pool.end {
            return Ok(None);
        }
        let me: NodeId = self.node.nic.node();
        let g = me.0 as u64 * self.node.layout.pages_per_node + slot;
        Ok(Some(page_id(&self.node.layout, g)))
    }

    async fn cpu(&self, ns: u64) {
        self.worker.nic.cpu(Nanos(ns)).await
    }

    async fn backoff(&self, ns: u64) {
        self.worker.nic.sleep(Nanos(ns)).await
    }

    fn now(&self) -> u64 {
        self.worker.nic.now().0
    }
}
