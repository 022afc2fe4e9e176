//! Sherman's mutants: deliberately broken variants that the fuzzer's checkers must catch
//! (`dmsim fuzz scenarios/sherman/fuzz-small.json --mutant <name>`).

use serde::{Deserialize, Serialize};

/// A planted bug, switched by `Config::mutant`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mutant {
    #[default]
    None,
    SkipVersionCheck,
    UnlockBeforeWriteBack,
    SplitBeforeSibling,
    StaleCacheEntry,
    HandoverWithoutWriteBack,
    NoGlobalLock,
    NoSiblingChase,
    SplitKeepsFence,
    SplitDropsEntry,
    PartitionLeafStraddles,
    ScanExcludesStart,
    ScanRoundIgnoresSplits,
    PackedWriteZeroesNeighbours,
    LeafCacheSkipsInvalidation,
}

crate::mutant_table!(Mutant {
    "skip-version-check" => SkipVersionCheck:
        "readers accept a node image whose version words disagree (a torn whole-node write)",
    "unlock-before-write-back" => UnlockBeforeWriteBack:
        "the lock word is cleared in its own batch before the node/entry write-back is posted",
    "split-before-sibling" => SplitBeforeSibling:
        "a split writes the shrunk node and inserts the separator above before the new sibling is written",
    "stale-cache-entry" => StaleCacheEntry:
        "a leaf reached through the index cache is used as is: no fence check, no restart, no move right",
    "handover-without-write-back" => HandoverWithoutWriteBack:
        "a lock handed over to a local waiter skips the write-back of the holder's change",
    "no-global-lock" => NoGlobalLock:
        "writers skip the on-chip lock: only the compute node's local lock serialises them",
    "no-sibling-chase" => NoSiblingChase:
        "a lookup whose key is at or above the leaf's highest fence reports 'absent' instead of moving right",
    "split-keeps-fence" => SplitKeepsFence:
        "a split leaves the old node's highest fence unchanged, so both halves claim the upper keys",
    "split-drops-entry" => SplitDropsEntry:
        "a leaf split forgets to copy the last entry into the new sibling",
    "partition-leaf-straddles" => PartitionLeafStraddles:
        "P-Sherman's bulk load ignores the partition bounds, so a leaf two compute nodes write under local locks only can straddle one",
    "scan-excludes-start" => ScanExcludesStart:
        "a range scan returns keys strictly above its start key, skipping the start key itself",
    "scan-round-ignores-splits" => ScanRoundIgnoresSplits:
        "a parallel scan round takes every leaf its cached level-1 node names, even one that no longer continues its left neighbour (the keys a split moved to a new sibling are skipped)",
    "packed-write-zeroes-neighbours" => PackedWriteZeroesNeighbours:
        "`versions: packed`: an entry write-back sends its 3 words with the neighbouring entries' bytes zeroed, as if the NIC wrote bytes (the neighbours' keys, values and versions are clobbered)",
    "leaf-cache-skips-invalidation" => LeafCacheSkipsInvalidation:
        "`leaf_cache`: a leaf write flushes to the memory node but invalidates no other compute node's copy (DiFache's noCC), so their lookups keep reading the old leaf",
});
