//! FaRM's options (`protocol_options`).

use serde::{Deserialize, Serialize};

use super::mutants::Mutant;
use crate::workload::record_array::Backoff;

/// [CHOICE] costs, none given by the paper; chosen before any run, not fitted to a figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Handler tasks per node serving update requests (ScaleStore's message-handler count, 4).
    pub handler_tasks: u16,
    /// A worker's CPU per operation (ScaleStore's `request_ns`).
    pub op_ns: u64,
    /// A handler's CPU per update request (ScaleStore's `handler_ns`).
    pub handler_ns: u64,
    /// Time the record stays locked while the new value is copied in.
    pub install_ns: u64,
    /// Back-off between a failed validation or a rejected update and the next attempt.
    pub backoff: Backoff,
    /// Moving a record's cache line to a core that installs or reads it locally (ns): from a
    /// core of the same socket, and of the other socket (the constants of DEX's local-latch
    /// timing: ~100 ns on the same socket, 200 ns from the other; two sockets, workers
    /// alternating, handlers on socket 0 as ScaleStore's threads are "pinned to NUMA 0").
    pub line_local_ns: u64,
    pub line_remote_ns: u64,
    #[serde(skip)]
    pub mutant: Mutant,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            handler_tasks: 4,
            op_ns: 100,
            handler_ns: 300,
            install_ns: 50,
            backoff: Backoff::default(),
            line_local_ns: 100,
            line_remote_ns: 200,
            mutant: Mutant::None,
        }
    }
}

impl Config {
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.handler_tasks == 0 || self.handler_tasks > 64 {
            out.push("handler_tasks: must be in 1..=64".into());
        }
        if self.backoff.base_ns == 0 || self.backoff.cap_ns < self.backoff.base_ns {
            out.push("backoff: base_ns must be at least 1 and cap_ns at least base_ns".into());
        }
        out
    }
}
