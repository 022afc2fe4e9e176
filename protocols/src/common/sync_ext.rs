//! Timeouts and selection for protocol tasks, executor-agnostic like [`crate::sync`]: plain
//! polling with the task's waker, no runtime, no wall clock. Time comes from [`Nic::sleep`], so
//! in the simulator a timeout is a virtual-time event and runs are reproducible.
//!
//! Both helpers poll their first future first, on every poll: when both are ready at once the
//! first wins, so the outcome never depends on wake-up order.
//!
//! Cancellation: the losing future is dropped. The NIC futures are drop-safe (a dropped `recv`
//! leaves its message queued for the next receiver; a dropped `sleep` at most wakes its task
//! once more, which every future here tolerates), so `timeout(nic, d, nic.recv(p))` loses no
//! message.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;

use crate::nic::{Nanos, Nic};

/// Which of two futures finished first, with its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Either<A, B> {
    Left(A),
    Right(B),
}

/// The output of whichever of `a` and `b` finishes first (`a` on a tie); the other is dropped.
pub async fn select2<A: Future, B: Future>(a: A, b: B) -> Either<A::Output, B::Output> {
    let mut a = pin!(a);
    let mut b = pin!(b);
    std::future::poll_fn(move |cx| {
        if let Poll::Ready(v) = a.as_mut().poll(cx) {
            return Poll::Ready(Either::Left(v));
        }
        if let Poll::Ready(v) = b.as_mut().poll(cx) {
            return Poll::Ready(Either::Right(v));
        }
        Poll::Pending
    })
    .await
}

/// `fut` did not finish within the bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elapsed {
    pub after: Nanos,
}

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "timed out after {}", self.after)
    }
}

impl std::error::Error for Elapsed {}

/// `fut`'s output if it finishes within `after` of `nic`'s clock, else [`Elapsed`] (and `fut`
/// is dropped). A result ready at the deadline wins.
pub async fn timeout<N: Nic, F: Future>(nic: &N, after: Nanos, fut: F) -> Result<F::Output, Elapsed> {
    match select2(fut, nic.sleep(after)).await {
        Either::Left(v) => Ok(v),
        Either::Right(()) => Err(Elapsed { after }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::Channel;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Wake, Waker};

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn poll_once<F: Future>(f: std::pin::Pin<&mut F>, flag: &Arc<Flag>) -> Poll<F::Output> {
        let waker = Waker::from(flag.clone());
        f.poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn select2_takes_the_first_ready_and_prefers_the_left_on_a_tie() {
        // Goal: the winner is the first future to finish, ties go left, and a pending side is
        // woken through the task's waker. Method: two channels polled by hand.
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let (a, b) = (Channel::<u8>::new(), Channel::<u8>::new());
        let mut s = Box::pin(select2(a.pop(), b.pop()));
        assert!(poll_once(s.as_mut(), &flag).is_pending());
        b.push(2);
        assert!(flag.0.load(Ordering::SeqCst), "the right side's push wakes the task");
        assert_eq!(poll_once(s.as_mut(), &flag), Poll::Ready(Either::Right(Some(2))));
        a.push(1);
        b.push(3);
        let mut s = Box::pin(select2(a.pop(), b.pop()));
        assert_eq!(poll_once(s.as_mut(), &flag), Poll::Ready(Either::Left(Some(1))));
        assert_eq!(b.try_pop(), Some(3), "the loser consumed nothing");
    }
}
