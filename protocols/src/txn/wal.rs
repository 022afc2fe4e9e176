//! A compute node's write-ahead log on its storage device, with group commit (Fig. 19b: "write-
//! ahead logging is enabled", "the use of group commit to reduce overhead").
//!
//! A committing transaction appends its record's size and waits until the log is durable past
//! it. The first waiter that finds no flush in progress becomes the leader: it writes every byte
//! appended so far in one storage command (`Nic::ssd_write`, durable when it completes: the
//! write *is* the fsync, its latency and bandwidth the node's storage device model from the
//! NIC profile), then wakes the others; records appended meanwhile go in the next flush.
//!
//! [CHOICE] The log's bytes are not the records' contents (no recovery is run): the flush writes
//! the right number of bytes from a scratch area of the node's region at the log's tail (a ring
//! over the device), so its cost is right and its contents are never read.

use std::sync::Mutex;

use crate::common::error::{ProtocolError, ProtocolResult};
use crate::nic::{Nic, NicError};
use crate::sync::Notify;

#[derive(Default)]
struct State {
    appended: u64,
    durable: u64,
    flushing: bool,
    flushes: u64,
}

/// One node's log.
pub struct Wal {
    state: Mutex<State>,
    flushed: Notify,
    /// The scratch bytes a flush writes from, and how many there are.
    scratch_offset: u64,
    scratch_bytes: u64,
}

impl Wal {
    pub fn new(scratch_offset: u64, scratch_bytes: u64) -> Wal {
        Wal { state: Mutex::new(State::default()), flushed: Notify::new(), scratch_offset, scratch_bytes }
    }

    /// Flushes (storage writes) so far.
    pub fn flushes(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).flushes
    }

    /// Append a record of `bytes` and return once it is durable.
    pub async fn commit<N: Nic>(&self, nic: &N, bytes: u64) -> ProtocolResult<()> {
        let mine = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.appended += bytes.next_multiple_of(8);
            s.appended
        };
        loop {
            let lead = {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                if s.durable >= mine {
                    return Ok(());
                }
                let lead = !s.flushing;
                s.flushing = true;
                lead.then_some((s.durable, s.appended))
            };
            let Some((from, to)) = lead else {
                self.flushed.notified().await;
                continue;
            };
            let result = self.write(nic, from, to).await;
            {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                s.flushing = false;
                if result.is_ok() {
                    s.durable = to;
                    s.flushes += 1;
                }
            }
            self.flushed.notify_all();
            result?;
        }
    }

    /// Write log bytes `from..to` (a ring over the device), in commands of at most the scratch size.
    async fn write<N: Nic>(&self, nic: &N, from: u64, to: u64) -> ProtocolResult<()> {
        let device = nic.ssd_bytes();
        let chunk_max = self.scratch_bytes.min(device).min(u32::MAX as u64) & !7;
        let fail = |source: NicError| {
            ProtocolError::message(nic.node(), nic.now(), "SSDW", nic.node(), 0, "write-ahead log", source)
        };
        if chunk_max == 0 {
            return Err(fail(crate::nic::no_storage()));
        }
        let mut at = from;
        while at < to {
            let offset = at % device;
            let len = (to - at).min(chunk_max).min(device - offset);
            nic.ssd_write(offset, self.scratch_offset, len as u32).await.map_err(fail)?;
            at += len;
        }
        Ok(())
    }
}
