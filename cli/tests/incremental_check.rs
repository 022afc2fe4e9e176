//! SELCC's incremental coherence check (`protocols/src/selcc/check_incremental.rs`) gives the
//! full check's verdict: many schedules of the correct protocol and of the mutants that break a
//! coherence invariant, with the full check evaluated beside the incremental one after every
//! event (`DMSIM_VERIFY_INCREMENTAL_CHECK=1`: any difference panics the run, which the campaign
//! reports as a `panic` failure naming the disagreement), and the same campaigns' verdicts with
//! the incremental check alone, seed by seed.
//!
//! Runs `dmsim fuzz` as a child process so the variable reaches only that process.
//! Cost: 350 schedules twice (about 700 schedules of debug build).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The mutants whose first violation is a per-event coherence invariant (S2, S3 or S8), each
/// in at least 10 of the first 60 seeds (measured with `dmsim fuzz … --mutant M --seeds 60`).
const MUTANTS: &[&str] = &[
    "read-through-modified",
    "reader-keeps-bit",
    "downgrade-forward-before-faa",
    "handler-without-local-latch",
    "release-exclusive-by-cas",
];
const SEEDS_CORRECT: &str = "150";
const SEEDS_MUTANT: &str = "40";

/// The campaign's summary: `(seed, checker, message)` of every failure, in seed order.
fn campaign(mutant: &str, seeds: &str, verify_every: &str, out: &Path) -> Vec<(u64, String, String)> {
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/selcc/fuzz-small.json");
    let status = Command::new(env!("CARGO_BIN_EXE_dmsim"))
        .args(["fuzz", scenario.to_str().unwrap(), "--seeds", seeds, "--mutant", mutant])
        .args(["--quiet", "--no-shrink", "--replays", "0", "--out", out.to_str().unwrap()])
        .env("DMSIM_VERIFY_INCREMENTAL_CHECK", verify_every)
        .output()
        .expect("dmsim runs");
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("shard-0-of-1.json")).expect("the campaign writes a summary"),
    )
    .expect("summary is JSON");
    assert_eq!(summary["schedules"].as_u64(), Some(seeds.parse().unwrap()), "{status:?}");
    summary["failures"]
        .as_array()
        .expect("failures")
        .iter()
        .map(|f| {
            (
                f["seed"].as_u64().unwrap(),
                f["failure"]["checker"].as_str().unwrap().to_string(),
                f["failure"]["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn incremental_and_full_coherence_checks_agree() {
    let dir = std::env::temp_dir().join(format!("dmsim-incremental-check-{}", std::process::id()));
    let mut compared_violations = 0;
    for (mutant, seeds) in
        std::iter::once(("none", SEEDS_CORRECT)).chain(MUTANTS.iter().map(|m| (*m, SEEDS_MUTANT)))
    {
        let both = campaign(mutant, seeds, "1", &dir.join(mutant).join("both"));
        let alone = campaign(mutant, seeds, "0", &dir.join(mutant).join("alone"));
        for (seed, checker, message) in &both {
            assert!(
                !message.contains("disagrees with the full check"),
                "{mutant}, seed {seed}: {checker}: {message}"
            );
        }
        assert_eq!(both, alone, "{mutant}: verdicts differ with the full check beside the incremental one");
        if mutant == "none" {
            assert!(both.is_empty(), "the correct protocol fails: {:?}", both.first());
        } else {
            let coherence =
                both.iter().filter(|(_, c, _)| c.starts_with('S') && !c.starts_with("S4")).count();
            assert!(coherence > 0, "{mutant}: no coherence violation in {seeds} schedules, nothing compared");
            compared_violations += coherence;
        }
    }
    // Each violating schedule stopped at an event where both checks found the same violation.
    assert!(compared_violations >= 50, "only {compared_violations} coherence violations compared");
    let _ = std::fs::remove_dir_all(&dir);
}
