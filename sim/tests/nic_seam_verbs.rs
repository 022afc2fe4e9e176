//! The NIC seam extensions that are verbs: masked atomics, device memory, unsignaled posts and
//! ordered tearing, seen through the trait in the simulator.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dmsim_protocols::nic::{masked, Cluster, Nanos, Nic, NicError, NodeId, NodeKind, RemoteAddr, Verb};
use dmsim_sim::choice::Strategy;
use dmsim_sim::fabric::{Profile, TearOrder};
use dmsim_sim::{Sim, SimConfig, StopReason};

const MN: NodeId = NodeId(0);
const CN: NodeId = NodeId(1);

fn cluster(compute: usize) -> Cluster {
    let mut kinds = vec![NodeKind::Memory];
    kinds.extend(std::iter::repeat_n(NodeKind::Compute, compute));
    let n = kinds.len();
    Cluster { kinds, region_size_bytes: vec![64 * 1024; n] }
}

fn profile() -> Profile {
    let mut p = Profile::named("cx5_100g").unwrap();
    p.jitter_ns_max = 0;
    p
}

fn config(compute: usize, profile: Profile) -> SimConfig {
    let mut c = SimConfig::new(cluster(compute), profile, 1);
    c.strategy = Strategy::Default;
    c
}

/// Runs `clients` tasks (each on its own compute node) that each time one verb future; returns
/// their latencies.
fn time_each<F, Fut>(mut sim: Sim, clients: usize, f: F) -> Vec<u64>
where
    F: Fn(dmsim_sim::SimNic, usize) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let times = Arc::new(Mutex::new(vec![0; clients]));
    for i in 0..clients {
        let nic = sim.nic(NodeId(1 + i as u16));
        let (t, fut) = (times.clone(), f(nic.clone(), i));
        sim.spawn_main(NodeId(1 + i as u16), async move {
            let start = nic.now();
            fut.await;
            t.lock().unwrap()[i] = nic.now().0 - start.0;
        });
    }
    assert_eq!(sim.run().stop, StopReason::Finished);
    let t = times.lock().unwrap().clone();
    t
}

#[test]
fn masked_atomics_change_only_their_fields() {
    // Goal: masked CAS compares and swaps under its masks, masked FAA keeps carries inside
    // fields, both return the old value, and the explicit CAS-loop emulation agrees with them.
    let mut sim = Sim::new(config(1, profile()));
    let nic = sim.nic(CN);
    let region = sim.region(MN);
    sim.spawn_main(CN, async move {
        let a = RemoteAddr::new(MN, 64);
        nic.write_word(a, 0x00ff_0000_0000_00f1).await.unwrap();
        // Lock bit 0 set → compare on bit 0 against 1 succeeds; clear it and set a version field.
        let old = nic.masked_cas(a, 1, 1, 0x42 << 8, 0xff << 8 | 1).await.unwrap();
        assert_eq!(old, 0x00ff_0000_0000_00f1);
        assert_eq!(nic.local().load(0), 0, "local region untouched");
        let old = nic.masked_cas(a, 1, 1, 0, 1).await.unwrap();
        assert_eq!(old, 0x00ff_0000_0000_42f0, "compare failed: unchanged, old value returned");
        // Two 8-bit fields at the bottom: +1 to the low byte wraps without carrying.
        let b = RemoteAddr::new(MN, 72);
        nic.write_word(b, 0x01ff).await.unwrap();
        assert_eq!(nic.masked_faa(b, 0x0101, 1 << 7 | 1 << 15).await.unwrap(), 0x01ff);
        // Emulation, chosen explicitly, on another word: same result.
        let c = RemoteAddr::new(MN, 80);
        nic.write_word(c, 0x01ff).await.unwrap();
        let v = Verb::MaskedFaa { remote: c, add: 0x0101, boundary_mask: 1 << 7 | 1 << 15 };
        assert_eq!(masked::emulate(&nic, v).await.unwrap(), 0x01ff);
    });
    assert_eq!(sim.run().stop, StopReason::Finished);
    assert_eq!(region.load(64), 0x00ff_0000_0000_42f0);
    assert_eq!(region.load(72), 0x0200);
    assert_eq!(region.load(80), 0x0200);
}

#[test]
fn masked_atomics_serialize_with_atomics_on_one_word() {
    // Goal: masked atomics use the per-word atomic unit: concurrent masked FAAs on disjoint
    // fields of one word all land (none lost), and they take as long as CASes on one word.
    let n = 4;
    let mk = || Sim::new(config(n, profile()));
    let sim = mk();
    let region = sim.region(MN);
    let a = RemoteAddr::new(MN, 0);
    let masked_times = time_each(sim, n, move |nic, i| async move {
        // Field i is byte i; boundary at every byte's top bit.
        nic.masked_faa(a, 1 << (8 * i), 0x8080_8080_8080_8080).await.unwrap();
    });
    assert_eq!(region.load(0), 0x0101_0101);
    let cas_times = time_each(mk(), n, move |nic, i| async move {
        nic.cas(a, 0, i as u64).await.unwrap();
    });
    // Equal up to the few nanoseconds of the masked request's larger payload on the wire.
    let (m, c) = (*masked_times.iter().max().unwrap(), *cas_times.iter().max().unwrap());
    assert!(m.abs_diff(c) <= 5, "{masked_times:?} vs {cas_times:?}");
    let spread = masked_times.iter().max().unwrap() - masked_times.iter().min().unwrap();
    assert!(spread >= (n as u64 - 1) * profile().atomic_service_ns, "serialized: {masked_times:?}");
}

#[test]
fn device_memory_is_a_separate_faster_space() {
    // Goal: without device memory a device address is a BadAddress value; with it, device words
    // are distinct from host words at the same offset, a device CAS is faster by the profile's
    // saving, and same-word device atomics serialize at the faster device atomic unit.
    let mut sim = Sim::new(config(1, profile()));
    let nic = sim.nic(CN);
    sim.spawn_main(CN, async move {
        let e = nic.cas(RemoteAddr::device(MN, 0), 0, 1).await.unwrap_err();
        assert!(matches!(e, NicError::BadAddress { region_size_bytes: 0, .. }), "{e}");
        assert_eq!(nic.device_memory_bytes(MN), 0);
    });
    assert_eq!(sim.run().stop, StopReason::Finished);

    let p = profile();
    let mut c = config(4, p.clone());
    c.enable_device_memory();
    assert_eq!(c.device_memory_bytes, vec![256 * 1024, 0, 0, 0, 0]);
    let mut sim = Sim::new(c);
    let (host, dev) = (sim.region(MN), sim.device_region(MN));
    let nic = sim.nic(CN);
    let lat = Arc::new(Mutex::new((0, 0)));
    let l = lat.clone();
    sim.spawn_main(CN, async move {
        assert_eq!(nic.device_memory_bytes(MN), 256 * 1024);
        let t = nic.now();
        assert_eq!(nic.cas(RemoteAddr::device(MN, 8), 0, 7).await.unwrap(), 0);
        let device_ns = nic.now().0 - t.0;
        let t = nic.now();
        assert_eq!(nic.cas(RemoteAddr::new(MN, 8), 0, 9).await.unwrap(), 0, "host word is another word");
        *l.lock().unwrap() = (device_ns, nic.now().0 - t.0);
        let e = nic.faa(RemoteAddr::device(MN, 256 * 1024), 1).await.unwrap_err();
        assert!(matches!(e, NicError::BadAddress { .. }), "{e}");
        // READ/WRITE work on device memory too.
        nic.local().store(0, 5);
        nic.write(RemoteAddr::device(MN, 16), 0, 8).await.unwrap();
        nic.read(RemoteAddr::device(MN, 8), 64, 16).await.unwrap();
        assert_eq!((nic.local().load(64), nic.local().load(72)), (7, 5));
    });
    assert_eq!(sim.run().stop, StopReason::Finished);
    assert_eq!((dev.load(8), host.load(8)), (7, 9));
    let (device_ns, host_ns) = *lat.lock().unwrap();
    let saving = p.device_latency_saving_ns;
    assert!(
        host_ns - device_ns >= saving - 2 && host_ns - device_ns <= saving + 2,
        "{device_ns} vs {host_ns}"
    );

    // Four clients CAS one word: the spread of finish times is the unit's service time × 3.
    let spread = |addr: RemoteAddr| {
        let mut c = config(4, profile());
        c.enable_device_memory();
        let t = time_each(Sim::new(c), 4, move |nic, i| async move {
            nic.cas(addr, 0, i as u64 + 1).await.unwrap();
        });
        t.iter().max().unwrap() - t.iter().min().unwrap()
    };
    assert_eq!(spread(RemoteAddr::new(MN, 0)), 3 * p.atomic_service_ns);
    assert_eq!(spread(RemoteAddr::device(MN, 0)), 3 * p.device_atomic_service_ns);
}

#[test]
fn unsignaled_posts_return_at_once_keep_qp_order_and_are_bounded() {
    // Goal: an unsignaled FAA returns without waiting; a READ posted after it on the same QP
    // sees it; more than `unsignaled_max` in flight is a QpOverflow value; they drain.
    let mut p = profile();
    p.unsignaled_max = 4;
    p.qp_outstanding_max = 16;
    let mut sim = Sim::new(config(1, p));
    let nic = sim.nic(CN);
    let region = sim.region(MN);
    sim.spawn_main(CN, async move {
        let a = RemoteAddr::new(MN, 0);
        let t = nic.now();
        for _ in 0..4 {
            nic.post_unsignaled(&[Verb::Faa { remote: a, add: 1 }]).unwrap();
        }
        assert_eq!(nic.now(), t, "posting does not wait");
        let e = nic.post_unsignaled(&[Verb::Faa { remote: a, add: 1 }]).unwrap_err();
        assert!(matches!(e, NicError::QpOverflow { cap: 4, .. }), "{e}");
        nic.read(a, 0, 8).await.unwrap();
        assert_eq!(nic.local().load(0), 4, "the READ after them on the QP sees all four");
        // By the READ's completion the earlier ones have completed too: room again.
        nic.post_unsignaled(&[Verb::WriteWord { remote: a, value: 100 }]).unwrap();
        nic.post_unsignaled(&[Verb::Faa { remote: a, add: 1 }]).unwrap();
        let e = nic.post_unsignaled(&[]).unwrap_err();
        assert!(matches!(e, NicError::BadBatch { .. }), "{e}");
        assert_eq!(nic.faa(a, 0).await.unwrap(), 101, "FIFO on the QP: WRITE, FAA, then this");
    });
    assert_eq!(sim.run().stop, StopReason::Finished);
    assert_eq!(region.load(0), 101);
}

/// Runs a 1 KiB WRITE of ones over zeros and returns, after every event, which 64-byte pieces
/// had landed (bit k = piece k).
fn landing_states(profile: Profile, any_order: bool, seed: u64) -> Vec<u16> {
    let mut c = config(1, profile);
    c.torn_large_verbs = any_order;
    c.strategy = Strategy::Random { seed };
    let mut sim = Sim::new(c);
    let nic = sim.nic(CN);
    let region = sim.region(MN);
    let states = Arc::new(Mutex::new(Vec::new()));
    let s = states.clone();
    sim.set_checker(move |_| {
        let mask = (0..16).fold(0u16, |m, k| m | ((region.load(k * 64) != 0) as u16) << k);
        s.lock().unwrap().push(mask);
        Ok(())
    });
    sim.spawn_main(CN, async move {
        let ones = [1u64; 128];
        nic.local().write_words(0, &ones);
        nic.write(RemoteAddr::new(MN, 0), 0, 1024).await.unwrap();
    });
    assert_eq!(sim.run().stop, StopReason::Finished);
    let v = states.lock().unwrap().clone();
    v
}

#[test]
fn ascending_tearing_lands_pieces_in_address_order() {
    // Goal: with `tear_order: ascending` every intermediate state of a 1 KiB WRITE is a prefix
    // of its pieces, and some intermediate states exist; any-order tearing (the fuzz mode)
    // shows non-prefix states for some seed; the default lands it at once.
    let is_prefix = |m: u16| (m as u32 + 1).is_power_of_two();
    let mut asc = profile();
    asc.tear_order = TearOrder::Ascending;
    let states = landing_states(asc.clone(), false, 1);
    assert!(states.iter().all(|m| is_prefix(*m)), "{states:x?}");
    assert!(states.iter().any(|m| *m != 0 && *m != 0xffff), "pieces land at different times: {states:x?}");
    assert!(landing_states(profile(), false, 1).iter().all(|m| *m == 0 || *m == 0xffff));
    let any = (0..8).any(|seed| landing_states(asc.clone(), true, seed).iter().any(|m| !is_prefix(*m)));
    assert!(any, "any-order tearing (which wins over the profile's order) mixes pieces");
}

#[test]
fn new_features_are_deterministic() {
    // Goal: a run using every extension twice gives the same trace hash and event count.
    let run = || {
        let mut p = profile();
        p.tear_order = TearOrder::Ascending;
        let mut c = SimConfig::new(cluster(2), p, 7);
        c.enable_device_memory();
        c.ssd_bytes = vec![0, 1 << 20, 0];
        c.model_compute_cores(1);
        let mut sim = Sim::new(c);
        let done = Arc::new(AtomicU64::new(0));
        for cn in [1u16, 2] {
            let nic = sim.nic(NodeId(cn));
            let d = done.clone();
            sim.spawn_main(NodeId(cn), async move {
                let me = nic.node().0 as u64;
                nic.masked_faa(RemoteAddr::new(MN, 0), 1 << (8 * me), 0x8080).await.unwrap();
                nic.cas(RemoteAddr::device(MN, 0), 0, me).await.unwrap();
                nic.post_unsignaled(&[Verb::Write {
                    remote: RemoteAddr::new(MN, 1024),
                    local_bytes: 0,
                    len_bytes: 512,
                }])
                .unwrap();
                nic.cpu(Nanos(500)).await;
                if me == 1 {
                    nic.ssd_write(0, 0, 4096).await.unwrap();
                    nic.ssd_read(0, 8192, 4096).await.unwrap();
                    let v = nic.wait_word(16, dmsim_protocols::nic::WordCond::Ne(0), Nanos(700), None).await;
                    d.fetch_add(v.unwrap(), Ordering::SeqCst);
                } else {
                    nic.sleep(Nanos(20_000)).await;
                    nic.write_word(RemoteAddr::new(NodeId(1), 16), 3).await.unwrap();
                }
            });
        }
        let out = sim.run();
        assert_eq!(out.stop, StopReason::Finished);
        assert_eq!(done.load(Ordering::SeqCst), 3);
        (out.trace_hash, out.events, out.end_time)
    };
    assert_eq!(run(), run());
}
