//! Loading a scenario file: parse with field paths, expand the sweep, validate every point.

use std::fmt;
use std::path::Path;

use serde_json::Value;

use super::{Axis, Point, PointConfig, Problem, Scenario, ScenarioFile};
use crate::fabric::Profile;
use crate::runners::Registry;

/// Every problem found in one file. Displayed as one `error: <file>: <path>: <reason>` line each.
#[derive(Clone, Debug)]
pub struct ScenarioError {
    pub file: String,
    pub problems: Vec<Problem>,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            let path = if p.path.is_empty() { "(top level)" } else { &p.path };
            write!(f, "error: {}: {}: {}", self.file, path, p.reason)?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

pub fn load(path: &Path, registry: &Registry) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let text = super::strict_json::read_input(path).map_err(|e| ScenarioError {
        file: file.clone(),
        problems: vec![Problem::new("", format!("cannot read: {e}"))],
    })?;
    load_in(&file, &text, path.parent(), registry)
}

pub fn load_str(file: &str, text: &str, registry: &Registry) -> Result<Scenario, ScenarioError> {
    load_in(file, text, None, registry)
}

/// [`load_str`] for a file in directory `base`: a relative `cluster.nic_profile` path (a
/// profile JSON, e.g. from `dmsim hw calibrate`) is taken relative to the scenario file.
fn load_in(
    file: &str,
    text: &str,
    base: Option<&Path>,
    registry: &Registry,
) -> Result<Scenario, ScenarioError> {
    let fail = |problems: Vec<Problem>| ScenarioError { file: file.to_string(), problems };
    let mut raw: Value = super::strict_json::parse(text)
        .map_err(|e| fail(vec![Problem::new("", format!("malformed JSON: {e}"))]))?;
    if let (Some(base), Some(Value::String(name))) = (base, raw.pointer_mut("/cluster/nic_profile")) {
        if is_profile_path(name) && Path::new(name.as_str()).is_relative() {
            *name = base.join(name.as_str()).display().to_string();
        }
    }
    let parsed: ScenarioFile = parse_typed(&raw, "").map_err(|p| fail(vec![p]))?;
    let problems = check_file(&parsed);
    if !problems.is_empty() {
        return Err(fail(problems));
    }
    let points = expand(&raw, &parsed).map_err(|p| fail(vec![p]))?;
    let mut distinct = DistinctProblems::default();
    for point in &points {
        for p in check_point(&point.config, registry) {
            distinct.add(p, || point_context(point), "points");
        }
    }
    if !distinct.is_empty() {
        return Err(fail(distinct.into_problems()));
    }
    Ok(Scenario { file: parsed, source: text.to_string(), points })
}

pub use dmsim_protocols::harness::{join_path, parse_typed};

/// Problems met at many points of one file (sweep points, swarm combinations): each distinct
/// (path, reason) once, with the context of the first point that showed it and how many more
/// did — so one bad field is one line, not one per point.
#[derive(Default)]
pub(crate) struct DistinctProblems {
    found: Vec<(Problem, String, &'static str, usize)>,
}

impl DistinctProblems {
    /// `context` (e.g. " (at series x)") is built only for a problem not seen before; `unit`
    /// names what the others are ("points", "combinations").
    pub fn add(&mut self, problem: Problem, context: impl FnOnce() -> String, unit: &'static str) {
        match self.found.iter_mut().find(|(p, ..)| *p == problem) {
            Some(entry) => entry.3 += 1,
            None => self.found.push((problem, context(), unit, 0)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    pub fn len(&self) -> usize {
        self.found.len()
    }

    pub fn into_problems(self) -> Vec<Problem> {
        self.found
            .into_iter()
            .map(|(p, context, unit, more)| {
                let more = if more > 0 { format!(" and {more} more {unit}") } else { String::new() };
                Problem::new(p.path, format!("{}{context}{more}", p.reason))
            })
            .collect()
    }
}

fn point_context(point: &Point) -> String {
    let mut parts = Vec::new();
    if let Some((_, name)) = &point.panel {
        parts.push(format!("panel {name}"));
    }
    if let Some((_, name)) = &point.series {
        parts.push(format!("series {name}"));
    }
    if let Some((_, name, _)) = &point.x {
        parts.push(format!("x {name}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" (at {})", parts.join(", "))
    }
}

/// Checks that need only the file, not a point.
fn check_file(file: &ScenarioFile) -> Vec<Problem> {
    let mut out = Vec::new();
    for (field, value) in [("paper", &file.paper), ("name", &file.name)] {
        if value.is_empty() || value.contains(['/', '\\']) || value.starts_with('.') {
            out.push(Problem::new(field, format!("must be a plain folder name, got {value:?}")));
        }
    }
    if file.run.seeds == 0 {
        out.push(Problem::new("run.seeds", "must be at least 1"));
    }
    if file.run.time_ns_max == 0 {
        out.push(Problem::new("run.time_ns_max", "must be positive"));
    }
    for (name, axis) in [("panels", &file.sweep.panels), ("series", &file.sweep.series), ("x", &file.sweep.x)]
    {
        let Some(axis) = axis else { continue };
        let at = format!("sweep.{name}");
        if axis.values.is_empty() {
            out.push(Problem::new(format!("{at}.values"), "must not be empty"));
        }
        if let Some(names) = &axis.names {
            if names.len() != axis.values.len() {
                out.push(Problem::new(
                    format!("{at}.names"),
                    format!("has {} names for {} values", names.len(), axis.values.len()),
                ));
            }
        }
        if axis.path.is_none() {
            for (i, v) in axis.values.iter().enumerate() {
                if !v.is_object() {
                    out.push(Problem::new(
                        format!("{at}.values[{i}]"),
                        "without `path`, each value must be an object of {\"dotted.path\": value} overrides",
                    ));
                }
            }
        }
    }
    if !file.plot.y_metric.is_empty() && file.sweep.x.is_none() && file.sweep.series.is_none() {
        out.push(Problem::new("plot.y_metric", "a plot needs a sweep.x or sweep.series axis"));
    }
    for (i, pv) in file.paper_values.iter().enumerate() {
        if pv.aggregate.is_some() && pv.x.is_some() {
            out.push(Problem::new(
                format!("paper_values[{i}].x"),
                "an aggregate row is over every x: give no x",
            ));
        }
        if let Some(t) = pv.tolerance {
            if !(t.is_finite() && t > 0.0) {
                out.push(Problem::new(format!("paper_values[{i}].tolerance"), "must be a positive fraction"));
            }
        }
        match pv.value {
            Some(v) if !v.is_finite() => {
                out.push(Problem::new(format!("paper_values[{i}].value"), "must be a finite number"))
            }
            None if pv.trend.is_none() => out.push(Problem::new(
                format!("paper_values[{i}]"),
                "needs a value (the paper's number) or a trend (a qualitative statement), or both",
            )),
            _ => {}
        }
    }
    out
}

/// Checks on one resolved point: cluster shape, profile, then the runner's own.
pub fn check_point(config: &PointConfig, registry: &Registry) -> Vec<Problem> {
    let mut out = Vec::new();
    let c = &config.cluster;
    if c.memory_nodes == 0 && c.symmetric_nodes == 0 {
        out.push(Problem::new("cluster.memory_nodes", "must be at least 1 (or give symmetric_nodes)"));
    }
    if c.compute_nodes == 0 && c.symmetric_nodes == 0 {
        out.push(Problem::new("cluster.compute_nodes", "must be at least 1 (or give symmetric_nodes)"));
    }
    if c.memory_nodes as u32 + c.compute_nodes as u32 + c.symmetric_nodes as u32 > 1024 {
        out.push(Problem::new("cluster", "at most 1024 nodes"));
    }
    if c.compute_node_cores == Some(0) {
        out.push(Problem::new("cluster.compute_node_cores", "must be at least 1 (null: unmodelled)"));
    }
    if c.memory_node_cores == Some(0) {
        out.push(Problem::new(
            "cluster.memory_node_cores",
            "must be at least 1 (use memory_node_cpu_share for stranded)",
        ));
    }
    if !(c.memory_node_cpu_share.is_finite()
        && c.memory_node_cpu_share > 0.0
        && c.memory_node_cpu_share <= 1.0)
    {
        out.push(Problem::new("cluster.memory_node_cpu_share", "must be in (0, 1]"));
    }
    match resolve_profile(c) {
        Ok(profile) if c.device_memory && profile.device_memory_bytes == 0 => out.push(Problem::new(
            "cluster.device_memory",
            format!("profile {} has no NIC device memory (device_memory_bytes is 0)", c.nic_profile),
        )),
        Ok(_) => {}
        Err(mut p) => out.append(&mut p),
    }
    out.extend(config.faults.check(c, &config.run));
    out.extend(registry.check(config));
    out
}

/// The named profile with the scenario's overrides applied and validated.
/// A `nic_profile` naming a JSON file rather than a compiled-in profile.
fn is_profile_path(name: &str) -> bool {
    name.ends_with(".json")
}

/// A profile JSON file (as `dmsim hw calibrate --out` writes).
fn profile_file(path: &str) -> Result<Profile, Problem> {
    let at = "cluster.nic_profile";
    let text = super::strict_json::read_input(path).map_err(|e| Problem::new(at, format!("{path}: {e}")))?;
    let value: Value = super::strict_json::parse(&text)
        .map_err(|e| Problem::new(at, format!("{path}: malformed JSON: {e}")))?;
    parse_typed(&value, "")
        .map_err(|p| Problem::new(at, format!("{path}: not a NIC profile: {}: {}", p.path, p.reason)))
}

/// How many resolved compiled-in profiles a thread remembers (a campaign draws a few override
/// combinations; a sweep a few points).
const PROFILES_REMEMBERED: usize = 64;

thread_local! {
    /// Compiled-in profiles with their overrides, resolved: `(name + overrides as JSON, profile)`.
    /// The fuzzer resolves one per schedule, and parsing and re-checking it was ~4 % of a
    /// `fuzz-small` campaign. A pure function of the key, so remembering it cannot change a run.
    static RESOLVED_PROFILES: std::cell::RefCell<Vec<(String, Profile)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The NIC profile of a cluster: the named (or file) profile with `nic_overrides` applied.
pub fn resolve_profile(c: &super::ClusterSpec) -> Result<Profile, Vec<Problem>> {
    if is_profile_path(&c.nic_profile) {
        // A file may change between calls: read it every time.
        return resolve_profile_uncached(c);
    }
    let key = format!("{}\n{}", c.nic_profile, Value::Object(c.nic_overrides.clone()));
    let known =
        RESOLVED_PROFILES.with(|r| r.borrow().iter().find(|(k, _)| *k == key).map(|(_, p)| p.clone()));
    if let Some(profile) = known {
        return Ok(profile);
    }
    let profile = resolve_profile_uncached(c)?;
    RESOLVED_PROFILES.with(|r| {
        let mut r = r.borrow_mut();
        if r.len() >= PROFILES_REMEMBERED {
            r.clear();
        }
        r.push((key, profile.clone()));
    });
    Ok(profile)
}

fn resolve_profile_uncached(c: &super::ClusterSpec) -> Result<Profile, Vec<Problem>> {
    let base = if is_profile_path(&c.nic_profile) {
        profile_file(&c.nic_profile).map_err(|p| vec![p])?
    } else {
        Profile::named(&c.nic_profile).ok_or_else(|| {
            vec![Problem::new(
                "cluster.nic_profile",
                format!(
                    "unknown profile {:?} (known: {}, or a path to a profile .json)",
                    c.nic_profile,
                    Profile::names().join(", ")
                ),
            )]
        })?
    };
    let mut value = serde_json::to_value(&base).expect("profile serializes");
    for (k, v) in &c.nic_overrides {
        if !value.as_object().unwrap().contains_key(k) || k == "notes" || k == "name" {
            return Err(vec![Problem::new(format!("cluster.nic_overrides.{k}"), "not a profile knob")]);
        }
        value[k] = v.clone();
    }
    let profile: Profile = parse_typed(&value, "cluster.nic_overrides").map_err(|p| vec![p])?;
    let problems: Vec<Problem> = profile
        .problems()
        .into_iter()
        .map(|(field, reason)| {
            let at = if c.nic_overrides.contains_key(&field) {
                "cluster.nic_overrides"
            } else {
                "cluster.nic_profile"
            };
            Problem::new(format!("{at}.{field}"), reason)
        })
        .collect();
    if problems.is_empty() {
        Ok(profile)
    } else {
        Err(problems)
    }
}

fn axis_name(axis: &Axis, i: usize) -> String {
    if let Some(names) = &axis.names {
        return names[i].clone();
    }
    match &axis.values[i] {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

fn axis_x(axis: &Axis, i: usize) -> f64 {
    axis.values[i].as_f64().unwrap_or(i as f64)
}

/// Write `value` at a dotted path, creating objects on the way.
fn set_path(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let mut cursor = doc;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() {
            return Err(format!("empty segment in path {path:?}"));
        }
        if cursor.is_null() {
            *cursor = Value::Object(Default::default());
        }
        let Some(object) = cursor.as_object_mut() else {
            return Err(format!("{:?} is not an object", parts[..i].join(".")));
        };
        if i + 1 == parts.len() {
            object.insert(part.to_string(), value);
            return Ok(());
        }
        cursor = object.entry(part.to_string()).or_insert(Value::Null);
    }
    Ok(())
}

/// The single point of scenario `raw` (its sweep ignored) with `overrides` written at their
/// dotted paths: how the fuzzer turns a seed's swarm into an ordinary point.
pub fn resolve_point(raw: &Value, overrides: &[(String, Value)]) -> Result<PointConfig, Problem> {
    let mut doc = raw.clone();
    for (path, value) in overrides {
        set_path(&mut doc, path, value.clone()).map_err(|e| Problem::new(path.clone(), e))?;
    }
    let resolved: ScenarioFile = parse_typed(&doc, "")?;
    Ok(PointConfig {
        protocol: resolved.protocol,
        cluster: resolved.cluster,
        protocol_options: resolved.protocol_options,
        workload: resolved.workload,
        compare_with: resolved.compare_with,
        run: resolved.run,
        faults: resolved.faults,
    })
}

fn apply_axis(doc: &mut Value, axis: &Axis, i: usize, at: &str) -> Result<(), Problem> {
    let value = axis.values[i].clone();
    let result = match &axis.path {
        Some(path) => set_path(doc, path, value).map_err(|e| Problem::new(format!("{at}.path"), e)),
        None => {
            let mut r = Ok(());
            for (k, v) in value.as_object().expect("checked").iter() {
                if let Err(e) = set_path(doc, k, v.clone()) {
                    r = Err(Problem::new(format!("{at}.values[{i}].{k}"), e));
                    break;
                }
            }
            r
        }
    };
    if let Some(path) = &axis.path {
        if ["paper", "name", "sweep", "plot", "paper_values", "fuzz"]
            .contains(&path.split('.').next().unwrap_or(""))
        {
            return Err(Problem::new(format!("{at}.path"), "may not sweep the scenario's own metadata"));
        }
    }
    result
}

/// Most points one scenario file may expand to (panels × series × x × seeds). A dry run parses
/// each point (~0.1 ms), so this bounds it near ten seconds; a real run of that many points would
/// take days, which is a typo more often than a plan.
pub const POINTS_MAX: u64 = 100_000;

fn expand(raw: &Value, file: &ScenarioFile) -> Result<Vec<Point>, Problem> {
    let one = |a: &Option<Axis>| a.as_ref().map_or(1, |a| a.values.len());
    let (np, ns, nx) = (one(&file.sweep.panels), one(&file.sweep.series), one(&file.sweep.x));
    let total = [np, ns, nx, file.run.seeds as usize].iter().fold(1u64, |n, &k| n.saturating_mul(k as u64));
    if total > POINTS_MAX {
        return Err(Problem::new(
            "sweep",
            format!(
                "expands to {total} points ({np} panels × {ns} series × {nx} x values × {} seeds); \
                 at most {POINTS_MAX} — split the sweep into several files",
                file.run.seeds
            ),
        ));
    }
    // Each point starts from the file without its sweep: copying the axes into every point made
    // expansion quadratic in the number of points (8,000 points took seconds, 80,000 minutes).
    let mut base = raw.clone();
    if let Some(object) = base.as_object_mut() {
        object.remove("sweep");
    }
    let mut points = Vec::with_capacity(total as usize);
    for p in 0..np {
        for s in 0..ns {
            for x in 0..nx {
                let mut doc = base.clone();
                if let Some(a) = &file.sweep.panels {
                    apply_axis(&mut doc, a, p, "sweep.panels")?;
                }
                if let Some(a) = &file.sweep.series {
                    apply_axis(&mut doc, a, s, "sweep.series")?;
                }
                if let Some(a) = &file.sweep.x {
                    apply_axis(&mut doc, a, x, "sweep.x")?;
                }
                let resolved: ScenarioFile = parse_typed(&doc, "")?;
                for k in 0..file.run.seeds as u64 {
                    let config = PointConfig {
                        protocol: resolved.protocol.clone(),
                        cluster: resolved.cluster.clone(),
                        protocol_options: resolved.protocol_options.clone(),
                        workload: resolved.workload.clone(),
                        compare_with: resolved.compare_with.clone(),
                        run: resolved.run.clone(),
                        faults: resolved.faults.clone(),
                    };
                    points.push(Point {
                        index: points.len(),
                        panel: file.sweep.panels.as_ref().map(|a| (p, axis_name(a, p))),
                        series: file.sweep.series.as_ref().map(|a| (s, axis_name(a, s))),
                        x: file.sweep.x.as_ref().map(|a| (x, axis_name(a, x), axis_x(a, x))),
                        seed: file.run.seed + k,
                        config,
                    });
                }
            }
        }
    }
    Ok(points)
}
