//! Helpers shared by the report tests.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::atomic::TEMP_MARKER;

static SCRATCH_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh, empty directory for one test, under the system temp directory; unique per process
/// and call so parallel tests never share one.
pub(crate) fn scratch_dir(test_name: &str) -> PathBuf {
    let counter = SCRATCH_COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir()
        .join("dmsim-report-tests")
        .join(format!("{test_name}-{}-{counter}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Temporary files of `atomic.rs` anywhere under `dir`.
pub(crate) fn leftover_temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.file_name().is_some_and(|name| name.to_string_lossy().contains(TEMP_MARKER)) {
                found.push(path);
            }
        }
    }
    found
}
