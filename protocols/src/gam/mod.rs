//! # GAM-like RPC directory baseline
//!
//! The baseline SELCC compares against (SELCC §7.1 [P], spec §6 "Micro-benchmark baselines"):
//! GAM (Cai et al., VLDB'18), an RPC-based directory cache-coherence protocol, run over
//! disaggregated memory where the directory lives on the memory nodes and is served by their
//! scarce CPU (spec §8.4). Two variants, GAM (TSO) and GAM (SEQ), differ by write buffering.
//!
//! ```text
//!  compute node (cache of GCL-sized blocks: S / E / I)         memory node (home of block b)
//!  ┌─────────────────────────────────────────────┐   Request   ┌──────────────────────────────┐
//!  │ threads ─▶ worker queue ─▶ hit? copy locally │───SEND────▶│ handler: recv, cpu(service), │
//!  │   TSO: store buffer ─▶ drainer              │◀──Reply────│ directory[b] = {sharers,owner}│
//!  │ inv handler ◀── Invalidate / Recall ────────┼────────────│ one transaction per block,    │
//!  │              ──▶ Ack (+ data) ──────────────┼───────────▶│ later requests queue          │
//!  └─────────────────────────────────────────────┘            └──────────────────────────────┘
//! ```
//!
//! What is modelled: the directory and its per-block serialization on memory-node handlers that
//! charge `cpu(ns)` (so the node's modelled cores, or a stranded share, bound throughput); a
//! compute-side cache with LRU replacement and write-back of Exclusive victims; read/write
//! misses and upgrades as RPCs (`send`/`recv`) with data in the reply; invalidations to sharers
//! and recalls of the owner, acked to the home; GAM's per-node serialized request worker; TSO
//! store buffers with forwarding. Simplified, each marked where it is made: owner data returns
//! through the home (no 3-hop forward), Shared evictions are silent, the directory is task
//! state rather than registered memory, and payloads are real words (checkable) in messages.
//!
//! Read top-down: [`config`] → [`layout`] → [`message`] → [`directory`] (home side) →
//! [`node`] (compute side) → [`store_buffer`] (TSO) → [`stats`], [`check`] → [`bench`].

pub mod bench;
pub mod check;
pub mod config;
pub mod def;
pub mod directory;
pub mod layout;
pub mod message;
pub mod mutants;
pub mod node;
pub mod stats;
pub mod store_buffer;

pub use config::{Config, CpuCosts, Variant};
pub use def::{Gam, GamPlan};
pub use layout::Layout;
pub use node::{LineState, Node, NodeState, Worker};
