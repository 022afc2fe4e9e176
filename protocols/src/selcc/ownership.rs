//! Global ownership behind `lock` (SELCC §3.2–§3.5 [P]): the ownership verification table
//! (`ensure_ownership`), then the acquire paths — Modified by CAS (`acquire_exclusive`, Cases 1
//! and 3), Shared by FAA (`acquire_shared`, Case 2), Shared → Modified (`upgrade`) — each
//! resolving conflicts with invalidation messages until it owns the line or, for a try-latch,
//! gives up after [`super::ops::TRY_ATTEMPTS`] attempts.

use crate::common::error::{NicExt, ProtocolResult};
use crate::nic::{Nanos, Nic, Verb};
use crate::sync::Mode;

use super::config::{Mode as ProtocolMode, Mutant};
use super::dirty::Dirty;
use super::frame::Memo;
use super::join::join;
use super::latch::{self, AcquireStep};
use super::layout::{Gaddr, Layout};
use super::message::{priority_level, resend_interval, InvKind, ReplyStatus};
use super::node::{Node, Worker};
use super::sharers::SharerAsks;
use super::stats::OpCase;

impl<N: Nic> Node<N> {
    /// Make this node's memo sufficient for `mode` (§3.2 table). Caller holds the local latch
    /// exclusively. `false`: a try-latch's global acquire gave up.
    pub(super) async fn ensure_ownership(
        &self,
        w: &mut Worker<N>,
        frame: u32,
        g: Gaddr,
        mode: Mode,
    ) -> ProtocolResult<bool> {
        let f = self.cache.frame(frame);
        let memo = f.meta().memo;
        let sufficient =
            matches!((mode, memo), (Mode::Shared, Memo::Shared | Memo::Modified) | (_, Memo::Modified));
        if sufficient {
            assert!(self.config.mode == ProtocolMode::Selcc, "SEL never keeps ownership across ops");
            w.op.case = OpCase::Hit;
            return Ok(true);
        }
        // A message memorised while we merely used the copy must not wait behind our global
        // acquire (its sender may hold what we need): serve it first.
        // Mark the frame acquiring *before* serving (serving awaits): a message memorised during
        // that await would otherwise sit unanswered behind our acquire, while its sender — maybe
        // an upgrader holding the very bit we need released — waits for the reply (found by
        // `stress_many_seeds`, seed 1008: a three-node livelock on one GCL).
        f.meta().acquiring = true;
        loop {
            let pending = f.meta().pending.take().map(|m| *m);
            let Some(msg) = pending else { break };
            self.serve(&w.nic, frame, msg).await?;
        }
        let memo = f.meta().memo;
        let owned = match (mode, memo) {
            (Mode::Shared, Memo::Shared | Memo::Modified) | (Mode::Exclusive, Memo::Modified) => {
                w.op.case = OpCase::Hit;
                true
            }
            (Mode::Exclusive, Memo::Shared) => self.upgrade(w, frame, g).await?,
            (Mode::Exclusive, Memo::Invalid) => self.acquire_exclusive(w, frame, g).await?,
            (Mode::Shared, Memo::Invalid) => self.acquire_shared(w, frame, g).await?,
        };
        f.meta().acquiring = false;
        Ok(owned)
    }

    /// A try-latch has failed `retries` global attempts: give up.
    fn try_exhausted(w: &Worker<N>, retries: u32) -> bool {
        w.try_attempts.is_some_and(|k| retries >= k)
    }

    /// Acquire Modified (§3.4 [P]): `batch[CAS((0,0) → (me,0)), READ]`, resolving conflicts with
    /// invalidations (Cases 1 and 3) until it succeeds (`false`: a try-latch gave up).
    async fn acquire_exclusive(&self, w: &mut Worker<N>, frame: u32, g: Gaddr) -> ProtocolResult<bool> {
        let me = self.me;
        let n = self.layout.compute_count();
        let messages = self.config.mode == ProtocolMode::Selcc;
        w.op.case = OpCase::RemoteFetch;
        let mut retries = 0u32;
        let mut sharer_asks = SharerAsks::default();
        // Case-3 invalidations go out with the next CAS, not before it (`sharers.rs`).
        let mut asks_due = None;
        loop {
            self.wait_not_releasing(g).await?;
            let verbs = [
                Verb::Cas { remote: Layout::latch(g), expect: 0, swap: latch::acquire_exclusive_swap(me) },
                self.read_body(g, frame),
            ];
            let start = w.nic.now();
            let cas = w.nic.try_batch(&verbs, "acquire exclusive");
            let old = match asks_due.take() {
                Some((targets, msg)) => {
                    let (cas, sent) = join(cas, self.post_invalidations(&w.nic, targets, &msg)).await;
                    sent?;
                    cas?.get(0)
                }
                None => cas.await?.get(0),
            };
            let rtt = w.nic.now().saturating_sub(start);
            let priority = priority_level(retries);
            let mut retry_now = false;
            let step = latch::after_exclusive_cas(old, me, n);
            // Round trips count the critical path (§4.4.3: Case 3 ≤ RPC + 1). Once sharers were
            // asked, the CASes that fail while they release overlap that release and are not on
            // the path CAS → SEND → sharer's release FAA → CAS: the winning CAS counts, plus
            // one step for the release it waited on.
            if !sharer_asks.sent_any {
                w.op.round_trips += 1;
            } else if step == AcquireStep::Acquired {
                w.op.round_trips += 2;
            }
            match step {
                AcquireStep::Acquired => {
                    self.set_owned(frame, Memo::Modified, priority);
                    return Ok(true);
                }
                AcquireStep::InvalidateOwner(owner) if messages => {
                    w.op.case = OpCase::WriterVsModified;
                    match self
                        .invalidate(w, latch::bit(owner), InvKind::WriterVsModified, g, frame, priority)
                        .await?
                    {
                        ReplyStatus::Forwarded => {
                            // GCL forwarding (§3.5 Case 1): `header | data` is already in our
                            // frame, the header carrying the old owner's dirty bounds.
                            self.set_owned(frame, Memo::Modified, priority);
                            return Ok(true);
                        }
                        ReplyStatus::Granted => {
                            self.read_after_grant(w, frame, g).await?;
                            self.set_owned(frame, Memo::Modified, priority);
                            return Ok(true);
                        }
                        ReplyStatus::Released => retry_now = true,
                        ReplyStatus::Dropped => {}
                    }
                }
                AcquireStep::InvalidateSharers(sharers) if messages => {
                    // Case 3 (§4.4.3 [P]): each sharer releases while we keep retrying the CAS;
                    // no handover, and no waiting for their answers (`sharers.rs`).
                    w.op.case = OpCase::WriterVsShared;
                    let t = resend_interval(self.config.resend_c, rtt, retries);
                    asks_due = self.sharers_to_ask(w, &mut sharer_asks, sharers, g, frame, priority, t);
                    retry_now = true;
                }
                _ => {}
            }
            retries += 1;
            w.op.retries += 1;
            self.stats.lock().unwrap().latch_retries += 1;
            if Self::try_exhausted(w, retries) {
                return Ok(false);
            }
            assert!(
                retries < self.config.retry_limit,
                "exclusive acquire of {g} stuck after {retries} retries"
            );
            if !messages {
                w.op.case = OpCase::Retried;
            }
            if !retry_now {
                w.nic.sleep(resend_interval(self.config.resend_c, rtt, retries)).await;
            }
        }
    }

    /// Acquire Shared (§3.4 [P]): `batch[FAA(+BIT(me)), READ]`; on a writer, undo the bit and
    /// invalidate it (Case 2).
    async fn acquire_shared(&self, w: &mut Worker<N>, frame: u32, g: Gaddr) -> ProtocolResult<bool> {
        let me = self.me;
        let n = self.layout.compute_count();
        let messages = self.config.mode == ProtocolMode::Selcc;
        w.op.case = OpCase::RemoteFetch;
        let mut retries = 0u32;
        loop {
            self.wait_not_releasing(g).await?;
            // Reader spin-waiting (§5.3.2 [P]): a starved writer asked readers to hold back.
            let spin = std::mem::take(&mut self.cache.frame(frame).meta().spin_priority);
            if spin > 0 && self.config.reader_spin_wait {
                self.stats.lock().unwrap().reader_spins += 1;
                w.nic.sleep(Nanos(self.config.reader_spin_ns_per_level * spin as u64)).await;
            }
            let verbs =
                [Verb::Faa { remote: Layout::latch(g), add: latch::bit(me) }, self.read_body(g, frame)];
            let start = w.nic.now();
            let old = w.nic.try_batch(&verbs, "acquire shared").await?.get(0);
            let rtt = w.nic.now().saturating_sub(start);
            w.op.round_trips += 1;
            let priority = priority_level(retries);
            let step = latch::after_shared_faa(old, me, n);
            if step == AcquireStep::Acquired {
                self.set_owned(frame, Memo::Shared, priority);
                return Ok(true);
            }
            if self.config.mutant == Mutant::ReadThroughModified {
                // Planted bug: keep the bit and the stale memory copy despite the writer.
                self.set_owned(frame, Memo::Shared, priority);
                return Ok(true);
            }
            // Undo our bit before anyone (the owner's downgrade FAA) may add it again: the undo
            // must land first or the later +BIT carries into a neighbour (S8).
            if self.config.mutant != Mutant::ReaderKeepsBit {
                w.nic
                    .try_faa(Layout::latch(g), latch::release_shared_delta(me), "undo shared acquire")
                    .await?;
                w.op.round_trips += 1;
            }
            let mut retry_now = false;
            if let (AcquireStep::InvalidateOwner(owner), true) = (step, messages) {
                w.op.case = OpCase::ReaderVsModified;
                match self
                    .invalidate(w, latch::bit(owner), InvKind::ReaderVsModified, g, frame, priority)
                    .await?
                {
                    ReplyStatus::Forwarded => {
                        self.set_owned(frame, Memo::Shared, priority);
                        return Ok(true);
                    }
                    ReplyStatus::Granted => {
                        self.read_after_grant(w, frame, g).await?;
                        self.set_owned(frame, Memo::Shared, priority);
                        return Ok(true);
                    }
                    ReplyStatus::Released => retry_now = true,
                    ReplyStatus::Dropped => {}
                }
            }
            retries += 1;
            w.op.retries += 1;
            self.stats.lock().unwrap().latch_retries += 1;
            if Self::try_exhausted(w, retries) {
                return Ok(false);
            }
            assert!(retries < self.config.retry_limit, "shared acquire of {g} stuck after {retries} retries");
            if !messages {
                w.op.case = OpCase::Retried;
            }
            if !retry_now {
                w.nic.sleep(resend_interval(self.config.resend_c, rtt, retries)).await;
            }
        }
    }

    /// Upgrade Shared → Modified (§3.4 [P]): CAS `(0,BIT(me)) → (me,0)`, K attempts, then the
    /// fallback: release Shared, acquire Modified (avoids the upgrade-upgrade deadlock, L1).
    async fn upgrade(&self, w: &mut Worker<N>, frame: u32, g: Gaddr) -> ProtocolResult<bool> {
        let me = self.me;
        let n = self.layout.compute_count();
        w.op.case = OpCase::Upgrade;
        self.stats.lock().unwrap().upgrades += 1;
        let (expect, swap) = latch::upgrade_cas(me);
        // Planted bug (UpgradeWithoutFallback): never give up the Shared latch.
        let attempts = if self.config.mutant == Mutant::UpgradeWithoutFallback {
            u32::MAX
        } else {
            self.config.upgrade_attempts
        };
        for attempt in 0..attempts {
            let old = w.nic.try_cas(Layout::latch(g), expect, swap, "upgrade").await?;
            w.op.round_trips += 1;
            assert!(old & latch::bit(me) != 0, "S3: upgrading without our reader bit (latch {old:#x})");
            match latch::after_upgrade_cas(old, me, n) {
                AcquireStep::Acquired => {
                    // Our Shared copy is current: no READ needed.
                    self.set_owned(frame, Memo::Modified, 0);
                    return Ok(true);
                }
                AcquireStep::InvalidateSharers(sharers) if attempt + 1 < attempts => {
                    self.invalidate(w, sharers, InvKind::WriterVsShared, g, frame, 0).await?;
                }
                _ => {}
            }
        }
        // Fallback (§3.4 [P] "releasing the shared latch and then acquiring the exclusive latch").
        self.stats.lock().unwrap().upgrade_fallbacks += 1;
        w.nic.try_faa(Layout::latch(g), latch::release_shared_delta(me), "upgrade fallback").await?;
        w.op.round_trips += 1;
        self.cache.frame(frame).meta().memo = Memo::Invalid;
        let owned = self.acquire_exclusive(w, frame, g).await?;
        if w.op.case == OpCase::RemoteFetch {
            w.op.case = OpCase::UpgradeFallback;
        }
        Ok(owned)
    }

    /// READ of `header | data` into our frame (batched with the latch atomic).
    fn read_body(&self, g: Gaddr, frame: u32) -> Verb {
        Verb::Read {
            remote: Layout::body(g),
            local_bytes: self.frame_offset(frame),
            len_bytes: self.layout.frame_stride_bytes() as u32,
        }
    }

    /// Ownership was handed over without forwarding: the victim flushed, so memory is current.
    async fn read_after_grant(&self, w: &mut Worker<N>, frame: u32, g: Gaddr) -> ProtocolResult<()> {
        w.nic.try_batch(&[self.read_body(g, frame)], "read after grant").await?;
        w.op.round_trips += 1;
        Ok(())
    }

    fn set_owned(&self, frame: u32, memo: Memo, priority: u8) {
        let mut meta = self.cache.frame(frame).meta();
        meta.memo = memo;
        // Priority matching (§5.3.2 [P]): remember that this Modified copy was won by a starved
        // writer, so only readers of equal or greater priority may take it away.
        meta.starved_priority = if memo == Memo::Modified
            && self.config.priority_matching
            && priority >= self.config.starvation_level_min
        {
            priority
        } else {
            0
        };
        let header = self.nic.local().load(self.frame_offset(frame));
        Dirty::from_header(header); // format check on the way in (paired with `write`)
        if memo == Memo::Shared {
            assert!(Dirty::from_header(header).is_clean(), "a Shared copy with dirty bounds");
        }
    }
}
