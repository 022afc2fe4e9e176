//! A two-future join, so a victim can post its forward (to the requester) and its handover FAA
//! (to the memory node) at once (SELCC §3.5 [P]: "immediately forward ... without waiting for
//! the ownership handover round-trip"). Executor-agnostic: plain polling, no allocation.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;

pub async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let mut a = pin!(a);
    let mut b = pin!(b);
    let mut out_a = None;
    let mut out_b = None;
    std::future::poll_fn(move |cx| {
        if out_a.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                out_a = Some(v);
            }
        }
        if out_b.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                out_b = Some(v);
            }
        }
        if out_a.is_some() && out_b.is_some() {
            Poll::Ready((out_a.take().unwrap(), out_b.take().unwrap()))
        } else {
            Poll::Pending
        }
    })
    .await
}
