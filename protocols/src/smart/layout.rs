//! The words SMART keeps in memory-node DRAM: slot entries, node headers, nodes and leaves, and
//! where in each memory node's region they live. Facts from dmemsys/SMART `include/Node.h`;
//! the bit positions are ours (the paper's packed C++ bitfields do not map onto u64 words
//! one-to-one), the sizes and fields are SMART's.
//!
//! ```text
//! internal node (allocated at NODE_256 size whatever its type: homogeneous-adaptive)
//!   +0  rev_ptr   address of the parent slot that points here (for cache validation)
//!   +8  header    depth | node_type | partial_len | partial[0..6]
//!   +16 slot[0..256]  8-byte entries, unsorted; a node of type T is read as 16 + num(T)·8 bytes
//! leaf (one key-value)
//!   +0  rev_ptr   +8 meta (bit 0 valid, bit 8 lock, 16.. version)   +16 checksum(key, value words)
//!   +24 key       +32 value words (value_bytes / 8 of them; the first is the value)
//! ```

use crate::nic::{NodeId, RemoteAddr};

/// A node type: how many of the node's 256 slots are exposed (read and searched). SMART's
/// default build (`HOMOGENEOUS_INTERNAL_NODE`, i.e. `TREE_ENABLE_FINE_GRAIN_NODE`) steps through
/// 4/8/16/32/64/128/256; the classic ART sizes are 4/16/48/256. Both fit one code table, ordered
/// by size; code 0 is a deleted node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeType(pub u8);

const SLOTS_BY_CODE: [usize; 9] = [0, 4, 8, 16, 32, 48, 64, 128, 256];

impl NodeType {
    pub const DELETED: NodeType = NodeType(0);
    pub const N4: NodeType = NodeType(1);
    pub const N256: NodeType = NodeType(8);

    pub fn from_bits(bits: u64) -> NodeType {
        NodeType(if (bits as usize) < SLOTS_BY_CODE.len() { bits as u8 } else { 0 })
    }

    pub fn slots(self) -> usize {
        SLOTS_BY_CODE[self.0 as usize]
    }

    /// The smallest type of the family whose slots include slot index `used` (SMART
    /// `num_to_node_type`): `fine` for 4/8/…/256, else 4/16/48/256.
    pub fn for_slot(used: usize, fine: bool) -> NodeType {
        let allowed: &[u8] = if fine { &[1, 2, 3, 4, 6, 7, 8] } else { &[1, 3, 5, 8] };
        let code = allowed.iter().copied().find(|&c| SLOTS_BY_CODE[c as usize] > used).unwrap_or(8);
        NodeType(code)
    }
}

/// Bytes of a node as allocated (rev_ptr, header, 256 slots).
pub const NODE_BYTES: u64 = 16 + 256 * 8;
/// Offset of slot 0 inside a node.
pub const SLOTS_OFFSET: u64 = 16;
/// Longest compressed prefix a header holds (SMART `hPartialLenMax`).
pub const PARTIAL_MAX: usize = 6;
/// Leaf words before the value.
pub const LEAF_HEADER_WORDS: usize = 4;
/// Leaf meta word: bit 0 valid, bit 8 the embedded write lock, bits 16.. a version every
/// in-place write bumps (so a lock CAS that expects the version read proves what it replaces).
pub const LEAF_VALID: u64 = 1;
pub const LEAF_LOCK: u64 = 1 << 8;
pub const LEAF_VERSION_ONE: u64 = 1 << 16;
/// Where the root's entry would live (SMART reads it once and keeps it; so do we).
pub const ROOT_OFFSET: u64 = 64;
/// Bytes reserved at the start of every memory node's region.
pub const RESERVED_BYTES: u64 = ROOT_OFFSET + NODE_BYTES;

/// The key's byte at `depth` (big-endian, so the radix order is the numeric order).
pub fn key_byte(key: u64, depth: usize) -> u8 {
    (key >> (56 - 8 * depth)) as u8
}

/// A packed node/leaf address: memory node id (8 bits) and word offset (40 bits).
pub fn pack_addr(addr: RemoteAddr) -> u64 {
    debug_assert!(addr.offset_bytes.is_multiple_of(8));
    (addr.node.0 as u64 & 0xff) | (addr.offset_bytes / 8) << 8
}

pub fn unpack_addr(packed: u64) -> RemoteAddr {
    RemoteAddr::new(NodeId((packed & 0xff) as u16), (packed >> 8 & ((1 << 40) - 1)) * 8)
}

/// One 8-byte slot entry (SMART `InternalEntry`): 0 is an empty slot.
///
/// bits 0..8 partial key byte · 8..13 child node type · 15 is-leaf · 16..64 packed address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Entry(pub u64);

impl Entry {
    pub const NULL: Entry = Entry(0);
    const LEAF_BIT: u64 = 1 << 15;
    pub const TYPE_MASK: u64 = 0x1f << 8;

    pub fn leaf(partial: u8, addr: RemoteAddr) -> Entry {
        Entry(partial as u64 | Self::LEAF_BIT | pack_addr(addr) << 16)
    }

    pub fn node(partial: u8, node_type: NodeType, addr: RemoteAddr) -> Entry {
        Entry(partial as u64 | (node_type.0 as u64) << 8 | pack_addr(addr) << 16)
    }

    pub fn is_null(self) -> bool {
        self.0 == 0
    }

    pub fn is_leaf(self) -> bool {
        self.0 & Self::LEAF_BIT != 0
    }

    pub fn partial(self) -> u8 {
        self.0 as u8
    }

    pub fn node_type(self) -> NodeType {
        NodeType::from_bits(self.0 >> 8 & 0x1f)
    }

    pub fn addr(self) -> RemoteAddr {
        unpack_addr(self.0 >> 16)
    }

    pub fn with_type(self, node_type: NodeType) -> Entry {
        Entry(self.0 & !Self::TYPE_MASK | (node_type.0 as u64) << 8)
    }

    pub fn with_partial(self, partial: u8) -> Entry {
        Entry(self.0 & !0xff | partial as u64)
    }
}

/// A node header word (SMART `Header`): bits 0..8 depth · 8..13 type · 13..16 partial length ·
/// 16..64 partial bytes. `depth` is the key byte the compressed prefix starts at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Header(pub u64);

impl Header {
    /// The bits a masked CAS of the node type touches.
    pub const TYPE_MASK: u64 = 0x1f << 8;

    /// A header whose prefix is `key`'s bytes `depth .. depth + len`.
    pub fn new(key: u64, depth: usize, len: usize, node_type: NodeType) -> Header {
        debug_assert!(len <= PARTIAL_MAX);
        let mut word = depth as u64 | (node_type.0 as u64) << 8 | (len as u64) << 13;
        for i in 0..len {
            word |= (key_byte(key, depth + i) as u64) << (16 + 8 * i);
        }
        Header(word)
    }

    pub fn depth(self) -> usize {
        (self.0 & 0xff) as usize
    }

    pub fn node_type(self) -> NodeType {
        NodeType::from_bits(self.0 >> 8 & 0x1f)
    }

    pub fn partial_len(self) -> usize {
        (self.0 >> 13 & 0x7) as usize
    }

    pub fn partial(self, i: usize) -> u8 {
        (self.0 >> (16 + 8 * i)) as u8
    }

    pub fn with_type(self, node_type: NodeType) -> Header {
        Header(self.0 & !Self::TYPE_MASK | (node_type.0 as u64) << 8)
    }

    /// The index of the first prefix byte `key` disagrees with, if any.
    pub fn mismatch(self, key: u64) -> Option<usize> {
        (0..self.partial_len()).find(|&i| key_byte(key, self.depth() + i) != self.partial(i))
    }

    /// The header left after the first `diff + 1` prefix bytes moved to a new parent
    /// (SMART `split_header`).
    pub fn split(self, diff: usize) -> Header {
        let len = self.partial_len() - diff - 1;
        let mut word = (self.depth() + diff + 1) as u64 | (self.0 & Self::TYPE_MASK) | (len as u64) << 13;
        for i in 0..len {
            word |= (self.partial(diff + 1 + i) as u64) << (16 + 8 * i);
        }
        Header(word)
    }
}

/// The leaf checksum over key and value words (SMART: CRC over key and value). Any fixed
/// 64-bit mix does: it only has to tell a torn or unwritten leaf from a whole one.
pub fn leaf_checksum(key: u64, value: &[u64]) -> u64 {
    let mut h = 0x9e37_79b9_7f4a_7c15u64 ^ key.rotate_left(17);
    for (i, w) in value.iter().enumerate() {
        h ^= w.wrapping_add(i as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ h >> 31).wrapping_mul(0x94d0_49bb_1331_11eb);
    }
    h | 1
}

/// A leaf as words: `[rev_ptr, meta, checksum, key, value × value_words]`.
pub fn leaf_words(rev_ptr: RemoteAddr, key: u64, value: u64, value_words: usize) -> Vec<u64> {
    // Padding words repeat the value so a torn read mixes two values (and the checksum sees it).
    let values = vec![value; value_words];
    let mut words = vec![pack_addr(rev_ptr), LEAF_VALID, leaf_checksum(key, &values), key];
    words.extend(values);
    words
}

/// The value a reader returns: the value word when all value words agree; when a torn read
/// mixed two writes, a digest of the mix (no write ever stores it, so checkers see a value
/// from nowhere).
pub fn value_of(values: &[u64]) -> u64 {
    let (first, last) = (values[0], values[values.len() - 1]);
    if first == last {
        first
    } else {
        first ^ last.rotate_left(29) ^ 0x5555_0000_0000_0000
    }
}

/// A leaf read back from its words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafView {
    pub rev_ptr: RemoteAddr,
    pub meta: u64,
    pub key: u64,
    pub value: u64,
    pub consistent: bool,
}

impl LeafView {
    pub fn parse(words: &[u64]) -> LeafView {
        let values = &words[LEAF_HEADER_WORDS..];
        LeafView {
            rev_ptr: unpack_addr(words[0]),
            meta: words[1],
            key: words[3],
            value: value_of(values),
            consistent: words[2] == leaf_checksum(words[3], values),
        }
    }

    pub fn valid(&self) -> bool {
        self.meta & LEAF_VALID != 0
    }
}

/// Deleted keys keep a leaf whose value has this bit set (a tombstone; see NEEDS.md).
pub const TOMBSTONE: u64 = 1 << 63;

/// Where things live: the root node, the bulk-loaded image, and each compute node's arena in
/// every memory node (allocation is local bump allocation in per-CN arenas, no allocation RPC).
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub memory_nodes: Vec<NodeId>,
    /// Per memory node: end of the bulk-loaded image (arenas start here).
    pub image_end: Vec<u64>,
    /// Bytes of each compute node's arena in each memory node.
    pub arena_bytes: u64,
    pub compute_count: usize,
    pub value_words: usize,
}

impl Layout {
    /// The word that would hold the root's entry (the root's rev_ptr names it).
    pub fn root_ptr(&self) -> RemoteAddr {
        RemoteAddr::new(self.memory_nodes[0], 8)
    }

    pub fn root(&self) -> RemoteAddr {
        RemoteAddr::new(self.memory_nodes[0], ROOT_OFFSET)
    }

    /// The root's entry (a NODE_256 that never splits, grows or moves).
    pub fn root_entry(&self) -> Entry {
        Entry::node(0, NodeType::N256, self.root())
    }

    pub fn leaf_bytes(&self) -> u64 {
        ((LEAF_HEADER_WORDS + self.value_words) * 8) as u64
    }

    /// `(start, end)` of compute node `compute`'s arena in memory node index `mn`.
    pub fn arena(&self, mn: usize, compute: usize) -> (u64, u64) {
        let start = self.image_end[mn].next_multiple_of(64) + compute as u64 * self.arena_bytes;
        (start, start + self.arena_bytes)
    }

    pub fn memory_region_bytes(&self) -> u64 {
        let widest = self.image_end.iter().copied().max().unwrap_or(RESERVED_BYTES);
        widest
            .next_multiple_of(64)
            .saturating_add((self.compute_count as u64).saturating_mul(self.arena_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_and_headers_round_trip() {
        let a = RemoteAddr::new(NodeId(3), 4096);
        let e = Entry::node(0xab, NodeType(3), a);
        assert_eq!((e.partial(), e.node_type(), e.addr(), e.is_leaf()), (0xab, NodeType(3), a, false));
        assert_eq!(e.with_type(NodeType(5)).node_type(), NodeType(5));
        let l = Entry::leaf(7, a);
        assert!(l.is_leaf() && !l.is_null() && l.addr() == a);
        let key = 0x0102_0304_0506_0708;
        let h = Header::new(key, 1, 5, NodeType::N4);
        assert_eq!((h.depth(), h.partial_len(), h.partial(0), h.partial(4)), (1, 5, 2, 6));
        assert_eq!(h.mismatch(key), None);
        assert_eq!(h.mismatch(key ^ 0x0000_0100_0000_0000), Some(1), "key byte 2 is prefix byte 1");
        let s = h.split(1);
        assert_eq!((s.depth(), s.partial_len(), s.partial(0), s.node_type()), (3, 3, 4, NodeType::N4));
        assert_eq!(NodeType::for_slot(4, false), NodeType(3));
        assert_eq!(NodeType::for_slot(4, true), NodeType(2));
        assert_eq!(NodeType::for_slot(200, false).slots(), 256);
    }

    #[test]
    fn checksum_tells_a_torn_leaf() {
        let words = leaf_words(RemoteAddr::new(NodeId(0), 64), 42, 7, 9);
        assert!(LeafView::parse(&words).consistent);
        let mut torn = words.clone();
        torn[12] = 8;
        assert!(!LeafView::parse(&torn).consistent);
    }
}
