//! Completion queues: creation, polling through the context's ops table, completions copied out.

use super::*;

/// One completion, copied out of the CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub wr_id: u64,
    /// `ibv_wc_status`; 0 is success.
    pub status: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub qp_num: u32,
}

impl Completion {
    pub fn ok(&self) -> bool {
        self.status == sys::ibv_wc_status::IBV_WC_SUCCESS
    }
    /// Transport retries exhausted: the peer did not answer (gone, or never connected).
    pub fn peer_unreachable(&self) -> bool {
        self.status == sys::ibv_wc_status::IBV_WC_RETRY_EXC_ERR
            || self.status == sys::ibv_wc_status::IBV_WC_RNR_RETRY_EXC_ERR
    }
    /// Flushed because the QP had already gone to the error state.
    pub fn flushed(&self) -> bool {
        self.status == sys::ibv_wc_status::IBV_WC_WR_FLUSH_ERR
    }
    pub fn status_str(&self) -> String {
        // Safety: ibv_wc_status_str returns a static NUL-terminated string for any value.
        let s = unsafe { CStr::from_ptr(sys::ibv_wc_status_str(self.status)) };
        format!("{} (status {}, vendor_err {:#x})", s.to_string_lossy(), self.status, self.vendor_err)
    }
}

/// A completion queue.
pub struct Cq {
    pub(super) ptr: NonNull<sys::ibv_cq>,
    ctx: Arc<Context>,
}

// Safety: ibv_poll_cq is thread-safe in libibverbs providers (they lock the CQ).
unsafe impl Send for Cq {}
// Safety: as above.
unsafe impl Sync for Cq {}

impl Cq {
    pub fn new(ctx: &Arc<Context>, depth: u32) -> Result<Arc<Cq>, HwError> {
        // Safety: the context is open; no completion channel; comp vector 0 always exists.
        let ptr = unsafe {
            sys::ibv_create_cq(ctx.ptr.as_ptr(), depth as i32, ptr::null_mut(), ptr::null_mut(), 0)
        };
        let ptr = NonNull::new(ptr).ok_or_else(|| ctx.err(format!("ibv_create_cq({depth}): {}", errno())))?;
        Ok(Arc::new(Cq { ptr, ctx: ctx.clone() }))
    }

    /// Non-blocking: copies up to `out.len()` completions into `out`, returns how many.
    pub fn poll(&self, out: &mut [Completion]) -> Result<usize, HwError> {
        let max = out.len();
        let mut slots = out.iter_mut();
        self.poll_each(max, |c| {
            if let Some(o) = slots.next() {
                *o = c;
            }
        })
    }

    /// Non-blocking: hands up to `max` (at most 16) completions to `each`, returns how many.
    ///
    /// The provider's work-completion array is left uninitialised: zeroing it on every call (a
    /// CQ is polled in a tight loop) costs more than the poll itself under emulation.
    pub fn poll_each(&self, max: usize, mut each: impl FnMut(Completion)) -> Result<usize, HwError> {
        const CHUNK: usize = 16;
        let mut wcs = [const { MaybeUninit::<sys::ibv_wc>::uninit() }; CHUNK];
        let want = max.min(CHUNK) as i32;
        // Safety: the ops table of an open context is filled by the provider; `wcs` has room
        // for `want` entries (MaybeUninit<T> has T's layout), of which the provider writes the
        // first `n`; the CQ lives as long as `self`.
        let n = unsafe {
            let ctx = self.ctx.ptr.as_ptr();
            match (*ctx).ops.poll_cq {
                Some(poll_cq) => poll_cq(self.ptr.as_ptr(), want, wcs.as_mut_ptr().cast()),
                None => return Err(self.ctx.err("provider has no poll_cq")),
            }
        };
        if n < 0 {
            return Err(self.ctx.err(format!("ibv_poll_cq failed ({n})")));
        }
        let n = (n as usize).min(CHUNK);
        for wc in &wcs[..n] {
            // Safety: the provider wrote the first `n` entries (ibv_poll_cq's contract).
            let wc = unsafe { wc.assume_init_ref() };
            let (status, vendor_err) = wc.error().unwrap_or((sys::ibv_wc_status::IBV_WC_SUCCESS, 0));
            each(Completion {
                wr_id: wc.wr_id(),
                status,
                vendor_err,
                byte_len: wc.len() as u32,
                qp_num: wc.qp_num,
            });
        }
        Ok(n)
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // Safety: QPs hold Arc<Cq>, so no QP uses this CQ any more.
        unsafe { sys::ibv_destroy_cq(self.ptr.as_ptr()) };
    }
}
