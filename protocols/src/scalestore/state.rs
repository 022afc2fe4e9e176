//! A node's protocol state: its translation table (one entry per page it caches or is
//! fetching) and the directory entries of the pages whose PIDs name it. One mutex per node:
//! every decision below is taken in one step, as the paper's handlers do under the frame latch.

use std::collections::BTreeMap;

/// Conflict epochs travel in 24 bits; compared in serial-number order.
pub const EPOCH_MASK: u32 = 0xff_ffff;

/// `a` is later than `b` (serial-number order over 24 bits).
pub fn epoch_after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b) & EPOCH_MASK;
    d != 0 && d < 1 << 23
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameState {
    /// Inserted and latched before the ownership request went out (R1); no page yet.
    Fetching,
    /// A node-shared owner asking for node-exclusive; its old copy stays until invalidated.
    Upgrading,
    /// Page present in `exclusive` or shared mode: the local hot path serves it.
    Hot,
    /// A shared fetch invalidated while it arrived, latched by the one operation it serves;
    /// dropped at its unlatch (page-latch mode only; not a copy the directory knows).
    Doomed,
    /// A Hot copy a page provider is evicting: no local access, handlers re-poll requests
    /// for it, until the directory accepted (the frame goes) or declined (Hot again).
    Evicting,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    pub state: FrameState,
    /// Node-exclusive (Hot) or the mode being fetched.
    pub exclusive: bool,
    /// The conflict epoch the directory gave this node's request (its place in the page's order).
    pub grant: Option<u32>,
    /// The latest invalidation that reached a shared fetch: if it is later than the grant,
    /// the fetched page serves the waiting operation once and is dropped.
    pub inval: Option<u32>,
    /// Upgrading: the old copy was taken or invalidated meanwhile.
    pub lost: bool,
    /// The directory answered the current request (`grant` is its epoch).
    pub answered: bool,
    /// Page latch of local workers (page-latch mode, `node::Node::lock_page`): readers
    /// (> 0) or one writer (−1). A fetching or upgrading worker holds it exclusively.
    pub latch: i32,
    /// Copies of this frame in flight (a handler's page WRITE not completed yet): the frame
    /// may not change or go until they have read it (the paper's "unlatch when the transfer
    /// completed", spec §2.4).
    pub pins: u16,
    /// A handler had to re-poll a request because the frame was latched or pinned: no new
    /// local latch is granted until it is served (so a hot page cannot starve remote nodes).
    pub wanted: bool,
    /// The node's eviction epoch at the last local access (spec §3.11's LRU approximation).
    pub last_epoch: u32,
    /// Fetching: the directory is READing back the copy of the page's last holder, which is
    /// evicting it (answered when the READ completed).
    pub pulled: bool,
    /// Fetching a copy from another holder (a copy can fail): only an unconfirmed anchor is
    /// ever asked for a copy while fetching one (see `DirEntry::unconfirmed`).
    pub by_copy: bool,
}

impl Frame {
    pub fn fetching(exclusive: bool) -> Frame {
        Frame {
            state: FrameState::Fetching,
            exclusive,
            grant: None,
            inval: None,
            lost: false,
            answered: false,
            latch: 0,
            pins: 0,
            wanted: false,
            last_epoch: 0,
            pulled: false,
            by_copy: false,
        }
    }

    pub fn hot(exclusive: bool, grant: u32) -> Frame {
        Frame {
            state: FrameState::Hot,
            exclusive,
            grant: Some(grant),
            inval: None,
            lost: false,
            answered: true,
            latch: 0,
            pins: 0,
            wanted: false,
            last_epoch: 0,
            pulled: false,
            by_copy: false,
        }
    }

    /// Latched or pinned: a handler may not take, invalidate or drop it now.
    pub fn busy(&self) -> bool {
        self.latch != 0 || self.pins > 0
    }
}

/// The directory's metadata of one page (spec §3.1): mode, holders, conflict epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub exclusive: bool,
    /// Bitmap of node ids (exactly one when `exclusive`).
    pub holders: u64,
    pub epoch: u32,
    /// A holder whose copy cannot fail to arrive (the owner when exclusive); see `own`.
    /// [`SSD`] when no holder is one and the directory's storage has the current page.
    pub anchor: u16,
    /// The directory's storage device has the current version (the page is clean).
    pub on_ssd: bool,
    /// A shared clean page's anchor named from its sharers when the previous anchor left
    /// (`directory::evict`): its copy may still be on its way and can fail, so it serves
    /// copies but no transfer, and a failure is covered by the storage device (the page is
    /// clean). The authors' code likewise sends requesters to a node that has a copy
    /// (`NoPageEvicted`) instead of its SSD.
    pub unconfirmed: bool,
}

/// `DirEntry::anchor` when the page's source is the directory's storage device.
pub const SSD: u16 = u16::MAX;

pub struct NodeState {
    /// By global page index (every node has a slot for every page; see `layout`). Change
    /// presence only through [`NodeState::set`], which keeps `used` right.
    pub frames: Vec<Option<Frame>>,
    /// This node's pages, by slot (PID low bits).
    pub dir: Vec<DirEntry>,
    /// Frames present (any state): the cache's occupancy.
    pub used: u64,
    /// Of those, frames `Evicting` (about to be freed: the providers count them as free).
    pub evicting: u64,
    /// The eviction epoch, advanced by the page providers (spec §3.11).
    pub epoch: u32,
}

impl NodeState {
    pub fn new(frames: Vec<Option<Frame>>, dir: Vec<DirEntry>) -> NodeState {
        let used = frames.iter().filter(|f| f.is_some()).count() as u64;
        NodeState { frames, dir, used, evicting: 0, epoch: 0 }
    }

    /// Put `frame` in slot `g`, counting occupancy.
    pub fn set(&mut self, g: u64, frame: Option<Frame>) {
        let slot = &mut self.frames[g as usize];
        let evicting = |f: &Option<Frame>| f.is_some_and(|f| f.state == FrameState::Evicting) as u64;
        self.used = self.used + frame.is_some() as u64 - slot.is_some() as u64;
        self.evicting = self.evicting + evicting(&frame) - evicting(slot);
        *slot = frame;
    }
}

/// Invariant bookkeeping (check mode, one process): holders a directory removed that have not
/// yet served the invalidation or transfer they are owed, by (page, node).
pub type Owed = std::sync::Arc<std::sync::Mutex<BTreeMap<(u64, u16), u32>>>;

/// Bits of `bitmap`, lowest first.
pub fn bits(bitmap: u64) -> impl Iterator<Item = u16> {
    (0..64u16).filter(move |b| bitmap >> b & 1 == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_order_across_the_wrap() {
        assert!(epoch_after(1, 0));
        assert!(epoch_after(0, EPOCH_MASK));
        assert!(!epoch_after(5, 5));
        assert!(!epoch_after(4, 5));
        assert_eq!(bits(0b101).collect::<Vec<_>>(), vec![0, 2]);
    }
}
