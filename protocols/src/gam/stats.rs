//! Metrics (SELCC spec §8.11): throughput, cache hit ratio, invalidation ratio, RPCs per op.

use serde::{Deserialize, Serialize};

/// What one access did (a client read, a SEQ write, or a TSO write when it drained).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AccessTrace {
    /// Served from a valid local copy (or, for TSO reads, the thread's own store buffer).
    pub hit: bool,
    /// Requests sent to a home (read, write, write-back).
    pub rpcs: u32,
    /// Other compute nodes the home invalidated or recalled for this access.
    pub invalidations: u32,
    /// Fetches repeated because an invalidation crossed a Shared grant.
    pub retries: u32,
}

/// One compute node's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Client operations completed (TSO writes count when buffered).
    pub ops: u64,
    pub reads: u64,
    pub writes: u64,
    /// Accesses performed (reads, and writes when applied): the denominators below.
    pub accesses: u64,
    pub hits: u64,
    /// Accesses for which the home invalidated or recalled another node's copy.
    pub invalidation_accesses: u64,
    pub rpcs: u64,
    pub writebacks: u64,
    pub evictions: u64,
    /// Messages this node sent (requests, acks).
    pub messages_sent: u64,
    pub invalidations_received: u64,
    pub recalls_received: u64,
    /// Recalls that met a fetch in flight and were answered after it.
    pub recalls_deferred: u64,
    pub fetch_retries: u64,
    /// TSO: reads answered from the thread's store buffer.
    pub buffer_forwards: u64,
    /// TSO: reads that waited for an overlapping buffered write to drain; writes that met a
    /// full buffer.
    pub buffer_stalls: u64,
    pub latency_ns_total: u64,
    pub first_op_start_ns: Option<u64>,
    pub last_op_end_ns: u64,
}

impl Stats {
    pub fn record_access(&mut self, t: &AccessTrace) {
        self.accesses += 1;
        self.hits += t.hit as u64;
        self.invalidation_accesses += (t.invalidations > 0) as u64;
        self.fetch_retries += t.retries as u64;
    }

    pub fn record_op(&mut self, write: bool, start_ns: u64, end_ns: u64) {
        self.ops += 1;
        if write {
            self.writes += 1;
        } else {
            self.reads += 1;
        }
        self.latency_ns_total += end_ns - start_ns;
        if self.first_op_start_ns.is_none_or(|t| start_ns < t) {
            self.first_op_start_ns = Some(start_ns);
        }
        self.last_op_end_ns = self.last_op_end_ns.max(end_ns);
    }

    pub fn hit_ratio(&self) -> f64 {
        ratio(self.hits, self.accesses)
    }

    pub fn invalidation_ratio(&self) -> f64 {
        ratio(self.invalidation_accesses, self.accesses)
    }

    pub fn rpcs_per_op(&self) -> f64 {
        ratio(self.rpcs, self.ops)
    }

    pub fn merge(&mut self, o: &Stats) {
        macro_rules! add {
            ($($f:ident),*) => { $( self.$f += o.$f; )* };
        }
        add!(
            ops,
            reads,
            writes,
            accesses,
            hits,
            invalidation_accesses,
            rpcs,
            writebacks,
            evictions,
            messages_sent,
            invalidations_received,
            recalls_received,
            recalls_deferred,
            fetch_retries,
            buffer_forwards,
            buffer_stalls,
            latency_ns_total
        );
        self.first_op_start_ns = match (self.first_op_start_ns, o.first_op_start_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_op_end_ns = self.last_op_end_ns.max(o.last_op_end_ns);
    }
}

pub fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_merge() {
        let mut s = Stats::default();
        s.record_access(&AccessTrace { hit: true, ..Default::default() });
        s.record_access(&AccessTrace { rpcs: 1, invalidations: 2, ..Default::default() });
        s.rpcs = 1;
        s.record_op(false, 10, 20);
        s.record_op(true, 5, 30);
        assert_eq!((s.hit_ratio(), s.invalidation_ratio(), s.rpcs_per_op()), (0.5, 0.5, 0.5));
        let mut total = Stats::default();
        total.merge(&s);
        total.merge(&s);
        assert_eq!((total.ops, total.first_op_start_ns, total.last_op_end_ns), (4, Some(5), 30));
    }
}
