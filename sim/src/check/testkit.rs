//! Test helpers: hand-written histories and random ones with a known answer.

use dmsim_protocols::nic::Nanos;

use super::history::{ClientId, History, Key, Op, OpId};

/// Builds a history one operation at a time: each call invokes and completes an operation, so
/// events that share a nanosecond are ordered by call order.
pub(crate) struct Script {
    pub history: History,
}

impl Script {
    pub fn new() -> Script {
        Script { history: History::new() }
    }

    pub fn with_write_order() -> Script {
        Script { history: History::with_write_order() }
    }

    fn done(&mut self, client: u32, op: Op, span: (u64, u64), value: Option<u64>) -> OpId {
        let id = self.history.invoke(ClientId(client), op, Nanos(span.0));
        self.history.complete(id, Nanos(span.1), value);
        id
    }

    pub fn write(&mut self, client: u32, key: u64, value: u64, span: (u64, u64)) -> OpId {
        self.done(client, Op::Write { key: Key(key), value }, span, None)
    }

    pub fn read(&mut self, client: u32, key: u64, value: u64, span: (u64, u64)) -> OpId {
        self.done(client, Op::Read { key: Key(key) }, span, Some(value))
    }

    pub fn cas(&mut self, client: u32, key: u64, expect: u64, swap: u64, old: u64, span: (u64, u64)) -> OpId {
        self.done(client, Op::Cas { key: Key(key), expect, swap }, span, Some(old))
    }

    pub fn faa(&mut self, client: u32, key: u64, add: u64, old: u64, span: (u64, u64)) -> OpId {
        self.done(client, Op::Faa { key: Key(key), add }, span, Some(old))
    }

    /// An operation invoked at `at` that never returns.
    pub fn pending(&mut self, client: u32, op: Op, at: u64) -> OpId {
        self.history.invoke(ClientId(client), op, Nanos(at))
    }

    pub fn commit(&mut self, key: u64, value: u64, at: u64) {
        self.history.record_commit(Key(key), value, Nanos(at));
    }
}

/// xorshift64*: a few lines, deterministic, good enough to shuffle test histories.
pub(crate) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..bound`.
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// Which operations a random history may contain.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mix {
    /// Reads and writes, every write a fresh value.
    ReadWriteUnique,
    /// All four kinds over a few small values, so values repeat.
    Atomics,
}

/// A random single-key history that is linearizable by construction, and then, if `corrupt`,
/// has one returned value changed (which usually, not always, breaks it).
///
/// Method: each client runs sequential operations at random times; every operation that takes
/// effect gets a random instant inside its interval (pending ones: after their invocation, or
/// never), the register is run in instant order to compute the true results, and commits are
/// recorded in that order.
pub(crate) fn random_history(rng: &mut Rng, mix: Mix, corrupt: bool) -> History {
    struct Planned {
        client: u32,
        op: Op,
        start: u64,
        finish: Option<u64>,
        instant: Option<u64>,
        result: Option<u64>,
    }
    let key = Key(1);
    let clients = 2 + rng.below(2) as u32;
    let mut planned = Vec::new();
    let mut fresh = 1;
    for client in 0..clients {
        let mut now = rng.below(5);
        let count = 1 + rng.below(3);
        for index in 0..count {
            let op = match (mix, rng.below(4)) {
                (Mix::ReadWriteUnique, 0 | 1) | (Mix::Atomics, 0) => Op::Read { key },
                (Mix::ReadWriteUnique, _) => {
                    fresh += 1;
                    Op::Write { key, value: fresh - 1 }
                }
                (Mix::Atomics, 1) => Op::Write { key, value: rng.below(3) },
                (Mix::Atomics, 2) => Op::Cas { key, expect: rng.below(3), swap: rng.below(3) },
                (Mix::Atomics, _) => Op::Faa { key, add: 1 },
            };
            let start = now;
            let pending = index == count - 1 && rng.below(4) == 0;
            let finish = if pending { None } else { Some(start + 1 + rng.below(12)) };
            let instant = match finish {
                Some(finish) => Some(start + rng.below(finish - start + 1)),
                None if rng.below(2) == 0 => Some(start + rng.below(30)),
                None => None,
            };
            planned.push(Planned { client, op, start, finish, instant, result: None });
            now = finish.unwrap_or(start) + 1 + rng.below(6);
        }
    }
    // Ties at one instant are broken by planning order, which the sort keeps (it is stable).
    let mut order: Vec<usize> = (0..planned.len()).filter(|i| planned[*i].instant.is_some()).collect();
    order.sort_by_key(|i| planned[*i].instant);
    let mut history = History::with_write_order();
    let mut value = 0;
    for index in order {
        let op = planned[index].op;
        planned[index].result = op.returns_value().then_some(value);
        let next = op.apply(value);
        // Every store is a commit, even one of the current value; a CAS only if it succeeded.
        if op.can_mutate() && (next != value || matches!(op, Op::Write { .. })) {
            history.record_commit(key, next, Nanos(planned[index].instant.unwrap()));
        }
        value = next;
    }
    if corrupt {
        let candidates: Vec<usize> = (0..planned.len()).filter(|i| planned[*i].result.is_some()).collect();
        if !candidates.is_empty() {
            let victim = candidates[rng.below(candidates.len() as u64) as usize];
            let result = planned[victim].result.as_mut().unwrap();
            *result = (*result + 1 + rng.below(2)) % (fresh.max(3));
        }
    }

    // Record events in time order; an operation's return precedes a later invocation at the same
    // nanosecond only if it was planned so, which the +1 gaps rule out within one client.
    let mut events: Vec<(u64, usize, bool)> = Vec::new();
    for (index, plan) in planned.iter().enumerate() {
        events.push((plan.start, index, false));
        if let Some(finish) = plan.finish {
            events.push((finish, index, true));
        }
    }
    events.sort_by_key(|(at, index, is_return)| (*at, *is_return, rng_tiebreak(*index)));
    let mut ids = vec![None; planned.len()];
    for (at, index, is_return) in events {
        let plan = &planned[index];
        if is_return {
            let value = if plan.op.returns_value() { plan.result.or(Some(u64::MAX)) } else { None };
            history.complete(ids[index].unwrap(), Nanos(at), value);
        } else {
            ids[index] = Some(history.invoke(ClientId(plan.client), plan.op, Nanos(at)));
        }
    }
    history
}

fn rng_tiebreak(index: usize) -> u64 {
    (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}
