//! Planted bugs the checkers must catch (`dmsim fuzz scenarios/selcc/tpcc-fuzz-small.json
//! --mutant <name>`). A mutant of one engine runs that engine whatever the scenario's `cc`.

use serde::{Deserialize, Serialize};

use super::engine::Cc;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mutant {
    #[default]
    None,
    EarlyReleaseShared,
    ReleaseBeforeInstall,
    IgnoreLockConflict,
    ToNoRtsUpdate,
    ToSkipWtsCheck,
    TimestampReused,
    OccSkipValidation,
    OccValidationSkipsWriteSet,
    OccNoWriteLock,
    OccNoVersionBump,
    DeliveryIgnoresDeleted,
}

impl Mutant {
    /// The engine the mutant breaks (`None`: the scenario's).
    pub fn engine(self) -> Option<Cc> {
        match self {
            Mutant::None => None,
            Mutant::EarlyReleaseShared | Mutant::ReleaseBeforeInstall | Mutant::IgnoreLockConflict => {
                Some(Cc::TwoPl)
            }
            Mutant::ToNoRtsUpdate | Mutant::ToSkipWtsCheck | Mutant::TimestampReused => Some(Cc::To),
            Mutant::OccSkipValidation
            | Mutant::OccValidationSkipsWriteSet
            | Mutant::OccNoWriteLock
            | Mutant::OccNoVersionBump => Some(Cc::Occ),
            Mutant::DeliveryIgnoresDeleted => None,
        }
    }
}

crate::mutant_table!(Mutant {
    "early-release-shared" => EarlyReleaseShared:
        "2PL: a read takes no shared lock that lasts to commit (it is released at once)",
    "release-before-install" => ReleaseBeforeInstall:
        "2PL: commit releases every lock first and installs the writes afterwards (each in its own latch section)",
    "ignore-lock-conflict" => IgnoreLockConflict:
        "2PL: a lock request that conflicts is granted anyway instead of aborting (no-wait ignored)",
    "to-no-rts-update" => ToNoRtsUpdate:
        "TO: a read does not raise the page's read timestamp",
    "to-skip-wts-check" => ToSkipWtsCheck:
        "TO: a read does not compare its timestamp with the page's write timestamp",
    "timestamp-reused" => TimestampReused:
        "TO: timestamps come from a per-thread counter instead of the global FAA generator, so threads reuse them",
    "occ-skip-validation" => OccSkipValidation:
        "OCC: commit installs without validating the read set",
    "occ-validation-skips-write-set" => OccValidationSkipsWriteSet:
        "OCC: validation checks only the pages read and not written, trusting the write set's locks",
    "occ-no-write-lock" => OccNoWriteLock:
        "OCC: commit validates and installs without write-locking the write set's pages",
    "occ-no-version-bump" => OccNoVersionBump:
        "OCC: installing a write does not bump the page version, so validation cannot see it",
    "delivery-ignores-deleted" => DeliveryIgnoresDeleted:
        "Delivery: an order whose NEW-ORDER row a transaction deleted after this one's index scan is delivered again (the row's deleted mark is not checked)",
});
