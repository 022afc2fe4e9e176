//! Every knob of SELCC and SEL, as plain serde-friendly fields, so that a scenario file can run
//! an ablation (Fig. 15, Fig. 18) by flipping one field.

use serde::{Deserialize, Serialize};

/// SELCC proper, or the uncached SEL baseline (§1 [P], Fig. 3a).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Lazy latch release, invalidation messages, cached copies (Fig. 3b).
    Selcc,
    /// Same latch word, no caching: acquire, access, release on every operation; conflicts are
    /// retried, never messaged. As [REPO] (`ACCESS_MODE 0`): every thread acquires the global
    /// latch itself into a private buffer, readers are counted, retries are immediate (`sel.rs`).
    /// With `Config::sel_node_latch` dmsim's earlier SEL instead.
    Sel,
}

/// Deliberately broken variants ("mutants") that the checkers must catch. Each names the bug it
/// plants; `None` is the correct protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Mutant {
    #[default]
    None,
    /// Exclusive release posts the latch FAA *before* the dirty WRITE, so a reader can acquire and
    /// read the stale memory copy (violates S4/S7).
    ReleaseBeforeFlush,
    /// Case-1 forwarding sends the data but not the dirty bounds, so the new owner later flushes
    /// only its own range and the old owner's writes are lost (violates S7).
    ForwardWithoutDirtyBounds,
    /// A reader that hits a Modified copy at another node skips the invalidation and reads the
    /// memory copy anyway (violates S2/S4).
    ReadThroughModified,
    /// A shared acquirer that meets a writer invalidates it without first undoing its `+BIT(me)`
    /// FAA, so the owner's downgrade adds the bit a second time and carries into a neighbour
    /// (violates S8, then S3).
    ReaderKeepsBit,
    /// Case 2 forwards the copy to the reader *before* the downgrade FAA instead of after it: the
    /// reader holds Shared while the latch still names the old owner, and its release may borrow
    /// from a neighbour's bit (violates S3/S8).
    DowngradeForwardBeforeFaa,
    /// Releasing a Modified copy (eviction, lease, naive release, drain) posts the latch FAA without
    /// the dirty WRITE, so memory keeps the stale data (violates S4/S7).
    ReleaseWithoutFlush,
    /// The invalidation handler serves a message without taking the frame's local latch, so it can
    /// hand a line away under a thread's critical section (violates S1/S2).
    HandlerWithoutLocalLatch,
    /// Exclusive release by `CAS((me,0) → 0)` instead of FAA: a transient reader bit of a failed
    /// shared acquirer makes the CAS fail, the release is lost and the latch names a node that
    /// dropped its copy (violates directory soundness; later acquirers starve).
    ReleaseExclusiveByCas,
    /// Batched eviction flushes from the victim's frame instead of its ring-slot copy, and the
    /// frame is reused before that flush WRITE has executed (violates S6/S7).
    ReuseFrameBeforeFlush,
    /// A handler that drops an invalidation (busy or uncached frame) sends no "dropped" reply; the
    /// requester polls forever (liveness).
    DropWithoutReply,
    /// Upgrade retries its CAS forever instead of falling back to release-then-acquire, so two
    /// concurrent upgraders livelock (violates L1).
    UpgradeWithoutFallback,
    /// Crash recovery declares a dead node but never removes its ownership from the latch words:
    /// survivors wait for it forever (liveness, with a compute-node crash).
    SkipCrashCleanup,
}

/// Local CPU costs charged with `Nic::cpu` (spec §8.5). Nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuCosts {
    /// Hash lookup + LRU touch per lock call.
    pub lookup_ns: u64,
    /// Handing a local latch over / waking a waiter (charged when a lock call waited).
    pub latch_handoff_ns: u64,
    /// Serving one invalidation message in a handler (parse, decide).
    pub handler_ns: u64,
    /// Copying one KiB between local buffers (eviction ring slot).
    pub memcpy_ns_per_kib: u64,
    /// Polling interval while waiting for a reply flag or a free frame.
    pub poll_ns: u64,
}

impl Default for CpuCosts {
    fn default() -> Self {
        CpuCosts {
            lookup_ns: 50,
            latch_handoff_ns: 100,
            handler_ns: 200,
            memcpy_ns_per_kib: 100,
            poll_ns: 200,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub mode: Mode,
    /// GCL data bytes (default 2 KiB, §2 [P]); a multiple of 8.
    pub gcl_size_bytes: u32,
    /// Cache frames per compute node (8 GiB / 2 KiB in the paper; scaled in scenarios).
    pub cache_frames: u32,
    /// Hash/LRU shards (§2 [P]: "sharded to support high concurrency").
    pub cache_shards: u32,
    /// Front-end threads per compute node, P in §5.3.1 (sizes reply slots and the lease formula).
    pub threads_per_node: u32,
    /// Invalidation handler tasks per compute node [GAP]. `None` = one per peer compute node,
    /// each serving that peer's messages in order ([REPO] `cross_compute_message_handling_worker`,
    /// one thread per peer QP); `Some(n)` = n tasks, sender i's messages to task i mod n.
    pub handler_tasks: Option<u32>,

    // ---- §3.4 acquisition ----
    /// Upgrade CAS attempts before the fallback release-then-acquire ([GAP] K; [REPO] 1).
    pub upgrade_attempts: u32,
    /// Most global-latch retries before an op is declared stuck (a liveness assertion).
    pub retry_limit: u32,

    // ---- §3.5 conflicts ----
    /// Global ownership handover (Case 1/2 FAA by the victim). Off = the naive flush-and-release.
    pub handover: bool,
    /// GCL forwarding into the requester's frame (Fig. 18). Off = the requester READs memory.
    pub forwarding: bool,
    /// Resend interval constant C in T = C·RTT/N_r (§5.1.2 [P]; value [GAP]).
    pub resend_c: u32,
    /// Memorise messages that meet a busy frame (one slot per frame, [REPO] "pending") instead of
    /// dropping them (§5.1.1 "defers or drops").
    pub defer_messages: bool,

    // ---- §5.2 eviction ----
    /// Background batched eviction with a ring buffer per QP (Fig. 18). Off = the front-end
    /// thread evicts one victim synchronously when no frame is free.
    pub batched_eviction: bool,
    /// Free-list threshold L as a fraction of `cache_frames` ([REPO] 0.002) ...
    pub free_frames_ratio: f64,
    /// ... but at least this many frames.
    pub free_frames_min: u32,
    /// Ring-buffer slots per memory-node QP, L_out ([REPO] 16).
    pub evict_ring_slots: u32,
    /// Dynamic dirty boundaries (Fig. 18). Off = flush the whole GCL.
    pub dirty_bounds: bool,

    // ---- §5.3 fairness ----
    /// Lease threshold γ on A = R_c/P + W_c; `None` = Inf (never release early).
    pub lease_gamma: Option<u32>,
    /// Priority aging carried in messages; off = every message has priority 0.
    pub priority_aging: bool,
    /// Reader spin-waiting after a high-priority writer invalidated our Shared copy.
    pub reader_spin_wait: bool,
    /// Spin per priority level ([REPO] 16 µs).
    pub reader_spin_ns_per_level: u64,
    /// Priority matching: readers must match the last starved writer's priority.
    pub priority_matching: bool,
    /// Lowest priority level counted as "high" (starved) for spin-waiting and matching [GAP].
    pub starvation_level_min: u8,

    /// SEL only: dmsim's earlier SEL instead of [REPO]'s — [CHOICE] threads of a node serialised
    /// on the frame's local latch (the node owns one reader bit), retries after C·RTT/N_r.
    /// Off (default) = `sel.rs`: per-thread acquisition, reader count, immediate retries.
    #[serde(default)]
    pub sel_node_latch: bool,

    // ---- §6.5 compute-node failures (`recovery.rs`) ----
    /// Recover from compute-node crashes: heartbeats and a lease in disaggregated memory detect
    /// a dead node, a survivor removes its stale shared/exclusive ownership from every latch
    /// word, and each XUnLock writes the GCL's data through to memory before it returns, so an
    /// acknowledged write survives its writer's crash [CHOICE] (`NEEDS.md`). Off by default:
    /// the paper's figures run without it.
    #[serde(default)]
    pub crash_recovery: bool,
    /// Heartbeat period of every compute node (crash recovery).
    #[serde(default = "heartbeat_ns")]
    pub heartbeat_ns: u64,
    /// A node whose heartbeat has not moved for this long is declared dead [CHOICE]: must
    /// exceed any pause a live node may suffer and any message delay.
    #[serde(default = "lease_ns")]
    pub lease_ns: u64,

    pub cpu: CpuCosts,
    /// Width of the per-node ops-over-time buckets.
    pub timeline_bucket_ns: u64,
    pub mutant: Mutant,
}

fn heartbeat_ns() -> u64 {
    10_000
}
fn lease_ns() -> u64 {
    200_000
}

impl Default for Config {
    fn default() -> Self {
        Config::selcc()
    }
}

impl Config {
    /// SELCC with every optimization on and the paper's defaults.
    pub fn selcc() -> Config {
        Config {
            mode: Mode::Selcc,
            gcl_size_bytes: 2048,
            cache_frames: 4096,
            cache_shards: 16,
            threads_per_node: 8,
            handler_tasks: None,
            upgrade_attempts: 1,
            retry_limit: 1_000_000,
            handover: true,
            forwarding: true,
            resend_c: 4,
            defer_messages: true,
            batched_eviction: true,
            free_frames_ratio: 0.002,
            free_frames_min: 8,
            evict_ring_slots: 16,
            dirty_bounds: true,
            lease_gamma: Some(256),
            priority_aging: true,
            reader_spin_wait: true,
            reader_spin_ns_per_level: 16_000,
            priority_matching: true,
            starvation_level_min: 2,
            sel_node_latch: false,
            crash_recovery: false,
            heartbeat_ns: heartbeat_ns(),
            lease_ns: lease_ns(),
            cpu: CpuCosts::default(),
            timeline_bucket_ns: 1_000_000,
            mutant: Mutant::None,
        }
    }

    /// The SEL baseline: same latch, no caching, no messages.
    pub fn sel() -> Config {
        Config { mode: Mode::Sel, ..Config::selcc() }
    }

    /// Fig. 18's starting point: forwarding, batched eviction and dirty bounds all off.
    pub fn ablation_base() -> Config {
        Config { forwarding: false, batched_eviction: false, dirty_bounds: false, ..Config::selcc() }
    }

    /// SEL as [REPO] runs it (`sel.rs`): each thread acquires the global latch itself.
    pub fn sel_per_thread(&self) -> bool {
        self.mode == Mode::Sel && !self.sel_node_latch
    }

    /// Free-list threshold L in frames.
    pub fn free_frames_low(&self) -> u32 {
        let by_ratio = (self.cache_frames as f64 * self.free_frames_ratio).ceil() as u32;
        by_ratio.max(self.free_frames_min).min(self.cache_frames / 2)
    }

    /// Problems with this configuration, each naming the field. Empty = valid.
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.gcl_size_bytes == 0 || !self.gcl_size_bytes.is_multiple_of(8) {
            problems.push(format!("gcl_size_bytes: {} is not a positive multiple of 8", self.gcl_size_bytes));
        }
        if self.cache_shards == 0 {
            problems.push("cache_shards: must be at least 1".into());
        }
        if self.threads_per_node == 0 {
            problems.push("threads_per_node: must be at least 1".into());
        }
        if self.handler_tasks == Some(0) && self.mode == Mode::Selcc {
            problems.push("handler_tasks: SELCC needs at least one invalidation handler".into());
        }
        if self.sel_per_thread() && self.cache_frames < self.threads_per_node {
            problems.push(format!(
                "cache_frames: SEL uses frames 0..{} as its threads' private page buffers, has {}",
                self.threads_per_node, self.cache_frames
            ));
        }
        // Every thread may pin one frame and the evictor keeps L free: leave headroom.
        let needed = self.threads_per_node.saturating_add(self.free_frames_min).saturating_mul(2);
        if self.cache_frames < needed {
            problems.push(format!(
                "cache_frames: {} is too small for {} threads (need at least {needed})",
                self.cache_frames, self.threads_per_node
            ));
        }
        if self.upgrade_attempts == 0 {
            problems.push("upgrade_attempts: must be at least 1".into());
        }
        if self.evict_ring_slots == 0 {
            problems.push("evict_ring_slots: must be at least 1".into());
        }
        if self.resend_c == 0 {
            problems.push("resend_c: must be at least 1".into());
        }
        // A zero poll interval re-polls at the same instant forever (virtual time stands still).
        if self.cpu.poll_ns == 0 {
            problems.push("cpu.poll_ns: must be at least 1 (0 re-polls without time passing)".into());
        }
        if self.crash_recovery && self.mode != Mode::Selcc {
            problems.push("crash_recovery: only SELCC recovers from crashes (SEL has no recovery)".into());
        }
        if self.heartbeat_ns == 0 {
            problems.push("heartbeat_ns: must be at least 1".into());
        }
        if self.lease_ns < self.heartbeat_ns.saturating_mul(4) {
            problems.push(format!(
                "lease_ns: {} must be at least 4 heartbeats ({} ns): a live node would be declared dead",
                self.lease_ns,
                self.heartbeat_ns.saturating_mul(4)
            ));
        }
        if !(0.0..=0.5).contains(&self.free_frames_ratio) {
            problems.push(format!("free_frames_ratio: {} is outside [0, 0.5]", self.free_frames_ratio));
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid() {
        assert!(Config::selcc().validate().is_empty());
        assert!(Config::sel().validate().is_empty());
        assert!(Config::ablation_base().validate().is_empty());
        let bad = Config {
            gcl_size_bytes: 12,
            cache_frames: 1,
            cpu: CpuCosts { poll_ns: 0, ..CpuCosts::default() },
            ..Config::selcc()
        };
        let problems = bad.validate();
        assert!(problems.iter().any(|p| p.starts_with("cpu.poll_ns")));
        assert!(problems.iter().any(|p| p.starts_with("gcl_size_bytes")));
        assert!(problems.iter().any(|p| p.starts_with("cache_frames")));
    }
}
