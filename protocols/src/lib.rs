//! # dmsim protocols
//!
//! Protocols for disaggregated memory, written once against [`nic::Nic`] and run either by the
//! deterministic simulator (`dmsim-sim`) or on real RDMA (`dmsim-hw`).
//!
//! * [`nic`] — the trait, its types and the semantics both backends honour. Start here.
//! * [`memory`] — a node's registered region (8-byte words).
//! * [`sync`] — executor-agnostic async latches and channels for tasks on one node.
//! * [`common`] — errors with context, a small RPC layer, timeouts and select.
//!
//! Architecture invariant: this crate depends on neither `sim` nor `hw`; it reaches the clock,
//! randomness and the network only through `Nic`.

pub mod common;
pub mod gam;
pub mod memory;
pub mod nic;
pub mod selcc;
pub mod sync;
pub mod workload;
