//! Bad input never panics (issue #14 item 9): thousands of mutated scenario files through the
//! loader `dmsim run --dry-run` uses and the validation `dmsim fuzz` uses, and thousands of
//! mutated replay files through `dmsim replay`'s path (parse, validate the embedded scenario,
//! replay the choice log). Every rejection must name what is wrong; nothing may panic; a replay of
//! any choice log on the correct protocol is a legal schedule, so it must not fail either.
//!
//! Mutations are drawn from a fixed seed, so a failure here reproduces with the same test. CI
//! runs 2,000 scenario and 300 replay files; `DMSIM_INPUT_FUZZ_CASES=10000` runs the issue's
//! 10,000 and 5,000.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use dmsim::registry;
use dmsim_sim::choice::Strategy;
use dmsim_sim::fuzz::protocol::ProtocolTarget;
use dmsim_sim::fuzz::replay::ReplayFile;
use dmsim_sim::fuzz::target::{FuzzTarget, RunRequest, Verdict};
use dmsim_sim::scenario::load::{load_str, parse_typed};
use dmsim_sim::scenario::strict_json;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Every shipped scenario file, sorted (the seeds below index into this list).
fn shipped_scenarios() -> Vec<(String, Value)> {
    let mut files = Vec::new();
    let mut dirs = vec![repo().join("scenarios")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p.display().to_string(), serde_json::from_str(&text).unwrap())
        })
        .collect()
}

/// Values that have broken parsers before: extremes, wrong types, odd strings.
fn nasty(rng: &mut ChaCha8Rng) -> Value {
    match rng.random_range(0..22) {
        0 => json!(0),
        1 => json!(-1),
        2 => json!(u64::MAX),
        3 => json!(i64::MIN),
        4 => json!(1e300),
        5 => json!(-1e300),
        6 => json!(1e-300),
        7 => json!(0.5),
        8 => json!(59),
        9 => json!(1_000_000_000u64),
        10 => json!(""),
        11 => json!("é🙂\u{0}"),
        12 => json!("x".repeat(10_000)),
        13 => json!(true),
        14 => Value::Null,
        15 => json!([]),
        16 => json!({}),
        17 => json!([1, "a", null]),
        18 => json!({"between": [1.0, 0.0]}),
        19 => json!("cx3_fdr56"),
        20 => json!(rng.random_range(0..1u64 << 40)),
        _ => json!(rng.random::<f64>() * 4.0 - 2.0),
    }
}

/// All paths into `v` (object keys and array indices), depth first.
fn paths(v: &Value, here: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(here.clone());
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                here.push(json!(k));
                paths(child, here, out);
                here.pop();
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                here.push(json!(i));
                paths(child, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

fn at_mut<'a>(v: &'a mut Value, path: &[Value]) -> &'a mut Value {
    path.iter().fold(v, |v, step| match step {
        Value::String(k) => v.get_mut(k.as_str()).unwrap(),
        Value::Number(i) => v.get_mut(i.as_u64().unwrap() as usize).unwrap(),
        _ => unreachable!(),
    })
}

/// One to three structural mutations of `v`.
fn mutate(v: &mut Value, rng: &mut ChaCha8Rng) {
    for _ in 0..rng.random_range(1..=3) {
        let mut all = Vec::new();
        paths(v, &mut Vec::new(), &mut all);
        let path = all[rng.random_range(0..all.len())].clone();
        let node = at_mut(v, &path);
        match rng.random_range(0..6) {
            // Replace the value.
            0..=2 => *node = nasty(rng),
            // Drop a key or an element.
            3 => match node {
                Value::Object(m) if !m.is_empty() => {
                    let key = m.keys().nth(rng.random_range(0..m.len())).unwrap().clone();
                    m.remove(&key);
                }
                Value::Array(a) if !a.is_empty() => {
                    a.remove(rng.random_range(0..a.len()));
                }
                _ => *node = nasty(rng),
            },
            // Add an unknown key or a duplicate element.
            4 => match node {
                Value::Object(m) => {
                    m.insert("no_such_field".into(), nasty(rng));
                }
                Value::Array(a) if !a.is_empty() => {
                    let copy = a[rng.random_range(0..a.len())].clone();
                    a.push(copy);
                }
                _ => *node = nasty(rng),
            },
            // Scale a number up or down a lot.
            _ => {
                if let Some(x) = node.as_f64() {
                    let factor = [0.0, -1.0, 1e6, 1e-6, 1e18][rng.random_range(0..5)];
                    *node = json!(x * factor);
                } else {
                    *node = nasty(rng);
                }
            }
        }
    }
}

/// A text-level mutation (truncation or a stray byte): the JSON layer must reject it cleanly.
fn mangle_text(text: &str, rng: &mut ChaCha8Rng) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let at = rng.random_range(0..bytes.len());
    match rng.random_range(0..3) {
        0 => bytes.truncate(at),
        1 => bytes.insert(at, [b'{', b'"', b',', b']', 0xff][rng.random_range(0..5)]),
        _ => {
            bytes.remove(at);
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A rejection must say where: a field path, or, for a problem of the file as a whole (shown as
/// "(top level)": not JSON, not an object, a missing top-level field), a reason that says what.
fn names_what_is_wrong(path: &str, reason: &str) -> bool {
    !reason.trim().is_empty() && (!path.is_empty() || reason.len() > 10)
}

/// How many mutated files to try: `DMSIM_INPUT_FUZZ_CASES` or the CI default (the full counts of
/// issue #14, 10,000 scenario and 5,000 replay files, run as
/// `DMSIM_INPUT_FUZZ_CASES=10000 cargo test --release -p dmsim --test input_fuzz`; the replay
/// test takes half the number).
fn cases(ci_default: usize) -> usize {
    std::env::var("DMSIM_INPUT_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(ci_default)
}

#[test]
fn mutated_scenario_files_never_panic() {
    let registry = registry::sim();
    let scenarios = shipped_scenarios();
    assert!(scenarios.len() >= 20, "found only {} shipped scenarios", scenarios.len());
    let mut rng = ChaCha8Rng::seed_from_u64(14_09);
    let (mut accepted, mut rejected) = (0, 0);
    let n = cases(1_000);
    for case in 0..n {
        let (name, original) = &scenarios[case % scenarios.len()];
        let mut v = original.clone();
        let text = if case % 10 == 9 {
            mangle_text(&serde_json::to_string_pretty(&v).unwrap(), &mut rng)
        } else {
            mutate(&mut v, &mut rng);
            serde_json::to_string_pretty(&v).unwrap()
        };
        if std::env::var_os("DMSIM_INPUT_FUZZ_VERBOSE").is_some() {
            eprintln!("case {case}: {name}\n{text}");
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let loaded = load_str(name, &text, &registry).map(|_| ()).map_err(|e| e.problems);
            // What `dmsim fuzz` and `dmsim replay` validate (only for files with a fuzz section:
            // the others are rejected there for a reason the loader already covers).
            let fuzzed = original
                .get("fuzz")
                .is_some()
                .then(|| ProtocolTarget::from_json(&text, &registry).map(|_| ()));
            (loaded, fuzzed)
        }));
        let (loaded, fuzzed) = match outcome {
            Ok(r) => r,
            Err(_) => panic!("case {case}: loading a mutation of {name} panicked:\n{text}"),
        };
        let problems: Vec<_> = loaded
            .as_ref()
            .err()
            .into_iter()
            .flatten()
            .chain(fuzzed.as_ref().and_then(|f| f.as_ref().err()).into_iter().flatten())
            .collect();
        for p in &problems {
            assert!(
                names_what_is_wrong(&p.path, &p.reason),
                "case {case} ({name}): a rejection that names nothing: {p:?}\n{text}"
            );
        }
        if loaded.is_ok() {
            accepted += 1;
        } else {
            rejected += 1;
        }
    }
    // The mutations must exercise both outcomes, or the test proves little.
    assert!(accepted > n / 20 && rejected > n / 2, "accepted {accepted}, rejected {rejected}");
}

#[test]
fn mutated_replay_files_never_panic_and_replay_legally() {
    let registry = registry::sim();
    let dir = repo().join("cli/tests/replays");
    let mut replays: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    replays.sort();
    assert!(!replays.is_empty());
    let originals: Vec<Value> =
        replays.iter().map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(14_10);
    let (mut replayed, mut rejected) = (0, 0);
    let n = cases(400) / 2;
    for case in 0..n {
        let original = &originals[case % originals.len()];
        let mut v = original.clone();
        match case % 4 {
            // A changed choice log: any log is a legal schedule of the recorded protocol.
            0 | 1 => {
                let log = v["choice_log"].as_array_mut().unwrap();
                for _ in 0..rng.random_range(1..=8) {
                    match rng.random_range(0..3) {
                        0 if !log.is_empty() => {
                            let i = rng.random_range(0..log.len());
                            log[i] = json!(rng.random::<u64>() >> rng.random_range(0..64));
                        }
                        1 => log.truncate(rng.random_range(0..=log.len())),
                        _ => log.push(json!(rng.random_range(0..1000u64))),
                    }
                }
            }
            // Anything else in the file, the embedded scenario included.
            _ => mutate(&mut v, &mut rng),
        }
        let text = serde_json::to_string(&v).unwrap();
        let outcome = catch_unwind(AssertUnwindSafe(|| replay_text(&text, &registry)));
        match outcome {
            Err(_) => panic!("case {case}: replaying a mutated replay file panicked:\n{text}"),
            Ok(Err(message)) => {
                assert!(!message.is_empty(), "case {case}: an empty rejection");
                rejected += 1;
            }
            Ok(Ok(None)) => replayed += 1,
            Ok(Ok(Some(note))) => panic!("case {case}: {note}\n{text}"),
        }
    }
    assert!(replayed > n / 5 && rejected > n / 10, "replayed {replayed}, rejected {rejected}");
}

/// `dmsim replay`'s path without the printing: `Err` = rejected as bad input, `Ok(None)` =
/// replayed as expected, `Ok(Some(_))` = something a user should never see.
fn replay_text(
    text: &str,
    registry: &dmsim_sim::runners::registry::Registry,
) -> Result<Option<String>, String> {
    let raw = strict_json::parse(text).map_err(|e| format!("malformed JSON: {e}"))?;
    let file: ReplayFile = parse_typed(&raw, "").map_err(|p| format!("{}: {}", p.path, p.reason))?;
    let target = ProtocolTarget::from_json(&file.scenario_text(), registry).map_err(|ps| {
        ps.iter().map(|p| format!("{}: {}", p.path, p.reason)).collect::<Vec<_>>().join("; ")
    })?;
    if !target.knows_mutant(&file.mutant) {
        return Err(format!("no mutant {:?}", file.mutant));
    }
    let r = target.run(&RunRequest {
        seed: file.seed,
        strategy: Strategy::Replay { log: file.choice_log.clone() },
        mutant: file.mutant.clone(),
        faults: file.faults,
        trace: false,
    });
    Ok(match r.verdict {
        // A panic inside the run is caught and reported as the checker "panic".
        Verdict::Violation(f) if f.checker == "panic" => Some(format!("the run panicked: {}", f.message)),
        // The correct protocol violating an invariant on some schedule is a protocol bug.
        Verdict::Violation(f) if file.mutant == "none" => {
            Some(format!("the correct protocol failed {}: {}", f.checker, f.message))
        }
        _ => None,
    })
}
