//! The synthetic micro-benchmark (§6.3): closed-loop clients on every compute node. "Read
//! operations retrieve the object using a remote read and validate its content using versions.
//! Write operations acquire the lock, retrieve the object, write it back using a remote write,
//! and release the lock." An object version is `[tag(key), stamp, stamp, …]`: a reader that
//! sees another object's tag or two stamps (a torn or recycled buffer) retries, as the paper's
//! version validation does.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use rand_chacha::rand_core::Rng;

use crate::common::bench::write_stamp;
use crate::common::error::{NicExt, ProtocolResult};
use crate::harness::{LoggedOp, OpLog};
use crate::nic::{Nanos, Nic};
use crate::workload::rng_for_thread;
use crate::workload::twitter_trace::{Share, TraceCursor, TraceRecord};
use crate::workload::zipf::{unit_f64, Zipf};

use super::cache::{Cache, Worker};
use super::config::Workload;
use super::layout::object_tag;
use super::profit::Event;
use super::trace;

mod batched;
pub mod ford;
pub mod tpcc;

/// The measured window shared by every client of a run (timed mode): it opens at the first
/// operation that starts at or after `warmup_us` once all clients together have started
/// `warmup_ops_per_object` × `objects` object accesses (operations; a batched call counts its
/// objects), and lasts `measure_us`. Benchmark
/// bookkeeping, not protocol state (every node of the run holds the same one).
#[derive(Debug)]
pub struct Window {
    min_ns: u64,
    ops_needed: u64,
    len_ns: u64,
    started: AtomicU64,
    from_ns: AtomicU64,
}

impl Window {
    pub fn new(workload: &Workload) -> Arc<Window> {
        let min_ns = workload.warmup_us * 1000;
        let ops_needed = workload.warmup_ops_per_object.saturating_mul(workload.objects);
        // Without an operation count the window is fixed: [warmup_us, warmup_us + measure_us].
        let from = if ops_needed == 0 { min_ns } else { u64::MAX };
        Arc::new(Window {
            min_ns,
            ops_needed,
            len_ns: workload.measure_us * 1000,
            started: AtomicU64::new(0),
            from_ns: AtomicU64::new(from),
        })
    }

    /// An operation starts at `now`: is it in the window (opening it if due)?
    pub fn start(&self, now: u64) -> bool {
        self.start_accessing(now, 1)
    }

    /// An operation that accesses `objects` objects (a batched call) starts at `now`: the
    /// warm-up counts object accesses, so batches of any size warm the caches alike.
    pub fn start_accessing(&self, now: u64, objects: u64) -> bool {
        let from = self.from_ns.load(Relaxed);
        if from != u64::MAX {
            return now >= from;
        }
        let started = self.started.fetch_add(objects, Relaxed) + objects;
        if now >= self.min_ns && started > self.ops_needed {
            self.from_ns.store(now, Relaxed);
            return true;
        }
        false
    }

    /// Timed mode (`workload.measure_us` > 0): operations count only in the window.
    pub fn timed(&self) -> bool {
        self.len_ns > 0
    }

    /// Has the window opened by `now`?
    pub fn opened(&self, now: u64) -> bool {
        now >= self.from_ns.load(Relaxed)
    }

    /// The window's end (`None` while it has not opened).
    fn end(&self) -> Option<u64> {
        self.from_ns.load(Relaxed).checked_add(self.len_ns)
    }

    /// Does an operation completing at `now` complete by the window's end?
    pub fn completes_by_end(&self, now: u64) -> bool {
        self.end().is_some_and(|to| now <= to)
    }

    /// Has the window closed by `now`?
    pub fn closed(&self, now: u64) -> bool {
        self.end().is_some_and(|to| now >= to)
    }
}

/// A compute node's trace-file replay (`workload.trace_file`): one cursor per client thread
/// ([`Share`]: the requests a thread gets are fixed by the file, not by timing), and the node's
/// first failure. Benchmark input, not protocol state.
pub struct TraceFeed {
    cursors: Vec<Mutex<Result<TraceCursor, String>>>,
    /// The first bad line or unreadable file, and when: the node's run failed.
    pub error: Mutex<Option<(u64, String)>>,
}

impl TraceFeed {
    /// Compute node `node` of `nodes`, with `threads` client threads.
    pub fn open(path: &str, node: u32, nodes: u32, threads: u32) -> Arc<TraceFeed> {
        let cursors = (0..threads)
            .map(|thread| {
                let share = Share { node, nodes, thread, threads };
                Mutex::new(TraceCursor::open(std::path::Path::new(path), share))
            })
            .collect();
        Arc::new(TraceFeed { cursors, error: Mutex::new(None) })
    }

    /// Thread `thread`'s next request, or `None` once the file failed (kept in `error`).
    fn next(&self, thread: u32, now_ns: u64) -> Option<TraceRecord> {
        let mut cursor = self.cursors[thread as usize].lock().unwrap_or_else(|e| e.into_inner());
        let got = match &mut *cursor {
            Ok(c) => c.next_record(),
            Err(e) => Err(e.clone()),
        };
        got.map_err(|e| {
            self.error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert((now_ns, format!("trace file {e}")));
        })
        .ok()
    }

    /// Requests served and the most passes any thread made over the file.
    pub fn counts(&self) -> (u64, u64) {
        self.cursors.iter().fold((0, 0), |(served, passes), c| {
            match &*c.lock().unwrap_or_else(|e| e.into_inner()) {
                Ok(c) => (served + c.served, passes.max(c.passes)),
                Err(_) => (served, passes),
            }
        })
    }
}

/// Where a client's requests come from: the seeded generator, or a trace file's feed.
pub struct Requests {
    pub seed: u64,
    pub trace: Option<Arc<TraceFeed>>,
    /// 0, or how many times this node restarted: stamps of each incarnation are distinct.
    pub incarnation: u32,
}

/// One client thread. Stops at its first error (kept in the cache's error slot).
pub async fn run_client<N: Nic>(
    cache: Arc<Cache<N>>,
    thread: u32,
    workload: Workload,
    requests: Requests,
    log: Option<(OpLog, u32)>,
    latencies: Arc<Mutex<Vec<u64>>>,
    window: Arc<Window>,
) {
    let w = cache.worker(thread);
    let mut rng = rng_for_thread(requests.seed, cache.nic.node().0, thread);
    let zipf = (workload.zipf_theta > 0.0).then(|| Zipf::new(workload.objects, workload.zipf_theta));
    let mut sequence = (requests.incarnation as u64) << 24;
    let timed = workload.measure_us > 0;
    let tables = workload.transactions.as_ref().and_then(|t| t.tpcc.as_ref()).map(tpcc::Tables::new);
    for _ in 0..workload.ops_per_thread {
        if timed && window.closed(w.nic.now().0) {
            break;
        }
        if cache.config.node_restarts {
            cache.wait_unfenced(&w).await;
        }
        if let Some(spec) = &workload.transactions {
            let job = match &tables {
                Some(tables) => Job::Tpcc(tpcc::Kind::draw(&mut rng), tables),
                None => {
                    let mut draw =
                        ford::Draw { rng: &mut rng, zipf: zipf.as_ref(), workload: &workload, spec };
                    Job::Synthetic(draw.transaction())
                }
            };
            let client = Client { cache: &cache, w: &w, log: &log, latencies: &latencies, window: &window };
            if !run_transaction(&client, job, &mut rng, &mut sequence).await {
                return;
            }
            continue;
        }
        let (key, read) = match &requests.trace {
            Some(feed) => match feed.next(thread, w.nic.now().0) {
                Some(r) => (r.object(workload.objects), r.op.is_read()),
                None => return,
            },
            None => {
                let rank = draw_rank(&mut rng, zipf.as_ref(), workload.objects);
                let (key, read_ratio) = match &workload.trace {
                    // A synthetic trace: popularity may drift, and every object has its own read ratio.
                    Some(t) => {
                        let key = trace::key_at(rank, workload.objects, t.drift_ns, w.nic.now().0);
                        (key, trace::read_ratio(workload.read_ratio, t.spread, key))
                    }
                    None => (rank, workload.read_ratio),
                };
                let read = unit_f64(rng.next_u64()) < read_ratio;
                (key, read)
            }
        };
        let start = w.nic.now();
        let measured = !timed || window.start_accessing(start.0, workload.batch.max(1) as u64);
        if timed && measured {
            cache.reset_stats_once();
        }
        if measured && cache.stats.lock().unwrap_or_else(|e| e.into_inner()).first_op_ns.is_none() {
            cache.stats.lock().unwrap_or_else(|e| e.into_inner()).first_op_ns = Some(start.0);
        }
        w.nic.cpu(Nanos(cache.config.cpu.app_ns)).await;
        let r = if workload.batch > 1 || workload.parts > 1 {
            let draw = batched::Draw { rng: &mut rng, zipf: zipf.as_ref(), workload: &workload };
            batched::op(&cache, &w, draw, key, read, &mut sequence, &log).await.map(|()| true)
        } else if read {
            logged_read(&cache, &w, key, &log).await.map(|()| true)
        } else {
            sequence += 1;
            let stamp = write_stamp(cache.nic.node(), thread, sequence);
            // Drawn only when atomics are on, so runs without them keep their sequences.
            if workload.atomic_ratio > 0.0 && unit_f64(rng.next_u64()) < workload.atomic_ratio {
                app_atomic(&cache, &w, key, stamp, &log).await
            } else {
                app_write(&cache, &w, key, stamp, &log).await
            }
        };
        match r {
            Ok(true) => {}
            Ok(false) => {
                // A write timed out at a memory node; its lock is released (`unlock`).
                cache.stats.lock().unwrap_or_else(|e| e.into_inner()).timeouts += 1;
                continue;
            }
            Err(e) if cache.mn_timeout(&e) => {
                // A timeout result (§5): the operation is abandoned (a write stays in flight).
                cache.suspect_mn();
                cache.stats.lock().unwrap_or_else(|e| e.into_inner()).timeouts += 1;
                continue;
            }
            Err(e) => {
                cache.errors.record(e);
                return;
            }
        }
        if let Some(at) = w.nic.now().0.checked_div(cache.config.timeline_bucket_ns) {
            let at = at as usize;
            let mut stats = cache.stats.lock().unwrap_or_else(|e| e.into_inner());
            if stats.timeline.len() <= at {
                stats.timeline.resize(at + 1, 0);
            }
            stats.timeline[at] += 1;
        }
        if measured && (!timed || window.completes_by_end(w.nic.now().0)) {
            latencies.lock().unwrap_or_else(|e| e.into_inner()).push(w.nic.now().0 - start.0);
            cache.stats.lock().unwrap_or_else(|e| e.into_inner()).ops += 1;
        }
    }
}

/// What a client's FORD transaction is: a synthetic one (F1, TAO: its objects and how many
/// of the first it writes) or a TPC-C one.
enum Job<'a> {
    Synthetic((Vec<u64>, usize)),
    Tpcc(tpcc::Kind, &'a tpcc::Tables),
}

/// A client's handles for its measured transactions.
struct Client<'a, N: Nic> {
    cache: &'a Cache<N>,
    w: &'a Worker<N>,
    log: &'a Option<(OpLog, u32)>,
    latencies: &'a Mutex<Vec<u64>>,
    window: &'a Window,
}

/// One FORD transaction (`workload.transactions`), measured as an operation when it commits
/// in the window (timed mode: completes in it); `false` once the client stopped at an error (kept in the cache's slot).
async fn run_transaction<N: Nic, R: Rng>(
    c: &Client<'_, N>,
    job: Job<'_>,
    rng: &mut R,
    sequence: &mut u64,
) -> bool {
    let (cache, w, window) = (c.cache, c.w, c.window);
    let timed = window.timed();
    let start = w.nic.now();
    let objects = match &job {
        Job::Synthetic((keys, _)) => keys.len() as u64,
        Job::Tpcc(..) => 1,
    };
    let measured = !timed || window.start_accessing(start.0, objects);
    if timed && measured {
        cache.reset_stats_once();
    }
    if measured && cache.stats().first_op_ns.is_none() {
        cache.stats().first_op_ns = Some(start.0);
    }
    let record = c.log.is_some();
    let mut wraps = 0;
    let result = match job {
        Job::Synthetic(drawn) => {
            w.nic.cpu(Nanos(cache.config.cpu.app_ns)).await;
            ford::transaction(cache, w, drawn, sequence, c.log, record).await
        }
        Job::Tpcc(kind, tables) => {
            // The application's work is charged per execution round (`tpcc::Exe::round`).
            let ctx = tpcc::Ctx { tables, app_ns: cache.config.cpu.app_ns, log: c.log, record };
            tpcc::transaction(cache, w, kind, rng, sequence, &ctx, &mut wraps).await
        }
    };
    let outcome = match result {
        Ok(o) => o,
        Err(e) => {
            cache.errors.record(e);
            return false;
        }
    };
    // Timed: a transaction counts when it *completes* in the window (a TAO transaction takes
    // up to a millisecond: counting only those that also start in it would favour short ones).
    let now = w.nic.now().0;
    let counted = if timed { window.opened(now) && window.completes_by_end(now) } else { measured };
    let mut stats = cache.stats();
    stats.tpcc_wraps += wraps;
    match outcome {
        ford::Outcome::Committed { objects, read_write } if counted => {
            c.latencies.lock().unwrap_or_else(|e| e.into_inner()).push(w.nic.now().0 - start.0);
            stats.ops += 1;
            stats.txn_objects += objects;
            stats.txn_read_write += read_write as u64;
        }
        ford::Outcome::LockAbort if counted => stats.txn_lock_aborts += 1,
        ford::Outcome::ValidationAbort if counted => stats.txn_validation_aborts += 1,
        _ => {}
    }
    true
}

/// An object's popularity rank: Zipf over `objects`, or uniform.
fn draw_rank(rng: &mut impl Rng, zipf: Option<&Zipf>, objects: u64) -> u64 {
    match zipf {
        Some(z) => z.sample(|| rng.next_u64()) - 1,
        None => ((rng.next_u64() as u128 * objects as u128) >> 64) as u64,
    }
}

/// The tracked object's accesses, by type (Fig. 13 right).
fn track<N: Nic>(cache: &Cache<N>, w: &Worker<N>, key: u64, event: Event) {
    if cache.config.track_key == Some(key) {
        cache.stats.lock().unwrap_or_else(|e| e.into_inner()).tracked.push((w.nic.now().0, event as u8));
    }
}

fn record(log: &Option<(OpLog, u32)>, op: LoggedOp) {
    if let Some((log, _)) = log {
        log.lock().push(op);
    }
}

async fn logged_read<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    key: u64,
    log: &Option<(OpLog, u32)>,
) -> ProtocolResult<()> {
    logged_read_value(cache, w, key, log).await.map(|_| ())
}

/// A validated read, logged; returns the stamp seen.
async fn logged_read_value<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    key: u64,
    log: &Option<(OpLog, u32)>,
) -> ProtocolResult<u64> {
    let invoke = w.nic.now().0;
    let value = validated_read(cache, w, key).await?;
    let client = log.as_ref().map_or(0, |l| l.1);
    record(
        log,
        LoggedOp {
            client,
            key,
            write: None,
            seen: Some(value),
            invoke_ns: invoke,
            return_ns: Some(w.nic.now().0),
        },
    );
    Ok(value)
}

/// The stamp of a whole version `[tag, stamp, stamp, …]`, or `None` if another object's bytes
/// (another tag) or two versions (torn) are in `words`.
fn version_stamp(words: &[u64], tag: u64) -> Option<u64> {
    (words[0] == tag && words[2..].iter().all(|&x| x == words[1])).then_some(words[1])
}

/// Read until the object is whole (one tag, one stamp); returns its stamp (0: never written).
async fn validated_read<N: Nic>(cache: &Cache<N>, w: &Worker<N>, key: u64) -> ProtocolResult<u64> {
    let words = (cache.layout.object_bytes / 8) as usize;
    let mut buf = vec![0u64; words];
    loop {
        let event = cache.read(w, key).await?;
        track(cache, w, key, event);
        cache.nic.local().read_words(cache.layout.app_buffer(w.thread), &mut buf);
        if let Some(stamp) = version_stamp(&buf, object_tag(key)) {
            return Ok(stamp);
        }
        cache.stats.lock().unwrap_or_else(|e| e.into_inner()).validation_retries += 1;
        w.nic.sleep(Nanos(cache.config.cpu.poll_ns)).await;
    }
}

async fn app_write<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    key: u64,
    stamp: u64,
    log: &Option<(OpLog, u32)>,
) -> ProtocolResult<bool> {
    let lock = lock_app(cache, w, key, 0, stamp).await?;
    let held_from = w.nic.now().0;
    if unless_timeout(cache, logged_read(cache, w, key, log).await)?.is_none() {
        return unlock(cache, w, lock, true).await;
    }
    let words = (cache.layout.object_bytes / 8) as usize;
    let mut buf = vec![stamp; words];
    buf[0] = object_tag(key);
    cache.nic.local().write_words(cache.layout.app_buffer(w.thread), &buf);
    let at = log_write(w, key, stamp, log);
    let Some(event) = unless_timeout(cache, cache.write(w, key).await)? else {
        return unlock(cache, w, lock, true).await;
    };
    track(cache, w, key, event);
    if let (Some((l, _)), Some(i)) = (log, at) {
        l.lock()[i].return_ns = Some(w.nic.now().0);
    }
    lock_held(cache, w, key, held_from);
    unlock(cache, w, lock, false).await
}

/// An operation's result with a memory-node timeout (§5: the operation is abandoned) as
/// `None`; other errors stay errors.
fn unless_timeout<N: Nic, T>(cache: &Cache<N>, r: ProtocolResult<T>) -> ProtocolResult<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if cache.mn_timeout(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Take the application's lock on part `part` of `key` (CAS from 0 to `owner`); returns the
/// lock's address.
async fn lock_app<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    key: u64,
    part: u64,
    owner: u64,
) -> ProtocolResult<crate::nic::RemoteAddr> {
    let lock = cache.layout.app_lock(key, part);
    let from = w.nic.now().0;
    loop {
        let seen = w.nic.try_cas(lock, 0, owner, "application lock").await?;
        // `owner` is the writer's unique stamp (see `Cache::cas_replayed`).
        if seen == 0 || cache.cas_replayed(w, seen == owner, "application lock") {
            break;
        }
        cache.stats.lock().unwrap_or_else(|e| e.into_inner()).app_lock_retries += 1;
        w.nic.sleep(Nanos(cache.config.cpu.poll_ns)).await;
    }
    let mut stats = cache.stats.lock().unwrap_or_else(|e| e.into_inner());
    stats.app_lock_wait_ns += w.nic.now().0 - from;
    stats.app_lock_takes += 1;
    Ok(lock)
}

/// Diagnostics: the application's lock taken at `from` is released now.
fn lock_held<N: Nic>(cache: &Cache<N>, w: &Worker<N>, key: u64, from: u64) {
    let held = w.nic.now().0 - from;
    let mut stats = cache.stats.lock().unwrap_or_else(|e| e.into_inner());
    stats.app_lock_hold_ns += held;
    if key == 0 {
        stats.hot_lock_takes += 1;
        stats.hot_lock_hold_ns += held;
    }
}

/// Log a write of `stamp` at its invocation (its return is filled in when it returns), so
/// that a write its crashed CN never finished still counts as one in flight forever (its
/// value may be read). Returns its index in the log.
fn log_write<N: Nic>(w: &Worker<N>, key: u64, stamp: u64, log: &Option<(OpLog, u32)>) -> Option<usize> {
    let invoke = w.nic.now().0;
    log.as_ref().map(|(l, client)| {
        let mut ops = l.lock();
        ops.push(LoggedOp {
            client: *client,
            key,
            write: Some(stamp),
            seen: None,
            invoke_ns: invoke,
            return_ns: None,
        });
        ops.len() - 1
    })
}

/// An atomic update (`workload.atomic_ratio`): under the application's lock (a NIC atomic is
/// not atomic against another client's flush WRITE), read the object, then CAS its stamp word
/// from the value read to `stamp` through `Cache::cas_object`. Every earlier update returned
/// before this client took the lock, so the read must have seen the memory node's value: a
/// CAS that finds another one proves a stale read (counted as `atomic_stale_reads`; logged
/// as a read of what the CAS found, not as a write).
async fn app_atomic<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    key: u64,
    stamp: u64,
    log: &Option<(OpLog, u32)>,
) -> ProtocolResult<bool> {
    let lock = lock_app(cache, w, key, 0, stamp).await?;
    let held_from = w.nic.now().0;
    let Some(seen) = unless_timeout(cache, logged_read_value(cache, w, key, log).await)? else {
        return unlock(cache, w, lock, true).await;
    };
    let at = log_write(w, key, stamp, log);
    let Some(mut old) = unless_timeout(cache, cache.cas_object(w, key, seen, stamp).await)? else {
        return unlock(cache, w, lock, true).await;
    };
    // `stamp` is unique: only this CAS, run a second time, can find it (`Cache::cas_replayed`).
    if old != seen && cache.cas_replayed(w, old == stamp, "object atomic") {
        old = seen;
    }
    if let (Some((l, _)), Some(i)) = (log, at) {
        let mut ops = l.lock();
        ops[i].return_ns = Some(w.nic.now().0);
        if old != seen {
            // Nothing was written: the CAS read the memory node's value.
            ops[i].write = None;
            ops[i].seen = Some(old);
        }
    }
    if old != seen {
        cache.stats.lock().unwrap_or_else(|e| e.into_inner()).atomic_stale_reads += 1;
    }
    lock_held(cache, w, key, held_from);
    unlock(cache, w, lock, false).await
}

/// Release the application lock; with node restarts, again once the memory node is back if
/// it timed out (the lock survives the restart). `Ok(false)`: the operation (`failed`) or the
/// unlock timed out at a memory node (the CN is fenced).
async fn unlock<N: Nic>(
    cache: &Cache<N>,
    w: &Worker<N>,
    lock: crate::nic::RemoteAddr,
    mut failed: bool,
) -> ProtocolResult<bool> {
    if failed {
        cache.suspect_mn();
    }
    loop {
        match w.nic.try_write_word(lock, 0, "application unlock").await {
            Ok(()) => return Ok(!failed),
            Err(e) if cache.mn_timeout(&e) => {
                failed = true;
                cache.suspect_mn();
                cache.wait_unfenced(w).await;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(warmup_us: u64, per_object: u64) -> Workload {
        serde_json::from_value(serde_json::json!({
            "objects": 10, "threads_per_node": 1, "ops_per_thread": 100,
            "warmup_us": warmup_us, "warmup_ops_per_object": per_object, "measure_us": 5,
        }))
        .unwrap()
    }

    #[test]
    fn difache_window_without_an_operation_count_is_fixed() {
        let w = Window::new(&workload(3, 0));
        assert!(!w.start(2_999));
        assert!(w.start(3_000) && w.opened(3_000));
        assert!(w.completes_by_end(8_000) && !w.completes_by_end(8_001));
        assert!(!w.closed(7_999) && w.closed(8_000));
    }

    #[test]
    fn difache_window_opens_after_the_operation_count_and_the_minimum_time() {
        let w = Window::new(&workload(1, 2)); // 20 operations, then at least 1 us
        for i in 0..20 {
            assert!(!w.start(5_000 + i), "operation {i} is warm-up");
        }
        assert!(!w.opened(6_000) && !w.closed(1 << 40));
        assert!(w.start(6_000), "the 21st operation opens the window");
        assert!(w.start(6_001) && !w.closed(10_999) && w.closed(11_000));
        let early = Window::new(&workload(100, 1)); // 10 operations, then at least 100 us
        for i in 0..50 {
            assert!(!early.start(i), "before the minimum time");
        }
        assert!(early.start(100_000));
    }

    #[test]
    fn difache_window_counts_the_objects_of_a_batched_call() {
        let w = Window::new(&workload(0, 2)); // 20 object accesses
        for i in 0..5 {
            assert!(!w.start_accessing(1_000 + i, 4), "call {i}: {} objects started", 4 * (i + 1));
        }
        assert!(w.start_accessing(2_000, 4), "the call that starts objects 21..24 opens the window");
    }
}
