//! The YCSB client loop of one DEX thread: draw an operation, route its key into this server's
//! partition ([`super::partition`]), run it, count its verbs, log it for the history checkers
//! (as Sherman's `bench.rs`: lookups log the value seen, writes their unique stamp and the
//! value replaced, scans one read per returned key).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::tree::{Client, Shared, MOVE_NONE};
use crate::common::bench::{write_stamp, ThreadSpan};
use crate::nic::{Nanos, Nic};
use crate::sherman::bench::KvLogger;
use crate::sherman::node::TOMBSTONE;
use crate::sherman::stats::OpStats;
use crate::workload::window::Gate;
use crate::workload::ycsb::{fnv_hash64, OpKind, YcsbStream};
use crate::workload::zipf::Zipf;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::partition::Partitions;

/// How stream keys (ordered: key = index + 1) become this server's keys, and which of the
/// operations are measured.
#[derive(Clone, Copy)]
pub struct Routing {
    pub keyspace: u64,
    pub bulk_load: u64,
    pub gate: Gate,
}

/// The artifact's zipfian request keys (`newbench.cpp`, `GLOBAL_WORKLOAD`): one zipf over the
/// whole keyspace, hashed to a key index, redrawn until the key falls in this server's
/// partition. So a server sees the global hot set restricted to its range (its hottest key is
/// the global rank ~C one), not a zipf folded onto its own slots (every slot then sums ~C ranks,
/// which flattens the head: `dex/NEEDS.md`, Table 2).
pub struct Redraw {
    pub zipf: Zipf,
    pub rng: ChaCha8Rng,
}

impl Redraw {
    /// The key of request index `index` drawn by the stream, redrawn while another partition
    /// owns it (index `i` names key slot `i / C` of partition `i mod C`, as the bulk load deals).
    fn key(&mut self, parts: Partitions, cn: u16, keyspace: u64, mut index: u64) -> u64 {
        // Bounded: a keyspace smaller than the partition count leaves a partition no index.
        for _ in 0..10_000 {
            if parts.owner(parts.load_key(index)) == cn {
                return parts.load_key(index);
            }
            let rng = &mut self.rng;
            let rank = self.zipf.sample(|| rng.next_u64()) - 1;
            index = fnv_hash64(rank) % keyspace;
        }
        parts.request_key(cn, index)
    }
}

fn kind_index(kind: OpKind) -> usize {
    match kind {
        OpKind::Read => 0,
        OpKind::Update => 1,
        OpKind::Insert => 2,
        OpKind::Scan { .. } => 3,
        OpKind::Delete => 4,
    }
}

/// One client thread; stops at its first error. The last thread of the server to finish
/// flushes the cache when the run quiesces.
pub async fn run_client<N: Nic>(
    mut c: Client<N>,
    thread: u32,
    stream: YcsbStream,
    routing: Routing,
    mut redraw: Option<Redraw>,
    logger: Option<KvLogger>,
    quiesce: bool,
) {
    let gate = routing.gate;
    let node = c.nic.node();
    let cn = c.shared.cn;
    let mut sequence = 0u64;
    // Logical repartitioning: the old owner's thread 0 moves the range; a scale-out server
    // starts once it is handed over, a receiver with a partition of its own keeps serving it
    // and its thread 0 watches for the hand-over between operations.
    let moved = c.shared.parts().moved.filter(|_| c.shared.config.repartition.enabled());
    let mover = moved.is_some_and(|m| m.from == cn) && thread == 0;
    let old_owner = moved.is_some_and(|m| m.from == cn);
    let receiver = moved.is_some_and(|m| m.to == cn);
    let existing = c.shared.parts().moves_to_existing();
    let watcher = receiver && existing && thread == 0;
    let mut next_poll = c.shared.config.repartition.at_ns;
    if receiver && !existing {
        if let Err(e) = c.wait_for_range().await {
            c.shared.errors.record(e);
            return;
        }
    }
    // This thread's measured phase.
    let mut measured = ThreadSpan::default();
    for op in stream {
        if gate.closed(c.nic.now().0) {
            break;
        }
        if mover
            && c.shared.move_state.load(Ordering::SeqCst) == MOVE_NONE
            && c.nic.now().0 >= c.shared.config.repartition.at_ns
        {
            if let Err(e) = c.repartition_out().await {
                c.shared.errors.record(e);
                return;
            }
        }
        if watcher && c.shared.move_state.load(Ordering::SeqCst) == MOVE_NONE && c.nic.now().0 >= next_poll {
            match c.receive_range().await {
                Ok(true) => {}
                Ok(false) => next_poll = c.nic.now().0 + c.shared.config.repartition.poll_ns,
                Err(e) => {
                    c.shared.errors.record(e);
                    return;
                }
            }
        }
        c.cur = OpStats::default();
        // Raised before the switch is read, so the mover's drain cannot miss this operation.
        let mut before_switch = false;
        if old_owner {
            c.shared.before_switch.fetch_add(1, Ordering::SeqCst);
            before_switch = c.shared.move_state.load(Ordering::SeqCst) == MOVE_NONE;
            if !before_switch {
                c.shared.before_switch.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let parts = c.shared.parts();
        let index = op.key - 1;
        let key = match op.kind {
            OpKind::Insert => parts.insert_key(cn, index, routing.keyspace, routing.bulk_load),
            _ => match redraw.as_mut() {
                Some(r) => r.key(parts, cn, routing.keyspace, index),
                None => parts.request_key(cn, index),
            },
        };
        let start = c.nic.now().0;
        let mut stamp = || {
            sequence += 1;
            write_stamp(node, thread, sequence)
        };
        let mut found = false;
        let result = match op.kind {
            OpKind::Read => c.lookup(key).await.map(|v| {
                found = v != 0 && v & TOMBSTONE == 0;
                vec![(key, None, v)]
            }),
            OpKind::Update | OpKind::Insert => {
                let s = stamp();
                c.store(key, s).await.map(|old| vec![(key, Some(s), old)])
            }
            OpKind::Delete => {
                let s = TOMBSTONE | stamp();
                c.store(key, s).await.map(|old| vec![(key, Some(s), old)])
            }
            OpKind::Scan { len } => c.scan(key, len as usize).await.map(|rows| {
                if let Some(l) = &logger {
                    let record = super::check::ScanRecord {
                        client: l.client,
                        from: key,
                        requested: len,
                        keys: rows.iter().map(|(k, _)| *k).collect(),
                    };
                    c.shared.scans.lock().unwrap_or_else(|e| e.into_inner()).push(record);
                }
                rows.into_iter().map(|(k, v)| (k, None, v)).collect()
            }),
        };
        let accesses = match result {
            Ok(a) => a,
            Err(e) => {
                c.shared.errors.record(e);
                return;
            }
        };
        let end = c.nic.now().0;
        if let Some(l) = &logger {
            let mut log = l.log.lock();
            for (key, write, seen) in accesses {
                log.push(crate::harness::LoggedOp {
                    client: l.client,
                    key,
                    write,
                    seen: Some(seen),
                    invoke_ns: start,
                    return_ns: Some(end),
                });
            }
        }
        if gate.measured(start, end, op.warmup) {
            record(&c.shared, op.kind, &c.cur, start, end, found);
            measured.record(start, end);
        }
        if before_switch {
            c.shared.before_switch.fetch_sub(1, Ordering::SeqCst);
        }
        c.shared.ops_done.fetch_add(1, Ordering::Relaxed);
    }
    if gate.ran_out(c.nic.now().0) {
        c.shared.stats.lock().unwrap_or_else(|e| e.into_inner()).window_short_threads += 1;
    }
    // A server whose operations ended before `at_ns` still hands the range over.
    if mover && c.shared.move_state.load(Ordering::SeqCst) == MOVE_NONE {
        if let Err(e) = c.repartition_out().await {
            c.shared.errors.record(e);
            return;
        }
    }
    // A receiver whose operations ended before the hand-over still takes the range.
    while watcher && c.shared.move_state.load(Ordering::SeqCst) == MOVE_NONE {
        match c.receive_range().await {
            Ok(true) => {}
            Ok(false) => c.nic.sleep(Nanos(c.shared.config.repartition.poll_ns)).await,
            Err(e) => {
                c.shared.errors.record(e);
                return;
            }
        }
    }
    if let (Some(first), Some(rate)) = (measured.first(), measured.rate_per_ns()) {
        if receiver {
            let name = if existing { "receiver_thread_mops" } else { "scaleout_thread_mops" };
            let mut k = c.shared.counters.lock().unwrap_or_else(|e| e.into_inner());
            *k.entry(name.into()).or_insert(0.0) += rate * 1e3;
        }
        let mut stats = c.shared.stats.lock().unwrap_or_else(|e| e.into_inner());
        stats.thread_rate_sum += rate;
        stats.first_op_start_max_ns = stats.first_op_start_max_ns.max(first);
    }
    if c.shared.active.fetch_sub(1, Ordering::Relaxed) == 1 && quiesce {
        if let Err(e) = c.flush_all().await {
            c.shared.errors.record(e);
        }
    }
}

fn record(shared: &Arc<Shared>, kind: OpKind, cur: &OpStats, start: u64, end: u64, found: bool) {
    let mut stats = shared.stats.lock().unwrap_or_else(|e| e.into_inner());
    let k = kind_index(kind);
    let mut one = cur.clone();
    one.ops = 1;
    one.latency_ns_total = end - start;
    one.found = found as u64;
    stats.kinds[k].merge(&one);
    stats.latencies[k].push(end - start);
    stats.first_op_start_ns = Some(stats.first_op_start_ns.map_or(start, |s| s.min(start)));
    stats.last_op_end_ns = stats.last_op_end_ns.max(end);
}
