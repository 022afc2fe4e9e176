//! A small canonical trace as an insta snapshot: any change to the engine's ordering, the
//! fabric's timing or the trace format shows up as a reviewable diff.
//! Update with `INSTA_UPDATE=always cargo test -p dmsim-sim --test trace_snapshot`.

use dmsim_protocols::nic::{Cluster, Nanos, Nic, NodeId, NodeKind, RemoteAddr, Verb};
use dmsim_sim::choice::Strategy;
use dmsim_sim::fabric::Profile;
use dmsim_sim::trace::TraceSink;
use dmsim_sim::{Sim, SimConfig, StopReason};

#[test]
fn two_clients_race_for_a_latch() {
    // Goal: a latch race as the trace shows it. n1 acquires with CAS+READ in one batch; n2's
    // CAS loses and it FAAs a counter; n1 releases with WRITE+FAA and messages n2.
    let cluster = Cluster {
        kinds: vec![NodeKind::Memory, NodeKind::Compute, NodeKind::Compute],
        region_size_bytes: vec![256, 128, 128],
    };
    let mut config = SimConfig::new(cluster, Profile::named("cx3_fdr56").unwrap(), 3);
    config.strategy = Strategy::Random { seed: 3 };
    config.trace = TraceSink::Memory(Vec::new());
    let mut sim = Sim::new(config);
    let mn = NodeId(0);
    let latch = RemoteAddr::new(mn, 0);
    let a = sim.nic(NodeId(1));
    let b = sim.nic(NodeId(2));
    sim.spawn_main(NodeId(1), async move {
        let r = a
            .batch(&[
                Verb::Cas { remote: latch, expect: 0, swap: 1 },
                Verb::Read { remote: latch.add(8), local_bytes: 0, len_bytes: 64 },
            ])
            .await
            .unwrap();
        a.mark("acquired", r.get(0));
        a.local().store(0, 42);
        a.batch(&[
            Verb::Write { remote: latch.add(8), local_bytes: 0, len_bytes: 8 },
            Verb::Faa { remote: latch, add: u64::MAX },
        ])
        .await
        .unwrap();
        a.send(NodeId(2), 1, vec![7]).await.unwrap();
    });
    sim.spawn_main(NodeId(2), async move {
        b.sleep(Nanos(100)).await;
        let old = b.cas(latch, 0, 2).await.unwrap();
        b.mark("cas_lost", old);
        b.faa(latch.add(128), 1).await.unwrap();
        let m = b.recv(1).await.unwrap();
        b.mark("woken_by", m.from.0 as u64);
    });
    let out = sim.run();
    assert_eq!(out.stop, StopReason::Finished);
    let text = format!("{}\ntrace-hash: {:016x}", out.trace_lines.join("\n"), out.trace_hash);
    insta::assert_snapshot!(text);
}
