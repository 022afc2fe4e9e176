//! The storage device of each node (`Nic::ssd_read` / `ssd_write`).
//!
//! A command takes a queue slot (`ssd_queue_depth` per node), pays the read or write latency,
//! then its transfer on the device's shared bandwidth (`fabric::NodeFabric::ssd`). Its data
//! moves at completion, in an engine event: a read lands in the local region then (waking
//! `wait_word` waiters on it), a write takes the local bytes then and is durable. Commands in
//! service at once are not ordered against each other, as on an NVMe queue.
//!
//! Contents are sparse 4 KiB pages in a lookup-only map (never iterated), so a large device
//! costs memory only where it was written; unwritten bytes read as zero.

use std::fmt::Write as _;

use dmsim_protocols::nic::{NicError, NicResult, NodeId, RemoteAddr};

use super::executor::wake_task;
use super::queue::EventKind;
use super::world::World;
use crate::fabric::{ps_to_ns_ceil, LookupMap, PS_PER_NS};

const PAGE_WORDS: u64 = 512;

/// One node's device contents.
#[derive(Default)]
pub struct SsdStore {
    pub size_bytes: u64,
    pages: LookupMap<u64, Box<[u64]>>,
}

impl SsdStore {
    pub fn new(size_bytes: u64) -> SsdStore {
        SsdStore { size_bytes, pages: LookupMap::default() }
    }
    fn load(&self, word: u64) -> u64 {
        self.pages.get(&(word / PAGE_WORDS)).map_or(0, |p| p[(word % PAGE_WORDS) as usize])
    }
    fn store(&mut self, word: u64, value: u64) {
        let page = self.pages.entry(word / PAGE_WORDS).or_insert_with(|| vec![0; PAGE_WORDS as usize].into());
        page[(word % PAGE_WORDS) as usize] = value;
    }
}

/// A command in service.
pub struct SsdReq {
    /// The waiting task, or `u32::MAX` once its future was dropped.
    pub task: u32,
    pub node: NodeId,
    pub write: bool,
    pub ssd_offset: u64,
    pub local_offset: u64,
    pub len: u64,
    pub finished: bool,
}

impl World {
    /// Start one SSD command for `task`; returns its id.
    #[allow(clippy::too_many_arguments)]
    pub fn ssd_submit(
        &mut self,
        node: NodeId,
        write: bool,
        ssd_offset: u64,
        local_offset: u64,
        len: u64,
        task: u32,
    ) -> NicResult<u32> {
        let size = self.ssds.get(node.index()).map_or(0, |s| s.size_bytes);
        if size == 0 {
            return Err(dmsim_protocols::nic::no_storage());
        }
        if !ssd_offset.is_multiple_of(8) || !len.is_multiple_of(8) {
            return Err(NicError::Unaligned { offset_bytes: ssd_offset, len_bytes: len });
        }
        if ssd_offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(NicError::BadAddress {
                node,
                offset_bytes: ssd_offset,
                len_bytes: len,
                region_size_bytes: size,
            });
        }
        dmsim_protocols::nic::check_range(&self.cluster, RemoteAddr::new(node, local_offset), len)?;
        let latency_ns =
            if write { self.params.ssd_latency_ns_write } else { self.params.ssd_latency_ns_read };
        let now_ps = self.now_ns * PS_PER_NS;
        let done_ps = self.nodes[node.index()].ssd(&self.params, now_ps, latency_ns * PS_PER_NS, len);
        let req = SsdReq { task, node, write, ssd_offset, local_offset, len, finished: false };
        let id = match self.free_ssd_reqs.pop() {
            Some(i) => {
                self.ssd_reqs[i as usize] = req;
                i
            }
            None => {
                self.ssd_reqs.push(req);
                self.ssd_reqs.len() as u32 - 1
            }
        };
        self.queue.push(ps_to_ns_ceil(done_ps), EventKind::SsdDone { req: id });
        Ok(id)
    }

    /// The command completes: move its data and wake its task.
    pub fn ssd_done(&mut self, id: u32) {
        let r = &self.ssd_reqs[id as usize];
        let (node, write, ssd_offset, local_offset, len) =
            (r.node, r.write, r.ssd_offset, r.local_offset, r.len);
        let region = self.regions[node.index()].clone();
        let store = &mut self.ssds[node.index()];
        for i in 0..len / 8 {
            let word = ssd_offset / 8 + i;
            if write {
                store.store(word, region.load(local_offset + 8 * i));
            } else {
                region.store(local_offset + 8 * i, store.load(word));
            }
        }
        if !write {
            self.watch_notify(node, local_offset, len);
        }
        let now = self.now_ns;
        self.trace.line(now, node.0, if write { "SSDW" } else { "SSDR" }, |l| {
            let _ = write!(l, "ssd={ssd_offset:#x} local={local_offset:#x} len={len}");
        });
        let r = &mut self.ssd_reqs[id as usize];
        r.finished = true;
        if r.task == u32::MAX {
            self.free_ssd_reqs.push(id);
        } else {
            wake_task(r.task);
        }
    }

    /// True (and the command freed) once it has completed.
    pub fn ssd_take(&mut self, id: u32) -> bool {
        if !self.ssd_reqs[id as usize].finished {
            return false;
        }
        self.free_ssd_reqs.push(id);
        true
    }

    /// The waiting future was dropped: the command still completes, then frees itself.
    pub fn ssd_abandon(&mut self, id: u32) {
        if self.ssd_reqs[id as usize].finished {
            self.free_ssd_reqs.push(id);
        } else {
            self.ssd_reqs[id as usize].task = u32::MAX;
        }
    }
}
