//! Sherman's options (`protocol_options`), merged over a preset.

use serde::{Deserialize, Serialize};

use super::layout::{Versions, SHERMAN_LOCKS};
use super::mutants::Mutant;

/// Compute-side CPU costs (ns) charged with `nic.cpu`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuCosts {
    /// Searching or editing one 1 KB node image.
    pub node_ns: u64,
    /// An index-cache lookup or insert.
    pub cache_ns: u64,
}

/// How the bulk-loaded tree is shaped (`bulk.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BulkShape {
    #[default]
    Fill,
    Inserts,
    RandomInserts,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `node` (Sherman's front/rear node versions + entry versions, word-aligned entries),
    /// `packed` (the same versions, leaf entries packed as the authors' `Tree.h`: 53 per leaf)
    /// or `line` (a version per 64-byte line).
    pub versions: Versions,
    /// Lock words per memory node (Sherman: 256 KiB / 8 = 32768).
    pub locks: u32,
    /// Locks in NIC device memory (Sherman) or in host memory.
    pub on_chip_locks: bool,
    /// Local lock table with hand-over (Sherman's hierarchical locks); off = every writer CASes.
    pub hierarchical_locks: bool,
    /// Hand-overs in a row before the global lock is released (Sherman: 8).
    pub max_handover: u8,
    /// Node write-back and unlock in one doorbell batch (Sherman's write combining).
    pub combine_unlock: bool,
    /// Level-1 internal nodes the index cache holds per compute node (0 = no cache).
    pub cache_nodes: u32,
    /// A leaf splits when it holds this many entries (default: its capacity, as Sherman).
    /// Smaller values are a fuzzing knob that makes splits frequent.
    pub leaf_split_at: Option<u32>,
    /// Likewise for internal nodes.
    pub internal_split_at: Option<u32>,
    /// Fraction of a bulk-loaded leaf filled (sorted inserts with 50/50 splits leave ~0.5).
    pub bulk_fill: f64,
    /// `fill` (every bulk-loaded node `bulk_fill` full), `inserts` (every node as inserting the
    /// loaded keys one by one in the workload's load order leaves it, `bulk_fill` unused;
    /// P-Sherman's leaves still start at the partition bounds) or `random_inserts` (the same in
    /// a fixed pseudo-random order of the loaded keys, whatever the workload's key order:
    /// Sherman's `benchmark.cpp` warm-up of hashed keys and the DEX artifact's bulk load of
    /// shuffled keys, both random orders).
    #[serde(default)]
    pub bulk_shape: BulkShape,
    pub cpu: CpuCosts,
    /// P-Sherman (DEX §8): the key space is range-partitioned across compute nodes, each
    /// client issues only keys its compute node owns, bulk-loaded leaves are cut at the
    /// boundaries, and leaf writes take only the local lock (no RDMA lock: a leaf has one
    /// writer node). Internal nodes keep the global lock.
    #[serde(default)]
    pub partitioned: bool,
    /// DEX's Sherman (DEX §8: "we implemented an RDMA-based optimistic locking for correct
    /// synchronization"; [ART] `LOCK_VERSION` in the DEX artifact's `Common.h`): each lock is a
    /// 16-byte `[version, lock]` slot, a lock-free node READ is bracketed by two READs of the
    /// slot (DEX §2: the verification "incurring two RDMA READ operations"), and a global
    /// write-back reads the version and writes `[version + 1, 0]` with the node. Off: Sherman's
    /// own lock-free reads (node and entry versions only).
    #[serde(default)]
    pub lock_version: bool,
    /// P-Sherman with `lock_version`: an internal node whose key range (from its parent's
    /// separators) lies inside this compute node's partition is READ without the slot bracket
    /// too, as leaves are (DEX §8: "non-shared nodes do not require RDMA-based
    /// synchronization"; the ablation's "+logical partitioning" step, Fig. 8). Off: only leaves
    /// skip it. Internal-node writes (splits) keep the global lock either way.
    #[serde(default)]
    pub skip_unshared_brackets: bool,
    /// The SELCC authors' Sherman (ruihong123/Sherman, commit 57e092e "implementation for
    /// correct Optimistic latch free", `Tree::page_search`: "we need three RDMA round trips to
    /// guarantee the correctness here. front version, page content, back version"): a
    /// lock-free node READ is three synchronous READs, the front node version word, the node,
    /// the rear node version word, and the image is accepted only if the two agree. Node
    /// versions only. Off: one READ (Sherman's own `page_search`).
    #[serde(default)]
    pub version_reads: bool,
    /// Sherman's own `range_query` (thustorage/Sherman and the DEX artifact's copy,
    /// `Tree::range_query`): a scan takes the leaves its cached level-1 node routes the scanned
    /// range to and READs them together (up to `kParaFetch` = 32 at a time), instead of walking
    /// leaf siblings one READ after another. Falls back to the walk on a cache miss, a stale
    /// entry, a torn image or a leaf that split meanwhile (the authors' code assumes every
    /// level-1 node cached and checks only entry versions). Off: the walk.
    #[serde(default)]
    pub parallel_scan: bool,
    /// Sherman's leaves cached by DiFache (`leaf_cache.rs`; DiFache Fig. 14 top): every leaf
    /// READ a DiFache read, every leaf write a whole-leaf DiFache write under the leaf lock.
    /// Absent: Sherman as published (no leaf cache).
    #[serde(default)]
    pub leaf_cache: Option<super::leaf_cache::LeafCacheOptions>,
    #[serde(default)]
    pub mutant: Mutant,
    /// Marlin (`protocol: "marlin"`, `protocols/src/marlin/`; never a Sherman option): leaves
    /// hold pointers to 16-byte items, IDUs take Spear shared and publish items by CAS, leaf
    /// splits take Spear exclusively.
    #[serde(skip)]
    pub items: bool,
    /// Marlin's planted bug (`dmsim fuzz --mutant` on `protocol: "marlin"`).
    #[serde(skip)]
    pub marlin_mutant: crate::marlin::Mutant,
}

impl Config {
    pub fn sherman() -> Config {
        Config {
            versions: Versions::Node,
            locks: SHERMAN_LOCKS,
            on_chip_locks: true,
            hierarchical_locks: true,
            max_handover: super::layout::MAX_HANDOVER,
            combine_unlock: true,
            cache_nodes: 1 << 20,
            leaf_split_at: None,
            internal_split_at: None,
            bulk_fill: 0.5,
            bulk_shape: BulkShape::Fill,
            cpu: CpuCosts { node_ns: 200, cache_ns: 100 },
            partitioned: false,
            lock_version: false,
            skip_unshared_brackets: false,
            version_reads: false,
            parallel_scan: false,
            leaf_cache: None,
            mutant: Mutant::None,
            items: false,
            marlin_mutant: crate::marlin::Mutant::None,
        }
    }

    /// The per-line version variant.
    pub fn line_versions() -> Config {
        Config { versions: Versions::Line, ..Config::sherman() }
    }

    pub fn leaf_split(&self) -> usize {
        self.leaf_split_at.map(|n| n as usize).unwrap_or(self.versions.leaf_cap())
    }

    pub fn internal_split(&self) -> usize {
        self.internal_split_at.map(|n| n as usize).unwrap_or(self.versions.internal_cap())
    }

    /// Problems as "field: reason".
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.locks == 0 || self.locks > SHERMAN_LOCKS * 8 {
            out.push(format!("locks: must be in 1..={}", SHERMAN_LOCKS * 8));
        }
        if let Some(n) = self.leaf_split_at {
            if n < 2 || n as usize > self.versions.leaf_cap() {
                out.push(format!("leaf_split_at: must be in 2..={}", self.versions.leaf_cap()));
            }
        }
        if let Some(n) = self.internal_split_at {
            if n < 3 || n as usize > self.versions.internal_cap() {
                out.push(format!("internal_split_at: must be in 3..={}", self.versions.internal_cap()));
            }
        }
        if self.lock_version && self.on_chip_locks && self.locks > SHERMAN_LOCKS / 2 {
            // 16-byte slots in the same 256 KiB of device memory.
            out.push(format!("locks: at most {} with lock_version and on-chip locks", SHERMAN_LOCKS / 2));
        }
        if !(self.bulk_fill > 0.0 && self.bulk_fill <= 1.0) {
            out.push("bulk_fill: must be in (0, 1]".into());
        }
        if self.skip_unshared_brackets && !(self.partitioned && self.lock_version) {
            out.push("skip_unshared_brackets: needs `partitioned` and `lock_version`".into());
        }
        if self.version_reads && (self.lock_version || self.versions == Versions::Line) {
            out.push("version_reads: needs `versions: node` or `packed` and no `lock_version`".into());
        }
        if let Some(c) = &self.leaf_cache {
            out.extend(c.validate());
            if self.items {
                out.push("leaf_cache: only Sherman's leaves are integrated, not Marlin's".into());
            }
            for (on, field) in [
                (self.partitioned, "partitioned"),
                (self.lock_version, "lock_version"),
                (self.version_reads, "version_reads"),
                (self.parallel_scan, "parallel_scan"),
            ] {
                if on {
                    out.push(format!(
                        "{field}: not with `leaf_cache` (DiFache caches the leaves of Sherman as published)"
                    ));
                }
            }
        }
        if self.items {
            if self.versions == Versions::Packed {
                // Marlin CASes the item pointer in place: it must be a whole, aligned word.
                out.push(
                    "versions: `packed` leaf entries are not word-aligned; Marlin needs `node` or `line`"
                        .into(),
                );
            }
            for (on, field) in [
                (self.partitioned, "partitioned"),
                (self.lock_version, "lock_version"),
                (self.version_reads, "version_reads"),
            ] {
                if on {
                    out.push(format!("{field}: a Sherman variant Marlin does not have"));
                }
            }
        }
        out
    }
}
