//! The coherence check of `check.rs`, evaluated only on lines whose inputs may have changed
//! since the last call. The fuzzer runs it after every simulator event; the full check locks and
//! copies every frame of every node each time, which was 83 % of a `fuzz-small` schedule
//! (issue #15).
//!
//! Why this finds exactly what the full check finds: the result of `check_line(g)` depends only
//! on the copies of `g` in the frames, the handovers and releases of `g` in flight, and `g`'s latch
//! word. A frame's copy can change only through [`Frame::meta`] or an operation on its local
//! latch, both of which mark the frame (and its cache) touched; the flight maps and the retry
//! queue are [`Watched`] mutexes, marked on every lock; the latch words of every line named by a
//! copy are re-read and compared whenever the simulator counted a memory write since the last
//! call (without one no word moved). A line none of whose inputs changed gave `Ok` last time (a
//! run stops at its first violation, and after an `Err` the next call starts from scratch), so it
//! gives `Ok` again. Lines are checked in
//! ascending order and the L2 check runs first, as in the full check, so the first violation
//! reported is the same one. `verify_every` re-runs the full check beside the incremental one and
//! panics on any difference: the tests run with it on.
//!
//! [`Frame::meta`]: super::frame::Frame::meta
//! [`Watched`]: crate::sync::Watched

use super::check::{check_coherence, check_line, stranded_message, Copy, Violation};
use super::frame::Memo;
use super::layout::{Gaddr, Layout};
use super::message::InvMsg;
use super::node::NodeState;
use super::ComputeIndex;

/// What the checker last saw of one frame.
#[derive(Clone, Copy)]
struct FrameView {
    copy: Copy,
    /// The memorised message, for L2.
    pending: Option<InvMsg>,
    /// The local latch is free with nobody waiting (L2: nobody will pass a memorised message on).
    latch_idle: bool,
}

/// The word a newly named line starts with, so that its first read counts as a change.
const UNREAD: u64 = u64::MAX;

/// A line named by at least one cached copy.
struct Line {
    gcl: Gaddr,
    /// The latch word as last read.
    word: u64,
    /// The frames caching it, `(node, frame)` ascending: the full check's gathering order.
    holders: Vec<(usize, usize)>,
}

/// Persistent state of the incremental coherence check; one per simulated run.
pub struct IncrementalCheck {
    /// Per compute node, per frame: the view as last read (`None`: the frame caches no line).
    views: Vec<Vec<Option<FrameView>>>,
    /// Per compute node: views holding a memorised message (L2 candidates).
    pending: Vec<usize>,
    /// Per compute node: some frame may have changed during the last event.
    frames_changed: Vec<bool>,
    /// Read every frame on the next call (first call, or after a violation).
    from_scratch: bool,
    /// Lines named by a cached copy, ascending.
    lines: Vec<Line>,
    /// Lines with a handover or release in flight at the last call.
    flight_lines: Vec<Gaddr>,
    dirty: Vec<Gaddr>,
    /// Frames of one node touched since the last call.
    touched: Vec<u32>,
    handovers: Vec<(Gaddr, u32, ComputeIndex, ComputeIndex)>,
    releasing: Vec<(Gaddr, u32, ComputeIndex)>,
    line_copies: Vec<Copy>,
    calls: u64,
    /// Compare with the full check on every `verify_every`-th call (0: never).
    verify_every: u64,
}

impl IncrementalCheck {
    pub fn new(verify_every: u64) -> IncrementalCheck {
        IncrementalCheck {
            views: Vec::new(),
            pending: Vec::new(),
            frames_changed: Vec::new(),
            from_scratch: true,
            lines: Vec::new(),
            flight_lines: Vec::new(),
            dirty: Vec::new(),
            touched: Vec::new(),
            handovers: Vec::new(),
            releasing: Vec::new(),
            line_copies: Vec::new(),
            calls: 0,
            verify_every,
        }
    }

    /// The same verdict as [`super::check::check_coherence`] on the same state.
    /// `nodes` may be any slice of references to the states (`&NodeState`, `Arc<NodeState>`):
    /// the per-event caller passes its own list instead of collecting one each event.
    pub fn check<S: std::ops::Deref<Target = NodeState>>(
        &mut self,
        nodes: &[S],
        layout: &Layout,
        latch_word: &dyn Fn(Gaddr) -> u64,
        memory_changed: bool,
    ) -> Result<(), Violation> {
        self.calls += 1;
        let result = self.check_changed(nodes, layout, latch_word, memory_changed);
        if result.is_err() {
            self.from_scratch = true;
        }
        if self.verify_every > 0 && self.calls.is_multiple_of(self.verify_every) {
            let refs: Vec<&NodeState> = nodes.iter().map(|s| &**s).collect();
            let full = check_coherence(&refs, layout, latch_word);
            assert_eq!(
                result, full,
                "incremental coherence check disagrees with the full check at call {}",
                self.calls
            );
        }
        result
    }

    fn check_changed<S: std::ops::Deref<Target = NodeState>>(
        &mut self,
        nodes: &[S],
        layout: &Layout,
        latch_word: &dyn Fn(Gaddr) -> u64,
        memory_changed: bool,
    ) -> Result<(), Violation> {
        self.dirty.clear();
        let scratch = std::mem::take(&mut self.from_scratch);
        if scratch {
            self.views = nodes.iter().map(|s| vec![None; s.cache.frames.len()]).collect();
            self.pending = vec![0; nodes.len()];
            self.frames_changed = vec![false; nodes.len()];
            // Every frame is re-read from `None`: each joins its line anew (and reads as changed).
            self.lines.clear();
        }
        // Re-read touched frames (every frame on a from-scratch pass); a line a frame left or
        // joined is dirty.
        let mut touched = std::mem::take(&mut self.touched);
        for (k, state) in nodes.iter().enumerate() {
            touched.clear();
            if scratch {
                state.cache.clear_touched();
                touched.extend(0..state.cache.frames.len() as u32);
                self.frames_changed[k] = true;
            } else {
                self.frames_changed[k] = state.cache.take_touched(&mut touched);
            }
            for &i in &touched {
                let i = i as usize;
                let view = read_view(state.me, &state.cache.frames[i]);
                let before = std::mem::replace(&mut self.views[k][i], view);
                self.pending[k] -= before.is_some_and(|v| v.pending.is_some()) as usize;
                self.pending[k] += view.is_some_and(|v| v.pending.is_some()) as usize;
                let (was, is) = (before.map(|v| v.copy.gcl), view.map(|v| v.copy.gcl));
                if was != is {
                    // The frame left one line and joined another.
                    if let Some(g) = was {
                        self.leave_line(g, (k, i));
                    }
                    if let Some(g) = is {
                        self.join_line(g, (k, i));
                    }
                }
                self.dirty.extend(was);
                self.dirty.extend(is);
            }
        }
        self.touched = touched;
        // L2 before any line check, node by node and frame by frame (the full check's order), on
        // nodes whose frames or retry queue changed.
        for (k, state) in nodes.iter().enumerate() {
            let queue_changed = state.retry_queued.take_touched();
            if self.pending[k] == 0 || !(queue_changed || self.frames_changed[k] || scratch) {
                continue;
            }
            let queued = state.retry_queued.peek();
            for v in self.views[k].iter().flatten() {
                if let (Some(msg), true) = (&v.pending, v.latch_idle) {
                    if !queued.contains_key(&v.copy.gcl) {
                        return Err(stranded_message(state, v.copy.gcl, msg));
                    }
                }
            }
        }
        // The flight maps, re-read whole when any changed (few entries); the lines they named
        // before and name now are dirty.
        let mut flight_changed = scratch;
        for state in nodes {
            // Both marks are taken (`|`, not `||`).
            flight_changed |= state.handovers.take_touched() | state.releasing.take_touched();
        }
        if flight_changed {
            self.handovers.clear();
            self.releasing.clear();
            let mut seq = 0u32;
            for state in nodes {
                for (g, to) in state.handovers.peek().iter() {
                    seq += 1;
                    self.handovers.push((*g, seq, state.me, *to));
                }
                for g in state.releasing.peek().keys() {
                    seq += 1;
                    self.releasing.push((*g, seq, state.me));
                }
            }
            self.handovers.sort_unstable_by_key(|h| (h.0, h.1));
            self.releasing.sort_unstable_by_key(|r| (r.0, r.1));
            self.dirty.append(&mut self.flight_lines);
            self.flight_lines.extend(self.handovers.iter().map(|h| h.0));
            self.flight_lines.extend(self.releasing.iter().map(|r| r.0));
            self.dirty.extend_from_slice(&self.flight_lines);
        }
        // The latch word of every named line: a changed word makes its line dirty. With no
        // memory written since the last call only lines named since need reading (their
        // sentinel word; a real word equal to it is merely re-read).
        for line in self.lines.iter_mut().filter(|l| memory_changed || l.word == UNREAD) {
            let now = latch_word(line.gcl);
            if now != line.word {
                line.word = now;
                self.dirty.push(line.gcl);
            }
        }
        self.dirty.sort_unstable();
        self.dirty.dedup();
        let n = layout.compute_count();
        for &g in &self.dirty {
            self.line_copies.clear();
            if let Ok(j) = self.lines.binary_search_by_key(&g, |l| l.gcl) {
                let views = &self.views;
                self.line_copies
                    .extend(self.lines[j].holders.iter().filter_map(|&(k, i)| views[k][i]).map(|v| v.copy));
            }
            let h = range_of(&self.handovers, g, |h| h.0);
            let r = range_of(&self.releasing, g, |r| r.0);
            if self.line_copies.is_empty() && h.is_empty() && r.is_empty() {
                continue; // a line nothing names any more: the full check does not visit it
            }
            check_line(g, &self.line_copies, &self.handovers[h], &self.releasing[r], n, latch_word)?;
        }
        Ok(())
    }

    /// Frame `holder` caches `g` now. A line new to the list gets a word no latch holds, so it
    /// reads as changed.
    fn join_line(&mut self, g: Gaddr, holder: (usize, usize)) {
        match self.lines.binary_search_by_key(&g, |l| l.gcl) {
            Ok(j) => {
                let holders = &mut self.lines[j].holders;
                let at = holders.partition_point(|h| *h < holder);
                holders.insert(at, holder);
            }
            Err(j) => self.lines.insert(j, Line { gcl: g, word: UNREAD, holders: vec![holder] }),
        }
    }

    /// Frame `holder` no longer caches `g`; a line no frame names leaves the list.
    fn leave_line(&mut self, g: Gaddr, holder: (usize, usize)) {
        let j = self.lines.binary_search_by_key(&g, |l| l.gcl).expect("a cached line is listed");
        let holders = &mut self.lines[j].holders;
        holders.retain(|h| *h != holder);
        if holders.is_empty() {
            self.lines.remove(j);
        }
    }
}

/// The frame as the full check reads it.
fn read_view(me: ComputeIndex, frame: &super::frame::Frame) -> Option<FrameView> {
    let meta = frame.peek_meta();
    let gcl = meta.gcl()?;
    let latch = frame.latch.snapshot();
    let (readers, writers) = (meta.section_readers, meta.section_writers);
    let sealed = readers == 0 && writers == 0 && latch.1;
    Some(FrameView {
        copy: Copy {
            gcl,
            seq: 0,
            node: me,
            memo: meta.memo,
            transit: meta.transit,
            acquiring: meta.acquiring,
            flushing: meta.flushing && meta.memo == Memo::Modified && sealed,
            sealed,
            readers: readers.into(),
            writers: writers.into(),
        },
        pending: meta.pending.as_deref().copied(),
        latch_idle: latch == (0, false, 0),
    })
}

/// The index range of the entries of line `g` in a list sorted by line.
fn range_of<T>(list: &[T], g: Gaddr, line: impl Fn(&T) -> Gaddr) -> std::ops::Range<usize> {
    let start = list.partition_point(|e| line(e) < g);
    let end = start + list[start..].partition_point(|e| line(e) == g);
    start..end
}
