//! The GAM-like directory baseline driven op by op on tiny clusters: what one read miss costs,
//! and what a write does to other nodes' copies. Each test builds the cluster with `build()`,
//! scripts client ops at fixed virtual times, and checks line states and access traces.

use std::sync::{Arc, Mutex};

use dmsim_protocols::gam::bench::home_tasks;
use dmsim_protocols::gam::check::{check_swmr, Oracle};
use dmsim_protocols::gam::{Config, Layout, LineState, Node, NodeState, Variant};
use dmsim_protocols::nic::{Cluster, Nanos, Nic, NodeId, NodeKind};
use dmsim_sim::choice::Strategy;
use dmsim_sim::fabric::Profile;
use dmsim_sim::{Sim, SimConfig, SimNic, StopReason};

fn quiet_profile() -> Profile {
    let mut p = Profile::named("cx3_fdr56").unwrap();
    p.jitter_ns_max = 0;
    p
}

fn small_config(variant: Variant) -> Config {
    Config { variant, gcl_size_bytes: 64, cache_frames: 16, threads_per_node: 1, ..Config::seq() }
}

/// One memory node (n0) with one modelled core and `compute` compute nodes, `blocks` blocks;
/// homes and handlers spawned, SWMR checked after every event.
fn build(compute: usize, config: &Config, blocks: u64) -> (Sim, Vec<Arc<Node<SimNic>>>, Arc<Oracle>) {
    let mut kinds = vec![NodeKind::Memory];
    kinds.extend(std::iter::repeat_n(NodeKind::Compute, compute));
    let shape = Cluster { kinds: kinds.clone(), region_size_bytes: vec![0; kinds.len()] };
    let layout = Layout::new(&shape, config.gcl_size_bytes, blocks, config.cache_frames);
    let cluster = Cluster { region_size_bytes: layout.region_sizes(&kinds), kinds };
    let mut sim_config = SimConfig::new(cluster.clone(), quiet_profile(), 1);
    sim_config.strategy = Strategy::Default;
    sim_config.cores[0] = Some(1);
    let mut sim = Sim::new(sim_config);
    let home = home_tasks(sim.nic(NodeId(0)), config, &layout);
    for t in home.daemons {
        sim.spawn_daemon(NodeId(0), t);
    }
    let oracle = Arc::new(Oracle::new(config.gcl_size_bytes));
    let nodes: Vec<_> = cluster
        .compute_nodes()
        .into_iter()
        .map(|cn| {
            let node = Node::new(sim.nic(cn), config.clone(), layout.clone(), Some(oracle.clone()));
            for t in node.daemons() {
                sim.spawn_daemon(cn, t);
            }
            node
        })
        .collect();
    let states: Vec<Arc<NodeState>> = nodes.iter().map(|n| n.state.clone()).collect();
    sim.set_checker(move |_| check_swmr(&states.iter().map(|s| s.as_ref()).collect::<Vec<_>>()));
    (sim, nodes, oracle)
}

#[test]
fn gam_read_miss_costs_one_rpc_round_trip() {
    // Goal: a cold read is one request to the home and one reply with the data — one SEND round
    // trip plus the home's service and the node's worker steps; the second read hits.
    // Method: time both reads on an idle cluster without jitter.
    let config = small_config(Variant::Seq);
    let (mut sim, nodes, oracle) = build(1, &config, 4);
    let node = nodes[0].clone();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    sim.spawn_main(node.node, async move {
        let mut w = node.worker(0);
        for _ in 0..2 {
            let start = w.nic.now();
            let mut out = [0u64; 1];
            let trace = node.read(&mut w, 2, 8, &mut out).await.unwrap();
            s.lock().unwrap().push((trace, w.nic.now().0 - start.0));
        }
    });
    assert_eq!(sim.run().stop, StopReason::Finished);
    let seen = seen.lock().unwrap().clone();
    let profile = quiet_profile();
    let (miss, miss_ns) = seen[0];
    assert!(!miss.hit && miss.rpcs == 1 && miss.invalidations == 0, "{miss:?}");
    // Floor: one SEND round trip + service + two worker steps + the access. Ceiling: the same
    // plus generous wire time for 64 B of data — well below two round trips.
    let c = config.cpu;
    let floor = profile.latency_ns_send + c.handler_service_ns + 2 * c.worker_ns + c.access_ns;
    assert!(miss_ns >= floor && miss_ns < floor + 500, "read miss took {miss_ns} ns, floor {floor}");
    assert!(miss_ns < 2 * profile.latency_ns_send + c.handler_service_ns);
    let (hit, hit_ns) = seen[1];
    assert!(hit.hit && hit.rpcs == 0, "{hit:?}");
    assert_eq!(hit_ns, c.worker_ns + c.access_ns, "a hit is a worker step and a local access");
    assert_eq!(nodes[0].line_state(2), LineState::Shared);
    assert_eq!(oracle.reads_checked(), 2);
    assert!(oracle.violations().is_empty());
}

#[test]
fn gam_write_invalidates_sharers_and_a_later_read_recalls_the_owner() {
    // Goal: (1) a write to a block two other nodes share invalidates both before it is granted;
    // (2) a later read recalls the writer's Exclusive copy and sees its value; the writer keeps
    // a Shared copy. Method: CN0 and CN1 read at t=0, CN2 writes at 50 µs, CN0 reads at 100 µs.
    let config = small_config(Variant::Seq);
    let (mut sim, nodes, oracle) = build(3, &config, 4);
    let traces = Arc::new(Mutex::new(Vec::new()));
    for (i, node) in nodes.iter().enumerate() {
        let node = node.clone();
        let traces = traces.clone();
        sim.spawn_main(node.node, async move {
            let mut w = node.worker(0);
            match i {
                0 | 1 => {
                    let mut out = [0u64; 1];
                    node.read(&mut w, 1, 0, &mut out).await.unwrap();
                    assert_eq!(out, [0]);
                    if i == 0 {
                        w.nic.sleep(Nanos::from_us(100).saturating_sub(w.nic.now())).await;
                        let trace = node.read(&mut w, 1, 0, &mut out).await.unwrap();
                        assert_eq!(out, [0xabc], "the read sees the write");
                        traces.lock().unwrap().push(("read", trace));
                    }
                }
                _ => {
                    w.nic.sleep(Nanos::from_us(50)).await;
                    let trace = node.write(&mut w, 1, 0, &[0xabc]).await.unwrap();
                    traces.lock().unwrap().push(("write", trace));
                    // Right after the write is performed, both sharers have dropped their copies.
                }
            }
        });
    }
    assert_eq!(sim.run().stop, StopReason::Finished);
    let traces = traces.lock().unwrap().clone();
    let write = traces.iter().find(|(k, _)| *k == "write").unwrap().1;
    assert!(!write.hit && write.rpcs == 1 && write.invalidations == 2, "{write:?}");
    let read = traces.iter().find(|(k, _)| *k == "read").unwrap().1;
    assert!(!read.hit && read.rpcs == 1 && read.invalidations == 1, "{read:?}");
    assert_eq!(nodes[0].line_state(1), LineState::Shared);
    assert_eq!(nodes[1].line_state(1), LineState::Invalid, "invalidated and never re-read");
    assert_eq!(nodes[2].line_state(1), LineState::Shared, "the owner was downgraded");
    assert_eq!(nodes[1].stats().invalidations_received, 1);
    assert_eq!(nodes[2].stats().recalls_received, 1);
    assert!(oracle.violations().is_empty(), "{:?}", oracle.violations());
}

#[test]
fn gam_tso_write_returns_before_it_is_performed_and_forwards_to_its_own_reads() {
    // Goal: under TSO a write returns after the enqueue cost, its own thread reads it back from
    // the store buffer, another node sees it only once drained; SEQ's write waits a round trip.
    for variant in [Variant::Tso, Variant::Seq] {
        let config = small_config(variant);
        let (mut sim, nodes, oracle) = build(2, &config, 4);
        let writer = nodes[0].clone();
        let reader = nodes[1].clone();
        let times = Arc::new(Mutex::new(Vec::new()));
        let t = times.clone();
        sim.spawn_main(writer.node, async move {
            let mut w = writer.worker(0);
            let start = w.nic.now();
            writer.write(&mut w, 3, 16, &[7]).await.unwrap();
            t.lock().unwrap().push(w.nic.now().0 - start.0);
            let mut out = [0u64; 1];
            let trace = writer.read(&mut w, 3, 16, &mut out).await.unwrap();
            assert_eq!(out, [7], "a thread reads its own write");
            assert!(trace.hit);
            writer.finish(&w).await.unwrap();
        });
        sim.spawn_main(reader.node, async move {
            let mut w = reader.worker(0);
            w.nic.sleep(Nanos::from_us(40)).await;
            let mut out = [0u64; 1];
            reader.read(&mut w, 3, 16, &mut out).await.unwrap();
            assert_eq!(out, [7], "performed long before 40 µs");
        });
        assert_eq!(sim.run().stop, StopReason::Finished);
        let write_ns = times.lock().unwrap()[0];
        match variant {
            Variant::Tso => assert_eq!(write_ns, config.cpu.enqueue_ns, "TSO writes are buffered"),
            Variant::Seq => {
                assert!(write_ns > quiet_profile().latency_ns_send, "SEQ writes wait: {write_ns}")
            }
        }
        assert!(oracle.violations().is_empty(), "{:?}", oracle.violations());
        if variant == Variant::Tso {
            assert_eq!(nodes[0].stats().buffer_forwards, 1);
        }
    }
}
