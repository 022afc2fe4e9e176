//! Trace-shaped workloads, synthesized from the Twitter cache clusters' published statistics
//! (Figs. 11 and 13 right). **Synthetic**: no trace file is read; every report labels it so.
//!
//! The paper runs "54 real-world traces from Twitter [44, 1]" (`github.com/twitter/cache-trace`,
//! one week per cluster, 14 TB) and does not say how it replays them (spec §9.16). Offline, only
//! the per-cluster whole-trace means of `stat/2020Mar.md` are available (copied into spec §6.4):
//! mean key and value size, op mix and Zipf α. [`CLUSTERS`] holds them; cluster 5 has none
//! (N/A in the source) and clusters 43 and 46 have no α, so those three are not runnable.
//!
//! What the statistics do not give and this generator chooses ([CHOICE], fixed before any run,
//! one setting for every cluster — NEEDS.md):
//! * **Op mapping**: get and gets are reads; every other op (set, add, replace, cas, append,
//!   prepend, delete, incr, decr) is a write (lock, read, write back, unlock). Shares that the
//!   source rounds away count as writes (read share = get + gets).
//! * **Object size**: one size per cluster, its mean value size rounded up to 8 bytes (at least
//!   16: the benchmark's tag and stamp). Real traces mix sizes.
//! * **Working set**: `workload.objects`, capped so that the objects of one memory node stay
//!   within [`MN_BYTES_MAX`] (large-value clusters get fewer objects).
//! * **Popularity**: Zipf with the cluster's α over the objects (α = 0: uniform).
//! * **Per-object read ratios** (the paper's Observation 1, Fig. 7 — no numbers): object k reads
//!   with probability `g + spread · d · (2u_k − 1)`, u_k uniform from a hash of k, g the cluster's
//!   read share, d = min(g, 1 − g): the widest spread symmetric around g, so the access-weighted
//!   mean stays g. `spread` 1 by default.
//! * **Short access periods** (Observation 2; the paper's one number, "nearly 90% of objects were
//!   accessed within just 5% of the total trace duration" for No. 22, is not enough to fix a
//!   rate): off by default (`drift_ns` = 0). With `drift_ns` > 0 the popularity ranking shifts
//!   by one object every `drift_ns`: a new object becomes the hottest and the others cool.

use serde::{Deserialize, Serialize};

pub use crate::workload::twitter::{read_ratio, stats, ClusterStats, CLUSTERS};

/// Objects of one memory node stay within this many bytes (memory of the simulated cluster).
pub const MN_BYTES_MAX: u64 = 64 << 20;

/// `workload.trace`: run a synthetic stand-in for one Twitter cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// The cluster number ("No. N" in the paper).
    pub cluster: u32,
    /// Per-object read-ratio spread in [0, 1] (0: every object reads with the cluster's share).
    #[serde(default = "one")]
    pub spread: f64,
    /// Virtual ns per one-object shift of the popularity ranking (0: static popularity).
    #[serde(default)]
    pub drift_ns: u64,
    /// Measurement only: follow one object of this class through the run (Fig. 13 right):
    /// `red` (read ratio 0.45–0.55), `black` (≥ 0.95) or `blue` (0.70–0.80) — the most popular
    /// object of the class.
    #[serde(default)]
    pub track: Option<String>,
}

fn one() -> f64 {
    1.0
}

/// The object size the generator gives `s`'s objects.
pub fn object_bytes(s: &ClusterStats) -> u32 {
    s.value_bytes.next_multiple_of(8).max(16)
}

/// `objects` capped so one memory node's objects fit [`MN_BYTES_MAX`] (`memory_nodes` share them).
pub fn objects(s: &ClusterStats, objects: u64, memory_nodes: u64) -> u64 {
    let cap = MN_BYTES_MAX * memory_nodes.max(1) / object_bytes(s) as u64;
    objects.min(cap).max(1)
}

/// The object at popularity `rank` (0 = hottest) at virtual time `now_ns`.
pub fn key_at(rank: u64, objects: u64, drift_ns: u64, now_ns: u64) -> u64 {
    let shift = now_ns.checked_div(drift_ns).unwrap_or(0);
    (shift % objects + objects - rank % objects) % objects
}

/// The object class `track` names: its read-ratio range.
pub fn track_range(track: &str) -> Option<(f64, f64)> {
    match track {
        "red" => Some((0.45, 0.55)),
        "black" => Some((0.95, 1.0)),
        "blue" => Some((0.70, 0.80)),
        _ => None,
    }
}

/// The most popular object (rank order at time 0) whose read ratio is in `range`.
pub fn tracked_key(read_share: f64, spread: f64, objects: u64, range: (f64, f64)) -> Option<u64> {
    (0..objects)
        .map(|rank| key_at(rank, objects, 0, 0))
        .find(|&k| (range.0..=range.1).contains(&read_ratio(read_share, spread, k)))
}

/// What [`synthesize`] writes.
#[derive(Clone, Copy, Debug)]
pub struct SynthSpec {
    pub cluster: u32,
    /// Requests to write.
    pub ops: u64,
    /// Objects (keys) the requests spread over (no memory cap: a run maps keys onto its own
    /// objects or keyspace).
    pub objects: u64,
    /// Per-object read-ratio spread in [0, 1] (DiFache's runs use 1; 0: every request reads with
    /// the cluster's share).
    pub spread: f64,
    /// Client ids 0..clients, drawn uniformly per request.
    pub clients: u32,
    /// Requests per second of trace time (the timestamps' pace).
    pub rate_per_s: u64,
    pub seed: u64,
}

/// The synthetic stand-in for `spec.cluster` written out in the Twitter trace format
/// (`workload/twitter_trace.rs`): the same popularity and per-object read ratios the runs draw
/// in memory, one request per line; keys are `syn<cluster>:<object>`, sizes the cluster's means,
/// writes are `set`, TTL 0. Labelled synthetic by its keys. Returns the requests written.
pub fn synthesize(spec: SynthSpec, out: &mut impl std::io::Write) -> Result<u64, String> {
    use crate::workload::twitter_trace::{key_hash, write_line, TraceOp, TraceRecord};
    use rand_chacha::rand_core::Rng;
    let s = stats(spec.cluster)?;
    if spec.clients == 0 || spec.rate_per_s == 0 || spec.objects == 0 {
        return Err("objects, clients and rate must be at least 1".into());
    }
    if !(0.0..=1.0).contains(&spec.spread) {
        return Err("spread must be in [0, 1]".into());
    }
    let objects = spec.objects;
    let alpha = s.zipf_alpha.unwrap_or(0.0);
    let zipf = (alpha > 0.0).then(|| crate::workload::zipf::Zipf::new(objects, alpha));
    let mut rng = crate::workload::rng_for_thread(spec.seed, 0, 0);
    for i in 0..spec.ops {
        let rank = match &zipf {
            Some(z) => z.sample(|| rng.next_u64()) - 1,
            None => ((rng.next_u64() as u128 * objects as u128) >> 64) as u64,
        };
        let key = key_at(rank, objects, 0, 0);
        let read =
            crate::workload::zipf::unit_f64(rng.next_u64()) < read_ratio(s.read_share, spec.spread, key);
        let client = ((rng.next_u64() as u128 * spec.clients as u128) >> 64) as u32;
        let text = format!("syn{}:{key}", spec.cluster);
        let record = TraceRecord {
            timestamp_s: i / spec.rate_per_s,
            key: key_hash(text.as_bytes()),
            key_bytes: s.key_bytes,
            value_bytes: s.value_bytes,
            client,
            op: if read { TraceOp::Get } else { TraceOp::Set },
            ttl_s: 0,
        };
        write_line(out, &record, &text).map_err(|e| e.to_string())?;
    }
    Ok(spec.ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_makes_a_new_object_the_hottest() {
        assert_eq!(key_at(0, 10, 0, 123), 0);
        assert_eq!(key_at(0, 10, 100, 250), 2);
        assert_eq!(key_at(1, 10, 100, 250), 1);
        assert_eq!(key_at(3, 10, 100, 250), 9);
        // Every rank maps to a distinct object at any time.
        let mut keys: Vec<u64> = (0..10).map(|r| key_at(r, 10, 7, 1234)).collect();
        keys.sort();
        assert_eq!(keys, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn object_sizes_and_counts_follow_the_statistics() {
        assert_eq!(object_bytes(&stats(22).unwrap()), 16);
        assert_eq!(objects(&stats(50).unwrap(), 20_000, 1), (64 << 20) / 67_488);
    }

    #[test]
    fn tracked_objects_fall_in_their_class() {
        for t in ["red", "black", "blue"] {
            let range = track_range(t).unwrap();
            let k = tracked_key(0.72, 1.0, 20_000, range).unwrap();
            let r = read_ratio(0.72, 1.0, k);
            assert!(r >= range.0 && r <= range.1, "{t}: {r}");
        }
    }

    #[test]
    fn a_synthesized_trace_reads_back_with_the_cluster_share() {
        use crate::workload::twitter_trace::TraceReader;
        let spec = SynthSpec {
            cluster: 22,
            ops: 4_000,
            objects: 500,
            spread: 1.0,
            clients: 4,
            rate_per_s: 1_000,
            seed: 1,
        };
        let mut out = Vec::new();
        assert_eq!(synthesize(spec, &mut out), Ok(4_000));
        let records: Vec<_> = TraceReader::new(&out[..]).map(|r| r.unwrap()).collect();
        assert_eq!(records.len(), 4_000);
        let share = stats(22).unwrap().read_share;
        let reads = records.iter().filter(|r| r.op.is_read()).count() as f64 / 4_000.0;
        assert!((reads - share).abs() < 0.05, "reads {reads} vs the cluster's {share}");
        assert!(records.iter().all(|r| r.client < 4));
        assert_eq!(records.last().unwrap().timestamp_s, 3);
        let mut again = Vec::new();
        synthesize(spec, &mut again).unwrap();
        assert_eq!(out, again, "the same seed writes the same file");
        assert!(synthesize(SynthSpec { cluster: 5, ..spec }, &mut Vec::new()).is_err());
    }
}
