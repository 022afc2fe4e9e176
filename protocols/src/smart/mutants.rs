//! SMART's mutants: deliberately broken variants that the fuzzer's checkers must catch
//! (`dmsim fuzz scenarios/smart/fuzz-small.json --mutant <name>`). Each is switched at its one
//! line by `Config::mutant`.

use serde::{Deserialize, Serialize};

/// A planted bug.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mutant {
    #[default]
    None,
    ChecksumSkipped,
    CasAsWrite,
    GrowthTypeNotPublished,
    StaleCacheTypeUsed,
    RevPtrNotMoved,
    DelegationAfterRead,
    CombiningDropsWrite,
    InsertIgnoresPrefix,
    LeafLockSkipped,
    PartitionKeyUnlocked,
    ScanExcludesStart,
    WriteBehindUnexposed,
}

crate::mutant_table!(Mutant {
    "checksum-skipped" => ChecksumSkipped:
        "leaf reads accept a leaf whose checksum does not match (a torn in-place update)",
    "cas-as-write" => CasAsWrite:
        "a slot is published with a plain WRITE instead of a CAS: concurrent writers overwrite each other",
    "growth-type-not-published" => GrowthTypeNotPublished:
        "after inserting behind a full node, the larger node type is never CASed into the parent slot and header",
    "stale-cache-type-used" => StaleCacheTypeUsed:
        "a node read through a cached entry whose type is older than the node's trusts the cached type (skips the slots added by growth) and keeps the stale entry cached",
    "rev-ptr-not-moved" => RevPtrNotMoved:
        "a split moves a leaf or node under a new node without updating its rev_ptr, so cached copies of the old slot still validate it",
    "delegation-after-read" => DelegationAfterRead:
        "read delegation hands a leader's result to readers that arrived after its remote read was issued",
    "combining-drops-write" => CombiningDropsWrite:
        "write combining absorbs writes that arrive after the leader's CAS was issued (they are never written)",
    "insert-ignores-prefix" => InsertIgnoresPrefix:
        "inserts skip the compressed-prefix check, so a key can land under a node whose prefix it does not share",
    "leaf-lock-skipped" => LeafLockSkipped:
        "in-place updates write the leaf without taking its embedded lock (no version check either)",
    "partition-key-unlocked" => PartitionKeyUnlocked:
        "P-SMART: a write skips the compute node's per-key local lock that stands in for the leaf's RDMA lock",
    "scan-excludes-start" => ScanExcludesStart:
        "a range scan returns keys strictly above its start key, skipping the start key itself",
    "write-behind-unexposed" => WriteBehindUnexposed:
        "a write that finds its byte's slot behind a node's type, filled by an insert still growing the node, writes through it without growing the node first (a later lookup misses the key)",
});
