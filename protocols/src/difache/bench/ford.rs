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
    *sequence += 1;
    let id = write_stamp(cache.nic.node(), w.thread, *sequence);
    let (write_set, read_set) = keys.split_at(writes);

    // Execution: lock the write set (no-wait), then read every object.
    let locks = lock_all(cache, w, write_set, id).await?;
    if locks.iter().any(|held| !held) {
        release(cache, w, write_set, &locks).await?;
        return Ok(Outcome::LockAbort);
    }
    let read_versions = reads(cache, w, read_set, log).await?;
    let old = reads(cache, w, write_set, log).await?;
    if !write_set.is_empty() {
        undo_log(cache, w, write_set.len(), id).await?;
    }

    // Validation (FORD skips it for a read-only transaction of one object).
    let validate = read_set.len() > 1 || (read_set.len() == 1 && !write_set.is_empty());
    if validate && !validated(cache, w, read_set, &read_versions).await? {
        release(cache, w, write_set, &locks).await?;
        return Ok(Outcome::ValidationAbort);
    }

    // Commit: the new versions through the cache, then the locks released (`release`).
    let mut installed = Vec::with_capacity(write_set.len());
    if !write_set.is_empty() {
        let mut logged = Vec::with_capacity(write_set.len());
        for (i, (&key, &v)) in write_set.iter().zip(&old).enumerate() {
            let words = (cache.layout.object_bytes / 8) as usize;
            let mut image = vec![v + 1; words];
            image[0] = object_tag(key);
            let lane = cache.layout.lane(w.thread, i);
            cache.nic.local().write_words(cache.layout.app_buffer(lane), &image);
            logged.push(log_write(w, register(cache, key, 0), v + 1, log));
            installed.push((key, v + 1));
        }
        let write_regs: Vec<(u64, u64)> = write_set.iter().map(|&k| (k, 0)).collect();
        let write_spans = spans(cache, &write_regs);
        let images = cache.write_batch(w, &write_spans);
        if cache.config.mutant == Mutant::FordEarlyUnlock {
            let (written, unlocked) = crate::sync::join(images, release(cache, w, write_set, &locks)).await;
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
        if cache.config.mutant != Mutant::FordEarlyUnlock {
            release(cache, w, write_set, &locks).await?;
        }
    }
    if record {
        let reads =
            read_set.iter().copied().zip(read_versions).chain(write_set.iter().copied().zip(old)).collect();
        cache.stats().txns.push(TxnRecord { id, reads, writes: installed });
    }
    Ok(Outcome::Committed { objects: keys.len() as u64, read_write: !write_set.is_empty() })
}

/// The most READs and atomics one client keeps outstanding on its QP: the NIC's
/// `max_rd_atomic` (16 on ConnectX-3/4/5, the profiles' `qp_outstanding_max`). A transaction's
/// objects go through the cache's batched calls this many at a time ([CHOICE]: FORD posts all
/// of a set's READs before one yield and the NIC pipelines them 16 deep; here each group of 16
/// waits for the previous one).
pub const QP_WINDOW: usize = 16;

/// Read `keys` (validated, logged) through the cache's batched calls, [`QP_WINDOW`] at a time;
/// their versions.
async fn reads<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    keys: &[u64],
    log: &Option<(OpLog, u32)>,
) -> ProtocolResult<Vec<u64>> {
    let mut out = Vec::with_capacity(keys.len());
    for group in keys.chunks(QP_WINDOW) {
        let regs: Vec<(u64, u64)> = group.iter().map(|&k| (k, 0)).collect();
        out.extend(logged_reads(cache, w, &regs, &spans(cache, &regs), log).await?);
    }
    Ok(out)
}

/// CAS every lock of `keys` from free to `owner`, all posted together; whether each was taken.
async fn lock_all<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    keys: &[u64],
    owner: u64,
) -> ProtocolResult<Vec<bool>> {
    let cases = keys.iter().map(|&key| w.nic.try_cas(cache.layout.app_lock(key, 0), 0, owner, "FORD lock"));
    let seen = join_all(cases.collect()).await;
    seen.into_iter()
        .map(|r| {
            // `owner` is unique: only this CAS, run a second time, can find it.
            r.map(|old| old == 0 || cache.cas_replayed(w, old == owner, "FORD lock"))
        })
        .collect()
}

/// Release the locks this transaction holds (`held[i]` for `keys[i]`): one WRITE of 0 each,
/// posted together. FORD posts them unsignaled and never waits ([CHOICE] here they are
/// awaited: an unsignaled WRITE holds a slot of the QP's 16 until it completes, and the next
/// transaction's group of 16 READs would overflow it; this adds one round trip to read-write
/// transactions only). The authors' abort also "releases" locks whose CAS failed, i.e. another
/// transaction's; not reproduced (NEEDS.md "FORD").
async fn release<N: Nic>(cache: &Cache<N>, w: &Worker<N>, keys: &[u64], held: &[bool]) -> ProtocolResult<()> {
    let unlocks = keys
        .iter()
        .zip(held)
        .filter(|(_, &h)| h)
        .map(|(&key, _)| w.nic.try_write_word(cache.layout.app_lock(key, 0), 0, "FORD unlock"));
    join_all(unlocks.collect()).await.into_iter().collect()
}

/// The undo log: a record header and the old image of each of the `writes` locked objects
/// (read into lanes `0..writes`) to this client's log on every memory node, awaited.
async fn undo_log<N: Nic>(cache: &Cache<N>, w: &Worker<N>, writes: usize, id: u64) -> ProtocolResult<()> {
    let layout = &cache.layout;
    let cn = layout.cn_index(cache.nic.node());
    let mut verbs = Vec::with_capacity((writes + 1) * layout.memory_nodes as usize);
    for mn in 0..layout.memory_nodes {
        let at = layout.undo_log(mn, cn, w.thread);
        verbs.push(Verb::WriteWord { remote: at, value: id });
        for i in 0..writes {
            let local_bytes = layout.app_buffer(layout.lane(w.thread, i));
            let remote = at.add(16 + i as u64 * layout.object_bytes);
            verbs.push(Verb::Write { remote, local_bytes, len_bytes: layout.object_bytes as u32 });
        }
    }
    w.nic.try_batches_by_target(&verbs, "FORD undo log").await
}

/// FORD's validation of the read-only objects, [`QP_WINDOW`] at a time: none locked (one
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
    for (group, seen) in keys.chunks(QP_WINDOW).zip(versions.chunks(QP_WINDOW)) {
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
