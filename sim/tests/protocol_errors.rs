//! A NIC error inside a protocol reaches the caller as a value naming node, verb and address,
//! never a panic: SELCC's lock path and invalidation handler, GAM's client call and home
//! handler. The error comes from a NIC wrapper that fails one chosen verb or message the way a
//! QP error or a departed peer does on hardware (the simulator itself only reports errors the
//! protocol provokes: bad addresses, overflowing QPs, oversize messages).
//!
//! Method: tiny clusters built by hand (the protocol's nodes run on [`FaultyNic`]); scripted
//! main tasks; assertions on the returned errors and on each node's `first_error` slot.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use dmsim_protocols::common::error::{ProtocolError, Target};
use dmsim_protocols::gam;
use dmsim_protocols::memory::Region;
use dmsim_protocols::nic::{
    BatchResult, Cluster, Message, Nanos, Nic, NicError, NicResult, NodeId, NodeKind, Verb,
};
use dmsim_protocols::selcc::{self, setup_memory_node, Layout};
use dmsim_sim::choice::Strategy;
use dmsim_sim::fabric::Profile;
use dmsim_sim::{Sim, SimConfig, SimNic, StopReason};

/// Which operation fails: the `nth` (1-based) batch containing verb `verb`, or SEND to `port`.
struct Fault {
    verb: Option<&'static str>,
    port: Option<u16>,
    nth: u32,
    seen: AtomicU32,
    error: NicError,
}

impl Fault {
    fn verb(verb: &'static str, nth: u32, error: NicError) -> Arc<Fault> {
        Arc::new(Fault { verb: Some(verb), port: None, nth, seen: AtomicU32::new(0), error })
    }
    fn send(port: u16, error: NicError) -> Arc<Fault> {
        Arc::new(Fault { verb: None, port: Some(port), nth: 1, seen: AtomicU32::new(0), error })
    }
    /// Counts a matching operation; the error if it is the chosen one.
    fn hit(&self, matches: bool) -> Option<NicError> {
        (matches && self.seen.fetch_add(1, Ordering::Relaxed) + 1 == self.nth).then(|| self.error.clone())
    }
}

/// A [`SimNic`] that fails the operation its [`Fault`] names; everything else passes through.
#[derive(Clone)]
struct FaultyNic {
    inner: SimNic,
    fault: Arc<Fault>,
}

impl Nic for FaultyNic {
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
        FaultyNic { inner: self.inner.qp(channel), fault: self.fault.clone() }
    }
    fn channel(&self) -> u16 {
        self.inner.channel()
    }
    fn now(&self) -> Nanos {
        self.inner.now()
    }
    fn sleep(&self, duration: Nanos) -> impl std::future::Future<Output = ()> + Send {
        self.inner.sleep(duration)
    }
    fn cpu(&self, duration: Nanos) -> impl std::future::Future<Output = ()> + Send {
        self.inner.cpu(duration)
    }
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.inner.spawn(task)
    }
    fn batch(&self, verbs: &[Verb]) -> impl std::future::Future<Output = NicResult<BatchResult>> + Send {
        let injected = self.fault.hit(verbs.iter().any(|v| Some(v.name()) == self.fault.verb));
        let inner = self.inner.batch(verbs);
        async move {
            match injected {
                Some(e) => Err(e),
                None => inner.await,
            }
        }
    }
    fn send(
        &self,
        to: NodeId,
        port: u16,
        bytes: Vec<u8>,
    ) -> impl std::future::Future<Output = NicResult<()>> + Send {
        let injected = self.fault.hit(Some(port) == self.fault.port);
        let inner = self.inner.send(to, port, bytes);
        async move {
            match injected {
                Some(e) => Err(e),
                None => inner.await,
            }
        }
    }
    fn recv(&self, port: u16) -> impl std::future::Future<Output = NicResult<Message>> + Send {
        self.inner.recv(port)
    }
    fn mark(&self, label: &'static str, value: u64) {
        self.inner.mark(label, value)
    }
    fn post_unsignaled(&self, verbs: &[dmsim_protocols::nic::Verb]) -> dmsim_protocols::nic::NicResult<()> {
        self.inner.post_unsignaled(verbs)
    }
}

fn sim(cluster: Cluster, time_ns_max: u64) -> Sim {
    let mut profile = Profile::named("cx3_fdr56").unwrap();
    profile.jitter_ns_max = 0;
    let mut config = SimConfig::new(cluster, profile, 1);
    config.strategy = Strategy::Default;
    config.time_ns_max = time_ns_max;
    Sim::new(config)
}

/// One SELCC memory node (n0) and `compute` compute nodes; node `i`'s NIC fails `faults[i]`.
fn selcc_cluster(compute: usize, faults: Vec<Arc<Fault>>) -> (Sim, Layout, Vec<Arc<selcc::Node<FaultyNic>>>) {
    let config = selcc::Config {
        gcl_size_bytes: 256,
        cache_frames: 64,
        threads_per_node: 2,
        ..selcc::Config::selcc()
    };
    let mut kinds = vec![NodeKind::Memory];
    kinds.extend(std::iter::repeat_n(NodeKind::Compute, compute));
    let shape = Cluster { kinds: kinds.clone(), region_size_bytes: vec![0; kinds.len()] };
    let layout = Layout::new(&shape, &config, 4, 4);
    let cluster = Cluster { region_size_bytes: layout.region_sizes(&kinds), kinds };
    let mut sim = sim(cluster.clone(), 50_000_000);
    setup_memory_node(&layout, NodeId(0), &sim.region(NodeId(0)));
    let nodes = cluster
        .compute_nodes()
        .into_iter()
        .zip(faults)
        .map(|(cn, fault)| {
            let nic = FaultyNic { inner: sim.nic(cn), fault };
            let node = selcc::Node::new(nic, config.clone(), layout.clone(), None);
            for task in selcc::ops::daemons(&node) {
                sim.spawn_daemon(cn, task);
            }
            node
        })
        .collect();
    (sim, layout, nodes)
}

fn no_fault() -> Arc<Fault> {
    Fault::verb("none", 1, NicError::PeerGone { node: NodeId(0) })
}

type Seen = Arc<Mutex<Vec<Result<(), ProtocolError>>>>;

#[test]
fn selcc_lock_returns_a_departed_memory_node_as_an_error_value() {
    // Goal: the acquire's CAS+READ failing (the memory node is gone) makes xlock return an
    // error naming the compute node, the batch, the GCL's latch word and the step; the node
    // keeps it, gives back the frame it took, and fails the next operation at once.
    let gone = NicError::PeerGone { node: NodeId(0) };
    let (mut sim, layout, nodes) = selcc_cluster(1, vec![Fault::verb("CAS", 1, gone.clone())]);
    let (node, seen): (_, Seen) = (nodes[0].clone(), Default::default());
    let out = seen.clone();
    sim.spawn_main(NodeId(1), async move {
        let mut w = node.worker(0);
        let g = node.layout.gcl(0);
        let r = node.xlock(&mut w, g).await.map(|_| ());
        out.lock().unwrap().push(r);
        let r = node.slock(&mut w, node.layout.gcl(1)).await.map(|_| ());
        out.lock().unwrap().push(r);
        assert_eq!(
            node.cache.frames.iter().map(|f| f.latch.snapshot()).filter(|s| *s != (0, false, 0)).count(),
            0
        );
    });
    assert_eq!(sim.run().stop, StopReason::Finished, "no panic, no hang");
    let seen = seen.lock().unwrap();
    let e = seen[0].clone().unwrap_err();
    assert_eq!(e.node, NodeId(1));
    assert_eq!(e.verb, "CAS+READ");
    assert_eq!(e.target, Target::Memory(Layout::latch(layout.gcl(0))));
    assert_eq!((e.during, &e.source), ("acquire exclusive", &gone));
    assert_eq!(
        e.to_string(),
        format!(
            "n1: CAS+READ {} failed during acquire exclusive at {}: peer n0 is gone",
            Layout::latch(layout.gcl(0)),
            e.at
        )
    );
    assert_eq!(nodes[0].first_error(), Some(e.clone()));
    assert_eq!(seen[1], Err(e), "a failed node fails its next operation with the first error");
}

#[test]
fn selcc_handler_records_a_failed_handover_and_stops_without_panicking() {
    // Goal: an invalidation handler whose verb fails (a QP error on the handover FAA) records
    // the error on its node and stops; the requester still gets the forwarded copy; the node's
    // next operation fails with the recorded error.
    let qp_error = NicError::QpError { qp: "1>0.1000".into(), detail: "injected".into() };
    let faults = vec![Fault::verb("FAA", 1, qp_error.clone()), no_fault()];
    let (mut sim, layout, nodes) = selcc_cluster(2, faults);
    let seen: Seen = Default::default();
    let (a, out) = (nodes[0].clone(), seen.clone());
    sim.spawn_main(NodeId(1), async move {
        let mut w = a.worker(0);
        let g = a.layout.gcl(0);
        let mut h = a.xlock(&mut w, g).await.unwrap();
        a.write(&mut h, 0, &[11]);
        a.xunlock(&mut w, h).await.unwrap();
        w.nic.sleep(Nanos::from_us(100)).await;
        let r = a.slock(&mut w, g).await.map(|_| ());
        out.lock().unwrap().push(r);
    });
    let (b, out) = (nodes[1].clone(), seen.clone());
    sim.spawn_main(NodeId(2), async move {
        let mut w = b.worker(0);
        w.nic.sleep(Nanos::from_us(50)).await;
        let mut h = b.xlock(&mut w, b.layout.gcl(0)).await.unwrap();
        let mut word = [0];
        b.read(&h, 0, &mut word);
        assert_eq!(word, [11], "the forward landed before the handover failed");
        b.write(&mut h, 0, &[22]);
        let r = b.xunlock(&mut w, h).await;
        out.lock().unwrap().push(r);
    });
    assert_eq!(sim.run().stop, StopReason::Finished);
    let e = nodes[0].first_error().expect("the handler recorded its error");
    assert_eq!((e.node, e.verb.as_str(), e.during), (NodeId(1), "FAA", "handover"));
    assert_eq!((e.target, &e.source), (Target::Memory(Layout::latch(layout.gcl(0))), &qp_error));
    assert_eq!(nodes[1].first_error(), None);
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0], Ok(()), "B's write");
    assert_eq!(seen[1], Err(e), "A fails with its handler's error");
}

/// One GAM memory node (n0, home) and one compute node; the NICs fail `home_fault` and
/// `client_fault`.
fn gam_cluster(
    home_fault: Arc<Fault>,
    client_fault: Arc<Fault>,
    time_ns_max: u64,
) -> (Sim, Arc<Mutex<gam::directory::Directory>>, Arc<gam::Node<FaultyNic>>) {
    let config =
        gam::Config { gcl_size_bytes: 64, cache_frames: 16, threads_per_node: 1, ..gam::Config::seq() };
    let kinds = vec![NodeKind::Memory, NodeKind::Compute];
    let shape = Cluster { kinds: kinds.clone(), region_size_bytes: vec![0; 2] };
    let layout = gam::Layout::new(&shape, config.gcl_size_bytes, 8, config.cache_frames);
    let mut sim = sim(Cluster { region_size_bytes: layout.region_sizes(&kinds), kinds }, time_ns_max);
    let home =
        gam::bench::home_tasks(FaultyNic { inner: sim.nic(NodeId(0)), fault: home_fault }, &config, &layout);
    for t in home.daemons {
        sim.spawn_daemon(NodeId(0), t);
    }
    let node =
        gam::Node::new(FaultyNic { inner: sim.nic(NodeId(1)), fault: client_fault }, config, layout, None);
    for t in node.daemons() {
        sim.spawn_daemon(NodeId(1), t);
    }
    (sim, home.directory, node)
}

#[test]
fn gam_read_returns_a_failed_request_send_as_an_error_value() {
    // Goal: the request SEND to the home failing makes `read` return an error naming the
    // compute node, SEND and the home's port; the node keeps it.
    let gone = NicError::PeerGone { node: NodeId(0) };
    let (mut sim, _, node) =
        gam_cluster(no_fault(), Fault::send(gam::message::HOME_PORT, gone.clone()), 10_000_000);
    let (n, seen): (_, Seen) = (node.clone(), Default::default());
    let out = seen.clone();
    sim.spawn_main(NodeId(1), async move {
        let mut w = n.worker(0);
        let mut word = [0];
        let r = n.read(&mut w, 3, 0, &mut word).await.map(|_| ());
        out.lock().unwrap().push(r);
    });
    assert_eq!(sim.run().stop, StopReason::Finished);
    let e = seen.lock().unwrap()[0].clone().unwrap_err();
    assert_eq!((e.node, e.verb.as_str(), e.during), (NodeId(1), "SEND", "rpc call"));
    assert_eq!(
        (e.target, &e.source),
        (Target::Port { node: NodeId(0), port: gam::message::HOME_PORT }, &gone)
    );
    assert_eq!(node.first_error(), Some(e));
}

#[test]
fn gam_home_records_a_failed_reply_and_stops_without_panicking() {
    // Goal: the home handler's reply SEND failing is recorded on the directory (naming the
    // memory node, SEND, the requester's reply port) and ends that handler task; nothing
    // panics. The client, which has no timeout, waits for ever: the run stalls.
    let reply_port = gam::message::REPLY_PORT_BASE;
    let gone = NicError::PeerGone { node: NodeId(1) };
    let (mut sim, directory, node) =
        gam_cluster(Fault::send(reply_port, gone.clone()), no_fault(), 1_000_000);
    sim.spawn_main(NodeId(1), async move {
        let mut w = node.worker(0);
        let mut word = [0];
        let _ = node.read(&mut w, 2, 0, &mut word).await;
    });
    assert_eq!(sim.run().stop, StopReason::Stalled { main_tasks_alive: 1 });
    let e = directory.lock().unwrap().first_error().expect("the home recorded its error");
    assert_eq!((e.node, e.verb.as_str(), e.during), (NodeId(0), "SEND", "rpc reply"));
    assert_eq!((e.target, &e.source), (Target::Port { node: NodeId(1), port: reply_port }, &gone));
}
