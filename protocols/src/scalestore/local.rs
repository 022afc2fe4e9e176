//! A node's local cache-line traffic for the ablation of paper §6.2 (`protocol_options.local`):
//! the baseline's "traditional single latched translation table", its "classical queue-based
//! LRU-eviction strategy" and its "pessimistic lock-coupled B-Tree", each timed as the cache
//! lines its latches and lists write moving between the node's cores, on
//! `common::local_latch` (DEX's model: a line written by another core costs a hand-off, 100 ns
//! from a core on the same socket and 200 ns from the other socket; waiters spin, and each
//! section still reserved when a thread arrives slows its hand-off by half a transfer).
//!
//! The default (every option off) is ScaleStore as built: the partitioned, optimistically
//! latched translation table, the epoch LRU approximation (an access writes the frame's epoch
//! only when the global epoch moved, paper §4.1) and an optimistically latched tree (reads
//! only load latch lines). None of them write a shared line on a hit, so none is charged
//! beyond `cpu.local_op_ns`. Everything here is a cost, not a wait on another task: the node's
//! state changes in the same synchronous steps as without it, and the latch a step charges is
//! reserved at the worker's virtual time.
//!
//! Sources: paper §6.2 (the ablation), §4.1 (LRU's "high overhead for every page access"), the
//! authors' code ([C] `threads/CoreManager.hpp`: every thread of a node pinned to one socket,
//! paper §6.1 "pinned to NUMA 0", so `sockets` = 1); the per-line costs are DEX's frozen
//! `cpu.cooling_lock_ns` / `cpu.remote_line_ns` / `cpu.pause_ns`, shared as
//! `common::local_latch::{LINE_NS, REMOTE_LINE_NS, PAUSE_NS}`, not new.

use serde::{Deserialize, Serialize};

use crate::common::local_latch::{self, interleaved_socket, HandOff, LatchTimes, Mode};

/// How the translation table (PID → frame) is latched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    /// ScaleStore: partitioned, an optimistic latch per bucket; no shared line written.
    #[default]
    Partitioned,
    /// The ablation's third step: lookups validate one optimistic version latch (they load its
    /// line, restart while a writer holds it), inserts and deletes take it exclusively.
    OptimisticSingle,
    /// The baseline: one reader-writer latch; a lookup's shared acquire and release each write
    /// its line, inserts and deletes take it exclusively. [CHOICE] A shared acquire is timed as
    /// a queued section with DEX's spinning-waiter penalty, although a reader-writer lock's
    /// shared acquire is one atomic add (a write of the line, but no spin while readers hold it).
    SingleLatch,
}

/// How page accesses are recorded for eviction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lru {
    /// ScaleStore's epoch approximation: free on a hit.
    #[default]
    Epoch,
    /// An exact LRU list under one lock: a hit moves its frame to the head (unlink: the two
    /// neighbours' links; relink: the head pointer and the old head's link — 4 list lines), an
    /// insert links at the head, an eviction unlinks the tail (2 lines each). [CHOICE] the
    /// line counts are those of a doubly linked list, each line last written by another core
    /// and moved serially (no overlap of the transfers).
    Queue,
}

/// How the B-tree's page latches are timed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TreeLatches {
    /// The paper's optimistic lock coupling (reads load latch lines, write none): not charged.
    #[default]
    Optimistic,
    /// Pessimistic lock coupling: each page latch's acquire writes the page's latch line, and
    /// [CHOICE] a shared latch's release writes it again (a reader count, as `std::shared_mutex`);
    /// the root's line is hot. Shared acquires are timed as the single latch's (above).
    Pessimistic,
}

/// `protocol_options.local`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LocalLatches {
    pub translation_table: Table,
    pub lru: Lru,
    pub tree: TreeLatches,
    /// A line written by a core on the same socket moving to this core (DEX's frozen
    /// `cpu.cooling_lock_ns`, the DEX paper's "~100ns").
    pub line_ns: u64,
    /// The same from the other socket (DEX's `cpu.remote_line_ns`, an estimate there).
    pub remote_line_ns: u64,
    /// Sockets the node's threads alternate over ([C] `CoreManager`: one).
    pub sockets: u32,
    /// A failed optimistic read's pause before it retries (DEX's `cpu.pause_ns`).
    pub pause_ns: u64,
}

impl Default for LocalLatches {
    fn default() -> Self {
        LocalLatches {
            translation_table: Table::Partitioned,
            lru: Lru::Epoch,
            tree: TreeLatches::Optimistic,
            line_ns: local_latch::LINE_NS,
            remote_line_ns: local_latch::REMOTE_LINE_NS,
            sockets: 1,
            pause_ns: local_latch::PAUSE_NS,
        }
    }
}

/// The translation table's one latch and the LRU list's lock (page latches use the PID).
const TABLE: u64 = u64::MAX;
const LRU: u64 = u64::MAX - 1;

impl LocalLatches {
    pub fn validate(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.sockets == 0 || self.sockets > 8 {
            out.push("local.sockets: must be in 1..=8".into());
        }
        if self.pause_ns == 0 {
            out.push("local.pause_ns: must be at least 1 (a failed optimistic read retries after it)".into());
        }
        if self.line_ns == 0 || self.remote_line_ns < self.line_ns {
            out.push("local.line_ns: must be at least 1 and at most remote_line_ns".into());
        }
        out
    }

    /// Whether anything is charged.
    pub fn active(&self) -> bool {
        self.translation_table != Table::Partitioned
            || self.lru != Lru::Epoch
            || self.tree != TreeLatches::Optimistic
    }

    fn hand(&self) -> HandOff {
        HandOff { local_ns: self.line_ns, remote_ns: self.remote_line_ns }
    }
}

/// What a thread does to the node's shared lines in one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Touch {
    /// A translation-table lookup (hit or miss).
    Lookup,
    /// Inserting a frame into the table (a miss) and linking it into the LRU list.
    Insert,
    /// Removing an evicted frame from the table and the LRU list.
    Remove,
    /// A page access on the hot path (the LRU's move to the head).
    Access,
    /// A tree latch on page `g` taken (`true`: exclusive).
    Latch(u64, bool),
    /// The same latch released (`true`: it was exclusive, whose release writes no other line).
    Unlatch(u64, bool),
}

/// A node's local latch lines, by id.
#[derive(Default)]
pub struct Lines {
    latches: LatchTimes,
}

impl Lines {
    /// Charge `touches` in order for thread `thread` (workers, then handlers and providers)
    /// arriving at `t`: the ns it owes (waits, hand-offs and list lines, spinning as CPU).
    pub fn charge(&mut self, o: &LocalLatches, thread: u32, t: u64, touches: &[Touch]) -> u64 {
        let (hand, socket) = (o.hand(), interleaved_socket(thread, o.sockets));
        let mut now = t;
        for touch in touches {
            let mut section = |id: u64, lines: u64, now: &mut u64| {
                let s = self
                    .latches
                    .acquire_lines(id, *now, socket, hand, lines, Mode::Queued)
                    .expect("a queued acquire always gets the latch");
                *now = s.end;
            };
            match *touch {
                Touch::Lookup => match o.translation_table {
                    Table::Partitioned => {}
                    Table::SingleLatch => {
                        // lock_shared and unlock_shared: two atomic writes of the latch line.
                        section(TABLE, 0, &mut now);
                        section(TABLE, 0, &mut now);
                    }
                    Table::OptimisticSingle => {
                        // Read the version, validate; retry after a pause while a writer has it.
                        for _ in 0..10_000 {
                            match self.latches.try_read(TABLE, now, 0, socket, hand) {
                                Ok(load) => {
                                    now += load;
                                    break;
                                }
                                Err(look) => now += look + o.pause_ns,
                            }
                        }
                    }
                },
                Touch::Insert | Touch::Remove => {
                    if o.translation_table != Table::Partitioned {
                        // The exclusive latch (its release is a store to a line this core holds).
                        section(TABLE, 0, &mut now);
                    }
                    if o.lru == Lru::Queue {
                        section(LRU, 2, &mut now);
                    }
                }
                Touch::Access => {
                    if o.lru == Lru::Queue {
                        section(LRU, 4, &mut now);
                    }
                }
                Touch::Latch(g, _) => {
                    if o.tree == TreeLatches::Pessimistic {
                        section(g, 0, &mut now);
                    }
                }
                Touch::Unlatch(g, exclusive) => {
                    if o.tree == TreeLatches::Pessimistic && !exclusive {
                        section(g, 0, &mut now);
                    }
                }
            }
        }
        now - t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_charge_nothing_and_the_baseline_queues() {
        let o = LocalLatches::default();
        assert!(!o.active());
        let mut l = Lines::default();
        let all =
            [Touch::Lookup, Touch::Insert, Touch::Access, Touch::Latch(3, false), Touch::Unlatch(3, false)];
        assert_eq!(l.charge(&o, 0, 0, &all), 0);
        let base = LocalLatches {
            translation_table: Table::SingleLatch,
            lru: Lru::Queue,
            tree: TreeLatches::Pessimistic,
            ..LocalLatches::default()
        };
        // Alone: two table transfers, four list lines plus the lock line, a latch and a release.
        assert_eq!(l.charge(&base, 0, 0, &[Touch::Lookup, Touch::Access]), 200 + 500);
        assert_eq!(l.charge(&base, 1, 10_000, &[Touch::Latch(3, false), Touch::Unlatch(3, false)]), 200);
        // A second thread at the same time waits for the first one's release (to 200), takes
        // the line with one section still reserved ahead (+ half a transfer, to 350), then
        // releases (to 450).
        let mut l = Lines::default();
        assert_eq!(l.charge(&base, 0, 0, &[Touch::Lookup]), 200);
        assert_eq!(l.charge(&base, 1, 0, &[Touch::Lookup]), 450);
        // Optimistic lookups share the line once loaded; an insert invalidates it.
        let opt = LocalLatches { translation_table: Table::OptimisticSingle, ..LocalLatches::default() };
        let mut l = Lines::default();
        assert_eq!(l.charge(&opt, 0, 0, &[Touch::Lookup]), 100);
        assert_eq!(l.charge(&opt, 1, 50, &[Touch::Lookup]), 0);
        assert_eq!(l.charge(&opt, 2, 100, &[Touch::Insert]), 100);
        // A reader during the insert: a failed look (which loads the line), a pause, then a
        // successful read of the line it now shares.
        assert_eq!(l.charge(&opt, 3, 150, &[Touch::Lookup]), 100 + 45);
    }
}
