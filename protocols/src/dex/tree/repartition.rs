//! Logical repartitioning (DEX §4, Fig. 10): "the involved compute servers simply flush their
//! dirty cache pages to the memory pool and adjust the partitioning boundaries", no data moves.
//!
//! [CHOICE] (the paper does not say how in-flight operations drain or how routing switches,
//! spec §8 item 11) One thread of the old owner, at the first operation boundary after
//! `repartition.at_ns`:
//!
//! 1. **switches** its server's routing ([`MOVE_SWITCHED`]): operations that start from now on
//!    draw keys only in the range the server keeps, and nodes crossing the new boundary are
//!    *shared* (RDMA lock, three-READ reads) from their next install on;
//! 2. **drains**: waits until every operation that started before the switch has finished (a
//!    counter each client raises before it reads the switch, so no operation slips through);
//! 3. **flushes** the cached tree (every dirty page written back by this one thread, one WRITE
//!    after another, as the paper's single flushing thread), waits until no write-back or fetch
//!    overlapping the moving range is in flight, and drops the clean COOLING copies overlapping
//!    it (they carry the old shared marks);
//! 4. **hands over**: one 8-byte WRITE of the hand-off word on memory server 0 (on hardware the
//!    servers share no memory; a scale-out server READs the word every `repartition.poll_ns`
//!    until it is set, then starts with an empty cache).
//!
//! A receiver that owns a partition already (`repartition.to`) keeps serving it meanwhile; its
//! thread 0 READs the hand-off word between operations every `poll_ns` from `at_ns` on. Once
//! it is set, [CHOICE] the receiver flushes its cached tree and drops its COOLING copies
//! overlapping the moved range, as the old owner does, before it routes by the new map: a node
//! it cached inside the range (the right half of a boundary split it made, never routed to
//! since) may be stale, because the old owner changed it meanwhile.
//!
//! Invariant (`check.rs` 'repartition safety', the spec's invariant 13): once handed over, the
//! old owner caches nothing in the moved range but nodes that cross the boundary, all marked
//! shared, and no dirty page among them.

use std::sync::atomic::Ordering;

use super::*;
use crate::dex::cache::State;

/// The hand-off word's byte offset on memory server 0 (in the first 1 KB, before the frames;
/// the root pointer is at 0).
pub const HANDOFF_OFFSET: u64 = 8;

pub const MOVE_NONE: u8 = 0;
pub const MOVE_SWITCHED: u8 = 1;
pub const MOVE_DONE: u8 = 2;

impl<N: Nic> Client<N> {
    fn handoff_word(&self) -> RemoteAddr {
        RemoteAddr::new(self.shared.layout.memory_nodes[0], HANDOFF_OFFSET)
    }

    /// The old owner's side of the move (steps 1-4 above), run by one of its client threads
    /// between two of its operations.
    pub async fn repartition_out(&mut self) -> ProtocolResult<()> {
        let start = self.nic.now().0;
        self.shared.move_state.store(MOVE_SWITCHED, Ordering::SeqCst);
        let poll = Nanos(self.config().repartition.poll_ns.min(1_000));
        if self.mutant() != Mutant::RepartitionNoDrain {
            while self.shared.before_switch.load(Ordering::SeqCst) > 0 {
                self.nic.sleep(poll).await;
            }
        }
        let drained = self.nic.now().0;
        let writes_before = self.cur.writes;
        self.flush_all().await?;
        let (mid, hi) = self.shared.parts().moved_range().expect("a move is planned");
        self.drop_cooling(mid, hi).await;
        let flushed = self.cur.writes - writes_before;
        self.batch(&[Verb::WriteWord { remote: self.handoff_word(), value: 1 }], "hand the range over")
            .await?;
        self.shared.move_state.store(MOVE_DONE, Ordering::SeqCst);
        let end = self.nic.now().0;
        let mut k = self.shared.counters.lock().unwrap_or_else(|e| e.into_inner());
        k.insert("repartition_us".into(), (end - start) as f64 / 1e3);
        k.insert("repartition_drain_us".into(), (drained - start) as f64 / 1e3);
        k.insert("repartition_flushed_pages".into(), flushed as f64);
        k.insert("repartition_start_us".into(), start as f64 / 1e3);
        Ok(())
    }

    /// One READ of the hand-off word: has the old owner handed the range over?
    async fn handed_over(&mut self) -> ProtocolResult<bool> {
        let word = self.buf + 2 * NODE_BYTES;
        let read = Verb::Read { remote: self.handoff_word(), local_bytes: word, len_bytes: 8 };
        self.nic.try_batch(&[read], "read the hand-off word").await?;
        Ok(self.nic.local().load(word) != 0)
    }

    /// Drop every COOLING copy overlapping `[lo, hi)` once nothing there is in flight.
    async fn drop_cooling(&mut self, lo: u64, hi: u64) {
        loop {
            {
                let mut c = self.shared.cache();
                if c.quiet(lo, hi) {
                    let stale: Vec<FrameId> = (0..c.frames.len())
                        .filter(|f| {
                            let fr = &c.frames[*f];
                            fr.state == State::Cooling && fr.node.lowest < hi && fr.node.highest > lo
                        })
                        .collect();
                    for f in stale {
                        let freed = c.release(f);
                        c.pool.push(freed);
                    }
                    return;
                }
            }
            self.backoff().await;
        }
    }

    /// A receiver with a partition of its own, between two of its operations: `true` once the
    /// range is handed over and this server routes by the new map (see the module comment).
    pub async fn receive_range(&mut self) -> ProtocolResult<bool> {
        let seen = self.nic.now().0;
        if self.mutant() != Mutant::ReceiverSkipsHandoff {
            if !self.handed_over().await? {
                return Ok(false);
            }
            let (mid, hi) = self.shared.parts().moved_range().expect("a move is planned");
            let writes_before = self.cur.writes;
            self.flush_all().await?;
            self.drop_cooling(mid, hi).await;
            let mut k = self.shared.counters.lock().unwrap_or_else(|e| e.into_inner());
            k.insert("repartition_receiver_flushed_pages".into(), (self.cur.writes - writes_before) as f64);
        }
        self.shared.move_state.store(MOVE_DONE, Ordering::SeqCst);
        let end = self.nic.now().0;
        let mut k = self.shared.counters.lock().unwrap_or_else(|e| e.into_inner());
        k.insert("repartition_receive_us".into(), (end - seen) as f64 / 1e3);
        k.insert("repartition_received_at_us".into(), end as f64 / 1e3);
        Ok(true)
    }

    /// The scale-out server's side: wait for the hand-off word, then route by the new map.
    pub async fn wait_for_range(&mut self) -> ProtocolResult<()> {
        let poll = Nanos(self.config().repartition.poll_ns);
        while !self.handed_over().await? {
            self.nic.sleep(poll).await;
        }
        self.shared.move_state.store(MOVE_DONE, Ordering::SeqCst);
        Ok(())
    }
}
