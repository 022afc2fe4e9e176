//! # SMART: the adaptive radix tree for disaggregated memory (Luo et al., OSDI'23)
//!
//! A trie over 8-byte keys whose nodes live in memory-node DRAM and are read and changed by
//! compute nodes with one-sided verbs only. Facts (layouts, node types, the order of verbs)
//! come from dmemsys/SMART (`include/Node.h`, `src/Tree.cpp`, `include/LocalLockTable.h`,
//! `include/RadixCache.h`); what they leave open is a `[CHOICE]` in `NEEDS.md`.
//!
//! | paper / repository | here |
//! |---|---|
//! | §3 node layout: 8-byte slots (partial byte, child type, leaf bit, 48-bit address), header with depth and ≤ 6 compressed prefix bytes, `rev_ptr` | [`layout`] |
//! | §4.1 homogeneous-adaptive internal nodes: every node allocated at NODE_256 size, its *type* says how many slots to read; growing = CAS a key "behind" the last slot, then CAS the larger type into header and parent slot (`insert_behind`, `cas_node_type`) | [`tree::Tree`] `write_remote`, `grow` |
//! | §4.1 lock-free internal nodes: every slot change is one CAS; a key meeting a leaf or a prefix it leaves makes a new NODE_4 (`out_of_place_write_node`) | `split` |
//! | §4.2 one key-value per leaf, checksum; lock-free reads re-read a torn leaf; in-place update under the embedded lock (WRITE of leaf + unlock in one verb) | `read_leaf`, `update_in_place` |
//! | §4.3 read delegation and write combining (`LocalLockTable`) | [`local_table`] |
//! | §4.4 ART-indexed cache of internal nodes, FIFO eviction, validated by `rev_ptr` and header depth | [`cache`] |
//! | range query | `scan` |
//! | bulk load | [`bulk`] |
//!
//! Deletes (SMART has none) write a tombstone value in place. [`def`] is the definition the
//! registry names (`smart`), [`check`] the structural checks, [`mutants`] the planted bugs,
//! [`bench`] the client loop, [`workload`] the op mix.
//!
//! ```text
//!  client thread ── op ──▶ delegation / combining round (per key, per compute node)
//!                             │ leader only
//!                             ▼
//!           cache lookup (deepest cached node with a slot for the key's next byte) or root
//!                             │
//!            READ node (16 + 8·slots B) ─▶ check header, search slots ─▶ next slot …
//!                             │
//!            READ leaf (checksum) ─▶ lookup: value │ update: CAS lock, WRITE leaf+unlock
//!                                                   │ insert: WRITE leaf/node, CAS slot
//! ```

pub mod bench;
pub mod bulk;
pub mod cache;
pub mod check;
pub mod config;
pub mod def;
pub mod layout;
pub mod local_table;
pub mod mutants;
pub mod stats;
pub mod tree;
pub mod workload;

pub use config::{Config, Mutant};
pub use def::{Smart, SmartPlan};
