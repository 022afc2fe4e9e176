//! DiFache's mutants are caught and the correct protocol passes the same campaigns
//! (`scenarios/difache/fuzz-small.json`, seeds from 1 in order, stopping at the first violation).
//!
//! Measured with `dmsim fuzz scenarios/difache/fuzz-small.json --seeds 200 --mutant M`:
//! the seven mutants in [`PLAIN`] fail 7–191 of 200 random schedules. The two in [`FAULTED`]
//! need a client paused between two steps of a read miss (a write's invalidation must land
//! inside the miss), which random scheduling alone does not produce: with `--faults delay,pause`
//! `valid-after-fetch` first fails at seed 29 and `paper-owner-order` at seed 405 (about 1 in
//! 300–400 schedules). The one in [`VERB_DELAYED`] needs a bypassing write's flush WRITE
//! in flight across a whole mode switch: with `--faults verb-delay,pause` (a one-sided verb
//! delayed like an RC retransmission, session 27) `bypass-write-no-recheck` first fails at seed
//! 191. The one in [`RESPONSE_DELAYED`] needs an older miss's fetch to complete after a newer
//! local miss's fetch of the same object installed (a remote write invalidated in between):
//! with `--faults response-delay` (a one-sided response that takes a slower path, session 28)
//! `install-ignores-ticket` first fails at seed 499 (0 of 1,500 with verb delays before).

use dmsim::registry;
use dmsim_sim::fuzz::campaign::{run_campaign, CampaignSpec, StrategyKind};
use dmsim_sim::fuzz::{CampaignSummary, Faults, FuzzTarget, ProtocolTarget};

const PLAIN: &[&str] = &[
    "invalidate-before-flush",
    "owner-bit-after-fetch",
    "owner-bit-by-write",
    "invalidate-first-owner-only",
    "hit-ignores-fill",
    "switch-without-flag",
    "alloc-default-on",
];
const PLAIN_BUDGET: u64 = 40;
const FAULTED: &[(&str, u64)] = &[("valid-after-fetch", 100), ("paper-owner-order", 450)];
const VERB_DELAYED: &[(&str, u64)] = &[("bypass-write-no-recheck", 250)];
const RESPONSE_DELAYED: &[(&str, u64)] = &[("install-ignores-ticket", 600)];
/// Faulted schedules the correct protocol must pass here (the long campaigns are in NEEDS.md).
const FAULTED_CLEAN: u64 = 100;

fn target() -> ProtocolTarget {
    target_of("fuzz-small.json")
}

fn target_of(file: &str) -> ProtocolTarget {
    let path = format!("{}/../scenarios/difache/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("scenario file");
    ProtocolTarget::from_json(&text, &registry::sim()).unwrap_or_else(|p| panic!("{path}: {p:?}"))
}

fn campaign(
    target: &ProtocolTarget,
    mutant: &str,
    budget: u64,
    faults: &str,
    stop_at_first: bool,
) -> CampaignSummary {
    let spec = CampaignSpec {
        seeds: (1..=budget).collect(),
        strategy: StrategyKind::Random,
        mutant: mutant.to_string(),
        faults: Faults::parse(faults).unwrap(),
        stop_after: stop_at_first.then_some(1),
        progress: false,
    };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    pool.install(|| run_campaign(target, &spec)).summary
}

#[test]
fn every_difache_mutant_in_the_lists_is_caught() {
    let target = target();
    let mut missed = Vec::new();
    let plain = PLAIN.iter().map(|n| (*n, PLAIN_BUDGET, "none"));
    let faulted = FAULTED.iter().map(|(n, b)| (*n, *b, "delay,pause"));
    let verb_delayed = VERB_DELAYED.iter().map(|(n, b)| (*n, *b, "verb-delay,pause"));
    let response_delayed = RESPONSE_DELAYED.iter().map(|(n, b)| (*n, *b, "response-delay"));
    for (name, budget, faults) in plain.chain(faulted).chain(verb_delayed).chain(response_delayed) {
        let summary = campaign(&target, name, budget, faults, true);
        match summary.first_failing_seed {
            Some(seed) => eprintln!("difache {name}: caught at seed {seed} (faults {faults})"),
            None => missed.push(name),
        }
    }
    assert!(missed.is_empty(), "difache mutants not caught: {missed:?}");
}

#[test]
fn correct_difache_passes_the_same_campaigns() {
    let target = target();
    for (budget, faults) in [
        (PLAIN_BUDGET, "none"),
        (FAULTED_CLEAN, "delay,pause"),
        (FAULTED_CLEAN, "verb-delay,pause"),
        (FAULTED_CLEAN, "response-delay"),
    ] {
        let summary = campaign(&target, "none", budget, faults, false);
        assert_eq!(summary.schedules, budget);
        assert_eq!(summary.violations, 0, "faults {faults}: false alarm: {:?}", summary.failures);
    }
}

#[test]
fn difache_mutants_are_named_described_and_at_least_eight() {
    let target = target();
    let mutants = target.mutants();
    assert!(mutants.len() >= 8, "{} mutants", mutants.len());
    for (name, breaks) in &mutants {
        assert!(target.knows_mutant(name));
        assert!(!breaks.is_empty());
    }
    for name in PLAIN.iter().copied().chain(FAULTED.iter().map(|(n, _)| *n)) {
        assert!(target.knows_mutant(name), "{name}");
    }
}

/// The batched and nested calls' mutants on `scenarios/difache/fuzz-batch.json` (seeds from 1,
/// first violation; `dmsim fuzz scenarios/difache/fuzz-batch.json --seeds 3000 --mutant M`):
/// `nested-write-keeps-copy` fails 433 of 3,000 random schedules, the first at seed 6;
/// `nested-write-resets-owners` (the bug the correct protocol had: a second part's writer
/// returning while the first still invalidates) 5 of 3,000, the first at seed 669, and 3 of 1,500
/// with `--faults delay,pause`; `batch-invalidate-with-flush` none of 3,000 random
/// (an invalidation is two verbs behind its flush's one) but 13 of 1,500 with
/// `--faults verb-delay,pause`, the first at seed 233.
#[test]
fn the_batch_and_nested_mutants_are_caught_and_correct_batches_pass() {
    let target = target_of("fuzz-batch.json");
    for (name, budget, faults) in [
        ("nested-write-keeps-copy", 40, "none"),
        ("nested-write-resets-owners", 700, "none"),
        ("batch-invalidate-with-flush", 250, "verb-delay,pause"),
    ] {
        let caught = campaign(&target, name, budget, faults, true);
        assert!(caught.first_failing_seed.is_some(), "{name} not caught in {budget} schedules ({faults})");
    }
    for faults in ["delay,pause", "verb-delay,pause"] {
        let clean = campaign(&target, "none", FAULTED_CLEAN, faults, false);
        assert_eq!(clean.violations, 0, "faults {faults}: false alarm: {:?}", clean.failures);
    }
}

/// The atomic's mutant on `scenarios/difache/fuzz-atomic.json` (seeds from 1, first
/// violation): `atomic-while-caching` fails 137 of 200 random schedules, the first at seed 1
/// (`dmsim fuzz scenarios/difache/fuzz-atomic.json --seeds 200 --mutant atomic-while-caching`).
#[test]
fn the_atomic_mutant_is_caught_and_correct_atomics_pass() {
    let target = target_of("fuzz-atomic.json");
    assert!(target.knows_mutant("atomic-while-caching"));
    let caught = campaign(&target, "atomic-while-caching", 20, "none", true);
    assert!(caught.first_failing_seed.is_some(), "atomic-while-caching not caught in 20 schedules");
    let clean = campaign(&target, "none", 100, "delay,pause", false);
    assert_eq!(clean.violations, 0, "false alarm: {:?}", clean.failures);
}

/// FORD's transactions over the cache (`scenarios/difache/fuzz-ford.json`, Fig. 14 bottom).
/// `ford-artifact-validation` (the authors' validation: versions only, no lock check) lets two
/// transactions that read each other's write sets both commit, and a reader order itself
/// before and after one writer; `ford-early-unlock` clears the locks while the new images are
/// still being written. The serializability check finds the cycles. Measured with `dmsim fuzz
/// scenarios/difache/fuzz-ford.json --seeds 2000 --mutant M`: 736 and 584 of 2,000 random
/// schedules fail.
#[test]
fn the_ford_mutants_are_caught_and_correct_transactions_pass() {
    let target = target_of("fuzz-ford.json");
    for name in ["ford-artifact-validation", "ford-early-unlock"] {
        assert!(target.knows_mutant(name));
        let caught = campaign(&target, name, 30, "none", true);
        assert!(caught.first_failing_seed.is_some(), "{name} not caught in 30 schedules");
    }
    let clean = campaign(&target, "none", 100, "delay,drop,pause", false);
    assert_eq!(clean.violations, 0, "false alarm: {:?}", clean.failures);
}

/// CMCache's mutants on `scenarios/difache/fuzz-cmcache.json` (seeds from 1, first violation):
/// measured with `dmsim fuzz … --seeds 400 --mutant M --stop-on-failure`: `cm-no-serialize`,
/// `cm-install-ignores-ticket` and `cm-writer-keeps-local` at seed 1, `cm-unacked-invalidate`
/// at 289.
const CMCACHE: &[(&str, u64, &str)] = &[
    ("cm-no-serialize", 20, "none"),
    ("cm-install-ignores-ticket", 20, "none"),
    ("cm-writer-keeps-local", 20, "none"),
    ("cm-unacked-invalidate", 330, "none"),
];

#[test]
fn every_cmcache_mutant_is_caught() {
    let target = target_of("fuzz-cmcache.json");
    let mut missed = Vec::new();
    for &(name, budget, faults) in CMCACHE {
        assert!(target.knows_mutant(name), "{name}");
        match campaign(&target, name, budget, faults, true).first_failing_seed {
            Some(seed) => eprintln!("cmcache {name}: caught at seed {seed}"),
            None => missed.push(name),
        }
    }
    assert!(missed.is_empty(), "cmcache mutants not caught: {missed:?}");
}

/// The node-restart mutants on `scenarios/difache/fuzz-restart.json` (seeds from 1, first
/// violation; measured with `dmsim fuzz scenarios/difache/fuzz-restart.json --mutant M
/// --seeds 200 --stop-on-failure -j 1`, see NEEDS.md).
const RESTART_MUTANTS: &[(&str, u64)] = &[("restart-keeps-cache", 60), ("mn-failure-keeps-cache", 60)];

#[test]
fn every_node_restart_mutant_is_caught() {
    let target = target_of("fuzz-restart.json");
    let mut missed = Vec::new();
    for (name, budget) in RESTART_MUTANTS {
        let summary = campaign(&target, name, *budget, "none", true);
        match summary.first_failing_seed {
            Some(seed) => eprintln!("difache {name}: caught at seed {seed}"),
            None => missed.push(*name),
        }
    }
    assert!(missed.is_empty(), "node-restart mutants not caught: {missed:?}");
}

#[test]
fn correct_difache_passes_the_node_restart_campaign_with_faults() {
    let target = target_of("fuzz-restart.json");
    let summary = campaign(&target, "none", 100, "delay,drop,pause", false);
    assert_eq!(summary.schedules, 100);
    assert_eq!(summary.violations, 0, "false alarm: {:?}", summary.failures);
}
