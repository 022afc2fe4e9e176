//! One compute node's cache (§4–§5): header lookup and allocation with default-mode discovery,
//! the mode check with per-object statistics, mode switches under the memory node's mode lock,
//! read hit / read miss / write with decentralized invalidation, and eviction.
//!
//! Header words (`layout::HDR_*`): VALID (0 = invalid, else the ticket of the miss or write
//! that validated it; remote invalidations WRITE 0 here), MODE (bit 0 on, bit 1 switching,
//! bits 8..16 interval, 16..32 threshold, 32..64 a tag of the key, so a switcher can tell a
//! recycled header), COUNTS (local fetch-and-add: total, reads, read hits, 16 bits each), KEY,
//! FILL (misses fetching now) and PIN (local users; eviction skips pinned headers).
//! Keeping VALID, MODE and COUNTS in separate words is a [CHOICE]: remote writes never clobber
//! local counters, and setting valid never rewrites the mode (spec §9.4, §9.5).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crate::common::error::{ErrorSlot, NicExt, ProtocolResult};
use crate::nic::{Nanos, Nic, RemoteAddr, Verb};
use crate::sync::join_all;

use super::check::Tracker;
use super::config::Config;
use super::index::{self, Insert, Remote};
use super::layout::*;
use super::mutants::Mutant;
use super::profit::{break_even, decode_threshold, encode_threshold, Event, Samples};
use super::stats::Stats;

mod atomic;
mod batch;
pub use batch::Span;
mod headers;
mod lock;
pub(super) use lock::mode_lock_cn;
mod mode;

pub const MODE_ON: u64 = 1;
pub const SWITCHING: u64 = 2;

pub fn mode_word(on: bool, interval: u8, threshold: u64, key: u64) -> u64 {
    on as u64 | (interval as u64) << 8 | (threshold & 0xffff) << 16 | tag(key) << 32
}
pub fn tag(key: u64) -> u64 {
    (key + 1) & 0xffff_ffff
}
fn interval_of(mode: u64) -> u64 {
    (mode >> 8) & 0xff
}
fn threshold_of(mode: u64) -> u64 {
    (mode >> 16) & 0xffff
}

const TOTAL: u64 = 1;
const READ: u64 = 1 << 16;
const HIT: u64 = 1 << 32;

/// The compute node's cache, shared by its client threads.
pub struct Cache<N: Nic> {
    pub nic: N,
    pub layout: Layout,
    pub config: Config,
    /// This node's compute index (0-based).
    pub me: usize,
    owner_sets: bool,
    free: Mutex<Vec<u32>>,
    hand: Mutex<u32>,
    pub(super) tickets: AtomicU64,
    /// Makes every mode-lock value unique (`mode_lock_value`).
    pub(super) lock_nonce: AtomicU64,
    warm: AtomicBool,
    pub stats: Mutex<Stats>,
    samples: Mutex<Samples>,
    pub(super) tracker: Option<Arc<Tracker>>,
    pub errors: ErrorSlot,
    /// Crash recovery (`recovery.rs`): the CNs the coordinator's list marks dead, whether
    /// caching is disabled here (a CN-list sync), and cached operations in flight.
    pub(super) dead: AtomicU64,
    pub(super) disabled: AtomicBool,
    pub(super) inflight: AtomicU64,
    /// When the monitor last beat (virtual ns).
    pub(super) beat_at: AtomicU64,
    /// Node restarts (`recovery.rs`): no operation starts while fenced (a memory node failed,
    /// or this CN has not rejoined yet); the fence lifts once a sync round of epoch at least
    /// `fence_epoch` completed. `suspect`: a client saw a memory node time out. `joining`: this
    /// incarnation restarted and must rejoin the CN list. `bypass_writes`: writes in flight
    /// while caching is disabled (a sync drains them too: they may skip a rejoining CN).
    pub(super) fenced: AtomicBool,
    pub(super) fence_epoch: AtomicU64,
    pub(super) suspect: AtomicBool,
    pub(super) joining: AtomicBool,
    pub(super) bypass_writes: AtomicU64,
    /// A sync round after a memory-node failure is pending (the mutant skips its drop).
    pub(super) mn_round: AtomicBool,
}

/// A client thread's handle: its own QPs and scratch buffers.
pub struct Worker<N: Nic> {
    pub nic: N,
    pub thread: u32,
}

impl<N: Nic> Cache<N> {
    pub fn new(nic: N, layout: Layout, config: Config, tracker: Option<Arc<Tracker>>) -> Arc<Cache<N>> {
        let me = layout.cn_index(nic.node());
        let owner_sets = config.owner_sets(layout.compute_nodes as usize);
        let free = (0..layout.cache_objects as u32).rev().collect();
        let samples = Samples::new(config.latency_ring);
        Arc::new(Cache {
            nic,
            layout,
            config,
            me,
            owner_sets,
            free: Mutex::new(free),
            hand: Mutex::new(0),
            tickets: AtomicU64::new(1),
            lock_nonce: AtomicU64::new(0),
            warm: AtomicBool::new(false),
            stats: Mutex::new(Stats::default()),
            samples: Mutex::new(samples),
            tracker,
            errors: ErrorSlot::new(),
            dead: AtomicU64::new(0),
            disabled: AtomicBool::new(false),
            inflight: AtomicU64::new(0),
            beat_at: AtomicU64::new(0),
            fenced: AtomicBool::new(false),
            fence_epoch: AtomicU64::new(u64::MAX),
            suspect: AtomicBool::new(false),
            joining: AtomicBool::new(false),
            bypass_writes: AtomicU64::new(0),
            mn_round: AtomicBool::new(false),
        })
    }

    /// This cache is a restarted CN's new incarnation: fenced and disabled until it rejoined.
    /// (The mutant `restart-keeps-cache` kept the old memory: free only the unused headers.)
    pub fn set_joining(&self) {
        // Its statistics start empty: the first measured operation must not wipe the rejoin's.
        self.warm.store(true, Relaxed);
        self.joining.store(true, Relaxed);
        self.fenced.store(true, Relaxed);
        self.disabled.store(true, Relaxed);
        if self.config.mutant == Mutant::RestartKeepsCache {
            let n = self.layout.cache_objects as u32;
            *self.free.lock().unwrap_or_else(|e| e.into_inner()) =
                (0..n).rev().filter(|&h| self.load(h, HDR_KEY) == 0).collect();
        }
    }

    /// Whether `e` is a verb that timed out at a crashed memory node (node restarts only).
    pub fn mn_timeout(&self, e: &crate::common::error::ProtocolError) -> bool {
        self.config.node_restarts && matches!(e.source, crate::nic::NicError::Timeout { .. })
    }

    /// A client saw a memory node time out: fence this CN now; the monitor takes over.
    pub fn suspect_mn(&self) {
        self.fence_epoch.store(u64::MAX, Relaxed);
        self.fenced.store(true, Relaxed);
        self.disabled.store(true, Relaxed);
        self.suspect.store(true, Relaxed);
    }

    /// Wait while this CN is fenced (node restarts).
    pub async fn wait_unfenced(&self, w: &Worker<N>) {
        while self.fenced.load(Relaxed) {
            w.nic.sleep(Nanos(self.config.heartbeat_ns)).await;
        }
    }

    /// The first client to end its warm-up clears the node's counters and latency samples of
    /// the metrics (not the profit model's samples).
    pub fn reset_stats_once(&self) {
        if !self.warm.swap(true, Relaxed) {
            let mut stats = self.stats();
            // The timelines span the whole run.
            let timeline = std::mem::take(&mut stats.timeline);
            let tracked = std::mem::take(&mut stats.tracked);
            // The serializability check covers every committed transaction, warm-up included.
            let txns = std::mem::take(&mut stats.txns);
            *stats = Stats { timeline, tracked, txns, tpcc_wraps: stats.tpcc_wraps, ..Stats::default() };
        }
    }

    pub fn worker(&self, thread: u32) -> Worker<N> {
        Worker { nic: self.nic.qp(thread as u16 + 1), thread }
    }

    pub(in crate::difache) fn stats(&self) -> std::sync::MutexGuard<'_, Stats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn load(&self, hdr: u32, word: u64) -> u64 {
        self.nic.local().load(self.layout.header(hdr) + word)
    }
    fn store(&self, hdr: u32, word: u64, value: u64) {
        self.nic.local().store(self.layout.header(hdr) + word, value)
    }
    fn add(&self, hdr: u32, word: u64, delta: u64) -> u64 {
        self.nic.local().faa_local(self.layout.header(hdr) + word, delta)
    }
    /// The other live CNs (the coordinator's list as last synced).
    fn others(&self) -> Vec<usize> {
        let dead = self.dead.load(Relaxed);
        (0..self.layout.compute_nodes as usize)
            .filter(|&c| c != self.me && (c >= 64 || dead >> c & 1 == 0))
            .collect()
    }
    pub(super) fn reset_free_list(&self) {
        *self.free.lock().unwrap_or_else(|e| e.into_inner()) =
            (0..self.layout.cache_objects as u32).rev().collect();
        *self.hand.lock().unwrap_or_else(|e| e.into_inner()) = 0;
    }
    /// Start a cached operation, or `false` if caching is disabled (a CN-list sync): the
    /// operation then goes to the memory node. Count first, then look, so that a sync that
    /// found no operation in flight never misses one that passed the gate.
    fn enter(&self) -> bool {
        self.inflight.fetch_add(1, Relaxed);
        if self.disabled.load(Relaxed) {
            self.inflight.fetch_sub(1, Relaxed);
            return false;
        }
        true
    }
    fn leave(&self) {
        self.inflight.fetch_sub(1, Relaxed);
    }
    pub(super) fn copy_ns(&self) -> Nanos {
        self.copy_ns_for(self.layout.object_bytes)
    }
    fn copy_ns_for(&self, bytes: u64) -> Nanos {
        Nanos(self.config.cpu.copy_ns_per_kib * bytes / 1024)
    }
    /// The whole object, as a span.
    /// The most elements one batched call takes so that the client's QP never holds more than
    /// `ford::QP_WINDOW` (the NIC's `max_rd_atomic`) outstanding verbs: each element keeps one
    /// verb in flight per target at a time, two with owner sets (a miss fetches the object and
    /// re-reads its owner set in one doorbell).
    pub fn batch_window(&self) -> usize {
        let per_element = if self.owner_sets { 2 } else { 1 };
        super::bench::ford::QP_WINDOW / per_element
    }

    pub fn whole(&self) -> Span {
        Span { off: 0, len: self.layout.object_bytes }
    }
    /// Records the event (and returns it, so a caller can see what its access was).
    fn sample(&self, event: Event, ns: u64) -> Event {
        self.samples.lock().unwrap_or_else(|e| e.into_inner()).record(event, ns);
        self.stats().event(event, ns);
        event
    }

    // ---- remote index lookups and the mode lock ----

    /// One READ of `key`'s neighbourhood on compute node `cn` (again while a group is locked).
    async fn lookup_remote(&self, w: &Worker<N>, cn: usize, key: u64) -> ProtocolResult<Option<u32>> {
        let (offset, len) = index::lookup_range(key, self.layout.index_buckets);
        let local = self.layout.lookup_buffer(w.thread, cn);
        loop {
            let remote = RemoteAddr::new(self.layout.cn(cn), offset);
            w.nic
                .try_batch(
                    &[Verb::Read { remote, local_bytes: local, len_bytes: len }],
                    "remote index lookup",
                )
                .await?;
            let mut words = vec![0; len as usize / 8];
            self.nic.local().read_words(local, &mut words);
            self.stats().remote_lookups += 1;
            match index::parse_remote(&words, key, self.layout.index_buckets) {
                Remote::Found(h) => return Ok(Some(h)),
                Remote::Absent => return Ok(None),
                Remote::Locked => {
                    self.stats().lookup_retries += 1;
                    w.nic.sleep(Nanos(self.config.cpu.poll_ns)).await;
                }
            }
        }
    }

    /// Headers other CNs hold for `key`, with their MODE word (tag-checked). A header indexed
    /// under `key` whose word carries another key's tag (the hardware-only race of
    /// `Cache::own_mode`) is skipped: a switcher neither flags nor invalidates it, and discovery
    /// does not copy it. Safe because its CN repairs it before any access uses it — under
    /// `key`'s mode lock, so after any such switch — and drops its copy then.
    async fn remote_headers(&self, w: &Worker<N>, key: u64) -> ProtocolResult<Vec<(usize, u32, u64)>> {
        let found = join_all(
            self.others()
                .into_iter()
                .map(|c| async move { (c, self.lookup_remote(w, c, key).await) })
                .collect(),
        )
        .await;
        let mut hits = Vec::new();
        for (c, r) in found {
            if let Some(h) = r? {
                hits.push((c, h));
            }
        }
        let modes = join_all(
            hits.iter()
                .map(|&(c, h)| async move {
                    let local = self.layout.word_buffer(w.thread, c);
                    let remote = RemoteAddr::new(self.layout.cn(c), self.layout.header(h) + HDR_MODE);
                    w.nic
                        .try_batch(
                            &[Verb::Read { remote, local_bytes: local, len_bytes: 8 }],
                            "read remote mode",
                        )
                        .await?;
                    Ok::<_, crate::common::error::ProtocolError>((c, h, self.nic.local().load(local)))
                })
                .collect(),
        )
        .await;
        let mut out = Vec::new();
        for m in modes {
            let (c, h, mode) = m?;
            if mode >> 32 == tag(key) {
                out.push((c, h, mode));
            }
        }
        Ok(out)
    }

    /// A new header's mode (§4.3, the caller holds `key`'s mode lock): copied from the first
    /// other CN's header found (tag-checked), else off with the default interval and threshold.
    async fn discover_mode(&self, w: &Worker<N>, key: u64) -> ProtocolResult<u64> {
        let mut mode = mode_word(
            false,
            self.config.interval_first,
            encode_threshold(self.config.threshold_default),
            key,
        );
        if self.config.mutant == Mutant::AllocDefaultOn {
            mode |= MODE_ON;
        } else if let Some(&(_, _, m)) = self.remote_headers(w, key).await?.first() {
            mode = m & !SWITCHING;
        }
        Ok(mode)
    }

    /// Read object `key` into the thread's application buffer.
    pub async fn read(&self, w: &Worker<N>, key: u64) -> ProtocolResult<Event> {
        self.read_span(w, key, self.whole()).await
    }

    /// Read bytes `span` of object `key` into the same bytes of the worker's application
    /// buffer; the index, the mode and a miss's fetch and install are the whole object's.
    pub(super) async fn read_span(&self, w: &Worker<N>, key: u64, span: Span) -> ProtocolResult<Event> {
        let app = self.layout.app_buffer(w.thread);
        let start = w.nic.now();
        if self.config.variant.centralized() {
            assert!(span == self.whole(), "CMCache reads whole objects (the plan refuses parts)");
            let event = super::cmcache::read(self, w, key).await?;
            return Ok(self.sample(event, w.nic.now().0 - start.0));
        }
        if !self.config.variant.caches() {
            self.fetch_span(w, key, app, span).await?;
            return Ok(self.sample(Event::ReadBypass, w.nic.now().0 - start.0));
        }
        let Some(hdr) = self.enter_header(w, key).await? else {
            self.fetch_span(w, key, app, span).await?;
            return Ok(self.sample(Event::ReadBypass, w.nic.now().0 - start.0));
        };
        let r: ProtocolResult<Event> = async {
            let st = self.check_mode(w, hdr, key, true).await?;
            if st & MODE_ON == 0 {
                self.fetch_span(w, key, app, span).await?;
                return Ok(Event::ReadBypass);
            }
            loop {
                let valid = self.load(hdr, HDR_VALID);
                let filling = self.load(hdr, HDR_FILL) != 0 && self.config.mutant != Mutant::HitIgnoresFill;
                if valid != 0 && !filling {
                    let from = self.layout.buffer(hdr) + span.off;
                    self.nic.local().copy_from(app + span.off, self.nic.local(), from, span.len);
                    w.nic.cpu(self.copy_ns_for(span.len)).await;
                    return Ok(Event::ReadHit);
                }
                if valid == 0 {
                    break;
                }
                // Another local thread is filling the buffer (spec §9.7): wait for it.
                w.nic.sleep(Nanos(self.config.cpu.poll_ns)).await;
            }
            self.miss(w, hdr, key).await?;
            Ok(Event::ReadMiss)
        }
        .await;
        self.unpin(hdr);
        self.leave();
        Ok(self.sample(r?, w.nic.now().0 - start.0))
    }

    async fn fetch(&self, w: &Worker<N>, key: u64, local: u64) -> ProtocolResult<()> {
        self.fetch_span(w, key, local, self.whole()).await
    }

    /// READ bytes `span` of object `key` to the same bytes of the object buffer at `local`.
    async fn fetch_span(&self, w: &Worker<N>, key: u64, local: u64, span: Span) -> ProtocolResult<()> {
        let remote = self.layout.object(key).add(span.off);
        let read = Verb::Read { remote, local_bytes: local + span.off, len_bytes: span.len as u32 };
        w.nic.try_batch(&[read], "fetch object").await.map(|_| ())
    }

    /// Register as owner, mark valid, fetch (L2-L5), then install if nothing re-validated or
    /// invalidated the header meanwhile ([CHOICE]: the ticket in VALID, see NEEDS.md).
    async fn miss(&self, w: &Worker<N>, hdr: u32, key: u64) -> ProtocolResult<()> {
        let fetched = self.layout.fetch_buffer(w.thread);
        let owner_first = self.owner_sets && self.config.mutant != Mutant::OwnerBitAfterFetch;
        if owner_first {
            self.register_owner(w, key).await?;
        }
        let ticket = self.tickets.fetch_add(1, Relaxed);
        let early = self.config.mutant != Mutant::ValidAfterFetch;
        if early {
            self.store(hdr, HDR_VALID, ticket);
        }
        w.nic.mark("difache miss valid", key);
        self.add(hdr, HDR_FILL, 1);
        let r = self.fetch_checking_owner(w, key, fetched, owner_first).await;
        let still_owner = match r {
            Ok(owner) => owner,
            Err(e) => {
                // The fetch failed (a memory node is down): no buffer behind our ticket.
                self.nic.local().cas_local(self.layout.header(hdr) + HDR_VALID, ticket, 0);
                self.add(hdr, HDR_FILL, u64::MAX);
                return Err(e);
            }
        };
        if self.owner_sets && !owner_first {
            self.register_owner(w, key).await?;
        }
        if !early {
            self.store(hdr, HDR_VALID, ticket);
        }
        if !still_owner {
            // A writer collected our bit between the owner-set insert and VALID: its
            // invalidation may have landed before VALID and no later writer would see us.
            self.nic.local().cas_local(self.layout.header(hdr) + HDR_VALID, ticket, 0);
            self.stats().owner_rechecks_lost += 1;
        }
        let valid = self.load(hdr, HDR_VALID);
        if valid == ticket || (valid != 0 && self.config.mutant == Mutant::InstallIgnoresTicket) {
            w.nic.mark("difache miss install", key);
            self.nic.local().copy_from(
                self.layout.buffer(hdr),
                self.nic.local(),
                fetched,
                self.layout.object_bytes,
            );
        }
        self.add(hdr, HDR_FILL, u64::MAX);
        self.nic.local().copy_from(
            self.layout.app_buffer(w.thread),
            self.nic.local(),
            fetched,
            self.layout.object_bytes,
        );
        w.nic.cpu(self.copy_ns()).await;
        Ok(())
    }

    /// Fetch the object; in owner-set mode the same doorbell batch re-reads the owner set
    /// after the object ([CHOICE], see NEEDS.md "owner-set recheck"). Returns whether our bit
    /// is still set (always true without owner sets or with the paper's literal order).
    async fn fetch_checking_owner(
        &self,
        w: &Worker<N>,
        key: u64,
        local: u64,
        owner_first: bool,
    ) -> ProtocolResult<bool> {
        let recheck = self.owner_sets && owner_first && self.config.mutant != Mutant::PaperOwnerOrder;
        if !recheck {
            self.fetch(w, key, local).await?;
            return Ok(true);
        }
        let object = Verb::Read {
            remote: self.layout.object(key),
            local_bytes: local,
            len_bytes: self.layout.object_bytes as u32,
        };
        let word = self.layout.owner_buffer(w.thread);
        let owner = Verb::Read { remote: self.layout.owner_set(key), local_bytes: word, len_bytes: 8 };
        w.nic.try_batch(&[object, owner], "fetch object and owner set").await?;
        Ok(self.nic.local().load(word) >> (self.me % 64) & 1 != 0)
    }

    /// Set this CN's bit in the object's owner set (a RACE lookup READ, then CAS until it sticks).
    async fn register_owner(&self, w: &Worker<N>, key: u64) -> ProtocolResult<()> {
        let set = self.layout.owner_set(key);
        let local = self.layout.owner_buffer(w.thread);
        w.nic
            .try_batch(&[Verb::Read { remote: set, local_bytes: local, len_bytes: 8 }], "owner-set lookup")
            .await?;
        let mut cur = self.nic.local().load(local);
        let bit = 1u64 << (self.me % 64);
        if self.config.mutant == Mutant::OwnerBitByWrite {
            return w.nic.try_write_word(set, cur | bit, "owner-set insert").await;
        }
        loop {
            let seen = w.nic.try_cas(set, cur, cur | bit, "owner-set insert").await?;
            if seen == cur {
                return Ok(());
            }
            self.stats().owner_cas_retries += 1;
            cur = seen;
        }
    }

    /// Write the thread's application buffer to object `key` (the caller holds the
    /// application's lock on it).
    pub async fn write(&self, w: &Worker<N>, key: u64) -> ProtocolResult<Event> {
        self.write_span(w, key, self.whole()).await
    }

    /// Write bytes `span` of the worker's application buffer to the same bytes of object `key`
    /// (the caller holds the application's lock on them); invalidation is the whole object's.
    pub(super) async fn write_span(&self, w: &Worker<N>, key: u64, span: Span) -> ProtocolResult<Event> {
        let app = self.layout.app_buffer(w.thread);
        let start = w.nic.now();
        if self.config.variant.centralized() {
            assert!(span == self.whole(), "CMCache writes whole objects (the plan refuses parts)");
            let event = super::cmcache::write(self, w, key).await?;
            return Ok(self.sample(event, w.nic.now().0 - start.0));
        }
        if !self.config.variant.caches() {
            self.flush_span(w, key, app, span).await?;
            return Ok(self.sample(Event::WriteBypass, w.nic.now().0 - start.0));
        }
        let Some(hdr) = self.enter_header(w, key).await? else {
            return self.write_disabled(w, key, span, start).await;
        };
        if let Some(t) = &self.tracker {
            t.begin(key);
        }
        let r: ProtocolResult<Event> = async {
            let st = self.check_mode(w, hdr, key, false).await?;
            if st & MODE_ON == 0 {
                self.flush_span(w, key, app, span).await?;
                // A switch to on that began after our check may have let a CN cache the old
                // value: invalidate as a cached write would ([CHOICE], spec §9.6).
                let recheck = self.config.mutant != Mutant::BypassWriteNoRecheck;
                if recheck && self.load(hdr, HDR_MODE) != st {
                    self.stats().bypass_rechecks += 1;
                    self.invalidate_owners(w, key, span).await?;
                    // Our own CN's copy too: a local miss may have fetched before the flush.
                    self.store(hdr, HDR_VALID, 0);
                }
                return Ok(Event::WriteBypass);
            }
            if self.config.mutant == Mutant::InvalidateBeforeFlush {
                self.invalidate_owners(w, key, span).await?;
                self.flush_span(w, key, app, span).await?;
            } else if self.config.mutant == Mutant::BatchInvalidateWithFlush
                && w.thread > self.layout.threads as u32
            {
                // A batch lane posting its invalidations beside its flush, not after it.
                let (flushed, invalidated) = crate::sync::join(
                    self.flush_span(w, key, app, span),
                    self.invalidate_owners(w, key, span),
                )
                .await;
                flushed?;
                invalidated?;
            } else {
                self.flush_span(w, key, app, span).await?;
                if self.config.variant.coherent() {
                    self.invalidate_owners(w, key, span).await?;
                }
            }
            if span != self.whole() {
                return Ok(self.after_part_write(w, hdr, key, span).await);
            }
            // Write-allocate: the writer keeps the new value ([CHOICE], spec §9.9).
            let ticket = self.tickets.fetch_add(1, Relaxed);
            self.store(hdr, HDR_VALID, ticket);
            w.nic.mark("difache write install", key);
            self.nic.local().copy_from(
                self.layout.buffer(hdr),
                self.nic.local(),
                app,
                self.layout.object_bytes,
            );
            w.nic.cpu(self.copy_ns()).await;
            Ok(Event::WriteCached)
        }
        .await;
        // A write that failed at a crashed memory node stays in flight forever (its flush may
        // have landed and its invalidations not).
        if let (Some(t), true) = (&self.tracker, r.is_ok() || !self.config.node_restarts) {
            t.end(key);
        }
        self.unpin(hdr);
        self.leave();
        Ok(self.sample(r?, w.nic.now().0 - start.0))
    }

    /// A write while caching is disabled (a CN-list sync): flush, then invalidate the live CNs
    /// as a cached write would — some may not have disabled caching yet — and keep no copy.
    async fn write_disabled(
        &self,
        w: &Worker<N>,
        key: u64,
        span: Span,
        start: Nanos,
    ) -> ProtocolResult<Event> {
        let app = self.layout.app_buffer(w.thread);
        self.update_uncached(w, key, self.flush_span(w, key, app, span)).await?;
        Ok(self.sample(Event::WriteBypass, w.nic.now().0 - start.0))
    }

    /// An update (`op`: a flush, or an atomic) outside the cache: run it, then invalidate the
    /// live CNs — some may not have disabled caching yet — and this CN's own copy, tracked as
    /// a write in flight.
    pub(super) async fn update_uncached<T>(
        &self,
        w: &Worker<N>,
        key: u64,
        op: impl std::future::Future<Output = ProtocolResult<T>>,
    ) -> ProtocolResult<T> {
        if let Some(t) = &self.tracker {
            t.begin(key);
        }
        self.bypass_writes.fetch_add(1, Relaxed);
        let r = async {
            let out = op.await?;
            self.invalidate_owners(w, key, self.whole()).await?;
            // This CN's own copy too, until the sync drops it.
            if let Some(h) = index::lookup_local(self.nic.local(), key, self.layout.index_buckets) {
                self.store(h, HDR_VALID, 0);
            }
            Ok(out)
        }
        .await;
        self.bypass_writes.fetch_sub(1, Relaxed);
        if let (Some(t), true) = (&self.tracker, r.is_ok() || !self.config.node_restarts) {
            t.end(key);
        }
        r
    }

    /// WRITE bytes `span` of the object buffer at `local` to the same bytes of object `key`.
    async fn flush_span(&self, w: &Worker<N>, key: u64, local: u64, span: Span) -> ProtocolResult<()> {
        let remote = self.layout.object(key).add(span.off);
        let write = Verb::Write { remote, local_bytes: local + span.off, len_bytes: span.len as u32 };
        w.nic.try_batch(&[write], "flush object").await.map(|_| ())
    }

    /// Collect the owners (every other CN, or the owner set reset to `{me}`) and clear VALID of
    /// their headers with one-sided WRITEs (L11-L12). A write of part of the object (`span`
    /// not whole: nested) reads the owner set and leaves it as it is ([CHOICE]): writers of
    /// other parts may collect concurrently, and a reset would hand the CNs it removed to a
    /// writer still invalidating them, so a second writer could return before the copies its
    /// flush made stale are gone (found by the fuzzer: `fuzz-batch.json`; mutant
    /// `nested-write-resets-owners`). Bits then leave the set only at whole-object writes,
    /// which hold the whole object.
    async fn invalidate_owners(&self, w: &Worker<N>, key: u64, span: Span) -> ProtocolResult<()> {
        let reset = span == self.whole() || self.config.mutant == Mutant::NestedWriteResetsOwners;
        let mut targets = if self.owner_sets {
            let set = self.layout.owner_set(key);
            let local = self.layout.owner_buffer(w.thread);
            w.nic
                .try_batch(
                    &[Verb::Read { remote: set, local_bytes: local, len_bytes: 8 }],
                    "owner-set lookup",
                )
                .await?;
            let mut cur = self.nic.local().load(local);
            // The writer stays in the set ([CHOICE]): its own CN's readers may hold copies too.
            let mine = 1u64 << (self.me % 64);
            if let Some(t) = &self.tracker {
                t.collecting(key);
            }
            if reset {
                loop {
                    let seen = w.nic.try_cas(set, cur, mine, "owner-set collect").await?;
                    if seen == cur {
                        break;
                    }
                    self.stats().owner_cas_retries += 1;
                    cur = seen;
                }
            }
            w.nic.mark("difache collected", cur);
            let owners: Vec<usize> =
                self.others().into_iter().filter(|&c| cur >> (c % 64) & 1 != 0).collect();
            if let Some(t) = &self.tracker {
                t.pending(key, &owners);
            }
            owners
        } else {
            self.others()
        };
        if self.config.mutant == Mutant::InvalidateFirstOwnerOnly {
            targets.truncate(1);
        }
        let results = join_all(
            targets
                .iter()
                .map(|&c| async move {
                    if let Some(h) = self.lookup_remote(w, c, key).await? {
                        let valid = RemoteAddr::new(self.layout.cn(c), self.layout.header(h) + HDR_VALID);
                        w.nic.try_batch(&[Verb::WriteWord { remote: valid, value: 0 }], "invalidate").await?;
                        self.stats().invalidations += 1;
                    }
                    if let Some(t) = &self.tracker {
                        t.done(key, c);
                    }
                    Ok::<_, crate::common::error::ProtocolError>(())
                })
                .collect(),
        )
        .await;
        results.into_iter().collect()
    }
}
