//! FaRM's definition (`protocol: "farm"`), on any backend.
//!
//! The cluster is `symmetric_nodes` nodes, each holding its range of the record array, running
//! `workload.threads_per_node` workers and `handler_tasks` update handlers
//! ([`crate::workload::record_array::Workload`]). `protocol_options` is any subset of
//! [`Config`].
//!
//! Checks: `run.check` logs every operation for the per-key linearizability checker (a read
//! whose stamp copies disagree logs a value no write stored). The fuzzer adds, after every
//! event, "unlocked records are consistent" (an unlocked header's version is every line's);
//! after the quiesced run, "records unlocked at end".

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::config::Config;
use super::node::{
    Lines, UpdateHandler, Worker, HANDLER_CHANNEL_BASE, LOCK, REPLY_PORT_BASE, UPDATE_PORT, VERSION_AT,
};
use crate::common::local_latch::interleaved_socket;
use crate::common::rpc::{self, Client};
use crate::harness::{
    merge_options, CheckLevel, Invariants, Memory, NodeReport, NodeRun, OpLog, Plan, PointSpec, Problem,
    Protocol, Violation,
};
use crate::nic::{Cluster, Nanos, Nic, Task};
use crate::workload::record_array::{
    array_metrics, array_ops, at, collect, common_plan, run_worker, Layout, Sink, Stats, Workload,
};
use crate::workload::rng_for_thread;

#[derive(Clone, Copy)]
pub struct Farm;

impl Protocol for Farm {
    type Plan = FarmPlan;

    fn names(&self) -> &'static [&'static str] {
        &["farm"]
    }

    fn about(&self) -> &'static str {
        "FaRM-like baseline of ScaleStore: record array, lock-free one-sided reads validated by per-cache-line versions, updates installed by the owner"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<FarmPlan, Vec<Problem>> {
        FarmPlan::new(point)
    }
}

const RESERVED: &[(&str, &str)] = &[("mutant", "dmsim fuzz --mutant")];
/// Seed offset of the workers' back-off streams (independent of the key streams).
const BACKOFF_STREAM: u64 = 0x4641_524d_0000_0001;

pub struct FarmPlan {
    config: Config,
    workload: Workload,
    layout: Layout,
    cluster: Cluster,
    seed: u64,
    check: CheckLevel,
    quiesce: bool,
}

impl FarmPlan {
    pub fn new(point: &PointSpec) -> Result<FarmPlan, Vec<Problem>> {
        let (workload, layout) = common_plan(point, "farm")?;
        let presets = [("default", Config::default())];
        let mut config: Config =
            merge_options(&point.protocol_options, "protocol_options", &presets, RESERVED)
                .map_err(|p| vec![p])?;
        let mut out: Vec<Problem> = config.validate().iter().map(|p| at("protocol_options", p)).collect();
        config.mutant = match super::mutants::named(&point.mutant) {
            Some(m) => m,
            None => {
                out.push(Problem::new("mutant", format!("farm has no mutant {:?}", point.mutant)));
                Default::default()
            }
        };
        if !out.is_empty() {
            return Err(out);
        }
        let cluster = point.cluster(layout.region_bytes(), 0);
        Ok(FarmPlan {
            config,
            workload,
            layout,
            cluster,
            seed: point.seed,
            check: point.check,
            quiesce: point.quiesce,
        })
    }
}

/// The first record of `layout` whose lines disagree with an unlocked header, as a message.
fn torn_record(layout: &Layout, memory: Memory) -> Option<String> {
    (0..layout.records).find_map(|key| {
        let rec = layout.record(key);
        let header = memory(rec);
        let versions = VERSION_AT.map(|at| memory(rec.add(at)));
        (header & LOCK == 0 && versions[1..].iter().any(|&v| v != header >> 1)).then(|| {
            format!("record {key} ({}): header {header:#x} unlocked, line versions {versions:?}", rec.node)
        })
    })
}

impl Plan for FarmPlan {
    type State = ();

    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    fn payload_spans(&self) -> Vec<Option<crate::memory::PayloadSpan>> {
        self.cluster.kinds.iter().map(|_| Some(self.layout.payload_span())).collect()
    }

    fn node<N: Nic>(&self, nic: N) -> NodeRun<()> {
        let me = nic.node();
        let sink = Sink {
            stats: Arc::new(Mutex::new(Stats::default())),
            latencies: Arc::new(Mutex::new(Vec::new())),
            log: self.check.histories().then(OpLog::new),
            errors: Arc::default(),
        };
        let lines = Lines::new(&self.config);
        let mains = (0..self.workload.threads_per_node)
            .map(|t| {
                let worker = Worker {
                    client: Client::new(nic.qp(t as u16), REPLY_PORT_BASE + t as u16),
                    layout: self.layout.clone(),
                    config: self.config.clone(),
                    lines: lines.on_socket(interleaved_socket(t, 2)),
                    thread: t,
                    rng: rng_for_thread(self.seed ^ BACKOFF_STREAM, me.0, t),
                    cost: Default::default(),
                };
                let task: Task = Box::pin(run_worker(
                    worker,
                    self.layout.clone(),
                    t,
                    self.workload.clone(),
                    self.seed,
                    sink.clone(),
                ));
                task
            })
            .collect();
        let handler = Arc::new(UpdateHandler {
            layout: self.layout.clone(),
            config: self.config.clone(),
            lines: lines.on_socket(0),
            errors: sink.errors.clone(),
        });
        let daemons = rpc::serve(&nic, UPDATE_PORT, HANDLER_CHANNEL_BASE, self.config.handler_tasks, handler);
        let stats = sink.stats.clone();
        NodeRun {
            mains,
            daemons,
            progress: Some(Arc::new(move || stats.lock().unwrap_or_else(|e| e.into_inner()).ops)),
            state: None,
            collect: Box::new(move || collect(&sink)),
        }
    }

    fn metrics(&self, reports: &[NodeReport], elapsed: Nanos) -> BTreeMap<String, f64> {
        array_metrics(reports, elapsed)
    }

    fn ops(&self, reports: &[NodeReport]) -> u64 {
        array_ops(reports)
    }

    fn invariants(&self, _states: Vec<Option<Arc<()>>>) -> Option<Invariants> {
        if !self.check.full() {
            return None;
        }
        let layout = self.layout.clone();
        Some(Box::new(move |memory: Memory, _| match torn_record(&layout, memory) {
            Some(m) => Err(Violation::new("unlocked records are consistent", m)),
            None => Ok(()),
        }))
    }

    fn verify(&self, reports: &[NodeReport], memory: Option<Memory>) -> Result<(), Violation> {
        if let Some(e) = crate::harness::first_error(reports) {
            return Err(Violation::new("no protocol error", e.to_string()));
        }
        if let (true, Some(memory)) = (self.quiesce, memory) {
            for key in 0..self.layout.records {
                let header = memory(self.layout.record(key));
                if header & LOCK != 0 {
                    return Err(Violation::new(
                        "records unlocked at end",
                        format!("record {key} ({}) still locked: {header:#x}", self.layout.home(key)),
                    ));
                }
            }
        }
        Ok(())
    }
}
