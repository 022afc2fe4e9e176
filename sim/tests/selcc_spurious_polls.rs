//! SELCC under spurious polls: every future the protocol awaits must tolerate being polled when
//! it was not woken (hardware executors and `sync::join_all` do this). Two forms:
//!
//! * all clients of a node joined with `sync::join_all` in ONE task (each wake polls every
//!   client) — the shape that once hung on real verbs (`dmsim hw run` now spawns one task per
//!   client);
//! * each client wrapped so that every poll that returns `Pending` is repeated at once.
//!
//! Method: the eviction-heavy hardware scenario's shape (hw/vm/scenarios/selcc-3node-evict.json:
//! 1 memory node, 2 compute nodes × 2 clients, 64 GCLs through 24 frames, zipf 0.9, 50 %
//! writes) under random scheduling with jitter, every invariant checked after every event, every
//! read against the oracle, and memory against the oracle after the final drain.

mod selcc_common;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use dmsim_protocols::selcc::bench::{self, cluster_stats};
use dmsim_protocols::selcc::Config;
use dmsim_protocols::sync::join_all;
use dmsim_protocols::workload::micro::{MicroSpec, MicroStream};
use dmsim_protocols::workload::rng_for_thread;
use dmsim_sim::choice::Strategy;
use dmsim_sim::fabric::Profile;
use dmsim_sim::StopReason;
use selcc_common::*;

const GCLS: u64 = 64;

fn spec() -> MicroSpec {
    MicroSpec {
        gcl_count: GCLS,
        gcl_size_bytes: 256,
        sharing_ratio: 1.0,
        read_ratio: 0.5,
        zipf_theta: 0.9,
        locality: 0.0,
        threads_per_node: 2,
        ops_per_thread: 200,
        access_bytes: 8,
    }
}

fn config() -> Config {
    Config { gcl_size_bytes: 256, cache_frames: 24, threads_per_node: 2, ..Config::selcc() }
}

/// Polls its future a second time whenever a poll returns `Pending` (a spurious poll).
struct PollTwice<F>(Pin<Box<F>>);

impl<F: Future> Future for PollTwice<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        match self.0.as_mut().poll(cx) {
            Poll::Pending => self.0.as_mut().poll(cx),
            ready => ready,
        }
    }
}

#[derive(Clone, Copy)]
enum Shape {
    JoinAll,
    PollTwice,
}

fn run(shape: Shape, seed: u64) -> Result<(), String> {
    let spec = spec();
    let profile = Profile::named("cx3_fdr56").unwrap();
    let mut h = harness_with(1, 2, &config(), GCLS, Strategy::Random { seed }, profile, true);
    let count = h.nodes.len();
    for (i, node) in h.nodes.clone().into_iter().enumerate() {
        *node.workers_running.lock().unwrap() = spec.threads_per_node;
        let clients: Vec<_> = (0..spec.threads_per_node)
            .map(|thread| {
                let rng = rng_for_thread(seed, node.node.0, thread);
                let stream = MicroStream::new(&spec, i, count, rng);
                bench::run_worker(node.clone(), thread, stream, true)
            })
            .collect();
        match shape {
            Shape::JoinAll => h.sim.spawn_main(h.compute[i], async move {
                join_all(clients).await;
            }),
            Shape::PollTwice => {
                for client in clients {
                    h.sim.spawn_main(h.compute[i], PollTwice(Box::pin(client)));
                }
            }
        }
    }
    let outcome = h.run();
    if outcome.stop != StopReason::Finished {
        return Err(format!("{:?} at {}", outcome.stop, outcome.end_time));
    }
    h.check_quiescent(GCLS)?;
    let stats = cluster_stats(&h.nodes);
    if stats.ops != 2 * 2 * 200 {
        return Err(format!("{} ops", stats.ops));
    }
    if stats.evictions == 0 || stats.invalidation_ops == 0 {
        return Err(format!("the workload must evict and conflict: {stats:?}"));
    }
    Ok(())
}

#[test]
fn clients_joined_in_one_task_finish() {
    for seed in 1..=4 {
        run(Shape::JoinAll, seed).unwrap_or_else(|e| panic!("join_all, seed {seed}: {e}"));
    }
}

#[test]
fn every_pending_poll_repeated_finishes() {
    for seed in 1..=4 {
        run(Shape::PollTwice, seed).unwrap_or_else(|e| panic!("poll twice, seed {seed}: {e}"));
    }
}
