//! FORD's transactions over the cache (DiFache §6.1 "Transaction engine", Fig. 14 bottom):
//! `workload.transactions`. DiFache's integration "only involves replacing the remote access
//! functions with DiFache APIs", so each client runs FORD's protocol (FAST '22; facts from the
//! authors' code, `protocols/src/difache/NEEDS.md` "FORD") with every object READ and WRITE
//! going through the cache's batched calls and FORD's locks staying one-sided atomics:
//!
//! * **Execution.** A read-write transaction first CASes the lock of every object it writes
//!   (no-wait: any CAS that finds the lock held aborts it; FORD posts each CAS in one doorbell
//!   with the item's READ, which the cache cannot join). Then every object is read with the
//!   cache's batched calls (FORD: one READ per item, all posted before one yield).
//! * **Undo log.** The old images of the written objects go to the client's log on every memory
//!   node before the commit writes (FORD awaits them there).
//! * **Validation** (skipped for a read-only transaction of one object, as FORD's `TxCommit`):
//!   the locks of the read-only objects are READ, then their versions read again through the
//!   cache; a lock held or a version changed aborts (FORD checks the versions only: see below).
//! * **Commit.** New versions (read version + 1) are written with one batched call — flush to
//!   the memory node, then invalidate the other compute nodes' copies — and the locks are
//!   released by WRITEs of 0 (FORD posts them unsignaled; see [`release`]).
//!
//! An aborted transaction is dropped and the client draws a new one (FORD's worker loop).
//!
//! Why validation reads the locks, which FORD's does not. FORD keeps its lock word in the item,
//! and a commit makes the item *invisible* before writing it, so a reader of a half-committed
//! write set aborts on the bit it fetched with the item. Here the lock is the object's separate
//! application lock ([CHOICE], as DiFache's micro-benchmark keeps them): a lock word inside a
//! cached object is read stale from a copy, and FORD's lock CAS is not serialized with the
//! holder's writes, which the cache's atomic requires (the fuzzer found owner sets corrupted
//! when the lock lived in the object under noAC; NEEDS.md "FORD"). A cached read cannot see a
//! separate lock, so validation READs it, then re-reads the version through the cache. And the
//! lock check is needed anyway, with or without a cache: FORD's `IssueRemoteValidate` READs only
//! the versions of read-only items, but a transaction T that holds locks may already have
//! validated — its serialization point — and write later. Two read-write transactions that
//! each read what the other writes both pass (write skew), and a read-only reader can see T's
//! older version of b with a newer version of a written after T validated a: a dependency
//! cycle (found by the fuzzer on the authors' rule: mutant `ford-artifact-validation`). With the
//! lock READ first: a reader that saw b older and locked aborts, one that saw it unlocked read
//! it after T's unlock, which follows T's writes, so its version re-read sees T's. In FORD's
//! item the version (byte 32) and the lock (byte 40) are one 16-byte READ, so the check would
//! cost FORD nothing more. Mutant `ford-early-unlock` clears the locks while the new images are
//! still being written.

use rand_chacha::rand_core::Rng;

use crate::common::bench::write_stamp;
use crate::common::error::{NicExt, ProtocolResult};
use crate::harness::OpLog;
use crate::nic::{Nic, Verb};
use crate::sync::join_all;
use crate::txn::engine::TxnRecord;
use crate::workload::zipf::{unit_f64, Zipf};

use super::super::cache::{Cache, Span, Worker};
use super::super::config::{Transactions, Workload};
use super::super::layout::object_tag;
use super::super::mutants::Mutant;
use super::batched::{logged_reads, register, spans};
use super::{draw_rank, log_write};

/// How one transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Committed, having accessed this many objects.
    Committed { objects: u64, read_write: bool },
    /// A lock of its write set was held by another transaction (execution, no-wait).
    LockAbort,
    /// A read-only object was locked or changed by validation.
    ValidationAbort,
}

/// What the client draws its transactions from.
pub struct Draw<'a, R: Rng> {
    pub rng: &'a mut R,
    pub zipf: Option<&'a Zipf>,
    pub workload: &'a Workload,
    pub spec: &'a Transactions,
}

impl<R: Rng> Draw<'_, R> {
    /// Distinct objects (popularity as the micro-benchmark's) and how many of the first ones
    /// are written (0: read-only).
    pub fn transaction(&mut self) -> (Vec<u64>, usize) {
        let n = 1 + (self.rng.next_u64() % self.spec.max_objects as u64) as usize;
        let read_only = unit_f64(self.rng.next_u64()) < self.spec.read_only_ratio;
        let writes = if read_only {
            0
        } else {
            1 + (self.rng.next_u64() % self.spec.max_writes.min(n as u32) as u64) as usize
        };
        let mut keys: Vec<u64> = Vec::with_capacity(n);
        while keys.len() < n {
            let key = draw_rank(self.rng, self.zipf, self.workload.objects);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        (keys, writes)
    }
}

/// One transaction by client `w` on `keys`, writing the first `writes` of them; `sequence`
/// numbers its lock owners and transaction ids; `record` keeps it for the serializability check.
pub async fn transaction<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    (keys, writes): (Vec<u64>, usize),
    sequence: &mut u64,
    log: &Option<(OpLog, u32)>,
    record: bool,
) -> ProtocolResult<Outcome> {
    let mut dtx = Dtx::begin(cache, w, sequence);
    let (write_set, read_set) = keys.split_at(writes);
    if dtx.execute(cache, w, read_set, write_set, log).await?.is_none() {
        return Ok(Outcome::LockAbort);
    }
    dtx.commit(cache, w, log, record).await
}

/// A FORD transaction in flight: its read-only set and its read-write set (locked), each
/// object with the version it read.
pub struct Dtx {
    pub id: u64,
    read_only: Vec<(u64, u64)>,
    read_write: Vec<(u64, u64)>,
}

impl Dtx {
    pub fn begin<N: Nic>(cache: &Cache<N>, w: &Worker<N>, sequence: &mut u64) -> Dtx {
        *sequence += 1;
        let id = write_stamp(cache.nic.node(), w.thread, *sequence);
        Dtx { id, read_only: Vec::new(), read_write: Vec::new() }
    }

    /// Objects accessed so far (both sets).
    pub fn objects(&self) -> u64 {
        (self.read_only.len() + self.read_write.len()) as u64
    }

    /// One execution round (FORD's `TxExe`): lock `read_write` (no-wait), then read
    /// `read_only` and `read_write`; their versions. `None`: a lock was held by another
    /// transaction, and this one has released every lock it held (a lock abort).
    pub async fn execute<N: Nic>(
        &mut self,
        cache: &Cache<N>,
        w: &Worker<N>,
        read_only: &[u64],
        read_write: &[u64],
        log: &Option<(OpLog, u32)>,
    ) -> ProtocolResult<Option<(Vec<u64>, Vec<u64>)>> {
        let held = lock_all(cache, w, read_write, self.id).await?;
        if held.iter().any(|h| !h) {
            let mine: Vec<u64> = read_write.iter().zip(&held).filter(|(_, &h)| h).map(|(&k, _)| k).collect();
            self.release(cache, w, &mine).await?;
            return Ok(None);
        }
        let ro = reads(cache, w, read_only, log).await?;
        let rw = reads(cache, w, read_write, log).await?;
        self.read_only.extend(read_only.iter().copied().zip(ro.iter().copied()));
        self.read_write.extend(read_write.iter().copied().zip(rw.iter().copied()));
        Ok(Some((ro, rw)))
    }

    /// Drop the last `n` objects of the read-only set: reads FORD issues with `fail_abort`
    /// off and removes when the key is absent (`RemoveLastROItem`); they are not validated.
    pub fn forget_read_only(&mut self, n: usize) {
        self.read_only.truncate(self.read_only.len().saturating_sub(n));
    }

    async fn release<N: Nic>(&self, cache: &Cache<N>, w: &Worker<N>, mine: &[u64]) -> ProtocolResult<()> {
        let mut all: Vec<u64> = self.read_write.iter().map(|&(k, _)| k).collect();
        all.extend_from_slice(mine);
        all.sort_unstable();
        all.dedup();
        release(cache, w, &all).await
    }

    /// Undo log, validation of the read-only set, the new versions (read version + 1) through
    /// the cache, then the locks released. `record` keeps the transaction for the
    /// serializability check.
    pub async fn commit<N: Nic>(
        self,
        cache: &Cache<N>,
        w: &Worker<N>,
        log: &Option<(OpLog, u32)>,
        record: bool,
    ) -> ProtocolResult<Outcome> {
        let write_set: Vec<u64> = self.read_write.iter().map(|&(k, _)| k).collect();
        let read_keys: Vec<u64> = self.read_only.iter().map(|&(k, _)| k).collect();
        let read_versions: Vec<u64> = self.read_only.iter().map(|&(_, v)| v).collect();
        if !write_set.is_empty() {
            undo_log(cache, w, &self.read_write, self.id).await?;
        }

        // Validation (FORD skips it for a read-only transaction of one object).
        let validate = read_keys.len() > 1 || (read_keys.len() == 1 && !write_set.is_empty());
        if validate && !validated(cache, w, &read_keys, &read_versions).await? {
            release(cache, w, &write_set).await?;
            return Ok(Outcome::ValidationAbort);
        }

        // Commit: the new versions through the cache, `batch_window` at a time, then the locks
        // released (`release`).
        let mut installed = Vec::with_capacity(write_set.len());
        let words = (cache.layout.object_bytes / 8) as usize;
        for group in self.read_write.chunks(cache.batch_window()) {
            let mut logged = Vec::with_capacity(group.len());
            for (i, &(key, v)) in group.iter().enumerate() {
                let mut image = vec![v + 1; words];
                image[0] = object_tag(key);
                let lane = cache.layout.lane(w.thread, i);
                cache.nic.local().write_words(cache.layout.app_buffer(lane), &image);
                logged.push(log_write(w, register(cache, key, 0), v + 1, log));
                installed.push((key, v + 1));
            }
            let write_regs: Vec<(u64, u64)> = group.iter().map(|&(k, _)| (k, 0)).collect();
            let write_spans = spans(cache, &write_regs);
            let images = cache.write_batch(w, &write_spans);
            if cache.config.mutant == Mutant::FordEarlyUnlock {
                let keys: Vec<u64> = group.iter().map(|&(k, _)| k).collect();
                let (written, unlocked) = crate::sync::join(images, release(cache, w, &keys)).await;
                written?;
                unlocked?;
            } else {
                images.await?;
            }
            let done = w.nic.now().0;
            if let Some((l, _)) = log {
                let mut ops = l.lock();
                for i in logged.into_iter().flatten() {
                    ops[i].return_ns = Some(done);
                }
            }
        }
        if cache.config.mutant != Mutant::FordEarlyUnlock {
            release(cache, w, &write_set).await?;
        }
        if record {
            let reads = self.read_only.iter().chain(&self.read_write).copied().collect();
            cache.stats().txns.push(TxnRecord { id: self.id, reads, writes: installed });
        }
        Ok(Outcome::Committed { objects: self.objects(), read_write: !write_set.is_empty() })
    }
}

/// The most READs and atomics one client keeps outstanding on its QP: the NIC's
/// `max_rd_atomic` (16 on ConnectX-3/4/5, the profiles' `qp_outstanding_max`). A transaction's
/// objects go through the cache's batched calls this many at a time — half as many with owner
/// sets, where a miss keeps two READs outstanding (`Cache::batch_window`) — ([CHOICE]: FORD
/// posts all of a set's READs before one yield and the NIC pipelines them 16 deep; here each
/// group waits for the previous one).
pub const QP_WINDOW: usize = 16;

/// Read `keys` (validated, logged) through the cache's batched calls, `Cache::batch_window` at a time;
/// their versions.
async fn reads<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    keys: &[u64],
    log: &Option<(OpLog, u32)>,
) -> ProtocolResult<Vec<u64>> {
    let mut out = Vec::with_capacity(keys.len());
    for group in keys.chunks(cache.batch_window()) {
        let regs: Vec<(u64, u64)> = group.iter().map(|&k| (k, 0)).collect();
        out.extend(logged_reads(cache, w, &regs, &spans(cache, &regs), log).await?);
    }
    Ok(out)
}

/// CAS every lock of `keys` from free to `owner`, [`QP_WINDOW`] posted together at a time;
/// whether each was taken.
async fn lock_all<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    keys: &[u64],
    owner: u64,
) -> ProtocolResult<Vec<bool>> {
    let mut out = Vec::with_capacity(keys.len());
    for group in keys.chunks(QP_WINDOW) {
        let cases =
            group.iter().map(|&key| w.nic.try_cas(cache.layout.app_lock(key, 0), 0, owner, "FORD lock"));
        for r in join_all(cases.collect()).await {
            // `owner` is unique: only this CAS, run a second time, can find it.
            out.push(r.map(|old| old == 0 || cache.cas_replayed(w, old == owner, "FORD lock"))?);
        }
    }
    Ok(out)
}

/// Release the locks of `keys` (held by this transaction): one WRITE of 0 each, [`QP_WINDOW`]
/// posted together at a time. FORD posts them unsignaled and never waits ([CHOICE] here they
/// are awaited: an unsignaled WRITE holds a slot of the QP's 16 until it completes, and the
/// next transaction's group of 16 READs would overflow it; this adds one round trip to
/// read-write transactions only). The authors' abort also "releases" locks whose CAS failed,
/// i.e. another transaction's; not reproduced (NEEDS.md "FORD").
async fn release<N: Nic>(cache: &Cache<N>, w: &Worker<N>, keys: &[u64]) -> ProtocolResult<()> {
    for group in keys.chunks(QP_WINDOW) {
        let unlocks =
            group.iter().map(|&key| w.nic.try_write_word(cache.layout.app_lock(key, 0), 0, "FORD unlock"));
        join_all(unlocks.collect()).await.into_iter().collect::<ProtocolResult<()>>()?;
    }
    Ok(())
}

/// The undo log: a record header and the old image of each locked object (`read_write`, with
/// the versions read) to this client's log on every memory node, awaited; the images go
/// through the client's lanes, [`QP_WINDOW`] WRITEs per memory node at a time (the header
/// rides with the first group).
async fn undo_log<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    read_write: &[(u64, u64)],
    id: u64,
) -> ProtocolResult<()> {
    let layout = &cache.layout;
    let cn = layout.cn_index(cache.nic.node());
    let words = (layout.object_bytes / 8) as usize;
    // The first group shares its window with the header.
    let mut first = 0;
    while first < read_write.len() {
        let n = if first == 0 { QP_WINDOW - 1 } else { QP_WINDOW }.min(read_write.len() - first);
        let mut verbs = Vec::with_capacity((n + 1) * layout.memory_nodes as usize);
        for (i, &(key, v)) in read_write[first..first + n].iter().enumerate() {
            let mut image = vec![v; words];
            image[0] = object_tag(key);
            cache.nic.local().write_words(layout.app_buffer(layout.lane(w.thread, i)), &image);
        }
        for mn in 0..layout.memory_nodes {
            let at = layout.undo_log(mn, cn, w.thread);
            if first == 0 {
                verbs.push(Verb::WriteWord { remote: at, value: id });
            }
            for i in 0..n {
                let local_bytes = layout.app_buffer(layout.lane(w.thread, i));
                let remote = at.add(16 + (first + i) as u64 * layout.object_bytes);
                verbs.push(Verb::Write { remote, local_bytes, len_bytes: layout.object_bytes as u32 });
            }
        }
        w.nic.try_batches_by_target(&verbs, "FORD undo log").await?;
        first += n;
    }
    Ok(())
}

/// FORD's validation of the read-only objects, `Cache::batch_window` at a time: none locked (one
/// 8-byte READ each, posted together), then each one's version read again through the cache
/// and unchanged.
async fn validated<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    keys: &[u64],
    versions: &[u64],
) -> ProtocolResult<bool> {
    // The version word (after the tag) of each object; CMCache moves whole objects only.
    let span = if cache.config.variant.centralized() { cache.whole() } else { Span { off: 0, len: 16 } };
    let window = cache.batch_window();
    for (group, seen) in keys.chunks(window).zip(versions.chunks(window)) {
        if cache.config.mutant != Mutant::FordArtifactValidation {
            let reads = group.iter().enumerate().map(|(i, &key)| {
                let local_bytes = cache.layout.owner_buffer(cache.layout.lane(w.thread, i));
                let verb = [Verb::Read { remote: cache.layout.app_lock(key, 0), local_bytes, len_bytes: 8 }];
                async move { w.nic.try_batch(&verb, "FORD validation lock read").await.map(|_| local_bytes) }
            });
            for at in join_all(reads.collect()).await {
                if cache.nic.local().load(at?) != 0 {
                    return Ok(false);
                }
            }
        }
        let items: Vec<(u64, Span)> = group.iter().map(|&k| (k, span)).collect();
        cache.read_batch(w, &items).await?;
        for (i, (&key, &v)) in group.iter().zip(seen).enumerate() {
            let at = cache.layout.app_buffer(cache.layout.lane(w.thread, i));
            let mut words = [0u64; 2];
            cache.nic.local().read_words(at, &mut words);
            if words != [object_tag(key), v] {
                return Ok(false);
            }
        }
    }
    Ok(true)
}
