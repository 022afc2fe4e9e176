//! The only `unsafe` code in dmsim: thin owning wrappers over libibverbs handles.
//!
//! Each wrapper owns one handle and frees it on drop; a handle that others depend on is held
//! through an `Arc` by its dependents, so drop order follows the dependency order libibverbs
//! requires (QP before its CQs and PD, MR before its PD, everything before the device context).
//!
//! Memory safety of posted work requests rests on one rule: **a QP keeps every memory region
//! it has ever posted against alive** (`Qp::pinned`). A work request may DMA into or out of its
//! local buffer until it completes, is flushed, or the QP is destroyed; destroying the QP ends
//! all DMA, and only after that do the pinned regions (and their memory) drop. Remote addresses
//! are protected by the remote NIC's rkey check, not by this process.
//!
//! `ibv_post_send`, `ibv_post_recv` and `ibv_poll_cq` are `static inline` in `verbs.h`, so
//! bindgen cannot bind them; they are called through the context's ops table, as the inline
//! functions do.

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex};

use dmsim_protocols::memory::Region;
use ibverbs_sys as sys;

use crate::error::HwError;

mod cq;
mod qp;

pub use cq::{Completion, Cq};
pub use qp::{ConnectParams, LocalBuf, Qp, QpCaps, RemoteBuf, RemoteQp, SendOp, SendWr, MAX_CHAIN};

fn errno() -> String {
    std::io::Error::last_os_error().to_string()
}

fn code(rc: i32) -> String {
    std::io::Error::from_raw_os_error(rc).to_string()
}

/// Names of the RDMA devices present (`ibv_get_device_list`).
pub fn device_names() -> Result<Vec<String>, HwError> {
    let mut count = 0i32;
    // Safety: `count` is a valid out-pointer; the list is freed below and the names are copied
    // out before that.
    let list = unsafe { sys::ibv_get_device_list(&mut count) };
    if list.is_null() {
        return Err(HwError::Device {
            device: "*".into(),
            what: format!("ibv_get_device_list: {}", errno()),
        });
    }
    let mut names = Vec::new();
    for i in 0..count.max(0) as usize {
        // Safety: `list` holds `count` valid device pointers; the name is a NUL-terminated
        // string owned by the device, valid until the list is freed.
        let name = unsafe { CStr::from_ptr(sys::ibv_get_device_name(*list.add(i))) };
        names.push(name.to_string_lossy().into_owned());
    }
    // Safety: `list` came from ibv_get_device_list and is freed once.
    unsafe { sys::ibv_free_device_list(list) };
    Ok(names)
}

/// An open device (`ibv_context`).
pub struct Context {
    ptr: NonNull<sys::ibv_context>,
    name: String,
}

// Safety: libibverbs contexts are thread-safe (the library and providers lock internally); the
// wrapper only hands out the pointer to libibverbs calls.
unsafe impl Send for Context {}
// Safety: as above; no method mutates Rust-side state.
unsafe impl Sync for Context {}

/// Port properties the connection set-up needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortInfo {
    pub lid: u16,
    pub active: bool,
    /// `ibv_mtu` enum value (1 = 256 … 5 = 4096).
    pub active_mtu: u32,
    pub ethernet: bool,
}

/// Device limits the backend sizes its queues by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceCaps {
    pub max_qp_wr: u32,
    pub max_cqe: u32,
    pub max_qp_rd_atom: u32,
    /// False if the device cannot do CAS/FAA (`IBV_ATOMIC_NONE`).
    pub atomics: bool,
}

impl Context {
    /// Opens `name`, or the first device when `name` is `None`.
    pub fn open(name: Option<&str>) -> Result<Arc<Context>, HwError> {
        let want = name.unwrap_or("<first>").to_string();
        let mut count = 0i32;
        // Safety: as in `device_names`.
        let list = unsafe { sys::ibv_get_device_list(&mut count) };
        if list.is_null() {
            return Err(HwError::Device { device: want, what: format!("ibv_get_device_list: {}", errno()) });
        }
        let mut found = None;
        let mut seen = Vec::new();
        for i in 0..count.max(0) as usize {
            // Safety: `list` holds `count` valid device pointers.
            let device = unsafe { *list.add(i) };
            // Safety: the name string is owned by the device and valid while the list lives.
            let device_name =
                unsafe { CStr::from_ptr(sys::ibv_get_device_name(device)) }.to_string_lossy().into_owned();
            if found.is_none() && name.is_none_or(|n| n == device_name) {
                found = Some((device, device_name.clone()));
            }
            seen.push(device_name);
        }
        let opened = found.map(|(device, device_name)| {
            // Safety: `device` is valid until the list is freed; an opened context stays valid
            // after ibv_free_device_list (documented by libibverbs).
            (unsafe { sys::ibv_open_device(device) }, device_name)
        });
        // Safety: freed once, after the last use of its device pointers.
        unsafe { sys::ibv_free_device_list(list) };
        match opened {
            None => Err(HwError::Device {
                device: want,
                what: if seen.is_empty() {
                    "no RDMA devices found (is rdma_rxe / the NIC driver loaded?)".into()
                } else {
                    format!("not found; present: {}", seen.join(", "))
                },
            }),
            Some((ptr, device_name)) => match NonNull::new(ptr) {
                None => Err(HwError::Device {
                    device: device_name,
                    what: format!("ibv_open_device: {}", errno()),
                }),
                Some(ptr) => Ok(Arc::new(Context { ptr, name: device_name })),
            },
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn err(&self, what: impl Into<String>) -> HwError {
        HwError::Device { device: self.name.clone(), what: what.into() }
    }

    pub fn port(&self, port: u8) -> Result<PortInfo, HwError> {
        let mut attr = sys::ibv_port_attr::default();
        // Safety: the exported ibv_query_port fills a prefix-compatible `_compat_ibv_port_attr`
        // (the inline wrapper in verbs.h passes an `ibv_port_attr` the same way); `attr` is a
        // zeroed, properly sized and aligned out-parameter.
        let rc = unsafe {
            sys::ibv_query_port(
                self.ptr.as_ptr(),
                port,
                &mut attr as *mut sys::ibv_port_attr as *mut sys::_compat_ibv_port_attr,
            )
        };
        if rc != 0 {
            return Err(self.err(format!("ibv_query_port({port}): {}", code(rc))));
        }
        Ok(PortInfo {
            lid: attr.lid,
            active: attr.state == sys::ibv_port_state::IBV_PORT_ACTIVE,
            active_mtu: attr.active_mtu,
            ethernet: attr.link_layer as u32 == sys::IBV_LINK_LAYER_ETHERNET,
        })
    }

    pub fn gid(&self, port: u8, index: u8) -> Result<[u8; 16], HwError> {
        let mut gid = sys::ibv_gid { raw: [0; 16] };
        // Safety: `gid` is a valid out-parameter of the right type.
        let rc = unsafe { sys::ibv_query_gid(self.ptr.as_ptr(), port, index as i32, &mut gid) };
        if rc != 0 {
            return Err(self.err(format!("ibv_query_gid(port {port}, index {index}): {}", errno())));
        }
        // Safety: every bit pattern of the union is a valid `[u8; 16]`.
        Ok(unsafe { gid.raw })
    }

    pub fn caps(&self) -> Result<DeviceCaps, HwError> {
        let mut attr = sys::ibv_device_attr::default();
        // Safety: `attr` is a valid out-parameter of the right type.
        let rc = unsafe { sys::ibv_query_device(self.ptr.as_ptr(), &mut attr) };
        if rc != 0 {
            return Err(self.err(format!("ibv_query_device: {}", code(rc))));
        }
        Ok(DeviceCaps {
            max_qp_wr: attr.max_qp_wr.max(0) as u32,
            max_cqe: attr.max_cqe.max(0) as u32,
            max_qp_rd_atom: attr.max_qp_rd_atom.max(0) as u32,
            atomics: attr.atomic_cap != sys::IBV_ATOMIC_NONE,
        })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // Safety: every dependent handle holds an Arc<Context>, so none is alive any more.
        unsafe { sys::ibv_close_device(self.ptr.as_ptr()) };
    }
}

/// A protection domain.
pub struct Pd {
    ptr: NonNull<sys::ibv_pd>,
    ctx: Arc<Context>,
}

// Safety: a PD is only passed to thread-safe libibverbs calls.
unsafe impl Send for Pd {}
// Safety: as above.
unsafe impl Sync for Pd {}

impl Pd {
    pub fn new(ctx: &Arc<Context>) -> Result<Arc<Pd>, HwError> {
        // Safety: the context is open (held by Arc for the PD's lifetime).
        let ptr = unsafe { sys::ibv_alloc_pd(ctx.ptr.as_ptr()) };
        let ptr = NonNull::new(ptr).ok_or_else(|| ctx.err(format!("ibv_alloc_pd: {}", errno())))?;
        Ok(Arc::new(Pd { ptr, ctx: ctx.clone() }))
    }
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // Safety: MRs and QPs hold Arc<Pd>, so none of them is alive any more.
        unsafe { sys::ibv_dealloc_pd(self.ptr.as_ptr()) };
    }
}

/// What remote peers may do to a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Local use only (scratch for atomics' results, send buffers).
    Local,
    /// Remote READ, WRITE and atomics (a node's registered region).
    Remote,
}

/// A registered memory region over a [`Region`] of 8-byte atomic words.
pub struct Mr {
    ptr: NonNull<sys::ibv_mr>,
    region: Arc<Region>,
    pd: Arc<Pd>,
}

// Safety: the MR handle is immutable after registration and only read (keys, address).
unsafe impl Send for Mr {}
// Safety: as above.
unsafe impl Sync for Mr {}

impl Mr {
    /// Registers the whole of `region`. The MR keeps the region alive.
    pub fn register(pd: &Arc<Pd>, region: Arc<Region>, access: Access) -> Result<Arc<Mr>, HwError> {
        let len = region.size_bytes() as usize;
        if len == 0 {
            return Err(pd.ctx.err("cannot register an empty region"));
        }
        let mut flags = sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE;
        if access == Access::Remote {
            flags = flags
                | sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ
                | sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
                | sys::ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC;
        }
        // Safety: the memory is `len` bytes of `AtomicU64`s (interior mutability, so the NIC
        // writing it while Rust holds `&Region` is not a data race in the Rust sense); it lives
        // as long as this MR because the MR owns an Arc to it.
        let ptr = unsafe {
            sys::ibv_reg_mr(pd.ptr.as_ptr(), region.as_ptr() as *mut std::ffi::c_void, len, flags.0 as i32)
        };
        let ptr = NonNull::new(ptr)
            .ok_or_else(|| pd.ctx.err(format!("ibv_reg_mr({len} bytes): {} (ulimit -l?)", errno())))?;
        Ok(Arc::new(Mr { ptr, region, pd: pd.clone() }))
    }

    fn raw(&self) -> &sys::ibv_mr {
        // Safety: the MR is registered until drop; libibverbs never changes these fields.
        unsafe { self.ptr.as_ref() }
    }
    pub fn lkey(&self) -> u32 {
        self.raw().lkey
    }
    pub fn rkey(&self) -> u32 {
        self.raw().rkey
    }
    /// Virtual address of the first byte (what peers put in `remote_addr`).
    pub fn addr(&self) -> u64 {
        self.raw().addr as u64
    }
    pub fn len_bytes(&self) -> u64 {
        self.raw().length as u64
    }
    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // Safety: QPs pin every MR they posted against, so no work request references it now.
        unsafe { sys::ibv_dereg_mr(self.ptr.as_ptr()) };
        let _ = &self.pd;
    }
}
