//! The latch/page API the tree is written against: what §6.3 of the paper means by "replace
//! the mutex latches with SELCC latches". A page is one GCL-sized node; `lock` hands back a
//! guard over the local copy, `read`/`write` go through it, `unlock` gives the latch back.
//!
//! [`SelccPages`] runs it over SELCC's Table 1 API, and SEL is the same adapter on a SELCC node
//! in `Mode::Sel` (acquire, access, release every time). ScaleStore's page API is a second
//! `impl Pages` (`scalestore/pages.rs`, protocol `blink-scalestore`); the tree does not change.

use std::future::Future;
use std::sync::Arc;

use crate::common::error::ProtocolResult;
use crate::nic::{Nanos, Nic, NodeId, RemoteAddr};
use crate::selcc::{Handle, Node, Worker};

/// A page's global address as one word (0 = none): `(memory node + 1) << 48 | byte offset`, so
/// right links and child pointers fit in a node's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageId(pub u64);

impl PageId {
    pub const NULL: PageId = PageId(0);

    pub fn of(addr: RemoteAddr) -> PageId {
        assert!(addr.offset_bytes < 1 << 48, "page offset {} does not fit 48 bits", addr.offset_bytes);
        PageId((addr.node.0 as u64 + 1) << 48 | addr.offset_bytes)
    }

    pub fn addr(self) -> RemoteAddr {
        assert!(!self.is_null(), "the null page has no address");
        RemoteAddr::new(NodeId(((self.0 >> 48) - 1) as u16), self.0 & ((1 << 48) - 1))
    }

    pub fn is_null(self) -> bool {
        self.0 == 0
    }
}

impl std::fmt::Display for PageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_null() {
            write!(f, "null")
        } else {
            write!(f, "{}", self.addr())
        }
    }
}

/// Shared (S) or exclusive (X) page latch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Latch {
    S,
    X,
}

/// One worker thread's access to pages. Every method is one thread's; guards never cross
/// threads.
pub trait Pages: Send {
    type Guard: Send;

    /// Data words per page.
    fn page_words(&self) -> usize;
    fn lock(&mut self, page: PageId, mode: Latch)
        -> impl Future<Output = ProtocolResult<Self::Guard>> + Send;
    fn unlock(&mut self, guard: Self::Guard) -> impl Future<Output = ProtocolResult<()>> + Send;
    /// Words `at..at + out.len()` of the locked page's local copy.
    fn read(&self, guard: &Self::Guard, at: usize, out: &mut [u64]);
    /// Overwrite words from `at`; needs an X guard. Published at `unlock`.
    fn write(&self, guard: &mut Self::Guard, at: usize, words: &[u64]);
    /// A fresh zeroed page, or `None` when memory is full.
    fn allocate(&mut self) -> impl Future<Output = ProtocolResult<Option<PageId>>> + Send;
    /// Local compute time (searching a node image).
    fn cpu(&self, ns: u64) -> impl Future<Output = ()> + Send;
    /// Wait a little before retrying (a root another thread is installing).
    fn backoff(&self, ns: u64) -> impl Future<Output = ()> + Send;
    fn now(&self) -> u64;
    /// Whether a thread may hold only one page latch at a time (then the tree never nests
    /// latches: a split writes the new sibling first and publishes it after re-checking).
    fn one_latch_at_a_time(&self) -> bool {
        false
    }
}

/// [`Pages`] over a SELCC (or SEL) compute node: pages are GCLs, latches are
/// `SELCC_SLock`/`SELCC_XLock`.
pub struct SelccPages<N: Nic> {
    pub node: Arc<Node<N>>,
    pub worker: Worker<N>,
}

impl<N: Nic> SelccPages<N> {
    pub fn new(node: Arc<Node<N>>, thread: u32) -> SelccPages<N> {
        let worker = node.worker(thread);
        SelccPages { node, worker }
    }
}

impl<N: Nic> Pages for SelccPages<N> {
    type Guard = Handle;

    fn page_words(&self) -> usize {
        (self.node.config.gcl_size_bytes / 8) as usize
    }

    async fn lock(&mut self, page: PageId, mode: Latch) -> ProtocolResult<Handle> {
        match mode {
            Latch::S => self.node.slock(&mut self.worker, page.addr()).await,
            Latch::X => self.node.xlock(&mut self.worker, page.addr()).await,
        }
    }

    async fn unlock(&mut self, guard: Handle) -> ProtocolResult<()> {
        self.node.unlock(&mut self.worker, guard).await
    }

    fn read(&self, guard: &Handle, at: usize, out: &mut [u64]) {
        self.node.read(guard, at as u32 * 8, out);
    }

    fn write(&self, guard: &mut Handle, at: usize, words: &[u64]) {
        self.node.write(guard, at as u32 * 8, words);
    }

    async fn allocate(&mut self) -> ProtocolResult<Option<PageId>> {
        Ok(self.node.allocate(&mut self.worker).await?.map(PageId::of))
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

    fn one_latch_at_a_time(&self) -> bool {
        // SEL as the authors run it gives each thread one private page buffer.
        self.node.config.sel_per_thread()
    }
}
