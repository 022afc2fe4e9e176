//! Shrunk failures are regression tests, and the fuzzing machinery keeps its promises: a replay
//! reproduces its run bit for bit, shards merge into the whole, PCT and faults run clean on the
//! correct protocol.
//!
//! Each file in `tests/replays/` was written by `dmsim fuzz … --mutant M` (shrunk). The test replays
//! it against its mutant (the violation must still appear, with the same checker) and against the
//! correct protocol (which must pass the same schedule). A replay that stops failing after a
//! change to the protocol or engine means the schedule drifted: re-run the campaign line in the
//! file's `strategy` field and commit the new file.

use std::path::PathBuf;

use dmsim::registry;
use dmsim_sim::choice::Strategy;
use dmsim_sim::fuzz::campaign::{finish_failure, run_campaign, CampaignSpec, FailureContext, StrategyKind};
use dmsim_sim::fuzz::shrink::ShrinkBudget;
use dmsim_sim::fuzz::{CampaignSummary, Faults, FuzzTarget, ProtocolTarget, ReplayFile, RunRequest, Verdict};

fn replay_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/replays"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/replays")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

fn replay(file: &ReplayFile, mutant: &str) -> dmsim_sim::fuzz::RunResult {
    let target = ProtocolTarget::from_json(&file.scenario_text(), &registry::sim())
        .expect("embedded scenario is valid");
    target.run(&RunRequest {
        seed: file.seed,
        strategy: Strategy::Replay { log: file.choice_log.clone() },
        mutant: mutant.to_string(),
        faults: file.faults,
        trace: false,
    })
}

#[test]
fn committed_replays_still_fail_for_their_mutant_and_pass_without_it() {
    let files = replay_files();
    assert!(files.len() >= 2, "expected committed replay files, found {files:?}");
    for path in files {
        let file = ReplayFile::read(&path).unwrap();
        let r = replay(&file, &file.mutant);
        let failure = r.verdict.failure().unwrap_or_else(|| panic!("{}: no longer fails", path.display()));
        assert_eq!(failure.checker, file.checker, "{}: another checker fired", path.display());
        let fixed = replay(&file, "none");
        assert_eq!(
            fixed.verdict,
            Verdict::Pass,
            "{}: the correct protocol fails this schedule",
            path.display()
        );
    }
}

fn target() -> (ProtocolTarget, String) {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/selcc/fuzz-small.json"))
            .expect("scenario file");
    (ProtocolTarget::from_json(&text, &registry::sim()).expect("valid"), text)
}

fn spec(seeds: Vec<u64>, strategy: StrategyKind, mutant: &str, faults: Faults) -> CampaignSpec {
    CampaignSpec { seeds, strategy, mutant: mutant.into(), faults, stop_after: None, progress: false }
}

fn pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap()
}

#[test]
fn a_found_failure_shrinks_and_replays_bit_for_bit() {
    // Goal: find → shrink → replay file → the replay has the recorded trace hash and checker.
    let (target, text) = target();
    let run = pool().install(|| {
        run_campaign(
            &target,
            &spec((1..=4).collect(), StrategyKind::Random, "release-without-flush", Faults::default()),
        )
    });
    let (seed, _, found) = run.failing.first().expect("release-without-flush is caught in 4 seeds");
    let context = FailureContext {
        scenario_path: "scenarios/selcc/fuzz-small.json",
        scenario_text: &text,
        mutant: "release-without-flush",
        faults: Faults::default(),
        strategy: "random".into(),
        shrink: true,
        budget: ShrinkBudget { runs_max: 200 },
    };
    let (file, traced) = finish_failure(&target, &context, *seed, found).unwrap();
    assert!(file.choice_log.len() <= found.choice_log.len());
    let again = replay(&file, "release-without-flush");
    assert_eq!(format!("{:016x}", again.trace_hash), file.trace_hash);
    assert_eq!(again.trace_hash, traced.trace_hash);
    assert_eq!(again.verdict.failure().unwrap().checker, file.checker);
    assert!(
        !traced.verdict.failure().unwrap().last_trace.is_empty(),
        "a traced failure keeps its last lines"
    );
    // And through JSON.
    let dir = std::env::temp_dir().join(format!("dmsim-fuzz-test-{}", std::process::id()));
    let path = file.write_in(&dir).unwrap();
    assert_eq!(ReplayFile::read(&path).unwrap(), file);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn shards_partition_the_seeds_and_merge_into_the_whole() {
    let (target, _) = target();
    let seeds: Vec<u64> = (1..=12).collect();
    let mutant = "release-exclusive-by-cas";
    let whole = pool().install(|| {
        run_campaign(&target, &spec(seeds.clone(), StrategyKind::Random, mutant, Faults::default()))
    });
    let parts: Vec<CampaignSummary> = (0..3)
        .map(|i| {
            let mine: Vec<u64> = seeds.iter().copied().filter(|s| s % 3 == i).collect();
            pool()
                .install(|| {
                    run_campaign(&target, &spec(mine, StrategyKind::Random, mutant, Faults::default()))
                })
                .summary
        })
        .collect();
    let merged = CampaignSummary::merge(&parts);
    assert_eq!(merged.schedules, whole.summary.schedules);
    assert_eq!(merged.violations, whole.summary.violations);
    assert_eq!(merged.first_failing_seed, whole.summary.first_failing_seed);
    let seeds_failed = |s: &CampaignSummary| s.failures.iter().map(|f| f.seed).collect::<Vec<_>>();
    assert_eq!(seeds_failed(&merged), seeds_failed(&whole.summary));
    // Via JSON, as shards on different machines would hand them over.
    let json = serde_json::to_string(&parts[0]).unwrap();
    let back: CampaignSummary = serde_json::from_str(&json).unwrap();
    assert_eq!(back.schedules, parts[0].schedules);
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let (target, _) = target();
    let request = RunRequest {
        seed: 5,
        strategy: Strategy::Random { seed: 5 },
        mutant: "none".into(),
        faults: Faults::default(),
        trace: false,
    };
    let a = target.run(&request);
    let b = target.run(&RunRequest { trace: true, ..request.clone() });
    assert_eq!(a.trace_hash, b.trace_hash, "tracing does not change the run");
    assert_eq!(a.choice_log, b.choice_log);
    assert!(a.ready_decisions > 0, "the workload races");
    let c = target.run(&RunRequest { strategy: Strategy::Replay { log: a.choice_log.clone() }, ..request });
    assert_eq!(c.trace_hash, a.trace_hash, "the log replays the run");
}

#[test]
fn pct_and_faults_leave_the_correct_protocol_clean() {
    // Goal: PCT (depth 3) and every fault family run without false alarms; crashes are reported
    // as "no recovery", never as violations. 12 schedules each.
    let (target, _) = target();
    let pct = pool().install(|| {
        run_campaign(
            &target,
            &spec((1..=12).collect(), StrategyKind::Pct { depth: 3 }, "none", Faults::default()),
        )
    });
    assert_eq!(pct.summary.violations, 0, "{:?}", pct.summary.failures);
    assert!(pct.summary.steps_expected > 0);
    let all = Faults::parse("all").unwrap();
    let faulty = pool()
        .install(|| run_campaign(&target, &spec((1..=12).collect(), StrategyKind::Random, "none", all)));
    assert_eq!(faulty.summary.violations, 0, "{:?}", faulty.summary.failures);
    let crash_seeds =
        (1..=12u64).filter(|s| target.describe_swarm(*s, all).contains("crash=")).count() as u64;
    assert!(faulty.summary.crashes <= crash_seeds);
}

#[test]
fn pct_finds_a_mutant() {
    let (target, _) = target();
    let mut s =
        spec((1..=20).collect(), StrategyKind::Pct { depth: 3 }, "release-before-flush", Faults::default());
    s.stop_after = Some(1);
    let run = pool().install(|| run_campaign(&target, &s));
    assert!(run.summary.violations > 0, "PCT missed release-before-flush in 20 schedules");
}

#[test]
fn known_bugs_still_reproduce() {
    // Goal: an open bug the fuzzer found stays reproducible until it is fixed (then this test
    // fails: turn the replay into a regression — a mutant that restores the bug, the file in
    // tests/replays/ naming it — and update the protocol's NEEDS.md). Each file: the correct
    // protocol, a schedule that breaks an invariant. None is open since session 33 (GAM's two,
    // `gam-evicting-line-serves-reads-*.json`); the directory comes back with the next one.
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/replays/known-bugs"));
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("{}: {e}", dir.display()),
    };
    files.sort();
    for path in files {
        let file = ReplayFile::read(&path).unwrap();
        assert_eq!(file.mutant, "none", "{}", path.display());
        let r = replay(&file, "none");
        let failure =
            r.verdict.failure().unwrap_or_else(|| panic!("{}: fixed? it no longer fails", path.display()));
        assert_eq!(failure.checker, file.checker, "{}", path.display());
    }
}

#[test]
fn former_false_alarms_replay_clean() {
    // Goal: schedules an over-strict invariant once flagged on the correct protocol now pass
    // (the choice log replays the same schedule; the recorded trace hash is of the run the
    // invariant stopped, so it cannot match a run that goes on). SELCC's S2 "one Modified copy"
    // fired while a Case-2 downgrade was in flight (see `selcc/check.rs`, S2): these replays
    // keep that window covered.
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/replays/false-alarms"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(!files.is_empty());
    for path in files {
        let file = ReplayFile::read(&path).unwrap();
        let r = replay(&file, "none");
        assert_eq!(r.verdict, Verdict::Pass, "{}", path.display());
    }
}
