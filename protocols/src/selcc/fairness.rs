//! Fairness (SELCC §5.3 [P]): the lease that bounds local-over-global priority, the one-slot
//! memo of deferred invalidation messages with priority, and priority matching. Pure functions.

use super::message::{InvKind, InvMsg};

/// Lease counters of one frame (§5.3.1 [P]). Activated when a message meets a busy frame,
/// deactivated when a local thread takes the latch without waiting, incremented when one waits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lease {
    pub active: bool,
    pub reads: u32,
    pub writes: u32,
}

impl Lease {
    pub fn activate(self) -> Lease {
        Lease { active: true, ..self }
    }

    /// A local access took the latch; `waited` says whether it had to wait.
    pub fn on_local_access(self, waited: bool, write: bool) -> Lease {
        if !self.active {
            return self;
        }
        if !waited {
            return Lease::default();
        }
        if write {
            Lease { writes: self.writes.saturating_add(1), ..self }
        } else {
            Lease { reads: self.reads.saturating_add(1), ..self }
        }
    }

    /// A = R_c/P + W_c > γ, computed without division: R_c + P·W_c > P·γ. `gamma = None` is Inf.
    pub fn exceeded(self, threads_per_node: u32, gamma: Option<u32>) -> bool {
        let Some(gamma) = gamma else { return false };
        let p = threads_per_node.max(1) as u64;
        self.active && self.reads as u64 + p * self.writes as u64 > p * gamma as u64
    }
}

/// Memorise `incoming` in a frame's single slot (§5.3.2 [P]: the holder "memorizes those messages
/// as well as their priority"; one slot is [REPO]). Returns (slot after, message to drop now).
/// Strictly higher priority displaces; ties keep the earlier message (FIFO among equals).
pub fn memorise(slot: Option<InvMsg>, incoming: InvMsg) -> (Option<InvMsg>, Option<InvMsg>) {
    match slot {
        None => (Some(incoming), None),
        Some(kept) if incoming.priority > kept.priority => (Some(incoming), Some(kept)),
        Some(kept) => (Some(kept), Some(incoming)),
    }
}

/// Pick the message to serve among the fresh one and the memorised one: the highest priority
/// (§5.3.2 "deliberately transferred to the sender with the highest priority"), the memorised
/// one on ties (it waited longer). Returns (serve, drop).
pub fn choose(fresh: Option<InvMsg>, slot: Option<InvMsg>) -> (Option<InvMsg>, Option<InvMsg>) {
    match (fresh, slot) {
        (Some(f), Some(s)) if f.priority > s.priority => (Some(f), Some(s)),
        (Some(f), Some(s)) => (Some(s), Some(f)),
        (f, s) => (f.or(s), None),
    }
}

/// Priority matching (§5.3.2 [P]): a reader's invalidation of a Modified copy whose writer had
/// starved at `starved_priority` must carry at least that priority.
pub fn reader_must_wait(msg: &InvMsg, starved_priority: u8, matching: bool) -> bool {
    matching && msg.kind == InvKind::ReaderVsModified && msg.priority < starved_priority
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::{NodeId, RemoteAddr};
    use crate::selcc::ComputeIndex;

    fn msg(sender: u8, priority: u8) -> InvMsg {
        InvMsg {
            kind: InvKind::WriterVsModified,
            priority,
            sender: ComputeIndex(sender),
            gcl: RemoteAddr::new(NodeId(0), 64),
            frame_offset: 0,
            reply_offset: 0,
            seq: 1,
            no_wait: false,
        }
    }

    #[test]
    fn lease_counts_only_waits_while_active() {
        let l = Lease::default().on_local_access(true, true);
        assert_eq!(l, Lease::default(), "inactive counters do not count");
        let l = Lease::default().activate().on_local_access(true, true).on_local_access(true, false);
        assert_eq!((l.writes, l.reads), (1, 1));
        assert!(l.exceeded(8, Some(0)));
        assert!(l.exceeded(8, Some(1)), "1/8 + 1 is above 1");
        assert!(!l.exceeded(8, Some(2)), "1/8 + 1 is not above 2");
        assert!(!l.exceeded(8, None), "γ = Inf never releases");
        assert_eq!(l.on_local_access(false, true), Lease::default(), "no wait deactivates");
    }

    #[test]
    fn slot_keeps_the_highest_priority() {
        let (slot, dropped) = memorise(None, msg(1, 0));
        assert_eq!((slot.unwrap().sender.0, dropped), (1, None));
        let (slot, dropped) = memorise(slot, msg(2, 0));
        assert_eq!((slot.unwrap().sender.0, dropped.unwrap().sender.0), (1, 2), "ties keep FIFO");
        let (slot, dropped) = memorise(slot, msg(3, 4));
        assert_eq!((slot.unwrap().sender.0, dropped.unwrap().sender.0), (3, 1));
        let (serve, dropped) = choose(Some(msg(4, 1)), slot);
        assert_eq!((serve.unwrap().sender.0, dropped.unwrap().sender.0), (3, 4));
    }

    #[test]
    fn matching_blocks_low_priority_readers() {
        let mut m = msg(1, 2);
        m.kind = InvKind::ReaderVsModified;
        assert!(reader_must_wait(&m, 3, true));
        assert!(!reader_must_wait(&m, 2, true));
        assert!(!reader_must_wait(&m, 3, false));
    }
}
