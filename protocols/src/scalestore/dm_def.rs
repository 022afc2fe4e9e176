//! ScaleStore as SELCC's baseline (`protocol: "scalestore-dm"`): the same protocol on memory +
//! compute nodes, as SELCC §7.1 configured it — the memory nodes are the directories and hold
//! every page in buffer pools "sufficiently large to fully store the data in memory,
//! eliminating SSD access", the compute nodes are "stateless": they run the workers, cache
//! pages (SELCC's `cache_ratio`) and evict them to the memory nodes, and never own a PID. Every
//! request a compute node sends is served by a memory node's handler tasks, one per modelled
//! memory-node core (`cluster.memory_node_cores`, 1 in SELCC's default), which is what SELCC's
//! paper names as ScaleStore's limit ("insufficient remote computing power").
//!
//! Pages are SELCC's GCLs (`workload.gcl_size_bytes`); GCL `i` is page `i / m` of memory node
//! `i mod m`. The workload is SELCC's micro-benchmark (`workload::micro`): each operation reads
//! or writes one 8-byte word of one GCL through the page API. `protocol_options` is
//! ScaleStore's [`Config`] (`handler_tasks` defaults to the memory nodes' cores).
//!
//! [CHOICE]s: no page starts at a compute node (stateless); the memory nodes' pages start
//! dirty (the device is never read: SSD-free as SELCC's adaptation), and their caches are
//! unbounded (no provider runs there).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::bench::timed_access;
use super::config::Config;
use super::def::{node_report, page_metrics, parse_reports};
use super::layout::Layout;
use super::node::{Access, Node};
use super::state::{NodeState, Owed};
use super::stats::Stats;
use crate::common::bench::write_stamp;
use crate::common::shape;
use crate::harness::{
    merge_options, parse_typed, CheckLevel, Invariants, Memory, NodeReport, NodeRun, OpLog, Plan, PointSpec,
    Problem, Protocol, Violation,
};
use crate::nic::{Cluster, Nanos, Nic, Task};
use crate::workload::micro::{MicroSpec, MicroStream};
use crate::workload::rng_for_thread;
use crate::workload::scenario::MicroWorkload;

#[derive(Clone, Copy)]
pub struct ScaleStoreDm;

impl Protocol for ScaleStoreDm {
    type Plan = ScaleStoreDmPlan;

    fn names(&self) -> &'static [&'static str] {
        &["scalestore-dm"]
    }

    fn about(&self) -> &'static str {
        "ScaleStore as SELCC's baseline: directories on memory nodes, stateless caching compute nodes, SELCC's micro-benchmark"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<ScaleStoreDmPlan, Vec<Problem>> {
        ScaleStoreDmPlan::new(point)
    }
}

const RESERVED: &[(&str, &str)] =
    &[("page_bytes", "workload.gcl_size_bytes"), ("mutant", "dmsim fuzz --mutant")];

pub struct ScaleStoreDmPlan {
    spec: MicroSpec,
    config: Config,
    layout: Layout,
    cluster: Cluster,
    memory_nodes: u16,
    compute_nodes: u16,
    cache_frames: u64,
    seed: u64,
    check: CheckLevel,
    quiesce: bool,
    states: Mutex<Vec<Arc<Mutex<NodeState>>>>,
    owed: Option<Owed>,
}

impl ScaleStoreDmPlan {
    pub fn new(point: &PointSpec) -> Result<ScaleStoreDmPlan, Vec<Problem>> {
        let w: MicroWorkload = parse_typed(&point.workload, "workload").map_err(|p| vec![p])?;
        let presets = [("default", Config::default())];
        let mut config: Config =
            merge_options(&point.protocol_options, "protocol_options", &presets, RESERVED)
                .map_err(|p| vec![p])?;
        let mut out = Vec::new();
        config.handlers_from_memory_cores(point);
        config.page_bytes = w.gcl_size_bytes as u64;
        for p in config.validate(point.memory_nodes as usize + point.compute_nodes as usize) {
            let (field, reason) = p.split_once(": ").unwrap_or(("", &p));
            out.push(Problem::new(crate::harness::join_path("protocol_options", field), reason));
        }
        config.mutant = super::mutants::named(&point.mutant).unwrap_or_else(|| {
            out.push(Problem::new("mutant", format!("scalestore has no mutant {:?}", point.mutant)));
            Default::default()
        });
        w.check_plain("scalestore-dm", &mut out);
        point.no_symmetric("scalestore-dm", &mut out);
        if point.memory_nodes == 0 || point.compute_nodes == 0 {
            out.push(Problem::new(
                "cluster",
                "scalestore-dm needs memory nodes (directories) and compute nodes",
            ));
        }
        if point.memory_nodes as u32 + point.compute_nodes as u32 > 64 {
            out.push(Problem::new("cluster", "at most 64 nodes (sharer bitmaps of 64 bits)"));
        }
        let run = shape::resolve(&w.shape_fields(), point.compute_nodes, w.gcl_count, false, &mut out);
        let spec = MicroSpec {
            gcl_count: w.gcl_count,
            gcl_size_bytes: w.gcl_size_bytes,
            sharing_ratio: w.sharing_ratio,
            read_ratio: w.read_ratio,
            zipf_theta: w.zipf_theta,
            locality: w.locality,
            threads_per_node: run.threads_per_node,
            ops_per_thread: run.ops_per_thread,
            access_bytes: 8,
        };
        if w.access_bytes != 8 {
            out.push(Problem::new(
                "workload.access_bytes",
                "scalestore-dm accesses one 8-byte word per operation",
            ));
        }
        if (0.0..=1.0).contains(&spec.sharing_ratio) && point.compute_nodes > 0 {
            for p in spec.validate(point.compute_nodes as usize) {
                let (field, reason) = p.split_once(": ").unwrap_or(("", &p));
                out.push(Problem::new(crate::harness::join_path("workload", field), reason));
            }
        }
        if spec.gcl_count > 1 << 32 {
            // Far beyond the 8 GiB region budget below, and the layout's products must fit a u64.
            out.push(Problem::new("workload.gcl_count", "at most 2^32 GCLs (a frame each per node)"));
        }
        if !out.is_empty() {
            return Err(out);
        }
        let (m, c) = (point.memory_nodes as u64, point.compute_nodes as u64);
        let cache_frames = run.cache_frames.map_or(u64::MAX, |f| f as u64);
        let mut layout = Layout {
            nodes: m + c,
            homes: m,
            threads: run.threads_per_node as u64,
            pages_per_node: spec.gcl_count.div_ceil(m),
            page_bytes: config.page_bytes,
            keys_per_page: config.page_bytes / 8,
            providers: 0,
            batch: config.eviction.batch as u64,
        };
        if cache_frames < spec.gcl_count {
            layout.providers = config.eviction.providers as u64;
            if cache_frames < layout.threads + 2 {
                out.push(Problem::new(
                    "workload.cache_ratio",
                    format!("{cache_frames} frames per compute node: at least threads_per_node + 2"),
                ));
            }
        }
        const REGION_MAX: u64 = 8 << 30;
        if layout.region_bytes().saturating_mul(m + c) > REGION_MAX {
            out.push(Problem::new(
                "workload.gcl_count",
                format!("every node has a frame per GCL: {} bytes per node", layout.region_bytes()),
            ));
        }
        if !out.is_empty() {
            return Err(out);
        }
        let cluster = point.cluster(layout.region_bytes(), layout.region_bytes());
        Ok(ScaleStoreDmPlan {
            spec,
            config,
            layout,
            cluster,
            memory_nodes: point.memory_nodes,
            compute_nodes: point.compute_nodes,
            cache_frames,
            seed: point.seed,
            check: point.check,
            quiesce: point.quiesce,
            states: Mutex::new(Vec::new()),
            owed: point.check.full().then(Owed::default),
        })
    }
}

/// The global page of GCL `i`: page `i / m` of memory node `i mod m`.
fn page_of(layout: &Layout, i: u64) -> u64 {
    (i % layout.homes) * layout.pages_per_node + i / layout.homes
}

/// One compute-node worker running SELCC's micro-benchmark through the page API.
#[allow(clippy::too_many_arguments)]
async fn run_micro<N: Nic>(
    node: Arc<Node<N>>,
    thread: u32,
    spec: MicroSpec,
    compute_index: usize,
    compute_count: usize,
    seed: u64,
    log: Option<(OpLog, u32)>,
    latencies: Arc<Mutex<Vec<u64>>>,
) {
    let me = node.nic.node();
    let mut w = node.worker(thread);
    let stream = MicroStream::new(&spec, compute_index, compute_count, rng_for_thread(seed, me.0, thread));
    let layout = node.layout.clone();
    let mut sequence = 0;
    {
        // Every operation is measured, from this worker's first on.
        let start = w.nic.now().0;
        let mut s = node.stats.lock().unwrap_or_else(|e| e.into_inner());
        s.measure_start_ns = Some(s.measure_start_ns.map_or(start, |t| t.min(start)));
    }
    for op in stream {
        let key = page_of(&layout, op.gcl_index) * layout.keys_per_page + (op.offset_bytes / 8) as u64;
        let access = if op.write {
            sequence += 1;
            Access::Write(write_stamp(me, thread, sequence))
        } else {
            Access::Read
        };
        if !timed_access(&node, &mut w, key, access, true, &log, &latencies).await {
            return;
        }
    }
}

impl Plan for ScaleStoreDmPlan {
    type State = Mutex<NodeState>;

    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun<Mutex<NodeState>> {
        let me = nic.node();
        let home = (me.0 as u64) < self.layout.homes;
        let capacity = if home { u64::MAX } else { self.cache_frames };
        let loaded = home.then_some(self.layout.pages_per_node);
        let node =
            Node::new(nic, self.layout.clone(), self.config.clone(), self.owed.clone(), capacity, loaded);
        if self.check.full() {
            self.states.lock().unwrap_or_else(|e| e.into_inner()).push(node.state.clone());
        }
        let latencies = Arc::new(Mutex::new(Vec::new()));
        let log = self.check.histories().then(OpLog::new);
        let mains: Vec<Task> = if home {
            Vec::new()
        } else {
            let compute_index = (me.0 - self.memory_nodes) as usize;
            (0..self.spec.threads_per_node)
                .map(|t| {
                    let client = compute_index as u32 * self.spec.threads_per_node + t;
                    let task: Task = Box::pin(run_micro(
                        node.clone(),
                        t,
                        self.spec.clone(),
                        compute_index,
                        self.compute_nodes as usize,
                        self.seed,
                        log.clone().map(|l| (l, client)),
                        latencies.clone(),
                    ));
                    task
                })
                .collect()
        };
        let daemons = node.daemons(!home);
        let watched = node.clone();
        NodeRun {
            mains,
            daemons,
            progress: Some(Arc::new(move || watched.stats.lock().unwrap_or_else(|e| e.into_inner()).ops)),
            state: Some(node.state.clone()),
            collect: Box::new(move || node_report(&node, &latencies, log)),
        }
    }

    fn metrics(&self, reports: &[NodeReport], elapsed: Nanos) -> BTreeMap<String, f64> {
        let mut total = Stats::default();
        for r in &parse_reports(reports) {
            total.merge(&r.stats);
        }
        // Only the compute nodes cache under a budget.
        let capacity =
            (self.layout.providers > 0).then(|| (self.cache_frames * self.compute_nodes as u64) as f64);
        let mut m = page_metrics(&total, reports, elapsed, capacity);
        // SELCC's micro-benchmark name for the hot-path hit ratio.
        m.insert("cache_hit_ratio".into(), total.hits as f64 / total.ops.max(1) as f64);
        m
    }

    fn ops(&self, reports: &[NodeReport]) -> u64 {
        parse_reports(reports).iter().map(|r| r.stats.ops).sum()
    }

    fn invariants(&self, states: Vec<Option<Arc<Mutex<NodeState>>>>) -> Option<Invariants> {
        if !self.check.full() {
            return None;
        }
        Some(super::check::hook(&self.layout, self.owed.as_ref()?, states))
    }

    fn verify(&self, reports: &[NodeReport], _memory: Option<Memory>) -> Result<(), Violation> {
        let states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        super::check::verify_records(&self.layout, reports, &states, self.quiesce, self.owed.as_ref())
    }
}
