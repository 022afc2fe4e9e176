//! Page eviction (paper §4, spec §3.11): page-provider tasks keep free frames, and the
//! directory decides what happens to each page a node gives up.
//!
//! A provider works when free frames fall below its target. It samples the last-access epochs
//! of cached frames in its share of the translation table, takes the coolest `coolest` share
//! as the threshold, advances the node's epoch, and marks frames at or below it `Evicting`
//! (no local access, handlers re-poll requests for them) while scanning on from where it
//! stopped. Then:
//!
//! * **its own pages** (this node is the directory): a dirty page that no other holder can
//!   serve is written to the storage device first; then the node leaves the holders (the
//!   device becomes the source when it was the anchor). If a request took or invalidated the
//!   copy meanwhile, the frame goes back to Hot and the handler serves that request.
//! * **other directories' pages**: one list per directory (`batch` pages), written by RDMA
//!   WRITE before the request word. The directory decides every entry in one step
//!   ([`super::directory::evict`]), READs back the dirty pages whose last holder leaves, all
//!   in one posted batch (the paper's linked READs), and answers with a bitmap of accepted
//!   entries once those READs completed. Accepted frames go, declined ones are Hot again.
//!
//! [CHOICE]s: the epoch advances once per provider round (the code: once a tenth of the free
//! target was consumed); the sample starts at the scan position, not a random one; a list is
//! sent as soon as a round has chosen its victims (the code waits for > 16 entries or 100 idle
//! rounds); the directory's READs-back land in its own frames beyond its cache budget (the
//! code's private page pool), which its providers then write to its device.

use std::sync::Arc;

use crate::common::error::ProtocolError;
use crate::common::sync_ext::timeout;
use crate::nic::{Nanos, Nic, NodeId, RemoteAddr, Verb};

use super::directory::{evict, Eviction};
use super::local::Touch;
use super::message::{Code, Kind, Request, Response};
use super::mutants::Mutant;
use super::node::{post_all, Node, Worker};
use super::state::{epoch_after, Frame, FrameState, SSD};

impl<N: Nic> Node<N> {
    /// Page-provider task `index`: owns the global pages `g ≡ index (mod providers)`.
    pub async fn provider(self: Arc<Self>, index: u16) {
        let layout = &self.layout;
        let qp = (layout.threads + self.config.handler_tasks as u64 + index as u64) as u16;
        let mut w = self.agent((layout.threads + index as u64) as u32, qp);
        let mut cursor = index as u64;
        loop {
            if self.errors.is_set() {
                return;
            }
            // Frames on their way out count as free, or concurrent rounds would overshoot.
            let free = {
                let st = self.lock();
                self.capacity.saturating_sub(st.used - st.evicting)
            };
            if free >= self.free_target {
                // Workers wake it when an insert leaves fewer free frames than the target; the
                // bound only covers a wake-up lost between threads on hardware.
                let _ = timeout(&w.nic, Nanos::from_us(1000), self.pressure.notified()).await;
                continue;
            }
            let chosen = self.round(&mut w, &mut cursor, self.free_target - free).await;
            if let Err(e) = chosen {
                self.errors.record(e);
                return;
            }
            if chosen == Ok(0) {
                // Everything cool is latched, pinned or in flight: give it a moment.
                w.nic.sleep(Nanos(self.config.poll_ns * 10)).await;
            }
        }
    }

    /// One provider round: sample, choose up to `needed` victims, evict them (lists of at
    /// most a batch). Returns how many were chosen.
    async fn round(
        self: &Arc<Self>,
        w: &mut Worker<N>,
        cursor: &mut u64,
        needed: u64,
    ) -> crate::common::error::ProtocolResult<u64> {
        let e = self.config.eviction.clone();
        let (me, step, total) = (self.me(), self.layout.providers, self.layout.total_pages());
        let share = total.div_ceil(step);
        let mut examined = 0u64;
        let mut victims = Vec::new();
        {
            let mut st = self.lock();
            // Sample the next frames of this share for the epoch threshold.
            let mut sample = Vec::with_capacity(e.sample as usize);
            let mut g = *cursor;
            for _ in 0..share {
                if let Some(f) = st.frames[g as usize] {
                    examined += 1;
                    if f.state == FrameState::Hot {
                        sample.push(f.last_epoch);
                        if sample.len() == e.sample as usize {
                            break;
                        }
                    }
                }
                g = next(g, step, total);
            }
            sample.sort_unstable();
            let Some(&threshold) = sample.get(((sample.len().max(1) - 1) as f64 * e.coolest) as usize) else {
                return Ok(0);
            };
            st.epoch += 1;
            // Choose victims from the scan position on.
            let mut g = *cursor;
            for _ in 0..share {
                if let Some(f) = st.frames[g as usize] {
                    examined += 1;
                    if f.state == FrameState::Hot && !f.busy() && !f.wanted && f.last_epoch <= threshold {
                        st.set(g, Some(Frame { state: FrameState::Evicting, ..f }));
                        victims.push(g);
                    }
                }
                g = next(g, step, total);
                if victims.len() as u64 >= needed {
                    break;
                }
            }
            *cursor = g;
        }
        let cpu = &self.config.cpu;
        w.nic
            .cpu(Nanos(examined * cpu.provider_frame_ns + victims.len() as u64 * cpu.provider_evict_ns))
            .await;
        // The ablation: each victim leaves the translation table (and the LRU list).
        // Providers' line-owner ids follow the handlers' (`threads + handler`), so that with
        // two sockets a provider and a handler are not taken for the same core.
        if self.config.local.active() {
            let thread = w.index + self.config.handler_tasks as u32;
            self.charge_lines(&w.nic, thread, &vec![Touch::Remove; victims.len()]).await;
        }
        let chosen = victims.len() as u64;
        // This node's own pages.
        let (own, remote): (Vec<u64>, Vec<u64>) =
            victims.into_iter().partition(|&g| self.layout.directory(g) == me);
        for g in own {
            self.evict_own(g);
        }
        // Other directories' pages: one list per directory, all posted before any answer.
        let mut by_dir: Vec<Vec<u64>> = vec![Vec::new(); self.layout.nodes as usize];
        for g in remote {
            by_dir[self.layout.directory(g).index()].push(g);
        }
        let provider = (w.index as u64 - self.layout.threads) as u32;
        while by_dir.iter().any(|l| !l.is_empty()) {
            let mut sent = Vec::new();
            for (d, list) in by_dir.iter_mut().enumerate() {
                let take = list.len().min(e.batch as usize);
                if take == 0 {
                    continue;
                }
                let batch: Vec<u64> = list.drain(..take).collect();
                let to = NodeId(d as u16);
                let out = self.layout.evict_out(provider, to);
                for (i, &g) in batch.iter().enumerate() {
                    w.nic.local().store(out + 8 * i as u64, g);
                }
                let list_write = Verb::Write {
                    remote: RemoteAddr::new(to, self.layout.evict_in(me, provider)),
                    local_bytes: out,
                    len_bytes: 8 * batch.len() as u32,
                };
                let req = Request {
                    kind: Kind::Evict,
                    page: batch.len() as u64,
                    exclusive: false,
                    has_copy: false,
                    epoch: 0,
                    seq: 0,
                };
                let seq = self.post_after(w, to, req, Some(list_write)).await?;
                self.stats().eviction_lists += 1;
                sent.push((to, seq, batch));
            }
            for (to, seq, batch) in sent {
                let answer = self.response(w, to, seq).await?;
                let mut st = self.lock();
                let mut s = self.stats();
                for (i, g) in batch.into_iter().enumerate() {
                    let f = st.frames[g as usize].expect("an evicting frame stays until answered");
                    assert_eq!(
                        f.state,
                        FrameState::Evicting,
                        "page {g} changed while its eviction was asked"
                    );
                    if answer.invalidate >> i & 1 == 1 {
                        st.set(g, None);
                        s.evictions += 1;
                    } else {
                        st.set(g, Some(Frame { state: FrameState::Hot, ..f }));
                        s.eviction_declines += 1;
                    }
                }
            }
        }
        self.settled.notify_all();
        Ok(chosen)
    }

    /// Evict this node's copy of one of its own pages (it is the directory).
    fn evict_own(self: &Arc<Self>, g: u64) {
        let me = self.me().0;
        let slot = (g % self.layout.pages_per_node) as usize;
        let write = {
            let st = self.lock();
            let e = st.dir[slot];
            !e.on_ssd && (e.holders == 1 << me || e.anchor == me) && self.mutant() != Mutant::SkipWriteBack
        };
        if !write {
            self.finish_own(g, false);
            return;
        }
        // Write it back first (async, as the paper's libaio writes): the frame stays Evicting,
        // so nothing changes it while the device reads it.
        let (node, nic) = (self.clone(), self.nic.clone());
        self.nic.spawn(async move {
            let (at, len) = (node.layout.frame(g), node.layout.page_bytes as u32);
            if let Err(e) = nic.ssd_write(node.layout.ssd_offset(g), at, len).await {
                let me = node.me();
                node.errors.record(ProtocolError::message(
                    me,
                    nic.now(),
                    "SSDW",
                    me,
                    0,
                    "scalestore page",
                    e,
                ));
                return;
            }
            node.stats().ssd_writes += 1;
            node.finish_own(g, true);
        });
    }

    /// Leave the holders of own page `g` (frame `Evicting`), unless a request took it meanwhile
    /// or it is dirty with nobody else to serve it; then the frame is Hot again.
    fn finish_own(&self, g: u64, wrote: bool) {
        let me = self.me().0;
        let meb = 1u64 << me;
        let slot = (g % self.layout.pages_per_node) as usize;
        let mut st = self.lock();
        let f = st.frames[g as usize].expect("an evicting frame stays");
        assert_eq!(f.state, FrameState::Evicting, "own page {g} changed while evicting");
        let e = st.dir[slot];
        let on_ssd = e.on_ssd || wrote || self.mutant() == Mutant::SkipWriteBack;
        let rest = e.holders & !meb;
        let listed = e.holders & meb != 0 && e.exclusive == f.exclusive;
        if !listed || (!on_ssd && (rest == 0 || e.anchor == me)) {
            st.set(g, Some(Frame { state: FrameState::Hot, ..f }));
            self.stats().eviction_declines += 1;
        } else {
            let mut next = e;
            next.holders = rest;
            next.on_ssd = on_ssd;
            if rest == 0 {
                next.exclusive = false;
            }
            if rest == 0 {
                next.anchor = SSD;
                next.unconfirmed = false;
            } else if e.anchor == me {
                // Clean (else declined above): a sharer serves copies, the device covers a
                // copy that fails (see `DirEntry::unconfirmed`).
                next.anchor = rest.trailing_zeros() as u16;
                next.unconfirmed = true;
            }
            st.dir[slot] = next;
            st.set(g, None);
            self.stats().evictions += 1;
        }
        drop(st);
        self.settled.notify_all();
    }

    /// A handler serves an eviction list from `(from, agent)`: decide every entry now, READ
    /// back the pulled pages, answer once they are here.
    pub(super) async fn serve_evictions(self: &Arc<Self>, nic: &N, from: NodeId, agent: u32, req: Request) {
        let me = self.me();
        let provider = (agent as u64 - self.layout.threads) as u32;
        let list = self.layout.evict_in(from, provider);
        let count = req.page as usize;
        nic.cpu(Nanos(count as u64 * self.config.cpu.provider_evict_ns)).await;
        let (mut accepted, mut pulls) = (0u64, Vec::new());
        {
            let mut st = self.lock();
            for i in 0..count {
                let g = nic.local().load(list + 8 * i as u64);
                let slot = (g % self.layout.pages_per_node) as usize;
                match evict(&mut st, me.0, from.0, g, slot, self.mutant()) {
                    Eviction::Decline => {}
                    Eviction::Accept => accepted |= 1 << i,
                    Eviction::Pull => {
                        accepted |= 1 << i;
                        pulls.push(g);
                    }
                }
            }
        }
        self.stats().pulls += pulls.len() as u64;
        let mut response = Response::simple(Code::Ack, req.seq);
        response.invalidate = accepted;
        let (arg, head) = response.encode();
        let slot = RemoteAddr::new(from, self.layout.response(agent, me));
        let (node, poster) = (self.clone(), nic.clone());
        nic.spawn(async move {
            if !pulls.is_empty() {
                let len_bytes = node.layout.page_bytes as u32;
                let reads: Vec<Verb> = pulls
                    .iter()
                    .map(|&g| {
                        let at = node.layout.frame(g);
                        Verb::Read { remote: RemoteAddr::new(from, at), local_bytes: at, len_bytes }
                    })
                    .collect();
                // Linked READs, at most a batch of work requests at a time.
                for chunk in reads.chunks(crate::nic::MAX_BATCH) {
                    if let Err(e) = post_all(&poster, chunk, "scalestore eviction read-back").await {
                        node.errors.record(e);
                        return;
                    }
                }
                let mut st = node.lock();
                for &g in &pulls {
                    let f = st.frames[g as usize].expect("a pulled frame stays until it arrives");
                    let epoch = st.epoch;
                    if f.inval.is_some_and(|i| f.grant.is_none_or(|g| epoch_after(i, g))) {
                        // Invalidated while it came back (the directory is the anchor, so no
                        // request should do that; kept as install does for a shared fetch).
                        st.set(g, None);
                    } else {
                        st.set(
                            g,
                            Some(Frame { state: FrameState::Hot, pulled: false, last_epoch: epoch, ..f }),
                        );
                    }
                }
                drop(st);
                node.settled.notify_all();
            }
            let verbs = [
                Verb::WriteWord { remote: slot, value: arg },
                Verb::WriteWord { remote: slot.add(8), value: head },
            ];
            if let Err(e) = post_all(&poster, &verbs, "scalestore eviction answer").await {
                node.errors.record(e);
            }
        });
    }
}

/// The next page of a provider's share (`step` apart), wrapping to the share's start.
fn next(g: u64, step: u64, total: u64) -> u64 {
    let n = g + step;
    if n < total {
        n
    } else {
        n % step
    }
}
