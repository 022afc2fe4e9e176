//! Every knob of the GAM-like baseline as plain serde fields, so that a scenario's
//! `protocol_options` can flip one (variant, memory-node service time, cache size, ...).

use serde::{Deserialize, Serialize};

pub use super::mutants::Mutant;

/// The consistency variant (SELCC §6 "Micro-benchmark baselines" [P]: GAM (TSO) and GAM (SEQ);
/// §8.4 [P]: "TSO vs SEQ differ by write buffering").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// Total store order: a write goes into the thread's FIFO store buffer and the thread
    /// continues; a background drainer makes buffered writes visible one at a time, in program
    /// order. A read first looks in its own thread's buffer (store-to-load forwarding).
    Tso,
    /// Sequential consistency: every write waits until it is globally performed (exclusive
    /// ownership held and the data written into the only valid copy).
    Seq,
}

/// Costs charged with `Nic::cpu`, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuCosts {
    /// Compute node: one step of the node's request worker (GAM's serialized queue): dispatching
    /// a client request, processing a reply or an invalidation. [CHOICE] spec B13 gives no value.
    pub worker_ns: u64,
    /// Compute node: cache lookup plus the copy of the accessed bytes.
    pub access_ns: u64,
    /// Compute node (TSO): putting a write into the store buffer.
    pub enqueue_ns: u64,
    /// Memory node: serving one directory message (request or ack), on the node's modelled
    /// cores (spec §8.4 "per-RPC service time").
    pub handler_service_ns: u64,
    /// Memory node: copying one KiB of block data between memory and a message.
    pub handler_copy_ns_per_kib: u64,
}

impl Default for CpuCosts {
    fn default() -> Self {
        CpuCosts {
            worker_ns: 200,
            access_ns: 100,
            enqueue_ns: 50,
            handler_service_ns: 600,
            handler_copy_ns_per_kib: 150,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub variant: Variant,
    /// Block (cache line) size; the scenario's GCL size, so both protocols move the same bytes.
    pub gcl_size_bytes: u32,
    /// Cached blocks per compute node.
    pub cache_frames: u32,
    /// Client threads per compute node.
    pub threads_per_node: u32,
    /// Directory handler tasks per memory node. With one modelled core and one handler the
    /// directory is GAM's serialized queue; more handlers only help with more cores.
    pub handler_tasks: u32,
    /// Parallel request workers per compute node; 1 = GAM's single serialized worker queue
    /// (SELCC §7.1.2 [P]: "limited thread scalability due to its serialized queue for all the
    /// read/write operations").
    pub compute_workers: u32,
    /// Invalidation/recall handler tasks per compute node.
    pub inv_handlers: u32,
    /// TSO store-buffer entries per thread; a full buffer blocks the writer.
    pub write_buffer_entries: u32,
    /// TSO writes of one thread in flight at once (drainer tasks per thread). 1 = strict TSO,
    /// one write at a time in program order. GAM's `Write` is asynchronous ([REPO]
    /// ooibc88/gam `GAlloc::Write` sets `ASYNC` and returns once the worker queued it) and the
    /// GAM paper enforces PSO, so SELCC's GAM (TSO) series set it to the whole buffer (16); one
    /// block's writes stay ordered either way.
    pub drain_depth: u32,
    pub cpu: CpuCosts,
    /// A deliberately planted bug ([`super::mutants`]); `None` is the correct protocol.
    #[serde(default)]
    pub mutant: Mutant,
}

impl Default for Config {
    fn default() -> Self {
        Config::seq()
    }
}

impl Config {
    pub fn seq() -> Config {
        Config {
            variant: Variant::Seq,
            gcl_size_bytes: 2048,
            cache_frames: 4096,
            threads_per_node: 8,
            handler_tasks: 1,
            compute_workers: 1,
            inv_handlers: 1,
            write_buffer_entries: 16,
            drain_depth: 1,
            cpu: CpuCosts::default(),
            mutant: Mutant::None,
        }
    }

    pub fn tso() -> Config {
        Config { variant: Variant::Tso, ..Config::seq() }
    }

    /// Frames the protocol can pin at once: each client thread (and each TSO drainer) fetches
    /// one block and may be evicting another.
    pub fn frames_needed(&self) -> u32 {
        let drainers = if self.variant == Variant::Tso { self.drain_depth } else { 0 };
        // Saturating: `validate` calls this on unchecked input (a huge `drain_depth`).
        let actors = self.threads_per_node.saturating_mul(drainers.saturating_add(1));
        actors.saturating_mul(2).saturating_add(2)
    }

    /// Problems, each starting with the field name. Empty = valid.
    pub fn validate(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.gcl_size_bytes == 0 || !self.gcl_size_bytes.is_multiple_of(8) {
            problems.push(format!("gcl_size_bytes: {} is not a positive multiple of 8", self.gcl_size_bytes));
        }
        if self.threads_per_node == 0 || self.threads_per_node > 1024 {
            problems.push("threads_per_node: must be in 1..=1024".into());
        }
        if self.cache_frames < self.frames_needed() {
            problems.push(format!(
                "cache_frames: {} is too small for {} threads (need at least {})",
                self.cache_frames,
                self.threads_per_node,
                self.frames_needed()
            ));
        }
        for (name, value) in [
            ("handler_tasks", self.handler_tasks),
            ("compute_workers", self.compute_workers),
            ("inv_handlers", self.inv_handlers),
            ("write_buffer_entries", self.write_buffer_entries),
            ("drain_depth", self.drain_depth),
        ] {
            if value == 0 {
                problems.push(format!("{name}: must be at least 1"));
            }
        }
        if self.drain_depth > self.write_buffer_entries {
            problems.push(format!(
                "drain_depth: {} exceeds write_buffer_entries ({}): a drainer would never have work",
                self.drain_depth, self.write_buffer_entries
            ));
        }
        // Client threads and drainers each own a QP and a reply port (node.rs `make_worker`).
        if self.threads_per_node.saturating_mul(self.drain_depth.saturating_add(1)) > 2_900 {
            problems.push(format!(
                "drain_depth: {} drainers for each of {} threads exceed the node's 2,900 client channels",
                self.drain_depth, self.threads_per_node
            ));
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_problems_name_fields() {
        assert!(Config::seq().validate().is_empty());
        assert!(Config::tso().validate().is_empty());
        let huge = Config { drain_depth: u32::MAX, write_buffer_entries: u32::MAX, ..Config::tso() };
        assert!(huge.validate().iter().any(|p| p.starts_with("cache_frames")), "no overflow, a problem");
        let bad = Config { cache_frames: 3, handler_tasks: 0, ..Config::tso() };
        let problems = bad.validate();
        assert!(problems.iter().any(|p| p.starts_with("cache_frames")));
        assert!(problems.iter().any(|p| p.starts_with("handler_tasks")));
    }
}
