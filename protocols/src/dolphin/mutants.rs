//! Dolphin's mutants: deliberately broken variants the fuzzer's checkers must catch
//! (`dmsim fuzz scenarios/dolphin/fuzz-small.json --mutant <name>`).

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mutant {
    #[default]
    None,
    SkipRangeCheck,
    NoSpear,
    SmoNoDrain,
    InsertWithoutCas,
    CachedNullIsAbsent,
    SplitKeepsMax,
    SplitDropsLast,
    NewLeafUnlocked,
    ReleaseBeforeWrite,
    PushdownKeepsRevPtr,
}

crate::mutant_table!(Mutant {
    "skip-range-check" => SkipRangeCheck:
        "a reader uses a leaf whose [min, max] no longer covers the key (no backtracking after a split)",
    "no-spear" => NoSpear:
        "inserts, updates and deletes skip Spear's shared FAA, so a split runs concurrently with them",
    "smo-no-drain" => SmoNoDrain:
        "a split takes Spear exclusively but does not wait for the shared holders to drain",
    "insert-without-cas" => InsertWithoutCas:
        "an insert claims its empty key slot with a plain WRITE instead of RDMA_CAS",
    "cached-null-is-absent" => CachedNullIsAbsent:
        "an empty slot in a cached node copy is taken as 'absent' without re-reading the remote slot",
    "split-keeps-max" => SplitKeepsMax:
        "a split leaves the old leaf's max unchanged, so both leaves claim the upper keys",
    "split-drops-last" => SplitDropsLast:
        "a split forgets to copy the largest moved item into the new leaf",
    "new-leaf-unlocked" => NewLeafUnlocked:
        "the new leaf of a split is born with a free Spear word, so writers reach it before the old leaf is rewritten",
    "release-before-write" => ReleaseBeforeWrite:
        "an update releases Spear (FAA -1) and waits for it before its value WRITE is posted",
    "pushdown-keeps-rev-ptr" => PushdownKeepsRevPtr:
        "a push-down (new internal node above a child) leaves the child's rev_ptr at the old slot",
});
