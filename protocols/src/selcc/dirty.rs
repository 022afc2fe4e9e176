//! Dynamic dirty boundaries (SELCC §5.2.2 [P]): the GCL header keeps `[d_lower, d_higher)`, the
//! union hull of every write since the copy was last clean, so a flush writes only that range.
//!
//! Header word [CHOICE]: `d_higher << 32 | d_lower`, byte offsets into the data, 8-aligned;
//! `d_higher == 0` means clean (a real range always ends above 0). The paper starts both at 0 and
//! widens with min/max; [REPO] flushes the whole page when the bounds are 0 — we instead flush
//! nothing for a clean Modified copy (spec B9: "if necessary, flushing back dirty data").

/// A dirty range of the data, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Dirty {
    pub lower: u32,
    pub higher: u32,
}

impl Dirty {
    pub const CLEAN: Dirty = Dirty { lower: 0, higher: 0 };

    pub fn is_clean(self) -> bool {
        self.higher == 0
    }

    pub fn from_header(word: u64) -> Dirty {
        let d = Dirty { lower: word as u32, higher: (word >> 32) as u32 };
        assert!(d.is_clean() && d.lower == 0 || d.lower < d.higher, "corrupt dirty header {word:#x}");
        assert!(d.lower.is_multiple_of(8) && d.higher.is_multiple_of(8), "unaligned dirty header {word:#x}");
        d
    }

    pub fn to_header(self) -> u64 {
        (self.higher as u64) << 32 | self.lower as u64
    }

    /// Widen by a write of `len` bytes at `offset` (§5.2.2: min/max).
    pub fn mark(self, offset: u32, len: u32) -> Dirty {
        assert!(
            len > 0 && offset.is_multiple_of(8) && len.is_multiple_of(8),
            "unaligned write {offset}+{len}"
        );
        let end = offset + len;
        if self.is_clean() {
            Dirty { lower: offset, higher: end }
        } else {
            Dirty { lower: self.lower.min(offset), higher: self.higher.max(end) }
        }
    }

    /// Union of two dirty ranges (a forwarded copy's bounds and the new owner's writes).
    pub fn union(self, other: Dirty) -> Dirty {
        if self.is_clean() {
            other
        } else if other.is_clean() {
            self
        } else {
            Dirty { lower: self.lower.min(other.lower), higher: self.higher.max(other.higher) }
        }
    }
}

/// The `(offset, len)` of data to flush for a Modified copy: the dirty range with dynamic
/// bounds on, the whole data with them off (and nothing for a clean copy either way when bounds
/// are tracked).
pub fn flush_range(dirty: Dirty, gcl_size_bytes: u32, dynamic: bool) -> Option<(u32, u32)> {
    assert!(dirty.higher <= gcl_size_bytes, "dirty range beyond the GCL");
    if !dynamic {
        return Some((0, gcl_size_bytes));
    }
    if dirty.is_clean() {
        None
    } else {
        Some((dirty.lower, dirty.higher - dirty.lower))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_widen_and_round_trip() {
        let d = Dirty::CLEAN.mark(64, 8);
        assert_eq!(d, Dirty { lower: 64, higher: 72 });
        let d = d.mark(16, 16).mark(48, 8);
        assert_eq!(d, Dirty { lower: 16, higher: 72 });
        assert_eq!(Dirty::from_header(d.to_header()), d);
        assert_eq!(Dirty::from_header(0), Dirty::CLEAN);
        assert_eq!(Dirty::CLEAN.mark(0, 8), Dirty { lower: 0, higher: 8 }, "offset 0 is still dirty");
        assert_eq!(d.union(Dirty::CLEAN), d);
        assert_eq!(Dirty { lower: 0, higher: 8 }.union(d), Dirty { lower: 0, higher: 72 });
    }

    #[test]
    fn flush_writes_only_the_range_when_dynamic() {
        let d = Dirty::CLEAN.mark(16, 8);
        assert_eq!(flush_range(d, 2048, true), Some((16, 8)));
        assert_eq!(flush_range(d, 2048, false), Some((0, 2048)));
        assert_eq!(flush_range(Dirty::CLEAN, 2048, true), None);
    }
}
