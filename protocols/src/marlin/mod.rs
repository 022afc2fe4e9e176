//! Marlin (H. An, F. Wang, D. Feng, X. Zou, Z. Liu, J. Zhang, ICPP'23), the Dolphin paper's
//! fourth baseline, as the Dolphin paper and its spec (`shared/specs/dolphin.md` §5 table,
//! Table I) describe it. Its code is not public (the Dolphin authors "get the source code from
//! the author of Marlin"); hust-anhang/Dolphin has no Marlin. Facts used, and where they are
//! in this code:
//!
//! | spec / paper | here |
//! |---|---|
//! | "Sherman's cache"; B+-tree on DM, 1 KB leaves | Sherman's tree, nodes, internal-node CAS locks and level-1 index cache, unchanged (`sherman/tree.rs`, `tree/split.rs`) |
//! | leaves hold **pointers** to independent data items | a leaf slot is `[key, item pointer]`; items are 16-byte `[key, value]`, immutable once published (`Layout::item`, `sherman/tree/marlin.rs`) |
//! | read: 2 RTTs (leaf, then item) | `marlin_lookup`: lock-free leaf READ (Sherman's versions), item READ |
//! | FAA ternary-state lock (Spear) for SMO vs IDU; IDU shared, SMO exclusive; FAA only | one Spear word per frame outside the frame (`Layout::spear_addr`), Dolphin's encoding [`SMO_STATUS`] / [`SMO_UP_LIMIT`] |
//! | CAS on the item pointer, "lock-free-like" IDU; update ≥ 3 RTTs | FAA ‖ READ leaf; WRITE item; CAS pointer ‖ FAA release |
//! | insert 3 RTTs | FAA ‖ READ leaf; WRITE item ‖ CAS key of an empty slot; CAS pointer ‖ FAA release |
//! | scan: 1 leaf READ + one READ per item | `marlin_scan`: leaves along the siblings, one READ per item (a doorbell batch per memory node) |
//! | MS memory ≈ 2× Sherman's (pointers + items + metadata) | `bulk_memory_bytes_per_key` counts frames, Spear words and items |
//!
//! The protocol is `protocol: "marlin"` with Sherman's options (`partitioned`, `lock_version`
//! and `version_reads` refused), defined in [`def`]; invariants in [`check`]; planted bugs in
//! [`mutants`]. Choices: `NEEDS.md` in this folder.

pub mod check;
pub mod def;
pub mod mutants;

pub use def::Marlin;
pub use mutants::Mutant;

/// Spear (Marlin's ternary-state lock; the encoding of hust-anhang/Dolphin, which adopts it):
/// IDUs add 1 and subtract 1; an SMO adds `SMO_STATUS`; a word below `SMO_UP_LIMIT` (as i64)
/// is held by an SMO.
pub const SMO_STATUS: i64 = -1_000_000;
pub const SMO_UP_LIMIT: i64 = -100_000;
