//! Histories recorded on several clocks, merged into one [`History`] the checkers can read.
//!
//! On hardware every node records its own clients' operations ([`LoggedOp`]) on its own clock,
//! and nobody sees the true order of writes. This module rebuilds both:
//!
//! * **Time.** Each node's log comes with a [`Clock`]: its offset from the reference clock
//!   (rank 0's) and the uncertainty of that offset (half the round trip of the best ping-pong).
//!   Every interval is shifted onto the reference clock and *widened* by the uncertainty on both
//!   sides, so an operation's true interval is always inside its recorded one. Wider intervals
//!   only make more orders legal: the linearizability check stays sound (no false alarm from a
//!   clock error) and is exact when the uncertainty is 0 (one clock, as in the simulator).
//! * **Write order.** A writer holding a key exclusively logs the value it *replaced* (`prev`).
//!   Values are unique per key, so the writes form a chain from the initial value; the chain is
//!   the key's write order ([`History::record_commit`]). Two writes that replaced the same value
//!   (a lost update: two exclusive owners at once, or a stale line), or a write that replaced a
//!   value no write produced, break the chain and are violations in their own right.
//! * **Final state.** Optionally, the value each key holds in memory after the run drained: it
//!   becomes a read by a final client after every operation, so a write lost on write-back (or
//!   never flushed) fails the same checkers.

use std::collections::BTreeMap;

use dmsim_protocols::nic::Nanos;

use super::history::{ClientId, History, Key, Op, Record};
use super::Violation;

pub use dmsim_protocols::harness::{Clock, LoggedOp};

/// The client id of the final-state reads.
pub const FINAL_CLIENT: ClientId = ClientId(u32::MAX);

const CHECKER: &str = "write chain";

/// Merges per-node logs (each with its clock) and, if given, the final memory values into one
/// history with a write order. Keys absent from `final_values` are taken to hold their initial
/// value 0 (callers report only non-zero words). Errors are violations of the write chain.
pub fn merge(
    logs: &[(Clock, &[LoggedOp])],
    final_values: Option<&BTreeMap<u64, u64>>,
) -> Result<History, Violation> {
    // Shift and widen every interval onto the reference clock. Times are kept non-negative by
    // a common base, which does not change any order.
    let mut ops: Vec<(i128, Option<i128>, &LoggedOp)> = Vec::new();
    for (clock, log) in logs {
        for op in log.iter() {
            let (inv, ret) = clock.widened(op.invoke_ns, op.return_ns);
            ops.push((inv, ret, op));
        }
    }
    let base = ops.iter().map(|o| o.0).min().unwrap_or(0).min(0);
    let end = ops.iter().map(|o| o.1.unwrap_or(o.0).max(o.0)).max().unwrap_or(0);
    let ns = |t: i128| Nanos((t - base) as u64);

    // Events in time order; at equal times invocations come first (so that such operations are
    // concurrent, never ordered by the accident of which node's log was read first).
    let mut events: Vec<(i128, u8, usize)> = Vec::with_capacity(2 * ops.len());
    for (i, (inv, ret, _)) in ops.iter().enumerate() {
        events.push((*inv, 0, i));
        if let Some(r) = ret {
            events.push((*r, 1, i));
        }
    }
    events.sort();

    // A write order only where writers log what they replaced: protocols whose writes are
    // blind (Dolphin's value WRITEs, ordered by the memory node's NIC) log none, and their
    // keys are checked by zones or search instead.
    let replaced_logged = ops.iter().any(|(_, _, op)| op.write.is_some() && op.seen.is_some());
    let mut history = if replaced_logged { History::with_write_order() } else { History::new() };
    history.allow_overlapping_clients();
    let mut ids = vec![None; ops.len()];
    for (t, kind, i) in events {
        let op = ops[i].2;
        if kind == 0 {
            let key = Key(op.key);
            let logical = match op.write {
                Some(value) => Op::Write { key, value },
                None => Op::Read { key },
            };
            ids[i] = Some(history.invoke(ClientId(op.client), logical, ns(t)));
        } else if let Some(id) = ids[i] {
            let value = if op.write.is_some() { None } else { op.seen };
            if op.write.is_none() && value.is_none() {
                continue; // a read that returned without a value: treat as pending
            }
            history.complete(id, ns(t), value);
        }
    }

    // Write order per key: follow the chain of replaced values from the initial 0.
    let mut writes: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, (_, _, op)) in ops.iter().enumerate() {
        if op.write.is_some() && op.seen.is_some() {
            writes.entry(op.key).or_default().push(i);
        }
    }
    let record = |i: usize| ids[i].map(|id| *history.record(id));
    let mut chains: BTreeMap<u64, Vec<(u64, i128)>> = BTreeMap::new();
    for (key, list) in &writes {
        let mut by_prev: BTreeMap<u64, usize> = BTreeMap::new();
        for &i in list {
            let prev = ops[i].2.seen.expect("filtered");
            if let Some(other) = by_prev.insert(prev, i) {
                return Err(chain_violation(
                    *key,
                    [record(other), record(i)],
                    format!(
                        "two writes replaced the same value {prev} of {}: each held the key exclusively \
                         and saw {prev}, so one update was lost (two exclusive owners at once, or a \
                         stale copy of the line)",
                        Key(*key)
                    ),
                ));
            }
        }
        let mut chain = Vec::with_capacity(list.len());
        let mut current = 0u64;
        while let Some(i) = by_prev.remove(&current) {
            let (inv, _, op) = ops[i];
            current = op.write.expect("a write");
            chain.push((current, inv));
        }
        if let Some((prev, &i)) = by_prev.iter().next() {
            return Err(chain_violation(
                *key,
                [record(i), None],
                format!(
                    "a write replaced value {prev} of {}, which no write produced after the chain \
                     0 → … → {current} (a stale copy of the line, or a write lost on write-back)",
                    Key(*key)
                ),
            ));
        }
        chains.insert(*key, chain);
    }
    for (key, chain) in &chains {
        let mut at = 0i128;
        for (value, inv) in chain {
            at = at.max(*inv);
            history.record_commit(Key(*key), *value, ns(at));
        }
    }

    // The final state, read after everything.
    if let Some(finals) = final_values {
        let keys: std::collections::BTreeSet<u64> = ops.iter().map(|o| o.2.key).collect();
        let at = ns(end + 1);
        for key in keys {
            let value = finals.get(&key).copied().unwrap_or(0);
            let id = history.invoke(FINAL_CLIENT, Op::Read { key: Key(key) }, at);
            history.complete(id, Nanos(at.0 + 1), Some(value));
        }
    }
    Ok(history)
}

fn chain_violation(key: u64, ops: [Option<Record>; 2], explanation: String) -> Violation {
    Violation {
        checker: CHECKER,
        keys: vec![Key(key)],
        ops: ops.into_iter().flatten().collect(),
        at: None,
        explanation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{check_linearizability, check_sequential_consistency};

    fn write(client: u32, key: u64, value: u64, prev: u64, span: (u64, u64)) -> LoggedOp {
        LoggedOp {
            client,
            key,
            write: Some(value),
            seen: Some(prev),
            invoke_ns: span.0,
            return_ns: Some(span.1),
        }
    }
    fn read(client: u32, key: u64, value: u64, span: (u64, u64)) -> LoggedOp {
        LoggedOp { client, key, write: None, seen: Some(value), invoke_ns: span.0, return_ns: Some(span.1) }
    }

    #[test]
    fn a_correct_run_on_two_skewed_clocks_passes_both_checkers() {
        // Goal: clocks 1 ms apart, once aligned by their offsets, give a history that passes.
        // Node 1's clock reads 1_000_000 more than node 0's.
        let a = [write(0, 7, 11, 0, (100, 200)), read(0, 7, 22, (900, 1000))];
        let b = [write(1, 7, 22, 11, (1_000_300, 1_000_400)), read(1, 7, 22, (1_000_500, 1_000_600))];
        let clocks = [Clock::default(), Clock { offset_ns: 1_000_000, uncertainty_ns: 20 }];
        let finals = BTreeMap::from([(7, 22)]);
        let h = merge(&[(clocks[0], &a), (clocks[1], &b)], Some(&finals)).unwrap();
        assert_eq!(h.records().len(), 5, "4 ops and one final read");
        assert_eq!(h.commits(Key(7)).unwrap().iter().map(|c| c.value).collect::<Vec<_>>(), vec![11, 22]);
        assert!(check_linearizability(&h).unwrap().is_complete());
        assert!(check_sequential_consistency(&h).unwrap().is_complete());
    }

    #[test]
    fn a_stale_read_is_caught_only_beyond_the_clock_uncertainty() {
        // Goal: a read of the old value invoked 50 ns (reference time) after the overwriting
        // write returned is a violation with exact clocks, and legal when the clocks are only
        // known to ±100 ns (it may really have started before the write returned).
        let a = [write(0, 1, 5, 0, (0, 100))];
        let b = [read(1, 1, 0, (150, 160))];
        let exact = merge(&[(Clock::default(), &a), (Clock::default(), &b)], None).unwrap();
        assert!(check_linearizability(&exact).is_err());
        let fuzzy = Clock { offset_ns: 0, uncertainty_ns: 100 };
        let merged = merge(&[(fuzzy, &a), (fuzzy, &b)], None).unwrap();
        assert!(check_linearizability(&merged).is_ok());
    }

    #[test]
    fn two_writes_replacing_the_same_value_are_a_lost_update() {
        let a = [write(0, 3, 10, 0, (0, 10))];
        let b = [write(1, 3, 20, 0, (20, 30))];
        let v = merge(&[(Clock::default(), &a), (Clock::default(), &b)], None).unwrap_err();
        assert_eq!(v.keys, vec![Key(3)]);
        assert!(v.explanation.contains("two writes replaced the same value 0"), "{v}");
        assert_eq!(v.ops.len(), 2);
    }

    #[test]
    fn a_write_replacing_an_unknown_value_breaks_the_chain() {
        let a = [write(0, 3, 10, 0, (0, 10)), write(0, 3, 30, 99, (20, 30))];
        let v = merge(&[(Clock::default(), &a)], None).unwrap_err();
        assert!(v.explanation.contains("replaced value 99"), "{v}");
    }

    #[test]
    fn memory_missing_the_last_write_fails_linearizability() {
        // Goal: a write lost on write-back shows up through the final-state read.
        let a = [write(0, 4, 10, 0, (0, 10)), write(0, 4, 20, 10, (20, 30))];
        let finals = BTreeMap::from([(4, 10)]);
        let h = merge(&[(Clock::default(), &a)], Some(&finals)).unwrap();
        let v = check_linearizability(&h).unwrap_err();
        assert_eq!(v.keys, vec![Key(4)]);
    }

    #[test]
    fn consecutive_ops_of_one_client_may_overlap_once_widened() {
        // Goal: widening makes one client's back-to-back operations overlap; the merge must
        // accept that (not trip the sequential-client assertion) and keep program order.
        let a = [write(0, 2, 1, 0, (0, 10)), read(0, 2, 1, (11, 20)), write(0, 2, 2, 1, (21, 30))];
        let h = merge(&[(Clock { offset_ns: 5, uncertainty_ns: 50 }, &a)], None).unwrap();
        let clients: Vec<_> = h.records().iter().map(|r| r.client).collect();
        assert_eq!(clients, vec![ClientId(0); 3]);
        assert!(check_sequential_consistency(&h).is_ok());
        assert!(check_linearizability(&h).is_ok());
    }
}
