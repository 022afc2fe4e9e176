//! Dolphin's options (`protocol_options`), merged over a preset.

use serde::{Deserialize, Serialize};

use super::layout::LEAF_SLOTS;
pub use super::mutants::Mutant;

/// Compute-side CPU costs (ns) charged with `nic.cpu`. [CHOICE] uncalibrated estimates, the
/// same per-image cost as Sherman's (`node_ns`) and SMART's cache lookup; see NEEDS.md.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuCosts {
    /// Searching one leaf image for a key.
    pub leaf_ns: u64,
    /// Searching one internal node image (one slot, or the floor in a special node).
    pub node_ns: u64,
    /// One index-cache lookup or admission.
    pub cache_ns: u64,
}

/// Where a full leaf splits (spec §8 item 3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitRule {
    /// The paper: "evenly distributes ... placing the larger portion into the new leaf"
    /// (`n/2` keys stay).
    #[default]
    Even,
    /// The authors' code: `m = cnt / 4 * 3` keys stay ("reduce space wastage").
    CodeThreeQuarters,
}

impl SplitRule {
    /// Keys the old leaf keeps when `n` sorted keys split.
    pub fn keep(self, n: usize) -> usize {
        match self {
            SplitRule::Even => n / 2,
            SplitRule::CodeThreeQuarters => n / 4 * 3,
        }
    }
}

/// How many keys a bulk-loaded leaf holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BulkShape {
    /// `bulk_fill` of `leaf_split_at` slots.
    #[default]
    Fill,
    /// What ascending inserts leave (the authors' benchmark warms up by inserting keys
    /// `1..kWarmRatio·kKeySpace` in order over all threads): every leaf but a window's last
    /// holds the keys the split rule keeps of a full leaf, the last the rest
    /// ([`super::bulk::inserted_leaf_sizes`] over the sorted keys; `bulk_fill` is ignored).
    AscendingInserts,
    /// What inserting the loaded keys one by one in the workload's load order leaves (key index
    /// 0 first; with `key_order: permuted` or `hashed` a random order, as the authors' YCSB
    /// harness loads its `randint` file): leaves split with `split_rule` when full
    /// ([`super::bulk::inserted_leaf_sizes`]; `bulk_fill` is ignored).
    Inserts,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The compute-side index cache of internal nodes.
    pub cache: bool,
    /// Its capacity in bytes per compute node, counted as the authors' `CacheEntry`
    /// (`1 + 8 + 8·records` per cached node).
    pub cache_bytes: u64,
    /// A leaf splits when an insert finds no empty slot among the first `leaf_split_at`
    /// (65: every slot; smaller is a fuzzing knob that makes splits frequent).
    pub leaf_split_at: u32,
    /// Fill of bulk-loaded leaves ("warm up the tree ... 50% full").
    pub bulk_fill: f64,
    /// Where a full leaf splits: the paper's even split or the code's 3/4.
    #[serde(default)]
    pub split_rule: SplitRule,
    /// Bulk-loaded leaves as `bulk_fill`, or as ascending or load-order inserts with `split_rule`
    /// leave them.
    #[serde(default)]
    pub bulk_shape: BulkShape,
    pub cpu: CpuCosts,
    /// Spare bytes per compute node per memory node for new leaves and nodes.
    pub arena_slack_bytes: u64,
    #[serde(default)]
    pub mutant: Mutant,
}

impl Config {
    pub fn dolphin() -> Config {
        Config {
            cache: true,
            cache_bytes: 1 << 40,
            leaf_split_at: LEAF_SLOTS as u32,
            bulk_fill: 0.5,
            split_rule: SplitRule::Even,
            bulk_shape: BulkShape::Fill,
            cpu: CpuCosts { leaf_ns: 200, node_ns: 40, cache_ns: 100 },
            arena_slack_bytes: 256 << 10,
            mutant: Mutant::None,
        }
    }

    pub fn split_at(&self) -> usize {
        self.leaf_split_at as usize
    }

    /// Keys per bulk-loaded leaf of the `Fill` shape (at least 1, below `leaf_split_at`); the
    /// insert shapes' leaves differ ([`super::bulk::inserted_leaf_sizes`]).
    pub fn bulk_leaf_keys(&self) -> usize {
        ((self.split_at() as f64 * self.bulk_fill) as usize).clamp(1, self.split_at() - 1)
    }

    /// Problems as "field: reason".
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.leaf_split_at < 2 || self.leaf_split_at as usize > LEAF_SLOTS {
            out.push(format!("leaf_split_at: must be in 2..={LEAF_SLOTS}"));
        }
        if !(self.bulk_fill > 0.0 && self.bulk_fill <= 1.0) {
            out.push("bulk_fill: must be in (0, 1]".into());
        }
        out
    }
}
