//! # dmsim protocols
//!
//! Protocols for disaggregated memory, written once against [`nic::Nic`] and run either by the
//! deterministic simulator (`dmsim-sim`) or on real RDMA (`dmsim-hw`).
//!
//! * [`nic`] — the trait, its types and the semantics both backends honour. Start here.
//! * [`memory`] — a node's registered region (8-byte words).
//! * [`sync`] — executor-agnostic async latches and channels for tasks on one node.
//! * [`harness`] — the protocol definition every command consumes ([`harness::Protocol`],
//!   [`harness::Plan`]); each protocol folder holds its own (`selcc/def.rs`, `gam/def.rs`, …).
//! * [`common`] — what protocols share: errors with context, a small RPC layer, timeouts and
//!   select, the benchmark run shape, common metrics, lookup-only maps.
//!
//! Architecture invariant: this crate depends on neither `sim` nor `hw`; it reaches the clock,
//! randomness and the network only through `Nic`.

#![forbid(unsafe_code)]

pub mod blink;
pub mod common;
pub mod dex;
pub mod difache;
pub mod dolphin;
pub mod farm;
pub mod gam;
pub mod harness;
pub mod marlin;
pub mod memory;
pub mod namdb;
pub mod nic;
pub mod nic_micro;
pub mod scalestore;
pub mod selcc;
pub mod sherman;
pub mod smart;
pub mod sync;
pub mod txn;
pub mod workload;
