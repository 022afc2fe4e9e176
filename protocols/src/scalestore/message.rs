//! The message catalogue (spec §3.2) as mailbox words. A message is one or two inline RDMA
//! WRITEs into the receiver's slot: the argument word, then the head word whose nonzero
//! sequence field is the flag the receiver polls (RC keeps them in order on one QP).
//!
//! | paper | here | direction |
//! |---|---|---|
//! | ownership request (S / X) | `Kind::Own` (+ `has_copy`: an S holder upgrading) | worker → directory handler |
//! | ownership response | [`Response`] `Granted` (page written before it when `page_sent`), naming a `source` and the holders to invalidate | directory → worker |
//! | ownership transfer request | `Kind::Take` (the holder drops the page) | worker → predecessor |
//! | copy request (code's `PCR`) | `Kind::Copy` (the holder keeps it) | worker → a node-shared owner |
//! | ownership invalidation request | `Kind::Inval` (argument: the requester's conflict epoch) | worker → each node-shared owner |
//! | transfer / invalidation response | `WithPage` / `Ack` / `CopyFailed` / `NotFound` | holder → worker |
//! | eviction batch (§4.2) | `Kind::Evict` (page field: entries in the list written before it) | page provider → directory handler |
//! | its answer | `Ack`, argument: bitmap of accepted entries | directory → page provider |
//! | baselines only (`conflicts: fifo / busy_polling`, see `baselines`): "D is informed" | `Kind::Done` (one head word in the sender's ack slot, no response) | requester → directory |
//! | baselines only: busy polling's refusal | `Code::Retry` | directory → worker |
//! | ablation only (`transfer_done_message`): "the page transfer has finished" | `Kind::Transferred`, answered `Ack` | requester → the handler that sent the page |

/// What a request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Own = 1,
    Take = 2,
    Copy = 3,
    Inval = 4,
    Evict = 5,
    /// Baselines only: the requester installed the page the directory granted it (the
    /// acknowledgment that frees the page for the next request, spec §3.7 a/b). Written into
    /// the sender's ack slot ([`super::baselines::ack_slot`]), not its mailbox; no response.
    Done = 6,
    /// The ablation's page transfer without the handler's page write (`transfer_done_message`):
    /// the requester tells the handler that wrote it the page that the transfer is over; the
    /// handler acknowledges (`Ack`), changing nothing.
    Transferred = 7,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub kind: Kind,
    pub page: u64,
    pub exclusive: bool,
    pub has_copy: bool,
    /// `Inval`, `Take`: the epoch the directory gave the requester.
    pub epoch: u64,
    pub seq: u16,
}

const PAGE_MASK: u64 = (1 << 40) - 1;

impl Request {
    /// `(argument word, head word)`.
    pub fn encode(&self) -> (u64, u64) {
        let head = (self.kind as u64)
            | (self.exclusive as u64) << 4
            | (self.has_copy as u64) << 5
            | (self.page & PAGE_MASK) << 8
            | (self.seq as u64) << 48;
        (self.epoch, head)
    }

    /// `None`: no message (sequence 0).
    pub fn decode(arg: u64, head: u64) -> Option<Request> {
        let seq = (head >> 48) as u16;
        if seq == 0 {
            return None;
        }
        let kind = match head & 0xf {
            1 => Kind::Own,
            2 => Kind::Take,
            3 => Kind::Copy,
            4 => Kind::Inval,
            5 => Kind::Evict,
            6 => Kind::Done,
            7 => Kind::Transferred,
            k => panic!("ScaleStore request of unknown kind {k}"),
        };
        Some(Request {
            kind,
            page: head >> 8 & PAGE_MASK,
            exclusive: head >> 4 & 1 == 1,
            has_copy: head >> 5 & 1 == 1,
            epoch: arg,
            seq,
        })
    }
}

/// Result codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// The directory's answer to `Own`.
    Granted = 1,
    /// A `Take`/`Copy` served: the page was written before this.
    WithPage = 2,
    /// An invalidation done (or not needed).
    Ack = 3,
    /// The copy source no longer holds the page: ask the directory again.
    CopyFailed = 4,
    /// A `Take` found no frame: owner stability is broken.
    NotFound = 5,
    /// Busy polling only: a transfer of the page is in flight; back off and ask again.
    Retry = 6,
}

/// A response: head word `code | source | flags | epoch | seq`, argument word the holders to
/// invalidate (a bitmap: at most 64 nodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    pub code: Code,
    /// `Granted`: the node to fetch the page from (`Take` if `take`, else `Copy`).
    pub source: Option<u16>,
    pub take: bool,
    /// `Granted`: the page was written into the requester's frame before this response.
    pub page_sent: bool,
    pub invalidate: u64,
    /// `Granted`: the page's conflict epoch after this request.
    pub epoch: u32,
    pub seq: u16,
}

pub const SEQ_MASK: u64 = 0xffff << 48;

impl Response {
    pub fn simple(code: Code, seq: u16) -> Response {
        Response { code, source: None, take: false, page_sent: false, invalidate: 0, epoch: 0, seq }
    }

    pub fn encode(&self) -> (u64, u64) {
        let source = self.source.map(|s| s as u64 + 1).unwrap_or(0);
        let head = self.code as u64
            | source << 4
            | (self.take as u64) << 12
            | (self.page_sent as u64) << 13
            | (self.epoch as u64 & 0xff_ffff) << 16
            | (self.seq as u64) << 48;
        // Epochs wrap at 2^24 per page here; comparisons use wrapping order (see node.rs).
        (self.invalidate, head)
    }

    pub fn decode(arg: u64, head: u64) -> Response {
        let code = match head & 0xf {
            1 => Code::Granted,
            2 => Code::WithPage,
            3 => Code::Ack,
            4 => Code::CopyFailed,
            5 => Code::NotFound,
            6 => Code::Retry,
            c => panic!("ScaleStore response of unknown code {c}"),
        };
        let source = (head >> 4 & 0xff) as u16;
        Response {
            code,
            source: (source > 0).then(|| source - 1),
            take: head >> 12 & 1 == 1,
            page_sent: head >> 13 & 1 == 1,
            invalidate: arg,
            epoch: (head >> 16 & 0xff_ffff) as u32,
            seq: (head >> 48) as u16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let r =
            Request { kind: Kind::Inval, page: 12345, exclusive: true, has_copy: false, epoch: 77, seq: 9 };
        let (a, h) = r.encode();
        assert_eq!(Request::decode(a, h), Some(r));
        assert_eq!(Request::decode(0, 0), None);
        let p = Response {
            code: Code::Granted,
            source: Some(3),
            take: true,
            page_sent: false,
            invalidate: 0b1010,
            epoch: 4242,
            seq: 65535,
        };
        let (a, h) = p.encode();
        assert_eq!(Response::decode(a, h), p);
    }
}
