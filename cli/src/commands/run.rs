//! `dmsim run`: expand a scenario into points, run them in parallel (one thread per run),
//! write the results directory, and print `trace-hash: <hex>` last.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use super::{exit, shown};
use dmsim_sim::report::{ResultsDir, RunReport, Staging};
use dmsim_sim::runners::{self, PointResult, RunOptions};
use dmsim_sim::scenario::{self, results, Point};
use dmsim_sim::trace::{mix, TraceSink};

use crate::registry;

#[derive(clap::Args)]
pub struct RunArgs {
    /// The scenario file (JSON), e.g. scenarios/nic/latency-vs-payload.json.
    pub scenario: PathBuf,
    /// Base seed; overrides the file's `run.seed` (points with several seeds use N, N+1, …).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Output directory (default: results/<paper>/<name>/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write one trace file per point (one line per event) under <out>/traces/.
    #[arg(long)]
    pub trace: bool,
    /// Trace file format: `text` (point-NNN.trace, one line per event) or `perfetto`
    /// (point-NNN.json, Chrome trace-event JSON for ui.perfetto.dev). Implies --trace.
    #[arg(long, value_enum)]
    pub trace_format: Option<TraceFormat>,
    /// Runs in parallel (default: one per core). Each run is single-threaded.
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Only check the scenario file and list its points.
    #[arg(long)]
    pub dry_run: bool,
    /// Add where each point's verbs queued (the scenario's `run.fabric_waits`): per node kind
    /// and fabric resource, `fabric_wait_<kind>_<resource>_ns_per_verb`. Changes no result.
    #[arg(long)]
    pub fabric_waits: bool,
    /// No progress line per point (a failed point is still reported), as `dmsim fuzz --quiet`.
    #[arg(long)]
    pub quiet: bool,
}

/// How `--trace` writes a point's trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceFormat {
    Text,
    Perfetto,
}

pub fn run(args: RunArgs) -> ExitCode {
    let registry = registry::sim();
    let mut scenario = match scenario::load(&args.scenario, &registry) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(exit::BAD_INPUT);
        }
    };
    if let Some(seed) = args.seed {
        let base = scenario.file.run.seed;
        for p in &mut scenario.points {
            p.seed = seed.wrapping_add(p.seed - base);
        }
    }
    if args.fabric_waits {
        scenario.file.run.fabric_waits = true;
        for p in &mut scenario.points {
            p.config.run.fabric_waits = true;
        }
    }
    if args.dry_run {
        for p in &scenario.points {
            println!("point {:>3}: {} seed {}", p.index, describe(p), p.seed);
        }
        return ExitCode::SUCCESS;
    }
    let dir = match &args.out {
        Some(out) => ResultsDir::at(out),
        None => ResultsDir::for_scenario("results", &scenario.file.paper, &scenario.file.name),
    };
    // Everything (traces included) goes to a staging sibling that replaces `dir` at the end.
    let staging = match dir.and_then(|d| Staging::beside(d.path())) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(exit::IO);
        }
    };
    let dir = staging.dir().clone();
    let trace_dir = dir.file("traces");
    let tracing = args.trace || args.trace_format.is_some();
    if tracing {
        if let Err(e) = std::fs::create_dir_all(&trace_dir) {
            eprintln!("error: {}: {e}", shown(&trace_dir));
            return ExitCode::from(exit::IO);
        }
    }
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(args.jobs.unwrap_or(0)).build() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: --jobs: {e}");
            return ExitCode::from(exit::BAD_INPUT);
        }
    };
    // Wall-clock time is read here, at the CLI edge, only to report simulator speed.
    let started = std::time::Instant::now();
    let done = AtomicUsize::new(0);
    let total = scenario.points.len();
    let outcomes: Vec<Result<PointResult, String>> = pool.install(|| {
        scenario
            .points
            .par_iter()
            .map(|p| {
                let trace = if tracing {
                    let perfetto = args.trace_format == Some(TraceFormat::Perfetto);
                    let name = format!("point-{:03}.{}", p.index, if perfetto { "json" } else { "trace" });
                    let path = trace_dir.join(name);
                    match std::fs::File::create(&path) {
                        Ok(f) if perfetto => TraceSink::Perfetto(Box::new(std::io::BufWriter::new(f))),
                        Ok(f) => TraceSink::Writer(Box::new(std::io::BufWriter::new(f))),
                        Err(e) => return Err(format!("{}: {e}", shown(&path))),
                    }
                } else {
                    TraceSink::Off
                };
                let r = run_point_guarded(&registry, p, RunOptions { trace });
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if !args.quiet || r.is_err() {
                    eprintln!(
                        "{} {}{}",
                        progress(n, total, started.elapsed().as_secs_f64()),
                        describe(p),
                        r.as_ref().err().map_or(String::new(), |e| format!(": {e}"))
                    );
                }
                r
            })
            .collect()
    });
    let wall = started.elapsed().as_secs_f64();
    let mut points: Vec<Point> = Vec::new();
    let mut ok: Vec<PointResult> = Vec::new();
    let mut failures = Vec::new();
    for (p, r) in scenario.points.iter().zip(outcomes) {
        match r {
            Ok(r) => {
                points.push(p.clone());
                ok.push(r);
            }
            Err(e) => failures.push(format!("point {} ({}): {e}", p.index, describe(p))),
        }
    }
    let combined = ok.iter().fold(0u64, |h, r| mix(h, r.trace_hash));
    let cells = results::Cells::new(&points, &ok);
    let view = scenario::Scenario { points: points.clone(), ..scenario.clone() };
    let claims = results::claims(&view, &cells);
    let mut summary = results::summary(&view, &ok, combined, wall);
    summary["failures"] = serde_json::json!(failures);
    summary["commit"] = serde_json::json!(dmsim_sim::fuzz::replay::git_commit());
    // Points a fault ended that the protocol has no recovery for: results, named as such.
    let unrecoverable: Vec<String> = points
        .iter()
        .zip(&ok)
        .filter(|(_, r)| r.stop.starts_with("unrecoverable"))
        .map(|(p, r)| format!("point {} ({}): {}", p.index, describe(p), r.stop))
        .collect();
    summary["unrecoverable"] = serde_json::json!(unrecoverable);
    let data = results::table(&points, &ok);
    let figure = results::figure(&view, &cells, &claims);
    let title = format!("{} / {}: paper vs simulator", scenario.file.paper, scenario.file.name);
    let mut note = scenario.file.calibration_note.clone();
    if !scenario.file.scaling_note.is_empty() {
        note = format!("{note}\n\nScaling: {}", scenario.file.scaling_note);
    }
    let report = RunReport {
        data: &data,
        figure: &figure,
        claims_title: &title,
        claims: &claims,
        calibration_note: &note,
        summary,
    };
    let target = staging.target().to_path_buf();
    if let Err(e) = dir.write_all(report).and_then(|_| staging.publish()) {
        eprintln!("error: {e}");
        return ExitCode::from(exit::IO);
    }
    let events: u64 = ok.iter().map(|r| r.events).sum();
    println!("wrote {}", shown(&target));
    println!(
        "points: {} ok, {} failed; {events} events in {wall:.2}s wall ({:.0} events/s)",
        ok.len(),
        failures.len(),
        events as f64 / wall.max(1e-9)
    );
    for c in &claims {
        let status = match c.tolerance_verdict() {
            Some(true) => "ok  ",
            Some(false) => "MISS",
            None => "    ",
        };
        let trend = match c.trend_holds {
            Some(true) => " [trend holds]",
            Some(false) => " [trend FAILS]",
            None => "",
        };
        let paper = c.paper.map_or_else(|| "–".to_string(), |p| p.to_string());
        println!("  {status} {}: paper {paper} sim {:.4}{trend}", c.claim, c.sim);
    }
    for u in &unrecoverable {
        println!("{u}");
    }
    for f in &failures {
        eprintln!("error: {f}");
    }
    println!("trace-hash: {combined:016x}");
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::FAILURE)
    }
}

/// Run one point; a panic inside it (a protocol or engine assertion) fails that point only, so
/// the other points' results are still written.
fn run_point_guarded(
    registry: &dmsim_sim::runners::Registry,
    p: &Point,
    options: RunOptions,
) -> Result<PointResult, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| runners::run(registry, p, options))) {
        Ok(r) => r,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "non-string panic payload".into());
            // If the panic came from inside a run, take its world off this thread.
            if dmsim_sim::engine::in_simulation() {
                dmsim_sim::engine::recover_after_panic(message.clone());
            }
            Err(format!("panicked: {message}"))
        }
    }
}

pub(super) fn describe(p: &Point) -> String {
    let mut parts = Vec::new();
    if let Some((_, n)) = &p.panel {
        parts.push(format!("panel={n}"));
    }
    if let Some((_, n)) = &p.series {
        parts.push(format!("series={n}"));
    }
    if let Some((_, n, _)) = &p.x {
        parts.push(format!("x={n}"));
    }
    if parts.is_empty() {
        parts.push("single point".into());
    }
    parts.join(" ")
}

/// `[n/total ####......  1:05, ~2:10 left]`: one line per finished point (points finish out of
/// order on several cores, and a log of them is worth keeping), with a bar, the elapsed wall time
/// and a remaining-time estimate that assumes the remaining points cost what the finished ones did.
fn progress(n: usize, total: usize, elapsed_s: f64) -> String {
    let width = 10;
    let filled = (n * width).checked_div(total).unwrap_or(width).min(width);
    let left = if n >= total { 0.0 } else { elapsed_s / n.max(1) as f64 * (total - n) as f64 };
    let clock = |s: f64| {
        let s = s.round() as u64;
        if s >= 3600 {
            format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
        } else {
            format!("{}:{:02}", s / 60, s % 60)
        }
    };
    let eta = if n >= total { String::new() } else { format!(", ~{} left", clock(left)) };
    format!("[{n}/{total} {}{} {}{eta}]", "#".repeat(filled), ".".repeat(width - filled), clock(elapsed_s))
}

#[cfg(test)]
mod tests {
    use super::progress;

    #[test]
    fn progress_shows_the_bar_elapsed_time_and_what_is_left() {
        assert_eq!(progress(1, 4, 30.0), "[1/4 ##........ 0:30, ~1:30 left]");
        assert_eq!(progress(4, 4, 125.0), "[4/4 ########## 2:05]");
        assert_eq!(progress(1, 1000, 7.2), "[1/1000 .......... 0:07, ~1:59:53 left]");
    }
}
