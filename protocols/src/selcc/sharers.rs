//! Case 3 without waiting (§4.4.3 [P], Fig. 8): "the invalidation message prompts each victim
//! node to release its shared lock while the sender continues attempting to acquire the
//! exclusive latch". A writer that meets readers asks them to release and goes straight back to
//! its CAS; it does not wait for their answers. What it remembers per sharer is only what paces
//! the next message to it (§5.1.2 [P]: a resend waits T = C·RTT/N_r after a "dropped" answer):
//!
//! * a sharer never asked in this acquire is asked now;
//! * a sharer that answered is asked again once T has passed since the last message to it;
//! * a sharer that has not answered (its handler memorised the message behind local readers) is
//!   reminded only when our priority has aged past the one it holds, so the memorised message
//!   carries the starved writer's current priority ([REPO] "pending reminders").
//!
//! Answers land in the worker's second half of reply words (`layout::SHARER_REPLIES_OFFSET`),
//! so a late answer — possibly after the acquire has finished — can never overwrite a reply a
//! blocking request (Case 1/2) waits for.

use crate::nic::{Nanos, Nic};

use super::latch::{bits_iter, MAX_COMPUTE_NODES};
use super::layout::{Gaddr, SHARER_REPLIES_OFFSET, WORD};
use super::message::{parse_reply, InvKind, InvMsg};
use super::node::{Node, Worker};

/// The last message to one sharer within one exclusive acquire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ask {
    seq: u32,
    priority: u8,
    sent: Nanos,
    answered: bool,
}

/// Case-3 bookkeeping of one exclusive acquire.
#[derive(Debug)]
pub struct SharerAsks {
    asks: [Option<Ask>; MAX_COMPUTE_NODES],
    /// Whether any message went out yet (from then on, failed CASes overlap the sharers'
    /// release and are not counted as round trips).
    pub sent_any: bool,
}

impl Default for SharerAsks {
    fn default() -> Self {
        SharerAsks { asks: [None; MAX_COMPUTE_NODES], sent_any: false }
    }
}

impl SharerAsks {
    /// The sharers (a reader bitmap) to message now, at `now`, with `priority`, given the resend
    /// interval `t`. Pure.
    pub fn due(&self, sharers: u64, now: Nanos, t: Nanos, priority: u8) -> u64 {
        bits_iter(sharers)
            .filter(|i| match self.asks[i.0 as usize] {
                None => true,
                Some(a) if a.answered => now.0 >= a.sent.0 + t.0,
                Some(a) => priority > a.priority,
            })
            .fold(0, |bits, i| bits | super::latch::bit(i))
    }

    fn record(&mut self, targets: u64, seq: u32, priority: u8, now: Nanos) {
        for i in bits_iter(targets) {
            self.asks[i.0 as usize] = Some(Ask { seq, priority, sent: now, answered: false });
        }
        self.sent_any = true;
    }

    /// Mark the sharers whose answer to their last message is in `flag_of(i)`.
    fn collect(&mut self, mut flag_of: impl FnMut(usize) -> u64) {
        for (i, ask) in self.asks.iter_mut().enumerate() {
            if let Some(a) = ask.as_mut().filter(|a| !a.answered) {
                a.answered = parse_reply(flag_of(i), a.seq).is_some();
            }
        }
    }
}

impl<N: Nic> Node<N> {
    /// One Case-3 step of an exclusive acquire: read the sharers' answers so far and build the
    /// invalidation for the `sharers` that are due, to be posted with the next CAS (the caller
    /// does not wait for answers).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn sharers_to_ask(
        &self,
        w: &mut Worker<N>,
        asks: &mut SharerAsks,
        sharers: u64,
        g: Gaddr,
        frame: u32,
        priority: u8,
        t: Nanos,
    ) -> Option<(u64, InvMsg)> {
        let replies = w.reply_offset + SHARER_REPLIES_OFFSET;
        let region = w.nic.local();
        asks.collect(|i| region.load(replies + i as u64 * WORD));
        let due = asks.due(sharers, w.nic.now(), t, priority);
        if due == 0 {
            return None;
        }
        // Each round of messages is one step on the critical path, however many CASes overlap.
        w.op.round_trips += 1;
        let msg = self.new_invalidation(w, due, InvKind::WriterVsShared, g, frame, priority, replies);
        asks.record(due, msg.seq, priority, w.nic.now());
        Some((due, msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selcc::latch::bit;
    use crate::selcc::message::{reply_flag, ReplyStatus};
    use crate::selcc::ComputeIndex;

    const A: ComputeIndex = ComputeIndex(1);
    const B: ComputeIndex = ComputeIndex(2);

    #[test]
    fn new_sharers_are_asked_at_once_and_answered_ones_after_t() {
        let mut asks = SharerAsks::default();
        let both = bit(A) | bit(B);
        assert_eq!(asks.due(both, Nanos(0), Nanos(100), 0), both);
        asks.record(both, 7, 0, Nanos(0));
        assert_eq!(asks.due(both, Nanos(1_000), Nanos(100), 0), 0, "no answer, same priority: wait");
        // A answers (dropped); B stays silent (memorised behind its readers).
        asks.collect(|i| if i == A.0 as usize { reply_flag(7, 0, ReplyStatus::Dropped) } else { 0 });
        assert_eq!(asks.due(both, Nanos(50), Nanos(100), 0), 0, "A: T has not passed");
        assert_eq!(asks.due(both, Nanos(100), Nanos(100), 0), bit(A), "A: T has passed");
        assert_eq!(asks.due(both, Nanos(100), Nanos(100), 2), both, "B is reminded at a higher priority");
    }

    #[test]
    fn an_answer_to_an_older_message_does_not_count() {
        let mut asks = SharerAsks::default();
        asks.record(bit(A), 7, 0, Nanos(0));
        asks.record(bit(A), 8, 1, Nanos(10));
        asks.collect(|_| reply_flag(7, 0, ReplyStatus::Released));
        assert_eq!(asks.due(bit(A), Nanos(1_000), Nanos(1), 1), 0, "still waiting for seq 8");
        asks.collect(|_| reply_flag(8, 0, ReplyStatus::Released));
        assert_eq!(asks.due(bit(A), Nanos(1_000), Nanos(1), 1), bit(A));
    }
}
