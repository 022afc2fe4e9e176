//! A local cache frame (SELCC §3.2 [P], §4.2): the GCL copy in registered memory, the ownership
//! memo, the local shared/exclusive latch, and the fairness bookkeeping of §5.3.
//!
//! MSI mapping (§3.2): memo M ⇔ the latch word's exclusive field names this node; memo S ⇔ this
//! node's reader bit is set and no exclusive holder; memo I ⇔ neither. The memo changes only
//! while the frame's local latch is held exclusively (by an acquiring thread, a handler, a lease
//! release or the evictor), which is what keeps one global acquire per frame at a time (spec B6).

use std::sync::{Arc, Mutex, MutexGuard};

use crate::sync::{Latch, TouchSet};

use super::fairness::Lease;
use super::layout::Gaddr;
use super::message::InvMsg;

/// The ownership memo of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Memo {
    Invalid,
    Shared,
    Modified,
}

/// Mutable frame state, always read and written under the frame's `meta` mutex (never held
/// across an await).
#[derive(Clone, Debug)]
pub struct FrameMeta {
    /// The GCL this frame caches; `None` while free.
    pub gcl: Option<Gaddr>,
    pub memo: Memo,
    /// Local users (threads between lookup and unlock, handlers) — a pinned frame is not evicted.
    pub pins: u32,
    /// A local thread holds the latch exclusively and runs a global acquire. Messages that meet
    /// such a frame are dropped, never memorised, or two acquirers could wait on each other.
    pub acquiring: bool,
    /// Latch verbs for this line issued by this node are in flight: the memo may disagree with
    /// the latch word until they complete (a documented transient for invariant S3).
    pub transit: bool,
    /// This Modified copy's flush and latch FAA are in flight, posted as one batch on one QP by
    /// a task that holds the local latch exclusively: a Case-2 downgrade
    /// `[WRITE dirty, FAA(−me·EX, +BIT(A)|BIT(me))]` or a release `[WRITE dirty, FAA(−me·EX)]`.
    /// Once the FAA lands the latch no longer names us exclusive while the memo still says
    /// Modified, until the completion arrives (invariant S2's one precise exemption, `check.rs`).
    pub flushing: bool,
    pub lease: Lease,
    /// The one memorised (deferred) invalidation message (§5.3.2 [P], [REPO] one slot); boxed
    /// because few frames hold one at a time and the inline message doubled the frame.
    pub pending: Option<Box<InvMsg>>,
    /// Reader spin-wait requested by a starved writer's message (0 = none).
    pub spin_priority: u8,
    /// Priority at which the current Modified copy was won after starving (priority matching).
    pub starved_priority: u8,
    /// Threads inside a critical section (for invariant S1).
    pub section_readers: u32,
    pub section_writers: u32,
}

impl FrameMeta {
    pub fn free() -> FrameMeta {
        FrameMeta {
            gcl: None,
            memo: Memo::Invalid,
            pins: 0,
            acquiring: false,
            transit: false,
            flushing: false,
            lease: Lease::default(),
            pending: None,
            spin_priority: 0,
            starved_priority: 0,
            section_readers: 0,
            section_writers: 0,
        }
    }

    /// Reset for caching `gcl` (memo I, nothing pending).
    pub fn assign(&mut self, gcl: Gaddr) {
        assert!(self.gcl.is_none(), "assigning a frame that still caches {:?}", self.gcl);
        assert_eq!(self.pins, 0);
        *self = FrameMeta { gcl: Some(gcl), ..FrameMeta::free() };
    }
}

/// A cache may hold millions of frames (the paper's 8 GB of 2 KB lines is 4 M per compute
/// node), so the frame is kept small: the memorised message is boxed, the latch's waiter queue
/// is allocated on first wait, and the frame's touch mark is its latch's (issue #15).
pub struct Frame {
    /// Its operations, and every hand-out of `meta` for possible change, mark this frame in
    /// the cache's touch set, so the incremental invariant checker (`check_incremental.rs`)
    /// looks again only at frames touched since its last call.
    pub latch: Latch,
    meta: Mutex<FrameMeta>,
}

impl Frame {
    pub fn new() -> Frame {
        Frame::in_group(Arc::new(TouchSet::new(1)), 0)
    }

    /// Frame `index` of a cache whose touch marks are `group` ([`super::cache::Cache::take_touched`]).
    pub fn in_group(group: Arc<TouchSet>, index: u32) -> Frame {
        Frame { latch: Latch::in_group(group, index), meta: Mutex::new(FrameMeta::free()) }
    }

    /// The frame's state, locked for reading or writing.
    pub fn meta(&self) -> MutexGuard<'_, FrameMeta> {
        self.latch.mark_touched();
        self.meta.lock().unwrap()
    }

    /// The frame's state for an observer that does not change it (invariant checks): does not
    /// count as a touch.
    pub fn peek_meta(&self) -> MutexGuard<'_, FrameMeta> {
        self.meta.lock().unwrap()
    }
}

impl Default for Frame {
    fn default() -> Self {
        Frame::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    #[test]
    fn a_frame_stays_small() {
        // Goal: paper-scale caches (4.2 M frames per compute node) stay in memory: a frame is
        // 112 bytes since issue #15 (192 before); the cache adds an 8-byte LRU link per frame
        // and its index entry per cached GCL.
        eprintln!(
            "Frame {} = Latch {} + Mutex<FrameMeta> {} (FrameMeta {}: Option<Gaddr> {}, Lease {}, Memo {})",
            size_of::<Frame>(),
            size_of::<Latch>(),
            size_of::<Mutex<FrameMeta>>(),
            size_of::<FrameMeta>(),
            size_of::<Option<Gaddr>>(),
            size_of::<Lease>(),
            size_of::<Memo>()
        );
        assert!(size_of::<Frame>() <= 112, "a cache frame grew to {} bytes", size_of::<Frame>());
    }
}
