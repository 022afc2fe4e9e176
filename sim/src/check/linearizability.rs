//! Per-key linearizability of reads, writes, CAS and FAA.
//!
//! Linearizability is local (Herlihy & Wing): a history is linearizable iff each key's
//! sub-history is. So the checker partitions by key and, for each, runs the cheapest method that
//! applies (see the module docs of [`crate::check`]): write order, zones, or bounded search.
//!
//! Real time: `a` precedes `b` iff `a` returned strictly before `b` was invoked. Operations whose
//! return and invocation share a nanosecond are concurrent — the simulator cannot tell their order
//! from timestamps alone, so the checker may not either. A pending operation has an infinite return
//! time: it precedes nothing, may be placed anywhere after its invocation, or left out.

use std::collections::BTreeMap;

use dmsim_protocols::common::lookup::LookupSet;

use super::history::{History, Key, Op, OpId, Record};
use super::order::{self, KeyOrder, Resolution};
use super::{Report, Unknown, Violation};

const CHECKER: &str = "linearizability";

/// The bitmask of the search holds one bit per operation.
const SEARCH_OPS_LIMIT: usize = u128::BITS as usize;

/// Bounds for the search method. Keys beyond them are reported unknown, never searched forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearizabilityOptions {
    /// Most operations on one key the search accepts (at most 128).
    pub search_ops_max: usize,
    /// Most distinct (linearized set, value) states the search visits per key.
    pub search_states_max: u64,
}

impl Default for LinearizabilityOptions {
    fn default() -> Self {
        // About a second of search per key in the worst case; undecided keys are reported, so a
        // fuzz campaign notices if they become common.
        LinearizabilityOptions { search_ops_max: SEARCH_OPS_LIMIT, search_states_max: 2_000_000 }
    }
}

/// Checks every key with default bounds.
pub fn check_linearizability(history: &History) -> Result<Report, Violation> {
    check_linearizability_with(history, &LinearizabilityOptions::default())
}

/// Checks every key, in ascending key order; the first violation found is returned.
pub fn check_linearizability_with(
    history: &History,
    options: &LinearizabilityOptions,
) -> Result<Report, Violation> {
    assert!(options.search_ops_max <= SEARCH_OPS_LIMIT, "search_ops_max above {SEARCH_OPS_LIMIT}");
    let mut report = Report::default();
    for (key, ops) in history.by_key() {
        match check_key(history, key, &ops, options)? {
            Method::WriteOrder => report.keys_by_write_order += 1,
            Method::Zones => report.keys_by_zones += 1,
            Method::Search => report.keys_by_search += 1,
            Method::Unknown(reason) => report.unknown.push(Unknown { key, reason }),
        }
    }
    Ok(report)
}

/// Which method decided a key.
#[derive(Debug, PartialEq, Eq)]
enum Method {
    WriteOrder,
    Zones,
    Search,
    Unknown(String),
}

fn check_key(
    history: &History,
    key: Key,
    ops: &[OpId],
    options: &LinearizabilityOptions,
) -> Result<Method, Violation> {
    let mut ambiguity = None;
    if history.has_write_order() {
        match order::resolve(history, key, ops, CHECKER)? {
            Resolution::Resolved(key_order) => {
                check_by_write_order(history, key, ops, &key_order)?;
                return Ok(Method::WriteOrder);
            }
            Resolution::Ambiguous(reason) => ambiguity = Some(reason),
        }
    }
    if zones_apply(history, key, ops) {
        check_by_zones(history, key, ops)?;
        return Ok(Method::Zones);
    }
    match check_by_search(history, key, ops, options)? {
        SearchOutcome::Linearizable => Ok(Method::Search),
        SearchOutcome::Unknown(reason) => Ok(Method::Unknown(match ambiguity {
            Some(ambiguity) => format!("{reason}; the write order did not help: {ambiguity}"),
            None => reason,
        })),
    }
}

/// An event's place in the run: `(nanoseconds << 64) | seq`, so comparing two `Time`s compares
/// `(time, seq)` (see [`Record::invoke_seq`]). Signed so the initial value can be "written" before
/// every event; a pending operation returns at `NEVER`.
type Time = i128;
const NEVER: Time = Time::MAX;
const BEFORE_ALL: Time = -1;

fn time(at: dmsim_protocols::nic::Nanos, seq: u64) -> Time {
    (Time::from(at.0) << 64) | Time::from(seq)
}

fn start(record: &Record) -> Time {
    time(record.invoke_at, record.invoke_seq)
}

fn finish(record: &Record) -> Time {
    record.completion.map_or(NEVER, |c| time(c.at, c.seq))
}

/// A `Time` for humans: the nanoseconds only.
fn show(t: Time) -> String {
    match t {
        NEVER => "never".to_string(),
        BEFORE_ALL => "the start".to_string(),
        t => format!("{}ns", t >> 64),
    }
}

// ---------------------------------------------------------------------------------------------
// Method 1: the recorded write order.
//
// Each operation gets a rank: the commit it made, `(p, 0)`, or the commit whose value it observed,
// `(p, 1)`. A linearization consistent with the order lists ranks in ascending order (a commit,
// then the reads of its value, then the next commit, …), and reads of one value may go in any
// order among themselves. So the history is linearizable with this order iff no operation `a`
// that returned before `b` was invoked has a greater rank than `b`. One sweep over ranks in
// descending order, keeping the least return time seen at strictly greater ranks, finds any such
// pair.

fn check_by_write_order(
    history: &History,
    key: Key,
    ops: &[OpId],
    key_order: &KeyOrder,
) -> Result<(), Violation> {
    let mut ranked: Vec<((usize, u8), OpId)> = Vec::with_capacity(ops.len());
    for id in ops {
        let record = history.record(*id);
        if let Some(position) = key_order.position_of_writer(*id) {
            ranked.push(((position, 0), *id));
            continue;
        }
        // Not a writer, so it had no effect. If it is pending, nothing was observed either.
        let Some(value) = record.returned() else {
            // A completed write always returns no value, but is a writer (or `resolve` failed).
            assert!(record.is_pending(), "{} is neither a writer nor returned a value", record.id);
            continue;
        };
        let Some(position) = key_order.position_of_value(value) else {
            return Err(thin_air(key, record, value, history.initial_value(key)));
        };
        ranked.push(((position, 1), *id));
    }
    ranked.sort_unstable_by(|a, b| b.cmp(a));

    // `earliest` is the operation with the least return time among strictly greater ranks.
    let mut earliest: Option<(Time, OpId)> = None;
    let mut group_start = 0;
    while group_start < ranked.len() {
        let rank = ranked[group_start].0;
        let group_end =
            group_start + ranked[group_start..].iter().take_while(|(other, _)| *other == rank).count();
        for (_, id) in &ranked[group_start..group_end] {
            let later = history.record(*id);
            if let Some((returned_at, earlier_id)) = earliest {
                if returned_at < start(later) {
                    let earlier = history.record(earlier_id);
                    return Err(order_contradicts_real_time(key, key_order, earlier, later));
                }
            }
        }
        for (_, id) in &ranked[group_start..group_end] {
            let returned_at = finish(history.record(*id));
            if earliest.is_none_or(|(least, _)| returned_at < least) {
                earliest = Some((returned_at, *id));
            }
        }
        group_start = group_end;
    }
    Ok(())
}

fn order_contradicts_real_time(
    key: Key,
    key_order: &KeyOrder,
    earlier: &Record,
    later: &Record,
) -> Violation {
    let place = |record: &Record| match key_order.position_of_writer(record.id) {
        Some(position) => format!("made commit #{position} (value {})", key_order.values[position]),
        None => {
            let value = record.returned().expect("ranked non-writers returned a value");
            match key_order.position_of_value(value) {
                Some(0) => format!("observed the initial value {value}"),
                Some(position) => format!("observed value {value} of commit #{position}"),
                None => unreachable!("thin-air values are reported before ranking"),
            }
        }
    };
    let earlier_writes = key_order.position_of_writer(earlier.id).is_some();
    let later_writes = key_order.position_of_writer(later.id).is_some();
    let diagnosis = match (earlier_writes, later_writes) {
        (true, false) => "This is a stale read: the later operation saw a value already overwritten by an \
                          operation that had completed before it began."
            .to_string(),
        (false, true) => "The earlier operation observed a value that only exists after the later \
                          operation's commit: a read from the future."
            .to_string(),
        (false, false) => "This is a new-old inversion: an earlier operation saw a newer value than a later \
                           one."
            .to_string(),
        (true, true) => {
            "The memory applied the two changes in the opposite of their real-time order.".to_string()
        }
    };
    Violation {
        checker: CHECKER,
        keys: vec![key],
        ops: vec![*earlier, *later],
        at: None,
        explanation: format!(
            "{} returned at {} before {} was invoked at {}, so it must take effect first. But in the \
             recorded write order of {key}, {} {} and {} {}, which places it later. {diagnosis}",
            earlier.id,
            show(finish(earlier)),
            later.id,
            later.invoke_at,
            earlier.id,
            place(earlier),
            later.id,
            place(later),
        ),
    }
}

fn thin_air(key: Key, record: &Record, value: u64, initial: u64) -> Violation {
    Violation {
        checker: CHECKER,
        keys: vec![key],
        ops: vec![*record],
        at: record.completion.map(|c| c.at),
        explanation: format!(
            "{} returned {value}, a value {key} never held: it is neither the initial value {initial} \
             nor written by any operation on {key}. The protocol returned data from another key, a \
             torn line, or memory nobody wrote.",
            record.id
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Method 2: zones (Gibbons & Korach 1997; the form of Golab, Li & Shah 2011).
//
// With reads and writes only and unique written values, group each write with the reads that
// returned its value: a *cluster*. In any linearization a cluster is a contiguous block (its write,
// then its reads), since no value is written twice. Let `f` be the least return time in a cluster
// and `s` the greatest invocation time. If `f < s` the block must span all of [f, s] — a *forward
// zone*. Otherwise all its operations can take effect at one instant in [s, f] — a *backward
// zone*. The history is linearizable iff (1) no read returns before its write is invoked, (2) no
// two forward zones overlap, and (3) no backward zone lies strictly inside a forward zone.
// The initial value is a cluster whose write happened before time zero.

fn zones_apply(history: &History, key: Key, ops: &[OpId]) -> bool {
    let mut written = BTreeMap::new();
    written.insert(history.initial_value(key), ());
    ops.iter().all(|id| match history.record(*id).op {
        Op::Read { .. } => true,
        Op::Write { value, .. } => written.insert(value, ()).is_none(),
        Op::Cas { .. } | Op::Faa { .. } => false,
    })
}

#[derive(Clone, Copy, Debug)]
struct Zone {
    value: u64,
    /// The cluster's write; `None` for the initial value.
    writer: Option<OpId>,
    least_finish: Time,
    least_finish_op: Option<OpId>,
    greatest_start: Time,
    greatest_start_op: Option<OpId>,
}

impl Zone {
    fn is_forward(&self) -> bool {
        self.least_finish < self.greatest_start
    }
}

fn check_by_zones(history: &History, key: Key, ops: &[OpId]) -> Result<(), Violation> {
    let initial = history.initial_value(key);
    let mut clusters: BTreeMap<u64, (Option<OpId>, Vec<OpId>)> = BTreeMap::new();
    clusters.insert(initial, (None, Vec::new()));
    for id in ops {
        if let Op::Write { value, .. } = history.record(*id).op {
            let previous = clusters.insert(value, (Some(*id), Vec::new()));
            assert!(previous.is_none(), "zones need unique write values");
        }
    }
    for id in ops {
        let record = history.record(*id);
        if !matches!(record.op, Op::Read { .. }) {
            continue;
        }
        let Some(value) = record.returned() else { continue };
        let Some((writer, readers)) = clusters.get_mut(&value) else {
            return Err(thin_air(key, record, value, initial));
        };
        if let Some(writer) = writer {
            let write = history.record(*writer);
            if finish(record) < start(write) {
                return Err(read_before_write(key, record, write));
            }
        }
        readers.push(*id);
    }

    let mut forward = Vec::new();
    let mut backward = Vec::new();
    for (value, (writer, readers)) in &clusters {
        if readers.is_empty() && writer.is_none_or(|w| history.record(w).is_pending()) {
            // An unread initial value or an unread pending write constrains nothing.
            continue;
        }
        let mut zone = match writer {
            Some(w) => {
                let write = history.record(*w);
                Zone {
                    value: *value,
                    writer: Some(*w),
                    least_finish: finish(write),
                    least_finish_op: Some(*w),
                    greatest_start: start(write),
                    greatest_start_op: Some(*w),
                }
            }
            None => Zone {
                value: *value,
                writer: None,
                least_finish: BEFORE_ALL,
                least_finish_op: None,
                greatest_start: BEFORE_ALL,
                greatest_start_op: None,
            },
        };
        for reader in readers {
            let read = history.record(*reader);
            if finish(read) < zone.least_finish {
                zone.least_finish = finish(read);
                zone.least_finish_op = Some(*reader);
            }
            if start(read) > zone.greatest_start {
                zone.greatest_start = start(read);
                zone.greatest_start_op = Some(*reader);
            }
        }
        if zone.is_forward() {
            forward.push(zone);
        } else {
            backward.push(zone);
        }
    }

    // (2) Sorted by `least_finish`, a forward zone overlaps an earlier one iff it begins before
    // the greatest end seen so far.
    forward.sort_by_key(|z| (z.least_finish, z.greatest_start));
    let mut widest: Option<Zone> = None;
    for zone in &forward {
        if let Some(previous) = widest {
            if zone.least_finish < previous.greatest_start {
                return Err(zones_overlap(history, key, &previous, zone, &clusters));
            }
        }
        if widest.is_none_or(|w| zone.greatest_start > w.greatest_start) {
            widest = Some(*zone);
        }
    }
    // (3) Forward zones are now disjoint, so sorted by start they are sorted by end too: only the
    // last forward zone beginning before a backward zone's start can contain it.
    for zone in &backward {
        let before = forward.partition_point(|f| f.least_finish < zone.greatest_start);
        if before == 0 {
            continue;
        }
        let container = &forward[before - 1];
        if zone.least_finish < container.greatest_start {
            return Err(zone_inside(history, key, container, zone, &clusters));
        }
    }
    Ok(())
}

fn read_before_write(key: Key, read: &Record, write: &Record) -> Violation {
    Violation {
        checker: CHECKER,
        keys: vec![key],
        ops: vec![*write, *read],
        at: None,
        explanation: format!(
            "{} returned {} at {}, but the only write of that value, {}, was invoked later, at {}. A read \
             cannot observe a write that had not begun.",
            read.id,
            read.returned().unwrap_or_default(),
            show(finish(read)),
            write.id,
            write.invoke_at
        ),
    }
}

fn zone_ops(
    history: &History,
    zone: &Zone,
    clusters: &BTreeMap<u64, (Option<OpId>, Vec<OpId>)>,
) -> Vec<Record> {
    let (writer, readers) = &clusters[&zone.value];
    writer.iter().chain(readers).map(|id| *history.record(*id)).collect()
}

fn describe_window(zone: &Zone) -> String {
    let opening = match zone.least_finish_op {
        Some(op) if Some(op) == zone.writer => {
            format!("its write {op} returned at {}", show(zone.least_finish))
        }
        Some(op) => format!("{op} had read it by {}", show(zone.least_finish)),
        None => "it is the initial value".to_string(),
    };
    let closing = match zone.greatest_start_op {
        Some(op) => format!("{op}, invoked at {}, still read it", show(zone.greatest_start)),
        None => "nothing read it later".to_string(),
    };
    format!("value {} must be current from the time {opening} until {closing}", zone.value)
}

fn zones_overlap(
    history: &History,
    key: Key,
    first: &Zone,
    second: &Zone,
    clusters: &BTreeMap<u64, (Option<OpId>, Vec<OpId>)>,
) -> Violation {
    let mut ops = zone_ops(history, first, clusters);
    ops.extend(zone_ops(history, second, clusters));
    Violation {
        checker: CHECKER,
        keys: vec![key],
        ops,
        at: None,
        explanation: format!(
            "On {key}, {}; and {}. These windows overlap, but a register holds one value at a time and \
             each value is written only once, so one of them cannot be current throughout its \
             window: some read returned a stale value.",
            describe_window(first),
            describe_window(second)
        ),
    }
}

fn zone_inside(
    history: &History,
    key: Key,
    container: &Zone,
    inner: &Zone,
    clusters: &BTreeMap<u64, (Option<OpId>, Vec<OpId>)>,
) -> Violation {
    let mut ops = zone_ops(history, container, clusters);
    ops.extend(zone_ops(history, inner, clusters));
    Violation {
        checker: CHECKER,
        keys: vec![key],
        ops,
        at: None,
        explanation: format!(
            "On {key}, {}. But value {} (its write and all its reads) must take effect between {} and \
             {}, strictly inside that window, and once overwritten value {} can never come back. \
             Typically: a read returned a value already overwritten by a write that completed \
             before the read began.",
            describe_window(container),
            inner.value,
            show(inner.greatest_start),
            show(inner.least_finish),
            container.value
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Method 3: bounded search (Wing & Gong 1993, with Lowe's 2017 memoisation, as in porcupine).
//
// Depth-first over "which operation takes effect next": an operation may go next if no other
// not-yet-linearized completed operation returned before it was invoked, and if applying it to
// the current value matches what it returned. Two paths reaching the same (set of linearized
// operations, value) have the same future, so each such state is explored once. The stack is an
// explicit `Vec`, so depth never touches the thread's stack.

#[derive(Debug, PartialEq, Eq)]
enum SearchOutcome {
    Linearizable,
    Unknown(String),
}

struct SearchOp {
    id: OpId,
    op: Op,
    returned: Option<u64>,
    start: Time,
    finish: Time,
}

impl SearchOp {
    /// The value after this operation takes effect on `value`, or `None` if its result says it
    /// cannot have taken effect on `value`.
    fn step(&self, value: u64) -> Option<u64> {
        match (self.op, self.returned) {
            (Op::Read { .. }, Some(read)) => (read == value).then_some(value),
            (Op::Read { .. }, None) => unreachable!("pending reads are dropped before the search"),
            (Op::Write { .. }, _) | (Op::Cas { .. } | Op::Faa { .. }, None) => Some(self.op.apply(value)),
            (Op::Cas { .. } | Op::Faa { .. }, Some(old)) => (old == value).then(|| self.op.apply(value)),
        }
    }
}

struct Frame {
    mask: u128,
    value: u64,
    /// Next operation index to try from this state.
    cursor: usize,
    /// The operation applied to reach this state (`None` for the root).
    via: Option<usize>,
    /// Among unlinearized completed operations: the least return time, which operation has it,
    /// and the second least. An operation may go next iff its invocation is not after the least
    /// return time of the *other* unlinearized completed operations.
    least_finish: Time,
    least_finish_index: usize,
    second_finish: Time,
}

fn frame(ops: &[SearchOp], mask: u128, value: u64, via: Option<usize>) -> Frame {
    let mut least = (NEVER, usize::MAX);
    let mut second = NEVER;
    for (index, op) in ops.iter().enumerate() {
        if mask & (1 << index) != 0 || op.finish == NEVER {
            continue;
        }
        if op.finish < least.0 {
            second = least.0;
            least = (op.finish, index);
        } else if op.finish < second {
            second = op.finish;
        }
    }
    Frame {
        mask,
        value,
        cursor: 0,
        via,
        least_finish: least.0,
        least_finish_index: least.1,
        second_finish: second,
    }
}

impl Frame {
    fn may_go_next(&self, ops: &[SearchOp], index: usize) -> bool {
        let bound = if index == self.least_finish_index { self.second_finish } else { self.least_finish };
        self.mask & (1 << index) == 0 && ops[index].start <= bound
    }
}

fn check_by_search(
    history: &History,
    key: Key,
    ids: &[OpId],
    options: &LinearizabilityOptions,
) -> Result<SearchOutcome, Violation> {
    // A pending read observed nothing; a pending operation that cannot mutate had no effect.
    let ops: Vec<SearchOp> = ids
        .iter()
        .map(|id| history.record(*id))
        .filter(|record| !record.is_pending() || record.op.can_mutate())
        .map(|record| SearchOp {
            id: record.id,
            op: record.op,
            returned: record.returned(),
            start: start(record),
            finish: finish(record),
        })
        .collect();
    if ops.len() > options.search_ops_max {
        return Ok(SearchOutcome::Unknown(format!(
            "{} operations on {key} exceed the search limit of {}",
            ops.len(),
            options.search_ops_max
        )));
    }
    let completed_mask: u128 =
        ops.iter().enumerate().filter(|(_, op)| op.finish != NEVER).fold(0, |mask, (i, _)| mask | (1 << i));
    let completed_count = completed_mask.count_ones();

    let initial = history.initial_value(key);
    let mut visited: LookupSet<(u128, u64)> = LookupSet::default();
    visited.insert((0, initial));
    let mut stack = vec![frame(&ops, 0, initial, None)];
    // The deepest state reached, by completed operations linearized, and the path to it.
    let mut best_depth = 0;
    let mut best_path: Vec<usize> = Vec::new();
    let mut best_value = initial;
    let mut best_mask = 0;

    while let Some(top) = stack.last_mut() {
        if top.mask & completed_mask == completed_mask {
            return Ok(SearchOutcome::Linearizable);
        }
        let next = (top.cursor..ops.len()).find_map(|index| {
            if top.may_go_next(&ops, index) {
                ops[index].step(top.value).map(|value| (index, value))
            } else {
                None
            }
        });
        let Some((index, value)) = next else {
            stack.pop();
            continue;
        };
        top.cursor = index + 1;
        let mask = top.mask | (1 << index);
        if !visited.insert((mask, value)) {
            continue;
        }
        if visited.len() as u64 > options.search_states_max {
            return Ok(SearchOutcome::Unknown(format!(
                "search of {} operations on {key} exhausted its budget of {} states",
                ops.len(),
                options.search_states_max
            )));
        }
        stack.push(frame(&ops, mask, value, Some(index)));
        let depth = (mask & completed_mask).count_ones();
        if depth > best_depth {
            best_depth = depth;
            best_path = stack.iter().filter_map(|f| f.via).collect();
            best_value = value;
            best_mask = mask;
        }
    }

    // No linearization. Report where the deepest attempt got stuck.
    let stuck = frame(&ops, best_mask, best_value, None);
    let blocked: Vec<usize> =
        (0..ops.len()).filter(|i| stuck.may_go_next(&ops, *i) && ops[*i].finish != NEVER).take(8).collect();
    let path: Vec<String> = best_path.iter().map(|i| ops[*i].id.to_string()).collect();
    let mut involved: Vec<Record> =
        best_path.iter().rev().take(4).rev().map(|i| *history.record(ops[*i].id)).collect();
    involved.extend(blocked.iter().map(|i| *history.record(ops[*i].id)));
    let blocked_names: Vec<String> = blocked.iter().map(|i| ops[*i].id.to_string()).collect();
    Err(Violation {
        checker: CHECKER,
        keys: vec![key],
        ops: involved,
        at: None,
        explanation: format!(
            "No order of the {} operations on {key} both respects real time and gives every operation \
             the result it returned. The deepest attempt linearized {best_depth} of {completed_count} \
             completed operations ({}), leaving value {best_value}; from there each operation \
             allowed to go next ({}) returned something inconsistent with {best_value} (a read of \
             another value, or a CAS/FAA that saw another old value). Lost updates and CAS on stale \
             values end here.",
            ops.len(),
            if path.is_empty() { "none".to_string() } else { path.join(" → ") },
            blocked_names.join(", ")
        ),
    })
}

#[cfg(test)]
#[path = "linearizability_tests.rs"]
mod tests;
