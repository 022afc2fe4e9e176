//! [`HwNic`]: the NIC trait on libibverbs (feature `rdma`), or an uninhabited stand-in with the
//! same API when the crate is built without it (no value of it can exist: [`crate::cluster::bootstrap`]
//! returns [`crate::HwError::NotBuilt`] instead).

#[cfg(feature = "rdma")]
pub(crate) mod real;
#[cfg(feature = "rdma")]
pub use real::HwNic;

#[cfg(not(feature = "rdma"))]
mod stub;
#[cfg(not(feature = "rdma"))]
pub use stub::HwNic;
