//! What a compute node counts, per operation type: the DEX Table 2 columns (RDMA reads, writes,
//! atomics and bytes per operation), retries, cache use, delegation and combining, latencies.

use serde::{Deserialize, Serialize};

use crate::nic::{Verb, VerbClass};

/// The index operations a workload issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Lookup,
    Update,
    Insert,
    Delete,
    Scan,
}

impl OpKind {
    pub const ALL: [OpKind; 5] =
        [OpKind::Lookup, OpKind::Update, OpKind::Insert, OpKind::Delete, OpKind::Scan];

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Lookup => "lookup",
            OpKind::Update => "update",
            OpKind::Insert => "insert",
            OpKind::Delete => "delete",
            OpKind::Scan => "scan",
        }
    }
}

/// The verbs one operation (or one thread's whole run) posted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerbCounts {
    pub reads: u64,
    pub writes: u64,
    pub atomics: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub atomic_bytes: u64,
}

impl VerbCounts {
    pub fn count(&mut self, verbs: &[Verb]) {
        for v in verbs {
            let bytes = v.payload_bytes() as u64;
            match v.class() {
                VerbClass::Read => (self.reads, self.read_bytes) = (self.reads + 1, self.read_bytes + bytes),
                VerbClass::Write => {
                    (self.writes, self.write_bytes) = (self.writes + 1, self.write_bytes + bytes)
                }
                VerbClass::Atomic => {
                    (self.atomics, self.atomic_bytes) = (self.atomics + 1, self.atomic_bytes + 8)
                }
                VerbClass::Send => {}
            }
        }
    }

    pub fn merge(&mut self, o: &VerbCounts) {
        self.reads += o.reads;
        self.writes += o.writes;
        self.atomics += o.atomics;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.atomic_bytes += o.atomic_bytes;
    }

    pub fn bytes(&self) -> u64 {
        self.read_bytes + self.write_bytes + self.atomic_bytes
    }
}

/// One operation type's totals on a node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KindStats {
    pub ops: u64,
    pub verbs: VerbCounts,
    /// Re-reads and re-tries inside operations: torn leaves, invalid entries, lost CASes.
    pub retries: u64,
    /// Traversals (operations that went remote) and those that started from a cached node.
    pub traversals: u64,
    pub cache_hits: u64,
    /// Operations answered by another thread's round (read delegation / write combining).
    pub shared: u64,
    pub latency_ns_total: u64,
    pub latencies_ns: Vec<u64>,
}

impl KindStats {
    pub fn merge(&mut self, o: &KindStats) {
        self.ops += o.ops;
        self.verbs.merge(&o.verbs);
        self.retries += o.retries;
        self.traversals += o.traversals;
        self.cache_hits += o.cache_hits;
        self.shared += o.shared;
        self.latency_ns_total += o.latency_ns_total;
        self.latencies_ns.extend_from_slice(&o.latencies_ns);
    }
}

/// A compute node's totals.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Indexed like [`OpKind::ALL`].
    pub kinds: Vec<KindStats>,
    pub first_op_start_ns: Option<u64>,
    pub cache_evictions: u64,
    pub cache_bytes: u64,
    /// Scans whose result was not strictly ascending (a broken index).
    pub scan_order_violations: u64,
    /// `workload.window`: client coroutines whose operations ran out before the window closed.
    #[serde(default)]
    pub window_short_clients: u64,
    /// Each client thread's measured operations over its own measured span (first start to
    /// last end, all its coroutines), summed, in operations per ns (`thread_mops`).
    #[serde(default)]
    pub thread_rate_sum: f64,
    /// Completed scans, when the run logs histories ([`crate::workload::scan_check`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scans: Vec<crate::workload::scan_check::ScanRecord>,
}

impl Stats {
    pub fn new() -> Stats {
        Stats { kinds: vec![KindStats::default(); OpKind::ALL.len()], ..Stats::default() }
    }

    pub fn kind(&self, k: OpKind) -> &KindStats {
        &self.kinds[k as usize]
    }

    pub fn kind_mut(&mut self, k: OpKind) -> &mut KindStats {
        if self.kinds.len() < OpKind::ALL.len() {
            self.kinds.resize(OpKind::ALL.len(), KindStats::default());
        }
        &mut self.kinds[k as usize]
    }

    pub fn merge(&mut self, o: &Stats) {
        for k in OpKind::ALL {
            if let Some(s) = o.kinds.get(k as usize) {
                self.kind_mut(k).merge(s);
            }
        }
        self.first_op_start_ns = match (self.first_op_start_ns, o.first_op_start_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.cache_evictions += o.cache_evictions;
        self.cache_bytes += o.cache_bytes;
        self.scan_order_violations += o.scan_order_violations;
        self.window_short_clients += o.window_short_clients;
        self.thread_rate_sum += o.thread_rate_sum;
    }

    /// All operation types together.
    pub fn total(&self) -> KindStats {
        let mut t = KindStats::default();
        for s in &self.kinds {
            t.merge(s);
        }
        t
    }
}
