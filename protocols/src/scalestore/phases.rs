//! Time-driven workloads of the paper's adaptation figures, over the tree's YCSB streams:
//! Fig. 9's workload shift (every `shift_every_ns` each node's workers move to the next
//! node's partition) and Fig. 10's elastic compute nodes (a node's workers run only inside its
//! active window), plus the ops-per-bucket timeline both figures plot.
//!
//! The stream reads the node's virtual clock when the worker asks for its next operation;
//! the worker's previous operation completed at that same instant (nothing awaits between the
//! two), so the completion is counted there.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::workload::ycsb::{YcsbOp, YcsbStream};

/// The time-driven options of `blink-scalestore` (all 0: off).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Phases {
    /// With `partitioned`: node `n`'s workers access partition `(n + ⌊t / shift_every_ns⌋) mod
    /// nodes` (Fig. 9: "we reassign Node 0 to access data in the partition of Node 1").
    pub shift_every_ns: u64,
    /// No operation starts at or after this time (a timed run; `ops_per_thread` stays a cap
    /// per partition stream).
    pub stop_at_ns: u64,
    /// Operations completed per bucket of this many ns, per node (0: no timeline).
    pub timeline_bucket_ns: u64,
    /// `window_mops`: throughput of the buckets in `[timeline_at_ns, + timeline_window_ns)`.
    pub timeline_at_ns: u64,
    pub timeline_window_ns: u64,
}

impl Phases {
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.timeline_window_ns > 0 {
            if self.timeline_bucket_ns == 0 {
                out.push("timeline_window_ns: needs timeline_bucket_ns".into());
            } else if !self.timeline_window_ns.is_multiple_of(self.timeline_bucket_ns)
                || !self.timeline_at_ns.is_multiple_of(self.timeline_bucket_ns)
            {
                out.push("timeline_window_ns: the window and timeline_at_ns must be whole buckets".into());
            }
        }
        if self.timeline_bucket_ns > 0 && self.stop_at_ns == 0 {
            out.push("timeline_bucket_ns: needs stop_at_ns (a timed run)".into());
        }
        if self.stop_at_ns > 0
            && self.timeline_bucket_ns > 0
            && self.stop_at_ns / self.timeline_bucket_ns > 1 << 20
        {
            out.push("timeline_bucket_ns: at most 2^20 buckets before stop_at_ns".into());
        }
        out
    }

    /// When workers stop starting operations: `stop_at_ns`, or the end of the reported window
    /// if that is earlier (nothing after it is reported, and nothing before it depends on what
    /// starts later, so each window of a timeline costs only the run up to it).
    pub fn last_start_ns(&self) -> u64 {
        match self.timeline_window_ns {
            0 => self.stop_at_ns,
            w => self.stop_at_ns.min(self.timeline_at_ns.saturating_add(w)),
        }
    }

    /// `window_mops` from a node's timeline sum, if a window is set.
    pub fn window_mops(&self, timeline: &[u64]) -> Option<f64> {
        if self.timeline_window_ns == 0 || self.timeline_bucket_ns == 0 {
            return None;
        }
        let first = (self.timeline_at_ns / self.timeline_bucket_ns) as usize;
        let count = (self.timeline_window_ns / self.timeline_bucket_ns) as usize;
        let ops: u64 = timeline.iter().skip(first).take(count).sum();
        Some(ops as f64 / (self.timeline_window_ns as f64 / 1e3))
    }
}

/// Adds bucket counts of `b` into `a`.
pub fn merge_timeline(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// One worker's operations: partition `(home + shift) mod n`'s stream while the node is
/// active, nothing after `stop_at_ns`.
pub struct PhasedStream<C: Fn() -> u64> {
    /// One stream per partition (a single stream when not partitioned or never shifting).
    streams: Vec<YcsbStream>,
    home: usize,
    phases: Phases,
    /// The node's active window `[from, until)` (Fig. 10's compute nodes; else everything).
    active: (u64, u64),
    clock: C,
    timeline: Arc<Mutex<Vec<u64>>>,
    asked: bool,
}

impl<C: Fn() -> u64> PhasedStream<C> {
    pub fn new(
        streams: Vec<YcsbStream>,
        home: usize,
        phases: Phases,
        active: (u64, u64),
        clock: C,
        timeline: Arc<Mutex<Vec<u64>>>,
    ) -> Self {
        assert!(home < streams.len(), "a worker's home partition has a stream");
        PhasedStream { streams, home, phases, active, clock, timeline, asked: false }
    }

    fn count_completion(&self, now: u64) {
        let bucket = self.phases.timeline_bucket_ns;
        if bucket == 0 {
            return;
        }
        let at = (now / bucket) as usize;
        let mut t = self.timeline.lock().unwrap_or_else(|e| e.into_inner());
        if t.len() <= at {
            t.resize(at + 1, 0);
        }
        t[at] += 1;
    }
}

impl<C: Fn() -> u64> Iterator for PhasedStream<C> {
    type Item = YcsbOp;

    fn next(&mut self) -> Option<YcsbOp> {
        let now = (self.clock)();
        if std::mem::replace(&mut self.asked, true) {
            self.count_completion(now);
        }
        let stop = match self.phases.last_start_ns() {
            0 => self.active.1,
            s => s.min(self.active.1),
        };
        if now >= stop || now < self.active.0 {
            // The workers of a node not yet active sleep until its window opens before they
            // ask (see `tree_def.rs`), so this is the end of the window.
            return None;
        }
        let n = self.streams.len();
        let shift = match self.phases.shift_every_ns {
            0 => 0,
            every => (now / every) as usize,
        };
        self.streams[(self.home + shift) % n].next()
    }
}

/// Fig. 10's decoupled cluster: the first `storage_nodes` nodes hold every directory and
/// page (and run no workers); the others are compute nodes with a small cache, joining one
/// every `join_every_ns` and leaving in reverse order ("We start with a single compute node
/// and add another compute node every 30 seconds until we reach three nodes, after which we
/// disable them one by one again").
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Elastic {
    pub storage_nodes: u64,
    pub join_every_ns: u64,
    /// A compute node's cache as a share of the loaded pages (a storage node's is
    /// `workload.cache_frames`/`cache_ratio`).
    pub compute_cache_ratio: f64,
}

impl Elastic {
    pub fn validate(&self, nodes: u64) -> Vec<String> {
        let mut out = Vec::new();
        if self.storage_nodes == 0 || self.storage_nodes >= nodes {
            out.push(format!("storage_nodes: must be in 1..{nodes} (the rest are compute nodes)"));
        }
        if self.join_every_ns == 0 {
            out.push("join_every_ns: must be positive".into());
        }
        if !(self.compute_cache_ratio > 0.0 && self.compute_cache_ratio <= 1.0) {
            out.push("compute_cache_ratio: must be in (0, 1]".into());
        }
        out
    }

    /// Compute node `c` (0-based among the compute nodes, of `count`) runs in
    /// `[c·J, (2·count − 1 − c)·J)`: 1, 2, …, count, …, 2, 1 nodes in successive periods.
    pub fn window(&self, c: u64, count: u64) -> (u64, u64) {
        let j = self.join_every_ns;
        (c.saturating_mul(j), (2 * count - 1 - c).saturating_mul(j))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_nodes_join_then_leave_in_reverse() {
        let e = Elastic { storage_nodes: 2, join_every_ns: 10, compute_cache_ratio: 0.1 };
        let w: Vec<_> = (0..3).map(|c| e.window(c, 3)).collect();
        assert_eq!(w, vec![(0, 50), (10, 40), (20, 30)]);
        let active = |t: u64| w.iter().filter(|(a, b)| *a <= t && t < *b).count();
        assert_eq!((0..5).map(|p| active(p * 10 + 5)).collect::<Vec<_>>(), vec![1, 2, 3, 2, 1]);
    }

    #[test]
    fn window_throughput_counts_whole_buckets() {
        let p = Phases {
            stop_at_ns: 4000,
            timeline_bucket_ns: 1000,
            timeline_at_ns: 1000,
            timeline_window_ns: 2000,
            ..Phases::default()
        };
        assert!(p.validate().is_empty());
        // 10 + 20 operations over 2 µs: 15 Mops.
        assert_eq!(p.window_mops(&[5, 10, 20, 40]), Some(15.0));
        assert!(!Phases { timeline_at_ns: 500, ..p }.validate().is_empty());
    }
}
