//! `dmsim report`: one static HTML site over every results directory.
//!
//! ```text
//!   results/<paper>/<figure>/summary.json ─┐
//!   results/<paper>/<figure>/plot.svg …    ├─► collect ─► Site ─► pages.rs ─► out/index.html
//!   results/<paper>/REPORT.md             ─┤                                   out/<paper>/index.html
//!   NIC profiles (plain data from the CLI) ─┘                                   out/profiles.html
//! ```
//!
//! The site opens from disk (no server, no network, no external script or font). Every count on
//! it is computed here from the summaries, with one rule ([`Counts::add_claim`]), so the
//! overview, the paper pages and the test that checks them cannot disagree about what "within
//! tolerance" means. The pages carry a small script (filters, a self-check of the overview's
//! counts against the embedded claims); the page works without it.
//!
//! Like the rest of `report`, this knows nothing about scenarios or protocols: a "paper" is a
//! directory of `results/` holding at least one `<figure>/summary.json`.

mod collect;
mod html;
mod pages;

use std::path::Path;

use serde::Serialize;

use collect::collect;

use super::error::ReportError;
use super::staging::Staging;

/// One NIC profile as the site shows it: every knob with its value and its one-line source.
#[derive(Clone, Debug)]
pub struct ProfileDoc {
    pub name: String,
    pub description: String,
    /// `(knob, value, source)`, in the profile's own order.
    pub knobs: Vec<(String, String, String)>,
}

/// Claims tallied the one way the site (and its test) count them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub figures: usize,
    /// Rows with a paper number and a simulated value.
    pub numeric: usize,
    /// Of those, within the row's tolerance.
    pub within: usize,
    /// Rows with a trend verdict.
    pub trends: usize,
    pub trends_holding: usize,
    /// Rows whose metric this simulator does not produce (a series not built yet).
    pub not_simulated: usize,
    /// Sweep points that failed (stalled, violated an invariant).
    pub failed_points: usize,
}

impl Counts {
    /// Adds one `paper_vs_sim` row of a summary. A row without a simulated value is "not
    /// simulated" whether or not its summary predates the `not_simulated` key.
    pub fn add_claim(&mut self, row: &serde_json::Value) {
        if row["not_simulated"].as_bool() == Some(true) || row["sim"].is_null() {
            self.not_simulated += 1;
            return;
        }
        if row["paper"].is_number() && row["within_tolerance"].is_boolean() {
            self.numeric += 1;
            self.within += usize::from(row["within_tolerance"].as_bool() == Some(true));
        }
        if let Some(holds) = row["trend_holds"].as_bool() {
            self.trends += 1;
            self.trends_holding += usize::from(holds);
        }
    }

    pub fn add(&mut self, other: &Counts) {
        self.figures += other.figures;
        self.numeric += other.numeric;
        self.within += other.within;
        self.trends += other.trends;
        self.trends_holding += other.trends_holding;
        self.not_simulated += other.not_simulated;
        self.failed_points += other.failed_points;
    }
}

/// Writes the site for `results_root` into `out` (replaced whole: built in a sibling staging
/// directory, then renamed into place) and returns the per-paper counts it shows.
pub fn write_site(
    results_root: &Path,
    out: &Path,
    profiles: &[ProfileDoc],
) -> Result<Vec<(String, Counts)>, ReportError> {
    let papers = collect(results_root, out)?;
    if papers.is_empty() {
        let message =
            "no results: no `<paper>/<figure>/summary.json` below it (run `dmsim run <scenario>` first)";
        return Err(ReportError::invalid(results_root, message));
    }
    let staging = Staging::beside(out)?;
    pages::write_all(staging.dir().path(), &papers, profiles)?;
    staging.publish()?;
    Ok(papers.iter().map(|p| (p.name.clone(), p.counts())).collect())
}
