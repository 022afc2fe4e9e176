//! The modelled RDMA fabric: where a verb spends its time.
//!
//! A verb from node A to node B walks these resources, each a FIFO server with a "free at"
//! time (internally in picoseconds so that fractional per-op costs accumulate exactly):
//!
//! ```text
//!  post ─▶ A NIC issue ─▶ A egress link ─ propagation ─▶ B ingress link ─▶ B NIC processing
//!          (rate cap)     (bytes/bw)      (RTT/2+jitter)  (bytes/bw)       (rate cap)
//!                                                                            │ atomics: per-word
//!                                                                            ▼ atomic unit
//!  done ◀─ A ingress link ◀─ propagation ◀─ B egress link ◀──────────── execute at B's memory
//! ```
//!
//! * Per-verb base latency: half the profile's idle RTT each way.
//! * Serialization at link bandwidth in each direction of each node's link, so incast on a
//!   memory node queues at its ingress and READ responses queue at its egress.
//! * Message-rate caps per verb class on both NICs (READ and atomics cost more).
//! * A per-address atomic unit: atomics on one 8-byte word serialize with a service time;
//!   different words proceed in parallel (up to the NIC's atomic rate cap).
//! * Memory-node CPU cores with an availability share ("stranded" = a small share), FCFS.
//! * NIC device memory (on-chip): a verb on it saves `device_latency_saving_ns` of its round
//!   trip, and its atomics use a separate, faster per-word unit.
//! * SSD per node: `ssd_queue_depth` commands in service, each paying its latency, then its
//!   transfer on the device's shared bandwidth (`ssd.rs` in the engine applies the data).
//!
//! The engine drives these functions at the event where each resource is reached, so
//! reservations happen in time order (no booking of future slots out of order), except the
//! initiator's ingress for responses, which is booked when the response leaves.

pub mod profile;

pub use profile::TearOrder;

use dmsim_protocols::nic::VerbClass;
pub use profile::Profile;

pub use dmsim_protocols::common::lookup::LookupMap;

pub const PS_PER_NS: u64 = 1000;

/// Integer model parameters derived from a profile (picoseconds).
#[derive(Clone, Debug)]
pub struct Params {
    pub oneway_ps: [u64; 4],
    pub cost_ps: [u64; 4],
    /// Picoseconds per byte on a link.
    pub ps_per_byte_x1000: u64,
    pub header_bytes: u64,
    pub atomic_service_ps: u64,
    pub qp_outstanding_max: u32,
    pub jitter_ns_max: u64,
    pub ssd_latency_ns_read: u64,
    pub ssd_latency_ns_write: u64,
    pub ssd_ps_per_byte: u64,
    pub ssd_queue_depth: u32,
    /// One-way time a verb on device memory saves (half the profile's RTT saving).
    pub device_saving_oneway_ps: u64,
    pub device_atomic_service_ps: u64,
    pub masked_atomic_service_ps: u64,
    pub unsignaled_max: u32,
    pub tear_order: TearOrder,
}

pub fn class_index(class: VerbClass) -> usize {
    match class {
        VerbClass::Read => 0,
        VerbClass::Write => 1,
        VerbClass::Atomic => 2,
        VerbClass::Send => 3,
    }
}

impl Params {
    pub fn from_profile(p: &Profile) -> Params {
        let rtt = [p.latency_ns_read, p.latency_ns_write, p.latency_ns_atomic, p.latency_ns_send];
        let rate = [p.rate_mops_read, p.rate_mops_write, p.rate_mops_atomic, p.rate_mops_send];
        Params {
            oneway_ps: rtt.map(|r| r * PS_PER_NS / 2),
            cost_ps: rate.map(|m| (1e6 / m).round() as u64),
            // 8 bits per byte at `gbps` bits per ns: 8000/gbps ps per byte; kept ×1000 for precision.
            ps_per_byte_x1000: (8.0e6 / p.link_bandwidth_gbps).round() as u64,
            header_bytes: p.header_bytes as u64,
            atomic_service_ps: p.atomic_service_ns * PS_PER_NS,
            qp_outstanding_max: p.qp_outstanding_max,
            jitter_ns_max: p.jitter_ns_max,
            ssd_latency_ns_read: p.ssd_latency_ns_read,
            ssd_latency_ns_write: p.ssd_latency_ns_write,
            ssd_ps_per_byte: (1e6 / p.ssd_bandwidth_mbps).round() as u64,
            ssd_queue_depth: p.ssd_queue_depth.max(1),
            device_saving_oneway_ps: p.device_latency_saving_ns * PS_PER_NS / 2,
            device_atomic_service_ps: p.device_atomic_service_ns * PS_PER_NS,
            masked_atomic_service_ps: p.masked_atomic_service_ns * PS_PER_NS,
            unsignaled_max: p.unsignaled_max.max(1),
            tear_order: p.tear_order,
        }
    }

    /// Wire time of a message carrying `payload_bytes`, with headers.
    #[inline]
    pub fn wire_ps(&self, payload_bytes: u64) -> u64 {
        (payload_bytes + self.header_bytes) * self.ps_per_byte_x1000 / 1000
    }
}

/// Reserve a FIFO server: start at `max(at, free)`, hold it for `hold`; returns the start.
#[inline]
pub fn reserve(free_ps: &mut u64, at_ps: u64, hold_ps: u64) -> u64 {
    let start = at_ps.max(*free_ps);
    *free_ps = start + hold_ps;
    start
}

/// The FIFO servers a verb can queue at, for the per-resource wait breakdown
/// (`run.fabric_waits`): which resource a slow run waits on.
#[derive(Clone, Copy, Debug)]
pub enum Wait {
    /// The posting NIC's issue rate (doorbell batches issue back to back).
    Issue,
    /// The posting node's link, outbound requests.
    RequestEgress,
    /// The target's link, inbound requests (incast).
    RequestIngress,
    /// The target NIC's processing rate.
    Process,
    /// The target's per-word atomic unit (same-address atomics serialize).
    AtomicUnit,
    /// The target's link, outbound responses (READ payloads).
    ResponseEgress,
    /// The initiator's link, inbound responses.
    ResponseIngress,
    /// A modelled core (memory nodes, compute nodes with `compute_node_cores`), FCFS.
    Cpu,
}

/// Picoseconds queued at each [`Wait`] resource, indexed by `Wait as usize`.
pub type WaitTotals = [u64; Wait::ALL.len()];

impl Wait {
    pub const ALL: [Wait; 8] = [
        Wait::Issue,
        Wait::RequestEgress,
        Wait::RequestIngress,
        Wait::Process,
        Wait::AtomicUnit,
        Wait::ResponseEgress,
        Wait::ResponseIngress,
        Wait::Cpu,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Wait::Issue => "issue",
            Wait::RequestEgress => "request_egress",
            Wait::RequestIngress => "request_ingress",
            Wait::Process => "process",
            Wait::AtomicUnit => "atomic_unit",
            Wait::ResponseEgress => "response_egress",
            Wait::ResponseIngress => "response_ingress",
            Wait::Cpu => "cpu",
        }
    }
}

/// Per-node fabric state.
#[derive(Clone, Debug, Default)]
pub struct NodeFabric {
    /// Picoseconds spent queueing at each of this node's resources ([`Wait`] order).
    pub waits_ps: WaitTotals,
    pub nic_issue_free_ps: u64,
    pub nic_process_free_ps: u64,
    pub egress_free_ps: u64,
    pub ingress_free_ps: u64,
    /// `None`: every task has its own core (compute nodes by default). `Some`: FCFS over
    /// these cores (memory nodes, and compute nodes when the run models their cores).
    pub cores_free_ns: Option<Vec<u64>>,
    /// Share of each core available to us, in parts per million (stranded ≪ 1e6).
    pub cpu_share_ppm: u64,
    /// The SSD's shared transfer bandwidth: free at.
    pub ssd_free_ps: u64,
    /// The SSD's command slots (queue depth): each free at.
    pub ssd_slots_free_ps: Vec<u64>,
}

impl NodeFabric {
    /// Count `start - at_ps` of waiting at `wait` (a [`reserve`] that started at `start`).
    #[inline]
    pub fn waited(&mut self, wait: Wait, at_ps: u64, start_ps: u64) -> u64 {
        self.waits_ps[wait as usize] += start_ps - at_ps;
        start_ps
    }

    /// Reserve a core for `work_ns` of CPU work starting no earlier than `now_ns`; returns the
    /// finish time. The lowest-index earliest-free core wins, so ties are deterministic.
    pub fn cpu(&mut self, now_ns: u64, work_ns: u64) -> u64 {
        let share = self.cpu_share_ppm.max(1);
        let wall_ns = (work_ns as u128 * 1_000_000).div_ceil(share as u128) as u64;
        match &mut self.cores_free_ns {
            None => now_ns + wall_ns,
            Some(cores) => {
                let (index, _) = cores.iter().enumerate().min_by_key(|(i, free)| (**free, *i)).unwrap();
                let start = now_ns.max(cores[index]);
                self.waits_ps[Wait::Cpu as usize] += (start - now_ns) * PS_PER_NS;
                cores[index] = start + wall_ns;
                start + wall_ns
            }
        }
    }
}

/// Per-QP ordering and flow-control state.
#[derive(Clone, Debug, Default)]
pub struct QpState {
    pub outstanding: u32,
    /// Unsignaled work requests posted and not yet completed.
    pub unsignaled: u32,
    pub last_arrive_ps: u64,
    pub last_exec_ps: u64,
    pub last_done_ps: u64,
    pub verbs_posted: u64,
}

/// Round a picosecond instant up to the nanosecond event time.
#[inline]
pub fn ps_to_ns_ceil(ps: u64) -> u64 {
    ps.div_ceil(PS_PER_NS)
}

impl NodeFabric {
    /// Reserve the SSD for one command of `bytes` posted at `now_ps` with `latency_ps`; returns
    /// when it completes. The lowest-index earliest-free slot wins (deterministic ties).
    pub fn ssd(&mut self, params: &Params, now_ps: u64, latency_ps: u64, bytes: u64) -> u64 {
        if self.ssd_slots_free_ps.is_empty() {
            self.ssd_slots_free_ps = vec![0; params.ssd_queue_depth as usize];
        }
        let slots = &mut self.ssd_slots_free_ps;
        let (index, _) = slots.iter().enumerate().min_by_key(|(i, free)| (**free, *i)).unwrap();
        let start = now_ps.max(slots[index]);
        let transfer = bytes * params.ssd_ps_per_byte;
        let done = reserve(&mut self.ssd_free_ps, start + latency_ps, transfer) + transfer;
        slots[index] = done;
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_match_profile_arithmetic() {
        // Goal: the derived integers are the profile's numbers, not approximations far off.
        let p = Params::from_profile(&Profile::named("cx3_fdr56").unwrap());
        assert_eq!(p.oneway_ps[0], 1_000_000, "READ RTT 2000 ns → 1000 ns each way");
        // 56 Gb/s = 7 bytes/ns: 2 KiB + 36 B header takes (2048+36)/7 ≈ 297.7 ns.
        let ser = p.wire_ps(2048);
        assert!((297_000..298_500).contains(&ser), "{ser}");
        assert_eq!(p.cost_ps[2], (1e6f64 / 12.0).round() as u64);
    }

    #[test]
    fn cores_queue_fcfs_and_stranded_share_slows_work() {
        // Goal: with one core, work queues; a 10% share makes 1 µs of work take 10 µs.
        let mut n =
            NodeFabric { cores_free_ns: Some(vec![0]), cpu_share_ppm: 1_000_000, ..Default::default() };
        assert_eq!(n.cpu(0, 100), 100);
        assert_eq!(n.cpu(0, 100), 200);
        let mut s = NodeFabric { cores_free_ns: Some(vec![0]), cpu_share_ppm: 100_000, ..Default::default() };
        assert_eq!(s.cpu(0, 1000), 10_000);
        let mut free = NodeFabric { cpu_share_ppm: 1_000_000, ..Default::default() };
        assert_eq!(free.cpu(5, 100), 105);
        assert_eq!(free.cpu(5, 100), 105, "unmodelled cores never queue");
    }
}
