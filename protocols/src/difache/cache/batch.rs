//! Batched and nested accesses (§4.5; spec §3.8). A batched call runs its elements together
//! on the client's QP, each with its own scratch lane (`Layout::lane`): every network step of
//! every element — remote index lookups, retrievals, flushes, invalidations — is posted as soon
//! as the element reaches it, so a batch of k costs about one element's round trips, not k.
//! [CHOICE] Elements are not merged into one doorbell list per step: they diverge (hits, misses,
//! bypasses take different steps), and the paper does not say how it aligns them.
//!
//! A nested access names a span of an object: the index, the mode, owner tracking and
//! invalidation are the object's (the ancestor's); only the span is fetched or flushed. A read
//! miss still fetches and installs the whole object, so the cached copy is whole and later
//! nested reads of other spans hit ([CHOICE]: the paper retrieves "only the accessed object";
//! a partial install would need per-span validity the paper does not describe). A nested write
//! drops its own CN's copy instead of keeping it (spec §9.9 leaves partial writes open): other
//! spans may be written meanwhile under their own locks, so patching the copy and marking it
//! valid could revive bytes another writer's invalidation had just killed (mutant
//! `nested-write-keeps-copy`).

use std::sync::atomic::Ordering::Relaxed;

use crate::common::error::ProtocolResult;
use crate::nic::Nic;
use crate::sync::join_all;

use super::super::layout::HDR_VALID;
use super::super::mutants::Mutant;
use super::super::profit::Event;
use super::{Cache, Worker};

/// Bytes `off..off + len` of an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub off: u64,
    pub len: u64,
}

impl<N: Nic> Cache<N> {
    /// The worker of element `i` of a batched call by `w`: `w`'s QP, lane `i`'s buffers.
    pub fn lane(&self, w: &Worker<N>, i: usize) -> Worker<N> {
        Worker { nic: w.nic.clone(), thread: self.layout.lane(w.thread, i) }
    }

    /// Read every `(key, span)` with one batched call; element `i` lands in lane `i`'s
    /// application buffer (`Layout::app_buffer(Layout::lane(thread, i))`).
    pub async fn read_batch(&self, w: &Worker<N>, items: &[(u64, Span)]) -> ProtocolResult<Vec<Event>> {
        let lanes: Vec<Worker<N>> = (0..items.len()).map(|i| self.lane(w, i)).collect();
        let reads = items.iter().zip(&lanes).map(|(&(key, span), lane)| self.read_span(lane, key, span));
        join_all(reads.collect()).await.into_iter().collect()
    }

    /// Write every `(key, span)` from lane `i`'s application buffer with one batched call (the
    /// caller holds the application's locks on all of them).
    pub async fn write_batch(&self, w: &Worker<N>, items: &[(u64, Span)]) -> ProtocolResult<Vec<Event>> {
        let lanes: Vec<Worker<N>> = (0..items.len()).map(|i| self.lane(w, i)).collect();
        let writes = items.iter().zip(&lanes).map(|(&(key, span), lane)| self.write_span(lane, key, span));
        join_all(writes.collect()).await.into_iter().collect()
    }

    /// Read `span` of object `key` (nested: coherence is the whole object's).
    pub async fn read_nested(&self, w: &Worker<N>, key: u64, span: Span) -> ProtocolResult<Event> {
        self.read_span(w, key, span).await
    }

    /// Write `span` of object `key` (nested: the caller holds the span's lock).
    pub async fn write_nested(&self, w: &Worker<N>, key: u64, span: Span) -> ProtocolResult<Event> {
        self.write_span(w, key, span).await
    }

    /// A cached write of part of the object has flushed and invalidated: drop this CN's copy
    /// (a read miss in flight then does not install its older fetch: its ticket is gone).
    pub(super) async fn after_part_write(&self, w: &Worker<N>, hdr: u32, key: u64, span: Span) -> Event {
        if self.config.mutant == Mutant::NestedWriteKeepsCopy && self.load(hdr, HDR_VALID) != 0 {
            let app = self.layout.app_buffer(w.thread) + span.off;
            let to = self.layout.buffer(hdr) + span.off;
            self.nic.local().copy_from(to, self.nic.local(), app, span.len);
            w.nic.cpu(self.copy_ns_for(span.len)).await;
            let ticket = self.tickets.fetch_add(1, Relaxed);
            self.store(hdr, HDR_VALID, ticket);
            w.nic.mark("difache write install", key);
            return Event::WriteCached;
        }
        self.store(hdr, HDR_VALID, 0);
        Event::WriteCached
    }
}
