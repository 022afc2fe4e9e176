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
    /// A planned logical repartitioning (Fig. 10): the upper half of one partition's key slots
    /// moves to a scale-out server or to another partition's server.
    pub moved: Option<Moved>,
    /// Whether this view routes by the repartitioned map (`moved` has happened).
    pub active: bool,
}

/// The upper half `[mid, hi)` of partition `from` (key slots `half..slots`) moves to server
/// `to`: a scale-out server (index `count`, idle until then) or the server of another partition,
/// which then owns two ranges (adjacent ones when `to == from + 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moved {
    pub from: u16,
    pub to: u16,
    /// The first moved key: key slot `half` of `from`.
    pub mid: u64,
    pub half: u64,
    /// Key slots per partition (`ceil(keyspace / count)`).
    pub slots: u64,
}

impl Partitions {
    /// Equal-width partitions, no repartitioning.
    pub fn fixed(count: u16) -> Partitions {
        Partitions { count, moved: None, active: false }
    }

    /// `count` partitions whose `from` will give its upper half of `keyspace`'s slots to
    /// server `to`: `None` for a scale-out server (index `count`), or another partition's.
    pub fn with_move(count: u16, from: u16, to: Option<u16>, keyspace: u64) -> Partitions {
        let slots = keyspace.div_ceil(count.max(1) as u64).max(2);
        let half = slots / 2;
        let mut p = Partitions::fixed(count);
        let to = to.unwrap_or(count);
        debug_assert!(to != from, "a range moves to another server");
        p.moved = Some(Moved { from, to, mid: p.key(from, half), half, slots });
        p
    }

    /// `[mid, hi)`: the key range a planned move hands over.
    pub fn moved_range(self) -> Option<(u64, u64)> {
        self.moved.map(|m| (m.mid, self.base_range(m.from).1))
    }

    /// Whether the planned move goes to a server that owns a partition already.
    pub fn moves_to_existing(self) -> bool {
        self.moved.is_some_and(|m| m.to < self.count)
    }

    /// The same map after the move.
    pub fn after_move(self) -> Partitions {
        Partitions { active: self.moved.is_some(), ..self }
    }

    fn base_range(self, c: u16) -> (u64, u64) {
        if c >= self.count {
            return (u64::MAX, u64::MAX);
        }
        let lo = if c == 0 { 0 } else { (c as u64) << PART_SHIFT };
        let hi = if c + 1 >= self.count { u64::MAX } else { (c as u64 + 1) << PART_SHIFT };
        (lo, hi)
    }

    fn active_move(self) -> Option<Moved> {
        self.moved.filter(|_| self.active)
    }

    /// The partition that owns `key`.
    pub fn owner(self, key: u64) -> u16 {
        if let Some(m) = self.active_move() {
            if key >= m.mid && key < self.base_range(m.from).1 {
                return m.to;
            }
        }
        ((key >> PART_SHIFT) as u16).min(self.count.saturating_sub(1))
    }

    /// The ranges server `c` owns, ascending, adjacent ones merged: one, or two after a move
    /// to a server that owns a partition already (none for an idle scale-out server).
    pub fn ranges(self, c: u16) -> Vec<(u64, u64)> {
        let mut out = Vec::with_capacity(2);
        self.for_each_range(c, |r| out.push(r));
        out
    }

    /// [`Partitions::ranges`] without allocating (the cache check asks for every cached leaf).
    fn for_each_range(self, c: u16, mut f: impl FnMut((u64, u64))) {
        let mut run: Option<(u64, u64)> = None;
        self.for_each_segment(|lo, hi| {
            if self.owner(lo) == c {
                run = match run {
                    Some((a, b)) if b == lo => Some((a, hi)),
                    Some(r) => {
                        f(r);
                        Some((lo, hi))
                    }
                    None => Some((lo, hi)),
                };
            }
        });
        if let Some(r) = run {
            f(r);
        }
    }

    /// The range of server `c` that holds `key` (`None` if `c` does not own it).
    pub fn range_of(self, c: u16, key: u64) -> Option<(u64, u64)> {
        let mut found = None;
        self.for_each_range(c, |(lo, hi)| {
            if key >= lo && key < hi {
                found = Some((lo, hi));
            }
        });
        found
    }

    /// Whether server `c` owns every key of `[lo, hi)`.
    pub fn owns(self, c: u16, lo: u64, hi: u64) -> bool {
        self.range_of(c, lo).is_some_and(|(_, end)| hi <= end)
    }

    /// The key ranges the bulk load cuts leaves at: every partition, and a planned move's
    /// boundary (leaves are never shared, before or after the move).
    pub fn segments(self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        self.for_each_segment(|lo, hi| out.push((lo, hi)));
        out
    }

    fn for_each_segment(self, mut f: impl FnMut(u64, u64)) {
        for c in 0..self.count {
            let (lo, hi) = self.base_range(c);
            match self.moved {
                Some(m) if m.from == c => {
                    f(lo, m.mid);
                    f(m.mid, hi);
                }
                _ => f(lo, hi),
            }
        }
    }

    /// Key slot `j` of server `c`'s share: `(partition, slot)` (after a move the two servers of
    /// the split partition each draw from their half; a receiver with a partition of its own:
    /// [`Partitions::receiver_union`]).
    fn slot_of(self, c: u16, j: u64) -> (u16, u64) {
        match self.active_move() {
            Some(m) if c == m.from => (c, j % m.half),
            Some(m) if c == m.to => (m.from, m.half + j % (m.slots - m.half)),
            _ => (c, j),
        }
    }

    /// After a move to server `c` that owns a partition already: the move and the size of its
    /// share, its own `slots` followed by the moved `slots - half`. [CHOICE] it draws over the
    /// whole union (uniform requests and inserts spread over both ranges in proportion).
    fn receiver_union(self, c: u16) -> Option<(Moved, u64)> {
        self.active_move().filter(|m| c == m.to && m.to < self.count).map(|m| (m, 2 * m.slots - m.half))
    }

    /// Slot `u` of receiver `c`'s union: `(partition, slot)`.
    fn union_slot(m: Moved, c: u16, u: u64) -> (u16, u64) {
        if u < m.slots {
            (c, u)
        } else {
            (m.from, m.half + (u - m.slots))
        }
    }

    /// Whether a node with fences `[lowest, highest)` is shared: it holds keys of two servers.
    /// After a move to a server with a partition of its own, a server's keys need not be
    /// contiguous, so every boundary inside the node is checked, not only its two ends; and a
    /// node shared before the move stays shared (a move to the adjacent server removes a
    /// boundary: the receiver's operations that started before the switch still treat the node
    /// as shared, RDMA-locked and written through, so one that started after must not treat it
    /// as its own, cached dirty or offloaded, beside them).
    pub fn is_shared(self, lowest: u64, highest: u64) -> bool {
        let last = highest.saturating_sub(1).max(lowest);
        let o = self.owner(lowest);
        if o != self.owner(last) {
            return true;
        }
        if !self.moves_to_existing() || !self.active {
            return false; // every server's keys are one range
        }
        let inner = |b: u64| b > lowest && b <= last && self.owner(b) != o;
        (1..self.count).any(|c| inner((c as u64) << PART_SHIFT))
            || self.moved.is_some_and(|m| inner(m.mid))
            || Partitions { active: false, ..self }.is_shared(lowest, highest)
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
        let (p, j) = match self.receiver_union(c) {
            Some((m, union)) => Self::union_slot(m, c, i % union),
            None => self.slot_of(c, i / self.count.max(1) as u64),
        };
        self.key(p, j)
    }

    /// An insert of fresh YCSB index `i` (≥ `bulk_load`) on server `c`: just above a hashed
    /// key slot among the partition's `keyspace / C` slots, with low bits that no slot key has
    /// and that differ for the first 2²⁰ − 1 inserts of a run (later ones may repeat a key,
    /// which makes them updates).
    pub fn insert_key(self, c: u16, i: u64, keyspace: u64, bulk_load: u64) -> u64 {
        let n = i - bulk_load;
        let slots = keyspace.div_ceil(self.count.max(1) as u64).max(1);
        let h = crate::workload::ycsb::fnv_hash64(n);
        let (p, slot) = match self.receiver_union(c) {
            Some((m, union)) => Self::union_slot(m, c, h % union),
            None => self.slot_of(c, h % slots),
        };
        self.key(p, slot) + n % ((1 << SLOT_SHIFT) - 1) + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_ranges_and_shared_nodes() {
        let p = Partitions::fixed(3);
        assert_eq!(p.owner(0), 0);
        assert_eq!(p.owner(p.key(1, 5)), 1);
        assert_eq!(p.owner(u64::MAX - 1), 2);
        assert_eq!(p.ranges(2), vec![(2 << PART_SHIFT, u64::MAX)]);
        assert!(p.is_shared(0, u64::MAX));
        assert!(!p.is_shared(p.key(1, 0), 2 << PART_SHIFT));
        assert!(p.is_shared(p.key(0, 7), p.key(1, 0)));
        assert_eq!(p.load_key(4), p.key(1, 1));
        assert_eq!(p.request_key(2, 7), p.key(2, 2));
        let k = p.insert_key(1, 100, 30, 90);
        assert_eq!(p.owner(k), 1);
        assert_ne!(k & ((1 << SLOT_SHIFT) - 1), 0);
        assert_ne!(k, p.insert_key(1, 101, 30, 90));
    }

    #[test]
    fn a_move_gives_the_upper_half_to_the_new_server() {
        let before = Partitions::with_move(2, 0, None, 40);
        let m = before.moved.unwrap();
        assert_eq!((m.to, m.half, m.slots), (2, 10, 20));
        assert_eq!(before.owner(before.key(0, 15)), 0);
        assert_eq!(before.segments().len(), 3);
        let after = before.after_move();
        assert_eq!(after.owner(after.key(0, 15)), 2);
        assert_eq!(after.owner(after.key(0, 9)), 0);
        assert_eq!(after.owner(after.key(1, 3)), 1);
        assert_eq!(after.ranges(0), vec![(0, m.mid)]);
        assert_eq!(after.ranges(2), vec![(m.mid, 1 << PART_SHIFT)]);
        assert_eq!(before.ranges(2), vec![]);
        assert_eq!(after.moved_range(), Some((m.mid, 1 << PART_SHIFT)));
        assert!(after.is_shared(0, 1 << PART_SHIFT));
        assert!(!before.is_shared(0, 1 << PART_SHIFT));
        for i in 0..200 {
            assert_eq!(after.owner(after.request_key(2, i)), 2);
            assert_eq!(after.owner(after.request_key(0, i)), 0);
            assert_eq!(after.owner(after.insert_key(2, 100 + i, 40, 100)), 2);
            assert_eq!(after.owner(after.insert_key(0, 100 + i, 40, 100)), 0);
        }
    }

    #[test]
    fn a_move_to_a_server_with_a_partition_gives_it_two_ranges() {
        // Partition 0's upper half goes to server 2: partition 1 lies between its two ranges.
        let before = Partitions::with_move(3, 0, Some(2), 60);
        let m = before.moved.unwrap();
        assert!(before.moves_to_existing());
        assert_eq!((m.to, m.half, m.slots), (2, 10, 20));
        let after = before.after_move();
        let p1 = 1u64 << PART_SHIFT;
        assert_eq!(after.ranges(2), vec![(m.mid, p1), (2 * p1, u64::MAX)]);
        assert_eq!(after.ranges(0), vec![(0, m.mid)]);
        assert_eq!(after.range_of(2, after.key(2, 3)), Some((2 * p1, u64::MAX)));
        assert_eq!(after.range_of(2, after.key(1, 3)), None);
        assert!(after.owns(2, m.mid, p1) && !after.owns(2, m.mid, p1 + 1));
        // A node from the moved range to server 2's own range spans partition 1: shared,
        // although both its ends belong to server 2.
        assert!(after.is_shared(m.mid, 3 * p1));
        assert!(!before.is_shared(m.mid, p1));
        assert!(!after.is_shared(m.mid, p1));
        assert!(after.is_shared(0, p1));
        // Server 2 draws over both of its ranges (every key slot of them), server 0 over the
        // half it kept.
        let reached: std::collections::BTreeSet<u64> = (0..60).map(|i| after.request_key(2, i)).collect();
        assert_eq!(reached.len() as u64, 2 * m.slots - m.half);
        let (mut own, mut moved) = (0, 0);
        for i in 0..600 {
            let k = after.request_key(2, i);
            assert_eq!(after.owner(k), 2);
            if k < p1 {
                moved += 1;
            } else {
                own += 1;
            }
            assert_eq!(after.owner(after.request_key(0, i)), 0);
            assert_eq!(after.owner(after.insert_key(2, 100 + i, 60, 100)), 2);
        }
        assert!(own > 0 && moved > 0, "{own} {moved}");
        // Adjacent: partition 1's upper half to server 2 joins server 2's range.
        let adj = Partitions::with_move(3, 1, Some(2), 60).after_move();
        let mid = adj.moved.unwrap().mid;
        assert_eq!(adj.ranges(2), vec![(mid, u64::MAX)]);
        assert!(!adj.is_shared(mid, 2 * p1) && !adj.is_shared(2 * p1, 3 * p1));
        // A node across the boundary the move removed stays shared.
        assert!(adj.is_shared(mid, 3 * p1));
    }
}
