//! `dmsim compare A B`: two results directories of the same scenario side by side — typically
//! the simulator's (`dmsim run`) and the hardware's (`dmsim hw run`) — one Markdown row per
//! (point, metric) with both values and their ratio. This is the sim-vs-hardware report: run the
//! same scenario on both backends, then compare.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;

use super::{exit, shown};

#[derive(clap::Args)]
pub struct CompareArgs {
    /// First results directory (or its summary.json), e.g. the simulator's.
    pub a: PathBuf,
    /// Second results directory (or its summary.json), e.g. the hardware's.
    pub b: PathBuf,
    /// Column names for A and B, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [String::from("sim"), String::from("hw")])]
    pub names: Vec<String>,
    /// Only these metrics (comma-separated); default: every metric either side has.
    #[arg(long, value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// Also write the table to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One point of a results directory: its label and metrics.
struct PointMetrics {
    index: u64,
    label: String,
    metrics: serde_json::Map<String, Value>,
}

fn load(path: &Path) -> Result<(String, Vec<PointMetrics>), String> {
    let file = if path.is_dir() { path.join("summary.json") } else { path.to_path_buf() };
    let text =
        dmsim_sim::scenario::strict_json::read_input(&file).map_err(|e| format!("{}: {e}", shown(&file)))?;
    let json: Value = serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", shown(&file)))?;
    let results = json
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{}: no `results` array (is this a dmsim summary.json?)", shown(&file)))?;
    let name = json.get("name").and_then(Value::as_str).unwrap_or("?").to_string();
    let mut points = Vec::new();
    for (i, r) in results.iter().enumerate() {
        let index = r.get("point").and_then(Value::as_u64).unwrap_or(i as u64);
        let label: Vec<String> = ["panel", "series", "x"]
            .iter()
            .filter_map(|k| r.get(*k).and_then(Value::as_str).map(|v| format!("{k}={v}")))
            .collect();
        let metrics = r
            .get("metrics")
            .and_then(Value::as_object)
            .cloned()
            .ok_or_else(|| format!("{}: results[{i}] has no metrics", shown(&file)))?;
        points.push(PointMetrics { index, label: label.join(" "), metrics });
    }
    Ok((name, points))
}

fn cell(v: Option<f64>) -> String {
    match v {
        Some(v) if v != 0.0 && (v.abs() >= 1e5 || v.abs() < 1e-3) => format!("{v:.4e}"),
        Some(v) => format!("{v:.4}"),
        None => "—".into(),
    }
}

/// The side-by-side table, or why not.
pub fn table(args: &CompareArgs) -> Result<String, String> {
    let [na, nb] = args.names.as_slice() else {
        return Err(format!("--names: two names (A,B), not {:?}", args.names));
    };
    let (name_a, a) = load(&args.a)?;
    let (name_b, b) = load(&args.b)?;
    if name_a != name_b {
        return Err(format!(
            "{} is scenario {name_a:?} but {} is {name_b:?}",
            shown(&args.a),
            shown(&args.b)
        ));
    }
    let mut out = format!(
        "# {name_a}: {na} vs {nb}\n\n{na}: `{}`  \n{nb}: `{}`\n\n| point | metric | {na} | {nb} | {nb}/{na} |\n|---|---|---:|---:|---:|\n",
        shown(&args.a),
        shown(&args.b)
    );
    // A metric neither side has anywhere is a typo, not an empty column.
    let unknown: Vec<&String> = args
        .metrics
        .iter()
        .filter(|m| !a.iter().chain(&b).any(|p| p.metrics.contains_key(m.as_str())))
        .collect();
    if !unknown.is_empty() {
        return Err(format!("--metrics: no point on either side has {unknown:?}"));
    }
    let mut matched = 0;
    for pa in &a {
        let Some(pb) = b.iter().find(|p| p.index == pa.index) else { continue };
        if pa.label != pb.label {
            return Err(format!("point {}: {:?} in A but {:?} in B", pa.index, pa.label, pb.label));
        }
        matched += 1;
        let keys: BTreeSet<&String> = if args.metrics.is_empty() {
            pa.metrics.keys().chain(pb.metrics.keys()).collect()
        } else {
            args.metrics.iter().collect()
        };
        let label =
            if pa.label.is_empty() { pa.index.to_string() } else { format!("{} ({})", pa.index, pa.label) };
        for key in keys {
            let va = pa.metrics.get(key.as_str()).and_then(Value::as_f64);
            let vb = pb.metrics.get(key.as_str()).and_then(Value::as_f64);
            let ratio = match (va, vb) {
                (Some(x), Some(y)) if x != 0.0 => cell(Some(y / x)),
                _ => "—".into(),
            };
            out += &format!("| {label} | {key} | {} | {} | {ratio} |\n", cell(va), cell(vb));
        }
    }
    if matched == 0 {
        return Err(format!("{} and {} have no point in common", shown(&args.a), shown(&args.b)));
    }
    Ok(out)
}

pub fn run(args: CompareArgs) -> ExitCode {
    let text = match table(&args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(exit::BAD_INPUT);
        }
    };
    print!("{text}");
    if let Some(out) = &args.out {
        if let Err(e) = std::fs::write(out, &text) {
            eprintln!("error: {}: {e}", shown(out));
            return ExitCode::from(exit::IO);
        }
    }
    ExitCode::SUCCESS
}
