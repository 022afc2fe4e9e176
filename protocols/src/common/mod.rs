//! Building blocks shared by the protocols: errors as values with their context ([`error`]),
//! request/reply messaging over `Nic::send`/`recv` ([`rpc`]), and executor-agnostic timeouts
//! and selection ([`sync_ext`]).

pub mod error;
pub mod rpc;
pub mod sync_ext;
