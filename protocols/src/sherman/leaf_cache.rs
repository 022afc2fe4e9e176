//! Sherman's leaves through DiFache (`protocol_options.leaf_cache`; DiFache §5 "Database
//! index" and Fig. 3, the integration of Fig. 14 top): every leaf READ — a lookup's, the READ
//! under the leaf lock, a scan's walk — becomes a DiFache read of the leaf as one object, and
//! every leaf write a DiFache write of the whole leaf (flush to the memory node, then invalidate
//! the other compute nodes' copies) made while Sherman's leaf lock is held. Internal nodes, the
//! index cache, the locks and the version checks are Sherman's as before: DiFache serves
//! whole-object accesses that the application already serializes (DiFache §2.2), so a copy torn
//! by a concurrent flush is caught by the leaf's node versions and read again.
//!
//! Objects: Sherman's frames are 1 KB at 1 KB-aligned offsets of each memory node, so frame
//! offset `o` of memory node `m` is DiFache object `o / 1 KB × memory_nodes + m`, which DiFache's
//! layout places at exactly that address (`difache::layout`: object `k` at slot `k / m` of
//! memory node `k % m`). DiFache's own memory-node words (owner sets, mode locks) follow the
//! frames; its compute-node region (index, headers, buffers) precedes Sherman's buffers.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::layout::{Gaddr, NODE_BYTES};
use crate::common::error::ProtocolResult;
use crate::difache::cache::{Cache, Worker};
use crate::difache::config::{Config as DifacheConfig, Cpu, OwnerTracking, Variant};
use crate::difache::layout::Layout as DifacheLayout;
use crate::difache::profit::Event;
use crate::nic::Nic;

/// `protocol_options.leaf_cache`: which DiFache caches the leaves, and its sizes. Whatever is
/// not here is DiFache's paper default (`difache::Config::paper`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeafCacheOptions {
    /// `difache` (adaptive caching) or `noac` (every leaf always cached).
    pub variant: Variant,
    /// Leaves cached per compute node (one header and one 1 KB buffer each).
    #[serde(default = "cache_objects")]
    pub cache_objects: u32,
    /// Home buckets of the hopscotch index.
    #[serde(default = "index_buckets")]
    pub index_buckets: u32,
    #[serde(default)]
    pub owner_tracking: OwnerTracking,
    /// Local CPU of cached accesses (default: DiFache's paper defaults).
    #[serde(default = "cpu")]
    pub cpu: Cpu,
}

fn cache_objects() -> u32 {
    DifacheConfig::paper().cache_objects
}
fn index_buckets() -> u32 {
    DifacheConfig::paper().index_buckets
}
fn cpu() -> Cpu {
    DifacheConfig::paper().cpu
}

impl LeafCacheOptions {
    /// The DiFache configuration these options make.
    pub fn difache(&self) -> DifacheConfig {
        DifacheConfig {
            variant: self.variant,
            cache_objects: self.cache_objects,
            index_buckets: self.index_buckets,
            owner_tracking: self.owner_tracking,
            cpu: self.cpu.clone(),
            ..DifacheConfig::paper()
        }
    }

    /// Problems as "field: reason".
    pub fn validate(&self) -> Vec<String> {
        let mut out: Vec<String> =
            self.difache().validate().into_iter().map(|p| format!("leaf_cache.{p}")).collect();
        if !matches!(self.variant, Variant::Difache | Variant::Noac) {
            out.push(
                "leaf_cache.variant: `difache` or `noac` (no leaf cache: leave `leaf_cache` out; CMCache and noCC are not integrated)"
                    .into(),
            );
        }
        out
    }
}

/// DiFache's layout over a Sherman point whose memory nodes hold `sherman_region_bytes` each.
pub fn layout(
    options: &LeafCacheOptions,
    memory_nodes: u16,
    compute_nodes: u16,
    threads: u32,
    sherman_region_bytes: u64,
) -> DifacheLayout {
    let objects = sherman_region_bytes.div_ceil(NODE_BYTES) * memory_nodes as u64;
    DifacheLayout::for_objects(
        memory_nodes,
        compute_nodes,
        objects,
        NODE_BYTES,
        threads as u64,
        &options.difache(),
    )
}

/// One client thread's door to its compute node's DiFache cache.
pub struct LeafCache<N: Nic> {
    pub cache: Arc<Cache<N>>,
    worker: Worker<N>,
}

impl<N: Nic> LeafCache<N> {
    pub fn new(cache: Arc<Cache<N>>, nic: N, thread: u32) -> LeafCache<N> {
        LeafCache { cache, worker: Worker { nic, thread } }
    }

    /// The DiFache object of the frame at `page`.
    fn key(&self, page: Gaddr) -> u64 {
        page.offset() / NODE_BYTES * self.cache.layout.memory_nodes as u64 + page.node().0 as u64
    }

    /// Where reads land and writes come from (this thread's DiFache application buffer).
    pub fn buffer(&self) -> u64 {
        self.cache.layout.app_buffer(self.worker.thread)
    }

    /// The leaf at `page` into [`LeafCache::buffer`]: a hit copies the cached leaf, a miss
    /// fetches it (and caches it if the leaf's mode is on).
    pub async fn read(&self, page: Gaddr) -> ProtocolResult<Event> {
        self.cache.read(&self.worker, self.key(page)).await
    }

    /// [`LeafCache::buffer`] to the leaf at `page`; the caller holds the leaf's lock.
    pub async fn write(&self, page: Gaddr) -> ProtocolResult<Event> {
        self.cache.write(&self.worker, self.key(page)).await
    }
}
