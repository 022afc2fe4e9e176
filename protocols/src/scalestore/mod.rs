//! # ScaleStore (Ziegler, Binnig, Leis, SIGMOD '22) — first slice
//!
//! Symmetric nodes cache 4 KB pages named by PIDs whose top 8 bits name the page's directory
//! node. A MESI-like, page-granular directory protocol gives sequential consistency: a worker
//! uses the *local hot path* when its node holds the page in a sufficient mode, else *remote
//! invocation*: an ownership request to the directory, which updates its metadata at once and
//! names where the page is (itself, the current owner, or a sharer) and whom to invalidate;
//! the requester resolves the conflict itself. Messages are mailbox words written by RDMA
//! WRITE and polled by message-handler tasks; pages move by RDMA WRITE into the requester's
//! frame, before the response on the same QP.
//!
//! ```text
//!  worker (node r)                 directory d = pid >> 56          owner / sharers
//!  frame := Fetching (R1) ──Own──▶ handler: metadata updated now
//!                        ◀─Granted{page | source, invalidate, epoch}
//!            ──Take/Copy──────────────────────────────────────────▶ handler: serve when Hot (R2)
//!            ◀──────────────────── page WRITE, then WithPage ─────
//!            ──Inval(epoch) to each sharer, in parallel ─────────▶ drop copy, Ack
//!  install Hot, operate, pass on when asked
//! ```
//!
//! Conflicts are resolved by **anticipatory chaining** (spec §3.7): the directory names each
//! exclusive requester's predecessor, which hands the page on once it has it and has operated.
//! The two baselines it replaces (Fig. 5 a/b: busy polling, a FIFO queue at the directory)
//! are [`baselines`], selected by `protocol_options.conflicts`; they gate the same directory
//! decision so that one request per page is served at a time, and need the requester's
//! `Done` acknowledgment.
//!
//! Read top-down: [`config`] → [`layout`] → [`message`] → [`state`] → [`directory`] (the
//! handlers' decisions) → [`node`] (workers and handler tasks) → [`baselines`] (FIFO queue,
//! busy polling) → [`evict`] (page providers, the SSD tier) → [`bench`] → [`check`] →
//! [`def`] (the definition), [`mutants`]. Choices and what is missing: `NEEDS.md`.
//!
//! The distributed B-tree (§5): [`pages`] implements the B-link tree's page trait
//! (`blink::Pages`) with S/X page guards over [`node::Node::lock_page`], and [`tree_def`]
//! defines `protocol: "blink-scalestore"`, the same tree as `blink`/`blink-sel` on ScaleStore.

pub mod baselines;
pub mod bench;
pub mod check;
pub mod config;
pub mod def;
pub mod directory;
pub mod dm_def;
pub mod evict;
pub mod handler;
pub mod layout;
pub mod local;
pub mod message;
pub mod mutants;
pub mod node;
pub mod pages;
pub mod phases;
pub mod record_bench;
pub mod state;
pub mod stats;
pub mod tree_def;

pub use config::{Config, Workload};
pub use def::{ScaleStore, ScaleStorePlan};
pub use dm_def::{ScaleStoreDm, ScaleStoreDmPlan};
pub use tree_def::{BlinkScaleStore, BlinkScaleStorePlan};
