//! ScaleStore's options (`protocol_options`) and workload (`workload`).

use serde::{Deserialize, Serialize};

use super::baselines::Conflicts;
use super::local::LocalLatches;
use super::mutants::Mutant;
use crate::workload::open_loop::OpenLoopSpec;

/// Costs charged with `nic.cpu` (a sleep unless the run models the node's cores). [CHOICE]
/// values, not fitted to any figure (spec §7.4: the paper gives none).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuCosts {
    /// A worker's operation on a page it holds (translation-table lookup, latch, record copy).
    pub local_op_ns: u64,
    /// The part of `local_op_ns` that translates a PID into a frame pointer: the lookup in a
    /// translation table far larger than the CPU's caches (150 GB of 4 KB pages: 37 M entries),
    /// so one DRAM access, the same "~100 ns" as `common::local_latch::LINE_NS`. [CHOICE] Only
    /// [`PageAccess::Swizzled`] reads it.
    pub translation_ns: u64,
    /// A message handler's work on one request (lookup, try-latch, metadata update, post).
    pub handler_ns: u64,
    /// A worker building and posting one request.
    pub request_ns: u64,
    /// A page provider examining one cached frame (sampling or scanning the table).
    pub provider_frame_ns: u64,
    /// A page provider evicting one page (latch, list entry or SSD command, unmap).
    pub provider_evict_ns: u64,
}

impl Default for CpuCosts {
    fn default() -> Self {
        CpuCosts {
            local_op_ns: 300,
            translation_ns: crate::common::local_latch::LINE_NS,
            handler_ns: 300,
            request_ns: 100,
            provider_frame_ns: 10,
            provider_evict_ns: 100,
        }
    }
}

/// Page eviction (spec §3.11; used when `workload.cache_pages_per_node` is below the data).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Eviction {
    /// Page-provider tasks per node (paper: 2), each owning a share of the translation table.
    pub providers: u16,
    /// Providers evict while fewer than this share of the cache is free (code: 1 %; at least
    /// one frame per worker).
    pub free_percent: f64,
    /// Frames sampled to set the epoch threshold (code: 600).
    pub sample: u32,
    /// Evict frames whose last-access epoch is within this coolest share of the sample
    /// (paper: "e.g., 10 %"; code default 0.1, the authors' scripts pass 0.5).
    pub coolest: f64,
    /// Pages per eviction list sent to one directory (paper: up to 100; code: 32; at most 64).
    pub batch: u16,
}

impl Default for Eviction {
    fn default() -> Self {
        Eviction { providers: 2, free_percent: 1.0, sample: 600, coolest: 0.1, batch: 32 }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Page size (paper: 4 KB).
    pub page_bytes: u64,
    /// Message-handler tasks per node (paper: 4), each polling its share of the mailboxes.
    pub handler_tasks: u16,
    /// Period of a handler's mailbox sweep when it found nothing to do, and of a worker's
    /// poll of its response word.
    pub poll_ns: u64,
    pub cpu: CpuCosts,
    pub eviction: Eviction,
    /// Conflict resolution (spec §3.7, Fig. 5): `"chaining"` (anticipatory chaining, ScaleStore),
    /// or the baselines `"fifo"` (FIFO queue at the directory) and `"busy_polling"`
    /// (`baselines.rs`).
    pub conflicts: Conflicts,
    /// Busy polling: first back-off after a refusal; doubles per refusal up to `backoff_max_ns`
    /// (each wait uniform in [b/2, b]). [CHOICE], not fitted.
    pub backoff_ns: u64,
    pub backoff_max_ns: u64,
    /// The directory serves a transfer it would ask of itself (it owns the page exclusively,
    /// or is the anchor of a shared page an exclusive requester takes) in the same step, the
    /// page with the response, when its frame is Hot and free (spec §3.4, the code's
    /// handler). Off by default: the runs before it keep their traces.
    pub directory_sends_owned_page: bool,
    /// The ablation (paper §6.2) without the message handler's page write (paper §3, "Page
    /// transfer using RDMA writes"): after a page arrives from another node's handler, the
    /// requester sends that handler a message saying the transfer is over and waits for its
    /// acknowledgment — the "additional message" whose avoidance "saves a full roundtrip". The
    /// page itself still travels as the handler's write (the paper: "both strategies provide
    /// similar performance for the page transfer"). Off by default.
    pub transfer_done_message: bool,
    /// The ablation's local latch costs (paper §6.2, `local.rs`); default: none charged.
    pub local: LocalLatches,
    /// How a worker reaches a cached page: through the PID translation table (ScaleStore), or
    /// by a direct pointer (Fig. 11's single-node comparisons). One node only.
    pub page_access: PageAccess,
    #[serde(skip)]
    pub mutant: Mutant,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            page_bytes: 4096,
            handler_tasks: 4,
            poll_ns: 100,
            cpu: CpuCosts::default(),
            eviction: Eviction::default(),
            conflicts: Conflicts::Chaining,
            backoff_ns: 1_000,
            backoff_max_ns: 64_000,
            directory_sends_owned_page: false,
            transfer_done_message: false,
            local: LocalLatches::default(),
            page_access: PageAccess::Translated,
            mutant: Mutant::None,
        }
    }
}

/// `protocol_options.page_access`: what a hit on a cached page costs beyond the tree's search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PageAccess {
    /// ScaleStore: every page access translates the PID to its frame (paper §6.7.1: "for every
    /// page access, a page identifier is translated to the corresponding memory pointer").
    #[default]
    Translated,
    /// The single-node systems of paper Fig. 11 that ScaleStore is compared with, on the same
    /// page layout and latching: the in-memory OLC B-tree (child pointers are memory
    /// addresses) and LeanStore (pointer swizzling: a cached child is reached by its pointer;
    /// a page not cached goes to the SSD as ScaleStore's does). A hit costs `local_op_ns`
    /// without `translation_ns`; nothing else about it changes.
    Swizzled,
}

impl Config {
    /// CPU of one access to a page this node holds (the hot path, or after a fetch).
    pub fn hit_ns(&self) -> u64 {
        match self.page_access {
            PageAccess::Translated => self.cpu.local_op_ns,
            PageAccess::Swizzled => self.cpu.local_op_ns.saturating_sub(self.cpu.translation_ns),
        }
    }

    /// On memory + compute nodes (SELCC's setup), a memory node's handlers are its cores
    /// (`cluster.memory_node_cores`, 1 by default) unless `handler_tasks` is given.
    pub fn handlers_from_memory_cores(&mut self, point: &crate::harness::PointSpec) {
        if point.protocol_options.get("handler_tasks").is_none() {
            self.handler_tasks = point.memory_node_cores.unwrap_or(1).clamp(1, 64) as u16;
        }
    }

    /// Problems with these options on a point of `nodes` nodes.
    pub fn validate(&self, nodes: usize) -> Vec<String> {
        let mut out = Vec::new();
        if self.page_access == PageAccess::Swizzled && nodes != 1 {
            out.push(format!(
                "page_access: \"swizzled\" models the single-node systems of Fig. 11 (an in-memory B-tree, LeanStore); this point has {nodes} nodes"
            ));
        }
        if self.page_bytes < 64 || !self.page_bytes.is_multiple_of(64) || self.page_bytes > 1 << 20 {
            out.push("page_bytes: must be a multiple of 64 in 64..=1 MiB".into());
        }
        if self.handler_tasks == 0 || self.handler_tasks > 64 {
            out.push("handler_tasks: must be in 1..=64".into());
        }
        if self.poll_ns == 0 {
            out.push("poll_ns: must be at least 1".into());
        }
        if self.cpu.translation_ns > self.cpu.local_op_ns {
            out.push("cpu.translation_ns: is part of cpu.local_op_ns, so at most it".into());
        }
        let e = &self.eviction;
        if e.providers == 0 || e.providers > 16 {
            out.push("eviction.providers: must be in 1..=16".into());
        }
        if !(0.0..50.0).contains(&e.free_percent) {
            out.push("eviction.free_percent: must be in [0, 50)".into());
        }
        if e.sample == 0 {
            out.push("eviction.sample: must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&e.coolest) {
            out.push("eviction.coolest: must be in [0, 1]".into());
        }
        if e.batch == 0 || e.batch > 64 {
            out.push("eviction.batch: must be in 1..=64 (the answer is a 64-bit bitmap)".into());
        }
        if self.backoff_ns == 0 || self.backoff_max_ns < self.backoff_ns {
            out.push("backoff_ns: must be at least 1 and at most backoff_max_ns".into());
        }
        out.extend(self.local.validate());
        out
    }
}

/// The workload: closed-loop workers on every node, each operation one record of one page
/// (a YCSB point read or update). Records are `keys_per_page` words at the start of each page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Workload {
    /// Pages whose directory is each node (PIDs `node << 56 | slot`).
    pub pages_per_node: u64,
    /// Records (8-byte words) per page that operations touch.
    pub keys_per_page: u64,
    pub threads_per_node: u32,
    pub ops_per_thread: u64,
    /// Operations before measurement starts (per thread; they run, and are not counted).
    pub warmup_ops: u64,
    pub read_ratio: f64,
    /// 0: uniform; otherwise Zipf over the pages a worker may access.
    pub zipf_theta: f64,
    /// Each node's workers access only the pages of its own directory (the paper's
    /// "partitionable" pattern); otherwise every page.
    pub partitioned: bool,
    /// Frames each node may cache (0: every page of the cluster, no eviction). Below the
    /// cluster's pages, page providers evict to the directories and their storage devices;
    /// each node's pages start in its memory as far as its cache allows, the rest on its SSD.
    pub cache_pages_per_node: u64,
    /// Operations touch only the first `pages_used` pages of that range (0: all of them);
    /// `1` puts every worker on one page, the page of node 0's directory (Fig. 6 "contended").
    pub pages_used: u64,
    /// Timed runs (0: off): operations starting before `measure_from_ns` (simulated time) are
    /// warm-up, and none starts at or after `stop_at_ns`, so every node runs for the same
    /// window and per-node throughputs compare (`ops_per_thread` stays a cap).
    pub measure_from_ns: u64,
    pub stop_at_ns: u64,
    /// Record mode (Figs. 12 and 13; 0: off, the page workload above): `records` records
    /// (8 B key + 128 B value) range-partitioned over the nodes as in the baselines' record
    /// array (record `r` on node `r / ceil(records / nodes)`), packed `records_per_page` per
    /// page by key; operations draw records (Zipf ranks over records, the baselines' key
    /// stream) and lock their page (`record_bench.rs`).
    pub records: u64,
    pub records_per_page: u64,
    /// Record mode: open-loop Poisson arrivals at a target throughput (Fig. 13); absent:
    /// closed loop.
    pub open_loop: Option<OpenLoopSpec>,
    /// Record mode, timed run as in `workload/record_array.rs`: `warmup_ns` unmeasured, then
    /// operations start for `measure_ns`; `throughput_mops` counts those completed inside it.
    pub measure_ns: Option<u64>,
    pub warmup_ns: u64,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            pages_per_node: 64,
            keys_per_page: 4,
            threads_per_node: 2,
            ops_per_thread: 100,
            warmup_ops: 0,
            read_ratio: 0.5,
            zipf_theta: 0.0,
            partitioned: false,
            cache_pages_per_node: 0,
            pages_used: 0,
            measure_from_ns: 0,
            stop_at_ns: 0,
            records: 0,
            records_per_page: 30,
            open_loop: None,
            measure_ns: None,
            warmup_ns: 0,
        }
    }
}

impl Workload {
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.pages_per_node == 0 || self.pages_per_node >= 1 << 32 {
            out.push("pages_per_node: must be in 1..2^32".into());
        }
        if self.stop_at_ns > 0 && self.stop_at_ns <= self.measure_from_ns {
            out.push("stop_at_ns: must be later than measure_from_ns".into());
        }
        if self.keys_per_page == 0 || self.keys_per_page > 8 {
            out.push("keys_per_page: must be in 1..=8 (the first cache line of a page)".into());
        }
        if self.threads_per_node == 0 || self.threads_per_node > 256 {
            out.push("threads_per_node: must be in 1..=256".into());
        }
        if !(0.0..=1.0).contains(&self.read_ratio) {
            out.push("read_ratio: must be in [0, 1]".into());
        }
        if !(0.0..10.0).contains(&self.zipf_theta) {
            out.push("zipf_theta: must be in [0, 10)".into());
        }
        if self.cache_pages_per_node != 0 && self.cache_pages_per_node < self.threads_per_node as u64 + 2 {
            out.push(
                "cache_pages_per_node: must be 0 (no eviction) or at least threads_per_node + 2 \
                 (a frame per fetching worker, and room to evict)"
                    .into(),
            );
        }
        out.extend(self.record_problems());
        out
    }

    fn record_problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.records == 0 {
            if self.open_loop.is_some() || self.measure_ns.is_some() || self.warmup_ns != 0 {
                out.push(
                    "open_loop: open_loop, measure_ns and warmup_ns need record mode (records > 0)".into(),
                );
            }
            return out;
        }
        if self.records > 1 << 40 {
            out.push("records: must be at most 2^40".into());
        }
        if self.records_per_page == 0 {
            out.push("records_per_page: must be at least 1".into());
        }
        if self.pages_used != 0 || self.partitioned || self.measure_from_ns != 0 || self.stop_at_ns != 0 {
            out.push(
                "records: record mode draws from every record: no pages_used, partitioned, measure_from_ns or stop_at_ns"
                    .into(),
            );
        }
        if let Some(o) = &self.open_loop {
            out.extend(o.validate());
        }
        if self.measure_ns == Some(0)
            || self.measure_ns.is_some_and(|m| m.saturating_add(self.warmup_ns) > 1 << 50)
        {
            out.push("measure_ns: must be in 1..2^50 with warmup_ns".into());
        }
        if self.measure_ns.is_none() && self.warmup_ns != 0 {
            out.push("warmup_ns: only with measure_ns (a timed run)".into());
        }
        out
    }
}
