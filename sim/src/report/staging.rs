//! A results directory written whole or not at all: a run writes every file (and its traces)
//! into a hidden sibling staging directory, which then replaces the target in two renames. A run
//! that fails half-way leaves the previous results untouched instead of new files beside an old
//! `summary.json`; a dropped, unpublished staging directory is removed.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::atomic::TEMP_MARKER;
use super::error::ReportError;
use super::results_dir::ResultsDir;

static STAGING_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A staging directory for `target`; [`Staging::publish`] moves it into place.
pub struct Staging {
    dir: ResultsDir,
    target: PathBuf,
    published: bool,
}

impl Staging {
    /// Creates `.<target name>.dmsim-tmp.<pid>.<n>` beside `target` (whose parent is created).
    pub fn beside(target: &Path) -> Result<Staging, ReportError> {
        let name = target
            .file_name()
            .ok_or_else(|| ReportError::invalid(target, "the path has no directory name"))?
            .to_string_lossy()
            .into_owned();
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let n = STAGING_COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = parent.join(format!(".{name}{TEMP_MARKER}{}.{n}", std::process::id()));
        let dir = ResultsDir::at(&path)?;
        Ok(Staging { dir, target: target.to_path_buf(), published: false })
    }

    /// The directory the run's results replace.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Where to write the run's files.
    pub fn dir(&self) -> &ResultsDir {
        &self.dir
    }

    /// Replace the target with the staged directory: the old one (if any) is renamed aside,
    /// the staged one renamed into place, the old one removed.
    pub fn publish(mut self) -> Result<(), ReportError> {
        let staged = self.dir.path().to_path_buf();
        let aside = staged.with_extension("old");
        let had_old = self.target.exists();
        if had_old {
            fs::rename(&self.target, &aside).map_err(|e| ReportError::io(&self.target, e))?;
        }
        if let Err(e) = fs::rename(&staged, &self.target) {
            if had_old {
                // Put the previous results back; the error is the one worth reporting.
                let _ = fs::rename(&aside, &self.target);
            }
            return Err(ReportError::io(&self.target, e));
        }
        self.published = true;
        if had_old {
            fs::remove_dir_all(&aside).map_err(|e| ReportError::io(&aside, e))?;
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.published {
            let _ = fs::remove_dir_all(self.dir.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::scratch_dir;

    #[test]
    fn a_published_run_replaces_the_whole_directory_and_an_abandoned_one_changes_nothing() {
        let root = scratch_dir("staging");
        let target = root.join("selcc/fig12");
        fs::create_dir_all(&target).unwrap();
        fs::write(target.join("summary.json"), "old").unwrap();
        fs::write(target.join("stale.csv"), "old").unwrap();

        let abandoned = Staging::beside(&target).unwrap();
        fs::write(abandoned.dir().file("summary.json"), "half").unwrap();
        drop(abandoned);
        assert_eq!(fs::read_to_string(target.join("summary.json")).unwrap(), "old");

        let staging = Staging::beside(&target).unwrap();
        fs::write(staging.dir().file("summary.json"), "new").unwrap();
        staging.publish().unwrap();
        assert_eq!(fs::read_to_string(target.join("summary.json")).unwrap(), "new");
        assert!(!target.join("stale.csv").exists(), "no file of the old run survives");
        let names: Vec<_> =
            fs::read_dir(root.join("selcc")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("fig12")], "no staging litter: {names:?}");
    }
}
