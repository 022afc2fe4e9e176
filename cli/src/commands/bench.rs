//! `dmsim bench`: the simulator's own speed. Benchmarks read the wall clock; runs never do.

use std::process::ExitCode;

use dmsim_protocols::nic::{Cluster, Nanos, Nic, NodeId, NodeKind};

use dmsim_sim::choice::Strategy;
use dmsim_sim::engine::{Sim, SimConfig, StopReason};
use dmsim_sim::fabric::Profile;

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
}

pub fn bench(what: BenchWhat) -> ExitCode {
    match what {
        BenchWhat::Engine { tasks, events } => {
            let (events, seconds, hash) = hold_model(tasks, events);
            println!("hold model: {tasks} tasks, {events} events in {seconds:.3}s, trace-hash {hash:016x}");
            println!("events/s: {:.0}", events as f64 / seconds);
            ExitCode::SUCCESS
        }
    }
}

/// The classic hold model: each task sleeps an exponential-ish pseudo-random delay (an LCG per
/// task, so the run is deterministic) and loops. Returns (events, wall seconds, trace hash).
pub fn hold_model(tasks: u32, events: u64) -> (u64, f64, u64) {
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
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                nic.sleep(Nanos(1 + (state >> 54))).await;
            }
        });
    }
    let started = std::time::Instant::now();
    let outcome = sim.run();
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(outcome.stop, StopReason::Finished);
    (outcome.events, seconds, outcome.trace_hash)
}
