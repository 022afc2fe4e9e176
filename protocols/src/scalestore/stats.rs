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
    /// Workers that found the cache full (each wait for a frame).
    pub frame_waits: u64,
    /// Pages read from / written to this node's storage device.
    pub ssd_reads: u64,
    pub ssd_writes: u64,
    /// This node's frames evicted, and evictions its directory (or the page's state) declined.
    pub evictions: u64,
    pub eviction_declines: u64,
    /// Eviction lists sent, and dirty pages this directory read back from a last holder.
    pub eviction_lists: u64,
    pub pulls: u64,
    /// Frames present at the end of the run.
    pub frames_used: u64,
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
        self.frame_waits += o.frame_waits;
        self.ssd_reads += o.ssd_reads;
        self.ssd_writes += o.ssd_writes;
        self.evictions += o.evictions;
        self.eviction_declines += o.eviction_declines;
        self.eviction_lists += o.eviction_lists;
        self.pulls += o.pulls;
        self.frames_used += o.frames_used;
        self.measure_start_ns = match (self.measure_start_ns, o.measure_start_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}
