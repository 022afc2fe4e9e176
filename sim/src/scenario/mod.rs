//! Scenario files: what to run, swept over which axes, compared with which paper numbers.
//!
//! A scenario is one JSON document. Its `cluster`, `protocol`, `protocol_options` and
//! `workload` sections describe one simulation; `sweep` names up to three axes (`panels`,
//! `series`, `x`), each a list of values written into the document at a dotted path (or a list
//! of `{ "dotted.path": value, … }` override objects), and every combination — times `run.seeds`
//! seeds — is one *point*, one independent run. `plot` says which metric to draw and
//! `paper_values` which numbers from the paper to put beside the simulated ones.
//!
//! Loading is the edge where bad input is caught: every problem is reported with its field path
//! (`cluster.compute_nodes: must be at least 1`), and nothing past this module sees raw JSON
//! except the per-protocol `workload`/`protocol_options`, which each runner parses with paths.

pub mod faults;
pub mod load;
pub mod results;
pub mod schema;
pub mod strict_json;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use dmsim_protocols::harness::Problem;
pub use load::{load, load_str, ScenarioError};

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// The JSON Schema of scenario files (`dmsim schema`), for editors; ignored by dmsim.
    #[serde(default, rename = "$schema", skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Folder under `results/`: the paper (`selcc`, `nic`, …).
    pub paper: String,
    /// Folder under `results/<paper>/`.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Which protocol definition (a name in the CLI's registry: `nic_micro`, `selcc`, `gam`, …).
    pub protocol: String,
    pub cluster: ClusterSpec,
    #[serde(default)]
    pub protocol_options: Value,
    #[serde(default)]
    pub workload: Value,
    /// Also run each point with these overrides applied (`{ "<name>": { "<dotted.path>": value } }`,
    /// paths into `protocol`, `cluster`, `workload`, `protocol_options`) and emit
    /// `ref_<name>_mops` and `speedup_<name>` = throughput / the reference's throughput, so a
    /// paper's "N× over X" claims are first-class metrics (also `speedup_<name>_by_thread_mops`
    /// when both runs report `thread_mops`). Any protocol may be the reference.
    #[serde(default)]
    pub compare_with: BTreeMap<String, serde_json::Map<String, Value>>,
    /// `dmsim fuzz`: what each seed's swarm draws and how faults are placed ([`crate::fuzz::swarm`]).
    #[serde(default)]
    pub fuzz: Value,
    /// Faults injected into every run of this scenario (`dmsim run` and `dmsim fuzz`), see
    /// [`faults::FaultsSpec`].
    #[serde(default, skip_serializing_if = "faults_none")]
    pub faults: faults::FaultsSpec,
    #[serde(default)]
    pub sweep: Sweep,
    #[serde(default)]
    pub run: RunSpec,
    #[serde(default)]
    pub plot: PlotSpec,
    #[serde(default)]
    pub paper_values: Vec<PaperValue>,
    /// What was scaled down from the paper and how, for the report.
    #[serde(default)]
    pub scaling_note: String,
    /// Calibration role: empty for a prediction, else which knobs this figure calibrated.
    #[serde(default)]
    pub calibration_note: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterSpec {
    pub memory_nodes: u16,
    pub compute_nodes: u16,
    /// Nodes with both a cache and memory (ScaleStore), numbered after the compute nodes.
    #[serde(default)]
    pub symmetric_nodes: u16,
    pub nic_profile: String,
    /// Single-field overrides of the named profile (`{"atomic_service_ns": 300}`).
    #[serde(default)]
    pub nic_overrides: serde_json::Map<String, Value>,
    /// Modelled cores per memory node (`null`: unmodelled).
    #[serde(default)]
    pub memory_node_cores: Option<u32>,
    /// Share of each memory-node core available (1.0 dedicated; "stranded" ≈ 0.05).
    #[serde(default = "one")]
    pub memory_node_cpu_share: f64,
    #[serde(default)]
    pub torn_large_verbs: bool,
    /// Modelled cores per compute node (`null`: unmodelled, `cpu` costs time but never queues);
    /// e.g. CMCache's manager or DEX's compute:memory core ratios.
    #[serde(default)]
    pub compute_node_cores: Option<u32>,
    /// Give every memory node the profile's NIC device memory (`device_memory_bytes`), its own
    /// address space with a faster atomic unit (Sherman's lock table).
    #[serde(default)]
    pub device_memory: bool,
    /// Bytes of a storage device on every node (0: none); latency, bandwidth and queue depth
    /// come from the profile's `ssd_*` knobs.
    #[serde(default)]
    pub ssd_bytes_per_node: u64,
}

fn faults_none(f: &faults::FaultsSpec) -> bool {
    f == &faults::FaultsSpec::default()
}

fn one() -> f64 {
    1.0
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    pub panels: Option<Axis>,
    pub series: Option<Axis>,
    pub x: Option<Axis>,
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Axis {
    /// Dotted path the values are written to; without it each value is an override object.
    #[serde(default)]
    pub path: Option<String>,
    pub values: Vec<Value>,
    /// Display names (legend entries, panel titles, x categories); default: the values.
    #[serde(default)]
    pub names: Option<Vec<String>>,
    #[serde(default)]
    pub label: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    #[serde(default = "one_u32")]
    pub seeds: u32,
    #[serde(default = "one_u64")]
    pub seed: u64,
    #[serde(default = "time_max")]
    pub time_ns_max: u64,
    #[serde(default = "events_max")]
    pub events_max: u64,
    /// Check mode: log every client operation for the history checkers and, in the simulator,
    /// run the protocol's invariants after every event (slow; for tests and small runs).
    #[serde(default)]
    pub check: bool,
    /// Store every payload byte even in a measuring run. By default a run without `check`
    /// stores only the words of the payload spans a protocol declares meaningful
    /// (`Plan::payload_spans`; metrics are identical, memory per line drops to a few words).
    #[serde(default)]
    pub full_payload: bool,
    /// Add the fabric's queueing breakdown to the metrics: for each node kind and resource
    /// (NIC issue and processing rates, link directions, per-word atomic unit, modelled cores),
    /// `fabric_wait_<kind>_<resource>_ns_per_verb`, the whole run's queueing there over every
    /// verb executed. A diagnosis of which resource a slow run waits on; off by default (the
    /// columns would change every results file).
    #[serde(default)]
    pub fabric_waits: bool,
}

fn one_u32() -> u32 {
    1
}
fn one_u64() -> u64 {
    1
}
fn time_max() -> u64 {
    10_000_000_000
}
fn events_max() -> u64 {
    2_000_000_000
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            seeds: 1,
            seed: 1,
            time_ns_max: time_max(),
            events_max: events_max(),
            check: false,
            full_payload: false,
            fabric_waits: false,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlotSpec {
    #[serde(default)]
    pub title: String,
    /// The metric on the y axis (a key of the runner's metrics).
    #[serde(default)]
    pub y_metric: String,
    #[serde(default)]
    pub y_label: String,
    #[serde(default)]
    pub x_label: String,
    #[serde(default)]
    pub x_log: bool,
    #[serde(default)]
    pub y_log: bool,
    #[serde(default)]
    pub bars: bool,
    #[serde(default)]
    pub columns: Option<usize>,
    /// One y scale for all panels, where the paper's panels share one.
    #[serde(default)]
    pub shared_y: bool,
    /// A second metric drawn as bars in a panel beside each panel (e.g. SELCC Fig. 12's
    /// invalidation ratio, which the paper draws as bars under its throughput lines).
    #[serde(default)]
    pub secondary_metric: String,
    #[serde(default)]
    pub secondary_label: String,
}

/// One number the paper reports, located by axis names, with the trend it should show.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PaperValue {
    pub claim: String,
    #[serde(default)]
    pub panel: Option<String>,
    #[serde(default)]
    pub series: Option<String>,
    #[serde(default)]
    pub x: Option<String>,
    pub metric: String,
    /// The paper's number; absent for a trend-only row (a qualitative statement).
    #[serde(default)]
    pub value: Option<f64>,
    /// Relative tolerance; default 0.25.
    #[serde(default)]
    pub tolerance: Option<f64>,
    /// `higher_than:<series>` / `lower_than:<series>` at the same panel and x, or
    /// `higher_than_x:<x>` / `lower_than_x:<x>` against another x of the same series, or
    /// `within_x:<x>` (within `tolerance`, default 25 %, of another x's value: "stable"), or
    /// `within:<series>` (within `tolerance` of another series at the same x: "similar to"), or
    /// `higher_than_panel:<panel>` / `lower_than_panel:<panel>` at the same series and x, or
    /// `fall_from_peak_above:V` (the series' peak over every x is more than V times this x), or
    /// `fall_from_peak_below:V` (less than V times: "degrades gracefully"), or
    /// `increasing` / `decreasing` along x for this series, or `above:X` / `below:X` (e.g. a
    /// speedup claim's direction: `above:1`).
    #[serde(default)]
    pub trend: Option<String>,
    /// Compare an aggregate over every x of this panel and series instead of one x (`x` must
    /// be absent): `max`, `min`, `mean` (arithmetic) or `geomean` — a paper's "up to N×" or
    /// "N× on average" over all its workloads — or `peak_ratio` (with `ratio_to`: this series'
    /// peak over every x divided by the other series' peak, "N× at peak throughput"). Only
    /// `above:`/`below:` trends apply to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate: Option<String>,
    /// Compare this series' metric divided by series `ratio_to`'s at the same panel and x (a
    /// paper's "N× over X" without re-running X as a `compare_with` reference). Only
    /// `above:`/`below:` trends apply to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_to: Option<String>,
    /// Compare `metric` divided by metric `divide_by` at the same cell (e.g. one `compare_with`
    /// reference's throughput over another's, `ref_<a>_thread_mops` over `ref_<b>_thread_mops`:
    /// a paper's step-by-step ablation). Only `above:`/`below:` trends apply to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divide_by: Option<String>,
    #[serde(default)]
    pub note: String,
}

impl PaperValue {
    /// The row's relative tolerance: `tolerance`, or ±25 % when the row gives none.
    pub fn tolerance(&self) -> f64 {
        self.tolerance.unwrap_or(0.25)
    }
}

/// One run: the scenario with every axis resolved, plus where it sits in the sweep.
#[derive(Clone, Debug)]
pub struct Point {
    pub index: usize,
    pub panel: Option<(usize, String)>,
    pub series: Option<(usize, String)>,
    pub x: Option<(usize, String, f64)>,
    pub seed: u64,
    pub config: PointConfig,
}

/// The parts of a scenario one run needs, after the sweep's overrides.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PointConfig {
    pub protocol: String,
    pub cluster: ClusterSpec,
    #[serde(default)]
    pub protocol_options: Value,
    #[serde(default)]
    pub workload: Value,
    #[serde(default)]
    pub compare_with: BTreeMap<String, serde_json::Map<String, Value>>,
    pub run: RunSpec,
    #[serde(default)]
    pub faults: faults::FaultsSpec,
}

/// A loaded, validated scenario and its expanded points.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub file: ScenarioFile,
    pub source: String,
    pub points: Vec<Point>,
}
