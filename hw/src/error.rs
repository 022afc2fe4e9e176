//! The backend's error type. Every failure on hardware becomes one of these values with enough
//! context (device, queue pair, verb, work-request id) to find it in a cluster log; nothing in
//! `dmsim-hw` panics or hangs on a hardware or network fault.

use std::fmt;
use std::time::Duration;

/// What went wrong, with where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HwError {
    /// The crate was compiled without the `rdma` feature; no verbs are available.
    NotBuilt,
    /// Opening, querying or configuring a device, port, PD, MR, CQ or QP failed.
    Device { device: String, what: String },
    /// A work request completed with an error status (or could not be posted).
    Verb { device: String, qp: u32, verb: &'static str, wr_id: u64, status: String },
    /// A work request did not complete within its bound.
    Timeout { device: String, qp: u32, verb: &'static str, wr_id: u64, after: Duration },
    /// Rank/size discovery or the TCP rendezvous failed.
    Bootstrap(String),
    /// Bad options (flags, environment, cluster shape).
    Config(String),
}

impl fmt::Display for HwError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HwError::NotBuilt => write!(
                f,
                "dmsim-hw was built without --features rdma: real RDMA is unavailable in this binary"
            ),
            HwError::Device { device, what } => write!(f, "device {device}: {what}"),
            HwError::Verb { device, qp, verb, wr_id, status } => {
                write!(f, "device {device} qp {qp:#x}: {verb} (wr_id {wr_id:#x}) failed: {status}")
            }
            HwError::Timeout { device, qp, verb, wr_id, after } => write!(
                f,
                "device {device} qp {qp:#x}: {verb} (wr_id {wr_id:#x}) did not complete within {after:?}"
            ),
            HwError::Bootstrap(detail) => write!(f, "cluster bootstrap: {detail}"),
            HwError::Config(detail) => write!(f, "configuration: {detail}"),
        }
    }
}

impl std::error::Error for HwError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_device_qp_verb_and_wr_id() {
        // Goal: an operator can locate a failed verb from the message alone.
        let e = HwError::Verb {
            device: "rxe0".into(),
            qp: 0x11,
            verb: "CAS",
            wr_id: 7,
            status: "remote access error".into(),
        };
        assert_eq!(e.to_string(), "device rxe0 qp 0x11: CAS (wr_id 0x7) failed: remote access error");
        assert!(HwError::NotBuilt.to_string().contains("built without --features rdma"));
    }
}
