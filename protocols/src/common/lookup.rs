//! Lookup-only hash maps with a fixed hasher, for hot paths that never iterate.
//!
//! Determinism forbids depending on hash order, and `RandomState` seeds differ per process, so
//! maps here use one fixed, fast hasher and are only ever *looked up* (clippy's
//! `disallowed-methods` in `sim/` and `protocols/` rejects iterating a `HashMap`/`HashSet` and
//! creating one with a random hasher). Anything iterated is a `BTreeMap`.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A fast deterministic hasher for lookup-only maps (never iterated, so order cannot leak):
/// one multiply-rotate per word, FNV over loose bytes. Not DoS-resistant (no untrusted keys).
#[derive(Clone, Copy, Default)]
pub struct FixedHasher(u64);

impl Hasher for FixedHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ *b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
}

/// A map that is only looked up, never iterated.
pub type LookupMap<K, V> = HashMap<K, V, BuildHasherDefault<FixedHasher>>;
/// A set that is only looked up, never iterated.
pub type LookupSet<K> = HashSet<K, BuildHasherDefault<FixedHasher>>;
