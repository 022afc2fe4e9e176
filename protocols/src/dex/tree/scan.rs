//! Range scans (DEX has no leaf links): one descent per leaf, each starting at the previous
//! leaf's upper fence.

use super::*;

impl<N: Nic> Client<N> {
    /// Up to `n` live entries with keys ≥ `from`, ascending: one lookup per leaf, the next
    /// starting at the leaf's upper fence (leaves are not linked). [CHOICE] a scan stops at the
    /// end of this server's partition.
    pub async fn scan(&mut self, from: u64, n: usize) -> ProtocolResult<Vec<(u64, u64)>> {
        let part_end = self.shared.parts().range_of(self.shared.cn, from).map_or(from, |r| r.1);
        let mut out = Vec::new();
        let mut k = from;
        loop {
            let leaf = self.descend(k, false, false, None).await?;
            let (mut live, highest) = {
                let mut c = self.shared.cache();
                let node = match &leaf {
                    Leaf::Cached(f) => c.frames[*f].node.clone(),
                    Leaf::Uncached(addr, node) => {
                        Self::clear_io(&mut c, *addr);
                        node.clone()
                    }
                    Leaf::Offloaded(_) => unreachable!("scans are never offloaded"),
                };
                let live: Vec<(u64, u64)> = node
                    .slots
                    .iter()
                    .filter(|s| s.value != 0 && s.value & crate::sherman::node::TOMBSTONE == 0 && s.key >= k)
                    .map(|s| (s.key, s.value))
                    .collect();
                (live, node.highest)
            };
            live.sort_unstable();
            if self.mutant() == Mutant::ScanSkipsFenceKey && k != from {
                // The next leaf starts at the previous one's upper fence: skipping it as if it
                // were exclusive loses the leaf's lowest key.
                live.retain(|(key, _)| *key > k);
            }
            for e in live {
                if out.len() == n {
                    break;
                }
                out.push(e);
            }
            self.settle_cpu().await;
            if out.len() >= n || highest >= part_end || highest == u64::MAX {
                return Ok(out);
            }
            k = highest;
        }
    }
}
