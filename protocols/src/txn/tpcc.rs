//! TPC-C's schema as this slice uses it (all five transactions), scaled down (the scenario states
//! the scale): the tables, their tuple widths (TPC-C's row sizes, clause 1.3, rounded up to
//! words, plus the version word), the fields the transactions touch, the B-link tree's composite
//! keys (plus one secondary index, customer → orders, for OrderStatus), and the initial
//! population.
//!
//! [CHOICE] Each district starts with `initial_orders` orders (TPC-C: 3,000, one per customer)
//! and their order lines (quantity 5, supplied by the home warehouse, S_YTD left 0 as TPC-C
//! does); the last `initial_new_orders` of them (TPC-C: 900) are undelivered (a NEW-ORDER row,
//! no carrier, order lines with an amount and no delivery date), the others delivered (carrier
//! and delivery date set, amount 0, as clause 4.3.3.1); HISTORY starts empty.
//!
//! A NEW-ORDER row is deleted by Delivery in two steps: inside the transaction its NO_O_ID word
//! is zeroed (a write of the tuple, so concurrent Deliveries conflict on it), and at commit its
//! index entry is overwritten with [`TOMBSTONE`] (the B-link tree has no delete).

use serde::{Deserialize, Serialize};

use crate::common::shape::ShapeFields;
use crate::harness::Problem;

pub const WAREHOUSE: usize = 1;
pub const DISTRICT: usize = 2;
pub const CUSTOMER: usize = 3;
pub const ITEM: usize = 4;
pub const STOCK: usize = 5;
pub const ORDER: usize = 6;
pub const NEW_ORDER: usize = 7;
pub const ORDER_LINE: usize = 8;
pub const HISTORY: usize = 9;
/// Index-only: the secondary index customer → orders (newest first), for OrderStatus.
pub const CUSTOMER_ORDER: usize = 10;
/// The authors' per-district Delivery counter (`procedures: artifact` only): the id of the next
/// order their Delivery delivers (`tpcc/TpccInitiator.h` `InitDistrictNewOrderSchema`).
pub const DISTRICT_NEW_ORDER: usize = 11;
pub const TABLES: usize = 12;

/// The index value of a deleted row (never a tuple address).
pub const TOMBSTONE: u64 = u64::MAX;

/// Words per tuple: 1 version word + ceil(TPC-C row bytes / 8): WAREHOUSE 89 B, DISTRICT 95 B,
/// CUSTOMER 655 B, ITEM 82 B, STOCK 306 B, ORDER 24 B, NEW-ORDER 8 B, ORDER-LINE 54 B, HISTORY 46 B.
/// WAREHOUSE's width here is without the padding column ([`TpccWorkload::widths`] adds it).
/// DISTRICT-NEW-ORDER (the authors' table, not TPC-C's): D_ID, W_ID, O_ID (4 bytes each) and
/// its padding column `c_data VARCHAR(480)` ("Reduce the contention for update"), 492 B — four
/// rows per 2 KiB GCL, as theirs.
pub const WIDTH: [usize; TABLES] = [0, 13, 13, 83, 12, 40, 4, 2, 8, 7, 0, 63];

pub const TABLE_NAMES: [&str; TABLES] = [
    "",
    "warehouse",
    "district",
    "customer",
    "item",
    "stock",
    "order",
    "new-order",
    "order-line",
    "history",
    "customer-order",
    "district-new-order",
];

// Field positions (word 0 is the version).
pub const W_YTD: usize = 1;
pub const W_TAX: usize = 2;
pub const D_YTD: usize = 1;
pub const D_TAX: usize = 2;
pub const D_NEXT_O_ID: usize = 3;
pub const C_BALANCE: usize = 1;
pub const C_YTD_PAYMENT: usize = 2;
pub const C_PAYMENT_CNT: usize = 3;
pub const C_DISCOUNT: usize = 4;
pub const C_DELIVERY_CNT: usize = 5;
pub const I_PRICE: usize = 1;
pub const S_QUANTITY: usize = 1;
pub const S_YTD: usize = 2;
pub const S_ORDER_CNT: usize = 3;
pub const S_REMOTE_CNT: usize = 4;
pub const O_C_ID: usize = 1;
pub const O_OL_CNT: usize = 2;
/// O_ALL_LOCAL in bits 0..8, O_CARRIER_ID (0: undelivered) above.
pub const O_LOCAL_CARRIER: usize = 3;
pub const NO_O_ID: usize = 1;
pub const OL_I_ID: usize = 1;
pub const OL_SUPPLY_W: usize = 2;
pub const OL_QUANTITY: usize = 3;
pub const OL_AMOUNT: usize = 4;
pub const OL_DELIVERY_D: usize = 5;
/// DISTRICT-NEW-ORDER's O_ID: the next order the authors' Delivery delivers in the district.
pub const DNO_O_ID: usize = 1;

pub fn carrier(order: &[u64]) -> u64 {
    order[O_LOCAL_CARRIER] >> 8
}
pub fn with_carrier(local_carrier: u64, carrier: u64) -> u64 {
    (local_carrier & 0xff) | carrier << 8
}

/// Initial money in cents (TPC-C clause 4.3.3.1).
pub const W_YTD_INIT: u64 = 30_000_000;
pub const D_YTD_INIT: u64 = 3_000_000;
pub const C_YTD_PAYMENT_INIT: u64 = 1_000;

fn key(table: usize, body: u64) -> u64 {
    debug_assert!(body < 1 << 60);
    (table as u64) << 60 | body
}

/// A key without its table: what [`key`] was given.
fn body(key: u64) -> u64 {
    key & ((1 << 60) - 1)
}

pub fn warehouse_key(w: u64) -> u64 {
    key(WAREHOUSE, w)
}
pub fn district_key(w: u64, d: u64) -> u64 {
    key(DISTRICT, w << 8 | d)
}
pub fn customer_key(w: u64, d: u64, c: u64) -> u64 {
    key(CUSTOMER, w << 32 | d << 24 | c)
}
/// Item `i`; `copy`: the copy of warehouse `copy` when ITEM is replicated per warehouse
/// (`replicated_items`), 0 for the single table.
pub fn item_key(i: u64, copy: u64) -> u64 {
    key(ITEM, copy << 32 | i)
}
pub fn stock_key(w: u64, i: u64) -> u64 {
    key(STOCK, w << 32 | i)
}
pub fn order_key(w: u64, d: u64, o: u64) -> u64 {
    key(ORDER, w << 40 | d << 32 | o)
}
pub fn new_order_key(w: u64, d: u64, o: u64) -> u64 {
    key(NEW_ORDER, w << 40 | d << 32 | o)
}
pub fn order_line_key(w: u64, d: u64, o: u64, ol: u64) -> u64 {
    key(ORDER_LINE, w << 44 | d << 36 | o << 4 | ol)
}
/// Orders per district the customer-order key can hold (12 bits).
pub const MAX_ORDERS: u64 = (1 << 12) - 1;
/// Newest order first: a scan from `customer_order_key(w, d, c, MAX_ORDERS)` meets it first.
pub fn customer_order_key(w: u64, d: u64, c: u64, o: u64) -> u64 {
    debug_assert!(o <= MAX_ORDERS);
    key(CUSTOMER_ORDER, w << 44 | d << 36 | c << 12 | (MAX_ORDERS - o))
}
pub fn district_new_order_key(w: u64, d: u64) -> u64 {
    key(DISTRICT_NEW_ORDER, w << 8 | d)
}
pub fn table_of(key: u64) -> usize {
    (key >> 60) as usize
}
/// The warehouse a row's key belongs to (`None`: ITEM, which no warehouse owns).
pub fn warehouse_of(key: u64) -> Option<u64> {
    let body = body(key);
    match table_of(key) {
        WAREHOUSE => Some(body),
        DISTRICT | DISTRICT_NEW_ORDER => Some(body >> 8),
        CUSTOMER | STOCK => Some(body >> 32),
        ORDER | NEW_ORDER => Some(body >> 40),
        ORDER_LINE | CUSTOMER_ORDER => Some(body >> 44),
        _ => None,
    }
}

/// The warehouse whose node loads a row: [`warehouse_of`], and for a per-warehouse ITEM copy
/// (`replicated_items`) its warehouse (`None`: the single ITEM table).
pub fn row_warehouse(key: u64) -> Option<u64> {
    match table_of(key) {
        ITEM => Some(body(key) >> 32).filter(|w| *w != 0),
        _ => warehouse_of(key),
    }
}

/// Transaction weights of the mix (normalised when drawn).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mix {
    #[serde(default)]
    pub new_order: f64,
    #[serde(default)]
    pub payment: f64,
    #[serde(default)]
    pub order_status: f64,
    #[serde(default)]
    pub delivery: f64,
    #[serde(default)]
    pub stock_level: f64,
}

impl Mix {
    pub fn total(&self) -> f64 {
        self.new_order + self.payment + self.order_status + self.delivery + self.stock_level
    }
}

fn yes() -> bool {
    true
}
fn ten() -> u32 {
    10
}
fn ol_cnt() -> [u32; 2] {
    [5, 15]
}
fn remote_item() -> f64 {
    0.01
}
fn remote_payment() -> f64 {
    0.15
}
fn retries() -> u32 {
    1000
}
fn backoff() -> u64 {
    2_000
}
fn warehouse_padding() -> u32 {
    1024
}

/// How a transaction picks its warehouse ([`TpccWorkload::warehouse_choice`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarehouseChoice {
    #[default]
    Home,
    Random,
}

/// Which versions of Delivery, OrderStatus and StockLevel run ([`TpccWorkload::procedures`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Procedures {
    /// TPC-C's (clauses 2.6–2.8).
    #[default]
    Tpcc,
    /// The authors' reduced versions (`tpcc/TpccProcedure.h`), see [`TpccWorkload::procedures`].
    Artifact,
}

/// The scenario's `workload` for `protocol: "tpcc"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TpccWorkload {
    pub warehouses: u32,
    #[serde(default = "ten")]
    pub districts_per_warehouse: u32,
    /// TPC-C: 3,000.
    pub customers_per_district: u32,
    /// TPC-C: 100,000.
    pub items: u32,
    /// Orders per district at load (TPC-C: 3,000); D_NEXT_O_ID starts after them.
    #[serde(default)]
    pub initial_orders: u32,
    /// Of the loaded orders, the last this many per district are undelivered (TPC-C: 900).
    #[serde(default)]
    pub initial_new_orders: u32,
    /// Keep the secondary index customer → orders that OrderStatus uses (NewOrder adds an entry
    /// per order). `false` only to keep the schedules of scenarios without OrderStatus.
    #[serde(default = "yes")]
    pub customer_order_index: bool,
    /// ITEM replicated in every warehouse and loaded item by item (all warehouses' copies of
    /// item 1, then of item 2, …), NewOrder reading its home warehouse's copy — as the authors'
    /// TPC-C (`tpcc/TpccPopulator.h` "replicate in every warehouse", `GetItemPrimaryKey(i_id,
    /// w_id)`). `false`: one ITEM table (TPC-C's schema).
    #[serde(default)]
    pub replicated_items: bool,
    /// Bytes of padding after a WAREHOUSE row's fields (rounded up to words), as the authors'
    /// schema: `padding VARCHAR(1024)`, "Padding in the warehouse table to reduce the
    /// contention" (`tpcc/TpccInitiator.h` `InitWarehouseSchema`, in every TPC-C run since
    /// June 2024), so a 2 KiB GCL holds one warehouse. 0: TPC-C's 89-byte row (19 per 2 KiB GCL).
    /// The padded row must fit a page.
    #[serde(default = "warehouse_padding")]
    pub warehouse_padding_bytes: u32,
    /// Weights; TPC-C's standard mix is NewOrder 45 : Payment 43 : OrderStatus 4 : Delivery 4 :
    /// StockLevel 4.
    pub mix: Mix,
    /// Order lines per NewOrder, inclusive (TPC-C: 5..=15).
    #[serde(default = "ol_cnt")]
    pub ol_cnt: [u32; 2],
    /// Order lines supplied by another warehouse (TPC-C: 1 %).
    #[serde(default = "remote_item")]
    pub remote_item_ratio: f64,
    /// Fig. 19b's distribution ratio: the fraction of NewOrders with one order line supplied by
    /// a warehouse of another compute node (the others home; `remote_item_ratio` unused). Unset:
    /// TPC-C's per-line `remote_item_ratio`.
    #[serde(default)]
    pub distributed_ratio: Option<f64>,
    /// Which warehouse a transaction runs on: `home`, the terminal's own (thread number modulo
    /// the warehouses; TPC-C's terminal binding), or `random`, drawn uniformly from all
    /// warehouses for every transaction, as the authors' fully shared runs
    /// (`tpcc/TpccParams.h` `WORKLOAD_PATTERN RANDOM_SOURCE`, `GenerateWarehouseId(1,
    /// num_warehouses_)`). A partitioned (2PC) run keeps `home`: its warehouses belong to nodes.
    #[serde(default)]
    pub warehouse_choice: WarehouseChoice,
    /// `tpcc`: TPC-C's Delivery, OrderStatus and StockLevel. `artifact`: the authors' reduced
    /// versions (`tpcc/TpccProcedure.h`; NewOrder and Payment are the same in both):
    /// Delivery X-latches, per district, a DISTRICT-NEW-ORDER counter row (an extra table, one
    /// per district, padded to ~4 rows per 2 KiB GCL, loaded with the other tables) and advances
    /// it (wrapping from the last loaded order to order 1), then X the ORDER row that counter
    /// named (sets its carrier), then X its CUSTOMER — no NEW-ORDER or ORDER-LINE access, so
    /// no amount is credited (the customer's C_DELIVERY_CNT is still counted); OrderStatus
    /// reads ORDER (order id = the customer id, "to avoid the secondary" index) and its order
    /// lines, no CUSTOMER; StockLevel reads DISTRICT and the last 5 ORDER rows (aborting if
    /// one is not inserted yet), no ORDER-LINE or STOCK. Needs every customer to have a loaded
    /// order (`initial_orders >= customers_per_district`) and an undelivered one at load
    /// (`initial_new_orders >= 1`), as the authors' load (one order per customer).
    #[serde(default)]
    pub procedures: Procedures,
    /// Payments of a customer of another warehouse (TPC-C: 15 %).
    #[serde(default = "remote_payment")]
    pub remote_payment_ratio: f64,
    /// Aborted attempts before a transaction is given up (counted).
    #[serde(default = "retries")]
    pub max_retries: u32,
    /// Mean wait before retrying an aborted transaction, doubled per abort up to 32×, ns.
    #[serde(default = "backoff")]
    pub backoff_ns: u64,
    pub threads_per_node: Option<u32>,
    pub threads_total: Option<u32>,
    /// Transactions per thread.
    pub ops_per_thread: Option<u64>,
    pub ops_per_node: Option<u64>,
    pub cache_frames: Option<u32>,
    /// Fraction of the loaded pages (heap and index) each compute node caches.
    pub cache_ratio: Option<f64>,
}

impl TpccWorkload {
    /// Words per tuple of each table: [`WIDTH`] with WAREHOUSE's padding.
    pub fn widths(&self) -> [usize; TABLES] {
        let mut w = WIDTH;
        w[WAREHOUSE] += (self.warehouse_padding_bytes as usize).div_ceil(8);
        w
    }

    pub fn shape_fields(&self) -> ShapeFields {
        ShapeFields {
            threads_per_node: self.threads_per_node,
            threads_total: self.threads_total,
            ops_per_thread: self.ops_per_thread,
            ops_per_node: self.ops_per_node,
            cache_frames: self.cache_frames,
            cache_ratio: self.cache_ratio,
        }
    }

    pub fn check(&self, out: &mut Vec<Problem>) {
        let w = "workload";
        if self.warehouses == 0 || self.warehouses >= 1 << 16 {
            out.push(Problem::new(format!("{w}.warehouses"), "must be in 1..65536"));
        }
        if self.districts_per_warehouse == 0 || self.districts_per_warehouse > 255 {
            out.push(Problem::new(format!("{w}.districts_per_warehouse"), "must be in 1..=255"));
        }
        if self.customers_per_district == 0 || self.customers_per_district >= 1 << 24 {
            out.push(Problem::new(format!("{w}.customers_per_district"), "must be in 1..2^24"));
        }
        if self.items < 15 || self.items >= 1 << 30 {
            out.push(Problem::new(
                format!("{w}.items"),
                "must be in 15..2^30 (an order has up to 15 distinct items)",
            ));
        }
        let [lo, hi] = self.ol_cnt;
        if lo == 0 || lo > hi || hi > 15 || hi > self.items {
            out.push(Problem::new(
                format!("{w}.ol_cnt"),
                "must be [lo, hi] with 1 <= lo <= hi <= 15 and hi <= items",
            ));
        }
        let m = self.mix;
        let weights = [m.new_order, m.payment, m.order_status, m.delivery, m.stock_level];
        if !(weights.iter().all(|x| *x >= 0.0) && m.total() > 0.0) {
            out.push(Problem::new(format!("{w}.mix"), "weights must be non-negative, not all zero"));
        }
        let artifact = self.procedures == Procedures::Artifact;
        if artifact && self.initial_orders < self.customers_per_district.max(1) {
            out.push(Problem::new(
                format!("{w}.initial_orders"),
                "procedures artifact: at least customers_per_district (one loaded order per customer, as the authors' load; their OrderStatus reads order c_id and their Delivery wraps over the loaded orders)",
            ));
        }
        if artifact && self.initial_new_orders == 0 {
            out.push(Problem::new(
                format!("{w}.initial_new_orders"),
                "procedures artifact: at least 1 (the authors' Delivery counter starts at the first undelivered loaded order)",
            ));
        }
        if m.order_status > 0.0 && !self.customer_order_index && !artifact {
            out.push(Problem::new(
                format!("{w}.customer_order_index"),
                "OrderStatus finds a customer's last order through this index: it must be true when mix.order_status > 0 (procedures tpcc)",
            ));
        }
        if self.initial_new_orders > self.initial_orders {
            out.push(Problem::new(format!("{w}.initial_new_orders"), "must be at most initial_orders"));
        }
        if self.customer_order_index && self.initial_orders as u64 > MAX_ORDERS {
            out.push(Problem::new(
                format!("{w}.initial_orders"),
                format!("the customer-order index holds {MAX_ORDERS} orders per district"),
            ));
        }
        for (name, r) in [
            ("distributed_ratio", self.distributed_ratio.unwrap_or(0.0)),
            ("remote_item_ratio", self.remote_item_ratio),
            ("remote_payment_ratio", self.remote_payment_ratio),
        ] {
            if !(0.0..=1.0).contains(&r) {
                out.push(Problem::new(format!("{w}.{name}"), "must be in [0, 1]"));
            }
        }
    }
}

/// A deterministic per-tuple number for the initial population (not random: the same for every
/// seed, so a sweep's points share one database).
fn hash(a: u64, b: u64) -> u64 {
    let mut x = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_add(0x6A09_E667_F3BC_C909);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^ (x >> 29)
}

/// The initial tuples, table by table in insertion order: (table, key, image with version 0).
pub fn population(w: &TpccWorkload) -> Vec<(usize, u64, Vec<u64>)> {
    let mut out = Vec::new();
    let widths = w.widths();
    let image = |table: usize, fields: &[(usize, u64)]| {
        let mut v = vec![0u64; widths[table]];
        for (at, x) in fields {
            v[*at] = *x;
        }
        v
    };
    let ws = 1..=w.warehouses as u64;
    let ds = 1..=w.districts_per_warehouse as u64;
    for wh in ws.clone() {
        out.push((
            WAREHOUSE,
            warehouse_key(wh),
            image(WAREHOUSE, &[(W_YTD, W_YTD_INIT), (W_TAX, hash(wh, 1) % 2001)]),
        ));
    }
    for wh in ws.clone() {
        for d in ds.clone() {
            let next = w.initial_orders as u64 + 1;
            let fields = [(D_YTD, D_YTD_INIT), (D_TAX, hash(wh << 8 | d, 2) % 2001), (D_NEXT_O_ID, next)];
            out.push((DISTRICT, district_key(wh, d), image(DISTRICT, &fields)));
        }
    }
    if w.procedures == Procedures::Artifact {
        // The authors' counter starts at the first undelivered loaded order
        // (`tpcc/TpccPopulator.h`: customers - new orders + 1).
        let first = (w.initial_orders - w.initial_new_orders) as u64 + 1;
        for wh in ws.clone() {
            for d in ds.clone() {
                out.push((
                    DISTRICT_NEW_ORDER,
                    district_new_order_key(wh, d),
                    image(DISTRICT_NEW_ORDER, &[(DNO_O_ID, first)]),
                ));
            }
        }
    }
    for wh in ws.clone() {
        for d in ds.clone() {
            for c in 1..=w.customers_per_district as u64 {
                let fields = [
                    (C_BALANCE, (-1_000i64) as u64),
                    (C_YTD_PAYMENT, C_YTD_PAYMENT_INIT),
                    (C_PAYMENT_CNT, 1),
                    (C_DISCOUNT, hash(wh << 40 | d << 32 | c, 3) % 5001),
                ];
                out.push((CUSTOMER, customer_key(wh, d, c), image(CUSTOMER, &fields)));
            }
        }
    }
    for i in 1..=w.items as u64 {
        let price = image(ITEM, &[(I_PRICE, 100 + hash(i, 4) % 9_901)]);
        if w.replicated_items {
            for wh in ws.clone() {
                out.push((ITEM, item_key(i, wh), price.clone()));
            }
        } else {
            out.push((ITEM, item_key(i, 0), price));
        }
    }
    for wh in ws {
        for i in 1..=w.items as u64 {
            out.push((
                STOCK,
                stock_key(wh, i),
                image(STOCK, &[(S_QUANTITY, 10 + hash(wh << 32 | i, 5) % 91)]),
            ));
        }
    }
    let [lo, hi] = w.ol_cnt;
    let mut lines = Vec::new();
    let mut queued = Vec::new();
    let delivered_below = (w.initial_orders - w.initial_new_orders) as u64 + 1;
    for wh in 1..=w.warehouses as u64 {
        for d in 1..=w.districts_per_warehouse as u64 {
            for o in 1..=w.initial_orders as u64 {
                let id = wh << 40 | d << 32 | o;
                let n = lo as u64 + hash(id, 6) % (hi - lo + 1) as u64;
                let c = o % w.customers_per_district as u64 + 1;
                let delivered = o < delivered_below;
                let carrier = if delivered { 1 + hash(id, 30) % 10 } else { 0 };
                let fields = [(O_C_ID, c), (O_OL_CNT, n), (O_LOCAL_CARRIER, with_carrier(1, carrier))];
                out.push((ORDER, order_key(wh, d, o), image(ORDER, &fields)));
                for ol in 1..=n {
                    let i = hash(id, 7 + ol) % w.items as u64 + 1;
                    let (amount, date) =
                        if delivered { (0, 1) } else { (1 + hash(id, 40 + ol) % 999_999, 0) };
                    let fields = [
                        (OL_I_ID, i),
                        (OL_SUPPLY_W, wh),
                        (OL_QUANTITY, 5),
                        (OL_AMOUNT, amount),
                        (OL_DELIVERY_D, date),
                    ];
                    lines.push((ORDER_LINE, order_line_key(wh, d, o, ol), image(ORDER_LINE, &fields)));
                }
                if !delivered {
                    queued.push((NEW_ORDER, new_order_key(wh, d, o), image(NEW_ORDER, &[(NO_O_ID, o)])));
                }
            }
        }
    }
    out.extend(lines);
    out.extend(queued);
    out
}

/// The secondary index's initial entries: (customer-order key, the ORDER row's key).
pub fn customer_orders(w: &TpccWorkload) -> Vec<(u64, u64)> {
    if !w.customer_order_index {
        return Vec::new();
    }
    let mut out = Vec::new();
    for wh in 1..=w.warehouses as u64 {
        for d in 1..=w.districts_per_warehouse as u64 {
            for o in 1..=w.initial_orders as u64 {
                let c = o % w.customers_per_district as u64 + 1;
                out.push((customer_order_key(wh, d, c, o), order_key(wh, d, o)));
            }
        }
    }
    out
}
