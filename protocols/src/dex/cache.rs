//! The compute-side cache of one compute server (DEX §5): page frames holding whole nodes, the
//! mapping table (node ID → frame, or the I/O flag), swizzled child pointers, and the cooling
//! map of FIFO buckets.
//!
//! * **Swizzling**: a HOT frame is reachable from its parent frame without a table probe; we
//!   keep that as the parent's `swizzled` map (child address → frame), the artifact's per-child
//!   bitmap plus local pointers, and the child's `parent`. The root is swizzled into
//!   [`Cache::root`].
//! * **States**: HOT (swizzled), COOLING (unswizzled, clean, in a cooling-map bucket), FLUSHING
//!   (unswizzled, its write-back in flight: not usable until it lands), FREE.
//! * **Cooling map**: `ceil(frames · cooling_fraction / bucket_slots)` buckets of
//!   `bucket_slots` frames each, FIFO: a cooled page enters at the tail; a full bucket pushes
//!   its head out of the cache. Fig. 4's FIFO queue is one bucket of all
//!   `ceil(frames · cooling_fraction)` slots. The cost of the locks around these changes is
//!   charged by the caller (`tree::locks`).
//!
//! All of this is plain data changed between awaits: a thread's synchronous step is atomic
//! with respect to the other threads of its server (the simulator runs one task at a time; the
//! mutex makes it so on hardware). A thread that must hold a frame across an RDMA verb (a
//! split, a flush of a subtree) marks it `busy` (the local write lock of optimistic lock
//! coupling); other threads restart when they meet a busy frame.

use std::collections::{BTreeMap, VecDeque};

use crate::sherman::layout::Gaddr;
use crate::sherman::node::Node;

pub type FrameId = usize;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Free,
    Hot,
    Cooling,
    Flushing,
}

#[derive(Clone, Debug)]
pub struct Frame {
    pub addr: Gaddr,
    pub node: Node,
    pub state: State,
    pub dirty: bool,
    pub busy: bool,
    /// The frame this one is swizzled into (`None` for the root or when not HOT).
    pub parent: Option<FrameId>,
    /// Swizzled children: child node ID → frame.
    pub swizzled: BTreeMap<Gaddr, FrameId>,
    /// Local version: bumped by every change of `node` (optimistic lock coupling).
    pub version: u64,
    /// The node crosses a partition boundary.
    pub shared: bool,
    /// Offloads in flight below this frame: it stays HOT (not sampled, not flushed) until they
    /// return ("DEX pins N's parent in a hot state").
    pub pins: u32,
}

impl Frame {
    fn free() -> Frame {
        Frame {
            addr: Gaddr::NULL,
            node: Node::empty_leaf(super::config::VERSIONS, 0, 0),
            state: State::Free,
            dirty: false,
            busy: false,
            parent: None,
            swizzled: BTreeMap::new(),
            version: 0,
            shared: false,
            pins: 0,
        }
    }
}

/// A mapping-table value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A thread is fetching (or flushing out) this node: others restart.
    Io,
    Frame(FrameId),
}

pub struct Cache {
    pub frames: Vec<Frame>,
    pub table: BTreeMap<Gaddr, Entry>,
    /// Frames never used yet (the cache is "filled" once this is empty).
    pub pool: Vec<FrameId>,
    pub buckets: Vec<VecDeque<FrameId>>,
    pub bucket_slots: usize,
    /// The root frame (swizzled into the root slot), and the root node ID this server knows.
    pub root: Option<FrameId>,
    pub root_addr: Gaddr,
    pub filled: bool,
    /// The key range `[lo, hi)` of every node under an I/O flag for a fetch or an offload
    /// (offloading needs nothing of its subtree in flight).
    pub io_ranges: BTreeMap<Gaddr, (u64, u64)>,
}

/// Fixed mix of a node ID to a bucket (the artifact hashes the node ID too).
fn bucket_of(addr: Gaddr, buckets: usize) -> usize {
    let mut x = addr.0 ^ 0x2545_f491_4f6c_dd1d;
    x = (x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    ((x ^ (x >> 32)) % buckets as u64) as usize
}

impl Cache {
    /// A cache of `frames` frames; `fifo`: the cooling pages in one queue instead of buckets.
    pub fn new(
        frames: usize,
        cooling_fraction: f64,
        bucket_slots: usize,
        fifo: bool,
        root_addr: Gaddr,
    ) -> Cache {
        let capacity = (frames as f64 * cooling_fraction).ceil().max(1.0) as usize;
        let (buckets, bucket_slots) =
            if fifo { (1, capacity) } else { (capacity.div_ceil(bucket_slots).max(1), bucket_slots) };
        Cache {
            frames: (0..frames).map(|_| Frame::free()).collect(),
            table: BTreeMap::new(),
            pool: (0..frames).rev().collect(),
            buckets: vec![VecDeque::new(); buckets],
            bucket_slots,
            root: None,
            root_addr,
            filled: false,
            io_ranges: BTreeMap::new(),
        }
    }

    /// Put `node` (fetched from `addr`) into free frame `f`, HOT, swizzled into `parent`
    /// (`None`: the root slot).
    pub fn install(&mut self, f: FrameId, addr: Gaddr, node: Node, parent: Option<FrameId>, shared: bool) {
        let frame = &mut self.frames[f];
        debug_assert_eq!(frame.state, State::Free);
        *frame = Frame {
            addr,
            node,
            state: State::Hot,
            dirty: false,
            busy: false,
            parent,
            swizzled: BTreeMap::new(),
            version: frame.version + 1,
            shared,
            pins: 0,
        };
        self.swizzle(f, parent);
        self.table.insert(addr, Entry::Frame(f));
        self.io_ranges.remove(&addr);
    }

    fn swizzle(&mut self, f: FrameId, parent: Option<FrameId>) {
        let addr = self.frames[f].addr;
        self.frames[f].parent = parent;
        self.frames[f].state = State::Hot;
        match parent {
            Some(p) => {
                self.frames[p].swizzled.insert(addr, f);
            }
            None => self.root = Some(f),
        }
    }

    /// Undo the swizzle of HOT frame `f` in its parent (or the root slot).
    pub fn unswizzle(&mut self, f: FrameId) {
        let addr = self.frames[f].addr;
        match self.frames[f].parent.take() {
            Some(p) => {
                self.frames[p].swizzled.remove(&addr);
            }
            None => {
                if self.root == Some(f) {
                    self.root = None;
                }
            }
        }
    }

    /// Second chance: a COOLING frame met again goes back to HOT under `parent`. Returns the
    /// bucket it left.
    pub fn reheat(&mut self, f: FrameId, parent: Option<FrameId>) -> usize {
        let b = self.bucket_index(self.frames[f].addr);
        self.buckets[b].retain(|x| *x != f);
        self.swizzle(f, parent);
        b
    }

    /// The bucket node `addr` cools in.
    pub fn bucket_index(&self, addr: Gaddr) -> usize {
        bucket_of(addr, self.buckets.len())
    }

    /// Put a clean, unswizzled frame at the tail of its bucket; a full bucket evicts its head,
    /// whose frame is returned (free).
    pub fn push_cooling(&mut self, f: FrameId) -> Option<FrameId> {
        self.frames[f].state = State::Cooling;
        let b = self.bucket_index(self.frames[f].addr);
        self.buckets[b].push_back(f);
        if self.buckets[b].len() > self.bucket_slots {
            let head = self.buckets[b].pop_front().expect("over-full bucket");
            return Some(self.evict(head));
        }
        None
    }

    /// Take the oldest page of bucket `b`, if any, out of the cache; its frame is returned.
    pub fn evict_head(&mut self, b: usize) -> Option<FrameId> {
        let head = self.buckets[b].pop_front()?;
        Some(self.evict(head))
    }

    /// Drop a clean COOLING page from the cache; its frame becomes free.
    fn evict(&mut self, f: FrameId) -> FrameId {
        let addr = self.frames[f].addr;
        if self.table.get(&addr) == Some(&Entry::Frame(f)) {
            self.table.remove(&addr);
        }
        let frame = &mut self.frames[f];
        frame.state = State::Free;
        frame.swizzled.clear();
        frame.parent = None;
        frame.busy = false;
        f
    }

    /// Free an unswizzled frame outright (after a flush of a stale subtree).
    pub fn release(&mut self, f: FrameId) -> FrameId {
        for b in &mut self.buckets {
            b.retain(|x| *x != f);
        }
        self.evict(f)
    }

    /// The HOT frames of the subtree under `f` (itself included), children before parents.
    pub fn subtree(&self, f: FrameId) -> Vec<FrameId> {
        let mut out = Vec::new();
        let mut stack = vec![(f, false)];
        while let Some((x, expanded)) = stack.pop() {
            if expanded {
                out.push(x);
                continue;
            }
            stack.push((x, true));
            for c in self.frames[x].swizzled.values() {
                stack.push((*c, false));
            }
        }
        out
    }

    /// Sampling for cooling (path-aware): from HOT frame `f` follow swizzled children down to
    /// a frame with none. `None` if the path meets a busy frame.
    pub fn cooling_candidate(&self, f: FrameId, pick: &mut impl FnMut(usize) -> usize) -> Option<FrameId> {
        let mut x = f;
        loop {
            let frame = &self.frames[x];
            if frame.state != State::Hot || frame.busy || frame.pins > 0 {
                return None;
            }
            if frame.swizzled.is_empty() {
                break;
            }
            let i = pick(frame.swizzled.len());
            x = *frame.swizzled.values().nth(i).expect("index below len");
        }
        if let Some(p) = self.frames[x].parent {
            if self.frames[p].busy {
                return None;
            }
        }
        Some(x)
    }

    /// Whether nothing in `[lo, hi)` is on its way to memory or being fetched: no FLUSHING
    /// frame and no I/O flag over an overlapping range. An offload of the subtree covering
    /// `[lo, hi)` then finds its latest, whole image in memory.
    pub fn quiet(&self, lo: u64, hi: u64) -> bool {
        let overlaps = |a: u64, b: u64| a < hi && b > lo;
        !self.frames.iter().any(|f| f.state == State::Flushing && overlaps(f.node.lowest, f.node.highest))
            && !self.io_ranges.values().any(|(a, b)| overlaps(*a, *b))
    }

    /// Drop the cached copy of `addr` an offload changed in memory, if it is COOLING (clean,
    /// unswizzled); its frame goes back to the pool. `false` if it is cached otherwise.
    pub fn invalidate(&mut self, addr: Gaddr) -> Option<FrameId> {
        match self.table.get(&addr).copied() {
            Some(Entry::Frame(f)) if self.frames[f].state == State::Cooling => Some(self.release(f)),
            _ => None,
        }
    }

    pub fn cooling_len(&self) -> usize {
        self.buckets.iter().map(|b| b.len()).sum()
    }
}
