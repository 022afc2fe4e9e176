//! The two decisions a message handler takes in one step under the node's state (spec §3.4–
//! §3.7): the directory's answer to an ownership request, and a holder's answer to a
//! transfer, copy or invalidation request. Both are synchronous, so a request is handled
//! atomically, and both may say "not yet" ([`Decision::Requeue`]): the handler leaves the
//! mailbox flag set and re-polls it (R2), never blocking on a remote party.
//!
//! **Anticipatory chaining** is the directory's *immediate metadata update*: an exclusive
//! request makes the requester the holder at once and names the previous holder (perhaps still
//! fetching) as its source; the previous holder's handler serves that transfer only once it
//! has the page and its operation is done (R1 + R2). No acknowledgment goes back to the
//! directory. Every processed request bumps the page's conflict epoch ([CHOICE], the code's
//! coarser rule, spec §8 A3), so an invalidation can tell the copy it was meant for from a
//! later one.

use super::message::{Code, Kind, Request, Response};
use super::mutants::Mutant;
use super::state::{bits, epoch_after, Frame, FrameState, NodeState, Owed, EPOCH_MASK, SSD};

pub enum Decision {
    /// Not servable yet: re-poll later.
    Requeue,
    /// Answer with `response`, writing the page first if `page`: this node's frame of it, or
    /// if `from_ssd` the page read from this node's storage device. If `pin`, the frame was
    /// pinned for that write and is unpinned when it completes.
    Reply { response: Response, page: bool, pin: bool, from_ssd: bool },
}

/// Mark a frame a handler could not serve because it is latched or pinned, and re-poll.
fn busy(st: &mut NodeState, g: u64) -> Decision {
    if let Some(f) = st.frames[g as usize].as_mut() {
        f.wanted = true;
    }
    Decision::Requeue
}

fn owe(owed: Option<&Owed>, page: u64, node: u16) {
    if let Some(o) = owed {
        *o.lock().unwrap_or_else(|e| e.into_inner()).entry((page, node)).or_default() += 1;
    }
}

/// A holder served (or acknowledged) what the directory owed it.
pub(super) fn paid(owed: Option<&Owed>, page: u64, node: u16) {
    if let Some(o) = owed {
        let mut o = o.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = o.get_mut(&(page, node)) {
            *n -= 1;
            if *n == 0 {
                o.remove(&(page, node));
            }
        }
    }
}

/// The directory `me`'s answer to `r`'s ownership request for page `g` (slot `slot`).
///
/// [CHOICE] Sources. A page in shared mode has an *anchor*: the holder that got its copy by a
/// transfer or from the directory (paths that cannot fail), never by a copy. Copies and
/// transfers are always asked of the anchor (or served by the directory's own copy), so a
/// copier whose source was invalidated restarts without anyone waiting on it, and no cycle of
/// waits forms (the code's deadlock case of spec §3.7.2 cannot arise).
#[allow(clippy::too_many_arguments)]
pub fn own(
    st: &mut NodeState,
    me: u16,
    r: u16,
    g: u64,
    slot: usize,
    exclusive: bool,
    has_copy: bool,
    mutant: Mutant,
    owed: Option<&Owed>,
) -> Decision {
    let e = st.dir[slot];
    let dir_copy = st.frames[g as usize].is_some_and(|f| f.state == FrameState::Hot);
    let (rbit, meb) = (1u64 << r, 1u64 << me);
    let dir_busy = st.frames[g as usize].is_some_and(|f| f.state == FrameState::Hot && f.busy());
    if exclusive && !e.exclusive && dir_busy && e.holders & !rbit & meb != 0 {
        // The directory's own copy must go, but local workers hold it latched or a copy of it
        // is still being written: decide once it is free (nothing was changed yet).
        return busy(st, g);
    }
    let mut response = Response::simple(Code::Granted, 0);
    let mut next = e;
    next.epoch = e.epoch.wrapping_add(1) & EPOCH_MASK;
    if e.exclusive {
        // Exclusive conflict (Fig. 4): the owner (maybe still fetching) hands the page over.
        let o = e.anchor;
        assert_ne!(o, r, "n{r} asked its directory n{me} for page {g}, which names n{r} its exclusive owner");
        response.source = Some(o);
        response.take = mutant != Mutant::SharedKeepsOwner || exclusive;
        if !(mutant == Mutant::NoImmediateUpdate && exclusive) {
            next.exclusive = exclusive || !response.take;
            next.holders = if response.take { rbit } else { e.holders | rbit };
            next.anchor = if response.take { r } else { o };
            if response.take {
                owe(owed, g, o);
            }
        }
        if exclusive {
            next.on_ssd = false;
        }
        st.dir[slot] = next;
        response.epoch = next.epoch;
        return Decision::Reply { response, page: false, pin: false, from_ssd: false };
    }
    // Shared mode (or on the storage device only: no holders, anchor `SSD`).
    let needs_page = !(has_copy && (e.holders & rbit != 0 || mutant == Mutant::TrustHasCopy));
    let mut others = e.holders & !rbit;
    let (mut page, mut from_ssd) = (false, false);
    if needs_page {
        if others & meb != 0 && dir_copy {
            page = true;
        } else if e.anchor == SSD || (e.unconfirmed && (exclusive || e.anchor == r)) {
            // Only the directory's storage device is sure to have it (spec §3.11): the
            // requester's copy comes from there, and a copy that cannot fail makes it the anchor.
            // An unconfirmed anchor is not asked for a transfer, and one asking again lost its
            // copy: the page is clean, so the device serves both.
            assert!(e.on_ssd, "page {g}: no anchor in memory and its SSD copy is stale ({e:?})");
            page = true;
            from_ssd = true;
        } else {
            // Even when the anchor is the directory itself with its copy still arriving, the
            // requester is answered now and asks the anchor's handler, which serves once the
            // page is there: an unanswered upgrader may be what that copy waits for.
            assert_ne!(e.anchor, r, "n{r} lost page {g} although it is the anchor of its sharers");
            response.source = Some(e.anchor);
            response.take = exclusive;
        }
    }
    if exclusive {
        if let (Some(s), true) = (response.source, response.take) {
            others &= !(1u64 << s);
            owe(owed, g, s);
        }
        if others & meb != 0 && dir_copy {
            // The directory's own shared copy goes now, without a message (if it is sent
            // with the response, the write reads the frame before the slot is ever refilled).
            others &= !meb;
            if mutant != Mutant::DirectoryKeepsCopy {
                st.set(g, None);
            }
        }
        for n in bits(others) {
            owe(owed, g, n);
        }
        response.invalidate = others;
        next.exclusive = true;
        next.holders = rbit;
        next.anchor = r;
        next.on_ssd = false;
    } else {
        next.holders = e.holders | rbit;
        if from_ssd {
            next.anchor = r;
        }
    }
    // A named anchor stays unconfirmed until another source replaces it.
    next.unconfirmed = e.unconfirmed && next.anchor == e.anchor && !next.exclusive && !from_ssd;
    st.dir[slot] = next;
    response.epoch = next.epoch;
    response.page_sent = page;
    // A shared requester gets the directory's copy, which stays: pin it while it is written.
    let pin = page && !from_ssd && !exclusive && mutant != Mutant::NoPins;
    if pin {
        if let Some(f) = st.frames[g as usize].as_mut() {
            f.pins += 1;
        }
    }
    Decision::Reply { response, page, pin, from_ssd }
}

/// The directory's answer to node `n`'s request to evict its copy of page `g` (spec §3.11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eviction {
    /// A request concerning `n`'s copy may be in flight (or `n` is the source copiers were
    /// sent to): `n` keeps its copy.
    Decline,
    /// `n` drops its copy; the page stays with the other holders or on the storage device.
    Accept,
    /// `n` was the last holder of a dirty page, or the anchor of a dirty shared page the
    /// directory holds no copy of: the directory READs it into its own frame (inserted
    /// `Fetching` here), becomes the anchor, and answers once the READ completed.
    Pull,
}

/// Decide `n`'s eviction of page `g` (slot `slot`) at its directory `me`. Owner stability
/// needs no epoch here: every request that would send a transfer, copy or invalidation to `n`
/// removed `n` from the holders (transfer, invalidation) or went to `n` as the anchor.
pub fn evict(st: &mut NodeState, me: u16, n: u16, g: u64, slot: usize, mutant: Mutant) -> Eviction {
    let e = st.dir[slot];
    let (nb, meb) = (1u64 << n, 1u64 << me);
    if e.holders & nb == 0 && mutant != Mutant::EvictIgnoresHolders {
        return Eviction::Decline;
    }
    let mut next = e;
    next.holders &= !nb;
    next.unconfirmed = false;
    if e.anchor != n {
        next.unconfirmed = e.unconfirmed && next.holders != 0;
        // A sharer that is nobody's source: the anchor (or the SSD) still has the page.
        assert!(next.holders != 0 || e.anchor == SSD, "page {g}: last holder n{n} is not the anchor ({e:?})");
        st.dir[slot] = next;
        return Eviction::Accept;
    }
    if next.holders != 0 {
        // The anchor of sharers leaves. Copiers may be on their way to it (they will get
        // `CopyFailed` and ask again), so the new source must be one that cannot fail: the
        // directory's own copy, the device if the page is clean, else the page read back into
        // the directory (declining instead could starve a node whose cache is full of pages
        // it anchors for sharers that never need to evict).
        let dir_copy = st.frames[g as usize].is_some_and(|f| f.state == FrameState::Hot);
        if mutant == Mutant::EvictAnchorWithSharers {
            // Named as if its copy could not fail, dirty or not.
            next.anchor = next.holders.trailing_zeros() as u16;
        } else if e.holders & meb != 0 && dir_copy {
            next.anchor = me;
        } else if e.on_ssd && next.holders & !meb != 0 {
            // Clean: another node's copy serves copiers, the device covers one that fails.
            // (Never the directory itself without a copy: nobody there would ask again.)
            next.anchor = (next.holders & !meb).trailing_zeros() as u16;
            next.unconfirmed = true;
        } else if e.on_ssd {
            next.anchor = SSD;
        } else {
            if st.frames[g as usize].is_some() {
                // The directory's own worker is about to ask for the page.
                return Eviction::Decline;
            }
            return pull(st, me, g, slot, next);
        }
        st.dir[slot] = next;
        return Eviction::Accept;
    }
    if e.on_ssd || mutant == Mutant::EvictDirtyNoPull {
        next.exclusive = false;
        next.anchor = SSD;
        next.on_ssd = true;
        st.dir[slot] = next;
        return Eviction::Accept;
    }
    if st.frames[g as usize].is_some() {
        // The directory's own worker is about to ask for the page: let its request move it.
        return Eviction::Decline;
    }
    pull(st, me, g, slot, next)
}

/// The directory reads the page back from the evicting anchor into its own (absent) frame and
/// becomes a holder and the anchor in the page's mode.
fn pull(st: &mut NodeState, me: u16, g: u64, slot: usize, mut next: super::state::DirEntry) -> Eviction {
    next.epoch = next.epoch.wrapping_add(1) & EPOCH_MASK;
    next.holders |= 1u64 << me;
    next.anchor = me;
    st.dir[slot] = next;
    let mut f = Frame::fetching(next.exclusive);
    f.grant = Some(next.epoch);
    f.answered = true;
    f.pulled = true;
    f.last_epoch = st.epoch;
    st.set(g, Some(f));
    Eviction::Pull
}

/// A holder's answer to a `Take`, `Copy` or `Inval` request for page `g` from `r`.
pub fn holder(st: &mut NodeState, me: u16, req: &Request, mutant: Mutant, owed: Option<&Owed>) -> Decision {
    let g = req.page;
    let reply = |code| Decision::Reply {
        response: Response::simple(code, req.seq),
        page: code == Code::WithPage,
        pin: false,
        from_ssd: false,
    };
    let Some(f) = st.frames[g as usize] else {
        return match req.kind {
            Kind::Take => reply(Code::NotFound),
            Kind::Copy => reply(Code::CopyFailed),
            _ => {
                paid(owed, g, me);
                reply(Code::Ack)
            }
        };
    };
    if f.state == FrameState::Evicting {
        // Its provider asked the directory, which answers without waiting on anyone.
        return busy(st, g);
    }
    let serve_fetching = mutant == Mutant::ServeWhileFetching;
    let hot_busy = f.state == FrameState::Hot && f.busy() && mutant != Mutant::TakeWhileLatched;
    match req.kind {
        Kind::Take => match f.state {
            FrameState::Fetching if !serve_fetching => Decision::Requeue,
            // Until the operation holding it is done (R2) and copies of it have been read.
            FrameState::Hot if hot_busy => busy(st, g),
            // Not a holder the directory knows: only an invalidated shared fetch becomes one.
            FrameState::Doomed => Decision::Requeue,
            // Until its own request is answered, an upgrader cannot tell a transfer meant for
            // its old shared copy from one chained behind its coming exclusive ownership.
            FrameState::Upgrading
                if !f.answered || f.grant.is_none_or(|g| epoch_after(req.epoch as u32, g)) =>
            {
                Decision::Requeue
            }
            FrameState::Upgrading if f.lost => reply(Code::NotFound),
            FrameState::Upgrading => {
                st.set(g, Some(Frame { lost: true, ..f }));
                paid(owed, g, me);
                reply(Code::WithPage)
            }
            _ => {
                if f.state == FrameState::Hot {
                    st.set(g, None);
                }
                paid(owed, g, me);
                reply(Code::WithPage)
            }
        },
        Kind::Copy => match f.state {
            // A copier granted before this holder's current fetch was sent to a copy that is
            // gone (an unconfirmed anchor that lost it and asked again): waiting could close a
            // cycle of fetches, and a failed copy is always safe to retry.
            // And a holder fetching a copy itself (an unconfirmed anchor) makes nobody wait on
            // a copy that can fail: waits between copiers could close a cycle.
            FrameState::Fetching
                if !serve_fetching
                    && (f.by_copy || f.grant.is_none_or(|gr| epoch_after(gr, req.epoch as u32))) =>
            {
                reply(Code::CopyFailed)
            }
            FrameState::Fetching if !serve_fetching => Decision::Requeue,
            FrameState::Upgrading if f.lost => reply(Code::CopyFailed),
            FrameState::Doomed => reply(Code::CopyFailed),
            FrameState::Hot if f.latch < 0 => busy(st, g),
            FrameState::Hot | FrameState::Upgrading if mutant == Mutant::NoPins => reply(Code::WithPage),
            // An upgrader's old copy is served pinned too: once its upgrade is granted it writes
            // the page, and must wait until this WRITE has read it (NEEDS.md "Pins on upgrading
            // frames": unpinned, a large WRITE that tears could carry a half-updated node).
            FrameState::Hot | FrameState::Upgrading => {
                // The frame stays; it may not change until the page WRITE has read it.
                st.set(g, Some(Frame { pins: f.pins + 1, wanted: false, ..f }));
                Decision::Reply {
                    response: Response::simple(Code::WithPage, req.seq),
                    page: true,
                    pin: true,
                    from_ssd: false,
                }
            }
            _ => reply(Code::WithPage),
        },
        Kind::Inval => {
            let e = req.epoch as u32;
            // Meant for this copy only if the directory processed this node's request first.
            // (A stale one reaches only a fetching or upgrading frame, never a hot one granted
            // after it: NEEDS.md "The epoch check on invalidations", where the former mutant
            // that skipped this check is argued equivalent.)
            let meant = f.grant.is_none_or(|g| epoch_after(e, g));
            if meant && hot_busy {
                return busy(st, g);
            }
            match f.state {
                FrameState::Fetching if !f.exclusive => {
                    let later = f.inval.is_none_or(|i| epoch_after(e, i));
                    if later {
                        st.set(g, Some(Frame { inval: Some(e), ..f }));
                    }
                }
                FrameState::Fetching => {}
                FrameState::Upgrading if meant => st.set(g, Some(Frame { lost: true, ..f })),
                FrameState::Hot if meant => st.set(g, None),
                _ => {}
            }
            paid(owed, g, me);
            reply(Code::Ack)
        }
        Kind::Own | Kind::Evict | Kind::Done | Kind::Transferred => {
            unreachable!("ownership and eviction requests and acks go to the directory")
        }
    }
}
