//! DEX's options (`protocol_options`), merged over a preset.

use serde::{Deserialize, Serialize};

use super::mutants::Mutant;
use crate::common::local_latch;
use crate::sherman::layout::Versions;

/// Compute-side CPU costs (ns) charged with `nic.cpu`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuCosts {
    /// Searching one cached 1 KB node (the artifact's `l_s`, 40 ns).
    pub node_ns: u64,
    /// Installing a fetched page into a frame (the paper's T_c, 400 ns for a 1 KB page).
    pub install_ns: u64,
    /// A restart after seeing an I/O flag or a node locked by another thread of this server.
    pub backoff_ns: u64,
    /// One critical section on a cooling-structure lock (a push, an eviction, a probe, a
    /// second chance): the lock's cache line moving to this core (the paper's "~100ns" local
    /// DRAM access). Waiters make each hand-off slower (`tree::locks`). Also the same-socket
    /// hand-off of a leaf's write latch (`leaf_latch`).
    pub cooling_lock_ns: u64,
    /// A local latch's cache line moving from a core on the other socket (`common::local_latch`).
    /// [CHOICE] 2× the same-socket transfer: an estimate (NEEDS.md 'Local latches').
    pub remote_line_ns: u64,
    /// Sockets a compute server's threads are spread over, alternately (the paper's testbed:
    /// 2; its "DEX (18threads)" run pins them to 1).
    pub sockets: u32,
    /// How each cached leaf's optimistic version latch is timed (`tree::locks`).
    pub leaf_latch: LeafLatch,
    /// One `_mm_pause`: what a thread spends after an optimistic latch told it to restart,
    /// and before each of its first two restarts of one operation ([ART] `OptLock`, `yield`).
    /// 140 cycles (Intel's optimisation manual gives ~140 cycles for PAUSE since Skylake) at
    /// the testbed's 3.1 GHz.
    pub pause_ns: u64,
    /// One `sched_yield()` with no other thread to run (before each restart from the third on,
    /// [ART] `yield`): a system call's entry and exit plus the scheduler's pick. [CHOICE] an
    /// estimate, not measured on the testbed.
    pub yield_ns: u64,
}

/// How a cached leaf's latch is timed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeafLatch {
    /// Not timed (before session 13).
    Off,
    /// Writers queue in order; readers wait out the writers reserved (sessions 13-15).
    Queued,
    /// The artifact's optimistic lock coupling ([ART] `btree_node.h` `OptLock`): a writer
    /// that finds the latch held, or a reader whose read overlapped a writer, restarts the
    /// operation from the root after a pause; readers share the line.
    #[default]
    Optimistic,
}

/// How the cooling pages are organised and locked (Fig. 4, Fig. 9's first step).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cooling {
    /// DEX's cooling map: buckets of `bucket_slots` FIFO slots, one lock per bucket.
    #[default]
    Map,
    /// The same buckets under one lock (Fig. 9's baseline).
    SingleLockMap,
    /// One FIFO queue of all cooling pages under one lock (Fig. 4's "DEX with FIFO queue",
    /// LeanStore's cooling list).
    Fifo,
}

/// When a miss on an eligible inner node (non-shared, level 1..=M, point op) is offloaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OffloadPolicy {
    /// Always fetch and cache (the paper's no-offloading ablations).
    Never,
    /// The cost model (§6.1).
    Cost,
    /// Every eligible miss (Fig. 5's "Offload-only").
    Always,
}

/// Cost-aware offloading's knobs ([ART] `latency_collector.h`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Offload {
    pub policy: OffloadPolicy,
    /// Samples per moving average (50).
    pub window: u32,
    /// q: probability of the contrary action (0.01).
    pub exploration: f64,
    /// Probability that a decision's latency is sampled once the windows are full (0.01).
    pub sample_rate: f64,
    /// c: the empirical coefficient (> 1) on the fetch cost (1.2).
    pub coefficient: f64,
    /// Offload-serving threads per memory server (paper: 4; Fig. 12 sweeps 1..=4). Each serves
    /// one request at a time; their CPU time also queues on `cluster.memory_node_cores` when
    /// that is modelled.
    pub ms_threads: u32,
    /// Memory-side CPU per request besides the search: taking the RECV completion and posting
    /// the reply SEND, unbatched as the artifact's `Directory` loop does (NEEDS.md 'Offloading').
    pub ms_rpc_ns: u64,
    /// Memory-side CPU per node visited: a 1 KB node in the memory server's DRAM, not in its
    /// CPU caches (the paper's T_c = 400 ns "for the access to a 1KB DRAM-resident page"; the
    /// compute side's `cpu.node_ns` = 40 ns is the artifact's search of a node in CPU cache).
    pub ms_node_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Leaf admission probability P_A once the cache has filled (paper: 0.1; inner nodes: always).
    pub leaf_admission: f64,
    /// Cooling map capacity as a fraction of the cache's frames (paper: 10%).
    pub cooling_fraction: f64,
    /// Cooling map (default), or one lock over it, or one FIFO queue.
    pub cooling: Cooling,
    /// FIFO slots per cooling-map bucket (paper: 6, one 64-byte cache line).
    pub bucket_slots: u32,
    /// Frames sampled per cooling round (paper: 2).
    pub samples_per_round: u32,
    /// Consecutive buckets probed for a victim before sampling again ([ART] `probing_length`).
    pub probe_buckets: u32,
    /// A leaf splits when it holds this many entries (default: its capacity); a fuzzing knob.
    pub leaf_split_at: Option<u32>,
    /// Likewise for inner nodes (children per node).
    pub internal_split_at: Option<u32>,
    /// Fill of bulk-loaded nodes (sorted single inserts with 50/50 splits leave ~0.5).
    pub bulk_fill: f64,
    /// Subtrees rooted at this level live on one memory server (paper: M = 3).
    pub subtree_level: u8,
    pub cpu: CpuCosts,
    pub offload: Offload,
    #[serde(default)]
    pub repartition: Repartition,
    #[serde(default)]
    pub mutant: Mutant,
}

/// Logical repartitioning (DEX §4, Fig. 10): at `at_ns` one thread of compute server `from`
/// flushes its dirty pages and hands the upper half of its key range to server `to`: by
/// default a scale-out server (the last compute server, idle until then; the others split the
/// key space as usual), or the server of another partition (every server then owns one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repartition {
    /// Virtual time of the move (0: no repartitioning, every compute server owns a partition).
    #[serde(default)]
    pub at_ns: u64,
    #[serde(default)]
    pub from: u16,
    /// The receiving server: absent for a scale-out server, else another partition's server.
    #[serde(default)]
    pub to: Option<u16>,
    /// How often a waiting receiver READs the hand-off word.
    #[serde(default = "default_poll_ns")]
    pub poll_ns: u64,
}

fn default_poll_ns() -> u64 {
    5_000
}

impl Repartition {
    pub fn enabled(&self) -> bool {
        self.at_ns > 0
    }
}

/// Node layout: Sherman's word-aligned node with a version in every 64-byte line, so a torn
/// whole-node image is always detected.
pub const VERSIONS: Versions = Versions::Line;

impl Config {
    pub fn dex() -> Config {
        Config {
            leaf_admission: 0.1,
            cooling_fraction: 0.1,
            cooling: Cooling::Map,
            bucket_slots: 6,
            samples_per_round: 2,
            probe_buckets: 8,
            leaf_split_at: None,
            internal_split_at: None,
            bulk_fill: 0.5,
            subtree_level: 3,
            cpu: CpuCosts {
                node_ns: 40,
                install_ns: 400,
                backoff_ns: 200,
                cooling_lock_ns: local_latch::LINE_NS,
                remote_line_ns: local_latch::REMOTE_LINE_NS,
                sockets: 2,
                leaf_latch: LeafLatch::Optimistic,
                pause_ns: local_latch::PAUSE_NS,
                yield_ns: 300,
            },
            offload: Offload {
                policy: OffloadPolicy::Cost,
                window: 50,
                exploration: 0.01,
                sample_rate: 0.01,
                coefficient: 1.2,
                ms_threads: 4,
                ms_rpc_ns: 200,
                ms_node_ns: 400,
            },
            repartition: Repartition { at_ns: 0, from: 0, to: None, poll_ns: default_poll_ns() },
            mutant: Mutant::None,
        }
    }

    /// Eager admission of every page (the Fig. 9 baseline's policy).
    pub fn eager() -> Config {
        Config { leaf_admission: 1.0, ..Config::dex() }
    }

    pub fn leaf_split(&self) -> usize {
        self.leaf_split_at.map(|n| n as usize).unwrap_or(VERSIONS.leaf_cap())
    }

    /// Children per inner node at which it splits.
    pub fn internal_split(&self) -> usize {
        self.internal_split_at.map(|n| n as usize).unwrap_or(VERSIONS.internal_cap())
    }

    /// Problems as "field: reason".
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !(0.0..=1.0).contains(&self.leaf_admission) {
            out.push("leaf_admission: must be in [0, 1]".into());
        }
        if !(self.cooling_fraction > 0.0 && self.cooling_fraction <= 1.0) {
            out.push("cooling_fraction: must be in (0, 1]".into());
        }
        if self.bucket_slots == 0 || self.bucket_slots > 64 {
            out.push("bucket_slots: must be in 1..=64".into());
        }
        if self.samples_per_round == 0 {
            out.push("samples_per_round: must be at least 1".into());
        }
        if self.probe_buckets == 0 {
            out.push("probe_buckets: must be at least 1".into());
        }
        if let Some(n) = self.leaf_split_at {
            if n < 2 || n as usize > VERSIONS.leaf_cap() {
                out.push(format!("leaf_split_at: must be in 2..={}", VERSIONS.leaf_cap()));
            }
        }
        if let Some(n) = self.internal_split_at {
            if n < 4 || n as usize > VERSIONS.internal_cap() {
                out.push(format!("internal_split_at: must be in 4..={}", VERSIONS.internal_cap()));
            }
        }
        if self.repartition.poll_ns == 0 {
            out.push("repartition.poll_ns: must be at least 1".into());
        }
        if self.cpu.sockets == 0 || self.cpu.sockets > 8 {
            out.push("cpu.sockets: must be in 1..=8".into());
        }
        let o = &self.offload;
        if o.ms_threads == 0 || o.ms_threads > 64 {
            out.push("offload.ms_threads: must be in 1..=64".into());
        }
        if o.window == 0 {
            out.push("offload.window: must be at least 1".into());
        }
        for (name, p) in [("offload.exploration", o.exploration), ("offload.sample_rate", o.sample_rate)] {
            if !(0.0..=1.0).contains(&p) {
                out.push(format!("{name}: must be in [0, 1]"));
            }
        }
        if !(o.coefficient > 0.0 && o.coefficient.is_finite()) {
            out.push("offload.coefficient: must be positive".into());
        }
        if !(self.bulk_fill > 0.0 && self.bulk_fill <= 1.0) {
            out.push("bulk_fill: must be in (0, 1]".into());
        }
        out
    }
}
