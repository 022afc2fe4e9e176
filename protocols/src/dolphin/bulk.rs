//! Bulk load ("we warm up the tree ... 50% full"): the index over the sorted initial keys,
//! built before any client runs ([CHOICE] instead of simulating the inserts; the shape is what
//! sorted inserts with splits would leave: path-compressed ART nodes over 256-key windows,
//! a window of one leaf hanging directly in its first distinguishing slot, a window of several
//! leaves under a special node). Objects are placed round-robin over memory nodes.

use super::layout::{
    byte, entry, first_difference, prefix, slot_offset, window, Gaddr, Kind, LeafImage, NodeImage,
    IMAGE_START, LEAF_BYTES, NODE_BYTES, ROOT, SPECIAL_DEPTH,
};

/// The value of the bulk-loaded key of rank `rank` (unique, never 0, never a tombstone).
pub fn bulk_value(rank: u64) -> u64 {
    1 << 62 | (rank + 1)
}

enum Obj {
    Leaf(LeafImage),
    Node(NodeImage),
}

/// The image: every object with its address, and counts for the metrics.
pub struct Image {
    objects: Vec<(Gaddr, Obj)>,
    /// Bytes used per memory node past `IMAGE_START`.
    pub bytes: Vec<u64>,
    pub leaves: u64,
    pub exact_nodes: u64,
    pub special_nodes: u64,
    /// Bytes the authors' cache would need to hold every internal node (`1 + 8 + 8·records`).
    pub internal_cache_bytes: u64,
    /// Memory-node bytes of the whole tree (root included) with internal nodes at the
    /// authors' sizes ([`super::cache::authors_node_bytes`]) and 1,088 B leaves.
    pub authors_bytes: u64,
    /// (key, value) of every loaded key.
    pub loaded: Vec<(u64, u64)>,
}

impl Image {
    /// Words to write at each address on memory node `mn`.
    pub fn chunks(&self, mn: u16) -> impl Iterator<Item = (u64, Vec<u64>)> + '_ {
        self.objects.iter().filter(move |(a, _)| a.mn == mn).map(|(a, o)| {
            let words = match o {
                Obj::Leaf(l) => l.encode(),
                Obj::Node(n) => n.encode(),
            };
            (a.offset, words)
        })
    }
}

struct Builder {
    objects: Vec<(Gaddr, Obj)>,
    cursor: Vec<u64>,
    next: usize,
}

impl Builder {
    fn place(&mut self, bytes: u64) -> Gaddr {
        let mn = self.next % self.cursor.len();
        self.next += 1;
        let a = Gaddr { mn: mn as u16, offset: IMAGE_START + self.cursor[mn] };
        self.cursor[mn] += bytes;
        a
    }

    fn set_rev(&mut self, child: usize, rev: Gaddr) {
        match &mut self.objects[child].1 {
            Obj::Leaf(l) => l.rev = rev.word(),
            Obj::Node(n) => n.rev = rev.word(),
        }
    }

    /// Fill `node` (object `at`, depth `d`) with `children` (window key, entry, object index),
    /// ascending, all sharing the node's prefix.
    fn fill(&mut self, at: usize, d: u8, children: &[(u64, u64, usize)]) {
        let addr = self.objects[at].0;
        let mut i = 0;
        while i < children.len() {
            let b = byte(children[i].0, d);
            let j = i + children[i..].iter().take_while(|c| byte(c.0, d) == b).count();
            let group = &children[i..j];
            let slot = addr.plus(slot_offset(b));
            let e = if group.len() == 1 {
                self.set_rev(group[0].2, slot);
                group[0].1
            } else {
                let m = first_difference(group[0].0, group[group.len() - 1].0, d + 1, SPECIAL_DEPTH)
                    .expect("distinct windows differ above the last byte");
                let naddr = self.place(NODE_BYTES);
                let node = NodeImage::new(m, false, prefix(group[0].0, m), slot.word());
                self.objects.push((naddr, Obj::Node(node)));
                let idx = self.objects.len() - 1;
                self.fill(idx, m, group);
                entry(Kind::Exact, naddr)
            };
            if let Obj::Node(n) = &mut self.objects[at].1 {
                n.slots[b] = e;
            }
            i = j;
        }
    }
}

/// The tree over `keys` (ascending, distinct, non-zero) with `fill` keys per bulk leaf.
pub fn build(keys: &[u64], memory_nodes: usize, fill: usize) -> Image {
    let mut b = Builder { objects: Vec::new(), cursor: vec![0; memory_nodes], next: 1 };
    b.objects.push((ROOT, Obj::Node(NodeImage::new(0, false, 0, 0))));
    let (mut leaves, mut specials) = (0u64, 0u64);
    let mut loaded = Vec::with_capacity(keys.len());
    // One child per 256-key window: (window min, entry, object index).
    let mut children: Vec<(u64, u64, usize)> = Vec::new();
    let mut i = 0;
    while i < keys.len() {
        let (lo, hi) = window(keys[i]);
        let j = i + keys[i..].iter().take_while(|k| **k <= hi).count();
        let chunks: Vec<&[u64]> = keys[i..j].chunks(fill.max(1)).collect();
        let mut made = Vec::new();
        for (c, chunk) in chunks.iter().enumerate() {
            let min = if c == 0 { lo } else { chunk[0] };
            let max = chunks.get(c + 1).map_or(hi, |n| n[0] - 1);
            let mut leaf = LeafImage::new(min, max, 0);
            for (s, k) in chunk.iter().enumerate() {
                let v = bulk_value(loaded.len() as u64);
                leaf.keys[s] = *k;
                leaf.values[s] = v;
                loaded.push((*k, v));
            }
            let addr = b.place(LEAF_BYTES);
            b.objects.push((addr, Obj::Leaf(leaf)));
            made.push((min, addr, b.objects.len() - 1));
            leaves += 1;
        }
        if made.len() == 1 {
            children.push((lo, entry(Kind::Leaf, made[0].1), made[0].2));
        } else {
            let saddr = b.place(NODE_BYTES);
            let mut node = NodeImage::new(SPECIAL_DEPTH, true, lo, 0);
            for (min, addr, idx) in &made {
                let s = byte(*min, SPECIAL_DEPTH);
                node.slots[s] = entry(Kind::Leaf, *addr);
                b.set_rev(*idx, saddr.plus(slot_offset(s)));
            }
            b.objects.push((saddr, Obj::Node(node)));
            children.push((lo, entry(Kind::Special, saddr), b.objects.len() - 1));
            specials += 1;
        }
        i = j;
    }
    b.fill(0, 0, &children);
    let mut exact = 0;
    let mut internal_cache_bytes = 0;
    let mut authors_bytes = 0;
    for (_, o) in &b.objects {
        match o {
            Obj::Node(n) => {
                exact += (!n.special) as u64;
                internal_cache_bytes += super::cache::entry_bytes(n);
                authors_bytes += super::cache::authors_node_bytes(n);
            }
            Obj::Leaf(_) => authors_bytes += LEAF_BYTES,
        }
    }
    Image {
        bytes: b.cursor,
        objects: b.objects,
        leaves,
        exact_nodes: exact,
        special_nodes: specials,
        internal_cache_bytes,
        authors_bytes,
        loaded,
    }
}
