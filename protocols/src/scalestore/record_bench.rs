//! Record mode (Figs. 12 and 13, `workload.records > 0`): ScaleStore's workers on the YCSB
//! record workload of its two in-memory baselines (`workload/record_array.rs`), the same key
//! stream, the same open-loop schedule and the same timed window, so the three series compare
//! operation for operation.
//!
//! ```text
//!  record r ──▶ node n = r / per_node (per_node = ceil(records / nodes), as the baselines)
//!            ──▶ page  n · pages_per_node + (r mod per_node) / records_per_page
//!            ──▶ word  ((r mod per_node) mod records_per_page) mod keys_per_page of that page
//! ```
//!
//! [CHOICE] The paper keeps its records in the leaves of a B-tree over ScaleStore; this
//! stand-in packs them by key into pages, `records_per_page` (30: 8 B key + 128 B value in
//! 4 KB) per page, with page-granular coherence: an operation takes its record's page in
//! shared (read) or exclusive (update) mode through the page API ([`Node::access`]) — what a
//! leaf access costs; the inner nodes (hot, cached on every node) are not modelled. Within a
//! page, records share its first `keys_per_page` words for the checker (a word stands for
//! every record at its slot modulo `keys_per_page`; timing does not depend on it).

use std::sync::{Arc, Mutex};

use rand_chacha::rand_core::Rng;

use crate::common::bench::write_stamp;
use crate::harness::{LoggedOp, OpLog};
use crate::nic::Nic;
use crate::workload::open_loop::{wait_until, OpenLoop};
use crate::workload::rng_for_thread;
use crate::workload::zipf::{unit_f64, Zipf};

use super::config::Workload;
use super::layout::Layout;
use super::node::{Access, Node};
use super::stats::Stats;

/// Where the records live: `per_node` records per node, packed by key into its pages.
#[derive(Clone, Copy, Debug)]
pub struct RecordMap {
    per_node: u64,
    per_page: u64,
    pages_per_node: u64,
    keys_per_page: u64,
}

impl RecordMap {
    pub fn new(layout: &Layout, workload: &Workload) -> RecordMap {
        RecordMap {
            per_node: workload.records.div_ceil(layout.homes.max(1)),
            per_page: workload.records_per_page.max(1),
            pages_per_node: layout.pages_per_node,
            keys_per_page: layout.keys_per_page,
        }
    }

    /// A problem when the records do not fit the directories' pages.
    pub fn problem(&self) -> Option<String> {
        let needed = self.per_node.div_ceil(self.per_page);
        (needed > self.pages_per_node).then(|| {
            format!(
                "records: {} records per node at {} per page need {needed} pages per node (pages_per_node is {})",
                self.per_node, self.per_page, self.pages_per_node
            )
        })
    }

    /// The page API's key (page `g`'s word `k` is key `g · keys_per_page + k`) of record `r`.
    pub fn key(&self, r: u64) -> u64 {
        let (node, slot) = (r / self.per_node, r % self.per_node);
        let page = node * self.pages_per_node + slot / self.per_page;
        page * self.keys_per_page + (slot % self.per_page) % self.keys_per_page
    }
}

/// One worker of record mode: closed loop, or open loop with coordinated-omission correction
/// (latency from the scheduled start); timed (`measure_ns`) or counted like `run_client`.
/// Stops at its first error (kept in the node's error slot).
pub async fn run_record_client<N: Nic>(
    node: Arc<Node<N>>,
    thread: u32,
    workload: Workload,
    seed: u64,
    log: Option<(OpLog, u32)>,
    latencies: Arc<Mutex<Vec<u64>>>,
) {
    let me = node.nic.node();
    let mut w = node.worker(thread);
    w.jitter = seed ^ (me.0 as u64) << 32 ^ thread as u64;
    let map = RecordMap::new(&node.layout, &workload);
    // The baselines' streams (`record_array::run_worker`): key, then read-or-update.
    let mut rng = rng_for_thread(seed, me.0, thread);
    let zipf = (workload.zipf_theta > 0.0).then(|| Zipf::new(workload.records, workload.zipf_theta));
    let mut schedule = workload.open_loop.as_ref().map(|o| {
        let workers = node.layout.nodes * node.layout.threads;
        OpenLoop::new(o.target_mops, workers, w.nic.now().0, seed, me.0, thread)
    });
    let t0 = w.nic.now().0;
    let window = workload.measure_ns.map(|m| (t0 + workload.warmup_ns, t0 + workload.warmup_ns + m));
    if window.is_some() {
        node.stats().measure_ns = workload.measure_ns;
    }
    let counted = workload.warmup_ops + workload.ops_per_thread;
    let mut sequence = 0;
    let mut started = false;
    for i in 0.. {
        if window.is_none() && i == counted {
            break;
        }
        let record = match &zipf {
            // Rank r is record r − 1 (no scrambling, as the baselines).
            Some(z) => z.sample(|| rng.next_u64()) - 1,
            None => ((rng.next_u64() as u128 * workload.records as u128) >> 64) as u64,
        };
        let read = unit_f64(rng.next_u64()) < workload.read_ratio;
        let scheduled = match schedule.as_mut() {
            Some(s) => {
                let at = s.next_start();
                wait_until(&w.nic, at).await;
                Some(at)
            }
            None => None,
        };
        let invoke = w.nic.now().0;
        let start = scheduled.unwrap_or(invoke);
        let measured = match window {
            Some((_, to)) if start >= to => break,
            Some((from, _)) => start >= from,
            None => i >= workload.warmup_ops,
        };
        if measured && !started {
            started = true;
            let mut s = node.stats();
            if window.is_some() && s.measure_start_ns.is_none() {
                // The node's first measured operation opens its window: the event counters
                // (page transfers, evictions, SSD I/O, …) restart, so that per-operation
                // rates cover the window and the drain after it, not the warm-up.
                let (measure_ns, completed) = (s.measure_ns, s.completed_in_window);
                *s = Stats { measure_ns, completed_in_window: completed, ..Stats::default() };
            }
            s.measure_start_ns = Some(s.measure_start_ns.map_or(start, |t| t.min(start)));
        }
        let access = if read {
            Access::Read
        } else {
            sequence += 1;
            Access::Write(write_stamp(me, thread, sequence))
        };
        let key = map.key(record);
        let (seen, hit) = match node.access(&mut w, key, access).await {
            Ok(r) => r,
            Err(e) => {
                node.errors.record(e);
                return;
            }
        };
        let end = w.nic.now().0;
        if let Some((log, client)) = &log {
            let write = match access {
                Access::Write(v) => Some(v),
                Access::Read => None,
            };
            log.lock().push(LoggedOp {
                client: *client,
                key,
                write,
                seen: Some(seen),
                invoke_ns: invoke,
                return_ns: Some(end),
            });
        }
        if window.is_some_and(|(from, to)| end > from && end <= to) {
            // Whatever completes inside the window counts, also an operation started before it.
            node.stats().completed_in_window += 1;
        }
        if measured {
            latencies.lock().unwrap_or_else(|e| e.into_inner()).push(end - start);
            let mut s = node.stats();
            s.measure_end_ns = s.measure_end_ns.max(end);
            s.ops += 1;
            s.reads += read as u64;
            s.hits += hit as u64;
            s.late_starts += (invoke > start) as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_range_partitioned_and_packed_by_key() {
        // Goal: 100 records over 3 nodes (34 per node, as the baselines' array), 10 per page:
        // node 1's first record is its first page's slot 0.
        let layout = Layout {
            nodes: 3,
            homes: 3,
            threads: 1,
            pages_per_node: 4,
            page_bytes: 4096,
            keys_per_page: 4,
            providers: 0,
            batch: 1,
        };
        let w = Workload { records: 100, records_per_page: 10, ..Workload::default() };
        let map = RecordMap::new(&layout, &w);
        assert!(map.problem().is_none());
        assert_eq!(map.key(0), 0);
        assert_eq!(map.key(13), 4 + 3); // page 1, slot 3
        assert_eq!(map.key(15), 4 + 1); // page 1, slot 5 → word 1
        assert_eq!(map.key(34), 4 * 4); // node 1, page 4
        assert_eq!(map.key(99), (2 * 4 + 3) * 4 + 1); // node 2, slot 31: page 11, slot 1
        let small = Layout { pages_per_node: 3, ..layout };
        assert!(RecordMap::new(&small, &w).problem().is_some());
    }
}
