//! SELCC's mutants: deliberately broken variants the fuzzer's checkers must catch
//! (`dmsim fuzz scenarios/selcc/fuzz-small.json --mutant <name>`). Each is switched by
//! `Config::mutant` at the one line it breaks.

use super::Mutant;
use crate::harness;

/// Every mutant: CLI name, variant, what it breaks.
const MUTANTS: &[(harness::Mutant, Mutant)] = &[
    (
        m(
            "release-before-flush",
            "exclusive release posts the latch FAA a round trip before the dirty WRITE",
        ),
        Mutant::ReleaseBeforeFlush,
    ),
    (
        m("forward-without-dirty-bounds", "Case-1 forwarding drops the old owner's dirty bounds"),
        Mutant::ForwardWithoutDirtyBounds,
    ),
    (
        m("read-through-modified", "a reader meeting a Modified copy keeps its bit and reads stale memory"),
        Mutant::ReadThroughModified,
    ),
    (
        m("reader-keeps-bit", "a reader meeting a writer does not undo its +BIT FAA before invalidating"),
        Mutant::ReaderKeepsBit,
    ),
    (
        m(
            "downgrade-forward-before-faa",
            "Case 2 forwards the copy before the downgrade FAA instead of after",
        ),
        Mutant::DowngradeForwardBeforeFaa,
    ),
    (
        m("release-without-flush", "releasing a Modified copy skips the dirty WRITE"),
        Mutant::ReleaseWithoutFlush,
    ),
    (
        m("handler-without-local-latch", "the invalidation handler serves without the frame's local latch"),
        Mutant::HandlerWithoutLocalLatch,
    ),
    (
        m(
            "release-exclusive-by-cas",
            "exclusive release by CAS, lost when a failed reader's bit is in the word",
        ),
        Mutant::ReleaseExclusiveByCas,
    ),
    (
        m(
            "reuse-frame-before-flush",
            "batched eviction flushes from a frame that is reused before the WRITE",
        ),
        Mutant::ReuseFrameBeforeFlush,
    ),
    (m("drop-without-reply", "a dropped invalidation gets no \"dropped\" reply"), Mutant::DropWithoutReply),
    (
        m("upgrade-without-fallback", "upgrade retries its CAS forever instead of release-then-acquire"),
        Mutant::UpgradeWithoutFallback,
    ),
];

const fn m(name: &'static str, breaks: &'static str) -> harness::Mutant {
    harness::Mutant { name, breaks }
}

pub const LIST: &[harness::Mutant] = &{
    let mut out = [m("", ""); MUTANTS.len()];
    let mut i = 0;
    while i < MUTANTS.len() {
        out[i] = MUTANTS[i].0;
        i += 1;
    }
    out
};

/// The mutant named `name` (`"none"` is the correct protocol).
pub fn named(name: &str) -> Option<Mutant> {
    if name == "none" {
        return Some(Mutant::None);
    }
    MUTANTS.iter().find(|(m, _)| m.name == name).map(|(_, v)| *v)
}
