//! The run shape every benchmark scenario states in one of two spellings:
//!
//! | per unit | or in total | resolved to |
//! |---|---|---|
//! | `threads_per_node` | `threads_total` (split evenly over compute nodes) | threads per node |
//! | `ops_per_thread` | `ops_per_node` (split over the node's threads) | ops per thread |
//! | `cache_frames` | `cache_ratio` (fraction of the data, e.g. the paper's 8 GB : 48 GB) | frames |
//!
//! Exactly one spelling of each must be given; problems name the workload field.

use serde::{Deserialize, Serialize};

use crate::harness::Problem;

/// The shape fields as a scenario writes them (protocols embed these in their workload).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShapeFields {
    pub threads_per_node: Option<u32>,
    pub threads_total: Option<u32>,
    pub ops_per_thread: Option<u64>,
    pub ops_per_node: Option<u64>,
    pub cache_frames: Option<u32>,
    pub cache_ratio: Option<f64>,
}

/// The resolved shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunShape {
    pub threads_per_node: u32,
    pub ops_per_thread: u64,
    /// `None` when the protocol keeps no cache (or the scenario left it to the protocol).
    pub cache_frames: Option<u32>,
}

/// Resolve `fields` for `compute_nodes` nodes over `data_units` cacheable units (for
/// `cache_ratio`). `cache_required`: one of `cache_frames`/`cache_ratio` must be given.
pub fn resolve(
    fields: &ShapeFields,
    compute_nodes: u16,
    data_units: u64,
    cache_required: bool,
    out: &mut Vec<Problem>,
) -> RunShape {
    let nodes = compute_nodes as u32;
    let threads = match (fields.threads_per_node, fields.threads_total) {
        (Some(t), None) => t,
        (None, Some(total)) => {
            if nodes == 0 || !total.is_multiple_of(nodes) || total < nodes {
                out.push(Problem::new(
                    "workload.threads_total",
                    format!("{total} threads do not split evenly over {nodes} compute nodes"),
                ));
            }
            total / nodes.max(1)
        }
        _ => {
            out.push(Problem::new("workload", "give exactly one of threads_per_node and threads_total"));
            1
        }
    };
    if threads == 0 || threads > 512 {
        out.push(Problem::new("workload.threads_per_node", "must be in 1..=512"));
    }
    let ops_per_thread = match (fields.ops_per_thread, fields.ops_per_node) {
        (Some(o), None) => o,
        (None, Some(o)) => o / threads.max(1) as u64,
        _ => {
            out.push(Problem::new("workload", "give exactly one of ops_per_thread and ops_per_node"));
            1
        }
    };
    if ops_per_thread == 0 {
        out.push(Problem::new("workload.ops_per_thread", "must give every thread at least one operation"));
    }
    let cache_frames = match (fields.cache_frames, fields.cache_ratio) {
        (Some(f), None) => Some(f),
        (None, Some(r)) => {
            if !(r > 0.0 && r.is_finite()) {
                out.push(Problem::new("workload.cache_ratio", "must be a positive fraction of the data"));
            }
            Some((r * data_units as f64).ceil().min(u32::MAX as f64) as u32)
        }
        (None, None) if !cache_required => None,
        _ => {
            out.push(Problem::new("workload", "give exactly one of cache_frames and cache_ratio"));
            Some(0)
        }
    };
    // Out-of-range counts are reported above; the shape returned stays in range so callers can
    // size things from it before they look at `out`.
    RunShape { threads_per_node: threads.clamp(1, 512), ops_per_thread, cache_frames }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_split_and_bad_splits_are_named() {
        let f = ShapeFields {
            threads_total: Some(16),
            ops_per_node: Some(800),
            cache_ratio: Some(0.25),
            ..ShapeFields::default()
        };
        let mut out = Vec::new();
        let s = resolve(&f, 4, 1000, true, &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(s, RunShape { threads_per_node: 4, ops_per_thread: 200, cache_frames: Some(250) });
        let bad = ShapeFields { threads_total: Some(6), threads_per_node: None, ..f };
        resolve(&bad, 4, 1000, true, &mut out);
        assert_eq!(out[0].path, "workload.threads_total");
        let mut out = Vec::new();
        resolve(&ShapeFields { cache_ratio: None, ..f }, 4, 1000, true, &mut out);
        assert_eq!(out[0].reason, "give exactly one of cache_frames and cache_ratio");
    }
}
