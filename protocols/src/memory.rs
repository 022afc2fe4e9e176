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
//!
//! **Payload-free regions** (issue 15): a protocol may declare a [`PayloadSpan`] — a run of
//! equal lines whose bytes past the first `kept_bytes` are opaque payload it never interprets
//! (SELCC's GCL data). A performance run in the simulator then builds the region with
//! [`Region::with_elided_payload`]: only the kept words of each line are stored, elided words
//! read as 0 and ignore stores, and a DMA copies only kept words. Timing is unchanged (the
//! fabric charges a verb by its length, not by what is stored), so metrics are identical to a
//! full run; memory per line drops from the line size to `kept_bytes`. An atomic on an elided
//! word panics: it means the declared payload is not opaque after all.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub const WORD_BYTES: u64 = 8;

/// Lines of opaque payload in a region: `lines` lines of `stride_bytes` from `start_bytes`,
/// of which only the first `kept_bytes` of each line (latch, header, a version word) carry
/// meaning the protocol reads back. All multiples of 8; `kept_bytes ≤ stride_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PayloadSpan {
    pub start_bytes: u64,
    pub stride_bytes: u64,
    pub kept_bytes: u64,
    pub lines: u64,
}

impl PayloadSpan {
    fn end_bytes(&self) -> u64 {
        self.start_bytes + self.lines * self.stride_bytes
    }

    /// Problems that make the span unusable for a region of `size_bytes` (empty: usable).
    pub fn problems(&self, size_bytes: u64) -> Option<String> {
        let aligned =
            [self.start_bytes, self.stride_bytes, self.kept_bytes].iter().all(|b| b % WORD_BYTES == 0);
        let fits = self
            .lines
            .checked_mul(self.stride_bytes)
            .and_then(|b| b.checked_add(self.start_bytes))
            .map(|end| end <= size_bytes);
        if !aligned || self.stride_bytes == 0 || self.kept_bytes > self.stride_bytes {
            Some(format!("payload span {self:?} is not word aligned or keeps more than its stride"))
        } else if fits != Some(true) {
            Some(format!("payload span {self:?} does not fit a region of {size_bytes} bytes"))
        } else {
            None
        }
    }
}

/// Where a logical word lives.
enum Slot {
    /// Index into the stored words.
    Stored(usize),
    /// Payload not stored.
    Elided,
}

pub struct Region {
    words: Box<[AtomicU64]>,
    /// Logical size (equals the stored size unless payload is elided).
    size_bytes: u64,
    elided: Option<PayloadSpan>,
    /// Write operations so far (stores, atomics, copies): the simulator skips its invariant
    /// check after an instant that changed no memory, and hands the sum to the checks
    /// (`harness::MemoryWrites`) so they can skip re-reading memory. A hint, bumped without a
    /// read-modify-write (a run is single-threaded; the hardware backend never reads it).
    writes: AtomicU64,
}

impl Region {
    /// A zeroed region of `size_bytes` (a multiple of 8).
    pub fn new(size_bytes: u64) -> Region {
        assert!(size_bytes.is_multiple_of(WORD_BYTES), "region size {size_bytes} is not a multiple of 8");
        Region {
            words: zeroed_words(size_bytes / WORD_BYTES),
            size_bytes,
            elided: None,
            writes: AtomicU64::new(0),
        }
    }

    /// A zeroed region of `size_bytes` whose `span` stores only each line's kept words (see
    /// the module docs). Panics if the span does not fit (a protocol's layout bug).
    pub fn with_elided_payload(size_bytes: u64, span: PayloadSpan) -> Region {
        assert!(size_bytes.is_multiple_of(WORD_BYTES), "region size {size_bytes} is not a multiple of 8");
        if let Some(problem) = span.problems(size_bytes) {
            panic!("{problem}");
        }
        let stored = size_bytes - span.lines * (span.stride_bytes - span.kept_bytes);
        Region {
            words: zeroed_words(stored / WORD_BYTES),
            size_bytes,
            elided: Some(span),
            writes: AtomicU64::new(0),
        }
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// Zero every word (a node's memory after its process restarted).
    pub fn zero(&self) {
        for w in self.words.iter() {
            w.store(0, std::sync::atomic::Ordering::Relaxed);
        }
        self.writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Bytes actually stored (less than [`Region::size_bytes`] when payload is elided).
    pub fn stored_bytes(&self) -> u64 {
        self.words.len() as u64 * WORD_BYTES
    }

    #[inline]
    fn check(&self, offset_bytes: u64) {
        assert!(offset_bytes.is_multiple_of(WORD_BYTES), "unaligned local offset {offset_bytes:#x}");
        assert!(
            offset_bytes < self.size_bytes,
            "local offset {offset_bytes:#x} outside region of {} bytes",
            self.size_bytes
        );
    }

    #[inline]
    fn index(&self, offset_bytes: u64) -> usize {
        self.check(offset_bytes);
        (offset_bytes / WORD_BYTES) as usize
    }

    /// Where the word at `offset_bytes` lives, and how many bytes from it on live alike
    /// (stored contiguously, or elided), capped at the region's end.
    fn slot(&self, offset_bytes: u64) -> (Slot, u64) {
        self.check(offset_bytes);
        let Some(span) = &self.elided else {
            return (Slot::Stored((offset_bytes / WORD_BYTES) as usize), self.size_bytes - offset_bytes);
        };
        let end = span.end_bytes();
        let removed = span.lines * (span.stride_bytes - span.kept_bytes);
        if offset_bytes < span.start_bytes {
            (Slot::Stored((offset_bytes / WORD_BYTES) as usize), span.start_bytes - offset_bytes)
        } else if offset_bytes >= end {
            (Slot::Stored(((offset_bytes - removed) / WORD_BYTES) as usize), self.size_bytes - offset_bytes)
        } else {
            let relative = offset_bytes - span.start_bytes;
            let (line, within) = (relative / span.stride_bytes, relative % span.stride_bytes);
            if within < span.kept_bytes {
                let stored = span.start_bytes + line * span.kept_bytes + within;
                (Slot::Stored((stored / WORD_BYTES) as usize), span.kept_bytes - within)
            } else {
                (Slot::Elided, span.stride_bytes - within)
            }
        }
    }

    /// The stored word at `offset_bytes`, `None` if elided.
    #[inline]
    fn word(&self, offset_bytes: u64) -> Option<&AtomicU64> {
        if self.elided.is_none() {
            return Some(&self.words[self.index(offset_bytes)]);
        }
        match self.slot(offset_bytes).0 {
            Slot::Stored(i) => Some(&self.words[i]),
            Slot::Elided => None,
        }
    }

    /// The stored word an atomic targets; an atomic on elided payload is a protocol bug.
    fn atomic_word(&self, offset_bytes: u64) -> &AtomicU64 {
        self.word(offset_bytes).unwrap_or_else(|| {
            panic!("atomic on elided payload at {offset_bytes:#x}: the declared payload span is not opaque")
        })
    }

    /// How many write operations the region has taken (see the field).
    pub fn writes(&self) -> u64 {
        self.writes.load(Relaxed)
    }

    #[inline]
    fn wrote(&self) {
        self.writes.store(self.writes.load(Relaxed).wrapping_add(1), Relaxed);
    }

    #[inline]
    pub fn load(&self, offset_bytes: u64) -> u64 {
        self.word(offset_bytes).map_or(0, |w| w.load(Relaxed))
    }

    /// Load a flag word that a NIC writes *after* the words it guards (a mailbox head): loads
    /// after this one see at least what was written before the flag. On hardware a NIC's
    /// writes land while the CPU reads, so read such a flag first and its data after; reading
    /// the data first can pair an old argument with a new flag (in the simulator a task's loads
    /// are atomic with respect to NIC writes, so only hardware shows the difference).
    #[inline]
    pub fn load_acquire(&self, offset_bytes: u64) -> u64 {
        self.word(offset_bytes).map_or(0, |w| w.load(std::sync::atomic::Ordering::Acquire))
    }

    #[inline]
    pub fn store(&self, offset_bytes: u64, value: u64) {
        self.wrote();
        if let Some(w) = self.word(offset_bytes) {
            w.store(value, Relaxed)
        }
    }

    /// A local CPU compare-and-swap; returns the old value. Not atomic against NIC atomics.
    pub fn cas_local(&self, offset_bytes: u64, expect: u64, swap: u64) -> u64 {
        self.wrote();
        match self.atomic_word(offset_bytes).compare_exchange(expect, swap, Relaxed, Relaxed) {
            Ok(old) | Err(old) => old,
        }
    }

    /// A local CPU fetch-and-add (wrapping); returns the old value. Not atomic against NIC atomics.
    pub fn faa_local(&self, offset_bytes: u64, add: u64) -> u64 {
        self.wrote();
        self.atomic_word(offset_bytes).fetch_add(add, Relaxed)
    }

    /// Copy `out.len()` words starting at `offset_bytes` into `out`.
    pub fn read_words(&self, offset_bytes: u64, out: &mut [u64]) {
        if self.elided.is_some() {
            for (i, o) in out.iter_mut().enumerate() {
                *o = self.load(offset_bytes + i as u64 * WORD_BYTES);
            }
            return;
        }
        let start = self.index(offset_bytes);
        let words = &self.words[start..start + out.len()];
        for (o, w) in out.iter_mut().zip(words) {
            *o = w.load(Relaxed);
        }
    }

    /// Copy `data` into the region starting at `offset_bytes`.
    pub fn write_words(&self, offset_bytes: u64, data: &[u64]) {
        self.wrote();
        if self.elided.is_some() {
            for (i, d) in data.iter().enumerate() {
                self.store(offset_bytes + i as u64 * WORD_BYTES, *d);
            }
            return;
        }
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
        self.wrote();
        if self.elided.is_some() || source.elided.is_some() {
            return self.copy_runs(target_offset_bytes, source, source_offset_bytes, len_bytes);
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

    /// [`Region::copy_from`] when either side elides payload: walk both ranges in runs that
    /// are stored (or elided) alike on both sides — a handful per line, not one per word.
    fn copy_runs(&self, target_offset: u64, source: &Region, source_offset: u64, len_bytes: u64) {
        self.check(target_offset + len_bytes - WORD_BYTES);
        source.check(source_offset + len_bytes - WORD_BYTES);
        let mut done = 0;
        while done < len_bytes {
            let (to, to_run) = self.slot(target_offset + done);
            let (from, from_run) = source.slot(source_offset + done);
            let run = to_run.min(from_run).min(len_bytes - done);
            let count = (run / WORD_BYTES) as usize;
            if let Slot::Stored(t) = to {
                let targets = &self.words[t..t + count];
                match from {
                    Slot::Stored(s) => {
                        for (to, from) in targets.iter().zip(&source.words[s..s + count]) {
                            to.store(from.load(Relaxed), Relaxed);
                        }
                    }
                    Slot::Elided => targets.iter().for_each(|w| w.store(0, Relaxed)),
                }
            }
            done += run;
        }
    }

    /// Raw pointer and length for registering the region with a real NIC (hardware backend).
    pub fn as_ptr(&self) -> *const AtomicU64 {
        assert!(self.elided.is_none(), "a payload-free region cannot be registered with a NIC");
        self.words.as_ptr()
    }
}

/// `count` zeroed words.
fn zeroed_words(count: u64) -> Box<[AtomicU64]> {
    (0..count).map(|_| AtomicU64::new(0)).collect()
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
    fn elided_payload_keeps_only_kept_words() {
        // Goal: a payload-free region stores each line's kept words, reads elided ones as 0,
        // and copies between a full and an elided region move exactly the kept words.
        // Layout: 16 header bytes, then 3 lines of 32 bytes keeping 16, then 8 trailing bytes.
        let span = PayloadSpan { start_bytes: 16, stride_bytes: 32, kept_bytes: 16, lines: 3 };
        let size = 16 + 3 * 32 + 8;
        let e = Region::with_elided_payload(size, span);
        assert_eq!(e.size_bytes(), size);
        assert_eq!(e.stored_bytes(), 16 + 3 * 16 + 8);
        let full = Region::new(size);
        let pattern: Vec<u64> = (1..=size / 8).collect();
        full.write_words(0, &pattern);
        e.copy_from(0, &full, 0, size);
        let mut out = vec![0; (size / 8) as usize];
        e.read_words(0, &mut out);
        let kept = |i: u64| !(2..14).contains(&i) || (i - 2) % 4 < 2;
        let expect: Vec<u64> = (0..size / 8).map(|i| if kept(i) { i + 1 } else { 0 }).collect();
        assert_eq!(out, expect, "elided words read 0, kept words survive the copy");
        e.store(16 + 32 + 24, 99);
        assert_eq!(e.load(16 + 32 + 24), 0, "a store to elided payload is dropped");
        assert_eq!(e.faa_local(size - 8, 1), size / 8, "the trailing word is stored");
        // And back, at a phase shift of one line.
        let back = Region::new(size);
        back.copy_from(8, &e, 16 + 24, 40);
        let mut words = [0; 5];
        back.read_words(8, &mut words);
        assert_eq!(words, [0, 7, 8, 0, 0], "elided source words arrive as 0");
    }

    #[test]
    #[should_panic(expected = "atomic on elided payload")]
    fn an_atomic_on_elided_payload_is_a_bug() {
        let span = PayloadSpan { start_bytes: 0, stride_bytes: 32, kept_bytes: 8, lines: 2 };
        Region::with_elided_payload(64, span).faa_local(40, 1);
    }

    #[test]
    #[should_panic(expected = "outside region")]
    fn local_out_of_range_is_a_bug() {
        Region::new(16).load(16);
    }
}
