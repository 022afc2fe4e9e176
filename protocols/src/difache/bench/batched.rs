//! Batched and nested operations of the micro-benchmark (`workload.batch`, `workload.parts`),
//! as a transaction engine issues them (§4.5): an operation touches `batch` distinct
//! registers — an object, or one part of a nested object, each with its own lock and version
//! `[part_tag, stamp, stamp, …]`. A read reads them all with one batched call and validates
//! each; a write takes their locks in register order (no deadlock between clients), reads
//! them with one batched call, writes them with another, and unlocks. A batch of more than 16
//! (8 with owner sets) goes in several calls, each after the one before (`Cache::batch_window`:
//! the QP's outstanding READs), as FORD's transactions do. The history logs one operation per register (register `key * parts + part`).

use rand_chacha::rand_core::Rng;

use crate::common::bench::write_stamp;
use crate::common::error::ProtocolResult;
use crate::harness::{LoggedOp, OpLog};
use crate::nic::{Nanos, Nic, RemoteAddr};
use crate::workload::zipf::Zipf;

use super::super::cache::{Cache, Span, Worker};
use super::super::config::Workload;
use super::super::layout::part_tag;
use super::{draw_rank, lock_app, lock_held, log_write, record, track, unlock, version_stamp};

/// What the operation draws its further registers from (the client's generator).
pub struct Draw<'a, R: Rng> {
    pub rng: &'a mut R,
    pub zipf: Option<&'a Zipf>,
    pub workload: &'a Workload,
}

impl<R: Rng> Draw<'_, R> {
    fn part(&mut self) -> u64 {
        let parts = self.workload.parts.max(1) as u64;
        if parts == 1 {
            0
        } else {
            self.rng.next_u64() % parts
        }
    }

    /// `first`'s register (a part drawn for it), then further distinct ones up to the batch.
    fn registers(&mut self, first: u64) -> Vec<(u64, u64)> {
        let mut out = vec![(first, self.part())];
        while out.len() < self.workload.batch.max(1) as usize {
            let key = draw_rank(self.rng, self.zipf, self.workload.objects);
            let reg = (key, self.part());
            if !out.contains(&reg) {
                out.push(reg);
            }
        }
        out
    }
}

/// One batched or nested operation on the registers drawn from `first`.
pub async fn op<N: Nic, R: Rng>(
    cache: &Cache<N>,
    w: &Worker<N>,
    mut draw: Draw<'_, R>,
    first: u64,
    read: bool,
    sequence: &mut u64,
    log: &Option<(OpLog, u32)>,
) -> ProtocolResult<()> {
    let mut regs = draw.registers(first);
    if read {
        return reads(cache, w, &regs, log).await;
    }
    // Locks in register order, so two writers never wait for each other's in a cycle.
    regs.sort_unstable();
    let spans = spans(cache, &regs);
    let stamps: Vec<u64> = regs
        .iter()
        .map(|_| {
            *sequence += 1;
            write_stamp(cache.nic.node(), w.thread, *sequence)
        })
        .collect();
    let mut locks: Vec<RemoteAddr> = Vec::with_capacity(regs.len());
    for (&(key, part), &stamp) in regs.iter().zip(&stamps) {
        locks.push(lock_app(cache, w, key, part, stamp).await?);
    }
    let held_from = w.nic.now().0;
    reads(cache, w, &regs, log).await?;
    // Written `batch_window` at a time, as read (the first group's lanes are reused).
    let window = cache.batch_window();
    let pb = cache.layout.part_bytes();
    for ((group, stamps), spans) in regs.chunks(window).zip(stamps.chunks(window)).zip(spans.chunks(window)) {
        let mut logged = Vec::with_capacity(group.len());
        for (i, (&(key, part), &stamp)) in group.iter().zip(stamps).enumerate() {
            let mut words = vec![stamp; (pb / 8) as usize];
            words[0] = part_tag(key, part);
            let lane = cache.layout.lane(w.thread, i);
            cache.nic.local().write_words(cache.layout.app_buffer(lane) + part * pb, &words);
            logged.push(log_write(w, register(cache, key, part), stamp, log));
        }
        let events = cache.write_batch(w, spans).await?;
        let done = w.nic.now().0;
        for (&(key, _), event) in group.iter().zip(events) {
            track(cache, w, key, event);
        }
        if let Some((l, _)) = log {
            let mut ops = l.lock();
            for i in logged.into_iter().flatten() {
                ops[i].return_ns = Some(done);
            }
        }
    }
    lock_held(cache, w, regs[0].0, held_from);
    for lock in locks {
        unlock(cache, w, lock, false).await?;
    }
    Ok(())
}

/// Read `regs` with batched calls of at most `Cache::batch_window` elements (the QP's
/// outstanding READs), each group after the one before; `logged_reads` per group.
async fn reads<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    regs: &[(u64, u64)],
    log: &Option<(OpLog, u32)>,
) -> ProtocolResult<()> {
    for group in regs.chunks(cache.batch_window()) {
        logged_reads(cache, w, group, &spans(cache, group), log).await?;
    }
    Ok(())
}

pub(super) fn register<N: Nic>(cache: &Cache<N>, key: u64, part: u64) -> u64 {
    key * cache.layout.parts + part
}

pub(super) fn spans<N: Nic>(cache: &Cache<N>, regs: &[(u64, u64)]) -> Vec<(u64, Span)> {
    let pb = cache.layout.part_bytes();
    regs.iter().map(|&(key, part)| (key, Span { off: part * pb, len: pb })).collect()
}

/// Read every register with one batched call, then alone again each one that was torn
/// (another tag, or two stamps) until whole; log each read; return the stamps seen.
pub(super) async fn logged_reads<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    regs: &[(u64, u64)],
    spans: &[(u64, Span)],
    log: &Option<(OpLog, u32)>,
) -> ProtocolResult<Vec<u64>> {
    let invoke = w.nic.now().0;
    let events = cache.read_batch(w, spans).await?;
    let returned = w.nic.now().0;
    let mut seen = Vec::with_capacity(regs.len());
    for (i, ((&(key, part), &(_, span)), event)) in regs.iter().zip(spans).zip(events).enumerate() {
        track(cache, w, key, event);
        let lane = cache.lane(w, i);
        let mut at = returned;
        let stamp = loop {
            if let Some(stamp) = whole(cache, &lane, key, part, span) {
                break stamp;
            }
            cache.stats.lock().unwrap_or_else(|e| e.into_inner()).validation_retries += 1;
            w.nic.sleep(Nanos(cache.config.cpu.poll_ns)).await;
            let event = cache.read_nested(&lane, key, span).await?;
            track(cache, w, key, event);
            at = w.nic.now().0;
        };
        let client = log.as_ref().map_or(0, |l| l.1);
        let key = register(cache, key, part);
        record(
            log,
            LoggedOp { client, key, write: None, seen: Some(stamp), invoke_ns: invoke, return_ns: Some(at) },
        );
        seen.push(stamp);
    }
    Ok(seen)
}

/// The stamp of the part `span` in `lane`'s application buffer, if it is one whole version.
fn whole<N: Nic>(cache: &Cache<N>, lane: &Worker<N>, key: u64, part: u64, span: Span) -> Option<u64> {
    let mut buf = vec![0u64; (span.len / 8) as usize];
    cache.nic.local().read_words(cache.layout.app_buffer(lane.thread) + span.off, &mut buf);
    version_stamp(&buf, part_tag(key, part))
}
