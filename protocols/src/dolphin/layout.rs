//! Where everything lives: slot entries, internal nodes, 1 KB leaves (Fig. 3), Spear's lock
//! constants, and each memory node's region.
//!
//! Keys are 8 bytes, big-endian (byte 0 most significant, as the authors' `Key.h`); `L = 8`.
//!
//! * **Slot entry** (8 B, 0 = null): `kind << 62 | memory node << 48 | offset`. `kind` 1 = leaf,
//!   2 = exact (ART) node, 3 = special node.
//! * **Internal node** ([CHOICE] one fixed 256-slot format for both kinds, see NEEDS.md):
//!   word 0 `rev_ptr` (address of the parent slot that points here), word 1 `depth | special << 8`,
//!   word 2 `prefix` (the key bytes before `depth`, lower bytes zero), words 3.. the 256 slots.
//!   An exact node at depth `d < 7` matches byte `d` exactly; the special node (depth 7 = L-1
//!   bytes consumed; the paper's "depth Length(Key)" counts from 1) picks the slot with the
//!   largest byte ≤ the key's last byte (range search).
//! * **Leaf** (1088 B as the authors' `kLeafPageSize`, 65 slots): word 0 `rev_ptr`, word 1
//!   unused (the code's never-bumped versions), word 2 `min`, word 3 `max` (both inclusive,
//!   [CHOICE]), `keys[65]`, `values[65]`, the Spear lock word, one pad word. `min`/`max` sit in
//!   the first 64-byte line, the lock in the last, and the keys precede the values, so an
//!   ascending WRITE of the leaf lands range first, then keys, then values.

use crate::nic::{NodeId, RemoteAddr};

pub const LEAF_SLOTS: usize = 65;
pub const LEAF_WORDS: usize = 136;
pub const LEAF_BYTES: u64 = LEAF_WORDS as u64 * 8;
pub const L_REV: usize = 0;
pub const L_MIN: usize = 2;
pub const L_MAX: usize = 3;
pub const L_KEYS: usize = 4;
pub const L_VALUES: usize = L_KEYS + LEAF_SLOTS;
pub const L_LOCK: usize = L_VALUES + LEAF_SLOTS;
/// What an IDU reads: the leaf without its values ("the Key array provides the offset").
pub const LEAF_KEYS_BYTES: u32 = (L_VALUES * 8) as u32;
/// What an SMO rewrites: everything before the lock ("never covered by the SMO's WRITE").
pub const LEAF_BODY_BYTES: u32 = (L_LOCK * 8) as u32;

pub const NODE_SLOTS: usize = 256;
pub const N_REV: usize = 0;
pub const N_HEADER: usize = 1;
pub const N_PREFIX: usize = 2;
pub const N_SLOTS: usize = 3;
pub const NODE_WORDS: usize = N_SLOTS + NODE_SLOTS;
/// What a node READ fetches.
pub const NODE_READ_BYTES: u32 = (NODE_WORDS * 8) as u32;
/// Allocation size (a whole number of 64-byte lines).
pub const NODE_BYTES: u64 = (NODE_WORDS as u64 * 8).div_ceil(64) * 64;

/// The depth of the special node: the byte it range-searches.
pub const SPECIAL_DEPTH: u8 = 7;

/// Spear (Marlin's ternary-state lock, encoding from the authors' code): IDUs add 1 and
/// subtract 1; an SMO adds `SMO_STATUS`; a word below `SMO_UP_LIMIT` (as i64) is held by an SMO.
pub const SMO_STATUS: i64 = -1_000_000;
pub const SMO_UP_LIMIT: i64 = -100_000;

/// A value bit marking a deleted key (the slot stays claimed, see NEEDS.md).
pub const TOMBSTONE: u64 = 1 << 63;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Leaf = 1,
    Exact = 2,
    Special = 3,
}

/// A global address: memory node and byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gaddr {
    pub mn: u16,
    pub offset: u64,
}

impl Gaddr {
    pub fn remote(self) -> RemoteAddr {
        RemoteAddr::new(NodeId(self.mn), self.offset)
    }
    pub fn plus(self, bytes: u64) -> Gaddr {
        Gaddr { mn: self.mn, offset: self.offset + bytes }
    }
    /// As a `rev_ptr` word (never 0: offsets start above the root's first slot).
    pub fn word(self) -> u64 {
        (self.mn as u64) << 48 | self.offset
    }
    pub fn from_word(w: u64) -> Gaddr {
        Gaddr { mn: (w >> 48) as u16 & 0xff, offset: w & ((1 << 48) - 1) }
    }
}

/// A slot entry.
pub fn entry(kind: Kind, addr: Gaddr) -> u64 {
    (kind as u64) << 62 | addr.word()
}

pub fn entry_kind(e: u64) -> Option<Kind> {
    match e >> 62 {
        1 => Some(Kind::Leaf),
        2 => Some(Kind::Exact),
        3 => Some(Kind::Special),
        _ => None,
    }
}

pub fn entry_addr(e: u64) -> Gaddr {
    Gaddr::from_word(e & !(3 << 62))
}

/// Byte `d` of `key` (0 = most significant).
pub fn byte(key: u64, d: u8) -> usize {
    (key >> (56 - 8 * d as u32)) as usize & 0xff
}

/// `key` with bytes `d..8` zeroed: the prefix a node at depth `d` stands for.
pub fn prefix(key: u64, d: u8) -> u64 {
    if d == 0 {
        0
    } else {
        key & !(u64::MAX >> (8 * d as u32))
    }
}

/// The first byte position in `from..to` where `a` and `b` differ.
pub fn first_difference(a: u64, b: u64, from: u8, to: u8) -> Option<u8> {
    (from..to).find(|d| byte(a, *d) != byte(b, *d))
}

/// A leaf's window: the 256 keys sharing `key`'s first 7 bytes (`min = (A>>8)<<8`,
/// `max = A|255`).
pub fn window(key: u64) -> (u64, u64) {
    (key & !0xff, key | 0xff)
}

/// Word offsets of a leaf's slot `i`.
pub fn key_word(i: usize) -> u64 {
    ((L_KEYS + i) * 8) as u64
}
pub fn value_word(i: usize) -> u64 {
    ((L_VALUES + i) * 8) as u64
}
pub const LOCK_BYTES: u64 = (L_LOCK * 8) as u64;

pub fn slot_offset(i: usize) -> u64 {
    ((N_SLOTS + i) * 8) as u64
}

/// A decoded internal node image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeImage {
    pub rev: u64,
    pub depth: u8,
    pub special: bool,
    pub prefix: u64,
    pub slots: Vec<u64>,
}

impl NodeImage {
    /// The last key of this node's subtree.
    pub fn hi(&self) -> u64 {
        if self.depth == 0 {
            u64::MAX
        } else {
            self.prefix | (u64::MAX >> (8 * self.depth as u32))
        }
    }

    /// The keys slot `i` routes: a byte's range in an ART node; in a special node from its
    /// byte to the byte before the next used slot.
    pub fn slot_range(&self, i: usize) -> (u64, u64) {
        if self.special {
            let next = (i + 1..NODE_SLOTS).find(|s| self.slots[*s] != 0);
            (self.prefix | i as u64, next.map_or(self.prefix | 0xff, |s| (self.prefix | s as u64) - 1))
        } else {
            let shift = 56 - 8 * self.depth as u32;
            let lo = self.prefix | (i as u64) << shift;
            (lo, lo | ((1u64 << shift) - 1))
        }
    }

    pub fn new(depth: u8, special: bool, prefix: u64, rev: u64) -> NodeImage {
        NodeImage { rev, depth, special, prefix, slots: vec![0; NODE_SLOTS] }
    }

    pub fn decode(w: &[u64]) -> NodeImage {
        NodeImage {
            rev: w[N_REV],
            depth: w[N_HEADER] as u8,
            special: (w[N_HEADER] >> 8) & 1 == 1,
            prefix: w[N_PREFIX],
            slots: w[N_SLOTS..N_SLOTS + NODE_SLOTS].to_vec(),
        }
    }

    pub fn encode(&self) -> Vec<u64> {
        let mut w = vec![0u64; NODE_WORDS];
        w[N_REV] = self.rev;
        w[N_HEADER] = self.depth as u64 | (self.special as u64) << 8;
        w[N_PREFIX] = self.prefix;
        w[N_SLOTS..].copy_from_slice(&self.slots);
        w
    }

    pub fn kind(&self) -> Kind {
        if self.special {
            Kind::Special
        } else {
            Kind::Exact
        }
    }

    /// The slot the pathfinding takes for `key`: exact byte match above depth 7, the floor of
    /// the last byte in a special node (`None`: nothing at or below it).
    pub fn pick(&self, key: u64) -> Option<usize> {
        let b = byte(key, self.depth);
        if !self.special {
            return Some(b);
        }
        (0..=b).rev().find(|i| self.slots[*i] != 0)
    }

    pub fn records(&self) -> usize {
        self.slots.iter().filter(|s| **s != 0).count()
    }
}

/// A decoded leaf image (`values` empty when only the keys were read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeafImage {
    pub rev: u64,
    pub min: u64,
    pub max: u64,
    pub keys: Vec<u64>,
    pub values: Vec<u64>,
    pub lock: u64,
}

impl LeafImage {
    pub fn new(min: u64, max: u64, rev: u64) -> LeafImage {
        LeafImage { rev, min, max, keys: vec![0; LEAF_SLOTS], values: vec![0; LEAF_SLOTS], lock: 0 }
    }

    /// From `w` (at least the keys; values and lock if present).
    pub fn decode(w: &[u64]) -> LeafImage {
        let values = if w.len() >= L_LOCK { w[L_VALUES..L_LOCK].to_vec() } else { Vec::new() };
        LeafImage {
            rev: w[L_REV],
            min: w[L_MIN],
            max: w[L_MAX],
            keys: w[L_KEYS..L_VALUES].to_vec(),
            values,
            lock: w.get(L_LOCK).copied().unwrap_or(0),
        }
    }

    pub fn encode(&self) -> Vec<u64> {
        let mut w = vec![0u64; LEAF_WORDS];
        w[L_REV] = self.rev;
        w[L_MIN] = self.min;
        w[L_MAX] = self.max;
        w[L_KEYS..L_VALUES].copy_from_slice(&self.keys);
        w[L_VALUES..L_LOCK].copy_from_slice(&self.values);
        w[L_LOCK] = self.lock;
        w
    }

    pub fn covers(&self, key: u64) -> bool {
        self.min <= key && key <= self.max
    }

    pub fn slot_of(&self, key: u64) -> Option<usize> {
        self.keys.iter().position(|k| *k == key)
    }

    /// Occupied slots (claimed keys).
    pub fn count(&self) -> usize {
        self.keys.iter().filter(|k| **k != 0).count()
    }
}

/// Each memory node's region: the root node (memory node 0 only), the bulk-loaded image, then
/// one allocation arena per compute node.
#[derive(Clone, Debug)]
pub struct Layout {
    pub memory_nodes: usize,
    /// Bytes of the bulk image per memory node (from offset `IMAGE_START`).
    pub image_bytes: Vec<u64>,
    pub arena_bytes: u64,
    pub compute_nodes: usize,
}

/// The root node's address: fixed, never replaced (push-downs go below its slots).
pub const ROOT: Gaddr = Gaddr { mn: 0, offset: 64 };
pub const IMAGE_START: u64 = 64 + NODE_BYTES;

impl Layout {
    pub fn image_end(&self) -> u64 {
        IMAGE_START + self.image_bytes.iter().copied().max().unwrap_or(0).next_multiple_of(64)
    }
    pub fn arena_start(&self, cn: usize) -> u64 {
        self.image_end() + cn as u64 * self.arena_bytes
    }
    pub fn region_bytes(&self) -> u64 {
        self.arena_start(self.compute_nodes)
    }
}
