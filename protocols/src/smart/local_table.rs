//! Read delegation and write combining across one compute node's threads (SMART §4.3, the
//! `LocalLockTable`): concurrent operations of the same kind on the same key share one remote
//! operation.
//!
//! SMART queues the threads of one key on a ticket lock; the first does the remote work and,
//! when it releases, hands its result (read) or its done-ness (write) to every thread that
//! queued meanwhile. A thread that queued *after* the winner's remote read was issued then
//! returns a value older than its own start, and a write that queued after the winner's CAS is
//! acknowledged without ever reaching memory: neither is linearizable (the mutants
//! `delegation-after-read` and `combining-drops-write` plant exactly that). Here a round's
//! membership closes when its leader starts: threads that arrive while a leader is in flight
//! form the *next* round, whose first member leads it once the current round is done. Every
//! member's interval then contains its round's remote operation. [CHOICE] in NEEDS.md.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

/// A value handed from one task to another, once.
pub struct OneShot<T> {
    state: Mutex<(Option<T>, Option<Waker>)>,
}

impl<T> OneShot<T> {
    fn new() -> Arc<OneShot<T>> {
        Arc::new(OneShot { state: Mutex::new((None, None)) })
    }

    fn put(&self, value: T) {
        let waker = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.0 = Some(value);
            s.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn take(&self) -> impl Future<Output = T> + '_ {
        std::future::poll_fn(move |cx| {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match s.0.take() {
                Some(v) => Poll::Ready(v),
                None => {
                    s.1 = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
    }
}

/// What a thread that joined a round learns.
pub enum Turn<R, M> {
    /// Lead the next round: do the remote work for yourself and `members`.
    Lead(Vec<M>),
    /// Your round's leader finished: its outcome.
    Done(R),
}

/// A waiting member: its payload (`()` for reads, the write for writes) and its mailbox.
pub struct Member<P, R> {
    pub payload: P,
    mailbox: Arc<OneShot<Turn<R, Member<P, R>>>>,
}

impl<P, R> Member<P, R> {
    /// Tell this member its round's outcome.
    pub fn finish(self, outcome: R) {
        self.mailbox.put(Turn::Done(outcome));
    }
}

struct Slot<P, R> {
    /// Joined while a leader was in flight: the next round.
    next: Vec<Member<P, R>>,
}

/// One table per compute node and operation kind: `P` is what a member brings, `R` what it
/// gets back.
pub struct RoundTable<P, R> {
    slots: Mutex<BTreeMap<u64, Slot<P, R>>>,
}

impl<P, R> Default for RoundTable<P, R> {
    fn default() -> Self {
        RoundTable { slots: Mutex::new(BTreeMap::new()) }
    }
}

/// How a thread entered a key's rounds.
pub enum Entered<P, R> {
    /// Lead a round made of yourself and these members (who joined before you started).
    Lead(Vec<Member<P, R>>),
    /// Someone else's round did the work.
    Done(R),
}

impl<P, R> RoundTable<P, R> {
    /// Enter `key`'s rounds with `payload`: lead at once if no round is in flight, otherwise
    /// wait for the next round (which may make this thread its leader).
    pub async fn enter(&self, key: u64, payload: P) -> Entered<P, R> {
        let mailbox = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            match slots.get_mut(&key) {
                None => {
                    slots.insert(key, Slot { next: Vec::new() });
                    return Entered::Lead(Vec::new());
                }
                Some(slot) => {
                    let mailbox = OneShot::new();
                    slot.next.push(Member { payload, mailbox: mailbox.clone() });
                    mailbox
                }
            }
        };
        match mailbox.take().await {
            Turn::Lead(members) => Entered::Lead(members),
            Turn::Done(r) => Entered::Done(r),
        }
    }

    /// The leader of `key`'s round is done with its remote work: the members that arrived
    /// meanwhile. The caller answers its own round's members, then calls [`Self::hand_over`].
    pub fn late_arrivals(&self, key: u64) -> Vec<Member<P, R>> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.get_mut(&key).map(|s| std::mem::take(&mut s.next)).unwrap_or_default()
    }

    /// Pass the key to the next round (`late`, from [`Self::late_arrivals`], minus any the
    /// caller finished itself): its first member leads the rest. With no one left, the key is
    /// free.
    pub fn hand_over(&self, key: u64, mut late: Vec<Member<P, R>>) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        // Members that joined between `late_arrivals` and now go to the same next round.
        if let Some(slot) = slots.get_mut(&key) {
            late.append(&mut slot.next);
        }
        if late.is_empty() {
            slots.remove(&key);
            return;
        }
        let mut members = late.into_iter();
        let leader = members.next().expect("non-empty");
        drop(slots);
        leader.mailbox.put(Turn::Lead(members.collect()));
    }

    /// Keys with a round in flight (for end-of-run checks).
    pub fn busy(&self) -> usize {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;
    use std::task::{Context, Waker};

    #[test]
    fn late_arrivals_form_the_next_round() {
        let table: RoundTable<u32, u64> = RoundTable::default();
        let mut cx = Context::from_waker(Waker::noop());
        let lead = pin!(table.enter(7, 1)).as_mut().poll(&mut cx);
        assert!(matches!(lead, Poll::Ready(Entered::Lead(ref m)) if m.is_empty()));
        let mut b = pin!(table.enter(7, 2));
        let mut c = pin!(table.enter(7, 3));
        assert!(b.as_mut().poll(&mut cx).is_pending() && c.as_mut().poll(&mut cx).is_pending());
        let late = table.late_arrivals(7);
        assert_eq!(late.len(), 2);
        table.hand_over(7, late);
        let Poll::Ready(Entered::Lead(members)) = b.as_mut().poll(&mut cx) else { panic!("b leads") };
        assert_eq!(members.iter().map(|m| m.payload).collect::<Vec<_>>(), vec![3]);
        members.into_iter().for_each(|m| m.finish(99));
        assert!(matches!(c.as_mut().poll(&mut cx), Poll::Ready(Entered::Done(99))));
        table.hand_over(7, table.late_arrivals(7));
        assert_eq!(table.busy(), 0);
    }
}
