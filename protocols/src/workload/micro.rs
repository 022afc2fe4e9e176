//! The micro-benchmark of SELCC §7.1 [P] (after GAM's tool): each operation reads or writes part
//! of one GCL.
//!
//! * **Sharing ratio** sr: the first ⌊sr·G⌋ GCLs are shared by every compute node; the rest are
//!   split evenly into private partitions, one per compute node (§7.1 "the remainder is accessed
//!   privately"). [CHOICE] (spec B16): a node draws from its accessible set (shared ∪ its own
//!   partition) with the chosen distribution, so sr = 0 is pure sharding and sr = 1 full sharing.
//! * **Skew**: uniform, or Zipf θ over the accessible set, rank 1 = the first shared GCL.
//! * **Locality**: with probability `locality` (0.5 in Fig. 13) repeat the previous GCL.
//! * **Read ratio**: 1.0 / 0.95 / 0.5 / 0.0 in the paper.

use rand_chacha::rand_core::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::zipf::{unit_f64, Zipf};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MicroSpec {
    /// G: GCLs allocated in total (24 M in the paper; scaled in scenarios).
    pub gcl_count: u64,
    pub gcl_size_bytes: u32,
    /// Fraction of GCLs shared by all compute nodes.
    pub sharing_ratio: f64,
    /// Fraction of operations that read.
    pub read_ratio: f64,
    /// Zipf exponent; 0 = uniform.
    pub zipf_theta: f64,
    /// Probability of repeating the previous GCL.
    pub locality: f64,
    pub threads_per_node: u32,
    pub ops_per_thread: u64,
    /// Bytes each operation reads or writes (8-aligned, at most the GCL size) [GAP].
    pub access_bytes: u32,
}

impl Default for MicroSpec {
    fn default() -> Self {
        MicroSpec {
            gcl_count: 4096,
            gcl_size_bytes: 2048,
            sharing_ratio: 1.0,
            read_ratio: 0.95,
            zipf_theta: 0.0,
            locality: 0.0,
            threads_per_node: 8,
            ops_per_thread: 1000,
            access_bytes: 8,
        }
    }
}

impl MicroSpec {
    /// Problems with this spec, each naming the field. Empty = valid.
    pub fn validate(&self, compute_count: usize) -> Vec<String> {
        let mut problems = Vec::new();
        let unit = |name: &str, v: f64, problems: &mut Vec<String>| {
            if !(0.0..=1.0).contains(&v) {
                problems.push(format!("{name}: {v} is outside [0, 1]"));
            }
        };
        unit("sharing_ratio", self.sharing_ratio, &mut problems);
        unit("read_ratio", self.read_ratio, &mut problems);
        unit("locality", self.locality, &mut problems);
        if !(self.zipf_theta >= 0.0 && self.zipf_theta.is_finite()) {
            problems.push(format!("zipf_theta: {} must be finite and ≥ 0", self.zipf_theta));
        }
        if self.access_bytes == 0
            || !self.access_bytes.is_multiple_of(8)
            || self.access_bytes > self.gcl_size_bytes
        {
            problems
                .push(format!("access_bytes: {} must be a multiple of 8 within the GCL", self.access_bytes));
        }
        if self.threads_per_node == 0 {
            problems.push("threads_per_node: must be at least 1".into());
        }
        if !problems.is_empty() {
            // `partition` assumes the ratios are in range.
            return problems;
        }
        let (shared, private) = self.partition(compute_count.max(1));
        if shared + private == 0 {
            problems.push(format!("gcl_count: {} leaves no GCL to access", self.gcl_count));
        }
        problems
    }

    /// (shared GCLs, private GCLs per compute node).
    pub fn partition(&self, compute_count: usize) -> (u64, u64) {
        let shared = (self.sharing_ratio * self.gcl_count as f64).floor() as u64;
        let private = (self.gcl_count - shared) / compute_count as u64;
        (shared, private)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MicroOp {
    /// Index into the pre-allocated GCLs (`Layout::gcl`).
    pub gcl_index: u64,
    pub write: bool,
    pub offset_bytes: u32,
    pub len_bytes: u32,
}

/// One thread's operation stream.
pub struct MicroStream {
    rng: ChaCha8Rng,
    zipf: Option<Zipf>,
    shared: u64,
    private: u64,
    private_base: u64,
    read_ratio: f64,
    locality: f64,
    slots: u32,
    access_bytes: u32,
    previous: Option<u64>,
    remaining: u64,
}

impl MicroStream {
    /// `compute_index` picks the private partition; `rng` is this thread's seeded generator.
    pub fn new(spec: &MicroSpec, compute_index: usize, compute_count: usize, rng: ChaCha8Rng) -> MicroStream {
        let problems = spec.validate(compute_count);
        assert!(problems.is_empty(), "invalid micro-benchmark spec: {problems:?}");
        assert!(compute_index < compute_count);
        let (shared, private) = spec.partition(compute_count);
        let accessible = shared + private;
        MicroStream {
            rng,
            zipf: (spec.zipf_theta > 0.0).then(|| Zipf::new(accessible, spec.zipf_theta)),
            shared,
            private,
            private_base: shared + compute_index as u64 * private,
            read_ratio: spec.read_ratio,
            locality: spec.locality,
            slots: (spec.gcl_size_bytes - spec.access_bytes) / 8 + 1,
            access_bytes: spec.access_bytes,
            previous: None,
            remaining: spec.ops_per_thread,
        }
    }

    fn draw_gcl(&mut self) -> u64 {
        if let Some(previous) = self.previous {
            if unit_f64(self.rng.next_u64()) < self.locality {
                return previous;
            }
        }
        let accessible = self.shared + self.private;
        let k = match &self.zipf {
            Some(z) => {
                let rng = &mut self.rng;
                z.sample(|| rng.next_u64()) - 1
            }
            None => below(self.rng.next_u64(), accessible),
        };
        if k < self.shared {
            k
        } else {
            self.private_base + (k - self.shared)
        }
    }
}

/// A value in [0, n) from 64 random bits (multiply-shift; bias below 2⁻⁴⁰ for our n).
fn below(bits: u64, n: u64) -> u64 {
    ((bits as u128 * n as u128) >> 64) as u64
}

impl Iterator for MicroStream {
    type Item = MicroOp;
    fn next(&mut self) -> Option<MicroOp> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let gcl_index = self.draw_gcl();
        self.previous = Some(gcl_index);
        let write = unit_f64(self.rng.next_u64()) >= self.read_ratio;
        let offset_bytes = below(self.rng.next_u64(), self.slots as u64) as u32 * 8;
        Some(MicroOp { gcl_index, write, offset_bytes, len_bytes: self.access_bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::rng_for_thread;

    fn spec() -> MicroSpec {
        MicroSpec { gcl_count: 1000, ops_per_thread: 20_000, ..MicroSpec::default() }
    }

    #[test]
    fn sharing_ratio_partitions_the_space() {
        // Goal: private partitions are disjoint, shared GCLs are reachable by all.
        let s = MicroSpec { sharing_ratio: 0.3, ..spec() };
        let (shared, private) = s.partition(4);
        assert_eq!((shared, private), (300, 175));
        for node in 0..4 {
            for op in MicroStream::new(&s, node, 4, rng_for_thread(1, node as u16, 0)) {
                let i = op.gcl_index;
                let own = 300 + node as u64 * 175..300 + (node as u64 + 1) * 175;
                assert!(i < 300 || own.contains(&i), "node {node} touched {i}");
                assert!(op.offset_bytes + op.len_bytes <= 2048);
            }
        }
    }

    #[test]
    fn read_ratio_and_locality_hold() {
        // 20k ops: frequencies within 0.02 (≈ 6 standard errors).
        let s = MicroSpec { read_ratio: 0.95, locality: 0.5, ..spec() };
        let ops: Vec<_> = MicroStream::new(&s, 0, 1, rng_for_thread(9, 0, 0)).collect();
        let reads = ops.iter().filter(|o| !o.write).count() as f64 / ops.len() as f64;
        assert!((reads - 0.95).abs() < 0.02, "{reads}");
        let repeats = ops.windows(2).filter(|w| w[0].gcl_index == w[1].gcl_index).count() as f64;
        // P(repeat) = 0.5 + 0.5/1000.
        assert!((repeats / ops.len() as f64 - 0.5).abs() < 0.02);
    }

    #[test]
    fn zipf_concentrates_on_the_first_gcls() {
        let s = MicroSpec { zipf_theta: 0.99, ..spec() };
        let ops: Vec<_> = MicroStream::new(&s, 0, 2, rng_for_thread(5, 0, 1)).collect();
        let hot = ops.iter().filter(|o| o.gcl_index < 10).count() as f64 / ops.len() as f64;
        assert!(hot > 0.3, "θ=0.99 over 1000 items puts ~39% on the top 10, got {hot}");
        let again: Vec<_> = MicroStream::new(&s, 0, 2, rng_for_thread(5, 0, 1)).collect();
        assert_eq!(ops, again, "seeded streams repeat exactly");
    }
}
