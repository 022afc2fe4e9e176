//! The S→X upgrade of 2PL over SELCC latches inside one transaction (`Engine::read_latched`),
//! which TPC-C never exercises (a transaction reads a table or updates it). Two engines share
//! in-memory pages behind a latch table with SELCC's no-wait try-latch semantics (S shared, X
//! alone), so each step's conflict is exact and the test runs without a simulator.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use super::engine::{Cc, Engine, Fail};
use super::heap::TupleRef;
use super::mutants::Mutant;
use super::pages::TxnPages;
use super::wal::Wal;
use crate::blink::mem_pages::MemPages;
use crate::blink::tree::{Shared, Tree, TreeConfig};
use crate::blink::{Latch, PageId, Pages};
use crate::common::error::ProtocolResult;
use crate::nic::{NodeId, RemoteAddr};

/// Per page: S holders, X held.
type Table = Arc<Mutex<BTreeMap<PageId, (u32, bool)>>>;

#[derive(Clone)]
struct LatchedPages {
    mem: MemPages,
    table: Table,
}

/// A held latch; reads and writes go straight to the page's words (`MemPages`' own latch
/// admits one holder, these admit many readers).
struct Guard {
    page: PageId,
    mode: Latch,
}

impl LatchedPages {
    /// Take the latch if free for `mode`.
    fn take(&self, page: PageId, mode: Latch) -> bool {
        let mut t = self.table.lock().unwrap();
        let (s, x) = t.entry(page).or_default();
        let free = !*x && (mode == Latch::S || *s == 0);
        if free {
            match mode {
                Latch::S => *s += 1,
                Latch::X => *x = true,
            }
        }
        free
    }

    fn held(&self, page: PageId) -> (u32, bool) {
        self.table.lock().unwrap().get(&page).copied().unwrap_or_default()
    }

    /// The address of data word `at` of `page` (`MemPages` puts two latch/header words first).
    fn addr(&self, page: PageId, at: usize) -> RemoteAddr {
        let base = page.addr();
        RemoteAddr::new(base.node, base.offset_bytes + 8 * (2 + at) as u64)
    }
}

impl Pages for LatchedPages {
    type Guard = Guard;

    fn page_words(&self) -> usize {
        self.mem.page_words()
    }

    async fn lock(&mut self, page: PageId, mode: Latch) -> ProtocolResult<Guard> {
        assert!(self.take(page, mode), "a blocking latch on {page} would wait: the test's sequence is wrong");
        Ok(Guard { page, mode })
    }

    async fn unlock(&mut self, g: Guard) -> ProtocolResult<()> {
        {
            let mut t = self.table.lock().unwrap();
            let (s, x) = t.get_mut(&g.page).expect("unlock of a page never latched");
            match g.mode {
                Latch::S => *s -= 1,
                Latch::X => *x = false,
            }
        }
        Ok(())
    }

    fn read(&self, g: &Guard, at: usize, out: &mut [u64]) {
        for (i, w) in out.iter_mut().enumerate() {
            *w = self.mem.word(self.addr(g.page, at + i));
        }
    }

    fn write(&self, g: &mut Guard, at: usize, words: &[u64]) {
        assert_eq!(g.mode, Latch::X, "a write under S");
        self.mem.store(g.page, at, words)
    }

    async fn allocate(&mut self) -> ProtocolResult<Option<PageId>> {
        self.mem.allocate().await
    }

    async fn cpu(&self, _ns: u64) {}

    async fn backoff(&self, _ns: u64) {}

    fn now(&self) -> u64 {
        0
    }
}

impl TxnPages for LatchedPages {
    async fn faa(&mut self, _addr: RemoteAddr, _add: u64) -> ProtocolResult<u64> {
        unreachable!("2PL draws no timestamps")
    }

    async fn log(&mut self, _wal: &Wal, _bytes: u64) -> ProtocolResult<()> {
        Ok(())
    }

    fn holds_latches(&self) -> bool {
        true
    }

    async fn try_lock(&mut self, page: PageId, mode: Latch) -> ProtocolResult<Option<Guard>> {
        if !self.take(page, mode) {
            return Ok(None);
        }
        Ok(Some(Guard { page, mode }))
    }
}

/// Run a future that never waits (every operation here is ready at once).
fn now<T>(f: impl Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("an in-memory operation waited"),
    }
}

const WIDTH: usize = 2;

/// One heap page with tuples A = [version 0, 10] and B = [version 0, 20], and two 2PL engines
/// (two transactions' threads) over it.
fn setup() -> (LatchedPages, TupleRef, TupleRef, Engine<LatchedPages>, Engine<LatchedPages>) {
    let pages = LatchedPages { mem: MemPages::new(32), table: Arc::default() };
    let meta = pages.mem.allocate_now();
    let heap = pages.mem.allocate_now();
    let (a, b) = (TupleRef::new(heap, 0), TupleRef::new(heap, 1));
    pages.mem.store(heap, a.word(WIDTH), &[0, 10]);
    pages.mem.store(heap, b.word(WIDTH), &[0, 20]);
    let shared = Arc::new(Shared::new(TreeConfig::default(), meta, meta));
    let engine = |owner| {
        let tree = Tree::new(pages.clone(), shared.clone());
        Engine::new(tree, Cc::TwoPl, Mutant::None, RemoteAddr::new(NodeId(0), 0), owner)
    };
    let (e1, e2) = (engine(1), engine(2));
    (pages, a, b, e1, e2)
}

fn words(pages: &LatchedPages, t: TupleRef) -> Vec<u64> {
    (0..WIDTH).map(|i| pages.mem.word(pages.addr(t.page(), t.word(WIDTH) + i))).collect()
}

fn aborted<T: std::fmt::Debug>(r: Result<T, Fail>) -> bool {
    matches!(r, Err(Fail::Abort(_)))
}

#[test]
fn an_upgrade_keeps_the_page_locked_until_commit() {
    // T1 reads A under S, then reads B (same page) for update: S is given back and X taken.
    // While T1 holds S, T2 cannot write the page; once T1 holds X, T2 cannot even read it; T1's
    // commit installs B, records what it read and frees the page.
    let (pages, a, b, mut e1, mut e2) = setup();
    let page = a.page();
    let mut t1 = now(e1.begin()).unwrap();
    assert_eq!(now(e1.read(&mut t1, a, WIDTH, false)).unwrap(), vec![0, 10]);
    assert_eq!(pages.held(page), (1, false));

    let mut t2 = now(e2.begin()).unwrap();
    assert!(aborted(now(e2.read(&mut t2, b, WIDTH, true))), "X granted beside T1's S");
    now(e2.abort(t2)).unwrap();

    assert_eq!(now(e1.read(&mut t1, b, WIDTH, true)).unwrap(), vec![0, 20]);
    assert_eq!(pages.held(page), (0, true), "the upgrade holds X alone");
    let mut t3 = now(e2.begin()).unwrap();
    assert!(aborted(now(e2.read(&mut t3, a, WIDTH, false))), "S granted beside T1's X");
    now(e2.abort(t3)).unwrap();

    e1.write(&mut t1, b, vec![0, 21]);
    let record = now(e1.commit(t1, 1)).unwrap();
    assert_eq!(record.reads, vec![(a.0, 0), (b.0, 0)]);
    assert_eq!(record.writes, vec![(b.0, 1)]);
    assert_eq!(words(&pages, b), vec![1, 21]);
    assert_eq!(words(&pages, a), vec![0, 10]);
    assert_eq!(pages.held(page), (0, false));

    // Reading a tuple and then the same tuple for update upgrades too, and sees T1's write.
    let mut t4 = now(e2.begin()).unwrap();
    assert_eq!(now(e2.read(&mut t4, b, WIDTH, false)).unwrap(), vec![1, 21]);
    assert_eq!(now(e2.read(&mut t4, b, WIDTH, true)).unwrap(), vec![1, 21]);
    assert_eq!(pages.held(page), (0, true));
    e2.write(&mut t4, b, vec![1, 22]);
    let record = now(e2.commit(t4, 2)).unwrap();
    assert_eq!(record.writes, vec![(b.0, 2)]);
    assert_eq!(words(&pages, b), vec![2, 22]);
    assert_eq!(pages.held(page), (0, false));
}

#[test]
fn an_upgrade_aborts_if_a_tuple_read_under_s_changed() {
    // Between giving S back and taking X another transaction may commit on the page: the
    // upgrade re-reads the tuples it read there and aborts if one changed (as if S had been
    // held throughout). Also an upgrade that meets another reader's S aborts, holding nothing.
    let (pages, a, b, mut e1, mut e2) = setup();
    let page = a.page();
    let mut t1 = now(e1.begin()).unwrap();
    now(e1.read(&mut t1, a, WIDTH, false)).unwrap();
    // A write that lands in the upgrade's window (committed by someone else).
    pages.mem.store(page, a.word(WIDTH), &[1, 11]);
    assert!(aborted(now(e1.read(&mut t1, b, WIDTH, true))), "an upgrade missed a changed tuple");
    assert_eq!(pages.held(page), (0, false), "the failed upgrade keeps no latch");
    now(e1.abort(t1)).unwrap();
    assert_eq!(pages.held(page), (0, false));

    let mut t1 = now(e1.begin()).unwrap();
    let mut t2 = now(e2.begin()).unwrap();
    assert_eq!(now(e1.read(&mut t1, a, WIDTH, false)).unwrap(), vec![1, 11]);
    now(e2.read(&mut t2, b, WIDTH, false)).unwrap();
    assert_eq!(pages.held(page), (2, false));
    assert!(aborted(now(e1.read(&mut t1, a, WIDTH, true))), "X granted beside T2's S");
    now(e1.abort(t1)).unwrap();
    assert_eq!(pages.held(page), (1, false), "only T2's S is left");
    assert_eq!(now(e2.read(&mut t2, b, WIDTH, true)).unwrap(), vec![0, 20]);
    e2.write(&mut t2, b, vec![0, 21]);
    now(e2.commit(t2, 2)).unwrap();
    assert_eq!(words(&pages, b), vec![1, 21]);
    assert_eq!(pages.held(page), (0, false));
}
