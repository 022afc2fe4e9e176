//! FaRM's mutants: planted bugs the fuzzer's checkers must catch
//! (`dmsim fuzz scenarios/farm/fuzz-small.json --mutant <name>`), each switched in `node.rs`.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mutant {
    #[default]
    None,
    SkipVersionCheck,
    HeaderOnlyCheck,
    NoVersionBump,
}

crate::mutant_table!(Mutant {
    "skip-version-check" => SkipVersionCheck:
        "a one-sided read accepts whatever it read, without checking the lock or the versions",
    "header-only-check" => HeaderOnlyCheck:
        "a one-sided read checks only the header's lock bit, not that every cache line carries the header's version",
    "no-version-bump" => NoVersionBump:
        "an install writes the new value in place without locking the record or bumping its versions",
});
