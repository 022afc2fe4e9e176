//! Shrinking a failing choice log to a small one that fails the same way.
//!
//! Every edited log is a valid schedule (see `choice`): entries past the end read as 0 (the
//! default: FIFO, no jitter, no fault) and out-of-range values wrap. So shrinking is plain delta
//! debugging over a `Vec<u64>`, keeping an edit when the replayed run still fails with the *same
//! checker*:
//! 1. cut the tail (binary search on the shortest failing prefix);
//! 2. delete chunks, halving the chunk size down to 1 (ddmin's complement step);
//! 3. move values toward 0: whole chunks to 0, then single values to 0 or halved;
//! 4. repeat 2–3 until a pass changes nothing or the run budget is spent.
//!
//! Then the log is normalised by running it once more and keeping what that run recorded (values
//! reduced modulo their option count, trailing zeros dropped), so the stored log replays exactly.

use crate::choice::ChoiceLog;

/// Bounds on one shrink.
#[derive(Clone, Copy, Debug)]
pub struct ShrinkBudget {
    /// Most replays tried.
    pub runs_max: u32,
}

impl Default for ShrinkBudget {
    fn default() -> Self {
        ShrinkBudget { runs_max: 3_000 }
    }
}

/// What a shrink did.
#[derive(Clone, Debug)]
pub struct Shrunk {
    pub log: ChoiceLog,
    pub runs: u32,
    pub original_len: usize,
}

/// Shrink `log`. `still_fails(candidate)` replays a candidate and says whether it fails with the
/// original checker.
pub fn shrink(log: &[u64], budget: ShrinkBudget, mut still_fails: impl FnMut(&[u64]) -> bool) -> Shrunk {
    let original_len = log.len();
    let mut best: ChoiceLog = trim(log.to_vec());
    let mut runs = 0u32;
    let mut test = |candidate: &[u64], runs: &mut u32| -> bool {
        if *runs >= budget.runs_max {
            return false;
        }
        *runs += 1;
        still_fails(candidate)
    };

    // 1. Shortest failing prefix (failure is usually monotone in the prefix; when it is not, the
    //    search still returns a failing prefix because `hi` always fails).
    let (mut lo, mut hi) = (0usize, best.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if test(&best[..mid], &mut runs) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    best.truncate(hi);
    best = trim(best);

    loop {
        let before = best.clone();
        // 2. Delete chunks.
        let mut chunk = (best.len() / 2).max(1);
        while chunk >= 1 && !best.is_empty() {
            let mut start = 0;
            while start < best.len() {
                let end = (start + chunk).min(best.len());
                let mut candidate = best[..start].to_vec();
                candidate.extend_from_slice(&best[end..]);
                if test(&candidate, &mut runs) {
                    best = trim(candidate);
                } else {
                    start = end;
                }
            }
            if chunk == 1 {
                break;
            }
            chunk /= 2;
        }
        // 3. Values toward 0: chunks to zero, then single values to 0 or half.
        let mut chunk = (best.len() / 2).max(1);
        loop {
            let mut start = 0;
            while start < best.len() {
                let end = (start + chunk).min(best.len());
                if best[start..end].iter().any(|v| *v != 0) {
                    let mut candidate = best.clone();
                    candidate[start..end].iter_mut().for_each(|v| *v = 0);
                    if test(&candidate, &mut runs) {
                        best = trim(candidate);
                    }
                }
                start = end;
            }
            if chunk == 1 {
                break;
            }
            chunk /= 2;
        }
        for i in 0..best.len() {
            if i >= best.len() || best[i] <= 1 {
                continue;
            }
            let mut candidate = best.clone();
            candidate[i] /= 2;
            if test(&candidate, &mut runs) {
                best = trim(candidate);
            }
        }
        if best == before || runs >= budget.runs_max {
            break;
        }
    }
    Shrunk { log: best, runs, original_len }
}

/// Drop trailing zeros: past the end of a log every value reads as 0 anyway.
pub fn trim(mut log: ChoiceLog) -> ChoiceLog {
    while log.last() == Some(&0) {
        log.pop();
    }
    log
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shrinks_to_the_values_that_matter() {
        // Goal: a "bug" that needs a 3 somewhere after a 5 shrinks to [5, 3] or the like.
        // Method: a predicate over the log stands in for a replayed run.
        let log: Vec<u64> = (0..200).map(|i| (i * 7 + 3) % 11).collect();
        let fails = |l: &[u64]| {
            let five = l.iter().position(|v| *v == 5);
            five.is_some_and(|p| l[p..].contains(&3))
        };
        assert!(fails(&log));
        let shrunk = shrink(&log, ShrinkBudget::default(), fails);
        assert!(fails(&shrunk.log));
        assert_eq!(shrunk.log, vec![5, 3]);
        assert_eq!(shrunk.original_len, 200);
    }

    #[test]
    fn respects_the_run_budget() {
        let log = vec![9; 64];
        let mut calls = 0;
        let shrunk = shrink(&log, ShrinkBudget { runs_max: 10 }, |_| {
            calls += 1;
            true
        });
        assert!(calls <= 10);
        assert!(shrunk.runs <= 10);
    }
}
