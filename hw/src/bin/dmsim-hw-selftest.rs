//! `dmsim-hw-selftest`: exercises the hardware backend end to end, as separate processes.
//!
//! ```text
//! dmsim-hw-selftest calibrate [-d DEV] [-i PORT] [-x GID] [-n ITERS] [--streams S]
//! dmsim-hw-selftest cluster [--rank R --size N --rendezvous HOST:PORT] [-d DEV] [-x GID]
//!                           [--ops K] [--mode counter|peer-gone]
//! ```
//!
//! `cluster` with more than one rank needs the job secret in `$DMSIM_JOB_SECRET` (the same on
//! every rank; see the README's cluster section).
//!
//! `cluster --mode counter`: rank 0 is a memory node holding a latch word, a 64-byte line of
//! eight counters and an FAA counter; every other rank is a compute node whose tasks (one per
//! channel) repeat K times: acquire = one doorbell batch CAS(latch) + READ(line) (retry while
//! the CAS loses), bump the eight counters locally, release = one batch WRITE(line) +
//! FAA(counter) + CAS(latch back to 0). Compute nodes also ping the memory node over SEND/RECV.
//! The memory node checks that every counter equals the total number of critical sections:
//! a lost update means mutual exclusion or per-QP ordering broke.
//!
//! `cluster --mode selcc`: the SELCC protocol (`dmsim_protocols::selcc`) runs its §7.1
//! micro-benchmark over `HwNic`: rank 0 is the memory node, every other rank a compute node
//! with `--threads` workers doing `--ops` lock/access/unlock operations each on shared GCLs
//! (`--read-ratio`), invalidations travelling as SEND/RECV between compute nodes. At the end
//! each compute node drains its cache; the memory node then checks that every latch word is
//! free and each compute node that it completed all its operations.
//!
//! `cluster --mode seam`: the NIC seam extensions on this device, rank 1 against rank 0
//! (2 ranks; every rank offers 4 KiB of emulated device memory and a 1 MiB storage file under
//! the temp dir): masked atomics must be refused as `Unsupported` and the explicit CAS-loop
//! emulation must compute them; device-memory atomics and READ/WRITE land in the device space
//! (not the host word at the same offset) and out-of-range device addresses are errors;
//! unsignaled FAAs and a WRITE are ordered before later verbs on the QP; `wait_word` returns
//! when rank 0 WRITEs the word (asked by a SEND) and times out otherwise; the storage file
//! round-trips 4 KiB and rejects out-of-range offsets.
//!
//! `cluster --mode peer-gone`: rank 1 leaves right after connecting; rank 0 then CASes on
//! rank 1's region and must get `PeerGone` (not a hang) within the verb bound.
//!
//! Exit status: 0 pass, 1 check failed, 2 setup error (including "built without rdma").

use std::process::ExitCode;
use std::sync::Arc;

use dmsim_hw::calibrate::{calibrate, CalibrateOptions};
use dmsim_hw::cluster::{bootstrap, BootstrapOptions};
use dmsim_protocols::nic::{self, Nic, NicError, NodeId, RemoteAddr, Verb};
use dmsim_protocols::sync::Channel;

const LATCH: u64 = 0;
const COUNTER: u64 = 8;
const LINE: u64 = 64;
const PORT_REQUEST: u16 = 1;
const PORT_REPLY: u16 = 2;

struct Args(Vec<String>);

impl Args {
    fn value(&self, names: &[&str]) -> Option<String> {
        self.0.iter().position(|a| names.contains(&a.as_str())).and_then(|i| self.0.get(i + 1).cloned())
    }
    fn num<T: std::str::FromStr>(&self, names: &[&str]) -> Result<Option<T>, String> {
        match self.value(names) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| format!("{}: bad value {v:?}", names[0])),
        }
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = argv.first().cloned() else {
        eprintln!("usage: dmsim-hw-selftest calibrate|cluster [options] (see the source's header)");
        return ExitCode::from(2);
    };
    let args = Args(argv);
    let result = match command.as_str() {
        "calibrate" => run_calibrate(&args),
        "cluster" => run_cluster(&args),
        other => Err((2, format!("unknown command {other:?}"))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, msg)) => {
            eprintln!("dmsim-hw-selftest {command}: {msg}");
            ExitCode::from(code)
        }
    }
}

fn setup_err(e: impl std::fmt::Display) -> (u8, String) {
    (2, e.to_string())
}

fn run_calibrate(args: &Args) -> Result<(), (u8, String)> {
    let mut opts =
        CalibrateOptions { device: args.value(&["-d", "--device"]), ..CalibrateOptions::default() };
    opts.port = args.num(&["-i", "--port"]).map_err(setup_err)?.unwrap_or(1);
    opts.gid_index = args.num(&["-x", "--gid-index"]).map_err(setup_err)?;
    opts.iterations = args.num(&["-n", "--iters"]).map_err(setup_err)?.unwrap_or(opts.iterations);
    opts.streams = args.num(&["--streams"]).map_err(setup_err)?.unwrap_or(opts.streams);
    let c = calibrate(&opts).map_err(setup_err)?;
    println!("{c}");
    // One machine-readable line for scripts (hw/vm/test.sh compares it with perftest).
    println!(
        "CALIBRATE read_p50_ns={} read_mean_ns={} cas_p50_ns={} cas_mean_ns={} faa_p50_ns={} write_p50_ns={}",
        c.read_latency_ns.p50,
        c.read_latency_ns.mean,
        c.cas_latency_ns.p50,
        c.cas_latency_ns.mean,
        c.faa_latency_ns.p50,
        c.write_latency_ns.p50
    );
    Ok(())
}

fn run_cluster(args: &Args) -> Result<(), (u8, String)> {
    let mode = args.value(&["--mode"]).unwrap_or_else(|| "counter".into());
    let ops: u64 = args.num(&["--ops"]).map_err(setup_err)?.unwrap_or(50);
    let rank: Option<u32> = args.num(&["--rank"]).map_err(setup_err)?;
    let size: Option<u32> = args.num(&["--size"]).map_err(setup_err)?;
    let (_, size_known) =
        dmsim_hw::cluster::discover_rank_size(rank, size, |k| std::env::var(k).ok()).map_err(setup_err)?;
    let n = size_known as usize;
    let mut kinds = vec![nic::NodeKind::Compute; n];
    kinds[0] = nic::NodeKind::Memory;
    let mut regions = vec![64 * 1024; n];
    regions[0] = 1 << 20;
    let selcc_plan = if mode == "selcc" {
        let threads: u32 = args.num(&["--threads"]).map_err(setup_err)?.unwrap_or(2);
        let read_ratio: f64 = args.num(&["--read-ratio"]).map_err(setup_err)?.unwrap_or(0.5);
        let plan = selcc_run::Plan::new(&kinds, threads, ops, read_ratio);
        regions = plan.layout.region_sizes(&kinds);
        Some(plan)
    } else {
        None
    };
    let mut opts = BootstrapOptions::new(nic::Cluster { kinds, region_size_bytes: regions });
    opts.rank = rank;
    opts.size = size;
    opts.rendezvous = args.value(&["--rendezvous"]);
    opts.device = args.value(&["-d", "--device"]);
    opts.gid_index = args.num(&["-x", "--gid-index"]).map_err(setup_err)?;
    if mode == "seam" {
        opts.config.device_memory_bytes = 4096;
        let r = rank.unwrap_or(0);
        opts.config.ssd_path =
            Some(std::env::temp_dir().join(format!("dmsim-seam-ssd-{}-{r}", std::process::id())));
        opts.config.ssd_bytes = 1 << 20;
    }
    if mode == "peer-gone" {
        // Detect the dead peer quickly: 4.096 µs · 2^12 ≈ 17 ms per try, 3 retries.
        opts.config.ack_timeout = 12;
        opts.config.retry_count = 3;
    }
    let mut cluster = bootstrap(opts).map_err(setup_err)?;
    let me = cluster.rank();
    let nic = cluster.nic();
    eprintln!("rank {me}/{}: connected on {}", cluster.size(), nic.device());
    match mode.as_str() {
        "counter" => {
            let outcome = cluster.block_on(counter(nic, ops));
            // Everybody finishes together, so no one's memory vanishes under a peer's verbs.
            cluster.finish().map_err(setup_err)?;
            outcome.map_err(|e| (1, e))?;
            println!("rank {me}: counter test PASS");
            Ok(())
        }
        "selcc" => {
            let plan = selcc_plan.ok_or((2, "no plan".to_string()))?;
            let outcome = selcc_run::run(&mut cluster, plan);
            cluster.finish().map_err(setup_err)?;
            outcome.map_err(|e| (1, e))?;
            println!("rank {me}: selcc test PASS");
            Ok(())
        }
        "seam" => {
            let ssd_path = nic.config().ssd_path.clone();
            let outcome = cluster.block_on(seam(nic));
            cluster.finish().map_err(setup_err)?;
            if let Some(path) = ssd_path {
                let _ = std::fs::remove_file(path);
            }
            outcome.map_err(|e| (1, e))?;
            println!("rank {me}: seam test PASS");
            Ok(())
        }
        "peer-gone" => {
            if me == 1 {
                println!("rank 1: leaving without warning");
                std::process::exit(0);
            }
            if me != 0 {
                return Ok(());
            }
            let started = std::time::Instant::now();
            let outcome = cluster.block_on(async move {
                // Give rank 1 time to exit and its QPs to vanish.
                nic.sleep(nic::Nanos::from_ms(300)).await;
                nic.cas(RemoteAddr::new(NodeId(1), 0), 0, 1).await
            });
            let after = started.elapsed();
            match outcome {
                Err(NicError::PeerGone { node }) => {
                    println!(
                        "rank 0: CAS on departed n1 -> PeerGone {{ node: {node} }} after {after:?}: PASS"
                    );
                    Ok(())
                }
                other => {
                    Err((1, format!("expected PeerGone from a departed peer, got {other:?} after {after:?}")))
                }
            }
        }
        other => Err((2, format!("unknown --mode {other:?}"))),
    }
}

/// Fails with `what` unless `ok`.
fn expect(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

/// The seam extensions (see the header): rank 1 tests, rank 0 serves the `wait_word` poke.
async fn seam<N: Nic>(nic: N) -> Result<(), String> {
    use nic::{masked, Nanos, WordCond};
    let (me, mn) = (nic.node(), NodeId(0));
    let e = |e: NicError| e.to_string();
    if me == mn {
        let m = nic.recv(PORT_REQUEST).await.map_err(e)?;
        expect(text(&m.bytes) == "poke", || format!("expected poke, got {:?}", text(&m.bytes)))?;
        nic.sleep(Nanos::from_ms(5)).await;
        nic.write_word(RemoteAddr::new(m.from, 0), 42).await.map_err(e)?;
        let m = nic.recv(PORT_REQUEST).await.map_err(e)?;
        return expect(text(&m.bytes) == "done", || format!("expected done, got {:?}", text(&m.bytes)));
    }
    if me != NodeId(1) {
        return Ok(());
    }
    // 1. Masked atomics: refused on this device; the explicit emulation computes them.
    let host = RemoteAddr::new(mn, 256);
    match nic.masked_cas(host, 0, 1, 1, 1).await {
        Err(NicError::Unsupported { feature: "masked atomics", detail }) => {
            println!("seam: masked CAS -> Unsupported ({detail})")
        }
        other => return Err(format!("masked CAS: expected Unsupported, got {other:?}")),
    }
    nic.write_word(host, 0x01ff).await.map_err(e)?;
    let v = Verb::MaskedFaa { remote: host, add: 0x0101, boundary_mask: 1 << 7 | 1 << 15 };
    let old = masked::emulate(&nic, v).await.map_err(e)?;
    let v =
        Verb::MaskedCas { remote: host, expect: 0x0200, compare_mask: 0xff00, swap: 0x5, swap_mask: 0xff };
    let old2 = masked::emulate(&nic, v).await.map_err(e)?;
    let now = nic.cas(host, 0, 0).await.map_err(e)?;
    expect((old, old2, now) == (0x01ff, 0x0200, 0x0205), || {
        format!("emulated masked: {old:#x} {old2:#x} {now:#x}")
    })?;
    // 2. Device memory (emulated here): its own space, bounds checked.
    expect(nic.device_memory_bytes(mn) == 4096, || format!("device memory {}", nic.device_memory_bytes(mn)))?;
    let dev = RemoteAddr::device(mn, 256);
    let a = nic.cas(dev, 0, 7).await.map_err(e)?;
    let b = nic.faa(dev, 1).await.map_err(e)?;
    nic.local().store(0, 99);
    nic.write(RemoteAddr::device(mn, 264), 0, 8).await.map_err(e)?;
    nic.read(dev, 8, 16).await.map_err(e)?;
    let (c, d) = (nic.local().load(8), nic.local().load(16));
    let h = nic.cas(host, 0, 0).await.map_err(e)?;
    expect((a, b, c, d, h) == (0, 7, 8, 99, 0x0205), || {
        format!("device memory: {a} {b} {c} {d} host {h:#x}")
    })?;
    match nic.faa(RemoteAddr::device(mn, 4096), 1).await {
        Err(NicError::BadAddress { .. }) => {}
        other => return Err(format!("device address past the end: {other:?}")),
    }
    println!("seam: device memory atomics/READ/WRITE PASS");
    // 3. Unsignaled posts keep QP order.
    let u = RemoteAddr::new(mn, 320);
    for _ in 0..8 {
        nic.post_unsignaled(&[Verb::Faa { remote: u, add: 1 }]).map_err(e)?;
    }
    nic.post_unsignaled(&[Verb::WriteWord { remote: u.add(8), value: 5 }]).map_err(e)?;
    let (x, y) = (nic.faa(u, 0).await.map_err(e)?, nic.faa(u.add(8), 0).await.map_err(e)?);
    expect((x, y) == (8, 5), || format!("unsignaled then signaled on one QP: {x} {y}"))?;
    println!("seam: unsignaled posts ordered PASS");
    // 4. wait_word: woken by rank 0's WRITE; a word nobody writes times out.
    nic.local().store(0, 0);
    nic.send(mn, PORT_REQUEST, b"poke".to_vec()).await.map_err(e)?;
    let v = nic
        .wait_word(0, WordCond::Eq(42), Nanos::from_us(20), Some(Nanos::from_ms(30_000)))
        .await
        .map_err(e)?;
    expect(v == 42, || format!("wait_word returned {v}"))?;
    match nic.wait_word(24, WordCond::Eq(1), Nanos::from_us(50), Some(Nanos::from_ms(2))).await {
        Err(NicError::Timeout { .. }) => {}
        other => return Err(format!("wait_word without a write: {other:?}")),
    }
    println!("seam: wait_word PASS");
    // 5. Storage file.
    let words: Vec<u64> = (0..512).map(|i| i * 3 + 1).collect();
    nic.local().write_words(1024, &words);
    nic.ssd_write(8192, 1024, 4096).await.map_err(e)?;
    nic.ssd_read(8192, 8192, 4096).await.map_err(e)?;
    let mut back = vec![0; 512];
    nic.local().read_words(8192, &mut back);
    expect(back == words, || "storage read differs from what was written".into())?;
    match nic.ssd_read((1 << 20) - 8, 0, 16).await {
        Err(NicError::BadAddress { .. }) => {}
        other => return Err(format!("storage past the end: {other:?}")),
    }
    println!("seam: storage file round trip PASS");
    nic.send(mn, PORT_REQUEST, b"done".to_vec()).await.map_err(e)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The counter workload; generic over the NIC, so it would run on the simulator as is.
async fn counter<N: Nic>(nic: N, ops: u64) -> Result<(), String> {
    let me = nic.node();
    let computes = nic.cluster().compute_nodes();
    let memory = NodeId(0);
    if me == memory {
        // Serve pings and count goodbyes; then check the counters.
        let mut total = 0u64;
        let mut byes = 0;
        while byes < computes.len() {
            let m = nic.recv(PORT_REQUEST).await.map_err(|e| format!("memory node recv: {e}"))?;
            let body = text(&m.bytes);
            if let Some(rest) = body.strip_prefix("bye ") {
                total += rest.parse::<u64>().map_err(|_| format!("bad bye {body:?}"))?;
                byes += 1;
            } else if body.starts_with("ping") {
                nic.send(m.from, PORT_REPLY, format!("pong to {}", m.from).into_bytes())
                    .await
                    .map_err(|e| format!("memory node send: {e}"))?;
            } else {
                return Err(format!("unexpected message {body:?} from {}", m.from));
            }
        }
        let mut line = [0u64; 8];
        nic.local().read_words(LINE, &mut line);
        let counter = nic.local().load(COUNTER);
        let latch = nic.local().load(LATCH);
        println!(
            "memory node: {total} critical sections; line {line:?}; FAA counter {counter}; latch {latch}"
        );
        if line.iter().any(|&w| w != total) || counter != total || latch != 0 {
            return Err(format!(
                "lost updates: line {line:?}, counter {counter}, expected {total}, latch {latch}"
            ));
        }
        return Ok(());
    }

    // Compute node: ping first (SEND/RECV both ways).
    nic.send(memory, PORT_REQUEST, format!("ping from {me}").into_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let pong = nic.recv(PORT_REPLY).await.map_err(|e| e.to_string())?;
    if text(&pong.bytes) != format!("pong to {me}") || pong.from != memory {
        return Err(format!("bad pong {:?} from {}", text(&pong.bytes), pong.from));
    }

    let tasks = nic.cluster().node_count().max(2) as u16; // a few concurrent tasks
    let results: Arc<Channel<Result<u64, String>>> = Arc::new(Channel::new());
    for t in 0..tasks {
        let q = nic.qp(t);
        let results = results.clone();
        nic.spawn(async move {
            let r = critical_sections(&q, t, ops).await;
            results.push(r);
        });
    }
    let mut done = 0;
    for _ in 0..tasks {
        match results.pop().await {
            Some(Ok(n)) => done += n,
            Some(Err(e)) => return Err(e),
            None => return Err("result channel closed".into()),
        }
    }
    nic.send(memory, PORT_REQUEST, format!("bye {done}").into_bytes()).await.map_err(|e| e.to_string())?;
    println!("compute node {me}: {done} critical sections");
    Ok(())
}

async fn critical_sections<N: Nic>(q: &N, task: u16, ops: u64) -> Result<u64, String> {
    let me = q.node();
    let memory = NodeId(0);
    let tag = ((me.0 as u64) << 16 | task as u64) + 1;
    let local_line = 1024 + 64 * task as u64;
    let mut retries = 0u64;
    for _ in 0..ops {
        loop {
            // SELCC's acquire shape: CAS the latch and READ the line in one doorbell batch.
            let acquire = [
                Verb::Cas { remote: RemoteAddr::new(memory, LATCH), expect: 0, swap: tag },
                Verb::Read { remote: RemoteAddr::new(memory, LINE), local_bytes: local_line, len_bytes: 64 },
            ];
            let r = q.batch(&acquire).await.map_err(|e| format!("{me} task {task} acquire: {e}"))?;
            if r.get(0) == 0 {
                break;
            }
            retries += 1;
            if retries.is_multiple_of(64) {
                q.sleep(nic::Nanos::from_us(20)).await;
            }
        }
        let mut line = [0u64; 8];
        q.local().read_words(local_line, &mut line);
        for w in &mut line {
            *w += 1;
        }
        q.local().write_words(local_line, &line);
        // Release: WRITE the line, count, and free the latch — in order on one QP.
        let release = [
            Verb::Write { remote: RemoteAddr::new(memory, LINE), local_bytes: local_line, len_bytes: 64 },
            Verb::Faa { remote: RemoteAddr::new(memory, COUNTER), add: 1 },
            Verb::Cas { remote: RemoteAddr::new(memory, LATCH), expect: tag, swap: 0 },
        ];
        let r = q.batch(&release).await.map_err(|e| format!("{me} task {task} release: {e}"))?;
        if r.get(2) != tag {
            return Err(format!("{me} task {task}: latch held {:#x} while we owned it", r.get(2)));
        }
    }
    Ok(ops)
}

/// SELCC over the hardware backend, one process per node.
mod selcc_run {
    use std::sync::Arc;
    use std::time::Duration;

    use dmsim_hw::cluster::HwCluster;
    use dmsim_protocols::nic::{Nic, NodeKind};
    use dmsim_protocols::selcc::bench::{self, BenchOptions};
    use dmsim_protocols::selcc::{setup_memory_node, Config, Layout};
    use dmsim_protocols::sync::Channel;
    use dmsim_protocols::workload::micro::MicroSpec;

    pub struct Plan {
        pub config: Config,
        pub spec: MicroSpec,
        pub layout: Layout,
    }

    impl Plan {
        pub fn new(kinds: &[NodeKind], threads: u32, ops: u64, read_ratio: f64) -> Plan {
            let config = Config {
                gcl_size_bytes: 256,
                cache_frames: 64,
                threads_per_node: threads,
                ..Config::selcc()
            };
            // Few GCLs, all shared: compute nodes contend, so invalidations, handovers and
            // upgrades all happen over the real NIC.
            let spec = MicroSpec {
                gcl_count: 32,
                gcl_size_bytes: config.gcl_size_bytes,
                sharing_ratio: 1.0,
                read_ratio,
                zipf_theta: 0.0,
                locality: 0.0,
                threads_per_node: threads,
                ops_per_thread: ops,
                access_bytes: 8,
            };
            let shape = dmsim_protocols::nic::Cluster {
                kinds: kinds.to_vec(),
                region_size_bytes: vec![0; kinds.len()],
            };
            let layout = Layout::new(&shape, &config, spec.gcl_count, 0);
            Plan { config, spec, layout }
        }
    }

    pub fn run(cluster: &mut HwCluster, plan: Plan) -> Result<(), String> {
        let nic = cluster.nic();
        let me = nic.node();
        let is_memory = nic.cluster().kinds[me.index()] == NodeKind::Memory;
        let started = std::time::Instant::now();
        if is_memory {
            setup_memory_node(&plan.layout, me, nic.local());
            // The memory node runs no protocol code (one-sided); it serves until all are done.
            cluster
                .block_on_until_all("selcc-done", Duration::from_secs(600), async {})
                .map_err(|e| e.to_string())?;
            let busy: Vec<u64> = (0..plan.spec.gcl_count)
                .map(|i| plan.layout.gcl(i))
                .filter(|g| g.node == me)
                .map(|g| nic.local().load(Layout::latch(g).offset_bytes))
                .filter(|&w| w != 0)
                .collect();
            println!(
                "memory node: {} GCLs, {} latch words still held after every compute node drained {:x?}",
                plan.spec.gcl_count,
                busy.len(),
                busy
            );
            return if busy.is_empty() { Ok(()) } else { Err(format!("latches left held: {busy:x?}")) };
        }
        let tasks = bench::node_tasks(
            nic.clone(),
            &plan.config,
            &plan.layout,
            &plan.spec,
            42,
            &BenchOptions { drain_at_end: true },
            None,
        );
        let node = tasks.node.clone();
        for d in tasks.daemons {
            nic.spawn(d);
        }
        let done: Arc<Channel<()>> = Arc::new(Channel::new());
        let mains = tasks.mains.len();
        for m in tasks.mains {
            let done = done.clone();
            nic.spawn(async move {
                m.await;
                eprintln!("{me}: a worker finished");
                done.push(());
            });
        }
        let waiter = done.clone();
        cluster
            .block_on_until_all("selcc-done", Duration::from_secs(600), async move {
                for _ in 0..mains {
                    waiter.pop().await;
                }
                eprintln!("{me}: all workers finished; waiting for the other nodes");
            })
            .map_err(|e| e.to_string())?;
        let stats = node.stats();
        let expected = plan.spec.ops_per_thread * plan.spec.threads_per_node as u64;
        println!(
            "compute node {me}: {} ops ({} reads, {} writes, {} hits) in {:?}; {} invalidation ops, \
             {} messages sent, {} received, {} handovers, {} upgrades, {} latch retries",
            stats.ops,
            stats.reads,
            stats.writes,
            stats.hits,
            started.elapsed(),
            stats.invalidation_ops,
            stats.messages_sent,
            stats.messages_received,
            stats.handovers,
            stats.upgrades,
            stats.latch_retries
        );
        if let Some(e) = node.first_error() {
            return Err(format!("{me}: protocol error: {e}"));
        }
        if stats.ops != expected {
            return Err(format!("{me} completed {} of {expected} operations", stats.ops));
        }
        Ok(())
    }
}
