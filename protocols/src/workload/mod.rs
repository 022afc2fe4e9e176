//! Workload generators. Randomness always comes from a seeded generator the runner passes in
//! (one `ChaCha8Rng` per thread, see [`rng_for_thread`]); nothing here reads a clock or global RNG.
//!
//! * [`micro`] — the GAM-style micro-benchmark of SELCC §7.1 (sharing ratio, read ratio,
//!   uniform/zipf skew, repeat-previous locality).
//! * [`open_loop`] — Poisson open-loop schedules with coordinated-omission correction
//!   (ScaleStore Fig. 13).
//! * [`record_array`] — the YCSB point workload over a pre-allocated record array (ScaleStore's
//!   NAM-DB and FaRM baselines).
//! * [`partition`] — range partitioning of keys across compute nodes (DEX's P-* variants).
//! * [`scan_check`] — the history check that no scan skipped a key live throughout it.
//! * [`scenario`] — the micro-benchmark's `workload` section as scenarios write it.
//! * [`twitter`] — the Twitter cache clusters' published statistics (synthetic trace stand-ins).
//! * [`twitter_trace`] — the Twitter cache-trace CSV format, parsed and replayed as a stream.
//! * [`window`] — the timed measurement window every YCSB client loop can run under.
//! * [`zipf`] — an exact seeded Zipf sampler for any θ > 0.
//! * [`ycsb`] — the YCSB core workloads (A–E, LOAD, DEX's insert/scan-intensive mixes) for
//!   ordered indexes, with the scrambled-zipfian and latest key choices, and its scenario section.

pub mod micro;
pub mod open_loop;
pub mod partition;
pub mod record_array;
pub mod scan_check;
pub mod scenario;
pub mod twitter;
pub mod twitter_trace;
pub mod window;
pub mod ycsb;
pub mod zipf;

use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The generator for thread `thread` of node `node` in a run seeded with `seed`: independent
/// streams per thread, identical on every machine.
pub fn rng_for_thread(seed: u64, node: u16, thread: u32) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Stream ids keep the per-thread sequences disjoint without re-hashing the seed.
    rng.set_stream((node as u64) << 32 | thread as u64);
    rng
}

/// splitmix64's finalizer: a fixed bijective hash of a word (DiFache's bucket homes, the
/// per-object read ratios of [`twitter`]).
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
