//! NAM-DB's mutants: planted bugs the fuzzer's checkers must catch
//! (`dmsim fuzz scenarios/namdb/fuzz-small.json --mutant <name>`), each switched in `node.rs`.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mutant {
    #[default]
    None,
    ReadWithoutLatch,
    SharedIgnoresWriter,
    UnlatchBeforeWrite,
}

crate::mutant_table!(Mutant {
    "read-without-latch" => ReadWithoutLatch:
        "a read takes no shared latch: one READ, which a concurrent WRITE of the record may tear",
    "shared-ignores-writer" => SharedIgnoresWriter:
        "a shared latch counts itself in but does not back off when the exclusive bit is set",
    "unlatch-before-write" => UnlatchBeforeWrite:
        "a writer releases its exclusive latch before its WRITE of the record",
});
