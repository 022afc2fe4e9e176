//! The caching-profit model of §5.2 and the per-event latency samples it feeds on.
//!
//! The seed text lost the paper's equation; this is the spec's §3.5 reconstruction [CHOICE].
//! With read ratio r, hit rate h and per-event latencies L:
//!
//! ```text
//! L_on  = r·(h·L_rh + (1−h)·L_rm) + (1−r)·L_w        caching on
//! L_off = r·L_rb + (1−r)·L_wb                        caching off
//! L_on = L_off  ⇒  r* = (L_w − L_wb) / ((L_w − L_wb) + (L_rb − h·L_rh − (1−h)·L_rm))
//! ```
//! Caching pays above r*. A denominator ≤ 0 means caching never pays: r* is above 1.

use std::collections::VecDeque;

/// The five event types whose latencies the model weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    ReadHit = 0,
    ReadMiss = 1,
    WriteCached = 2,
    ReadBypass = 3,
    WriteBypass = 4,
}

pub const EVENTS: usize = 5;

/// The break-even read ratio for hit rate `hit` and median latencies `l[Event]` (ns).
pub fn break_even(hit: f64, l: &[f64; EVENTS]) -> f64 {
    let write_cost = l[Event::WriteCached as usize] - l[Event::WriteBypass as usize];
    let read_gain = l[Event::ReadBypass as usize]
        - hit * l[Event::ReadHit as usize]
        - (1.0 - hit) * l[Event::ReadMiss as usize];
    let den = write_cost + read_gain;
    if read_gain <= 0.0 || den <= 0.0 {
        return 2.0;
    }
    (write_cost / den).clamp(0.0, 1.0)
}

/// Recent latencies per event type on one compute node ([CHOICE]: one ring per node rather
/// than per thread; the paper averages per-thread medians).
#[derive(Clone, Debug)]
pub struct Samples {
    rings: [VecDeque<u64>; EVENTS],
    len: usize,
}

impl Samples {
    pub fn new(len: usize) -> Samples {
        Samples { rings: Default::default(), len }
    }

    pub fn record(&mut self, event: Event, ns: u64) {
        let ring = &mut self.rings[event as usize];
        if ring.len() == self.len {
            ring.pop_front();
        }
        ring.push_back(ns);
    }

    /// Every event's median, or `None` while some event has no sample (the model cannot weigh
    /// what it never saw; the stored threshold stays).
    pub fn medians(&self) -> Option<[f64; EVENTS]> {
        let mut out = [0.0; EVENTS];
        for (o, ring) in out.iter_mut().zip(&self.rings) {
            if ring.is_empty() {
                return None;
            }
            let mut v: Vec<u64> = ring.iter().copied().collect();
            v.sort_unstable();
            *o = v[v.len() / 2] as f64;
        }
        Some(out)
    }
}

/// A threshold in the mode word: 16-bit fixed point; above 1 (caching never pays) saturates.
pub fn encode_threshold(t: f64) -> u64 {
    if t > 1.0 {
        0xffff
    } else {
        (t.clamp(0.0, 1.0) * 65534.0).round() as u64
    }
}

pub fn decode_threshold(bits: u64) -> f64 {
    if bits >= 0xffff {
        2.0
    } else {
        bits as f64 / 65534.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn break_even_balances_the_two_latencies() {
        // hit 0.5 µs, miss 5, cached write 15, bypass read 4, bypass write 4.
        let l = [500.0, 5000.0, 15000.0, 4000.0, 4000.0];
        let h = 0.9;
        let r = break_even(h, &l);
        let on = r * (h * l[0] + (1.0 - h) * l[1]) + (1.0 - r) * l[2];
        let off = r * l[3] + (1.0 - r) * l[4];
        assert!((on - off).abs() < 1e-6, "{on} vs {off}");
        assert!(r > 0.5 && r < 1.0, "{r}");
    }

    #[test]
    fn caching_that_never_pays_has_a_threshold_above_one() {
        assert_eq!(break_even(0.0, &[500.0, 9000.0, 15000.0, 4000.0, 4000.0]), 2.0);
        assert_eq!(decode_threshold(encode_threshold(2.0)), 2.0);
        assert!((decode_threshold(encode_threshold(0.75)) - 0.75).abs() < 1e-4);
    }

    #[test]
    fn medians_need_every_event() {
        let mut s = Samples::new(3);
        for e in [Event::ReadHit, Event::ReadMiss, Event::WriteCached, Event::ReadBypass] {
            s.record(e, 10);
        }
        assert!(s.medians().is_none());
        s.record(Event::WriteBypass, 7);
        for ns in [1, 100, 1000, 5] {
            s.record(Event::ReadHit, ns);
        }
        assert_eq!(s.medians().unwrap()[0], 100.0);
    }
}
