//! CMCache, the centralized-manager baseline (§2.3, Fig. 2 top; spec §6.2): "if the target
//! object is cached (Read Hit), it copies the object directly from the cache. Otherwise (Read
//! Miss), an RPC request is sent to the manager for the latest data, which then marks the
//! requesting CN as an owner and provides the data. All remote write operations require an RPC
//! to the manager, which invalidates caches on existing owners, sets the writer as the sole
//! owner, and updates the source data ... the manager serializes RPCs for read misses and writes
//! to the same object."
//!
//! ```text
//!  client (CN c, thread t)                       manager (handler i of `threads`)
//!  hit:   VALID = ticket|VALID_BIT, KEY = k → copy
//!  miss:  VALID = ticket, KEY = k ──Miss{k,t}──▶ wait no write of k; owners[k] |= c;
//!                                                READ MN → stage i; WRITE stage i → c.fetch(t)
//!         install if VALID == ticket ◀──reply─── release k
//!  write: VALID = ticket ───────────Write{k,t}─▶ wait k idle; WRITE 0 → VALID of k's slot on every
//!                                                other owner (acked); READ c.app(t) → stage i;
//!                                                WRITE stage i → MN; owners[k] = {c}
//!         install own value if VALID == ticket ◀──reply── release k
//! ```
//!
//! [CHOICE]s (NEEDS.md): the client cache is direct-mapped (slot `k % cache_objects`, reusing
//! DiFache's header words VALID and KEY and its buffers; the paper does not describe CMCache's
//! index, and the micro-benchmark's working set fits); the manager moves data by one-sided
//! verbs (messages stay small and any object size works); each handler thread serves one RPC at
//! a time and *waits* (polls) while its object is busy, as a thread-per-core server does; an
//! invalidation WRITEs 0 to the slot blind (a slot reused by another object loses a copy, never
//! keeps a stale one); the VALID ticket, as in DiFache's miss, drops a fill an invalidation
//! overtook.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use crate::common::error::{ErrorSlot, NicExt, ProtocolError, ProtocolResult};
use crate::common::rpc::{reply, Client, Handler, Incoming, Wire};
use crate::nic::{Nanos, Nic, RemoteAddr, Verb};
use crate::sync::join_all;

use super::bench::Window;
use super::cache::{Cache, Worker};
use super::config::Config;
use super::layout::{Layout, HDR_KEY, HDR_VALID};
use super::mutants::Mutant;
use super::profit::Event;
use super::stats::Stats;

/// The manager's RPC port; client thread `t` receives replies on `REPLY_BASE + t`.
pub const PORT: u16 = 0x4d43;
pub const REPLY_BASE: u16 = 0x4d50;
/// Set in VALID once a slot holds its object's bytes; below it, the ticket of a fill in flight.
pub const VALID_BIT: u64 = 1 << 63;

const MISS: u8 = 1;
const WRITE: u8 = 2;

/// A read-miss or write request: the object and the client thread whose buffers the manager
/// reads from or writes into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Req {
    kind: u8,
    key: u64,
    thread: u32,
}

impl Wire for Req {
    fn encoded_len(&self) -> usize {
        13
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.kind);
        out.extend_from_slice(&self.key.to_le_bytes());
        out.extend_from_slice(&self.thread.to_le_bytes());
    }
    fn decode(bytes: &[u8]) -> Self {
        assert_eq!(bytes.len(), 13, "CMCache request of {} bytes", bytes.len());
        Req {
            kind: bytes[0],
            key: u64::from_le_bytes(bytes[1..9].try_into().expect("eight bytes")),
            thread: u32::from_le_bytes(bytes[9..13].try_into().expect("four bytes")),
        }
    }
}

/// The slot (header and buffer) object `key` occupies on every client CN.
pub fn slot(layout: &Layout, key: u64) -> u32 {
    (key % layout.cache_objects) as u32
}

// ---- client side ----

async fn call<N: Nic>(cache: &Cache<N>, w: &Worker<N>, kind: u8, key: u64) -> ProtocolResult<()> {
    let (manager, _) = cache.layout.manager.expect("CMCache plans place a manager");
    let mut client = Client::new(w.nic.clone(), REPLY_BASE + w.thread as u16);
    let _: Vec<u8> = client.call(manager, PORT, &Req { kind, key, thread: w.thread }).await?;
    Ok(())
}

/// Claim `key`'s slot for a fill: a fresh ticket in VALID (not valid yet), the key in KEY.
fn claim<N: Nic>(cache: &Cache<N>, key: u64) -> (u64, u64) {
    let hdr = cache.layout.header(slot(&cache.layout, key));
    let ticket = cache.tickets.fetch_add(1, Relaxed) & !VALID_BIT;
    cache.nic.local().store(hdr + HDR_KEY, key + 1);
    cache.nic.local().store(hdr + HDR_VALID, ticket);
    (hdr, ticket)
}

/// Copy `from` into the slot and mark it valid, unless an invalidation or another fill took
/// the slot since `ticket` was stored.
fn install<N: Nic>(cache: &Cache<N>, w: &Worker<N>, key: u64, hdr: u64, ticket: u64, from: u64) {
    let local = cache.nic.local();
    let ours = local.load(hdr + HDR_VALID) == ticket;
    let ignore =
        cache.config.mutant == Mutant::CmInstallIgnoresTicket && local.load(hdr + HDR_KEY) == key + 1;
    if ours || ignore {
        w.nic.mark("cmcache install", key);
        local.copy_from(
            cache.layout.buffer(slot(&cache.layout, key)),
            local,
            from,
            cache.layout.object_bytes,
        );
        // A CAS, not a store: on real hardware the manager's invalidation (an RDMA WRITE of 0)
        // can land between the check above and this line, and a store would overwrite it and
        // keep a stale copy valid. The simulator runs a task's poll atomically with respect to
        // remote writes, so fuzzing cannot show this window.
        if ignore {
            local.store(hdr + HDR_VALID, ticket | VALID_BIT);
        } else {
            local.cas_local(hdr + HDR_VALID, ticket, ticket | VALID_BIT);
        }
    }
}

/// Read `key` into the thread's application buffer: a local hit, or a miss by RPC.
pub async fn read<N: Nic>(cache: &Cache<N>, w: &Worker<N>, key: u64) -> ProtocolResult<Event> {
    let layout = &cache.layout;
    let local = cache.nic.local();
    let app = layout.app_buffer(w.thread);
    w.nic.cpu(Nanos(cache.config.cpu.lookup_ns)).await;
    let hdr = layout.header(slot(layout, key));
    if local.load(hdr + HDR_VALID) & VALID_BIT != 0 && local.load(hdr + HDR_KEY) == key + 1 {
        local.copy_from(app, local, layout.buffer(slot(layout, key)), layout.object_bytes);
        w.nic.cpu(cache.copy_ns()).await;
        return Ok(Event::ReadHit);
    }
    let (hdr, ticket) = claim(cache, key);
    let fetched = layout.fetch_buffer(w.thread);
    call(cache, w, MISS, key).await?;
    install(cache, w, key, hdr, ticket, fetched);
    local.copy_from(app, local, fetched, layout.object_bytes);
    w.nic.cpu(cache.copy_ns()).await;
    Ok(Event::ReadMiss)
}

/// Write the thread's application buffer to `key` by RPC; the writer keeps the new value.
/// The manager invalidates every *other* owner; this CN's own slot is the writer's to settle:
/// if another local thread claimed it meanwhile, that thread's miss may have been served
/// before this write, so the slot is dropped (found by the fuzzer; the mutant
/// `cm-writer-keeps-local` keeps it).
pub async fn write<N: Nic>(cache: &Cache<N>, w: &Worker<N>, key: u64) -> ProtocolResult<Event> {
    w.nic.cpu(Nanos(cache.config.cpu.lookup_ns)).await;
    if let Some(t) = &cache.tracker {
        t.begin(key);
    }
    let (hdr, ticket) = claim(cache, key);
    let r = call(cache, w, WRITE, key).await;
    if r.is_ok() {
        let local = cache.nic.local();
        let ours = local.load(hdr + HDR_VALID) == ticket;
        if !ours && cache.config.mutant != Mutant::CmWriterKeepsLocal && local.load(hdr + HDR_KEY) == key + 1
        {
            local.store(hdr + HDR_VALID, 0);
        }
        install(cache, w, key, hdr, ticket, cache.layout.app_buffer(w.thread));
    }
    if let Some(t) = &cache.tracker {
        t.end(key);
    }
    r?;
    w.nic.cpu(cache.copy_ns()).await;
    Ok(Event::WriteCached)
}

// ---- the manager ----

/// The manager's state: objects being served, owner sets (bit = CN index, at most 64 CNs),
/// counters. Handler `i` runs on channel `CHANNEL_BASE + i` and stages through buffer `i`.
pub struct Manager {
    layout: Layout,
    config: Config,
    /// Objects being served: readers (misses) share, a writer is alone (`u32::MAX`).
    busy: Mutex<BTreeMap<u64, u32>>,
    owners: Mutex<BTreeMap<u64, u64>>,
    pub stats: Mutex<Stats>,
    /// Counters start at the measured window, as the clients' do.
    window: Arc<Window>,
    pub errors: ErrorSlot,
}

pub const CHANNEL_BASE: u16 = 1;

impl Manager {
    pub fn new(layout: Layout, config: Config, window: Arc<Window>) -> Arc<Manager> {
        Arc::new(Manager {
            layout,
            config,
            busy: Mutex::new(BTreeMap::new()),
            owners: Mutex::new(BTreeMap::new()),
            stats: Mutex::new(Stats::default()),
            window,
            errors: ErrorSlot::new(),
        })
    }

    fn stats(&self) -> std::sync::MutexGuard<'_, Stats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, u64>> {
        self.owners.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serialize per object: wait (holding this handler thread) until `key` admits us. Read
    /// misses of one object share it (they race on neither the owner set, updated in place, nor
    /// the source data); a write excludes everything ([CHOICE]: the paper serializes "read
    /// misses and writes to the same object").
    async fn acquire<N: Nic>(&self, nic: &N, key: u64, write: bool) {
        if self.config.mutant == Mutant::CmNoSerialize {
            return;
        }
        loop {
            {
                let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
                let holders = busy.entry(key).or_insert(0);
                if write && *holders == 0 {
                    *holders = u32::MAX;
                    return;
                }
                if !write && *holders != u32::MAX {
                    *holders += 1;
                    return;
                }
            }
            if self.window.opened(nic.now().0) {
                self.stats().manager_waits += 1;
            }
            nic.sleep(Nanos(self.config.cpu.poll_ns)).await;
        }
    }

    fn release(&self, key: u64, write: bool) {
        if self.config.mutant == Mutant::CmNoSerialize {
            return;
        }
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        let holders = busy.entry(key).or_insert(0);
        if write || *holders <= 1 {
            busy.remove(&key);
        } else {
            *holders -= 1;
        }
    }

    async fn miss<N: Nic>(&self, nic: &N, cn: usize, req: Req, stage: u64) -> ProtocolResult<()> {
        *self.owners().entry(req.key).or_default() |= 1 << (cn % 64);
        let object = self.layout.object(req.key);
        let len = self.layout.object_bytes as u32;
        nic.try_batch(&[Verb::Read { remote: object, local_bytes: stage, len_bytes: len }], "manager fetch")
            .await?;
        let to = RemoteAddr::new(self.layout.cn(cn), self.layout.fetch_buffer(req.thread));
        nic.try_batch(&[Verb::Write { remote: to, local_bytes: stage, len_bytes: len }], "manager provide")
            .await?;
        Ok(())
    }

    async fn write<N: Nic>(&self, nic: &N, cn: usize, req: Req, stage: u64) -> ProtocolResult<()> {
        let key = req.key;
        let set = self.owners().get(&key).copied().unwrap_or(0);
        let targets: Vec<usize> = (0..self.layout.compute_nodes as usize)
            .filter(|&c| c != cn && set >> (c % 64) & 1 != 0)
            .collect();
        let valid = self.layout.header(slot(&self.layout, key)) + HDR_VALID;
        if self.config.mutant == Mutant::CmUnackedInvalidate {
            for &c in &targets {
                let verbs = [Verb::WriteWord { remote: RemoteAddr::new(self.layout.cn(c), valid), value: 0 }];
                nic.post_unsignaled(&verbs)
                    .map_err(|e| ProtocolError::batch(nic.node(), nic.now(), &verbs, "invalidate", e))?;
            }
        } else {
            let acks = join_all(
                targets
                    .iter()
                    .map(|&c| async move {
                        let remote = RemoteAddr::new(self.layout.cn(c), valid);
                        nic.try_batch(&[Verb::WriteWord { remote, value: 0 }], "invalidate").await
                    })
                    .collect(),
            )
            .await;
            for a in acks {
                a?;
            }
        }
        if self.window.opened(nic.now().0) {
            self.stats().invalidations += targets.len() as u64;
        }
        let len = self.layout.object_bytes as u32;
        let from = RemoteAddr::new(self.layout.cn(cn), self.layout.app_buffer(req.thread));
        nic.try_batch(
            &[Verb::Read { remote: from, local_bytes: stage, len_bytes: len }],
            "manager take write",
        )
        .await?;
        let object = self.layout.object(key);
        nic.try_batch(&[Verb::Write { remote: object, local_bytes: stage, len_bytes: len }], "manager flush")
            .await?;
        self.owners().insert(key, 1 << (cn % 64));
        Ok(())
    }
}

impl<N: Nic> Handler<N> for Manager {
    type Msg = Req;

    fn cost(&self, _msg: &Incoming<Req>) -> Option<Nanos> {
        Some(Nanos(self.config.manager.rpc_ns))
    }

    async fn handle(&self, nic: &N, incoming: Incoming<Req>) -> ProtocolResult<()> {
        let Some(to) = incoming.reply_to else {
            return Ok(());
        };
        let req = incoming.msg;
        let cn = self.layout.cn_index(incoming.from);
        let stage = self.layout.manager_stage(nic.channel() - CHANNEL_BASE);
        let write = req.kind == WRITE;
        self.acquire(nic, req.key, write).await;
        let served = match req.kind {
            MISS => self.miss(nic, cn, req, stage).await,
            WRITE => self.write(nic, cn, req, stage).await,
            other => panic!("CMCache request of kind {other}"),
        };
        self.release(req.key, write);
        served?;
        if self.window.opened(nic.now().0) {
            self.stats().rpcs += 1;
        }
        reply(nic, to, &Vec::<u8>::new()).await
    }

    fn failed(&self, error: ProtocolError) {
        self.errors.record(error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        let req = Req { kind: WRITE, key: u64::MAX - 3, thread: 17 };
        let mut bytes = Vec::new();
        req.encode(&mut bytes);
        assert_eq!(bytes.len(), req.encoded_len());
        assert_eq!(Req::decode(&bytes), req);
    }
}
