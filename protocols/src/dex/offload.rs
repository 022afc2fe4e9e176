//! Cost-aware opportunistic offloading (DEX §6): the wire format of the offload RPC, the
//! memory-server handler that runs the rest of a point operation next to the data, and the
//! per-thread latency collector that decides between fetching (caching) and offloading.
//!
//! * **Decision** (§6.1, [ART] `latency_collector.h`): offload a miss on a non-shared inner node
//!   at level `L` (1..=M; a missed leaf is never offloaded, as the artifact) iff
//!   `l_p < (L+1)·(l_o + l_s)·c`, with `l_p` and `l_o` moving averages over the last 50 RPCs and
//!   fetches (`l_o` is the whole fetch-and-install time, as the artifact samples `cold_to_hot`).
//!   Decisions fetch until 50 fetches are timed, then offload until 50 RPCs are; after that a
//!   decision is sampled with probability `sample_rate` and flipped with probability `q`.
//!   Nothing is offloaded before the cache has filled ([ART] `state == 1 && flag` in
//!   `cold_to_hot_with_rpc`: `state` turns 1 when the last never-used page is handed out):
//!   such a decision fetches, timed if sampled.
//! * **Memory side** (§6.2, [ART] `btree_rpc.h`): no locks. Exclusivity comes from partitioning
//!   (the subtree is non-shared: no other compute server touches it) and the caller's I/O flag on
//!   the subtree root (no thread of its own server reaches below it). The handler walks from
//!   the subtree root to the leaf in its own memory; an insert into a full leaf returns `Smo`
//!   (the caller falls back to fetch-and-split: the memory side never splits).
//! * **Invariant**: an offloaded op never sees a half-done split: every node on the memory
//!   side's path covers the key. The caller's guards (nothing of the subtree HOT, FLUSHING or
//!   in flight under an I/O flag) make that so; a node that does not cover the key is reported
//!   as `Torn` and becomes a violation ([`super::def`] `invariants`).

use super::config::{Offload, VERSIONS};
use crate::nic::{Nanos, Nic, NicError};
use crate::sherman::layout::{Gaddr, NODE_WORDS};
use crate::sherman::node::{Node, Slot};

/// Memory servers receive offload requests here.
pub const OFFLOAD_PORT: u16 = 40;
/// Client thread `t` receives its replies on `REPLY_PORT_BASE + t`.
pub const REPLY_PORT_BASE: u16 = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpCode {
    Lookup,
    /// Insert or overwrite (a tombstone deletes).
    Store(u64),
}

/// Request: reply port, op, key, value, subtree root.
pub const REQUEST_BYTES: usize = 2 + 1 + 8 + 8 + 8;
/// Reply: status, value (found or replaced), the leaf's address.
pub const REPLY_BYTES: usize = 1 + 8 + 8;

pub fn encode_request(reply_port: u16, op: OpCode, key: u64, root: Gaddr) -> Vec<u8> {
    let mut b = Vec::with_capacity(REQUEST_BYTES);
    b.extend_from_slice(&reply_port.to_le_bytes());
    let (code, value) = match op {
        OpCode::Lookup => (0u8, 0),
        OpCode::Store(v) => (1u8, v),
    };
    b.push(code);
    b.extend_from_slice(&key.to_le_bytes());
    b.extend_from_slice(&value.to_le_bytes());
    b.extend_from_slice(&root.0.to_le_bytes());
    b
}

fn word(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// `(reply port, op, key, subtree root)`, `None` for a malformed message.
pub fn decode_request(b: &[u8]) -> Option<(u16, OpCode, u64, Gaddr)> {
    let port = u16::from_le_bytes(b.get(0..2)?.try_into().ok()?);
    let key = word(b, 3)?;
    let value = word(b, 11)?;
    let op = match *b.get(2)? {
        0 => OpCode::Lookup,
        1 => OpCode::Store(value),
        _ => return None,
    };
    Some((port, op, key, Gaddr(word(b, 19)?)))
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Done: the value found (lookup) or replaced (store), and the leaf's address.
    Done { value: u64, leaf: Gaddr },
    /// An insert needs a split: fall back to the normal path.
    Smo,
    /// A node on the path does not cover the key (a half-done split), or the request was bad.
    Torn(u64),
}

pub fn encode_reply(r: &Reply) -> Vec<u8> {
    let (s, v, a) = match r {
        Reply::Done { value, leaf } => (0u8, *value, leaf.0),
        Reply::Smo => (1, 0, 0),
        Reply::Torn(at) => (2, 0, *at),
    };
    let mut b = vec![s];
    b.extend_from_slice(&v.to_le_bytes());
    b.extend_from_slice(&a.to_le_bytes());
    b
}

pub fn decode_reply(b: &[u8]) -> Option<Reply> {
    let v = word(b, 1)?;
    let a = word(b, 9)?;
    match *b.first()? {
        0 => Some(Reply::Done { value: v, leaf: Gaddr(a) }),
        1 => Some(Reply::Smo),
        2 => Some(Reply::Torn(a)),
        _ => None,
    }
}

/// One memory-server thread of the offload service (a server runs `ms_threads` of them, each
/// on its own channel): receive, run the operation next to the data (`ms_rpc_ns` plus
/// `ms_node_ns` per node visited, on the node's modelled cores), post the reply.
pub async fn serve<N: Nic>(nic: N, costs: Offload, leaf_split: usize) {
    while let Ok(m) = nic.recv(OFFLOAD_PORT).await {
        let Some((port, op, key, root)) = decode_request(&m.bytes) else {
            // Not from a DEX client: nobody to answer.
            continue;
        };
        let reply = handle(&nic, op, key, root, &costs, leaf_split).await;
        // Post the reply and serve the next request: a server thread does not sit out the
        // SEND's round trip. A full send queue is retried; any other error leaves the client
        // to its own RECV's failure or timeout.
        let sender = nic.clone();
        nic.spawn(async move {
            let bytes = encode_reply(&reply);
            loop {
                match sender.send(m.from, port, bytes.clone()).await {
                    Err(NicError::QpOverflow { .. }) => sender.sleep(Nanos(100)).await,
                    _ => return,
                }
            }
        });
    }
}

fn read_local<N: Nic>(nic: &N, addr: Gaddr) -> Option<Node> {
    let mut w = vec![0u64; NODE_WORDS];
    nic.local().read_words(addr.offset(), &mut w);
    Node::decode(VERSIONS, &w).ok()
}

async fn handle<N: Nic>(
    nic: &N,
    op: OpCode,
    key: u64,
    root: Gaddr,
    costs: &Offload,
    leaf_split: usize,
) -> Reply {
    let me = nic.node();
    let mut addr = root;
    let mut levels = 0u64;
    let leaf = loop {
        if addr.node() != me {
            // [ART] a level-M subtree sits on one memory server; anything else is a bad request.
            return Reply::Torn(addr.0);
        }
        let Some(node) = read_local(nic, addr) else { return Reply::Torn(addr.0) };
        levels += 1;
        if !node.covers(key) {
            return Reply::Torn(addr.0);
        }
        if node.is_leaf() {
            break node;
        }
        addr = node.child_for(key);
    };
    nic.cpu(Nanos(costs.ms_rpc_ns + levels * costs.ms_node_ns)).await;
    match op {
        OpCode::Lookup => {
            let value = leaf.find(key).map(|i| leaf.slots[i].value).unwrap_or(0);
            Reply::Done { value, leaf: addr }
        }
        OpCode::Store(value) => {
            // Re-read after the CPU charge: the image is what the handler changes in place.
            let Some(mut n) = read_local(nic, addr) else { return Reply::Torn(addr.0) };
            let slot = match n.find(key) {
                Some(i) => Some(i),
                None if n.live_count() >= leaf_split => None,
                None => n.slots.iter().position(|s| s.value == 0),
            };
            let Some(i) = slot else { return Reply::Smo };
            let replaced = n.slots[i].value;
            n.slots[i] = Slot { key, value, version: 0 };
            n.version = n.version.wrapping_add(1);
            nic.local().write_words(addr.offset(), &n.encode(VERSIONS));
            Reply::Done { value: replaced, leaf: addr }
        }
    }
}

/// Moving average over the last `cap` samples.
#[derive(Clone, Debug, Default)]
pub struct Window {
    samples: std::collections::VecDeque<u64>,
    sum: u64,
}

impl Window {
    pub fn push(&mut self, x: u64, cap: usize) {
        self.samples.push_back(x);
        self.sum += x;
        while self.samples.len() > cap {
            self.sum -= self.samples.pop_front().unwrap_or(0);
        }
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    pub fn mean(&self) -> f64 {
        self.sum as f64 / self.samples.len().max(1) as f64
    }
}

/// One thread's latency collector and decision state.
#[derive(Clone, Debug, Default)]
pub struct Collector {
    pub fetch: Window,
    pub rpc: Window,
}
