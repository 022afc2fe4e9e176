//! The home directory (GAM-style, served by memory-node CPU): per block, who holds it, and the
//! one transaction in flight for it.
//!
//! Rules (the spec is silent on GAM internals, B13 [GAP]; these follow the classic
//! home-based MSI directory GAM describes):
//! * **One transaction per block.** A request that finds its block busy (waiting for acks) is
//!   queued behind it and served, in arrival order, when the transaction completes. The home is
//!   therefore the serialization point of every block; no two grants for a block overlap.
//! * **Read** of an uncached or shared block: add the requester to the sharers, reply with the
//!   data. Of an exclusive block: Recall(downgrade) to the owner, whose Ack brings the data;
//!   memory is updated, owner and requester become sharers, the requester gets the data.
//! * **Write**: Invalidate every other sharer (or Recall the owner); after the last Ack, the
//!   requester becomes the owner and gets the data — without data if it still holds a Shared
//!   copy the directory knows of (an upgrade).
//! * **WriteBack** from the owner: memory takes the data, the block becomes uncached. From a node
//!   that is no longer the owner (a Recall overtook its eviction) it is stale and ignored.
//! * [CHOICE] Owner data goes back through the home (owner → home → requester, 4 one-way
//!   messages) instead of GAM's direct owner → requester forward (3): one more hop, but the home
//!   never has to reconcile a forward with a racing write-back.
//! * [CHOICE] Shared copies are evicted silently; a later Invalidate to a node that no longer
//!   holds the block is simply acked.
//!
//! The transitions are synchronous functions ([`Directory::on_message`]); the async shell
//! [`Home`] is an [`rpc::Handler`]: the RPC server loop receives and charges CPU, the handler
//! applies the transition and sends what it returns. A request's [`ReplyTo`] waits in the
//! directory until its transaction completes. A handler task whose send fails records the error
//! ([`Directory::first_error`]) and stops.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::common::error::{ErrorSlot, ProtocolError, ProtocolResult};
use crate::common::rpc::{self, Incoming, ReplyTo};
use crate::memory::Region;
use crate::nic::{Nanos, Nic, NodeId};

use super::config::Config;
use super::layout::Layout;
use super::message::{Grant, Msg, RequestKind, HOME_PORT, INV_PORT};
use super::mutants::Mutant;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirEntry {
    /// Compute indexes with a Shared copy (possibly stale: silent evictions).
    pub sharers: u64,
    /// The compute index with the Exclusive copy; then `sharers == 0`.
    pub owner: Option<u8>,
}

#[derive(Clone, Debug)]
struct Request {
    requester: u8,
    kind: RequestKind,
    reply_to: ReplyTo,
    data: Option<Vec<u64>>,
}

#[derive(Clone, Debug)]
struct Pending {
    request: Request,
    /// Compute indexes whose Ack is still due.
    waiting: u64,
    invalidations: u32,
    /// Set for a read that recalls the owner: it stays a sharer.
    downgraded_owner: Option<u8>,
    /// The requester's Shared copy is known to the directory (an upgrade: no data needed).
    requester_has_copy: bool,
}

/// One message to send: the answer to a request, or a one-way message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outgoing {
    Reply { to: ReplyTo, msg: Msg },
    Notify { to: NodeId, port: u16, msg: Msg },
}

impl Outgoing {
    pub fn to(&self) -> NodeId {
        match self {
            Outgoing::Reply { to, .. } => to.node,
            Outgoing::Notify { to, .. } => *to,
        }
    }

    pub fn msg(&self) -> &Msg {
        match self {
            Outgoing::Reply { msg, .. } | Outgoing::Notify { msg, .. } => msg,
        }
    }
}

/// What serving one message produced: messages, and the work to charge for it.
#[derive(Debug, Default)]
pub struct Effects {
    pub out: Vec<Outgoing>,
    /// Messages served (the received one plus queued requests it released).
    pub served: u32,
    /// Block words copied between memory and messages.
    pub copied_words: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HomeStats {
    pub requests: u64,
    pub acks: u64,
    pub invalidations_sent: u64,
    pub recalls_sent: u64,
    /// Requests that met a busy block and waited in its queue.
    pub queued: u64,
    pub writebacks: u64,
    pub writebacks_stale: u64,
    pub replies: u64,
}

impl HomeStats {
    pub fn merge(&mut self, o: &HomeStats) {
        self.requests += o.requests;
        self.acks += o.acks;
        self.invalidations_sent += o.invalidations_sent;
        self.recalls_sent += o.recalls_sent;
        self.queued += o.queued;
        self.writebacks += o.writebacks;
        self.writebacks_stale += o.writebacks_stale;
        self.replies += o.replies;
    }
}

/// One memory node's directory.
pub struct Directory {
    pub home: NodeId,
    layout: Layout,
    entries: Vec<DirEntry>,
    pending: BTreeMap<u64, Pending>,
    queued: BTreeMap<u64, VecDeque<Request>>,
    pub stats: HomeStats,
    errors: ErrorSlot,
    /// A planted bug ([`super::mutants`]); `None` in every real run.
    pub mutant: Mutant,
}

fn bit(index: u8) -> u64 {
    1u64 << index
}

fn bits(set: u64) -> impl Iterator<Item = u8> {
    (0..64u8).filter(move |i| set & bit(*i) != 0)
}

impl Directory {
    pub fn new(home: NodeId, layout: Layout) -> Directory {
        assert!(layout.memory_nodes.contains(&home), "{home} is not a memory node");
        let entries = vec![DirEntry::default(); layout.blocks_per_home() as usize];
        Directory {
            home,
            layout,
            entries,
            pending: BTreeMap::new(),
            queued: BTreeMap::new(),
            stats: HomeStats::default(),
            errors: ErrorSlot::new(),
            mutant: Mutant::None,
        }
    }

    /// The first error one of this home's handler tasks hit (each stops at its first).
    pub fn first_error(&self) -> Option<ProtocolError> {
        self.errors.first()
    }

    pub fn entry(&self, block: u64) -> DirEntry {
        assert_eq!(self.layout.home(block), self.home, "block {block} lives elsewhere");
        self.entries[self.layout.home_slot(block)]
    }

    pub fn is_busy(&self, block: u64) -> bool {
        self.pending.contains_key(&block)
    }

    /// True when no transaction is in flight and nothing is queued.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.queued.values().all(VecDeque::is_empty)
    }

    /// Serve one message (a request with its reply address, or an ack); `memory` is this
    /// node's region.
    pub fn on_message(&mut self, incoming: Incoming<Msg>, memory: &Region) -> Effects {
        let mut fx = Effects { served: 1, ..Effects::default() };
        let Incoming { from, reply_to, msg } = incoming;
        let index = self.layout.compute_index(from);
        let block = msg.block();
        assert_eq!(self.layout.home(block), self.home, "block {block} sent to the wrong home");
        match msg {
            Msg::Request { kind, data, .. } => {
                self.stats.requests += 1;
                let reply_to = reply_to.expect("a request is a call, not a notification");
                let request = Request { requester: index, kind, reply_to, data };
                if self.pending.contains_key(&block) {
                    self.stats.queued += 1;
                    self.queued.entry(block).or_default().push_back(request);
                } else {
                    self.start(block, request, memory, &mut fx);
                }
            }
            Msg::Ack { data, .. } => {
                self.stats.acks += 1;
                let pending = self.pending.get_mut(&block).expect("an Ack for a block with no transaction");
                assert!(
                    pending.waiting & bit(index) != 0,
                    "unexpected Ack from compute {index} for block {block}"
                );
                pending.waiting &= !bit(index);
                if let Some(words) = data.filter(|_| self.mutant != Mutant::RecallDataDropped) {
                    // The (former) owner's copy is the latest: memory takes it.
                    assert_eq!(words.len(), self.layout.words_per_block());
                    memory.write_words(self.layout.home_offset(block), &words);
                    fx.copied_words += words.len() as u64;
                }
                if pending.waiting == 0 {
                    let done = self.pending.remove(&block).unwrap();
                    self.complete(block, done, memory, &mut fx);
                    self.drain_queue(block, memory, &mut fx);
                }
            }
            other => panic!("a home received {other:?}"),
        }
        fx
    }

    /// Serve queued requests of `block` until one starts a transaction or none is left.
    fn drain_queue(&mut self, block: u64, memory: &Region, fx: &mut Effects) {
        while !self.pending.contains_key(&block) {
            let Some(queue) = self.queued.get_mut(&block) else { return };
            let Some(request) = queue.pop_front() else {
                self.queued.remove(&block);
                return;
            };
            fx.served += 1;
            self.start(block, request, memory, fx);
        }
    }

    fn read_block(&self, block: u64, memory: &Region, fx: &mut Effects) -> Vec<u64> {
        let mut words = vec![0; self.layout.words_per_block()];
        memory.read_words(self.layout.home_offset(block), &mut words);
        fx.copied_words += words.len() as u64;
        words
    }

    fn reply(
        &mut self,
        r: &Request,
        block: u64,
        grant: Grant,
        invalidations: u32,
        data: Option<Vec<u64>>,
        fx: &mut Effects,
    ) {
        self.stats.replies += 1;
        debug_assert_eq!(r.reply_to.node, self.layout.compute_node(r.requester));
        fx.out
            .push(Outgoing::Reply { to: r.reply_to, msg: Msg::Reply { block, grant, invalidations, data } });
    }

    fn start(&mut self, block: u64, request: Request, memory: &Region, fx: &mut Effects) {
        let slot = self.layout.home_slot(block);
        let entry = self.entries[slot];
        let r = request.requester;
        match request.kind {
            RequestKind::Read => match entry.owner.filter(|_| self.mutant != Mutant::ReadIgnoresOwner) {
                None => {
                    self.entries[slot].sharers |= bit(r);
                    let data = self.read_block(block, memory, fx);
                    self.reply(&request, block, Grant::Shared, 0, Some(data), fx);
                }
                Some(owner) => {
                    assert_ne!(owner, r, "compute {r} read-misses a block the directory says it owns");
                    self.recall(block, owner, true, fx);
                    let pending = Pending {
                        request,
                        waiting: bit(owner),
                        invalidations: 1,
                        downgraded_owner: Some(owner),
                        requester_has_copy: false,
                    };
                    self.pending.insert(block, pending);
                }
            },
            RequestKind::Write { have_copy } => {
                let requester_has_copy = have_copy && entry.sharers & bit(r) != 0;
                match entry.owner {
                    None => {
                        let others = entry.sharers & !bit(r);
                        if others == 0 || self.mutant == Mutant::GrantWithoutInvalidate {
                            self.entries[slot] = DirEntry { sharers: 0, owner: Some(r) };
                            let data = (!requester_has_copy).then(|| self.read_block(block, memory, fx));
                            self.reply(&request, block, Grant::Exclusive, 0, data, fx);
                        } else {
                            let count = others.count_ones();
                            for s in bits(others) {
                                self.stats.invalidations_sent += 1;
                                fx.out.push(Outgoing::Notify {
                                    to: self.layout.compute_node(s),
                                    port: INV_PORT,
                                    msg: Msg::Invalidate { block },
                                });
                            }
                            let pending = Pending {
                                request,
                                waiting: others,
                                invalidations: count,
                                downgraded_owner: None,
                                requester_has_copy,
                            };
                            self.pending.insert(block, pending);
                        }
                    }
                    Some(owner) => {
                        assert_ne!(owner, r, "compute {r} write-misses a block the directory says it owns");
                        self.recall(block, owner, false, fx);
                        let pending = Pending {
                            request,
                            waiting: bit(owner),
                            invalidations: 1,
                            downgraded_owner: None,
                            requester_has_copy: false,
                        };
                        self.pending.insert(block, pending);
                    }
                }
            }
            RequestKind::WriteBack => {
                self.stats.writebacks += 1;
                if entry.owner == Some(r) {
                    let words = request.data.as_ref().expect("a write-back carries data");
                    assert_eq!(words.len(), self.layout.words_per_block());
                    if self.mutant != Mutant::WriteBackIgnored {
                        memory.write_words(self.layout.home_offset(block), words);
                    }
                    fx.copied_words += words.len() as u64;
                    self.entries[slot] = DirEntry::default();
                } else {
                    // A Recall overtook this eviction and already took the data.
                    self.stats.writebacks_stale += 1;
                }
                fx.out.push(Outgoing::Reply { to: request.reply_to, msg: Msg::WriteBackDone { block } });
            }
        }
    }

    fn recall(&mut self, block: u64, owner: u8, downgrade: bool, fx: &mut Effects) {
        self.stats.recalls_sent += 1;
        fx.out.push(Outgoing::Notify {
            to: self.layout.compute_node(owner),
            port: INV_PORT,
            msg: Msg::Recall { block, downgrade },
        });
    }

    /// The last Ack arrived: grant.
    fn complete(&mut self, block: u64, done: Pending, memory: &Region, fx: &mut Effects) {
        let slot = self.layout.home_slot(block);
        let r = done.request.requester;
        match done.request.kind {
            RequestKind::Read => {
                let owner = done.downgraded_owner.expect("a read waits only for a recall");
                let kept = if self.mutant == Mutant::DowngradedOwnerForgotten { 0 } else { bit(owner) };
                self.entries[slot] = DirEntry { sharers: bit(r) | kept, owner: None };
                let data = self.read_block(block, memory, fx);
                self.reply(&done.request, block, Grant::Shared, done.invalidations, Some(data), fx);
            }
            RequestKind::Write { .. } => {
                self.entries[slot] = DirEntry { sharers: 0, owner: Some(r) };
                let data = (!done.requester_has_copy).then(|| self.read_block(block, memory, fx));
                self.reply(&done.request, block, Grant::Exclusive, done.invalidations, data, fx);
            }
            RequestKind::WriteBack => unreachable!("write-backs never wait"),
        }
    }
}

/// The home's message handler: GAM's directory served by memory-node CPU (§8.4 [P]). The
/// service time is charged before the transition ([`rpc::Handler::cost`]: the transition
/// happens when the handler has done its work); queued requests the message released, and
/// block data copied out, cost extra after it. Several handler tasks may share one directory;
/// with one core they queue for it — GAM's serialized request queue.
pub struct Home {
    pub directory: Arc<Mutex<Directory>>,
    config: Config,
}

impl Home {
    pub fn new(directory: Arc<Mutex<Directory>>, config: Config) -> Home {
        Home { directory, config }
    }

    fn copy_ns(&self, words: u64) -> u64 {
        words * 8 * self.config.cpu.handler_copy_ns_per_kib / 1024
    }
}

impl<N: Nic> rpc::Handler<N> for Home {
    type Msg = Msg;

    fn cost(&self, incoming: &Incoming<Msg>) -> Option<Nanos> {
        Some(Nanos(self.config.cpu.handler_service_ns + self.copy_ns(incoming.msg.data_words() as u64)))
    }

    async fn handle(&self, nic: &N, incoming: Incoming<Msg>) -> ProtocolResult<()> {
        let fx = self.directory.lock().unwrap().on_message(incoming, nic.local());
        let extra =
            (fx.served as u64 - 1) * self.config.cpu.handler_service_ns + self.copy_ns(fx.copied_words);
        if extra > 0 {
            nic.cpu(Nanos(extra)).await;
        }
        for o in fx.out {
            match o {
                Outgoing::Reply { to, msg } => rpc::reply(nic, to, &msg).await?,
                Outgoing::Notify { to, port, msg } => rpc::notify(nic, to, port, &msg).await?,
            }
        }
        Ok(())
    }

    fn failed(&self, error: ProtocolError) {
        self.directory.lock().unwrap_or_else(|e| e.into_inner()).errors.record(error);
    }
}

/// One directory handler task on a memory node (see [`Home`]).
pub async fn run_home<N: Nic>(nic: N, directory: Arc<Mutex<Directory>>, config: Config) {
    rpc::serve_one(nic, HOME_PORT, Arc::new(Home::new(directory, config))).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::{Cluster, NodeKind};

    /// One memory node (n0), three compute nodes (n1..n3), 2 blocks of 16 bytes.
    fn directory() -> (Directory, Region) {
        let cluster = Cluster {
            kinds: vec![NodeKind::Memory, NodeKind::Compute, NodeKind::Compute, NodeKind::Compute],
            region_size_bytes: vec![0; 4],
        };
        let layout = Layout::new(&cluster, 16, 2, 8);
        let memory = Region::new(layout.memory_region_bytes());
        (Directory::new(NodeId(0), layout), memory)
    }

    /// Node `node`'s request number `id` (replies to its port 100).
    fn request(node: u16, kind: RequestKind, id: u32) -> Incoming<Msg> {
        let reply_to = Some(ReplyTo { node: NodeId(node), port: 100, id });
        Incoming { from: NodeId(node), reply_to, msg: Msg::Request { block: 1, kind, data: None } }
    }

    fn ack(node: u16, data: Option<Vec<u64>>) -> Incoming<Msg> {
        Incoming { from: NodeId(node), reply_to: None, msg: Msg::Ack { block: 1, data } }
    }

    #[test]
    fn write_invalidates_sharers_then_grants_after_the_last_ack() {
        // Goal: the §8.4 directory flow — two readers share, a writer waits for both acks, a
        // request arriving meanwhile queues and is served after.
        let (mut d, mem) = directory();
        mem.write_words(16, &[5, 6]);
        for (node, id) in [(1, 1), (2, 2)] {
            let fx = d.on_message(request(node, RequestKind::Read, id), &mem);
            assert!(
                matches!(fx.out[0].msg(), Msg::Reply { grant: Grant::Shared, data: Some(w), .. } if w == &vec![5, 6])
            );
            assert!(matches!(fx.out[0], Outgoing::Reply { to: ReplyTo { id: i, .. }, .. } if i == id));
        }
        assert_eq!(d.entry(1).sharers, 0b011);
        let fx = d.on_message(request(3, RequestKind::Write { have_copy: false }, 3), &mem);
        let targets: Vec<_> = fx.out.iter().map(|o| (o.to(), o.msg().clone())).collect();
        assert_eq!(
            targets,
            vec![(NodeId(1), Msg::Invalidate { block: 1 }), (NodeId(2), Msg::Invalidate { block: 1 })]
        );
        assert!(d.is_busy(1));
        let fx = d.on_message(request(1, RequestKind::Read, 4), &mem);
        assert!(fx.out.is_empty(), "a request behind a busy block waits");
        assert!(d.on_message(ack(1, None), &mem).out.is_empty());
        let fx = d.on_message(ack(2, None), &mem);
        // Grant to the writer, then the queued read recalls it at once.
        assert!(matches!(fx.out[0].msg(), Msg::Reply { grant: Grant::Exclusive, invalidations: 2, .. }));
        assert_eq!(fx.out[0].to(), NodeId(3));
        assert_eq!(
            fx.out[1],
            Outgoing::Notify {
                to: NodeId(3),
                port: INV_PORT,
                msg: Msg::Recall { block: 1, downgrade: true }
            }
        );
        assert_eq!(fx.served, 2);
        let fx = d.on_message(ack(3, Some(vec![7, 8])), &mem);
        assert!(
            matches!(fx.out[0].msg(), Msg::Reply { grant: Grant::Shared, data: Some(w), .. } if w == &vec![7, 8])
        );
        assert!(
            matches!(fx.out[0], Outgoing::Reply { to: ReplyTo { id: 4, .. }, .. }),
            "the queued read's id"
        );
        assert_eq!(d.entry(1), DirEntry { sharers: 0b101, owner: None });
        assert!(d.is_idle());
    }

    #[test]
    fn upgrade_without_data_and_stale_writeback() {
        let (mut d, mem) = directory();
        d.on_message(request(1, RequestKind::Read, 1), &mem);
        let fx = d.on_message(request(1, RequestKind::Write { have_copy: true }, 2), &mem);
        assert!(matches!(fx.out[0].msg(), Msg::Reply { grant: Grant::Exclusive, data: None, .. }));
        // A recall overtakes the owner's eviction: the write-back is then stale.
        let fx = d.on_message(request(2, RequestKind::Write { have_copy: false }, 3), &mem);
        assert_eq!(fx.out[0].msg(), &Msg::Recall { block: 1, downgrade: false });
        let mut wb = request(1, RequestKind::WriteBack, 4);
        wb.msg = Msg::Request { block: 1, kind: RequestKind::WriteBack, data: Some(vec![1, 1]) };
        assert!(d.on_message(wb, &mem).out.is_empty(), "queued behind the recall");
        let fx = d.on_message(ack(1, Some(vec![9, 9])), &mem);
        assert!(
            matches!(fx.out[0].msg(), Msg::Reply { grant: Grant::Exclusive, data: Some(w), .. } if w == &vec![9, 9])
        );
        assert_eq!(
            fx.out[1],
            Outgoing::Reply {
                to: ReplyTo { node: NodeId(1), port: 100, id: 4 },
                msg: Msg::WriteBackDone { block: 1 }
            }
        );
        assert_eq!(d.stats.writebacks_stale, 1);
        let mut words = [0; 2];
        mem.read_words(16, &mut words);
        assert_eq!(words, [9, 9], "the stale write-back did not overwrite the recalled data");
        assert_eq!(d.entry(1).owner, Some(1));
    }
}
