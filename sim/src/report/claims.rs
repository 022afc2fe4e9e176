//! Paper-vs-simulator comparison: each [`PaperClaim`] is one number a paper reports next to the
//! number the simulator produced for it, with the tolerance the scenario file allows.
//!
//! The same claims are written twice: as `paper-vs-sim.md` for people and as a JSON list (see
//! [`paper_vs_sim_json`]) that the CLI embeds in `summary.json` for tools and for the exit status.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::atomic::write_atomic;
use super::error::ReportError;

/// One reported number and its simulated counterpart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PaperClaim {
    /// What is compared, e.g. "SELCC throughput at 8 CN, 64 threads (Mops)".
    pub claim: String,
    /// The paper's number; `None` for a trend-only row (a qualitative statement: the paper
    /// gives no number, so none is invented).
    #[serde(default)]
    pub paper: Option<f64>,
    pub sim: f64,
    /// Allowed relative deviation: 0.25 accepts `sim` within ±25 % of `paper`.
    pub tolerance: f64,
    /// Whether the qualitative trend the paper states (e.g. "SELCC beats GAM by >2×") holds in
    /// the simulation; `None` when the claim states no trend.
    #[serde(default)]
    pub trend_holds: Option<bool>,
    #[serde(default)]
    pub note: String,
    /// The scenario produced no value for the claim's metric (a series of a system that is not
    /// simulated yet): the row is shown as n/a and counted apart, neither reproduced nor missed.
    #[serde(default)]
    pub not_simulated: bool,
}

/// `|value - reference| <= tolerance * |reference|`, every number finite and the tolerance not
/// negative (the rule of [`PaperClaim::within_tolerance`], shared with trends that compare two
/// simulated values).
pub fn within(value: f64, reference: f64, tolerance: f64) -> bool {
    let finite = reference.is_finite() && value.is_finite() && tolerance.is_finite();
    finite && tolerance >= 0.0 && (value - reference).abs() <= tolerance * reference.abs()
}

impl PaperClaim {
    /// `sim / paper`, or `None` when it is undefined (`paper == 0`, or either value not finite).
    pub fn ratio(&self) -> Option<f64> {
        let paper = self.paper?;
        let ratio = self.sim / paper;
        (paper != 0.0 && ratio.is_finite()).then_some(ratio)
    }

    /// `|sim - paper| <= tolerance * |paper|`. With `paper == 0` only `sim == 0` passes. A
    /// non-finite value or a negative or NaN tolerance never passes: a claim that cannot be
    /// checked must not count as reproduced.
    /// A trend-only row (no paper number) is never within tolerance; see [`Self::tolerance_verdict`].
    pub fn within_tolerance(&self) -> bool {
        self.paper.is_some_and(|paper| within(self.sim, paper, self.tolerance))
    }

    /// [`Self::within_tolerance`] for rows with a paper number, `None` for trend-only rows.
    pub fn tolerance_verdict(&self) -> Option<bool> {
        if self.not_simulated {
            return None;
        }
        self.paper.map(|_| self.within_tolerance())
    }

    /// The JSON object of this claim; non-finite numbers become `null`.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "claim": self.claim,
            "paper": self.paper,
            "sim": self.sim,
            "ratio": self.ratio(),
            "tolerance": self.tolerance,
            "within_tolerance": self.tolerance_verdict(),
            "trend_holds": self.trend_holds,
            "note": self.note,
            "not_simulated": self.not_simulated,
        })
    }
}

/// The claims as a JSON list for `summary.json`; each element has the keys `claim`, `paper`,
/// `sim`, `ratio`, `tolerance`, `within_tolerance` (`null` for trend-only and not-simulated
/// rows), `trend_holds`, `note`, `not_simulated`.
pub fn paper_vs_sim_json(claims: &[PaperClaim]) -> serde_json::Value {
    serde_json::Value::Array(claims.iter().map(PaperClaim::to_json).collect())
}

/// Formats a measured number for a table: four significant digits, no exponent for the usual
/// range, `n/a` for NaN.
pub(crate) fn format_number(value: f64) -> String {
    if value.is_nan() {
        return "n/a".to_string();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf".to_string() } else { "-inf".to_string() };
    }
    let magnitude = value.abs();
    if magnitude == 0.0 {
        return "0".to_string();
    }
    if magnitude >= 1e4 {
        return format!("{value:.0}");
    }
    if magnitude < 1e-3 {
        return format!("{value:.3e}");
    }
    // Digits after the point so that four significant digits show, then trailing zeros trimmed.
    let decimals = (3 - magnitude.log10().floor() as i32).max(0) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// Makes free text safe inside a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace("\r\n", " ").replace(['\n', '\r'], " ")
}

fn format_tolerance(tolerance: f64) -> String {
    if tolerance.is_finite() {
        format!("±{}%", format_number(tolerance * 100.0))
    } else {
        "±?".to_string()
    }
}

/// The Markdown report: a heading, the calibration note (which figures the NIC profile was fitted
/// on, what was scaled down), the claims table and a one-line tally.
pub fn paper_vs_sim_markdown(title: &str, claims: &[PaperClaim], calibration_note: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", title.trim());
    if !calibration_note.trim().is_empty() {
        let _ = writeln!(out, "{}\n", calibration_note.trim());
    }
    if claims.is_empty() {
        out.push_str("No paper claims are recorded for this scenario.\n");
        return out;
    }
    out.push_str("| claim | paper | sim | sim/paper | within ±tol | trend holds | note |\n");
    out.push_str("|---|---:|---:|---:|:---:|:---:|---|\n");
    for claim in claims {
        let ratio = claim.ratio().map_or_else(|| "n/a".to_string(), |ratio| format!("{ratio:.2}"));
        let verdict = match claim.tolerance_verdict() {
            None if claim.not_simulated => "n/a (not simulated)".to_string(),
            Some(true) => format!("yes ({})", format_tolerance(claim.tolerance)),
            Some(false) => format!("**no** ({})", format_tolerance(claim.tolerance)),
            None => "–".to_string(),
        };
        let trend = match claim.trend_holds {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "–",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            cell(&claim.claim),
            claim.paper.map_or_else(|| "–".to_string(), format_number),
            format_number(claim.sim),
            ratio,
            verdict,
            trend,
            cell(&claim.note),
        );
    }
    let verdicts: Vec<bool> = claims.iter().filter_map(PaperClaim::tolerance_verdict).collect();
    let within = verdicts.iter().filter(|&&ok| ok).count();
    let trends: Vec<bool> = claims.iter().filter_map(|claim| claim.trend_holds).collect();
    let _ = write!(out, "\n**{within} of {} claims with a paper number within tolerance**", verdicts.len());
    let absent = claims.iter().filter(|c| c.not_simulated && c.paper.is_some()).count();
    if absent > 0 {
        let _ = write!(out, " ({absent} more not simulated)");
    }
    if !trends.is_empty() {
        let holding = trends.iter().filter(|&&holds| holds).count();
        let _ = write!(out, "; trend holds for {holding} of {} checked", trends.len());
    }
    out.push_str(".\n");
    out
}

/// Writes [`paper_vs_sim_markdown`] to `path`, atomically.
pub fn write_paper_vs_sim_md(
    path: impl AsRef<Path>,
    title: &str,
    claims: &[PaperClaim],
    calibration_note: &str,
) -> Result<(), ReportError> {
    write_atomic(path.as_ref(), paper_vs_sim_markdown(title, claims, calibration_note).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::scratch_dir;

    fn claim(paper: f64, sim: f64, tolerance: f64) -> PaperClaim {
        let paper = Some(paper);
        PaperClaim {
            claim: "throughput".into(),
            paper,
            sim,
            tolerance,
            trend_holds: None,
            note: String::new(),
            not_simulated: false,
        }
    }

    /// Goal: the ratio is sim/paper and undefined exactly where division is meaningless.
    #[test]
    fn ratio() {
        assert_eq!(claim(10.0, 12.5, 0.25).ratio(), Some(1.25));
        assert_eq!(claim(0.0, 1.0, 0.25).ratio(), None);
        assert_eq!(claim(0.0, 0.0, 0.25).ratio(), None);
        assert_eq!(claim(10.0, f64::NAN, 0.25).ratio(), None);
        assert_eq!(claim(-4.0, -2.0, 0.25).ratio(), Some(0.5));
    }

    /// Goal: the tolerance is relative to the paper's value, inclusive at the edge, symmetric,
    /// and anything uncheckable fails. Edges use values exact in binary so the test is not about
    /// rounding.
    #[test]
    fn within_tolerance() {
        assert!(claim(8.0, 10.0, 0.25).within_tolerance());
        assert!(claim(8.0, 6.0, 0.25).within_tolerance());
        assert!(!claim(8.0, 10.5, 0.25).within_tolerance());
        assert!(!claim(8.0, 5.5, 0.25).within_tolerance());
        assert!(claim(-8.0, -10.0, 0.25).within_tolerance());
        assert!(claim(0.0, 0.0, 0.25).within_tolerance());
        assert!(!claim(0.0, 0.1, 0.25).within_tolerance());
        assert!(!claim(8.0, f64::NAN, 0.25).within_tolerance());
        assert!(!claim(f64::INFINITY, f64::INFINITY, 0.25).within_tolerance());
        assert!(!claim(8.0, 8.0, -0.1).within_tolerance());
        assert!(!claim(8.0, 8.0, f64::NAN).within_tolerance());
        assert!(claim(8.0, 8.0, 0.0).within_tolerance());
    }

    #[test]
    fn number_format() {
        assert_eq!(format_number(12.5), "12.5");
        assert_eq!(format_number(3.0), "3");
        assert_eq!(format_number(0.123456), "0.1235");
        assert_eq!(format_number(1234.56), "1235");
        assert_eq!(format_number(1_250_000.0), "1250000");
        assert_eq!(format_number(0.0), "0");
        assert_eq!(format_number(f64::NAN), "n/a");
        assert_eq!(format_number(0.00012), "1.200e-4");
    }

    /// Goal: the Markdown holds the title, the note, one escaped row per claim with ratio,
    /// verdict, tolerance and trend, and the tally.
    #[test]
    fn markdown_contents() {
        let claims = vec![
            PaperClaim {
                claim: "SELCC | 8 CN".into(),
                paper: Some(10.0),
                sim: 9.0,
                tolerance: 0.25,
                trend_holds: Some(true),
                note: "line one\nline two".into(),
                not_simulated: false,
            },
            PaperClaim {
                claim: "GAM".into(),
                paper: Some(4.0),
                sim: 8.0,
                tolerance: 0.25,
                trend_holds: Some(false),
                note: String::new(),
                not_simulated: false,
            },
            claim(0.0, 1.0, 0.1),
        ];
        let text =
            paper_vs_sim_markdown("SELCC Fig. 12", &claims, "Calibrated on Fig. 10; keys scaled 1/100.");
        assert!(
            text.starts_with("# SELCC Fig. 12\n\nCalibrated on Fig. 10; keys scaled 1/100.\n\n"),
            "{text}"
        );
        assert!(text.contains("| claim | paper | sim | sim/paper | within ±tol | trend holds | note |"));
        assert!(
            text.contains("| SELCC \\| 8 CN | 10 | 9 | 0.90 | yes (±25%) | yes | line one line two |"),
            "{text}"
        );
        assert!(text.contains("| GAM | 4 | 8 | 2.00 | **no** (±25%) | **no** |  |"), "{text}");
        assert!(text.contains("| throughput | 0 | 1 | n/a | **no** (±10%) | – |  |"), "{text}");
        assert!(
            text.contains(
                "**1 of 3 claims with a paper number within tolerance**; trend holds for 1 of 2 checked."
            ),
            "{text}"
        );
        // One header, one separator, three rows.
        assert_eq!(text.lines().filter(|line| line.starts_with('|')).count(), 5);
    }

    #[test]
    fn a_trend_only_row_has_no_paper_number_and_no_tolerance_verdict() {
        // Goal: a qualitative statement is a trend row with no invented number: `–` in the paper
        // and tolerance columns, left out of the tolerance tally, `null` in the JSON.
        let mut row = claim(0.0, 0.3, 0.25);
        row.paper = None;
        row.trend_holds = Some(true);
        assert_eq!(row.tolerance_verdict(), None);
        assert_eq!(row.ratio(), None);
        assert!(row.to_json()["within_tolerance"].is_null());
        let text = paper_vs_sim_markdown("t", &[row, claim(10.0, 9.0, 0.25)], "");
        assert!(text.contains("| – | 0.3 | n/a | – | yes |"), "{text}");
        assert!(text.contains("**1 of 1 claims with a paper number within tolerance**"), "{text}");
    }

    #[test]
    fn a_row_without_a_simulated_value_is_na_not_a_miss() {
        // Goal: a claim about a system the scenario does not simulate (its metric is absent)
        // is neither reproduced nor missed: `null` verdict, "n/a" in the table, counted apart.
        let mut absent = claim(1.67, f64::NAN, 0.25);
        absent.not_simulated = true;
        assert_eq!(absent.tolerance_verdict(), None);
        assert!(absent.to_json()["within_tolerance"].is_null());
        assert_eq!(absent.to_json()["not_simulated"], true);
        let text = paper_vs_sim_markdown("t", &[absent, claim(10.0, 9.0, 0.25)], "");
        assert!(text.contains("| 1.67 | n/a | n/a | n/a (not simulated) |"), "{text}");
        assert!(
            text.contains("**1 of 1 claims with a paper number within tolerance** (1 more not simulated)"),
            "{text}"
        );
    }

    #[test]
    fn markdown_without_claims_or_note() {
        let text = paper_vs_sim_markdown("T", &[], "  ");
        assert_eq!(text, "# T\n\nNo paper claims are recorded for this scenario.\n");
    }

    /// Goal: the JSON form has the documented keys, and NaN becomes null instead of failing.
    #[test]
    fn json_form() {
        let mut nan_claim = claim(10.0, f64::NAN, 0.25);
        nan_claim.trend_holds = Some(true);
        let json = paper_vs_sim_json(&[claim(10.0, 12.0, 0.25), nan_claim]);
        let list = json.as_array().unwrap();
        assert_eq!(list.len(), 2);
        let first = list[0].as_object().unwrap();
        for key in ["claim", "paper", "sim", "ratio", "within_tolerance", "trend_holds", "note"] {
            assert!(first.contains_key(key), "missing {key}");
        }
        assert_eq!(first["ratio"], 1.2);
        assert_eq!(first["within_tolerance"], true);
        assert!(first["trend_holds"].is_null());
        assert!(list[1]["sim"].is_null());
        assert!(list[1]["ratio"].is_null());
        assert_eq!(list[1]["within_tolerance"], false);
        assert_eq!(list[1]["trend_holds"], true);
        // Serializes to valid JSON text.
        serde_json::to_string(&json).unwrap();
    }

    #[test]
    fn writes_markdown_file() {
        let dir = scratch_dir("claims-write");
        let path = dir.join("paper-vs-sim.md");
        write_paper_vs_sim_md(&path, "T", &[claim(1.0, 1.0, 0.1)], "").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("| throughput | 1 | 1 | 1.00 | yes (±10%) | – |  |"), "{text}");
    }
}
