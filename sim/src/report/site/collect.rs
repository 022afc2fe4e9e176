//! Reading `results/`: which papers and figures exist, and what each summary says.

use std::fs;
use std::path::{Path, PathBuf};

use super::Counts;
use crate::report::error::ReportError;

/// A summary larger than this is not one `dmsim run` wrote; refuse it rather than load it.
const MAX_SUMMARY_BYTES: u64 = 256 << 20;

/// One `results/<paper>/<figure>/` directory.
#[derive(Clone, Debug)]
pub struct FigureResult {
    pub name: String,
    pub dir: PathBuf,
    pub summary: serde_json::Value,
    /// Plain files of the directory (copied into the site), sorted.
    pub files: Vec<String>,
}

/// One `results/<paper>/` directory with at least one figure.
#[derive(Clone, Debug)]
pub struct PaperResults {
    pub name: String,
    /// `REPORT.md`, if the paper has one.
    pub report_md: Option<String>,
    pub figures: Vec<FigureResult>,
}

impl FigureResult {
    pub fn claims(&self) -> &[serde_json::Value] {
        self.summary["paper_vs_sim"].as_array().map_or(&[], |v| v.as_slice())
    }

    pub fn counts(&self) -> Counts {
        let mut c = Counts { figures: 1, ..Counts::default() };
        for row in self.claims() {
            c.add_claim(row);
        }
        c.failed_points = self.summary["failures"].as_array().map_or(0, Vec::len);
        c
    }
}

impl PaperResults {
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for f in &self.figures {
            c.add(&f.counts());
        }
        c
    }
}

/// Every paper below `root`, sorted by name; figures sorted naturally (fig9 before fig10).
/// `skip` (the site's own output directory, if it lies inside `root`) is ignored, as are hidden
/// directories (staging directories of runs in progress).
pub fn collect(root: &Path, skip: &Path) -> Result<Vec<PaperResults>, ReportError> {
    let skip = fs::canonicalize(skip).ok();
    let mut papers = Vec::new();
    for dir in sorted_subdirs(root)? {
        if fs::canonicalize(&dir).ok() == skip && skip.is_some() {
            continue;
        }
        let mut figures = Vec::new();
        for fig in sorted_subdirs(&dir)? {
            let summary_path = fig.join("summary.json");
            if !summary_path.is_file() {
                continue;
            }
            figures.push(read_figure(&fig, &summary_path)?);
        }
        if figures.is_empty() {
            continue;
        }
        figures.sort_by_key(|f| natural_key(&f.name));
        let report = dir.join("REPORT.md");
        let report_md = if report.is_file() { Some(read_limited(&report)?) } else { None };
        papers.push(PaperResults { name: file_name(&dir), report_md, figures });
    }
    Ok(papers)
}

fn read_figure(dir: &Path, summary_path: &Path) -> Result<FigureResult, ReportError> {
    let text = read_limited(summary_path)?;
    let summary: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| ReportError::invalid(summary_path, format!("not a dmsim summary: {e}")))?;
    if !summary.is_object() {
        return Err(ReportError::invalid(summary_path, "not a dmsim summary: not a JSON object"));
    }
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| ReportError::io(dir, e))? {
        let entry = entry.map_err(|e| ReportError::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().map_err(|e| ReportError::io(&entry.path(), e))?.is_file()
            && !name.starts_with('.')
        {
            files.push(name);
        }
    }
    files.sort();
    Ok(FigureResult { name: file_name(dir), dir: dir.to_path_buf(), summary, files })
}

fn read_limited(path: &Path) -> Result<String, ReportError> {
    let len = fs::metadata(path).map_err(|e| ReportError::io(path, e))?.len();
    if len > MAX_SUMMARY_BYTES {
        return Err(ReportError::invalid(path, format!("{len} bytes: larger than any file dmsim writes")));
    }
    fs::read_to_string(path).map_err(|e| ReportError::io(path, e))
}

fn sorted_subdirs(dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| ReportError::io(dir, e))? {
        let entry = entry.map_err(|e| ReportError::io(dir, e))?;
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if !hidden && entry.path().is_dir() {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// "fig9" < "fig10" < "fig10b": digit runs compare as numbers.
fn natural_key(name: &str) -> Vec<(String, u64)> {
    let mut key = Vec::new();
    let mut text = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            let mut n = u64::from(c as u8 - b'0');
            while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                n = n.saturating_mul(10).saturating_add(u64::from(*d as u8 - b'0'));
                chars.next();
            }
            key.push((std::mem::take(&mut text), n));
        } else {
            text.push(c);
        }
    }
    key.push((text, 0));
    key
}

#[cfg(test)]
mod tests {
    use super::natural_key;

    #[test]
    fn figures_sort_as_a_reader_numbers_them() {
        let mut names = vec!["fig10b", "fig9", "fig10", "gcl-size", "fig15a"];
        names.sort_by_key(|n| natural_key(n));
        assert_eq!(names, ["fig9", "fig10", "fig10b", "fig15a", "gcl-size"]);
    }
}
