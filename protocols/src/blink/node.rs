//! A B-link node as the words of one page (GCL data):
//!
//! ```text
//! word 0   header: MAGIC | level << 16 | count
//! word 1   low fence  (inclusive)
//! word 2   high fence (exclusive; u64::MAX = +∞)
//! word 3   right link (PageId; 0 = rightmost)
//! word 4+2i, 5+2i   entry i: key, value (leaf) or key, child (internal; key 0 = low fence)
//! ```
//! Entries are sorted by key. An internal node's first key is its low fence, so child `i`
//! covers `[key i, key i+1)` (the last one up to the high fence): a parent's entry range equals
//! its child's fences once every split has been posted upwards (Lehman–Yao).

use super::pages::PageId;

pub const HEADER_WORDS: usize = 4;
pub const KEY_MAX: u64 = u64::MAX;
/// Set in every written header, so a zeroed (never written) page is recognisable.
const MAGIC: u64 = 0xb11c << 48;

/// A decoded node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub level: u8,
    pub low: u64,
    pub high: u64,
    pub right: PageId,
    pub keys: Vec<u64>,
    /// Values (leaf) or child page ids (internal).
    pub vals: Vec<u64>,
}

/// Entries a page of `page_words` words holds.
pub fn capacity(page_words: usize) -> usize {
    page_words.saturating_sub(HEADER_WORDS) / 2
}

pub fn key_at(i: usize) -> usize {
    HEADER_WORDS + 2 * i
}

pub fn header(level: u8, count: usize) -> u64 {
    MAGIC | (level as u64) << 16 | count as u64
}

impl Image {
    pub fn leaf(low: u64, high: u64) -> Image {
        Image { level: 0, low, high, right: PageId::NULL, keys: Vec::new(), vals: Vec::new() }
    }

    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }

    pub fn count(&self) -> usize {
        self.keys.len()
    }

    /// Whether `key` belongs to this node or to one right of it.
    pub fn covers(&self, key: u64) -> bool {
        key >= self.low && key < self.high
    }

    /// Decode `words` (a whole page); `Err` for a page that was never written or is malformed.
    pub fn decode(words: &[u64]) -> Result<Image, String> {
        let h = words[0];
        if h & (0xffff << 48) != MAGIC {
            return Err(format!("header {h:#x} is not a node's"));
        }
        let count = (h & 0xffff) as usize;
        if count > capacity(words.len()) {
            return Err(format!("count {count} above the capacity {}", capacity(words.len())));
        }
        let keys = (0..count).map(|i| words[key_at(i)]).collect();
        let vals = (0..count).map(|i| words[key_at(i) + 1]).collect();
        Ok(Image {
            level: (h >> 16) as u8,
            low: words[1],
            high: words[2],
            right: PageId(words[3]),
            keys,
            vals,
        })
    }

    /// The node's words up to its last entry.
    pub fn encode(&self) -> Vec<u64> {
        let mut out = vec![header(self.level, self.count()), self.low, self.high, self.right.0];
        for (k, v) in self.keys.iter().zip(&self.vals) {
            out.push(*k);
            out.push(*v);
        }
        out
    }

    /// Position of `key` among the entries, or where it would be inserted.
    pub fn search(&self, key: u64) -> Result<usize, usize> {
        self.keys.binary_search(&key)
    }

    /// The child covering `key` (internal nodes; `key` within the fences).
    pub fn child(&self, key: u64) -> PageId {
        let i = match self.search(key) {
            Ok(i) => i,
            Err(0) => 0,
            Err(i) => i - 1,
        };
        PageId(self.vals[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_routing() {
        let n = Image {
            level: 1,
            low: 10,
            high: 100,
            right: PageId(7),
            keys: vec![10, 40, 70],
            vals: vec![1, 2, 3],
        };
        let mut words = n.encode();
        words.resize(16, 0);
        assert_eq!(Image::decode(&words).unwrap(), n);
        assert_eq!(n.child(10), PageId(1));
        assert_eq!(n.child(39), PageId(1));
        assert_eq!(n.child(40), PageId(2));
        assert_eq!(n.child(99), PageId(3));
        assert!(Image::decode(&[0; 16]).is_err());
        assert_eq!(capacity(256), 126);
    }
}
