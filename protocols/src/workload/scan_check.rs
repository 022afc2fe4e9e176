//! A history check for YCSB range scans (Sherman, SMART): **no skipped key**.
//!
//! The indexes' scans are not atomic (Sherman reads leaf after leaf, SMART leaf after leaf of a
//! radix walk), so a scan as a whole need not match one instant; the per-key checkers already
//! place every *returned* key's value in that key's linearization. What they cannot see is a key
//! the scan should have returned and did not. This check closes that gap soundly for
//! non-atomic scans: a key is **stably live** over a scan when every write of it that may take
//! effect before the scan returns (invoked before the scan's return) had already returned before
//! the scan was invoked, and none of them is a delete — then in every linearization the key holds
//! a live value during the whole scan. A scan that returned fewer than its limit claims no other
//! live key at or above its start; one that hit its limit claims none up to its last key. A
//! stably live key in that range that the scan did not return is a violation. Returned keys must
//! also ascend from the start key.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::harness::history::rebased;
use crate::harness::{Clock, NodeReport};

/// One completed scan as a client saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanRecord {
    pub client: u32,
    pub from: u64,
    pub limit: u32,
    /// Returned keys, in the order returned.
    pub keys: Vec<u64>,
    pub invoke_ns: u64,
    pub return_ns: u64,
}

/// One write of a key: `[invoke, return]` (`None`: never returned) and whether it leaves the
/// key live (an insert or update) or deleted.
#[derive(Clone, Copy, Debug)]
pub struct KeyWrite {
    pub key: u64,
    pub invoke_ns: u64,
    pub return_ns: Option<u64>,
    pub live: bool,
}

/// `Err` names the first scan that skipped a stably live key or returned keys out of order.
pub fn check_scans(scans: &[ScanRecord], writes: impl IntoIterator<Item = KeyWrite>) -> Result<(), String> {
    let mut by_key: BTreeMap<u64, Vec<KeyWrite>> = BTreeMap::new();
    for w in writes {
        by_key.entry(w.key).or_default().push(w);
    }
    for s in scans {
        let mut prev: Option<u64> = None;
        for k in &s.keys {
            if *k < s.from || prev.is_some_and(|p| p >= *k) {
                return Err(format!(
                    "scan by client {} from {} returned key {k} out of order (after {prev:?})",
                    s.client, s.from
                ));
            }
            prev = Some(*k);
        }
        let hi = if s.keys.len() >= s.limit as usize {
            s.keys.last().copied().unwrap_or(s.from)
        } else {
            u64::MAX
        };
        if hi < s.from {
            continue;
        }
        let returned: BTreeSet<u64> = s.keys.iter().copied().collect();
        for (key, ws) in by_key.range(s.from..=hi) {
            if returned.contains(key) {
                continue;
            }
            let relevant: Vec<&KeyWrite> = ws.iter().filter(|w| w.invoke_ns < s.return_ns).collect();
            let stable = !relevant.is_empty()
                && relevant.iter().all(|w| w.live && w.return_ns.is_some_and(|r| r < s.invoke_ns));
            if stable {
                let since = relevant.iter().filter_map(|w| w.return_ns).max().unwrap_or(0);
                return Err(format!(
                    "scan by client {} from {} (limit {}, {} keys returned) during [{}, {}] ns skipped key {key}, \
                     live since {since} ns with no write of it overlapping the scan",
                    s.client,
                    s.from,
                    s.limit,
                    s.keys.len(),
                    s.invoke_ns,
                    s.return_ns
                ));
            }
        }
    }
    Ok(())
}

/// One node's scans and key writes, on that node's clock.
pub struct NodeLog {
    pub clock: Clock,
    pub scans: Vec<ScanRecord>,
    pub writes: Vec<KeyWrite>,
}

/// Every node's scans and writes on the reference clock, for [`check_scans`] across nodes (on
/// hardware each process logs on its own clock). Each interval moves by its node's offset and
/// widens by its uncertainty on both sides — so fewer keys count as stably live and the check
/// stays sound — then all shift by one common amount so that none is negative (time 0, e.g. a
/// bulk load's, still precedes every operation). Identity clocks (the simulator) change nothing.
pub fn on_reference_clock(nodes: Vec<NodeLog>) -> (Vec<ScanRecord>, Vec<KeyWrite>) {
    let mut intervals = Vec::new();
    for n in &nodes {
        intervals.extend(n.scans.iter().map(|s| n.clock.widened(s.invoke_ns, Some(s.return_ns))));
        intervals.extend(n.writes.iter().map(|w| n.clock.widened(w.invoke_ns, w.return_ns)));
    }
    let mut at = rebased(intervals);
    let (mut scans, mut writes) = (Vec::new(), Vec::new());
    for n in nodes {
        for s in n.scans {
            let (invoke_ns, ret) = at.next().expect("one interval per scan");
            scans.push(ScanRecord { invoke_ns, return_ns: ret.expect("a scan's return"), ..s });
        }
        for w in n.writes {
            let (invoke_ns, return_ns) = at.next().expect("one interval per write");
            writes.push(KeyWrite { invoke_ns, return_ns, ..w });
        }
    }
    (scans, writes)
}

/// [`check_scans`] over a run's reports: each report's scans (`scans_of` parses them) against
/// every write the reports' histories logged (`live` tells whether a written value leaves its
/// key live) and the `fixed` writes (a bulk load at time 0), all on the reference clock — so
/// the check holds on hardware too, where each process logs on its own clock.
pub fn check_report_scans(
    reports: &[NodeReport],
    scans_of: impl Fn(&NodeReport) -> Vec<ScanRecord>,
    live: impl Fn(u64) -> bool,
    fixed: impl IntoIterator<Item = KeyWrite>,
) -> Result<(), String> {
    let nodes = reports
        .iter()
        .map(|r| NodeLog {
            clock: r.clock,
            scans: scans_of(r),
            writes: r
                .history
                .iter()
                .filter_map(|o| {
                    let v = o.write?;
                    Some(KeyWrite {
                        key: o.key,
                        invoke_ns: o.invoke_ns,
                        return_ns: o.return_ns,
                        live: live(v),
                    })
                })
                .collect(),
        })
        .collect();
    let (scans, writes) = on_reference_clock(nodes);
    check_scans(&scans, fixed.into_iter().chain(writes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(key: u64, invoke_ns: u64, ret: u64, live: bool) -> KeyWrite {
        KeyWrite { key, invoke_ns, return_ns: Some(ret), live }
    }

    fn scan(from: u64, limit: u32, keys: &[u64], invoke_ns: u64, return_ns: u64) -> ScanRecord {
        ScanRecord { client: 0, from, limit, keys: keys.to_vec(), invoke_ns, return_ns }
    }

    #[test]
    fn a_skipped_stable_key_is_caught() {
        let writes = [w(10, 0, 0, true), w(20, 0, 0, true), w(30, 5, 8, true)];
        assert!(check_scans(&[scan(5, 10, &[10, 20, 30], 10, 20)], writes).is_ok());
        let e = check_scans(&[scan(5, 10, &[10, 30], 10, 20)], writes).unwrap_err();
        assert!(e.contains("skipped key 20"), "{e}");
        // At its limit, a scan claims nothing past its last key.
        assert!(check_scans(&[scan(5, 2, &[10, 20], 10, 20)], writes).is_ok());
    }

    #[test]
    fn overlapping_writes_and_deletes_excuse_a_missing_key() {
        // The insert of 20 overlaps the scan; 30 was deleted before it.
        let writes = [w(10, 0, 0, true), w(20, 12, 25, true), w(30, 0, 0, true), w(30, 3, 4, false)];
        assert!(check_scans(&[scan(0, 10, &[10], 10, 20)], writes).is_ok());
        assert!(check_scans(&[scan(0, 10, &[20, 10], 10, 20)], writes).unwrap_err().contains("out of order"));
    }

    #[test]
    fn scans_on_skewed_clocks_are_checked_on_the_reference_clock() {
        // Goal: on hardware node B's clock runs 1 ms behind the reference. Its insert of key 20
        // at local [0, 10] µs really ran at [1000, 1010] µs, overlapping node A's scan at
        // [1005, 1020] µs, which may then miss it; compared raw, the insert "returned" long
        // before the scan and the missing key is a false alarm.
        let a = NodeLog {
            clock: Clock::default(),
            scans: vec![scan(0, 10, &[10], 1_005_000, 1_020_000)],
            writes: vec![w(10, 0, 0, true)],
        };
        let b = NodeLog {
            clock: Clock { offset_ns: -1_000_000, uncertainty_ns: 3_000 },
            scans: vec![],
            writes: vec![w(20, 0, 10_000, true)],
        };
        let raw: Vec<KeyWrite> = a.writes.iter().chain(&b.writes).copied().collect();
        assert!(
            check_scans(&a.scans, raw).unwrap_err().contains("skipped key 20"),
            "raw times must fake a skip"
        );
        let (scans, writes) = on_reference_clock(vec![a, b]);
        assert!(check_scans(&scans, writes).is_ok());
        // The same insert a millisecond earlier on the reference clock is a real skip.
        let a = NodeLog {
            clock: Clock::default(),
            scans: vec![scan(0, 10, &[10], 1_005_000, 1_020_000)],
            writes: vec![w(10, 0, 0, true)],
        };
        let b = NodeLog {
            clock: Clock { offset_ns: 0, uncertainty_ns: 3_000 },
            scans: vec![],
            writes: vec![w(20, 0, 10_000, true)],
        };
        let (scans, writes) = on_reference_clock(vec![a, b]);
        assert!(check_scans(&scans, writes).unwrap_err().contains("skipped key 20"));
    }
}
