//! Protocol invariants checked as the run goes (on every event, in check mode).
//!
//! An [`Invariant`] owns whatever access to protocol state it needs — typically a closure over
//! `Arc`s the protocol also holds — and says only whether the state is right *now*. The engine
//! keeps an [`InvariantSet`] and calls [`InvariantSet::check_all`] after each event; the first
//! failure stops the run with a [`Violation`] stamped with the virtual time.
//!
//! Examples the protocols provide: SWMR per line (at most one writer, or any number of readers),
//! SELCC's latch word agreeing with every node's ownership memo, DiFache's owner set before valid.

use dmsim_protocols::nic::Nanos;

use super::Violation;

/// A predicate over live protocol state. `check` must not change that state and should be cheap:
/// it runs after every event.
pub trait Invariant {
    /// A stable name, used in reports and for counting.
    fn name(&self) -> &'static str;
    /// `Err` with a sentence naming the line, node or word at fault and the values seen.
    fn check(&self) -> Result<(), String>;
}

/// An invariant from a name and a closure.
pub struct FnInvariant<F> {
    name: &'static str,
    check: F,
}

impl<F: Fn() -> Result<(), String>> FnInvariant<F> {
    pub fn new(name: &'static str, check: F) -> Self {
        FnInvariant { name, check }
    }
}

impl<F: Fn() -> Result<(), String>> Invariant for FnInvariant<F> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn check(&self) -> Result<(), String> {
        (self.check)()
    }
}

/// The registered invariants, checked in registration order.
///
/// [CHOICE] No `Send` bound on invariants: one run is one thread, and a bound would forbid closures
/// over `Rc` state. An engine that must be `Send` can wrap `Arc`-based closures itself.
#[derive(Default)]
pub struct InvariantSet {
    invariants: Vec<Box<dyn Invariant>>,
    /// How many times `check_all` ran, so a test can assert the invariants were exercised.
    rounds: u64,
}

impl InvariantSet {
    pub fn new() -> InvariantSet {
        InvariantSet::default()
    }

    pub fn add(&mut self, invariant: impl Invariant + 'static) {
        let name = invariant.name();
        assert!(self.invariants.iter().all(|i| i.name() != name), "invariant {name} registered twice");
        self.invariants.push(Box::new(invariant));
    }

    pub fn add_fn(&mut self, name: &'static str, check: impl Fn() -> Result<(), String> + 'static) {
        self.add(FnInvariant::new(name, check));
    }

    pub fn len(&self) -> usize {
        self.invariants.len()
    }

    pub fn is_empty(&self) -> bool {
        self.invariants.is_empty()
    }

    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// Runs every invariant; the first failure becomes a violation at virtual time `at`.
    pub fn check_all(&mut self, at: Nanos) -> Result<(), Violation> {
        self.rounds += 1;
        for invariant in &self.invariants {
            if let Err(explanation) = invariant.check() {
                return Err(Violation {
                    checker: invariant.name(),
                    keys: Vec::new(),
                    ops: Vec::new(),
                    at: Some(at),
                    explanation,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::*;

    #[test]
    fn first_failing_invariant_becomes_the_violation() {
        // Goal: invariants run in order on every call, and the first failure is reported with its
        // name and time. Method: a shared counter plays "protocol state"; break it, check again.
        let writers_of_line_0 = Rc::new(Cell::new(1u32));
        let mut set = InvariantSet::new();
        let state = Rc::clone(&writers_of_line_0);
        set.add_fn("swmr", move || match state.get() {
            0 | 1 => Ok(()),
            n => Err(format!("line 0 has {n} writers")),
        });
        set.add_fn("never fails", || Ok(()));
        assert_eq!(set.len(), 2);
        assert_eq!(set.check_all(Nanos(10)), Ok(()));

        writers_of_line_0.set(2);
        let violation = set.check_all(Nanos(20)).unwrap_err();
        assert_eq!(violation.checker, "swmr");
        assert_eq!(violation.at, Some(Nanos(20)));
        assert_eq!(violation.explanation, "line 0 has 2 writers");
        assert_eq!(set.rounds(), 2);
        assert!(violation.to_string().starts_with("swmr violated at 20ns: line 0 has 2 writers"));
    }

    #[test]
    #[should_panic(expected = "registered twice")]
    fn duplicate_invariant_names_are_rejected() {
        // Goal: names identify invariants in reports, so they must be unique.
        let mut set = InvariantSet::new();
        set.add_fn("swmr", || Ok(()));
        set.add_fn("swmr", || Ok(()));
    }
}
