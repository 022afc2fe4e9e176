//! A compute node's counters.

use serde::{Deserialize, Serialize};

use super::profit::Event;
use crate::txn::engine::TxnRecord;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Application operations (a write counts once, though it also reads).
    pub ops: u64,
    pub first_op_ns: Option<u64>,
    /// Cache events and their summed latency (ns), by [`Event`].
    pub events: [u64; 5],
    pub event_ns: [u64; 5],
    /// Every measured event's latency (ns), by [`Event`], for the distributions of Fig. 12.
    #[serde(default)]
    pub event_samples: [Vec<u64>; 5],
    pub invalidations: u64,
    pub remote_lookups: u64,
    pub lookup_retries: u64,
    pub mode_lock_retries: u64,
    pub switches_on: u64,
    pub switches_off: u64,
    pub allocations: u64,
    pub alloc_retries: u64,
    pub evictions: u64,
    pub owner_cas_retries: u64,
    pub owner_rechecks_lost: u64,
    pub bypass_rechecks: u64,
    /// Headers whose MODE word carried another key's tag and were given their own key's mode
    /// again (`Cache::own_mode`; hardware only: a remote CAS swallowed a recycle's store).
    /// Not serialized when 0, so reports of runs without a repair are unchanged.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mode_repairs: u64,
    /// Lock CASes that returned their own unique value (`Cache::cas_replayed`; hardware
    /// only). Not serialized when 0, as `mode_repairs`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cas_replays: u64,
    /// Reads the application found torn or of another object, and retried.
    pub validation_retries: u64,
    pub app_lock_retries: u64,
    /// Virtual ns clients spent taking the application's lock (writes and atomics; waiting
    /// included), and the measured writes that took it.
    #[serde(default)]
    pub app_lock_wait_ns: u64,
    #[serde(default)]
    pub app_lock_takes: u64,
    /// Virtual ns the application's lock was held (taken to released), summed.
    #[serde(default)]
    pub app_lock_hold_ns: u64,
    /// The same for object 0 alone (the most popular object of the Zipf and static trace
    /// workloads): its takes and the ns its lock was held.
    #[serde(default)]
    pub hot_lock_takes: u64,
    #[serde(default)]
    pub hot_lock_hold_ns: u64,
    /// CMCache's manager: RPCs served, and polls of a handler waiting for a busy object.
    #[serde(default)]
    pub rpcs: u64,
    #[serde(default)]
    pub manager_waits: u64,
    /// Crash recovery: CNs this node's monitor declared dead, syncs it completed as the
    /// coordinator, dead CNs' locks it freed, headers it dropped in syncs.
    #[serde(default)]
    pub crashes_detected: u64,
    #[serde(default)]
    pub recoveries: u64,
    #[serde(default)]
    pub locks_released: u64,
    #[serde(default)]
    pub headers_dropped: u64,
    /// Node restarts: memory-node failures this CN's monitor handled, sync rounds it asked for
    /// after a memory node came back, rejoins after its own restart, client operations that
    /// timed out at a memory node.
    #[serde(default)]
    pub mn_failures: u64,
    #[serde(default)]
    pub mn_rounds: u64,
    #[serde(default)]
    pub rejoins: u64,
    #[serde(default)]
    pub timeouts: u64,
    /// When this CN first disabled caching for a sync, and when the coordinator last
    /// re-enabled it (virtual ns; the timeline's landmarks).
    #[serde(default)]
    pub first_disable_ns: Option<u64>,
    #[serde(default)]
    pub last_reenable_ns: Option<u64>,
    /// Operations completed per `timeline_bucket_ns` of virtual time (warm-up included).
    #[serde(default)]
    pub timeline: Vec<u64>,
    /// The tracked object's accesses and switches (`Config::track_key`): (virtual ns, kind),
    /// kind an [`Event`] index, or [`SWITCH_ON`] / [`SWITCH_OFF`].
    #[serde(default)]
    pub tracked: Vec<(u64, u8)>,
    /// Atomic operations (`Cache::cas_object`), the off switches they made, and the CASes that
    /// found a value other than the one their client read under the lock (a stale read).
    #[serde(default)]
    pub atomics: u64,
    #[serde(default)]
    pub atomic_switches: u64,
    #[serde(default)]
    pub atomic_stale_reads: u64,
    /// FORD transactions (`workload.transactions`, `bench/ford.rs`): measured commits (`ops`
    /// counts them too), the objects they accessed, and aborts by cause — a lock another
    /// transaction held (execution), a read object changed or locked (validation). Not
    /// serialized when 0, so reports of other workloads are unchanged.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub txn_objects: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub txn_lock_aborts: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub txn_validation_aborts: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub txn_read_write: u64,
    /// FORD's TPC-C: NewOrders that reused an order slot (`transactions.tpcc.order_slots`
    /// too small; warm-up included, never reset).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tpcc_wraps: u64,
    /// Every committed transaction of a checked run (warm-up included): what it read and
    /// installed, for the serializability check (`txn::check::serializable`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub txns: Vec<TxnRecord>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

pub const SWITCH_ON: u8 = 5;
pub const SWITCH_OFF: u8 = 6;

impl Stats {
    pub fn event(&mut self, event: Event, ns: u64) {
        self.events[event as usize] += 1;
        self.event_ns[event as usize] += ns;
        self.event_samples[event as usize].push(ns);
    }

    pub fn merge(&mut self, o: &Stats) {
        self.ops += o.ops;
        self.first_op_ns = match (self.first_op_ns, o.first_op_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for i in 0..5 {
            self.events[i] += o.events[i];
            self.event_ns[i] += o.event_ns[i];
            self.event_samples[i].extend_from_slice(&o.event_samples[i]);
        }
        self.invalidations += o.invalidations;
        self.remote_lookups += o.remote_lookups;
        self.lookup_retries += o.lookup_retries;
        self.mode_lock_retries += o.mode_lock_retries;
        self.switches_on += o.switches_on;
        self.switches_off += o.switches_off;
        self.allocations += o.allocations;
        self.alloc_retries += o.alloc_retries;
        self.evictions += o.evictions;
        self.owner_cas_retries += o.owner_cas_retries;
        self.owner_rechecks_lost += o.owner_rechecks_lost;
        self.bypass_rechecks += o.bypass_rechecks;
        self.mode_repairs += o.mode_repairs;
        self.cas_replays += o.cas_replays;
        self.validation_retries += o.validation_retries;
        self.app_lock_retries += o.app_lock_retries;
        self.app_lock_wait_ns += o.app_lock_wait_ns;
        self.app_lock_takes += o.app_lock_takes;
        self.app_lock_hold_ns += o.app_lock_hold_ns;
        self.hot_lock_takes += o.hot_lock_takes;
        self.hot_lock_hold_ns += o.hot_lock_hold_ns;
        self.rpcs += o.rpcs;
        self.manager_waits += o.manager_waits;
        self.crashes_detected += o.crashes_detected;
        self.recoveries += o.recoveries;
        self.locks_released += o.locks_released;
        self.headers_dropped += o.headers_dropped;
        self.mn_failures += o.mn_failures;
        self.mn_rounds += o.mn_rounds;
        self.rejoins += o.rejoins;
        self.timeouts += o.timeouts;
        self.first_disable_ns = match (self.first_disable_ns, o.first_disable_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_reenable_ns = self.last_reenable_ns.max(o.last_reenable_ns);
        if self.timeline.len() < o.timeline.len() {
            self.timeline.resize(o.timeline.len(), 0);
        }
        for (a, b) in self.timeline.iter_mut().zip(&o.timeline) {
            *a += b;
        }
        self.tracked.extend_from_slice(&o.tracked);
        self.atomics += o.atomics;
        self.atomic_switches += o.atomic_switches;
        self.atomic_stale_reads += o.atomic_stale_reads;
        self.txn_objects += o.txn_objects;
        self.txn_lock_aborts += o.txn_lock_aborts;
        self.txn_validation_aborts += o.txn_validation_aborts;
        self.txn_read_write += o.txn_read_write;
        self.tpcc_wraps += o.tpcc_wraps;
        self.txns.extend_from_slice(&o.txns);
    }
}
