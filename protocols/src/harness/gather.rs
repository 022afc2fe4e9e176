//! The end of a run, over the NIC itself: every node's report reaches node 0.
//!
//! Once a node's clients are done it sends DONE to node 0. When all have, node 0 measures each
//! node's clock against its own (ping-pongs, [`Clock`]), sends GO, and every node sends its
//! [`NodeReport`] in chunks (a report with an operation log is far larger than one message).
//! Collecting only after GO matters: a memory node's end-of-run checks must see the compute
//! nodes' final flushes. `dmsim hw run` runs this between processes; the simulator's `run_in_sim`
//! runs the very same code between simulated nodes, so the exchange is tested without hardware
//! (with the same [`MAX_MESSAGE_BYTES`] limit).
//!
//! Every wait here probes the peers it waits for, so a dead node ends the others with an error.

use super::history::Clock;
use super::plan::NodeReport;
use crate::nic::{Message, Nanos, Nic, NodeId, MAX_MESSAGE_BYTES};

/// Port the reports travel on (above any protocol's ports).
const REPORT_PORT: u16 = u16::MAX - 1;
const DONE_PORT: u16 = u16::MAX - 2;
const GO_PORT: u16 = u16::MAX - 3;
const CLOCK_PORT: u16 = u16::MAX - 4;
const CLOCK_REPLY_PORT: u16 = u16::MAX - 5;
/// Liveness probes (empty messages nobody reads: only their delivery matters).
const PROBE_PORT: u16 = u16::MAX - 6;
/// How long a gather step waits before probing the peers it waits for.
const PROBE_EVERY: Nanos = Nanos(2_000_000_000);
/// Ping-pongs per rank for the clock offset; the fastest bounds the error best.
const CLOCK_ROUNDS: usize = 16;
/// Bytes per report message: a report with a history is far larger than one message.
const CHUNK_BYTES: usize = MAX_MESSAGE_BYTES;

/// What node 0 ends with: the slowest node's elapsed time, every node's report (by node), and
/// every node's clock relative to node 0's. Other nodes get their own elapsed time and nothing.
pub struct Gathered {
    pub elapsed: Nanos,
    pub reports: Vec<NodeReport>,
    pub clocks: Vec<Clock>,
}

/// This node's part of the exchange, among `size` nodes; `elapsed` is how long its clients ran.
pub async fn gather<N: Nic>(
    nic: &N,
    size: usize,
    elapsed: Nanos,
    collect: Box<dyn FnOnce() -> NodeReport + Send>,
) -> Result<Gathered, String> {
    // Collect only once every node's clients are done (a memory node's end-of-run checks
    // must see the compute nodes' final flushes): DONE to rank 0, clock pings from rank 0,
    // then GO to everyone.
    let zero = NodeId(0);
    let err = |e: crate::nic::NicError| e.to_string();
    if nic.node() != zero {
        nic.send(zero, DONE_PORT, Vec::new()).await.map_err(err)?;
        for _ in 0..CLOCK_ROUNDS {
            recv_watching(nic, CLOCK_PORT, &[zero]).await?;
            nic.send(zero, CLOCK_REPLY_PORT, nic.now().0.to_le_bytes().to_vec()).await.map_err(err)?;
        }
        recv_watching(nic, GO_PORT, &[zero]).await?;
        let mine = collect();
        let bytes = serde_json::to_vec(&(elapsed.0, &mine)).expect("report serializes");
        nic.send(zero, REPORT_PORT, (bytes.len() as u64).to_le_bytes().to_vec()).await.map_err(err)?;
        for chunk in bytes.chunks(CHUNK_BYTES) {
            nic.send(zero, REPORT_PORT, chunk.to_vec()).await.map_err(err)?;
        }
        return Ok(Gathered { elapsed, reports: Vec::new(), clocks: Vec::new() });
    }
    let peers: Vec<NodeId> = (1..size).map(|r| NodeId(r as u16)).collect();
    for _ in 1..size {
        recv_watching(nic, DONE_PORT, &peers).await?;
    }
    let mut clocks = vec![Clock::default(); size];
    for (r, clock) in clocks.iter_mut().enumerate().skip(1) {
        *clock = measure_clock(nic, NodeId(r as u16)).await?;
    }
    for r in 1..size {
        nic.send(NodeId(r as u16), GO_PORT, Vec::new()).await.map_err(err)?;
    }
    let mut reports = vec![NodeReport::default(); size];
    let mut slowest = elapsed;
    reports[0] = collect();
    // Per sender: (announced length, bytes so far); one sender's messages arrive in order.
    let mut incoming: Vec<(Option<usize>, Vec<u8>)> = vec![(None, Vec::new()); size];
    let mut complete = 1;
    while complete < size {
        let m = recv_watching(nic, REPORT_PORT, &peers).await?;
        let (len, buf) = &mut incoming[m.from.index()];
        match len {
            None => {
                let header: [u8; 8] =
                    m.bytes.as_slice().try_into().map_err(|_| format!("report header from {}", m.from))?;
                *len = Some(u64::from_le_bytes(header) as usize);
            }
            Some(_) => buf.extend_from_slice(&m.bytes),
        }
        if *len != Some(buf.len()) {
            continue;
        }
        complete += 1;
        let (ns, report): (u64, NodeReport) =
            serde_json::from_slice(buf).map_err(|e| format!("report from {}: {e}", m.from))?;
        slowest = slowest.max(Nanos(ns));
        reports[m.from.index()] = report;
    }
    Ok(Gathered { elapsed: slowest, reports, clocks })
}

/// `nic.recv(port)`, but every [`PROBE_EVERY`] without a message it sends a probe to each of
/// `peers`: a peer that died (its process exited or was killed) makes the probe fail with
/// `PeerGone` from the transport, and the wait ends with that error instead of lasting forever.
async fn recv_watching<N: Nic>(nic: &N, port: u16, peers: &[NodeId]) -> Result<Message, String> {
    use std::future::Future;
    use std::task::Poll;
    loop {
        let mut recv = std::pin::pin!(nic.recv(port));
        let mut sleep = std::pin::pin!(nic.sleep(PROBE_EVERY));
        let first = std::future::poll_fn(|cx| {
            if let Poll::Ready(m) = recv.as_mut().poll(cx) {
                return Poll::Ready(Some(m));
            }
            sleep.as_mut().poll(cx).map(|()| None)
        })
        .await;
        match first {
            Some(m) => return m.map_err(|e| e.to_string()),
            None => {
                for &peer in peers {
                    nic.send(peer, PROBE_PORT, Vec::new())
                        .await
                        .map_err(|e| format!("waiting on port {port} for {peer}: {e}"))?;
                }
            }
        }
    }
}

/// Rank `peer`'s clock relative to ours: `CLOCK_ROUNDS` ping-pongs; the fastest gives the
/// offset (its reply was read somewhere inside that round trip) and ± half of it.
async fn measure_clock<N: Nic>(nic: &N, peer: NodeId) -> Result<Clock, String> {
    let mut best: Option<(u64, Clock)> = None;
    for _ in 0..CLOCK_ROUNDS {
        let t0 = nic.now().0;
        nic.send(peer, CLOCK_PORT, Vec::new()).await.map_err(|e| e.to_string())?;
        let reply = recv_watching(nic, CLOCK_REPLY_PORT, &[peer]).await?;
        let t1 = nic.now().0;
        let theirs: [u8; 8] =
            reply.bytes.as_slice().try_into().map_err(|_| format!("clock reply from {}", reply.from))?;
        let theirs = u64::from_le_bytes(theirs);
        let rtt = t1.saturating_sub(t0);
        let mid = t0 as i128 + rtt as i128 / 2;
        let clock = Clock { offset_ns: (theirs as i128 - mid) as i64, uncertainty_ns: rtt.div_ceil(2) + 1 };
        if best.is_none_or(|(r, _)| rtt < r) {
            best = Some((rtt, clock));
        }
    }
    Ok(best.expect("CLOCK_ROUNDS > 0").1)
}
