//! Where things live in registered memory (SELCC §2 [P] "GCL = latch + header + data").
//!
//! ```text
//! memory node region
//! ┌──────────┬─────────┬─────────────────────────────┬─────────────────────────────┬──
//! │ bump (8) │ pad(56) │ GCL: latch | header | data  │ GCL: latch | header | data  │ …
//! └──────────┴─────────┴─────────────────────────────┴─────────────────────────────┴──
//!  the benchmark's pre-allocated GCLs come first; `Allocate` bumps past them.
//!
//! compute node region
//! ┌─────────────────────────────┬───────────────────────────┬──────────────────────────┐
//! │ frames: header | data  × F  │ reply flags  × threads    │ eviction ring slots      │
//! └─────────────────────────────┴───────────────────────────┴──────────────────────────┘
//! ```
//! A frame mirrors the GCL minus its latch word, so one READ of `header | data` fills it and one
//! WRITE forwards it (header included: it carries the dirty bounds, which a Case-1 handover must
//! pass on — spec S7). The header word in memory is always 0 ("clean").
//! SEL (`sel.rs`) caches nothing: frame number `t` is thread `t`'s private page buffer, so SEL
//! needs `cache_frames ≥ threads_per_node` (`Config::validate`).

use crate::memory::PayloadSpan;
use crate::nic::{Cluster, NodeId, NodeKind, RemoteAddr};

use super::config::Config;
use super::latch::MAX_COMPUTE_NODES;
use super::ComputeIndex;

pub const WORD: u64 = 8;
/// Bytes before the first GCL on a memory node (the bump word, padded to a cache line).
pub const MEMORY_HEADER_BYTES: u64 = 64;
/// Reply flags per worker: one word per possible responder for the requests it waits on (Case 3
/// has several responders), then as many again for Case-3 requests it does not wait on
/// ([`SHARER_REPLIES_OFFSET`]), so a late answer to those never overwrites an awaited one.
pub const REPLY_SLOT_BYTES: u64 = 2 * SHARER_REPLIES_OFFSET;
/// Offset of the Case-3 (not awaited) reply words within a worker's reply slot.
pub const SHARER_REPLIES_OFFSET: u64 = MAX_COMPUTE_NODES as u64 * WORD;

/// A global GCL address: the node and byte offset of its latch word (§2 [P] "8-byte global
/// pointer (NodeID, offset)").
pub type Gaddr = RemoteAddr;

/// The cluster-wide placement of GCLs, frames, reply slots and ring slots.
#[derive(Clone, Debug)]
pub struct Layout {
    pub gcl_size_bytes: u64,
    /// GCLs pre-allocated for the benchmark, spread round-robin over memory nodes.
    pub prealloc_gcl_count: u64,
    pub memory_nodes: Vec<NodeId>,
    pub compute_nodes: Vec<NodeId>,
    pub cache_frames: u64,
    pub threads_per_node: u64,
    pub evict_ring_slots: u64,
    /// Bytes of each memory node's region reserved for GCLs (pre-allocated + `Allocate`).
    pub memory_gcl_bytes: u64,
    /// Crash recovery: the first memory node holds the membership words after its GCLs.
    pub membership: bool,
}

/// Membership words (crash recovery, `recovery.rs`): one heartbeat counter per compute index,
/// then three bitmaps of compute indices: dead (declared), recovered (ownership cleaned up),
/// done (finished and drained, at the end of a benchmark run).
pub const MEMBERSHIP_BYTES: u64 = (MAX_COMPUTE_NODES as u64 + 3) * WORD;

impl Layout {
    /// `extra_gcls_per_memory_node` leaves room for `Allocate` beyond the benchmark's GCLs.
    pub fn new(
        cluster: &Cluster,
        config: &Config,
        prealloc_gcl_count: u64,
        extra_gcls_per_memory_node: u64,
    ) -> Layout {
        let memory_nodes = cluster.memory_nodes();
        let compute_nodes = cluster.compute_nodes();
        assert!(!memory_nodes.is_empty(), "SELCC needs at least one memory node");
        assert!(!compute_nodes.is_empty(), "SELCC needs at least one compute node");
        assert!(
            compute_nodes.len() <= MAX_COMPUTE_NODES,
            "the 58-bit reader bitmap limits SELCC to {MAX_COMPUTE_NODES} compute nodes"
        );
        let gcl_size_bytes = config.gcl_size_bytes as u64;
        assert!(gcl_size_bytes > 0 && gcl_size_bytes.is_multiple_of(WORD));
        let per_node = prealloc_gcl_count.div_ceil(memory_nodes.len() as u64) + extra_gcls_per_memory_node;
        Layout {
            gcl_size_bytes,
            prealloc_gcl_count,
            memory_gcl_bytes: per_node * (2 * WORD + gcl_size_bytes),
            memory_nodes,
            compute_nodes,
            cache_frames: config.cache_frames as u64,
            threads_per_node: config.threads_per_node as u64,
            evict_ring_slots: config.evict_ring_slots as u64,
            membership: config.crash_recovery,
        }
    }

    /// Compute index `i`'s heartbeat counter (crash recovery only).
    pub fn heartbeat(&self, i: ComputeIndex) -> Option<RemoteAddr> {
        self.membership.then(|| {
            RemoteAddr::new(
                self.memory_nodes[0],
                MEMORY_HEADER_BYTES + self.memory_gcl_bytes + i.0 as u64 * WORD,
            )
        })
    }

    /// The dead set: bit i = compute index i was declared dead (crash recovery only).
    pub fn dead_set(&self) -> Option<RemoteAddr> {
        self.membership_word(0)
    }

    /// Bit i = compute index i's ownership was cleaned up after its death.
    pub fn recovered_set(&self) -> Option<RemoteAddr> {
        self.membership_word(1)
    }

    /// Bit i = compute index i finished its run and drained its cache.
    pub fn done_set(&self) -> Option<RemoteAddr> {
        self.membership_word(2)
    }

    fn membership_word(&self, i: u64) -> Option<RemoteAddr> {
        self.membership.then(|| {
            let base = MEMORY_HEADER_BYTES + self.memory_gcl_bytes + MAX_COMPUTE_NODES as u64 * WORD;
            RemoteAddr::new(self.memory_nodes[0], base + i * WORD)
        })
    }

    // ---- memory side ----

    /// Bytes per GCL in memory: latch, header, data.
    pub fn gcl_stride_bytes(&self) -> u64 {
        2 * WORD + self.gcl_size_bytes
    }

    pub fn memory_region_bytes(&self) -> u64 {
        MEMORY_HEADER_BYTES + self.memory_gcl_bytes + if self.membership { MEMBERSHIP_BYTES } else { 0 }
    }

    /// The benchmark's GCL number `index` (0..prealloc_gcl_count).
    pub fn gcl(&self, index: u64) -> Gaddr {
        assert!(
            index < self.prealloc_gcl_count,
            "GCL {index} beyond the {} pre-allocated",
            self.prealloc_gcl_count
        );
        let m = self.memory_nodes.len() as u64;
        let node = self.memory_nodes[(index % m) as usize];
        RemoteAddr::new(node, MEMORY_HEADER_BYTES + (index / m) * self.gcl_stride_bytes())
    }

    /// Offset of the first GCL `Allocate` may hand out on `node`.
    pub fn first_free_offset(&self, node: NodeId) -> u64 {
        let m = self.memory_nodes.len() as u64;
        let position = self.memory_nodes.iter().position(|n| *n == node).expect("not a memory node") as u64;
        let here = self.prealloc_gcl_count / m + u64::from(position < self.prealloc_gcl_count % m);
        MEMORY_HEADER_BYTES + here * self.gcl_stride_bytes()
    }

    pub fn latch(g: Gaddr) -> RemoteAddr {
        g
    }

    /// `header | data` of a GCL (what a READ fetches and a forward writes).
    pub fn body(g: Gaddr) -> RemoteAddr {
        g.add(WORD)
    }

    /// The data bytes of a GCL.
    pub fn data(g: Gaddr) -> RemoteAddr {
        g.add(2 * WORD)
    }

    // ---- compute side ----

    /// Bytes per frame: header and data.
    pub fn frame_stride_bytes(&self) -> u64 {
        WORD + self.gcl_size_bytes
    }

    /// Offset of frame `index`'s header word in the compute node's region.
    pub fn frame_offset(&self, index: u32) -> u64 {
        assert!((index as u64) < self.cache_frames, "frame {index} of {}", self.cache_frames);
        index as u64 * self.frame_stride_bytes()
    }

    pub fn reply_slot_offset(&self, thread: u32) -> u64 {
        assert!((thread as u64) < self.threads_per_node, "thread {thread} of {}", self.threads_per_node);
        self.cache_frames * self.frame_stride_bytes() + thread as u64 * REPLY_SLOT_BYTES
    }

    /// Eviction ring slot `slot` for memory node number `memory_position`.
    pub fn ring_slot_offset(&self, memory_position: usize, slot: u32) -> u64 {
        assert!((slot as u64) < self.evict_ring_slots);
        assert!(memory_position < self.memory_nodes.len());
        let base = self.cache_frames * self.frame_stride_bytes() + self.threads_per_node * REPLY_SLOT_BYTES;
        base + (memory_position as u64 * self.evict_ring_slots + slot as u64) * self.frame_stride_bytes()
    }

    pub fn compute_region_bytes(&self) -> u64 {
        self.cache_frames * self.frame_stride_bytes()
            + self.threads_per_node * REPLY_SLOT_BYTES
            + self.memory_nodes.len() as u64 * self.evict_ring_slots * self.frame_stride_bytes()
    }

    /// Region sizes for every node of `cluster`, ready for `Cluster::region_size_bytes`.
    pub fn region_sizes(&self, kinds: &[NodeKind]) -> Vec<u64> {
        kinds
            .iter()
            .map(|k| match k {
                NodeKind::Memory => self.memory_region_bytes(),
                NodeKind::Compute => self.compute_region_bytes(),
                NodeKind::Symmetric => self.memory_region_bytes() + self.compute_region_bytes(),
            })
            .collect()
    }

    /// The GCL data a node of `kind` holds, as opaque payload: in memory every GCL past its
    /// latch and header, on a compute node every frame past its header (dirty bounds). The
    /// micro-benchmark never interprets data words, so a measuring run may leave them unstored;
    /// the B-link tree or anything that stores structure in GCLs must not declare this.
    pub fn payload_span(&self, kind: NodeKind) -> Option<PayloadSpan> {
        match kind {
            NodeKind::Memory => Some(PayloadSpan {
                start_bytes: MEMORY_HEADER_BYTES,
                stride_bytes: self.gcl_stride_bytes(),
                kept_bytes: 2 * WORD,
                lines: self.memory_gcl_bytes / self.gcl_stride_bytes(),
            }),
            NodeKind::Compute => Some(PayloadSpan {
                start_bytes: 0,
                stride_bytes: self.frame_stride_bytes(),
                kept_bytes: WORD,
                lines: self.cache_frames,
            }),
            NodeKind::Symmetric => None,
        }
    }

    pub fn memory_position(&self, node: NodeId) -> usize {
        self.memory_nodes.iter().position(|n| *n == node).expect("GCL on a node that is not a memory node")
    }

    /// This compute node's index in the latch word.
    pub fn compute_index(&self, node: NodeId) -> ComputeIndex {
        let i = self.compute_nodes.iter().position(|n| *n == node).expect("not a compute node");
        ComputeIndex(i as u8)
    }

    pub fn compute_node(&self, index: ComputeIndex) -> NodeId {
        self.compute_nodes[index.0 as usize]
    }

    pub fn compute_count(&self) -> usize {
        self.compute_nodes.len()
    }

    /// Is `g` the start of a GCL on a memory node?
    pub fn is_gcl(&self, g: Gaddr) -> bool {
        self.memory_nodes.contains(&g.node)
            && g.offset_bytes >= MEMORY_HEADER_BYTES
            && (g.offset_bytes - MEMORY_HEADER_BYTES).is_multiple_of(self.gcl_stride_bytes())
            && g.offset_bytes < MEMORY_HEADER_BYTES + self.memory_gcl_bytes
    }
}

/// Memory-node setup: point the bump allocator past the pre-allocated GCLs. Latches, headers and
/// data start at zero (free, clean) because regions are zeroed.
pub fn setup_memory_node(layout: &Layout, node: NodeId, region: &crate::memory::Region) {
    assert!(region.size_bytes() >= layout.memory_region_bytes(), "memory node region too small");
    region.store(0, layout.first_free_offset(node));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Cluster {
        Cluster {
            kinds: vec![NodeKind::Memory, NodeKind::Memory, NodeKind::Compute, NodeKind::Compute],
            region_size_bytes: vec![0; 4],
        }
    }

    #[test]
    fn gcls_spread_round_robin_and_bump_starts_after_them() {
        let config = Config { gcl_size_bytes: 64, cache_frames: 64, threads_per_node: 2, ..Config::selcc() };
        let layout = Layout::new(&cluster(), &config, 5, 2);
        assert_eq!(layout.gcl(0), RemoteAddr::new(NodeId(0), 64));
        assert_eq!(layout.gcl(1), RemoteAddr::new(NodeId(1), 64));
        assert_eq!(layout.gcl(2), RemoteAddr::new(NodeId(0), 64 + 80));
        assert_eq!(layout.first_free_offset(NodeId(0)), 64 + 3 * 80);
        assert_eq!(layout.first_free_offset(NodeId(1)), 64 + 2 * 80);
        assert!(layout.is_gcl(layout.gcl(4)));
        assert!(!layout.is_gcl(layout.gcl(4).add(8)));
        assert_eq!(layout.compute_index(NodeId(3)), ComputeIndex(1));
        // Compute regions: frames, reply slots, ring — disjoint and in order.
        let last_frame_end = layout.frame_offset(63) + layout.frame_stride_bytes();
        assert_eq!(layout.reply_slot_offset(0), last_frame_end);
        assert_eq!(layout.ring_slot_offset(0, 0), layout.reply_slot_offset(1) + REPLY_SLOT_BYTES);
        assert_eq!(
            layout.ring_slot_offset(1, 15) + layout.frame_stride_bytes(),
            layout.compute_region_bytes()
        );
    }
}
