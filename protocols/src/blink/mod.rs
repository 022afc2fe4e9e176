//! # A B-link tree over SELCC (SELCC §6.3, Fig. 17–18)
//!
//! The paper's recipe for porting a concurrent index to disaggregated memory: align the nodes
//! with GCLs and replace the mutex latches with SELCC latches. This is a Lehman–Yao B-link tree
//! written against a small latch/page API ([`pages::Pages`]) so that the same tree runs over
//! SELCC (`protocol: "blink"`) and SEL (`"blink-sel"`), and could run over another page store.
//!
//! Read top-down:
//! * [`pages`] — the latch/page trait and its SELCC/SEL adapter; page ids as words;
//! * [`node`] — a node's words in a GCL (header, fences, right link, sorted entries);
//! * [`tree`] — lookup, store (update or insert, splits, separators posted upwards, new roots),
//!   scan; the meta page and the root hint;
//! * [`bulk`] — the bulk-loaded starting tree; [`mem_pages`] — the trait over local memory (tests);
//! * [`bench`], [`stats`] — the YCSB client loop and its counters;
//! * [`check`] — structural invariants over memory after a quiesced run;
//! * [`mutants`] — planted bugs; [`def`] — the protocol definition.
//!
//! SELCC itself is untouched: the tree uses only its public Table 1 API (`slock`, `xlock`,
//! `unlock`, `read`, `write`, `allocate`) and its checks (coherence invariants and the
//! read-latest oracle) run beneath the tree's own.

pub mod bench;
pub mod bulk;
pub mod check;
pub mod def;
pub mod mem_pages;
pub mod mutants;
pub mod node;
pub mod pages;
pub mod stats;
pub mod tree;

pub use def::{Blink, BlinkPlan};
pub use pages::{Latch, PageId, Pages, SelccPages};
