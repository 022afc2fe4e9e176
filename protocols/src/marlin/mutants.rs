//! Marlin's mutants: deliberately broken variants that the fuzzer's checkers must catch
//! (`dmsim fuzz scenarios/marlin/fuzz-small.json --mutant <name>`). Sherman's own mutants
//! (internal nodes, cache, splits) are not repeated here.

use serde::{Deserialize, Serialize};

/// A planted bug in Marlin's leaf operations, switched by `sherman::Config::marlin_mutant`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mutant {
    #[default]
    None,
    NoSpear,
    SmoNoDrain,
    ClaimByWrite,
    ClaimSkipsOwnKey,
    PublishBeforeItem,
    ReleaseBeforeCas,
}

crate::mutant_table!(Mutant {
    "no-spear" => NoSpear:
        "inserts, updates and deletes skip Spear's shared FAA, so a leaf split runs concurrently with them",
    "smo-no-drain" => SmoNoDrain:
        "a leaf split takes Spear exclusively but does not wait for the shared holders to drain",
    "claim-by-write" => ClaimByWrite:
        "an insert claims an empty slot's key word with a plain WRITE instead of CAS, so two inserts can take one slot",
    "claim-skips-own-key" => ClaimSkipsOwnKey:
        "an insert whose key CAS meets its own key (a racing insert of the same key) claims another slot, so the key is stored twice",
    "publish-before-item" => PublishBeforeItem:
        "an update or insert CASes the new item's pointer into the leaf before the item is written",
    "release-before-cas" => ReleaseBeforeCas:
        "an insert, update or delete releases Spear and waits for it before posting its pointer CAS",
});
