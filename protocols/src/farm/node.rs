//! FaRM's install (the owner's side), its update handler, and the worker.
//!
//! Slot words (byte offsets in the record's 192-byte slot): 0 header (`version << 1 | lock`),
//! 8 stamp; 64 line-1 version, 72 stamp; 128 line-2 version, 136 stamp. The stamp copies are
//! the record's value as the checkers see it (one per cache line, so a torn copy shows).

use std::sync::{Arc, Mutex};

use rand_chacha::rand_core::Rng;
use rand_chacha::ChaCha8Rng;

use super::config::Config;
use super::mutants::Mutant;
use crate::common::error::{ErrorSlot, NicExt, ProtocolError, ProtocolResult};
use crate::common::local_latch::{HandOff, LatchTimes, Mode};
use crate::common::rpc::{self, Client, Handler, Incoming, Wire};
use crate::nic::{Nanos, Nic, Verb};
use crate::workload::record_array::{ArrayWorker, Layout, OpCost, TORN};

/// The lock bit of the header word.
pub const LOCK: u64 = 1;
/// Offsets of the line versions (the header is line 0's) and of the stamp copies.
pub const VERSION_AT: [u64; 3] = [0, 64, 128];
pub const STAMP_AT: [u64; 3] = [8, 72, 136];
/// Bytes a one-sided read fetches: the 136-byte record with its three line versions.
pub const READ_BYTES: u32 = 160;
/// The port every node's update handlers serve.
pub const UPDATE_PORT: u16 = 1;
/// Worker `t` receives replies on `REPLY_PORT_BASE + t`.
pub const REPLY_PORT_BASE: u16 = 100;
/// Handler task `i` posts on channel `HANDLER_CHANNEL_BASE + i`.
pub const HANDLER_CHANNEL_BASE: u16 = 1000;

/// What a consistent read of a record's words found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub version: u64,
    pub value: u64,
}

/// Validate the six words a read saw (`word(at)` for a slot offset): `None` if the reader must
/// retry (locked, or the lines carry different versions), per the mutant's reduced checks.
pub fn validate(mutant: Mutant, word: impl Fn(u64) -> u64) -> Option<Snapshot> {
    let header = word(0);
    let version = header >> 1;
    let consistent = match mutant {
        Mutant::SkipVersionCheck => true,
        Mutant::HeaderOnlyCheck => header & LOCK == 0,
        _ => header & LOCK == 0 && VERSION_AT[1..].iter().all(|&at| word(at) == version),
    };
    let stamps = STAMP_AT.map(&word);
    let value = if stamps.iter().all(|s| *s == stamps[0]) { stamps[0] } else { TORN };
    consistent.then_some(Snapshot { version, value })
}

/// The owner installs `stamp` in record `key` (on this node) if its version is still `expect`
/// and it is not locked: lock, write every line with the next version, hold the lock while
/// the value is copied (`install_ns`), unlock at the next version. Returns the value replaced,
/// or `None` when the record changed (or is being changed) since the updater read it.
///
/// The record stays locked for `install_ns` plus moving its three cache lines to this core
/// ([`Lines::write`]): under skew, the cores of the hot record's node pass its lines around.
pub async fn install<N: Nic>(
    nic: &N,
    layout: &Layout,
    config: &Config,
    lines: &Lines,
    key: u64,
    expect: u64,
    stamp: u64,
) -> Option<u64> {
    let at = layout.record(key).offset_bytes;
    let local = nic.local();
    let header = local.load(at);
    if header & LOCK != 0 || header >> 1 != expect {
        return None;
    }
    let replaced = local.load(at + STAMP_AT[0]);
    let moved = lines.write(key, nic.now().0);
    if config.mutant == Mutant::NoVersionBump {
        for s in STAMP_AT {
            local.store(at + s, stamp);
        }
        nic.cpu(Nanos(config.install_ns + moved)).await;
        return Some(replaced);
    }
    let next = expect + 1;
    local.store(at, header | LOCK);
    for (v, s) in VERSION_AT[1..].iter().zip(&STAMP_AT[1..]) {
        local.store(at + v, next);
        local.store(at + s, stamp);
    }
    local.store(at + STAMP_AT[0], stamp);
    nic.cpu(Nanos(config.install_ns + moved)).await;
    nic.local().store(at, next << 1);
    Some(replaced)
}

/// Where a node's records' cache lines are (which socket wrote them last, which read them
/// since), shared by its workers and handlers: the cost of a local access to a record
/// ([`crate::common::local_latch`]; the record's lock bit in memory does the excluding, so
/// the sections are unqueued).
#[derive(Clone)]
pub struct Lines {
    times: Arc<Mutex<LatchTimes>>,
    socket: u32,
    hand: HandOff,
}

/// Cache lines of a record slot.
const RECORD_LINES: u64 = 3;

impl Lines {
    pub fn new(config: &Config) -> Lines {
        let hand = HandOff { local_ns: config.line_local_ns, remote_ns: config.line_remote_ns };
        Lines { times: Arc::default(), socket: 0, hand }
    }

    /// The same lines, seen from a thread on `socket`.
    pub fn on_socket(&self, socket: u32) -> Lines {
        Lines { socket, ..self.clone() }
    }

    /// Moving record `key`'s lines to this core for writing, at `t` (ns).
    pub fn write(&self, key: u64, t: u64) -> u64 {
        let mut times = self.times.lock().unwrap_or_else(|e| e.into_inner());
        let section = times.acquire_lines(key, t, self.socket, self.hand, RECORD_LINES - 1, Mode::Unqueued);
        section.map_or(0, |s| s.end - t)
    }

    /// Moving record `key`'s lines to this core for reading, at `t` (ns): nothing if a core
    /// of this socket shares them already.
    pub fn read(&self, key: u64, t: u64) -> u64 {
        let mut times = self.times.lock().unwrap_or_else(|e| e.into_inner());
        times.try_read(key, t, 0, self.socket, self.hand).unwrap_or_else(|e| e) * RECORD_LINES
    }
}

/// An update request: key, the version the updater read, the new record (136 bytes on the
/// wire, of which the stamp is the part the checkers read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Update {
    pub key: u64,
    pub version: u64,
    pub stamp: u64,
}

/// Key and version words plus the 136-byte record.
const UPDATE_BYTES: usize = 16 + 136;

impl Wire for Update {
    fn encoded_len(&self) -> usize {
        UPDATE_BYTES
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        for w in [self.key, self.version, self.stamp] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.resize(start + UPDATE_BYTES, 0);
    }
    fn decode(bytes: &[u8]) -> Self {
        let w = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("eight bytes"));
        Update { key: w(0), version: w(1), stamp: w(2) }
    }
}

/// The owner's answer: installed (with the value replaced) or changed meanwhile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Installed(u64),
    Changed,
}

impl Wire for Outcome {
    fn encoded_len(&self) -> usize {
        16
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let (ok, v) = match *self {
            Outcome::Installed(v) => (1u64, v),
            Outcome::Changed => (0, 0),
        };
        out.extend_from_slice(&ok.to_le_bytes());
        out.extend_from_slice(&v.to_le_bytes());
    }
    fn decode(bytes: &[u8]) -> Self {
        let w = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("eight bytes"));
        if w(0) == 1 {
            Outcome::Installed(w(1))
        } else {
            Outcome::Changed
        }
    }
}

/// A node's update handlers (one value shared by its handler tasks).
pub struct UpdateHandler {
    pub layout: Layout,
    pub config: Config,
    /// Handlers run on socket 0.
    pub lines: Lines,
    pub errors: Arc<ErrorSlot>,
}

impl<N: Nic> Handler<N> for UpdateHandler {
    type Msg = Update;

    fn cost(&self, _msg: &Incoming<Update>) -> Option<Nanos> {
        Some(Nanos(self.config.handler_ns))
    }

    async fn handle(&self, nic: &N, msg: Incoming<Update>) -> ProtocolResult<()> {
        let u = msg.msg;
        let outcome =
            match install(nic, &self.layout, &self.config, &self.lines, u.key, u.version, u.stamp).await {
                Some(replaced) => Outcome::Installed(replaced),
                None => Outcome::Changed,
            };
        match msg.reply_to {
            Some(to) => rpc::reply(nic, to, &outcome).await,
            None => Ok(()),
        }
    }

    fn failed(&self, error: ProtocolError) {
        self.errors.record(error);
    }
}

pub struct Worker<N: Nic> {
    pub client: Client<N>,
    pub layout: Layout,
    pub config: Config,
    /// The node's record lines, from this worker's socket.
    pub lines: Lines,
    pub thread: u32,
    pub rng: ChaCha8Rng,
    pub cost: OpCost,
}

impl<N: Nic> Worker<N> {
    fn nic(&self) -> &N {
        self.client.nic()
    }

    async fn back_off(&mut self, attempt: u32) {
        self.cost.retries += 1;
        let wait = self.config.backoff.delay(attempt, self.rng.next_u64());
        self.nic().sleep(Nanos(wait.max(1))).await;
    }

    /// One attempt at a consistent read: local memory for a record of this node, else one
    /// READ into the scratch slot.
    async fn try_read(&mut self, key: u64) -> ProtocolResult<Option<Snapshot>> {
        let rec = self.layout.record(key);
        if rec.node == self.nic().node() {
            let local = self.nic().local();
            let seen = validate(self.config.mutant, |at| local.load(rec.offset_bytes + at));
            let moved = self.lines.read(key, self.nic().now().0);
            if moved > 0 {
                self.nic().cpu(Nanos(moved)).await;
            }
            return Ok(seen);
        }
        let scratch = self.layout.scratch(self.thread);
        self.cost.rdma_ops += 1;
        let read = Verb::Read { remote: rec, local_bytes: scratch, len_bytes: READ_BYTES };
        self.nic().try_batch(&[read], "lock-free read").await?;
        let local = self.nic().local();
        Ok(validate(self.config.mutant, |at| local.load(scratch + at)))
    }

    async fn read_consistent(&mut self, key: u64) -> ProtocolResult<Snapshot> {
        let mut attempt = 0;
        loop {
            if let Some(s) = self.try_read(key).await? {
                return Ok(s);
            }
            attempt += 1;
            self.back_off(attempt).await;
        }
    }

    async fn do_read(&mut self, key: u64) -> ProtocolResult<u64> {
        let s = self.read_consistent(key).await?;
        self.nic().cpu(Nanos(self.config.op_ns)).await;
        Ok(s.value)
    }

    async fn do_write(&mut self, key: u64, stamp: u64) -> ProtocolResult<u64> {
        let home = self.layout.home(key);
        let mut attempt = 0;
        loop {
            let s = self.read_consistent(key).await?;
            let outcome = if home == self.nic().node() {
                let nic = self.nic().clone();
                match install(&nic, &self.layout, &self.config, &self.lines, key, s.version, stamp).await {
                    Some(replaced) => Outcome::Installed(replaced),
                    None => Outcome::Changed,
                }
            } else {
                self.cost.messages += 2;
                let update = Update { key, version: s.version, stamp };
                self.client.call::<Update, Outcome>(home, UPDATE_PORT, &update).await?
            };
            match outcome {
                Outcome::Installed(replaced) => {
                    self.nic().cpu(Nanos(self.config.op_ns)).await;
                    return Ok(replaced);
                }
                Outcome::Changed => {
                    self.cost.aborts += 1;
                    attempt += 1;
                    self.back_off(attempt).await;
                }
            }
        }
    }
}

impl<N: Nic> ArrayWorker for Worker<N> {
    type N = N;

    fn nic(&self) -> &N {
        self.client.nic()
    }

    fn read(&mut self, key: u64) -> impl std::future::Future<Output = ProtocolResult<u64>> + Send {
        self.do_read(key)
    }

    fn write(
        &mut self,
        key: u64,
        stamp: u64,
    ) -> impl std::future::Future<Output = ProtocolResult<u64>> + Send {
        self.do_write(key, stamp)
    }

    fn cost(&mut self) -> &mut OpCost {
        &mut self.cost
    }
}
