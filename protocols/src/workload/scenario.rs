//! The micro-benchmark's `workload` section as scenarios write it, shared by every protocol
//! that runs it (SELCC, SEL and GAM read the same section, so one scenario drives all three).

use serde::Deserialize;

use crate::common::shape::ShapeFields;
use crate::harness::Problem;

/// `workload` of a micro-benchmark scenario: the [`super::micro::MicroSpec`] fields, the run
/// shape in either spelling ([`crate::common::shape`]) and the figure extras.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MicroWorkload {
    /// GCLs (blocks) allocated (24 M in the SELCC paper; scaled).
    pub gcl_count: u64,
    #[serde(default = "gcl_2k")]
    pub gcl_size_bytes: u32,
    #[serde(default = "one_f64")]
    pub sharing_ratio: f64,
    pub read_ratio: f64,
    #[serde(default)]
    pub zipf_theta: f64,
    #[serde(default)]
    pub locality: f64,
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
    #[serde(default = "eight")]
    pub access_bytes: u32,
    /// The first k compute nodes only write (SELCC Fig. 15b's single writer).
    #[serde(default)]
    pub write_only_nodes: u16,
    /// Metric `timeline_cum_ops`: operations completed by this virtual time (Fig. 15b curves).
    #[serde(default)]
    pub timeline_at_ns: Option<u64>,
    /// ... by this compute node only (default: all).
    #[serde(default)]
    pub timeline_node: Option<u16>,
    #[serde(default)]
    pub sharing_model: SharingModel,
}

fn gcl_2k() -> u32 {
    2048
}
fn one_f64() -> f64 {
    1.0
}
fn eight() -> u32 {
    8
}

/// How the sharing ratio splits the data (SELCC spec B16 [GAP]: "follows GAM's benchmark").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SharingModel {
    /// `gcl_count` GCLs in all: sr·G shared, the rest split into one private part per node, so
    /// each node's working set shrinks as sr falls and nodes are added.
    #[default]
    FixedTotal,
    /// `gcl_count` is each node's working set: sr·G shared by all plus (1−sr)·G private to it
    /// (total sr·G + C·(1−sr)·G). Hit ratios then do not depend on sr, which the SELCC paper's
    /// "great scalability regardless of the sharing ratio" for read-intensive loads implies.
    PerNodeWorkingSet,
}

impl MicroWorkload {
    /// Problems for a protocol (`name`) that runs only the fixed-total sharing model and none
    /// of the SELCC figure extras (GAM, ScaleStore as SELCC's baseline).
    pub fn check_plain(&self, name: &str, out: &mut Vec<Problem>) {
        if self.sharing_model == SharingModel::PerNodeWorkingSet && self.sharing_ratio != 1.0 {
            // With everything shared the models coincide.
            out.push(Problem::new("workload.sharing_model", format!("{name} supports fixed_total only")));
        }
        for (set, field) in [
            (self.write_only_nodes > 0, "write_only_nodes"),
            (self.timeline_at_ns.is_some(), "timeline_at_ns"),
            (self.timeline_node.is_some(), "timeline_node"),
        ] {
            if set {
                out.push(Problem::new(format!("workload.{field}"), format!("{name} does not support it")));
            }
        }
    }

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

    /// Problems with the fields every protocol checks the same way.
    pub fn check(&self, compute_nodes: u16, out: &mut Vec<Problem>) {
        if self.gcl_count == 0 {
            out.push(Problem::new("workload.gcl_count", "must be at least 1"));
        }
        if !(0.0..=1.0).contains(&self.sharing_ratio) {
            out.push(Problem::new(
                "workload.sharing_ratio",
                format!("{} is outside [0, 1]", self.sharing_ratio),
            ));
        }
        if self.write_only_nodes > compute_nodes {
            out.push(Problem::new("workload.write_only_nodes", "more than the compute nodes"));
        }
        if let Some(n) = self.timeline_node {
            if n >= compute_nodes {
                out.push(Problem::new("workload.timeline_node", "no such compute node"));
            }
        }
        if self.timeline_node.is_some() && self.timeline_at_ns.is_none() {
            out.push(Problem::new("workload.timeline_node", "needs workload.timeline_at_ns"));
        }
    }
}
