//! `dmsim hw calibrate`: measure a device through the backend itself and report the numbers a
//! simulator NIC profile needs — per-verb latency, READ/WRITE bandwidth, and the rate of
//! atomics that all hit one word (the NIC's per-address atomic unit).
//!
//! Method: a one-node cluster on the device, so every verb goes through a loopback RC
//! connection (the same path `ib_*_lat` takes when client and server share a device), issued by
//! `HwNic` on the runtime — the numbers include this backend's own overhead, which is what a
//! protocol run pays. Bandwidth and atomic rate: one task per channel, each with one verb in
//! flight.
//!
//! Latency, and how it corresponds to perftest (`ib_read_lat -s 8 -n N`, `ib_atomic_lat -A
//! CMP_AND_SWAP -n N`, perftest 4.5 `print_report_lat`):
//!
//! * perftest's client posts one verb, busy-polls its CQ until the completion, and repeats,
//!   reading the TSC just before each post; a sample is the time from one post to the next
//!   (N posts, N−1 samples, loop overhead included), the two largest samples are dropped, and
//!   `t_typical` is the median, `t_avg` the mean, of the rest. READ and atomics report the full
//!   round trip (no halving). Message size: 8 bytes (atomics are always 8).
//! * Here a task awaits `N` verbs of 8 bytes one after another (after 20 untimed warm-up verbs,
//!   which perftest does not do; its slowest first samples fall under the dropped two), reading
//!   the clock just before each; samples, dropping and statistics are the same, so `p50`
//!   corresponds to `t_typical` and `mean` to `t_avg`. The sample includes everything a
//!   protocol's verb pays here: building the work requests, the post, waiting (the future polls
//!   the CQ inline while the worker has nothing else to run), and resuming the task.
//! * Differences that remain: perftest's server is a second process with its own QP and CQ (the
//!   target side of our loopback QP is in this process, on the same CQs, served by the kernel
//!   either way on Soft-RoCE); both run on the same device and VM, one after the other.
//!
//! `DMSIM_HW_CALIBRATE_SPIN=1` also measures READ and CAS posted and polled from the calling
//! thread with no runtime (`HwNic::spin_latency`, the loop perftest runs), on the same QP, and
//! prints them to stderr with the time spent building the work requests, in `post_send`, and
//! until the completion is seen: the floor of this process and QP, to tell this backend's
//! overhead from the device's (on Soft-RoCE the kernel runs the whole verb inside `post_send`).

use std::time::Instant;

use dmsim_protocols::nic::{self, Nic, RemoteAddr};

use crate::cluster::{self, BootstrapOptions};
use crate::config::HwConfig;
use crate::error::HwError;

/// What to measure.
#[derive(Clone, Debug)]
pub struct CalibrateOptions {
    pub device: Option<String>,
    pub port: u8,
    pub gid_index: Option<u8>,
    /// Timed verbs per latency measurement.
    pub iterations: u32,
    /// Message size of the bandwidth runs.
    pub bandwidth_message_bytes: u32,
    /// Verbs per task in the bandwidth and atomic-rate runs.
    pub throughput_iterations: u32,
    /// Concurrent tasks (each on its own channel/QP) in the throughput runs.
    pub streams: u16,
}

impl Default for CalibrateOptions {
    fn default() -> Self {
        CalibrateOptions {
            device: None,
            port: 1,
            gid_index: None,
            iterations: 1000,
            bandwidth_message_bytes: 65536,
            throughput_iterations: 200,
            streams: 4,
        }
    }
}

/// Latency distribution of one verb, nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencyNs {
    pub min: u64,
    pub p50: u64,
    pub mean: u64,
    pub p99: u64,
    pub max: u64,
}

impl LatencyNs {
    /// perftest's statistic over post times: samples are the gaps between consecutive posts,
    /// the two largest are dropped, the median of an even count is the mean of the middle two.
    fn from_post_times(posts: &[Instant]) -> LatencyNs {
        let mut samples: Vec<u64> =
            posts.windows(2).map(|w| w[1].duration_since(w[0]).as_nanos() as u64).collect();
        samples.sort_unstable();
        if samples.len() > 2 {
            samples.truncate(samples.len() - 2);
        }
        let mut l = LatencyNs::of(samples.clone());
        if samples.len() >= 2 && samples.len().is_multiple_of(2) {
            let n = samples.len();
            l.p50 = (samples[n / 2 - 1] + samples[n / 2]) / 2;
        }
        l
    }

    fn of(mut samples: Vec<u64>) -> LatencyNs {
        if samples.is_empty() {
            return LatencyNs::default();
        }
        samples.sort_unstable();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        LatencyNs {
            min: samples[0],
            p50: at(0.5),
            mean: samples.iter().sum::<u64>() / samples.len() as u64,
            p99: at(0.99),
            max: samples[samples.len() - 1],
        }
    }
}

/// The measured profile. The simulator's profile struct is filled from these numbers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Calibration {
    pub device: String,
    pub iterations: u32,
    /// 8-byte verbs.
    pub read_latency_ns: LatencyNs,
    pub write_latency_ns: LatencyNs,
    pub cas_latency_ns: LatencyNs,
    pub faa_latency_ns: LatencyNs,
    /// A doorbell batch CAS+READ(64 B), SELCC's acquire shape.
    pub batch_cas_read_latency_ns: LatencyNs,
    pub bandwidth_message_bytes: u32,
    pub read_bandwidth_mb_s: f64,
    pub write_bandwidth_mb_s: f64,
    /// FAAs per second, all streams on one word.
    pub same_address_atomic_mops: f64,
    /// FAAs per second, each stream on its own word.
    pub distinct_address_atomic_mops: f64,
}

impl std::fmt::Display for Calibration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "device {} ({} iterations per latency)", self.device, self.iterations)?;
        writeln!(f, "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9}", "verb (ns)", "min", "p50", "mean", "p99", "max")?;
        for (name, l) in [
            ("READ 8B", self.read_latency_ns),
            ("WRITE 8B", self.write_latency_ns),
            ("CAS", self.cas_latency_ns),
            ("FAA", self.faa_latency_ns),
            ("CAS+READ batch", self.batch_cas_read_latency_ns),
        ] {
            writeln!(f, "{name:<16} {:>9} {:>9} {:>9} {:>9} {:>9}", l.min, l.p50, l.mean, l.p99, l.max)?;
        }
        writeln!(
            f,
            "bandwidth ({} B): READ {:.1} MB/s, WRITE {:.1} MB/s",
            self.bandwidth_message_bytes, self.read_bandwidth_mb_s, self.write_bandwidth_mb_s
        )?;
        write!(
            f,
            "atomics: same address {:.4} Mops/s, distinct addresses {:.4} Mops/s",
            self.same_address_atomic_mops, self.distinct_address_atomic_mops
        )
    }
}

/// Runs the measurements on one device. Errors (no device, verbs failing) are values.
pub fn calibrate(opts: &CalibrateOptions) -> Result<Calibration, HwError> {
    let streams = opts.streams.max(1);
    let message = opts.bandwidth_message_bytes.div_ceil(8).max(1) * 8;
    // Layout: word 0..8 latency targets, then one message-sized area per stream (remote side),
    // then one per stream (local side).
    let area = message as u64;
    let region_bytes = 4096 + 2 * area * streams as u64;
    let shape = nic::Cluster { kinds: vec![nic::NodeKind::Memory], region_size_bytes: vec![region_bytes] };
    let mut boot = BootstrapOptions::new(shape);
    boot.rank = Some(0);
    boot.size = Some(1);
    boot.device = opts.device.clone();
    boot.port = opts.port;
    boot.gid_index = opts.gid_index;
    boot.config = HwConfig { channels: streams, ..HwConfig::default() };
    let cluster = cluster::bootstrap(boot)?;
    let nic = cluster.nic();
    let device = nic.device().to_string();
    let iterations = opts.iterations;
    let opts = opts.clone();
    let result = cluster.block_on(async move { measure(nic, &opts, message, streams, area).await });
    if result.is_ok() && std::env::var("DMSIM_HW_CALIBRATE_SPIN").is_ok_and(|v| v == "1") {
        spin_floor(&cluster.nic(), iterations)?;
    }
    cluster.finish()?;
    result.map(|c| Calibration { device, ..c })
}

/// `DMSIM_HW_CALIBRATE_SPIN=1`: see the module docs.
#[cfg(feature = "rdma")]
fn spin_floor(nic: &crate::HwNic, iterations: u32) -> Result<(), HwError> {
    let me = nic.node();
    let verb_err = |e: nic::NicError| HwError::Config(format!("calibration verb failed: {e}"));
    let read = [nic::Verb::Read { remote: RemoteAddr::new(me, 0), local_bytes: 64, len_bytes: 8 }];
    let cas = [nic::Verb::Cas { remote: RemoteAddr::new(me, 16), expect: 0, swap: 0 }];
    // What one clock read costs here (the samples include one per verb, as perftest's a TSC read).
    let start = Instant::now();
    let mut last = start;
    for _ in 0..1000 {
        last = Instant::now();
    }
    eprintln!("clock read: {} ns", last.duration_since(start).as_nanos() / 1000);
    for (name, verbs) in [("READ 8B spin", &read), ("CAS spin", &cas)] {
        nic.spin_latency(verbs, 20).map_err(verb_err)?;
        let times = nic.spin_latency(verbs, iterations).map_err(verb_err)?;
        let posts: Vec<Instant> = times.iter().map(|t| t[0]).collect();
        let l = LatencyNs::from_post_times(&posts);
        let phase = |a: usize, b: usize| {
            LatencyNs::of(times.iter().map(|t| t[b].duration_since(t[a]).as_nanos() as u64).collect()).p50
        };
        eprintln!(
            "{name:<16} {:>9} {:>9} {:>9} {:>9} {:>9}   (p50 of: building the work requests {} ns, \
             post_send {} ns, completion seen after the post {} ns)",
            l.min,
            l.p50,
            l.mean,
            l.p99,
            l.max,
            phase(0, 1),
            phase(1, 2),
            phase(2, 3)
        );
    }
    Ok(())
}

#[cfg(not(feature = "rdma"))]
fn spin_floor(nic: &crate::HwNic, _iterations: u32) -> Result<(), HwError> {
    let _ = nic.node();
    Ok(())
}

async fn measure<N: Nic>(
    nic: N,
    opts: &CalibrateOptions,
    message: u32,
    streams: u16,
    area: u64,
) -> Result<Calibration, HwError> {
    let me = nic.node();
    let at = |offset: u64| RemoteAddr::new(me, offset);
    let verb_err = |e: nic::NicError| HwError::Config(format!("calibration verb failed: {e}"));
    let warmup = 20.min(opts.iterations);
    let mut out = Calibration {
        iterations: opts.iterations,
        bandwidth_message_bytes: message,
        ..Calibration::default()
    };

    // Post times of `iterations` verbs issued one after another (see the module docs).
    macro_rules! latency {
        ($verb:expr) => {{
            let mut posts = Vec::with_capacity(opts.iterations as usize);
            for i in 0..warmup + opts.iterations {
                if i >= warmup {
                    posts.push(Instant::now());
                }
                $verb.await.map_err(verb_err)?;
            }
            LatencyNs::from_post_times(&posts)
        }};
    }
    out.read_latency_ns = latency!(nic.read(at(0), 64, 8));
    out.write_latency_ns = latency!(nic.write(at(8), 64, 8));
    out.cas_latency_ns = latency!(nic.cas(at(16), 0, 0));
    out.faa_latency_ns = latency!(nic.faa(at(24), 1));
    let acquire = [
        nic::Verb::Cas { remote: at(32), expect: 0, swap: 0 },
        nic::Verb::Read { remote: at(128), local_bytes: 256, len_bytes: 64 },
    ];
    out.batch_cas_read_latency_ns = latency!(nic.batch(&acquire));

    // Throughput: `streams` tasks, each on its own channel (QP), one verb in flight each.
    let remote_base = 4096;
    let local_base = 4096 + area * streams as u64;
    let per_task = opts.throughput_iterations;
    let run = |kind: u8| {
        let tasks: Vec<_> = (0..streams)
            .map(|s| {
                let q = nic.qp(s);
                let remote = at(remote_base + area * s as u64);
                let local = local_base + area * s as u64;
                let (done_tx, done_rx) = std::sync::mpsc::channel();
                nic.spawn(async move {
                    let mut result = Ok(());
                    for _ in 0..per_task {
                        let r = match kind {
                            0 => q.read(remote, local, message).await,
                            1 => q.write(remote, local, message).await,
                            2 => q.faa(RemoteAddr::new(remote.node, 40), 1).await.map(|_| ()),
                            _ => q.faa(remote, 1).await.map(|_| ()),
                        };
                        if let Err(e) = r {
                            result = Err(e);
                            break;
                        }
                    }
                    let _ = done_tx.send(result);
                });
                done_rx
            })
            .collect();
        tasks
    };
    for kind in 0..4u8 {
        let start = Instant::now();
        let receivers = run(kind);
        for rx in receivers {
            // Wait cooperatively: sleep on the runtime until the task reports.
            loop {
                match rx.try_recv() {
                    Ok(r) => {
                        r.map_err(verb_err)?;
                        break;
                    }
                    Err(std::sync::mpsc::TryRecvError::Empty) => nic.sleep(nic::Nanos::from_us(50)).await,
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                        return Err(HwError::Config("a calibration task ended without a result".into()))
                    }
                }
            }
        }
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        let ops = per_task as f64 * streams as f64;
        match kind {
            0 => out.read_bandwidth_mb_s = ops * message as f64 / secs / 1e6,
            1 => out.write_bandwidth_mb_s = ops * message as f64 / secs / 1e6,
            2 => out.same_address_atomic_mops = ops / secs / 1e6,
            _ => out.distinct_address_atomic_mops = ops / secs / 1e6,
        }
    }
    // Self-check: every FAA on the shared word was applied exactly once.
    let shared = nic.local().load(40);
    if shared != per_task as u64 * streams as u64 {
        return Err(HwError::Config(format!(
            "same-address FAA lost updates: word is {shared}, expected {}",
            per_task as u64 * streams as u64
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_stats_are_order_statistics() {
        let l = LatencyNs::of((1..=100).rev().collect());
        assert_eq!((l.min, l.p50, l.p99, l.max), (1, 51, 99, 100));
        assert_eq!(l.mean, 50);
        assert_eq!(LatencyNs::of(vec![]), LatencyNs::default());
    }

    #[cfg(not(feature = "rdma"))]
    #[test]
    fn without_rdma_calibrate_says_so() {
        assert_eq!(calibrate(&CalibrateOptions::default()), Err(HwError::NotBuilt));
    }
}
