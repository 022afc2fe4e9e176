//! FORD's TPC-C over the cache (DiFache §6.1, Fig. 14 bottom: "for TPC-C, 8 warehouses are
//! allocated to represent high-contention and compute-intensive workloads"):
//! `workload.transactions.tpcc`. The five transactions issue their objects round by round as
//! the authors' `workload/tpcc/tpcc_txn.cc` does (facts only; NEEDS.md "FORD's TPC-C"): each
//! `TxExe` is one [`Dtx::execute`] — its read-write objects locked no-wait, then everything
//! read through the cache — and the commit is FORD's (undo log, validation, writes, unlock).
//! The mix is FORD's (`FREQUENCY_*`): NewOrder 45 %, Payment 43 %, OrderStatus, Delivery and
//! StockLevel 4 % each.
//!
//! **Rows are objects, values are versions.** Every row is one cached object of
//! `object_bytes` (FORD's items are all `MAX_ITEM_SIZE` 664 B + header, whatever the table)
//! holding only its tag and version, as every DiFache benchmark's objects do (the checkers
//! read them). So the values the transactions compute are not stored; the few that choose
//! which rows come next are:
//! * **D_NEXT_O_ID** is the district's version: every NewOrder and Payment writes the district
//!   (so both conflict on it, as in FORD), and a NewOrder's order id is the version it read —
//!   ids stay unique per district, with gaps where a Payment wrote. Its rows go to the order
//!   slot of that id past the loaded orders, wrapping over `order_slots` ([CHOICE]: FORD
//!   inserts into hash buckets; a reused slot is overwritten like an updated row).
//! * **An order's contents** (customer, line count 5–15, items by NURand, 1 % remote supply)
//!   are a fixed function of its district and slot ([`Tables::order`]), so the NewOrder that
//!   inserts an order and a later OrderStatus, Delivery or StockLevel agree on them.
//! * **Presence** (FORD reads a missing key with `fail_abort` off and drops it): a loaded
//!   NEW-ORDER row is present until a Delivery writes it (version 0); lines past an order's
//!   count are absent. StockLevel reads the 20 order slots below the district's D_NEXT_O_ID as
//!   orders, all present: in FORD the 20 ids below D_NEXT_O_ID are always orders (only NewOrder
//!   advances it), and here the ids a Payment skipped still name a slot whose contents are
//!   fixed, so StockLevel does FORD's work (20 orders' lines and their stock rows).
//!
//! HISTORY is one row per paying customer ([CHOICE]; FORD keys it by customer and paying
//! district: a Payment locks the customer row anyway, so the extra keys add no conflict).
//! The authors' Payment by last name draws a customer id like the by-id case (their FIXME),
//! and their Delivery updates its order lines in the read-only set, so they are never written;
//! both kept.

use rand_chacha::rand_core::Rng;

use crate::common::error::ProtocolResult;
use crate::harness::OpLog;
use crate::nic::{Nanos, Nic};
use crate::workload::mix64;

use super::super::cache::{Cache, Worker};
use super::super::config::FordTpcc;
use super::ford::{Dtx, Outcome};

/// The largest write set: a NewOrder of 15 lines (district, three inserts, 15 stock rows and
/// 15 order lines).
pub const MAX_WRITE_SET: u32 = 1 + 3 + 2 * MAX_LINES as u32;
const MIN_LINES: u64 = 5;
const MAX_LINES: u64 = 15;
/// StockLevel's orders (`STOCK_LEVEL_ORDERS`).
const STOCK_LEVEL_ORDERS: u64 = 20;

/// The five transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl Kind {
    /// FORD's `CreateWorkgenArray`: a uniform draw over 100 slots.
    pub fn draw(rng: &mut impl Rng) -> Kind {
        match rng.next_u64() % 100 {
            0..45 => Kind::NewOrder,
            45..88 => Kind::Payment,
            88..92 => Kind::OrderStatus,
            92..96 => Kind::Delivery,
            _ => Kind::StockLevel,
        }
    }
}

/// The key space: every table a contiguous run of object keys.
#[derive(Clone, Debug)]
pub struct Tables {
    spec: FordTpcc,
    district: u64,
    customer: u64,
    history: u64,
    item: u64,
    stock: u64,
    order: u64,
    new_order: u64,
    order_index: u64,
    order_line: u64,
    /// Order slots per district: the loaded orders, then `order_slots`.
    slots: u64,
    pub rows: u64,
}

/// One order's contents, a fixed function of where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order {
    pub customer: u64,
    /// (item, supplying warehouse) per line; 5..=15 lines, distinct items.
    pub lines: Vec<(u64, u64)>,
}

impl Tables {
    pub fn new(spec: &FordTpcc) -> Tables {
        let (w, d, c, i) =
            (spec.warehouses as u64, spec.districts as u64, spec.customers as u64, spec.items as u64);
        let slots = c + spec.order_slots as u64;
        let districts = w * d;
        let mut next = w;
        let mut take = |n: u64| {
            let base = next;
            next += n;
            base
        };
        let district = take(districts);
        let customer = take(districts * c);
        let history = take(districts * c);
        let item = take(i);
        let stock = take(w * i);
        let order = take(districts * slots);
        let new_order = take(districts * slots);
        let order_index = take(districts * slots);
        let order_line = take(districts * slots * MAX_LINES);
        Tables {
            spec: spec.clone(),
            district,
            customer,
            history,
            item,
            stock,
            order,
            new_order,
            order_index,
            order_line,
            slots,
            rows: next,
        }
    }

    fn d(&self, w: u64, d: u64) -> u64 {
        w * self.spec.districts as u64 + d
    }
    pub fn warehouse_row(&self, w: u64) -> u64 {
        w
    }
    pub fn district_row(&self, w: u64, d: u64) -> u64 {
        self.district + self.d(w, d)
    }
    pub fn customer_row(&self, w: u64, d: u64, c: u64) -> u64 {
        self.customer + self.d(w, d) * self.spec.customers as u64 + c
    }
    pub fn history_row(&self, w: u64, d: u64, c: u64) -> u64 {
        self.history + self.d(w, d) * self.spec.customers as u64 + c
    }
    pub fn item_row(&self, i: u64) -> u64 {
        self.item + i
    }
    pub fn stock_row(&self, w: u64, i: u64) -> u64 {
        self.stock + w * self.spec.items as u64 + i
    }
    pub fn order_row(&self, w: u64, d: u64, slot: u64) -> u64 {
        self.order + self.d(w, d) * self.slots + slot
    }
    pub fn new_order_row(&self, w: u64, d: u64, slot: u64) -> u64 {
        self.new_order + self.d(w, d) * self.slots + slot
    }
    pub fn order_index_row(&self, w: u64, d: u64, slot: u64) -> u64 {
        self.order_index + self.d(w, d) * self.slots + slot
    }
    pub fn order_line_row(&self, w: u64, d: u64, slot: u64, line: u64) -> u64 {
        self.order_line + (self.d(w, d) * self.slots + slot) * MAX_LINES + line
    }

    /// The slot of order number `n` of a district (0-based: the loaded orders, then the run's,
    /// wrapping over `order_slots`).
    pub fn slot(&self, n: u64) -> u64 {
        let loaded = self.spec.customers as u64;
        if n < loaded {
            n
        } else {
            loaded + (n - loaded) % self.spec.order_slots as u64
        }
    }

    /// The contents of the order in `slot` of district (w, d).
    pub fn order(&self, w: u64, d: u64, slot: u64) -> Order {
        let seed = mix64(self.order_row(w, d, slot) ^ 0x7063_635f_6f72_6472);
        let mut h = Hashed(seed);
        let customer = nurand(&mut h, 1023, 259, self.spec.customers as u64);
        let count = MIN_LINES + h.next() % (MAX_LINES - MIN_LINES + 1);
        let mut lines: Vec<(u64, u64)> = Vec::with_capacity(count as usize);
        while (lines.len() as u64) < count {
            let item = nurand(&mut h, 8191, 7911, self.spec.items as u64);
            let warehouses = self.spec.warehouses as u64;
            // `g_new_order_remote_item_pct` = 1: another warehouse supplies 1 % of the lines.
            let supply = if warehouses > 1 && h.next().is_multiple_of(100) {
                (w + 1 + h.next() % (warehouses - 1)) % warehouses
            } else {
                w
            };
            if !lines.iter().any(|&(i, s)| i == item && s == supply) {
                lines.push((item, supply));
            }
        }
        Order { customer, lines }
    }
}

/// A stream of hashes from one seed (the order contents' "generator").
struct Hashed(u64);

impl Hashed {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }
}

/// TPC-C's NURand(A, C, 1, n) − 1 (0-based), as FORD's `NonUniformRandom`.
fn nurand(h: &mut Hashed, a: u64, c: u64, n: u64) -> u64 {
    let x = h.next() % (a + 1);
    let y = h.next() % n;
    ((x | y) + c) % n
}

/// NURand from the client's generator.
fn nurand_rng(rng: &mut impl Rng, a: u64, c: u64, n: u64) -> u64 {
    let mut h = Hashed(rng.next_u64());
    nurand(&mut h, a, c, n)
}

/// What a TPC-C transaction needs besides the cache: its tables, the application's CPU per
/// round, the history log and whether to record it.
pub struct Ctx<'a> {
    pub tables: &'a Tables,
    pub app_ns: u64,
    pub log: &'a Option<(OpLog, u32)>,
    pub record: bool,
}

/// One TPC-C transaction of kind `kind` with parameters from `rng`; `wraps` counts NewOrders
/// that reused an order slot.
pub async fn transaction<N: Nic, R: Rng>(
    cache: &Cache<N>,
    w: &Worker<N>,
    kind: Kind,
    rng: &mut R,
    sequence: &mut u64,
    ctx: &Ctx<'_>,
    wraps: &mut u64,
) -> ProtocolResult<Outcome> {
    let t = ctx.tables;
    let spec = &t.spec;
    let warehouse = rng.next_u64() % spec.warehouses as u64;
    let district = rng.next_u64() % spec.districts as u64;
    let mut dtx = Dtx::begin(cache, w, sequence);
    let mut x = Exe { cache, w, ctx, dtx: &mut dtx };
    let done = match kind {
        Kind::NewOrder => new_order(&mut x, rng, warehouse, district, wraps).await?,
        Kind::Payment => payment(&mut x, rng, warehouse, district).await?,
        Kind::OrderStatus => order_status(&mut x, rng, warehouse, district).await?,
        Kind::Delivery => delivery(&mut x, rng, warehouse).await?,
        Kind::StockLevel => stock_level(&mut x, warehouse, district).await?,
    };
    if !done {
        return Ok(Outcome::LockAbort);
    }
    dtx.commit(cache, w, ctx.log, ctx.record).await
}

/// Execution rounds of one transaction.
struct Exe<'a, 'b, N: Nic> {
    cache: &'a Cache<N>,
    w: &'a Worker<N>,
    ctx: &'a Ctx<'b>,
    dtx: &'a mut Dtx,
}

impl<N: Nic> Exe<'_, '_, N> {
    /// One `TxExe` after the application's work; `None`: a lock abort (locks released).
    async fn round(
        &mut self,
        read_only: &[u64],
        read_write: &[u64],
    ) -> ProtocolResult<Option<(Vec<u64>, Vec<u64>)>> {
        self.w.nic.cpu(Nanos(self.ctx.app_ns)).await;
        self.dtx.execute(self.cache, self.w, read_only, read_write, self.ctx.log).await
    }

    /// A read-only round of one key with `fail_abort` off: its version, dropped from the
    /// read-only set when `present` says the row is absent.
    async fn probe(&mut self, key: u64, present: impl Fn(u64) -> bool) -> ProtocolResult<Option<u64>> {
        let (ro, _) = self.round(&[key], &[]).await?.expect("a read-only round takes no lock");
        if present(ro[0]) {
            Ok(Some(ro[0]))
        } else {
            self.dtx.forget_read_only(1);
            Ok(None)
        }
    }
}

async fn new_order<N: Nic>(
    x: &mut Exe<'_, '_, N>,
    rng: &mut impl Rng,
    w: u64,
    d: u64,
    wraps: &mut u64,
) -> ProtocolResult<bool> {
    let t = x.ctx.tables;
    let c = nurand_rng(rng, 1023, 259, t.spec.customers as u64);
    let Some((_, rw)) =
        x.round(&[t.warehouse_row(w), t.customer_row(w, d, c)], &[t.district_row(w, d)]).await?
    else {
        return Ok(false);
    };
    // D_NEXT_O_ID: the district's version counts the run's orders (and payments).
    let n = t.spec.customers as u64 + rw[0];
    *wraps += (n - t.spec.customers as u64 >= t.spec.order_slots as u64) as u64;
    let slot = t.slot(n);
    let inserts = [t.new_order_row(w, d, slot), t.order_row(w, d, slot), t.order_index_row(w, d, slot)];
    if x.round(&[], &inserts).await?.is_none() {
        return Ok(false);
    }
    for (line, &(item, supply)) in t.order(w, d, slot).lines.iter().enumerate() {
        if x.round(&[t.item_row(item)], &[t.stock_row(supply, item)]).await?.is_none() {
            return Ok(false);
        }
        if x.round(&[], &[t.order_line_row(w, d, slot, line as u64)]).await?.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

async fn payment<N: Nic>(x: &mut Exe<'_, '_, N>, rng: &mut impl Rng, w: u64, d: u64) -> ProtocolResult<bool> {
    let t = x.ctx.tables;
    let warehouses = t.spec.warehouses as u64;
    // 85 % pay through their own warehouse; 15 % through another (any district).
    let local = warehouses == 1 || rng.next_u64() % 100 < 85;
    let (cw, cd) = if local {
        (w, d)
    } else {
        ((w + 1 + rng.next_u64() % (warehouses - 1)) % warehouses, rng.next_u64() % t.spec.districts as u64)
    };
    let c = nurand_rng(rng, 1023, 259, t.spec.customers as u64);
    let rows =
        [t.warehouse_row(w), t.district_row(w, d), t.customer_row(cw, cd, c), t.history_row(cw, cd, c)];
    Ok(x.round(&[], &rows).await?.is_some())
}

async fn order_status<N: Nic>(
    x: &mut Exe<'_, '_, N>,
    rng: &mut impl Rng,
    w: u64,
    d: u64,
) -> ProtocolResult<bool> {
    let t = x.ctx.tables;
    let c = nurand_rng(rng, 1023, 259, t.spec.customers as u64);
    // The authors' OrderStatus reads a random loaded order, not the customer's last.
    let slot = rng.next_u64() % t.spec.customers as u64;
    x.round(&[t.customer_row(w, d, c), t.order_row(w, d, slot)], &[]).await?;
    let lines: Vec<u64> =
        (0..t.order(w, d, slot).lines.len() as u64).map(|l| t.order_line_row(w, d, slot, l)).collect();
    x.round(&lines, &[]).await?;
    Ok(true)
}

async fn delivery<N: Nic>(x: &mut Exe<'_, '_, N>, rng: &mut impl Rng, w: u64) -> ProtocolResult<bool> {
    let t = x.ctx.tables;
    let customers = t.spec.customers as u64;
    // The loaded undelivered orders: ids 0.7·C + 1 ..= C (FORD draws among them only).
    let first = (customers * 7).div_ceil(10);
    for d in 0..t.spec.districts as u64 {
        let slot = first + rng.next_u64() % (customers - first);
        let row = t.new_order_row(w, d, slot);
        // Present until a Delivery wrote (deleted) it.
        if x.probe(row, |v| v == 0).await?.is_none() {
            continue;
        }
        x.dtx.forget_read_only(1);
        if x.round(&[], &[row, t.order_row(w, d, slot)]).await?.is_none() {
            return Ok(false);
        }
        let order = t.order(w, d, slot);
        for line in 0..MAX_LINES {
            let count = order.lines.len() as u64;
            x.probe(t.order_line_row(w, d, slot, line), |_| line < count).await?;
        }
        if x.round(&[], &[t.customer_row(w, d, order.customer)]).await?.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

async fn stock_level<N: Nic>(x: &mut Exe<'_, '_, N>, w: u64, d: u64) -> ProtocolResult<bool> {
    let t = x.ctx.tables;
    let (ro, _) = x.round(&[t.district_row(w, d)], &[]).await?.expect("a read-only round takes no lock");
    let next = t.spec.customers as u64 + ro[0];
    for n in next.saturating_sub(STOCK_LEVEL_ORDERS)..next {
        let slot = t.slot(n);
        let order = t.order(w, d, slot);
        for line in 0..MAX_LINES {
            let count = order.lines.len() as u64;
            if x.probe(t.order_line_row(w, d, slot, line), |_| line < count).await?.is_none() {
                break;
            }
            let (item, _) = order.lines[line as usize];
            x.round(&[t.stock_row(w, item)], &[]).await?;
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> FordTpcc {
        FordTpcc { warehouses: 2, districts: 3, customers: 20, items: 100, order_slots: 24 }
    }

    #[test]
    fn difache_tpcc_tables_are_disjoint_and_fill_the_key_space() {
        let t = Tables::new(&spec());
        let mut keys = vec![];
        for w in 0..2 {
            keys.push(t.warehouse_row(w));
            for i in 0..100 {
                keys.push(t.stock_row(w, i));
            }
            for d in 0..3 {
                keys.push(t.district_row(w, d));
                for c in 0..20 {
                    keys.push(t.customer_row(w, d, c));
                    keys.push(t.history_row(w, d, c));
                }
                for s in 0..44 {
                    keys.extend([t.order_row(w, d, s), t.new_order_row(w, d, s), t.order_index_row(w, d, s)]);
                    keys.extend((0..MAX_LINES).map(|l| t.order_line_row(w, d, s, l)));
                }
            }
        }
        keys.extend((0..100).map(|i| t.item_row(i)));
        keys.sort_unstable();
        let n = keys.len() as u64;
        keys.dedup();
        assert_eq!(keys.len() as u64, n, "two rows share a key");
        assert_eq!(n, t.rows);
        assert_eq!(keys, (0..t.rows).collect::<Vec<_>>());
    }

    #[test]
    fn difache_tpcc_orders_are_fixed_and_well_formed() {
        let t = Tables::new(&spec());
        for slot in 0..44 {
            let o = t.order(1, 2, slot);
            assert_eq!(o, t.order(1, 2, slot));
            assert!((5..=15).contains(&o.lines.len()) && o.customer < 20);
            assert!(o.lines.iter().all(|&(i, s)| i < 100 && s < 2));
        }
        assert_eq!((t.slot(19), t.slot(20), t.slot(43), t.slot(44)), (19, 20, 43, 20));
    }
}
