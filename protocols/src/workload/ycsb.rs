//! The YCSB core workloads for ordered key-value indexes (Sherman, SMART, DEX), with 8-byte keys
//! and 8-byte values.
//!
//! * **Mixes**: YCSB A (50 % read / 50 % update), B (95/5), C (read only), D (95 % read / 5 %
//!   insert, *latest* distribution), E (95 % scan / 5 % insert, scan length uniform in
//!   `1..=max`), LOAD (100 % insert), and the DEX Table 1 mixes (`insert_intensive` 50 % insert /
//!   50 % read, `scan_intensive` 95 % scans of exactly 100 records / 5 % insert). `custom` takes
//!   explicit proportions (including deletes, which YCSB itself never issues).
//! * **Request distribution**: uniform, or zipfian θ (0.99 by default) with YCSB's *scrambled*
//!   key choice: a zipf rank `r` becomes key index `fnv64(r) mod keyspace` (YCSB's
//!   `ScrambledZipfianGenerator`, `Utils.fnvhash64`), so hot keys are spread over the key range
//!   instead of clustered at its start. Ranks are drawn over the keyspace by default (as the
//!   Sherman and DEX benchmarks do) or over YCSB's fixed 10¹⁰ items (`zipf_items: ycsb`).
//!   `zipf_keys: {"ranks_over": n}` instead draws ranks over `n` items and takes the rank
//!   itself, `mod keyspace`, as the key index (the SELCC authors' `benchmark_btree.cpp` and
//!   their Sherman fork: `key = mehcached_zipf_next(&state)`, no hashing), so with
//!   `key_order: ordered` the hot keys are clustered at the start of the key range, in the
//!   first leaves, and `n` = the paper's keyspace gives those leaves the paper's share.
//! * **Twitter trace stand-ins** (`mix: trace`, `trace: {cluster}`): a cluster's published
//!   read share (get + gets; every other op an update of an existing key) and Zipf α
//!   ([`super::twitter`]), over the keyspace with the scrambled key choice (α = 0: uniform).
//!   Synthetic: no trace file is read. With `spread` > 0 each key reads with its own probability
//!   ([`super::twitter::read_ratio`], DiFache's Observation-1 rule): the key is drawn first.
//! * **Latest** (workload D): rank 0 is the newest inserted key, ranks are plain (unscrambled)
//!   zipf over the keys inserted so far (YCSB's `SkewedLatestGenerator`).
//! * **Keys**: key index `i` names the 8-byte key `name(i)`; with `key_order: hashed` (YCSB's
//!   default `insertorder=hashed`) a bijection of the 63-bit space plus one, so keys are distinct,
//!   spread, and never 0 or `u64::MAX` (the tree's fences); with `ordered`, `i + 1`.
//! * **Bulk load** pre-loads indices `0..bulk_load`; inserts then take fresh indices
//!   `bulk_load + k·T + g` for global thread `g` of `T` ([CHOICE]: YCSB shares one insert
//!   counter; disjoint per-thread sequences need no coordination and stay deterministic).
//! * **Warm-up**: the first `warmup_ops_per_thread` operations of each stream are marked
//!   `warmup` (same mix and distribution); clients run them before measuring.
//!
//! Every draw comes from the thread's seeded `ChaCha8Rng` ([`super::rng_for_thread`]).

use serde::{Deserialize, Serialize};

use super::partition::Partitions;
use super::twitter::{self, ClusterStats};
use crate::common::memo::Memo;
use crate::common::shape::ShapeFields;
use crate::harness::Problem;

/// YCSB's item count for its scrambled zipfian generator (`ScrambledZipfianGenerator.ITEM_COUNT`).
pub const YCSB_ITEM_COUNT: u64 = 10_000_000_000;

/// The operation mix.
/// The most keys a run may bulk-load: the index is built in memory before the run (8 bytes per
/// key in the load list alone, plus the tree), and a keyspace of 10^9 is what the papers run,
/// not what one machine simulates.
pub const MAX_LOADED_KEYS: u64 = 1 << 26;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mix {
    A,
    B,
    C,
    D,
    E,
    Load,
    InsertIntensive,
    ScanIntensive,
    Custom,
    /// A Twitter cluster's stand-in (`workload.trace`).
    Trace,
}

/// Fractions of each operation kind; they sum to 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proportions {
    #[serde(default)]
    pub read: f64,
    #[serde(default)]
    pub update: f64,
    #[serde(default)]
    pub insert: f64,
    #[serde(default)]
    pub scan: f64,
    #[serde(default)]
    pub delete: f64,
}

impl Mix {
    /// The mix's fractions (`custom` takes the given ones).
    pub fn proportions(self, custom: Option<Proportions>) -> Proportions {
        let p = |read, update, insert, scan| Proportions { read, update, insert, scan, delete: 0.0 };
        match self {
            Mix::A => p(0.5, 0.5, 0.0, 0.0),
            Mix::B => p(0.95, 0.05, 0.0, 0.0),
            Mix::C => p(1.0, 0.0, 0.0, 0.0),
            Mix::D => p(0.95, 0.0, 0.05, 0.0),
            Mix::E => p(0.0, 0.0, 0.05, 0.95),
            Mix::Load => p(0.0, 0.0, 1.0, 0.0),
            Mix::InsertIntensive => p(0.5, 0.0, 0.5, 0.0),
            Mix::ScanIntensive => p(0.0, 0.0, 0.05, 0.95),
            Mix::Custom | Mix::Trace => custom.unwrap_or_default(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Distribution {
    Uniform,
    Zipfian,
    Latest,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyOrder {
    #[default]
    Hashed,
    Ordered,
    /// Keys `1..=keyspace` in a fixed pseudo-random order: the bulk load is a random subset of
    /// the keyspace and inserts fill the rest at random places (the Dolphin authors' YCSB
    /// `randint` files: 512 M keys loaded out of 1,024 M, the rest inserted).
    Permuted,
}

/// Over how many ranks the zipfian draws before scrambling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ZipfItems {
    /// The keyspace itself (Sherman's and DEX's benchmarks).
    #[default]
    Keyspace,
    /// YCSB's constant 10¹⁰ items, then `mod keyspace`.
    Ycsb,
}

/// How a zipf rank becomes a key index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ZipfKeys {
    /// `fnv64(rank) mod keyspace` (YCSB's `ScrambledZipfianGenerator`).
    #[default]
    Scrambled,
    /// Ranks drawn over this many items, the rank itself `mod keyspace` (no hashing).
    RanksOver(u64),
}

/// How long a scan is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScanLength {
    /// Exactly n records (DEX: 100).
    Fixed(u32),
    /// Uniform in 1..=n (YCSB E: 100).
    Uniform(u32),
}

/// `workload.trace` (with `mix: trace`): a synthetic stand-in for one Twitter cache cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TwitterTrace {
    /// The cluster number (`clusterN` of twitter/cache-trace).
    pub cluster: u32,
    /// Per-key read-ratio spread in [0, 1] around the cluster's share (0: every key reads with
    /// the share; the published statistics give only the share).
    #[serde(default)]
    pub spread: f64,
    /// A trace file of this cluster in the Twitter CSV format (`super::twitter_trace`) whose
    /// requests replace the synthetic draws; the cluster's statistics still size the run (its
    /// read share as the mix the plans provision for). Node n replays the clients with id ≡ n
    /// (mod nodes), its k-th request going to thread k mod threads, from the start again at the
    /// end of the file; a key hashes onto the keyspace; get and gets look up, every other
    /// operation updates. The whole file is checked before the run; each thread holds only the
    /// requests it will issue.
    #[serde(default)]
    pub file: Option<String>,
}

/// The `workload` section of a YCSB scenario (the generator's fields plus the run shape).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct YcsbWorkload {
    pub mix: Mix,
    /// Only with `mix: custom`.
    #[serde(default)]
    pub proportions: Option<Proportions>,
    /// Default: the mix's (`latest` for D, `zipfian` otherwise).
    #[serde(default)]
    pub distribution: Option<Distribution>,
    #[serde(default = "theta_default")]
    pub zipf_theta: f64,
    #[serde(default)]
    pub zipf_items: ZipfItems,
    #[serde(default)]
    pub zipf_keys: ZipfKeys,
    /// Key indices requests choose from.
    pub keyspace: u64,
    /// Indices `0..bulk_load` exist before the run (default: the whole keyspace, 0 for LOAD).
    #[serde(default)]
    pub bulk_load: Option<u64>,
    #[serde(default)]
    pub key_order: KeyOrder,
    /// Default: `fixed: 100` for `scan_intensive`, `uniform: 100` otherwise.
    #[serde(default)]
    pub scan_length: Option<ScanLength>,
    #[serde(default)]
    pub warmup_ops_per_thread: u64,
    /// A timed measurement window for every client (`workload/window.rs`); then
    /// `warmup_ops_per_thread` must be 0 and `ops_per_thread` is an upper bound.
    #[serde(default)]
    pub window: Option<super::window::Window>,
    #[serde(default)]
    pub threads_per_node: Option<u32>,
    #[serde(default)]
    pub threads_total: Option<u32>,
    #[serde(default)]
    pub ops_per_thread: Option<u64>,
    #[serde(default)]
    pub ops_per_node: Option<u64>,
    #[serde(default)]
    pub cache_frames: Option<u32>,
    #[serde(default)]
    pub cache_ratio: Option<f64>,
    /// Only with `mix: trace`.
    #[serde(default)]
    pub trace: Option<TwitterTrace>,
}

fn theta_default() -> f64 {
    0.99
}

impl YcsbWorkload {
    pub fn shape_fields(&self) -> ShapeFields {
        ShapeFields {
            threads_per_node: self.threads_per_node,
            threads_total: self.threads_total,
            ops_per_thread: self.ops_per_thread,
            ops_per_node: self.ops_per_node,
            cache_frames: self.cache_frames,
            cache_ratio: self.cache_ratio,
        }
    }

    pub fn proportions(&self) -> Proportions {
        match self.trace_stats() {
            Some(s) => {
                Proportions { read: s.read_share, update: 1.0 - s.read_share, ..Proportions::default() }
            }
            None => self.mix.proportions(self.proportions),
        }
    }

    /// The trace's cluster statistics (with `mix: trace` and a known cluster).
    pub fn trace_stats(&self) -> Option<ClusterStats> {
        if self.mix != Mix::Trace {
            return None;
        }
        self.trace.as_ref().and_then(|t| twitter::stats(t.cluster).ok())
    }

    /// The Zipf exponent: the trace cluster's α, else `zipf_theta`.
    pub fn theta(&self) -> f64 {
        self.trace_stats().and_then(|s| s.zipf_alpha).filter(|a| *a > 0.0).unwrap_or(self.zipf_theta)
    }

    pub fn distribution(&self) -> Distribution {
        if let Some(s) = self.trace_stats() {
            return if s.zipf_alpha.is_some_and(|a| a > 0.0) {
                Distribution::Zipfian
            } else {
                Distribution::Uniform
            };
        }
        self.distribution.unwrap_or(if self.mix == Mix::D {
            Distribution::Latest
        } else {
            Distribution::Zipfian
        })
    }

    pub fn bulk_load(&self) -> u64 {
        self.bulk_load.unwrap_or(if self.mix == Mix::Load { 0 } else { self.keyspace })
    }

    pub fn scan_length(&self) -> ScanLength {
        self.scan_length.unwrap_or(if self.mix == Mix::ScanIntensive {
            ScanLength::Fixed(100)
        } else {
            ScanLength::Uniform(100)
        })
    }

    /// The key named by index `i`.
    pub fn key(&self, i: u64) -> u64 {
        key_name(self.key_order, self.keyspace, i)
    }

    /// The bulk-loaded keys in ascending order ([`MAX_LOADED_KEYS`] at most, by `check`).
    pub fn load_keys(&self) -> Vec<u64> {
        // Every plan of a scenario sorts the same million hashed keys otherwise (half of DEX
        // Fig. 6's check); a copy of a remembered sort costs a memcpy.
        static SORTED: Memo<(KeyOrder, u64, u64), Vec<u64>> = Memo::new(4);
        let sorted =
            SORTED.get_or((self.key_order, self.keyspace, self.bulk_load()), |&(order, space, n)| {
                let mut keys: Vec<u64> = (0..n).map(|i| key_name(order, space, i)).collect();
                keys.sort_unstable();
                keys
            });
        sorted.as_ref().clone()
    }

    /// Indices in `0..keyspace` whose keys partition `me` owns (ascending).
    pub fn partition_members(&self, parts: &Partitions, me: usize) -> Vec<u64> {
        (0..self.keyspace).filter(|i| parts.owner(self.key(*i)) == me).collect()
    }

    /// Problems of a partitioned run (P-Sherman, P-SMART) with this workload.
    pub fn check_partitioned(&self, out: &mut Vec<Problem>) {
        if self.zipf_keys != ZipfKeys::Scrambled {
            out.push(Problem::new(
                "workload.zipf_keys",
                "partitioned runs draw scrambled ranks per partition",
            ));
        }
        // Permuted keys past the keyspace continue in order too; a partition whose streams
        // only meet other partitions' fresh keys would redraw forever.
        if self.key_order != KeyOrder::Hashed && self.proportions().insert > 0.0 {
            out.push(Problem::new(
                "workload.key_order",
                "partitioned runs with inserts need hashed keys: ordered (and permuted, once the keyspace is used up) fresh keys all fall in the last partition",
            ));
        }
    }

    /// Problems with the fields, each naming its path under `workload`.
    pub fn check(&self, out: &mut Vec<Problem>) {
        if let Some(w) = &self.window {
            for (path, why) in w.problems(self.warmup_ops_per_thread) {
                out.push(Problem::new(path, why));
            }
        }
        if self.keyspace == 0 || self.keyspace >= 1 << 62 {
            out.push(Problem::new("workload.keyspace", "must be in 1..2^62"));
        }
        if self.bulk_load() > self.keyspace {
            out.push(Problem::new("workload.bulk_load", "exceeds the keyspace"));
        } else if self.bulk_load() > MAX_LOADED_KEYS {
            out.push(Problem::new(
                if self.bulk_load.is_some() { "workload.bulk_load" } else { "workload.keyspace" },
                format!(
                    "{} keys to bulk-load: the simulator builds every loaded key in memory, at most \
                     2^26 = {MAX_LOADED_KEYS}; scale the keyspace down (keeping the cache:data ratio)",
                    self.bulk_load()
                ),
            ));
        }
        if (self.mix == Mix::Custom) != self.proportions.is_some() {
            out.push(Problem::new("workload.proportions", "give proportions exactly when mix is custom"));
        }
        if (self.mix == Mix::Trace) != self.trace.is_some() {
            out.push(Problem::new("workload.trace", "give trace exactly when mix is trace"));
        }
        if let (Mix::Trace, Some(t)) = (self.mix, &self.trace) {
            if let Err(e) = twitter::stats(t.cluster) {
                out.push(Problem::new("workload.trace.cluster", e));
            }
            if !(0.0..=1.0).contains(&t.spread) {
                out.push(Problem::new("workload.trace.spread", "must be in [0, 1]"));
            }
            if self.distribution.is_some() {
                out.push(Problem::new(
                    "workload.distribution",
                    "a trace draws keys by its cluster's Zipf alpha: leave distribution out",
                ));
            }
            if let Some(path) = &t.file {
                if t.spread > 0.0 {
                    out.push(Problem::new(
                        "workload.trace.spread",
                        "a trace file gives each request's operation",
                    ));
                }
                if let Err(e) = super::twitter_trace::check_file(std::path::Path::new(path), u64::MAX) {
                    out.push(Problem::new("workload.trace.file", e));
                }
            }
        }
        let p = self.proportions();
        let parts = [p.read, p.update, p.insert, p.scan, p.delete];
        if parts.iter().any(|x| !(0.0..=1.0).contains(x)) || (parts.iter().sum::<f64>() - 1.0).abs() > 1e-9 {
            out.push(Problem::new("workload.proportions", "fractions must lie in [0, 1] and sum to 1"));
        }
        if !(self.zipf_theta > 0.0 && self.zipf_theta.is_finite()) {
            out.push(Problem::new("workload.zipf_theta", "must be positive and finite"));
        }
        if let ZipfKeys::RanksOver(n) = self.zipf_keys {
            if n == 0 || n > YCSB_ITEM_COUNT {
                out.push(Problem::new(
                    "workload.zipf_keys",
                    format!("ranks_over must be in 1..={YCSB_ITEM_COUNT}"),
                ));
            }
            if self.zipf_items != ZipfItems::Keyspace {
                out.push(Problem::new(
                    "workload.zipf_keys",
                    "ranks_over sets the item count: leave zipf_items out",
                ));
            }
        }
        match self.scan_length() {
            ScanLength::Fixed(0) | ScanLength::Uniform(0) => {
                out.push(Problem::new("workload.scan_length", "must be at least 1"))
            }
            _ => {}
        }
        if p.read + p.update + p.scan + p.delete > 0.0 && self.bulk_load() == 0 && p.insert == 0.0 {
            out.push(Problem::new(
                "workload.bulk_load",
                "nothing loaded and nothing inserted: every request misses",
            ));
        }
    }
}

mod stream;
pub use stream::{fnv_hash64, key_name, OpKind, YcsbOp, YcsbStream};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::rng_for_thread;

    fn workload(mix: Mix) -> YcsbWorkload {
        YcsbWorkload {
            mix,
            proportions: None,
            distribution: None,
            zipf_theta: 0.99,
            zipf_items: ZipfItems::Keyspace,
            zipf_keys: ZipfKeys::Scrambled,
            keyspace: 10_000,
            bulk_load: None,
            key_order: KeyOrder::Hashed,
            scan_length: None,
            warmup_ops_per_thread: 0,
            window: None,
            threads_per_node: Some(2),
            threads_total: None,
            ops_per_thread: Some(1),
            ops_per_node: None,
            cache_frames: None,
            cache_ratio: None,
            trace: None,
        }
    }

    fn ops(w: &YcsbWorkload, n: u64, seed: u64) -> Vec<YcsbOp> {
        YcsbStream::new(w, 0, 2, 1, 2, n, rng_for_thread(seed, 0, 1)).collect()
    }

    #[test]
    fn fnv_matches_ycsb() {
        // YCSB's Utils.fnvhash64 of 0: eight zero octets leave the xor a no-op, so the hash is
        // the offset basis times the prime eight times; and 1 and 2 differ in the first octet.
        let mut h: u64 = 0xcbf29ce484222325;
        for _ in 0..8 {
            h = h.wrapping_mul(0x100000001b3);
        }
        assert_eq!(fnv_hash64(0), (h as i64).unsigned_abs());
        assert_ne!(fnv_hash64(1), fnv_hash64(2));
    }

    #[test]
    fn permuted_keys_are_the_keyspace_in_another_order() {
        for n in [1u64, 2, 3, 5, 64, 1000, 4097] {
            let keys: std::collections::BTreeSet<u64> =
                (0..n).map(|i| key_name(KeyOrder::Permuted, n, i)).collect();
            assert_eq!(keys, (1..=n).collect(), "n = {n}");
        }
        // A bulk load of half the keyspace is spread over all of it (not its first half)...
        let n = 100_000;
        let low = (0..n / 2).filter(|&i| key_name(KeyOrder::Permuted, n, i) <= n / 2).count();
        assert!((20_000..30_000).contains(&low), "{low} of the loaded half in the low half");
        // ... and indices past the keyspace continue above it, distinct.
        assert_eq!(key_name(KeyOrder::Permuted, n, n), n + 1);
    }

    #[test]
    fn hashed_keys_are_distinct_and_inside_the_fences() {
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..100_000 {
            let k = key_name(KeyOrder::Hashed, 0, i);
            assert!(k != 0 && k != u64::MAX);
            assert!(seen.insert(k), "duplicate key for index {i}");
        }
        assert_eq!(key_name(KeyOrder::Ordered, 0, 0), 1);
    }

    #[test]
    fn mixes_hold_their_proportions() {
        // 20k draws: each fraction within 0.015 (> 5 standard errors at p = 0.5).
        for mix in [Mix::A, Mix::B, Mix::C, Mix::E, Mix::InsertIntensive] {
            let w = workload(mix);
            let all = ops(&w, 20_000, 3);
            let p = w.proportions();
            let frac =
                |f: &dyn Fn(&OpKind) -> bool| all.iter().filter(|o| f(&o.kind)).count() as f64 / 20_000.0;
            assert!((frac(&|k| *k == OpKind::Read) - p.read).abs() < 0.015, "{mix:?} reads");
            assert!((frac(&|k| *k == OpKind::Update) - p.update).abs() < 0.015, "{mix:?} updates");
            assert!((frac(&|k| *k == OpKind::Insert) - p.insert).abs() < 0.015, "{mix:?} inserts");
            assert!((frac(&|k| matches!(k, OpKind::Scan { .. })) - p.scan).abs() < 0.015, "{mix:?} scans");
        }
    }

    #[test]
    fn scrambled_zipf_is_skewed_but_spread() {
        // θ = 0.99 over 10k keys puts ~10 % of requests on rank 1; scrambling moves the hot key
        // away from index 0, and the hot keys are not adjacent in key order.
        let w = workload(Mix::C);
        let all = ops(&w, 50_000, 11);
        let mut counts = std::collections::BTreeMap::new();
        for o in &all {
            *counts.entry(o.key).or_insert(0u64) += 1;
        }
        let mut by_count: Vec<(u64, u64)> = counts.iter().map(|(k, c)| (*c, *k)).collect();
        by_count.sort_unstable_by(|a, b| b.cmp(a));
        let top = by_count[0].0 as f64 / 50_000.0;
        assert!((0.08..0.13).contains(&top), "hottest key share {top}");
        let hot_index = fnv_hash64(0) % 10_000;
        assert_eq!(by_count[0].1, key_name(KeyOrder::Hashed, 0, hot_index));
        let uniform = YcsbWorkload { distribution: Some(Distribution::Uniform), ..workload(Mix::C) };
        let mut ucounts = std::collections::BTreeMap::new();
        for o in ops(&uniform, 50_000, 11) {
            *ucounts.entry(o.key).or_insert(0u64) += 1;
        }
        assert!(*ucounts.values().max().unwrap() < 30, "uniform has no hot key");
    }

    #[test]
    fn ranks_over_keeps_hot_keys_at_the_start() {
        // Ranks over 10^6 items folded onto 10k ordered keys: key 1 (rank 0) is the hottest,
        // the first 100 keys take the head's share (H(100)/H(10^6) ≈ 0.36 at θ = 0.99), and the
        // tail lands everywhere.
        let w = YcsbWorkload {
            zipf_keys: ZipfKeys::RanksOver(1_000_000),
            key_order: KeyOrder::Ordered,
            ..workload(Mix::C)
        };
        let all = ops(&w, 50_000, 5);
        let head = all.iter().filter(|o| o.key <= 100).count() as f64 / 50_000.0;
        assert!((0.3..0.45).contains(&head), "head share {head}");
        let first = all.iter().filter(|o| o.key == 1).count();
        assert!(all.iter().all(|o| (1..=10_000).contains(&o.key)));
        assert!(first > all.iter().filter(|o| o.key == 2).count(), "rank 0 is key 1");
        assert!(all.iter().filter(|o| o.key > 5_000).count() > 5_000, "the tail is spread");
        let mut bad = Vec::new();
        YcsbWorkload { zipf_keys: ZipfKeys::RanksOver(0), ..workload(Mix::C) }.check(&mut bad);
        assert_eq!(bad.len(), 1);
    }

    #[test]
    fn inserts_are_fresh_and_disjoint_across_threads() {
        let w = YcsbWorkload { keyspace: 1000, bulk_load: Some(1000), ..workload(Mix::Load) };
        let loaded: std::collections::BTreeSet<u64> = w.load_keys().into_iter().collect();
        let mut seen = std::collections::BTreeSet::new();
        for node in 0..2u16 {
            for t in 0..2u32 {
                for o in YcsbStream::new(&w, node, 2, t, 2, 500, rng_for_thread(1, node, t)) {
                    assert_eq!(o.kind, OpKind::Insert);
                    assert!(!loaded.contains(&o.key) && seen.insert(o.key));
                }
            }
        }
        assert_eq!(seen.len(), 2000);
    }

    #[test]
    fn latest_prefers_recent_inserts() {
        let w = YcsbWorkload { key_order: KeyOrder::Ordered, ..workload(Mix::D) };
        let all = ops(&w, 20_000, 5);
        let reads: Vec<u64> = all.iter().filter(|o| o.kind == OpKind::Read).map(|o| o.key).collect();
        // Ordered keys: key = index + 1; the newest quarter of the loaded keys gets most reads.
        let recent = reads.iter().filter(|k| **k > 7_500).count() as f64 / reads.len() as f64;
        assert!(recent > 0.5, "{recent}");
    }

    #[test]
    fn partitioned_inserts_need_hashed_keys() {
        // Fresh ordered or permuted keys past the keyspace all belong to the last partition,
        // so the others' insert draws would never end.
        let problems = |order, mix| {
            let mut out = Vec::new();
            YcsbWorkload { key_order: order, ..workload(mix) }.check_partitioned(&mut out);
            out.len()
        };
        assert_eq!(problems(KeyOrder::Hashed, Mix::InsertIntensive), 0);
        assert_eq!(problems(KeyOrder::Ordered, Mix::InsertIntensive), 1);
        assert_eq!(problems(KeyOrder::Permuted, Mix::ScanIntensive), 1);
        assert_eq!(problems(KeyOrder::Permuted, Mix::C), 0);
    }

    #[test]
    fn streams_are_deterministic_and_warmup_comes_first() {
        let w = YcsbWorkload { warmup_ops_per_thread: 10, ..workload(Mix::A) };
        let a = ops(&w, 100, 9);
        assert_eq!(a, ops(&w, 100, 9));
        assert_ne!(a, ops(&w, 100, 10));
        assert_eq!(a.len(), 110);
        assert!(a[..10].iter().all(|o| o.warmup) && a[10..].iter().all(|o| !o.warmup));
        let e = ops(&workload(Mix::E), 2000, 2);
        assert!(e.iter().all(|o| match o.kind {
            OpKind::Scan { len } => (1..=100).contains(&len),
            _ => true,
        }));
    }

    #[test]
    fn a_trace_file_is_replayed_by_share() {
        use crate::workload::twitter_trace::key_hash;
        let dir = std::env::temp_dir().join(format!("dmsim-ycsb-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.csv");
        // Clients 0..4: node 0 of 2 replays clients 0 and 2 (lines 0, 2, 4, ...); its thread 1 of 2
        // takes every second of those (lines 2, 6, 10, ...); line i reads when i % 3 != 0.
        let mut text = String::new();
        for i in 0..12u64 {
            let op = if i % 3 == 0 { "set" } else { "get" };
            text += &format!("{i},key{i},4,8,{},{op},0\n", i % 4);
        }
        std::fs::write(&path, text).unwrap();
        let w = YcsbWorkload {
            mix: Mix::Trace,
            trace: Some(TwitterTrace { cluster: 8, spread: 0.0, file: Some(path.display().to_string()) }),
            ..workload(Mix::C)
        };
        let mut bad = Vec::new();
        w.check(&mut bad);
        assert!(bad.is_empty(), "{bad:?}");
        let got = ops(&w, 5, 1);
        // Lines 2, 6, 10, then the file again: 2, 6.
        let want: Vec<(OpKind, u64)> = [2u64, 6, 10, 2, 6]
            .iter()
            .map(|&i| {
                let kind = if i % 3 == 0 { OpKind::Update } else { OpKind::Read };
                (kind, key_name(w.key_order, w.keyspace, key_hash(format!("key{i}").as_bytes()) % w.keyspace))
            })
            .collect();
        assert_eq!(got.iter().map(|o| (o.kind, o.key)).collect::<Vec<_>>(), want);
        let missing = YcsbWorkload {
            trace: Some(TwitterTrace {
                cluster: 8,
                spread: 0.0,
                file: Some(dir.join("none.csv").display().to_string()),
            }),
            ..w.clone()
        };
        let mut bad = Vec::new();
        missing.check(&mut bad);
        assert!(bad.iter().any(|p| p.to_string().contains("workload.trace.file")), "{bad:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn trace_mixes_follow_their_cluster() {
        // Cluster 8: get .50 / set .50, alpha 1.7366 (the hottest key takes ~half the requests);
        // cluster 9: get .99, alpha 1.6796.
        for (cluster, share) in [(8, 0.50), (9, 0.99)] {
            let w = YcsbWorkload {
                mix: Mix::Trace,
                trace: Some(TwitterTrace { cluster, spread: 0.0, file: None }),
                ..workload(Mix::C)
            };
            let mut bad = Vec::new();
            w.check(&mut bad);
            assert!(bad.is_empty(), "{bad:?}");
            let all = ops(&w, 20_000, 4);
            let reads = all.iter().filter(|o| o.kind == OpKind::Read).count() as f64 / 20_000.0;
            assert!((reads - share).abs() < 0.015, "cluster {cluster}: reads {reads}");
            assert!(all.iter().all(|o| matches!(o.kind, OpKind::Read | OpKind::Update)));
            let hot = key_name(KeyOrder::Hashed, 0, fnv_hash64(0) % 10_000);
            let top = all.iter().filter(|o| o.key == hot).count() as f64 / 20_000.0;
            assert!(top > 0.35, "cluster {cluster}: hottest key share {top}");
            // Per-key ratios keep the mean share but differ per key.
            let spread =
                YcsbWorkload { trace: Some(TwitterTrace { cluster, spread: 1.0, file: None }), ..w.clone() };
            let all = ops(&spread, 20_000, 4);
            assert!(all.iter().all(|o| matches!(o.kind, OpKind::Read | OpKind::Update)));
        }
        let mut bad = Vec::new();
        YcsbWorkload {
            mix: Mix::Trace,
            trace: Some(TwitterTrace { cluster: 5, spread: 0.0, file: None }),
            ..workload(Mix::C)
        }
        .check(&mut bad);
        assert!(bad.iter().any(|p| p.path == "workload.trace.cluster"), "{bad:?}");
        let mut bad = Vec::new();
        YcsbWorkload { mix: Mix::Trace, ..workload(Mix::C) }.check(&mut bad);
        assert!(bad.iter().any(|p| p.path == "workload.trace"));
    }

    #[test]
    fn bad_fields_are_named() {
        let mut out = Vec::new();
        YcsbWorkload { keyspace: 0, ..workload(Mix::A) }.check(&mut out);
        assert!(out.iter().any(|p| p.path == "workload.keyspace"));
        let mut out = Vec::new();
        let bad = YcsbWorkload {
            mix: Mix::Custom,
            proportions: Some(Proportions { read: 0.5, ..Proportions::default() }),
            ..workload(Mix::A)
        };
        bad.check(&mut out);
        assert!(out.iter().any(|p| p.path == "workload.proportions"));
    }
}
