//! The `dmsim` command line as a library, so its tests can use the same [`registry`].
//!
//! The binary is the one place that sees every crate: the simulator (`dmsim-sim`), the
//! hardware backend (`dmsim-hw`) and the protocols, joined by the [`registry`].

pub mod commands;
pub mod registry;
