//! Waiting on a word of the node's own region (reply flags, mailboxes, DiFache state words).
//!
//! Protocols busy-poll such words: read, sleep `P`, read again. Modelled literally, every poll
//! is a simulator event (SELCC's reply-flag polls were 60–78 % of all events). [`Nic::wait_word`]
//! keeps the poll loop's *timing* — the waiter observes the word at `t0 + k·P` — and lets the
//! simulator skip the polls that cannot see anything new: it wakes the waiter only at the first
//! poll time at or after a verb changes the word. [`poll_loop`] is the reference semantics (and
//! the trait's default implementation).

use super::{check_range, Nanos, Nic, NicError, NicResult, RemoteAddr};

/// When a waited-on word is ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WordCond {
    /// The word equals this value.
    Eq(u64),
    /// The word differs from this value.
    Ne(u64),
    /// `word & mask == value` (e.g. a sequence-number field of a reply flag).
    MaskEq { mask: u64, value: u64 },
}

impl WordCond {
    pub fn holds(self, word: u64) -> bool {
        match self {
            WordCond::Eq(v) => word == v,
            WordCond::Ne(v) => word != v,
            WordCond::MaskEq { mask, value } => word & mask == value & mask,
        }
    }
}

/// The first poll time `t0 + k·period` at or after `at` (`period` ≥ 1).
pub fn next_poll_ns(t0: u64, period: u64, at: u64) -> u64 {
    let period = period.max(1);
    if at <= t0 {
        return t0;
    }
    t0 + (at - t0).div_ceil(period) * period
}

/// The timeout error of a wait on `offset_bytes` of `nic`'s node.
pub fn timeout_error(node: super::NodeId, offset_bytes: u64, after: Nanos) -> NicError {
    NicError::Timeout { what: format!("wait_word on {}", RemoteAddr::new(node, offset_bytes)), after }
}

/// The poll loop [`Nic::wait_word`] stands for: read at `t0 + k·period` until `until` holds or a
/// read at or after `t0 + timeout` fails it.
pub async fn poll_loop<N: Nic>(
    nic: &N,
    offset_bytes: u64,
    until: WordCond,
    period: Nanos,
    timeout: Option<Nanos>,
) -> NicResult<u64> {
    check_range(nic.cluster(), RemoteAddr::new(nic.node(), offset_bytes), 8)?;
    let period = Nanos(period.0.max(1));
    let t0 = nic.now();
    loop {
        let word = nic.local().load(offset_bytes);
        if until.holds(word) {
            return Ok(word);
        }
        if let Some(t) = timeout {
            if nic.now().saturating_sub(t0) >= t {
                return Err(timeout_error(nic.node(), offset_bytes, t));
            }
        }
        nic.sleep(period).await;
    }
}

/// The timing [`Nic::wait_write`] must match in the simulator: read the `len_bytes` at
/// `offset_bytes` at `t0`, then every `period`, and return at the first read that differs from
/// the one at `t0` (`Ok(true)`), or at the first read at or after `t0 + timeout` (`Ok(false)`).
/// A reference for tests only: on hardware a write between the caller's sweep and the first
/// read here would be lost.
pub async fn sweep_loop<N: Nic>(
    nic: &N,
    offset_bytes: u64,
    len_bytes: u64,
    period: Nanos,
    timeout: Option<Nanos>,
) -> NicResult<bool> {
    check_range(nic.cluster(), RemoteAddr::new(nic.node(), offset_bytes), len_bytes.max(8))?;
    let period = Nanos(period.0.max(1));
    let t0 = nic.now();
    let read = || {
        let mut words = vec![0; len_bytes.div_ceil(8) as usize];
        nic.local().read_words(offset_bytes, &mut words);
        words
    };
    let first = read();
    loop {
        if let Some(t) = timeout {
            if nic.now().saturating_sub(t0) >= t {
                return Ok(false);
            }
        }
        nic.sleep(period).await;
        if read() != first {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_grid_and_conditions() {
        // Goal: the wake time is the first grid point at or after the write; conditions read right.
        assert_eq!(next_poll_ns(100, 50, 100), 100);
        assert_eq!(next_poll_ns(100, 50, 101), 150);
        assert_eq!(next_poll_ns(100, 50, 150), 150);
        assert_eq!(next_poll_ns(100, 50, 20), 100);
        assert_eq!(next_poll_ns(0, 0, 7), 7, "period 0 counts as 1 ns");
        assert!(WordCond::MaskEq { mask: 0xffff_ffff << 16, value: 9 << 16 }.holds(9 << 16 | 0x203));
        assert!(!WordCond::Eq(1).holds(2));
        assert!(WordCond::Ne(1).holds(2));
    }
}
