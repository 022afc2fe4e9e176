//! A local cache frame (SELCC §3.2 [P], §4.2): the GCL copy in registered memory, the ownership
//! memo, the local shared/exclusive latch, and the fairness bookkeeping of §5.3.
//!
//! MSI mapping (§3.2): memo M ⇔ the latch word's exclusive field names this node; memo S ⇔ this
//! node's reader bit is set and no exclusive holder; memo I ⇔ neither. The memo changes only
//! while the frame's local latch is held exclusively (by an acquiring thread, a handler, a lease
//! release or the evictor), which is what keeps one global acquire per frame at a time (spec B6).

use std::num::NonZeroU64;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::sync::{Latch, TouchSet};

use super::fairness::Lease;
use super::layout::Gaddr;
use super::message::InvMsg;
use crate::nic::NodeId;

/// A GCL address in one word (issue #15: frame size): the node plus one in the top 16 bits, the
/// byte offset below, so `Option<PackedGcl>` is 8 bytes where `Option<Gaddr>` is 24. Also the
/// key of the cache's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PackedGcl(NonZeroU64);

impl PackedGcl {
    const OFFSET_BITS: u32 = 48;

    pub fn pack(g: Gaddr) -> PackedGcl {
        assert!(
            g.offset_bytes >> Self::OFFSET_BITS == 0,
            "GCL offset {:#x} needs more than 48 bits",
            g.offset_bytes
        );
        let node = g.node.0 as u64 + 1;
        assert!(node < 1 << 16, "node {} cannot be packed", g.node.0);
        PackedGcl(NonZeroU64::new(node << Self::OFFSET_BITS | g.offset_bytes).expect("node + 1 > 0"))
    }

    pub fn unpack(self) -> Gaddr {
        let v = self.0.get();
        Gaddr {
            node: NodeId((v >> Self::OFFSET_BITS) as u16 - 1),
            offset_bytes: v & ((1 << Self::OFFSET_BITS) - 1),
        }
    }
}

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
    /// The GCL this frame caches; `None` while free ([`FrameMeta::gcl`]).
    gcl: Option<PackedGcl>,
    pub memo: Memo,
    /// Local users (threads between lookup and unlock, handlers) — a pinned frame is not evicted.
    /// 16 bits, like the section counters: a node runs far fewer threads and handlers.
    pub pins: u16,
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
    pub section_readers: u16,
    pub section_writers: u16,
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
        assert!(self.gcl.is_none(), "assigning a frame that still caches {:?}", self.gcl());
        assert_eq!(self.pins, 0);
        *self = FrameMeta { gcl: Some(PackedGcl::pack(gcl)), ..FrameMeta::free() };
    }

    /// The GCL this frame caches; `None` while free.
    pub fn gcl(&self) -> Option<Gaddr> {
        self.gcl.map(PackedGcl::unpack)
    }

    /// The frame no longer caches a GCL (it left the index).
    pub fn clear_gcl(&mut self) {
        self.gcl = None;
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
        // 88 bytes since issue #15 (192, then 112 before the GCL was packed in one word); the
        // cache adds an 8-byte LRU link per frame and its index entry per cached GCL.
        eprintln!(
            "Frame {} = Latch {} + Mutex<FrameMeta> {} (FrameMeta {}: Option<PackedGcl> {}, Lease {}, Memo {})",
            size_of::<Frame>(),
            size_of::<Latch>(),
            size_of::<Mutex<FrameMeta>>(),
            size_of::<FrameMeta>(),
            size_of::<Option<PackedGcl>>(),
            size_of::<Lease>(),
            size_of::<Memo>()
        );
        assert!(size_of::<Frame>() <= 88, "a cache frame grew to {} bytes", size_of::<Frame>());
    }

    #[test]
    fn a_packed_gcl_round_trips() {
        for g in [
            Gaddr::new(NodeId(0), 64),
            Gaddr::new(NodeId(15), 0),
            Gaddr::new(NodeId(u16::MAX - 1), (1 << 48) - 8),
        ] {
            assert_eq!(PackedGcl::pack(g).unpack(), g);
        }
    }
}
