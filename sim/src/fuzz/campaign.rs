//! A campaign: many seeds of one target, in parallel (rayon, one run per thread), then the
//! failures shrunk into replay files.
//!
//! With "stop at the first violation", seeds run in waves (one per thread first, then doubling), in seed order, so
//! that it still reports the *first* failing seed of the order (what the mutant tests and the
//! schedules-to-catch measurements count), whatever the thread count. Without it, every seed is
//! one parallel iterator: a wave ends when its slowest seed does, which left the other thread
//! idle at every wave's end (`-j 2` gained 1.08x, issue #15). Results are in seed order either way.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::replay::{self, ReplayFile};
use super::shrink::{shrink, trim, ShrinkBudget};
use super::target::{Failure, Faults, FuzzTarget, RunRequest, RunResult, Verdict};
use crate::choice::Strategy;

/// How schedules are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrategyKind {
    /// Every decision uniform from the seed's ChaCha8 stream.
    Random,
    /// PCT with this depth; `steps_expected` is estimated from a first random run.
    Pct { depth: u32 },
}

/// What to run.
#[derive(Clone, Debug)]
pub struct CampaignSpec {
    pub seeds: Vec<u64>,
    pub strategy: StrategyKind,
    pub mutant: String,
    pub faults: Faults,
    /// Stop after the wave that found this many violations (`None`: run every seed).
    pub stop_after: Option<usize>,
    /// Progress bar on stderr.
    pub progress: bool,
}

/// One seed's result, compact (the full log is kept only for failures).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SeedSummary {
    pub seed: u64,
    /// `pass`, `violation` or `crash`.
    pub verdict: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    pub decisions: u64,
    pub events: u64,
    pub trace_hash: String,
}

/// What a campaign (or one shard of it) found. Shard summaries merge by adding counts.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CampaignSummary {
    pub scenario: String,
    pub scenario_hash: String,
    pub mutant: String,
    pub strategy: String,
    pub faults: String,
    /// `"I/N"` for a shard, `"merged"` after `--merge`.
    pub shard: String,
    pub schedules: u64,
    pub violations: u64,
    pub crashes: u64,
    pub events: u64,
    pub wall_seconds: f64,
    /// The first violating seed in seed order among those run (`None` if none).
    pub first_failing_seed: Option<u64>,
    /// Schedules run in seed order up to and including the first violation.
    pub schedules_to_first_failure: Option<u64>,
    pub steps_expected: u64,
    pub failures: Vec<SeedSummary>,
    /// Replay files written (shrunk failures).
    pub replays: Vec<String>,
    pub git_commit: String,
}

/// A rate readable at every scale: a slow campaign (heavy per-event checks) is 0.3/s, not 0/s.
fn rate_text(rate: f64) -> String {
    if rate >= 10.0 {
        format!("{rate:.0}")
    } else {
        format!("{rate:.2}")
    }
}

impl CampaignSummary {
    pub fn rate(&self) -> f64 {
        self.schedules as f64 / self.wall_seconds.max(1e-9)
    }

    /// The summary line every campaign prints last.
    pub fn line(&self) -> String {
        format!(
            "fuzz: {} schedules, {} violations, {} schedules/s",
            self.schedules,
            self.violations,
            rate_text(self.rate())
        )
    }

    /// Combine shard summaries (counts add; wall time is the slowest shard's, as they ran side by
    /// side; the first failing seed is the smallest).
    pub fn merge(parts: &[CampaignSummary]) -> CampaignSummary {
        let mut out =
            CampaignSummary { shard: "merged".into(), ..parts.first().cloned().unwrap_or_default() };
        out.schedules = parts.iter().map(|p| p.schedules).sum();
        out.violations = parts.iter().map(|p| p.violations).sum();
        out.crashes = parts.iter().map(|p| p.crashes).sum();
        out.events = parts.iter().map(|p| p.events).sum();
        out.wall_seconds = parts.iter().map(|p| p.wall_seconds).fold(0.0, f64::max);
        out.first_failing_seed = parts.iter().filter_map(|p| p.first_failing_seed).min();
        out.schedules_to_first_failure = None; // not meaningful across shards
        out.failures = parts.iter().flat_map(|p| p.failures.clone()).collect();
        out.failures.sort_by_key(|f| f.seed);
        out.replays = parts.iter().flat_map(|p| p.replays.clone()).collect();
        out
    }
}

/// The result of a campaign run: the summary and the failing runs (with full logs).
pub struct CampaignRun {
    pub summary: CampaignSummary,
    pub failing: Vec<(u64, Strategy, RunResult)>,
}

/// Estimate PCT's `k` (racy steps per run) from one random run of `seed`.
pub fn estimate_steps(target: &dyn FuzzTarget, seed: u64, mutant: &str, faults: Faults) -> u64 {
    let r = target.run(&RunRequest {
        seed,
        strategy: Strategy::Random { seed },
        mutant: mutant.to_string(),
        faults,
        trace: false,
    });
    r.ready_decisions.max(1)
}

/// The strategy for `seed`.
pub fn strategy_for(kind: StrategyKind, seed: u64, steps_expected: u64) -> Strategy {
    match kind {
        StrategyKind::Random => Strategy::Random { seed },
        StrategyKind::Pct { depth } => Strategy::Pct { seed, depth, steps_expected },
    }
}

pub fn describe_strategy(kind: StrategyKind, steps_expected: u64) -> String {
    match kind {
        StrategyKind::Random => "random".into(),
        StrategyKind::Pct { depth } => format!("pct:{depth}:{steps_expected}"),
    }
}

/// Run the campaign on the current rayon pool (no wall clock: `wall_seconds` is 0).
pub fn run_campaign(target: &dyn FuzzTarget, spec: &CampaignSpec) -> CampaignRun {
    run_campaign_timed(target, spec, &|| 0.0)
}

/// [`run_campaign`] with a wall clock (`seconds()` since the campaign began) for the progress
/// bar and the summary's speed. Only the CLI passes a real one: nothing in this crate reads
/// the wall clock.
pub fn run_campaign_timed(
    target: &dyn FuzzTarget,
    spec: &CampaignSpec,
    seconds: &(dyn Fn() -> f64 + Sync),
) -> CampaignRun {
    let steps_expected = match (spec.strategy, spec.seeds.first()) {
        (StrategyKind::Pct { .. }, Some(&first)) => estimate_steps(target, first, &spec.mutant, spec.faults),
        _ => 0,
    };
    let total = spec.seeds.len() as u64;
    let done = AtomicU64::new(0);
    let violations = AtomicU64::new(0);
    let progress = Progress::new(spec.progress, total);
    // Stopping at a violation runs the seeds in waves. Most bugs show in the first few seeds,
    // so the first wave is one seed per thread (a mutant caught at seed 1 costs one schedule
    // per core, not four), and each later wave doubles, up to 64 per thread, so a long
    // campaign loses little to the barrier between waves. The waves depend only on the thread
    // count, never on timing, so where a campaign stops is deterministic.
    let threads = rayon::current_num_threads().max(1);
    let mut wave = match spec.stop_after {
        Some(_) => threads,
        None => spec.seeds.len().max(1),
    };
    let mut results: Vec<(u64, Strategy, RunResult)> = Vec::new();
    let mut found = 0usize;
    let mut rest = spec.seeds.as_slice();
    while !rest.is_empty() {
        let (chunk, tail) = rest.split_at(wave.min(rest.len()));
        rest = tail;
        wave = (wave * 2).min(threads * 64).max(wave);
        let mut part: Vec<(u64, Strategy, RunResult)> = chunk
            .par_iter()
            .map(|&seed| {
                let strategy = strategy_for(spec.strategy, seed, steps_expected);
                let r = target.run(&RunRequest {
                    seed,
                    strategy: strategy.clone(),
                    mutant: spec.mutant.clone(),
                    faults: spec.faults,
                    trace: false,
                });
                if matches!(r.verdict, Verdict::Violation(_)) {
                    violations.fetch_add(1, Ordering::Relaxed);
                }
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                progress.tick(n, violations.load(Ordering::Relaxed), seconds());
                (seed, strategy, r)
            })
            .collect();
        found += part.iter().filter(|(_, _, r)| matches!(r.verdict, Verdict::Violation(_))).count();
        results.append(&mut part);
        if spec.stop_after.is_some_and(|n| found >= n) {
            break;
        }
    }
    progress.finish();
    let wall_seconds = seconds();

    let mut summary = CampaignSummary {
        mutant: spec.mutant.clone(),
        strategy: describe_strategy(spec.strategy, steps_expected),
        faults: spec.faults.to_string(),
        schedules: results.len() as u64,
        wall_seconds,
        steps_expected,
        git_commit: replay::git_commit(),
        ..Default::default()
    };
    let mut failing = Vec::new();
    for (i, (seed, strategy, r)) in results.into_iter().enumerate() {
        summary.events += r.events;
        match &r.verdict {
            Verdict::Pass => {}
            Verdict::Crash(_) => summary.crashes += 1,
            Verdict::Violation(f) => {
                summary.violations += 1;
                if summary.first_failing_seed.is_none() {
                    summary.first_failing_seed = Some(seed);
                    summary.schedules_to_first_failure = Some(i as u64 + 1);
                }
                summary.failures.push(SeedSummary {
                    seed,
                    verdict: "violation".into(),
                    failure: Some(f.clone()),
                    decisions: r.decisions,
                    events: r.events,
                    trace_hash: format!("{:016x}", r.trace_hash),
                });
                failing.push((seed, strategy, r));
            }
        }
    }
    CampaignRun { summary, failing }
}

/// Everything [`finish_failure`] needs to know about where a failure came from.
pub struct FailureContext<'a> {
    pub scenario_path: &'a str,
    pub scenario_text: &'a str,
    pub mutant: &'a str,
    pub faults: Faults,
    pub strategy: String,
    pub shrink: bool,
    pub budget: ShrinkBudget,
}

/// Shrink one failing run (keeping its checker), replay the result with the trace on, and build
/// its replay file.
pub fn finish_failure(
    target: &dyn FuzzTarget,
    context: &FailureContext<'_>,
    seed: u64,
    found: &RunResult,
) -> Result<(ReplayFile, RunResult), String> {
    let checker = found.verdict.failure().map(|f| f.checker.clone()).ok_or("not a failing run")?;
    let replay_run = |log: &[u64], trace: bool| {
        target.run(&RunRequest {
            seed,
            strategy: Strategy::Replay { log: log.to_vec() },
            mutant: context.mutant.to_string(),
            faults: context.faults,
            trace,
        })
    };
    let same = |r: &RunResult| r.verdict.failure().is_some_and(|f| f.checker == checker);
    let mut log = trim(found.choice_log.clone());
    if !same(&replay_run(&log, false)) {
        return Err(format!("seed {seed}: the recorded log does not reproduce the {checker} violation"));
    }
    let mut how = context.strategy.clone();
    if context.shrink {
        let shrunk = shrink(&log, context.budget, |candidate| same(&replay_run(candidate, false)));
        how = format!(
            "{how}, shrunk {}→{} decisions in {} runs",
            shrunk.original_len,
            shrunk.log.len(),
            shrunk.runs
        );
        log = shrunk.log;
    }
    // Normalise: store what the final run recorded, so it replays exactly.
    let traced = replay_run(&log, true);
    let normalised = trim(traced.choice_log.clone());
    let check = replay_run(&normalised, false);
    if check.trace_hash != traced.trace_hash || !same(&traced) {
        return Err(format!("seed {seed}: the shrunk log does not replay deterministically"));
    }
    let failure = traced.verdict.failure().expect("checked above").clone();
    let file = ReplayFile {
        format: replay::FORMAT.into(),
        scenario_path: context.scenario_path.into(),
        scenario_hash: replay::content_hash(context.scenario_text),
        scenario: serde_json::from_str(context.scenario_text).map_err(|e| format!("scenario JSON: {e}"))?,
        seed,
        strategy: how,
        mutant: context.mutant.into(),
        faults: context.faults,
        choice_log: normalised,
        git_commit: replay::git_commit(),
        trace_hash: format!("{:016x}", traced.trace_hash),
        checker: failure.checker.clone(),
        message: failure.message.clone(),
        original_log_len: found.choice_log.len(),
        swarm: traced.swarm.clone(),
    };
    Ok((file, traced))
}

/// A plain-text progress bar on stderr: redrawn in place on a terminal, a line per 10% otherwise.
struct Progress {
    on: bool,
    terminal: bool,
    total: u64,
    last_tenth: Mutex<u64>,
}

impl Progress {
    fn new(on: bool, total: u64) -> Progress {
        Progress {
            on: on && total > 0,
            terminal: std::io::stderr().is_terminal(),
            total,
            last_tenth: Mutex::new(0),
        }
    }

    fn tick(&self, done: u64, violations: u64, elapsed_s: f64) {
        if !self.on {
            return;
        }
        let tenth = done * 10 / self.total;
        let redraw = if self.terminal {
            done == self.total || done.is_multiple_of((self.total / 200).max(1))
        } else {
            let mut last = self.last_tenth.lock().unwrap();
            let new = tenth > *last;
            *last = (*last).max(tenth);
            new
        };
        if !redraw {
            return;
        }
        let rate = done as f64 / elapsed_s.max(1e-9);
        let width = 30;
        let filled = (done * width / self.total) as usize;
        let bar = format!("{}{}", "#".repeat(filled), ".".repeat(width as usize - filled));
        let text = format!(
            "[{bar}] {done}/{} schedules, {violations} violations, {}/s",
            self.total,
            rate_text(rate)
        );
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let _ = write!(err, "\r{text}");
        } else {
            let _ = writeln!(err, "{text}");
        }
    }

    fn finish(&self) {
        if self.on && self.terminal {
            let _ = writeln!(std::io::stderr());
        }
    }
}
