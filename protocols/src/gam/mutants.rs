//! GAM's mutants: deliberately broken variants that the fuzzer's checkers must catch
//! (`dmsim fuzz scenarios/gam/fuzz-small.json --mutant <name>`).

use serde::{Deserialize, Serialize};

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
    EvictingLineServesReads,
}

crate::mutant_table!(Mutant {
    "grant-without-invalidate" => GrantWithoutInvalidate:
        "a write miss is granted Exclusive while other sharers keep their copies",
    "read-ignores-owner" => ReadIgnoresOwner:
        "a read miss is served from memory without recalling the Exclusive owner",
    "recall-data-dropped" => RecallDataDropped:
        "the home drops the data a recalled owner returns with its Ack",
    "write-back-ignored" => WriteBackIgnored:
        "an evicted Exclusive block's write-back is acknowledged but not stored",
    "downgraded-owner-forgotten" => DowngradedOwnerForgotten:
        "after a downgrade the home forgets the former owner's Shared copy",
    "invalidate-keeps-copy" => InvalidateKeepsCopy:
        "a sharer acks an Invalidate but keeps reading its copy",
    "evicting-line-serves-reads" => EvictingLineServesReads:
        "an Exclusive line being written back stays Exclusive and readable until the home acks \
         (the bug of session 33: the home may already have granted the block elsewhere)",
});
