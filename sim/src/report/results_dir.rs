//! The directory one scenario run writes: `results/<paper>/<name>/` with `data.csv`, `plot.svg`,
//! `paper-vs-sim.md` and `summary.json`.
//!
//! Each file is replaced atomically (see `atomic.rs`). [`ResultsDir::write_all`] writes
//! `summary.json` last, so a run that dies half-way leaves the previous summary (or none) rather
//! than a summary describing files that were never written.

use std::fs;
use std::path::{Component, Path, PathBuf};

use super::atomic::write_atomic;
use super::claims::{paper_vs_sim_json, write_paper_vs_sim_md, PaperClaim};
use super::csv::{write_csv, Table};
use super::error::ReportError;
use super::figure::Figure;
use super::png::svg_to_png;
use super::svg::write_svg;

/// Writes `value` as pretty-printed JSON with a trailing newline, atomically.
pub fn write_summary_json(path: impl AsRef<Path>, value: &serde_json::Value) -> Result<(), ReportError> {
    let path = path.as_ref();
    let mut text = serde_json::to_string_pretty(value).map_err(|error| ReportError::json(path, error))?;
    text.push('\n');
    write_atomic(path, text.as_bytes())
}

/// Everything one run reports, for [`ResultsDir::write_all`].
#[derive(Clone, Debug)]
pub struct RunReport<'a> {
    /// Long-format measurements for `data.csv`.
    pub data: &'a Table,
    pub figure: &'a Figure,
    /// Heading of `paper-vs-sim.md`, e.g. "SELCC Figure 12: paper vs simulator".
    pub claims_title: &'a str,
    pub claims: &'a [PaperClaim],
    /// Which figures the NIC profile was calibrated on and what was scaled down.
    pub calibration_note: &'a str,
    /// The rest of `summary.json`. If it is an object without a `paper_vs_sim` key, the claims'
    /// JSON form is added under that key.
    pub summary: serde_json::Value,
}

/// A results directory that exists on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultsDir {
    path: PathBuf,
}

impl ResultsDir {
    pub const DATA_CSV: &'static str = "data.csv";
    pub const SUMMARY_JSON: &'static str = "summary.json";
    pub const PLOT_SVG: &'static str = "plot.svg";
    pub const PLOT_PNG: &'static str = "plot.png";
    pub const PAPER_VS_SIM_MD: &'static str = "paper-vs-sim.md";

    /// Creates (if needed) `<results_root>/<paper>/<name>/`. `paper` and `name` must each be one
    /// plain path component (no `/`, `..` or empty string), so a scenario file cannot make a run
    /// write outside the results tree.
    pub fn for_scenario(
        results_root: impl AsRef<Path>,
        paper: &str,
        name: &str,
    ) -> Result<ResultsDir, ReportError> {
        let results_root = results_root.as_ref();
        for (what, component) in [("paper", paper), ("name", name)] {
            if !is_single_component(component) {
                let message = format!("{what} `{component}` must be a single plain path component");
                return Err(ReportError::invalid(&results_root.join(paper).join(name), message));
            }
        }
        ResultsDir::at(results_root.join(paper).join(name))
    }

    /// Uses `path` as the results directory, creating it and its parents if needed.
    pub fn at(path: impl Into<PathBuf>) -> Result<ResultsDir, ReportError> {
        let path = path.into();
        fs::create_dir_all(&path).map_err(|error| ReportError::io(&path, error))?;
        Ok(ResultsDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of a file inside the directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn write_data(&self, table: &Table) -> Result<PathBuf, ReportError> {
        let path = self.file(Self::DATA_CSV);
        write_csv(&path, table)?;
        Ok(path)
    }

    /// Writes `plot.svg` and, rendered from it, `plot.png`; returns the SVG's path.
    pub fn write_plot(&self, figure: &Figure) -> Result<PathBuf, ReportError> {
        let path = self.file(Self::PLOT_SVG);
        let svg = write_svg(&path, figure)?;
        let png = self.file(Self::PLOT_PNG);
        let bytes = svg_to_png(&svg).map_err(|message| ReportError::plot(&png, message))?;
        write_atomic(&png, &bytes)?;
        Ok(path)
    }

    pub fn write_paper_vs_sim(
        &self,
        title: &str,
        claims: &[PaperClaim],
        calibration_note: &str,
    ) -> Result<PathBuf, ReportError> {
        let path = self.file(Self::PAPER_VS_SIM_MD);
        write_paper_vs_sim_md(&path, title, claims, calibration_note)?;
        Ok(path)
    }

    pub fn write_summary(&self, summary: &serde_json::Value) -> Result<PathBuf, ReportError> {
        let path = self.file(Self::SUMMARY_JSON);
        write_summary_json(&path, summary)?;
        Ok(path)
    }

    /// Writes the four files, `summary.json` last, and returns their paths in writing order.
    pub fn write_all(&self, report: RunReport<'_>) -> Result<Vec<PathBuf>, ReportError> {
        let mut summary = report.summary;
        if let serde_json::Value::Object(map) = &mut summary {
            map.entry("paper_vs_sim").or_insert_with(|| paper_vs_sim_json(report.claims));
        }
        Ok(vec![
            self.write_data(report.data)?,
            self.write_plot(report.figure)?,
            self.write_paper_vs_sim(report.claims_title, report.claims, report.calibration_note)?,
            self.write_summary(&summary)?,
        ])
    }
}

fn is_single_component(text: &str) -> bool {
    let mut components = Path::new(text).components();
    let first = components.next();
    !text.contains(['/', '\\']) && matches!(first, Some(Component::Normal(_))) && components.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::csv::Value;
    use crate::report::figure::{Panel, Series};
    use crate::report::test_support::{leftover_temp_files, scratch_dir};

    fn sample_report<'a>(table: &'a Table, figure: &'a Figure, claims: &'a [PaperClaim]) -> RunReport<'a> {
        RunReport {
            data: table,
            figure,
            claims_title: "Fig. 12: paper vs sim",
            claims,
            calibration_note: "Calibrated on Fig. 10.",
            summary: serde_json::json!({ "scenario": "selcc/fig12", "seed": 7 }),
        }
    }

    /// Goal: a full run writes the four files under results/<paper>/<name>/, embeds the claims in
    /// the summary, and leaves no temporary files.
    #[test]
    fn writes_everything() {
        let root = scratch_dir("results-all");
        let directory = ResultsDir::for_scenario(root.join("results"), "selcc", "fig12").unwrap();
        assert_eq!(directory.path(), root.join("results/selcc/fig12"));

        let mut table = Table::new(["protocol", "threads", "throughput_mops"]);
        table.push_row(vec![Value::from("SELCC"), Value::from(8usize), Value::from(12.5)]);
        let mut figure = Figure::new("Fig. 12");
        figure
            .panels
            .push(Panel::lines("a", "threads", "Mops").with_series(Series::new("SELCC", vec![(8.0, 12.5)])));
        let claims = vec![PaperClaim {
            claim: "SELCC at 8 threads".into(),
            paper: Some(12.0),
            sim: 12.5,
            tolerance: 0.25,
            trend_holds: None,
            note: String::new(),
            not_simulated: false,
        }];
        let written = directory.write_all(sample_report(&table, &figure, &claims)).unwrap();
        let names: Vec<_> = written.iter().map(|path| path.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(names, ["data.csv", "plot.svg", "paper-vs-sim.md", "summary.json"]);
        for path in &written {
            assert!(fs::metadata(path).unwrap().len() > 0, "{}", path.display());
        }
        let summary: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(directory.file("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["seed"], 7);
        assert_eq!(summary["paper_vs_sim"][0]["within_tolerance"], true);
        assert!(fs::read_to_string(directory.file("plot.svg")).unwrap().contains("SELCC"));
        assert!(leftover_temp_files(&root).is_empty());
    }

    /// Goal: names that would escape the results tree are refused with an error naming them.
    #[test]
    fn refuses_path_escapes() {
        let root = scratch_dir("results-escape");
        for (paper, name) in [("..", "x"), ("selcc", "a/b"), ("", "x"), ("selcc", "."), ("/abs", "x")] {
            let error = ResultsDir::for_scenario(&root, paper, name).unwrap_err();
            assert!(error.to_string().contains("single plain path component"), "{error}");
        }
        assert!(ResultsDir::for_scenario(&root, "dex", "fig7-b").is_ok());
    }

    /// Goal: an I/O failure is an error naming the path, not a panic. Method: put a file where
    /// the directory should be.
    #[test]
    fn io_failure_names_the_path() {
        let root = scratch_dir("results-io");
        fs::write(root.join("selcc"), b"not a directory").unwrap();
        let error = ResultsDir::for_scenario(&root, "selcc", "fig12").unwrap_err();
        assert!(error.to_string().contains("selcc"), "{error}");
        assert!(error.to_string().contains("fig12"), "{error}");
    }

    #[test]
    fn summary_is_pretty_with_newline() {
        let root = scratch_dir("results-summary");
        let path = root.join("summary.json");
        write_summary_json(&path, &serde_json::json!({ "a": [1, 2] })).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\n  \"a\": [\n    1,\n    2\n  ]\n}\n");
    }
}
