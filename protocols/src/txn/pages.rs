//! What transactions need beyond the tree's page API: SELCC's `Atomic` (Table 1), one RDMA FAA
//! on the global timestamp generator (§6.4 step 3), uncached; and the node's write-ahead log.

use std::future::Future;

use super::wal::Wal;
use crate::blink::{Pages, SelccPages};
use crate::common::error::ProtocolResult;
use crate::nic::{Nic, RemoteAddr};

pub trait TxnPages: Pages {
    /// Fetch-and-add on a remote word; returns the old value.
    fn faa(&mut self, addr: RemoteAddr, add: u64) -> impl Future<Output = ProtocolResult<u64>> + Send;

    /// Append a record of `bytes` to the node's write-ahead log; return once durable.
    fn log(&mut self, wal: &Wal, bytes: u64) -> impl Future<Output = ProtocolResult<()>> + Send;
}

impl<N: Nic> TxnPages for SelccPages<N> {
    async fn faa(&mut self, addr: RemoteAddr, add: u64) -> ProtocolResult<u64> {
        self.node.atomic_faa(&mut self.worker, addr, add).await
    }

    async fn log(&mut self, wal: &Wal, bytes: u64) -> ProtocolResult<()> {
        wal.commit(&self.worker.nic, bytes).await
    }
}
