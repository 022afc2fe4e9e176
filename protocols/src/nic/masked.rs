//! Masked (extended) atomics: the arithmetic both backends and the checkers share, and an
//! explicit CAS-loop emulation for devices without them.
//!
//! Mellanox NICs offer masked compare-and-swap and masked fetch-and-add on one 8-byte word
//! (`IBV_EXP` extended atomics, later mlx5dv). SMART and Sherman-style indexes use them to
//! update one field of a packed word (a lock bit, a version) without a read-modify-write round
//! trip. Soft-RoCE and plain libibverbs do not have them; there a backend answers
//! [`NicError::Unsupported`](super::NicError::Unsupported) and the *caller* may choose
//! [`emulate`], which costs at least two round trips and is atomic only because every step is a
//! NIC CAS — it is never substituted silently.

use super::{Nic, NicError, NicResult, Verb};

/// The word a masked CAS leaves behind when the word held `old`, and whether it swapped:
/// it swaps iff `old & compare_mask == expect & compare_mask`, replacing only the bits of
/// `swap_mask` with those of `swap`.
pub fn cas(old: u64, expect: u64, compare_mask: u64, swap: u64, swap_mask: u64) -> (u64, bool) {
    if (old ^ expect) & compare_mask != 0 {
        return (old, false);
    }
    ((old & !swap_mask) | (swap & swap_mask), true)
}

/// `old + add` field by field. A set bit of `boundary_mask` is the most significant bit of a
/// field: the carry out of it is dropped, so each field wraps on its own. Bit 63 always ends a
/// field; `boundary_mask == 0` is a plain wrapping add.
pub fn faa(old: u64, add: u64, boundary_mask: u64) -> u64 {
    let mut out = 0u64;
    let mut low = 0u32; // lowest bit of the current field
    let ends = boundary_mask | 1 << 63;
    let mut rest = ends;
    while rest != 0 {
        let high = rest.trailing_zeros(); // its most significant bit
        rest &= rest - 1;
        let width = high - low + 1;
        let mask = if width == 64 { u64::MAX } else { ((1u64 << width) - 1) << low };
        out |= ((old & mask).wrapping_add(add & mask)) & mask;
        low = high + 1;
    }
    out
}

/// The word `verb` leaves behind when it executes on a word holding `old` (masked atomics,
/// CAS and FAA; `None` for other verbs).
pub fn apply(verb: &Verb, old: u64) -> Option<u64> {
    match *verb {
        Verb::Cas { expect, swap, .. } => Some(if old == expect { swap } else { old }),
        Verb::Faa { add, .. } => Some(old.wrapping_add(add)),
        Verb::MaskedCas { expect, compare_mask, swap, swap_mask, .. } => {
            Some(cas(old, expect, compare_mask, swap, swap_mask).0)
        }
        Verb::MaskedFaa { add, boundary_mask, .. } => Some(faa(old, add, boundary_mask)),
        _ => None,
    }
}

/// Runs a masked atomic as a loop of plain NIC CASes (explicit emulation; see the module docs).
/// Returns the old value, like the real verb. Linearizes at the CAS that read or installed the
/// returned value, so it is atomic against every NIC atomic on the word (not against WRITEs,
/// like any atomic). `verb` must be [`Verb::MaskedCas`] or [`Verb::MaskedFaa`].
pub async fn emulate<N: Nic>(nic: &N, verb: Verb) -> NicResult<u64> {
    if !verb.is_masked() {
        return Err(NicError::BadBatch { reason: "masked::emulate takes a masked atomic" });
    }
    let remote = verb.remote();
    // An atomic read: CAS 0→0 changes nothing and returns the current value.
    let mut old = nic.cas(remote, 0, 0).await?;
    loop {
        let new = apply(&verb, old).expect("masked verb");
        if new == old {
            return Ok(old); // compare failed (or a no-op): linearized at the read of `old`
        }
        let seen = nic.cas(remote, old, new).await?;
        if seen == old {
            return Ok(old);
        }
        old = seen;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_cas_compares_and_swaps_only_under_its_masks() {
        // Goal: the compare looks only at compare_mask bits; the swap changes only swap_mask bits.
        let old = 0xAAAA_0000_0000_00F1;
        assert_eq!(cas(old, 0x0000_0000_0000_0001, 0xF, 0x0, 0x1), (0xAAAA_0000_0000_00F0, true));
        assert_eq!(cas(old, 0x2, 0xF, 0x0, 0x1), (old, false), "mismatch under the mask: unchanged");
        assert_eq!(cas(old, 0, 0, 0x1234 << 16, 0xFFFF << 16), (0xAAAA_0000_1234_00F1, true));
        assert_eq!(cas(5, 5, u64::MAX, 9, u64::MAX), (9, true), "full masks are a plain CAS");
    }

    #[test]
    fn masked_faa_keeps_carries_inside_fields() {
        // Goal: with boundaries at bits 7 and 15, a carry out of the low byte wraps in that byte.
        let b = 1 << 7 | 1 << 15;
        assert_eq!(faa(0x00FF, 0x0001, b), 0x0000, "low byte wraps, does not carry into byte 1");
        assert_eq!(faa(0x01FF, 0x0101, b), 0x0200);
        assert_eq!(faa(0xFF << 16, 1 << 16, b), 0x100 << 16, "bits 16..63 are one field");
        assert_eq!(faa(u64::MAX, 1, 0), 0, "no boundaries: a wrapping add");
        assert_eq!(faa(7, 5, 0), 12);
        assert_eq!(faa(u64::MAX, 1, u64::MAX), u64::MAX - 1, "64 one-bit fields: bit 0 flips alone");
    }
}
