//! Fuzzing interleavings to find coherence bugs.
//!
//! ```text
//!  dmsim fuzz scenario --seeds N [--pct D] [--shard I/N] [--mutant M] [--faults …]
//!      │
//!      ▼
//!  campaign ── rayon, one run per thread ──▶ FuzzTarget::run(seed, strategy, mutant, faults)
//!      │                                        swarm config from the seed, check mode on
//!      ▼
//!  failures ──▶ shrink (replays of edited choice logs, same checker) ──▶ replay file
//!      │                                                                   results/fuzz/…
//!      ▼
//!  "fuzz: <schedules> schedules, <violations> violations, <rate> schedules/s"   (exit 1 if any)
//! ```
//!
//! * [`target`] — the [`FuzzTarget`] seam, requests and verdicts, panics as verdicts;
//! * [`protocol`] — the target of any registered protocol (its definition's invariants,
//!   history logs and end-of-run checks); [`swarm`] — what each seed varies;
//! * [`campaign`] — parallel seeds, shards, summaries and their merge, failure finishing;
//! * [`shrink`] — delta debugging over choice logs;
//! * [`replay`] — the replay file format.
//!
//! Faults (message delay and drop, pauses, crashes) are injected by the engine
//! (`engine::FaultPlan`); a target only decides the rates per seed.

pub mod campaign;
pub mod protocol;
pub mod replay;
pub mod shrink;
pub mod swarm;
pub mod target;

pub use campaign::{run_campaign, CampaignSpec, CampaignSummary, StrategyKind};
pub use protocol::ProtocolTarget;
pub use replay::ReplayFile;
pub use target::{Failure, Faults, FuzzTarget, RunRequest, RunResult, Verdict};
