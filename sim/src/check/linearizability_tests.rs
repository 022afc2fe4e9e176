//! Tests of `linearizability.rs`, kept apart so the module reads top-down.
use dmsim_protocols::nic::Nanos;

use super::*;
use crate::check::history::ClientId;
use crate::check::testkit::{random_history, Mix, Rng, Script};

const X: u64 = 1;

/// Runs every method that applies to each key and returns the verdict. The exact methods
/// (search always, zones when reads and writes are unique) must agree. The write-order method
/// answers a narrower question — is the history linearizable *with this order*? — so when it
/// accepts, the exact methods must accept too.
fn agreed_verdict(history: &History) -> bool {
    let options = LinearizabilityOptions::default();
    let mut linearizable = true;
    for (key, ops) in history.by_key() {
        let exact = match check_by_search(history, key, &ops, &options) {
            Ok(SearchOutcome::Linearizable) => true,
            Ok(SearchOutcome::Unknown(reason)) => panic!("test histories are small: {reason}"),
            Err(_) => false,
        };
        if zones_apply(history, key, &ops) {
            assert_eq!(check_by_zones(history, key, &ops).is_ok(), exact, "zones and search disagree");
        }
        if history.has_write_order() && write_order_accepts(history, key, &ops) == Some(true) {
            assert!(exact, "the write order explains {key} but the search found no linearization");
        }
        linearizable &= exact;
    }
    linearizable
}

/// `None` if the write order is ambiguous.
fn write_order_accepts(history: &History, key: Key, ops: &[OpId]) -> Option<bool> {
    match order::resolve(history, key, ops, CHECKER) {
        Err(_) => Some(false),
        Ok(Resolution::Resolved(key_order)) => {
            Some(check_by_write_order(history, key, ops, &key_order).is_ok())
        }
        Ok(Resolution::Ambiguous(_)) => None,
    }
}

#[test]
fn concurrent_overlapping_ops_are_fine() {
    // Goal: overlapping writes may take effect in either order, and reads during the overlap
    // may see either value. Method: W1 and W2 overlap; a read sees 2, a later read sees 1,
    // which fits the order W2, R→2, W1, R→1.
    let mut script = Script::new();
    script.write(1, X, 1, (0, 10));
    script.write(2, X, 2, (5, 15));
    script.read(3, X, 2, (6, 8));
    script.read(3, X, 1, (12, 20));
    assert!(agreed_verdict(&script.history));
    let report = check_linearizability(&script.history).unwrap();
    assert_eq!(report.keys_by_zones, 1);
    assert!(report.is_complete());
}

#[test]
fn stale_read_after_completed_write_is_rejected() {
    // Goal: a read invoked after a write of 2 completed must not return the older 1.
    let mut script = Script::with_write_order();
    script.write(1, X, 1, (0, 10));
    script.commit(X, 1, 5);
    script.write(1, X, 2, (20, 30));
    script.commit(X, 2, 25);
    let stale = script.read(2, X, 1, (40, 50));
    assert!(!agreed_verdict(&script.history));
    let violation = check_linearizability(&script.history).unwrap_err();
    assert_eq!(violation.checker, "linearizability");
    assert_eq!(violation.keys, vec![Key(X)]);
    assert!(violation.ops.iter().any(|op| op.id == stale));
    assert!(violation.explanation.contains("stale read"), "{violation}");
}

#[test]
fn stale_read_is_rejected_by_zones_without_write_order() {
    // Goal: the same stale read is caught without a write order, and explained as a window.
    let mut script = Script::new();
    script.write(1, X, 1, (0, 10));
    script.write(1, X, 2, (20, 30));
    script.read(2, X, 1, (40, 50));
    let violation = check_linearizability(&script.history).unwrap_err();
    assert!(violation.explanation.contains("value 1 must be current"), "{violation}");
}

#[test]
fn read_in_the_same_nanosecond_as_a_write_return_is_ordered() {
    // Goal: events sharing a nanosecond are ordered as recorded, not treated as concurrent.
    // Method: W2 returns at 30 and the read is invoked at 30, recorded after: reading 1 is
    // stale. Recorded in the other order (read invoked first), the same values are fine.
    let mut script = Script::new();
    script.write(1, X, 1, (0, 10));
    script.write(1, X, 2, (20, 30));
    script.read(2, X, 1, (30, 40));
    assert!(!agreed_verdict(&script.history));

    let mut history = History::new();
    let w1 = history.invoke(ClientId(1), Op::Write { key: Key(X), value: 1 }, Nanos(0));
    history.complete(w1, Nanos(10), None);
    let w2 = history.invoke(ClientId(1), Op::Write { key: Key(X), value: 2 }, Nanos(20));
    let read = history.invoke(ClientId(2), Op::Read { key: Key(X) }, Nanos(30));
    history.complete(w2, Nanos(30), None);
    history.complete(read, Nanos(40), Some(1));
    assert!(agreed_verdict(&history));
}

#[test]
fn read_of_never_written_value_is_rejected() {
    // Goal: a value nobody wrote (not the initial value either) is out of thin air.
    let mut script = Script::with_write_order();
    script.write(1, X, 1, (0, 10));
    script.commit(X, 1, 5);
    script.read(2, X, 7, (3, 12));
    assert!(!agreed_verdict(&script.history));
    let violation = check_linearizability(&script.history).unwrap_err();
    assert!(violation.explanation.contains("never held"), "{violation}");
}

#[test]
fn read_from_the_future_is_rejected() {
    // Goal: a read cannot return a value whose only write was invoked after the read returned.
    let mut script = Script::new();
    script.read(2, X, 1, (0, 5));
    script.write(1, X, 1, (10, 20));
    assert!(!agreed_verdict(&script.history));
}

#[test]
fn initial_value_is_respected() {
    // Goal: keys start at their initial value; reading it before any write is fine, and reading
    // 0 from a key that starts at 5 is not.
    let mut script = Script::new();
    script.history.set_initial_value(Key(X), 5);
    script.read(1, X, 5, (0, 10));
    assert!(agreed_verdict(&script.history));
    script.read(1, X, 0, (20, 30));
    assert!(!agreed_verdict(&script.history));
}

#[test]
fn lost_update_via_faa_is_rejected() {
    // Goal: two overlapping FAA(+1) may not both see 0 — one increment would be lost. Method:
    // also record the write order a broken (read-then-write) FAA would leave, value 1 twice;
    // the write order is then ambiguous and the search must still reject.
    let mut script = Script::with_write_order();
    script.faa(1, X, 1, 0, (0, 10));
    script.faa(2, X, 1, 0, (5, 15));
    script.commit(X, 1, 8);
    script.commit(X, 1, 12);
    script.read(3, X, 1, (20, 30));
    assert!(!agreed_verdict(&script.history));
    let violation = check_linearizability(&script.history).unwrap_err();
    assert!(violation.explanation.contains("No order"), "{violation}");
}

#[test]
fn two_faas_claiming_one_commit_are_rejected() {
    // Goal: with a correct-looking write order (1 then 2), two FAAs that both returned 0
    // cannot both own commit #1: the write-order matching reports the lost update.
    let mut script = Script::with_write_order();
    script.faa(1, X, 1, 0, (0, 10));
    script.faa(2, X, 1, 0, (5, 15));
    script.commit(X, 1, 8);
    script.commit(X, 2, 12);
    assert!(!agreed_verdict(&script.history));
    let violation = check_linearizability(&script.history).unwrap_err();
    assert!(violation.explanation.contains("updates was lost"), "{violation}");
}

#[test]
fn correct_faa_counter_is_fine() {
    // Goal: overlapping FAAs that saw 0, 1, 2 in some order, and reads consistent with it, pass.
    let mut script = Script::with_write_order();
    script.faa(1, X, 1, 1, (0, 10));
    script.faa(2, X, 1, 0, (2, 12));
    script.faa(3, X, 1, 2, (4, 14));
    script.commit(X, 1, 5);
    script.commit(X, 2, 6);
    script.commit(X, 3, 7);
    script.read(1, X, 3, (20, 30));
    assert!(agreed_verdict(&script.history));
    assert_eq!(check_linearizability(&script.history).unwrap().keys_by_write_order, 1);
}

#[test]
fn cas_success_on_stale_expected_value_is_rejected() {
    // Goal: a CAS invoked after the value became 1 may not succeed on expected 0.
    let mut script = Script::new();
    script.write(1, X, 1, (0, 10));
    script.cas(2, X, 0, 5, 0, (20, 30));
    assert!(!agreed_verdict(&script.history));
    // With a write order it fails already when matching commits to operations: the commit of
    // 5 after 1 has no CAS that saw 1.
    let mut script = Script::with_write_order();
    script.write(1, X, 1, (0, 10));
    script.commit(X, 1, 5);
    script.cas(2, X, 0, 5, 0, (20, 30));
    script.commit(X, 5, 25);
    assert!(!agreed_verdict(&script.history));
}

#[test]
fn failed_cas_is_a_read() {
    // Goal: a CAS that failed observed a value, and that observation is checked like a read.
    let mut script = Script::new();
    script.write(1, X, 1, (0, 10));
    script.cas(2, X, 0, 5, 1, (20, 30));
    assert!(agreed_verdict(&script.history));
    script.write(1, X, 2, (40, 50));
    script.cas(2, X, 0, 5, 1, (60, 70)); // stale: the value has been 2 since 50
    assert!(!agreed_verdict(&script.history));
}

#[test]
fn pending_write_may_or_may_not_have_happened() {
    // Goal: a write that never returned may be seen or not, but once seen it stays (values are
    // written once). Method: three histories over the same prefix.
    let prefix = || {
        let mut script = Script::new();
        script.write(1, X, 1, (0, 10));
        script.pending(1, Op::Write { key: Key(X), value: 2 }, 20);
        script
    };
    let mut took_effect = prefix();
    took_effect.read(2, X, 2, (30, 40));
    assert!(agreed_verdict(&took_effect.history));

    let mut did_not = prefix();
    did_not.read(2, X, 1, (30, 40));
    assert!(agreed_verdict(&did_not.history));

    let mut flip_flop = prefix();
    flip_flop.read(2, X, 2, (30, 40));
    flip_flop.read(3, X, 1, (50, 60));
    assert!(!agreed_verdict(&flip_flop.history));
}

#[test]
fn pending_ops_with_a_write_order() {
    // Goal: with a write order, a pending write that committed counts and one that did not
    // is ignored; a completed write missing from the order is a violation.
    let mut script = Script::with_write_order();
    script.write(1, X, 1, (0, 10));
    script.commit(X, 1, 5);
    script.pending(1, Op::Write { key: Key(X), value: 2 }, 20);
    script.commit(X, 2, 25);
    script.pending(2, Op::Write { key: Key(X), value: 3 }, 20);
    script.read(3, X, 2, (30, 40));
    assert!(agreed_verdict(&script.history));

    let mut script = Script::with_write_order();
    script.write(1, X, 1, (0, 10));
    let violation = check_linearizability(&script.history).unwrap_err();
    assert!(violation.explanation.contains("never shows its effect"), "{violation}");
}

#[test]
fn write_order_against_real_time_is_rejected() {
    // Goal: the memory may not apply W2 before W1 when W1 returned before W2 was invoked, even
    // if no read exposes it.
    let mut script = Script::with_write_order();
    script.write(1, X, 1, (0, 10));
    script.write(1, X, 2, (20, 30));
    script.commit(X, 2, 25);
    script.commit(X, 1, 26);
    let violation = check_linearizability(&script.history).unwrap_err();
    assert!(violation.explanation.contains("opposite of their real-time order"), "{violation}");
}

#[test]
fn new_old_inversion_is_rejected_with_write_order() {
    // Goal: during a long write, one read sees the new value and a later read the old one.
    let mut script = Script::with_write_order();
    script.write(1, X, 1, (0, 100));
    script.commit(X, 1, 50);
    script.read(2, X, 1, (10, 20));
    script.read(3, X, 0, (30, 40));
    assert!(!agreed_verdict(&script.history));
    let violation = check_linearizability(&script.history).unwrap_err();
    assert!(violation.explanation.contains("new-old inversion"), "{violation}");
}

#[test]
fn oversized_ambiguous_history_is_unknown_not_a_hang() {
    // Goal: the search gives up within its budget. Method: 40 concurrent pending FAAs and a
    // read of a value no subset of them produces; the search would visit 2^40 states.
    let mut script = Script::new();
    for client in 0..40 {
        script.pending(client, Op::Faa { key: Key(X), add: 1 }, 0);
    }
    script.read(100, X, u64::MAX, (10, 20));
    let options = LinearizabilityOptions { search_states_max: 50_000, ..LinearizabilityOptions::default() };
    let report = check_linearizability_with(&script.history, &options).unwrap();
    assert_eq!(report.keys_checked(), 0);
    assert_eq!(report.unknown.len(), 1);
    assert!(report.unknown[0].reason.contains("budget"), "{:?}", report.unknown);

    // More operations than the bitmask holds: unknown without searching at all.
    let mut script = Script::new();
    for client in 0..200 {
        script.faa(client, X, 1, u64::from(client), (u64::from(client) * 10, u64::from(client) * 10 + 5));
    }
    let report = check_linearizability(&script.history).unwrap();
    assert!(report.unknown[0].reason.contains("exceed the search limit"), "{:?}", report.unknown);
}

/// Every way of choosing which pending operations took effect and ordering the chosen ones,
/// pruned only by the definition (a placed operation may not have begun after a later-placed
/// one returned; results must match): an oracle for the search sharing none of its code.
fn brute_force(history: &History) -> bool {
    fn extend(history: &History, chosen: &mut Vec<OpId>, value: u64, ops: &[OpId]) -> bool {
        if ops.iter().all(|id| chosen.contains(id) || history.record(*id).is_pending()) {
            return true;
        }
        for id in ops {
            if chosen.contains(id) {
                continue;
            }
            let record = history.record(*id);
            let real_time_ok = chosen.iter().all(|earlier| finish(record) >= start(history.record(*earlier)));
            let result_ok = record.returned().is_none_or(|returned| returned == value);
            if real_time_ok && result_ok {
                chosen.push(*id);
                if extend(history, chosen, record.op.apply(value), ops) {
                    return true;
                }
                chosen.pop();
            }
        }
        false
    }
    history.by_key().iter().all(|(key, ops)| {
        let ops: Vec<OpId> = ops
            .iter()
            .copied()
            .filter(|id| !history.record(*id).is_pending() || history.record(*id).op.can_mutate())
            .collect();
        extend(history, &mut Vec::new(), history.initial_value(*key), &ops)
    })
}

#[test]
fn methods_agree_with_brute_force_on_random_histories() {
    // Goal: the three methods and an exhaustive oracle agree. Method: 10,000 random single-key
    // histories of at most 9 operations, linearizable by construction, half with one returned
    // value corrupted; both mixes. Also checks the generator produced both verdicts.
    let mut rng = Rng::new(7);
    let mut verdicts = [0usize; 2];
    for round in 0..10_000 {
        let mix = if round % 2 == 0 { Mix::ReadWriteUnique } else { Mix::Atomics };
        let corrupt = round % 4 >= 2;
        let history = random_history(&mut rng, mix, corrupt);
        let verdict = agreed_verdict(&history);
        assert_eq!(verdict, brute_force(&history), "round {round}: {:#?}", history.records());
        if !corrupt {
            assert!(verdict, "round {round}: built linearizable, judged not: {:#?}", history.records());
            let key = Key(1);
            let ops = history.by_key().remove(&key).unwrap_or_default();
            if write_order_accepts(&history, key, &ops) == Some(false) {
                panic!("round {round}: {}\n{history:#?}", check_linearizability(&history).unwrap_err());
            }
        }
        verdicts[usize::from(verdict)] += 1;
    }
    assert!(verdicts[0] > 1_000 && verdicts[1] > 1_000, "{verdicts:?}");
}
