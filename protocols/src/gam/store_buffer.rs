//! GAM's TSO store buffers (SELCC §6 [P]: "TSO vs SEQ differ by write buffering"): each client
//! thread's writes go into its own FIFO buffer and return. `drain_depth` drainer tasks per
//! thread perform them, each taking the oldest write not yet taken whose block has no older
//! buffered write: with one drainer, writes become visible in program order (TSO); with more,
//! writes to different blocks are in flight together and may become visible out of order,
//! which is GAM's own model (its `Write` is asynchronous and returns at once; the GAM paper
//! enforces partial store order), while one block's writes stay in program order. A thread's
//! reads look in its own buffer first (store-to-load forwarding).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::common::error::ProtocolResult;
use crate::nic::{Nanos, Nic};
use crate::sync::Notify;

use super::node::{Access, Node};

/// One buffered TSO write.
#[derive(Clone, Debug)]
pub(super) struct Buffered {
    id: u64,
    block: u64,
    offset_bytes: u32,
    words: Vec<u64>,
    /// A drainer is performing it.
    taken: bool,
}

#[derive(Default)]
pub(super) struct BufferState {
    pub(super) entries: VecDeque<Buffered>,
    next_id: u64,
    pub(super) closed: bool,
}

/// A thread's FIFO store buffer (TSO).
#[derive(Default)]
pub struct StoreBuffer {
    pub(super) state: Mutex<BufferState>,
    pub(super) changed: Notify,
}

impl<N: Nic> Node<N> {
    pub(super) async fn buffer_write(
        &self,
        thread: u32,
        block: u64,
        offset_bytes: u32,
        words: &[u64],
    ) -> ProtocolResult<()> {
        let buffer = &self.buffers[thread as usize];
        loop {
            self.errors.check()?;
            {
                let mut state = buffer.state.lock().unwrap();
                assert!(!state.closed, "a write after finish");
                if state.entries.len() < self.config.write_buffer_entries as usize {
                    state.next_id += 1;
                    let id = state.next_id;
                    state.entries.push_back(Buffered {
                        id,
                        block,
                        offset_bytes,
                        words: words.to_vec(),
                        taken: false,
                    });
                    break;
                }
            }
            self.stats.lock().unwrap().buffer_stalls += 1;
            buffer.changed.notified().await;
        }
        buffer.changed.notify_all();
        Ok(())
    }

    /// Store-to-load forwarding: true if the newest overlapping buffered write covers the read
    /// (then `out` holds its words). A partial overlap waits until that write has drained.
    pub(super) async fn read_store_buffer(
        &self,
        thread: u32,
        block: u64,
        offset_bytes: u32,
        out: &mut [u64],
    ) -> ProtocolResult<bool> {
        let buffer = &self.buffers[thread as usize];
        let (start, end) = (offset_bytes, offset_bytes + out.len() as u32 * 8);
        loop {
            let blocking = {
                let state = buffer.state.lock().unwrap();
                let newest = state.entries.iter().rev().find(|b| {
                    b.block == block
                        && b.offset_bytes < end
                        && start < b.offset_bytes + b.words.len() as u32 * 8
                });
                match newest {
                    None => return Ok(false),
                    Some(b)
                        if b.offset_bytes <= start && end <= b.offset_bytes + b.words.len() as u32 * 8 =>
                    {
                        let first = ((start - b.offset_bytes) / 8) as usize;
                        out.copy_from_slice(&b.words[first..first + out.len()]);
                        self.stats.lock().unwrap().buffer_forwards += 1;
                        return Ok(true);
                    }
                    Some(b) => b.id,
                }
            };
            self.stats.lock().unwrap().buffer_stalls += 1;
            loop {
                if !buffer.state.lock().unwrap().entries.iter().any(|b| b.id == blocking) {
                    break;
                }
                self.errors.check()?;
                buffer.changed.notified().await;
            }
        }
    }

    /// Drainer `k` of thread `thread`'s store buffer: performs the oldest write no other
    /// drainer has taken and whose block has no older write still buffered (so one block's
    /// writes keep program order). Stops at its first error (recorded on the node).
    pub async fn run_drainer(self: Arc<Self>, thread: u32, k: u32) {
        let mut w = self.drainer_worker(thread, k);
        let buffer = &self.buffers[thread as usize];
        loop {
            let next = {
                let mut state = buffer.state.lock().unwrap();
                match next_drainable(&state.entries) {
                    Some(i) => {
                        state.entries[i].taken = true;
                        Some(state.entries[i].clone())
                    }
                    None if state.closed && state.entries.is_empty() => return,
                    None => None,
                }
            };
            let Some(b) = next else {
                buffer.changed.notified().await;
                continue;
            };
            self.worker_step(&w.nic).await;
            w.nic.cpu(Nanos(self.config.cpu.access_ns)).await;
            let access = Access::Write { offset_bytes: b.offset_bytes, words: &b.words, replaced: None };
            let trace = match self.access(&mut w, b.block, access).await {
                Ok(trace) => trace,
                Err(e) => {
                    self.fail(e);
                    return;
                }
            };
            self.stats.lock().unwrap().record_access(&trace);
            {
                let mut state = buffer.state.lock().unwrap();
                let i = state
                    .entries
                    .iter()
                    .position(|e| e.id == b.id)
                    .expect("only its drainer removes a write");
                state.entries.remove(i);
            }
            buffer.changed.notify_all();
        }
    }
}

/// The oldest write not taken by a drainer whose block has no older write in the buffer.
fn next_drainable(entries: &VecDeque<Buffered>) -> Option<usize> {
    entries
        .iter()
        .enumerate()
        .find(|(i, e)| !e.taken && !entries.iter().take(*i).any(|older| older.block == e.block))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(id: u64, block: u64, taken: bool) -> Buffered {
        Buffered { id, block, offset_bytes: 0, words: vec![id], taken }
    }

    #[test]
    fn a_block_with_an_older_buffered_write_waits_and_other_blocks_go_ahead() {
        let entries: VecDeque<_> = [write(1, 7, true), write(2, 7, false), write(3, 9, false)].into();
        assert_eq!(next_drainable(&entries), Some(2), "block 7's second write waits for its first");
        let entries: VecDeque<_> = [write(1, 7, false), write(2, 9, false)].into();
        assert_eq!(next_drainable(&entries), Some(0), "oldest first");
        let entries: VecDeque<_> = [write(1, 7, true), write(2, 7, false)].into();
        assert_eq!(next_drainable(&entries), None);
    }
}
