//! SELCC's mutants: deliberately broken variants the fuzzer's checkers must catch
//! (`dmsim fuzz scenarios/selcc/fuzz-small.json --mutant <name>`). Each is switched by
//! `Config::mutant` at the one line it breaks.

use super::Mutant;

crate::mutant_table!(Mutant {
    "release-before-flush" => ReleaseBeforeFlush:
        "exclusive release posts the latch FAA a round trip before the dirty WRITE",
    "forward-without-dirty-bounds" => ForwardWithoutDirtyBounds:
        "Case-1 forwarding drops the old owner's dirty bounds",
    "read-through-modified" => ReadThroughModified:
        "a reader meeting a Modified copy keeps its bit and reads stale memory",
    "reader-keeps-bit" => ReaderKeepsBit:
        "a reader meeting a writer does not undo its +BIT FAA before invalidating",
    "downgrade-forward-before-faa" => DowngradeForwardBeforeFaa:
        "Case 2 forwards the copy before the downgrade FAA instead of after",
    "release-without-flush" => ReleaseWithoutFlush:
        "releasing a Modified copy skips the dirty WRITE",
    "handler-without-local-latch" => HandlerWithoutLocalLatch:
        "the invalidation handler serves without the frame's local latch",
    "release-exclusive-by-cas" => ReleaseExclusiveByCas:
        "exclusive release by CAS, lost when a failed reader's bit is in the word",
    "reuse-frame-before-flush" => ReuseFrameBeforeFlush:
        "batched eviction flushes from a frame that is reused before the WRITE",
    "drop-without-reply" => DropWithoutReply:
        "a dropped invalidation gets no \"dropped\" reply",
    "upgrade-without-fallback" => UpgradeWithoutFallback:
        "upgrade retries its CAS forever instead of release-then-acquire",
    "skip-crash-cleanup" => SkipCrashCleanup:
        "crash recovery declares the dead node but leaves its latch ownership in place",
});
