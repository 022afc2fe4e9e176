//! Completion slots: which batch a work completion belongs to, and the futures waiting for it.

use std::sync::{Arc, Mutex};
use std::task::Waker;

use dmsim_protocols::nic::{BatchResult, NicError, NicResult, NodeId, Verb, MAX_BATCH};

use super::NodeState;
use crate::verbs::{Completion, Qp};

pub(super) const SLOT_BITS: u32 = 12;
const GEN_MASK: u64 = 0xff_ffff;

pub(super) fn encode(qp_index: usize, slot: u32, gen: u32, wr_index: usize) -> u64 {
    ((qp_index as u64) << 44) | ((slot as u64) << 32) | ((gen as u64 & GEN_MASK) << 8) | wr_index as u64
}

pub(super) fn decode(wr_id: u64) -> (usize, u32, u32, usize) {
    (
        (wr_id >> 44) as usize,
        ((wr_id >> 32) & 0xfff) as u32,
        ((wr_id >> 8) & GEN_MASK) as u32,
        (wr_id & 0xff) as usize,
    )
}

enum SlotState {
    Free,
    Pending { waker: Option<Waker>, first_error: Option<Completion>, abandoned: bool },
    Done(Result<(), Completion>),
}

struct Slot {
    gen: u32,
    wr_count: u32,
    state: SlotState,
}

struct Slots {
    entries: Vec<Slot>,
    free: Vec<u32>,
    outstanding_wrs: u32,
}

/// One QP and the completion slots of its send queue.
pub(crate) struct QpState {
    pub(super) qp: Arc<Qp>,
    pub(super) index: usize,
    pub(super) target: NodeId,
    pub(super) name: String,
    cap: u32,
    slots: Mutex<Slots>,
}

impl QpState {
    pub(super) fn new(qp: Arc<Qp>, index: usize, target: NodeId, name: String, cap: u32) -> QpState {
        let entries = (0..cap).map(|_| Slot { gen: 0, wr_count: 0, state: SlotState::Free }).collect();
        let free = (0..cap).rev().collect();
        QpState {
            qp,
            index,
            target,
            name,
            cap,
            slots: Mutex::new(Slots { entries, free, outstanding_wrs: 0 }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn acquire(&self, wr_count: u32) -> NicResult<(u32, u32)> {
        let mut s = self.lock();
        if s.outstanding_wrs + wr_count > self.cap {
            return Err(NicError::QpOverflow { qp: self.name.clone(), cap: self.cap });
        }
        // Every pending slot holds at least one work request, so a slot is free whenever the
        // work-request cap is not reached.
        let slot =
            s.free.pop().ok_or_else(|| NicError::QpOverflow { qp: self.name.clone(), cap: self.cap })?;
        s.outstanding_wrs += wr_count;
        let e = &mut s.entries[slot as usize];
        e.gen = (e.gen + 1) & GEN_MASK as u32;
        e.wr_count = wr_count;
        e.state = SlotState::Pending { waker: None, first_error: None, abandoned: false };
        Ok((slot, e.gen))
    }

    /// The post failed: nothing is in flight for this slot.
    pub(super) fn cancel(&self, slot: u32) {
        let mut s = self.lock();
        let wr_count = s.entries[slot as usize].wr_count;
        s.outstanding_wrs -= wr_count;
        s.entries[slot as usize].state = SlotState::Free;
        s.free.push(slot);
    }

    /// Records one completion; true if it finished a batch.
    pub(super) fn complete(&self, c: Completion, slot: u32, gen: u32, wr_index: usize) -> bool {
        let mut s = self.lock();
        let Slots { entries, free, outstanding_wrs } = &mut *s;
        let Some(e) = entries.get_mut(slot as usize) else { return false };
        if e.gen != gen {
            return false;
        }
        let last = wr_index + 1 >= e.wr_count as usize;
        let SlotState::Pending { waker, first_error, abandoned } = &mut e.state else { return false };
        if !c.ok() && first_error.is_none() {
            *first_error = Some(c);
        }
        if !last {
            return false;
        }
        *outstanding_wrs -= e.wr_count;
        let result = first_error.map_or(Ok(()), Err);
        let waker = waker.take();
        if *abandoned {
            e.state = SlotState::Free;
            free.push(slot);
        } else {
            e.state = SlotState::Done(result);
        }
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
        true
    }
}

/// Waits for a slot. The slot stays reserved (and its scratch words intact) until this value
/// is dropped; a wait dropped before completion leaves the slot to the poller.
pub(super) struct SlotWait<'a> {
    pub(super) qs: &'a QpState,
    pub(super) slot: u32,
    pub(super) gen: u32,
}

impl SlotWait<'_> {
    /// The batch's outcome if it has finished; otherwise `None`, after leaving `waker` (if
    /// given) to be woken when it does.
    pub(super) fn check(&self, waker: Option<&Waker>) -> Option<Result<(), Completion>> {
        let mut s = self.qs.lock();
        let e = &mut s.entries[self.slot as usize];
        if e.gen != self.gen {
            return Some(Ok(()));
        }
        match &mut e.state {
            SlotState::Pending { waker: w, .. } => {
                if let Some(waker) = waker {
                    if !w.as_ref().is_some_and(|w| w.will_wake(waker)) {
                        *w = Some(waker.clone());
                    }
                }
                None
            }
            SlotState::Done(result) => Some(*result),
            SlotState::Free => Some(Ok(())),
        }
    }
}

impl SlotWait<'_> {
    /// Copies the slot's scratch results before the slot is released (call when Ready).
    pub(super) fn results(&self, node: &NodeState, verbs: &[Verb]) -> BatchResult {
        let mut values = [0u64; MAX_BATCH];
        let base = node.scratch_offset(self.qs.index, self.slot);
        for (i, v) in verbs.iter().enumerate() {
            if matches!(v, Verb::Cas { .. } | Verb::Faa { .. }) {
                values[i] = node.scratch_mr.region().load(base + 8 * i as u64);
            }
        }
        BatchResult::new(&values[..verbs.len()])
    }
}

impl Drop for SlotWait<'_> {
    fn drop(&mut self) {
        let mut s = self.qs.lock();
        let e = &mut s.entries[self.slot as usize];
        if e.gen != self.gen {
            return;
        }
        match &mut e.state {
            // Timed out or cancelled: the poller frees the slot when the completion arrives.
            SlotState::Pending { abandoned, waker, .. } => {
                *abandoned = true;
                *waker = None;
            }
            SlotState::Done(_) => {
                e.state = SlotState::Free;
                s.free.push(self.slot);
            }
            SlotState::Free => {}
        }
    }
}
