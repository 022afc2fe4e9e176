//! Where everything lives: the same offsets on every compute node (so a remote writer can find a
//! key's home bucket without asking, §4.1) and on every memory node.
//!
//! ```text
//! compute node: [ index groups | headers (6 words each) | buffers | per-thread scratch | monitor
//!                 | batch lanes ]
//! memory node:  [ objects | app locks (one per part) | owner sets | mode locks | membership ]
//! membership (read on memory node 0 only): [ CN list word | synced epoch per CN | heartbeat per CN ]
//! ```
//! Object `k` lives on memory node `k % m` at slot `k / m`.

use crate::nic::{NodeId, RemoteAddr};

use super::config::{Config, Workload};
use super::index::{BUCKET_BYTES, GROUP_BUCKETS, GROUP_BYTES, NEIGHBOURHOOD};

/// Header words (offsets in bytes inside a header).
pub const HDR_VALID: u64 = 0;
pub const HDR_MODE: u64 = 8;
pub const HDR_COUNTS: u64 = 16;
pub const HDR_KEY: u64 = 24;
pub const HDR_FILL: u64 = 32;
pub const HDR_PIN: u64 = 40;
pub const HEADER_BYTES: u64 = 48;

/// The coordinator reads lock tables in READs of this many bytes.
pub const MONITOR_CHUNK_BYTES: u64 = 4096;

/// Groups a remote lookup may read: a neighbourhood of 16 buckets spans 4 or 5 groups.
pub const LOOKUP_GROUPS_MAX: u64 = (NEIGHBOURHOOD as u64).div_ceil(GROUP_BUCKETS as u64) + 1;
pub const LOOKUP_BYTES_MAX: u64 = LOOKUP_GROUPS_MAX * GROUP_BYTES;

#[derive(Clone, Debug)]
pub struct Layout {
    pub memory_nodes: u16,
    pub compute_nodes: u16,
    pub objects: u64,
    pub object_bytes: u64,
    pub index_buckets: u64,
    /// Buckets allocated: home buckets plus a tail of `NEIGHBOURHOOD - 1` ([CHOICE]: no wrap).
    pub index_slots: u64,
    pub cache_objects: u64,
    pub threads: u64,
    pub mode_locks: u64,
    /// Crash recovery on: the membership words and the monitor's buffer exist.
    pub recovery: bool,
    /// CMCache's manager node and where its handler staging buffers start there.
    pub manager: Option<(NodeId, u64)>,
    /// Scratch sets per client thread: one, plus one per further element of a batched call
    /// (`workload.batch`; `Cache::lane`).
    pub lanes: u64,
    /// Parts per object (`workload.parts`): nested objects the application locks and accesses
    /// one by one, each with its own application lock; coherence stays per object.
    pub parts: u64,
    /// FORD's undo log per client on every memory node (`workload.transactions`; 0 without):
    /// a 16-byte record header and the old image of every object a transaction may write.
    pub undo_log_bytes: u64,
}

impl Layout {
    pub fn new(memory_nodes: u16, compute_nodes: u16, workload: &Workload, config: &Config) -> Layout {
        let (objects, bytes, threads) =
            (workload.objects, workload.object_bytes as u64, workload.threads_per_node as u64);
        let mut layout = Layout::for_objects(memory_nodes, compute_nodes, objects, bytes, threads, config);
        layout.lanes = workload.batch.max(1) as u64;
        layout.parts = workload.parts.max(1) as u64;
        if let Some(t) = &workload.transactions {
            // A transaction's objects go through the batched calls 16 at a time (`ford::QP_WINDOW`).
            let most = if t.tpcc.is_some() { u32::MAX } else { t.max_objects };
            layout.lanes = most.min(super::bench::ford::QP_WINDOW as u32) as u64;
            layout.undo_log_bytes = 16 + t.max_write_set() as u64 * bytes;
        }
        layout
    }

    /// The layout for `objects` objects of `object_bytes` each and `threads` clients per CN,
    /// whatever the workload (another protocol's objects: Sherman's leaves, `sherman/leaf_cache.rs`).
    pub fn for_objects(
        memory_nodes: u16,
        compute_nodes: u16,
        objects: u64,
        object_bytes: u64,
        threads: u64,
        config: &Config,
    ) -> Layout {
        let index_buckets = config.index_buckets as u64;
        let index_slots = (index_buckets + NEIGHBOURHOOD as u64 - 1).next_multiple_of(GROUP_BUCKETS as u64);
        Layout {
            memory_nodes,
            compute_nodes,
            objects,
            object_bytes,
            index_buckets,
            index_slots,
            cache_objects: config.cache_objects as u64,
            threads,
            mode_locks: config.mode_locks as u64,
            recovery: config.crash_recovery,
            manager: None,
            lanes: 1,
            parts: 1,
            undo_log_bytes: 0,
        }
    }

    // ---- compute nodes ----

    pub fn index_bytes(&self) -> u64 {
        self.index_slots * BUCKET_BYTES
    }
    pub fn header(&self, h: u32) -> u64 {
        self.index_bytes() + h as u64 * HEADER_BYTES
    }
    fn buffers_base(&self) -> u64 {
        self.index_bytes() + self.cache_objects * HEADER_BYTES
    }
    pub fn buffer(&self, h: u32) -> u64 {
        self.buffers_base() + h as u64 * self.object_bytes
    }
    fn scratch_bytes(&self) -> u64 {
        self.object_bytes * 2 + self.compute_nodes as u64 * (LOOKUP_BYTES_MAX + 8) + 8
    }
    /// Scratch set `lane`: a client thread's (`lane < threads`), the monitor's (`threads`), or
    /// a batch lane after the monitor's area (`Layout::lane`).
    fn scratch(&self, lane: u32) -> u64 {
        let lane = lane as u64;
        if lane <= self.threads {
            self.buffers_base() + self.cache_objects * self.object_bytes + lane * self.scratch_bytes()
        } else {
            self.lanes_base() + (lane - self.threads - 1) * self.scratch_bytes()
        }
    }
    /// The scratch set of element `i` of a batched call by client `thread` (element 0 uses the
    /// thread's own).
    pub fn lane(&self, thread: u32, i: usize) -> u32 {
        assert!((i as u64) < self.lanes, "batch element {i} beyond the layout's {} lanes", self.lanes);
        assert!((thread as u64) < self.threads, "lanes belong to client threads, not to lane {thread}");
        if i == 0 {
            thread
        } else {
            (self.threads + 1 + thread as u64 * (self.lanes - 1) + i as u64 - 1) as u32
        }
    }
    /// The application's object buffer of `thread`.
    pub fn app_buffer(&self, thread: u32) -> u64 {
        self.scratch(thread)
    }
    /// Where a miss fetches before installing (see `cache.rs`).
    pub fn fetch_buffer(&self, thread: u32) -> u64 {
        self.scratch(thread) + self.object_bytes
    }
    /// Landing area for the remote lookup of compute node number `cn` (0-based).
    pub fn lookup_buffer(&self, thread: u32, cn: usize) -> u64 {
        self.scratch(thread) + 2 * self.object_bytes + cn as u64 * LOOKUP_BYTES_MAX
    }
    /// Landing word for a remote header word read from compute node number `cn`.
    pub fn word_buffer(&self, thread: u32, cn: usize) -> u64 {
        self.scratch(thread)
            + 2 * self.object_bytes
            + self.compute_nodes as u64 * LOOKUP_BYTES_MAX
            + cn as u64 * 8
    }
    /// Landing word for an owner-set read.
    pub fn owner_buffer(&self, thread: u32) -> u64 {
        self.scratch(thread) + self.scratch_bytes() - 8
    }
    /// The monitor task's landing area (membership words, then lock-table chunks).
    pub fn monitor_buffer(&self) -> u64 {
        self.scratch(self.threads as u32)
    }
    fn lanes_base(&self) -> u64 {
        let monitor = if self.recovery { self.membership_words() * 8 + MONITOR_CHUNK_BYTES } else { 0 };
        self.monitor_buffer() + monitor
    }
    pub fn compute_region_bytes(&self) -> u64 {
        self.lanes_base() + self.threads * (self.lanes - 1) * self.scratch_bytes()
    }

    // ---- memory nodes ----

    fn per_mn(&self) -> u64 {
        self.objects.div_ceil(self.memory_nodes.max(1) as u64)
    }
    pub fn home(&self, key: u64) -> NodeId {
        NodeId((key % self.memory_nodes as u64) as u16)
    }
    fn slot(&self, key: u64) -> u64 {
        key / self.memory_nodes as u64
    }
    pub fn object(&self, key: u64) -> RemoteAddr {
        RemoteAddr::new(self.home(key), self.slot(key) * self.object_bytes)
    }
    /// Bytes per part of an object (nested objects; the object's size without them).
    pub fn part_bytes(&self) -> u64 {
        self.object_bytes / self.parts
    }
    /// The history's register `register` (`key * parts + part`: one per object without
    /// parts) as (object, part).
    pub fn register(&self, register: u64) -> (u64, u64) {
        (register / self.parts, register % self.parts)
    }
    /// Where register `register`'s stamp lives: the word after its part's tag.
    pub fn register_stamp(&self, register: u64) -> RemoteAddr {
        let (key, part) = self.register(register);
        self.object(key).add(part * self.part_bytes() + 8)
    }
    /// The application's lock on part `part` of object `key`.
    pub fn app_lock(&self, key: u64, part: u64) -> RemoteAddr {
        let word = self.slot(key) * self.parts + part;
        RemoteAddr::new(self.home(key), self.per_mn() * self.object_bytes + word * 8)
    }
    /// Where the owner sets start on a memory node (after the objects and application locks).
    fn owner_sets_base(&self) -> u64 {
        self.per_mn() * (self.object_bytes + 8 * self.parts)
    }
    /// Where the mode locks start on a memory node.
    fn mode_locks_offset(&self) -> u64 {
        self.owner_sets_base() + self.per_mn() * 8
    }
    /// [CHOICE] The owner set of an object sits at a fixed slot instead of behind a RACE hash
    /// table; a lookup still costs the one READ a RACE hit costs.
    pub fn owner_set(&self, key: u64) -> RemoteAddr {
        RemoteAddr::new(self.home(key), self.owner_sets_base() + self.slot(key) * 8)
    }
    pub fn mode_lock(&self, key: u64) -> RemoteAddr {
        let slot = super::index::mix(key ^ 0x6d6f_6465) % self.mode_locks;
        RemoteAddr::new(self.home(key), self.mode_locks_offset() + slot * 8)
    }
    /// Where memory node `mn`'s mode locks start (the coordinator scans them after a crash).
    pub fn mode_locks_base(&self, mn: u16) -> RemoteAddr {
        RemoteAddr::new(NodeId(mn), self.mode_locks_offset())
    }
    /// Where memory node `mn`'s application locks start, one word per slot and part.
    pub fn app_locks_base(&self, mn: u16) -> RemoteAddr {
        RemoteAddr::new(NodeId(mn), self.per_mn() * self.object_bytes)
    }
    pub fn app_lock_slots(&self) -> u64 {
        self.per_mn() * self.parts
    }
    /// The coordinator's CN-list word on memory node 0 (`recovery.rs`), then each CN's synced
    /// epoch, then each CN's heartbeat: `membership_words()` words read with one READ.
    pub fn membership(&self) -> RemoteAddr {
        RemoteAddr::new(NodeId(0), self.mode_locks_offset() + self.mode_locks * 8)
    }
    pub fn membership_words(&self) -> u64 {
        if self.recovery {
            1 + 2 * self.compute_nodes as u64
        } else {
            0
        }
    }
    pub fn synced(&self, cn: usize) -> RemoteAddr {
        self.membership().add(8 + cn as u64 * 8)
    }
    pub fn heartbeat(&self, cn: usize) -> RemoteAddr {
        self.membership().add(8 + (self.compute_nodes as u64 + cn as u64) * 8)
    }
    /// FORD's undo log of client `thread` of compute node number `cn` on memory node `mn`.
    pub fn undo_log(&self, mn: u16, cn: usize, thread: u32) -> RemoteAddr {
        let base = self.mode_locks_offset() + self.mode_locks * 8 + self.membership_words() * 8;
        let client = cn as u64 * self.threads + thread as u64;
        RemoteAddr::new(NodeId(mn), base + client * self.undo_log_bytes)
    }
    pub fn memory_region_bytes(&self) -> u64 {
        let logs = self.compute_nodes as u64 * self.threads * self.undo_log_bytes;
        self.mode_locks_offset() + self.mode_locks * 8 + self.membership_words() * 8 + logs
    }

    /// CMCache: the staging buffer of manager handler `i` (one object) on the manager node.
    pub fn manager_stage(&self, i: u16) -> u64 {
        self.manager.map_or(0, |(_, base)| base) + i as u64 * self.object_bytes
    }

    /// Compute node number `i` (0-based) as a node id.
    pub fn cn(&self, i: usize) -> NodeId {
        NodeId(self.memory_nodes + i as u16)
    }
    pub fn cn_index(&self, node: NodeId) -> usize {
        (node.0 - self.memory_nodes) as usize
    }
}

/// The first word of every object version: names the object, so a reader can tell another
/// object's bytes (a recycled buffer) from its own.
pub fn object_tag(key: u64) -> u64 {
    part_tag(key, 0)
}

/// The first word of part `part` of object `key` (nested objects: `workload.parts`); part 0's
/// is the object's tag.
pub fn part_tag(key: u64, part: u64) -> u64 {
    0xD1FA_0000_0000_0000 | part << 40 | key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn difache_batch_lanes_are_disjoint_and_after_the_monitor() {
        let config = Config { crash_recovery: true, ..Config::paper() };
        let plain = Layout::for_objects(2, 3, 10, 128, 4, &config);
        let mut layout = plain.clone();
        layout.lanes = 3;
        let monitor_end = plain.compute_region_bytes();
        let mut starts: Vec<u64> = (0..4u32)
            .flat_map(|t| (0..3).map(move |i| (t, i)))
            .map(|(t, i)| {
                let at = layout.app_buffer(layout.lane(t, i));
                assert!(
                    at + layout.scratch_bytes() <= layout.compute_region_bytes(),
                    "lane ({t}, {i}) outside"
                );
                if i == 0 {
                    assert_eq!(at, plain.app_buffer(t), "element 0 uses the thread's own set");
                } else {
                    assert!(at >= monitor_end, "lane ({t}, {i}) overlaps the monitor's area");
                }
                at
            })
            .collect();
        starts.sort_unstable();
        assert!(starts.windows(2).all(|w| w[1] - w[0] >= layout.scratch_bytes()), "lanes overlap");
        assert_eq!(layout.monitor_buffer(), plain.monitor_buffer(), "the layout without lanes is unchanged");
    }
}
