//! # Dolphin: a resource-efficient hybrid index on disaggregated memory (An et al., MSST'24)
//!
//! ART internal nodes on top, B+-tree leaves of 1 KB at the bottom: compute nodes cache only
//! internal nodes (one cached special node routes to a whole 256-key window of leaves), and
//! writers synchronise through the memory node's NIC instead of a lock. Spec:
//! `shared/specs/dolphin.md`; facts (leaf layout, Spear's encoding, the special node's
//! entry byte) from hust-anhang/Dolphin; what both leave open is a `[CHOICE]` in `NEEDS.md`.
//!
//! | paper | here |
//! |---|---|
//! | Fig. 3 leaf (`rev_ptr`, min, max, keys, values, lock); ART nodes; the special node at depth L | [`layout`] |
//! | §3.5 index cache, 1 cache item : N items | [`cache`] |
//! | §3.6 hybrid pathfinding, backtracking | [`tree`] `descend`, `judge` |
//! | §3.7 get, update/insert/delete (Fig. 4 a–c), SMO (Fig. 4 d/e), scan | [`tree`] |
//! | §3.8 MS-RNIC writing synchronization, Spear | [`tree`] `enter`, `write_value`, `split` |
//! | §4 invariants | [`check`] |
//! | warm-up to a half-full tree | [`bulk`] |
//!
//! [`def`] is the definition the registry names (`dolphin`), [`mutants`] the planted bugs,
//! [`bench`] the YCSB client loop.
//!
//! ```text
//!  op ─▶ cache.deepest(key) or root ─▶ READ ART nodes (2 KB) below it, byte by byte
//!            │ special node: floor(last byte)
//!            ▼
//!   get: READ leaf ─▶ [min,max]/rev_ptr ok? value : backtrack (READ parent, READ leaf)
//!   store: FAA(Spear,+1) ‖ READ keys ─▶ key there? WRITE value ‖ FAA(−1)
//!                                      └ CAS empty key slot ─▶ WRITE value ‖ FAA(−1)
//!                                      └ full ─▶ SMO: FAA(−10⁶), drain, split, retry
//! ```

pub mod bench;
pub mod bulk;
pub mod cache;
pub mod check;
pub mod config;
pub mod def;
pub mod layout;
pub mod mutants;
pub mod tree;

pub use config::{Config, Mutant};
pub use def::{Dolphin, DolphinPlan};
