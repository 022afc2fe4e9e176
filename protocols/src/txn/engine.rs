//! The three concurrency-control engines over heap pages (SELCC §6.4): one [`Txn`] per attempt,
//! its reads and writes through [`Engine`], which holds the thread's B-link tree (the index) and
//! its page handle.
//!
//! * **2PL no-wait** over SELCC: the locks *are* SELCC latches, as the paper's ("2PL … uses
//!   SELCC latches as locks"): a read takes the page's S latch, a read-for-update its X latch,
//!   with SELCC's try-latch (`TrySELCC_*_Lock`), and holds it to commit; a latch another
//!   transaction holds (here or on another node) fails the try and the transaction aborts
//!   (no-wait), so nothing can deadlock. Writes are buffered and installed at commit through the
//!   held X latches, then every latch is released (strict 2PL). Over SEL, whose per-thread
//!   buffer holds one page, the locks are the page's CC words instead ([`super::heap`]), each
//!   access one short latch section.
//!
//! TO and OCC keep their state in the page's CC words, each access one short latch section, so
//! a conflict is seen at once and the transaction aborts:
//!
//! * **TO**: a timestamp by FAA at begin; every access X-latches the page for one short section
//!   (as the authors' `TxnManagerTo.cpp`, which takes `SELCC_Exclusive_Lock` for reads too) and
//!   works on the *tuple's* timestamps ([`super::heap::TO_WORDS`]): a read checks the tuple's
//!   write timestamp and raises its read timestamp (a read is a write of the GCL, hence
//!   invalidations); a read-for-update also checks the read timestamp and marks the tuple with
//!   a pending write, which others abort on; commit installs the writes and sets each tuple's
//!   write timestamp.
//! * **OCC**: reads under S latches remember each page's version; commit write-locks the write
//!   set's pages, takes a commit timestamp by FAA, validates every read page's version under an
//!   S latch (the second latch per page the paper counts), then installs and bumps versions.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::heap::{per_page, stored_width, TupleRef, CC, WTS, X_BIT};
use super::mutants::Mutant;
use super::pages::TxnPages;
use super::wal::Wal;
use crate::blink::tree::Tree;
use crate::blink::{Latch, PageId, Pages};
use crate::common::error::{ProtocolError, ProtocolResult};
use crate::nic::RemoteAddr;

/// The concurrency control a run uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Cc {
    #[default]
    #[serde(rename = "2pl")]
    TwoPl,
    #[serde(rename = "to")]
    To,
    #[serde(rename = "occ")]
    Occ,
}

/// Why an attempt stopped: a conflict (retry) or a protocol error (stop the client).
#[derive(Debug)]
pub enum Fail {
    Abort(&'static str),
    Error(ProtocolError),
}

impl From<ProtocolError> for Fail {
    fn from(e: ProtocolError) -> Fail {
        Fail::Error(e)
    }
}

pub type TxnResult<T> = Result<T, Fail>;

/// What a transaction holds on a page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PageHold {
    /// 2PL: S lock; TO: nothing; OCC: nothing.
    shared: bool,
    /// 2PL: X lock; TO: pending-write mark; OCC: write lock (commit only).
    exclusive: bool,
    /// OCC: the page version its first read saw.
    version: Option<u64>,
}

/// A committed transaction's accesses for the serializability checker: (tuple, version read)
/// and (tuple, version installed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRecord {
    pub id: u64,
    pub reads: Vec<(u64, u64)>,
    pub writes: Vec<(u64, u64)>,
}

/// One attempt of one transaction; `G` is a held page latch.
pub struct Txn<G> {
    pub ts: u64,
    owner: u64,
    pages: BTreeMap<PageId, PageHold>,
    /// 2PL over SELCC: the latches held to commit.
    latches: BTreeMap<PageId, G>,
    /// `ignore-lock-conflict` over SELCC: pages written without their latch.
    unlatched: Vec<PageId>,
    /// Tuples read (image with the version word), and their widths.
    reads: BTreeMap<TupleRef, (usize, Vec<u64>)>,
    writes: BTreeMap<TupleRef, (usize, Vec<u64>)>,
    /// Tuples to insert at commit: (table, index keys, width, fields).
    inserts: Vec<(usize, Vec<u64>, usize, Vec<u64>)>,
    /// TO: tuples this attempt marked pending, with their width and the write timestamp the
    /// mark replaced (restored if the attempt aborts or leaves the tuple unwritten).
    marked: BTreeMap<TupleRef, (usize, u64)>,
    /// Index entries to delete at commit (overwritten with a tombstone).
    deletes: Vec<u64>,
}

/// The per-thread engine: the tree (index, and the page handle beneath it), the CC, and where
/// this thread appends inserted tuples (one open page per table).
pub struct Engine<P: Pages> {
    pub tree: Tree<P>,
    pub cc: Cc,
    pub mutant: Mutant,
    pub timestamps: RemoteAddr,
    /// This thread's cluster-wide id + 1 (lock owners are never 0).
    pub owner: u64,
    open: BTreeMap<usize, (PageId, usize)>,
    /// `timestamp-reused`: the thread's private counter.
    local_ts: u64,
    pub latch_sections: u64,
    /// NewOrder adds each order to the customer-order index (the workload's switch).
    pub customer_order_index: bool,
    /// NewOrder reads its home warehouse's copy of ITEM (the workload's switch).
    pub replicated_items: bool,
    /// Words per tuple of each table (the workload's WAREHOUSE padding included).
    pub widths: [usize; super::tpcc::TABLES],
    /// The node's write-ahead log (Fig. 19b), if logging.
    pub wal: Option<Arc<Wal>>,
    /// Partitioned SELCC: the 2PC server threads per node (0: fully shared).
    pub servers: u32,
}

impl<P: TxnPages> Engine<P> {
    pub fn new(tree: Tree<P>, cc: Cc, mutant: Mutant, timestamps: RemoteAddr, owner: u64) -> Engine<P> {
        Engine {
            tree,
            cc,
            mutant,
            timestamps,
            owner,
            open: BTreeMap::new(),
            local_ts: 0,
            latch_sections: 0,
            customer_order_index: true,
            replicated_items: false,
            widths: super::tpcc::WIDTH,
            wal: None,
            servers: 0,
        }
    }

    /// Log a record of `bytes` and wait until it is durable (nothing without a log).
    pub async fn log(&mut self, bytes: u64) -> ProtocolResult<()> {
        match self.wal.clone() {
            Some(wal) => self.tree.pages.log(&wal, bytes).await,
            None => Ok(()),
        }
    }

    async fn timestamp(&mut self) -> TxnResult<u64> {
        if self.mutant == Mutant::TimestampReused {
            self.local_ts += 1;
            return Ok(self.local_ts);
        }
        Ok(self.tree.pages.faa(self.timestamps, 1).await? + 1)
    }

    pub async fn begin(&mut self) -> TxnResult<Txn<P::Guard>> {
        let ts = if self.cc == Cc::To { self.timestamp().await? } else { 0 };
        Ok(Txn {
            ts,
            owner: self.owner,
            pages: BTreeMap::new(),
            latches: BTreeMap::new(),
            unlatched: Vec::new(),
            reads: BTreeMap::new(),
            writes: BTreeMap::new(),
            inserts: Vec::new(),
            deletes: Vec::new(),
            marked: BTreeMap::new(),
        })
    }

    /// The tuple the index maps `key` to.
    pub async fn locate(&mut self, key: u64) -> TxnResult<TupleRef> {
        let v = self.tree.lookup(key).await?;
        assert!(v != 0, "TPC-C: index key {key:#x} of a loaded tuple is missing");
        Ok(TupleRef(v))
    }

    /// 2PL holds SELCC latches to commit (else its locks are CC words).
    fn latched(&self) -> bool {
        self.cc == Cc::TwoPl && self.tree.pages.holds_latches()
    }

    async fn lock(&mut self, page: PageId, mode: Latch) -> TxnResult<P::Guard> {
        self.latch_sections += 1;
        Ok(self.tree.pages.lock(page, mode).await?)
    }

    fn word(&self, g: &P::Guard, at: usize) -> u64 {
        let mut w = [0u64];
        self.tree.pages.read(g, at, &mut w);
        w[0]
    }

    /// The words a tuple of `width` occupies in its page (TO adds its timestamps).
    fn stored(&self, width: usize) -> usize {
        stored_width(self.cc, width)
    }

    fn tuple(&self, g: &P::Guard, t: TupleRef, width: usize) -> Vec<u64> {
        let mut out = vec![0u64; width];
        self.tree.pages.read(g, t.word(self.stored(width)), &mut out);
        out
    }

    /// The tuple's image (word 0 its version), read-locked, or write-locked when `for_update`.
    pub async fn read(
        &mut self,
        x: &mut Txn<P::Guard>,
        t: TupleRef,
        width: usize,
        for_update: bool,
    ) -> TxnResult<Vec<u64>> {
        if let Some((_, w)) = x.writes.get(&t) {
            return Ok(w.clone());
        }
        let page = t.page();
        let hold = x.pages.get(&page).copied().unwrap_or_default();
        // TO marks tuples, not pages: a tuple read before is write-ready only if it was marked.
        let ready = if self.cc == Cc::To { x.marked.contains_key(&t) } else { hold.exclusive };
        if let Some((_, r)) = x.reads.get(&t) {
            if !for_update || ready || self.cc == Cc::Occ {
                return Ok(r.clone());
            }
        }
        let image = match self.cc {
            Cc::TwoPl if self.latched() => self.read_latched(x, t, width, for_update, hold).await?,
            Cc::TwoPl => self.read_2pl(x, t, width, for_update, hold).await?,
            Cc::To => self.read_to(x, t, width, for_update).await?,
            Cc::Occ => self.read_occ(x, t, width, hold).await?,
        };
        x.reads.entry(t).or_insert((width, image.clone()));
        Ok(image)
    }

    /// 2PL no-wait over SELCC latches held to commit.
    async fn read_latched(
        &mut self,
        x: &mut Txn<P::Guard>,
        t: TupleRef,
        width: usize,
        for_update: bool,
        hold: PageHold,
    ) -> TxnResult<Vec<u64>> {
        let page = t.page();
        if hold.exclusive || (hold.shared && !for_update) {
            if let Some(g) = x.latches.get(&page) {
                return Ok(self.tuple(g, t, width));
            }
        }
        // A write needs X on a page this transaction holds S on: give S back and try X, then
        // check that the page's tuples it read are unchanged — as if S had been held (TPC-C
        // never does it: a transaction reads a table or updates it).
        let upgrading = hold.shared && for_update;
        if upgrading {
            if let Some(g) = x.latches.remove(&page) {
                self.tree.pages.unlock(g).await?;
            }
            x.pages.entry(page).or_default().shared = false;
        }
        let mode = if for_update { Latch::X } else { Latch::S };
        self.latch_sections += 1;
        let Some(g) = self.tree.pages.try_lock(page, mode).await? else {
            if self.mutant == Mutant::IgnoreLockConflict {
                // Planted bug: go on without the lock — read in a short section, install the
                // write (if any) at commit in another.
                let g = self.lock(page, Latch::S).await?;
                let image = self.tuple(&g, t, width);
                self.tree.pages.unlock(g).await?;
                if for_update {
                    x.unlatched.push(page);
                    x.pages.entry(page).or_default().exclusive = true;
                }
                return Ok(image);
            }
            return Err(Fail::Abort("2PL: latch held by another transaction"));
        };
        let image = self.tuple(&g, t, width);
        if upgrading {
            let changed = x
                .reads
                .iter()
                .filter(|(r, _)| r.page() == page)
                .any(|(r, (w, seen))| self.tuple(&g, *r, *w) != *seen);
            if changed {
                self.tree.pages.unlock(g).await?;
                return Err(Fail::Abort("2PL: page changed during an upgrade"));
            }
        }
        if self.mutant == Mutant::EarlyReleaseShared && !for_update {
            // Planted bug: the S latch given back right after the read.
            self.tree.pages.unlock(g).await?;
            return Ok(image);
        }
        x.latches.insert(page, g);
        let h = x.pages.entry(page).or_default();
        if for_update {
            h.exclusive = true;
        } else {
            h.shared = true;
        }
        Ok(image)
    }

    async fn read_2pl(
        &mut self,
        x: &mut Txn<P::Guard>,
        t: TupleRef,
        width: usize,
        for_update: bool,
        hold: PageHold,
    ) -> TxnResult<Vec<u64>> {
        let page = t.page();
        if hold.exclusive || (hold.shared && !for_update) {
            let g = self.lock(page, Latch::S).await?;
            let image = self.tuple(&g, t, width);
            self.tree.pages.unlock(g).await?;
            return Ok(image);
        }
        let mut g = self.lock(page, Latch::X).await?;
        let cc = self.word(&g, CC);
        let ignore = self.mutant == Mutant::IgnoreLockConflict;
        let granted = if for_update {
            let free = if hold.shared { cc == 1 } else { cc == 0 };
            (free || ignore).then_some(X_BIT | x.owner)
        } else {
            (cc & X_BIT == 0 || ignore).then_some(if cc & X_BIT == 0 { cc + 1 } else { cc })
        };
        let image = self.tuple(&g, t, width);
        let early = self.mutant == Mutant::EarlyReleaseShared && !for_update;
        if let Some(word) = granted {
            if !early {
                self.tree.pages.write(&mut g, CC, &[word]);
            }
        }
        self.tree.pages.unlock(g).await?;
        if granted.is_none() {
            return Err(Fail::Abort("2PL: lock conflict"));
        }
        let h = x.pages.entry(page).or_default();
        if for_update {
            h.exclusive = true;
            h.shared = false;
        } else if !early {
            h.shared = true;
        }
        Ok(image)
    }

    async fn read_to(
        &mut self,
        x: &mut Txn<P::Guard>,
        t: TupleRef,
        width: usize,
        for_update: bool,
    ) -> TxnResult<Vec<u64>> {
        let page = t.page();
        let wts_at = t.word(self.stored(width)) + width;
        let rts_at = wts_at + 1;
        let mut g = self.lock(page, Latch::X).await?;
        let (wts_word, rts) = (self.word(&g, wts_at), self.word(&g, rts_at));
        let mine = wts_word == X_BIT | x.ts;
        let wts = wts_word & !X_BIT;
        let mut verdict = None;
        if wts_word & X_BIT != 0 && !mine {
            verdict = Some("TO: a pending write of another transaction");
        } else if x.ts < wts && self.mutant != Mutant::ToSkipWtsCheck {
            verdict = Some("TO: read after a later write");
        } else if for_update && x.ts < rts {
            verdict = Some("TO: write after a later read");
        }
        let image = self.tuple(&g, t, width);
        if verdict.is_none() {
            if for_update && !mine {
                self.tree.pages.write(&mut g, wts_at, &[X_BIT | x.ts]);
                x.marked.insert(t, (width, wts_word));
            }
            if x.ts > rts && self.mutant != Mutant::ToNoRtsUpdate {
                self.tree.pages.write(&mut g, rts_at, &[x.ts]);
            }
        }
        self.tree.pages.unlock(g).await?;
        if let Some(why) = verdict {
            return Err(Fail::Abort(why));
        }
        if for_update {
            x.pages.entry(page).or_default().exclusive = true;
        }
        Ok(image)
    }

    async fn read_occ(
        &mut self,
        x: &mut Txn<P::Guard>,
        t: TupleRef,
        width: usize,
        hold: PageHold,
    ) -> TxnResult<Vec<u64>> {
        let page = t.page();
        let g = self.lock(page, Latch::S).await?;
        let (cc, version) = (self.word(&g, CC), self.word(&g, WTS));
        let image = self.tuple(&g, t, width);
        self.tree.pages.unlock(g).await?;
        if cc != 0 && cc != x.owner {
            return Err(Fail::Abort("OCC: page write-locked by a committing transaction"));
        }
        if hold.version.is_some_and(|v| v != version) {
            return Err(Fail::Abort("OCC: page changed between two reads"));
        }
        x.pages.entry(page).or_default().version = Some(version);
        Ok(image)
    }

    /// Buffer a new image (word 0 the version read) of a tuple read for update.
    pub fn write(&mut self, x: &mut Txn<P::Guard>, t: TupleRef, image: Vec<u64>) {
        let (width, _) = x.reads.get(&t).expect("TPC-C writes only tuples it read for update");
        let width = *width;
        assert_eq!(image.len(), width);
        if self.cc == Cc::To {
            assert!(x.marked.contains_key(&t), "TO: a write of a tuple not marked pending");
        } else if self.cc != Cc::Occ {
            assert!(x.pages.get(&t.page()).is_some_and(|h| h.exclusive), "write without a write lock");
        }
        x.writes.insert(t, (width, image));
    }

    /// Insert a tuple of `table` at commit, indexed under each of `keys`.
    pub fn insert(
        &mut self,
        x: &mut Txn<P::Guard>,
        table: usize,
        keys: Vec<u64>,
        width: usize,
        fields: Vec<u64>,
    ) {
        x.inserts.push((table, keys, width, fields));
    }

    /// Delete index entry `key` at commit (its tuple was written by this transaction, which is
    /// what serializes deleters; the index entry only spares later scans the dead row).
    pub fn delete_index(&mut self, x: &mut Txn<P::Guard>, key: u64) {
        x.deletes.push(key);
    }

    /// Commit: validate (OCC), install the writes and inserts, release. The record of what the
    /// transaction read and wrote, for the checker.
    pub async fn commit(&mut self, mut x: Txn<P::Guard>, id: u64) -> TxnResult<TxnRecord> {
        if self.cc == Cc::Occ {
            if let Err(f) = self.validate_occ(&mut x).await {
                self.abort(x).await?;
                return Err(f);
            }
        }
        if self.wal.is_some() && !(x.writes.is_empty() && x.inserts.is_empty()) {
            // The redo record (images and inserts, 16 bytes of header each), durable before
            // anything is installed or unlocked.
            let tuples = x.writes.values().map(|(w, _)| *w).chain(x.inserts.iter().map(|i| i.2));
            let bytes = 32 + tuples.map(|w| w as u64 * 8 + 16).sum::<u64>();
            self.log(bytes).await?;
        }
        self.install_inserts(&mut x).await?;
        let mut record = TxnRecord { id, ..TxnRecord::default() };
        for (t, (_, image)) in &x.reads {
            record.reads.push((t.0, image[0]));
        }
        // Group the writes by page: one latch section per page.
        let mut by_page: BTreeMap<PageId, Vec<(TupleRef, usize, Vec<u64>)>> = BTreeMap::new();
        for (t, (width, image)) in std::mem::take(&mut x.writes) {
            record.writes.push((t.0, image[0] + 1));
            by_page.entry(t.page()).or_default().push((t, width, image));
        }
        if self.latched() {
            self.install_latched(&mut x, by_page).await?;
            return Ok(record);
        }
        let pages: Vec<(PageId, PageHold)> = x.pages.iter().map(|(p, h)| (*p, *h)).collect();
        if self.mutant == Mutant::ReleaseBeforeInstall {
            // Every lock released first, the writes installed after.
            for (page, hold) in &pages {
                if hold.exclusive || hold.shared {
                    let mut g = self.lock(*page, Latch::X).await?;
                    let cc = self.word(&g, CC);
                    self.tree.pages.write(
                        &mut g,
                        CC,
                        &[if hold.exclusive { 0 } else { cc.saturating_sub(1) }],
                    );
                    self.tree.pages.unlock(g).await?;
                }
            }
            for (page, writes) in by_page {
                let mut g = self.lock(page, Latch::X).await?;
                self.install(&mut g, &writes, x.ts);
                self.tree.pages.unlock(g).await?;
            }
            return Ok(record);
        }
        for (page, hold) in pages {
            let writes = by_page.remove(&page).unwrap_or_default();
            if !hold.exclusive && !hold.shared {
                continue;
            }
            let mut g = self.lock(page, Latch::X).await?;
            if self.cc == Cc::To {
                self.install(&mut g, &writes, x.ts);
                // Marked tuples left unwritten get their write timestamp back.
                self.unmark(&mut g, &x, page, &writes);
            } else if hold.exclusive {
                self.install(&mut g, &writes, x.ts);
                self.tree.pages.write(&mut g, CC, &[0]);
            } else {
                let cc = self.word(&g, CC);
                debug_assert!(cc & X_BIT == 0 && cc > 0, "S lock count {cc:#x} on release");
                self.tree.pages.write(&mut g, CC, &[cc.saturating_sub(1)]);
            }
            self.tree.pages.unlock(g).await?;
        }
        assert!(by_page.is_empty(), "a write on a page the transaction did not lock");
        Ok(record)
    }

    /// 2PL over SELCC: install each page's writes through its held X latch, then release every
    /// latch (strict 2PL).
    async fn install_latched(
        &mut self,
        x: &mut Txn<P::Guard>,
        by_page: BTreeMap<PageId, Vec<(TupleRef, usize, Vec<u64>)>>,
    ) -> TxnResult<()> {
        let mut latches = std::mem::take(&mut x.latches);
        if self.mutant == Mutant::ReleaseBeforeInstall {
            // Planted bug: every latch released first, the writes installed after.
            for (_, g) in std::mem::take(&mut latches) {
                self.tree.pages.unlock(g).await?;
            }
        }
        for (page, writes) in by_page {
            match latches.get_mut(&page) {
                Some(g) => self.install(g, &writes, x.ts),
                None => {
                    let planted = self.mutant == Mutant::ReleaseBeforeInstall || x.unlatched.contains(&page);
                    assert!(planted, "a write on a page the transaction did not latch");
                    let mut g = self.lock(page, Latch::X).await?;
                    self.install(&mut g, &writes, x.ts);
                    self.tree.pages.unlock(g).await?;
                }
            }
        }
        for (_, g) in latches {
            self.tree.pages.unlock(g).await?;
        }
        Ok(())
    }

    /// Write the tuples, bumping each version; TO sets the page's write timestamp, OCC its version.
    fn install(&self, g: &mut P::Guard, writes: &[(TupleRef, usize, Vec<u64>)], ts: u64) {
        for (t, width, image) in writes {
            let mut words = image.clone();
            words[0] += 1;
            let at = t.word(self.stored(*width));
            self.tree.pages.write(g, at, &words);
            if self.cc == Cc::To {
                // The tuple's write timestamp, its pending mark cleared.
                self.tree.pages.write(g, at + width, &[ts]);
            }
        }
        match self.cc {
            Cc::TwoPl | Cc::To => {}
            Cc::Occ => {
                if self.mutant != Mutant::OccNoVersionBump {
                    let v = self.word(g, WTS);
                    self.tree.pages.write(g, WTS, &[v + 1]);
                }
            }
        }
    }

    /// TO: restore the write timestamp of this attempt's marked tuples on `page` that `writes`
    /// does not install (all of them when aborting).
    fn unmark(
        &self,
        g: &mut P::Guard,
        x: &Txn<P::Guard>,
        page: PageId,
        writes: &[(TupleRef, usize, Vec<u64>)],
    ) {
        for (t, (width, before)) in x.marked.iter().filter(|(t, _)| t.page() == page) {
            if writes.iter().any(|w| w.0 == *t) {
                continue;
            }
            let at = t.word(self.stored(*width)) + width;
            if self.word(g, at) == X_BIT | x.ts {
                self.tree.pages.write(g, at, &[*before]);
            }
        }
    }

    async fn validate_occ(&mut self, x: &mut Txn<P::Guard>) -> TxnResult<()> {
        let write_pages: Vec<PageId> = x.writes.keys().map(|t| t.page()).collect();
        if self.mutant != Mutant::OccNoWriteLock {
            for page in write_pages {
                if x.pages.get(&page).is_some_and(|h| h.exclusive) {
                    continue;
                }
                let mut g = self.lock(page, Latch::X).await?;
                let cc = self.word(&g, CC);
                if cc == 0 {
                    self.tree.pages.write(&mut g, CC, &[x.owner]);
                }
                self.tree.pages.unlock(g).await?;
                if cc != 0 {
                    return Err(Fail::Abort("OCC: write set page locked by another committer"));
                }
                x.pages.entry(page).or_default().exclusive = true;
            }
        } else {
            for t in x.writes.keys() {
                x.pages.entry(t.page()).or_default().exclusive = true;
            }
        }
        x.ts = self.timestamp().await?;
        if self.mutant == Mutant::OccSkipValidation {
            return Ok(());
        }
        let reads: Vec<(PageId, PageHold)> = x.pages.iter().map(|(p, h)| (*p, *h)).collect();
        for (page, hold) in reads {
            let Some(seen) = hold.version else { continue };
            if hold.exclusive && self.mutant == Mutant::OccValidationSkipsWriteSet {
                continue;
            }
            let g = self.lock(page, Latch::S).await?;
            let (cc, version) = (self.word(&g, CC), self.word(&g, WTS));
            self.tree.pages.unlock(g).await?;
            let locked_by_other = cc != 0 && !(hold.exclusive && cc == x.owner);
            if version != seen || (locked_by_other && self.mutant != Mutant::OccNoWriteLock) {
                return Err(Fail::Abort("OCC: validation failed"));
            }
        }
        Ok(())
    }

    async fn install_inserts(&mut self, x: &mut Txn<P::Guard>) -> TxnResult<()> {
        for key in std::mem::take(&mut x.deletes) {
            self.tree.store(key, super::tpcc::TOMBSTONE).await?;
        }
        for (table, keys, width, fields) in std::mem::take(&mut x.inserts) {
            let stored = self.stored(width);
            let per = per_page(self.tree.pages.page_words(), stored);
            let (page, slot) = match self.open.get(&table) {
                Some(&(p, s)) if s < per => (p, s),
                _ => {
                    let p = self.tree.pages.allocate().await?.expect(
                        "TPC-C: the memory nodes have no free GCL for inserts (the plan sized too few)",
                    );
                    (p, 0)
                }
            };
            self.open.insert(table, (page, slot + 1));
            let t = TupleRef::new(page, slot);
            let mut words = vec![0u64; stored];
            words[1..=fields.len()].copy_from_slice(&fields);
            if self.cc == Cc::To {
                // Written by this transaction: its timestamp (the authors' `PutWTS(start_ts)`).
                words[width] = x.ts;
            }
            if let Some(g) = x.latches.get_mut(&page) {
                // 2PL over SELCC holds this page already (it read a row it appended earlier).
                assert!(
                    x.pages.get(&page).is_some_and(|h| h.exclusive),
                    "an insert into a page the transaction holds shared"
                );
                self.tree.pages.write(g, t.word(stored), &words);
            } else {
                let mut g = self.lock(page, Latch::X).await?;
                self.tree.pages.write(&mut g, t.word(stored), &words);
                self.tree.pages.unlock(g).await?;
            }
            for k in keys {
                self.tree.store(k, t.0).await?;
            }
        }
        Ok(())
    }

    /// Give back whatever the attempt holds.
    pub async fn abort(&mut self, mut x: Txn<P::Guard>) -> TxnResult<()> {
        if self.latched() {
            // Nothing was installed: give the latches back.
            for (_, g) in std::mem::take(&mut x.latches) {
                self.tree.pages.unlock(g).await?;
            }
            return Ok(());
        }
        if self.cc == Cc::To {
            let pages: std::collections::BTreeSet<PageId> = x.marked.keys().map(|t| t.page()).collect();
            for page in pages {
                let mut g = self.lock(page, Latch::X).await?;
                self.unmark(&mut g, &x, page, &[]);
                self.tree.pages.unlock(g).await?;
            }
            return Ok(());
        }
        for (page, hold) in &x.pages {
            let release = match self.cc {
                Cc::TwoPl => hold.exclusive || hold.shared,
                Cc::To | Cc::Occ => hold.exclusive,
            };
            if !release {
                continue;
            }
            let mut g = self.lock(*page, Latch::X).await?;
            let cc = self.word(&g, CC);
            let new = match self.cc {
                Cc::TwoPl if hold.exclusive => 0,
                Cc::TwoPl => cc.saturating_sub(1),
                Cc::Occ if cc == x.owner => 0,
                _ => cc,
            };
            if new != cc {
                self.tree.pages.write(&mut g, CC, &[new]);
            }
            self.tree.pages.unlock(g).await?;
        }
        Ok(())
    }
}
