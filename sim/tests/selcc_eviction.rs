//! SELCC eviction over the simulated fabric (§5.2): dirty victims are flushed before their
//! latch is released, by the background batched evictor or synchronously, and dynamic dirty
//! boundaries shrink the flush to the written range.
//!
//! Method: node A writes one word in each of 60 GCLs through a 24-frame cache (so most lines
//! are evicted dirty), drains; node B then reads every GCL, and the oracle checks each value.
//! Plus the synchronous-eviction race of issue #10 item 7 (two threads evict at once and one
//! finds its line loaded by the other), with the op metrics it must produce.

mod selcc_common;

use std::sync::{Arc, Mutex};

use dmsim_protocols::nic::{Nanos, Nic};
use dmsim_protocols::selcc::bench::cluster_stats;
use dmsim_protocols::selcc::stats::{OpCase, OpTrace, Stats};
use dmsim_protocols::selcc::Config;
use dmsim_sim::choice::Strategy;
use selcc_common::*;

const GCLS: u64 = 60;

fn write_then_read(config: Config) -> Stats {
    let mut h = harness(2, 2, &config, GCLS, Strategy::Default);
    let a = h.node(0);
    h.sim.spawn_main(h.compute[0], async move {
        let mut w = a.worker(0);
        for i in 0..GCLS {
            let g = a.layout.gcl(i);
            let mut handle = a.xlock(&mut w, g).await.unwrap();
            a.write(&mut handle, 8 * (i as u32 % 4), &[1000 + i]);
            a.xunlock(&mut w, handle).await.unwrap();
        }
        a.drain(&w.nic).await.unwrap();
    });
    let b = h.node(1);
    h.sim.spawn_main(h.compute[1], async move {
        let mut w = b.worker(0);
        w.nic.sleep(Nanos::from_ms(2)).await;
        for i in 0..GCLS {
            let handle = b.slock(&mut w, b.layout.gcl(i)).await.unwrap();
            let mut out = [0u64; 4];
            b.read(&handle, 0, &mut out); // the oracle checks every word
            assert_eq!(out[i as usize % 4], 1000 + i);
            b.sunlock(&mut w, handle).await.unwrap();
        }
        b.drain(&w.nic).await.unwrap();
    });
    assert_finished(&h.run());
    h.check_quiescent(GCLS).unwrap();
    assert!(h.oracle.reads_checked() >= 4 * GCLS);
    cluster_stats(&h.nodes)
}

fn small(batched: bool, dirty_bounds: bool) -> Config {
    Config {
        gcl_size_bytes: 256,
        cache_frames: 24,
        threads_per_node: 2,
        batched_eviction: batched,
        dirty_bounds,
        ..Config::selcc()
    }
}

#[test]
fn batched_eviction_flushes_dirty_lines_before_release() {
    let stats = write_then_read(small(true, true));
    assert!(stats.evictions_dirty >= GCLS - 24, "{stats:?}");
}

#[test]
fn synchronous_eviction_flushes_dirty_lines_before_release() {
    let stats = write_then_read(small(false, true));
    assert!(stats.evictions_dirty >= GCLS - 24, "{stats:?}");
}

#[test]
fn dirty_bounds_flush_only_the_written_word() {
    // Each line had one 8-byte word written: with dynamic bounds a flush is 8 bytes, without it
    // the whole 256-byte GCL.
    let on = write_then_read(small(true, true));
    assert_eq!(on.flushed_bytes, 8 * on.evictions_dirty);
    let off = write_then_read(small(true, false));
    assert_eq!(off.flushed_bytes, 256 * off.evictions_dirty);
}

#[test]
fn a_thread_that_evicted_and_then_finds_its_line_loaded_has_a_hit() {
    // Goal (issue #10 item 7, "a hit does no RDMA"): with batched eviction off, two threads of
    // one node miss on the same line with the cache full. Each evicts a victim itself (one FAA);
    // the first back assigns the line and fetches it, the second then finds it loaded: a hit.
    // Its eviction round trip is on its critical path but is no ownership round trip, so it is
    // counted in `evict_round_trips`, not `round_trips`.
    let config = Config {
        gcl_size_bytes: 64,
        cache_frames: 6,
        threads_per_node: 2,
        free_frames_min: 1,
        batched_eviction: false,
        ..Config::selcc()
    };
    assert!(config.validate().is_empty(), "{:?}", config.validate());
    let mut h = harness(1, 1, &config, 8, Strategy::Default);
    let traces: Arc<Mutex<Vec<OpTrace>>> = Arc::default();
    let meet = Nanos::from_ms(1);
    for thread in 0..2u32 {
        let node = h.node(0);
        let traces = traces.clone();
        h.sim.spawn_main(h.compute[0], async move {
            let mut w = node.worker(thread);
            if thread == 0 {
                // Fill all six frames with Shared lines 0..6.
                for i in 0..6 {
                    let handle = node.slock(&mut w, node.layout.gcl(i)).await.unwrap();
                    node.sunlock(&mut w, handle).await.unwrap();
                }
            }
            let now = w.nic.now();
            assert!(now < meet, "filling took until {now:?}");
            w.nic.sleep(meet.saturating_sub(now)).await;
            let handle = node.slock(&mut w, node.layout.gcl(7)).await.unwrap();
            node.sunlock(&mut w, handle).await.unwrap();
            traces.lock().unwrap().push(*w.last_op());
            if thread == 0 {
                node.drain(&w.nic).await.unwrap();
            }
        });
    }
    assert_finished(&h.run());
    h.check_quiescent(8).unwrap();
    let mut traces = traces.lock().unwrap().clone();
    traces.sort_by_key(|t| t.case);
    let seen: Vec<_> = traces.iter().map(|t| (t.case, t.round_trips, t.evict_round_trips)).collect();
    assert_eq!(seen, vec![(OpCase::Hit, 0, 1), (OpCase::RemoteFetch, 1, 1)], "{traces:?}");
    let stats = cluster_stats(&h.nodes);
    assert_eq!((stats.ops, stats.hits, stats.evict_round_trips), (8, 1, 2), "{stats:?}");
    assert_eq!(stats.by_case[&OpCase::Hit].round_trips, 0, "{stats:?}");
}
