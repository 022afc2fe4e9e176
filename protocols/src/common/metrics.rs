//! Metrics that mean the same thing for every protocol, computed from per-node counts.

use std::collections::BTreeMap;

/// Per-node throughput (`node<i>_mops`, `node_mops_min`/`max`) and Jain's fairness index over it
/// (`fairness_jain`: 1 when every node ran equally fast).
pub fn per_node_throughput(mops: &[f64], m: &mut BTreeMap<String, f64>) {
    for (i, v) in mops.iter().enumerate() {
        m.insert(format!("node{i}_mops"), *v);
    }
    let (min, max) = mops.iter().fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(*v), b.max(*v)));
    m.insert("node_mops_min".into(), if mops.is_empty() { 0.0 } else { min });
    m.insert("node_mops_max".into(), max);
    m.insert("fairness_jain".into(), jain(mops));
}

/// Jain's index `(Σx)² / (n·Σx²)`; 0 for no data.
pub fn jain(values: &[f64]) -> f64 {
    let sum: f64 = values.iter().sum();
    let sq: f64 = values.iter().map(|v| v * v).sum();
    if sq > 0.0 {
        sum * sum / (values.len() as f64 * sq)
    } else {
        0.0
    }
}

/// Operations each node completed by the time the first node finished, from per-node
/// timelines (ops completed per `bucket_ns` bucket) and each node's last completion time:
/// `fairness_min_max` is min/max of those counts; with `writer_nodes` k > 0 also
/// `writer_vs_reader`, the first k nodes' mean over the others' (a starving writer shows ≪ 1).
pub fn progress_fairness(
    timelines: &[&[u64]],
    last_end_ns: &[u64],
    bucket_ns: u64,
    writer_nodes: usize,
    m: &mut BTreeMap<String, f64>,
) {
    let bucket = bucket_ns.max(1);
    let first_end = last_end_ns.iter().copied().min().unwrap_or(0);
    let upto = (first_end / bucket) as usize;
    let done: Vec<u64> = timelines.iter().map(|t| t.iter().take(upto + 1).sum()).collect();
    let (dmin, dmax) = done.iter().fold((u64::MAX, 0u64), |(a, b), v| (a.min(*v), b.max(*v)));
    m.insert("fairness_min_max".into(), if dmax > 0 { dmin as f64 / dmax as f64 } else { 0.0 });
    if writer_nodes > 0 && done.len() > writer_nodes {
        let k = writer_nodes;
        let writers = done[..k].iter().sum::<u64>() as f64 / k as f64;
        let readers = done[k..].iter().sum::<u64>() as f64 / (done.len() - k) as f64;
        m.insert("writer_vs_reader".into(), if readers > 0.0 { writers / readers } else { 0.0 });
    }
}

/// `timeline_cum_ops`: operations completed in buckets wholly before `at_ns` (bucket k covers
/// `[k·b, (k+1)·b)`), by one node or all.
pub fn cumulative_ops(timelines: &[&[u64]], bucket_ns: u64, at_ns: u64, node: Option<usize>) -> f64 {
    let whole = (at_ns / bucket_ns.max(1)) as usize;
    let count = |t: &&[u64]| t.iter().take(whole).sum::<u64>();
    match node {
        Some(n) => timelines.get(n).map(count).unwrap_or(0) as f64,
        None => timelines.iter().map(count).sum::<u64>() as f64,
    }
}

/// Percentile (0..=100) of an unsorted sample, nearest-rank; 0 for an empty sample.
pub fn percentile(samples: &mut [u64], pct: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable();
    let rank = ((pct / 100.0) * samples.len() as f64).ceil().max(1.0) as usize;
    samples[rank.min(samples.len()) - 1] as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fairness_of_equal_and_starved_nodes() {
        assert_eq!(jain(&[2.0, 2.0, 2.0]), 1.0);
        assert!((jain(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
        let mut m = BTreeMap::new();
        // Node 0 (a writer) did 1 op per bucket, node 1 did 4; node 0 finished first at 2.5 b.
        progress_fairness(&[&[1, 1, 1], &[4, 4, 4, 4]], &[25, 40], 10, 1, &mut m);
        assert_eq!(m["fairness_min_max"], 0.25);
        assert_eq!(m["writer_vs_reader"], 0.25);
        assert_eq!(cumulative_ops(&[&[1, 1, 1], &[4, 4, 4, 4]], 10, 20, None), 10.0);
        assert_eq!(cumulative_ops(&[&[1, 1, 1], &[4, 4, 4, 4]], 10, 20, Some(1)), 8.0);
    }
}
