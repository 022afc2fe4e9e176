//! DiFache's repair of a MODE word that carries another key's tag (`Cache::own_mode`).
//!
//! On hardware a remote mode switcher's CAS (a read then a write at the NIC) can swallow the
//! stores with which a compute node recycles the header for another key, leaving the old
//! key's mode word in a header indexed under the new key. The simulator cannot produce that
//! (a NIC atomic is one instant there), so these tests plant the word directly in the header,
//! as the race would leave it, and check that the next access repairs it: the header gets the
//! mode the other compute node holds, and reads are not stale.

use std::sync::{Arc, Mutex};

use dmsim_protocols::difache::cache::{mode_word, tag, Cache, MODE_ON, SWITCHING};
use dmsim_protocols::difache::check::{invariants, Checks, Tracker};
use dmsim_protocols::difache::config::{Config, Variant, Workload};
use dmsim_protocols::difache::index;
use dmsim_protocols::difache::layout::{object_tag, Layout, HDR_MODE, HDR_VALID};
use dmsim_protocols::difache::profit::Event;
use dmsim_protocols::nic::{Cluster, Nanos, Nic, NodeId, NodeKind, RemoteAddr};
use dmsim_sim::choice::Strategy;
use dmsim_sim::fabric::Profile;
use dmsim_sim::{Sim, SimConfig, SimNic, StopReason};

/// The object under test, and the key whose word the race leaves in its header.
const KEY: u64 = 1;
const OLD_KEY: u64 = 3;
const CN0: NodeId = NodeId(1);
const CN1: NodeId = NodeId(2);

fn layout_and_config() -> (Layout, Config) {
    let config = Config {
        variant: Variant::Difache,
        index_buckets: 64,
        cache_objects: 8,
        mode_locks: 16,
        ..Config::paper()
    };
    let workload = Workload {
        objects: 4,
        object_bytes: 16,
        threads_per_node: 1,
        ops_per_thread: 1,
        warmup_us: 0,
        measure_us: 0,
        warmup_ops_per_object: 0,
        read_ratio: 1.0,
        atomic_ratio: 0.0,
        zipf_theta: 0.0,
        trace: None,
        trace_file: None,
        batch: 1,
        parts: 1,
        transactions: None,
    };
    let layout = Layout::new(1, 2, &workload, &config);
    (layout, config)
}

fn sim(layout: &Layout) -> Sim {
    let kinds = vec![NodeKind::Memory, NodeKind::Compute, NodeKind::Compute];
    let sizes = vec![
        layout.memory_region_bytes().next_multiple_of(8),
        layout.compute_region_bytes().next_multiple_of(8),
        layout.compute_region_bytes().next_multiple_of(8),
    ];
    let mut p = Profile::named("cx5_100g").unwrap();
    p.jitter_ns_max = 0;
    let mut c = SimConfig::new(Cluster { kinds, region_size_bytes: sizes }, p, 1);
    c.strategy = Strategy::Default;
    let sim = Sim::new(c);
    let mn = sim.region(NodeId(0));
    for key in 0..layout.objects {
        let at = layout.object(key).offset_bytes;
        mn.store(at, object_tag(key));
        mn.store(at + 8, 100 + key);
    }
    sim
}

async fn sleep_until(nic: &SimNic, at_us: u64) {
    let (now, at) = (nic.now().0, at_us * 1000);
    assert!(now < at, "the script's phases overlap: {now} ns >= {at} ns");
    nic.sleep(Nanos(at - now)).await;
}

/// The header `cache` holds for `key` and its MODE word.
fn header_mode(cache: &Cache<SimNic>, key: u64) -> (u32, u64) {
    let h = index::lookup_local(cache.nic.local(), key, cache.layout.index_buckets).expect("a header");
    (h, cache.nic.local().load(cache.layout.header(h) + HDR_MODE))
}

/// Read `key` on `cache`: the event and the value word the application got.
async fn read(cache: &Cache<SimNic>, key: u64) -> (Event, u64) {
    let w = cache.worker(0);
    let event = cache.read(&w, key).await.unwrap();
    let app = cache.layout.app_buffer(0);
    assert_eq!(cache.nic.local().load(app), object_tag(key));
    (event, cache.nic.local().load(app + 8))
}

/// DiFache's per-event invariants over both compute nodes (header tags, mode agreement).
fn check(sim_regions: &[Arc<dmsim_protocols::memory::Region>], layout: &Layout) -> Result<(), String> {
    let memory = |a: RemoteAddr| sim_regions[a.node.index()].load(a.offset_bytes);
    let checks = Checks { adaptive: true, owner_sets: false, coherent: true, centralized: false };
    invariants(layout, checks, &Tracker::default(), &memory).map_err(|(name, m)| format!("{name}: {m}"))
}

#[derive(Default, Debug)]
struct Seen {
    repaired_read: Option<(Event, u64, u64)>,
    later_read: Option<(Event, u64)>,
    planted_check: Option<Result<(), String>>,
    repair_marks: Option<u64>,
}

/// CN0 and CN1 hold `KEY` with caching off (the default). Then CN1's header gets `OLD_KEY`'s
/// word with caching on (`flagged`: with the switching flag raised, which CN0 clears 50 µs
/// later with a CAS, as the old key's switcher's second CAS would). CN1 reads `KEY`, CN0
/// writes a new value (caching off: no invalidation), CN1 reads again.
fn run(flagged: bool) -> (Seen, Arc<Cache<SimNic>>, Arc<Cache<SimNic>>, Sim) {
    let (layout, config) = layout_and_config();
    let mut sim = sim(&layout);
    let c0 = Cache::new(sim.nic(CN0), layout.clone(), config.clone(), None);
    let c1 = Cache::new(sim.nic(CN1), layout.clone(), config, None);
    let regions: Vec<_> = (0..3).map(|i| sim.region(NodeId(i))).collect();
    let seen = Arc::new(Mutex::new(Seen::default()));
    // The old key's word as its switcher leaves it: caching on, interval 255, its own tag.
    let foreign = mode_word(true, 255, 0x8000, OLD_KEY);
    {
        let (c0, c1) = (c0.clone(), c1.clone());
        sim.spawn_main(CN0, async move {
            let nic = c0.nic.clone();
            let (event, value) = read(&c0, KEY).await;
            assert_eq!((event, value), (Event::ReadBypass, 100 + KEY), "a new object starts off");
            if flagged {
                // The old key's switcher's second CAS: flag cleared, its new word (same tag).
                sleep_until(&nic, 250).await;
                let (h, _) = header_mode(&c1, KEY);
                let at = RemoteAddr::new(CN1, c1.layout.header(h) + HDR_MODE);
                let seen = nic.cas(at, foreign | SWITCHING, foreign).await.unwrap();
                assert_eq!(seen, foreign | SWITCHING, "the flag was still raised");
            }
            sleep_until(&nic, 300).await;
            let w = c0.worker(0);
            let app = c0.layout.app_buffer(0);
            c0.nic.local().store(app, object_tag(KEY));
            c0.nic.local().store(app + 8, 777);
            assert_eq!(c0.write(&w, KEY).await.unwrap(), Event::WriteBypass);
        });
    }
    {
        let (c1, seen) = (c1.clone(), seen.clone());
        let layout = layout.clone();
        sim.spawn_main(CN1, async move {
            let nic = c1.nic.clone();
            sleep_until(&nic, 100).await;
            let (event, value) = read(&c1, KEY).await;
            assert_eq!((event, value), (Event::ReadBypass, 100 + KEY), "CN0's mode is copied");
            sleep_until(&nic, 200).await;
            // What the race leaves: the old key's word in the header indexed under KEY.
            let (h, mode) = header_mode(&c1, KEY);
            assert_eq!(mode >> 32, tag(KEY));
            assert_eq!(mode & MODE_ON, 0);
            let planted = if flagged { foreign | SWITCHING } else { foreign };
            nic.local().store(c1.layout.header(h) + HDR_MODE, planted);
            seen.lock().unwrap().planted_check = Some(check(&regions, &layout));
            let (event, value) = read(&c1, KEY).await;
            seen.lock().unwrap().repaired_read = Some((event, value, nic.now().0));
            sleep_until(&nic, 400).await;
            let (event, value) = read(&c1, KEY).await;
            seen.lock().unwrap().later_read = Some((event, value));
        });
    }
    let outcome = sim.run();
    assert_eq!(outcome.stop, StopReason::Finished);
    let mut seen = std::mem::take(&mut *seen.lock().unwrap());
    seen.repair_marks = outcome.marks.get("difache mode repair").copied();
    (seen, c0, c1, sim)
}

fn assert_repaired(seen: &Seen, c0: &Cache<SimNic>, c1: &Cache<SimNic>, sim: &Sim) {
    // The planted word breaks the simulator's invariants (which hardware can break this way) …
    let planted = seen.planted_check.clone().unwrap();
    assert!(planted.is_err_and(|e| e.starts_with("header tag")), "planted word not seen");
    // CN0's write with caching off does not invalidate CN1: had CN1 kept the old key's word
    // (caching on) it would have cached 100 + KEY and now read it again (a stale hit; without
    // the repair this fails with `Some((ReadHit, 101))`).
    assert_eq!(seen.later_read, Some((Event::ReadBypass, 777)), "no stale read");
    // The access after the plant repaired it: caching off as on CN0, the memory node's value.
    let (event, value, _) = seen.repaired_read.unwrap();
    assert_eq!((event, value), (Event::ReadBypass, 100 + KEY));
    let (h1, m1) = header_mode(c1, KEY);
    let (_, m0) = header_mode(c0, KEY);
    assert_eq!(m1 >> 32, tag(KEY), "the header carries its own key's tag again");
    assert_eq!(m1 & (MODE_ON | SWITCHING), 0);
    assert_eq!(m1 & MODE_ON, m0 & MODE_ON, "the modes agree");
    assert_eq!(c1.nic.local().load(c1.layout.header(h1) + HDR_VALID), 0);
    assert_eq!(c1.stats.lock().unwrap().mode_repairs, 1);
    assert_eq!(seen.repair_marks, Some(1));
    assert_eq!(c0.stats.lock().unwrap().mode_repairs, 0);
    let regions: Vec<_> = (0..3).map(|i| sim.region(NodeId(i))).collect();
    check(&regions, &c1.layout).unwrap();
}

#[test]
fn an_access_repairs_a_mode_word_left_by_another_keys_switcher() {
    // Goal: a header indexed under KEY whose MODE word carries another key's tag (caching on,
    // while KEY is off on CN0) is given KEY's mode again by the next access (one repair), and
    // a later read after an off-mode write on CN0 returns the new value, not a stale copy.
    let (seen, c0, c1, sim) = run(false);
    assert_repaired(&seen, &c0, &c1, &sim);
}

#[test]
fn an_access_waits_for_another_keys_switch_flag_then_repairs() {
    // Goal: with the other key's switching flag raised in the word, the access waits until
    // that key's switcher clears it (CN0's CAS at 250 µs), then repairs as above.
    let (seen, c0, c1, sim) = run(true);
    assert_repaired(&seen, &c0, &c1, &sim);
    let (_, _, done_ns) = seen.repaired_read.unwrap();
    assert!(done_ns > 250_000, "the read waited for the flag: done at {done_ns} ns");
}

#[test]
fn a_repair_drops_the_copy_that_missed_the_keys_switches() {
    // Goal: the repair invalidates the header's copy. While CN1's header carried another key's
    // word, switches of KEY skipped it (`remote_headers` checks the tag), so a round of "switch
    // off, off-mode write, switch on" on the other CNs leaves CN1's copy valid and stale; the
    // memory node's value is changed directly here to stand for that round. Caching is on for
    // KEY (threshold 0 and interval 1: the first access switches it on), so the repair
    // rediscovers "on" and the read must miss and fetch the new value, not hit the old copy.
    let (layout, mut config) = layout_and_config();
    config.threshold_default = 0.0;
    config.interval_first = 1;
    let mut sim = sim(&layout);
    let c0 = Cache::new(sim.nic(CN0), layout.clone(), config.clone(), None);
    let c1 = Cache::new(sim.nic(CN1), layout.clone(), config, None);
    let mn = sim.region(NodeId(0));
    let got = Arc::new(Mutex::new(Vec::new()));
    {
        let c0 = c0.clone();
        sim.spawn_main(CN0, async move {
            assert_eq!(read(&c0, KEY).await, (Event::ReadMiss, 100 + KEY), "switched on, then missed");
            assert_ne!(header_mode(&c0, KEY).1 & MODE_ON, 0);
        });
    }
    {
        let (c1, got) = (c1.clone(), got.clone());
        sim.spawn_main(CN1, async move {
            let nic = c1.nic.clone();
            sleep_until(&nic, 100).await;
            let r = read(&c1, KEY).await;
            got.lock().unwrap().push(r);
            let (h, mode) = header_mode(&c1, KEY);
            assert_ne!(mode & MODE_ON, 0, "CN0's mode (on) is copied");
            assert_ne!(nic.local().load(c1.layout.header(h) + HDR_VALID), 0, "a valid copy");
            let r = read(&c1, KEY).await;
            got.lock().unwrap().push(r);
            sleep_until(&nic, 200).await;
            nic.local().store(c1.layout.header(h) + HDR_MODE, mode_word(false, 255, 0x8000, OLD_KEY));
            mn.store(c1.layout.object(KEY).offset_bytes + 8, 555);
            let r = read(&c1, KEY).await;
            got.lock().unwrap().push(r);
            let r = read(&c1, KEY).await;
            got.lock().unwrap().push(r);
        });
    }
    assert_eq!(sim.run().stop, StopReason::Finished);
    let got = got.lock().unwrap().clone();
    let hit_old = (Event::ReadHit, 100 + KEY);
    let fresh = [(Event::ReadMiss, 555), (Event::ReadHit, 555)];
    assert_eq!(got, [(Event::ReadMiss, 100 + KEY), hit_old, fresh[0], fresh[1]]);
    let (_, m1) = header_mode(&c1, KEY);
    assert_eq!(m1 >> 32, tag(KEY));
    assert_eq!(m1 & MODE_ON, header_mode(&c0, KEY).1 & MODE_ON, "the modes agree (on)");
    assert_eq!(c1.stats.lock().unwrap().mode_repairs, 1);
}
