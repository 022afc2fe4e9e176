//! The request stream of one client thread: key naming (YCSB's hashed or ordered keys), the
//! operation and key draws of [`YcsbStream`], and the replay of a trace file's share. Its
//! scenario section, [`super::YcsbWorkload`], is in `ycsb.rs`.

use rand_chacha::rand_core::Rng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

use super::{Distribution, KeyOrder, ScanLength, YcsbWorkload, ZipfItems, ZipfKeys, YCSB_ITEM_COUNT};
use crate::workload::partition::Partitions;
use crate::workload::twitter;
use crate::workload::twitter_trace::{Share, TraceCursor};
use crate::workload::zipf::{unit_f64, Zipf};

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 bytes of `v`, low byte first, then `Math.abs`.
pub fn fnv_hash64(mut v: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        h ^= v & 0xff;
        v >>= 8;
        h = h.wrapping_mul(1_099_511_628_211);
    }
    (h as i64).unsigned_abs()
}

/// A bijection of `[0, 2⁶³)` (odd multiply and xor-shifts, all mod 2⁶³).
fn mix63(mut x: u64) -> u64 {
    const M: u64 = (1 << 63) - 1;
    x &= M;
    x = (x ^ (x >> 31)).wrapping_mul(0x7fb5_d329_728e_a185) & M;
    x = (x ^ (x >> 27)).wrapping_mul(0x81da_def4_bc2d_d44d) & M;
    x ^ (x >> 33)
}

/// The key of index `i`: in `1..=2⁶³`, distinct for distinct `i < 2⁶³`. `Permuted` maps
/// `0..keyspace` onto `1..=keyspace` in a fixed pseudo-random order; indices past the keyspace
/// (inserts after the free part is used up) continue ascending above it, as the Dolphin
/// authors' harness continues with `extra_k` once its workload file is used up.
pub fn key_name(order: KeyOrder, keyspace: u64, i: u64) -> u64 {
    match order {
        KeyOrder::Hashed => mix63(i) + 1,
        KeyOrder::Ordered => i + 1,
        KeyOrder::Permuted if i < keyspace => permute(i, keyspace) + 1,
        KeyOrder::Permuted => i + 1,
    }
}

/// A fixed pseudo-random bijection of `[0, n)` (`i < n`): a 4-round Feistel network over the
/// smallest even-width power of two ≥ `n`, cycle-walked back into `[0, n)`.
fn permute(i: u64, n: u64) -> u64 {
    debug_assert!(i < n, "index {i} outside the permuted keyspace {n}");
    let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2).next_multiple_of(2);
    let half = bits / 2;
    let mask = (1u64 << half) - 1;
    let mut x = i;
    loop {
        let (mut left, mut right) = (x >> half, x & mask);
        for round in 1..=4u64 {
            let f = mix63(right ^ round.wrapping_mul(0x9e37_79b9_7f4a_7c15)) & mask;
            (left, right) = (right, left ^ f);
        }
        x = (left << half) | right;
        if x < n {
            return x;
        }
    }
}

/// What an operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Read,
    Update,
    Insert,
    /// Read up to `len` records with keys ≥ the start key, ascending.
    Scan {
        len: u32,
    },
    Delete,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct YcsbOp {
    pub kind: OpKind,
    pub key: u64,
    /// Part of the warm-up (not measured).
    pub warmup: bool,
}

/// One thread's operation stream: warm-up then measured operations.
pub struct YcsbStream {
    rng: ChaCha8Rng,
    order: KeyOrder,
    cumulative: [f64; 5],
    distribution: Distribution,
    zipf: Option<Zipf>,
    /// Whether a zipf rank is hashed into a key index (else taken as it is).
    scramble: bool,
    theta: f64,
    keyspace: u64,
    bulk_load: u64,
    scan: ScanLength,
    global_thread: u64,
    threads: u64,
    inserted: u64,
    warmup_left: u64,
    remaining: u64,
    /// P-* variants: only keys of this partition ([`YcsbStream::partitioned`]).
    part: Option<Owned>,
    /// A trace with per-key read ratios: (cluster read share, spread).
    per_key_reads: Option<(f64, f64)>,
    /// A trace file's requests for this thread, in order: (lookup?, key index).
    replay: Option<std::vec::IntoIter<(bool, u64)>>,
}

/// The partition a stream is confined to.
struct Owned {
    parts: Arc<Partitions>,
    me: usize,
    /// Key indices in `0..keyspace` whose keys this partition owns.
    members: Arc<Vec<u64>>,
}

impl YcsbStream {
    /// Thread `thread` of compute node `node`, `threads_per_node` per node over `nodes` nodes,
    /// `ops` measured operations. The workload must pass [`YcsbWorkload::check`].
    pub fn new(
        w: &YcsbWorkload,
        node: u16,
        nodes: u16,
        thread: u32,
        threads_per_node: u32,
        ops: u64,
        rng: ChaCha8Rng,
    ) -> YcsbStream {
        let p = w.proportions();
        let mut cumulative = [0.0; 5];
        let mut acc = 0.0;
        for (c, x) in cumulative.iter_mut().zip([p.read, p.update, p.insert, p.scan, p.delete]) {
            acc += x;
            *c = acc;
        }
        let distribution = w.distribution();
        let items = match (w.zipf_keys, w.zipf_items) {
            (ZipfKeys::RanksOver(n), _) => n,
            (_, ZipfItems::Keyspace) => w.keyspace,
            (_, ZipfItems::Ycsb) => YCSB_ITEM_COUNT,
        };
        YcsbStream {
            rng,
            order: w.key_order,
            cumulative,
            distribution,
            zipf: (distribution == Distribution::Zipfian).then(|| Zipf::new(items, w.theta())),
            scramble: w.zipf_keys == ZipfKeys::Scrambled,
            theta: w.theta(),
            per_key_reads: match (w.trace_stats(), &w.trace) {
                (Some(s), Some(t)) if t.spread > 0.0 => Some((s.read_share, t.spread)),
                _ => None,
            },
            replay: w.trace.as_ref().and_then(|t| t.file.as_deref()).map(|path| {
                let share = Share {
                    node: node as u32,
                    nodes: nodes.max(1) as u32,
                    thread,
                    threads: threads_per_node.max(1),
                };
                replay_share(path, share, w.warmup_ops_per_thread + ops, w.keyspace)
            }),
            keyspace: w.keyspace,
            bulk_load: w.bulk_load(),
            scan: w.scan_length(),
            global_thread: node as u64 * threads_per_node as u64 + thread as u64,
            threads: nodes.max(1) as u64 * threads_per_node.max(1) as u64,
            inserted: 0,
            warmup_left: w.warmup_ops_per_thread,
            remaining: w.warmup_ops_per_thread + ops,
            part: None,
        }
    }

    /// Confine the stream to partition `me` (DEX's P-* variants, `newbench.cpp`): uniform and
    /// zipfian requests draw over the partition's own keys (`members`, from
    /// [`YcsbWorkload::partition_members`]; zipf ranks over them, scrambled), so every
    /// partition has its own hot set; inserts take this thread's fresh indices whose keys fall
    /// in the partition; `latest` draws are redrawn until they do.
    pub fn partitioned(mut self, parts: Arc<Partitions>, me: usize, members: Arc<Vec<u64>>) -> YcsbStream {
        if let (Some(z), false) = (&self.zipf, members.is_empty()) {
            let items = if z.n() == self.keyspace { members.len() as u64 } else { z.n() };
            self.zipf = Some(Zipf::new(items, self.theta));
        }
        self.part = Some(Owned { parts, me, members });
        self
    }

    fn owns(&self, index: u64) -> bool {
        self.part.as_ref().is_none_or(|o| o.parts.owner(key_name(self.order, self.keyspace, index)) == o.me)
    }

    /// A value in [0, n).
    fn below(&mut self, n: u64) -> u64 {
        ((self.rng.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Index of the k-th key this thread inserts.
    fn insert_index(&self, k: u64) -> u64 {
        self.bulk_load + k * self.threads + self.global_thread
    }

    /// The key index a read/update/scan/delete targets.
    fn request_index(&mut self) -> u64 {
        let Some(members) = self.part.as_ref().map(|o| o.members.clone()) else {
            return self.global_index();
        };
        let n = members.len() as u64;
        match self.distribution {
            Distribution::Uniform if n > 0 => members[self.below(n) as usize],
            Distribution::Zipfian if n > 0 => {
                let z = self.zipf.as_ref().expect("zipfian stream has a sampler");
                let rng = &mut self.rng;
                let rank = z.sample(|| rng.next_u64()) - 1;
                members[(fnv_hash64(rank) % n) as usize]
            }
            _ => {
                for _ in 0..10_000 {
                    let i = self.global_index();
                    if self.owns(i) {
                        return i;
                    }
                }
                // No owned key drawn (an empty partition): any owned index of the keyspace.
                members.first().copied().unwrap_or(0)
            }
        }
    }

    fn global_index(&mut self) -> u64 {
        match self.distribution {
            Distribution::Uniform => self.below(self.keyspace),
            Distribution::Zipfian => {
                let z = self.zipf.as_ref().expect("zipfian stream has a sampler");
                let rng = &mut self.rng;
                let rank = z.sample(|| rng.next_u64()) - 1;
                if self.scramble {
                    fnv_hash64(rank) % self.keyspace
                } else {
                    rank % self.keyspace
                }
            }
            Distribution::Latest => {
                // [CHOICE] every thread assumes the others inserted as many keys as it did (they
                // run the same mix), so "newest" is the interleaved sequence's last index; a
                // draw of a key another thread has not inserted yet is a miss, as in YCSB when a
                // reader outruns an inserter.
                let existing = self.bulk_load + self.inserted * self.threads;
                if existing == 0 {
                    return 0;
                }
                let z = Zipf::new(existing, self.theta);
                let rng = &mut self.rng;
                let rank = z.sample(|| rng.next_u64()) - 1;
                existing - 1 - rank
            }
        }
    }
}

/// The first `count` requests of `share` in the file at `path` (read from the start again at its
/// end) as (lookup?, key index). The plan checked the file ([`YcsbWorkload::check`]); a node
/// share the file leaves empty, or a file changed since, fails the point with the reason.
fn replay_share(path: &str, share: Share, count: u64, keyspace: u64) -> std::vec::IntoIter<(bool, u64)> {
    let mut cursor = TraceCursor::open(std::path::Path::new(path), share)
        .unwrap_or_else(|e| panic!("workload.trace.file: {e}"));
    (0..count)
        .map(|_| {
            let r = cursor.next_record().unwrap_or_else(|e| panic!("workload.trace.file: {e}"));
            (r.op.is_read(), r.object(keyspace))
        })
        .collect::<Vec<_>>()
        .into_iter()
}

impl Iterator for YcsbStream {
    type Item = YcsbOp;
    fn next(&mut self) -> Option<YcsbOp> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let warmup = self.warmup_left > 0;
        self.warmup_left = self.warmup_left.saturating_sub(1);
        if let Some((read, index)) = self.replay.as_mut().and_then(Iterator::next) {
            let kind = if read { OpKind::Read } else { OpKind::Update };
            return Some(YcsbOp { kind, key: key_name(self.order, self.keyspace, index), warmup });
        }
        if let Some((share, spread)) = self.per_key_reads {
            // A trace with per-key read ratios: the key first, then its own read chance.
            let index = self.request_index();
            let read = unit_f64(self.rng.next_u64()) < twitter::read_ratio(share, spread, index);
            let kind = if read { OpKind::Read } else { OpKind::Update };
            return Some(YcsbOp { kind, key: key_name(self.order, self.keyspace, index), warmup });
        }
        let u = unit_f64(self.rng.next_u64());
        let which = self.cumulative.iter().position(|c| u < *c).unwrap_or_else(|| {
            // Rounding: the last kind with a positive share.
            self.cumulative.iter().rposition(|c| *c > 0.0).unwrap_or(0)
        });
        let (kind, index) = match which {
            0 => (OpKind::Read, self.request_index()),
            1 => (OpKind::Update, self.request_index()),
            2 => {
                let mut index = self.insert_index(self.inserted);
                self.inserted += 1;
                // Partitioned: the next fresh index this partition owns ([`Self::partitioned`];
                // the plans refuse ordered keys, whose fresh keys all lie past the last bound).
                while !self.owns(index) {
                    index = self.insert_index(self.inserted);
                    self.inserted += 1;
                }
                (OpKind::Insert, index)
            }
            3 => {
                let len = match self.scan {
                    ScanLength::Fixed(n) => n,
                    ScanLength::Uniform(n) => 1 + self.below(n as u64) as u32,
                };
                (OpKind::Scan { len }, self.request_index())
            }
            _ => (OpKind::Delete, self.request_index()),
        };
        Some(YcsbOp { kind, key: key_name(self.order, self.keyspace, index), warmup })
    }
}
