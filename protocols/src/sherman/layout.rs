//! Where everything lives: 1 KB nodes as 128 words, the two version schemes, global addresses,
//! the lock table, and each memory node's region.
//!
//! Sherman packs its nodes byte-wise (`Tree.h`: 35-byte header, 18-byte leaf entries with 4-bit
//! front/rear entry versions, 54 leaf / 61 internal entries). Our memory is 8-byte words; the
//! node stays 1 KB and is read whole.
//!
//! * `Versions::Node` (Sherman, word-aligned; [CHOICE] in NEEDS.md): word 0 is the node's front
//!   version, word 127 its rear version; a leaf entry is `[front, key, value, rear]` (entry
//!   versions for entry-sized write-backs). 30 leaf entries, 60 internal entries.
//! * `Versions::Packed` (Sherman as `Tree.h` packs its leaves): the same node versions and
//!   header words, then 18-byte leaf entries `[front u8, key, value, rear u8]` packed byte by
//!   byte from byte 48 (53 entries, the authors' 54 less what our 8-byte header words cost).
//!   An entry write-back WRITEs the 3 words the entry overlaps (24 bytes for 18); the neighbours' bytes in
//!   them go out unchanged (the writer holds the node's lock and read it after taking it).
//! * `Versions::Line` (FaRM-style, the fix): word 0 of every 64-byte line carries the node
//!   version, so a whole-node write torn in any order is seen as such; leaf entries are
//!   `[key, value]`, three per line, never straddling a line (a line lands at once). 45 leaf
//!   and 45 internal entries.
//!
//! Header words (both schemes, physical words 1..=5): leftmost child (0 in a leaf), sibling,
//! `level | count << 8`, lowest key (inclusive), highest key (exclusive; `u64::MAX` = +∞).

use serde::{Deserialize, Serialize};

use crate::nic::{NodeId, RemoteAddr};

pub const NODE_BYTES: u64 = 1024;
pub const NODE_WORDS: usize = 128;
pub const LINE_WORDS: usize = 8;
/// `highest` of the rightmost node at each level.
pub const KEY_MAX: u64 = u64::MAX;
/// Sherman's `kNumOfLock`: 256 KiB of device memory as 8-byte lock words per memory node.
pub const SHERMAN_LOCKS: u32 = 32_768;
/// Sherman's `kMaxHandOverTime`.
pub const MAX_HANDOVER: u8 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Versions {
    Node,
    Line,
    Packed,
}

/// `Versions::Packed`: the first leaf entry's byte (after the header words 0..=5).
pub const PACKED_FIRST_BYTE: usize = 48;
/// `Versions::Packed`: bytes of one leaf entry (`Tree.h`'s `LeafEntry`, packed).
pub const PACKED_ENTRY_BYTES: usize = 18;

/// Header word positions.
pub const W_LEFTMOST: usize = 1;
pub const W_SIBLING: usize = 2;
pub const W_LEVEL: usize = 3;
pub const W_LOWEST: usize = 4;
pub const W_HIGHEST: usize = 5;

impl Versions {
    pub fn leaf_cap(self) -> usize {
        match self {
            Versions::Node => 30,
            Versions::Line => 45,
            Versions::Packed => (NODE_BYTES as usize - 8 - PACKED_FIRST_BYTE) / PACKED_ENTRY_BYTES,
        }
    }

    pub fn internal_cap(self) -> usize {
        match self {
            Versions::Node | Versions::Packed => 60,
            Versions::Line => 45,
        }
    }

    /// First physical word of leaf entry `i` (its key word in `Line`, its front version in
    /// `Node`, the word holding its front version byte in `Packed`).
    pub fn leaf_entry(self, i: usize) -> usize {
        self.leaf_entry_span(i).0
    }

    /// `Versions::Packed`: the byte where leaf entry `i` starts.
    pub fn packed_entry_byte(i: usize) -> usize {
        PACKED_FIRST_BYTE + PACKED_ENTRY_BYTES * i
    }

    /// The words an entry write-back of leaf entry `i` covers: (first, count).
    pub fn leaf_entry_span(self, i: usize) -> (usize, usize) {
        match self {
            Versions::Node => (6 + 4 * i, 4),
            Versions::Line => ((1 + i / 3) * LINE_WORDS + 1 + (i % 3) * 2, 2),
            Versions::Packed => {
                let b = Versions::packed_entry_byte(i);
                (b / 8, (b + PACKED_ENTRY_BYTES - 1) / 8 - b / 8 + 1)
            }
        }
    }

    /// Physical word of internal entry `i`'s key (its child pointer follows).
    pub fn internal_entry(self, i: usize) -> usize {
        match self {
            Versions::Node | Versions::Packed => 6 + 2 * i,
            Versions::Line => (1 + i / 3) * LINE_WORDS + 1 + (i % 3) * 2,
        }
    }

    /// The words that carry the node version.
    pub fn version_words(self) -> Vec<usize> {
        match self {
            Versions::Node | Versions::Packed => vec![0, NODE_WORDS - 1],
            Versions::Line => (0..NODE_WORDS / LINE_WORDS).map(|l| l * LINE_WORDS).collect(),
        }
    }
}

/// A node's global address: memory node in the top 16 bits, byte offset below. 0 is null.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Gaddr(pub u64);

impl Gaddr {
    pub const NULL: Gaddr = Gaddr(0);

    pub fn new(node: NodeId, offset: u64) -> Gaddr {
        Gaddr((node.0 as u64) << 48 | offset)
    }

    pub fn is_null(self) -> bool {
        self.0 == 0
    }

    pub fn node(self) -> NodeId {
        NodeId((self.0 >> 48) as u16)
    }

    pub fn offset(self) -> u64 {
        self.0 & ((1 << 48) - 1)
    }

    pub fn remote(self) -> RemoteAddr {
        RemoteAddr::new(self.node(), self.offset())
    }
}

impl std::fmt::Display for Gaddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{:#x}", self.node().0, self.offset())
    }
}

/// CityHash64 stands in Sherman; any fixed mix spreads node addresses over the lock table.
pub fn lock_index(addr: Gaddr, locks: u32) -> u32 {
    let mut x = addr.0 ^ 0x9e37_79b9_7f4a_7c15;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((x ^ (x >> 31)) % locks as u64) as u32
}

/// The memory nodes' regions: MN 0 holds the root pointer at offset 0; node frames start at
/// 1024 on every MN: first the bulk-loaded nodes, then one allocation slab per compute node.
#[derive(Clone, Debug)]
pub struct Layout {
    pub versions: Versions,
    pub memory_nodes: Vec<NodeId>,
    /// Bulk-loaded frames per memory node.
    pub bulk_frames: u64,
    /// Frames each compute node may allocate per memory node.
    pub slab_frames: u64,
    pub compute_nodes: u16,
    pub locks: u32,
    /// Lock words in NIC device memory (Sherman) or at the end of the host region.
    pub on_chip_locks: bool,
    /// 16-byte `[version, lock]` slots (DEX's Sherman, `Config::lock_version`) instead of
    /// 8-byte lock words.
    pub lock_version: bool,
    /// Marlin (`protocols/src/marlin/`): a Spear word per frame and the item region.
    pub items: Option<ItemSpace>,
}

/// Marlin's extra memory on each memory node, after the frames (and host locks): one Spear
/// word per frame (index 0 unused), then 16-byte items `[key, value]`: first the bulk-loaded
/// ones, then one item slab per compute node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemSpace {
    /// Bulk-loaded items per memory node.
    pub bulk_items: u64,
    /// Items each compute node may allocate per memory node.
    pub slab_items: u64,
}

/// Bytes of one Marlin item: key and value.
pub const ITEM_BYTES: u64 = 16;

pub const ROOT_PTR_OFFSET: u64 = 0;

impl Layout {
    pub fn root_ptr(&self) -> RemoteAddr {
        RemoteAddr::new(self.memory_nodes[0], ROOT_PTR_OFFSET)
    }

    pub fn frame(&self, mn: usize, index: u64) -> Gaddr {
        Gaddr::new(self.memory_nodes[mn], NODE_BYTES * (1 + index))
    }

    /// Frame index where compute node `cn`'s slab starts.
    pub fn slab_start(&self, cn: usize) -> u64 {
        self.bulk_frames + cn as u64 * self.slab_frames
    }

    fn frames(&self) -> u64 {
        self.bulk_frames + self.compute_nodes as u64 * self.slab_frames
    }

    /// [`Layout::memory_region_bytes`], `None` if it does not fit a `u64`.
    pub fn checked_memory_region_bytes(&self) -> Option<u64> {
        let frames =
            (self.compute_nodes as u64).checked_mul(self.slab_frames)?.checked_add(self.bulk_frames)?;
        let nodes = NODE_BYTES.checked_mul(frames.checked_add(1)?)?;
        let locks = if self.on_chip_locks { 0 } else { self.locks as u64 * self.slot_bytes() };
        let extra = match self.items {
            None => 0,
            Some(i) => {
                let items =
                    (self.compute_nodes as u64).checked_mul(i.slab_items)?.checked_add(i.bulk_items)?;
                (frames + 1).checked_mul(8)?.checked_add(items.checked_mul(ITEM_BYTES)?)?
            }
        };
        nodes.checked_add(locks)?.checked_add(extra)
    }

    pub fn memory_region_bytes(&self) -> u64 {
        self.checked_memory_region_bytes().expect("the plan checked the region size")
    }

    /// Where the host lock table ends (and Marlin's Spear words start).
    fn locks_end(&self) -> u64 {
        let nodes = NODE_BYTES * (1 + self.frames());
        if self.on_chip_locks {
            nodes
        } else {
            nodes + self.locks as u64 * self.slot_bytes()
        }
    }

    /// Marlin: the Spear word of the frame at `page`, on the frame's memory node. Never inside
    /// a frame, so no node WRITE covers it.
    pub fn spear_addr(&self, page: Gaddr) -> RemoteAddr {
        RemoteAddr::new(page.node(), self.locks_end() + page.offset() / NODE_BYTES * 8)
    }

    fn items_start(&self) -> u64 {
        self.locks_end() + (self.frames() + 1) * 8
    }

    /// Marlin: item `index` of memory node `mn` (bulk items first, then the slabs).
    pub fn item(&self, mn: usize, index: u64) -> Gaddr {
        Gaddr::new(self.memory_nodes[mn], self.items_start() + index * ITEM_BYTES)
    }

    /// Marlin: item index where compute node `cn`'s item slab starts.
    pub fn item_slab_start(&self, cn: usize) -> u64 {
        self.items.map_or(0, |i| i.bulk_items + cn as u64 * i.slab_items)
    }

    /// Whether `addr` names a Marlin item of this layout.
    pub fn is_item(&self, addr: Gaddr) -> bool {
        let Some(i) = self.items else { return false };
        let off = addr.offset();
        let count = i.bulk_items + self.compute_nodes as u64 * i.slab_items;
        self.memory_nodes.contains(&addr.node())
            && off >= self.items_start()
            && (off - self.items_start()).is_multiple_of(ITEM_BYTES)
            && (off - self.items_start()) / ITEM_BYTES < count
    }

    /// Bytes of one lock slot: the lock word, preceded by its version word with `lock_version`.
    pub fn slot_bytes(&self) -> u64 {
        if self.lock_version {
            16
        } else {
            8
        }
    }

    /// The version word beside `page`'s lock word (`lock_version` only).
    pub fn version_addr(&self, page: Gaddr) -> RemoteAddr {
        self.slot(page.node(), lock_index(page, self.locks) as u64)
    }

    pub fn lock_addr(&self, page: Gaddr) -> RemoteAddr {
        self.lock_word(page.node(), lock_index(page, self.locks) as u64)
    }

    /// Lock word `i` of memory node `mn` (the second word of its slot with `lock_version`).
    pub fn lock_word(&self, mn: NodeId, i: u64) -> RemoteAddr {
        self.slot(mn, i).add(self.slot_bytes() - 8)
    }

    /// The start of lock slot `i` of memory node `mn`.
    fn slot(&self, mn: NodeId, i: u64) -> RemoteAddr {
        if self.on_chip_locks {
            RemoteAddr::device(mn, i * self.slot_bytes())
        } else {
            RemoteAddr::new(mn, NODE_BYTES * (1 + self.frames()) + i * self.slot_bytes())
        }
    }

    /// Whether `addr` names a frame of this layout (a sanity check for pointers read remotely).
    pub fn is_frame(&self, addr: Gaddr) -> bool {
        let off = addr.offset();
        self.memory_nodes.contains(&addr.node())
            && off >= NODE_BYTES
            && off.is_multiple_of(NODE_BYTES)
            && off / NODE_BYTES <= self.frames()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_fit_and_do_not_overlap_versions() {
        for v in [Versions::Node, Versions::Line, Versions::Packed] {
            let versions = v.version_words();
            let mut used = [false; NODE_WORDS];
            for w in versions.iter().chain(&[W_LEFTMOST, W_SIBLING, W_LEVEL, W_LOWEST, W_HIGHEST]) {
                assert!(!used[*w]);
                used[*w] = true;
            }
            for i in 0..v.leaf_cap() {
                let (s, n) = v.leaf_entry_span(i);
                assert!(s + n <= NODE_WORDS, "{v:?} leaf entry {i}");
                for (j, u) in used[s..s + n].iter_mut().enumerate() {
                    // Packed entries share their first and last words with their neighbours.
                    let shared = v == Versions::Packed && (j == 0 || j == n - 1);
                    assert!(!*u || shared, "{v:?} leaf entry {i}");
                    *u = true;
                }
                if v == Versions::Line {
                    assert_eq!(s / LINE_WORDS, (s + 1) / LINE_WORDS, "entry {i} straddles a line");
                }
            }
            if v == Versions::Packed {
                let end = Versions::packed_entry_byte(v.leaf_cap());
                assert!(end <= (NODE_WORDS - 1) * 8 && v.leaf_cap() == 53);
                assert_eq!(v.leaf_entry_span(0), (6, 3));
                assert_eq!(v.leaf_entry_span(1), (8, 3));
                // Entries start at even bytes, so 18 bytes never touch a fourth word.
                assert!((0..v.leaf_cap()).all(|i| v.leaf_entry_span(i).1 == 3));
            }
            let mut used = [false; NODE_WORDS];
            for w in versions.iter().chain(&[W_LEFTMOST, W_SIBLING, W_LEVEL, W_LOWEST, W_HIGHEST]) {
                used[*w] = true;
            }
            for i in 0..v.internal_cap() {
                let s = v.internal_entry(i);
                assert!(!used[s] && !used[s + 1] && s + 1 < NODE_WORDS, "{v:?} internal entry {i}");
                used[s] = true;
                used[s + 1] = true;
            }
        }
    }
}
