//! A node as the client sees it after a READ: decoded from (and encoded back to) its 128 words,
//! with the consistency check of the chosen version scheme.

use super::layout::{
    Gaddr, Versions, KEY_MAX, NODE_WORDS, PACKED_ENTRY_BYTES, W_HIGHEST, W_LEFTMOST, W_LEVEL, W_LOWEST,
    W_SIBLING,
};

/// A leaf value with this bit set is a deleted key's tombstone ([CHOICE]: Sherman frees the
/// slot; we keep the key with a unique tombstone so histories can name the delete).
pub const TOMBSTONE: u64 = 1 << 63;

/// One leaf slot; `value == 0` is an empty slot (Sherman's `kValueNull`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    pub key: u64,
    pub value: u64,
    /// The entry version (`Versions::Node` and, one byte of it, `Versions::Packed`): bumped by
    /// every entry write-back.
    pub version: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub level: u8,
    pub leftmost: Gaddr,
    pub sibling: Gaddr,
    pub lowest: u64,
    pub highest: u64,
    /// The node version (front = rear, or every line's).
    pub version: u64,
    /// Leaves: `leaf_cap` slots, unsorted, empty where `value == 0`.
    pub slots: Vec<Slot>,
    /// Internal nodes: separator keys and children, sorted; `leftmost` covers keys below the first.
    pub children: Vec<(u64, Gaddr)>,
}

/// Why a READ image was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Torn {
    /// Version words disagree: a whole-node write was in flight.
    Node,
    /// A leaf entry's front and rear versions disagree: an entry write-back was in flight.
    Entry,
}

impl Node {
    pub fn empty_leaf(versions: Versions, lowest: u64, highest: u64) -> Node {
        Node {
            level: 0,
            leftmost: Gaddr::NULL,
            sibling: Gaddr::NULL,
            lowest,
            highest,
            version: 0,
            slots: vec![Slot::default(); versions.leaf_cap()],
            children: Vec::new(),
        }
    }

    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }

    /// Whether `key` belongs here rather than to a right sibling or a left neighbour.
    pub fn covers(&self, key: u64) -> bool {
        self.lowest <= key && key < self.highest
    }

    /// Internal node: the child whose range holds `key` (which must be covered).
    pub fn child_for(&self, key: u64) -> Gaddr {
        let i = self.children.partition_point(|(k, _)| *k <= key);
        if i == 0 {
            self.leftmost
        } else {
            self.children[i - 1].1
        }
    }

    /// Internal node: the key range `[lo, hi)` of the child [`Node::child_for`] picks for `key`
    /// (by this image's separators and fences).
    pub fn child_range(&self, key: u64) -> (u64, u64) {
        let i = self.children.partition_point(|(k, _)| *k <= key);
        let lo = if i == 0 { self.lowest } else { self.children[i - 1].0 };
        let hi = self.children.get(i).map_or(self.highest, |c| c.0);
        (lo, hi)
    }

    /// Leaf: the slot holding `key`, if any (tombstones included).
    pub fn find(&self, key: u64) -> Option<usize> {
        self.slots.iter().position(|s| s.value != 0 && s.key == key)
    }

    pub fn live_count(&self) -> usize {
        self.slots.iter().filter(|s| s.value != 0).count()
    }

    /// Decode a node image; `Err` when the version check fails.
    pub fn decode(v: Versions, w: &[u64]) -> Result<Node, Torn> {
        debug_assert_eq!(w.len(), NODE_WORDS);
        let versions = v.version_words();
        let version = w[versions[0]];
        if versions.iter().any(|i| w[*i] != version) {
            return Err(Torn::Node);
        }
        let level = (w[W_LEVEL] & 0xff) as u8;
        let count = ((w[W_LEVEL] >> 8) & 0xffff) as usize;
        let mut node = Node {
            level,
            leftmost: Gaddr(w[W_LEFTMOST]),
            sibling: Gaddr(w[W_SIBLING]),
            lowest: w[W_LOWEST],
            highest: w[W_HIGHEST],
            version,
            slots: Vec::new(),
            children: Vec::new(),
        };
        if level == 0 {
            for i in 0..v.leaf_cap() {
                let s = v.leaf_entry(i);
                let slot = match v {
                    Versions::Node => {
                        if w[s] != w[s + 3] {
                            return Err(Torn::Entry);
                        }
                        Slot { key: w[s + 1], value: w[s + 2], version: w[s] }
                    }
                    Versions::Line => Slot { key: w[s], value: w[s + 1], version: 0 },
                    Versions::Packed => {
                        let b = Versions::packed_entry_byte(i);
                        let front = byte(w, b);
                        if front != byte(w, b + PACKED_ENTRY_BYTES - 1) {
                            return Err(Torn::Entry);
                        }
                        Slot { key: bytes_u64(w, b + 1), value: bytes_u64(w, b + 9), version: front as u64 }
                    }
                };
                node.slots.push(slot);
            }
        } else {
            // A garbage count can only come from a torn image the version check missed.
            for i in 0..count.min(v.internal_cap()) {
                let s = v.internal_entry(i);
                node.children.push((w[s], Gaddr(w[s + 1])));
            }
        }
        Ok(node)
    }

    /// The full image of this node with version `self.version`.
    pub fn encode(&self, v: Versions) -> Vec<u64> {
        let mut w = vec![0u64; NODE_WORDS];
        for i in v.version_words() {
            w[i] = self.version;
        }
        let count = if self.is_leaf() { self.live_count() } else { self.children.len() };
        w[W_LEFTMOST] = self.leftmost.0;
        w[W_SIBLING] = self.sibling.0;
        w[W_LEVEL] = self.level as u64 | (count as u64) << 8;
        w[W_LOWEST] = self.lowest;
        w[W_HIGHEST] = self.highest;
        if self.is_leaf() {
            for (i, slot) in self.slots.iter().enumerate() {
                put_entry(v, &mut w, i, slot);
            }
        } else {
            for (i, (k, c)) in self.children.iter().enumerate() {
                let s = v.internal_entry(i);
                w[s] = *k;
                w[s + 1] = c.0;
            }
        }
        w
    }

    /// The mutant's reader: whatever the words say, versions ignored.
    pub fn decode_unchecked(v: Versions, w: &[u64], torn: Torn) -> Node {
        let mut fixed = w.to_vec();
        let first = v.version_words()[0];
        for i in v.version_words() {
            fixed[i] = w[first];
        }
        if torn == Torn::Entry {
            force_entry_versions(v, &mut fixed);
        }
        Node::decode(v, &fixed).expect("versions forced equal")
    }

    /// A fresh root above a split (`Tree.h`'s `InternalPage(left, key, right, level)`).
    pub fn new_root(left: Gaddr, key: u64, right: Gaddr, level: u8) -> Node {
        Node {
            level,
            leftmost: left,
            sibling: Gaddr::NULL,
            lowest: 0,
            highest: KEY_MAX,
            version: 1,
            slots: Vec::new(),
            children: vec![(key, right)],
        }
    }
}

/// Leaf entry `i` written into the node image `w` (the one place that knows each scheme's
/// entry layout, with [`Node::decode`]).
fn put_entry(v: Versions, w: &mut [u64], i: usize, slot: &Slot) {
    let (s, n) = v.leaf_entry_span(i);
    match v {
        Versions::Node => w[s..s + n].copy_from_slice(&[slot.version, slot.key, slot.value, slot.version]),
        Versions::Line => w[s..s + n].copy_from_slice(&[slot.key, slot.value]),
        Versions::Packed => {
            let b = Versions::packed_entry_byte(i);
            set_byte(w, b, slot.version as u8);
            set_bytes_u64(w, b + 1, slot.key);
            set_bytes_u64(w, b + 9, slot.value);
            set_byte(w, b + PACKED_ENTRY_BYTES - 1, slot.version as u8);
        }
    }
}

/// The words an entry write-back of slot `i` of `slots` sends (`leaf_entry_span`): in `Packed`
/// they carry the neighbours' bytes as `slots` has them. Only the entries that can share those
/// words are laid out (a leaf store's fast path).
pub fn entry_write_words(v: Versions, slots: &[Slot], i: usize) -> Vec<u64> {
    let mut w = [0u64; NODE_WORDS];
    let first = i.saturating_sub(1);
    for (j, slot) in slots.iter().enumerate().skip(first).take(i + 2 - first) {
        put_entry(v, &mut w, j, slot);
    }
    let (s, n) = v.leaf_entry_span(i);
    w[s..s + n].to_vec()
}

/// A torn-entry image made to pass: every leaf entry's rear version set to its front one (the
/// `skip-version-check` mutant's reader).
fn force_entry_versions(v: Versions, w: &mut [u64]) {
    for i in 0..v.leaf_cap() {
        match v {
            Versions::Node => {
                let s = v.leaf_entry(i);
                w[s + 3] = w[s];
            }
            Versions::Packed => {
                let b = Versions::packed_entry_byte(i);
                let front = byte(w, b);
                set_byte(w, b + PACKED_ENTRY_BYTES - 1, front);
            }
            Versions::Line => {}
        }
    }
}

/// Byte `b` of a node image (little-endian words, as the NIC lays them out).
fn byte(w: &[u64], b: usize) -> u8 {
    (w[b / 8] >> (8 * (b % 8))) as u8
}

fn set_byte(w: &mut [u64], b: usize, x: u8) {
    let shift = 8 * (b % 8);
    w[b / 8] = (w[b / 8] & !(0xff << shift)) | (x as u64) << shift;
}

/// The 8 bytes at byte `b`, wherever they fall (little-endian: the low bytes in word `b / 8`).
fn bytes_u64(w: &[u64], b: usize) -> u64 {
    let (i, shift) = (b / 8, 8 * (b % 8));
    if shift == 0 {
        w[i]
    } else {
        w[i] >> shift | w[i + 1] << (64 - shift)
    }
}

fn set_bytes_u64(w: &mut [u64], b: usize, x: u64) {
    let (i, shift) = (b / 8, 8 * (b % 8));
    if shift == 0 {
        w[i] = x;
        return;
    }
    let below = u64::MAX >> (64 - shift); // the bytes before `b` in word `i`
    w[i] = (w[i] & below) | x << shift;
    w[i + 1] = (w[i + 1] & !below) | x >> (64 - shift);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::NodeId;

    #[test]
    fn unaligned_words_match_bytewise() {
        let mut w: Vec<u64> =
            (0..4u64).map(|i| 0x0123_4567_89ab_cdef_u64.rotate_left(8 * i as u32)).collect();
        for b in 0..24 {
            let bytewise = (0..8).fold(0u64, |acc, j| acc | (byte(&w, b + j) as u64) << (8 * j));
            assert_eq!(bytes_u64(&w, b), bytewise, "read at byte {b}");
            let before = w.clone();
            let x = 0xfedc_ba98_7654_3210_u64 ^ b as u64;
            set_bytes_u64(&mut w, b, x);
            assert_eq!(bytes_u64(&w, b), x, "write at byte {b}");
            for other in (0..32).filter(|o| !(b..b + 8).contains(o)) {
                assert_eq!(byte(&w, other), byte(&before, other), "byte {other} after a write at {b}");
            }
        }
    }

    #[test]
    fn round_trip_and_torn_images() {
        for v in [Versions::Node, Versions::Line, Versions::Packed] {
            let mut leaf = Node::empty_leaf(v, 10, 99);
            leaf.version = 7;
            leaf.slots[3] = Slot { key: 42, value: 5, version: 2 };
            leaf.sibling = Gaddr::new(NodeId(1), 2048);
            let w = leaf.encode(v);
            let back = Node::decode(v, &w).unwrap();
            assert_eq!(back.find(42), Some(3));
            assert_eq!((back.slots[3].key, back.slots[3].value), (42, 5));
            assert_eq!((back.lowest, back.highest, back.sibling), (10, 99, leaf.sibling));
            let mut torn = w.clone();
            torn[NODE_WORDS - 1 - if v == Versions::Line { 7 } else { 0 }] = 8;
            assert_eq!(Node::decode(v, &torn), Err(Torn::Node));
            let mut inner = Node::new_root(Gaddr(1024), 50, Gaddr(2048), 1);
            inner.children.push((70, Gaddr(3072)));
            let back = Node::decode(v, &inner.encode(v)).unwrap();
            assert_eq!(back.child_for(49), Gaddr(1024));
            assert_eq!(back.child_for(50), Gaddr(2048));
            assert_eq!(back.child_for(80), Gaddr(3072));
        }
    }

    #[test]
    fn packed_entry_write_backs_leave_neighbours_and_tear_detectably() {
        let v = Versions::Packed;
        let mut leaf = Node::empty_leaf(v, 0, KEY_MAX);
        for (i, s) in leaf.slots.iter_mut().enumerate() {
            *s = Slot {
                key: 0x0101_0101_0101_0101 * (i as u64 + 1),
                value: u64::MAX - i as u64,
                version: i as u64,
            };
        }
        let before = leaf.encode(v);
        assert_eq!(Node::decode(v, &before).unwrap().slots, leaf.slots);
        for i in 0..v.leaf_cap() {
            let mut changed = leaf.clone();
            changed.slots[i] = Slot { key: 7, value: 9, version: leaf.slots[i].version + 1 };
            let (s, n) = v.leaf_entry_span(i);
            let mut image = before.clone();
            image[s..s + n].copy_from_slice(&entry_write_words(v, &changed.slots, i));
            let back = Node::decode(v, &image).unwrap();
            for (j, slot) in back.slots.iter().enumerate() {
                assert_eq!(
                    *slot,
                    if j == i { changed.slots[i] } else { leaf.slots[j] },
                    "entry {i}, slot {j}"
                );
            }
            // Only the first word landed: the front version byte is new, the rear one old.
            let mut half = before.clone();
            half[s] = image[s];
            assert_eq!(Node::decode(v, &half), Err(Torn::Entry), "entry {i}");
        }
    }
}
