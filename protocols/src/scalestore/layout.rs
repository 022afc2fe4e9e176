//! Where everything lives in a node's registered region, and the PID encoding.
//!
//! ```text
//! [ frames: one page slot per page of the cluster (direct-mapped) ]
//! [ request mailboxes: (source node, worker) × 16 B, written by remote workers ]
//! [ response slots:    (worker, answering node) × 16 B, written by remote handlers ]
//! ```
//!
//! [CHOICE] Every node has a frame slot for every page (no eviction in this slice: the
//! configurations built here are in-memory, cache ≥ data, as the paper's GAM table and its
//! in-memory latency row). A slot is reused only by a later fetch of the same page, which the
//! chain orders after every transfer out of it, so no page write can read a recycled frame.

use crate::memory::PayloadSpan;
use crate::nic::{NodeId, RemoteAddr};

/// Bytes of one mailbox or response slot: [argument word, head word (flag last)].
pub const SLOT_BYTES: u64 = 16;
/// Directory node id in the PID's top 8 bits (paper §2.2).
pub const PID_NODE_SHIFT: u32 = 56;

#[derive(Clone, Debug)]
pub struct Layout {
    pub nodes: u64,
    pub threads: u64,
    pub pages_per_node: u64,
    pub page_bytes: u64,
    pub keys_per_page: u64,
}

impl Layout {
    pub fn total_pages(&self) -> u64 {
        self.nodes * self.pages_per_node
    }

    /// The PID of global page `g`: directory node in the top 8 bits, slot below.
    pub fn pid(&self, g: u64) -> u64 {
        ((g / self.pages_per_node) << PID_NODE_SHIFT) | (g % self.pages_per_node)
    }

    /// The directory node of global page `g` (`pid >> 56`).
    pub fn directory(&self, g: u64) -> NodeId {
        NodeId((self.pid(g) >> PID_NODE_SHIFT) as u16)
    }

    pub fn frame(&self, g: u64) -> u64 {
        g * self.page_bytes
    }

    fn mailboxes(&self) -> u64 {
        self.total_pages() * self.page_bytes
    }

    /// Request mailbox of `(from, worker)` on any node.
    pub fn request(&self, from: NodeId, worker: u32) -> u64 {
        self.mailboxes() + (from.0 as u64 * self.threads + worker as u64) * SLOT_BYTES
    }

    pub fn mailbox_count(&self) -> u64 {
        self.nodes * self.threads
    }

    /// Response slot of local `worker` for answers from `from`.
    pub fn response(&self, worker: u32, from: NodeId) -> u64 {
        self.mailboxes()
            + self.mailbox_count() * SLOT_BYTES
            + (worker as u64 * self.nodes + from.0 as u64) * SLOT_BYTES
    }

    pub fn region_bytes(&self) -> u64 {
        self.mailboxes() + 2 * self.mailbox_count() * SLOT_BYTES
    }

    /// The page bytes past the records are never interpreted.
    pub fn payload_span(&self) -> PayloadSpan {
        PayloadSpan {
            start_bytes: 0,
            stride_bytes: self.page_bytes,
            kept_bytes: (self.keys_per_page * 8).next_multiple_of(8),
            lines: self.total_pages(),
        }
    }

    /// Record `k`'s word in node `n`'s frame of its page.
    pub fn record(&self, n: NodeId, key: u64) -> RemoteAddr {
        let g = key / self.keys_per_page;
        RemoteAddr::new(n, self.frame(g) + (key % self.keys_per_page) * 8)
    }
}
