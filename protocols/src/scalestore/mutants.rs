//! ScaleStore's mutants: planted bugs the fuzzer's checkers must catch
//! (`dmsim fuzz scenarios/scalestore/fuzz-small.json --mutant <name>`), each switched at its one
//! line in `node.rs`, `directory.rs` or `baselines.rs`.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mutant {
    #[default]
    None,
    SkipInvalidations,
    FirstSharerOnly,
    NoImmediateUpdate,
    SharedKeepsOwner,
    ServeWhileFetching,
    DirectoryKeepsCopy,
    TrustHasCopy,
    InstallDoomed,
    WriteBeforeAcks,
    TakeWhileLatched,
    NoPins,
    EvictIgnoresHolders,
    EvictDirtyNoPull,
    EvictAnchorWithSharers,
    SkipWriteBack,
    UpgraderWaitsAtGate,
}

crate::mutant_table!(Mutant {
    "skip-invalidations" => SkipInvalidations:
        "an exclusive requester with a shared conflict never invalidates the node-shared owners",
    "first-sharer-only" => FirstSharerOnly:
        "a shared conflict invalidates only the first node-shared owner of the list",
    "no-immediate-update" => NoImmediateUpdate:
        "on an exclusive conflict the directory names the owner but does not make the requester the new owner (no anticipatory chaining)",
    "shared-keeps-owner" => SharedKeepsOwner:
        "a node-shared request that conflicts with an exclusive owner copies the page and leaves the owner exclusive",
    "serve-while-fetching" => ServeWhileFetching:
        "a handler serves a transfer or copy from a frame still fetching its page (breaks R2: serve when ready)",
    "directory-keeps-copy" => DirectoryKeepsCopy:
        "the directory keeps its own shared copy when it grants node-exclusive ownership to another node",
    "trust-has-copy" => TrustHasCopy:
        "the directory grants an upgrade without a page whenever the requester says it has a copy, even if it was invalidated meanwhile",
    "install-doomed" => InstallDoomed:
        "a shared fetch invalidated in flight installs its page as a lasting copy instead of using it once",
    "write-before-acks" => WriteBeforeAcks:
        "an exclusive requester installs and writes before its invalidations are acknowledged",
    "take-while-latched" => TakeWhileLatched:
        "page-latch mode: a handler hands away or invalidates a frame while a local worker holds it latched",
    "no-pins" => NoPins:
        "a copy is served without pinning the frame, so a local writer may change the page while the NIC still reads it",
    "evict-ignores-holders" => EvictIgnoresHolders:
        "the directory accepts an eviction from a node it no longer lists as a holder (one owed a transfer or invalidation)",
    "evict-dirty-no-pull" => EvictDirtyNoPull:
        "the directory accepts the last holder's eviction of a dirty page without reading it back (its SSD copy is stale)",
    "evict-anchor-with-sharers" => EvictAnchorWithSharers:
        "the directory lets the anchor of a shared page evict while other holders remain and names another sharer, perhaps still copying, a confirmed anchor (transfers are asked of it, dirty pages too)",
    "skip-write-back" => SkipWriteBack:
        "a directory evicting its own dirty page drops it without writing it to its storage device",
    "upgrader-waits-at-gate" => UpgraderWaitsAtGate:
        "baselines (conflicts fifo / busy_polling): an upgrader whose request waits at the directory's gate re-polls a transfer request as under chaining instead of serving it from its old copy (fuzz-small-fifo.json)",
});
