//! One scenario point as a protocol sees it: the sections the protocol parses itself
//! (`protocol_options`, `workload`, both raw JSON parsed with field paths) and the knobs the
//! harness decides for every protocol alike.

use serde_json::Value;

use crate::nic::{Cluster, NodeKind};

/// How much checking a run carries. The harness picks it: `dmsim run` from the scenario's
/// `run.check`, the fuzzer always [`CheckLevel::Full`], `dmsim hw run` at most
/// [`CheckLevel::Histories`] (nodes in different processes share no checker state).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum CheckLevel {
    /// Measure only.
    #[default]
    Off,
    /// Log every client operation for the history checkers (works across processes).
    Histories,
    /// Histories, plus in-process oracles and the per-event invariants (simulator only).
    Full,
}

impl CheckLevel {
    pub fn histories(self) -> bool {
        self >= CheckLevel::Histories
    }

    pub fn full(self) -> bool {
        self == CheckLevel::Full
    }
}

/// The point a [`super::Protocol`] plans.
#[derive(Clone, Debug)]
pub struct PointSpec {
    /// The scenario's `protocol` (one definition may answer to several names: `selcc`, `sel`).
    pub protocol: String,
    pub memory_nodes: u16,
    pub compute_nodes: u16,
    /// Nodes with both a cache and memory (`NodeKind::Symmetric`, ScaleStore), after the
    /// compute nodes. A protocol without such a role rejects them ([`PointSpec::no_symmetric`]).
    pub symmetric_nodes: u16,
    /// Modelled cores per memory node (`None`: unmodelled).
    pub memory_node_cores: Option<u32>,
    /// Bytes of each node's storage device (`cluster.ssd_bytes_per_node`; 0: none).
    pub ssd_bytes_per_node: u64,
    pub protocol_options: Value,
    pub workload: Value,
    /// Seeds the workload streams (the harness seeds everything else).
    pub seed: u64,
    pub check: CheckLevel,
    /// Leave the protocol quiescent when the clients finish (flush caches, release ownership),
    /// so end-of-run checks see memory as final. The hardware runner and the fuzzer ask for it;
    /// figure runs measure without it.
    pub quiesce: bool,
    /// A name from [`super::Protocol::mutants`], or `"none"`.
    pub mutant: String,
    /// The backend stores only the meaningful words of the plan's payload spans
    /// ([`super::Plan::payload_spans`]): the simulator in a measuring run (no `check`, no
    /// `run.full_payload`). Never on hardware, never with histories. A plan may size its memory
    /// budget by what is stored.
    pub payload_free: bool,
}

impl PointSpec {
    /// A problem if the cluster has symmetric nodes, for protocols (`name`) without that role.
    pub fn no_symmetric(&self, name: &str, out: &mut Vec<super::Problem>) {
        if self.symmetric_nodes > 0 {
            out.push(super::Problem::new(
                "cluster.symmetric_nodes",
                format!("{name} has no symmetric (cache + memory) node role"),
            ));
        }
    }

    /// The cluster: memory nodes `0..m`, compute nodes `m..m+c`, then symmetric nodes, with the
    /// given region size per kind (a symmetric node gets the memory size; rounded up to words).
    pub fn cluster(&self, memory_region_bytes: u64, compute_region_bytes: u64) -> Cluster {
        let mut kinds = vec![NodeKind::Memory; self.memory_nodes as usize];
        kinds.extend(std::iter::repeat_n(NodeKind::Compute, self.compute_nodes as usize));
        kinds.extend(std::iter::repeat_n(NodeKind::Symmetric, self.symmetric_nodes as usize));
        let region_size_bytes = kinds
            .iter()
            .map(|k| match k {
                // Saturating: an absurd scenario's size is reported by the run's memory
                // check, not by an overflow here.
                NodeKind::Memory | NodeKind::Symmetric => {
                    memory_region_bytes.checked_next_multiple_of(8).unwrap_or(u64::MAX - 7)
                }
                NodeKind::Compute => compute_region_bytes.checked_next_multiple_of(8).unwrap_or(u64::MAX - 7),
            })
            .collect();
        Cluster { kinds, region_size_bytes }
    }
}
