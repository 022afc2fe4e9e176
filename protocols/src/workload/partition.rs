//! Logical range partitioning of the key space across compute nodes, as DEX uses it and as its
//! P-Sherman / P-SMART baselines do (DEX §4, §8: "we range-partition the key space such that
//! each compute server owns an equal key range"; requests are handled by the owning server).
//!
//! * **Boundaries** ([CHOICE]): quantiles of the bulk-loaded keys, so each compute node owns the
//!   same number of loaded keys. With hashed keys (uniform over the 63-bit space) this is an
//!   equal-width split up to sampling noise; with dense keys it is exactly DEX's equal key
//!   ranges. DEX allows any range scheme "as long as each leaf node is exclusively owned by
//!   exactly one partition"; an index that cuts its bulk-loaded leaves at these boundaries gets
//!   that. With fewer loaded keys than partitions the split is equal-width over all 64 bits.
//! * **Routing** ([CHOICE]): the paper does not say how a request reaches its owner, and the
//!   DEX artifact (`test/newbench.cpp`) has each compute node generate only keys of its own
//!   partition. So do we: no forwarding message, no cost — a P-* variant is modelled as every
//!   client issuing only owned keys ([`Partitions::owner`] is also checked by the indexes).

/// `parts` contiguous key ranges; partition `p` is `[lower(p), lower(p + 1))`, the last one
/// open to `u64::MAX`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partitions {
    /// Lower bounds of partitions `1..parts` (partition 0 starts at 0), strictly increasing.
    bounds: Vec<u64>,
}

impl Partitions {
    /// `parts` partitions over `loaded` (ascending, distinct).
    pub fn new(loaded: &[u64], parts: usize) -> Partitions {
        let parts = parts.max(1);
        let n = loaded.len();
        let bounds: Vec<u64> = if n >= parts && loaded.first().is_some_and(|k| *k > 0) {
            (1..parts).map(|p| loaded[p * n / parts]).collect()
        } else {
            let width = u64::MAX / parts as u64;
            (1..parts as u64).map(|p| p * width).collect()
        };
        Partitions { bounds }
    }

    pub fn count(&self) -> usize {
        self.bounds.len() + 1
    }

    /// The partition owning `key`.
    pub fn owner(&self, key: u64) -> usize {
        self.bounds.partition_point(|b| *b <= key)
    }

    /// Partition `p`'s keys: `[lo, hi)`, `hi = u64::MAX` for the last (the index's +∞ fence).
    pub fn range(&self, p: usize) -> (u64, u64) {
        let lo = if p == 0 { 0 } else { self.bounds[p - 1] };
        let hi = self.bounds.get(p).copied().unwrap_or(u64::MAX);
        (lo, hi)
    }

    /// The lower bounds of partitions `1..count` (where a bulk load must start a new leaf).
    pub fn bounds(&self) -> &[u64] {
        &self.bounds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_bounds_split_the_loaded_keys_evenly() {
        let keys: Vec<u64> = (1..=100).map(|k| k * 10).collect();
        let p = Partitions::new(&keys, 4);
        assert_eq!(p.bounds(), &[260, 510, 760]);
        let per: Vec<usize> = (0..4).map(|i| keys.iter().filter(|k| p.owner(**k) == i).count()).collect();
        assert_eq!(per, vec![25, 25, 25, 25]);
        assert_eq!(p.range(0), (0, 260));
        assert_eq!(p.range(3), (760, u64::MAX));
        assert_eq!(p.owner(0), 0);
        assert_eq!(p.owner(u64::MAX - 1), 3);
    }

    #[test]
    fn too_few_keys_split_the_space_equally() {
        let p = Partitions::new(&[5], 3);
        assert_eq!(p.count(), 3);
        assert_eq!(p.owner(5), 0);
        assert_eq!(p.owner(u64::MAX / 2), 1);
        assert_eq!(Partitions::new(&[], 1).count(), 1);
    }
}
