//! The results in the repository are the code's: the cheap scenarios are re-run and every
//! point's trace hash and metrics, and every claim's verdict, must equal what `results/` holds.
//! A change that moves them must regenerate the files (`dmsim run <scenario>`) in the same
//! commit. The expensive figures (fig12–14, 15b, 18) are left to `dmsim run`.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

const CHEAP: &[(&str, &str)] = &[
    ("nic", "atomic-contention"),
    ("nic", "latency-vs-payload"),
    ("nic", "rpc-vs-cores"),
    ("nic", "throughput-vs-clients"),
    ("selcc", "fig15a"),
    ("selcc", "round-trips"),
    ("selcc", "crash-recovery"),
    ("dolphin", "table2"),
    ("dolphin", "table2-load-order"),
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn summary(path: PathBuf) -> Value {
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn cheap_scenarios_reproduce_their_committed_results() {
    let scratch = std::env::temp_dir().join(format!("dmsim-committed-{}", std::process::id()));
    let mut stale = Vec::new();
    for (paper, name) in CHEAP {
        let scenario = repo().join(format!("scenarios/{paper}/{name}.json"));
        let out = scratch.join(name);
        let o = Command::new(env!("CARGO_BIN_EXE_dmsim"))
            .args(["run", scenario.to_str().unwrap(), "--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{paper}/{name}: {}", String::from_utf8_lossy(&o.stderr));
        let now = summary(out.join("summary.json"));
        let committed = summary(repo().join(format!("results/{paper}/{name}/summary.json")));
        for key in ["results", "paper_vs_sim"] {
            if now[key] != committed[key] {
                stale.push(format!("{paper}/{name}: `{key}` differs"));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(stale.is_empty(), "committed results are not the code's (regenerate them): {stale:?}");
}
