//! `dmsim hw run`: one scenario point on real RDMA, one process per node.
//!
//! Every rank loads the same scenario and builds the same [`Plan`]; rank `r` is node `r`
//! (memory nodes first). After a start barrier each rank runs its node's tasks; when its mains
//! finish it sends its [`NodeReport`] to rank 0 over the NIC (a SEND on a reserved port), and
//! rank 0 combines them with the same metrics code the simulator uses and writes the same
//! results directory. Reports travel in chunks (a message holds a few KiB; a report with a
//! history holds more).
//!
//! Histories: when the plan logs client operations (SELCC with `check: true`), rank 0 also
//! estimates every rank's clock offset by ping-pong over the NIC once all clients are done
//! (offset from the fastest of [`CLOCK_ROUNDS`] round trips, ± half that round trip), merges the
//! logs onto its clock and runs the simulator's history checkers on them
//! ([`crate::runners::plan::check_histories`]). A violation is printed, the results are still
//! written, and the exit status is non-zero.

use std::path::PathBuf;
use std::process::ExitCode;

use dmsim_hw::cluster::{bootstrap, BootstrapOptions};
use dmsim_protocols::nic::{Nanos, Nic, NodeId};

use super::hw::hw_error;
use super::{exit, shown};
use crate::check::merge::Clock;
use crate::report::{ResultsDir, RunReport, Table};
use crate::runners::plan::{check_histories, NodeReport, Plan};
use crate::runners::PointResult;
use crate::scenario::{self, results};

/// Port the reports travel on (above any protocol's ports).
const REPORT_PORT: u16 = u16::MAX - 1;
const DONE_PORT: u16 = u16::MAX - 2;
const GO_PORT: u16 = u16::MAX - 3;
const CLOCK_PORT: u16 = u16::MAX - 4;
const CLOCK_REPLY_PORT: u16 = u16::MAX - 5;
/// Liveness probes (empty messages nobody reads: only their delivery matters).
const PROBE_PORT: u16 = u16::MAX - 6;
/// How long a gather step waits before probing the peers it waits for.
const PROBE_EVERY: Nanos = Nanos(2_000_000_000);
/// Ping-pongs per rank for the clock offset; the fastest bounds the error best.
const CLOCK_ROUNDS: usize = 16;
/// Bytes per report message (under the hardware backend's default 4 KiB message maximum).
const CHUNK_BYTES: usize = 3072;

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
    /// Rank 0's HOST:PORT for the TCP rendezvous (default: $DMSIM_RENDEZVOUS).
    #[arg(long)]
    pub rendezvous: Option<String>,
    #[command(flatten)]
    pub nic: super::hw::DeviceArgs,
    /// Seconds without any completed client operation on this node before the run is declared
    /// stalled (exit 1); 0 disables the watchdog.
    #[arg(long, default_value_t = 120)]
    pub stall_timeout: u64,
    /// Fault injection for testing the watchdog: on this rank, wait for one client more than
    /// there are (as if one never returned).
    #[arg(long, hide = true)]
    pub fault_stuck_client_on_rank: Option<u32>,
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
    let indices: Vec<usize> = match args.point {
        Some(i) if i < scenario.points.len() => vec![i],
        Some(i) => {
            eprintln!("error: --point {i}: the scenario has {} points", scenario.points.len());
            return ExitCode::from(exit::BAD_INPUT);
        }
        None => (0..scenario.points.len()).collect(),
    };
    // Every plan up front, so a bad point is reported before any hardware is touched.
    let mut plans = Vec::with_capacity(indices.len());
    for &i in &indices {
        match HwPlan::new(&scenario.points[i]) {
            Ok(plan) => plans.push(plan),
            Err(e) => {
                eprintln!("error: {}: point {i}: {e}", shown(&args.scenario));
                return ExitCode::from(exit::BAD_INPUT);
            }
        }
    }
    let nodes: Vec<usize> = plans.iter().map(|p| p.node_count()).collect();
    if nodes.iter().any(|n| *n != nodes[0]) {
        eprintln!(
            "error: {}: the points need different numbers of nodes ({nodes:?}); one launch has one \
             process per node, so run them separately with --point N",
            shown(&args.scenario)
        );
        return ExitCode::from(exit::BAD_INPUT);
    }
    let mut points = Vec::new();
    let mut results = Vec::new();
    let mut failure = None;
    for (&i, plan) in indices.iter().zip(&plans) {
        let point = &scenario.points[i];
        if indices.len() > 1 {
            eprintln!("point {i} of {}: {}", scenario.points.len(), super::run::describe(point));
        }
        match plan.run(&args) {
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
        if let Err(code) = write_results(&args, &scenario, &points, &results) {
            return code;
        }
    }
    failure.unwrap_or(ExitCode::SUCCESS)
}

/// The protocols with a hardware plan.
enum HwPlan {
    Micro(crate::runners::nic_micro::MicroPlan),
    Selcc(Box<crate::runners::selcc::SelccPlan>),
    Gam(Box<crate::runners::gam::GamPlan>),
}

impl HwPlan {
    fn new(point: &scenario::Point) -> Result<HwPlan, String> {
        match point.config.protocol.as_str() {
            "nic_micro" => crate::runners::nic_micro::MicroPlan::new(point).map(HwPlan::Micro),
            "selcc" | "sel" => {
                crate::runners::selcc::SelccPlan::new(point).map(|p| HwPlan::Selcc(Box::new(p)))
            }
            "gam" => crate::runners::gam::GamPlan::new(point).map(|p| HwPlan::Gam(Box::new(p))),
            other => Err(format!(
                "protocol: {other:?} has no hardware plan yet (nic_micro, selcc, sel and gam have)"
            )),
        }
    }

    fn node_count(&self) -> usize {
        match self {
            HwPlan::Micro(p) => p.cluster().node_count(),
            HwPlan::Selcc(p) => p.cluster().node_count(),
            HwPlan::Gam(p) => p.cluster().node_count(),
        }
    }

    fn run(&self, args: &HwRunArgs) -> Result<Option<PointOutcome>, ExitCode> {
        match self {
            HwPlan::Micro(p) => run_plan(p, args),
            HwPlan::Selcc(p) => run_plan(p.as_ref(), args),
            HwPlan::Gam(p) => run_plan(p.as_ref(), args),
        }
    }
}

/// What rank 0 has after one point.
struct PointOutcome {
    result: PointResult,
    /// The history checkers' verdict when they found a violation.
    violation: Option<String>,
}

/// One point on this rank; rank 0 gets the combined outcome, the others `None`.
fn run_plan<P: Plan>(plan: &P, args: &HwRunArgs) -> Result<Option<PointOutcome>, ExitCode> {
    let mut options = BootstrapOptions::new(plan.cluster());
    options.rank = args.rank;
    options.size = args.size;
    options.rendezvous = args.rendezvous.clone();
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
    let outcome: Result<(Nanos, Vec<NodeReport>, Vec<Clock>), String> = cluster.block_on(async move {
        for _ in 0..clients {
            done.pop().await;
        }
        finished.store(true, std::sync::atomic::Ordering::Release);
        let elapsed = worker.now().saturating_sub(start);
        // Collect only once every node's clients are done (a memory node's end-of-run checks
        // must see the compute nodes' final flushes): DONE to rank 0, clock pings from rank 0,
        // then GO to everyone.
        let zero = NodeId(0);
        let err = |e: dmsim_protocols::nic::NicError| e.to_string();
        if worker.node() != zero {
            worker.send(zero, DONE_PORT, Vec::new()).await.map_err(err)?;
            for _ in 0..CLOCK_ROUNDS {
                recv_watching(&worker, CLOCK_PORT, &[zero]).await?;
                worker
                    .send(zero, CLOCK_REPLY_PORT, worker.now().0.to_le_bytes().to_vec())
                    .await
                    .map_err(err)?;
            }
            recv_watching(&worker, GO_PORT, &[zero]).await?;
            let mine = collect();
            let bytes = serde_json::to_vec(&(elapsed.0, &mine)).expect("report serializes");
            worker.send(zero, REPORT_PORT, (bytes.len() as u64).to_le_bytes().to_vec()).await.map_err(err)?;
            for chunk in bytes.chunks(CHUNK_BYTES) {
                worker.send(zero, REPORT_PORT, chunk.to_vec()).await.map_err(err)?;
            }
            return Ok((elapsed, Vec::new(), Vec::new()));
        }
        let peers: Vec<NodeId> = (1..size).map(|r| NodeId(r as u16)).collect();
        for _ in 1..size {
            recv_watching(&worker, DONE_PORT, &peers).await?;
        }
        let mut clocks = vec![Clock::default(); size];
        for (r, clock) in clocks.iter_mut().enumerate().skip(1) {
            *clock = measure_clock(&worker, NodeId(r as u16)).await?;
        }
        for r in 1..size {
            worker.send(NodeId(r as u16), GO_PORT, Vec::new()).await.map_err(err)?;
        }
        let mut reports = vec![NodeReport::default(); size];
        let mut slowest = elapsed;
        reports[0] = collect();
        // Per sender: (announced length, bytes so far); one sender's messages arrive in order.
        let mut incoming: Vec<(Option<usize>, Vec<u8>)> = vec![(None, Vec::new()); size];
        let mut complete = 1;
        while complete < size {
            let m = recv_watching(&worker, REPORT_PORT, &peers).await?;
            let (len, buf) = &mut incoming[m.from.index()];
            match len {
                None => {
                    let header: [u8; 8] = m
                        .bytes
                        .as_slice()
                        .try_into()
                        .map_err(|_| format!("report header from {}", m.from))?;
                    *len = Some(u64::from_le_bytes(header) as usize);
                }
                Some(_) => buf.extend_from_slice(&m.bytes),
            }
            if *len != Some(buf.len()) {
                continue;
            }
            complete += 1;
            let (ns, report): (u64, NodeReport) =
                serde_json::from_slice(buf).map_err(|e| format!("report from {}: {e}", m.from))?;
            slowest = slowest.max(Nanos(ns));
            reports[m.from.index()] = report;
        }
        Ok((slowest, reports, clocks))
    });
    let rank = cluster.rank();
    // A failed run says why before anything else; its closing barrier would only add "rank k
    // closed the connection" (the peers are failing too) and hide the cause.
    let (elapsed, reports, clocks) = outcome.map_err(|e| {
        eprintln!("error: rank {rank}: {e}");
        ExitCode::from(exit::FAILURE)
    })?;
    cluster.finish().map_err(|e| hw_error(&e))?;
    if rank != 0 {
        return Ok(None);
    }
    let mut metrics = plan.metrics(&reports, elapsed);
    // The simulator's history checkers on the merged logs; a violation still keeps the results.
    let violation = match check_histories(&reports, &clocks) {
        Ok(m) => {
            metrics.extend(m);
            None
        }
        Err(e) => {
            metrics.insert("history_violations".into(), 1.0);
            Some(e)
        }
    };
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

/// `nic.recv(port)`, but every [`PROBE_EVERY`] without a message it sends a probe to each of
/// `peers`: a peer that died (its process exited or was killed) makes the probe fail with
/// `PeerGone` from the transport, and the wait ends with that error instead of lasting forever.
async fn recv_watching<N: Nic>(
    nic: &N,
    port: u16,
    peers: &[NodeId],
) -> Result<dmsim_protocols::nic::Message, String> {
    use std::future::Future;
    use std::task::Poll;
    loop {
        let mut recv = std::pin::pin!(nic.recv(port));
        let mut sleep = std::pin::pin!(nic.sleep(PROBE_EVERY));
        let first = std::future::poll_fn(|cx| {
            if let Poll::Ready(m) = recv.as_mut().poll(cx) {
                return Poll::Ready(Some(m));
            }
            sleep.as_mut().poll(cx).map(|()| None)
        })
        .await;
        match first {
            Some(m) => return m.map_err(|e| e.to_string()),
            None => {
                for &peer in peers {
                    nic.send(peer, PROBE_PORT, Vec::new())
                        .await
                        .map_err(|e| format!("waiting on port {port} for {peer}: {e}"))?;
                }
            }
        }
    }
}

/// Ends the process (exit 1, one line naming the rank and the count) if this node's clients
/// completed no operation for `timeout_s` seconds: a protocol that stopped making progress
/// (a lost message, a latch nobody releases) is an error, not a run that hangs until killed.
async fn watchdog<N: Nic>(
    nic: N,
    progress: crate::runners::plan::Progress,
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
            std::process::exit(exit::FAILURE as i32);
        }
    }
}

/// Rank `peer`'s clock relative to ours: `CLOCK_ROUNDS` ping-pongs; the fastest gives the
/// offset (its reply was read somewhere inside that round trip) and ± half of it.
async fn measure_clock<N: Nic>(nic: &N, peer: NodeId) -> Result<Clock, String> {
    let mut best: Option<(u64, Clock)> = None;
    for _ in 0..CLOCK_ROUNDS {
        let t0 = nic.now().0;
        nic.send(peer, CLOCK_PORT, Vec::new()).await.map_err(|e| e.to_string())?;
        let reply = recv_watching(nic, CLOCK_REPLY_PORT, &[peer]).await?;
        let t1 = nic.now().0;
        let theirs: [u8; 8] =
            reply.bytes.as_slice().try_into().map_err(|_| format!("clock reply from {}", reply.from))?;
        let theirs = u64::from_le_bytes(theirs);
        let rtt = t1.saturating_sub(t0);
        let mid = t0 as i128 + rtt as i128 / 2;
        let clock = Clock { offset_ns: (theirs as i128 - mid) as i64, uncertainty_ns: rtt.div_ceil(2) + 1 };
        if best.is_none_or(|(r, _)| rtt < r) {
            best = Some((rtt, clock));
        }
    }
    Ok(best.expect("CLOCK_ROUNDS > 0").1)
}

fn write_results(
    args: &HwRunArgs,
    scenario: &scenario::Scenario,
    points: &[scenario::Point],
    results: &[PointResult],
) -> Result<(), ExitCode> {
    let elapsed: f64 = results.iter().map(|r| r.end_time_ns as f64 / 1e9).sum();
    let view = scenario::Scenario { points: points.to_vec(), ..scenario.clone() };
    let cells = results::Cells::new(points, results);
    let claims = results::claims(&view, &cells);
    let mut summary = results::summary(&view, results, 0, elapsed);
    summary["backend"] = serde_json::json!("hardware");
    let data: Table = results::table(points, results);
    let figure = results::figure(&view, &cells);
    let dir = match &args.out {
        Some(out) => ResultsDir::at(out),
        None => {
            ResultsDir::for_scenario("results", &scenario.file.paper, &format!("{}-hw", scenario.file.name))
        }
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
