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
//! Node 0 trusts no peer's message shape: each node sends DONE once and completes its report
//! exactly once, a report's announced length is capped and its chunks (never empty) must add
//! up to exactly that length ([`Collector`]), and collecting after GO has one deadline
//! ([`REPORT_TIMEOUT`]).

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
/// Largest report node 0 accepts (a checked run's operation log is tens of MiB).
pub const MAX_REPORT_BYTES: u64 = 1 << 30;
/// From GO until every report is complete (clock pings included): the reports are already
/// built, so only their transfer is left.
pub const REPORT_TIMEOUT: Nanos = Nanos(600_000_000_000);

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
            recv_watching(nic, CLOCK_PORT, &[zero], None).await?;
            nic.send(zero, CLOCK_REPLY_PORT, nic.now().0.to_le_bytes().to_vec()).await.map_err(err)?;
        }
        recv_watching(nic, GO_PORT, &[zero], None).await?;
        let mut mine = collect();
        mine.materialize();
        let bytes = serde_json::to_vec(&(elapsed.0, &mine)).expect("report serializes");
        nic.send(zero, REPORT_PORT, (bytes.len() as u64).to_le_bytes().to_vec()).await.map_err(err)?;
        for chunk in bytes.chunks(CHUNK_BYTES) {
            nic.send(zero, REPORT_PORT, chunk.to_vec()).await.map_err(err)?;
        }
        return Ok(Gathered { elapsed, reports: Vec::new(), clocks: Vec::new() });
    }
    let peers: Vec<NodeId> = (1..size).map(|r| NodeId(r as u16)).collect();
    let mut done = vec![false; size];
    for _ in 1..size {
        let m = recv_watching(nic, DONE_PORT, &peers, None).await?;
        match done.get_mut(m.from.index()) {
            Some(d) if m.from != zero && !*d => *d = true,
            _ => {
                return Err(format!(
                    "DONE from {}, which is not a peer still running (or sent it twice)",
                    m.from
                ))
            }
        }
    }
    let deadline = Some(nic.now() + REPORT_TIMEOUT);
    let mut clocks = vec![Clock::default(); size];
    for (r, clock) in clocks.iter_mut().enumerate().skip(1) {
        *clock = measure_clock(nic, NodeId(r as u16), deadline).await?;
    }
    for r in 1..size {
        nic.send(NodeId(r as u16), GO_PORT, Vec::new()).await.map_err(err)?;
    }
    let mut reports = vec![NodeReport::default(); size];
    let mut slowest = elapsed;
    reports[0] = collect();
    reports[0].materialize();
    let mut collector = Collector::new(size);
    while !collector.all_complete() {
        let m = recv_watching(nic, REPORT_PORT, &peers, deadline)
            .await
            .map_err(|e| format!("reports of nodes {} incomplete: {e}", collector.missing().join(",")))?;
        let from = m.from;
        let Some(bytes) = collector.take(from, m.bytes)? else { continue };
        let (ns, report): (u64, NodeReport) =
            serde_json::from_slice(&bytes).map_err(|e| format!("report from {from}: {e}"))?;
        slowest = slowest.max(Nanos(ns));
        // The clock is rank 0's measurement, not anything the peer says about itself.
        reports[from.index()] = NodeReport { clock: clocks[from.index()], ..report };
    }
    Ok(Gathered { elapsed: slowest, reports, clocks })
}

/// Node 0's assembly of the peers' reports from REPORT messages: per peer an 8-byte header
/// announcing the length (at most [`MAX_REPORT_BYTES`], not 0), then non-empty chunks adding
/// up to exactly that length; anything else is an error naming the peer.
pub struct Collector {
    /// Per node: the announced length, the bytes so far, whether complete (node 0: complete).
    nodes: Vec<(Option<usize>, Vec<u8>, bool)>,
}

impl Collector {
    pub fn new(size: usize) -> Collector {
        let mut nodes = vec![(None, Vec::new(), false); size];
        if let Some(zero) = nodes.first_mut() {
            zero.2 = true;
        }
        Collector { nodes }
    }

    pub fn all_complete(&self) -> bool {
        self.nodes.iter().all(|n| n.2)
    }

    /// The nodes whose report is not complete yet.
    pub fn missing(&self) -> Vec<String> {
        self.nodes.iter().enumerate().filter(|(_, n)| !n.2).map(|(r, _)| r.to_string()).collect()
    }

    /// Takes one message from `from`; returns its report's bytes once complete.
    pub fn take(&mut self, from: NodeId, bytes: Vec<u8>) -> Result<Option<Vec<u8>>, String> {
        let Some((len, buf, complete)) = self.nodes.get_mut(from.index()).filter(|_| from.index() != 0)
        else {
            return Err(format!("report message from {from}, which is not a peer of node 0"));
        };
        if *complete {
            return Err(format!("{from} sent report data after its report was complete"));
        }
        let Some(want) = *len else {
            let header: [u8; 8] = bytes
                .as_slice()
                .try_into()
                .map_err(|_| format!("report header from {from} has {} bytes, not 8", bytes.len()))?;
            let want = u64::from_le_bytes(header);
            if want == 0 || want > MAX_REPORT_BYTES {
                return Err(format!(
                    "{from} announced a report of {want} bytes (allowed: 1..={MAX_REPORT_BYTES})"
                ));
            }
            *len = Some(want as usize);
            return Ok(None);
        };
        if bytes.is_empty() || bytes.len() > CHUNK_BYTES {
            return Err(format!(
                "{from} sent a report chunk of {} bytes (allowed: 1..={CHUNK_BYTES})",
                bytes.len()
            ));
        }
        if buf.len() + bytes.len() > want {
            return Err(format!(
                "{from} sent more report bytes than the {want} it announced ({} after this chunk)",
                buf.len() + bytes.len()
            ));
        }
        buf.extend_from_slice(&bytes);
        if buf.len() < want {
            return Ok(None);
        }
        *complete = true;
        Ok(Some(std::mem::take(buf)))
    }
}

/// `nic.recv(port)`, but every [`PROBE_EVERY`] without a message it sends a probe to each of
/// `peers`: a peer that died (its process exited or was killed) makes the probe fail with
/// `PeerGone` from the transport, and the wait ends with that error instead of lasting forever.
/// A peer alive but silent ends it at `deadline`, if one is given.
async fn recv_watching<N: Nic>(
    nic: &N,
    port: u16,
    peers: &[NodeId],
    deadline: Option<Nanos>,
) -> Result<Message, String> {
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
                if deadline.is_some_and(|d| nic.now() >= d) {
                    return Err(format!(
                        "no message on port {port} within {} s",
                        REPORT_TIMEOUT.0 / 1_000_000_000
                    ));
                }
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
async fn measure_clock<N: Nic>(nic: &N, peer: NodeId, deadline: Option<Nanos>) -> Result<Clock, String> {
    let mut best: Option<(u64, Clock)> = None;
    for _ in 0..CLOCK_ROUNDS {
        let t0 = nic.now().0;
        nic.send(peer, CLOCK_PORT, Vec::new()).await.map_err(|e| e.to_string())?;
        let reply = recv_watching(nic, CLOCK_REPLY_PORT, &[peer], deadline).await?;
        if reply.from != peer {
            return Err(format!("clock reply from {} while node 0 timed {peer}", reply.from));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn header(len: u64) -> Vec<u8> {
        len.to_le_bytes().to_vec()
    }

    #[test]
    fn a_report_completes_once_from_its_announced_chunks() {
        let mut c = Collector::new(3);
        assert_eq!(c.missing(), vec!["1", "2"]);
        assert_eq!(c.take(NodeId(2), header(5)), Ok(None));
        assert_eq!(c.take(NodeId(2), b"ab".to_vec()), Ok(None));
        assert_eq!(c.take(NodeId(2), b"cde".to_vec()), Ok(Some(b"abcde".to_vec())));
        assert!(!c.all_complete());
        assert_eq!(c.take(NodeId(1), header(1)), Ok(None));
        assert_eq!(c.take(NodeId(1), b"x".to_vec()), Ok(Some(b"x".to_vec())));
        assert!(c.all_complete());
    }

    #[test]
    fn duplicate_empty_extra_and_oversized_reports_are_refused() {
        // Goal (issue 19): an empty REPORT after a complete one used to count the node twice,
        // and a peer sending more than announced grew the buffer without bound.
        let mut c = Collector::new(3);
        c.take(NodeId(1), header(2)).unwrap();
        let e = c.take(NodeId(1), Vec::new()).unwrap_err();
        assert!(e.contains("n1") && e.contains("chunk of 0 bytes"), "{e}");
        let e = c.take(NodeId(1), b"abc".to_vec()).unwrap_err();
        assert!(e.contains("more report bytes than the 2 it announced"), "{e}");
        assert_eq!(c.take(NodeId(1), b"ab".to_vec()), Ok(Some(b"ab".to_vec())));
        for again in [Vec::new(), header(2), b"x".to_vec()] {
            let e = c.take(NodeId(1), again).unwrap_err();
            assert!(e.contains("after its report was complete"), "{e}");
        }
        assert!(!c.all_complete(), "node 2 has sent nothing: it must not count as complete");
        let e = c.take(NodeId(2), header(MAX_REPORT_BYTES + 1)).unwrap_err();
        assert!(e.contains("announced a report of 1073741825 bytes"), "{e}");
        assert!(c.take(NodeId(2), header(0)).unwrap_err().contains("announced a report of 0 bytes"));
        assert!(c.take(NodeId(2), b"short".to_vec()).unwrap_err().contains("has 5 bytes, not 8"));
        assert!(c.take(NodeId(0), header(1)).unwrap_err().contains("not a peer"));
        assert!(c.take(NodeId(7), header(1)).unwrap_err().contains("not a peer"));
        let mut c = Collector::new(2);
        c.take(NodeId(1), header(MAX_REPORT_BYTES)).unwrap();
        let big = vec![0u8; CHUNK_BYTES + 1];
        assert!(c.take(NodeId(1), big).unwrap_err().contains("allowed: 1..="));
    }
}
