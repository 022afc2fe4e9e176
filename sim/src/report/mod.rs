//! The results writer: what `dmsim run <scenario.json>` leaves behind.
//!
//! ```text
//!   scenario run ──► Table ─────────► data.csv          (long format, one row per measurement)
//!                ──► Figure ────────► plot.svg, plot.png (panels, log axes, lines or grouped bars)
//!                ──► [PaperClaim] ──► paper-vs-sim.md   (claim | paper | sim | sim/paper | …)
//!                ──► JSON summary ──► summary.json      (claims embedded under `paper_vs_sim`)
//!                         all four in results/<paper>/<name>/  (ResultsDir)
//!   results/ ──► site/ ──► one static HTML site over every results directory (`dmsim report`)
//! ```
//!
//! Architecture invariants:
//! - This module knows nothing about scenarios, protocols or the engine; callers hand it plain
//!   data. Scenario-specific knowledge (which metric goes on which axis) lives in the runner.
//! - Every file is written atomically (temporary file, then rename), so a crashed or killed run
//!   never leaves a truncated result, and every error names the path it concerns; `dmsim run`
//!   writes the whole directory into a [`Staging`] sibling and renames it into place, so a failed
//!   run never mixes new files with old ones. Nothing here panics on I/O.
//! - Output is a pure function of the input: no timestamps or host names, so reruns of a
//!   deterministic scenario produce byte-identical files.

mod atomic;
mod axis;
mod claims;
mod csv;
mod error;
mod figure;
mod png;
mod results_dir;
mod site;
mod staging;
mod svg;
#[cfg(test)]
mod test_support;

pub use atomic::write_atomic;
pub use claims::{paper_vs_sim_json, paper_vs_sim_markdown, within, write_paper_vs_sim_md, PaperClaim};
pub use csv::{write_csv, Table, Value};
pub use error::{ReportError, ReportErrorCause};
pub use figure::{Figure, Mark, Panel, PanelKind, Scale, Series};
pub use png::svg_to_png;
pub use results_dir::{write_summary_json, ResultsDir, RunReport};
pub use site::{write_site, Counts, ProfileDoc};
pub use staging::Staging;
pub use svg::{render_svg, write_svg, PANEL_HEIGHT_PX, PANEL_WIDTH_PX};
