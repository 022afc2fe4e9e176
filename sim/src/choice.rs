//! The choice source: every nondeterministic decision of a run passes through here.
//!
//! A decision is "pick one of `n` options" (`n ≥ 2`; single-option decisions are not
//! decisions and are never recorded). Option 0 is always the *default*: FIFO among ready tasks,
//! zero jitter, no fault. That gives three properties the rest of the tool builds on:
//!
//! * a run is reproducible from `(scenario, seed)` — the [`Strategy::Random`] stream is
//!   `ChaCha8Rng::seed_from_u64(seed)`;
//! * a run is reproducible from its recorded [`ChoiceLog`] alone ([`Strategy::Replay`]), which
//!   is what replay files store;
//! * shrinking a failing schedule means deleting log entries or moving them toward 0, and any
//!   edited log still replays: values past the end are 0, and a value `v ≥ n` reads as `v % n`.
//!
//! Like shuttle's `Scheduler`, one trait answers both "which task runs" and "which random value"
//! so that PCT and replay are just other strategies.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What a decision is about; recorded beside the value so replays can be explained and so
/// strategies (PCT) can treat scheduling differently from jitter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChoiceKind {
    /// Which of the tasks ready at this instant runs next.
    Ready,
    /// Extra one-way latency in nanoseconds for a verb or message.
    Jitter,
    /// Whether and how a fault knob fires (message delay/drop, pause, crash).
    Fault,
    /// A workload decision taken through the engine (rare; workloads have their own seeded RNG).
    Other,
}

impl ChoiceKind {
    pub fn code(self) -> u8 {
        match self {
            ChoiceKind::Ready => b'r',
            ChoiceKind::Jitter => b'j',
            ChoiceKind::Fault => b'f',
            ChoiceKind::Other => b'o',
        }
    }
}

/// The sequence of values taken, one per decision with `n ≥ 2`.
pub type ChoiceLog = Vec<u64>;

/// How decisions are made.
#[derive(Clone, Debug)]
pub enum Strategy {
    /// Always option 0: FIFO, no jitter, no faults.
    Default,
    /// Uniform random from a ChaCha8 stream seeded with the run seed.
    Random { seed: u64 },
    /// Values from a log, then 0.
    Replay { log: ChoiceLog },
    /// Probabilistic concurrency testing (Burckhardt et al., ASPLOS'10), over racy steps:
    /// tasks get random distinct priorities, the highest-priority ready task runs, and at
    /// `depth - 1` random step indices the running task's priority drops below all others.
    Pct { seed: u64, depth: u32, steps_expected: u64 },
}

/// The engine's handle on decisions: a strategy plus the record of what was chosen.
pub struct ChoiceSource {
    state: State,
    log: ChoiceLog,
    record: bool,
    decisions: u64,
    /// Ready decisions with ≥ 2 candidates (racy steps), whatever the strategy.
    ready_decisions: u64,
}

// One `State` per run, and the RNG is read on every decision: keep it inline rather than boxed.
#[allow(clippy::large_enum_variant)]
enum State {
    Default,
    Random(ChaCha8Rng),
    Replay { log: ChoiceLog, next: usize },
    Pct(Box<Pct>),
}

/// PCT state. Task priorities are drawn lazily the first time a task is seen ready.
struct Pct {
    rng: ChaCha8Rng,
    /// Priority per task id; higher runs first. Initial priorities are ≥ `depth`.
    priority: Vec<u64>,
    /// Step indices (over racy Ready decisions, counted from 1) at which the chosen task is
    /// demoted; sorted, in `1..=steps_expected`. Invariant: length ≤ depth − 1.
    change_points: Vec<u64>,
    /// Initial priorities are ≥ this (`depth`), so every demotion value (< depth) is below them.
    priority_floor: u64,
    /// Racy steps taken so far (Ready decisions with ≥ 2 options).
    steps: u64,
    /// Next demotion value: `depth - 1`, `depth - 2`, … (all below initial priorities).
    next_low: u64,
}

impl ChoiceSource {
    pub fn new(strategy: Strategy, record: bool) -> ChoiceSource {
        let state = match strategy {
            Strategy::Default => State::Default,
            Strategy::Random { seed } => State::Random(ChaCha8Rng::seed_from_u64(seed)),
            Strategy::Replay { log } => State::Replay { log, next: 0 },
            Strategy::Pct { seed, depth, steps_expected } => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let depth = depth.max(1);
                // PCT §4.1: d − 1 change points uniform over the k expected steps. Steps count
                // from 1, so the points do too (a point at 0 would never fire).
                let mut change_points: Vec<u64> =
                    (1..depth).map(|_| 1 + rng.next_u64() % steps_expected.max(1)).collect();
                change_points.sort_unstable();
                State::Pct(Box::new(Pct {
                    rng,
                    priority: Vec::new(),
                    change_points,
                    priority_floor: depth as u64,
                    steps: 0,
                    next_low: depth as u64 - 1,
                }))
            }
        };
        ChoiceSource { state, log: Vec::new(), record, decisions: 0, ready_decisions: 0 }
    }

    /// Pick one of `n` options. `n ≤ 1` is not a decision and returns 0 unrecorded.
    #[inline]
    pub fn choose(&mut self, kind: ChoiceKind, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        let value = match &mut self.state {
            State::Default => 0,
            State::Random(rng) => rng.next_u64() % n,
            State::Replay { log, next } => {
                let v = log.get(*next).copied().unwrap_or(0) % n;
                *next += 1;
                v
            }
            State::Pct(pct) => match kind {
                // Scheduling decisions with candidates go through `choose_ready`.
                ChoiceKind::Ready => 0,
                // PCT leaves data choices random (uniform) but small: jitter is what it races.
                _ => pct.rng.next_u64() % n,
            },
        };
        debug_assert!(value < n);
        self.decisions += 1;
        if self.record {
            self.log.push(value);
        }
        value
    }

    /// Pick which ready task runs: `candidates` are task ids in FIFO order. Returns an index.
    pub fn choose_ready(&mut self, candidates: &[u32]) -> usize {
        let n = candidates.len() as u64;
        if n <= 1 {
            return 0;
        }
        self.ready_decisions += 1;
        let State::Pct(pct) = &mut self.state else {
            return self.choose(ChoiceKind::Ready, n) as usize;
        };
        // Highest priority wins; ties (never, priorities are distinct) go to FIFO order.
        let mut best = 0;
        let mut best_priority = 0;
        for (i, &task) in candidates.iter().enumerate() {
            let p = pct.priority_of(task);
            if i == 0 || p > best_priority {
                best = i;
                best_priority = p;
            }
        }
        pct.steps += 1;
        // Two change points may fall on one step: each demotes the task once more.
        while pct.change_points.first() == Some(&pct.steps) {
            pct.change_points.remove(0);
            let task = candidates[best] as usize;
            pct.priority[task] = pct.next_low;
            pct.next_low = pct.next_low.saturating_sub(1);
        }
        self.decisions += 1;
        if self.record {
            self.log.push(best as u64);
        }
        best
    }

    pub fn log(&self) -> &ChoiceLog {
        &self.log
    }

    pub fn take_log(&mut self) -> ChoiceLog {
        std::mem::take(&mut self.log)
    }

    pub fn decisions(&self) -> u64 {
        self.decisions
    }

    /// Racy scheduling steps so far (what PCT's `steps_expected` estimates).
    pub fn ready_decisions(&self) -> u64 {
        self.ready_decisions
    }
}

impl Pct {
    fn priority_of(&mut self, task: u32) -> u64 {
        let task = task as usize;
        if task >= self.priority.len() {
            self.priority.resize(task + 1, 0);
        }
        if self.priority[task] == 0 {
            // Distinct with overwhelming probability, and always above the demotion range.
            self.priority[task] = (self.rng.next_u64() >> 8) + self.priority_floor;
        }
        self.priority[task]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_is_reproducible_and_replay_reproduces_it() {
        // Goal: the same seed gives the same decisions, and the recorded log replays them.
        let draw = |strategy| {
            let mut c = ChoiceSource::new(strategy, true);
            let values: Vec<u64> = (0..100).map(|i| c.choose(ChoiceKind::Jitter, 2 + i % 7)).collect();
            (values, c.take_log())
        };
        let (a, log) = draw(Strategy::Random { seed: 7 });
        let (b, _) = draw(Strategy::Random { seed: 7 });
        assert_eq!(a, b);
        let (c, _) = draw(Strategy::Replay { log: log.clone() });
        assert_eq!(a, c);
        assert_ne!(a, draw(Strategy::Random { seed: 8 }).0);
    }

    #[test]
    fn edited_logs_still_replay() {
        // Goal: shrinking may truncate a log or leave out-of-range values; both stay valid.
        let mut c = ChoiceSource::new(Strategy::Replay { log: vec![5, 1] }, true);
        assert_eq!(c.choose(ChoiceKind::Ready, 3), 2, "5 % 3");
        assert_eq!(c.choose(ChoiceKind::Ready, 3), 1);
        assert_eq!(c.choose(ChoiceKind::Ready, 3), 0, "past the end is the default");
        assert_eq!(c.choose(ChoiceKind::Ready, 1), 0);
        assert_eq!(c.log(), &vec![2, 1, 0], "single-option decisions are not recorded");
    }

    #[test]
    fn pct_runs_highest_priority_and_demotes_at_change_points() {
        // Goal: PCT picks a consistent task until a change point demotes it.
        let mut c = ChoiceSource::new(Strategy::Pct { seed: 1, depth: 2, steps_expected: 1 }, true);
        // steps_expected = 1 puts the single change point at step 1: the first winner runs once
        // and is demoted below the others, whose order is then stable.
        let first = c.choose_ready(&[10, 11, 12]);
        let second = c.choose_ready(&[10, 11, 12]);
        assert_ne!(first, second, "demoted at step 1");
        for _ in 0..5 {
            assert_eq!(c.choose_ready(&[10, 11, 12]), second);
        }
        assert_eq!(c.ready_decisions(), 7);
        let mut c = ChoiceSource::new(Strategy::Pct { seed: 3, depth: 2, steps_expected: 2 }, false);
        let a = c.choose_ready(&[1, 2]);
        let b = c.choose_ready(&[1, 2]);
        let d = c.choose_ready(&[1, 2]);
        // The change point is at step 1 or 2; the winner of that step is demoted for good.
        if a == b {
            assert_ne!(b, d, "demoted at step 2");
        } else {
            assert_eq!(b, d);
        }
    }
}
