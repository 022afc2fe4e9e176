//! The closed-loop worker: one operation at a time on one record (a point read or update), as
//! the paper's YCSB workers run ("we do not batch operations nor execute them asynchronously").

use std::sync::{Arc, Mutex};

use rand_chacha::rand_core::Rng;

use crate::common::bench::write_stamp;
use crate::harness::{LoggedOp, OpLog};
use crate::nic::Nic;
use crate::workload::rng_for_thread;
use crate::workload::zipf::{unit_f64, Zipf};

use super::config::Workload;
use super::node::{Access, Node, Worker};

/// One worker thread. Stops at its first error (kept in the node's error slot).
pub async fn run_client<N: Nic>(
    node: Arc<Node<N>>,
    thread: u32,
    workload: Workload,
    seed: u64,
    log: Option<(OpLog, u32)>,
    latencies: Arc<Mutex<Vec<u64>>>,
) {
    let me = node.nic.node();
    let mut w = node.worker(thread);
    // Busy polling's back-off jitter, from the run's seed (not from `rng`: the workload's
    // stream stays what it is without the baselines).
    w.jitter = seed ^ (me.0 as u64) << 32 ^ thread as u64;
    let mut rng = rng_for_thread(seed, me.0, thread);
    let layout = node.layout.clone();
    let (base, pages) = if workload.partitioned {
        (me.0 as u64 * layout.pages_per_node, layout.pages_per_node)
    } else {
        (0, layout.total_pages())
    };
    let pages = if workload.pages_used > 0 { pages.min(workload.pages_used) } else { pages };
    let zipf = (workload.zipf_theta > 0.0).then(|| Zipf::new(pages, workload.zipf_theta));
    let mut sequence = 0;
    let mut started = false;
    for i in 0..workload.warmup_ops + workload.ops_per_thread {
        if workload.stop_at_ns > 0 && w.nic.now().0 >= workload.stop_at_ns {
            break; // A timed run: no operation starts after `stop_at_ns`.
        }
        let page = match &zipf {
            // [CHOICE] Rank r is page r−1 of the range (no scrambling; spec §8 A16).
            Some(z) => z.sample(|| rng.next_u64()) - 1,
            None => ((rng.next_u64() as u128 * pages as u128) >> 64) as u64,
        };
        let key = (base + page) * layout.keys_per_page + rng.next_u64() % layout.keys_per_page;
        let read = unit_f64(rng.next_u64()) < workload.read_ratio;
        let access = if read {
            Access::Read
        } else {
            sequence += 1;
            Access::Write(write_stamp(me, thread, sequence))
        };
        let start = w.nic.now().0;
        let measured = i >= workload.warmup_ops && start >= workload.measure_from_ns;
        if measured && !started {
            started = true;
            let mut s = node.stats.lock().unwrap_or_else(|e| e.into_inner());
            s.measure_start_ns = Some(s.measure_start_ns.map_or(start, |t| t.min(start)));
        }
        if !timed_access(&node, &mut w, key, access, measured, &log, &latencies).await {
            return;
        }
    }
}

/// One operation through the page API, logged for the checkers and, if `measured`, counted
/// and timed. Returns false at the first error (kept in the node's error slot).
pub(super) async fn timed_access<N: Nic>(
    node: &Node<N>,
    w: &mut Worker<N>,
    key: u64,
    access: Access,
    measured: bool,
    log: &Option<(OpLog, u32)>,
    latencies: &Mutex<Vec<u64>>,
) -> bool {
    let start = w.nic.now().0;
    let (seen, hit) = match node.access(w, key, access).await {
        Ok(r) => r,
        Err(e) => {
            node.errors.record(e);
            return false;
        }
    };
    let end = w.nic.now().0;
    if let Some((log, client)) = log {
        let write = match access {
            Access::Write(v) => Some(v),
            Access::Read => None,
        };
        log.lock().push(LoggedOp {
            client: *client,
            key,
            write,
            seen: Some(seen),
            invoke_ns: start,
            return_ns: Some(end),
        });
    }
    if measured {
        latencies.lock().unwrap_or_else(|e| e.into_inner()).push(end - start);
        let mut s = node.stats.lock().unwrap_or_else(|e| e.into_inner());
        s.measure_end_ns = s.measure_end_ns.max(end);
        s.ops += 1;
        s.reads += (access == Access::Read) as u64;
        s.hits += hit as u64;
    }
    true
}
