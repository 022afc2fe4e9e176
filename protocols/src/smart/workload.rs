//! The workloads SMART's scenarios run, behind one [`IndexOp`] stream per thread:
//!
//! * **YCSB** (`workload.keyspace` present): the shared generator of `workload/ycsb.rs`
//!   (A–E, LOAD, DEX's insert/scan-intensive mixes, uniform / scrambled Zipfian / latest, bulk
//!   load, warm-up) — the paper figures' workload.
//! * **Op mix** ([`IndexWorkload`]): explicit fractions of lookups, updates, inserts, deletes and
//!   scans over a bulk-loaded key set in three key layouts, and `touch_inserted` so reads meet
//!   fresh keys — the fuzz scenarios' workload, shaped to exercise splits and growth.

use std::sync::Arc;

use rand_chacha::rand_core::Rng;
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

use super::stats::OpKind;
use crate::common::memo::Memo;
use crate::common::shape::ShapeFields;
use crate::harness::{parse_typed, Problem};
use crate::workload::partition::Partitions;
use crate::workload::ycsb::{OpKind as YcsbKind, YcsbStream, YcsbWorkload};
use crate::workload::zipf::{unit_f64, Zipf};

/// `workload` of a SMART scenario.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexWorkload {
    /// Keys bulk-loaded before the run (scaled down from the papers' 60–200 M).
    pub key_count: u64,
    /// `hashed` (8-byte keys spread over the whole space, as YCSB's hashed keys), `dense`
    /// (1..=key_count, SMART's integer keys) or `clustered` (groups of 8 keys under one long
    /// shared prefix; inserted keys leave their group's prefix, so inserts split headers).
    #[serde(default)]
    pub key_layout: KeyLayout,
    /// Fractions of lookups, updates, inserts, deletes and scans (summing to 1).
    #[serde(default)]
    pub mix: Mix,
    /// 0: uniform; else Zipf θ over the loaded keys (YCSB uses 0.99), scrambled.
    #[serde(default)]
    pub zipf_theta: f64,
    /// Lookups, updates and deletes also draw keys that inserts are to add (not yet inserted
    /// ones read as absent, and an update of one inserts it), so reads meet fresh keys.
    #[serde(default)]
    pub touch_inserted: bool,
    #[serde(default = "hundred")]
    pub scan_length: u32,
    /// Cache size as a fraction of the data (keys × 16 B), as DEX states it (256 MB of 3.2 GB);
    /// `protocol_options.cache_bytes` when absent.
    #[serde(default)]
    pub cache_ratio: Option<f64>,
    #[serde(default)]
    pub threads_per_node: Option<u32>,
    #[serde(default)]
    pub threads_total: Option<u32>,
    #[serde(default)]
    pub ops_per_thread: Option<u64>,
    #[serde(default)]
    pub ops_per_node: Option<u64>,
}

fn hundred() -> u32 {
    100
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyLayout {
    #[default]
    Hashed,
    Dense,
    Clustered,
}

#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Mix {
    pub lookup: f64,
    pub update: f64,
    pub insert: f64,
    pub delete: f64,
    pub scan: f64,
}

impl Default for Mix {
    fn default() -> Self {
        Mix { lookup: 1.0, update: 0.0, insert: 0.0, delete: 0.0, scan: 0.0 }
    }
}

impl Mix {
    fn parts(&self) -> [(OpKind, f64); 5] {
        [
            (OpKind::Lookup, self.lookup),
            (OpKind::Update, self.update),
            (OpKind::Insert, self.insert),
            (OpKind::Delete, self.delete),
            (OpKind::Scan, self.scan),
        ]
    }
}

impl IndexWorkload {
    pub fn shape_fields(&self) -> ShapeFields {
        ShapeFields {
            threads_per_node: self.threads_per_node,
            threads_total: self.threads_total,
            ops_per_thread: self.ops_per_thread,
            ops_per_node: self.ops_per_node,
            cache_frames: None,
            cache_ratio: None,
        }
    }

    pub fn check(&self, out: &mut Vec<Problem>) {
        let parts = self.mix.parts();
        if parts.iter().any(|(_, f)| !(0.0..=1.0).contains(f))
            || (parts.iter().map(|p| p.1).sum::<f64>() - 1.0).abs() > 1e-9
        {
            out.push(Problem::new("workload.mix", "fractions must lie in [0, 1] and sum to 1"));
        }
        if self.key_count == 0 {
            out.push(Problem::new("workload.key_count", "must be at least 1"));
        }
        if self.key_count > 1 << 32 {
            out.push(Problem::new("workload.key_count", "at most 2^32 keys"));
        }
        if !(self.zipf_theta >= 0.0 && self.zipf_theta.is_finite()) {
            out.push(Problem::new("workload.zipf_theta", "must be finite and ≥ 0"));
        }
        if self.scan_length == 0 && self.mix.scan > 0.0 {
            out.push(Problem::new("workload.scan_length", "must be at least 1 when scans run"));
        }
        if let Some(r) = self.cache_ratio {
            if !(0.0..=1.0).contains(&r) {
                out.push(Problem::new("workload.cache_ratio", "must lie in [0, 1]"));
            }
        }
    }

    /// The bytes of data `cache_ratio` refers to.
    pub fn data_bytes(&self) -> u64 {
        self.key_count * 16
    }
}

/// A bijective 64-bit mix (splitmix64's finalizer): distinct ordinals get distinct keys.
pub fn mix64(mut x: u64) -> u64 {
    x = (x ^ x >> 30).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ x >> 27).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ x >> 31
}

/// The key of ordinal `i` (0-based) under `layout`, with `loaded` keys bulk-loaded.
pub fn key_of(layout: KeyLayout, loaded: u64, i: u64) -> u64 {
    match layout {
        KeyLayout::Dense => i + 1,
        KeyLayout::Hashed => mix64(i + 1),
        KeyLayout::Clustered => {
            // Bytes: 0x01, 0, 0, 0, 0, group, sub, member. Loaded keys have sub 0; the n-th
            // inserted key goes to group n mod groups with a sub byte ≥ 1.
            let groups = loaded.div_ceil(8).clamp(1, 256);
            let (group, sub, member) = if i < loaded {
                (i / 8 % 256, 0, i % 8 + (i / 2048) * 8)
            } else {
                let n = i - loaded;
                (n % groups, 1 + (n / groups) % 255, n / (groups * 255))
            };
            1 << 56 | group << 16 | sub << 8 | (member & 0xff) | (member >> 8) << 24
        }
    }
}

/// The bulk-loaded keys, sorted.
pub fn loaded_keys(w: &IndexWorkload) -> Vec<u64> {
    // Remembered as the YCSB workload's `load_keys` is: every plan sorts the same keys.
    static SORTED: Memo<(KeyLayout, u64), Vec<u64>> = Memo::new(4);
    let sorted = SORTED.get_or((w.key_layout, w.key_count), |&(layout, n)| {
        let mut keys: Vec<u64> = (0..n).map(|i| key_of(layout, n, i)).collect();
        keys.sort_unstable();
        keys
    });
    sorted.as_ref().clone()
}

/// One operation of a client thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexOp {
    pub kind: OpKind,
    pub key: u64,
    /// Records a scan returns at most.
    pub scan_len: u32,
    /// Warm-up: run (and checked) but not measured.
    pub warmup: bool,
}

/// P-SMART: the partition a compute node's streams are confined to.
pub struct Owned {
    pub parts: Arc<Partitions>,
    pub me: usize,
    /// YCSB only: the keyspace indices this partition owns.
    pub members: Arc<Vec<u64>>,
}

/// A scenario's `workload`, either spelling.
#[derive(Clone, Debug)]
pub enum Workload {
    Mix(IndexWorkload),
    Ycsb(YcsbWorkload),
}

impl Workload {
    /// The timed measurement window (YCSB spelling only).
    pub fn window(&self) -> Option<crate::workload::window::Window> {
        match self {
            Workload::Ycsb(w) => w.window,
            Workload::Mix(_) => None,
        }
    }

    pub fn parse(value: &serde_json::Value) -> Result<Workload, Problem> {
        if value.get("keyspace").is_some() {
            parse_typed(value, "workload").map(Workload::Ycsb)
        } else {
            parse_typed(value, "workload").map(Workload::Mix)
        }
    }

    pub fn shape_fields(&self) -> ShapeFields {
        match self {
            Workload::Mix(w) => w.shape_fields(),
            Workload::Ycsb(w) => ShapeFields { cache_frames: None, cache_ratio: None, ..w.shape_fields() },
        }
    }

    pub fn check(&self, out: &mut Vec<Problem>) {
        match self {
            Workload::Mix(w) => w.check(out),
            Workload::Ycsb(w) => {
                w.check(out);
                if w.cache_frames.is_some() {
                    out.push(Problem::new(
                        "workload.cache_frames",
                        "SMART sizes its cache in bytes: use cache_ratio",
                    ));
                }
            }
        }
    }

    /// The bulk-loaded keys, sorted.
    pub fn loaded_keys(&self) -> Vec<u64> {
        match self {
            Workload::Mix(w) => loaded_keys(w),
            Workload::Ycsb(w) => w.load_keys(),
        }
    }

    pub fn loaded_count(&self) -> u64 {
        match self {
            Workload::Mix(w) => w.key_count,
            Workload::Ycsb(w) => w.bulk_load(),
        }
    }

    /// Fraction of operations that insert.
    pub fn insert_fraction(&self) -> f64 {
        match self {
            Workload::Mix(w) => w.mix.insert,
            Workload::Ycsb(w) => w.proportions().insert,
        }
    }

    /// Cache bytes from `cache_ratio` over the data (keyspace × 16 B), if given.
    pub fn cache_bytes(&self) -> Option<u64> {
        let (ratio, keys) = match self {
            Workload::Mix(w) => (w.cache_ratio, w.key_count),
            Workload::Ycsb(w) => (w.cache_ratio, w.keyspace),
        };
        ratio.map(|r| (r * keys as f64 * 16.0) as u64)
    }

    /// Keyspace indices partition `me` owns (YCSB; the op mix filters its draws instead).
    pub fn partition_members(&self, parts: &Partitions, me: usize) -> Vec<u64> {
        match self {
            Workload::Mix(_) => Vec::new(),
            Workload::Ycsb(w) => w.partition_members(parts, me),
        }
    }

    /// Thread `thread` of compute node `compute` (of `computes`, `threads` each): its stream,
    /// confined to `owned` keys in a partitioned run.
    #[allow(clippy::too_many_arguments)]
    pub fn stream(
        &self,
        compute: u16,
        computes: u16,
        thread: u32,
        threads: u32,
        ops: u64,
        rng: ChaCha8Rng,
        owned: Option<&Owned>,
    ) -> OpStream {
        match self {
            Workload::Mix(w) => {
                let client = compute as u64 * threads as u64 + thread as u64;
                let clients = computes as u64 * threads as u64;
                let mut s = IndexStream::new(w, client, clients, ops, rng);
                s.owned = owned.map(|o| (o.parts.clone(), o.me));
                OpStream::Mix(s)
            }
            Workload::Ycsb(w) => {
                let s = YcsbStream::new(w, compute, computes, thread, threads, ops, rng);
                OpStream::Ycsb(match owned {
                    Some(o) => s.partitioned(o.parts.clone(), o.me, o.members.clone()),
                    None => s,
                })
            }
        }
    }
}

/// A thread's operations from either generator.
pub enum OpStream {
    Mix(IndexStream),
    Ycsb(YcsbStream),
}

impl Iterator for OpStream {
    type Item = IndexOp;

    fn next(&mut self) -> Option<IndexOp> {
        match self {
            OpStream::Mix(s) => s.next(),
            OpStream::Ycsb(s) => s.next().map(|op| {
                let (kind, scan_len) = match op.kind {
                    YcsbKind::Read => (OpKind::Lookup, 0),
                    YcsbKind::Update => (OpKind::Update, 0),
                    YcsbKind::Insert => (OpKind::Insert, 0),
                    YcsbKind::Delete => (OpKind::Delete, 0),
                    YcsbKind::Scan { len } => (OpKind::Scan, len),
                };
                IndexOp { kind, key: op.key, scan_len, warmup: op.warmup }
            }),
        }
    }
}

/// One thread's operations.
pub struct IndexStream {
    w: IndexWorkload,
    zipf: Option<Zipf>,
    rng: ChaCha8Rng,
    left: u64,
    /// Ordinals of this thread's fresh inserts: `next_insert`, then + `stride`.
    next_insert: u64,
    stride: u64,
    /// Ordinals lookups, updates and deletes draw from.
    span: u64,
    /// P-SMART: only keys this partition owns ([`IndexStream::next`] redraws the others).
    owned: Option<(Arc<Partitions>, usize)>,
}

impl IndexStream {
    /// `client` of `clients` (globally unique), `ops` operations.
    pub fn new(w: &IndexWorkload, client: u64, clients: u64, ops: u64, rng: ChaCha8Rng) -> IndexStream {
        let inserts = (ops as f64 * clients as f64 * w.mix.insert).ceil() as u64;
        let span = if w.touch_inserted { w.key_count + inserts } else { w.key_count };
        let zipf = (w.zipf_theta > 0.0).then(|| Zipf::new(span, w.zipf_theta));
        IndexStream {
            span,
            w: w.clone(),
            zipf,
            rng,
            left: ops,
            next_insert: w.key_count + client,
            stride: clients.max(1),
            owned: None,
        }
    }

    fn existing(&mut self) -> u64 {
        let ordinal = match &self.zipf {
            // YCSB's scrambled Zipfian: rank r's item is hash(r) mod n.
            Some(z) => mix64(z.sample(|| self.rng.next_u64())) % self.span,
            None => self.rng.next_u64() % self.span,
        };
        key_of(self.w.key_layout, self.w.key_count, ordinal)
    }
}

impl Iterator for IndexStream {
    type Item = IndexOp;

    fn next(&mut self) -> Option<IndexOp> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Partitioned: redraw whole operations until one names an owned key ([CHOICE]: with
        // dense keys every fresh insert lies past the last bound, so the other partitions' mixes
        // lose their inserts). A partition that owns nothing ends its streams.
        for _ in 0..10_000 {
            let op = self.draw();
            match &self.owned {
                Some((parts, me)) if parts.owner(op.key) != *me => continue,
                _ => return Some(op),
            }
        }
        None
    }
}

impl IndexStream {
    fn draw(&mut self) -> IndexOp {
        let mut u = unit_f64(self.rng.next_u64());
        let mut kind = OpKind::Lookup;
        for (k, f) in self.w.mix.parts() {
            if f > 0.0 {
                kind = k;
                if u < f {
                    break;
                }
                u -= f;
            }
        }
        let key = match kind {
            OpKind::Insert => {
                let ordinal = self.next_insert;
                self.next_insert += self.stride;
                key_of(self.w.key_layout, self.w.key_count, ordinal)
            }
            _ => self.existing(),
        };
        IndexOp { kind, key, scan_len: self.w.scan_length, warmup: false }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_gives_distinct_keys() {
        for layout in [KeyLayout::Hashed, KeyLayout::Dense, KeyLayout::Clustered] {
            let keys: std::collections::BTreeSet<u64> = (0..5000).map(|i| key_of(layout, 24, i)).collect();
            assert_eq!(keys.len(), 5000, "{layout:?}");
        }
    }
}
