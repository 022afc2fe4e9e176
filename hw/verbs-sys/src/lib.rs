//! Raw bindings to the system's libibverbs (see `build.rs`; empty without the `generate`
//! feature), plus the few accessors of a work completion that dmsim-hw uses. Everything here is `unsafe` to call; the safe wrappers live in
//! `dmsim-hw`'s `verbs::raw`.
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals, dead_code)]
#![allow(clippy::all)]

#[cfg(feature = "generate")]
include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

#[cfg(feature = "generate")]
impl ibv_wc {
    /// The work request id the poster chose.
    pub fn wr_id(&self) -> u64 {
        self.wr_id
    }

    /// Bytes transferred (meaningful for successful receives and reads).
    pub fn len(&self) -> usize {
        self.byte_len as usize
    }

    /// Whether no bytes were transferred.
    pub fn is_empty(&self) -> bool {
        self.byte_len == 0
    }

    /// `None` for success, else the status and the vendor's error code.
    pub fn error(&self) -> Option<(ibv_wc_status::Type, u32)> {
        (self.status != ibv_wc_status::IBV_WC_SUCCESS).then_some((self.status, self.vendor_err))
    }
}
