//! SELCC eviction over the simulated fabric (§5.2): dirty victims are flushed before their
//! latch is released, by the background batched evictor or synchronously, and dynamic dirty
//! boundaries shrink the flush to the written range.
//!
//! Method: node A writes one word in each of 60 GCLs through a 24-frame cache (so most lines
//! are evicted dirty), drains; node B then reads every GCL, and the oracle checks each value.

mod selcc_common;

use dmsim_protocols::nic::{Nanos, Nic};
use dmsim_protocols::selcc::bench::cluster_stats;
use dmsim_protocols::selcc::stats::Stats;
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
