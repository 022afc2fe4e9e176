//! The NIC seam extensions that are local to a node: waiting on a word, the storage device,
//! compute-node cores and symmetric nodes.

use std::sync::{Arc, Mutex};

use dmsim_protocols::nic::wait::{poll_loop, sweep_loop};
use dmsim_protocols::nic::{Cluster, Nanos, Nic, NicError, NodeId, NodeKind, RemoteAddr, WordCond};
use dmsim_sim::choice::Strategy;
use dmsim_sim::fabric::Profile;
use dmsim_sim::{Sim, SimConfig, StopReason};

const CN: NodeId = NodeId(1);
const WRITER: NodeId = NodeId(2);

fn config() -> SimConfig {
    let kinds = vec![NodeKind::Memory, NodeKind::Compute, NodeKind::Compute];
    let cluster = Cluster { kinds, region_size_bytes: vec![64 * 1024; 3] };
    let mut p = Profile::named("cx5_100g").unwrap();
    p.jitter_ns_max = 0;
    let mut c = SimConfig::new(cluster, p, 1);
    c.strategy = Strategy::Default;
    c
}

/// The waiter on CN starts at `start_ns` and waits (period `period`) for the word at 64 to
/// become 2; WRITER writes 1 then 2 there at the given times. Returns (wake time or error,
/// events) — with the trait's `wait_word` or with the reference poll loop.
fn wait_run(
    reference: bool,
    start_ns: u64,
    period: u64,
    timeout: Option<u64>,
    writes_at: &[u64],
) -> (Result<u64, NicError>, u64) {
    let mut sim = Sim::new(config());
    let nic = sim.nic(CN);
    let out = Arc::new(Mutex::new(None));
    let o = out.clone();
    sim.spawn_main(CN, async move {
        nic.sleep(Nanos(start_ns)).await;
        let (until, period, timeout) = (WordCond::Eq(2), Nanos(period), timeout.map(Nanos));
        let r = if reference {
            poll_loop(&nic, 64, until, period, timeout).await
        } else {
            nic.wait_word(64, until, period, timeout).await
        };
        *o.lock().unwrap() = Some(r.map(|v| {
            assert_eq!(v, 2);
            nic.now().0
        }));
    });
    let writer = sim.nic(WRITER);
    let writes = writes_at.to_vec();
    sim.spawn_main(WRITER, async move {
        for (i, at) in writes.into_iter().enumerate() {
            // Post so that the WRITE lands at the target around `at` (half an RTT later).
            nic_sleep_until(&writer, at).await;
            writer.write_word(RemoteAddr::new(CN, 64), i as u64 + 1).await.unwrap();
        }
    });
    let outcome = sim.run();
    assert_eq!(outcome.stop, StopReason::Finished);
    let r = out.lock().unwrap().take().unwrap();
    (r, outcome.events)
}

async fn nic_sleep_until(nic: &impl Nic, at: u64) {
    let now = nic.now().0;
    if at > now {
        nic.sleep(Nanos(at - now)).await;
    }
}

#[test]
fn wait_word_wakes_at_the_poll_loops_time_with_fewer_events() {
    // Goal: for several start times, periods and write times, `wait_word` returns at exactly
    // the time the reference poll loop does (t0 + k·P, first poll after the write), with far
    // fewer events; a value written and then changed is re-checked, not missed or misread.
    for (start, period, writes) in [
        (0u64, 1000u64, vec![10_000u64, 30_000]),
        (333, 700, vec![5_000, 5_100]),
        (1_000, 10_000, vec![2_000, 45_017]),
        (0, 1, vec![3_000, 3_001]),
    ] {
        let (poll, poll_events) = wait_run(true, start, period, None, &writes);
        let (watch, watch_events) = wait_run(false, start, period, None, &writes);
        let t = poll.clone().unwrap();
        assert_eq!(watch, poll, "start {start} period {period} writes {writes:?}");
        assert_eq!((t - start) % period, 0, "woken on the poll grid");
        assert!(watch_events < poll_events, "{watch_events} vs {poll_events} events");
        if (t - start) / period >= 20 {
            assert!(watch_events * 2 < poll_events, "{watch_events} vs {poll_events} events");
        }
    }
}

#[test]
fn wait_word_times_out_on_the_poll_grid_and_checks_its_address() {
    // Goal: with no matching write the wait ends with Timeout at the first poll at or after
    // t0 + timeout, like the poll loop; a bad offset is an error value.
    for reference in [true, false] {
        let (r, _) = wait_run(reference, 100, 1000, Some(2_500), &[50_000]);
        assert!(matches!(r, Err(NicError::Timeout { .. })), "{r:?}");
    }
    let mut sim = Sim::new(config());
    let nic = sim.nic(CN);
    sim.spawn_main(CN, async move {
        let t0 = nic.now().0;
        let e = nic.wait_word(64, WordCond::Eq(5), Nanos(1000), Some(Nanos(2_500))).await.unwrap_err();
        assert!(matches!(e, NicError::Timeout { .. }));
        assert_eq!(nic.now().0 - t0, 3000, "timeout at the poll grid point 3000 ≥ 2500");
        let e = nic.wait_word(64 * 1024, WordCond::Eq(0), Nanos(10), None).await.unwrap_err();
        assert!(matches!(e, NicError::BadAddress { .. }), "{e}");
        let e = nic.wait_word(4, WordCond::Eq(0), Nanos(10), None).await.unwrap_err();
        assert!(matches!(e, NicError::Unaligned { .. }), "{e}");
        assert_eq!(nic.wait_word(8, WordCond::Eq(0), Nanos(10), None).await, Ok(0), "holds at t0");
    });
    assert_eq!(sim.run().stop, StopReason::Finished);
}

/// The waiter on CN starts at `start_ns` and waits (period `period`) for a write into
/// `[64, 112)`; WRITER writes the word at each `(time, offset)`. Returns (wake time, whether a
/// write was seen, events) — with the trait's `wait_write` or the reference sweep loop.
fn wait_write_run(
    reference: bool,
    start_ns: u64,
    period: u64,
    timeout: Option<u64>,
    writes: &[(u64, u64)],
) -> (u64, bool, u64) {
    let mut sim = Sim::new(config());
    let nic = sim.nic(CN);
    let out = Arc::new(Mutex::new(None));
    let o = out.clone();
    sim.spawn_main(CN, async move {
        nic.sleep(Nanos(start_ns)).await;
        let (period, timeout) = (Nanos(period), timeout.map(Nanos));
        let seen = if reference {
            sweep_loop(&nic, 64, 48, period, timeout).await
        } else {
            nic.wait_write(64, 48, period, timeout).await
        };
        *o.lock().unwrap() = Some((nic.now().0, seen.unwrap()));
    });
    let writer = sim.nic(WRITER);
    let writes = writes.to_vec();
    sim.spawn_main(WRITER, async move {
        for (i, (at, offset)) in writes.into_iter().enumerate() {
            nic_sleep_until(&writer, at).await;
            writer.write_word(RemoteAddr::new(CN, offset), i as u64 + 1).await.unwrap();
        }
    });
    let outcome = sim.run();
    assert_eq!(outcome.stop, StopReason::Finished);
    let (t, seen) = out.lock().unwrap().take().unwrap();
    (t, seen, outcome.events)
}

#[test]
fn wait_write_wakes_at_the_sweep_loops_time_with_fewer_events() {
    // Goal: `wait_write` returns when a task sweeping the range every period would first see a
    // write into it — writes outside the range (word 56 just below, 112 just above) wake
    // nobody — with fewer events; with no write in range it times out on the sweep grid.
    for (start, period, writes) in [
        (0u64, 1000u64, vec![(10_000u64, 56u64), (20_000, 112), (30_000, 104)]),
        (333, 700, vec![(5_000, 64), (5_100, 72)]),
        (1_000, 10_000, vec![(2_000, 200), (45_017, 80)]),
    ] {
        let (poll_t, poll_seen, poll_events) = wait_write_run(true, start, period, None, &writes);
        let (t, seen, events) = wait_write_run(false, start, period, None, &writes);
        assert_eq!((t, seen), (poll_t, poll_seen), "start {start} period {period} writes {writes:?}");
        assert!(seen && (t - start) % period == 0, "woken on the sweep grid at {t}");
        assert!(events < poll_events, "{events} vs {poll_events} events");
    }
    for reference in [true, false] {
        let (t, seen, _) = wait_write_run(reference, 100, 1000, Some(2_500), &[(1_000, 8), (50_000, 64)]);
        assert_eq!((t, seen), (3_100, false), "timeout at the first sweep at or after t0 + 2500");
    }
}

#[test]
fn ssd_round_trip_latency_bandwidth_and_queue_depth() {
    // Goal: without a device the calls are Unsupported values; with one, data written comes
    // back, a read costs latency + bytes/bandwidth, and queue depth bounds overlap.
    let mut sim = Sim::new(config());
    let nic = sim.nic(CN);
    sim.spawn_main(CN, async move {
        assert_eq!(nic.ssd_bytes(), 0);
        let e = nic.ssd_read(0, 0, 8).await.unwrap_err();
        assert!(matches!(e, NicError::Unsupported { feature: "storage device", .. }), "{e}");
    });
    assert_eq!(sim.run().stop, StopReason::Finished);

    let run = |depth: u32| {
        let mut c = config();
        c.profile.ssd_queue_depth = depth;
        c.ssd_bytes = vec![0, 1 << 20, 0];
        let p = c.profile.clone();
        let mut sim = Sim::new(c);
        let nic = sim.nic(CN);
        let times = Arc::new(Mutex::new(Vec::new()));
        let t = times.clone();
        sim.spawn_main(CN, async move {
            nic.local().write_words(0, &[11, 22, 33]);
            let t0 = nic.now().0;
            nic.ssd_write(4096, 0, 4096).await.unwrap();
            t.lock().unwrap().push(nic.now().0 - t0);
            let e = nic.ssd_write((1 << 20) - 8, 0, 16).await.unwrap_err();
            assert!(matches!(e, NicError::BadAddress { .. }), "{e}");
            let e = nic.ssd_write(4, 0, 8).await.unwrap_err();
            assert!(matches!(e, NicError::Unaligned { .. }), "{e}");
            // Two concurrent reads of 4 KiB.
            let (a, b) = (nic.clone(), nic.clone());
            let t0 = nic.now().0;
            let ra = a.ssd_read(4096, 8192, 4096);
            let rb = b.ssd_read(0, 16384, 4096);
            for r in dmsim_protocols::sync::join_all(vec![ra, rb]).await {
                r.unwrap();
            }
            t.lock().unwrap().push(nic.now().0 - t0);
            assert_eq!(nic.local().load(8192 + 16), 33, "written data comes back");
            assert_eq!(nic.local().load(16384), 0, "unwritten blocks read as zero");
        });
        assert_eq!(sim.run().stop, StopReason::Finished);
        let v = times.lock().unwrap().clone();
        (v, p)
    };
    let (deep, p) = run(32);
    // 4 KiB at whole picoseconds per byte (the model's integer arithmetic).
    let xfer = (4096 * (1e6 / p.ssd_bandwidth_mbps).round() as u64).div_ceil(1000);
    assert_eq!(deep[0], p.ssd_latency_ns_write + xfer, "write: latency + transfer");
    // Depth 32: both reads overlap their latency and share the bandwidth.
    assert_eq!(deep[1], p.ssd_latency_ns_read + 2 * xfer);
    let (shallow, _) = run(1);
    assert_eq!(shallow[1], 2 * (p.ssd_latency_ns_read + xfer), "depth 1: one after the other");
}

#[test]
fn compute_node_cores_queue_cpu_work_when_modelled() {
    // Goal: by default a compute node's cpu() runs at once for every task; with one modelled
    // core two tasks' work queues.
    let run = |cores: Option<u32>| {
        let mut c = config();
        if let Some(n) = cores {
            c.model_compute_cores(n);
        }
        assert_eq!(c.cores[0], None, "memory nodes are left as they were");
        let mut sim = Sim::new(c);
        let ends = Arc::new(Mutex::new(Vec::new()));
        for _ in 0..2 {
            let nic = sim.nic(CN);
            let e = ends.clone();
            sim.spawn_main(CN, async move {
                nic.cpu(Nanos(100)).await;
                e.lock().unwrap().push(nic.now().0);
            });
        }
        assert_eq!(sim.run().stop, StopReason::Finished);
        let mut v = ends.lock().unwrap().clone();
        v.sort();
        v
    };
    assert_eq!(run(None), vec![100, 100]);
    assert_eq!(run(Some(1)), vec![100, 200]);
    assert_eq!(run(Some(2)), vec![100, 100]);
}

#[test]
fn symmetric_nodes_are_clients_and_homes() {
    // Goal: the node-set helpers say what they include; symmetric nodes get device memory and
    // modelled cores through the helpers, and verbs reach their memory.
    let kinds = vec![NodeKind::Memory, NodeKind::Compute, NodeKind::Symmetric, NodeKind::Symmetric];
    let cluster = Cluster { kinds, region_size_bytes: vec![4096; 4] };
    let ids = |v: &[u16]| v.iter().map(|&i| NodeId(i)).collect::<Vec<_>>();
    assert_eq!(cluster.compute_nodes(), ids(&[1]), "kind Compute only");
    assert_eq!(cluster.memory_nodes(), ids(&[0]), "kind Memory only");
    assert_eq!(cluster.symmetric_nodes(), ids(&[2, 3]));
    assert_eq!(cluster.client_nodes(), ids(&[1, 2, 3]));
    assert_eq!(cluster.home_nodes(), ids(&[0, 2, 3]));
    let mut c = SimConfig::new(cluster, Profile::named("cx5_100g").unwrap(), 3);
    c.enable_device_memory();
    c.model_compute_cores(2);
    assert_eq!(c.device_memory_bytes, vec![262144, 0, 262144, 262144]);
    assert_eq!(c.cores, vec![None, Some(2), Some(2), Some(2)]);
    let mut sim = Sim::new(c);
    let nic = sim.nic(NodeId(2));
    sim.spawn_main(NodeId(2), async move {
        assert_eq!(nic.faa(RemoteAddr::new(NodeId(3), 8), 5).await.unwrap(), 0);
        assert_eq!(nic.faa(RemoteAddr::device(NodeId(3), 8), 5).await.unwrap(), 0);
    });
    assert_eq!(sim.run().stop, StopReason::Finished);
}
