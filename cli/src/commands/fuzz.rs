//! `dmsim fuzz` and `dmsim replay`: fuzz campaigns over a scenario, and reproducing one failure.
//!
//! Exit statuses: 0 nothing found (or a replay that no longer fails), [`exit::FAILURE`] a violation
//! was found or reproduced, [`exit::BAD_INPUT`] bad flags, scenario or replay file, [`exit::IO`]
//! results not written.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{exit, shown};
use dmsim_sim::choice::Strategy;
use dmsim_sim::fuzz::campaign::run_campaign_timed;
use dmsim_sim::fuzz::campaign::{
    finish_failure, CampaignSpec, CampaignSummary, FailureContext, StrategyKind,
};
use dmsim_sim::fuzz::shrink::ShrinkBudget;
use dmsim_sim::fuzz::{Faults, FuzzTarget, ProtocolTarget, ReplayFile, RunRequest, Verdict};

use crate::registry;

#[derive(clap::Args)]
#[command(after_help = "Examples:\n  dmsim fuzz scenarios/selcc/fuzz-small.json --seeds 2000\n  \
dmsim fuzz scenarios/selcc/fuzz-small.json --seeds 500 --mutant release-without-flush\n  \
dmsim fuzz scenarios/selcc/fuzz-small.json --seeds 100000 --shard 3/8 --pct 3 --faults delay,drop\n  \
dmsim fuzz --merge results/fuzz/selcc/fuzz-small/none/shard-*.json\n  dmsim fuzz scenarios/gam/fuzz-small.json --list-mutants")]
pub struct FuzzArgs {
    /// The scenario file (JSON), e.g. scenarios/selcc/fuzz-small.json.
    #[arg(required_unless_present_any = ["list_mutants", "merge"])]
    pub scenario: Option<PathBuf>,
    /// Seeds to run: base, base+1, …, base+N−1.
    #[arg(long, default_value_t = 1000)]
    pub seeds: u64,
    /// First seed (default: the scenario's `run.seed`).
    #[arg(long)]
    pub seed_base: Option<u64>,
    /// PCT scheduling with this depth (bugs needing up to DEPTH−1 ordering constraints).
    #[arg(long, value_name = "DEPTH")]
    pub pct: Option<u32>,
    /// Run only seeds with seed % N == I (a Slurm array / CI matrix element).
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Plant a bug: a mutant name from --list-mutants (default: the correct protocol).
    #[arg(long, default_value = "none")]
    pub mutant: String,
    /// List the mutants of the scenario's protocol (of every protocol without a scenario), with
    /// one-line descriptions, and exit.
    #[arg(long)]
    pub list_mutants: bool,
    /// Fault families: none, all (every family), or a comma list of delay,drop,pause,crash,verb-delay,response-delay.
    #[arg(long, default_value = "none")]
    pub faults: String,
    /// Stop after the wave that found the first violation.
    #[arg(long)]
    pub stop_on_failure: bool,
    /// Failures to shrink into replay files (the lowest seeds first).
    #[arg(long, default_value_t = 1)]
    pub replays: usize,
    /// Write replay files without shrinking.
    #[arg(long)]
    pub no_shrink: bool,
    /// Runs in parallel (default: one per core). Each run is single-threaded.
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Output directory (default: results/fuzz/<paper>/<scenario name>/<mutant>/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the swarm configuration of every seed before running it.
    #[arg(long)]
    pub verbose: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Merge shard summaries (JSON files written by earlier campaigns) and print the total.
    #[arg(long, num_args = 1.., value_name = "FILES", conflicts_with_all = ["scenario", "list_mutants"])]
    pub merge: Option<Vec<PathBuf>>,
}

#[derive(clap::Args)]
pub struct ReplayArgs {
    /// A replay file written by `dmsim fuzz` (results/fuzz/…/<mutant>-seed<N>.json).
    pub file: PathBuf,
    /// Replay against another mutant (`none`: does the correct protocol pass this schedule?).
    #[arg(long)]
    pub mutant: Option<String>,
    /// Print the whole trace (default: the last 40 lines).
    #[arg(long)]
    pub full: bool,
}

fn bad(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(exit::BAD_INPUT)
}

/// Parse `I/N` with `I < N`.
pub fn parse_shard(text: &str) -> Result<(u64, u64), String> {
    let (i, n) = text.split_once('/').ok_or_else(|| format!("--shard {text:?}: expected I/N"))?;
    let i: u64 = i.trim().parse().map_err(|_| format!("--shard {text:?}: I is not a number"))?;
    let n: u64 = n.trim().parse().map_err(|_| format!("--shard {text:?}: N is not a number"))?;
    if n == 0 || i >= n {
        return Err(format!("--shard {text:?}: need 0 ≤ I < N"));
    }
    Ok((i, n))
}

/// The mutants of `scenario`'s protocol, or of every registered protocol.
fn list_mutants(scenario: Option<&Path>) -> ExitCode {
    let registry = registry::sim();
    let protocols: Vec<_> = match scenario {
        Some(path) => match load_target(path) {
            Ok((target, _)) => {
                vec![registry.get_arc(&target.file.protocol).expect("loaded through the registry")]
            }
            Err(code) => return code,
        },
        None => registry.names().iter().filter_map(|n| registry.get_arc(n)).collect(),
    };
    let mut seen = Vec::new();
    for p in protocols {
        if seen.contains(&p.names()) {
            continue;
        }
        seen.push(p.names());
        if scenario.is_none() {
            println!("# {}", p.names().join(", "));
        }
        println!("{:<30} the correct protocol", "none");
        for m in p.mutants() {
            println!("{:<30} {}", m.name, m.breaks);
        }
    }
    ExitCode::SUCCESS
}

fn load_target(path: &Path) -> Result<(ProtocolTarget, String), ExitCode> {
    let text = dmsim_sim::scenario::strict_json::read_input(path)
        .map_err(|e| bad(format!("{}: cannot read: {e}", shown(path))))?;
    match ProtocolTarget::from_json(&text, &registry::sim()) {
        Ok(t) => Ok((t, text)),
        Err(problems) => {
            for p in problems {
                let field = if p.path.is_empty() { "(top level)".to_string() } else { p.path };
                eprintln!("error: {}: {field}: {}", shown(path), p.reason);
            }
            Err(ExitCode::from(exit::BAD_INPUT))
        }
    }
}

pub fn fuzz(args: FuzzArgs) -> ExitCode {
    if args.list_mutants {
        return list_mutants(args.scenario.as_deref());
    }
    if let Some(files) = &args.merge {
        return merge(files);
    }
    let path = args.scenario.clone().expect("clap requires a scenario");
    let faults = match Faults::parse(&args.faults) {
        Ok(f) => f,
        Err(e) => return bad(format!("--faults: {e}")),
    };
    let (shard_i, shard_n) = match args.shard.as_deref().map(parse_shard).transpose() {
        Ok(s) => s.unwrap_or((0, 1)),
        Err(e) => return bad(e),
    };
    if args.pct == Some(0) {
        return bad("--pct: depth must be at least 1");
    }
    let (target, text) = match load_target(&path) {
        Ok(t) => t,
        Err(code) => return code,
    };
    if !target.knows_mutant(&args.mutant) {
        return bad(format!(
            "--mutant: {} has no mutant {:?} (see dmsim fuzz {} --list-mutants)",
            target.file.protocol,
            args.mutant,
            shown(&path)
        ));
    }
    let base = args.seed_base.unwrap_or(target.file.run.seed);
    let seeds: Vec<u64> =
        (0..args.seeds).map(|k| base.wrapping_add(k)).filter(|s| s % shard_n == shard_i).collect();
    if args.verbose {
        for &s in &seeds {
            eprintln!("seed {s}: {}", target.describe_swarm(s, faults));
        }
    }
    let strategy = match args.pct {
        Some(depth) => StrategyKind::Pct { depth },
        None => StrategyKind::Random,
    };
    let spec = CampaignSpec {
        seeds,
        strategy,
        mutant: args.mutant.clone(),
        faults,
        stop_after: args.stop_on_failure.then_some(1),
        progress: !args.quiet,
    };
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(args.jobs.unwrap_or(0)).build() {
        Ok(p) => p,
        Err(e) => return bad(format!("--jobs: {e}")),
    };
    // The wall clock lives here, at the edge: the campaign only reports speed with it.
    let started = std::time::Instant::now();
    let run = pool.install(|| run_campaign_timed(&target, &spec, &|| started.elapsed().as_secs_f64()));
    let mut summary = run.summary;
    summary.scenario = shown(&path);
    summary.scenario_hash = dmsim_sim::fuzz::replay::content_hash(&text);
    summary.shard = format!("{shard_i}/{shard_n}");
    let dir = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results")
            .join("fuzz")
            .join(&target.file.paper)
            .join(&target.file.name)
            .join(&args.mutant)
    });
    // Failures: report, shrink the first few into replay files.
    let context = FailureContext {
        scenario_path: &shown(&path),
        scenario_text: &text,
        mutant: &args.mutant,
        faults,
        strategy: summary.strategy.clone(),
        shrink: !args.no_shrink,
        budget: ShrinkBudget::default(),
    };
    for (seed, _, r) in run.failing.iter().take(args.replays) {
        let f = r.verdict.failure().expect("failing runs only");
        eprintln!("violation: seed {seed}: {} — {}", f.checker, first_line(&f.message));
        eprintln!("  swarm: {}", r.swarm);
        match pool.install(|| finish_failure(&target, &context, *seed, r)) {
            Ok((file, traced)) => match file.write_in(&dir) {
                Ok(p) => {
                    eprintln!("  {}", file.strategy);
                    for line in traced
                        .verdict
                        .failure()
                        .map(|f| f.last_trace.as_slice())
                        .unwrap_or(&[])
                        .iter()
                        .rev()
                        .take(8)
                        .rev()
                    {
                        eprintln!("  | {line}");
                    }
                    eprintln!("  reproduce: dmsim replay {}", shown(&p));
                    summary.replays.push(shown(&p));
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(exit::IO);
                }
            },
            Err(e) => eprintln!("  could not finish the failure: {e}"),
        }
    }
    if run.failing.len() > args.replays {
        eprintln!("({} more failing seeds in the summary)", run.failing.len() - args.replays);
    }
    let summary_path = dir.join(format!("shard-{shard_i}-of-{shard_n}.json"));
    if let Err(e) = write_summary(&summary_path, &summary) {
        eprintln!("error: {e}");
        return ExitCode::from(exit::IO);
    }
    if summary.crashes > 0 {
        println!(
            "unrecoverable: {} schedules hit a fault the protocol has no recovery for (not violations)",
            summary.crashes
        );
    }
    println!("summary: {}", shown(&summary_path));
    println!("{}", summary.line());
    if summary.violations > 0 {
        ExitCode::from(exit::FAILURE)
    } else {
        ExitCode::SUCCESS
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

fn write_summary(path: &Path, summary: &CampaignSummary) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", shown(dir)))?;
    }
    let mut text = serde_json::to_string_pretty(summary).expect("summary serializes");
    text.push('\n');
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", shown(path)))
}

fn merge(files: &[PathBuf]) -> ExitCode {
    let mut parts = Vec::new();
    for f in files {
        let text = match dmsim_sim::scenario::strict_json::read_input(f) {
            Ok(t) => t,
            Err(e) => return bad(format!("{}: cannot read: {e}", shown(f))),
        };
        match serde_json::from_str::<CampaignSummary>(&text) {
            Ok(s) => parts.push(s),
            Err(e) => return bad(format!("{}: not a fuzz summary: {e}", shown(f))),
        }
    }
    let keys: std::collections::BTreeSet<_> =
        parts.iter().map(|p| (p.scenario_hash.clone(), p.mutant.clone(), p.faults.clone())).collect();
    if keys.len() > 1 {
        eprintln!("warning: merging summaries of different scenarios, mutants or fault sets");
    }
    let merged = CampaignSummary::merge(&parts);
    for f in &merged.failures {
        if let Some(failure) = &f.failure {
            println!("violation: seed {}: {} — {}", f.seed, failure.checker, first_line(&failure.message));
        }
    }
    for r in &merged.replays {
        println!("replay: {r}");
    }
    println!("{}", merged.line());
    if merged.violations > 0 {
        ExitCode::from(exit::FAILURE)
    } else {
        ExitCode::SUCCESS
    }
}

pub fn replay(args: ReplayArgs) -> ExitCode {
    let file = match ReplayFile::read(&args.file) {
        Ok(f) => f,
        Err(e) => return bad(e),
    };
    let text = file.scenario_text();
    let target = match ProtocolTarget::from_json(&text, &registry::sim()) {
        Ok(t) => t,
        Err(problems) => {
            for p in problems {
                eprintln!("error: {} (embedded scenario): {}: {}", shown(&args.file), p.path, p.reason);
            }
            return ExitCode::from(exit::BAD_INPUT);
        }
    };
    let mutant = args.mutant.clone().unwrap_or_else(|| file.mutant.clone());
    if !target.knows_mutant(&mutant) {
        return bad(format!("--mutant: {} has no mutant {mutant:?}", target.file.protocol));
    }
    if let Ok(on_disk) = dmsim_sim::scenario::strict_json::read_input(&file.scenario_path) {
        if serde_json::from_str::<serde_json::Value>(&on_disk).ok().as_ref() != Some(&file.scenario) {
            eprintln!(
                "note: {} has changed since this replay was recorded; replaying the embedded copy",
                file.scenario_path
            );
        }
    }
    let here = dmsim_sim::fuzz::replay::git_commit();
    if here != file.git_commit {
        eprintln!("note: recorded at commit {}, replaying at {here}", file.git_commit);
    }
    let r = target.run(&RunRequest {
        seed: file.seed,
        strategy: Strategy::Replay { log: file.choice_log.clone() },
        mutant: mutant.clone(),
        faults: file.faults,
        trace: true,
    });
    println!(
        "replay: seed {} mutant {mutant} faults {} ({} decisions)",
        file.seed,
        file.faults,
        file.choice_log.len()
    );
    println!("swarm: {}", r.swarm);
    let skip = if args.full {
        0
    } else {
        r.trace_lines.len().saturating_sub(dmsim_sim::fuzz::target::LAST_TRACE_LINES)
    };
    if skip > 0 {
        println!("… {skip} earlier trace lines (--full prints them)");
    }
    for line in &r.trace_lines[skip..] {
        println!("{line}");
    }
    let hash = format!("{:016x}", r.trace_hash);
    let same_run = mutant == file.mutant;
    let matches = hash == file.trace_hash;
    match &r.verdict {
        Verdict::Violation(f) => {
            println!("VIOLATION {} at {}ns:", f.checker, f.at_ns);
            for line in f.message.lines() {
                println!("  {line}");
            }
        }
        Verdict::Crash(note) => println!("{note}"),
        Verdict::Pass => println!("pass: no checker fired"),
    }
    if same_run {
        println!(
            "trace-hash: {hash} (recorded {}: {})",
            file.trace_hash,
            if matches { "match" } else { "MISMATCH" }
        );
    } else {
        println!("trace-hash: {hash}");
    }
    if same_run && !matches {
        eprintln!("error: the replay diverged from the recorded run (different commit or scenario?)");
    }
    match r.verdict {
        Verdict::Violation(_) => ExitCode::from(exit::FAILURE),
        _ if same_run && !matches => ExitCode::from(exit::FAILURE),
        _ => ExitCode::SUCCESS,
    }
}
