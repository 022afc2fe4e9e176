//! The `dmsim` command line. Scenario JSON becomes typed config here (via `scenario::load`) and
//! nowhere deeper; each outcome has its own exit status.

mod bench;
mod compare;
mod fuzz;
mod hw;
pub mod hw_run;
mod report;
mod run;
mod trace;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit statuses, one per kind of outcome.
pub mod exit {
    /// A run failed (stalled, violated an invariant) or a fuzz campaign found a violation.
    pub const FAILURE: u8 = 1;
    /// Bad input: a scenario, flag or trace/replay file that cannot be used.
    pub const BAD_INPUT: u8 = 2;
    /// Results could not be written.
    pub const IO: u8 = 3;
    /// RDMA hardware is unavailable (or the binary was built without `--features rdma`).
    pub const NO_RDMA: u8 = 4;
}

#[derive(Parser)]
#[command(
    name = "dmsim",
    version,
    about = "Simulate (and run on RDMA) coherence protocols for disaggregated memory",
    long_about = "dmsim runs protocols for disaggregated memory (SELCC, SEL, GAM-like RPC, …) in a \
deterministic discrete-event simulator with a modelled RDMA fabric, or on real RDMA through \
libibverbs.\n\nA run is reproducible from (scenario, seed): its last line is `trace-hash: <hex>`.",
    after_help = "Examples:\n  dmsim run scenarios/nic/latency-vs-payload.json\n  dmsim run scenarios/selcc/fig12.json --seed 7 --out /tmp/fig12\n  dmsim bench engine\n  dmsim profiles cx3_fdr56"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario file; write data.csv, summary.json, plot.svg and paper-vs-sim.md.
    Run(run::RunArgs),
    /// Measure the simulator's own speed.
    Bench {
        #[command(subcommand)]
        what: bench::BenchWhat,
    },
    /// Fuzz interleavings of a scenario with every checker on; shrink failures into replay files.
    Fuzz(fuzz::FuzzArgs),
    /// Reproduce a failure from its replay file, bit for bit, and print its trace.
    Replay(fuzz::ReplayArgs),
    /// Two results directories of one scenario side by side (e.g. `dmsim run` vs `dmsim hw run`).
    Compare(compare::CompareArgs),
    /// Real RDMA: calibrate a device into a NIC profile, or run a scenario on a cluster.
    Hw {
        #[command(subcommand)]
        command: hw::HwCommand,
    },
    /// List the named NIC profiles, or print one as JSON.
    Profiles {
        /// Profile to print.
        name: Option<String>,
    },
    /// Build one static HTML site over every results directory (claims, plots, run metadata,
    /// NIC profiles); open <out>/index.html from disk.
    Report(report::ReportArgs),
    /// Twitter cache-trace files: write a synthetic one for a cluster, or summarise one.
    Trace {
        #[command(subcommand)]
        command: trace::TraceCommand,
    },
    /// Print the JSON Schema of scenario files (`scenarios/schema.json` is this output; a
    /// scenario may name it in `"$schema"` for editor completion).
    Schema,
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { exit::BAD_INPUT } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Report(args) => report::run(args),
        Command::Bench { what } => bench::bench(what),
        Command::Hw { command } => hw::hw(command),
        Command::Profiles { name } => profiles(name),
        Command::Schema => {
            let schema = dmsim_sim::scenario::schema::scenario_schema();
            println!("{}", serde_json::to_string_pretty(&schema).expect("a schema serializes"));
            ExitCode::SUCCESS
        }
        Command::Fuzz(args) => fuzz::fuzz(args),
        Command::Replay(args) => fuzz::replay(args),
        Command::Trace { command } => trace::trace(command),
    }
}

fn profiles(name: Option<String>) -> ExitCode {
    use dmsim_sim::fabric::Profile;
    match name {
        None => {
            for n in Profile::names() {
                let p = Profile::named(n).unwrap();
                println!("{n:<12} {}", p.description);
            }
            ExitCode::SUCCESS
        }
        Some(n) => match Profile::named(&n) {
            Some(p) => {
                println!("{}", serde_json::to_string_pretty(&p).expect("profile serializes"));
                ExitCode::SUCCESS
            }
            None => {
                eprintln!("error: unknown profile {n:?} (known: {})", Profile::names().join(", "));
                ExitCode::from(exit::BAD_INPUT)
            }
        },
    }
}

/// `PathBuf` shown the way the user typed it.
pub fn shown(path: &std::path::Path) -> String {
    path.display().to_string()
}
