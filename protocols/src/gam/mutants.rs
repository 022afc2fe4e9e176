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
}

/// CLI name, variant and what each mutant breaks.
const TABLE: &[(harness::Mutant, Mutant)] = &[];

/// Every mutant, for listings.
pub const LIST: &[harness::Mutant] = &{
    let mut out = [harness::Mutant { name: "", breaks: "" }; TABLE.len()];
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
