//! # dmsim-hw: the NIC trait on real RDMA
//!
//! Protocols written against [`dmsim_protocols::nic::Nic`] run here on libibverbs (RC queue
//! pairs, one registered region per node, CQ polling that wakes async tasks), on a ConnectX
//! cluster or on Soft-RoCE in a VM (`hw/vm/test.sh`).
//!
//! * [`cluster::bootstrap`] — rank/size from flags or the launcher, TCP rendezvous at rank 0,
//!   QPs connected; gives an [`cluster::HwCluster`] with this node's [`HwNic`].
//! * [`nic::HwNic`] — `impl Nic`: verbs and doorbell batches, SEND/RECV messages, time.
//! * [`runtime`] — the executor: tasks on OS threads that poll completion queues.
//! * [`trace`] — `DMSIM_HW_TRACE`: per-verb debugging lines, to stderr or a ring printed at exit.
//! * [`calibrate`] — per-verb latency, bandwidth and same-address atomic rate of a device.
//! * `verbs` (feature `rdma`) — safe wrappers; `verbs::raw` holds **all** of the crate's
//!   `unsafe` code.
//!
//! Without the `rdma` feature the crate needs no native library and keeps the same API; its
//! entry points return [`HwError::NotBuilt`] ("built without --features rdma").
//!
//! Architecture invariant: only `verbs::raw` contains `unsafe`; everything else is safe Rust
//! over its wrappers.
#![deny(unsafe_code)]

pub mod auth;
pub mod calibrate;
pub mod cluster;
pub mod config;
pub mod error;
pub mod info;
pub mod nic;
pub mod rendezvous;
pub mod runtime;
pub mod trace;
#[cfg(feature = "rdma")]
pub mod verbs;

pub use config::HwConfig;
pub use error::HwError;
pub use nic::HwNic;
