//! Metrics (spec §8.11): plain structs a runner reads at the end of a run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::nic::Nanos;

/// How an operation got its ownership, for the round-trips-per-case metric (§3.4/§3.5 claims:
/// remote fetch 1, Case 1 with handover+forwarding 3, naive Case 1 and Case 3 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum OpCase {
    /// Valid local copy: no RDMA.
    Hit,
    /// Miss without conflict: latch atomic + READ in one batch.
    RemoteFetch,
    /// Shared → Modified by one CAS.
    Upgrade,
    /// Upgrade failed K times and fell back to release-then-acquire.
    UpgradeFallback,
    /// Conflict resolved by an invalidation of this kind (the last one sent).
    WriterVsModified,
    ReaderVsModified,
    WriterVsShared,
    /// Resolved only by retrying the latch (SEL, or every message dropped).
    Retried,
}

/// Per-case totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseStats {
    pub ops: u64,
    pub round_trips: u64,
    pub round_trips_min: u32,
    pub round_trips_max: u32,
}

impl CaseStats {
    fn add(&mut self, round_trips: u32) {
        if self.ops == 0 || round_trips < self.round_trips_min {
            self.round_trips_min = round_trips;
        }
        self.round_trips_max = self.round_trips_max.max(round_trips);
        self.ops += 1;
        self.round_trips += round_trips as u64;
    }

    pub fn mean(&self) -> f64 {
        if self.ops == 0 {
            0.0
        } else {
            self.round_trips as f64 / self.ops as f64
        }
    }
}

/// What one operation did, accumulated while it runs.
///
/// [CHOICE] (`NEEDS.md`, synchronous eviction): `case` and `round_trips` describe how the op got
/// its *ownership*, the quantity of the paper's 1/3/4 round-trip claims. A thread that found no
/// free frame and evicted one itself (batched eviction off) spent round trips on its critical
/// path that acquire nothing (§5.2: "additional RDMA round trips may be added to the critical
/// path"); they go to `evict_round_trips`. So an op that evicted and then found its line loaded
/// by another local thread is a hit (no ownership RDMA), like an op that waited on the local
/// latch while that thread fetched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpTrace {
    pub case: OpCase,
    /// Serial network steps on the requester's critical path to ownership: its own verb
    /// batches, one per invalidation broadcast, plus the victim's serial batches reported in the
    /// reply.
    pub round_trips: u32,
    /// Serial network steps this op's thread spent evicting synchronously before it had a frame
    /// (a dropped reply to a memorised message, the release batch); 0 with batched eviction.
    pub evict_round_trips: u32,
    pub messages: u32,
    pub retries: u32,
    pub write: bool,
    pub started: Nanos,
}

impl OpTrace {
    pub fn new(write: bool, started: Nanos) -> OpTrace {
        OpTrace {
            case: OpCase::Hit,
            round_trips: 0,
            evict_round_trips: 0,
            messages: 0,
            retries: 0,
            write,
            started,
        }
    }
}

/// One compute node's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub ops: u64,
    pub reads: u64,
    pub writes: u64,
    /// Ops served from a valid local copy (no RDMA).
    pub hits: u64,
    /// Ops that sent at least one invalidation message (Fig. 12 bars).
    pub invalidation_ops: u64,
    pub messages_sent: u64,
    pub messages_received: u64,
    pub replies_forwarded: u64,
    pub replies_granted: u64,
    pub replies_released: u64,
    pub replies_dropped: u64,
    /// Messages memorised at a busy frame (served later or displaced).
    pub messages_deferred: u64,
    pub handovers: u64,
    /// Crash recovery: dead nodes this node recovered, latch words it cleaned.
    #[serde(default)]
    pub crashes_recovered: u64,
    #[serde(default)]
    pub latches_recovered: u64,
    pub downgrades: u64,
    pub shared_releases: u64,
    pub upgrades: u64,
    pub upgrade_fallbacks: u64,
    pub latch_retries: u64,
    pub lease_releases: u64,
    pub evictions: u64,
    pub evictions_dirty: u64,
    pub flushed_bytes: u64,
    /// Round trips front-end threads spent evicting synchronously (`OpTrace::evict_round_trips`;
    /// batched eviction off). Left out of a report when 0, so reports of runs with batched
    /// eviction stay byte for byte what they were before the field existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub evict_round_trips: u64,
    pub reader_spins: u64,
    pub by_case: BTreeMap<OpCase, CaseStats>,
    /// Ops completed per `timeline_bucket_ns` bucket (Fig. 15b cumulative curves).
    pub timeline: Vec<u64>,
    /// Sum of op latencies, for a mean.
    pub latency_ns_total: u64,
    pub first_op_start_ns: Option<u64>,
    pub last_op_end_ns: u64,
}

impl Stats {
    pub fn record_op(&mut self, op: &OpTrace, end: Nanos, bucket_ns: u64) {
        self.ops += 1;
        if op.write {
            self.writes += 1;
        } else {
            self.reads += 1;
        }
        if op.case == OpCase::Hit {
            assert_eq!(op.round_trips, 0, "a hit does no RDMA for ownership");
            self.hits += 1;
        }
        self.evict_round_trips += op.evict_round_trips as u64;
        if op.messages > 0 {
            self.invalidation_ops += 1;
        }
        self.by_case.entry(op.case).or_default().add(op.round_trips);
        let bucket = (end.0 / bucket_ns.max(1)) as usize;
        if self.timeline.len() <= bucket {
            self.timeline.resize(bucket + 1, 0);
        }
        self.timeline[bucket] += 1;
        self.latency_ns_total += end.0 - op.started.0;
        if self.first_op_start_ns.is_none_or(|t| op.started.0 < t) {
            self.first_op_start_ns = Some(op.started.0);
        }
        self.last_op_end_ns = self.last_op_end_ns.max(end.0);
    }

    pub fn hit_ratio(&self) -> f64 {
        ratio(self.hits, self.ops)
    }

    pub fn invalidation_ratio(&self) -> f64 {
        ratio(self.invalidation_ops, self.ops)
    }

    /// Add another node's counters (cluster totals).
    pub fn merge(&mut self, other: &Stats) {
        macro_rules! add {
            ($($f:ident),*) => { $( self.$f += other.$f; )* };
        }
        add!(
            ops,
            reads,
            writes,
            hits,
            invalidation_ops,
            messages_sent,
            messages_received,
            replies_forwarded,
            replies_granted,
            replies_released,
            replies_dropped,
            messages_deferred,
            handovers,
            crashes_recovered,
            latches_recovered,
            downgrades,
            shared_releases,
            upgrades,
            upgrade_fallbacks,
            latch_retries,
            lease_releases,
            evictions,
            evictions_dirty,
            flushed_bytes,
            evict_round_trips,
            reader_spins,
            latency_ns_total
        );
        for (case, s) in &other.by_case {
            let mine = self.by_case.entry(*case).or_default();
            if mine.ops == 0 || (s.ops > 0 && s.round_trips_min < mine.round_trips_min) {
                mine.round_trips_min = s.round_trips_min;
            }
            mine.ops += s.ops;
            mine.round_trips += s.round_trips;
            mine.round_trips_max = mine.round_trips_max.max(s.round_trips_max);
        }
        if self.timeline.len() < other.timeline.len() {
            self.timeline.resize(other.timeline.len(), 0);
        }
        for (a, b) in self.timeline.iter_mut().zip(&other.timeline) {
            *a += b;
        }
        self.first_op_start_ns = match (self.first_op_start_ns, other.first_op_start_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_op_end_ns = self.last_op_end_ns.max(other.last_op_end_ns);
    }

    /// Operations per second over [first op start, last op end].
    pub fn throughput_ops_per_s(&self) -> f64 {
        let Some(start) = self.first_op_start_ns else { return 0.0 };
        let span_ns = self.last_op_end_ns.saturating_sub(start);
        if span_ns == 0 {
            0.0
        } else {
            self.ops as f64 * 1e9 / span_ns as f64
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_land_in_cases_and_buckets() {
        let mut s = Stats::default();
        let mut op = OpTrace::new(true, Nanos(10));
        op.case = OpCase::WriterVsModified;
        op.round_trips = 3;
        op.messages = 1;
        s.record_op(&op, Nanos(2_500), 1_000);
        s.record_op(&OpTrace::new(false, Nanos(2_600)), Nanos(2_700), 1_000);
        assert_eq!(s.timeline, vec![0, 0, 2]);
        assert_eq!(s.by_case[&OpCase::WriterVsModified].mean(), 3.0);
        assert_eq!((s.hit_ratio(), s.invalidation_ratio()), (0.5, 0.5));
        let mut total = Stats::default();
        total.merge(&s);
        total.merge(&s);
        assert_eq!(total.ops, 4);
        assert_eq!(total.by_case[&OpCase::Hit].ops, 2);
    }

    #[test]
    fn a_hit_after_a_synchronous_eviction_is_a_hit() {
        // Goal: eviction round trips are counted, apart from the ownership round trips a hit
        // must not have (issue #10 item 7: "a hit does no RDMA" with batched eviction off).
        let mut s = Stats::default();
        let mut op = OpTrace::new(false, Nanos(0));
        op.evict_round_trips = 1;
        s.record_op(&op, Nanos(3_000), 1_000);
        assert_eq!((s.hits, s.evict_round_trips), (1, 1));
        assert_eq!(s.by_case[&OpCase::Hit].round_trips, 0);
    }

    #[test]
    fn reports_without_synchronous_eviction_keep_their_bytes() {
        // Goal: a batched-eviction run's report has no `evict_round_trips` (its size, hence an
        // over-the-NIC exchange, is unchanged), and an old report still parses.
        let json = serde_json::to_string(&Stats::default()).unwrap();
        assert!(!json.contains("evict_round_trips"), "{json}");
        let back: Stats = serde_json::from_str(&json).unwrap();
        assert_eq!(back, Stats::default());
        let s = Stats { evict_round_trips: 3, ..Stats::default() };
        let back: Stats = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back.evict_round_trips, 3);
    }
}
