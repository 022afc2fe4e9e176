//! NAM-DB's worker: every access is three NIC round trips on the record's home (the worker's
//! own node included: RDMA atomics are not atomic against CPU atomics, so local records are
//! latched through the NIC too).
//!
//! Latch word (the record slot's first word): shared holders in the low 32 bits, the exclusive
//! bit at bit 32. Words of the record (key and value) follow it; one stamp copy sits in each of
//! the record's three cache lines (bytes 8, 64, 128 of the slot), so a torn READ shows as
//! copies that disagree ([`TORN`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rand_chacha::rand_core::Rng;
use rand_chacha::ChaCha8Rng;

use super::config::Config;
use super::mutants::Mutant;
use crate::common::error::{NicExt, ProtocolResult};
use crate::nic::{Nanos, Nic, Verb};
use crate::workload::record_array::{ArrayWorker, Layout, OpCost, TORN};

/// One shared holder.
pub const SHARED: u64 = 1;
/// The exclusive bit.
pub const EXCLUSIVE: u64 = 1 << 32;
/// Bytes of a record's key and value, after the latch word.
pub const DATA_BYTES: u32 = 136;
/// Offsets of the stamp copies inside the data (slot offsets 8, 64, 128).
pub const STAMP_AT: [u64; 3] = [0, 56, 120];

/// Check mode: which workers believe they hold which latch, by record (exclusive, shared),
/// updated only after the latching verb returned and before the unlatching one is posted, so
/// it is always a subset of what the latch words say.
pub type Ghost = Arc<Mutex<BTreeMap<u64, (u32, u32)>>>;

pub struct Worker<N: Nic> {
    pub nic: N,
    pub layout: Layout,
    pub config: Config,
    pub thread: u32,
    pub rng: ChaCha8Rng,
    pub cost: OpCost,
    pub ghost: Option<Ghost>,
    /// Histories on: a write reads the value it replaces (under its exclusive latch).
    pub log_replaced: bool,
}

impl<N: Nic> Worker<N> {
    async fn back_off(&mut self, attempt: u32) {
        self.cost.retries += 1;
        let wait = self.config.backoff.delay(attempt, self.rng.next_u64());
        self.nic.sleep(Nanos(wait.max(1))).await;
    }

    fn ghost(&self, key: u64, exclusive: bool, add: bool) {
        let Some(ghost) = &self.ghost else { return };
        let mut g = ghost.lock().unwrap_or_else(|e| e.into_inner());
        let entry = g.entry(key).or_default();
        let slot = if exclusive { &mut entry.0 } else { &mut entry.1 };
        *slot = if add { *slot + 1 } else { slot.saturating_sub(1) };
        if *entry == (0, 0) {
            g.remove(&key);
        }
    }

    fn scratch(&self) -> u64 {
        self.layout.scratch(self.thread)
    }

    async fn faa(&mut self, key: u64, add: u64, during: &'static str) -> ProtocolResult<u64> {
        self.cost.rdma_ops += 1;
        self.nic.try_faa(self.layout.record(key), add, during).await
    }

    async fn do_read(&mut self, key: u64) -> ProtocolResult<u64> {
        let latch = self.config.mutant != Mutant::ReadWithoutLatch;
        if latch {
            let mut attempt = 0;
            loop {
                let old = self.faa(key, SHARED, "shared latch").await?;
                if old & EXCLUSIVE == 0 || self.config.mutant == Mutant::SharedIgnoresWriter {
                    break;
                }
                self.faa(key, SHARED.wrapping_neg(), "undo shared latch").await?;
                attempt += 1;
                self.back_off(attempt).await;
            }
            self.ghost(key, false, true);
        }
        let data = self.layout.record(key).add(8);
        let scratch = self.scratch();
        self.cost.rdma_ops += 1;
        self.nic
            .try_batch(
                &[Verb::Read { remote: data, local_bytes: scratch, len_bytes: DATA_BYTES }],
                "read record",
            )
            .await?;
        let local = self.nic.local();
        let copies = STAMP_AT.map(|at| local.load(scratch + at));
        if latch {
            self.ghost(key, false, false);
            self.faa(key, SHARED.wrapping_neg(), "shared unlatch").await?;
        }
        self.nic.cpu(Nanos(self.config.op_ns)).await;
        Ok(if copies.iter().all(|c| *c == copies[0]) { copies[0] } else { TORN })
    }

    async fn do_write(&mut self, key: u64, stamp: u64) -> ProtocolResult<u64> {
        let latch = self.layout.record(key);
        let mut attempt = 0;
        loop {
            self.cost.rdma_ops += 1;
            let old = self.nic.try_cas(latch, 0, EXCLUSIVE, "exclusive latch").await?;
            if old == 0 {
                break;
            }
            attempt += 1;
            self.back_off(attempt).await;
        }
        self.ghost(key, true, true);
        let scratch = self.scratch();
        for at in STAMP_AT {
            self.nic.local().store(scratch + at, stamp);
        }
        if self.config.mutant == Mutant::UnlatchBeforeWrite {
            self.ghost(key, true, false);
            self.faa(key, EXCLUSIVE.wrapping_neg(), "exclusive unlatch").await?;
        }
        let data = latch.add(8);
        let old_at = scratch + DATA_BYTES as u64; // a word of the scratch slot past the data
        let write = Verb::Write { remote: data, local_bytes: scratch, len_bytes: DATA_BYTES };
        let replaced = if self.log_replaced {
            // Check mode only: the value this write replaces, read under the latch in the same
            // doorbell batch (executes before the WRITE on the QP).
            self.cost.rdma_ops += 2;
            let read = Verb::Read { remote: data, local_bytes: old_at, len_bytes: 8 };
            self.nic.try_batch(&[read, write], "read old + write record").await?;
            self.nic.local().load(old_at)
        } else {
            self.cost.rdma_ops += 1;
            self.nic.try_batch(&[write], "write record").await?;
            0
        };
        if self.config.mutant != Mutant::UnlatchBeforeWrite {
            self.ghost(key, true, false);
            self.faa(key, EXCLUSIVE.wrapping_neg(), "exclusive unlatch").await?;
        }
        self.nic.cpu(Nanos(self.config.op_ns)).await;
        Ok(replaced)
    }
}

impl<N: Nic> ArrayWorker for Worker<N> {
    type N = N;

    fn nic(&self) -> &N {
        &self.nic
    }

    fn read(&mut self, key: u64) -> impl std::future::Future<Output = ProtocolResult<u64>> + Send {
        self.do_read(key)
    }

    fn write(
        &mut self,
        key: u64,
        stamp: u64,
    ) -> impl std::future::Future<Output = ProtocolResult<u64>> + Send {
        self.do_write(key, stamp)
    }

    fn cost(&mut self) -> &mut OpCost {
        &mut self.cost
    }
}
