//! SELCC's metrics from its compute nodes' statistics.
//!
//! `throughput_mops`, `cache_hit_ratio`, `invalidation_ratio`, `latency_us_avg`,
//! `messages_per_op`, `retries_per_op`, `rt_<case>` (mean round trips per op in that case; `_min`/`_max` the fewest/most) and
//! `share_<case>` (fraction of ops), `rt_evict_per_op` (round trips threads spent evicting
//! synchronously, per op; only with batched eviction off, and not in `rt_per_op`), plus the common per-node throughput and fairness metrics
//! ([`crate::common::metrics`]) and, for Fig. 15b, `writer_vs_reader` and `timeline_cum_ops`.

use std::collections::BTreeMap;

use super::stats::{OpCase, Stats};
use super::Config;
use crate::common::metrics::{cumulative_ops, per_node_throughput, progress_fairness};

fn case_name(case: OpCase) -> &'static str {
    match case {
        OpCase::Hit => "hit",
        OpCase::RemoteFetch => "remote_fetch",
        OpCase::Upgrade => "upgrade",
        OpCase::UpgradeFallback => "upgrade_fallback",
        OpCase::WriterVsModified => "writer_vs_modified",
        OpCase::ReaderVsModified => "reader_vs_modified",
        OpCase::WriterVsShared => "writer_vs_shared",
        OpCase::Retried => "retried",
    }
}

/// Metrics over the compute nodes' `per_node` statistics (by compute index).
pub fn metrics(
    per_node: &[Stats],
    config: &Config,
    write_only_nodes: u16,
    timeline: Option<(u64, Option<u16>)>,
) -> BTreeMap<String, f64> {
    let mut t = Stats::default();
    for s in per_node {
        t.merge(s);
    }
    let ops = t.ops.max(1) as f64;
    let mut m = BTreeMap::new();
    m.insert("throughput_mops".into(), t.throughput_ops_per_s() / 1e6);
    m.insert("ops".into(), t.ops as f64);
    m.insert("cache_hit_ratio".into(), t.hit_ratio());
    m.insert("invalidation_ratio".into(), t.invalidation_ratio());
    m.insert("latency_us_avg".into(), t.latency_ns_total as f64 / ops / 1e3);
    m.insert("messages_per_op".into(), t.messages_sent as f64 / ops);
    m.insert("retries_per_op".into(), t.latch_retries as f64 / ops);
    m.insert("evictions_per_op".into(), t.evictions as f64 / ops);
    m.insert("flushed_bytes_per_op".into(), t.flushed_bytes as f64 / ops);
    m.insert("handovers_per_op".into(), t.handovers as f64 / ops);
    m.insert("lease_releases_per_op".into(), t.lease_releases as f64 / ops);
    let mut rt_total = 0u64;
    for (case, s) in &t.by_case {
        let name = case_name(*case);
        m.insert(format!("rt_{name}"), s.mean());
        m.insert(format!("rt_{name}_max"), s.round_trips_max as f64);
        // The fewest: the case's path without contention (what the paper's Fig. 7-8 draw).
        m.insert(format!("rt_{name}_min"), s.round_trips_min as f64);
        m.insert(format!("share_{name}"), s.ops as f64 / ops);
        rt_total += s.round_trips;
    }
    m.insert("rt_per_op".into(), rt_total as f64 / ops);
    if !config.batched_eviction {
        m.insert("rt_evict_per_op".into(), t.evict_round_trips as f64 / ops);
    }
    let mops: Vec<f64> = per_node.iter().map(|s| s.throughput_ops_per_s() / 1e6).collect();
    per_node_throughput(&mops, &mut m);
    let timelines: Vec<&[u64]> = per_node.iter().map(|s| s.timeline.as_slice()).collect();
    let ends: Vec<u64> = per_node.iter().map(|s| s.last_op_end_ns).collect();
    progress_fairness(&timelines, &ends, config.timeline_bucket_ns, write_only_nodes as usize, &mut m);
    if config.crash_recovery {
        m.insert("crashes_recovered".into(), t.crashes_recovered as f64);
        m.insert("latches_recovered".into(), t.latches_recovered as f64);
        let (early, late, slowest) = quarters(&timelines, &ends, config.timeline_bucket_ns);
        m.insert("first_quarter_mops".into(), early);
        m.insert("last_quarter_mops".into(), late);
        m.insert("slowest_window_mops".into(), slowest);
    }
    if let Some((at, node)) = timeline {
        m.insert(
            "timeline_cum_ops".into(),
            cumulative_ops(&timelines, config.timeline_bucket_ns, at, node.map(|n| n as usize)),
        );
    }
    m
}

/// Crash recovery's view of the run, from every node's ops-per-bucket timeline: throughput
/// (Mops) in the first and the last quarter of the run (until the last op of any node), and the
/// slowest bucket's throughput in the middle half (buckets of the first and last quarter are
/// left out: warm-up and clients finishing at different times), where a crash's stall shows.
fn quarters(timelines: &[&[u64]], ends: &[u64], bucket_ns: u64) -> (f64, f64, f64) {
    let end = ends.iter().copied().max().unwrap_or(0);
    let buckets = end.div_ceil(bucket_ns.max(1)) as usize;
    if buckets == 0 {
        return (0.0, 0.0, 0.0);
    }
    let total: Vec<u64> =
        (0..buckets).map(|b| timelines.iter().map(|t| t.get(b).copied().unwrap_or(0)).sum()).collect();
    let quarter = buckets.div_ceil(4);
    let rate = |ops: u64, n: usize| ops as f64 / (n as u64 * bucket_ns) as f64 * 1e3;
    let first: u64 = total[..quarter].iter().sum();
    let last: u64 = total[buckets - quarter..].iter().sum();
    let middle = &total[quarter.min(buckets)..(buckets - quarter).max(quarter.min(buckets))];
    let slowest = middle.iter().copied().min().map_or(0.0, |ops| rate(ops, 1));
    (rate(first, quarter), rate(last, quarter), slowest)
}
