//! Open-loop load with coordinated-omission correction (ScaleStore §6.7.3, Fig. 13): each worker
//! follows a schedule of operation start times whose gaps are exponentially distributed (a
//! Poisson process at the worker's share of the target throughput). A worker that is behind
//! (its previous operation ran past the next scheduled time) issues the next operation at once,
//! and its latency counts from the *scheduled* time, so "latencies spike as soon as the target
//! throughput is not sustainable anymore".
//!
//! ```text
//!  schedule  s0 ──gap0── s1 ──gap1── s2 …        gap_i = −ln(1 − U_i) / rate   (U_i seeded)
//!  worker    wait until max(now, s_i), run op i, latency_i = end_i − s_i
//! ```
//!
//! Any closed-loop worker becomes open-loop with three calls:
//!
//! ```ignore
//! let mut schedule = OpenLoop::new(spec.target_mops, workers_total, nic.now().0, seed, node, thread);
//! for i in 0..ops {
//!     let scheduled = schedule.next_start();          // draws the next gap
//!     wait_until(&nic, scheduled).await;              // no wait when behind
//!     let actual = nic.now().0;                       // history invoke time
//!     … run the operation …
//!     let latency = nic.now().0 - scheduled;          // corrected latency
//! }
//! ```
//!
//! The gaps come from their own seeded stream ([`rng_for_thread`] of a derived seed), so the
//! workload's key stream is the same open- or closed-loop.

use rand_chacha::rand_core::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::rng_for_thread;
use super::zipf::unit_f64;
use crate::nic::{Nanos, Nic};

/// The `workload.open_loop` section: the whole cluster's target throughput, split evenly over
/// every worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenLoopSpec {
    /// Target throughput of the whole cluster, million operations per second.
    pub target_mops: f64,
}

impl OpenLoopSpec {
    pub fn validate(&self) -> Vec<String> {
        if self.target_mops.is_finite() && self.target_mops > 0.0 && self.target_mops <= 1e5 {
            Vec::new()
        } else {
            vec!["open_loop.target_mops: must be a number in (0, 100000]".into()]
        }
    }
}

/// One worker's schedule.
#[derive(Clone, Debug)]
pub struct OpenLoop {
    rng: ChaCha8Rng,
    /// Mean gap between this worker's operations, ns.
    mean_gap_ns: f64,
    /// The next scheduled start, ns (fractional, so rounding never drifts the rate).
    next_ns: f64,
}

/// Seed offset of the schedule stream (any fixed constant: it keeps the gaps independent of the
/// key stream seeded with the run's seed).
const SCHEDULE_STREAM: u64 = 0x0be1_100b_5eed_0001;

impl OpenLoop {
    /// The schedule of thread `thread` of node `node`, one of `workers` workers sharing
    /// `target_mops`, starting at `start_ns` (the first operation is one gap after it).
    pub fn new(target_mops: f64, workers: u64, start_ns: u64, seed: u64, node: u16, thread: u32) -> OpenLoop {
        let per_worker_per_ns = target_mops * 1e6 / workers.max(1) as f64 / 1e9;
        OpenLoop {
            rng: rng_for_thread(seed ^ SCHEDULE_STREAM, node, thread),
            mean_gap_ns: 1.0 / per_worker_per_ns,
            next_ns: start_ns as f64,
        }
    }

    /// The scheduled start of the next operation (ns): the previous one plus an exponential gap.
    pub fn next_start(&mut self) -> u64 {
        // −ln(1 − U) with U in [0, 1): finite, ≥ 0.
        let gap = -(1.0 - unit_f64(self.rng.next_u64())).ln() * self.mean_gap_ns;
        self.next_ns += gap;
        self.next_ns as u64
    }
}

/// Sleep until `at_ns` on `nic`'s clock (returns at once when already past it).
pub async fn wait_until<N: Nic>(nic: &N, at_ns: u64) {
    let now = nic.now().0;
    if at_ns > now {
        nic.sleep(Nanos(at_ns - now)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_exponential_at_the_worker_share_of_the_target() {
        // Goal: 4 workers sharing 2 Mops each run at 0.5 Mops: mean gap 2,000 ns; the schedule
        // is a pure function of the seed and the worker.
        let mut s = OpenLoop::new(2.0, 4, 1_000, 7, 1, 3);
        let n = 20_000;
        let mut last = 1_000;
        let mut short = 0;
        for _ in 0..n {
            let t = s.next_start();
            assert!(t >= last);
            if t - last < 1_386 {
                short += 1; // P(gap < mean · ln 2) = 1/2 for an exponential
            }
            last = t;
        }
        let mean = (last - 1_000) as f64 / n as f64;
        assert!((mean - 2_000.0).abs() < 60.0, "mean gap {mean}");
        assert!((short as f64 / n as f64 - 0.5).abs() < 0.02, "median {short}");
        let mut again = OpenLoop::new(2.0, 4, 1_000, 7, 1, 3);
        let mut other = OpenLoop::new(2.0, 4, 1_000, 7, 1, 4);
        let first = OpenLoop::new(2.0, 4, 1_000, 7, 1, 3).next_start();
        assert_eq!(again.next_start(), first);
        assert_ne!(other.next_start(), first);
        assert!(OpenLoopSpec { target_mops: 0.0 }.validate().len() == 1);
    }
}
