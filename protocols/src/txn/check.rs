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
//! **TPC-C consistency** (clause 3.3.2, the conditions NewOrder and Payment can break), read from
//! memory after a quiesced run: W_YTD = initial + Σ D_YTD increments of its districts (1); each
//! district's D_NEXT_O_ID − 1 = its loaded + committed orders = its ORDER rows 1..D_NEXT_O_ID − 1,
//! NEW-ORDER rows for the committed ones (2, 3); every order's ORDER-LINE rows number O_OL_CNT
//! (6); Σ S_YTD per warehouse = Σ OL_QUANTITY it supplied to the run's orders; Σ C_YTD_PAYMENT increments =
//! Σ W_YTD increments = the committed payments; every CC word free.

use std::collections::{BTreeMap, BTreeSet};

use super::engine::TxnRecord;
use super::heap::{TupleRef, CC};
use super::tpcc::*;
use crate::harness::Memory;
use crate::selcc::Layout;

pub fn serializable(records: &[TxnRecord]) -> Result<(), String> {
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
}

impl Db<'_> {
    fn tuple(&self, key: u64) -> Result<Vec<u64>, String> {
        let table = table_of(key);
        let v = *self
            .index
            .get(&key)
            .ok_or_else(|| format!("{} key {key:#x} is not in the index", TABLE_NAMES[table]))?;
        let t = TupleRef(v);
        let data = Layout::data(t.page().addr());
        let width = WIDTH[table];
        Ok((0..width).map(|i| (self.memory)(data.add(((t.word(width) + i) * 8) as u64))).collect())
    }

    fn cc_free(&self, key: u64) -> Result<(), String> {
        let t = TupleRef(*self.index.get(&key).ok_or("missing key")?);
        let g = t.page().addr();
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
pub fn consistent(
    db: &Db,
    w: &TpccWorkload,
    new_orders: &BTreeMap<u64, u64>,
    paid_to: &BTreeMap<u64, u64>,
    paid_by: &BTreeMap<u64, u64>,
) -> Result<(), String> {
    for key in db.index.keys() {
        db.cc_free(*key)?;
    }
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
            for o in 1..=orders + 1 {
                let present = db.index.contains_key(&order_key(wh, d, o));
                let queued = db.index.contains_key(&new_order_key(wh, d, o));
                if present != (o <= orders) || queued != (o <= orders && o > initial) {
                    return Err(format!("district ({wh}, {d}): order {o} in ORDER {present}, in NEW-ORDER {queued}, D_NEXT_O_ID {}", orders + 1));
                }
                if o > orders {
                    break;
                }
                let order = db.tuple(order_key(wh, d, o))?;
                let n = order[O_OL_CNT];
                for ol in 1..=n + 1 {
                    let line = db.index.contains_key(&order_line_key(wh, d, o, ol));
                    if line != (ol <= n) {
                        return Err(format!(
                            "order ({wh}, {d}, {o}): O_OL_CNT {n} but order line {ol} present: {line}"
                        ));
                    }
                    if ol <= n && o > initial {
                        let l = db.tuple(order_line_key(wh, d, o, ol))?;
                        *supplied.entry(l[OL_SUPPLY_W]).or_default() += l[OL_QUANTITY];
                    }
                }
            }
            for c in 1..=w.customers_per_district as u64 {
                let customer = db.tuple(customer_key(wh, d, c))?;
                *customer_paid.entry(wh).or_default() += customer[C_YTD_PAYMENT] - C_YTD_PAYMENT_INIT;
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
