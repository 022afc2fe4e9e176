//! Per-node counters of the tree's operations (merged over nodes in `def.rs`).

use serde::{Deserialize, Serialize};

use crate::workload::scan_check::ScanRecord;

/// Operation kinds, in `Stats::kinds` order.
pub const KINDS: [&str; 4] = ["lookup", "update", "insert", "scan"];

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct KindStats {
    pub ops: u64,
    pub latency_ns_total: u64,
    pub nodes: u64,
    pub move_rights: u64,
    pub splits: u64,
    /// Lookups that found their key.
    pub found: u64,
}

impl KindStats {
    pub fn merge(&mut self, o: &KindStats) {
        self.ops += o.ops;
        self.latency_ns_total += o.latency_ns_total;
        self.nodes += o.nodes;
        self.move_rights += o.move_rights;
        self.splits += o.splits;
        self.found += o.found;
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Stats {
    pub kinds: [KindStats; 4],
    pub latencies: [Vec<u64>; 4],
    pub first_op_start_ns: Option<u64>,
    pub last_op_end_ns: u64,
    /// Splits during warm-up too (all splits the run made).
    pub splits_all: u64,
    pub root_reads: u64,
    /// Scans, for the no-skipped-key check (check mode only).
    pub scans: Vec<ScanRecord>,
    /// `workload.window`: client threads whose operations ran out before the window closed.
    #[serde(default)]
    pub window_short_threads: u64,
}

impl Stats {
    pub fn merge(&mut self, o: &Stats) {
        for i in 0..KINDS.len() {
            self.kinds[i].merge(&o.kinds[i]);
            self.latencies[i].extend_from_slice(&o.latencies[i]);
        }
        self.first_op_start_ns = match (self.first_op_start_ns, o.first_op_start_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_op_end_ns = self.last_op_end_ns.max(o.last_op_end_ns);
        self.splits_all += o.splits_all;
        self.root_reads += o.root_reads;
        self.window_short_threads += o.window_short_threads;
        self.scans.extend(o.scans.iter().cloned());
    }

    pub fn total(&self) -> KindStats {
        let mut t = KindStats::default();
        self.kinds.iter().for_each(|k| t.merge(k));
        t
    }
}
