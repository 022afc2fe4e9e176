//! Swarm testing (TigerBeetle VOPR style), for any protocol: each seed draws its own
//! configuration from ranges the scenario's `fuzz` section gives, over the same dotted paths a
//! sweep writes, so the fuzzed point is an ordinary scenario point with a few fields changed.
//!
//! ```json
//! "fuzz": {
//!   "swarm": {
//!     "workload.read_ratio": { "between": [0.2, 0.8] },
//!     "workload.zipf_theta": [0.0, 0.99],
//!     "cluster.nic_overrides.jitter_ns_max": [0, 300, 3000],
//!     "protocol_options.lease_gamma": [null, 2, 256]
//!   },
//!   "horizon_ns": 100000,
//!   "check_every_event": true
//! }
//! ```
//!
//! A list is a choice (one value per seed), `{ "between": [low, high] }` a uniform draw. Paths
//! are drawn in sorted order from a stream salted away from the workload's, so adding a path
//! changes only that path's values for later paths' draws, never the workload streams.
//! Faults are drawn here too: rates are drawn even when a family is off, so enabling one family
//! never changes what the others draw for the same seed.

use std::collections::BTreeMap;

use dmsim_protocols::nic::NodeId;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use serde_json::Value;

use super::target::Faults;
use crate::engine::FaultPlan;
use crate::scenario::load::parse_typed;
use crate::scenario::Problem;

/// The scenario's `fuzz` section.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FuzzSpec {
    /// Dotted path → what each seed draws for it.
    #[serde(default)]
    pub swarm: BTreeMap<String, Draw>,
    /// Roughly how long a run lasts (ns): faults are placed in `[0, horizon_ns)`.
    #[serde(default = "horizon")]
    pub horizon_ns: u64,
    /// Check the protocol's invariants after every event (off: only the history and
    /// end-of-run checks).
    #[serde(default = "yes")]
    pub check_every_event: bool,
}

fn horizon() -> u64 {
    100_000
}
fn yes() -> bool {
    true
}

/// One path's distribution.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Draw {
    /// One of these values.
    OneOf(Vec<Value>),
    /// Uniform in `[low, high]`.
    Between { between: [f64; 2] },
}

impl FuzzSpec {
    /// Parse the `fuzz` section (`null`: no swarm, default horizon).
    pub fn parse(value: &Value) -> Result<FuzzSpec, Vec<Problem>> {
        let spec: FuzzSpec = if value.is_null() {
            FuzzSpec::default()
        } else {
            parse_typed(value, "fuzz").map_err(|p| vec![p])?
        };
        let spec = FuzzSpec { horizon_ns: if value.is_null() { horizon() } else { spec.horizon_ns }, ..spec };
        let mut out = Vec::new();
        for (path, draw) in &spec.swarm {
            let at = format!("fuzz.swarm.{path}");
            let root = path.split('.').next().unwrap_or("");
            if !["cluster", "workload", "protocol_options", "faults"].contains(&root) {
                out.push(Problem::new(
                    at.clone(),
                    "must start with cluster, workload, protocol_options or faults",
                ));
            }
            match draw {
                Draw::OneOf(values) if values.is_empty() => {
                    out.push(Problem::new(at, "needs at least one value"))
                }
                Draw::Between { between: [lo, hi] } if !(lo.is_finite() && hi.is_finite() && lo <= hi) => {
                    out.push(Problem::new(at, "between needs finite [low, high] with low ≤ high"))
                }
                _ => {}
            }
        }
        if spec.horizon_ns == 0 {
            out.push(Problem::new("fuzz.horizon_ns", "must be positive"));
        }
        if out.is_empty() {
            Ok(spec)
        } else {
            Err(out)
        }
    }

    /// Every value a path can take that validation should try (a list's values, a range's ends).
    pub fn corners(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for (path, draw) in &self.swarm {
            match draw {
                Draw::OneOf(values) => out.extend(values.iter().map(|v| (path.clone(), v.clone()))),
                Draw::Between { between } => {
                    out.extend(between.iter().map(|v| (path.clone(), Value::from(*v))))
                }
            }
        }
        out
    }

    /// Every combination of the paths' corner values (a list's values, a range's ends), or
    /// `None` when there are more than `limit`.
    pub fn combinations(&self, limit: usize) -> Option<Vec<Vec<(String, Value)>>> {
        let mut out: Vec<Vec<(String, Value)>> = vec![Vec::new()];
        for (path, draw) in &self.swarm {
            let values: Vec<Value> = match draw {
                Draw::OneOf(values) => values.clone(),
                Draw::Between { between } => between.iter().map(|v| Value::from(*v)).collect(),
            };
            if out.len().saturating_mul(values.len()) > limit {
                return None;
            }
            out = out
                .iter()
                .flat_map(|prefix| {
                    values.iter().map(move |v| {
                        let mut next = prefix.clone();
                        next.push((path.clone(), v.clone()));
                        next
                    })
                })
                .collect();
        }
        Some(out)
    }
}

/// The nodes with clients of the point some overrides make.
pub type ClientsOf<'a> = dyn Fn(&[(String, Value)]) -> Vec<NodeId> + 'a;

/// What one seed drew.
#[derive(Clone, Debug, PartialEq)]
pub struct Swarm {
    /// `(path, value)` overrides, in path order.
    pub overrides: Vec<(String, Value)>,
    pub faults: FaultPlan,
    /// `(node, at_ns)` of a crash, if one was drawn.
    pub crash: Option<(NodeId, u64)>,
}

impl std::fmt::Display for Swarm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut first = true;
        for (path, value) in &self.overrides {
            let short = path.rsplit('.').next().unwrap_or(path);
            let shown = match value.as_f64() {
                Some(x) if value.is_f64() => format!("{x:.2}"),
                _ => value.to_string(),
            };
            write!(f, "{}{short}={shown}", if first { "" } else { " " })?;
            first = false;
        }
        let p = &self.faults;
        if p.send_delay_permille > 0 {
            write!(f, " delay={}‰≤{}ns", p.send_delay_permille, p.send_delay_ns_max)?;
        }
        if p.send_drop_permille > 0 {
            write!(f, " drop={}‰(rto {}ns)", p.send_drop_permille, p.send_retransmit_ns)?;
        }
        if p.verb_delay_permille > 0 {
            write!(f, " verb-delay={}‰≤{}ns", p.verb_delay_permille, p.verb_delay_ns_max)?;
        }
        if p.response_delay_permille > 0 {
            write!(f, " response-delay={}‰≤{}ns", p.response_delay_permille, p.response_delay_ns_max)?;
        }
        for (node, from, until) in &p.pauses {
            if *until == u64::MAX {
                write!(f, " crash=n{}@{from}ns", node.0)?;
            } else {
                write!(f, " pause=n{}@{from}..{until}ns", node.0)?;
            }
        }
        Ok(())
    }
}

/// Deliberately different from the workload streams (which use the seed directly).
const SWARM_SALT: u64 = 0x5157_4152_4d00_0001;

/// The swarm of `seed`: a pure function of the seed, the spec and the client nodes pauses and
/// crashes may hit, which `clients_of` gives for the drawn overrides (a swarm may draw the
/// cluster's size). The number of draws never depends on them, so a fixed cluster draws the
/// same faults whatever else the swarm varies.
pub fn draw(spec: &FuzzSpec, seed: u64, faults: Faults, clients_of: &ClientsOf) -> Swarm {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ SWARM_SALT);
    let mut unit = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let pick = |n: usize, u: f64| ((u * n as f64) as usize).min(n.max(1) - 1);
    let mut overrides = Vec::new();
    for (path, d) in &spec.swarm {
        let u = unit();
        let value = match d {
            Draw::OneOf(values) => values[pick(values.len(), u)].clone(),
            Draw::Between { between: [lo, hi] } => Value::from(lo + (hi - lo) * u),
        };
        overrides.push((path.clone(), value));
    }
    let compute_nodes = clients_of(&overrides);
    let compute_nodes = compute_nodes.as_slice();
    let horizon = spec.horizon_ns.max(1);
    let mut plan = FaultPlan::default();
    let (delay_rate, delay_max) = ([0, 50, 200][pick(3, unit())], [2_000, 20_000][pick(2, unit())]);
    let (drop_rate, rto) = ([0, 20, 100][pick(3, unit())], [10_000, 50_000][pick(2, unit())]);
    let pause_count = pick(3, unit());
    let mut pauses = Vec::new();
    for _ in 0..2 {
        let node = compute_nodes[pick(compute_nodes.len(), unit())];
        let from = (unit() * horizon as f64) as u64;
        let length = 2_000 + (unit() * 48_000.0) as u64;
        pauses.push((node, from, from + length));
    }
    let crash_at = (unit() * horizon as f64) as u64;
    let crash_node = compute_nodes[pick(compute_nodes.len(), unit())];
    let crash_drawn = unit() < 0.5;
    if faults.delay {
        plan.send_delay_permille = delay_rate;
        plan.send_delay_ns_max = delay_max;
    }
    if faults.drop {
        plan.send_drop_permille = drop_rate;
        plan.send_retransmit_ns = rto;
    }
    if faults.pause {
        plan.pauses.extend(pauses.into_iter().take(pause_count));
    }
    if faults.verb_delay {
        // Drawn after every other decision, and only when asked for, so the swarms of
        // campaigns without it stay as they were.
        plan.verb_delay_permille = [20, 100, 300][pick(3, unit())];
        plan.verb_delay_ns_max = [2_000, 20_000][pick(2, unit())];
    }
    if faults.response_delay {
        // After verb-delay's draws, for the same reason.
        plan.response_delay_permille = [20, 100, 300][pick(3, unit())];
        plan.response_delay_ns_max = [2_000, 20_000][pick(2, unit())];
    }
    let crash = (faults.crash && crash_drawn).then_some((crash_node, crash_at));
    if let Some((node, at)) = crash {
        plan.pauses.push((node, at, u64::MAX));
    }
    Swarm { overrides, faults: plan, crash }
}
