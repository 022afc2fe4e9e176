//! `dmsim bench`: the simulator's own speed. Benchmarks read the clocks (this thread's CPU time
//! and the wall clock); runs never do.

use std::path::PathBuf;
use std::process::ExitCode;

use dmsim_protocols::nic::{Cluster, Nanos, Nic, NodeId, NodeKind};

use dmsim_sim::choice::Strategy;
use dmsim_sim::engine::{Sim, SimConfig, StopReason};
use dmsim_sim::fabric::Profile;
use dmsim_sim::fuzz::{FuzzTarget, RunRequest, Verdict};
use dmsim_sim::runners::{self, RunOptions};
use dmsim_sim::trace::{mix, TraceSink};

use super::{exit, shown};
use crate::registry;

#[derive(clap::Subcommand)]
pub enum BenchWhat {
    /// The engine alone on a hold model: tasks that sleep a pseudo-random time, repeatedly.
    Engine {
        /// Concurrent tasks.
        #[arg(long, default_value_t = 1000)]
        tasks: u32,
        /// Total events (wakes) to simulate.
        #[arg(long, default_value_t = 20_000_000)]
        events: u64,
    },
    /// Fuzzing speed: schedules of a fuzz scenario one after another on this thread, with the
    /// scenario's checks (every-event invariants included), in schedules per CPU-second.
    Fuzz {
        /// The fuzz scenario, e.g. scenarios/selcc/fuzz-small.json.
        scenario: PathBuf,
        /// Schedules (random strategy, no faults), seeds base, base+1, ….
        #[arg(long, default_value_t = 2000)]
        seeds: u64,
        /// First seed (default: the scenario's `run.seed`).
        #[arg(long)]
        seed_base: Option<u64>,
    },
    /// Figure speed: every point of each scenario one after another on this thread (what
    /// `dmsim run -j 1` computes, without writing results), in CPU-seconds.
    Run {
        /// Scenario files, e.g. scenarios/selcc/fig*.json.
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
    },
}

pub fn bench(what: BenchWhat) -> ExitCode {
    match what {
        BenchWhat::Engine { tasks, events } => {
            let engine = hold_model(tasks, events);
            let bare = bare_heap_hold_model(tasks, events);
            println!(
                "hold model: {tasks} tasks, {} events in {:.3} CPU-s ({:.3} s wall), trace-hash {:016x}",
                engine.events, engine.cpu_seconds, engine.wall_seconds, engine.hash
            );
            println!(
                "bare heap:  {tasks} tasks, {} events in {:.3} CPU-s ({:.3} s wall), trace-hash {:016x}",
                bare.events, bare.cpu_seconds, bare.wall_seconds, bare.hash
            );
            let (e, b) = (engine.per_cpu_second(), bare.per_cpu_second());
            println!("events/CPU-s: engine {e:.0}, bare heap {b:.0}, engine/bare {:.2}", e / b);
            if engine.hash != bare.hash || engine.events != bare.events {
                eprintln!(
                    "error: the bare-heap loop did not replay the engine's events (hash or count differ)"
                );
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        BenchWhat::Fuzz { scenario, seeds, seed_base } => bench_fuzz(&scenario, seeds, seed_base),
        BenchWhat::Run { scenarios } => bench_run(&scenarios),
    }
}

/// Both benchmarks print a combined trace hash, so two binaries compared side by side can be
/// seen to have done the same work.
fn bench_fuzz(path: &std::path::Path, seeds: u64, seed_base: Option<u64>) -> ExitCode {
    let text = match dmsim_sim::scenario::strict_json::read_input(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {}: cannot read: {e}", shown(path));
            return ExitCode::from(exit::BAD_INPUT);
        }
    };
    let target = match dmsim_sim::fuzz::ProtocolTarget::from_json(&text, &registry::sim()) {
        Ok(t) => t,
        Err(problems) => {
            for p in problems {
                eprintln!("error: {}: {}: {}", shown(path), p.path, p.reason);
            }
            return ExitCode::from(exit::BAD_INPUT);
        }
    };
    let base = seed_base.unwrap_or(target.file.run.seed);
    let ((events, hash, violations, end_max), cpu, wall) = measure(|| {
        let (mut events, mut hash, mut violations, mut end_max) = (0u64, 0u64, 0u64, 0u64);
        for seed in base..base.saturating_add(seeds) {
            let r = target.run(&RunRequest {
                seed,
                strategy: Strategy::Random { seed },
                mutant: "none".into(),
                faults: Default::default(),
                trace: false,
            });
            events += r.events;
            hash = mix(hash, r.trace_hash);
            end_max = end_max.max(r.end_ns);
            if !matches!(r.verdict, Verdict::Pass) {
                violations += 1;
            }
        }
        (events, hash, violations, end_max)
    });
    println!(
        "fuzz {}: {seeds} schedules (seeds {base}..), {events} events, {violations} violations, in {cpu:.3} CPU-s ({wall:.3} s wall)",
        shown(path)
    );
    println!(
        "schedules/CPU-s {:.1}, events/schedule {:.0}, events/CPU-s {:.0}, longest schedule {end_max} ns virtual",
        seeds as f64 / cpu.max(1e-9),
        events as f64 / seeds.max(1) as f64,
        events as f64 / cpu.max(1e-9)
    );
    println!("trace-hash: {hash:016x}");
    ExitCode::SUCCESS
}

fn bench_run(paths: &[PathBuf]) -> ExitCode {
    let registry = registry::sim();
    let mut loaded = Vec::new();
    for path in paths {
        match dmsim_sim::scenario::load(path, &registry) {
            Ok(s) => loaded.push((path, s)),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(exit::BAD_INPUT);
            }
        }
    }
    let (mut total_cpu, mut total_events, mut total_hash) = (0.0, 0u64, 0u64);
    for (path, scenario) in &loaded {
        let (outcome, cpu, wall) = measure(|| {
            let (mut events, mut hash) = (0u64, 0u64);
            for p in &scenario.points {
                let r = runners::run(&registry, p, RunOptions { trace: TraceSink::Off })
                    .map_err(|e| format!("point {}: {e}", p.index))?;
                events += r.events;
                hash = mix(hash, r.trace_hash);
            }
            Ok::<_, String>((events, hash))
        });
        let (events, hash) = match outcome {
            Ok(x) => x,
            Err(e) => {
                eprintln!("error: {}: {e}", shown(path));
                return ExitCode::from(exit::FAILURE);
            }
        };
        println!(
            "{}: {} points, {events} events in {cpu:.3} CPU-s ({wall:.3} s wall), {:.0} events/CPU-s, trace-hash {hash:016x}",
            shown(path),
            scenario.points.len(),
            events as f64 / cpu.max(1e-9)
        );
        total_cpu += cpu;
        total_events += events;
        total_hash = mix(total_hash, hash);
    }
    println!(
        "total: {} scenarios, {total_events} events in {total_cpu:.3} CPU-s ({:.0} events/CPU-s)",
        loaded.len(),
        total_events as f64 / f64::max(total_cpu, 1e-9)
    );
    println!("trace-hash: {total_hash:016x}");
    ExitCode::SUCCESS
}

/// One measured loop.
pub struct Measured {
    pub events: u64,
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    pub hash: u64,
}

impl Measured {
    pub fn per_cpu_second(&self) -> f64 {
        self.events as f64 / self.cpu_seconds.max(1e-9)
    }
}

/// CPU time of this thread in seconds (Linux `/proc/thread-self/schedstat`; the machine is
/// shared, so wall time says little). Wall time where it cannot be read.
fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// Time `f` in CPU seconds (wall seconds if CPU time is unavailable) and wall seconds.
fn measure<R>(f: impl FnOnce() -> R) -> (R, f64, f64) {
    let (cpu0, wall0) = (thread_cpu_seconds(), std::time::Instant::now());
    let r = f();
    let wall = wall0.elapsed().as_secs_f64();
    // schedstat advances at scheduler ticks (a few ms): a loop shorter than a tick can read
    // 0 CPU-s, which would print an infinite rate; wall time is then the better estimate.
    let cpu = match (cpu0, thread_cpu_seconds()) {
        (Some(a), Some(b)) if b > a => b - a,
        _ => wall,
    };
    (r, cpu, wall)
}

/// The delay a hold-model task sleeps next, from its LCG state.
#[inline]
fn next_delay(state: &mut u64) -> u64 {
    *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    1 + (*state >> 54)
}

/// The classic hold model: each task sleeps an exponential-ish pseudo-random delay (an LCG per
/// task, so the run is deterministic) and loops.
pub fn hold_model(tasks: u32, events: u64) -> Measured {
    let cluster = Cluster { kinds: vec![NodeKind::Compute], region_size_bytes: vec![8] };
    let mut config = SimConfig::new(cluster, Profile::named("cx3_fdr56").unwrap(), 1);
    config.strategy = Strategy::Default;
    let mut sim = Sim::new(config);
    let per_task = events / tasks.max(1) as u64;
    for t in 0..tasks {
        let nic = sim.nic(NodeId(0));
        sim.spawn_main(NodeId(0), async move {
            let mut state = 0x9e37_79b9u64 ^ t as u64;
            for _ in 0..per_task {
                nic.sleep(Nanos(next_delay(&mut state))).await;
            }
        });
    }
    let (outcome, cpu_seconds, wall_seconds) = measure(|| sim.run());
    assert_eq!(outcome.stop, StopReason::Finished);
    Measured { events: outcome.events, cpu_seconds, wall_seconds, hash: outcome.trace_hash }
}

/// The same events with no engine: a `BinaryHeap` of `(time, seq, task)`, the ready tasks of
/// an instant run in wake order (the engine's default strategy), the engine's trace hash over
/// every popped wake. The floor the engine's per-event overhead is measured against.
pub fn bare_heap_hold_model(tasks: u32, events: u64) -> Measured {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let per_task = events / tasks.max(1) as u64;
    let (result, cpu_seconds, wall_seconds) = measure(|| {
        let mut states: Vec<u64> = (0..tasks).map(|t| 0x9e37_79b9u64 ^ t as u64).collect();
        let mut left: Vec<u64> = vec![per_task; tasks as usize];
        let mut heap: BinaryHeap<Reverse<(u64, u64, u32)>> = BinaryHeap::with_capacity(tasks as usize);
        let mut seq = 0u64;
        let mut hash = dmsim_sim::trace::Trace::new(dmsim_sim::trace::TraceSink::Off);
        let mut ready: Vec<u32> = Vec::new();
        let mut count = 0u64;
        let mut now = 0u64;
        // Every task runs at time 0 in spawn order, then at each of its wakes.
        ready.extend(0..tasks);
        loop {
            for &t in &ready {
                let i = t as usize;
                if left[i] > 0 {
                    left[i] -= 1;
                    seq += 1;
                    heap.push(Reverse((now + next_delay(&mut states[i]), seq, t)));
                }
            }
            ready.clear();
            let Some(&Reverse((time, _, _))) = heap.peek() else { break };
            now = time;
            while let Some(&Reverse((t, _, task))) = heap.peek() {
                if t != time {
                    break;
                }
                heap.pop();
                count += 1;
                hash.hash_event(time, 1, task as u64);
                ready.push(task);
            }
        }
        (count, hash.hash())
    });
    Measured { events: result.0, cpu_seconds, wall_seconds, hash: result.1 }
}
