//! Replay files: everything needed to reproduce one failing schedule bit for bit, in one JSON
//! document — the scenario itself (and its hash, and where it came from), the seed (it draws the
//! swarm configuration and the workload), the strategy, the mutant, the fault families, the choice
//! log, the commit, and what the run looked like (trace hash, checker, message).
//!
//! Replaying uses `Strategy::Replay` over the stored log whatever strategy found the failure: the
//! log holds every decision, so random, PCT and shrunk schedules all replay the same way.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::target::Faults;
use crate::choice::ChoiceLog;

pub const FORMAT: &str = "dmsim-fuzz-replay/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayFile {
    pub format: String,
    /// Where the scenario was read from (informational: the content below is what replays).
    pub scenario_path: String,
    /// [`content_hash`] of the scenario text.
    pub scenario_hash: String,
    pub scenario: Value,
    pub seed: u64,
    /// How the schedule was found: `random`, `pct:<depth>:<steps>`, `shrunk from …`.
    pub strategy: String,
    pub mutant: String,
    pub faults: Faults,
    pub choice_log: ChoiceLog,
    pub git_commit: String,
    /// Trace hash of the run of `choice_log`, as hex.
    pub trace_hash: String,
    pub checker: String,
    pub message: String,
    /// Decisions before shrinking (equal to the log length if not shrunk).
    pub original_log_len: usize,
    pub swarm: String,
}

/// FNV-1a over the bytes, as 16 hex digits: stable across platforms and releases.
pub fn content_hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// `git rev-parse HEAD` of the current directory's checkout, with `-dirty` when tracked files
/// differ from it, or `"unknown"` outside a repository. Files under `results/` do not count: they
/// are what runs write, so regenerating one figure after another must not mark the code dirty.
pub fn git_commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_string())
    };
    match git(&["rev-parse", "HEAD"]).filter(|s| !s.is_empty()) {
        Some(head)
            if git(&[
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ":/",
                ":(top,exclude)results",
            ])
            .is_some_and(|s| !s.is_empty()) =>
        {
            format!("{head}-dirty")
        }
        Some(head) => head,
        None => "unknown".into(),
    }
}

impl ReplayFile {
    pub fn read(path: &Path) -> Result<ReplayFile, String> {
        let text = crate::scenario::strict_json::read_input(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let file: ReplayFile = crate::scenario::load::parse_typed(
            &crate::scenario::strict_json::parse(&text)
                .map_err(|e| format!("{}: malformed JSON: {e}", path.display()))?,
            "",
        )
        .map_err(|p| format!("{}: {}: {}", path.display(), p.path, p.reason))?;
        if file.format != FORMAT {
            return Err(format!("{}: format {:?}, expected {FORMAT:?}", path.display(), file.format));
        }
        Ok(file)
    }

    /// The scenario as text (what the target parses).
    pub fn scenario_text(&self) -> String {
        serde_json::to_string_pretty(&self.scenario).expect("JSON value serializes")
    }

    /// Write under `dir` as `<mutant>-seed<seed>.json`; returns the path.
    pub fn write_in(&self, dir: &Path) -> Result<PathBuf, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(format!("{}-seed{}.json", self.mutant, self.seed));
        let mut text = serde_json::to_string_pretty(self).expect("replay file serializes");
        text.push('\n');
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }
}
