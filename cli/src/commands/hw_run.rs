//! `dmsim hw run`: one scenario point on real RDMA, one process per node.
//!
//! Every rank loads the same scenario and builds the same [`Plan`] from the protocol's one
//! definition (through the registry); rank `r` is node `r`
//! (memory nodes first). After a start barrier each rank runs its node's tasks; when its mains
//! finish it sends its [`NodeReport`] to rank 0 over the NIC (a SEND on a reserved port), and
//! rank 0 combines them with the same metrics code the simulator uses and writes the same
//! results directory. Reports travel in chunks (a message holds a few KiB; a report with a
//! history holds more).
//!
//! Ranks meet at the TCP rendezvous only as members of one job: each proves the job secret
//! (`$DMSIM_JOB_SECRET` or `--job-secret-file`) and sends a job hash over the scenario file's
//! bytes, the point and the hardware settings ([`dmsim_hw::cluster::job_hash_of`]); a rank of
//! another job, or of the same job with another scenario, is refused (see `dmsim_hw::rendezvous`).
//!
//! Histories: when the plan logs client operations (SELCC with `check: true`), rank 0 also
//! estimates every rank's clock offset by ping-pong over the NIC once all clients are done
//! (offset from the fastest of [`CLOCK_ROUNDS`] round trips, ± half that round trip), merges the
//! logs onto its clock and runs the simulator's history checkers on them
//! ([`dmsim_sim::runners::check_histories`]) and the plan's end-of-run check ([`Plan::verify`]). A violation is printed, the results are still
//! written, and the exit status is non-zero.

use std::path::PathBuf;
use std::process::ExitCode;

use dmsim_hw::auth::{self, Secret};
use dmsim_hw::cluster::{bootstrap, discover_rank_size, BootstrapOptions};
use dmsim_protocols::nic::{Nanos, Nic};

use super::hw::hw_error;
use super::{exit, shown};
use dmsim_protocols::harness::gather::{gather, Gathered};
use dmsim_protocols::harness::{CheckLevel, Plan, PointSpec, Problem, Protocol};
use dmsim_sim::report::{ResultsDir, RunReport, Table};
use dmsim_sim::runners::common::point_spec;
use dmsim_sim::runners::{check_histories, PointResult};

use crate::registry;
use dmsim_sim::scenario::{self, results};

#[derive(clap::Args)]
pub struct HwRunArgs {
    /// The scenario file; every rank must be given the same one.
    pub scenario: PathBuf,
    /// Which point of the scenario's sweep to run (see `dmsim run --dry-run`); default: every
    /// point, one after the other (each bootstraps the cluster afresh), into one results
    /// directory.
    #[arg(long)]
    pub point: Option<usize>,
    /// This process's rank (default: from Slurm / Open MPI / PMI environment).
    #[arg(long)]
    pub rank: Option<u32>,
    /// Number of processes = nodes in the scenario (default: from the launcher).
    #[arg(long)]
    pub size: Option<u32>,
    /// Rank 0's HOST:PORT for the TCP rendezvous (default: $DMSIM_RENDEZVOUS). Rank 0 listens
    /// exactly there (the host must be one of its addresses).
    #[arg(long)]
    pub rendezvous: Option<String>,
    /// Rank 0 listens on every interface at the rendezvous port instead.
    #[arg(long)]
    pub rendezvous_listen_all: bool,
    /// File holding the job secret, the same on every rank (default: $DMSIM_JOB_SECRET). Ranks
    /// prove it to each other at the rendezvous; it is never sent or written anywhere.
    #[arg(long)]
    pub job_secret_file: Option<PathBuf>,
    /// The secret read from --job-secret-file (once, before any point runs).
    #[arg(skip)]
    pub secret: Option<Secret>,
    #[command(flatten)]
    pub nic: super::hw::DeviceArgs,
    /// Seconds without any completed client operation on this node before the run is declared
    /// stalled (exit 1); 0 disables the watchdog.
    #[arg(long, default_value_t = 120)]
    pub stall_timeout: u64,
    /// The QPs' local ACK timeout exponent (4.096 µs · 2^N, as `ibv_modify_qp`'s `timeout`):
    /// how long a verb waits for its ACK before the transport retransmits. Every rank must
    /// pass the same value (it is part of the job hash).
    #[arg(long, default_value_t = dmsim_hw::HwConfig::default().ack_timeout,
          value_parser = clap::value_parser!(u8).range(1..=31))]
    pub ack_timeout: u8,
    /// Transport retransmissions before a verb fails with "retry exceeded" (`retry_cnt`).
    #[arg(long, default_value_t = dmsim_hw::HwConfig::default().retry_count,
          value_parser = clap::value_parser!(u8).range(0..=7))]
    pub retry_count: u8,
    /// Fault injection for testing the watchdog: on this rank, wait for one client more than
    /// there are (as if one never returned).
    #[arg(long, hide = true)]
    pub fault_stuck_client_on_rank: Option<u32>,
    /// Output directory on rank 0 (default: results/<paper>/<name>-hw/).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(mut args: HwRunArgs) -> ExitCode {
    let scenario = match scenario::load(&args.scenario, &registry::sim()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(exit::BAD_INPUT);
        }
    };
    // Every rank must run the same scenario file: its hash goes into the rendezvous job hash.
    let scenario_hash = match dmsim_sim::scenario::strict_json::read_input(&args.scenario) {
        Ok(text) => auth::job_hash(&[text.as_bytes()]),
        Err(e) => {
            eprintln!("error: {}: {e}", shown(&args.scenario));
            return ExitCode::from(exit::BAD_INPUT);
        }
    };
    if let Some(path) = &args.job_secret_file {
        match Secret::from_file(path) {
            Ok(s) => args.secret = Some(s),
            Err(e) => return hw_error(&e),
        }
    }
    let indices: Vec<usize> = match args.point {
        Some(i) if i < scenario.points.len() => vec![i],
        Some(i) => {
            eprintln!("error: --point {i}: the scenario has {} points", scenario.points.len());
            return ExitCode::from(exit::BAD_INPUT);
        }
        None => (0..scenario.points.len()).collect(),
    };
    // Every plan up front, so a bad point is reported before any hardware is touched.
    let mut plans: Vec<Box<dyn HwPlan>> = Vec::with_capacity(indices.len());
    for &i in &indices {
        let point = &scenario.points[i];
        let Some(protocol) = registry::hw(&point.config.protocol) else {
            eprintln!(
                "error: {}: protocol: {:?} has no hardware driver",
                shown(&args.scenario),
                point.config.protocol
            );
            return ExitCode::from(exit::BAD_INPUT);
        };
        match protocol.prepare(&hw_spec(point)) {
            Ok(plan) => plans.push(plan),
            Err(problems) => {
                for p in problems {
                    eprintln!("error: {}: point {i}: {p}", shown(&args.scenario));
                }
                return ExitCode::from(exit::BAD_INPUT);
            }
        }
    }
    // One launch has one process per node: run the points whose cluster has that many nodes
    // (a sweep over cluster size is launched once per size).
    let needed: std::collections::BTreeSet<usize> = plans.iter().map(|p| p.node_count()).collect();
    let size =
        discover_rank_size(args.rank, args.size, |k| std::env::var(k).ok()).ok().map(|(_, s)| s as usize);
    let size = match (size, needed.len()) {
        (Some(size), _) => size,
        (None, 1) => *needed.first().expect("one size"),
        (None, _) => {
            eprintln!(
                "error: {}: the points need {} nodes; give --rank/--size (or launch with srun/mpirun) \
                 so the points of that size run",
                shown(&args.scenario),
                list(&needed)
            );
            return ExitCode::from(exit::BAD_INPUT);
        }
    };
    let (indices, plans): (Vec<usize>, Vec<Box<dyn HwPlan>>) =
        indices.into_iter().zip(plans).filter(|(_, p)| p.node_count() == size).unzip();
    if indices.is_empty() {
        eprintln!(
            "error: {}: no point runs on {size} processes: the points need {} nodes (memory + compute)",
            shown(&args.scenario),
            list(&needed)
        );
        return ExitCode::from(exit::BAD_INPUT);
    }
    let partial = needed.len() > 1;
    if partial {
        eprintln!(
            "note: running the {} of {} points that need {size} nodes (the others need {})",
            indices.len(),
            scenario.points.len(),
            list(&needed.iter().copied().filter(|n| *n != size).collect())
        );
    }
    let mut points = Vec::new();
    let mut results = Vec::new();
    let mut failure = None;
    for (&i, plan) in indices.iter().zip(&plans) {
        let point = &scenario.points[i];
        if indices.len() > 1 {
            eprintln!("point {i} of {}: {}", scenario.points.len(), super::run::describe(point));
        }
        plan.notes().iter().for_each(|n| eprintln!("note: point {i}: {n}"));
        if !point.config.compare_with.is_empty() {
            let names: Vec<&str> = point.config.compare_with.keys().map(String::as_str).collect();
            eprintln!(
                "note: point {i}: compare_with ({}) ignored: a hardware run measures this point only; run \
                 the reference configuration as its own scenario",
                names.join(", ")
            );
        }
        let device_memory_bytes = if point.config.cluster.device_memory {
            match dmsim_sim::scenario::load::resolve_profile(&point.config.cluster) {
                Ok(profile) => profile.device_memory_bytes,
                Err(problems) => {
                    for p in problems {
                        eprintln!("error: {}: point {i}: {p}", shown(&args.scenario));
                    }
                    return ExitCode::from(exit::BAD_INPUT);
                }
            }
        } else {
            0
        };
        if device_memory_bytes > 0 {
            eprintln!(
                "note: point {i}: NIC device memory ({device_memory_bytes} bytes per node) is emulated as a \
                 second registered host-memory region with its own rkey: addresses, bounds and atomics \
                 behave as on-chip memory would, latency and atomic rate are host memory's"
            );
        }
        let ssd_bytes = point.config.cluster.ssd_bytes_per_node;
        match plan.run(&args, &format!("scenario {scenario_hash} point {i}"), device_memory_bytes, ssd_bytes)
        {
            Ok(Some(outcome)) => {
                points.push(point.clone());
                results.push(outcome.result);
                if let Some(v) = outcome.violation {
                    eprintln!("error: point {i}: {v}");
                    failure = Some(ExitCode::from(exit::FAILURE));
                }
            }
            Ok(None) => {} // not rank 0: rank 0 writes the results
            Err(code) => {
                failure = Some(code);
                break;
            }
        }
    }
    if !results.is_empty() {
        let suffix = if partial { format!("-hw-n{size}") } else { "-hw".into() };
        if let Err(code) = write_results(&args, &scenario, &points, &results, &suffix) {
            return code;
        }
    }
    dmsim_hw::trace::dump(if failure.is_some() { "the run failed" } else { "the run ended" });
    failure.unwrap_or(ExitCode::SUCCESS)
}

/// "2, 4 or 8".
fn list(sizes: &std::collections::BTreeSet<usize>) -> String {
    let v: Vec<String> = sizes.iter().map(usize::to_string).collect();
    match v.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => v.join(""),
    }
}

/// A protocol definition as `dmsim hw run` consumes it.
pub trait HwProtocol: Send + Sync {
    /// Plan `spec` for hardware (before any hardware is touched).
    fn prepare(&self, spec: &PointSpec) -> Result<Box<dyn HwPlan>, Vec<Problem>>;
}

/// One planned point, ready to run on this rank.
pub trait HwPlan {
    fn node_count(&self) -> usize;
    /// What the plan leaves out on hardware.
    fn notes(&self) -> Vec<String>;
    /// `job` describes the scenario and point for the rendezvous' job hash; memory nodes offer
    /// `device_memory_bytes` of emulated NIC device memory (the point's `cluster.device_memory`);
    /// every node gets a storage file of `ssd_bytes` (the point's `cluster.ssd_bytes_per_node`).
    fn run(
        &self,
        args: &HwRunArgs,
        job: &str,
        device_memory_bytes: u64,
        ssd_bytes: u64,
    ) -> Result<Option<PointOutcome>, ExitCode>;
}

/// Any [`Protocol`] as an [`HwProtocol`].
pub struct HwDriver<P: Protocol>(pub P);

impl<P: Protocol> HwProtocol for HwDriver<P> {
    fn prepare(&self, spec: &PointSpec) -> Result<Box<dyn HwPlan>, Vec<Problem>> {
        Ok(Box::new(Planned(self.0.plan(spec)?)))
    }
}

struct Planned<P: Plan>(P);

impl<P: Plan> HwPlan for Planned<P> {
    fn node_count(&self) -> usize {
        self.0.cluster().node_count()
    }

    fn notes(&self) -> Vec<String> {
        self.0.notes()
    }

    fn run(
        &self,
        args: &HwRunArgs,
        job: &str,
        device_memory_bytes: u64,
        ssd_bytes: u64,
    ) -> Result<Option<PointOutcome>, ExitCode> {
        run_plan(&self.0, args, job, device_memory_bytes, ssd_bytes)
    }
}

/// The point as its protocol sees it on hardware: every node quiesces at the end (so the
/// end-of-run checks see final memory) and `run.check` logs histories (the in-process checks
/// need one process).
fn hw_spec(point: &scenario::Point) -> PointSpec {
    let level = if point.config.run.check { CheckLevel::Histories } else { CheckLevel::Off };
    let mut spec = point_spec(&point.config, point.seed, level, true, "none");
    // The NIC DMAs real bytes: every payload byte is stored.
    spec.payload_free = false;
    spec
}

/// What rank 0 has after one point.
pub struct PointOutcome {
    result: PointResult,
    /// The history checkers' verdict when they found a violation.
    violation: Option<String>,
}

/// One point on this rank; rank 0 gets the combined outcome, the others `None`.
fn run_plan<P: Plan>(
    plan: &P,
    args: &HwRunArgs,
    job: &str,
    device_memory_bytes: u64,
    ssd_bytes: u64,
) -> Result<Option<PointOutcome>, ExitCode> {
    let mut options = BootstrapOptions::new(plan.cluster());
    // Every rank registers the region (its role is known only after the bootstrap); protocols
    // address device memory on memory nodes only, as in the simulator.
    options.config.device_memory_bytes = device_memory_bytes;
    options.config.ack_timeout = args.ack_timeout;
    options.config.retry_count = args.retry_count;
    // The storage device is a fresh file per job and rank (a reused one would hold an earlier
    // run's pages where the protocol expects the zeros of a new device).
    let ssd_file = (ssd_bytes > 0).then(|| {
        let name: String = job.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        std::env::temp_dir().join(format!("dmsim-ssd-{name}-rank{}", args.rank.unwrap_or(0)))
    });
    if let Some(path) = &ssd_file {
        let _ = std::fs::remove_file(path);
        options.config.ssd_path = Some(path.clone());
        options.config.ssd_bytes = ssd_bytes;
    }
    let outcome = run_bootstrapped(plan, args, job, options);
    if let Some(path) = &ssd_file {
        let _ = std::fs::remove_file(path);
    }
    outcome
}

fn run_bootstrapped<P: Plan>(
    plan: &P,
    args: &HwRunArgs,
    job: &str,
    mut options: BootstrapOptions,
) -> Result<Option<PointOutcome>, ExitCode> {
    options.rank = args.rank;
    options.size = args.size;
    options.rendezvous = args.rendezvous.clone();
    options.listen_all = args.rendezvous_listen_all;
    options.secret = args.secret.clone();
    options.job = job.to_string();
    options.device = args.nic.device.clone();
    options.port = args.nic.port;
    options.gid_index = args.nic.gid_index;
    let mut cluster = bootstrap(options).map_err(|e| hw_error(&e))?;
    let nic = cluster.nic();
    plan.setup(&nic);
    cluster.barrier("setup").map_err(|e| hw_error(&e))?;
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
    let stuck = args.fault_stuck_client_on_rank == Some(cluster.rank()) && !mains.is_empty();
    let clients = mains.len() + stuck as usize;
    for m in mains {
        let done = done.clone();
        nic.spawn(async move {
            m.await;
            done.push(());
        });
    }
    let finished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if let (Some(progress), true) = (run.progress, clients > 0 && args.stall_timeout > 0) {
        nic.spawn(watchdog(nic.clone(), progress, finished.clone(), args.stall_timeout));
    }
    let outcome: Result<Gathered, String> = cluster.block_on(async move {
        for _ in 0..clients {
            done.pop().await;
        }
        finished.store(true, std::sync::atomic::Ordering::Release);
        let elapsed = worker.now().saturating_sub(start);
        gather(&worker, size, elapsed, collect).await
    });
    let rank = cluster.rank();
    // A failed run says why before anything else; its closing barrier would only add "rank k
    // closed the connection" (the peers are failing too) and hide the cause.
    let Gathered { elapsed, reports, clocks } = outcome.map_err(|e| {
        eprintln!("error: rank {rank}: {e}");
        ExitCode::from(exit::FAILURE)
    })?;
    cluster.finish().map_err(|e| hw_error(&e))?;
    if rank != 0 {
        return Ok(None);
    }
    if let Some(e) = dmsim_protocols::harness::first_error(&reports) {
        eprintln!("error: protocol error: {e}");
        return Err(ExitCode::from(exit::FAILURE));
    }
    let mut metrics = plan.metrics(&reports, elapsed);
    // The simulator's history checkers on the merged logs, then the plan's end-of-run check; a
    // violation still keeps the results.
    let mut violation = match check_histories(&reports, &clocks) {
        Ok(m) => {
            metrics.extend(m);
            None
        }
        Err(e) => {
            metrics.insert("history_violations".into(), 1.0);
            Some(format!("history check: {e}"))
        }
    };
    if let Err(v) = plan.verify(&reports, None) {
        metrics.insert("end_check_violations".into(), 1.0);
        violation.get_or_insert(format!("end-of-run check: {v}"));
    }
    for (k, v) in &metrics {
        println!("{k}: {v:.4}");
    }
    let result = PointResult {
        metrics,
        events: 0,
        end_time_ns: elapsed.0,
        trace_hash: 0,
        stop: "Finished (hardware)".into(),
        ops: plan.ops(&reports),
    };
    Ok(Some(PointOutcome { result, violation }))
}

/// Ends the process (exit 1, one line naming the rank and the count) if this node's clients
/// completed no operation for `timeout_s` seconds: a protocol that stopped making progress
/// (a lost message, a latch nobody releases) is an error, not a run that hangs until killed.
async fn watchdog<N: Nic>(
    nic: N,
    progress: dmsim_protocols::harness::Progress,
    finished: std::sync::Arc<std::sync::atomic::AtomicBool>,
    timeout_s: u64,
) {
    let mut last = (progress(), nic.now());
    while !finished.load(std::sync::atomic::Ordering::Acquire) {
        nic.sleep(Nanos(200_000_000)).await;
        let now = (progress(), nic.now());
        if now.0 != last.0 {
            last = now;
        } else if now.1.saturating_sub(last.1) >= Nanos(timeout_s * 1_000_000_000) {
            eprintln!(
                "error: rank {}: stalled: no client operation completed in {timeout_s} s ({} done so \
                 far); giving up (--stall-timeout)",
                nic.node().index(),
                now.0
            );
            dmsim_hw::trace::dump("stalled");
            std::process::exit(exit::FAILURE as i32);
        }
    }
}

fn write_results(
    args: &HwRunArgs,
    scenario: &scenario::Scenario,
    points: &[scenario::Point],
    results: &[PointResult],
    suffix: &str,
) -> Result<(), ExitCode> {
    let elapsed: f64 = results.iter().map(|r| r.end_time_ns as f64 / 1e9).sum();
    let view = scenario::Scenario { points: points.to_vec(), ..scenario.clone() };
    let cells = results::Cells::new(points, results);
    let claims = results::claims(&view, &cells);
    let mut summary = results::summary(&view, results, 0, elapsed);
    summary["backend"] = serde_json::json!("hardware");
    let data: Table = results::table(points, results);
    let figure = results::figure(&view, &cells, &claims);
    let dir = match &args.out {
        Some(out) => ResultsDir::at(out),
        None => ResultsDir::for_scenario(
            "results",
            &scenario.file.paper,
            &format!("{}{suffix}", scenario.file.name),
        ),
    };
    let io = |e: String| {
        eprintln!("error: {e}");
        ExitCode::from(exit::IO)
    };
    let dir = dir.map_err(|e| io(e.to_string()))?;
    let title = format!("{} / {} on hardware", scenario.file.paper, scenario.file.name);
    let report = RunReport {
        data: &data,
        figure: &figure,
        claims_title: &title,
        claims: &claims,
        calibration_note: "",
        summary,
    };
    dir.write_all(report).map_err(|e| io(e.to_string()))?;
    println!("wrote {}", shown(dir.path()));
    Ok(())
}
