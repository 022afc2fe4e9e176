//! The two conflict-resolution baselines anticipatory chaining replaces (spec §3.7, Fig. 5 a/b;
//! paper §3.4.1–3.4.2), selected by `protocol_options.conflicts` ([`Conflicts`]):
//!
//! * **FIFO queue at the directory** (`"fifo"`, as in GAM): the directory serves one ownership
//!   request per page at a time. The next is served only after the previous requester has
//!   installed the page and said so (`Kind::Done`, the acknowledgment anticipatory chaining
//!   does not need). Remote requests wait in arrival order; the directory's own workers bypass
//!   the queue (paper: queueing them "incurs high overhead on the hot path"), so when a
//!   transfer completes a waiting local worker takes the page before the queue's head.
//! * **Busy polling** (`"busy_polling"`): the directory refuses (`Code::Retry`) an ownership
//!   request for a page while another transfer of it is in flight; the requester backs off
//!   (randomized exponential) and asks again. The winner informs the directory (`Kind::Done`).
//!
//! Both reuse the directory's decision [`own`] unchanged: serving one request per page at a
//! time means no request is ever chained behind a predecessor still fetching, and the
//! metadata the directory writes when it serves a request is what it would write on the
//! acknowledgment (nothing else is served in between), so the invariants of `check.rs` hold
//! as they are. What the baselines add is the waiting: a request is served only when the page
//! is settled at its last owner.
//!
//! [CHOICE]s (written in NEEDS.md too):
//! * Every ownership request of a page goes through the gate, shared ones too ("served one at
//!   a time"), so every remote invocation costs one more message than under chaining.
//! * FIFO: queued requests stay flagged in their mailboxes and the handler re-polls them (the
//!   code's way of deferring a request, spec §3.8); the queue fixes their order. When a `Done`
//!   frees the page, a directory worker waiting for it is woken at once, the queue's head is
//!   served at its handler's next sweep — the "steal" of paper §3.4.2 follows from that.
//! * Busy polling refuses at the directory (as the brief of this slice put it), not at the
//!   old owner as in the paper's Fig. 5(a) (where the directory answers every requester with
//!   the current owner, and only the first transfer request succeeds): the same back-off and
//!   retry traffic, without a directory whose metadata lags behind its owners. The back-off
//!   starts at `backoff_ns` and doubles per refusal up to `backoff_max_ns`, each wait drawn
//!   uniformly from [b/2, b] (the paper leaves the policy open; its competitors back off
//!   exponentially, §6.7.3).
//! * `Done` is one 8-byte WRITE into the sender's *ack slot* at the directory (a region past
//!   the response slots, only in baseline runs), not into its request mailbox, which its next
//!   request to that directory could overwrite before a handler read the `Done`. Both are
//!   written on the worker's one QP, in order; a handler loads a box's head word, then its
//!   ack slot, then serves the head, so a `Done` is always consumed before the next request
//!   of its sender is (loading the ack slot first lets both land between the two loads on
//!   hardware).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::common::error::{NicExt, ProtocolResult};
use crate::common::sync_ext::timeout;
use crate::nic::{Nanos, Nic, NodeId, RemoteAddr, Verb};

use super::config::Config;
use super::directory::{holder, own, paid, Decision};
use super::layout::Layout;
use super::message::{Code, Kind, Request, Response};
use super::mutants::Mutant;
use super::node::{Node, Worker};
use super::state::{FrameState, NodeState, Owed};

/// How the directory resolves several requests for one page (spec §3.7, Fig. 5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Conflicts {
    /// Anticipatory chaining (ScaleStore): immediate metadata update, no acknowledgment.
    #[default]
    Chaining,
    /// FIFO queue at the directory (GAM-like), one request per page served at a time.
    Fifo,
    /// The directory refuses while a transfer is in flight; the requester backs off and retries.
    BusyPolling,
}

/// The directory's per-page gate of the baselines (unused under chaining).
#[derive(Default)]
pub struct Gate {
    pages: BTreeMap<u64, PageGate>,
}

#[derive(Default)]
struct PageGate {
    /// A request was served and its requester has not acknowledged yet.
    busy: bool,
    /// FIFO: remote requests waiting, by mailbox index, in the order handlers first saw them.
    queue: VecDeque<u64>,
}

impl Gate {
    /// Pages whose gate is still taken or has waiters (for the end-of-run check).
    pub fn pending(&self) -> usize {
        self.pages.values().filter(|p| p.busy || !p.queue.is_empty()).count()
    }
}

fn lock(gate: &Mutex<Gate>) -> std::sync::MutexGuard<'_, Gate> {
    gate.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes past `layout.region_bytes()` the baselines need on every node: one ack slot per
/// `(node, worker)`. None under chaining (its runs keep their region).
pub fn extra_bytes(layout: &Layout, conflicts: Conflicts) -> u64 {
    match conflicts {
        Conflicts::Chaining => 0,
        _ => layout.mailbox_count() * 8,
    }
}

/// The ack slot of `(from, worker)` on any node.
pub fn ack_slot(layout: &Layout, from: NodeId, worker: u32) -> u64 {
    layout.region_bytes() + (from.0 as u64 * layout.threads + worker as u64) * 8
}

/// The end of the range a handler's idle wait watches: its mailboxes, and in baseline runs
/// also the ack slots up to its last box's (the response slots in between only cost a sweep).
pub fn watch_end(layout: &Layout, conflicts: Conflicts, last_box: u64, mailboxes_end: u64) -> u64 {
    match conflicts {
        Conflicts::Chaining => mailboxes_end,
        _ => {
            let (n, w) = (last_box / layout.threads, last_box % layout.threads);
            ack_slot(layout, NodeId(n as u16), w as u32) + 8
        }
    }
}

/// The directory `me`'s decision on the ownership request `req` from mailbox `j` (node
/// `from`), with the baseline's gate in front of [`own`]. Called by a handler under the
/// node's state lock.
#[allow(clippy::too_many_arguments)]
pub fn own_at_directory(
    gate: &Mutex<Gate>,
    options: &Config,
    st: &mut NodeState,
    me: u16,
    from: u16,
    j: u64,
    req: &Request,
    slot: usize,
    mutant: Mutant,
    owed: Option<&Owed>,
) -> Decision {
    let conflicts = options.conflicts;
    let shortcut = options.directory_sends_owned_page;
    let decide = |st: &mut NodeState| {
        let d = own(st, me, from, req.page, slot, req.exclusive, req.has_copy, mutant, owed);
        if shortcut {
            directory_sends_owned_page(st, me, req.page, d, owed)
        } else {
            d
        }
    };
    if conflicts == Conflicts::Chaining {
        return decide(st);
    }
    let mut gate = lock(gate);
    let p = gate.pages.entry(req.page).or_default();
    match conflicts {
        Conflicts::Fifo => {
            if !p.queue.contains(&j) {
                p.queue.push_back(j);
            }
            if p.busy || p.queue.front() != Some(&j) {
                return Decision::Requeue;
            }
        }
        _ => {
            if p.busy {
                return Decision::Reply {
                    response: Response::simple(Code::Retry, 0),
                    page: false,
                    pin: false,
                    from_ssd: false,
                };
            }
        }
    }
    let d = decide(st);
    if let Decision::Reply { .. } = d {
        if conflicts == Conflicts::Fifo {
            p.queue.pop_front();
        }
        p.busy = true;
    }
    d
}

/// `directory_sends_owned_page` (spec §3.4, the code's directory handler): when [`own`] sends
/// the requester to the directory itself for a transfer (the directory is the page's
/// exclusive owner, or the anchor asked to hand over its shared copy) and the directory's frame
/// is Hot and neither latched nor pinned, the directory serves that transfer in the same step:
/// the page goes with the response and its frame is dropped. The same state as after the
/// `Take`, one round trip sooner. (If the frame is still arriving or busy, the requester takes
/// it as before.)
fn directory_sends_owned_page(
    st: &mut NodeState,
    me: u16,
    g: u64,
    d: Decision,
    owed: Option<&Owed>,
) -> Decision {
    match d {
        Decision::Reply { mut response, page: false, pin: false, from_ssd: false }
            if response.source == Some(me)
                && response.take
                && st.frames[g as usize].is_some_and(|f| f.state == FrameState::Hot && !f.busy()) =>
        {
            st.set(g, None);
            paid(owed, g, me);
            response.source = None;
            response.take = false;
            response.page_sent = true;
            Decision::Reply { response, page: true, pin: false, from_ssd: false }
        }
        d => d,
    }
}

/// A holder's answer to a `Take`, `Copy` or `Inval` ([`holder`]), with one case the gate
/// decides differently: a `Take` reaching an upgrader whose own request is not answered yet.
/// Under chaining the upgrader must wait (the transfer may be chained behind its coming
/// exclusive ownership); behind the gate the directory served the taker's request while the
/// upgrader's was still waiting (a served request's requester holds the gate until it has
/// installed, so the upgrader's cannot have been served yet), so the transfer is meant for the
/// old shared copy: serve it from that copy now. Waiting would deadlock: the upgrader's
/// request waits for the taker's `Done`.
pub fn holder_at(
    conflicts: Conflicts,
    st: &mut NodeState,
    me: u16,
    req: &Request,
    mutant: Mutant,
    owed: Option<&Owed>,
) -> Decision {
    let g = req.page;
    match st.frames[g as usize] {
        Some(f)
            if conflicts != Conflicts::Chaining
                && mutant != Mutant::UpgraderWaitsAtGate
                && req.kind == Kind::Take
                && f.state == FrameState::Upgrading
                && !f.answered =>
        {
            let code = if f.lost {
                Code::NotFound
            } else {
                st.set(g, Some(super::state::Frame { lost: true, ..f }));
                paid(owed, g, me);
                Code::WithPage
            };
            Decision::Reply {
                response: Response::simple(code, req.seq),
                page: code == Code::WithPage,
                pin: false,
                from_ssd: false,
            }
        }
        _ => holder(st, me, req, mutant, owed),
    }
}

/// Free page `g`'s gate at its directory (a `Done` arrived, or a local requester finished),
/// and wake the directory's workers waiting for it.
pub fn release<N: Nic>(node: &Node<N>, g: u64) {
    {
        let mut gate = lock(&node.gate);
        if let Some(p) = gate.pages.get_mut(&g) {
            p.busy = false;
            if p.queue.is_empty() {
                gate.pages.remove(&g);
            }
        }
    }
    node.settled.notify_all();
}

/// A directory worker (R4, no messages) takes page `g`'s gate before deciding: at once if no
/// transfer is in flight (bypassing queued remote requests), else when the gate is freed
/// (FIFO) or after a back-off (busy polling).
pub async fn enter_local<N: Nic>(node: &Node<N>, w: &mut Worker<N>, g: u64) {
    let conflicts = node.config.conflicts;
    if conflicts == Conflicts::Chaining {
        return;
    }
    let mut attempt = 0;
    loop {
        {
            let mut gate = lock(&node.gate);
            let p = gate.pages.entry(g).or_default();
            if !p.busy {
                p.busy = true;
                return;
            }
        }
        if conflicts == Conflicts::Fifo {
            // Bounded, so a wake-up lost between threads on hardware only costs time.
            let _ = timeout(&w.nic, Nanos::from_us(20), node.settled.notified()).await;
        } else {
            back_off(node, w, attempt).await;
            attempt += 1;
        }
    }
}

/// Busy polling: wait before asking the directory again after the `attempt`-th refusal.
pub async fn back_off<N: Nic>(node: &Node<N>, w: &mut Worker<N>, attempt: u32) {
    node.stats.lock().unwrap_or_else(|e| e.into_inner()).retries += 1;
    let (lo, hi) = (node.config.backoff_ns.max(1), node.config.backoff_max_ns.max(node.config.backoff_ns));
    let b = lo.saturating_mul(1u64 << attempt.min(30)).min(hi);
    w.jitter = splitmix64(w.jitter);
    let wait = b / 2 + w.jitter % (b - b / 2 + 1);
    w.nic.sleep(Nanos(wait)).await;
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The requester has installed page `g` (or gives up its turn to ask again): tell the
/// directory, which frees the page for the next request. No-op under chaining.
pub async fn done<N: Nic>(node: &Node<N>, w: &mut Worker<N>, g: u64) -> ProtocolResult<()> {
    if node.config.conflicts == Conflicts::Chaining {
        return Ok(());
    }
    let dir = node.layout.directory(g);
    if dir == node.nic.node() {
        release(node, g);
        return Ok(());
    }
    let req = Request { kind: Kind::Done, page: g, exclusive: false, has_copy: false, epoch: 0, seq: 1 };
    let (_, head) = req.encode();
    w.nic.cpu(Nanos(node.config.cpu.request_ns)).await;
    {
        let mut s = node.stats.lock().unwrap_or_else(|e| e.into_inner());
        s.messages += 1;
        s.acks += 1;
    }
    let at = RemoteAddr::new(dir, ack_slot(&node.layout, node.nic.node(), w.index));
    w.nic.try_batch(&[Verb::WriteWord { remote: at, value: head }], "scalestore done").await?;
    Ok(())
}

/// A handler's look at mailbox `j`'s ack slot: the page of a `Done` found there (the slot is
/// cleared). Always `None` under chaining.
pub fn take_ack<N: Nic>(node: &Node<N>, nic: &N, j: u64) -> Option<u64> {
    if node.config.conflicts == Conflicts::Chaining {
        return None;
    }
    let l = &node.layout;
    let at = ack_slot(l, NodeId((j / l.threads) as u16), (j % l.threads) as u32);
    let head = nic.local().load(at);
    let req = Request::decode(0, head)?;
    assert_eq!(req.kind, Kind::Done, "ScaleStore ack slot holds a {:?}", req.kind);
    nic.local().store(at, 0);
    Some(req.page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_option_names() {
        let c: Conflicts = serde_json::from_str("\"busy_polling\"").unwrap();
        assert_eq!(c, Conflicts::BusyPolling);
        assert_eq!(serde_json::to_string(&Conflicts::Fifo).unwrap(), "\"fifo\"");
        assert_eq!(Conflicts::default(), Conflicts::Chaining);
    }
}
