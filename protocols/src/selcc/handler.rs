//! Invalidation handlers (SELCC §3.5 [P], §5.1): background tasks that receive invalidation
//! messages, and the decision of what a victim does with one.
//!
//! Handler rules (§5.1.1–5.1.2 [P]):
//! * `try_lock` on the frame's local latch, so local accesses win (Fig. 10);
//! * drop with a "dropped" reply when (1) the copy is already invalid, (2) the GCL was evicted,
//!   (3) a local thread is using it — or, with `defer_messages`, memorise the message in the
//!   frame's one slot (highest priority wins, §5.3.2) and serve it when the latch comes free or
//!   the lease expires; a displaced message is dropped. Every message gets exactly one reply.
//!   A try-latch's message (`no_wait`) is dropped when busy, never memorised.
//!
//! A handler whose verb or message fails releases the frame it holds, records the error on the
//! node ([`super::node::NodeState::fail`]) and stops; the other handlers go on serving.

use std::sync::Arc;

use crate::common::error::{NicExt, ProtocolResult};
use crate::nic::{Nanos, Nic, NicError, Verb};
use crate::sync::Mode;

use super::config::Mutant;
use super::dirty::Dirty;
use super::fairness::{choose, memorise, reader_must_wait};
use super::frame::Memo;
use super::join::join;
use super::latch;
use super::layout::{Layout, WORD};
use super::message::{InvKind, InvMsg, ReplyStatus};
use super::node::Node;

/// What a victim does with an invalidation it is allowed to serve. Pure (§3.5 [P]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Case 1: hand the exclusive latch to the writer by FAA and forward the copy.
    Handover,
    /// Case 2: FAA `(−me, BIT(reader)|BIT(me))` with the flush in the same batch, then forward.
    Downgrade,
    /// Case 3: release our Shared latch.
    ReleaseShared,
    /// Handover disabled (naive, Fig. 7a): flush and release; the requester retries.
    FlushRelease,
    Drop(DropReason),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Our memo does not match the case the sender saw (already invalidated, upgraded, or an
    /// outdated message after a handover — §3.5 "outdated messages can simply be discarded").
    Stale,
    /// Priority matching: the reader's priority is below the starved writer's (§5.3.2).
    PriorityMatching,
}

/// The victim's transition for `(memo, kind)`.
pub fn decide(memo: Memo, kind: InvKind, handover: bool, reader_must_wait: bool) -> Action {
    match (kind, memo) {
        (InvKind::WriterVsModified, Memo::Modified) if handover => Action::Handover,
        (InvKind::ReaderVsModified, Memo::Modified) if reader_must_wait => {
            Action::Drop(DropReason::PriorityMatching)
        }
        (InvKind::ReaderVsModified, Memo::Modified) if handover => Action::Downgrade,
        (InvKind::WriterVsModified | InvKind::ReaderVsModified, Memo::Modified) => Action::FlushRelease,
        (InvKind::WriterVsShared, Memo::Shared) => Action::ReleaseShared,
        _ => Action::Drop(DropReason::Stale),
    }
}

impl<N: Nic> Node<N> {
    /// A handler task on `port`: receive and serve invalidations until its first error. An idle
    /// receive that times out (a backend's optional bound) is not an error: it waits again.
    pub async fn run_handler(self: Arc<Self>, nic: N, port: u16) {
        loop {
            let message = match nic.try_recv(port, "invalidation handler").await {
                Ok(message) => message,
                Err(e) if matches!(e.source, NicError::Timeout { .. }) => continue,
                Err(e) => {
                    self.fail(e);
                    return;
                }
            };
            let msg = InvMsg::decode(&message.bytes);
            assert_eq!(self.layout.compute_node(msg.sender), message.from, "message sender mismatch");
            assert!(msg.sender != self.me, "a node never invalidates itself");
            assert_eq!(self.invalidation_port(msg.sender), port, "message on another sender's port");
            nic.cpu(Nanos(self.config.cpu.handler_ns)).await;
            if let Err(e) = self.on_invalidation(&nic, msg).await {
                self.fail(e);
                return;
            }
        }
    }

    async fn on_invalidation(&self, nic: &N, msg: InvMsg) -> ProtocolResult<()> {
        self.stats.lock().unwrap().messages_received += 1;
        if self.sent_by_dead(&msg) {
            return Ok(());
        }
        // Drop condition (2): evicted (or never cached).
        let Some(frame) = self.cache.pin(msg.gcl) else {
            if self.config.mutant != Mutant::DropWithoutReply {
                self.reply(nic, &msg, ReplyStatus::Dropped, 0).await?;
            }
            return Ok(());
        };
        let f = self.cache.frame(frame);
        let latched = self.config.mutant != Mutant::HandlerWithoutLocalLatch;
        if latched && !f.latch.try_lock(Mode::Exclusive) {
            // Drop condition (3): a local thread has the frame. Local accesses win (§5.1.1).
            let dropped = {
                let mut meta = f.meta();
                meta.lease = meta.lease.activate();
                // A try-latch's message is never memorised: its sender does not wait.
                if self.config.defer_messages && !msg.no_wait && !meta.acquiring && meta.memo != Memo::Invalid
                {
                    let (slot, dropped) = memorise(meta.pending.take().map(|m| *m), msg);
                    meta.pending = slot.map(Box::new);
                    dropped
                } else {
                    Some(msg)
                }
            };
            if dropped != Some(msg) {
                self.stats.lock().unwrap().messages_deferred += 1;
            }
            let mut replied = Ok(());
            if let Some(d) = dropped.filter(|_| self.config.mutant != Mutant::DropWithoutReply) {
                replied = self.reply(nic, &d, ReplyStatus::Dropped, 0).await;
            }
            // On threaded backends the holder may have left in between: let the retry server look.
            // (A holder that leaves during the reply above passes the message on itself.)
            self.retry_if_idle(frame);
            self.cache.unpin(frame);
            return replied;
        }
        let (serve, dropped) = {
            let mut meta = f.meta();
            choose(Some(msg), meta.pending.take().map(|m| *m))
        };
        let mut served = Ok(());
        if let Some(d) = dropped {
            served = self.reply(nic, &d, ReplyStatus::Dropped, 0).await;
        }
        if served.is_ok() {
            served = self.serve(nic, frame, serve.expect("a message to serve")).await;
        }
        if latched {
            // Another handler task may have memorised a message while we served.
            self.unlock_frame(frame, Mode::Exclusive);
        }
        self.cache.unpin(frame);
        served
    }

    /// Serves memorised messages whose frame went idle (γ = Inf path of §5.3.1).
    pub async fn run_retry_server(self: Arc<Self>, nic: N) {
        while let Some(g) = self.retry.pop().await {
            self.retry_taken(g);
            let Some(frame) = self.cache.pin(g) else { continue };
            let f = self.cache.frame(frame);
            let mut served = Ok(());
            if f.meta().pending.is_some() && f.latch.try_lock(Mode::Exclusive) {
                let pending = f.meta().pending.take().map(|m| *m);
                if let Some(msg) = pending {
                    served = self.serve(&nic, frame, msg).await;
                }
                // A handler may have memorised a new message for this line while we served it
                // (e.g. the reader we just downgraded for, now upgrading): pass it on, or its
                // sender waits until the line is touched or evicted again.
                self.unlock_frame(frame, Mode::Exclusive);
            }
            self.cache.unpin(frame);
            if let Err(e) = served {
                self.fail(e);
                return;
            }
        }
    }

    /// A message from a node declared dead (crash recovery): ignored, never answered — handing
    /// the line to it would bring back the ownership the recovery scan removes.
    fn sent_by_dead(&self, msg: &InvMsg) -> bool {
        self.dead_set.load(std::sync::atomic::Ordering::Relaxed) & latch::bit(msg.sender) != 0
    }

    /// Serve `msg` on `frame`. Caller holds the local latch exclusively and a pin.
    pub(super) async fn serve(&self, nic: &N, frame: u32, msg: InvMsg) -> ProtocolResult<()> {
        if self.sent_by_dead(&msg) {
            return Ok(());
        }
        let (memo, starved) = {
            let meta = self.cache.frame(frame).meta();
            assert_eq!(meta.gcl(), Some(msg.gcl), "serving a message for another GCL");
            (meta.memo, meta.starved_priority)
        };
        let must_wait = reader_must_wait(&msg, starved, self.config.priority_matching);
        match decide(memo, msg.kind, self.config.handover, must_wait) {
            Action::Drop(_) => self.reply(nic, &msg, ReplyStatus::Dropped, 0).await,
            Action::Handover => self.serve_handover(nic, frame, msg).await,
            Action::Downgrade => self.serve_downgrade(nic, frame, msg).await,
            Action::ReleaseShared => self.serve_release_shared(nic, frame, msg).await,
            Action::FlushRelease => {
                self.release_global(nic, frame, msg.gcl).await?;
                self.reply(nic, &msg, ReplyStatus::Released, 1).await
            }
        }
    }

    /// Case 1 (§3.5 [P], Fig. 7b): FAA `+(A − me, 0)` moves the exclusive field to the writer A;
    /// the copy goes straight into A's frame, posted together with the FAA ("without waiting
    /// for the ownership handover round-trip"); memory is not flushed ("the following owner
    /// always acquires the latest copy from the last exclusive owner"). The forwarded header
    /// carries our dirty bounds, which become A's (S7).
    async fn serve_handover(&self, nic: &N, frame: u32, msg: InvMsg) -> ProtocolResult<()> {
        let g = msg.gcl;
        let to = msg.sender;
        let header_offset = self.frame_offset(frame);
        let region = self.nic.local();
        {
            let mut meta = self.cache.frame(frame).meta();
            meta.memo = Memo::Invalid;
            meta.starved_priority = 0;
        }
        self.stats.lock().unwrap().handovers += 1;
        let previous = self.handovers.lock().unwrap().insert(g, to);
        assert!(previous.is_none(), "two handovers of {g} in flight from one node");
        let handover = Verb::Faa { remote: Layout::latch(g), add: latch::handover_delta(self.me, to) };
        if self.config.forwarding {
            if self.config.mutant == Mutant::ForwardWithoutDirtyBounds {
                region.store(header_offset, Dirty::CLEAN.to_header());
            }
            let forward = self.forward_verbs(&msg, frame, 1);
            let (a, b) =
                join(nic.try_batch(&forward, "handover forward"), nic.try_batch(&[handover], "handover"))
                    .await;
            a?;
            b?;
        } else {
            // Handover without forwarding: flush with the FAA in one batch, A READs memory.
            let dirty = Dirty::from_header(region.load(header_offset));
            let mut verbs: Vec<Verb> = self.flush_verb(g, dirty, header_offset + WORD).into_iter().collect();
            verbs.push(handover);
            self.post_release(nic, &verbs).await?;
            self.reply(nic, &msg, ReplyStatus::Granted, 1).await?;
        }
        region.store(header_offset, Dirty::CLEAN.to_header());
        self.handovers.lock().unwrap().remove(&g);
        Ok(())
    }

    /// Case 2 (§3.5 [P]): `batch[WRITE dirty range, FAA(−me, BIT(A)|BIT(me))]` so memory is
    /// current for later readers, then forward the (now clean) copy to reader A. The FAA must
    /// complete before the forward: A may release its bit as soon as it has the copy, and a
    /// `−BIT(A)` landing before our `+BIT(A)` would borrow from a neighbour's bit (S8).
    async fn serve_downgrade(&self, nic: &N, frame: u32, msg: InvMsg) -> ProtocolResult<()> {
        let g = msg.gcl;
        let header_offset = self.frame_offset(frame);
        let region = self.nic.local();
        {
            let mut meta = self.cache.frame(frame).meta();
            meta.transit = true;
            meta.flushing = true;
        }
        let dirty = Dirty::from_header(region.load(header_offset));
        let mut verbs: Vec<Verb> = self.flush_verb(g, dirty, header_offset + WORD).into_iter().collect();
        verbs.push(Verb::Faa { remote: Layout::latch(g), add: latch::downgrade_delta(self.me, msg.sender) });
        let early = self.config.mutant == Mutant::DowngradeForwardBeforeFaa && self.config.forwarding;
        if early {
            // Planted bug: the copy (and the flag that lets the reader go on) before the FAA.
            region.store(header_offset, Dirty::CLEAN.to_header());
            nic.try_batch(&self.forward_verbs(&msg, frame, 2), "downgrade forward").await?;
        }
        self.post_release(nic, &verbs).await?;
        region.store(header_offset, Dirty::CLEAN.to_header());
        {
            let mut meta = self.cache.frame(frame).meta();
            meta.memo = Memo::Shared;
            meta.transit = false;
            meta.flushing = false;
            meta.starved_priority = 0;
        }
        self.stats.lock().unwrap().downgrades += 1;
        if self.config.forwarding {
            if !early {
                nic.try_batch(&self.forward_verbs(&msg, frame, 2), "downgrade forward").await?;
            }
            Ok(())
        } else {
            self.reply(nic, &msg, ReplyStatus::Granted, 1).await
        }
    }

    /// Case 3 (§3.5 [P], Fig. 8): release our Shared latch; the writer keeps retrying its CAS.
    /// A high-priority writer also asks our future readers to spin (§5.3.2).
    async fn serve_release_shared(&self, nic: &N, frame: u32, msg: InvMsg) -> ProtocolResult<()> {
        let g = msg.gcl;
        self.cache.frame(frame).meta().transit = true;
        nic.try_faa(Layout::latch(g), latch::release_shared_delta(self.me), "release shared").await?;
        {
            let mut meta = self.cache.frame(frame).meta();
            meta.memo = Memo::Invalid;
            meta.transit = false;
            if self.config.reader_spin_wait && msg.priority >= self.config.starvation_level_min {
                meta.spin_priority = msg.priority;
            }
        }
        self.stats.lock().unwrap().shared_releases += 1;
        self.reply(nic, &msg, ReplyStatus::Released, 1).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_follow_the_three_cases() {
        use InvKind::*;
        use Memo::*;
        assert_eq!(decide(Modified, WriterVsModified, true, false), Action::Handover);
        assert_eq!(decide(Modified, ReaderVsModified, true, false), Action::Downgrade);
        assert_eq!(decide(Shared, WriterVsShared, true, false), Action::ReleaseShared);
        assert_eq!(decide(Modified, WriterVsModified, false, false), Action::FlushRelease);
        assert_eq!(
            decide(Modified, ReaderVsModified, true, true),
            Action::Drop(DropReason::PriorityMatching)
        );
        // Outdated messages (§3.5): the memo no longer matches what the sender saw.
        assert_eq!(decide(Invalid, WriterVsModified, true, false), Action::Drop(DropReason::Stale));
        assert_eq!(decide(Shared, WriterVsModified, true, false), Action::Drop(DropReason::Stale));
        assert_eq!(decide(Modified, WriterVsShared, true, false), Action::Drop(DropReason::Stale));
    }
}
