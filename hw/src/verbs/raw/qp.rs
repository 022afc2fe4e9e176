//! RC queue pairs: creation, INIT → RTR → RTS, posting sends (doorbell chains) and receives,
//! and the pinning rule of [`super`]: a QP keeps every memory region it posted against alive.

use super::*;

#[derive(Clone, Copy, Debug)]
pub struct QpCaps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
}

/// The remote side of an RC connection, as exchanged at bootstrap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteQp {
    pub qpn: u32,
    pub psn: u32,
    pub lid: u16,
    pub gid: [u8; 16],
}

/// Connection parameters (see `ibv_modify_qp(3)`).
#[derive(Clone, Copy, Debug)]
pub struct ConnectParams {
    pub port: u8,
    /// Use a GRH with this source GID index (RoCE needs one); `None` for InfiniBand with LIDs.
    pub gid_index: Option<u8>,
    /// `ibv_mtu` enum value.
    pub mtu: u32,
    pub local_psn: u32,
    /// Outstanding READ/atomic requests, each direction.
    pub max_rd_atomic: u8,
    /// Local ACK timeout exponent: 4.096 µs · 2^timeout.
    pub timeout: u8,
    pub retry_cnt: u8,
    /// 7 = retry forever on receiver-not-ready.
    pub rnr_retry: u8,
}

/// A remote location for one-sided verbs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteBuf {
    pub addr: u64,
    pub rkey: u32,
}

/// The operation of one send-queue work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    Read(RemoteBuf),
    Write(RemoteBuf),
    /// The old value lands in the 8-byte local buffer.
    Cas {
        remote: RemoteBuf,
        compare: u64,
        swap: u64,
    },
    /// The old value lands in the 8-byte local buffer.
    Faa {
        remote: RemoteBuf,
        add: u64,
    },
    Send,
}

impl SendOp {
    pub fn name(&self) -> &'static str {
        match self {
            SendOp::Read(_) => "READ",
            SendOp::Write(_) => "WRITE",
            SendOp::Cas { .. } => "CAS",
            SendOp::Faa { .. } => "FAA",
            SendOp::Send => "SEND",
        }
    }
}

/// A local buffer inside a registered region, bounds-checked at construction.
#[derive(Clone)]
pub struct LocalBuf {
    mr: Arc<Mr>,
    offset_bytes: u64,
    len_bytes: u32,
}

impl LocalBuf {
    pub fn new(mr: &Arc<Mr>, offset_bytes: u64, len_bytes: u32) -> Result<LocalBuf, HwError> {
        let end = offset_bytes.checked_add(len_bytes as u64);
        if end.is_none_or(|end| end > mr.len_bytes()) {
            return Err(mr.pd.ctx.err(format!(
                "local buffer {offset_bytes:#x}+{len_bytes} outside registered region of {} bytes",
                mr.len_bytes()
            )));
        }
        Ok(LocalBuf { mr: mr.clone(), offset_bytes, len_bytes })
    }
    fn sge(&self) -> sys::ibv_sge {
        sys::ibv_sge {
            addr: self.mr.addr() + self.offset_bytes,
            length: self.len_bytes,
            lkey: self.mr.lkey(),
        }
    }
}

/// One send-queue work request.
#[derive(Clone)]
pub struct SendWr {
    pub wr_id: u64,
    pub op: SendOp,
    pub local: LocalBuf,
    pub signaled: bool,
}

/// An RC queue pair.
pub struct Qp {
    ptr: NonNull<sys::ibv_qp>,
    pd: Arc<Pd>,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    /// Every MR a work request of this QP has referenced; see the module docs.
    pinned: Mutex<Vec<Arc<Mr>>>,
    /// The first few entries of `pinned`, compared by address without the lock: a post only
    /// checks that its regions are pinned, which almost always they already are. An address
    /// here stays valid as an identity because `pinned` keeps its MR alive.
    pinned_fast: [AtomicPtr<Mr>; PINNED_FAST],
}

// Safety: ibv_post_send/recv and ibv_modify_qp are thread-safe in libibverbs providers (the
// provider locks the queues); Rust-side state is behind a Mutex.
unsafe impl Send for Qp {}
// Safety: as above.
unsafe impl Sync for Qp {}

/// How many pinned regions a QP can check without taking its lock (HwNic posts from four).
const PINNED_FAST: usize = 4;

/// Most work requests in one chained post.
pub const MAX_CHAIN: usize = 16;

impl Qp {
    pub fn new_rc(
        pd: &Arc<Pd>,
        send_cq: &Arc<Cq>,
        recv_cq: &Arc<Cq>,
        caps: QpCaps,
    ) -> Result<Arc<Qp>, HwError> {
        let mut init = sys::ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: send_cq.ptr.as_ptr(),
            recv_cq: recv_cq.ptr.as_ptr(),
            srq: ptr::null_mut(),
            cap: sys::ibv_qp_cap {
                max_send_wr: caps.max_send_wr,
                max_recv_wr: caps.max_recv_wr,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: sys::ibv_qp_type::IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // Safety: PD and CQs are alive (held by the QP); `init` is fully initialised.
        let ptr = unsafe { sys::ibv_create_qp(pd.ptr.as_ptr(), &mut init) };
        let ptr = NonNull::new(ptr).ok_or_else(|| {
            pd.ctx.err(format!(
                "ibv_create_qp(RC, send_wr {}, recv_wr {}): {}",
                caps.max_send_wr,
                caps.max_recv_wr,
                errno()
            ))
        })?;
        Ok(Arc::new(Qp {
            ptr,
            pd: pd.clone(),
            send_cq: send_cq.clone(),
            recv_cq: recv_cq.clone(),
            pinned: Mutex::new(Vec::new()),
            pinned_fast: [const { AtomicPtr::new(ptr::null_mut()) }; PINNED_FAST],
        }))
    }

    pub fn qpn(&self) -> u32 {
        // Safety: qp_num is set at creation and never changes.
        unsafe { self.ptr.as_ref().qp_num }
    }

    pub fn device(&self) -> &str {
        self.pd.ctx.name()
    }

    fn modify(
        &self,
        attr: &mut sys::ibv_qp_attr,
        mask: sys::ibv_qp_attr_mask,
        step: &str,
    ) -> Result<(), HwError> {
        // Safety: the QP is alive; `attr` is initialised for every field `mask` names.
        let rc = unsafe { sys::ibv_modify_qp(self.ptr.as_ptr(), attr, mask.0 as i32) };
        if rc != 0 {
            return Err(self.pd.ctx.err(format!(
                "qp {:#x}: ibv_modify_qp to {step}: {}",
                self.qpn(),
                code(rc)
            )));
        }
        Ok(())
    }

    /// RESET → INIT → RTR → RTS against `remote`.
    pub fn connect(&self, remote: &RemoteQp, p: &ConnectParams) -> Result<(), HwError> {
        use sys::ibv_qp_attr_mask as m;
        let mut attr = sys::ibv_qp_attr {
            qp_state: sys::ibv_qp_state::IBV_QPS_INIT,
            pkey_index: 0,
            port_num: p.port,
            qp_access_flags: (sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
                | sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ
                | sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
                | sys::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC)
                .0,
            ..Default::default()
        };
        self.modify(
            &mut attr,
            m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_ACCESS_FLAGS,
            "INIT",
        )?;

        let mut attr = sys::ibv_qp_attr {
            qp_state: sys::ibv_qp_state::IBV_QPS_RTR,
            path_mtu: p.mtu,
            dest_qp_num: remote.qpn,
            rq_psn: remote.psn,
            max_dest_rd_atomic: p.max_rd_atomic,
            min_rnr_timer: 12,
            ..Default::default()
        };
        attr.ah_attr.dlid = remote.lid;
        attr.ah_attr.sl = 0;
        attr.ah_attr.port_num = p.port;
        if let Some(gid_index) = p.gid_index {
            attr.ah_attr.is_global = 1;
            attr.ah_attr.grh.dgid = sys::ibv_gid { raw: remote.gid };
            attr.ah_attr.grh.sgid_index = gid_index;
            attr.ah_attr.grh.hop_limit = 64;
        }
        self.modify(
            &mut attr,
            m::IBV_QP_STATE
                | m::IBV_QP_AV
                | m::IBV_QP_PATH_MTU
                | m::IBV_QP_DEST_QPN
                | m::IBV_QP_RQ_PSN
                | m::IBV_QP_MAX_DEST_RD_ATOMIC
                | m::IBV_QP_MIN_RNR_TIMER,
            "RTR",
        )?;

        let mut attr = sys::ibv_qp_attr {
            qp_state: sys::ibv_qp_state::IBV_QPS_RTS,
            sq_psn: p.local_psn,
            timeout: p.timeout,
            retry_cnt: p.retry_cnt,
            rnr_retry: p.rnr_retry,
            max_rd_atomic: p.max_rd_atomic,
            ..Default::default()
        };
        self.modify(
            &mut attr,
            m::IBV_QP_STATE
                | m::IBV_QP_SQ_PSN
                | m::IBV_QP_TIMEOUT
                | m::IBV_QP_RETRY_CNT
                | m::IBV_QP_RNR_RETRY
                | m::IBV_QP_MAX_QP_RD_ATOMIC,
            "RTS",
        )
    }

    /// Moves the QP to the error state: outstanding work requests are flushed with errors.
    pub fn to_error(&self) -> Result<(), HwError> {
        let mut attr = sys::ibv_qp_attr { qp_state: sys::ibv_qp_state::IBV_QPS_ERR, ..Default::default() };
        self.modify(&mut attr, sys::ibv_qp_attr_mask::IBV_QP_STATE, "ERR")
    }

    fn pin(&self, mr: &Arc<Mr>) {
        let addr = Arc::as_ptr(mr).cast_mut();
        if self.pinned_fast.iter().any(|p| p.load(Ordering::Acquire) == addr) {
            return;
        }
        let mut pinned = self.pinned.lock().unwrap_or_else(|e| e.into_inner());
        if !pinned.iter().any(|p| Arc::ptr_eq(p, mr)) {
            pinned.push(mr.clone());
            // Publish only after the push (under the lock, so no two pins race for a slot).
            if let Some(free) = self.pinned_fast.iter().find(|p| p.load(Ordering::Acquire).is_null()) {
                free.store(addr, Ordering::Release);
            }
        }
    }

    fn check_pd(&self, mr: &Mr) -> Result<(), HwError> {
        if !Arc::ptr_eq(&mr.pd, &self.pd) {
            return Err(self
                .pd
                .ctx
                .err(format!("qp {:#x}: local buffer registered in another PD", self.qpn())));
        }
        Ok(())
    }

    /// Posts `wrs` as one chained list (one doorbell). Atomics need an 8-byte local buffer.
    /// An error names the first work request the provider refused.
    pub fn post_send(&self, wrs: &[SendWr]) -> Result<(), HwError> {
        if wrs.is_empty() || wrs.len() > MAX_CHAIN {
            return Err(self
                .pd
                .ctx
                .err(format!("post_send of {} work requests (1..={MAX_CHAIN})", wrs.len())));
        }
        let mut sges = [sys::ibv_sge::default(); MAX_CHAIN];
        // Only the first `n` entries are written (and read by the provider, which follows
        // `next`): zeroing all MAX_CHAIN (2 KiB) per post is a `rep stosb` that costs tens of
        // microseconds under emulation.
        let mut raw = [const { MaybeUninit::<sys::ibv_send_wr>::uninit() }; MAX_CHAIN];
        for (i, wr) in wrs.iter().enumerate() {
            self.check_pd(&wr.local.mr)?;
            if matches!(wr.op, SendOp::Cas { .. } | SendOp::Faa { .. }) && wr.local.len_bytes != 8 {
                return Err(self.pd.ctx.err(format!("{} needs an 8-byte local buffer", wr.op.name())));
            }
            self.pin(&wr.local.mr);
            sges[i] = wr.local.sge();
            // Safety: an all-zero ibv_send_wr is a valid value (null pointers, zero counts).
            let mut w: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
            w.wr_id = wr.wr_id;
            w.num_sge = 1;
            w.send_flags = if wr.signaled { sys::ibv_send_flags::IBV_SEND_SIGNALED.0 } else { 0 };
            match wr.op {
                SendOp::Read(r) | SendOp::Write(r) => {
                    w.opcode = if matches!(wr.op, SendOp::Read(_)) {
                        sys::ibv_wr_opcode::IBV_WR_RDMA_READ
                    } else {
                        sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE
                    };
                    w.wr.rdma =
                        sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr: r.addr, rkey: r.rkey };
                }
                SendOp::Cas { remote, compare, swap } => {
                    w.opcode = sys::ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP;
                    w.wr.atomic = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
                        remote_addr: remote.addr,
                        compare_add: compare,
                        swap,
                        rkey: remote.rkey,
                    };
                }
                SendOp::Faa { remote, add } => {
                    w.opcode = sys::ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD;
                    w.wr.atomic = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
                        remote_addr: remote.addr,
                        compare_add: add,
                        swap: 0,
                        rkey: remote.rkey,
                    };
                }
                SendOp::Send => w.opcode = sys::ibv_wr_opcode::IBV_WR_SEND,
            }
            raw[i].write(w);
        }
        // Link the chain only now that `raw` and `sges` no longer move.
        let n = wrs.len();
        let base: *mut sys::ibv_send_wr = raw.as_mut_ptr().cast();
        for (i, sge) in sges.iter_mut().enumerate().take(n) {
            // Safety: `i` and `i + 1` (when < n) are in bounds of `raw` and entry `i` was
            // initialised above; `base` points at `raw` (MaybeUninit<T> has T's layout).
            unsafe {
                (*base.add(i)).sg_list = sge;
                (*base.add(i)).next = if i + 1 < n { base.add(i + 1) } else { ptr::null_mut() };
            }
        }
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // Safety: the chain and its SGEs live on this stack frame for the call (the provider
        // copies them into the send queue before returning); every SGE points into an MR of
        // this QP's PD that the QP has pinned; the ops table belongs to the open context.
        let rc = unsafe {
            let ctx = self.pd.ctx.ptr.as_ptr();
            match (*ctx).ops.post_send {
                Some(post_send) => post_send(self.ptr.as_ptr(), base, &mut bad),
                None => return Err(self.pd.ctx.err("provider has no post_send")),
            }
        };
        if rc != 0 {
            let index = if bad.is_null() {
                0
            } else {
                // Safety: on failure `bad` points into our `raw` array.
                (unsafe { bad.offset_from(base) }).clamp(0, n as isize - 1) as usize
            };
            return Err(HwError::Verb {
                device: self.device().to_string(),
                qp: self.qpn(),
                verb: wrs[index].op.name(),
                wr_id: wrs[index].wr_id,
                status: format!("ibv_post_send refused work request {index} of {n}: {}", code(rc)),
            });
        }
        Ok(())
    }

    /// Posts one receive buffer.
    pub fn post_recv(&self, wr_id: u64, local: &LocalBuf) -> Result<(), HwError> {
        self.check_pd(&local.mr)?;
        self.pin(&local.mr);
        let mut sge = local.sge();
        let mut wr = sys::ibv_recv_wr { wr_id, next: ptr::null_mut(), sg_list: &mut sge, num_sge: 1 };
        let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
        // Safety: `wr` and `sge` live for the call (copied by the provider); the buffer is in a
        // pinned MR of this PD; the ops table belongs to the open context.
        let rc = unsafe {
            let ctx = self.pd.ctx.ptr.as_ptr();
            match (*ctx).ops.post_recv {
                Some(post_recv) => post_recv(self.ptr.as_ptr(), &mut wr, &mut bad),
                None => return Err(self.pd.ctx.err("provider has no post_recv")),
            }
        };
        if rc != 0 {
            return Err(HwError::Verb {
                device: self.device().to_string(),
                qp: self.qpn(),
                verb: "RECV",
                wr_id,
                status: format!("ibv_post_recv: {}", code(rc)),
            });
        }
        Ok(())
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // Safety: the QP is alive; destroying it stops all DMA for its work requests, after
        // which the pinned MRs (dropped with `self`) may go.
        unsafe { sys::ibv_destroy_qp(self.ptr.as_ptr()) };
        let _ = (&self.send_cq, &self.recv_cq);
    }
}
