//! Per-node counters (measured operations only).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::harness::NodeReport;

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
    /// Page-latch mode: waits of an exclusive latch holder for copies of its old page to be
    /// read out (an upgrade that served copies while it waited).
    #[serde(default)]
    pub pin_waits: u64,
    /// Requests this node's workers sent and handler replies it wrote.
    pub messages: u64,
    pub page_transfers: u64,
    /// Handler re-polls of a request it could not serve yet (R2).
    pub requeues: u64,
    /// Baselines (`conflicts`): acknowledgments sent to a directory (`Done`), and busy
    /// polling's refusals received (each followed by a back-off and a new request).
    pub acks: u64,
    pub retries: u64,
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
    /// Latest end of a measured operation (ns).
    pub measure_end_ns: u64,
    /// Record mode's timed runs (`workload.measure_ns`): the window's length, and the
    /// operations that completed inside it; open loop: operations started after their
    /// scheduled time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub completed_in_window: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub late_starts: u64,
    /// Pages this directory read from its device while other nodes held them in memory.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ssd_reads_with_sharers: u64,
    /// The ablation's local latch lines (`local.rs`): ns charged (waits, hand-offs, list lines).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub local_line_ns: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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
        self.pin_waits += o.pin_waits;
        self.messages += o.messages;
        self.page_transfers += o.page_transfers;
        self.requeues += o.requeues;
        self.acks += o.acks;
        self.retries += o.retries;
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
        self.measure_end_ns = self.measure_end_ns.max(o.measure_end_ns);
        self.measure_ns = self.measure_ns.or(o.measure_ns);
        self.completed_in_window += o.completed_in_window;
        self.late_starts += o.late_starts;
        self.ssd_reads_with_sharers += o.ssd_reads_with_sharers;
        self.local_line_ns += o.local_line_ns;
        self.measure_start_ns = match (self.measure_start_ns, o.measure_start_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// Per-node throughput and the latency spread (Fig. 6): node 0 (the directory of page 0, the
/// one page of a `pages_used: 1` run) against the other nodes, the slowest and fastest node,
/// the baselines' acknowledgments and refusals per operation, and the latency's p90 and
/// standard deviation. `nodes[i]`/`reports[i]` are node `i`'s. A node's throughput is its
/// measured operations over its own measured span (first start to last end): comparable
/// between nodes in a timed run (`workload.stop_at_ns`), where every node runs the same window;
/// with a fixed count of operations per worker every node does the same number.
pub fn per_node_metrics(nodes: &[&Stats], reports: &[NodeReport], m: &mut BTreeMap<String, f64>) {
    let kops: Vec<f64> = nodes
        .iter()
        .map(|s| {
            let span = s.measure_end_ns.saturating_sub(s.measure_start_ns.unwrap_or(0)) as f64 / 1e9;
            s.ops as f64 / span.max(1e-12) / 1e3
        })
        .collect();
    if let Some((first, rest)) = kops.split_first() {
        m.insert("node0_kops".into(), *first);
        if !rest.is_empty() {
            let others = rest.iter().sum::<f64>() / rest.len() as f64;
            m.insert("other_nodes_kops".into(), others);
            m.insert("node0_over_others".into(), if others > 0.0 { first / others } else { 0.0 });
        }
        m.insert("node_kops_min".into(), kops.iter().copied().fold(f64::INFINITY, f64::min));
        m.insert("node_kops_max".into(), kops.iter().copied().fold(0.0, f64::max));
    }
    let ops = nodes.iter().map(|s| s.ops).sum::<u64>().max(1) as f64;
    m.insert("acks_per_op".into(), nodes.iter().map(|s| s.acks).sum::<u64>() as f64 / ops);
    m.insert("retries_per_op".into(), nodes.iter().map(|s| s.retries).sum::<u64>() as f64 / ops);
    let mut samples: Vec<u64> = reports.iter().flat_map(|r| r.samples.iter().copied()).collect();
    if !samples.is_empty() {
        let n = samples.len() as f64;
        let mean = samples.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = samples.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        m.insert("latency_us_mean".into(), mean / 1e3);
        m.insert("latency_us_stddev".into(), var.sqrt() / 1e3);
        m.insert("latency_us_p90".into(), crate::common::metrics::percentile(&mut samples, 90.0) / 1e3);
    }
}
