//! The common RPC layer and the timeout/select helpers in the simulator: calls answered by a
//! multi-task server whose handlers charge the memory node's one modelled core, deferred replies
//! released by a notification, call timeouts in virtual time (with the late reply skipped by
//! request id), the message-size limit as an error value, and `timeout`/`select2` over NIC
//! futures (no message lost by the losing side).
//!
//! Method: one memory node (n0, 1 core) and two compute nodes; scripted main tasks record what
//! they saw and when into shared logs; assertions after the run.

use std::sync::{Arc, Mutex};

use dmsim_protocols::common::error::{ProtocolError, ProtocolResult, Target};
use dmsim_protocols::common::rpc::{self, Client, Handler, Incoming, ReplyTo, MAX_BODY_BYTES};
use dmsim_protocols::common::sync_ext::{select2, timeout, Either, Elapsed};
use dmsim_protocols::nic::{Cluster, Nanos, Nic, NicError, NodeId, NodeKind};
use dmsim_sim::choice::Strategy;
use dmsim_sim::fabric::Profile;
use dmsim_sim::{Sim, SimConfig, SimNic, StopReason};

const PORT: u16 = 30;
const REPLY_PORT: u16 = 31;
const MN: NodeId = NodeId(0);
const A: NodeId = NodeId(1);
const B: NodeId = NodeId(2);

fn sim() -> Sim {
    let mut profile = Profile::named("cx3_fdr56").unwrap();
    profile.jitter_ns_max = 0;
    let kinds = vec![NodeKind::Memory, NodeKind::Compute, NodeKind::Compute];
    let cluster = Cluster { kinds, region_size_bytes: vec![64; 3] };
    let mut config = SimConfig::new(cluster, profile, 1);
    config.strategy = Strategy::Default;
    config.cores[0] = Some(1);
    config.time_ns_max = 10_000_000;
    Sim::new(config)
}

/// Replies to body `[delay_us, x]` with `[x + 1]` after sleeping `delay_us`; each message costs
/// 1 µs of the memory node's CPU. Body `[255]` is "wait": its reply waits for a notification,
/// which releases every waiting request with `[0]`.
#[derive(Default)]
struct Server {
    waiting: Mutex<Vec<ReplyTo>>,
    failed: Mutex<Option<ProtocolError>>,
}

impl Handler<SimNic> for Server {
    type Msg = Vec<u8>;

    fn cost(&self, _msg: &Incoming<Vec<u8>>) -> Option<Nanos> {
        Some(Nanos::from_us(1))
    }

    async fn handle(&self, nic: &SimNic, incoming: Incoming<Vec<u8>>) -> ProtocolResult<()> {
        let Some(to) = incoming.reply_to else {
            let waiting = std::mem::take(&mut *self.waiting.lock().unwrap());
            for to in waiting {
                rpc::reply(nic, to, &vec![0u8]).await?;
            }
            return Ok(());
        };
        if incoming.msg[0] == 255 {
            self.waiting.lock().unwrap().push(to);
            return Ok(());
        }
        nic.sleep(Nanos::from_us(incoming.msg[0] as u64)).await;
        rpc::reply(nic, to, &vec![incoming.msg[1] + 1]).await
    }

    fn failed(&self, error: ProtocolError) {
        *self.failed.lock().unwrap() = Some(error);
    }
}

fn serve(sim: &mut Sim, tasks: u16) -> Arc<Server> {
    let server = Arc::new(Server::default());
    for task in rpc::serve(&sim.nic(MN), PORT, 0, tasks, server.clone()) {
        sim.spawn_daemon(MN, task);
    }
    server
}

type Log = Arc<Mutex<Vec<(NodeId, u64, String)>>>;

fn log(log: &Log, nic: &SimNic, what: String) {
    log.lock().unwrap().push((nic.node(), nic.now().0, what));
}

#[test]
fn calls_are_answered_by_handlers_that_queue_for_the_memory_node_core() {
    // Goal: every call gets its own reply; two handler tasks on one modelled core serve six
    // requests one after another (1 µs each), so the last reply comes after 6 µs; the run is
    // deterministic. Method: two clients, three calls each, run twice.
    let run = || {
        let mut sim = sim();
        let server = serve(&mut sim, 2);
        let out: Log = Default::default();
        for node in [A, B] {
            let (nic, out) = (sim.nic(node).qp(1), out.clone());
            sim.spawn_main(node, async move {
                let mut client = Client::new(nic.clone(), REPLY_PORT);
                for x in 0..3u8 {
                    let reply: Vec<u8> =
                        client.call(MN, PORT, &vec![0, 10 * node.0 as u8 + x]).await.unwrap();
                    log(&out, &nic, format!("{reply:?}"));
                }
            });
        }
        let outcome = sim.run();
        assert_eq!(outcome.stop, StopReason::Finished);
        assert!(server.failed.lock().unwrap().is_none());
        let out = out.lock().unwrap().clone();
        (out, outcome.trace_hash)
    };
    let (out, hash) = run();
    let replies =
        |n: NodeId| out.iter().filter(|(node, ..)| *node == n).map(|(_, _, r)| r.clone()).collect::<Vec<_>>();
    assert_eq!(replies(A), ["[11]", "[12]", "[13]"]);
    assert_eq!(replies(B), ["[21]", "[22]", "[23]"]);
    let last = out.iter().map(|(_, t, _)| *t).max().unwrap();
    assert!(last >= 6_000, "six 1 µs handlings on one core end after 6 µs, not at {last} ns");
    assert_eq!(run(), (out, hash), "same run, same replies, times and trace");
}

#[test]
fn a_deferred_reply_waits_for_the_notification_that_releases_it() {
    // Goal: a server may keep a request's ReplyTo and answer from another message's handler.
    let mut sim = sim();
    serve(&mut sim, 1);
    let out: Log = Default::default();
    let (nic, a_out) = (sim.nic(A).qp(1), out.clone());
    sim.spawn_main(A, async move {
        let mut client = Client::new(nic.clone(), REPLY_PORT);
        let reply: Vec<u8> = client.call(MN, PORT, &vec![255]).await.unwrap();
        log(&a_out, &nic, format!("released {reply:?}"));
    });
    let (nic, b_out) = (sim.nic(B).qp(1), out.clone());
    sim.spawn_main(B, async move {
        nic.sleep(Nanos::from_us(20)).await;
        log(&b_out, &nic, "notify".into());
        rpc::notify(&nic, MN, PORT, &vec![0u8]).await.unwrap();
    });
    assert_eq!(sim.run().stop, StopReason::Finished);
    let out = out.lock().unwrap().clone();
    assert_eq!(out[0].2, "notify");
    assert_eq!((out[1].0, out[1].2.as_str()), (A, "released [0]"));
    assert!(out[1].1 > out[0].1, "the reply comes after the notification");
}

#[test]
fn a_call_times_out_in_virtual_time_and_its_late_reply_is_skipped() {
    // Goal: `call_within` fails with a Timeout naming the node, CALL and the server's port at
    // exactly its deadline; the reply that comes later does not answer the next call.
    let mut sim = sim();
    serve(&mut sim, 1);
    let out: Log = Default::default();
    let (nic, a_out) = (sim.nic(A).qp(1), out.clone());
    sim.spawn_main(A, async move {
        let mut client = Client::new(nic.clone(), REPLY_PORT);
        let start = nic.now();
        let late: ProtocolResult<Vec<u8>> =
            client.call_within(MN, PORT, &vec![50, 1], Nanos::from_us(10)).await;
        let e = late.unwrap_err();
        assert_eq!((e.node, e.verb.as_str(), e.target), (A, "CALL", Target::Port { node: MN, port: PORT }));
        assert!(matches!(e.source, NicError::Timeout { after, .. } if after == Nanos::from_us(10)));
        assert_eq!(e.at, start + Nanos::from_us(10), "the timeout fires at the deadline");
        let reply: Vec<u8> = client.call(MN, PORT, &vec![0, 7]).await.unwrap();
        log(&a_out, &nic, format!("{reply:?} after {} stale", client.stale_replies()));
    });
    assert_eq!(sim.run().stop, StopReason::Finished);
    assert_eq!(out.lock().unwrap()[0].2, "[8] after 1 stale");
}

#[test]
fn an_oversize_message_is_a_send_error_naming_node_and_port() {
    // Goal: the layer respects MAX_MESSAGE_BYTES: the largest body goes through, one byte more
    // is an error value from the NIC (not a panic), naming who sent what where.
    let mut sim = sim();
    serve(&mut sim, 1);
    let nic = sim.nic(A).qp(1);
    sim.spawn_main(A, async move {
        let mut client = Client::new(nic.clone(), REPLY_PORT);
        let mut body = vec![0u8; MAX_BODY_BYTES];
        body[1] = 4;
        let reply: Vec<u8> = client.call(MN, PORT, &body).await.unwrap();
        assert_eq!(reply, [5]);
        body.push(0);
        let e = client.call::<_, Vec<u8>>(MN, PORT, &body).await.unwrap_err();
        assert_eq!((e.node, e.verb.as_str(), e.target), (A, "SEND", Target::Port { node: MN, port: PORT }));
        assert!(matches!(e.source, NicError::QpError { .. }), "{e}");
    });
    assert_eq!(sim.run().stop, StopReason::Finished);
}

#[test]
fn timeout_and_select2_use_virtual_time_and_lose_no_message() {
    // Goal: `timeout` returns the output when the future wins and `Elapsed` exactly at the
    // bound otherwise; `select2` over two receives takes the first message, and the other port's
    // message is still there for the next receive.
    let mut sim = sim();
    let out: Log = Default::default();
    let (nic, a_out) = (sim.nic(A), out.clone());
    sim.spawn_main(A, async move {
        let t0 = nic.now();
        assert_eq!(timeout(&nic, Nanos::from_us(5), nic.sleep(Nanos::from_us(1))).await, Ok(()));
        assert_eq!(nic.now(), t0 + Nanos::from_us(1));
        let t1 = nic.now();
        let slow = timeout(&nic, Nanos::from_us(5), nic.sleep(Nanos::from_us(10))).await;
        assert_eq!(slow, Err(Elapsed { after: Nanos::from_us(5) }));
        assert_eq!(nic.now(), t1 + Nanos::from_us(5));
        let first = match select2(nic.recv(40), nic.recv(41)).await {
            Either::Left(m) => format!("left {:?}", m.unwrap().bytes),
            Either::Right(m) => format!("right {:?}", m.unwrap().bytes),
        };
        log(&a_out, &nic, first);
        let second = nic.recv(40).await.unwrap();
        log(&a_out, &nic, format!("then {:?}", second.bytes));
    });
    let nic = sim.nic(B);
    sim.spawn_main(B, async move {
        nic.sleep(Nanos::from_us(20)).await;
        nic.send(A, 41, vec![2]).await.unwrap();
        nic.sleep(Nanos::from_us(5)).await;
        nic.send(A, 40, vec![1]).await.unwrap();
    });
    assert_eq!(sim.run().stop, StopReason::Finished);
    let out: Vec<String> = out.lock().unwrap().iter().map(|(_, _, s)| s.clone()).collect();
    assert_eq!(out, ["right [2]", "then [1]"]);
}
