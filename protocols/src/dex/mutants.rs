//! DEX's mutants: deliberately broken variants the fuzzer's checkers must catch
//! (`dmsim fuzz scenarios/dex/fuzz-small.json --mutant <name>`).

use serde::{Deserialize, Serialize};

/// A planted bug, switched by `Config::mutant`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mutant {
    #[default]
    None,
    NoIoFlag,
    CoolWithoutWriteBack,
    NoPathDelegation,
    ModifyWithoutDirty,
    NonAdmittedNoWriteBack,
    SharedWithoutLock,
    SharedSkipVerify,
    SplitKeepsFence,
    SplitDropsEntry,
    OffloadCachedSubtree,
    RepartitionNoDrain,
    ReceiverSkipsHandoff,
    ScanSkipsFenceKey,
}

crate::mutant_table!(Mutant {
    "no-io-flag" =>  NoIoFlag:
        "a miss does not put the I/O flag in the mapping table, so two threads fetch and install the same node",
    "cool-without-write-back" => CoolWithoutWriteBack:
        "cooling a dirty page marks it clean without writing it back to the memory pool",
    "no-path-delegation" => NoPathDelegation:
        "a sampled inner node is cooled itself instead of delegating to its deepest swizzled child",
    "modify-without-dirty" => ModifyWithoutDirty:
        "an update of a cached leaf does not mark the page dirty, so cooling drops it",
    "non-admitted-no-write-back" => NonAdmittedNoWriteBack:
        "a write to a leaf that was not admitted into the cache is never written back",
    "shared-without-lock" => SharedWithoutLock:
        "a split under a shared parent neither takes its RDMA lock nor re-reads it: the cached copy is written back",
    "shared-skip-verify" => SharedSkipVerify:
        "a split under a shared parent takes the lock but skips the check that the cached parent is up to date",
    "split-keeps-fence" => SplitKeepsFence:
        "a split leaves the old node's upper fence unchanged, so both halves claim the upper keys",
    "split-drops-entry" => SplitDropsEntry:
        "a leaf split forgets to copy the last entry into the new sibling",
    "offload-cached-subtree" => OffloadCachedSubtree:
        "offloading also picks a subtree whose root is cached, so the memory server works on an image with dirty pages and half-done splits still in the cache",
    "repartition-no-drain" => RepartitionNoDrain:
        "a repartitioning hands the range over without waiting for the operations already running on it, so their later write-backs land after the new owner read the nodes",
    "receiver-skips-handoff" => ReceiverSkipsHandoff:
        "a server that owns a partition already and receives a range routes into it at the planned time without waiting for the old owner's hand-off word, so it reads nodes whose dirty copies the old owner has not flushed",
    "scan-skips-fence-key" => ScanSkipsFenceKey:
        "a scan continuing into the next leaf treats its lower fence as exclusive and skips the key equal to it",
});
