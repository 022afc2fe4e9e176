//! The transaction checkers.
//!
//! **Serializability** (in the style of Elle): every committed transaction recorded the version
//! of each tuple it read and the version it installed (always read version + 1: TPC-C's writes
//! are read-modify-writes). Versions order each tuple's writes, so the dependency graph is
//! known exactly: `ww` from the writer of version v to the writer of v + 1, `wr` from the writer
//! of v to every reader of v, `rw` from every reader of v to the writer of v + 1. Committed
//! transactions are serializable iff the graph is acyclic. Before that: no version installed
//! twice (a lost update) and no version read that no committed transaction installed (a dirty
//! or aborted read).
//!
//! **TPC-C consistency** (clause 3.3.2), read from memory after a quiesced run: W_YTD = initial +
//! Σ D_YTD increments of its districts (1); each district's D_NEXT_O_ID − 1 = its loaded +
//! committed orders = its ORDER rows 1..D_NEXT_O_ID − 1 (2); the delivered orders (O_CARRIER_ID
//! set) are a prefix of them and the rest have live NEW-ORDER rows holding their id (3, 5; the
//! oldest undelivered order is the one delivered); every order's ORDER-LINE rows number
//! O_OL_CNT (6) and carry a delivery date iff the order is delivered (7); each customer's
//! C_BALANCE + C_YTD_PAYMENT = Σ OL_AMOUNT of their delivered orders' lines (12, with the
//! loaded balance −10.00 and payment 10.00); the orders delivered in the run = the committed
//! Deliveries' count = Σ C_DELIVERY_CNT per district; the customer-order index maps every order
//! to its ORDER row; Σ S_YTD per warehouse = Σ OL_QUANTITY it supplied to the run's orders;
//! Σ C_YTD_PAYMENT increments = Σ W_YTD increments = the committed payments; every CC word free.
//!
//! Under the authors' procedures (`procedures: artifact`) their Delivery deletes no NEW-ORDER
//! row, touches no ORDER-LINE and credits no amount, and its counter wraps over the loaded
//! orders (re-delivering them) instead of taking the oldest undelivered order. So conditions 3
//! and 5 (delivered orders a prefix, live NEW-ORDER row iff undelivered), 7 (delivery date iff
//! delivered) and 12 (balances = delivered amounts) do not hold there and are replaced by what
//! does: every NEW-ORDER row loaded or inserted stays live with its id; each district's
//! DISTRICT-NEW-ORDER counter = its start advanced (wrapping) by the committed Deliveries;
//! O_CARRIER_ID is set exactly on the orders delivered at load and those the counter passed
//! (never on the run's orders); order lines keep their load-time delivery date; every
//! C_BALANCE + C_YTD_PAYMENT is 0 (nothing credited); each customer's C_DELIVERY_CNT = the times
//! the counter passed one of their orders. Conditions 1, 2, 6, the customer-order index,
//! S_YTD, the payment sums and the CC words are checked as under TPC-C's procedures.

use std::collections::{BTreeMap, BTreeSet};

use super::client::Stats;
use super::engine::{Cc, TxnRecord};
use super::heap::{stored_width, TupleRef, CC, X_BIT};
use super::tpcc::*;
use crate::harness::Memory;
use crate::selcc::Layout;

pub fn serializable(records: &[TxnRecord]) -> Result<(), String> {
    // A distributed transaction is recorded by its coordinator and each participant: one node.
    let mut merged: BTreeMap<u64, TxnRecord> = BTreeMap::new();
    for r in records {
        let m = merged.entry(r.id).or_insert_with(|| TxnRecord { id: r.id, ..TxnRecord::default() });
        m.reads.extend_from_slice(&r.reads);
        m.writes.extend_from_slice(&r.writes);
    }
    let records: Vec<TxnRecord> = merged.into_values().collect();
    let records = &records[..];
    let mut writer: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    for (i, r) in records.iter().enumerate() {
        for &w in &r.writes {
            if let Some(j) = writer.insert(w, i) {
                return Err(format!(
                    "lost update: transactions {:#x} and {:#x} both installed version {} of tuple {:#x}",
                    records[j].id, r.id, w.1, w.0
                ));
            }
        }
    }
    let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); records.len()];
    for (i, r) in records.iter().enumerate() {
        for &(t, v) in &r.reads {
            if v > 0 {
                match writer.get(&(t, v)) {
                    Some(&j) if j != i => {
                        edges[j].insert(i);
                    }
                    Some(_) => {}
                    None => {
                        return Err(format!(
                            "transaction {:#x} read version {v} of tuple {t:#x}, which no committed transaction installed",
                            r.id
                        ))
                    }
                }
            }
            if let Some(&j) = writer.get(&(t, v + 1)) {
                if j != i {
                    edges[i].insert(j);
                }
            }
        }
        for &(t, v) in &r.writes {
            if let Some(&j) = writer.get(&(t, v + 1)) {
                edges[i].insert(j);
            }
        }
    }
    // Kahn: whatever cannot be ordered is on or behind a cycle.
    let mut indegree = vec![0usize; records.len()];
    for e in &edges {
        for &j in e {
            indegree[j] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..records.len()).filter(|i| indegree[*i] == 0).collect();
    let mut ordered = 0;
    while let Some(i) = ready.pop() {
        ordered += 1;
        for &j in &edges[i] {
            indegree[j] -= 1;
            if indegree[j] == 0 {
                ready.push(j);
            }
        }
    }
    if ordered == records.len() {
        return Ok(());
    }
    let cycle = find_cycle(&edges, &indegree);
    let shown: Vec<String> = cycle.iter().map(|i| format!("{:#x}", records[*i].id)).collect();
    Err(format!(
        "{} of {} committed transactions are on or behind a dependency cycle, e.g. {}",
        records.len() - ordered,
        records.len(),
        shown.join(" -> ")
    ))
}

/// One cycle among the nodes Kahn could not order (each has an unordered predecessor).
fn find_cycle(edges: &[BTreeSet<usize>], indegree: &[usize]) -> Vec<usize> {
    let left: BTreeSet<usize> = (0..edges.len()).filter(|i| indegree[*i] > 0).collect();
    let mut pred: BTreeMap<usize, usize> = BTreeMap::new();
    for &i in &left {
        for &j in &edges[i] {
            if left.contains(&j) {
                pred.entry(j).or_insert(i);
            }
        }
    }
    let Some(&start) = left.iter().next() else { return Vec::new() };
    let mut seen = BTreeMap::new();
    let mut at = start;
    let mut path = Vec::new();
    while !seen.contains_key(&at) {
        seen.insert(at, path.len());
        path.push(at);
        at = pred[&at];
    }
    let mut cycle = path[seen[&at]..].to_vec();
    cycle.reverse();
    cycle
}

/// Reads tuples from memory after the run.
pub struct Db<'a> {
    pub memory: Memory<'a>,
    pub index: &'a BTreeMap<u64, u64>,
    /// The engine that ran (TO's tuples are wider: their timestamps follow the fields).
    pub cc: Cc,
    /// Words per tuple of each table (the workload's WAREHOUSE padding included).
    pub widths: [usize; super::tpcc::TABLES],
}

impl Db<'_> {
    /// The key's tuple address, if the index holds it and it is not deleted.
    fn live(&self, key: u64) -> Option<u64> {
        self.index.get(&key).copied().filter(|v| *v != TOMBSTONE)
    }

    fn tuple(&self, key: u64) -> Result<Vec<u64>, String> {
        let table = table_of(key);
        let v = self
            .live(key)
            .ok_or_else(|| format!("{} key {key:#x} is not in the index", TABLE_NAMES[table]))?;
        let t = TupleRef(v);
        let data = Layout::data(t.page().addr());
        let width = self.widths[table];
        let at = t.word(stored_width(self.cc, width));
        Ok((0..width).map(|i| (self.memory)(data.add(((at + i) * 8) as u64))).collect())
    }

    fn cc_free(&self, key: u64) -> Result<(), String> {
        let t = TupleRef(*self.index.get(&key).ok_or("missing key")?);
        let g = t.page().addr();
        if self.cc == Cc::To {
            // TO's per-tuple pending mark, in the write-timestamp word after the fields.
            let width = self.widths[table_of(key)];
            let at = t.word(stored_width(self.cc, width)) + width;
            let wts = (self.memory)(Layout::data(g).add((at * 8) as u64));
            if wts & X_BIT != 0 {
                return Err(format!(
                    "{} key {key:#x}: pending TO write mark {wts:#x} left",
                    TABLE_NAMES[table_of(key)]
                ));
            }
            return Ok(());
        }
        let cc = (self.memory)(Layout::data(g).add((CC * 8) as u64));
        if cc != 0 {
            return Err(format!(
                "page {} of {} key {key:#x}: CC word {cc:#x} still held",
                t.page(),
                TABLE_NAMES[table_of(key)]
            ));
        }
        Ok(())
    }
}

/// The TPC-C consistency conditions over the final database.
pub fn consistent(db: &Db, w: &TpccWorkload, s: &Stats) -> Result<(), String> {
    let (new_orders, paid_to, paid_by) = (&s.new_orders, &s.paid_to, &s.paid_by);
    let artifact = w.procedures == Procedures::Artifact;
    for (key, v) in db.index {
        if *v != TOMBSTONE {
            db.cc_free(*key)?;
        }
    }
    // Σ OL_AMOUNT of delivered lines per customer (w, d, c).
    let mut owed: BTreeMap<(u64, u64, u64), u64> = BTreeMap::new();
    let mut supplied: BTreeMap<u64, u64> = BTreeMap::new();
    let mut customer_paid: BTreeMap<u64, u64> = BTreeMap::new();
    for wh in 1..=w.warehouses as u64 {
        let warehouse = db.tuple(warehouse_key(wh))?;
        let mut districts = 0u64;
        for d in 1..=w.districts_per_warehouse as u64 {
            let district = db.tuple(district_key(wh, d))?;
            districts += district[D_YTD] - D_YTD_INIT;
            let orders = district[D_NEXT_O_ID] - 1;
            let initial = w.initial_orders as u64;
            let committed = new_orders.get(&(wh << 8 | d)).copied().unwrap_or(0);
            if orders != initial + committed {
                return Err(format!(
                    "district ({wh}, {d}): D_NEXT_O_ID - 1 = {orders} but {initial} loaded + {committed} NewOrders committed"
                ));
            }
            // Loaded orders below this were delivered at load and never had a NEW-ORDER row.
            let queued_from = initial - w.initial_new_orders as u64 + 1;
            let counted = s.delivered.get(&(wh << 8 | d)).copied().unwrap_or(0);
            // The authors' Delivery: the loaded orders its counter passed in the run (with
            // repeats: it wraps), their number per customer, and where the counter stands.
            let mut passed = BTreeSet::new();
            let mut deliveries_of: BTreeMap<u64, u64> = BTreeMap::new();
            if artifact {
                let dno = db.tuple(district_new_order_key(wh, d))?;
                let at = (queued_from - 1 + counted) % initial + 1;
                if dno[DNO_O_ID] != at {
                    return Err(format!(
                        "district ({wh}, {d}): DISTRICT-NEW-ORDER holds order {} but {counted} Deliveries from order {queued_from} (wrapping after {initial}) leave it at {at}",
                        dno[DNO_O_ID]
                    ));
                }
                for k in 0..counted {
                    let o = (queued_from - 1 + k) % initial + 1;
                    passed.insert(o);
                    let c = db.tuple(order_key(wh, d, o))?[O_C_ID];
                    *deliveries_of.entry(c).or_default() += 1;
                }
            }
            let mut delivered = 0u64;
            let mut undelivered_seen = None;
            for o in 1..=orders + 1 {
                let present = db.live(order_key(wh, d, o)).is_some();
                let no_key = db.index.contains_key(&new_order_key(wh, d, o));
                if present != (o <= orders) || no_key != (o <= orders && o >= queued_from) {
                    return Err(format!("district ({wh}, {d}): order {o} in ORDER {present}, a NEW-ORDER key {no_key}, D_NEXT_O_ID {}", orders + 1));
                }
                if o > orders {
                    break;
                }
                let order = db.tuple(order_key(wh, d, o))?;
                let is_delivered = carrier(&order) != 0;
                let queued = db.live(new_order_key(wh, d, o)).is_some();
                if artifact {
                    // Nothing deletes a NEW-ORDER row; the carrier is set on the orders
                    // delivered at load and those the counter passed, on no other.
                    let expected = o < queued_from || passed.contains(&o);
                    if queued != (o >= queued_from) || is_delivered != expected {
                        return Err(format!(
                            "order ({wh}, {d}, {o}): O_CARRIER_ID {}, a live NEW-ORDER row {queued}, but the DISTRICT-NEW-ORDER counter passed it: {}",
                            carrier(&order),
                            passed.contains(&o)
                        ));
                    }
                } else if queued == is_delivered {
                    return Err(format!(
                        "order ({wh}, {d}, {o}): O_CARRIER_ID {} but a live NEW-ORDER row {queued}",
                        carrier(&order)
                    ));
                }
                if queued {
                    let row = db.tuple(new_order_key(wh, d, o))?;
                    if row[NO_O_ID] != o {
                        return Err(format!("NEW-ORDER row ({wh}, {d}, {o}) holds NO_O_ID {}", row[NO_O_ID]));
                    }
                }
                match (is_delivered, undelivered_seen) {
                    _ if artifact => {}
                    (true, Some(u)) => {
                        return Err(format!(
                            "district ({wh}, {d}): order {o} delivered but the older order {u} is not (Delivery takes the oldest)"
                        ))
                    }
                    (true, None) => delivered += 1,
                    (false, None) => undelivered_seen = Some(o),
                    (false, Some(_)) => {}
                }
                let c = order[O_C_ID];
                if w.customer_order_index {
                    let at = db.live(customer_order_key(wh, d, c, o));
                    if at != db.live(order_key(wh, d, o)) {
                        return Err(format!(
                            "order ({wh}, {d}, {o}) of customer {c}: the customer-order index holds {at:?}"
                        ));
                    }
                }
                let n = order[O_OL_CNT];
                for ol in 1..=n + 1 {
                    let line = db.live(order_line_key(wh, d, o, ol)).is_some();
                    if line != (ol <= n) {
                        return Err(format!(
                            "order ({wh}, {d}, {o}): O_OL_CNT {n} but order line {ol} present: {line}"
                        ));
                    }
                    if ol > n {
                        break;
                    }
                    let l = db.tuple(order_line_key(wh, d, o, ol))?;
                    // The authors' Delivery never touches order lines: dated as loaded.
                    let dated = if artifact { o < queued_from } else { is_delivered };
                    if (l[OL_DELIVERY_D] != 0) != dated {
                        return Err(format!(
                            "order line ({wh}, {d}, {o}, {ol}): OL_DELIVERY_D {} but the order's carrier {}",
                            l[OL_DELIVERY_D],
                            carrier(&order)
                        ));
                    }
                    if is_delivered && !artifact {
                        *owed.entry((wh, d, c)).or_default() += l[OL_AMOUNT];
                    }
                    if o > initial {
                        *supplied.entry(l[OL_SUPPLY_W]).or_default() += l[OL_QUANTITY];
                    }
                }
            }
            let in_run = if artifact { counted } else { delivered.saturating_sub(queued_from - 1) };
            let mut delivery_cnt = 0;
            for c in 1..=w.customers_per_district as u64 {
                let customer = db.tuple(customer_key(wh, d, c))?;
                *customer_paid.entry(wh).or_default() += customer[C_YTD_PAYMENT] - C_YTD_PAYMENT_INIT;
                delivery_cnt += customer[C_DELIVERY_CNT];
                let due = deliveries_of.get(&c).copied().unwrap_or(0);
                if artifact && customer[C_DELIVERY_CNT] != due {
                    return Err(format!(
                        "customer ({wh}, {d}, {c}): C_DELIVERY_CNT {} but the DISTRICT-NEW-ORDER counter passed {due} of their orders",
                        customer[C_DELIVERY_CNT]
                    ));
                }
            }
            if in_run != counted || delivery_cnt != counted {
                return Err(format!(
                    "district ({wh}, {d}): {in_run} orders delivered in the run, committed Deliveries delivered {counted}, Σ C_DELIVERY_CNT = {delivery_cnt}"
                ));
            }
        }
        let ytd = warehouse[W_YTD] - W_YTD_INIT;
        if ytd != districts {
            return Err(format!(
                "warehouse {wh}: W_YTD grew by {ytd} but its districts' D_YTD by {districts}"
            ));
        }
        let paid = paid_to.get(&wh).copied().unwrap_or(0);
        if ytd != paid {
            return Err(format!(
                "warehouse {wh}: W_YTD grew by {ytd} but committed payments to it total {paid}"
            ));
        }
        let by = paid_by.get(&wh).copied().unwrap_or(0);
        let got = customer_paid.get(&wh).copied().unwrap_or(0);
        if got != by {
            return Err(format!(
                "warehouse {wh}'s customers: C_YTD_PAYMENT grew by {got} but they paid {by}"
            ));
        }
    }
    for wh in 1..=w.warehouses as u64 {
        for d in 1..=w.districts_per_warehouse as u64 {
            for c in 1..=w.customers_per_district as u64 {
                let customer = db.tuple(customer_key(wh, d, c))?;
                let sum = customer[C_BALANCE].wrapping_add(customer[C_YTD_PAYMENT]);
                let due = owed.get(&(wh, d, c)).copied().unwrap_or(0);
                if sum != due {
                    return Err(format!(
                        "customer ({wh}, {d}, {c}): C_BALANCE + C_YTD_PAYMENT = {} but their delivered order lines total {due}",
                        sum as i64
                    ));
                }
            }
        }
    }
    for wh in 1..=w.warehouses as u64 {
        let mut stock_ytd = 0;
        for i in 1..=w.items as u64 {
            stock_ytd += db.tuple(stock_key(wh, i))?[S_YTD];
        }
        let lines = supplied.get(&wh).copied().unwrap_or(0);
        if stock_ytd != lines {
            return Err(format!(
                "warehouse {wh}: Σ S_YTD = {stock_ytd} but its order lines supplied {lines}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(id: u64, reads: &[(u64, u64)], writes: &[(u64, u64)]) -> TxnRecord {
        TxnRecord { id, reads: reads.to_vec(), writes: writes.to_vec() }
    }

    #[test]
    fn a_serial_history_passes() {
        let h = [txn(1, &[(7, 0)], &[(7, 1)]), txn(2, &[(7, 1), (8, 0)], &[(7, 2)]), txn(3, &[(8, 0)], &[])];
        assert_eq!(serializable(&h), Ok(()));
    }

    #[test]
    fn write_skew_is_a_cycle() {
        // Each reads both tuples at version 0 and writes a different one: T1 -rw-> T2 -rw-> T1.
        let h = [txn(1, &[(7, 0), (8, 0)], &[(7, 1)]), txn(2, &[(7, 0), (8, 0)], &[(8, 1)])];
        let e = serializable(&h).unwrap_err();
        assert!(e.contains("dependency cycle"), "{e}");
    }

    #[test]
    fn read_skew_is_a_cycle() {
        // T2 reads tuple 7 before T1's write and tuple 8 after it.
        let h = [txn(1, &[(7, 0), (8, 0)], &[(7, 1), (8, 1)]), txn(2, &[(7, 0), (8, 1)], &[])];
        assert!(serializable(&h).unwrap_err().contains("cycle"));
    }

    #[test]
    fn lost_update_and_dirty_read_are_named() {
        let lost = [txn(1, &[(7, 0)], &[(7, 1)]), txn(2, &[(7, 0)], &[(7, 1)])];
        assert!(serializable(&lost).unwrap_err().contains("lost update"));
        let dirty = [txn(1, &[(7, 3)], &[])];
        assert!(serializable(&dirty).unwrap_err().contains("no committed transaction installed"));
    }
}
