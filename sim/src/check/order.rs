//! Matching a key's recorded write order to the operations that produced it.
//!
//! The simulator records *values* in commit order ([`History::record_commit`]); the checkers need
//! to know *which operation* made each commit. With unique values this is a lookup: commit `p` of
//! value `v`, after value `prev`, was made by the one operation that writes `v` from `prev` (a write
//! of `v`, a CAS `prev→v`, an FAA taking `prev` to `v`). If that is not unique the key is
//! ambiguous and the caller falls back to a method that does not need the order.

use std::collections::BTreeMap;

use super::history::{History, Key, Op, OpId};
use super::Violation;

/// A key's write order with its writers. Position 0 is the initial value (no writer, no time).
pub(crate) struct KeyOrder {
    pub values: Vec<u64>,
    pub writers: Vec<Option<OpId>>,
    position_by_value: BTreeMap<u64, usize>,
    position_by_writer: BTreeMap<OpId, usize>,
}

impl KeyOrder {
    /// The position whose value is `value`, if any commit (or the initial value) has it.
    pub fn position_of_value(&self, value: u64) -> Option<usize> {
        self.position_by_value.get(&value).copied()
    }

    /// The position `op` committed, if it is one of the writers.
    pub fn position_of_writer(&self, op: OpId) -> Option<usize> {
        self.position_by_writer.get(&op).copied()
    }
}

pub(crate) enum Resolution {
    Resolved(KeyOrder),
    Ambiguous(String),
}

/// Resolves the write order of `key` over its operations `ops`.
///
/// Errors are violations no matter how the history is linearized: a commit no operation could
/// have made, or an operation that returned as a change of value the order never shows.
pub(crate) fn resolve(
    history: &History,
    key: Key,
    ops: &[OpId],
    checker: &'static str,
) -> Result<Resolution, Violation> {
    let commits = history.commits(key).expect("resolve needs a history with a write order");
    let initial = history.initial_value(key);

    let mut values = Vec::with_capacity(commits.len() + 1);
    let mut position_by_value = BTreeMap::new();
    values.push(initial);
    position_by_value.insert(initial, 0);
    for commit in commits {
        if position_by_value.insert(commit.value, values.len()).is_some() {
            return Ok(Resolution::Ambiguous(format!(
                "value {} appears twice in the write order of {key} (initial value {initial})",
                commit.value
            )));
        }
        values.push(commit.value);
    }

    let mut used = vec![false; ops.len()];
    let mut writers: Vec<Option<OpId>> = vec![None; values.len()];

    // Pass 1: a completed operation pins its own commit. A write's value names the commit; a CAS
    // or FAA returned the value it replaced, and the commit after that value must be its own.
    for (slot, id) in ops.iter().enumerate() {
        let record = history.record(*id);
        if !record.surely_mutated() {
            continue;
        }
        let position = match (record.op, record.returned()) {
            (Op::Write { value, .. }, _) => position_by_value.get(&value).copied().filter(|p| *p > 0),
            (op, Some(old)) => {
                position_by_value.get(&old).map(|p| p + 1).filter(|p| values.get(*p) == Some(&op.apply(old)))
            }
            (_, None) => unreachable!("completed CAS and FAA return the old value"),
        };
        let Some(position) = position else { continue };
        if let Some(other) = writers[position] {
            return Err(Violation {
                checker,
                keys: vec![key],
                ops: vec![*history.record(other), *record],
                at: None,
                explanation: format!(
                    "{other} and {id} both returned as the change that made commit #{position} of {key}                      (value {}), but one commit has one writer: one of the two updates was lost,                      e.g. two FAAs or CASes that both saw the same old value.",
                    values[position]
                ),
            });
        }
        writers[position] = Some(*id);
        used[slot] = true;
    }

    // Pass 2: the remaining commits must come from pending operations, matched by value.
    for (index, commit) in commits.iter().enumerate() {
        let position = index + 1;
        if writers[position].is_some() {
            continue;
        }
        let previous = values[position - 1];
        let mut candidates = ops
            .iter()
            .enumerate()
            .filter(|(slot, id)| !used[*slot] && could_write(history, **id, previous, commit.value));
        let Some((slot, writer)) = candidates.next() else {
            return Err(Violation {
                checker,
                keys: vec![key],
                ops: Vec::new(),
                at: Some(commit.at),
                explanation: format!(
                    "commit #{position} of {key} set it from {previous} to {} at {}, but no client \
                     operation on {key} could have made that change: no write of {}, no CAS \
                     {previous}→{}, no FAA from {previous} reaching it. Either the protocol wrote a \
                     value nobody asked for (a torn or misdirected store) or the simulator recorded \
                     a commit the clients did not cause.",
                    commit.value, commit.at, commit.value, commit.value
                ),
            });
        };
        if let Some((_, other)) = candidates.next() {
            return Ok(Resolution::Ambiguous(format!(
                "commit #{position} of {key} (value {}) could have been made by {writer} or {other}",
                commit.value
            )));
        }
        used[slot] = true;
        writers[position] = Some(*writer);
    }
    let position_by_writer: BTreeMap<OpId, usize> =
        writers.iter().enumerate().filter_map(|(position, w)| w.map(|w| (w, position))).collect();

    for (slot, id) in ops.iter().enumerate() {
        let record = history.record(*id);
        if !used[slot] && record.surely_mutated() {
            return Err(Violation {
                checker,
                keys: vec![key],
                ops: vec![*record],
                at: None,
                explanation: format!(
                    "{id} returned as a change of {key}, but the recorded write order of {key} never \
                     shows its effect. Either the protocol lost the update (it was acknowledged and \
                     then overwritten or never stored) or the simulator did not record every commit."
                ),
            });
        }
    }

    Ok(Resolution::Resolved(KeyOrder { values, writers, position_by_value, position_by_writer }))
}

/// Whether `id` could be the operation that changed the value from `previous` to `value`.
fn could_write(history: &History, id: OpId, previous: u64, value: u64) -> bool {
    let record = history.record(id);
    if !record.op.can_mutate() {
        return false;
    }
    // A completed CAS or FAA also tells us the value it saw; a pending one could have seen any.
    let saw_previous = record.returned().is_none_or(|old| old == previous);
    match record.op {
        Op::Read { .. } => false,
        Op::Write { value: written, .. } => written == value,
        Op::Cas { expect, swap, .. } => expect == previous && swap == value && saw_previous,
        Op::Faa { add, .. } => previous.wrapping_add(add) == value && saw_previous,
    }
}
