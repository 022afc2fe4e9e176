//! Partitioned SELCC with two-phase commit (Fig. 19b). The warehouses are partitioned over the
//! compute nodes (a terminal's home warehouse belongs to the terminal's node); a node touches
//! only its own partition's STOCK (ITEM is read-only and read by all). A NewOrder whose order
//! lines draw stock from another node's warehouse is a distributed transaction: its coordinator
//! (the terminal) runs everything local, then at commit sends each participant node a *prepare*
//! with that node's stock updates. A participant's server thread runs them as a 2PL no-wait
//! sub-transaction, logs a prepare record (WAL, group commit) and votes; on all yes votes the
//! coordinator logs and installs its own part and sends *commit*, on which the participant
//! installs, releases its locks, logs a commit record and acknowledges ("the high cost of
//! `fsync` during both the prepare and commit stages"). A no vote aborts everywhere.
//!
//! [CHOICE] The coordinator waits for the participants' commit acknowledgements before the
//! transaction counts as done, so that no lock outlives the run; the commit point is the
//! coordinator's log record.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::client::Shared;
use super::engine::{Engine, Fail, Txn, TxnResult};
use super::tpcc::*;
use crate::blink::SelccPages;
use crate::common::error::ProtocolError;
use crate::nic::{Nic, NicError, NodeId};
use crate::selcc::Handle;

/// A 2PC failure on this node (a bad message, or a SEND/RECV that failed).
fn fail<N: Nic>(nic: &N, verb: &'static str, port: u16, source: NicError) -> ProtocolError {
    ProtocolError::message(nic.node(), nic.now(), verb, nic.node(), port, "two-phase commit", source)
}

fn bad<N: Nic>(nic: &N, detail: String) -> ProtocolError {
    fail(nic, "RECV", 0, NicError::QpError { qp: "2PC".into(), detail })
}

/// A server thread's receive port (`+ k`) and a terminal's reply port (`+ thread`).
pub const SERVER_PORT: u16 = 0x4000;
pub const REPLY_PORT: u16 = 0x5000;

const PREPARE: u64 = 1;
const COMMIT: u64 = 2;
const ABORT: u64 = 3;
const YES: u64 = 4;
const NO: u64 = 5;
const ACK: u64 = 6;

/// Which compute node owns each warehouse: terminal `t` (global) is homed on warehouse
/// `t mod W + 1` and runs on node `t / threads`, so warehouse `w` belongs to node
/// `((w - 1) mod terminals) / threads`.
#[derive(Clone, Copy, Debug)]
pub struct Partitioning {
    pub terminals: u64,
    pub threads: u64,
}

impl Partitioning {
    /// `threads` terminals on each of `nodes` compute nodes.
    pub fn new(threads: u64, nodes: u64) -> Partitioning {
        Partitioning { terminals: (threads * nodes).max(1), threads: threads.max(1) }
    }

    pub fn owner(&self, w: u64) -> u64 {
        ((w - 1) % self.terminals) / self.threads
    }
}

fn encode(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn decode<N: Nic>(nic: &N, bytes: &[u8]) -> Result<Vec<u64>, ProtocolError> {
    if !bytes.len().is_multiple_of(8) || bytes.len() < 24 {
        return Err(bad(nic, format!("a message of {} bytes", bytes.len())));
    }
    Ok(bytes.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect())
}

/// The stock updates of one participant: (supply warehouse, item, quantity).
pub type RemoteLines = Vec<(u64, u64, u64)>;

/// Commit a distributed NewOrder: prepare every participant, then commit (or abort) everywhere.
pub async fn commit<N: Nic>(
    e: &mut Engine<SelccPages<N>>,
    x: Txn<Handle>,
    id: u64,
    thread: u32,
    compute: &[NodeId],
    remote: &BTreeMap<u64, RemoteLines>,
) -> TxnResult<super::engine::TxnRecord> {
    let nic = e.tree.pages.worker.nic.clone();
    let reply = REPLY_PORT + thread as u16;
    let servers = e.servers as u64;
    let send = |to: u64, words: Vec<u64>| {
        let nic = nic.clone();
        async move {
            let port = SERVER_PORT + (id % servers) as u16;
            let to = compute[to as usize];
            nic.send(to, port, encode(&words)).await.map_err(|e| fail(&nic, "SEND", port, e))
        }
    };
    for (&node, lines) in remote {
        let mut m = vec![PREPARE, id, nic.node().0 as u64, reply as u64, lines.len() as u64];
        for &(w, i, q) in lines {
            m.extend([w, i, q]);
        }
        send(node, m).await?;
    }
    let mut yes = Vec::new();
    for _ in 0..remote.len() {
        let msg = nic.recv(reply).await.map_err(|e| fail(&nic, "RECV", reply, e))?;
        let m = decode(&nic, &msg.bytes)?;
        if m[1] != id {
            return Err(Fail::Error(bad(&nic, format!("a vote for {:#x} while {id:#x} waits", m[1]))));
        }
        if m[0] == YES {
            yes.push(m[2]);
        }
    }
    if yes.len() < remote.len() {
        for &node in &yes {
            send(node, vec![ABORT, id, nic.node().0 as u64, reply as u64]).await?;
        }
        for _ in &yes {
            nic.recv(reply).await.map_err(|e| fail(&nic, "RECV", reply, e))?;
        }
        e.abort(x).await?;
        return Err(Fail::Abort("2PC: a participant voted no"));
    }
    let record = e.commit(x, id).await?;
    for &node in remote.keys() {
        send(node, vec![COMMIT, id, nic.node().0 as u64, reply as u64]).await?;
    }
    for _ in remote.keys() {
        let msg = nic.recv(reply).await.map_err(|e| fail(&nic, "RECV", reply, e))?;
        let m = decode(&nic, &msg.bytes)?;
        if m[0] != ACK || m[1] != id {
            return Err(Fail::Error(bad(&nic, format!("{m:?} while {id:#x} waits for acks"))));
        }
    }
    Ok(record)
}

/// What a node's server threads share: the prepared sub-transactions by id.
#[derive(Default)]
pub struct Prepared {
    txns: Mutex<BTreeMap<u64, Txn<Handle>>>,
}

/// One server thread of a participant node: prepare, commit or abort sub-transactions.
pub async fn serve<N: Nic>(
    mut e: Engine<SelccPages<N>>,
    port: u16,
    prepared: Arc<Prepared>,
    shared: Arc<Shared>,
    record: bool,
    drain_at_end: bool,
) {
    let nic = e.tree.pages.worker.nic.clone();
    let node = e.tree.pages.node.clone();
    loop {
        let result: Result<(), ProtocolError> = async {
            let msg = nic.recv(port).await.map_err(|e| fail(&nic, "RECV", port, e))?;
            let m = decode(&nic, &msg.bytes)?;
            let (kind, id, from, reply) = (m[0], m[1], NodeId(m[2] as u16), m[3] as u16);
            let me = nic.node().0 as u64;
            let answer = match kind {
                PREPARE => {
                    let n = m[4] as usize;
                    let lines: Vec<(u64, u64, u64)> =
                        (0..n).map(|k| (m[5 + 3 * k], m[6 + 3 * k], m[7 + 3 * k])).collect();
                    match prepare(&mut e, &lines).await {
                        Ok(x) => {
                            prepared.txns.lock().unwrap_or_else(|p| p.into_inner()).insert(id, x);
                            YES
                        }
                        Err(Fail::Abort(_)) => NO,
                        Err(Fail::Error(err)) => return Err(err),
                    }
                }
                COMMIT | ABORT => {
                    let x = prepared.txns.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                    let x = x.ok_or_else(|| bad(&nic, format!("{id:#x} was not prepared here")))?;
                    if kind == COMMIT {
                        let rec = e.commit(x, id).await.map_err(|f| fail_error(&nic, f))?;
                        e.log(32).await?;
                        if record {
                            shared.stats.lock().unwrap_or_else(|p| p.into_inner()).records.push(rec);
                        }
                    } else {
                        e.abort(x).await.map_err(|f| fail_error(&nic, f))?;
                    }
                    ACK
                }
                k => return Err(bad(&nic, format!("message kind {k}"))),
            };
            // The node's terminals are done and nothing is prepared: write the cache back again
            // (the end-of-run check reads memory) — after a commit, an abort or a no vote.
            let idle = *node.workers_running.lock().unwrap_or_else(|p| p.into_inner()) == 0
                && prepared.txns.lock().unwrap_or_else(|p| p.into_inner()).is_empty();
            if drain_at_end && idle {
                node.drain(&e.tree.pages.worker.nic).await?;
            }
            nic.send(from, reply, encode(&[answer, id, me]))
                .await
                .map_err(|e| fail(&nic, "SEND", reply, e))?;
            Ok(())
        }
        .await;
        if let Err(err) = result {
            shared.errors.record(err);
            return;
        }
    }
}

fn fail_error<N: Nic>(nic: &N, f: Fail) -> ProtocolError {
    match f {
        Fail::Error(e) => e,
        Fail::Abort(why) => bad(nic, format!("a prepared sub-transaction aborted: {why}")),
    }
}

/// The participant's part of a NewOrder: its stock updates under 2PL locks, then the prepare
/// record. Returns the prepared (locked, not installed) sub-transaction.
async fn prepare<N: Nic>(e: &mut Engine<SelccPages<N>>, lines: &[(u64, u64, u64)]) -> TxnResult<Txn<Handle>> {
    let mut x = e.begin().await?;
    let body: TxnResult<()> = async {
        for &(w, i, quantity) in lines {
            let st = e.locate(stock_key(w, i)).await?;
            let mut stock = e.read(&mut x, st, WIDTH[STOCK], true).await?;
            update_stock(&mut stock, quantity, true);
            e.write(&mut x, st, stock);
        }
        Ok(())
    }
    .await;
    if let Err(f) = body {
        e.abort(x).await?;
        return Err(f);
    }
    e.log(32 + lines.len() as u64 * (WIDTH[STOCK] as u64 * 8 + 16)).await?;
    Ok(x)
}

/// NewOrder's stock update (clause 2.4.2.2).
pub fn update_stock(stock: &mut [u64], quantity: u64, remote: bool) {
    let q = stock[S_QUANTITY];
    stock[S_QUANTITY] = if q >= quantity + 10 { q - quantity } else { q + 91 - quantity };
    stock[S_YTD] += quantity;
    stock[S_ORDER_CNT] += 1;
    stock[S_REMOTE_CNT] += remote as u64;
}
