//! Where everything lives in a node's registered region, and the PID encoding.
//!
//! ```text
//! [ frames: one page slot per page of the cluster (direct-mapped) ]
//! [ request mailboxes: (source node, worker) × 16 B, written by remote workers ]
//! [ response slots:    (worker, answering node) × 16 B, written by remote handlers ]
//! with eviction (a cache smaller than the data) also:
//! [ staging pages:     (source node, worker) × page, a remote request's page read from SSD ]
//! [ eviction lists in: (source node, provider) × batch × 8 B, written by remote providers ]
//! [ eviction lists out: (provider, directory node) × batch × 8 B ]
//! ```
//!
//! "Workers" above include the page providers (`agents` = workers + providers): a provider
//! sends its eviction batches through a mailbox of its own.
//!
//! [CHOICE] Every node has a frame slot for every page (direct-mapped by global page index);
//! the cache's capacity is a count of present frames (`NodeState::used`), not a pool of
//! addresses. A slot is reused only by a later fetch of the same page, which the chain (or
//! the directory's eviction decision) orders after every transfer out of it, so no page write
//! can read a recycled frame. A remote request served from the directory's SSD goes through a
//! staging page of the requester's mailbox (the paper's "temporary memory"), not a frame.

use crate::memory::PayloadSpan;
use crate::nic::{NodeId, RemoteAddr};

/// Bytes of one mailbox or response slot: [argument word, head word (flag last)].
pub const SLOT_BYTES: u64 = 16;
/// Directory node id in the PID's top 8 bits (paper §2.2).
pub const PID_NODE_SHIFT: u32 = 56;

#[derive(Clone, Debug)]
pub struct Layout {
    pub nodes: u64,
    /// Directory nodes: ids `0..homes` (all nodes when symmetric; the memory nodes when
    /// ScaleStore is SELCC's baseline on memory + compute nodes, `dm_def`).
    pub homes: u64,
    pub threads: u64,
    pub pages_per_node: u64,
    pub page_bytes: u64,
    pub keys_per_page: u64,
    /// Page-provider tasks per node (0: no eviction, nothing of the eviction areas exists).
    pub providers: u64,
    /// Pages per eviction batch.
    pub batch: u64,
}

impl Layout {
    pub fn total_pages(&self) -> u64 {
        self.homes.saturating_mul(self.pages_per_node)
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

    /// Workers and page providers: the senders of requests.
    pub fn agents(&self) -> u64 {
        self.threads + self.providers
    }

    /// Request mailbox of `(from, agent)` on any node.
    pub fn request(&self, from: NodeId, agent: u32) -> u64 {
        self.mailboxes() + (from.0 as u64 * self.agents() + agent as u64) * SLOT_BYTES
    }

    pub fn mailbox_count(&self) -> u64 {
        self.nodes * self.agents()
    }

    /// Response slot of local `agent` for answers from `from`.
    pub fn response(&self, agent: u32, from: NodeId) -> u64 {
        self.mailboxes()
            + self.mailbox_count() * SLOT_BYTES
            + (agent as u64 * self.nodes + from.0 as u64) * SLOT_BYTES
    }

    fn eviction_areas(&self) -> u64 {
        self.mailboxes() + 2 * self.mailbox_count() * SLOT_BYTES
    }

    /// Staging page for the request of `(from, agent)` served from this node's SSD.
    pub fn staging(&self, from: NodeId, agent: u32) -> u64 {
        self.eviction_areas() + (from.0 as u64 * self.agents() + agent as u64) * self.page_bytes
    }

    /// Incoming eviction list of provider `provider` of node `from`.
    pub fn evict_in(&self, from: NodeId, provider: u32) -> u64 {
        self.eviction_areas()
            + self.mailbox_count() * self.page_bytes
            + (from.0 as u64 * self.providers + provider as u64) * self.batch * 8
    }

    /// Outgoing eviction list of local provider `provider` to directory `to`.
    pub fn evict_out(&self, provider: u32, to: NodeId) -> u64 {
        self.eviction_areas()
            + self.mailbox_count() * self.page_bytes
            + self.nodes * self.providers * self.batch * 8
            + (provider as u64 * self.nodes + to.0 as u64) * self.batch * 8
    }

    pub fn region_bytes(&self) -> u64 {
        if self.providers == 0 {
            return self.eviction_areas();
        }
        self.evict_out(0, NodeId(0)) + self.providers * self.nodes * self.batch * 8
    }

    /// Byte offset of page `g` on its directory's storage device.
    pub fn ssd_offset(&self, g: u64) -> u64 {
        (g % self.pages_per_node) * self.page_bytes
    }

    pub fn ssd_bytes(&self) -> u64 {
        if self.providers == 0 {
            0
        } else {
            self.pages_per_node * self.page_bytes
        }
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
