//! The directory protocol's messages and their wire encoding (little-endian 8-byte words, the
//! block data appended where a message carries it, so the fabric charges its real size). They
//! travel in [`crate::common::rpc`] envelopes: requests are calls, their grants replies, the
//! rest one-way notifications.
//!
//! ```text
//!  compute ──Request(Read|Write|WriteBack): call──▶ home (memory node, HOME_PORT)
//!  home    ──Invalidate / Recall: notify─────────▶ sharers / owner (INV_PORT)
//!  sharer  ──Ack (owner: + data): notify─────────▶ home (HOME_PORT)
//!  home    ──Reply (grant [+ data]) / WriteBackDone: reply──▶ requester's reply port
//! ```
//!
//! On the wire: the RPC envelope word (kind, reply port, request id — what this protocol's own
//! header carried before it moved onto the common layer), then tag, block and one field.

/// Directory requests and acks arrive here on memory nodes.
pub const HOME_PORT: u16 = 20;
/// Invalidations and recalls arrive here on compute nodes.
pub const INV_PORT: u16 = 21;
/// Replies for reply slot `s` of a compute node arrive on `REPLY_PORT_BASE + s`.
pub const REPLY_PORT_BASE: u16 = 100;

use crate::common::rpc::Wire;

/// What a compute node asks its home for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// A read miss: a Shared copy, data in the reply.
    Read,
    /// A write miss or upgrade: an Exclusive copy. `have_copy`: the requester still holds a
    /// Shared copy, so the home may grant without data if it agrees.
    Write { have_copy: bool },
    /// Evicting an Exclusive (dirty) copy: the data goes home.
    WriteBack,
}

/// The state the home grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Grant {
    Shared = 1,
    Exclusive = 2,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    Request {
        block: u64,
        kind: RequestKind,
        data: Option<Vec<u64>>,
    },
    /// A sharer's or owner's answer to Invalidate/Recall; an owner returns the data.
    Ack {
        block: u64,
        data: Option<Vec<u64>>,
    },
    /// Drop a Shared copy (a writer wants the block).
    Invalidate {
        block: u64,
    },
    /// Give the Exclusive copy's data back; keep a Shared copy if `downgrade` (a reader wants the
    /// block), else invalidate (a writer does).
    Recall {
        block: u64,
        downgrade: bool,
    },
    /// The grant. `invalidations`: other compute nodes the home invalidated or recalled for it.
    Reply {
        block: u64,
        grant: Grant,
        invalidations: u32,
        data: Option<Vec<u64>>,
    },
    WriteBackDone {
        block: u64,
    },
}

const TAG_REQUEST: u64 = 1;
const TAG_ACK: u64 = 2;
const TAG_INVALIDATE: u64 = 3;
const TAG_RECALL: u64 = 4;
const TAG_REPLY: u64 = 5;
const TAG_WRITEBACK_DONE: u64 = 6;
/// Words before the data: tag, block, one field (the RPC envelope is a fourth).
const HEADER_WORDS: usize = 3;

impl Msg {
    pub fn block(&self) -> u64 {
        match self {
            Msg::Request { block, .. }
            | Msg::Ack { block, .. }
            | Msg::Invalidate { block }
            | Msg::Recall { block, .. }
            | Msg::Reply { block, .. }
            | Msg::WriteBackDone { block, .. } => *block,
        }
    }

    pub fn data_words(&self) -> usize {
        match self {
            Msg::Request { data, .. } | Msg::Ack { data, .. } | Msg::Reply { data, .. } => {
                data.as_ref().map_or(0, Vec::len)
            }
            _ => 0,
        }
    }
}

impl Wire for Msg {
    fn encoded_len(&self) -> usize {
        (HEADER_WORDS + self.data_words()) * 8
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let (tag, field, data): (u64, u64, Option<&Vec<u64>>) = match self {
            Msg::Request { kind, data, .. } => {
                let (k, have) = match kind {
                    RequestKind::Read => (0, false),
                    RequestKind::Write { have_copy } => (1, *have_copy),
                    RequestKind::WriteBack => (2, false),
                };
                (TAG_REQUEST, k | (have as u64) << 8, data.as_ref())
            }
            Msg::Ack { data, .. } => (TAG_ACK, 0, data.as_ref()),
            Msg::Invalidate { .. } => (TAG_INVALIDATE, 0, None),
            Msg::Recall { downgrade, .. } => (TAG_RECALL, *downgrade as u64, None),
            Msg::Reply { grant, invalidations, data, .. } => {
                (TAG_REPLY, *grant as u64 | (*invalidations as u64) << 8, data.as_ref())
            }
            Msg::WriteBackDone { .. } => (TAG_WRITEBACK_DONE, 0, None),
        };
        let has_data = data.is_some() as u64;
        for w in [tag | has_data << 8, self.block(), field] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        for w in data.into_iter().flatten() {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }

    fn decode(bytes: &[u8]) -> Msg {
        assert!(
            bytes.len() >= HEADER_WORDS * 8 && bytes.len().is_multiple_of(8),
            "GAM message of {} bytes",
            bytes.len()
        );
        let word = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("eight bytes"));
        let (tag, block, field) = (word(0), word(1), word(2));
        let data = (tag >> 8 & 1 == 1).then(|| (HEADER_WORDS..bytes.len() / 8).map(word).collect::<Vec<_>>());
        if data.is_none() {
            assert_eq!(bytes.len(), HEADER_WORDS * 8, "trailing bytes without a data flag");
        }
        match tag & 0xff {
            TAG_REQUEST => {
                let kind = match field & 0xff {
                    0 => RequestKind::Read,
                    1 => RequestKind::Write { have_copy: field >> 8 & 1 == 1 },
                    2 => RequestKind::WriteBack,
                    k => panic!("bad request kind {k}"),
                };
                Msg::Request { block, kind, data }
            }
            TAG_ACK => Msg::Ack { block, data },
            TAG_INVALIDATE => Msg::Invalidate { block },
            TAG_RECALL => Msg::Recall { block, downgrade: field == 1 },
            TAG_REPLY => {
                let grant = match field & 0xff {
                    1 => Grant::Shared,
                    2 => Grant::Exclusive,
                    g => panic!("bad grant {g}"),
                };
                Msg::Reply { block, grant, invalidations: (field >> 8) as u32, data }
            }
            TAG_WRITEBACK_DONE => Msg::WriteBackDone { block },
            t => panic!("bad GAM message tag {t}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_round_trips() {
        let data = Some(vec![1, 2, u64::MAX]);
        let all = [
            Msg::Request { block: 7, kind: RequestKind::Read, data: None },
            Msg::Request { block: 7, kind: RequestKind::Write { have_copy: true }, data: None },
            Msg::Request { block: 1 << 40, kind: RequestKind::WriteBack, data: data.clone() },
            Msg::Ack { block: 3, data: None },
            Msg::Ack { block: 3, data: data.clone() },
            Msg::Invalidate { block: 0 },
            Msg::Recall { block: 5, downgrade: true },
            Msg::Recall { block: 5, downgrade: false },
            Msg::Reply { block: 2, grant: Grant::Exclusive, invalidations: 3, data: data.clone() },
            Msg::Reply { block: 2, grant: Grant::Shared, invalidations: 0, data: None },
            Msg::WriteBackDone { block: 8 },
        ];
        for m in all {
            let mut bytes = Vec::new();
            m.encode(&mut bytes);
            // With the 8-byte RPC envelope: 32 bytes + data, as before the port.
            assert_eq!(bytes.len(), m.encoded_len());
            assert_eq!(bytes.len() + crate::common::rpc::ENVELOPE_BYTES, 32 + 8 * m.data_words());
            assert_eq!(Msg::decode(&bytes), m);
        }
    }
}
