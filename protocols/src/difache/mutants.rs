//! DiFache's mutants: planted bugs the fuzzer's checkers must catch
//! (`dmsim fuzz scenarios/difache/fuzz-small.json --mutant <name>`). Several are the races the
//! spec's §9 suspects; each is switched at its one line in `cache.rs`.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mutant {
    #[default]
    None,
    ValidAfterFetch,
    InvalidateBeforeFlush,
    OwnerBitAfterFetch,
    OwnerBitByWrite,
    InvalidateFirstOwnerOnly,
    HitIgnoresFill,
    SwitchWithoutFlag,
    AllocDefaultOn,
    BypassWriteNoRecheck,
    InstallIgnoresTicket,
    PaperOwnerOrder,
    RestartKeepsCache,
    MnFailureKeepsCache,
    CmInstallIgnoresTicket,
    CmNoSerialize,
    CmUnackedInvalidate,
    CmWriterKeepsLocal,
    AtomicWhileCaching,
    NestedWriteKeepsCopy,
    BatchInvalidateWithFlush,
    NestedWriteResetsOwners,
    FordArtifactValidation,
    FordEarlyUnlock,
}

crate::mutant_table!(Mutant {
    "valid-after-fetch" => ValidAfterFetch:
        "a read miss marks the header valid after the fetch, so an invalidation racing the fetch is lost",
    "invalidate-before-flush" => InvalidateBeforeFlush:
        "a cached write invalidates the owners before it flushes to the memory node",
    "owner-bit-after-fetch" => OwnerBitAfterFetch:
        "owner sets: a read miss fetches before registering as owner",
    "owner-bit-by-write" => OwnerBitByWrite:
        "owner sets: a read miss sets its bit with a plain WRITE, erasing a concurrent reader's bit",
    "invalidate-first-owner-only" => InvalidateFirstOwnerOnly:
        "a write invalidates only the first owner it finds",
    "hit-ignores-fill" => HitIgnoresFill:
        "a local thread hits a valid header whose buffer another thread is still filling (spec §9.7)",
    "switch-without-flag" => SwitchWithoutFlag:
        "a mode switch writes the new mode without first raising the switching flag on every CN",
    "alloc-default-on" => AllocDefaultOn:
        "a new header starts with caching on instead of copying the mode other CNs hold",
    "bypass-write-no-recheck" => BypassWriteNoRecheck:
        "a bypassing write does not re-check the mode after its flush: an op in flight across a switch to on (spec §9.6)",
    "install-ignores-ticket" => InstallIgnoresTicket:
        "a read miss installs its fetch whenever the header is valid, even if a newer miss or a write re-validated it",
    "paper-owner-order" => PaperOwnerOrder:
        "owner sets: the paper's literal read miss (bit, valid, fetch) without re-reading the owner set; a collect between bit and valid leaves a valid copy no later writer invalidates",
    "restart-keeps-cache" => RestartKeepsCache:
        "node restarts: a restarted CN keeps its old cache contents valid (its memory is not reset and its rejoin round does not drop them), though writers skipped it while it was dead",
    "mn-failure-keeps-cache" => MnFailureKeepsCache:
        "node restarts: after a memory-node failure the CNs keep their cached copies instead of invalidating them, though the restarted memory node lost the owner sets",
    "cm-install-ignores-ticket" => CmInstallIgnoresTicket:
        "CMCache: a client installs the manager's data whenever its slot still names the object, even after an invalidation overtook the reply",
    "cm-no-serialize" => CmNoSerialize:
        "CMCache: the manager serves read misses and writes to one object concurrently",
    "cm-unacked-invalidate" => CmUnackedInvalidate:
        "CMCache: the manager answers a write without waiting for its invalidations to land",
    "cm-writer-keeps-local" => CmWriterKeepsLocal:
        "CMCache: a writer whose slot another local thread claimed keeps that thread's fill, which the manager may have served before the write",
    "atomic-while-caching" => AtomicWhileCaching:
        "an atomic runs at the memory node without first switching the object's caching off, so cached copies outlive it (needs workload.atomic_ratio)",
    "nested-write-keeps-copy" => NestedWriteKeepsCopy:
        "a nested write patches its span into its own CN's copy and re-validates it, though another span's writer may have invalidated that copy meanwhile (needs workload.parts)",
    "batch-invalidate-with-flush" => BatchInvalidateWithFlush:
        "a batched write posts an element's invalidations beside its flush instead of after it completes, so an owner may re-fetch the old value (needs workload.batch)",
    "nested-write-resets-owners" => NestedWriteResetsOwners:
        "owner sets: a nested write resets the object's owner set as a whole write does, so a writer of another part that collects after it finds the owners gone and returns while the first writer is still invalidating them (needs workload.parts)",
    "ford-artifact-validation" => FordArtifactValidation:
        "FORD over the cache: validation re-reads the read-only objects' versions without their locks, as the authors' code does; a transaction that holds locks may have validated already and write later, so two that read each other's write sets both commit, and a reader can order itself before and after one writer (needs workload.transactions)",
    "ford-early-unlock" => FordEarlyUnlock:
        "FORD over the cache: a commit clears its locks while its new images are still being written, so a reader can see one object of the write set new and another old and unlocked (needs workload.transactions)",
});
