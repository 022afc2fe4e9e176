//! Tuples heap-organised in GCLs (SELCC §6.4 step 1): each page of a table holds fixed-width
//! tuples in insertion order behind three concurrency-control words, which every protocol reads
//! and writes under a SELCC latch on the page (the lock *granularity* is the GCL, as the paper's):
//!
//! | word | 2PL no-wait | TO | OCC |
//! |---|---|---|---|
//! | `CC` | 0, S-holder count, or `X_BIT \| owner` | pending writer's timestamp | write-lock owner |
//! | `WTS` | — | last committed writer's timestamp | page version |
//! | `RTS` | — | largest reader timestamp | — |
//!
//! A tuple's word 0 is its version (bumped by every committed write; what the serializability
//! checker reads), its other words the table's fields.

use crate::blink::PageId;

pub const CC: usize = 0;
pub const WTS: usize = 1;
pub const RTS: usize = 2;
pub const PAGE_HEADER: usize = 3;
/// The exclusive-holder flag of a 2PL lock word.
pub const X_BIT: u64 = 1 << 63;

/// A tuple's address: its page and its slot (bits 40..48). Never 0, so it is a valid value for
/// the B-link tree (0 = absent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TupleRef(pub u64);

const SLOT_SHIFT: u32 = 40;
const OFFSET_MASK: u64 = (1 << SLOT_SHIFT) - 1;

impl TupleRef {
    pub fn new(page: PageId, slot: usize) -> TupleRef {
        assert!(page.0 & ((1 << 48) - 1) <= OFFSET_MASK, "page {page} beyond 2^40 bytes");
        assert!(slot < 256, "slot {slot} beyond 255");
        TupleRef(page.0 | (slot as u64) << SLOT_SHIFT)
    }

    pub fn page(self) -> PageId {
        PageId(self.0 & !(0xff << SLOT_SHIFT))
    }

    pub fn slot(self) -> usize {
        ((self.0 >> SLOT_SHIFT) & 0xff) as usize
    }

    /// The tuple's first word within its page, for tuples `width` words wide.
    pub fn word(self, width: usize) -> usize {
        PAGE_HEADER + self.slot() * width
    }
}

/// Tuples of `width` words per page of `page_words` words.
pub fn per_page(page_words: usize, width: usize) -> usize {
    (page_words.saturating_sub(PAGE_HEADER) / width).min(255)
}
