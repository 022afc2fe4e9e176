//! Canonical tiny SELCC scenarios as trace snapshots: one line per protocol-visible event (verbs at
//! their target, messages, injected faults) plus `MARK` lines the clients write around each
//! critical section. A change to the protocol's verb sequence, the engine's ordering or the fabric
//! timing shows up here as a readable diff.
//!
//! Method: 1 memory node (n0) and 2 compute nodes (n1 = A, n2 = B), 64-byte GCLs, the default
//! strategy (FIFO, no jitter) so each trace is the textbook interleaving; later steps start after
//! fixed virtual delays (≥ 20 µs ≫ the ~2 µs round trip) so each case happens on its own.
//! Update with `INSTA_UPDATE=always cargo test -p dmsim-sim --test fuzz_snapshots`.

use std::sync::Arc;

use dmsim_protocols::nic::{Cluster, Nanos, Nic, NodeKind};
use dmsim_protocols::selcc::{ops, setup_memory_node, Config, Layout, Node};
use dmsim_sim::choice::Strategy;
use dmsim_sim::engine::FaultPlan;
use dmsim_sim::fabric::Profile;
use dmsim_sim::trace::TraceSink;
use dmsim_sim::{Sim, SimConfig, SimNic, StopReason};

type Nodes = Vec<Arc<Node<SimNic>>>;

fn config() -> Config {
    Config {
        gcl_size_bytes: 64,
        cache_frames: 8,
        cache_shards: 1,
        threads_per_node: 1,
        free_frames_min: 1,
        evict_ring_slots: 2,
        ..Config::selcc()
    }
}

/// Run `script` (which spawns the client tasks) on a fresh 1 MN + 2 CN cluster; the trace.
fn trace_of(config: Config, faults: FaultPlan, script: impl FnOnce(&mut Sim, &Nodes)) -> String {
    let kinds = vec![NodeKind::Memory, NodeKind::Compute, NodeKind::Compute];
    let shape = Cluster { kinds: kinds.clone(), region_size_bytes: vec![0; 3] };
    let layout = Layout::new(&shape, &config, 8, 0);
    let cluster = Cluster { region_size_bytes: layout.region_sizes(&kinds), kinds };
    let mut profile = Profile::named("cx3_fdr56").unwrap();
    profile.jitter_ns_max = 0;
    let mut sim_config = SimConfig::new(cluster.clone(), profile, 1);
    sim_config.strategy = Strategy::Default;
    sim_config.trace = TraceSink::Memory(Vec::new());
    sim_config.faults = faults;
    let mut sim = Sim::new(sim_config);
    for mn in cluster.memory_nodes() {
        setup_memory_node(&layout, mn, &sim.region(mn));
    }
    let mut nodes = Vec::new();
    for cn in cluster.compute_nodes() {
        let node = Node::new(sim.nic(cn), config.clone(), layout.clone(), None);
        for task in ops::daemons(&node) {
            sim.spawn_daemon(cn, task);
        }
        nodes.push(node);
    }
    script(&mut sim, &nodes);
    let outcome = sim.run();
    assert_eq!(outcome.stop, StopReason::Finished);
    let mut lines = outcome.trace_lines;
    lines.push(format!("trace-hash {:016x}", outcome.trace_hash));
    lines.join("\n")
}

/// Write `value` to word 0 of GCL `gcl` after `delay_us`, holding the latch for `hold_us`.
async fn write(node: Arc<Node<SimNic>>, delay_us: u64, gcl: u64, value: u64, hold_us: u64) {
    let mut w = node.worker(0);
    w.nic.sleep(Nanos::from_us(delay_us)).await;
    let g = node.layout.gcl(gcl);
    w.nic.mark("xlock", gcl);
    let mut h = node.xlock(&mut w, g).await.unwrap();
    node.write(&mut h, 0, &[value]);
    if hold_us > 0 {
        w.nic.sleep(Nanos::from_us(hold_us)).await;
    }
    w.nic.mark("xunlock", gcl);
    node.xunlock(&mut w, h).await.unwrap();
}

/// Read word 0 of GCL `gcl` after `delay_us`.
async fn read(node: Arc<Node<SimNic>>, delay_us: u64, gcl: u64) {
    let mut w = node.worker(0);
    w.nic.sleep(Nanos::from_us(delay_us)).await;
    let g = node.layout.gcl(gcl);
    w.nic.mark("slock", gcl);
    let h = node.slock(&mut w, g).await.unwrap();
    let mut out = [0u64];
    node.read(&h, 0, &mut out);
    w.nic.mark("sunlock", out[0]);
    node.sunlock(&mut w, h).await.unwrap();
}

fn spawn(
    sim: &mut Sim,
    nodes: &Nodes,
    i: usize,
    task: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let node = nodes[i].node;
    sim.spawn_main(node, task);
}

#[test]
fn writer_vs_modified() {
    // Case 1: B's CAS finds A exclusive; A hands the latch over by FAA and forwards the copy.
    let t = trace_of(config(), FaultPlan::default(), |sim, n| {
        spawn(sim, n, 0, write(n[0].clone(), 0, 0, 0xa1, 0));
        spawn(sim, n, 1, write(n[1].clone(), 20, 0, 0xb1, 0));
    });
    insta::assert_snapshot!(t);
}

#[test]
fn reader_vs_modified() {
    // Case 2: B's FAA finds A exclusive; B undoes its bit, A flushes, downgrades, forwards.
    let t = trace_of(config(), FaultPlan::default(), |sim, n| {
        spawn(sim, n, 0, write(n[0].clone(), 0, 0, 0xa1, 0));
        spawn(sim, n, 1, read(n[1].clone(), 20, 0));
    });
    insta::assert_snapshot!(t);
}

#[test]
fn writer_vs_shared() {
    // Case 3: A holds Shared; B's CAS fails on A's bit; A releases; B's retried CAS succeeds.
    let t = trace_of(config(), FaultPlan::default(), |sim, n| {
        spawn(sim, n, 0, read(n[0].clone(), 0, 0));
        spawn(sim, n, 1, write(n[1].clone(), 20, 0, 0xb1, 0));
    });
    insta::assert_snapshot!(t);
}

#[test]
fn upgrade() {
    // A reads (Shared), then writes: one upgrade CAS (0,BIT(A)) → (A,0), no READ.
    let t = trace_of(config(), FaultPlan::default(), |sim, n| {
        let a = n[0].clone();
        spawn(sim, n, 0, async move {
            read(a.clone(), 0, 0).await;
            write(a, 5, 0, 0xa1, 0).await;
        });
    });
    insta::assert_snapshot!(t);
}

#[test]
fn eviction_with_dirty_flush() {
    // A dirties GCL 0, then touches GCLs 1..=6 through a 6-frame cache: the evictor flushes
    // GCL 0's dirty word and releases its latch (WRITE + FAA in one batch).
    let c = Config { cache_frames: 6, ..config() };
    let t = trace_of(c, FaultPlan::default(), |sim, n| {
        let a = n[0].clone();
        spawn(sim, n, 0, async move {
            write(a.clone(), 0, 0, 0xa1, 0).await;
            for g in 1..=6 {
                read(a.clone(), 1, g).await;
            }
        });
    });
    insta::assert_snapshot!(t);
}

#[test]
fn message_to_a_busy_frame_is_dropped_and_resent() {
    // A holds GCL 0 exclusively for 30 µs; B's invalidation meets the busy frame and, with
    // deferral off, is dropped with a "dropped" reply; B resends until A has let go.
    let c = Config { defer_messages: false, ..config() };
    let t = trace_of(c, FaultPlan::default(), |sim, n| {
        spawn(sim, n, 0, write(n[0].clone(), 0, 0, 0xa1, 30));
        spawn(sim, n, 1, write(n[1].clone(), 10, 0, 0xb1, 0));
    });
    insta::assert_snapshot!(t);
}

#[test]
fn lost_send_is_retransmitted() {
    // Fabric fault: every SEND is lost once and retransmitted by the RC NIC after 20 µs (the
    // FAULT lines); Case 1 still completes, later.
    let faults = FaultPlan { send_drop_permille: 1000, send_retransmit_ns: 20_000, ..FaultPlan::default() };
    let t = trace_of(config(), faults, |sim, n| {
        spawn(sim, n, 0, write(n[0].clone(), 0, 0, 0xa1, 0));
        spawn(sim, n, 1, write(n[1].clone(), 20, 0, 0xb1, 0));
    });
    assert!(t.contains("FAULT  drop+resend"), "{t}");
    insta::assert_snapshot!(t);
}
