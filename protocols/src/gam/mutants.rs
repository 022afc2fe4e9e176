//! GAM's mutants: deliberately broken variants that the fuzzer's checkers must catch
//! (`dmsim fuzz scenarios/gam/fuzz-small.json --mutant <name>`).

use serde::{Deserialize, Serialize};

use crate::harness;

/// A planted bug, switched by `Config::mutant`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mutant {
    #[default]
    None,
    GrantWithoutInvalidate,
    ReadIgnoresOwner,
    RecallDataDropped,
    WriteBackIgnored,
    DowngradedOwnerForgotten,
    InvalidateKeepsCopy,
}

const fn m(name: &'static str, breaks: &'static str) -> harness::Mutant {
    harness::Mutant { name, breaks }
}

/// CLI name, variant and what each mutant breaks.
const TABLE: &[(harness::Mutant, Mutant)] = &[
    (
        m(
            "grant-without-invalidate",
            "a write miss is granted Exclusive while other sharers keep their copies",
        ),
        Mutant::GrantWithoutInvalidate,
    ),
    (
        m("read-ignores-owner", "a read miss is served from memory without recalling the Exclusive owner"),
        Mutant::ReadIgnoresOwner,
    ),
    (
        m("recall-data-dropped", "the home drops the data a recalled owner returns with its Ack"),
        Mutant::RecallDataDropped,
    ),
    (
        m("write-back-ignored", "an evicted Exclusive block's write-back is acknowledged but not stored"),
        Mutant::WriteBackIgnored,
    ),
    (
        m("downgraded-owner-forgotten", "after a downgrade the home forgets the former owner's Shared copy"),
        Mutant::DowngradedOwnerForgotten,
    ),
    (
        m("invalidate-keeps-copy", "a sharer acks an Invalidate but keeps reading its copy"),
        Mutant::InvalidateKeepsCopy,
    ),
];

/// Every mutant, for listings.
pub const LIST: &[harness::Mutant] = &{
    let mut out = [m("", ""); TABLE.len()];
    let mut i = 0;
    while i < TABLE.len() {
        out[i] = TABLE[i].0;
        i += 1;
    }
    out
};

/// The mutant named `name` (`"none"` is the correct protocol).
pub fn named(name: &str) -> Option<Mutant> {
    if name == "none" {
        return Some(Mutant::None);
    }
    TABLE.iter().find(|(m, _)| m.name == name).map(|(_, v)| *v)
}
