//! One TPC-C terminal thread: NewOrder, Payment, OrderStatus, Delivery and StockLevel (clauses
//! 2.4–2.8) over the engine, retried after an abort with a randomised exponential backoff,
//! counted, and recorded for the checkers. Each terminal is bound to a home warehouse (thread
//! number modulo the warehouses), or draws a warehouse per transaction (`warehouse_choice`).
//!
//! [CHOICE] Items and customers are drawn uniformly (not NURand), customers by id (not by last
//! name), NewOrder never rolls back on an unused item; HISTORY rows are heap inserts without an
//! index (TPC-C gives them no primary key). Delivery runs in the terminal's transaction (not
//! queued, clause 2.7.2's deferred mode), all districts in one transaction. `procedures:
//! artifact` runs the authors' reduced Delivery, OrderStatus and StockLevel instead
//! ([`TpccWorkload::procedures`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rand_chacha::rand_core::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::engine::{Engine, Fail, Txn, TxnRecord, TxnResult};
use super::tpcc::*;
use super::twopc::{update_stock, Partitioning, RemoteLines};
use crate::blink::{Pages, SelccPages};
use crate::common::error::ErrorSlot;
use crate::nic::{Nic, NodeId};
use crate::workload::zipf::unit_f64;

/// Uniform in `lo..=hi`.
fn between(rng: &mut ChaCha8Rng, lo: u64, hi: u64) -> u64 {
    lo + (unit_f64(rng.next_u64()) * (hi - lo + 1) as f64) as u64 % (hi - lo + 1)
}

pub const KINDS: [&str; 5] = ["new_order", "payment", "order_status", "delivery", "stock_level"];

/// Counters of one kind of transaction.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KindStats {
    pub committed: u64,
    pub aborts: u64,
    pub gave_up: u64,
    pub latency_ns_total: u64,
}

/// What a compute node's terminals measured and recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub kinds: [KindStats; 5],
    pub latencies: [Vec<u64>; 5],
    pub first_start_ns: Option<u64>,
    pub last_end_ns: u64,
    pub latch_sections: u64,
    /// Committed NewOrders per district (`w << 8 | d`).
    pub new_orders: BTreeMap<u64, u64>,
    /// Committed payment amounts per paying warehouse and per customer warehouse.
    pub paid_to: BTreeMap<u64, u64>,
    pub paid_by: BTreeMap<u64, u64>,
    /// Orders committed Deliveries delivered, per district (`w << 8 | d`).
    #[serde(default)]
    pub delivered: BTreeMap<u64, u64>,
    /// Committed transactions' accesses (when checking).
    pub records: Vec<TxnRecord>,
    /// Committed transactions that ran two-phase commit (partitioned, cross-shard).
    #[serde(default)]
    pub distributed: u64,
    /// Log flushes (storage writes) of the node's write-ahead log.
    #[serde(default)]
    pub wal_flushes: u64,
    /// Why attempts aborted.
    pub abort_reasons: BTreeMap<String, u64>,
}

impl Stats {
    pub fn merge(&mut self, o: &Stats) {
        for i in 0..KINDS.len() {
            let (a, b) = (&mut self.kinds[i], &o.kinds[i]);
            a.committed += b.committed;
            a.aborts += b.aborts;
            a.gave_up += b.gave_up;
            a.latency_ns_total += b.latency_ns_total;
            self.latencies[i].extend_from_slice(&o.latencies[i]);
        }
        self.first_start_ns = match (self.first_start_ns, o.first_start_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_end_ns = self.last_end_ns.max(o.last_end_ns);
        self.latch_sections += o.latch_sections;
        self.wal_flushes += o.wal_flushes;
        self.distributed += o.distributed;
        for (m, n) in [
            (&mut self.new_orders, &o.new_orders),
            (&mut self.paid_to, &o.paid_to),
            (&mut self.paid_by, &o.paid_by),
            (&mut self.delivered, &o.delivered),
        ] {
            for (k, v) in n {
                *m.entry(*k).or_default() += v;
            }
        }
        self.records.extend_from_slice(&o.records);
        for (k, v) in &o.abort_reasons {
            *self.abort_reasons.entry(k.clone()).or_default() += v;
        }
    }
}

/// What every terminal of one compute node shares.
pub struct Shared {
    pub stats: Mutex<Stats>,
    pub done: AtomicU64,
    pub errors: ErrorSlot,
}

/// A terminal's parameters.
pub struct Terminal {
    pub workload: Arc<TpccWorkload>,
    /// Which node owns which warehouse, and this terminal's node (its index among the compute
    /// nodes) and thread; `partitioned`: stock of other nodes' warehouses goes through 2PC.
    pub partitioning: Partitioning,
    pub node_index: u64,
    pub thread: u32,
    pub compute: Vec<NodeId>,
    pub partitioned: bool,
    pub home: u64,
    pub txns: u64,
    pub record: bool,
    pub drain_at_end: bool,
}

enum Input {
    NewOrder { d: u64, c: u64, lines: Vec<(u64, u64, u64)> },
    Payment { d: u64, c_w: u64, c_d: u64, c: u64, amount: u64 },
    OrderStatus { d: u64, c: u64 },
    Delivery { carrier: u64 },
    StockLevel { d: u64, threshold: u64 },
}

impl Input {
    fn kind(&self) -> usize {
        match self {
            Input::NewOrder { .. } => 0,
            Input::Payment { .. } => 1,
            Input::OrderStatus { .. } => 2,
            Input::Delivery { .. } => 3,
            Input::StockLevel { .. } => 4,
        }
    }
}

fn draw(w: &TpccWorkload, home: u64, p: &Partitioning, rng: &mut ChaCha8Rng) -> Input {
    let m = &w.mix;
    let d = between(rng, 1, w.districts_per_warehouse as u64);
    let pick = unit_f64(rng.next_u64()) * m.total();
    // The ranges, in order: NewOrder, Payment, OrderStatus, Delivery, StockLevel.
    let updates = m.new_order + m.payment;
    if pick >= updates + m.order_status + m.delivery {
        return Input::StockLevel { d, threshold: between(rng, 10, 20) };
    }
    if pick >= updates + m.order_status {
        return Input::Delivery { carrier: between(rng, 1, 10) };
    }
    if pick >= updates {
        return Input::OrderStatus { d, c: between(rng, 1, w.customers_per_district as u64) };
    }
    let other = |rng: &mut ChaCha8Rng| {
        let o = between(rng, 1, (w.warehouses as u64) - 1);
        if o >= home {
            o + 1
        } else {
            o
        }
    };
    if pick < w.mix.new_order {
        let c = between(rng, 1, w.customers_per_district as u64);
        let n = between(rng, w.ol_cnt[0] as u64, w.ol_cnt[1] as u64) as usize;
        let mut lines: Vec<(u64, u64, u64)> = Vec::with_capacity(n);
        // Fig. 19b: one line from another node's warehouse, or none.
        let distributed = w.distributed_ratio.map(|r| {
            let mine = p.owner(home);
            let cross = p.terminals > p.threads && unit_f64(rng.next_u64()) < r;
            let mut far = home;
            while cross && p.owner(far) == mine {
                far = between(rng, 1, w.warehouses as u64);
            }
            far
        });
        while lines.len() < n {
            let i = between(rng, 1, w.items as u64);
            if lines.iter().any(|l| l.0 == i) {
                continue;
            }
            if let Some(far) = distributed {
                let supply = if lines.is_empty() { far } else { home };
                lines.push((i, supply, between(rng, 1, 10)));
                continue;
            }
            let supply = if w.warehouses > 1 && unit_f64(rng.next_u64()) < w.remote_item_ratio {
                other(rng)
            } else {
                home
            };
            lines.push((i, supply, between(rng, 1, 10)));
        }
        Input::NewOrder { d, c, lines }
    } else {
        let (c_w, c_d) = if w.warehouses > 1 && unit_f64(rng.next_u64()) < w.remote_payment_ratio {
            (other(rng), between(rng, 1, w.districts_per_warehouse as u64))
        } else {
            (home, d)
        };
        let c = between(rng, 1, w.customers_per_district as u64);
        Input::Payment { d, c_w, c_d, c, amount: between(rng, 100, 500_000) }
    }
}

/// NewOrder (clause 2.4), in the authors' access order (`tpcc/TpccProcedure.h`
/// NewOrderProcedure): the ITEMs, then the STOCKs, and only then WAREHOUSE (S), DISTRICT (X,
/// next order id) and CUSTOMER (S), then the inserts — so the WAREHOUSE and DISTRICT latches are
/// held only for the transaction's tail. Partitioned (`remote` given): the stock of another
/// node's warehouse is not touched here but collected per owner node for 2PC.
#[allow(clippy::too_many_arguments)]
async fn new_order<P: super::pages::TxnPages>(
    e: &mut Engine<P>,
    x: &mut Txn<P::Guard>,
    w: u64,
    d: u64,
    c: u64,
    lines: &[(u64, u64, u64)],
    mut remote: Option<(&Partitioning, u64, &mut BTreeMap<u64, RemoteLines>)>,
) -> TxnResult<()> {
    let mut prices = Vec::with_capacity(lines.len());
    for &(i, _, _) in lines {
        let it = e.locate(item_key(i, if e.replicated_items { w } else { 0 })).await?;
        prices.push(e.read(x, it, e.widths[ITEM], false).await?[I_PRICE]);
    }
    for &(i, supply, quantity) in lines {
        match &mut remote {
            Some((p, mine, out)) if p.owner(supply) != *mine => {
                out.entry(p.owner(supply)).or_default().push((supply, i, quantity));
            }
            _ => {
                let st = e.locate(stock_key(supply, i)).await?;
                let mut stock = e.read(x, st, e.widths[STOCK], true).await?;
                update_stock(&mut stock, quantity, supply != w);
                e.write(x, st, stock);
            }
        }
    }
    let wt = e.locate(warehouse_key(w)).await?;
    let _tax = e.read(x, wt, e.widths[WAREHOUSE], false).await?[W_TAX];
    let dt = e.locate(district_key(w, d)).await?;
    let mut district = e.read(x, dt, e.widths[DISTRICT], true).await?;
    let o = district[D_NEXT_O_ID];
    district[D_NEXT_O_ID] += 1;
    e.write(x, dt, district);
    let ct = e.locate(customer_key(w, d, c)).await?;
    let _discount = e.read(x, ct, e.widths[CUSTOMER], false).await?[C_DISCOUNT];
    let all_local = lines.iter().all(|l| l.1 == w) as u64;
    for (n, (&(i, supply, quantity), price)) in lines.iter().zip(prices).enumerate() {
        let ol = n as u64 + 1;
        e.insert(
            x,
            ORDER_LINE,
            vec![order_line_key(w, d, o, ol)],
            e.widths[ORDER_LINE],
            vec![i, supply, quantity, quantity * price],
        );
    }
    let mut keys = vec![order_key(w, d, o)];
    if e.customer_order_index {
        keys.push(customer_order_key(w, d, c, o));
    }
    e.insert(x, ORDER, keys, e.widths[ORDER], vec![c, lines.len() as u64, all_local]);
    e.insert(x, NEW_ORDER, vec![new_order_key(w, d, o)], e.widths[NEW_ORDER], vec![o]);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn payment<P: super::pages::TxnPages>(
    e: &mut Engine<P>,
    x: &mut Txn<P::Guard>,
    w: u64,
    d: u64,
    c_w: u64,
    c_d: u64,
    c: u64,
    amount: u64,
) -> TxnResult<()> {
    let wt = e.locate(warehouse_key(w)).await?;
    let mut warehouse = e.read(x, wt, e.widths[WAREHOUSE], true).await?;
    warehouse[W_YTD] += amount;
    e.write(x, wt, warehouse);
    let dt = e.locate(district_key(w, d)).await?;
    let mut district = e.read(x, dt, e.widths[DISTRICT], true).await?;
    district[D_YTD] += amount;
    e.write(x, dt, district);
    let ct = e.locate(customer_key(c_w, c_d, c)).await?;
    let mut customer = e.read(x, ct, e.widths[CUSTOMER], true).await?;
    customer[C_BALANCE] = customer[C_BALANCE].wrapping_sub(amount);
    customer[C_YTD_PAYMENT] += amount;
    customer[C_PAYMENT_CNT] += 1;
    e.write(x, ct, customer);
    e.insert(x, HISTORY, vec![], e.widths[HISTORY], vec![c, c_w, amount, w | d << 16]);
    Ok(())
}

/// OrderStatus (clause 2.6): the customer, their newest order (through the customer-order
/// index) and its order lines. Read-only. A customer with no order reads only the customer.
async fn order_status<P: super::pages::TxnPages>(
    e: &mut Engine<P>,
    x: &mut Txn<P::Guard>,
    w: u64,
    d: u64,
    c: u64,
) -> TxnResult<()> {
    let ct = e.locate(customer_key(w, d, c)).await?;
    let _balance = e.read(x, ct, e.widths[CUSTOMER], false).await?[C_BALANCE];
    let from = customer_order_key(w, d, c, MAX_ORDERS);
    let newest = e.tree.scan(from, 1).await?;
    let Some(&(k, v)) = newest.first() else { return Ok(()) };
    if k > customer_order_key(w, d, c, 0) {
        return Ok(());
    }
    let o = MAX_ORDERS - (k & MAX_ORDERS);
    read_order_and_lines(e, x, super::heap::TupleRef(v), w, d, o).await
}

/// Read order `o`'s ORDER row (at `ot`) and its order lines (OrderStatus, both variants).
async fn read_order_and_lines<P: super::pages::TxnPages>(
    e: &mut Engine<P>,
    x: &mut Txn<P::Guard>,
    ot: super::heap::TupleRef,
    w: u64,
    d: u64,
    o: u64,
) -> TxnResult<()> {
    let order = e.read(x, ot, e.widths[ORDER], false).await?;
    for ol in 1..=order[O_OL_CNT] {
        let lt = e.locate(order_line_key(w, d, o, ol)).await?;
        let _line = e.read(x, lt, e.widths[ORDER_LINE], false).await?;
    }
    Ok(())
}

/// Delivery (clause 2.7): for every district of the warehouse, its oldest undelivered order
/// (the first live NEW-ORDER entry of the index): delete the NEW-ORDER row, set the order's
/// carrier, date its lines, credit the customer with their amounts. A district without one is
/// skipped. Returns the districts delivered.
async fn delivery<P: super::pages::TxnPages>(
    e: &mut Engine<P>,
    x: &mut Txn<P::Guard>,
    w: u64,
    districts: u64,
    carrier_id: u64,
) -> TxnResult<Vec<u64>> {
    let mut done = Vec::new();
    for d in 1..=districts {
        let Some((nk, nt)) = oldest_new_order(e, w, d).await? else { continue };
        let mut row = e.read(x, nt, e.widths[NEW_ORDER], true).await?;
        if row[NO_O_ID] == 0 && e.mutant != super::mutants::Mutant::DeliveryIgnoresDeleted {
            // Delivered by a transaction that committed after our index scan: retry.
            return Err(super::engine::Fail::Abort("Delivery: the oldest new order was delivered meanwhile"));
        }
        let o = nk & 0xffff_ffff;
        row[NO_O_ID] = 0;
        e.write(x, nt, row);
        e.delete_index(x, nk);
        let ot = e.locate(order_key(w, d, o)).await?;
        let mut order = e.read(x, ot, e.widths[ORDER], true).await?;
        order[O_LOCAL_CARRIER] = with_carrier(order[O_LOCAL_CARRIER], carrier_id);
        let (c, lines) = (order[O_C_ID], order[O_OL_CNT]);
        e.write(x, ot, order);
        let mut amount = 0u64;
        for ol in 1..=lines {
            let lt = e.locate(order_line_key(w, d, o, ol)).await?;
            let mut line = e.read(x, lt, e.widths[ORDER_LINE], true).await?;
            amount += line[OL_AMOUNT];
            line[OL_DELIVERY_D] = 1 + e.tree.pages.now() / 1_000;
            e.write(x, lt, line);
        }
        let ct = e.locate(customer_key(w, d, c)).await?;
        let mut customer = e.read(x, ct, e.widths[CUSTOMER], true).await?;
        customer[C_BALANCE] = customer[C_BALANCE].wrapping_add(amount);
        customer[C_DELIVERY_CNT] += 1;
        e.write(x, ct, customer);
        done.push(d);
    }
    Ok(done)
}

/// The district's first NEW-ORDER index entry that is not a tombstone: (key, tuple).
async fn oldest_new_order<P: super::pages::TxnPages>(
    e: &mut Engine<P>,
    w: u64,
    d: u64,
) -> TxnResult<Option<(u64, super::heap::TupleRef)>> {
    let end = new_order_key(w, d + 1, 0);
    let mut from = new_order_key(w, d, 0);
    loop {
        let batch = e.tree.scan(from, 16).await?;
        for &(k, v) in &batch {
            if k >= end {
                return Ok(None);
            }
            if v != TOMBSTONE {
                return Ok(Some((k, super::heap::TupleRef(v))));
            }
        }
        match batch.last() {
            Some(&(k, _)) if batch.len() == 16 => from = k + 1,
            _ => return Ok(None),
        }
    }
}

/// StockLevel (clause 2.8): the district's next order id, the order lines of its last 20
/// orders, the stock of their items; counts items below the threshold. Read-only. Order lines
/// an aborted or uncommitted NewOrder never indexed are absent and skipped.
async fn stock_level<P: super::pages::TxnPages>(
    e: &mut Engine<P>,
    x: &mut Txn<P::Guard>,
    w: u64,
    d: u64,
    threshold: u64,
) -> TxnResult<u64> {
    let dt = e.locate(district_key(w, d)).await?;
    let next = e.read(x, dt, e.widths[DISTRICT], false).await?[D_NEXT_O_ID];
    let mut items = std::collections::BTreeSet::new();
    for o in next.saturating_sub(20).max(1)..next {
        for ol in 1..=15 {
            let v = e.tree.lookup(order_line_key(w, d, o, ol)).await?;
            if v == 0 {
                break;
            }
            let line = e.read(x, super::heap::TupleRef(v), e.widths[ORDER_LINE], false).await?;
            items.insert(line[OL_I_ID]);
        }
    }
    let mut low = 0;
    for i in items {
        let st = e.locate(stock_key(w, i)).await?;
        low += (e.read(x, st, e.widths[STOCK], false).await?[S_QUANTITY] < threshold) as u64;
    }
    Ok(low)
}

/// The authors' Delivery (`procedures: artifact`, `tpcc/TpccProcedure.h` DeliveryProcedure), in
/// their order: for every district, the DISTRICT-NEW-ORDER counter row X (the order to deliver;
/// the counter advances, wrapping from the last loaded order to 1); then for every district
/// that ORDER row X (carrier set, customer read); no ORDER-LINE access (their order-line loop
/// runs zero times, `no_o_ol_cnt = 0`); then for every district the order's CUSTOMER X
/// (C_BALANCE + the zero amount; C_DELIVERY_CNT counted). Every district is delivered.
async fn delivery_artifact<P: super::pages::TxnPages>(
    e: &mut Engine<P>,
    x: &mut Txn<P::Guard>,
    w: u64,
    districts: u64,
    carrier_id: u64,
    loaded: u64,
) -> TxnResult<Vec<u64>> {
    let mut orders = Vec::with_capacity(districts as usize);
    for d in 1..=districts {
        let nt = e.locate(district_new_order_key(w, d)).await?;
        let mut row = e.read(x, nt, e.widths[DISTRICT_NEW_ORDER], true).await?;
        let o = row[DNO_O_ID];
        assert!((1..=loaded).contains(&o), "DISTRICT-NEW-ORDER ({w}, {d}) holds order {o}");
        row[DNO_O_ID] = if o < loaded { o + 1 } else { 1 };
        e.write(x, nt, row);
        orders.push(o);
    }
    let mut customers = Vec::with_capacity(orders.len());
    for (d, &o) in (1..=districts).zip(&orders) {
        let ot = e.locate(order_key(w, d, o)).await?;
        let mut order = e.read(x, ot, e.widths[ORDER], true).await?;
        order[O_LOCAL_CARRIER] = with_carrier(order[O_LOCAL_CARRIER], carrier_id);
        customers.push(order[O_C_ID]);
        e.write(x, ot, order);
    }
    for (d, &c) in (1..=districts).zip(&customers) {
        let ct = e.locate(customer_key(w, d, c)).await?;
        let mut customer = e.read(x, ct, e.widths[CUSTOMER], true).await?;
        customer[C_DELIVERY_CNT] += 1;
        e.write(x, ct, customer);
    }
    Ok((1..=districts).collect())
}

/// The authors' OrderStatus (`procedures: artifact`, `tpcc/TpccProcedure.h`
/// OrderStatusProcedure): the ORDER row whose id is the customer's id ("Use c_id to replace
/// o_id to avoid the secondary" index; the loaded order c_id exists) and its order lines, all
/// read; no CUSTOMER read.
async fn order_status_artifact<P: super::pages::TxnPages>(
    e: &mut Engine<P>,
    x: &mut Txn<P::Guard>,
    w: u64,
    d: u64,
    c: u64,
) -> TxnResult<()> {
    let ot = e.locate(order_key(w, d, c)).await?;
    read_order_and_lines(e, x, ot, w, d, c).await
}

/// The authors' StockLevel (`procedures: artifact`, `tpcc/TpccProcedure.h`
/// StockLevelProcedure): DISTRICT read (D_NEXT_O_ID), then the last 5 ORDER rows read (their
/// O_OL_CNT summed); no ORDER-LINE or STOCK read. An order below D_NEXT_O_ID not inserted yet
/// (its NewOrder not committed) aborts the attempt, as theirs.
async fn stock_level_artifact<P: super::pages::TxnPages>(
    e: &mut Engine<P>,
    x: &mut Txn<P::Guard>,
    w: u64,
    d: u64,
) -> TxnResult<u64> {
    let dt = e.locate(district_key(w, d)).await?;
    let next = e.read(x, dt, e.widths[DISTRICT], false).await?[D_NEXT_O_ID];
    let mut count = 0;
    for o in next.saturating_sub(5).max(1)..next {
        let v = e.tree.lookup(order_key(w, d, o)).await?;
        if v == 0 {
            return Err(Fail::Abort("StockLevel: an order below D_NEXT_O_ID is not inserted yet"));
        }
        count += e.read(x, super::heap::TupleRef(v), e.widths[ORDER], false).await?[O_OL_CNT];
    }
    Ok(count)
}

/// Run the terminal's transactions; the node's last terminal drains its cache when asked.
pub async fn run_terminal<N: Nic>(
    mut e: Engine<SelccPages<N>>,
    t: Terminal,
    mut rng: ChaCha8Rng,
    shared: Arc<Shared>,
) {
    let node = e.tree.pages.node.clone();
    let w = t.workload.clone();
    let artifact = w.procedures == Procedures::Artifact;
    let mut local = Stats::default();
    'txns: for seq in 0..t.txns {
        if shared.errors.is_set() || node.errors.is_set() {
            break;
        }
        let home = match w.warehouse_choice {
            WarehouseChoice::Home => t.home,
            WarehouseChoice::Random => between(&mut rng, 1, w.warehouses as u64),
        };
        let input = draw(&w, home, &t.partitioning, &mut rng);
        let kind = input.kind();
        let mut delivered = Vec::new();
        let start = e.tree.pages.now();
        let mut attempt = 0u32;
        loop {
            let mut remote: BTreeMap<u64, RemoteLines> = BTreeMap::new();
            let result = match e.begin().await {
                Ok(mut x) => {
                    let body = match &input {
                        Input::NewOrder { d, c, lines } => {
                            let part = t.partitioned.then_some((&t.partitioning, t.node_index, &mut remote));
                            new_order(&mut e, &mut x, home, *d, *c, lines, part).await
                        }
                        Input::Payment { d, c_w, c_d, c, amount } => {
                            payment(&mut e, &mut x, home, *d, *c_w, *c_d, *c, *amount).await
                        }
                        Input::OrderStatus { d, c } if artifact => {
                            order_status_artifact(&mut e, &mut x, home, *d, *c).await
                        }
                        Input::OrderStatus { d, c } => order_status(&mut e, &mut x, home, *d, *c).await,
                        Input::Delivery { carrier } => {
                            let districts = w.districts_per_warehouse as u64;
                            let done = if artifact {
                                let loaded = w.initial_orders as u64;
                                delivery_artifact(&mut e, &mut x, home, districts, *carrier, loaded).await
                            } else {
                                delivery(&mut e, &mut x, home, districts, *carrier).await
                            };
                            done.map(|done| {
                                delivered = done;
                            })
                        }
                        Input::StockLevel { d, .. } if artifact => {
                            stock_level_artifact(&mut e, &mut x, home, *d).await.map(|_| ())
                        }
                        Input::StockLevel { d, threshold } => {
                            stock_level(&mut e, &mut x, home, *d, *threshold).await.map(|_| ())
                        }
                    };
                    match body {
                        Ok(()) if !remote.is_empty() => {
                            let id = e.owner << 32 | seq;
                            super::twopc::commit(&mut e, x, id, t.thread, &t.compute, &remote).await
                        }
                        Ok(()) => e.commit(x, e.owner << 32 | seq).await,
                        Err(f) => match e.abort(x).await {
                            Ok(()) => Err(f),
                            Err(err) => Err(err),
                        },
                    }
                }
                Err(f) => Err(f),
            };
            match result {
                Ok(record) => {
                    local.distributed += !remote.is_empty() as u64;
                    let end = e.tree.pages.now();
                    let k = &mut local.kinds[kind];
                    k.committed += 1;
                    k.latency_ns_total += end - start;
                    local.latencies[kind].push(end - start);
                    local.first_start_ns = Some(local.first_start_ns.map_or(start, |s| s.min(start)));
                    local.last_end_ns = local.last_end_ns.max(end);
                    match &input {
                        Input::NewOrder { d, .. } => *local.new_orders.entry(home << 8 | d).or_default() += 1,
                        Input::Payment { c_w, amount, .. } => {
                            *local.paid_to.entry(home).or_default() += amount;
                            *local.paid_by.entry(*c_w).or_default() += amount;
                        }
                        Input::Delivery { .. } => {
                            for d in &delivered {
                                *local.delivered.entry(home << 8 | d).or_default() += 1;
                            }
                        }
                        Input::OrderStatus { .. } | Input::StockLevel { .. } => {}
                    }
                    if t.record {
                        local.records.push(record);
                    }
                    break;
                }
                Err(Fail::Abort(why)) => {
                    local.kinds[kind].aborts += 1;
                    *local.abort_reasons.entry(why.to_string()).or_default() += 1;
                    attempt += 1;
                    if attempt > w.max_retries {
                        local.kinds[kind].gave_up += 1;
                        break;
                    }
                    let mean = w.backoff_ns << attempt.min(5);
                    let wait = between(&mut rng, 0, 2 * mean);
                    e.tree.pages.backoff(wait).await;
                }
                Err(Fail::Error(err)) => {
                    shared.errors.record(err);
                    break 'txns;
                }
            }
        }
        shared.done.fetch_add(1, Ordering::Relaxed);
    }
    local.latch_sections = e.latch_sections;
    shared.stats.lock().unwrap_or_else(|p| p.into_inner()).merge(&local);
    let last = {
        let mut running = node.workers_running.lock().unwrap_or_else(|p| p.into_inner());
        *running -= 1;
        *running == 0
    };
    if last && t.drain_at_end {
        let _ = node.drain(&e.tree.pages.worker.nic).await;
    }
}
