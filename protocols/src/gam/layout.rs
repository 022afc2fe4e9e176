//! Where blocks live. Block `b` has its home on memory node `b mod m`, at slot `b div m` of that
//! node's region (round-robin, as SELCC's `Layout::gcl` spreads GCLs, so both protocols load
//! the memory nodes alike). A compute node's region holds its cache frames, one block each.
//!
//! ```text
//! memory node k:  | block k | block k+m | block k+2m | …      (gcl_size_bytes each)
//! compute node:   | frame 0 | frame 1 | … | frame F−1 |       (gcl_size_bytes each)
//! ```
//! The directory itself is home-side task state, not registered memory: only the home's CPU
//! touches it (§8.4 [P]: RPC designs keep their directory on the memory-node CPU).

use crate::nic::{Cluster, NodeId, NodeKind};

/// Sharer sets are a `u64` bitmap over compute indexes.
pub const MAX_COMPUTE_NODES: usize = 64;

#[derive(Clone, Debug)]
pub struct Layout {
    pub gcl_size_bytes: u64,
    pub block_count: u64,
    pub cache_frames: u64,
    pub memory_nodes: Vec<NodeId>,
    pub compute_nodes: Vec<NodeId>,
}

impl Layout {
    pub fn new(cluster: &Cluster, gcl_size_bytes: u32, block_count: u64, cache_frames: u32) -> Layout {
        let memory_nodes = cluster.memory_nodes();
        let compute_nodes = cluster.compute_nodes();
        assert!(!memory_nodes.is_empty(), "GAM needs at least one memory node");
        assert!(!compute_nodes.is_empty(), "GAM needs at least one compute node");
        assert!(
            compute_nodes.len() <= MAX_COMPUTE_NODES,
            "sharer bitmaps limit GAM to {MAX_COMPUTE_NODES} compute nodes"
        );
        assert!(gcl_size_bytes > 0 && gcl_size_bytes.is_multiple_of(8));
        assert!(block_count > 0, "no blocks");
        Layout {
            gcl_size_bytes: gcl_size_bytes as u64,
            block_count,
            cache_frames: cache_frames as u64,
            memory_nodes,
            compute_nodes,
        }
    }

    pub fn words_per_block(&self) -> usize {
        (self.gcl_size_bytes / 8) as usize
    }

    pub fn home(&self, block: u64) -> NodeId {
        assert!(block < self.block_count, "block {block} of {}", self.block_count);
        self.memory_nodes[(block % self.memory_nodes.len() as u64) as usize]
    }

    /// Blocks homed on one memory node (the largest share).
    pub fn blocks_per_home(&self) -> u64 {
        self.block_count.div_ceil(self.memory_nodes.len() as u64)
    }

    /// Byte offset of `block` in its home's region.
    pub fn home_offset(&self, block: u64) -> u64 {
        assert!(block < self.block_count, "block {block} of {}", self.block_count);
        (block / self.memory_nodes.len() as u64) * self.gcl_size_bytes
    }

    /// Slot of `block` in its home's directory.
    pub fn home_slot(&self, block: u64) -> usize {
        (block / self.memory_nodes.len() as u64) as usize
    }

    pub fn frame_offset(&self, frame: u32) -> u64 {
        assert!((frame as u64) < self.cache_frames, "frame {frame} of {}", self.cache_frames);
        frame as u64 * self.gcl_size_bytes
    }

    pub fn memory_region_bytes(&self) -> u64 {
        self.blocks_per_home() * self.gcl_size_bytes
    }

    pub fn compute_region_bytes(&self) -> u64 {
        self.cache_frames * self.gcl_size_bytes
    }

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

    /// This compute node's index (its bit in sharer sets).
    pub fn compute_index(&self, node: NodeId) -> u8 {
        self.compute_nodes.iter().position(|n| *n == node).expect("not a compute node") as u8
    }

    pub fn compute_node(&self, index: u8) -> NodeId {
        self.compute_nodes[index as usize]
    }

    pub fn compute_count(&self) -> usize {
        self.compute_nodes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_spread_round_robin() {
        let cluster = Cluster {
            kinds: vec![NodeKind::Memory, NodeKind::Memory, NodeKind::Compute],
            region_size_bytes: vec![0; 3],
        };
        let layout = Layout::new(&cluster, 64, 5, 4);
        assert_eq!((layout.home(0), layout.home(1), layout.home(4)), (NodeId(0), NodeId(1), NodeId(0)));
        assert_eq!((layout.home_offset(0), layout.home_offset(3), layout.home_offset(4)), (0, 64, 128));
        assert_eq!(layout.memory_region_bytes(), 3 * 64);
        assert_eq!(layout.compute_region_bytes(), 4 * 64);
        assert_eq!(layout.compute_index(NodeId(2)), 0);
    }
}
