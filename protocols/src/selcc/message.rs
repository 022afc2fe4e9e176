//! Invalidation messages and their replies (SELCC §3.5 [P], Fig. 9), plus the priority and
//! resend-interval functions that travel with them (§5.1.2, §5.3.2).
//!
//! A request goes by SEND to the victim's invalidation port. The reply is one-sided: the victim
//! WRITEs (optionally the forwarded `header | data` into the requester's frame, then) one flag
//! word into the requester's reply slot, at the word of the responding node, in one doorbell
//! batch so that the flag lands after the data (per-QP order). The requester polls that word.
//!
//! Flag word [CHOICE]: `seq << 16 | peer_round_trips << 8 | status`. `seq` ties the reply to the
//! request (a slot is reused by later requests), `peer_round_trips` counts the victim's serial
//! verb batches on the requester's critical path (for the 1/3/4 round-trip metric).

use crate::nic::{Nanos, NodeId, RemoteAddr};

use super::ComputeIndex;

/// The first invalidation port on compute nodes: handler task k serves `INVALIDATION_PORT + k`
/// (see `Node::invalidation_port`).
pub const INVALIDATION_PORT: u16 = 7;

/// The three conflict cases of §3.5.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InvKind {
    /// Case 1: a writer invalidates a Modified copy.
    WriterVsModified = 1,
    /// Case 2: a reader invalidates a Modified copy.
    ReaderVsModified = 2,
    /// Case 3: a writer invalidates a Shared copy.
    WriterVsShared = 3,
}

impl InvKind {
    fn from_u8(v: u8) -> InvKind {
        match v {
            1 => InvKind::WriterVsModified,
            2 => InvKind::ReaderVsModified,
            3 => InvKind::WriterVsShared,
            _ => panic!("bad invalidation kind {v}"),
        }
    }
}

/// One invalidation request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvMsg {
    pub kind: InvKind,
    /// Priority level (§5.3.2), aged by the sender's retries.
    pub priority: u8,
    pub sender: ComputeIndex,
    pub gcl: RemoteAddr,
    /// The requester's frame (`header | data`), where a forward lands.
    pub frame_offset: u64,
    /// The requester's reply slot; the victim writes word `victim index` of it.
    pub reply_offset: u64,
    pub seq: u32,
    /// Sent by a try-latch ([`super::node::Node::try_lock`]): a busy victim drops it at once
    /// instead of memorising it, as the sender will not wait for the holder to finish
    /// (no-wait 2PL holds latches to commit). Carried in the kind byte's top bit.
    pub no_wait: bool,
}

const NO_WAIT_BIT: u8 = 0x80;

pub const INV_MSG_BYTES: usize = 1 + 1 + 1 + 2 + 8 + 8 + 8 + 4;

impl InvMsg {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(INV_MSG_BYTES);
        out.push(self.kind as u8 | if self.no_wait { NO_WAIT_BIT } else { 0 });
        out.push(self.priority);
        out.push(self.sender.0);
        out.extend_from_slice(&self.gcl.node.0.to_le_bytes());
        out.extend_from_slice(&self.gcl.offset_bytes.to_le_bytes());
        out.extend_from_slice(&self.frame_offset.to_le_bytes());
        out.extend_from_slice(&self.reply_offset.to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
        assert_eq!(out.len(), INV_MSG_BYTES);
        out
    }

    pub fn decode(bytes: &[u8]) -> InvMsg {
        assert_eq!(bytes.len(), INV_MSG_BYTES, "invalidation message of {} bytes", bytes.len());
        let u16_at = |i: usize| u16::from_le_bytes(bytes[i..i + 2].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
        let msg = InvMsg {
            kind: InvKind::from_u8(bytes[0] & !NO_WAIT_BIT),
            priority: bytes[1],
            sender: ComputeIndex(bytes[2]),
            gcl: RemoteAddr::new(NodeId(u16_at(3)), u64_at(5)),
            frame_offset: u64_at(13),
            reply_offset: u64_at(21),
            seq: u32::from_le_bytes(bytes[29..33].try_into().unwrap()),
            no_wait: bytes[0] & NO_WAIT_BIT != 0,
        };
        assert!(msg.seq != 0, "sequence numbers start at 1 so that a zero flag means waiting");
        msg
    }
}

/// How a victim answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReplyStatus {
    /// Ownership moved to the requester and the GCL was forwarded into its frame.
    Forwarded = 1,
    /// Ownership moved to the requester (handover without forwarding): READ memory.
    Granted = 2,
    /// The victim released its copy (Case 3, or naive Case 1/2): retry the latch.
    Released = 3,
    /// Dropped (§5.1.2 [P]): stale, evicted, or busy. Retry after T.
    Dropped = 4,
}

impl ReplyStatus {
    fn from_u8(v: u8) -> Option<ReplyStatus> {
        Some(match v {
            1 => ReplyStatus::Forwarded,
            2 => ReplyStatus::Granted,
            3 => ReplyStatus::Released,
            4 => ReplyStatus::Dropped,
            _ => return None,
        })
    }
}

/// A reply flag word.
pub fn reply_flag(seq: u32, peer_round_trips: u8, status: ReplyStatus) -> u64 {
    assert!(seq != 0);
    (seq as u64) << 16 | (peer_round_trips as u64) << 8 | status as u64
}

/// The reply in `flag` if it answers request `seq`.
pub fn parse_reply(flag: u64, seq: u32) -> Option<(ReplyStatus, u8)> {
    if (flag >> 16) as u32 != seq {
        return None;
    }
    let status = ReplyStatus::from_u8((flag & 0xff) as u8).expect("corrupt reply flag");
    Some((status, ((flag >> 8) & 0xff) as u8))
}

/// Priority level after `retries` failed global acquisitions (§5.3.2 [P] "positively correlated
/// to the number of retries"; the table is [REPO]).
pub fn priority_level(retries: u32) -> u8 {
    match retries {
        0..20 => 0,
        20..40 => 1,
        40..80 => 2,
        80..160 => 3,
        160..200 => 4,
        200..1000 => 5,
        _ => (5 + retries / 1000).min(255) as u8,
    }
}

/// Resend interval T = C·RTT/N_r (§5.1.2 [P]); it shrinks as retries grow.
pub fn resend_interval(c: u32, rtt: Nanos, retries: u32) -> Nanos {
    Nanos(c as u64 * rtt.0 / retries.max(1) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_round_trips() {
        let msg = InvMsg {
            kind: InvKind::ReaderVsModified,
            priority: 3,
            sender: ComputeIndex(7),
            gcl: RemoteAddr::new(NodeId(2), 0x1040),
            frame_offset: 0x800,
            reply_offset: 0x9000,
            seq: 42,
            no_wait: false,
        };
        assert_eq!(InvMsg::decode(&msg.encode()), msg);
        let try_msg = InvMsg { no_wait: true, kind: InvKind::WriterVsShared, ..msg };
        assert_eq!(InvMsg::decode(&try_msg.encode()), try_msg);
    }

    #[test]
    fn reply_flags_match_only_their_request() {
        let flag = reply_flag(9, 2, ReplyStatus::Forwarded);
        assert_eq!(parse_reply(flag, 9), Some((ReplyStatus::Forwarded, 2)));
        assert_eq!(parse_reply(flag, 8), None);
        assert_eq!(parse_reply(0, 1), None, "a zeroed slot is waiting");
    }

    #[test]
    fn priority_ages_and_interval_shrinks() {
        assert_eq!(priority_level(0), 0);
        assert_eq!(priority_level(45), 2);
        assert_eq!(priority_level(5000), 10);
        assert!(priority_level(10_000_000) == 255);
        let rtt = Nanos(2_000);
        assert_eq!(resend_interval(4, rtt, 0), Nanos(8_000));
        assert_eq!(resend_interval(4, rtt, 4), Nanos(2_000));
        assert!(resend_interval(4, rtt, 100) < resend_interval(4, rtt, 10));
    }
}
