//! Registered memory: one region per node, a sequence of 8-byte words.
//!
//! Local tasks and remote verbs both touch a region. Words are `AtomicU64` so that the hardware
//! backend (where the NIC DMAs into the region while CPU threads read it) stays free of data
//! races in the Rust sense; all accesses are `Relaxed` — ordering between a node's CPU and its
//! NIC is the protocol's business, exactly as on real RDMA, and local atomics here are **not**
//! atomic against remote NIC atomics (`Nic` docs).
//!
//! Offsets are bytes and must be multiples of 8; an out-of-range or unaligned local access is a
//! protocol bug and panics with the offending range (remote accesses are checked by the NIC and
//! become `NicError`s instead).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub const WORD_BYTES: u64 = 8;

pub struct Region {
    words: Box<[AtomicU64]>,
}

impl Region {
    /// A zeroed region of `size_bytes` (a multiple of 8).
    pub fn new(size_bytes: u64) -> Region {
        assert!(size_bytes.is_multiple_of(WORD_BYTES), "region size {size_bytes} is not a multiple of 8");
        let words = (0..size_bytes / WORD_BYTES).map(|_| AtomicU64::new(0)).collect();
        Region { words }
    }

    pub fn size_bytes(&self) -> u64 {
        self.words.len() as u64 * WORD_BYTES
    }

    #[inline]
    fn index(&self, offset_bytes: u64) -> usize {
        assert!(offset_bytes.is_multiple_of(WORD_BYTES), "unaligned local offset {offset_bytes:#x}");
        let index = (offset_bytes / WORD_BYTES) as usize;
        assert!(
            index < self.words.len(),
            "local offset {offset_bytes:#x} outside region of {} bytes",
            self.size_bytes()
        );
        index
    }

    #[inline]
    pub fn load(&self, offset_bytes: u64) -> u64 {
        self.words[self.index(offset_bytes)].load(Relaxed)
    }

    #[inline]
    pub fn store(&self, offset_bytes: u64, value: u64) {
        self.words[self.index(offset_bytes)].store(value, Relaxed)
    }

    /// A local CPU compare-and-swap; returns the old value. Not atomic against NIC atomics.
    pub fn cas_local(&self, offset_bytes: u64, expect: u64, swap: u64) -> u64 {
        match self.words[self.index(offset_bytes)].compare_exchange(expect, swap, Relaxed, Relaxed) {
            Ok(old) | Err(old) => old,
        }
    }

    /// A local CPU fetch-and-add (wrapping); returns the old value. Not atomic against NIC atomics.
    pub fn faa_local(&self, offset_bytes: u64, add: u64) -> u64 {
        self.words[self.index(offset_bytes)].fetch_add(add, Relaxed)
    }

    /// Copy `out.len()` words starting at `offset_bytes` into `out`.
    pub fn read_words(&self, offset_bytes: u64, out: &mut [u64]) {
        let start = self.index(offset_bytes);
        let words = &self.words[start..start + out.len()];
        for (o, w) in out.iter_mut().zip(words) {
            *o = w.load(Relaxed);
        }
    }

    /// Copy `data` into the region starting at `offset_bytes`.
    pub fn write_words(&self, offset_bytes: u64, data: &[u64]) {
        let start = self.index(offset_bytes);
        let words = &self.words[start..start + data.len()];
        for (w, d) in words.iter().zip(data) {
            w.store(*d, Relaxed);
        }
    }

    /// Copy `len_bytes` from `source[source_offset..]` into `self[target_offset..]`, the DMA a
    /// READ or WRITE performs. `source` may be `self`.
    pub fn copy_from(
        &self,
        target_offset_bytes: u64,
        source: &Region,
        source_offset_bytes: u64,
        len_bytes: u64,
    ) {
        assert!(len_bytes.is_multiple_of(WORD_BYTES), "unaligned copy length {len_bytes}");
        if len_bytes == 0 {
            return;
        }
        let count = (len_bytes / WORD_BYTES) as usize;
        let t = self.index(target_offset_bytes);
        let s = source.index(source_offset_bytes);
        // Bounds of the last word, checked once for the whole range.
        self.index(target_offset_bytes + len_bytes - WORD_BYTES);
        source.index(source_offset_bytes + len_bytes - WORD_BYTES);
        // Slices first, so the loop carries no per-word bounds check.
        for (to, from) in self.words[t..t + count].iter().zip(&source.words[s..s + count]) {
            to.store(from.load(Relaxed), Relaxed);
        }
    }

    /// Raw pointer and length for registering the region with a real NIC (hardware backend).
    pub fn as_ptr(&self) -> *const AtomicU64 {
        self.words.as_ptr()
    }
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Region({} bytes)", self.size_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_copy() {
        // Goal: stores, atomics and DMA-style copies land on the right words.
        let a = Region::new(64);
        let b = Region::new(64);
        a.write_words(8, &[1, 2, 3]);
        assert_eq!(a.load(16), 2);
        assert_eq!(a.cas_local(8, 1, 10), 1);
        assert_eq!(a.cas_local(8, 1, 11), 10, "a failed CAS still returns the old value");
        assert_eq!(a.faa_local(24, 5), 3);
        b.copy_from(32, &a, 8, 24);
        let mut out = [0; 3];
        b.read_words(32, &mut out);
        assert_eq!(out, [10, 2, 8]);
    }

    #[test]
    #[should_panic(expected = "outside region")]
    fn local_out_of_range_is_a_bug() {
        Region::new(16).load(16);
    }
}
