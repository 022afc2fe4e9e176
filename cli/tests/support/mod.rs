//! Shared by integration tests: run a scenario document through the `dmsim` binary.

// Each test crate compiles this module and uses part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// Writes `json` to a fresh scratch directory named after the test process and `tag`, runs
/// `dmsim run` on it with `-j 1`, and returns the output and the directory (results in `out/`).
pub fn run_scenario(tag: &str, json: &serde_json::Value) -> (Output, PathBuf) {
    run_scenario_with(tag, json, &[])
}

/// [`run_scenario`] with more `dmsim run` arguments.
pub fn run_scenario_with(tag: &str, json: &serde_json::Value, extra: &[&str]) -> (Output, PathBuf) {
    let dir = std::env::temp_dir().join(format!("dmsim-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("scenario.json");
    std::fs::write(&file, json.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dmsim"))
        .args(["run", file.to_str().unwrap(), "--out", dir.join("out").to_str().unwrap(), "-j", "1"])
        .args(extra)
        .output()
        .unwrap();
    (out, dir)
}
