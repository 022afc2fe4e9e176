//! A timed measurement window for closed-loop client loops (`workload.window`).
//!
//! Without one, each client measures its operations after its own warm-up operations and a run's
//! throughput divides every measured operation by the span from the first measured start to the
//! last end. Under contention clients finish their warm-ups, and their measured operations, at
//! very different times, so that span includes long stretches in which few clients measure and
//! the throughput undercounts (Sherman at 8 compute nodes, YCSB B, zipf 0.99: 4.83 Mops against
//! 11.56 with one window; `protocols/src/sherman/NEEDS.md`). The authors' harnesses (Sherman's,
//! SMART's, Dolphin's benchmarks) measure a wall-clock interval in which every thread is running;
//! a window does the same in virtual time: every thread warms up until `warmup_us`, operations
//! that start in `[warmup_us, warmup_us + measure_us)` and end by its close are measured, and
//! each thread stops at the close. Times count from the start of the run (virtual time 0).
//!
//! `ops_per_thread` stays an upper bound, and some protocols still size per-run memory by it
//! (Dolphin's arena, the B-link trees' page pools): keep it near what the window needs (a few
//! times the operations a thread completes in it) — `window_threads_out_of_ops` says when it is
//! too small; 100,000 on a 40-key fuzz scenario made each schedule allocate for 600,000 stores.

use serde::{Deserialize, Serialize};

/// The `workload.window` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// Virtual time at which measurement starts (every thread warms up until then).
    pub warmup_us: u64,
    /// Length of the window: operations that start inside it and end by its close count.
    pub measure_us: u64,
}

impl Window {
    /// Problems with the fields, each naming its path under `workload`.
    pub fn problems(&self, warmup_ops_per_thread: u64) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if self.measure_us == 0 {
            out.push(("workload.window.measure_us", "must be at least 1".to_string()));
        }
        if self.warmup_us.saturating_add(self.measure_us) > 1 << 40 {
            out.push(("workload.window", "warmup_us + measure_us must be below 2^40 µs".to_string()));
        }
        if warmup_ops_per_thread > 0 {
            out.push((
                "workload.warmup_ops_per_thread",
                "must be 0 with workload.window (the window's warmup_us is the warm-up)".to_string(),
            ));
        }
        out
    }
}

/// What one client loop asks of the window, or, without one, of its operations' warm-up flags.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gate {
    /// (open, close) in virtual ns.
    window: Option<(u64, u64)>,
}

impl Gate {
    pub fn new(window: Option<Window>) -> Gate {
        Gate { window: window.map(|w| (w.warmup_us * 1_000, (w.warmup_us + w.measure_us) * 1_000)) }
    }

    pub fn is_timed(&self) -> bool {
        self.window.is_some()
    }

    /// The loop stops before starting another operation at `now`.
    pub fn closed(&self, now: u64) -> bool {
        self.window.is_some_and(|(_, close)| now >= close)
    }

    /// An operation starting at `start` is warm-up (`op_warmup`: the stream's own flag).
    pub fn warmup(&self, start: u64, op_warmup: bool) -> bool {
        match self.window {
            Some((open, _)) => start < open,
            None => op_warmup,
        }
    }

    /// An operation is counted: not warm-up and, in a window, ended by its close.
    pub fn measured(&self, start: u64, end: u64, op_warmup: bool) -> bool {
        !self.warmup(start, op_warmup) && self.window.is_none_or(|(_, close)| end <= close)
    }

    /// After the loop: the thread ran out of operations before the window closed, so the
    /// window's throughput undercounts (reported as `window_threads_out_of_ops`).
    pub fn ran_out(&self, now: u64) -> bool {
        self.window.is_some_and(|(_, close)| now < close)
    }

    /// The seconds a throughput divides by: the window's length, or `fallback_ns` (the span
    /// from the first measured start to the end of the run) without one.
    pub fn span_s(&self, fallback_ns: u64) -> f64 {
        match self.window {
            Some((open, close)) => (close - open) as f64 * 1e-9,
            None => fallback_ns as f64 * 1e-9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_window_the_streams_flags_decide() {
        let g = Gate::new(None);
        assert!(!g.closed(u64::MAX));
        assert!(g.warmup(5, true) && !g.warmup(5, false));
        assert!(g.measured(0, u64::MAX, false) && !g.measured(0, 1, true));
        assert!(!g.ran_out(0));
        assert_eq!(g.span_s(2_000_000_000), 2.0);
    }

    #[test]
    fn a_window_counts_operations_inside_it() {
        let g = Gate::new(Some(Window { warmup_us: 10, measure_us: 5 }));
        assert!(g.warmup(9_999, false) && !g.warmup(10_000, true));
        assert!(g.measured(10_000, 15_000, true));
        assert!(!g.measured(14_000, 15_001, false), "ends after the close");
        assert!(!g.measured(9_000, 11_000, false), "started in the warm-up");
        assert!(!g.closed(14_999) && g.closed(15_000));
        assert!(g.ran_out(14_999) && !g.ran_out(15_000));
        assert!((g.span_s(0) - 5e-6).abs() < 1e-15);
    }

    #[test]
    fn bad_windows_are_named() {
        let p = Window { warmup_us: 1, measure_us: 0 }.problems(3);
        let paths: Vec<_> = p.iter().map(|p| p.0).collect();
        assert_eq!(paths, ["workload.window.measure_us", "workload.warmup_ops_per_thread"]);
    }
}
