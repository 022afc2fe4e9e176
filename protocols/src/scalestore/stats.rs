//! Per-node counters (measured operations only).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Stats {
    pub ops: u64,
    pub reads: u64,
    /// Operations served on the local hot path.
    pub hits: u64,
    /// Remote invocations by case.
    pub base_cases: u64,
    pub exclusive_conflicts: u64,
    pub shared_conflicts: u64,
    pub upgrades: u64,
    pub copy_restarts: u64,
    /// Requests this node's workers sent and handler replies it wrote.
    pub messages: u64,
    pub page_transfers: u64,
    /// Handler re-polls of a request it could not serve yet (R2).
    pub requeues: u64,
    /// Page-latch mode: latches taken, and those served on the local hot path.
    pub latches: u64,
    pub latch_hits: u64,
    /// Earliest start of a measured operation (ns).
    pub measure_start_ns: Option<u64>,
}

impl Stats {
    pub fn merge(&mut self, o: &Stats) {
        self.ops += o.ops;
        self.reads += o.reads;
        self.hits += o.hits;
        self.base_cases += o.base_cases;
        self.exclusive_conflicts += o.exclusive_conflicts;
        self.shared_conflicts += o.shared_conflicts;
        self.upgrades += o.upgrades;
        self.copy_restarts += o.copy_restarts;
        self.messages += o.messages;
        self.page_transfers += o.page_transfers;
        self.requeues += o.requeues;
        self.latches += o.latches;
        self.latch_hits += o.latch_hits;
        self.measure_start_ns = match (self.measure_start_ns, o.measure_start_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}
