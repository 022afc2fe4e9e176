//! The Twitter cache clusters' published statistics (`twitter/cache-trace`, `stat/2020Mar.md`,
//! one week per cluster, copied into the DiFache spec §6.4): per cluster its mean key and value
//! size, op mix (as a read share) and Zipf α, and the per-object read-ratio rule built on them.
//! Shared by DiFache's synthetic trace workload (`difache/trace.rs`) and the ordered indexes'
//! YCSB generator (`workload.mix: trace`, Dolphin Fig. 9).
//!
//! **Synthetic**: these statistics read no trace file (none is available offline); every report
//! that uses them labels its rows "synthetic stand-in". A real trace file goes through
//! [`super::twitter_trace`] instead (`trace.file`, DiFache's `trace_file`). Cluster 5 has no statistics (N/A in
//! the source) and clusters 43 and 46 no α, so those three are not runnable.
//!
//! The op mapping ([CHOICE], DiFache's, one rule for every user): get and gets are reads; every
//! other op (set, add, replace, cas, append, prepend, delete, incr, decr) is a write. Shares the
//! source rounds away count as writes (read share = get + gets).

use super::mix64;
use super::zipf::unit_f64;

/// One Twitter cache cluster's whole-trace means (`stat/2020Mar.md`, spec §6.4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClusterStats {
    pub cluster: u32,
    pub key_bytes: u32,
    pub value_bytes: u32,
    /// get + gets.
    pub read_share: f64,
    /// None where the source says NA.
    pub zipf_alpha: Option<f64>,
}

const fn c(cluster: u32, key_bytes: u32, value_bytes: u32, read_share: f64, alpha: f64) -> ClusterStats {
    ClusterStats { cluster, key_bytes, value_bytes, read_share, zipf_alpha: Some(alpha) }
}
const fn no_alpha(cluster: u32, key_bytes: u32, value_bytes: u32, read_share: f64) -> ClusterStats {
    ClusterStats { cluster, key_bytes, value_bytes, read_share, zipf_alpha: None }
}

/// Clusters 1–54 except 5 (no statistics). Read share = get + gets of the op mix.
pub const CLUSTERS: [ClusterStats; 53] = [
    c(1, 80, 267, 0.99, 2.6774),
    c(2, 21, 68, 1.00, 1.4908),
    c(3, 19, 120, 0.99, 1.6414),
    c(4, 67, 2439, 0.93, 1.1004),
    c(6, 44, 252, 0.98, 1.882),
    c(7, 17, 1936, 0.82, 1.0666),
    c(8, 23, 9497, 0.50, 1.7366),
    c(9, 32, 39, 0.99, 1.6796),
    c(10, 22, 2333, 0.50, 0.0),
    c(11, 24, 170, 0.97, 1.4891),
    c(12, 44, 1030, 0.20, 0.3048),
    c(13, 44, 4266, 0.38, 0.4565),
    c(14, 96, 414, 0.65, 1.2959),
    c(15, 18, 102, 0.00, 0.0242),
    c(16, 18, 115, 0.93, 1.7862),
    c(17, 19, 212, 0.99, 2.1106),
    c(18, 18, 37, 0.97, 2.0994),
    c(19, 42, 101, 0.75, 0.735),
    c(20, 26, 55, 0.96, 1.3699),
    c(21, 25, 1, 0.00, 0.0521),
    c(22, 54, 4, 0.72, 0.7624),
    c(23, 35, 224, 0.36, 0.274),
    c(24, 32, 699, 0.99, 1.3726),
    c(25, 49, 28, 0.97, 0.9929),
    c(26, 122, 1745, 0.71, 0.6299),
    c(27, 66, 8, 0.85, 1.065),
    c(28, 45, 85, 0.91, 1.503),
    c(29, 36, 799, 0.86, 1.2323),
    c(30, 22, 689, 0.99, 1.4259),
    c(31, 41, 15, 0.06, 0.0),
    c(32, 41, 138, 0.02, 0.0),
    c(33, 24, 1118, 0.99, 1.354),
    c(34, 33, 322, 0.94, 1.1401),
    c(35, 19, 1796, 0.96, 0.0),
    c(36, 23, 78, 0.94, 1.2169),
    c(37, 72, 20134, 0.63, 0.4251),
    c(38, 41, 185, 0.06, 0.0),
    c(39, 41, 80, 0.06, 0.0),
    c(40, 44, 155, 0.50, 0.8551),
    c(41, 44, 171, 0.50, 0.8542),
    c(42, 40, 4703, 0.96, 1.5974),
    no_alpha(43, 44, 304, 0.50),
    c(44, 25, 22, 0.98, 1.4084),
    c(45, 10, 120, 0.85, 0.6372),
    no_alpha(46, 44, 928, 0.68),
    c(47, 44, 267, 1.00, 2.0637),
    c(48, 44, 70, 0.65, 0.8191),
    c(49, 44, 10658, 0.57, 1.5095),
    c(50, 18, 67485, 0.52, 1.2816),
    c(51, 44, 221, 0.90, 1.9745),
    c(52, 20, 273, 0.93, 1.2117),
    c(53, 36, 9213, 0.89, 1.2061),
    c(54, 19, 246, 0.97, 1.611),
];

/// The statistics of `cluster`, or why it cannot run.
pub fn stats(cluster: u32) -> Result<ClusterStats, String> {
    let s = CLUSTERS
        .iter()
        .find(|s| s.cluster == cluster)
        .ok_or_else(|| format!("cluster {cluster} has no published statistics (known: 1-4, 6-54)"))?;
    if s.zipf_alpha.is_none() {
        return Err(format!("cluster {cluster}'s Zipf alpha is NA in the published statistics"));
    }
    Ok(*s)
}

/// Object `key`'s read probability.
pub fn read_ratio(read_share: f64, spread: f64, key: u64) -> f64 {
    let u = unit_f64(mix64(key ^ 0x7472_6163_655f_7277));
    let d = read_share.min(1.0 - read_share);
    (read_share + spread * d * (2.0 * u - 1.0)).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_object_ratios_average_to_the_cluster_share() {
        for g in [0.02, 0.5, 0.72, 0.95, 1.0] {
            let n = 20_000;
            let mean = (0..n).map(|k| read_ratio(g, 1.0, k)).sum::<f64>() / n as f64;
            assert!((mean - g).abs() < 0.01, "share {g}: mean {mean}");
            let lo = (0..n).map(|k| read_ratio(g, 1.0, k)).fold(1.0, f64::min);
            assert!(lo >= 0.0 && (g == 1.0 || lo < g), "share {g}: spread reaches below it ({lo})");
            assert!((0..n).all(|k| read_ratio(g, 0.0, k) == g));
        }
    }

    #[test]
    fn unknown_clusters_are_refused_with_a_reason() {
        assert!(stats(5).unwrap_err().contains("no published statistics"));
        assert!(stats(43).unwrap_err().contains("NA"));
        assert_eq!(stats(22).unwrap().value_bytes, 4);
        let c8 = stats(8).unwrap();
        assert_eq!((c8.read_share, c8.zipf_alpha), (0.50, Some(1.7366)));
        let c9 = stats(9).unwrap();
        assert_eq!((c9.read_share, c9.zipf_alpha), (0.99, Some(1.6796)));
    }
}
