//! NAM-DB's options (`protocol_options`).

use serde::{Deserialize, Serialize};

use super::mutants::Mutant;
use crate::workload::record_array::Backoff;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// A worker's CPU per operation (building work requests, copying the record). [CHOICE]
    /// 100 ns, ScaleStore's `request_ns`; not fitted to any figure.
    pub op_ns: u64,
    /// Back-off between latch attempts.
    pub backoff: Backoff,
    #[serde(skip)]
    pub mutant: Mutant,
}

impl Default for Config {
    fn default() -> Self {
        Config { op_ns: 100, backoff: Backoff::default(), mutant: Mutant::None }
    }
}

impl Config {
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.backoff.base_ns == 0 || self.backoff.cap_ns < self.backoff.base_ns {
            out.push("backoff: base_ns must be at least 1 and cap_ns at least base_ns".into());
        }
        out
    }
}
