//! Write-then-rename, so that a crash or a full disk never leaves a half-written result file.
//!
//! The bytes go to a hidden temporary file in the *same directory* as the target (a rename is
//! only atomic within one file system), are synced, and the temporary file is then renamed over
//! the target. A reader sees either the old file or the new one, never a prefix. If anything
//! fails the temporary file is removed, so no `.tmp` litter survives an error either. The
//! directory itself is not synced: surviving power loss is not a goal, surviving a crashed or
//! killed run is.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::ReportError;

/// Distinguishes temporary files of concurrent writers in one process (rayon runs scenario points
/// in parallel); the process id distinguishes processes.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Marker in every temporary file name; tests look for it to prove nothing was left behind.
pub(crate) const TEMP_MARKER: &str = ".dmsim-tmp.";

/// Atomically replaces `path` with `bytes`, creating the parent directories if needed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let file_name = match path.file_name() {
        Some(name) => name.to_string_lossy().into_owned(),
        None => return Err(ReportError::invalid(path, "the path has no file name")),
    };
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&directory).map_err(|error| ReportError::io(&directory, error))?;

    let counter = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let temp_name = format!(".{file_name}{TEMP_MARKER}{}.{counter}", std::process::id());
    let temp_path = directory.join(temp_name);

    let result = write_and_rename(&temp_path, path, bytes);
    if result.is_err() {
        // Best effort: the original error is the one worth reporting.
        let _ = fs::remove_file(&temp_path);
    }
    result
}

fn write_and_rename(temp_path: &Path, path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    // `create_new` so that two writers can never share a temporary file.
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temp_path)
        .map_err(|error| ReportError::io(temp_path, error))?;
    file.write_all(bytes).map_err(|error| ReportError::io(temp_path, error))?;
    file.sync_all().map_err(|error| ReportError::io(temp_path, error))?;
    drop(file);
    // The error names the target: that is the file the user asked for.
    fs::rename(temp_path, path).map_err(|error| ReportError::io(path, error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::{leftover_temp_files, scratch_dir};

    /// Goal: a successful write replaces the content and leaves only the target behind.
    #[test]
    fn replaces_content_and_leaves_no_temp_file() {
        let dir = scratch_dir("atomic-replace");
        let path = dir.join("a.txt");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "second");
        assert!(leftover_temp_files(&dir).is_empty());
        let entries: Vec<_> = fs::read_dir(&dir).unwrap().collect();
        assert_eq!(entries.len(), 1);
    }

    /// Goal: a failing rename (the target is a directory) reports the target path and removes the
    /// temporary file. Method: create a directory where the file should go.
    #[test]
    fn failed_rename_names_the_path_and_cleans_up() {
        let dir = scratch_dir("atomic-fail");
        let path = dir.join("occupied");
        fs::create_dir(&path).unwrap();
        fs::write(path.join("keep"), b"x").unwrap();
        let error = write_atomic(&path, b"data").unwrap_err();
        assert_eq!(error.path, path);
        assert!(error.to_string().contains("occupied"), "{error}");
        assert!(leftover_temp_files(&dir).is_empty());
    }

    /// Goal: missing parent directories are created.
    #[test]
    fn creates_parent_directories() {
        let dir = scratch_dir("atomic-parents");
        let path = dir.join("x/y/z.json");
        write_atomic(&path, b"{}").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{}");
    }
}
