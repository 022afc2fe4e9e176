//! Marlin's definition (`protocol: "marlin"`): Sherman's plan ([`ShermanPlan`]) with leaves of
//! item pointers. `workload` is the YCSB section Sherman reads; `protocol_options` are
//! Sherman's (presets `default` = `marlin`: Sherman's node versions, and `line`), without
//! `partitioned`, `lock_version` and `version_reads`. Metrics are Sherman's;
//! `bulk_memory_bytes_per_key` also counts a Spear word per node and a 16-byte item per key.

use crate::harness::{PointSpec, Problem, Protocol};
use crate::sherman::ShermanPlan;

#[derive(Clone, Copy)]
pub struct Marlin;

impl Protocol for Marlin {
    type Plan = ShermanPlan;

    fn names(&self) -> &'static [&'static str] {
        &["marlin"]
    }

    fn about(&self) -> &'static str {
        "Marlin: Sherman's B+-tree with leaves of item pointers, Spear (FAA ternary lock) and CAS-published items (ICPP'23), as the Dolphin paper describes it, on YCSB"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<ShermanPlan, Vec<Problem>> {
        ShermanPlan::new_variant(point, true)
    }
}
