//! Eviction (SELCC §5.2 [P]): LRU victims give up their global ownership — WRITE of the dirty
//! range + FAA for Modified, FAA for Shared — either in the background, batched per memory node
//! through a per-QP ring buffer (§5.2.1), or synchronously by a front-end thread that found no
//! free frame (the ablation baseline of Fig. 18).
//!
//! The ring bounds outstanding work requests per memory-node QP to `evict_ring_slots` (L_out):
//! a Modified victim's dirty range is copied into a ring slot so its frame is recycled at once;
//! the slot returns when the batch completes. While a victim's release is in flight its GCL is
//! in `releasing`, so a new local acquire of it waits (it would otherwise meet its own
//! not-yet-released ownership).
//!
//! A failed release leaves its GCL in `releasing` for good: the evictor (or the batch task)
//! records the error on the node and stops, and waiters for that GCL fail with the error.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::error::ProtocolResult;
use crate::nic::{Nanos, Nic, Verb, MAX_BATCH};

use super::dirty::Dirty;
use super::frame::{FrameMeta, Memo};
use super::layout::{Gaddr, WORD};
use super::message::ReplyStatus;
use super::node::{Node, Worker};

/// One background batch in flight to a memory node.
struct Batch {
    position: usize,
    verbs: Vec<Verb>,
    slots: Vec<u32>,
    gcls: Vec<Gaddr>,
    credits: u32,
}

impl<N: Nic> Node<N> {
    /// The background eviction worker: keeps at least L frames free (§5.2 [P]). Stops at its
    /// first error (recorded on the node).
    pub async fn run_evictor(self: Arc<Self>, nic: N) {
        assert!(self.config.batched_eviction);
        let low = self.config.free_frames_low() as usize;
        loop {
            let wanted = self.evict_wanted.notified();
            let free = self.cache.free_count();
            if free >= low {
                wanted.await;
                continue;
            }
            // "selects L − l_f victims from the back of the LRU list"
            let victims = self.take_victims(low - free);
            if victims.is_empty() {
                // Every candidate is in use; look again shortly.
                nic.sleep(Nanos(self.config.cpu.poll_ns * 4)).await;
                continue;
            }
            if let Err(e) = self.evict_batched(&nic, victims).await {
                self.fail(e);
                return;
            }
        }
    }

    /// Group victims by memory node, one doorbell batch per group (up to `MAX_BATCH` verbs), posted
    /// without waiting for completion (§5.2.1 [P]).
    async fn evict_batched(self: &Arc<Self>, nic: &N, victims: Vec<(u32, FrameMeta)>) -> ProtocolResult<()> {
        let mut groups: BTreeMap<usize, Vec<(u32, FrameMeta)>> = BTreeMap::new();
        for (frame, meta) in victims {
            let g = meta.gcl().expect("victim without GCL");
            groups.entry(self.layout.memory_position(g.node)).or_default().push((frame, meta));
        }
        for (position, group) in groups {
            let mut batch =
                Batch { position, verbs: Vec::new(), slots: Vec::new(), gcls: Vec::new(), credits: 0 };
            for (frame, meta) in group {
                let g = meta.gcl().unwrap();
                self.before_evict(nic, &meta).await?;
                if meta.memo == Memo::Invalid {
                    self.recycle_victim(frame);
                    continue;
                }
                let need = if meta.memo == Memo::Modified { 2 } else { 1 };
                if batch.verbs.len() + need > MAX_BATCH {
                    self.post_batch(nic, &mut batch);
                }
                let slot = loop {
                    let freed = self.ring_freed.notified();
                    if let Some(slot) = self.take_credits(position, need as u32) {
                        break slot;
                    }
                    self.post_batch(nic, &mut batch);
                    self.errors.check()?;
                    freed.await;
                };
                let frame_offset = self.frame_offset(frame);
                let region = self.nic.local();
                let dirty = Dirty::from_header(region.load(frame_offset));
                let data_local = match slot {
                    Some(slot) => {
                        // Copy the dirty range into the ring slot so the frame is free at once.
                        let slot_offset = self.layout.ring_slot_offset(position, slot);
                        region.copy_from(slot_offset, region, frame_offset, self.layout.frame_stride_bytes());
                        batch.slots.push(slot);
                        if self.config.mutant == super::config::Mutant::ReuseFrameBeforeFlush {
                            frame_offset + WORD // planted bug: flush from the frame being recycled
                        } else {
                            slot_offset + WORD
                        }
                    }
                    None => frame_offset + WORD,
                };
                batch.verbs.extend(self.release_verbs(g, meta.memo, dirty, data_local));
                batch.credits += need as u32;
                batch.gcls.push(g);
                self.recycle_victim(frame);
            }
            self.post_batch(nic, &mut batch);
        }
        Ok(())
    }

    /// Reserve `need` outstanding-WR credits (and a ring slot for a Modified victim).
    fn take_credits(&self, position: usize, need: u32) -> Option<Option<u32>> {
        let mut ring = self.ring.lock().unwrap();
        if ring.credits[position] < need {
            return None;
        }
        let slot = if need == 2 { Some(ring.free_slots[position].pop()?) } else { None };
        ring.credits[position] -= need;
        Some(slot)
    }

    /// Post `batch` as a background task and start a new one.
    fn post_batch(self: &Arc<Self>, nic: &N, batch: &mut Batch) {
        if batch.verbs.is_empty() {
            return;
        }
        let posted = std::mem::replace(
            batch,
            Batch {
                position: batch.position,
                verbs: Vec::new(),
                slots: Vec::new(),
                gcls: Vec::new(),
                credits: 0,
            },
        );
        let node = self.clone();
        let task_nic = nic.clone();
        nic.spawn(async move {
            if let Err(e) = node.post_release(&task_nic, &posted.verbs).await {
                node.fail(e);
                return;
            }
            {
                let mut ring = node.ring.lock().unwrap();
                ring.credits[posted.position] += posted.credits;
                ring.free_slots[posted.position].extend(&posted.slots);
            }
            for g in &posted.gcls {
                node.end_release(*g);
            }
            node.ring_freed.notify_all();
        });
    }

    /// A front-end thread found no free frame and batching is off: evict one victim itself.
    ///
    /// Its round trips go to `w.op.evict_round_trips`, not `w.op.round_trips`: they are on the
    /// op's critical path but acquire nothing, and the op may still turn out a hit — another
    /// local thread that also found the cache full may evict first and load this op's GCL while
    /// this thread's release is in flight (issue #10 item 7; `OpTrace` has the [CHOICE]).
    pub(super) async fn evict_sync(&self, w: &mut Worker<N>) -> ProtocolResult<()> {
        let Some((frame, meta)) = self.take_victims(1).pop() else {
            // Every frame is in use right now.
            w.nic.sleep(Nanos(self.config.cpu.poll_ns)).await;
            return Ok(());
        };
        self.before_evict(&w.nic, &meta).await?;
        if meta.pending.is_some() {
            w.op.evict_round_trips += 1; // the DROPPED reply `before_evict` waited for
        }
        if meta.memo != Memo::Invalid {
            let g = meta.gcl().unwrap();
            let frame_offset = self.frame_offset(frame);
            let dirty = Dirty::from_header(self.nic.local().load(frame_offset));
            let verbs = self.release_verbs(g, meta.memo, dirty, frame_offset + WORD);
            w.op.evict_round_trips += self.post_release(&w.nic, &verbs).await?;
            self.end_release(g);
        }
        self.recycle_victim(frame);
        Ok(())
    }

    /// Take victims from the cache and, before anything awaits, mark the GCLs whose ownership
    /// they hold as releasing: from here until the release lands the latch names this node
    /// while no frame does (checked by directory soundness), and a new local acquire must wait.
    fn take_victims(&self, max: usize) -> Vec<(u32, FrameMeta)> {
        let victims = self.cache.take_victims(max);
        for (_, meta) in &victims {
            if meta.memo != Memo::Invalid {
                self.begin_release(meta.gcl().expect("victim without GCL"));
            }
        }
        victims
    }

    /// Answer a memorised message (drop condition 2) and count the eviction.
    async fn before_evict(&self, nic: &N, meta: &FrameMeta) -> ProtocolResult<()> {
        assert_eq!(meta.section_readers + meta.section_writers, 0, "evicting a frame in a critical section");
        if let Some(&msg) = meta.pending.as_deref() {
            self.reply(nic, &msg, ReplyStatus::Dropped, 0).await?;
        }
        let mut stats = self.stats.lock().unwrap();
        stats.evictions += 1;
        if meta.memo == Memo::Modified {
            stats.evictions_dirty += 1;
        }
        Ok(())
    }

    fn recycle_victim(&self, frame: u32) {
        self.nic.local().store(self.frame_offset(frame), Dirty::CLEAN.to_header());
        self.cache.release_frame(frame);
        self.frame_freed.notify_all();
    }

    /// Release every cached GCL and wait for all releases to land: the end-of-run flush that
    /// makes memory checkable against the oracle (S6/S7). Call when this node's workers are done.
    pub async fn drain(&self, nic: &N) -> ProtocolResult<()> {
        self.drain_inner(nic).await.map_err(|e| self.fail(e))
    }

    async fn drain_inner(&self, nic: &N) -> ProtocolResult<()> {
        let frame_count = self.config.cache_frames as usize;
        loop {
            self.errors.check()?;
            let victims = self.take_victims(frame_count);
            for (frame, meta) in victims {
                self.before_evict(nic, &meta).await?;
                if meta.memo != Memo::Invalid {
                    let g = meta.gcl().unwrap();
                    let frame_offset = self.frame_offset(frame);
                    let dirty = Dirty::from_header(self.nic.local().load(frame_offset));
                    let verbs = self.release_verbs(g, meta.memo, dirty, frame_offset + WORD);
                    self.post_release(nic, &verbs).await?;
                    self.end_release(g);
                }
                self.recycle_victim(frame);
            }
            let idle = self.cache.free_count() == frame_count && self.releasing.lock().unwrap().is_empty();
            if idle {
                return Ok(());
            }
            nic.sleep(Nanos(self.config.cpu.poll_ns * 4)).await;
        }
    }
}
