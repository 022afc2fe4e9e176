//! The message-handler tasks: each sweeps its share of the request mailboxes remote workers
//! write by RDMA WRITE, serves what it can in one step of the node's state (`directory.rs`),
//! and leaves the rest flagged for its next sweep (R2).

use std::sync::Arc;

use crate::common::error::ProtocolError;
use crate::nic::{Nanos, Nic, NodeId, RemoteAddr, Verb};

use super::baselines;
use super::directory::Decision;
use super::local::Touch;
use super::message::{Code, Kind, Request, Response};
use super::node::{note_ssd_read, post_all, Node};

impl<N: Nic> Node<N> {
    /// Message-handler task `index` of `tasks`: sweeps its share of the mailboxes, serves what
    /// it can, leaves the rest flagged for the next sweep (R2), sleeps when idle.
    pub async fn handler(self: Arc<Self>, index: u16, tasks: u16) {
        let nic = self.nic.qp(self.layout.threads as u16 + index);
        let me = self.me();
        let agents = self.layout.agents();
        let boxes: Vec<u64> = (0..self.layout.mailbox_count())
            .filter(|j| j % tasks as u64 == index as u64 && j / agents != me.0 as u64)
            .collect();
        // The mailboxes this task sweeps lie in [lo, hi) (box j at `mailboxes + 16 j`).
        let box_at = |j: u64| self.layout.request(NodeId((j / agents) as u16), (j % agents) as u32);
        let (Some(&first), Some(&last)) = (boxes.first(), boxes.last()) else { return };
        let (lo, hi) = (box_at(first), box_at(last) + 16);
        let hi = baselines::watch_end(&self.layout, self.config.conflicts, last, hi);
        loop {
            let (mut served, mut requeued) = (false, false);
            for &j in &boxes {
                let from = NodeId((j / agents) as u16);
                let worker = (j % agents) as u32;
                let at = self.layout.request(from, worker);
                // The head word first: it lands after the argument (one QP, in order), so an
                // argument read after a new head is that message's. Read the other way round, a
                // NIC write landing between the two loads pairs the previous message's epoch
                // with the new head — on Soft-RoCE that served a `Take` meant for a later
                // holder and skipped an `Inval` (two exclusive owners, a stale shared copy).
                // Likewise before the ack slot: a `Done` lands before its sender's next head.
                let mut head = nic.local().load_acquire(at + 8);
                if let Some(page) = baselines::take_ack(&self, &nic, j) {
                    // Baselines: a requester's `Done` frees the page for the next request.
                    nic.cpu(Nanos(self.config.cpu.handler_ns)).await;
                    baselines::release(&self, page);
                    served = true;
                    head = nic.local().load_acquire(at + 8);
                }
                let Some(req) = Request::decode(nic.local().load(at), head) else {
                    continue;
                };
                nic.cpu(Nanos(self.config.cpu.handler_ns)).await;
                // The ablation: the handler looks the page(s) up in the translation table.
                if self.config.local.active() {
                    let lookups = if req.kind == Kind::Evict { req.page as usize } else { 1 };
                    let thread = self.layout.threads as u32 + index as u32;
                    self.charge_lines(&nic, thread, &vec![Touch::Lookup; lookups]).await;
                }
                if req.kind == Kind::Transferred {
                    // The ablation: acknowledge a finished transfer; no state changes.
                    nic.local().store(at + 8, 0);
                    served = true;
                    self.stats().messages += 1;
                    let (_, head) = Response::simple(Code::Ack, req.seq).encode();
                    let slot = RemoteAddr::new(from, self.layout.response(worker, me));
                    let ack = [Verb::WriteWord { remote: slot.add(8), value: head }];
                    if let Err(e) = post_all(&nic, &ack, "scalestore transfer ack").await {
                        self.errors.record(e);
                        return;
                    }
                    continue;
                }
                if req.kind == Kind::Evict {
                    nic.local().store(at + 8, 0);
                    self.serve_evictions(&nic, from, worker, req).await;
                    served = true;
                    continue;
                }
                let decision = {
                    let mut st = self.lock();
                    let d = match req.kind {
                        Kind::Own => {
                            let slot = (req.page % self.layout.pages_per_node) as usize;
                            // `own`, behind the baselines' gate when `conflicts` names one.
                            baselines::own_at_directory(
                                &self.gate,
                                &self.config,
                                &mut st,
                                me.0,
                                from.0,
                                j,
                                &req,
                                slot,
                                self.mutant(),
                                self.owed.as_ref(),
                            )
                        }
                        _ => baselines::holder_at(
                            self.config.conflicts,
                            &mut st,
                            me.0,
                            &req,
                            self.mutant(),
                            self.owed.as_ref(),
                        ),
                    };
                    if let Decision::Reply { from_ssd: true, .. } = &d {
                        note_ssd_read(&st, &self.layout, &self.stats, req.page, from.0);
                    }
                    if let (Decision::Reply { .. }, Some(f)) = (&d, st.frames[req.page as usize].as_mut()) {
                        // Served: local workers may latch the frame again.
                        f.wanted = false;
                    }
                    d
                };
                let Decision::Reply { mut response, page, pin, from_ssd } = decision else {
                    self.stats().requeues += 1;
                    requeued = true;
                    continue;
                };
                served = true;
                response.seq = req.seq;
                nic.local().store(at + 8, 0);
                let (arg, head) = response.encode();
                let slot = RemoteAddr::new(from, self.layout.response(worker, me));
                let mut verbs = Vec::with_capacity(3);
                let (frame, len_bytes) = (self.layout.frame(req.page), self.layout.page_bytes as u32);
                // A page read from the device goes through the request's staging page.
                let staging = self.layout.staging(from, worker);
                if page {
                    let local_bytes = if from_ssd { staging } else { frame };
                    verbs.push(Verb::Write { remote: RemoteAddr::new(from, frame), local_bytes, len_bytes });
                }
                if response.code == Code::Granted {
                    // Always: the slot's old argument belongs to an earlier response.
                    verbs.push(Verb::WriteWord { remote: slot, value: arg });
                }
                verbs.push(Verb::WriteWord { remote: slot.add(8), value: head });
                {
                    let mut s = self.stats();
                    s.messages += 1;
                    s.page_transfers += page as u64;
                }
                // Posted in the background: the page and then the response on one QP (R6).
                let (poster, node, g) = (nic.clone(), self.clone(), req.page);
                nic.spawn(async move {
                    if from_ssd {
                        let offset = node.layout.ssd_offset(g);
                        if let Err(e) = poster.ssd_read(offset, staging, len_bytes).await {
                            let me = node.me();
                            let at = poster.now();
                            node.errors.record(ProtocolError::message(
                                me,
                                at,
                                "SSDR",
                                me,
                                0,
                                "scalestore page",
                                e,
                            ));
                            return;
                        }
                        node.stats().ssd_reads += 1;
                    }
                    if let Err(e) = post_all(&poster, &verbs, "scalestore reply").await {
                        node.errors.record(e);
                    }
                    if pin {
                        // The page WRITE has read the frame (it completed before the response).
                        node.unpin(g);
                    }
                });
            }
            if self.errors.is_set() {
                return;
            }
            if served {
                continue;
            }
            if requeued {
                // A request waits for local state (a latched frame): sweep again after a poll.
                nic.sleep(Nanos(self.config.poll_ns)).await;
            } else if let Err(e) = nic.wait_write(lo, hi - lo, Nanos(self.config.poll_ns), None).await {
                // Idle: the next sweep that would find something is the first after a request
                // lands (only remote workers write mailboxes) — the same timing as sweeping
                // every `poll_ns`, without an event per sweep.
                let at = nic.now();
                self.errors.record(ProtocolError::message(
                    me,
                    at,
                    "POLL",
                    me,
                    0,
                    "scalestore mailbox wait",
                    e,
                ));
                return;
            }
        }
    }
}
