//! Every knob of SMART as plain serde fields (`protocol_options` merges over a preset).

use serde::{Deserialize, Serialize};

pub use super::mutants::Mutant;

/// Costs charged with `Nic::cpu` on the compute node, in nanoseconds. [CHOICE] none is
/// measured in the paper; see NEEDS.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuCosts {
    /// Per operation: request handling, key encoding, result copy.
    pub op_ns: u64,
    /// Searching one fetched node's slots for a partial key.
    pub node_search_ns: u64,
    /// One lookup in the local radix cache.
    pub cache_lookup_ns: u64,
    /// Admitting (and, when full, evicting from) the cache: held under the node's single FIFO
    /// lock, SMART's "centralized FIFO queue" that DEX measures at 49% of CPU cycles.
    pub cache_admit_ns: u64,
}

impl Default for CpuCosts {
    fn default() -> Self {
        CpuCosts { op_ns: 100, node_search_ns: 40, cache_lookup_ns: 60, cache_admit_ns: 250 }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Value bytes per leaf (SMART `simulatedValLen`, 8 by default; a multiple of 8). Values
    /// above 32 bytes make a leaf longer than 64 B, so READs of it can tear.
    pub value_bytes: u32,
    /// Node types 4/8/16/32/64/128/256 (SMART's build: `HOMOGENEOUS_INTERNAL_NODE` turns on
    /// `TREE_ENABLE_FINE_GRAIN_NODE`) instead of ART's 4/16/48/256.
    pub fine_grain_nodes: bool,
    /// The compute-side cache of internal nodes.
    pub cache: bool,
    /// Cache capacity per compute node in bytes of cached node copies (`workload.cache_ratio`
    /// sets it from the data size when given).
    pub cache_bytes: u64,
    /// Concurrent lookups of one key on a compute node share one remote read.
    pub read_delegation: bool,
    /// Concurrent writes of one key on a compute node share one remote write.
    pub write_combining: bool,
    /// Client threads per compute node (from the workload).
    pub threads_per_node: u32,
    /// Concurrent operations per client thread, sharing its QP (SMART's benchmark runs
    /// `kCoroCnt = 8` coroutines per thread, `test/ycsb_test.cpp`).
    pub coroutines_per_thread: u32,
    /// Spare bytes per compute node per memory node for new leaves and nodes, beyond what
    /// the run's writes are expected to allocate.
    pub arena_slack_bytes: u64,
    pub cpu: CpuCosts,
    /// P-SMART (DEX §8): the key space is range-partitioned across compute nodes, each client
    /// issues only keys its compute node owns, and an in-place leaf update skips the RDMA lock
    /// (a leaf holds one key, so one compute node writes it); the node's writes of one key are
    /// serialized locally instead. Internal nodes keep their CASes.
    #[serde(default)]
    pub partitioned: bool,
    /// Updates write the key itself as the value, as the DEX artifact's benchmark does
    /// (`test/newbench.cpp`: `Value v = key; tree->update(key, v)`, with bulk-loaded values
    /// that differ). Only a key's first update then changes its leaf; SMART's unchanged-value
    /// check returns from the rest after the leaf READ, without lock or WRITE — which is how
    /// DEX's Table 2 counts 0.11 WRITEs per op for SMART at 50 % updates. Histories cannot tell
    /// repeated values apart, so checked runs refuse it.
    #[serde(default)]
    pub key_valued_updates: bool,
    /// A deliberately planted bug ([`super::mutants`]).
    #[serde(default)]
    pub mutant: Mutant,
}

impl Config {
    /// SMART as its repository builds it with every option on: homogeneous-adaptive
    /// (fine-grained) nodes, lock-free internal nodes, in-place leaf updates under the embedded
    /// lock, read delegation, write combining, the ART-indexed cache; 8-byte values.
    pub fn smart() -> Config {
        Config {
            value_bytes: 8,
            fine_grain_nodes: true,
            cache: true,
            cache_bytes: 1 << 20,
            read_delegation: true,
            write_combining: true,
            threads_per_node: 1,
            coroutines_per_thread: 8,
            arena_slack_bytes: 64 << 10,
            cpu: CpuCosts::default(),
            partitioned: false,
            key_valued_updates: false,
            mutant: Mutant::None,
        }
    }

    /// Without read delegation and write combining (SMART's ablation, "+ART" step).
    pub fn no_rdwc() -> Config {
        Config { read_delegation: false, write_combining: false, ..Config::smart() }
    }

    pub fn value_words(&self) -> usize {
        (self.value_bytes / 8) as usize
    }

    /// "field: reason" for every bad value.
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.value_bytes == 0 || !self.value_bytes.is_multiple_of(8) || self.value_bytes > 1024 {
            out.push(format!("value_bytes: {} must be a multiple of 8 in 8..=1024", self.value_bytes));
        }
        if self.coroutines_per_thread == 0 || self.coroutines_per_thread > 64 {
            out.push(format!("coroutines_per_thread: {} must be in 1..=64", self.coroutines_per_thread));
        }
        if self.threads_per_node == 0 {
            out.push("threads_per_node: must be at least 1".into());
        }
        out
    }
}
