//! The 8-byte RDMA latch word at the head of every GCL (SELCC §3.1 [P], Fig. 5) and the pure
//! arithmetic on it.
//!
//! ```text
//!  63        58 57                                                  0
//! ┌────────────┬─────────────────────────────────────────────────────┐
//! │ exclusive  │ reader bitmap: bit i = compute index i holds Shared │
//! │ holder + 1 │                                                     │
//! └────────────┴─────────────────────────────────────────────────────┘
//! ```
//!
//! Encoding [CHOICE] (SELCC §3.1, spec B1): the exclusive field (bits 58..63, 6 bits) stores
//! `compute_index + 1`, so 0 means "no exclusive holder" and compute index 0 is encodable; reader
//! bit i is `1 << i`. Why this way round:
//! * The exclusive field is the **high** part, so the handover FAA `+(A − B, 0)` (§3.5 Case 1) is
//!   a two's-complement add confined to the top field: any carry or borrow falls off bit 63 and
//!   never disturbs the bitmap. That is what makes the handover FAA and the new owner's release
//!   FAA commutative even though they travel on different QPs (spec B7): in either order the word
//!   ends at the same value, and the transient value in between is harmless (see below).
//! * The bitmap is the low 58 bits so that `+BIT(i)` / `−BIT(i)` are single FAAs. A bit add is safe
//!   only if the bit is clear (else it carries into the neighbour's bit) — the protocol asserts
//!   this (invariant S8) and ensures one global acquire per frame at a time (spec B6).
//!
//! Transient, non-canonical values a checker must accept (spec §3.1):
//! 1. reader bits of failed shared acquirers (added, then undone) beside an exclusive holder;
//! 2. `ex = B − A` (mod 64) when the new owner A's release FAA lands before old owner B's
//!    handover FAA. With the +1 offset this may decode to a valid index; such a word only leads
//!    to stale invalidation messages, which the receiver drops because its memo disagrees.
//!
//! SEL's encoding (`sel.rs`, [REPO] `ACCESS_MODE 0`): the same exclusive field, and the low 58
//! bits hold a reader **count** instead of the bitmap — every thread that holds the GCL shared
//! added 1 (`FAA(+1)`), so several threads of one node may read at once. [REPO] puts
//! `node_id/2 + 100` in the top byte and the count below it; here the field is SELCC's
//! (index + 1 in bits 58..63), so `ex`, `ex_field` and `exclusive_holder` serve both. Exclusive
//! acquire is `CAS(0 → ex(me))`, so it fails while any reader (or a failed reader's transient
//! `+1`) is counted; exclusive release is `FAA(−ex(me))`, which commutes with those transients.
//! The count cannot reach bit 58 (at most one per thread), so no carry reaches the field.

use super::ComputeIndex;

/// First bit of the exclusive-holder field.
pub const EX_SHIFT: u32 = 58;
/// Width of the reader bitmap, hence the most compute nodes a cluster may have (§2 [P]).
pub const MAX_COMPUTE_NODES: usize = 58;
/// Mask of the reader bitmap.
pub const READER_MASK: u64 = (1u64 << EX_SHIFT) - 1;

const _: () = assert!(EX_SHIFT as usize == MAX_COMPUTE_NODES);
const _: () = assert!(64 - EX_SHIFT >= 6, "6 bits hold index+1 for 58 nodes");

/// The exclusive-field value of compute index `i` (`EX(i)` in the spec's pseudocode).
#[inline]
pub fn ex(i: ComputeIndex) -> u64 {
    assert!((i.0 as usize) < MAX_COMPUTE_NODES, "compute index {} out of latch range", i.0);
    (i.0 as u64 + 1) << EX_SHIFT
}

/// The reader bit of compute index `i` (`BIT(i)`).
#[inline]
pub fn bit(i: ComputeIndex) -> u64 {
    assert!((i.0 as usize) < MAX_COMPUTE_NODES, "compute index {} out of latch range", i.0);
    1u64 << i.0
}

/// Raw exclusive field (0 = none, else index + 1, or a transient value).
#[inline]
pub fn ex_field(word: u64) -> u64 {
    word >> EX_SHIFT
}

/// Reader bitmap.
#[inline]
pub fn readers(word: u64) -> u64 {
    word & READER_MASK
}

/// The exclusive holder, if the field names one of the `compute_count` compute nodes.
#[inline]
pub fn exclusive_holder(word: u64, compute_count: usize) -> Option<ComputeIndex> {
    let field = ex_field(word);
    if field == 0 || field as usize > compute_count {
        None
    } else {
        Some(ComputeIndex((field - 1) as u8))
    }
}

/// Exclusive acquire (§3.4 [P]): CAS `(0,0) → (me,0)`.
pub fn acquire_exclusive_swap(me: ComputeIndex) -> u64 {
    ex(me)
}

/// Upgrade (§3.4 [P]): CAS `(0, BIT(me)) → (me, 0)`; returns (expect, swap).
pub fn upgrade_cas(me: ComputeIndex) -> (u64, u64) {
    (bit(me), ex(me))
}

/// Release exclusive by FAA `−(me, 0)` (§3.4 [P]: FAA, not CAS, to avoid livelock with transient
/// reader bits).
pub fn release_exclusive_delta(me: ComputeIndex) -> u64 {
    0u64.wrapping_sub(ex(me))
}

/// Release shared (or undo a failed shared acquire): FAA `−BIT(me)`.
pub fn release_shared_delta(me: ComputeIndex) -> u64 {
    0u64.wrapping_sub(bit(me))
}

/// Case 1 handover (§3.5 [P]): FAA `+(to − from, 0)`.
pub fn handover_delta(from: ComputeIndex, to: ComputeIndex) -> u64 {
    ex(to).wrapping_sub(ex(from))
}

/// Case 2 downgrade (§3.5 [P]): FAA `+(−owner, BIT(reader) | BIT(owner))`.
pub fn downgrade_delta(owner: ComputeIndex, reader: ComputeIndex) -> u64 {
    assert!(owner != reader, "a node does not downgrade to itself");
    bit(owner).wrapping_add(bit(reader)).wrapping_sub(ex(owner))
}

/// Iterate the compute indexes whose bit is set in `bits`.
pub fn bits_iter(bits: u64) -> impl Iterator<Item = ComputeIndex> {
    let mut rest = bits & READER_MASK;
    std::iter::from_fn(move || {
        if rest == 0 {
            return None;
        }
        let i = rest.trailing_zeros();
        rest &= rest - 1;
        Some(ComputeIndex(i as u8))
    })
}

/// What an acquirer does after its latch atomic returned `old` (pure transition, §3.4/§3.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcquireStep {
    /// The latch is ours.
    Acquired,
    /// A Modified copy is held by this node: send it an invalidation (Case 1 or 2).
    InvalidateOwner(ComputeIndex),
    /// Shared copies are held by these nodes (bitmap, never including `me`): Case 3.
    InvalidateSharers(u64),
    /// A transient word (in-flight handover, our own release still landing, bits of failed
    /// shared acquirers only): back off and retry.
    Retry,
}

/// After `batch[CAS((0,0) → (me,0)), READ]` returned `old` (§3.4 Acquire Modified).
pub fn after_exclusive_cas(old: u64, me: ComputeIndex, compute_count: usize) -> AcquireStep {
    if old == 0 {
        return AcquireStep::Acquired;
    }
    conflict_step(old, me, compute_count)
}

/// After `batch[FAA(+BIT(me)), READ]` returned `old` (§3.4 Acquire Shared). Anything but
/// `Acquired` means the caller must undo its bit with `release_shared_delta` first.
pub fn after_shared_faa(old: u64, me: ComputeIndex, compute_count: usize) -> AcquireStep {
    assert!(old & bit(me) == 0, "S8: reader bit of {} added twice (old latch {old:#x})", me.0);
    if ex_field(old) == 0 {
        return AcquireStep::Acquired;
    }
    match exclusive_holder(old, compute_count) {
        Some(holder) if holder != me => AcquireStep::InvalidateOwner(holder),
        _ => AcquireStep::Retry,
    }
}

/// After the upgrade CAS `(0,BIT(me)) → (me,0)` returned `old` (§3.4 Upgrade).
pub fn after_upgrade_cas(old: u64, me: ComputeIndex, compute_count: usize) -> AcquireStep {
    if old == bit(me) {
        return AcquireStep::Acquired;
    }
    conflict_step(old, me, compute_count)
}

fn conflict_step(old: u64, me: ComputeIndex, compute_count: usize) -> AcquireStep {
    if ex_field(old) != 0 {
        return match exclusive_holder(old, compute_count) {
            Some(holder) if holder != me => AcquireStep::InvalidateOwner(holder),
            _ => AcquireStep::Retry,
        };
    }
    let valid = if compute_count >= 64 { u64::MAX } else { (1u64 << compute_count) - 1 };
    let others = readers(old) & !bit(me) & valid;
    if others != 0 {
        AcquireStep::InvalidateSharers(others)
    } else {
        AcquireStep::Retry
    }
}

/// Is `word` canonical at quiescence (S8): free, one exclusive holder, or readers only?
pub fn is_canonical(word: u64, compute_count: usize) -> bool {
    let valid = if compute_count >= 64 { u64::MAX } else { (1u64 << compute_count) - 1 };
    match ex_field(word) {
        0 => readers(word) & !valid == 0,
        _ => readers(word) == 0 && exclusive_holder(word, compute_count).is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ComputeIndex = ComputeIndex(0);
    const B: ComputeIndex = ComputeIndex(5);
    const C: ComputeIndex = ComputeIndex(57);

    #[test]
    fn encoding_round_trips_every_index() {
        // Goal: index 0 and index 57 are both encodable, and fields never overlap.
        for i in 0..MAX_COMPUTE_NODES as u8 {
            let i = ComputeIndex(i);
            assert_eq!(exclusive_holder(ex(i), MAX_COMPUTE_NODES), Some(i));
            assert_eq!(readers(ex(i)), 0);
            assert_eq!(ex_field(bit(i)), 0);
            assert_eq!(bits_iter(bit(i)).collect::<Vec<_>>(), vec![i]);
        }
        assert_eq!(exclusive_holder(0, 8), None);
        assert_eq!(exclusive_holder(ex(ComputeIndex(9)), 8), None, "out of range is transient");
    }

    #[test]
    fn handover_and_release_commute() {
        // Goal (spec B7): B's handover FAA and A's later release FAA give the same final word in
        // either arrival order, and never touch the bitmap even with transient reader bits.
        let stray = bit(C); // a failed shared acquirer's bit, in flight
        let start = ex(B) | stray;
        let h = handover_delta(B, A);
        let r = release_exclusive_delta(A);
        let in_order = start.wrapping_add(h).wrapping_add(r);
        let reversed = start.wrapping_add(r).wrapping_add(h);
        assert_eq!(in_order, stray);
        assert_eq!(reversed, stray);
        assert_eq!(exclusive_holder(start.wrapping_add(h), 58), Some(A));
        // The reversed transient keeps the bitmap intact.
        assert_eq!(readers(start.wrapping_add(r)), stray);
    }

    #[test]
    fn downgrade_sets_both_bits_and_clears_owner() {
        let word = ex(B).wrapping_add(downgrade_delta(B, A));
        assert_eq!(word, bit(A) | bit(B));
        assert!(is_canonical(word, 58));
    }

    #[test]
    fn acquire_steps_classify_conflicts() {
        // Goal: the pure transitions name the right invalidation targets (§3.5 Cases 1–3).
        let n = 8;
        assert_eq!(after_exclusive_cas(0, A, n), AcquireStep::Acquired);
        assert_eq!(after_exclusive_cas(ex(B), A, n), AcquireStep::InvalidateOwner(B));
        assert_eq!(after_exclusive_cas(bit(B) | bit(ComputeIndex(3)), A, n), {
            AcquireStep::InvalidateSharers(bit(B) | bit(ComputeIndex(3)))
        });
        assert_eq!(after_exclusive_cas(ex(A), A, n), AcquireStep::Retry, "own release in flight");
        assert_eq!(after_shared_faa(bit(B), A, n), AcquireStep::Acquired);
        assert_eq!(after_shared_faa(ex(B), A, n), AcquireStep::InvalidateOwner(B));
        assert_eq!(after_upgrade_cas(bit(A), A, n), AcquireStep::Acquired);
        assert_eq!(after_upgrade_cas(bit(A) | bit(B), A, n), AcquireStep::InvalidateSharers(bit(B)));
        assert_eq!(after_upgrade_cas(bit(A) | ex(B), A, n), AcquireStep::InvalidateOwner(B));
        // Transient ex field out of range.
        assert_eq!(after_exclusive_cas(ex(ComputeIndex(20)), A, n), AcquireStep::Retry);
    }

    #[test]
    #[should_panic(expected = "S8")]
    fn double_reader_bit_is_caught() {
        after_shared_faa(bit(A), A, 8);
    }
}
