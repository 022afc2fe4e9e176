//! Checks for tests and check mode: the read-latest [`Oracle`] and the single-writer /
//! multiple-reader invariant across compute nodes ([`check_swmr`]).
//!
//! Every access takes effect at one instant, under its node's cache lock (a read copies out of
//! the frame, a write copies in). Coherence then means: at every instant, a read returns the
//! value of the latest write applied to that word anywhere — exactly what the oracle checks,
//! for SEQ and for TSO alike (a TSO write is applied when it drains; a read forwarded from the
//! thread's own store buffer is exempt, as it sees a write not yet performed).

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::nic::NodeId;

use super::node::{LineState, NodeState};

pub struct Oracle {
    words_per_block: usize,
    shadow: Mutex<BTreeMap<u64, Vec<u64>>>,
    violations: Mutex<Vec<String>>,
    reads_checked: Mutex<u64>,
}

impl Oracle {
    pub fn new(gcl_size_bytes: u32) -> Oracle {
        Oracle {
            words_per_block: gcl_size_bytes as usize / 8,
            shadow: Mutex::new(BTreeMap::new()),
            violations: Mutex::new(Vec::new()),
            reads_checked: Mutex::new(0),
        }
    }

    /// A write of `words` at word `first` of `block` took effect.
    pub fn commit(&self, block: u64, first: usize, words: &[u64]) {
        let mut shadow = self.shadow.lock().unwrap();
        let line = shadow.entry(block).or_insert_with(|| vec![0; self.words_per_block]);
        line[first..first + words.len()].copy_from_slice(words);
    }

    /// A read of `values` at word `first` of `block` took effect.
    pub fn check_read(&self, node: NodeId, block: u64, first: usize, values: &[u64]) {
        *self.reads_checked.lock().unwrap() += 1;
        let shadow = self.shadow.lock().unwrap();
        for (i, value) in values.iter().enumerate() {
            let expected = shadow.get(&block).map_or(0, |line| line[first + i]);
            if expected != *value {
                self.violations.lock().unwrap().push(format!(
                    "{node} read block {block} word {} = {value:#x}, latest write is {expected:#x}",
                    first + i
                ));
            }
        }
    }

    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }

    pub fn reads_checked(&self) -> u64 {
        *self.reads_checked.lock().unwrap()
    }

    /// The latest value of every written word (block → words).
    pub fn latest(&self) -> BTreeMap<u64, Vec<u64>> {
        self.shadow.lock().unwrap().clone()
    }
}

/// SWMR: per block, at most one node holds it Exclusive, and then no other node holds a valid
/// copy. Holds at every instant: a sharer drops its copy before it acks, and the home grants
/// Exclusive only after the last ack.
pub fn check_swmr(nodes: &[&NodeState]) -> Result<(), String> {
    let mut holders: BTreeMap<u64, (u32, u32)> = BTreeMap::new();
    for node in nodes {
        node.for_each_line(|block, state| {
            let h = holders.entry(block).or_default();
            match state {
                LineState::Exclusive => h.0 += 1,
                LineState::Shared => h.1 += 1,
                // Serves no access (`Line::can_serve`): a write-back in flight is not a copy.
                LineState::Invalid | LineState::WritingBack => {}
            }
        });
    }
    for (block, (exclusive, shared)) in holders {
        if exclusive > 1 || (exclusive == 1 && shared > 0) {
            return Err(format!(
                "SWMR violated on block {block}: {exclusive} Exclusive and {shared} Shared copies"
            ));
        }
    }
    Ok(())
}
