//! Logical partitioning of the key space across compute servers (DEX §4): compute server `c`
//! owns the key range `[c·2⁵⁵, (c+1)·2⁵⁵)` (the last one up to +∞), equal width as in the
//! paper's evaluation. A node is *shared* when its fence interval crosses a boundary; leaves
//! never do (the bulk load cuts leaves at the boundaries and splits only shrink fences).
//!
//! [CHOICE] Requests are routed to the owner by construction: a thread of server `c` draws a
//! YCSB key index `i` and accesses key slot `j = i/C` of its own partition (per-partition skew,
//! as the artifact draws zipf ranks over each server's own partition). Slot `j` is the key
//! `c·2⁵⁵ + (j+1)·2²⁰`; an insert's fresh index becomes a key between two slots, at a hashed
//! slot, so inserts spread over the partition as YCSB's hashed insert order spreads them
//! (appending them all at the partition's end would make its last leaf a hot spot).

/// Bits of key space per partition: up to 256 compute servers.
pub const PART_SHIFT: u32 = 55;
pub const MAX_PARTITIONS: u16 = 256;
/// Low key bits between two key slots (room for inserts).
pub const SLOT_SHIFT: u32 = 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partitions {
    pub count: u16,
}

impl Partitions {
    /// The partition that owns `key`.
    pub fn owner(self, key: u64) -> u16 {
        ((key >> PART_SHIFT) as u16).min(self.count.saturating_sub(1))
    }

    /// `[lo, hi)` of partition `c`.
    pub fn range(self, c: u16) -> (u64, u64) {
        let lo = if c == 0 { 0 } else { (c as u64) << PART_SHIFT };
        let hi = if c + 1 >= self.count { u64::MAX } else { (c as u64 + 1) << PART_SHIFT };
        (lo, hi)
    }

    /// Whether a node with fences `[lowest, highest)` crosses a partition boundary.
    pub fn is_shared(self, lowest: u64, highest: u64) -> bool {
        self.owner(lowest) != self.owner(highest.saturating_sub(1).max(lowest))
    }

    /// The key of the `j`-th key slot of partition `c` (low `SLOT_SHIFT` bits clear).
    pub fn key(self, c: u16, j: u64) -> u64 {
        ((c as u64) << PART_SHIFT) + ((j + 1) << SLOT_SHIFT)
    }

    /// The bulk-loaded key of global load index `i` (indices dealt round-robin to partitions).
    pub fn load_key(self, i: u64) -> u64 {
        let c = self.count.max(1) as u64;
        self.key((i % c) as u16, i / c)
    }

    /// A request (lookup, update, scan, delete) for YCSB key index `i` on server `c`.
    pub fn request_key(self, c: u16, i: u64) -> u64 {
        self.key(c, i / self.count.max(1) as u64)
    }

    /// An insert of fresh YCSB index `i` (≥ `bulk_load`) on server `c`: just above a hashed
    /// key slot among the partition's `keyspace / C` slots, with low bits that no slot key has
    /// and that differ for the first 2²⁰ − 1 inserts of a run (later ones may repeat a key,
    /// which makes them updates).
    pub fn insert_key(self, c: u16, i: u64, keyspace: u64, bulk_load: u64) -> u64 {
        let n = i - bulk_load;
        let slots = keyspace.div_ceil(self.count.max(1) as u64).max(1);
        let slot = crate::workload::ycsb::fnv_hash64(n) % slots;
        self.key(c, slot) + n % ((1 << SLOT_SHIFT) - 1) + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_ranges_and_shared_nodes() {
        let p = Partitions { count: 3 };
        assert_eq!(p.owner(0), 0);
        assert_eq!(p.owner(p.key(1, 5)), 1);
        assert_eq!(p.owner(u64::MAX - 1), 2);
        assert_eq!(p.range(2).1, u64::MAX);
        assert!(p.is_shared(0, u64::MAX));
        assert!(!p.is_shared(p.key(1, 0), p.range(1).1));
        assert!(p.is_shared(p.key(0, 7), p.key(1, 0)));
        assert_eq!(p.load_key(4), p.key(1, 1));
        assert_eq!(p.request_key(2, 7), p.key(2, 2));
        let k = p.insert_key(1, 100, 30, 90);
        assert_eq!(p.owner(k), 1);
        assert_ne!(k & ((1 << SLOT_SHIFT) - 1), 0);
        assert_ne!(k, p.insert_key(1, 101, 30, 90));
    }
}
