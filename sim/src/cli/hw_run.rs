//! `dmsim hw run`: one scenario point on real RDMA, one process per node.
//!
//! Every rank loads the same scenario and builds the same [`Plan`]; rank `r` is node `r`
//! (memory nodes first). After a start barrier each rank runs its node's tasks; when its mains
//! finish it sends its [`NodeReport`] to rank 0 over the NIC (a SEND on a reserved port), and
//! rank 0 combines them with the same metrics code the simulator uses and writes the same
//! results directory.

use std::path::PathBuf;
use std::process::ExitCode;

use dmsim_hw::cluster::{bootstrap, BootstrapOptions};
use dmsim_protocols::nic::{Nanos, Nic, NodeId};

use super::hw::hw_error;
use super::{exit, shown};
use crate::report::{ResultsDir, RunReport, Table};
use crate::runners::plan::{NodeReport, Plan};
use crate::scenario::{self, results};

/// Port the reports travel on (above any protocol's ports).
const REPORT_PORT: u16 = u16::MAX - 1;
const DONE_PORT: u16 = u16::MAX - 2;
const GO_PORT: u16 = u16::MAX - 3;

#[derive(clap::Args)]
pub struct HwRunArgs {
    /// The scenario file; every rank must be given the same one.
    pub scenario: PathBuf,
    /// Which point of the scenario's sweep to run (see `dmsim run --dry-run`).
    #[arg(long, default_value_t = 0)]
    pub point: usize,
    /// This process's rank (default: from Slurm / Open MPI / PMI environment).
    #[arg(long)]
    pub rank: Option<u32>,
    /// Number of processes = nodes in the scenario (default: from the launcher).
    #[arg(long)]
    pub size: Option<u32>,
    /// Rank 0's HOST:PORT for the TCP rendezvous (default: $DMSIM_RENDEZVOUS).
    #[arg(long)]
    pub rendezvous: Option<String>,
    #[command(flatten)]
    pub nic: super::hw::DeviceArgs,
    /// Output directory on rank 0 (default: results/<paper>/<name>-hw/).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(args: HwRunArgs) -> ExitCode {
    let scenario = match scenario::load(&args.scenario) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(exit::BAD_INPUT);
        }
    };
    let Some(point) = scenario.points.get(args.point).cloned() else {
        eprintln!("error: --point {}: the scenario has {} points", args.point, scenario.points.len());
        return ExitCode::from(exit::BAD_INPUT);
    };
    match point.config.protocol.as_str() {
        "nic_micro" => match crate::runners::nic_micro::MicroPlan::new(&point) {
            Ok(plan) => run_plan(&plan, &args, &scenario, &point),
            Err(e) => {
                eprintln!("error: {}: {e}", shown(&args.scenario));
                ExitCode::from(exit::BAD_INPUT)
            }
        },
        "selcc" | "sel" => match crate::runners::selcc::SelccPlan::new(&point) {
            Ok(plan) => run_plan(&plan, &args, &scenario, &point),
            Err(e) => {
                eprintln!("error: {}: {e}", shown(&args.scenario));
                ExitCode::from(exit::BAD_INPUT)
            }
        },
        other => {
            eprintln!(
                "error: {}: protocol: {other:?} has no hardware plan yet (nic_micro, selcc and sel have)",
                shown(&args.scenario)
            );
            ExitCode::from(exit::BAD_INPUT)
        }
    }
}

fn run_plan<P: Plan>(
    plan: &P,
    args: &HwRunArgs,
    scenario: &scenario::Scenario,
    point: &scenario::Point,
) -> ExitCode {
    let mut options = BootstrapOptions::new(plan.cluster());
    options.rank = args.rank;
    options.size = args.size;
    options.rendezvous = args.rendezvous.clone();
    options.device = args.nic.device.clone();
    options.port = args.nic.port;
    options.gid_index = args.nic.gid_index;
    let mut cluster = match bootstrap(options) {
        Ok(c) => c,
        Err(e) => return hw_error(&e),
    };
    let nic = cluster.nic();
    plan.setup(&nic);
    if let Err(e) = cluster.barrier("setup") {
        return hw_error(&e);
    }
    let run = plan.node(nic.clone());
    for daemon in run.daemons {
        nic.spawn(daemon);
    }
    let size = cluster.size() as usize;
    let mains = run.mains;
    let collect = run.collect;
    let worker = nic.clone();
    // Each client is its own task (as each is its own thread on a real node); the main future
    // only counts them out.
    let done = std::sync::Arc::new(dmsim_protocols::sync::Channel::new());
    let start = nic.now();
    let clients = mains.len();
    for m in mains {
        let done = done.clone();
        nic.spawn(async move {
            m.await;
            done.push(());
        });
    }
    let outcome: Result<(Nanos, Vec<NodeReport>), String> = cluster.block_on(async move {
        for _ in 0..clients {
            done.pop().await;
        }
        let elapsed = worker.now().saturating_sub(start);
        // Collect only once every node's clients are done (a memory node's end-of-run checks
        // must see the compute nodes' final flushes): DONE to rank 0, then GO to everyone.
        let zero = NodeId(0);
        if worker.node() != zero {
            worker.send(zero, DONE_PORT, Vec::new()).await.map_err(|e| e.to_string())?;
            worker.recv(GO_PORT).await.map_err(|e| e.to_string())?;
            let mine = collect();
            let bytes = serde_json::to_vec(&(elapsed.0, &mine)).expect("report serializes");
            worker.send(zero, REPORT_PORT, bytes).await.map_err(|e| e.to_string())?;
            return Ok((elapsed, Vec::new()));
        }
        for _ in 1..size {
            worker.recv(DONE_PORT).await.map_err(|e| e.to_string())?;
        }
        for r in 1..size {
            worker.send(NodeId(r as u16), GO_PORT, Vec::new()).await.map_err(|e| e.to_string())?;
        }
        let mut reports = vec![NodeReport::default(); size];
        let mut slowest = elapsed;
        reports[0] = collect();
        for _ in 1..size {
            let m = worker.recv(REPORT_PORT).await.map_err(|e| e.to_string())?;
            let (ns, report): (u64, NodeReport) =
                serde_json::from_slice(&m.bytes).map_err(|e| format!("report from {}: {e}", m.from))?;
            slowest = slowest.max(Nanos(ns));
            reports[m.from.index()] = report;
        }
        Ok((slowest, reports))
    });
    let rank = cluster.rank();
    if let Err(e) = cluster.finish() {
        return hw_error(&e);
    }
    let (elapsed, reports) = match outcome {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: rank {rank}: {e}");
            return ExitCode::from(exit::FAILURE);
        }
    };
    if rank != 0 {
        return ExitCode::SUCCESS;
    }
    write_results(plan, args, scenario, point, elapsed, &reports)
}

fn write_results<P: Plan>(
    plan: &P,
    args: &HwRunArgs,
    scenario: &scenario::Scenario,
    point: &scenario::Point,
    elapsed: Nanos,
    reports: &[NodeReport],
) -> ExitCode {
    let metrics = plan.metrics(reports, elapsed);
    let result = crate::runners::PointResult {
        metrics,
        events: 0,
        end_time_ns: elapsed.0,
        trace_hash: 0,
        stop: "Finished (hardware)".into(),
        ops: plan.ops(reports),
    };
    let points = vec![point.clone()];
    let ok = vec![result];
    let view = scenario::Scenario { points: points.clone(), ..scenario.clone() };
    let cells = results::Cells::new(&points, &ok);
    let claims = results::claims(&view, &cells);
    let mut summary = results::summary(&view, &ok, 0, elapsed.as_secs_f64());
    summary["backend"] = serde_json::json!("hardware");
    let data: Table = results::table(&points, &ok);
    let figure = results::figure(&view, &cells);
    let dir = match &args.out {
        Some(out) => ResultsDir::at(out),
        None => {
            ResultsDir::for_scenario("results", &scenario.file.paper, &format!("{}-hw", scenario.file.name))
        }
    };
    let dir = match dir {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(exit::IO);
        }
    };
    let title = format!("{} / {} on hardware", scenario.file.paper, scenario.file.name);
    let report = RunReport {
        data: &data,
        figure: &figure,
        claims_title: &title,
        claims: &claims,
        calibration_note: "",
        summary,
    };
    if let Err(e) = dir.write_all(report) {
        eprintln!("error: {e}");
        return ExitCode::from(exit::IO);
    }
    for (k, v) in &ok[0].metrics {
        println!("{k}: {v:.4}");
    }
    println!("wrote {}", shown(dir.path()));
    ExitCode::SUCCESS
}
