//! `dmsim trace`: Twitter cache-trace files (the format of `github.com/twitter/cache-trace`) —
//! write a synthetic stand-in for a cluster from its published statistics, or stream a file and
//! summarise it (for checking a real trace before a run replays it).

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use super::{exit, shown};
use dmsim_protocols::difache::trace::{synthesize, SynthSpec};
use dmsim_protocols::workload::twitter_trace::TraceReader;

#[derive(clap::Subcommand)]
pub enum TraceCommand {
    /// Write a synthetic trace for one Twitter cluster (its published op mix, mean sizes and
    /// Zipf alpha; keys `syn<cluster>:<object>` mark it synthetic).
    Synth(SynthArgs),
    /// Stream a trace file and print its request count, op mix, sizes and clients.
    Stats {
        /// The trace (plain CSV; decompress .zst first or read through a named pipe).
        path: PathBuf,
    },
}

#[derive(clap::Args)]
pub struct SynthArgs {
    /// Twitter cluster number (1-54; 5, 43 and 46 have no usable statistics).
    #[arg(long)]
    pub cluster: u32,
    /// Requests to write.
    #[arg(long, default_value_t = 100_000)]
    pub ops: u64,
    /// Objects the requests spread over.
    #[arg(long, default_value_t = 20_000)]
    pub objects: u64,
    /// Per-object read-ratio spread in [0, 1] around the cluster's share (DiFache's stand-ins
    /// use 1; 0: every request reads with the share).
    #[arg(long, default_value_t = 1.0)]
    pub spread: f64,
    /// Client ids 0..N.
    #[arg(long, default_value_t = 16)]
    pub clients: u32,
    /// Requests per second of trace time (sets the timestamps).
    #[arg(long, default_value_t = 10_000)]
    pub rate: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output file (default: standard output).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn trace(command: TraceCommand) -> ExitCode {
    match command {
        TraceCommand::Synth(a) => synth(a),
        TraceCommand::Stats { path } => stats(path),
    }
}

fn synth(a: SynthArgs) -> ExitCode {
    let spec = SynthSpec {
        cluster: a.cluster,
        ops: a.ops,
        objects: a.objects,
        spread: a.spread,
        clients: a.clients,
        rate_per_s: a.rate,
        seed: a.seed,
    };
    let mut sink: Box<dyn Write> = match &a.out {
        Some(p) => match File::create(p) {
            Ok(f) => Box::new(BufWriter::new(f)),
            Err(e) => {
                eprintln!("error: --out {}: {e}", shown(p));
                return ExitCode::from(exit::IO);
            }
        },
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    };
    match synthesize(spec, &mut sink).and_then(|n| sink.flush().map(|_| n).map_err(|e| e.to_string())) {
        Ok(n) => {
            if let Some(p) = &a.out {
                eprintln!("wrote {n} synthetic requests of cluster {} to {}", a.cluster, shown(p));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(exit::BAD_INPUT)
        }
    }
}

fn stats(path: PathBuf) -> ExitCode {
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {}: {e}", shown(&path));
            return ExitCode::from(exit::BAD_INPUT);
        }
    };
    let (mut n, mut reads, mut key_bytes, mut value_bytes, mut clients) = (0u64, 0u64, 0u64, 0u64, 0u32);
    let (mut first, mut last) = (u64::MAX, 0u64);
    let mut ops = std::collections::BTreeMap::<&str, u64>::new();
    for r in TraceReader::new(BufReader::new(file)) {
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {}: {e}", shown(&path));
                return ExitCode::from(exit::BAD_INPUT);
            }
        };
        n += 1;
        reads += r.op.is_read() as u64;
        key_bytes += r.key_bytes as u64;
        value_bytes += r.value_bytes as u64;
        clients = clients.max(r.client + 1);
        first = first.min(r.timestamp_s);
        last = last.max(r.timestamp_s);
        *ops.entry(r.op.name()).or_default() += 1;
    }
    if n == 0 {
        eprintln!("error: {}: no requests", shown(&path));
        return ExitCode::from(exit::BAD_INPUT);
    }
    let d = n as f64;
    println!("requests     {n}");
    println!("read share   {:.3} (get + gets)", reads as f64 / d);
    let mix: Vec<String> = ops.iter().map(|(k, v)| format!("{k} {:.3}", *v as f64 / d)).collect();
    println!("op mix       {}", mix.join(", "));
    println!("mean sizes   key {:.1} B, value {:.1} B", key_bytes as f64 / d, value_bytes as f64 / d);
    println!("client ids   0..{clients}");
    println!("time span    {first}..{last} s");
    ExitCode::SUCCESS
}
