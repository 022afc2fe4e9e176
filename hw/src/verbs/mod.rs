//! Safe verbs: the raw wrappers plus small synchronous helpers for tests and calibration.

#[allow(unsafe_code)] // The one module allowed to: see its docs.
pub mod raw;

use std::time::{Duration, Instant};

pub use raw::{
    device_names, Access, Completion, ConnectParams, Context, Cq, DeviceCaps, LocalBuf, Mr, Pd, PortInfo, Qp,
    QpCaps, RemoteBuf, RemoteQp, SendOp, SendWr,
};

use crate::error::HwError;

/// Polls `cq` until the completion with `wr_id` arrives or `timeout` passes. Other completions
/// that arrive first are returned in `others` (callers that wait synchronously usually have
/// none). Bounded: a missing completion becomes [`HwError::Timeout`].
pub fn wait_completion(
    cq: &Cq,
    qp: &Qp,
    verb: &'static str,
    wr_id: u64,
    timeout: Duration,
    others: &mut Vec<Completion>,
) -> Result<Completion, HwError> {
    let start = Instant::now();
    let mut buf = [Completion { wr_id: 0, status: 0, vendor_err: 0, byte_len: 0, qp_num: 0 }; 16];
    let mut spins = 0u32;
    loop {
        let n = cq.poll(&mut buf)?;
        let mut found = None;
        for c in &buf[..n] {
            if c.wr_id == wr_id && found.is_none() {
                found = Some(*c);
            } else {
                others.push(*c);
            }
        }
        if let Some(c) = found {
            return Ok(c);
        }
        if start.elapsed() > timeout {
            return Err(HwError::Timeout {
                device: qp.device().to_string(),
                qp: qp.qpn(),
                verb,
                wr_id,
                after: timeout,
            });
        }
        spins += 1;
        if spins.is_multiple_of(64) {
            std::thread::yield_now();
        }
    }
}

/// Turns a failed completion into an error naming device, QP, verb and wr_id.
pub fn check(c: &Completion, qp: &Qp, verb: &'static str) -> Result<(), HwError> {
    if c.ok() {
        return Ok(());
    }
    Err(HwError::Verb {
        device: qp.device().to_string(),
        qp: qp.qpn(),
        verb,
        wr_id: c.wr_id,
        status: c.status_str(),
    })
}
