//! Bulk load: the tree a run starts from, built on the compute side of the planner as plain
//! words, so every memory node's `setup` writes its part before any task runs (no simulated
//! events, identical on both backends). The shape is exactly what inserting the keys one by one
//! would converge to: compressed prefixes, the smallest node type holding each node's children,
//! leaves whose rev_ptr names their slot. Bulk-loaded values are 0, the histories' initial value.

use super::layout::{
    key_byte, leaf_words, pack_addr, Entry, Header, NodeType, LEAF_HEADER_WORDS, NODE_BYTES, RESERVED_BYTES,
    ROOT_OFFSET, SLOTS_OFFSET,
};
use crate::nic::{NodeId, RemoteAddr};

/// Words to write per memory node, and where each node's image ends.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Image {
    /// Per memory node index: `(offset, start, len)`: write `words[m][start..start + len]` at
    /// byte `offset`. One buffer per memory node, not one `Vec` per tree node: a million-key
    /// image as millions of small vectors spent most of a scenario check freeing them.
    chunks: Vec<Vec<(u64, usize, usize)>>,
    words: Vec<Vec<u64>>,
    pub end: Vec<u64>,
    pub nodes: u64,
    pub leaves: u64,
    /// What a compute node's cache holds when it holds every internal node but the root, in
    /// the authors' accounting (`RadixCache` consumes `CacheEntry::content_size()` =
    /// 1 + 8 + 8 × the type's slots per entry): Dolphin Table II's "index cache for best
    /// performance".
    pub full_cache_bytes: u64,
}

impl Image {
    fn new(memory_nodes: usize) -> Image {
        Image {
            chunks: vec![Vec::new(); memory_nodes],
            words: vec![Vec::new(); memory_nodes],
            ..Image::default()
        }
    }

    fn push(&mut self, m: usize, offset: u64, words: &[u64]) {
        self.chunks[m].push((offset, self.words[m].len(), words.len()));
        self.words[m].extend_from_slice(words);
    }

    /// Memory node `m`'s chunks as `(byte offset, words)`.
    pub fn chunks(&self, m: usize) -> impl Iterator<Item = (u64, &[u64])> {
        self.chunks[m].iter().map(move |&(offset, start, len)| (offset, &self.words[m][start..start + len]))
    }
}

struct Builder<'a> {
    mns: &'a [NodeId],
    value_words: usize,
    fine: bool,
    next: Vec<u64>,
    turn: usize,
    image: Image,
}

impl Builder<'_> {
    fn alloc(&mut self, bytes: u64) -> (usize, RemoteAddr) {
        let m = self.turn % self.mns.len();
        self.turn += 1;
        let at = self.next[m];
        self.next[m] += bytes.next_multiple_of(8);
        (m, RemoteAddr::new(self.mns[m], at))
    }

    /// Place `keys` (sorted, sharing bytes `0..depth`) under the slot at `at`; its entry.
    fn place(&mut self, keys: &[u64], depth: usize, at: RemoteAddr) -> Entry {
        let byte = key_byte(keys[0], depth - 1);
        if keys.len() == 1 {
            let leaf_bytes = ((LEAF_HEADER_WORDS + self.value_words) * 8) as u64;
            let (m, addr) = self.alloc(leaf_bytes);
            self.image.push(m, addr.offset_bytes, &leaf_words(at, keys[0], 0, self.value_words));
            self.image.leaves += 1;
            return Entry::leaf(byte, addr);
        }
        let (first, last) = (keys[0], keys[keys.len() - 1]);
        let lcp = (depth..8).take_while(|&d| key_byte(first, d) == key_byte(last, d)).count();
        let (m, addr) = self.alloc(NODE_BYTES);
        let groups = groups(keys, depth + lcp);
        let node_type = NodeType::for_slot(groups.len() - 1, self.fine);
        let mut words = vec![pack_addr(at), Header::new(first, depth, lcp, node_type).0];
        for (i, g) in groups.iter().enumerate() {
            let slot = addr.add(SLOTS_OFFSET + 8 * i as u64);
            words.push(self.place(g, depth + lcp + 1, slot).0);
        }
        self.image.push(m, addr.offset_bytes, &words);
        self.image.nodes += 1;
        self.image.full_cache_bytes += 1 + 8 + 8 * node_type.slots() as u64;
        Entry::node(byte, node_type, addr)
    }
}

/// `keys` split by their byte at `depth` (keys sorted, so the groups are runs).
fn groups(keys: &[u64], depth: usize) -> Vec<&[u64]> {
    keys.chunk_by(|a, b| key_byte(*a, depth) == key_byte(*b, depth)).collect()
}

/// The image of a tree holding `keys` (sorted, distinct) over memory nodes `mns`: the root
/// (a NODE_256 with an empty prefix) at memory node 0's `ROOT_OFFSET`, everything else
/// allocated round robin from `RESERVED_BYTES` on.
pub fn build(keys: &[u64], mns: &[NodeId], value_words: usize, fine: bool) -> Image {
    let mut b = Builder {
        mns,
        value_words,
        fine,
        next: vec![RESERVED_BYTES; mns.len()],
        turn: 0,
        image: Image::new(mns.len()),
    };
    let root = RemoteAddr::new(mns[0], ROOT_OFFSET);
    let mut words = vec![pack_addr(RemoteAddr::new(mns[0], 8)), Header::new(0, 0, 0, NodeType::N256).0];
    words.resize(2 + 256, 0);
    for (i, g) in groups(keys, 0).into_iter().enumerate() {
        words[2 + i] = b.place(g, 1, root.add(SLOTS_OFFSET + 8 * i as u64)).0;
    }
    b.image.push(0, ROOT_OFFSET, &words);
    b.image.push(0, 8, &[Entry::node(0, NodeType::N256, root).0]);
    b.image.nodes += 1;
    b.image.end = b.next;
    b.image
}
