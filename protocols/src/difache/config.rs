//! DiFache's options (`protocol_options`) and the workload section (`workload`).

use serde::{Deserialize, Serialize};

use super::mutants::Mutant;
use super::trace::{self, TraceSpec};

/// Which cache runs: DiFache and the baselines of §6.2 that share its client loop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// Decentralized coherence with fine-grained adaptive caching (the full system).
    #[default]
    Difache,
    /// DiFache with adaptive caching off: every object is always cached.
    Noac,
    /// Every access is one-sided RDMA to the memory node ("w/o Cache").
    Nocache,
    /// A per-CN cache without cross-CN coherence (incorrect by design; a scale reference).
    Nocc,
    /// A per-CN cache whose read misses and writes are RPCs to one centralized manager that
    /// serializes them per object, tracks owners and invalidates them (§2.3, "CMCache").
    Cmcache,
}

impl Variant {
    pub fn caches(self) -> bool {
        !matches!(self, Variant::Nocache)
    }
    pub fn centralized(self) -> bool {
        self == Variant::Cmcache
    }
    pub fn adaptive(self) -> bool {
        self == Variant::Difache
    }
    pub fn coherent(self) -> bool {
        self != Variant::Nocc
    }
}

/// How writers find the CNs to invalidate (§4.1 of the paper).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OwnerTracking {
    /// Broadcast up to `broadcast_max_cns` compute nodes, owner sets above.
    #[default]
    Auto,
    Broadcast,
    OwnerSets,
}

/// Where CMCache's manager runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ManagerPlace {
    /// A dedicated compute node added after the application's CNs (the paper's reported setup).
    #[default]
    Cn,
    /// Memory node 0, on its modelled cores (`cluster.memory_node_cores`).
    Mn,
}

/// CMCache's manager (used only by `variant: cmcache`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manager {
    pub place: ManagerPlace,
    /// Handler threads, each serving one RPC at a time (the paper: all 16 cores of the CN).
    pub threads: u16,
    /// CPU per RPC: receive, dispatch, owner-set and lock-table work ([CHOICE]; not in the paper).
    pub rpc_ns: u64,
}

/// Local CPU costs on a compute node (ns).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cpu {
    /// Local index lookup and mode check of every cached access.
    pub lookup_ns: u64,
    /// Copying a cached object to or from the application's buffer, per KiB.
    pub copy_ns_per_kib: u64,
    /// The application's own work per operation (validation, request handling).
    pub app_ns: u64,
    /// Back-off between polls of a busy lock, a switching flag or a filling buffer.
    pub poll_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub variant: Variant,
    pub owner_tracking: OwnerTracking,
    /// Largest cluster that broadcasts invalidations under `auto` ([CHOICE]: Fig. 13's crossover).
    pub broadcast_max_cns: u16,
    /// Home buckets of the hopscotch index (the paper: 2 M).
    pub index_buckets: u32,
    /// Cache headers (and buffers, one each) per compute node.
    pub cache_objects: u32,
    /// Mode locks per memory node.
    pub mode_locks: u32,
    /// Default read-ratio threshold before an object's first on-period (the paper: 75 %).
    pub threshold_default: f64,
    /// Mode-check interval before (8) and after (255) an object's first switch.
    pub interval_first: u8,
    pub interval_after: u8,
    /// Latency samples kept per event type for the profit model.
    pub latency_ring: usize,
    pub cpu: Cpu,
    #[serde(default = "Manager::paper")]
    pub manager: Manager,
    /// Measurement only (never changes a run): the metric `plot_latency_us` is percentile
    /// `plot_percentile` of event `plot_event` (`read_hit`, `read_miss`, `write_cached`,
    /// `read_bypass`, `write_bypass`), so a scenario can sweep percentiles as series (Fig. 12).
    #[serde(default)]
    pub plot_event: String,
    #[serde(default = "fifty")]
    pub plot_percentile: u32,
    /// Compute-node crash recovery (spec §3.9, `recovery.rs`): heartbeats on memory node 0 stand
    /// in for the paper's RDMA timeouts; a CN silent for `lease_ns` is removed from the CN list
    /// by the coordinator, and caching is disabled on every CN until all have synced.
    #[serde(default)]
    pub crash_recovery: bool,
    #[serde(default = "heartbeat")]
    pub heartbeat_ns: u64,
    #[serde(default = "lease")]
    pub lease_ns: u64,
    /// Memory-node failures and node restarts (Fig. 15's second half, `recovery.rs`): a verb
    /// timing out at a memory node fences the CN (no operation starts, caches dropped) until
    /// the memory node answers again and a CN-list sync round has run; a restarted CN rejoins
    /// the CN list with a sync round. Needs `crash_recovery`.
    #[serde(default)]
    pub node_restarts: bool,
    /// Measurement only: operations completed per `timeline_bucket_ns` (0: no timeline), and the
    /// metric `window_mops` is the throughput in `[timeline_at_ns, timeline_at_ns +
    /// timeline_window_ns)` (Fig. 15: each x re-runs the same simulation).
    #[serde(default)]
    pub timeline_bucket_ns: u64,
    #[serde(default)]
    pub timeline_at_ns: u64,
    #[serde(default)]
    pub timeline_window_ns: u64,
    /// Measurement only, set by the plan from `workload.trace.track`: the object whose
    /// accesses and mode switches each CN records (Fig. 13 right).
    #[serde(skip)]
    pub track_key: Option<u64>,
    /// Set from `dmsim fuzz --mutant`, never from a scenario.
    #[serde(default)]
    pub mutant: Mutant,
}

fn fifty() -> u32 {
    50
}
fn heartbeat() -> u64 {
    10_000
}
fn lease() -> u64 {
    200_000
}

/// The five event types by name, in [`super::profit::Event`] order.
pub const EVENT_NAMES: [&str; 5] = ["read_hit", "read_miss", "write_cached", "read_bypass", "write_bypass"];

impl Manager {
    pub fn paper() -> Manager {
        Manager { place: ManagerPlace::Cn, threads: 16, rpc_ns: 1000 }
    }
}

impl Config {
    pub fn paper() -> Config {
        Config {
            variant: Variant::Difache,
            owner_tracking: OwnerTracking::Auto,
            broadcast_max_cns: 32,
            index_buckets: 1 << 16,
            cache_objects: 1 << 14,
            mode_locks: 4096,
            threshold_default: 0.75,
            interval_first: 8,
            interval_after: 255,
            latency_ring: 64,
            cpu: Cpu { lookup_ns: 150, copy_ns_per_kib: 100, app_ns: 200, poll_ns: 500 },
            manager: Manager::paper(),
            plot_event: String::new(),
            plot_percentile: 50,
            crash_recovery: false,
            node_restarts: false,
            heartbeat_ns: heartbeat(),
            lease_ns: lease(),
            timeline_bucket_ns: 0,
            timeline_at_ns: 0,
            timeline_window_ns: 0,
            track_key: None,
            mutant: Mutant::None,
        }
    }

    pub fn with_variant(variant: Variant) -> Config {
        Config { variant, ..Config::paper() }
    }

    /// Owner sets (true) or broadcast for a cluster of `compute` nodes.
    pub fn owner_sets(&self, compute: usize) -> bool {
        match self.owner_tracking {
            OwnerTracking::Broadcast => false,
            OwnerTracking::OwnerSets => true,
            OwnerTracking::Auto => compute > self.broadcast_max_cns as usize,
        }
    }

    /// Problems as "field: reason".
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.index_buckets < 16 || self.index_buckets > 1 << 24 {
            out.push("index_buckets: must be in 16..=16777216".into());
        }
        if self.cache_objects < 1 || self.cache_objects > 1 << 22 {
            out.push("cache_objects: must be in 1..=4194304".into());
        }
        if self.mode_locks < 1 || self.mode_locks > 1 << 20 {
            out.push("mode_locks: must be in 1..=1048576".into());
        }
        if !(0.0..=1.0).contains(&self.threshold_default) {
            out.push("threshold_default: must be in [0, 1]".into());
        }
        if self.interval_first == 0 || self.interval_after == 0 {
            out.push("interval_first: intervals must be at least 1".into());
        }
        if self.latency_ring == 0 || self.latency_ring > 4096 {
            out.push("latency_ring: must be in 1..=4096".into());
        }
        if !self.plot_event.is_empty() && !EVENT_NAMES.contains(&self.plot_event.as_str()) {
            out.push(format!("plot_event: must be one of {}", EVENT_NAMES.join(", ")));
        }
        if self.plot_percentile > 100 {
            out.push("plot_percentile: must be in 0..=100".into());
        }
        if self.manager.threads == 0 || self.manager.threads > 256 {
            out.push("manager.threads: must be in 1..=256".into());
        }
        if self.cpu.poll_ns == 0 {
            out.push("cpu.poll_ns: must be at least 1".into());
        }
        if self.crash_recovery && (self.heartbeat_ns == 0 || self.lease_ns <= 2 * self.heartbeat_ns) {
            out.push("lease_ns: must exceed two heartbeats (heartbeat_ns at least 1)".into());
        }
        if self.node_restarts && !self.crash_recovery {
            out.push("node_restarts: needs crash_recovery (the CN list and its sync rounds)".into());
        }
        if self.crash_recovery && !matches!(self.variant, Variant::Difache | Variant::Noac) {
            out.push("crash_recovery: only DiFache and DiFache-noAC recover from crashes".into());
        }
        if self.timeline_window_ns > 0 && self.timeline_bucket_ns == 0 {
            out.push("timeline_window_ns: needs timeline_bucket_ns".into());
        }
        if self.timeline_bucket_ns > 0
            && (!self.timeline_window_ns.is_multiple_of(self.timeline_bucket_ns)
                || !self.timeline_at_ns.is_multiple_of(self.timeline_bucket_ns))
        {
            out.push("timeline_at_ns: timeline_at_ns and timeline_window_ns must be multiples of timeline_bucket_ns".into());
        }
        out
    }
}

/// The synthetic micro-benchmark of §6.3 (`workload`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Objects on the memory nodes (the paper: 1 M).
    pub objects: u64,
    /// Bytes per object, a multiple of 8 and at least 16 (the paper: 1 KB).
    #[serde(default = "kib")]
    pub object_bytes: u32,
    /// Clients per compute node (the paper: 16).
    pub threads_per_node: u32,
    pub ops_per_thread: u64,
    /// Timed mode (with `measure_us` > 0): every client runs until virtual time
    /// `warmup_us + measure_us` (at most `ops_per_thread` operations) and only operations that
    /// start after `warmup_us` and complete by the end count, so all clients share one
    /// steady-state window; the warm-up fills the caches and settles the modes.
    #[serde(default)]
    pub warmup_us: u64,
    #[serde(default)]
    pub measure_us: u64,
    /// Timed mode: the window also waits until the clients of all compute nodes together have
    /// started `warmup_ops_per_object` × `objects` operations (0: time only). The window opens at
    /// the first operation that starts with both conditions met. DiFache's figures use 164: the
    /// paper's caches are "refilled and cache modes adapted" within 8 s at its default
    /// throughput (Fig. 15; 1.86 × 11.05 M ops, Fig. 10b) over 1 M objects, so its measured
    /// windows see objects that have had ~164 accesses each; a fixed time would give the scaled
    /// runs far fewer (results/difache/REPORT.md, "Warm-up").
    #[serde(default)]
    pub warmup_ops_per_object: u64,
    /// Share of application reads (the paper: 95 %).
    #[serde(default = "read_95")]
    pub read_ratio: f64,
    /// Share of application writes done as an atomic instead (`Cache::cas_object`, spec
    /// §3.8): under the application's lock, a validated read, then a CAS of the object's
    /// stamp word from the value read to a fresh stamp. A CAS that finds another value proves
    /// the read was stale (`atomic_stale_reads`, a violation). Needs `object_bytes` 16 (the
    /// CAS replaces the object's one stamp word) and no trace; not with CMCache. Default 0.
    #[serde(default)]
    pub atomic_ratio: f64,
    /// Zipf exponent; 0 is uniform ([CHOICE] 0.99: the paper's value was lost).
    #[serde(default = "theta")]
    pub zipf_theta: f64,
    /// A synthetic stand-in for one Twitter cache cluster (`trace.rs`): replaces
    /// `object_bytes`, `read_ratio` and `zipf_theta` by the cluster's statistics, caps `objects`.
    #[serde(default)]
    pub trace: Option<TraceSpec>,
    /// A Twitter cache-trace file replayed as the requests (`workload/twitter_trace.rs`; the
    /// path as given, relative to the working directory). Compute node i serves the trace's
    /// clients with id ≡ i (mod compute nodes), its k-th request going to thread k mod threads
    /// (`twitter_trace::Share`), the file starting over at the end; a request's key hashes onto one of `objects`
    /// objects of `object_bytes` (the trace's sizes are not replayed); get and gets read, every
    /// other operation writes. Replaces `read_ratio` and `zipf_theta`; not with `trace`.
    #[serde(default)]
    pub trace_file: Option<String>,
    /// Objects per application operation (default 1): a read reads `batch` distinct objects
    /// (or parts) with one batched call (`Cache::read_batch`); a write locks them in order, reads
    /// them with one batched call and writes them with another (`Cache::write_batch`), as a
    /// transaction engine's batched accesses (§4.5). At most 1,024 (the paper's TAO
    /// batches reach 1,000).
    #[serde(default = "one")]
    pub batch: u32,
    /// Nested objects (default 1: none): every object holds `parts` equal parts, each with its
    /// own application lock and version, accessed alone through the nested calls
    /// (`Cache::read_nested`, `write_nested`): index, modes and invalidation per object, data
    /// transfer per part (§4.5). Each part is at least 16 bytes.
    #[serde(default = "one")]
    pub parts: u32,
    /// FORD's transactions over the cache instead of single operations (Fig. 14 bottom;
    /// `bench/ford.rs`): each client runs transactions of `batch`-style batched accesses with
    /// FORD's execution, validation and commit. `read_ratio` and `batch` are then unused.
    #[serde(default)]
    pub transactions: Option<Transactions>,
}

/// `workload.transactions`: the transaction mix FORD runs (DiFache §6.1: F1 and TAO are
/// "low-contention, data-intensive workloads with 99% of transactions being read-only and
/// having large batch sizes—up to 10 for F1 and 1,000 for TAO").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transactions {
    /// Share of read-only transactions (F1 and TAO: 0.99). Unused with `tpcc`.
    #[serde(default)]
    pub read_only_ratio: f64,
    /// Objects per transaction: uniform in `1..=max_objects` ([CHOICE] uniform: the paper says
    /// "up to"; F1 10, TAO 1,000). Unused with `tpcc`.
    #[serde(default)]
    pub max_objects: u32,
    /// Objects a read-write transaction writes: uniform in `1..=max_writes`, at most its size;
    /// the rest it only reads ([CHOICE]: the paper gives no write-set size). Unused with `tpcc`.
    #[serde(default = "one")]
    pub max_writes: u32,
    /// FORD's TPC-C instead of the synthetic mix (`bench/tpcc.rs`). `workload.objects` is then
    /// replaced by the rows of its tables ([`FordTpcc::rows`]).
    #[serde(default)]
    pub tpcc: Option<FordTpcc>,
}

/// `workload.transactions.tpcc`: FORD's TPC-C (DiFache §6.1: "8 warehouses are allocated to
/// represent high-contention and compute-intensive workloads"). Defaults are the authors'
/// shipped tables (`workload/tpcc/tpcc_tables/*.json` bucket counts): 8 warehouses, 10
/// districts each, 300 customers per district, 10,000 items (and stock rows per warehouse).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FordTpcc {
    #[serde(default = "eight")]
    pub warehouses: u32,
    #[serde(default = "ten")]
    pub districts: u32,
    /// Customers per district; each district is loaded with this many orders, the last 30 %
    /// undelivered (FORD's `SCALE_CONSTANT_BETWEEN_NEWORDER_ORDER` 0.7).
    #[serde(default = "three_hundred")]
    pub customers: u32,
    #[serde(default = "ten_thousand")]
    pub items: u32,
    /// Order slots per district for the run's NewOrders ([CHOICE]: FORD inserts into hash
    /// buckets of fixed capacity too). A NewOrder takes the slot of its district's version,
    /// wrapping past the last (counted in `tpcc_wraps`); StockLevel reads the 20 below the
    /// district's next order, so at least 21 keep them apart from the one being inserted.
    #[serde(default = "sixty_four")]
    pub order_slots: u32,
}

impl Transactions {
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(t) = &self.tpcc {
            out.extend(t.validate());
            return out;
        }
        if !(0.0..=1.0).contains(&self.read_only_ratio) {
            out.push("transactions.read_only_ratio: must be in [0, 1]".into());
        }
        if self.max_objects == 0 || self.max_objects > MAX_BATCH {
            out.push(format!("transactions.max_objects: must be in 1..={MAX_BATCH}"));
        }
        if self.max_writes == 0 || self.max_writes > self.max_objects.min(16) {
            out.push(
                "transactions.max_writes: must be in 1..=max_objects, at most 16 (one batched write)".into(),
            );
        }
        out
    }

    /// The most objects one transaction writes (the undo log's capacity).
    pub fn max_write_set(&self) -> u32 {
        match &self.tpcc {
            Some(_) => super::bench::tpcc::MAX_WRITE_SET,
            None => self.max_writes,
        }
    }
}

impl FordTpcc {
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        let fields = [
            ("warehouses", self.warehouses, 1, 1 << 10),
            ("districts", self.districts, 1, 100),
            ("customers", self.customers, 4, 1 << 16),
            ("items", self.items, 15, 1 << 20),
            ("order_slots", self.order_slots, 21, 1 << 16),
        ];
        for (name, v, lo, hi) in fields {
            if !(lo..=hi).contains(&v) {
                out.push(format!("transactions.tpcc.{name}: must be in {lo}..={hi}"));
            }
        }
        out
    }

    /// Rows of all tables: the objects the workload needs.
    pub fn rows(&self) -> u64 {
        super::bench::tpcc::Tables::new(self).rows
    }
}

fn one() -> u32 {
    1
}
fn eight() -> u32 {
    8
}
fn ten() -> u32 {
    10
}
fn three_hundred() -> u32 {
    300
}
fn ten_thousand() -> u32 {
    10_000
}
fn sixty_four() -> u32 {
    64
}
fn kib() -> u32 {
    1024
}
fn read_95() -> f64 {
    0.95
}
fn theta() -> f64 {
    0.99
}

/// The most objects one batched call accesses (scratch lanes per client: `Layout::lane`).
pub const MAX_BATCH: u32 = 1024;

impl Workload {
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.objects == 0 || self.objects > 1 << 28 {
            out.push("objects: must be in 1..=268435456".into());
        }
        if self.object_bytes < 16 || !self.object_bytes.is_multiple_of(8) || self.object_bytes > 1 << 20 {
            out.push("object_bytes: must be a multiple of 8 in 16..=1048576".into());
        }
        if self.threads_per_node == 0 || self.threads_per_node > 256 {
            out.push("threads_per_node: must be in 1..=256".into());
        }
        if !(0.0..=1.0).contains(&self.read_ratio) {
            out.push("read_ratio: must be in [0, 1]".into());
        }
        if !(0.0..=1.0).contains(&self.atomic_ratio) {
            out.push("atomic_ratio: must be in [0, 1]".into());
        } else if self.atomic_ratio > 0.0
            && (self.object_bytes != 16 || self.trace.is_some() || self.trace_file.is_some())
        {
            out.push(
                "atomic_ratio: needs object_bytes 16 (the CAS replaces the object's one stamp word) and no trace"
                    .into(),
            );
        }
        if !(0.0..=20.0).contains(&self.zipf_theta) {
            out.push("zipf_theta: must be in [0, 20]".into());
        }
        if self.warmup_ops_per_object > 0 && self.measure_us == 0 {
            out.push("warmup_ops_per_object: needs measure_us (timed mode)".into());
        }
        if self.warmup_ops_per_object > 1 << 20 {
            out.push("warmup_ops_per_object: must be at most 1048576".into());
        }
        if self.batch == 0 || self.batch > MAX_BATCH {
            out.push(format!("batch: must be in 1..={MAX_BATCH}"));
        }
        if self.parts == 0
            || !(self.object_bytes / 8).is_multiple_of(self.parts.max(1))
            || self.object_bytes / self.parts.max(1) < 16
        {
            out.push("parts: must divide object_bytes / 8, with at least 16 bytes per part".into());
        }
        if (self.batch > 1 || self.parts > 1)
            && (self.atomic_ratio > 0.0 || self.trace.is_some() || self.trace_file.is_some())
        {
            out.push("batch: batched and nested accesses run without atomics and traces".into());
        }
        if let Some(t) = &self.transactions {
            out.extend(t.validate());
            if self.batch > 1
                || self.parts > 1
                || self.atomic_ratio > 0.0
                || self.trace.is_some()
                || self.trace_file.is_some()
            {
                out.push("transactions: run without batch, parts, atomic_ratio and traces (a transaction draws its own objects)".into());
            }
            if t.tpcc.is_none() && t.max_objects as u64 > self.objects {
                out.push(
                    "transactions.max_objects: more distinct objects per transaction than there are".into(),
                );
            }
        }
        if self.batch as u64 > self.objects.saturating_mul(self.parts.max(1) as u64) {
            out.push("batch: more distinct objects (or parts) per operation than there are".into());
        }
        if let Some(path) = &self.trace_file {
            if self.trace.is_some() {
                out.push("trace_file: replays a file; leave out `trace` (a synthetic cluster)".into());
            }
            // The first lines now, so a wrong file fails before the run; the rest as it streams.
            if let Err(e) = crate::workload::twitter_trace::check_file(std::path::Path::new(path), 1_000) {
                out.push(format!("trace_file: {e}"));
            }
        }
        if let Some(t) = &self.trace {
            if let Err(e) = trace::stats(t.cluster) {
                out.push(format!("trace.cluster: {e}"));
            }
            if !(0.0..=1.0).contains(&t.spread) {
                out.push("trace.spread: must be in [0, 1]".into());
            }
            if let Some(c) = &t.track {
                if trace::track_range(c).is_none() {
                    out.push("trace.track: must be red, black or blue".into());
                }
            }
        }
        out
    }

    /// With a trace: the cluster's object size, read share and Zipf α, and the capped object
    /// count (call after [`Workload::validate`]).
    pub fn resolve(&mut self, memory_nodes: u64) {
        let Some(s) = self.trace.as_ref().and_then(|t| trace::stats(t.cluster).ok()) else {
            return;
        };
        self.object_bytes = trace::object_bytes(&s);
        self.read_ratio = s.read_share;
        self.zipf_theta = s.zipf_alpha.unwrap_or(0.0);
        self.objects = trace::objects(&s, self.objects, memory_nodes);
    }

    /// The object the trace's `track` follows, if any.
    pub fn tracked_key(&self) -> Option<u64> {
        let t = self.trace.as_ref()?;
        trace::tracked_key(self.read_ratio, t.spread, self.objects, trace::track_range(t.track.as_deref()?)?)
    }
}
