//! What transactions need beyond the tree's page API: SELCC's `Atomic` (Table 1), one RDMA FAA
//! on the global timestamp generator (§6.4 step 3), uncached; SELCC's try-latch, which 2PL
//! no-wait holds to commit; and the node's write-ahead log.

use std::future::Future;

use super::wal::Wal;
use crate::blink::{Latch, PageId, Pages, SelccPages};
use crate::common::error::ProtocolResult;
use crate::nic::{Nic, RemoteAddr};
use crate::sync::Mode;

pub trait TxnPages: Pages {
    /// Fetch-and-add on a remote word; returns the old value.
    fn faa(&mut self, addr: RemoteAddr, add: u64) -> impl Future<Output = ProtocolResult<u64>> + Send;

    /// Append a record of `bytes` to the node's write-ahead log; return once durable.
    fn log(&mut self, wal: &Wal, bytes: u64) -> impl Future<Output = ProtocolResult<()>> + Send;

    /// Whether a thread may hold page latches across operations (SELCC; not SEL, whose
    /// per-thread buffer holds one page).
    fn holds_latches(&self) -> bool;

    /// Latch `page` without waiting for another holder; `None` on a conflict.
    fn try_lock(
        &mut self,
        page: PageId,
        mode: Latch,
    ) -> impl Future<Output = ProtocolResult<Option<Self::Guard>>> + Send;
}

impl<N: Nic> TxnPages for SelccPages<N> {
    async fn faa(&mut self, addr: RemoteAddr, add: u64) -> ProtocolResult<u64> {
        self.node.atomic_faa(&mut self.worker, addr, add).await
    }

    async fn log(&mut self, wal: &Wal, bytes: u64) -> ProtocolResult<()> {
        wal.commit(&self.worker.nic, bytes).await
    }

    fn holds_latches(&self) -> bool {
        !self.node.config.sel_per_thread()
    }

    async fn try_lock(&mut self, page: PageId, mode: Latch) -> ProtocolResult<Option<Self::Guard>> {
        let mode = match mode {
            Latch::S => Mode::Shared,
            Latch::X => Mode::Exclusive,
        };
        self.node.try_lock(&mut self.worker, page.addr(), mode).await
    }
}
