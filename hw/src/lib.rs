//! # dmsim-hw: the NIC trait on real RDMA
//!
//! WIP
#![forbid(unsafe_op_in_unsafe_fn)]

pub mod error;
#[cfg(feature = "rdma")]
pub mod verbs;

pub use error::HwError;
pub mod runtime;
pub mod rendezvous;
