//! Per-operation-type counters of one compute node.

use serde::{Deserialize, Serialize};

use crate::nic::Verb;

/// Operation kinds, in report order.
pub const KINDS: [&str; 5] = ["lookup", "update", "insert", "scan", "delete"];

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpStats {
    pub ops: u64,
    pub reads: u64,
    pub writes: u64,
    pub atomics: u64,
    pub bytes: u64,
    /// Failed lock CASes, version-check re-reads and stale-cache restarts.
    pub retries: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub latency_ns_total: u64,
    /// Lock acquisitions served by hand-over (no CAS).
    pub handovers: u64,
    pub splits: u64,
    /// Lookups that found the key.
    pub found: u64,
    /// Two-sided messages (DEX's offload RPCs).
    #[serde(default)]
    pub two_sided: u64,
    /// Time spent waiting for local locks (DEX's cooling structure), ns.
    #[serde(default)]
    pub lock_wait_ns: u64,
    /// DEX: inner nodes fetched into the cache, and evicted from it.
    #[serde(default)]
    pub inner_fetches: u64,
    #[serde(default)]
    pub inner_evictions: u64,
    /// DEX: offloads whose subtree root is a level-1 node.
    #[serde(default)]
    pub offloads_level1: u64,
}

impl OpStats {
    /// Count verbs about to be posted: by kind, and their payload bytes.
    pub fn count_verbs<'a>(&mut self, verbs: impl IntoIterator<Item = &'a Verb>) {
        for v in verbs {
            match v {
                Verb::Read { .. } => self.reads += 1,
                Verb::Write { .. } | Verb::WriteWord { .. } => self.writes += 1,
                _ => self.atomics += 1,
            }
            self.bytes += v.payload_bytes() as u64;
        }
    }

    pub fn merge(&mut self, o: &OpStats) {
        self.ops += o.ops;
        self.reads += o.reads;
        self.writes += o.writes;
        self.atomics += o.atomics;
        self.bytes += o.bytes;
        self.retries += o.retries;
        self.cache_hits += o.cache_hits;
        self.cache_misses += o.cache_misses;
        self.latency_ns_total += o.latency_ns_total;
        self.handovers += o.handovers;
        self.splits += o.splits;
        self.two_sided += o.two_sided;
        self.lock_wait_ns += o.lock_wait_ns;
        self.inner_fetches += o.inner_fetches;
        self.inner_evictions += o.inner_evictions;
        self.offloads_level1 += o.offloads_level1;
        self.found += o.found;
    }
}

/// A compute node's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Indexed like [`KINDS`].
    pub kinds: Vec<OpStats>,
    /// Latency samples (ns) per kind, measured operations only.
    pub latencies: Vec<Vec<u64>>,
    pub first_op_start_ns: Option<u64>,
    pub last_op_end_ns: u64,
    /// Per thread, measured operations over that thread's own measured span (ops/ns), summed
    /// over threads: the DEX artifact's throughput (`newbench.cpp` sums per-thread rates).
    #[serde(default)]
    pub thread_rate_sum: f64,
    /// The latest first measured operation's start among threads (warm-up ends at different
    /// times in different threads).
    #[serde(default)]
    pub first_op_start_max_ns: u64,
    /// Completed scans, when the run logs histories ([`crate::workload::scan_check`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scans: Vec<crate::workload::scan_check::ScanRecord>,
    /// `leaf_cache`: the compute node's DiFache counters over the measured operations (its
    /// latency samples dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaf_cache: Option<crate::difache::stats::Stats>,
    /// `leaf_cache`: this node's logged operations, kept out of `NodeReport::history` because
    /// DiFache promises regular reads, not linearizable ones (`check::check_leaf_cache_history`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leaf_log: Vec<crate::harness::LoggedOp>,
    /// `window`: client threads whose operations ran out before the window closed (the
    /// throughput then undercounts; the metric `window_threads_out_of_ops` says so).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub window_short_threads: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Stats {
    pub fn new() -> Stats {
        Stats {
            kinds: vec![OpStats::default(); KINDS.len()],
            latencies: vec![Vec::new(); KINDS.len()],
            ..Stats::default()
        }
    }

    pub fn merge(&mut self, o: &Stats) {
        if self.kinds.is_empty() {
            *self = Stats::new();
        }
        for (a, b) in self.kinds.iter_mut().zip(&o.kinds) {
            a.merge(b);
        }
        for (a, b) in self.latencies.iter_mut().zip(&o.latencies) {
            a.extend_from_slice(b);
        }
        self.first_op_start_ns = match (self.first_op_start_ns, o.first_op_start_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_op_end_ns = self.last_op_end_ns.max(o.last_op_end_ns);
        self.thread_rate_sum += o.thread_rate_sum;
        self.first_op_start_max_ns = self.first_op_start_max_ns.max(o.first_op_start_max_ns);
        self.window_short_threads += o.window_short_threads;
        if let Some(b) = &o.leaf_cache {
            self.leaf_cache.get_or_insert_with(Default::default).merge(b);
        }
    }

    pub fn total(&self) -> OpStats {
        let mut t = OpStats::default();
        for k in &self.kinds {
            t.merge(k);
        }
        t
    }
}
