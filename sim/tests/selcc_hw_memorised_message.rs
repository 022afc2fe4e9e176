//! The eviction-heavy SELCC hang on real verbs (hw/vm/scenarios/selcc-3node-evict.json): a
//! memorised invalidation stranded by the retry server.
//!
//! On hardware the victim node's tasks share one runtime worker thread that also polls the
//! completion queues, so a task may learn that its verbs completed long after they landed at the
//! target. The simulator delivers a completion to its task at once, so this window stayed
//! closed there. The interleaving (two compute nodes A and B, one GCL g):
//!
//! 1. B holds g Modified and a B thread is inside its critical section; A reads g (Case 2): B's
//!    handler finds the frame latched and memorises A's message;
//! 2. the B thread unlocks and hands the message to the retry server, which takes the frame's
//!    local latch and serves the downgrade: flush + FAA, then forward the copy to A;
//! 3. A sees the forwarded copy, finishes its read and writes g: its upgrade fails on B's reader
//!    bit, so it invalidates B (Case 3) — while B's retry server still waits for its forward's
//!    completion. B's handler finds the frame latched and memorises the message;
//! 4. the retry server unlocked without looking for a message memorised meanwhile, so nobody
//!    served it: A polled for a reply until B happened to touch or evict g, forever once B's
//!    threads wait on A (the hang: no rank output until the 240 s kill).
//!
//! Method: node B's NIC is wrapped so that batches on the retry server's channel complete late
//! (`SlowCompletions`), as on a busy hardware node. Every SELCC invariant is checked after every
//! event, including "a memorised message has a server" (L2, `check_memorised_messages`), which
//! names the stranding the moment it happens.

use std::future::Future;
use std::sync::Arc;

use dmsim_protocols::memory::Region;
use dmsim_protocols::nic::{BatchResult, Cluster, Message, Nanos, Nic, NicResult, NodeId, NodeKind, Verb};
use dmsim_protocols::selcc::check::{check_coherence, Oracle};
use dmsim_protocols::selcc::node::CHANNEL_RETRY;
use dmsim_protocols::selcc::stats::Stats;
use dmsim_protocols::selcc::{ops, setup_memory_node, Config, Layout, Node, NodeState};
use dmsim_sim::fabric::Profile;
use dmsim_sim::{Sim, SimConfig, StopReason};

/// A NIC whose batches on `slow_channel` report completion `delay` after the verbs completed
/// (the verbs themselves take effect on time): the completion sat in the CQ while the node's
/// only worker thread ran other tasks.
#[derive(Clone)]
struct SlowCompletions<N: Nic> {
    inner: N,
    slow_channel: u16,
    delay: Nanos,
}

impl<N: Nic> Nic for SlowCompletions<N> {
    fn node(&self) -> NodeId {
        self.inner.node()
    }
    fn cluster(&self) -> &Cluster {
        self.inner.cluster()
    }
    fn local(&self) -> &Region {
        self.inner.local()
    }
    fn qp(&self, channel: u16) -> Self {
        SlowCompletions { inner: self.inner.qp(channel), ..self.clone() }
    }
    fn channel(&self) -> u16 {
        self.inner.channel()
    }
    fn now(&self) -> Nanos {
        self.inner.now()
    }
    fn sleep(&self, duration: Nanos) -> impl Future<Output = ()> + Send {
        self.inner.sleep(duration)
    }
    fn cpu(&self, duration: Nanos) -> impl Future<Output = ()> + Send {
        self.inner.cpu(duration)
    }
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.inner.spawn(task)
    }
    fn batch(&self, verbs: &[Verb]) -> impl Future<Output = NicResult<BatchResult>> + Send {
        let slow = self.inner.channel() == self.slow_channel;
        let posted = self.inner.batch(verbs);
        let inner = self.inner.clone();
        let delay = self.delay;
        async move {
            let result = posted.await;
            if slow {
                inner.sleep(delay).await;
            }
            result
        }
    }
    fn send(&self, to: NodeId, port: u16, bytes: Vec<u8>) -> impl Future<Output = NicResult<()>> + Send {
        self.inner.send(to, port, bytes)
    }
    fn recv(&self, port: u16) -> impl Future<Output = NicResult<Message>> + Send {
        self.inner.recv(port)
    }
    fn mark(&self, label: &'static str, value: u64) {
        self.inner.mark(label, value)
    }
    fn post_unsignaled(&self, verbs: &[Verb]) -> NicResult<()> {
        self.inner.post_unsignaled(verbs)
    }
}

fn config() -> Config {
    Config { gcl_size_bytes: 256, cache_frames: 24, threads_per_node: 2, ..Config::selcc() }
}

/// Run the interleaving above with B's retry-server completions `delay` late.
fn run_case2_then_upgrade(delay: Nanos) -> (StopReason, Stats, Stats) {
    let config = config();
    let kinds = vec![NodeKind::Memory, NodeKind::Compute, NodeKind::Compute];
    let shape = Cluster { kinds: kinds.clone(), region_size_bytes: vec![0; 3] };
    let layout = Layout::new(&shape, &config, 4, 0);
    let cluster = Cluster { region_size_bytes: layout.region_sizes(&kinds), kinds };
    let mut profile = Profile::named("cx3_fdr56").expect("profile");
    profile.jitter_ns_max = 0;
    let mut sim_config = SimConfig::new(cluster.clone(), profile, 1);
    sim_config.time_ns_max = 50_000_000;
    let mut sim = Sim::new(sim_config);
    let (mn, cn_a, cn_b) = (NodeId(0), NodeId(1), NodeId(2));
    setup_memory_node(&layout, mn, &sim.region(mn));
    let oracle = Arc::new(Oracle::new(config.gcl_size_bytes));
    let a = Node::new(sim.nic(cn_a), config.clone(), layout.clone(), Some(oracle.clone()));
    let slow = SlowCompletions { inner: sim.nic(cn_b), slow_channel: CHANNEL_RETRY, delay };
    let b = Node::new(slow, config.clone(), layout.clone(), Some(oracle.clone()));
    for task in ops::daemons(&a) {
        sim.spawn_daemon(cn_a, task);
    }
    for task in ops::daemons(&b) {
        sim.spawn_daemon(cn_b, task);
    }
    let states: Vec<Arc<NodeState>> = vec![a.state.clone(), b.state.clone()];
    let memory = sim.region(mn);
    let check_layout = layout.clone();
    let check_oracle = oracle.clone();
    sim.set_checker(move |_now| {
        let views: Vec<&NodeState> = states.iter().map(|s| s.as_ref()).collect();
        let word = |g: dmsim_protocols::nic::RemoteAddr| memory.load(g.offset_bytes);
        check_coherence(&views, &check_layout, &word).map_err(|v| v.to_string())?;
        if let Some(v) = check_oracle.violations().first() {
            return Err(v.to_string());
        }
        Ok(())
    });
    let g = layout.gcl(0);
    // B: take g Modified and stay in the critical section for a while (step 1).
    let node_b = b.clone();
    sim.spawn_main(cn_b, async move {
        let mut w = node_b.worker(0);
        let mut h = node_b.xlock(&mut w, g).await.unwrap();
        node_b.write(&mut h, 0, &[7]);
        w.nic.sleep(Nanos::from_us(20)).await;
        node_b.xunlock(&mut w, h).await.unwrap();
    });
    // A: read g while B is inside (Case 2, memorised), then write it (Case 3 after the upgrade
    // fails on B's reader bit).
    let node_a = a.clone();
    sim.spawn_main(cn_a, async move {
        let mut w = node_a.worker(0);
        w.nic.sleep(Nanos::from_us(5)).await;
        let h = node_a.slock(&mut w, g).await.unwrap();
        let mut out = [0u64; 1];
        node_a.read(&h, 0, &mut out);
        assert_eq!(out[0], 7, "the forwarded copy carries B's write");
        node_a.sunlock(&mut w, h).await.unwrap();
        let mut h = node_a.xlock(&mut w, g).await.unwrap();
        node_a.write(&mut h, 0, &[8]);
        node_a.xunlock(&mut w, h).await.unwrap();
    });
    let outcome = sim.run();
    (outcome.stop, a.stats(), b.stats())
}

#[test]
fn a_message_memorised_while_the_retry_server_serves_is_not_stranded() {
    // 40 µs: far beyond A's read + upgrade CAS + fallback + CAS + SEND (a few µs on cx3), as a
    // busy hardware node easily is. Without the fix the L2 check fires when the retry server
    // unlocks (and A would wait for its reply forever).
    let (stop, a, b) = run_case2_then_upgrade(Nanos::from_us(40));
    assert_eq!(stop, StopReason::Finished, "the writer on A must get its reply");
    assert_eq!(a.ops, 2, "{a:?}");
    // The path of the hang: both of A's messages met a latched frame at B and were memorised,
    // the first served by a downgrade, the second (A's write) by a shared release. A's write
    // does not wait for B's answer (Case 3 keeps CASing), so the run may end before B's retry
    // server sees its release FAA complete and counts it: A's CAS succeeding is the proof.
    assert_eq!((b.messages_deferred, b.downgrades), (2, 1), "{b:?}");
    assert_eq!(a.writes, 1, "{a:?}");
}

#[test]
fn prompt_completions_take_the_same_path() {
    // Control: with completions on time (the simulator's usual model) the same program runs
    // through Case 2 then Case 3 without the window ever opening.
    let (stop, a, b) = run_case2_then_upgrade(Nanos(0));
    assert_eq!(stop, StopReason::Finished);
    assert_eq!(a.ops, 2, "{a:?}");
    // Only A's read met a latched frame; its write found B idle and was served at once.
    assert_eq!((b.messages_deferred, b.downgrades, b.shared_releases), (1, 1, 1), "{b:?}");
}
