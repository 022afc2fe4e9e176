//! From points and their results to what `dmsim run` writes: the long-format table, the
//! figure in the paper's layout, the paper-vs-sim claims and the summary.

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};

use super::{PaperValue, Point, Scenario};
use crate::report::Figure;
use crate::report::{Mark, Panel, PaperClaim, Scale, Series, Table, Value};
use crate::runners::PointResult;

/// A cell of the sweep: (panel index, series index, x index).
type Cell = (usize, usize, usize);
/// A metric over a cell's seeds: (sum, count, min, max).
type Tally = (f64, u32, f64, f64);

/// The mean of `metric` over seeds at each (panel, series, x) cell, and its spread.
pub struct Cells {
    /// (panel index, series index, x index) → (metric → mean)
    pub means: BTreeMap<(usize, usize, usize), BTreeMap<String, f64>>,
    /// (panel index, series index, x index) → (metric → (min, max)), for cells run with
    /// several seeds.
    pub spreads: BTreeMap<Cell, BTreeMap<String, (f64, f64)>>,
}

fn key(p: &Point) -> (usize, usize, usize) {
    (
        p.panel.as_ref().map_or(0, |a| a.0),
        p.series.as_ref().map_or(0, |a| a.0),
        p.x.as_ref().map_or(0, |a| a.0),
    )
}

impl Cells {
    pub fn new(points: &[Point], results: &[PointResult]) -> Cells {
        // metric → (sum, count, min, max)
        let mut sums: BTreeMap<Cell, BTreeMap<String, Tally>> = BTreeMap::new();
        for (p, r) in points.iter().zip(results) {
            let cell = sums.entry(key(p)).or_default();
            for (m, v) in &r.metrics {
                let e = cell.entry(m.clone()).or_insert((0.0, 0, f64::INFINITY, f64::NEG_INFINITY));
                e.0 += v;
                e.1 += 1;
                e.2 = e.2.min(*v);
                e.3 = e.3.max(*v);
            }
        }
        let means = sums
            .iter()
            .map(|(k, ms)| (*k, ms.iter().map(|(m, (s, n, _, _))| (m.clone(), s / *n as f64)).collect()))
            .collect();
        let spreads = sums
            .into_iter()
            .map(|(k, ms)| {
                (k, ms.into_iter().filter(|e| e.1 .1 > 1).map(|(m, (_, _, lo, hi))| (m, (lo, hi))).collect())
            })
            .collect();
        Cells { means, spreads }
    }

    /// (min, max) over seeds, when the cell ran more than one.
    pub fn spread(&self, cell: (usize, usize, usize), metric: &str) -> Option<(f64, f64)> {
        self.spreads.get(&cell)?.get(metric).copied()
    }

    pub fn get(&self, cell: (usize, usize, usize), metric: &str) -> Option<f64> {
        self.means.get(&cell)?.get(metric).copied()
    }
}

/// Long format: one row per point, every metric a column.
pub fn table(points: &[Point], results: &[PointResult]) -> Table {
    let metric_names: Vec<String> = {
        let mut names: Vec<String> = results.iter().flat_map(|r| r.metrics.keys().cloned()).collect();
        names.sort();
        names.dedup();
        names
    };
    let mut columns: Vec<String> =
        ["point", "panel", "series", "x", "seed"].iter().map(|s| s.to_string()).collect();
    columns.extend(metric_names.iter().cloned());
    columns.extend(["events", "end_time_ns", "trace_hash"].iter().map(|s| s.to_string()));
    let mut t = Table::new(columns);
    for (p, r) in points.iter().zip(results) {
        let mut row = vec![
            Value::Int(p.index as i64),
            Value::Str(p.panel.as_ref().map(|a| a.1.clone()).unwrap_or_default()),
            Value::Str(p.series.as_ref().map(|a| a.1.clone()).unwrap_or_default()),
            Value::Str(p.x.as_ref().map(|a| a.1.clone()).unwrap_or_default()),
            Value::Int(p.seed as i64),
        ];
        for m in &metric_names {
            row.push(r.metrics.get(m).map_or(Value::Str(String::new()), |v| Value::Num(*v)));
        }
        row.push(Value::Int(r.events as i64));
        row.push(Value::Int(r.end_time_ns as i64));
        row.push(Value::Str(format!("{:016x}", r.trace_hash)));
        t.push_row(row);
    }
    t
}

/// The figure: one panel per `panels` value, one series per `series` value, y = the plot metric
/// (and, with `plot.secondary_metric`, a bar panel of that metric beside each panel); each
/// located paper claim is marked where it sits, labelled with its row number in `claims`.
pub fn figure(scenario: &Scenario, cells: &Cells, claims: &[PaperClaim]) -> Figure {
    let file = &scenario.file;
    let plot = &file.plot;
    let metric = if plot.y_metric.is_empty() { "throughput_mops" } else { &plot.y_metric };
    let names = |a: &Option<super::Axis>| -> Vec<String> {
        match a {
            None => vec![String::new()],
            Some(a) => (0..a.values.len())
                .map(|i| a.names.as_ref().map_or_else(|| axis_value_name(&a.values[i]), |n| n[i].clone()))
                .collect(),
        }
    };
    let panels = names(&file.sweep.panels);
    let series = names(&file.sweep.series);
    let xs: Vec<(String, f64)> = match &file.sweep.x {
        None => vec![(String::new(), 0.0)],
        Some(a) => (0..a.values.len())
            .map(|i| {
                let name = a.names.as_ref().map_or_else(|| axis_value_name(&a.values[i]), |n| n[i].clone());
                // A value that is not a number (a set of settings) is placed by its name when
                // the name is a number ("16" compute nodes).
                (name.clone(), a.values[i].as_f64().or_else(|| name.parse().ok()).unwrap_or(i as f64))
            })
            .collect(),
    };
    let numeric_x = file.sweep.x.as_ref().is_some_and(|a| {
        (0..a.values.len()).all(|i| {
            a.values[i].is_number()
                || a.names.as_ref().is_some_and(|n| n[i].parse::<f64>().is_ok_and(f64::is_finite))
        })
    });
    let bars = plot.bars || !numeric_x;
    let x_label = if plot.x_label.is_empty() {
        file.sweep.x.as_ref().and_then(|a| a.label.clone().or(a.path.clone())).unwrap_or_default()
    } else {
        plot.x_label.clone()
    };
    let y_label = if plot.y_label.is_empty() { metric.to_string() } else { plot.y_label.clone() };
    let secondary = (!plot.secondary_metric.is_empty()).then_some(plot.secondary_metric.as_str());
    let main_metric = metric;
    // Claims located on a cell: (panel, series, x index, claim index).
    let s = &file.sweep;
    let located: Vec<(usize, usize, usize, usize)> = file
        .paper_values
        .iter()
        .enumerate()
        // Aggregate and ratio rows are not values of the plotted metric: the table shows them.
        .filter(|(_, pv)| pv.aggregate.is_none() && pv.ratio_to.is_none() && pv.divide_by.is_none())
        .filter_map(|(i, pv)| {
            Some((
                find(&s.panels, &pv.panel).ok()?,
                find(&s.series, &pv.series).ok()?,
                find(&s.x, &pv.x).ok()?,
                i,
            ))
        })
        .collect();
    let mut figure = Figure::new(if plot.title.is_empty() { file.name.clone() } else { plot.title.clone() });
    figure.columns = plot.columns.unwrap_or(if secondary.is_some() { 2 } else { 0 });
    figure.shared_y = plot.shared_y;
    for (pi, panel_name) in panels.iter().enumerate() {
        let panel_of = |metric: &str, title: String, y_label: String, as_bars: bool| {
            let mut panel = if as_bars {
                Panel::bars(title, x_label.clone(), y_label, xs.iter().map(|x| x.0.clone()))
            } else {
                Panel::lines(title, x_label.clone(), y_label).with_scales(
                    if plot.x_log { Scale::Log2 } else { Scale::Linear },
                    if plot.y_log { Scale::Log10 } else { Scale::Linear },
                )
            };
            let x_of = |xi: usize| if as_bars { xi as f64 } else { xs[xi].1 };
            let series_name =
                |si: usize| if series[si].is_empty() { metric.to_string() } else { series[si].clone() };
            for si in 0..series.len() {
                let cells_here =
                    || (0..xs.len()).filter_map(|xi| Some((xi, cells.get((pi, si, xi), metric)?)));
                let points: Vec<(f64, f64)> = cells_here().map(|(xi, y)| (x_of(xi), y)).collect();
                let mut line = Series::new(series_name(si), points);
                let errors: Vec<Option<(f64, f64)>> =
                    cells_here().map(|(xi, _)| cells.spread((pi, si, xi), metric)).collect();
                if errors.iter().any(Option::is_some) {
                    line.errors = errors;
                }
                panel = panel.with_series(line);
            }
            for &(_, si, xi, ci) in located.iter().filter(|l| l.0 == pi) {
                let pv = &file.paper_values[ci];
                let claim = claims.get(ci);
                let paper = pv.value.filter(|_| pv.metric == metric);
                // A claim on the secondary metric is marked on the secondary panel, any other
                // claim on the main one.
                let on_secondary = secondary == Some(pv.metric.as_str());
                if on_secondary != (metric != main_metric) || cells.get((pi, si, xi), metric).is_none() {
                    continue;
                }
                let verdict =
                    claim
                        .and_then(|c| if pv.value.is_some() { c.tolerance_verdict() } else { c.trend_holds });
                panel.marks.push(Mark {
                    series: series_name(si),
                    x: x_of(xi),
                    paper,
                    label: format!("#{}", ci + 1),
                    verdict,
                });
            }
            panel
        };
        figure.panels.push(panel_of(metric, panel_name.clone(), y_label.clone(), bars));
        if let Some(m) = secondary {
            let label =
                if plot.secondary_label.is_empty() { m.to_string() } else { plot.secondary_label.clone() };
            let title = if panel_name.is_empty() { label.clone() } else { format!("{panel_name}: {label}") };
            figure.panels.push(panel_of(m, title, label, true));
        }
    }
    figure
}

fn axis_value_name(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

/// Index of the axis value whose display name is `name`.
fn find(axis: &Option<super::Axis>, name: &Option<String>) -> Result<usize, String> {
    match (axis, name) {
        (None, None) => Ok(0),
        (None, Some(n)) => Err(format!("names {n:?} but the scenario has no such axis")),
        (Some(_), None) => Ok(0),
        (Some(a), Some(n)) => (0..a.values.len())
            .find(|&i| {
                a.names.as_ref().map_or_else(|| axis_value_name(&a.values[i]), |ns| ns[i].clone()) == *n
            })
            .ok_or_else(|| format!("no axis value named {n:?}")),
    }
}

/// Compare each paper value with the simulated mean at its cell, and evaluate its trend.
pub fn claims(scenario: &Scenario, cells: &Cells) -> Vec<PaperClaim> {
    let s = &scenario.file.sweep;
    scenario
        .file
        .paper_values
        .iter()
        .map(|pv| {
            let located = (|| -> Result<(usize, usize, usize), String> {
                Ok((find(&s.panels, &pv.panel)?, find(&s.series, &pv.series)?, find(&s.x, &pv.x)?))
            })();
            let (sim, trend_holds, note, not_simulated) = match located {
                Err(e) => (f64::NAN, None, format!("cannot locate: {e}"), false),
                Ok(cell) if pv.aggregate.is_some() || pv.ratio_to.is_some() || pv.divide_by.is_some() => {
                    match derived(scenario, cells, pv, cell) {
                        Err(e) => (f64::NAN, None, format!("cannot derive: {e}"), false),
                        Ok(None) => (f64::NAN, None, trend_note(pv, None), true),
                        Ok(Some(sim)) => {
                            let trend = pv.trend.as_ref().map(|t| bound(sim, t));
                            let holds = trend.as_ref().and_then(|t| t.as_ref().ok().copied());
                            (sim, holds, trend_note(pv, trend), false)
                        }
                    }
                }
                Ok(cell) => {
                    let sim = cells.get(cell, &pv.metric);
                    let trend = pv.trend.as_ref().map(|t| trend(scenario, cells, pv, cell, t));
                    let holds = trend.as_ref().and_then(|t| t.as_ref().ok().copied());
                    (sim.unwrap_or(f64::NAN), holds, trend_note(pv, trend), sim.is_none())
                }
            };
            PaperClaim {
                claim: pv.claim.clone(),
                paper: pv.value,
                sim,
                tolerance: pv.tolerance(),
                trend_holds,
                note,
                not_simulated,
            }
        })
        .collect()
}

/// The value of a row with `ratio_to`, `divide_by` and/or `aggregate`: the metric (divided by
/// metric `divide_by` at the same cell, then by series `ratio_to`'s same quotient at the same x)
/// at the row's x, or aggregated over every x of its panel and series (x values without a value
/// are left out; `None` when none has one).
fn derived(
    scenario: &Scenario,
    cells: &Cells,
    pv: &PaperValue,
    cell: (usize, usize, usize),
) -> Result<Option<f64>, String> {
    let other = match &pv.ratio_to {
        Some(name) => Some(find(&scenario.file.sweep.series, &Some(name.clone()))?),
        None => None,
    };
    // A cell without the metric is not simulated; a cell with it but without a usable
    // `divide_by` denominator is a scenario error, named in the row's note.
    let value = |si: usize, xi: usize| -> Result<Option<f64>, String> {
        let Some(v) = cells.get((cell.0, si, xi), &pv.metric) else { return Ok(None) };
        match &pv.divide_by {
            Some(m) => match cells.get((cell.0, si, xi), m) {
                None => Err(format!("divide_by: no metric {m:?} where {:?} has a value", pv.metric)),
                Some(0.0) => Err(format!("divide_by: {m:?} is 0")),
                Some(d) => Ok(Some(v / d)),
            },
            None => Ok(Some(v)),
        }
    };
    let at = |xi: usize| -> Result<Option<f64>, String> {
        let Some(here) = value(cell.1, xi)? else { return Ok(None) };
        match other {
            Some(oi) => Ok(value(oi, xi)?.filter(|&d| d != 0.0).map(|d| here / d)),
            None => Ok(Some(here)),
        }
    };
    if pv.aggregate.is_none() {
        return at(cell.2);
    }
    if pv.x.is_some() {
        return Err("an aggregate row names no x".into());
    }
    let nx = scenario.file.sweep.x.as_ref().map_or(1, |a| a.values.len());
    if pv.aggregate.as_deref() == Some("peak_ratio") {
        // This series' peak over every x divided by series `ratio_to`'s peak (a paper's "N×
        // at peak throughput" when the two peak at different x).
        let Some(oi) = other else { return Err("peak_ratio needs ratio_to".into()) };
        let peak = |si: usize| -> Result<Option<f64>, String> {
            let mut best: Option<f64> = None;
            for xi in 0..nx {
                if let Some(v) = value(si, xi)? {
                    best = Some(best.map_or(v, |b: f64| b.max(v)));
                }
            }
            Ok(best)
        };
        return Ok(match (peak(cell.1)?, peak(oi)?) {
            (Some(a), Some(b)) if b != 0.0 => Some(a / b),
            _ => None,
        });
    }
    let mut v = Vec::with_capacity(nx);
    for xi in 0..nx {
        v.extend(at(xi)?);
    }
    if v.is_empty() {
        return Ok(None);
    }
    let n = v.len() as f64;
    Ok(Some(match pv.aggregate.as_deref().unwrap_or_default() {
        "max" => v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        "min" => v.iter().copied().fold(f64::INFINITY, f64::min),
        "mean" => v.iter().sum::<f64>() / n,
        "geomean" if v.iter().all(|&x| x > 0.0) => (v.iter().map(|x| x.ln()).sum::<f64>() / n).exp(),
        "geomean" => return Err("geomean of a non-positive value".into()),
        other => return Err(format!("unknown aggregate {other:?} (max, min, mean, geomean, peak_ratio)")),
    }))
}

/// An `above:V` / `below:V` trend on a value.
fn bound(value: f64, t: &str) -> Result<bool, String> {
    let b = t
        .strip_prefix("above:")
        .or_else(|| t.strip_prefix("below:"))
        .ok_or_else(|| format!("an aggregate row takes only above:V or below:V, not {t:?}"))?;
    let b: f64 = b.parse().map_err(|_| format!("{b:?} is not a number"))?;
    Ok(if t.starts_with("above") { value > b } else { value < b })
}

fn trend_note(pv: &PaperValue, trend: Option<Result<bool, String>>) -> String {
    let mut note = pv.note.clone();
    if let (Some(t), Some(Err(e))) = (&pv.trend, trend) {
        if !note.is_empty() {
            note.push_str("; ");
        }
        note.push_str(&format!("trend {t:?}: {e}"));
    } else if let Some(t) = &pv.trend {
        if !note.is_empty() {
            note.push_str("; ");
        }
        note.push_str(&format!("trend: {t}"));
    }
    note
}

fn trend(
    scenario: &Scenario,
    cells: &Cells,
    pv: &PaperValue,
    cell: (usize, usize, usize),
    t: &str,
) -> Result<bool, String> {
    let here = cells.get(cell, &pv.metric).ok_or("no simulated value")?;
    let s = &scenario.file.sweep;
    if let Some(other) = t.strip_prefix("higher_than_x:").or_else(|| t.strip_prefix("lower_than_x:")) {
        let xi = find(&s.x, &Some(other.to_string()))?;
        let there = cells.get((cell.0, cell.1, xi), &pv.metric).ok_or("no value at the other x")?;
        return Ok(if t.starts_with("higher") { here > there } else { here < there });
    }
    if let Some(other) = t.strip_prefix("within_x:") {
        // "stable": this x's value is within the row's tolerance (default 25 %) of x's.
        let xi = find(&s.x, &Some(other.to_string()))?;
        let there = cells.get((cell.0, cell.1, xi), &pv.metric).ok_or("no value at the other x")?;
        return Ok(crate::report::within(here, there, pv.tolerance()));
    }
    if let Some(other) = t.strip_prefix("higher_than_panel:").or_else(|| t.strip_prefix("lower_than_panel:"))
    {
        let pi = find(&s.panels, &Some(other.to_string()))?;
        let there = cells.get((pi, cell.1, cell.2), &pv.metric).ok_or("no value in the other panel")?;
        return Ok(if t.starts_with("higher") { here > there } else { here < there });
    }
    if let Some(other) = t.strip_prefix("within:") {
        // "similar to": within the row's tolerance (default 25 %) of another series at this x.
        let oi = find(&s.series, &Some(other.to_string()))?;
        let there = cells.get((cell.0, oi, cell.2), &pv.metric).ok_or("no value for the other series")?;
        return Ok(crate::report::within(here, there, pv.tolerance()));
    }
    if let Some(other) = t.strip_prefix("higher_than:").or_else(|| t.strip_prefix("lower_than:")) {
        let oi = find(&s.series, &Some(other.to_string()))?;
        let there = cells.get((cell.0, oi, cell.2), &pv.metric).ok_or("no value for the other series")?;
        return Ok(if t.starts_with("higher") { here > there } else { here < there });
    }
    if let Some(bound) =
        t.strip_prefix("fall_from_peak_above:").or_else(|| t.strip_prefix("fall_from_peak_below:"))
    {
        // "degrades over N× as x grows" (above), or "degrades gracefully: less than N×"
        // (below): the series' peak over every x, divided by this x.
        let bound: f64 = bound.parse().map_err(|_| format!("{bound:?} is not a number"))?;
        let nx = s.x.as_ref().map_or(1, |a| a.values.len());
        let peak = (0..nx)
            .filter_map(|xi| cells.get((cell.0, cell.1, xi), &pv.metric))
            .fold(f64::NEG_INFINITY, f64::max);
        return Ok(if t.starts_with("fall_from_peak_above") {
            here > 0.0 && peak / here > bound
        } else {
            here > 0.0 && peak / here < bound
        });
    }
    if let Some(bound) = t.strip_prefix("above:").or_else(|| t.strip_prefix("below:")) {
        let bound: f64 = bound.parse().map_err(|_| format!("{bound:?} is not a number"))?;
        return Ok(if t.starts_with("above") { here > bound } else { here < bound });
    }
    let nx = s.x.as_ref().map_or(1, |a| a.values.len());
    let first = cells.get((cell.0, cell.1, 0), &pv.metric).ok_or("no first x value")?;
    let last = cells.get((cell.0, cell.1, nx - 1), &pv.metric).ok_or("no last x value")?;
    match t {
        "increasing" => Ok(last > first),
        "decreasing" => Ok(last < first),
        other => Err(format!(
            "unknown trend {other:?} (increasing, decreasing, higher_than:S, lower_than:S, \
                 higher_than_x:X, lower_than_x:X, within_x:X, within:S, higher_than_panel:P, lower_than_panel:P, above:V, \
                 below:V, fall_from_peak_above:V, fall_from_peak_below:V)"
        )),
    }
}

/// The summary: scenario identity, per-point results, the combined hash.
pub fn summary(scenario: &Scenario, results: &[PointResult], combined_hash: u64, wall_seconds: f64) -> Json {
    let events: u64 = results.iter().map(|r| r.events).sum();
    let ops: u64 = results.iter().map(|r| r.ops).sum();
    json!({
        "paper": scenario.file.paper,
        "name": scenario.file.name,
        "description": scenario.file.description,
        "protocol": scenario.file.protocol,
        "nic_profile": scenario.file.cluster.nic_profile,
        "points": scenario.points.len(),
        "trace_hash": format!("{combined_hash:016x}"),
        "events": events,
        "simulated_ops": ops,
        "wall_seconds": wall_seconds,
        "events_per_second": events as f64 / wall_seconds.max(1e-9),
        "scaling_note": scenario.file.scaling_note,
        "calibration_note": scenario.file.calibration_note,
        "results": scenario.points.iter().zip(results).map(|(p, r)| json!({
            "point": p.index,
            "panel": p.panel.as_ref().map(|a| a.1.clone()),
            "series": p.series.as_ref().map(|a| a.1.clone()),
            "x": p.x.as_ref().map(|a| a.1.clone()),
            "seed": p.seed,
            "metrics": r.metrics,
            "events": r.events,
            "end_time_ns": r.end_time_ns,
            "trace_hash": format!("{:016x}", r.trace_hash),
        })).collect::<Vec<_>>(),
    })
}
