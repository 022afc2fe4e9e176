//! Range scans (`Tree.cpp` `range_query`): along the leaf siblings from the start key's leaf,
//! or with `parallel_scan` first a round of the leaves the cached level-1 node names for the
//! scanned key range, READ together.

use std::collections::BTreeMap;

use super::{thread_buffer_bytes, Client, SCAN_ROUND_LEAVES};
use crate::common::error::ProtocolResult;
use crate::nic::{Nanos, Nic};
use crate::sherman::layout::{NODE_BYTES, NODE_WORDS};
use crate::sherman::mutants::Mutant;
use crate::sherman::node::{Node, TOMBSTONE};

impl<N: Nic> Client<N> {
    /// Up to `n` live entries with keys ≥ `from`, ascending, leaf by leaf along the siblings
    /// ([CHOICE]: Sherman fetches the leaves of cached level-1 nodes in parallel and assumes all
    /// of them cached; walking siblings is the same READs without that assumption), or with
    /// `parallel_scan` first the leaves the cached level-1 node names ([`Client::scan_round`]).
    pub async fn scan(&mut self, from: u64, n: usize) -> ProtocolResult<Vec<(u64, u64)>> {
        if self.config().items {
            return self.marlin_scan(from, n).await;
        }
        let first = if self.mutant() == Mutant::ScanExcludesStart { from.saturating_add(1) } else { from };
        let mut out = Vec::new();
        let mut leaf = match self.scan_round(from, n).await? {
            Some(leaves) => {
                let last = leaves.len() - 1;
                for l in &leaves[..last] {
                    Self::take_live(l, first, n, &mut out);
                }
                leaves.into_iter().nth(last).expect("a round reads at least one leaf")
            }
            None => self.find_leaf(from).await?,
        };
        loop {
            Self::take_live(&leaf, first, n, &mut out);
            if out.len() >= n || !self.shared.layout.is_frame(leaf.sibling) {
                return Ok(out);
            }
            leaf = self.read_leaf_plain(leaf.sibling).await?;
        }
    }

    /// Append `leaf`'s live entries ≥ `first` it covers, ascending, until `out` holds `n`.
    fn take_live(leaf: &Node, first: u64, n: usize, out: &mut Vec<(u64, u64)>) {
        let mut live: Vec<(u64, u64)> = leaf
            .slots
            .iter()
            .filter(|s| s.value != 0 && s.value & TOMBSTONE == 0 && s.key >= first && leaf.covers(s.key))
            .map(|s| (s.key, s.value))
            .collect();
        live.sort_unstable();
        out.extend(live.into_iter().take(n.saturating_sub(out.len())));
    }

    /// `parallel_scan`: the leaves of a cached level-1 node that hold the keys `from ..= from +
    /// n - 1` (where `n` items lie when keys are dense, as the Dolphin and Sherman benchmarks'
    /// `range_query(key, key + range)`), at most [`SCAN_ROUND_LEAVES`] and at most
    /// [`crate::nic::MAX_BATCH`] per memory node, READ together: one doorbell batch per memory
    /// node, all posted before any is waited for (as the authors' code). Returns the contiguous
    /// run of leaves from the one covering `from`, cut where an image is torn, not a leaf, or
    /// does not continue its left neighbour (a split the cached node predates): the caller
    /// walks on from the last one's sibling. `None` (the caller walks from the start) when the
    /// option is off, no cached node covers `from`, the first image is torn, or it is not the
    /// leaf covering `from` (a stale entry: invalidated).
    async fn scan_round(&mut self, from: u64, n: usize) -> ProtocolResult<Option<Vec<Node>>> {
        if !self.config().parallel_scan || self.config().cache_nodes == 0 {
            return Ok(None);
        }
        let last = from.saturating_add(n.max(1) as u64 - 1);
        let hit = self.shared.cache.lock().unwrap_or_else(|e| e.into_inner()).lookup_range(from, last);
        // A miss is counted by the walk's own lookup.
        let Some((mut addrs, id)) = hit else {
            return Ok(None);
        };
        self.cur.cache_hits += 1;
        self.nic.cpu(Nanos(self.config().cpu.cache_ns)).await;
        // At most one doorbell batch per memory node (so within any QP's outstanding cap):
        // the round ends before the leaf that would be a memory node's ninth.
        let mut per_mn: BTreeMap<u16, usize> = BTreeMap::new();
        let fits = addrs
            .iter()
            .take_while(|a| {
                let n = per_mn.entry(a.node().0).or_default();
                *n += 1;
                *n <= crate::nic::MAX_BATCH
            })
            .count();
        addrs.truncate(fits.min(SCAN_ROUND_LEAVES));
        if !addrs.iter().all(|a| self.shared.layout.is_frame(*a)) {
            self.cache_invalidate(id);
            return Ok(None);
        }
        let area = self.buf + thread_buffer_bytes(self.config().items, false);
        self.read_each(&addrs, area, NODE_BYTES, "scan read leaves").await?;
        let v = self.config().versions;
        let mut leaves: Vec<Node> = Vec::new();
        for i in 0..addrs.len() {
            self.nic.cpu(Nanos(self.config().cpu.node_ns)).await;
            let words = self.local_words(area + i as u64 * NODE_BYTES, NODE_WORDS);
            let Ok(node) = Node::decode(v, &words) else {
                // Torn (a write in flight): the walk re-reads it with the version check.
                self.cur.retries += 1;
                break;
            };
            let continues = match leaves.last() {
                None => node.covers(from),
                Some(_) if self.mutant() == Mutant::ScanRoundIgnoresSplits => true,
                Some(prev) => node.lowest == prev.highest,
            };
            if !node.is_leaf() || !continues {
                if leaves.is_empty() {
                    self.cache_invalidate(id);
                }
                break;
            }
            leaves.push(node);
        }
        Ok((!leaves.is_empty()).then_some(leaves))
    }
}
