//! Seam extensions that need no new verb: unsignaled posts, `wait_word`, the storage file.
//!
//! * **Unsignaled posts** go out like a batch (last work request signaled, so the completion
//!   slot is reclaimed) but nobody waits: the slot is abandoned at once and the poller frees it
//!   when the completion arrives. Slots bound them (`qp_depth` per QP, `QpOverflow` beyond),
//!   which is the "signal every N" rule made safe: a CQE per post instead of per N posts, the
//!   cheap way to keep the send queue from filling with unreaped entries. An error completion
//!   moves the QP to the error state, so the next verb on that QP reports it.
//! * **`wait_word`** spins on the word with bounded backoff: a few yields, then sleeps that
//!   double from 1 µs up to the caller's period (never longer, so the wake is at most one period
//!   late, like the poll loop it replaces).
//! * **Storage** is a plain file (`HwConfig::ssd_path`): `pread` into the region, `pwrite` from
//!   it + `fdatasync`, blocking the calling worker for the I/O (no O_DIRECT, no io_uring).

use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use dmsim_protocols::nic::wait::timeout_error;
use dmsim_protocols::nic::{self, Nanos, NicError, NicResult, RemoteAddr, Verb, WordCond};

use super::slots::SlotWait;
use super::NodeState;
use crate::runtime::Poller;

/// Yields before the first sleep, and the first sleep.
const SPIN_YIELDS: u32 = 16;
const FIRST_SLEEP: Duration = Duration::from_micros(1);

impl NodeState {
    pub(super) fn post_unsignaled(&self, channel: u16, verbs: &[Verb]) -> NicResult<()> {
        let (qs, slot, gen, wrs) = self.prepare(channel, verbs)?;
        if let Err(e) = qs.qp.post_send(&wrs) {
            qs.cancel(slot);
            return Err(NicError::QpError { qp: qs.name.clone(), detail: e.to_string() });
        }
        if self.trace {
            let (me, now, verbs) = (self.me, self.runtime.now(), verbs.to_vec());
            crate::trace::line(move || format!("[{me} {now}] unsignaled {verbs:?}"));
        }
        // Dropping the wait marks the slot abandoned: the poller frees it on completion.
        drop(SlotWait { qs, slot, gen });
        Ok(())
    }

    pub(super) async fn wait_word(
        &self,
        offset_bytes: u64,
        until: WordCond,
        period: Nanos,
        timeout: Option<Nanos>,
    ) -> NicResult<u64> {
        nic::check_range(&self.cluster, RemoteAddr::new(self.me, offset_bytes), 8)?;
        let region = self.region_mr.region();
        let started = Instant::now();
        let cap = Duration::from_nanos(period.0.max(1));
        let mut backoff = FIRST_SLEEP.min(cap);
        let mut spins = 0u32;
        loop {
            let word = region.load(offset_bytes);
            if until.holds(word) {
                return Ok(word);
            }
            if let Some(t) = timeout {
                if started.elapsed() >= Duration::from_nanos(t.0) {
                    return Err(timeout_error(self.me, offset_bytes, t));
                }
            }
            if spins < SPIN_YIELDS {
                spins += 1;
                self.poll(); // the write we wait for may be behind a completion we can deliver
                crate::runtime::yield_now().await;
            } else {
                self.runtime.sleep(backoff).await;
                backoff = (backoff * 2).min(cap);
            }
        }
    }

    pub(super) fn ssd_io(
        &self,
        write: bool,
        ssd_offset: u64,
        local_bytes: u64,
        len_bytes: u32,
    ) -> NicResult<()> {
        let Some(file) = &self.ssd else { return Err(nic::no_storage()) };
        let len = len_bytes as u64;
        let size = self.config.ssd_bytes;
        if !ssd_offset.is_multiple_of(8) || !len.is_multiple_of(8) {
            return Err(NicError::Unaligned { offset_bytes: ssd_offset, len_bytes: len });
        }
        if ssd_offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(NicError::BadAddress {
                node: self.me,
                offset_bytes: ssd_offset,
                len_bytes: len,
                region_size_bytes: size,
            });
        }
        nic::check_range(&self.cluster, RemoteAddr::new(self.me, local_bytes), len)?;
        let region = self.region_mr.region();
        let mut words = vec![0u64; (len / 8) as usize];
        let io_err = |e: std::io::Error| NicError::QpError {
            qp: format!("{} storage file", self.me),
            detail: format!("{} at {ssd_offset:#x} len {len}: {e}", if write { "write" } else { "read" }),
        };
        if write {
            region.read_words(local_bytes, &mut words);
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            file.write_all_at(&bytes, ssd_offset).map_err(io_err)?;
            file.sync_data().map_err(io_err)?;
        } else {
            let mut bytes = vec![0u8; len as usize];
            file.read_exact_at(&mut bytes, ssd_offset).map_err(io_err)?;
            for (w, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
                *w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            }
            region.write_words(local_bytes, &words);
        }
        Ok(())
    }
}
