//! NAM-DB's definition (`protocol: "namdb"`), on any backend.
//!
//! The cluster is `symmetric_nodes` nodes, each holding its range of the record array and
//! running `workload.threads_per_node` workers ([`crate::workload::record_array::Workload`]).
//! `protocol_options` is any subset of [`Config`].
//!
//! Checks: `run.check` logs every operation for the per-key linearizability checker (a read
//! whose three stamp copies disagree logs a value no write stored). The fuzzer adds, after
//! every event, "latch words well formed" (exclusive bit 0 or 1, at most one shared holder per
//! worker) and "latches exclude" over the workers' own view of what they hold (at most one
//! exclusive holder, never with a shared one); after the quiesced run, "latches free at end".

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::config::Config;
use super::node::{Ghost, Worker, EXCLUSIVE};
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
pub struct NamDb;

impl Protocol for NamDb {
    type Plan = NamDbPlan;

    fn names(&self) -> &'static [&'static str] {
        &["namdb"]
    }

    fn about(&self) -> &'static str {
        "NAM-DB-like baseline of ScaleStore: record array, shared/exclusive latches by RDMA atomics (3 round trips per access)"
    }

    fn mutants(&self) -> &'static [crate::harness::Mutant] {
        super::mutants::LIST
    }

    fn plan(&self, point: &PointSpec) -> Result<NamDbPlan, Vec<Problem>> {
        NamDbPlan::new(point)
    }
}

const RESERVED: &[(&str, &str)] = &[("mutant", "dmsim fuzz --mutant")];
/// Seed offset of the workers' back-off streams (independent of the key streams).
const BACKOFF_STREAM: u64 = 0x4a4d_4442_0000_0001;

pub struct NamDbPlan {
    config: Config,
    workload: Workload,
    layout: Layout,
    cluster: Cluster,
    seed: u64,
    check: CheckLevel,
    quiesce: bool,
    ghost: Option<Ghost>,
}

impl NamDbPlan {
    pub fn new(point: &PointSpec) -> Result<NamDbPlan, Vec<Problem>> {
        let (workload, layout) = common_plan(point, "namdb")?;
        let presets = [("default", Config::default())];
        let mut config: Config =
            merge_options(&point.protocol_options, "protocol_options", &presets, RESERVED)
                .map_err(|p| vec![p])?;
        let mut out: Vec<Problem> = config.validate().iter().map(|p| at("protocol_options", p)).collect();
        config.mutant = match super::mutants::named(&point.mutant) {
            Some(m) => m,
            None => {
                out.push(Problem::new("mutant", format!("namdb has no mutant {:?}", point.mutant)));
                Default::default()
            }
        };
        if !out.is_empty() {
            return Err(out);
        }
        let cluster = point.cluster(layout.region_bytes(), 0);
        Ok(NamDbPlan {
            config,
            workload,
            layout,
            cluster,
            seed: point.seed,
            check: point.check,
            quiesce: point.quiesce,
            ghost: point.check.full().then(Ghost::default),
        })
    }
}

impl Plan for NamDbPlan {
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
        let mains = (0..self.workload.threads_per_node)
            .map(|t| {
                let worker = Worker {
                    nic: nic.qp(t as u16),
                    layout: self.layout.clone(),
                    config: self.config.clone(),
                    thread: t,
                    rng: rng_for_thread(self.seed ^ BACKOFF_STREAM, me.0, t),
                    cost: Default::default(),
                    ghost: self.ghost.clone(),
                    log_replaced: self.check.histories(),
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
        let stats = sink.stats.clone();
        NodeRun {
            mains,
            daemons: Vec::new(),
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
        let ghost = self.ghost.clone()?;
        let layout = self.layout.clone();
        let workers = layout.nodes * layout.threads;
        Some(Box::new(move |memory: Memory, _| {
            for key in 0..layout.records {
                let word = memory(layout.record(key));
                if word >> 32 > 1 || word & 0xffff_ffff > workers {
                    return Err(Violation::new(
                        "latch words well formed",
                        format!("record {key}: latch word {word:#x} (exclusive bit 0/1, ≤ {workers} shared)"),
                    ));
                }
            }
            let g = ghost.lock().unwrap_or_else(|e| e.into_inner());
            for (key, &(x, s)) in g.iter() {
                if x > 1 || (x == 1 && s > 0) {
                    return Err(Violation::new(
                        "latches exclude",
                        format!("record {key}: {x} exclusive and {s} shared holders at once"),
                    ));
                }
            }
            Ok(())
        }))
    }

    fn verify(&self, reports: &[NodeReport], memory: Option<Memory>) -> Result<(), Violation> {
        if let Some(e) = crate::harness::first_error(reports) {
            return Err(Violation::new("no protocol error", e.to_string()));
        }
        if let (true, Some(memory)) = (self.quiesce, memory) {
            for key in 0..self.layout.records {
                let word = memory(self.layout.record(key));
                if word != 0 {
                    let held = if word & EXCLUSIVE != 0 { "exclusive" } else { "shared" };
                    return Err(Violation::new(
                        "latches free at end",
                        format!("record {key} ({}) still latched {held}: {word:#x}", self.layout.home(key)),
                    ));
                }
            }
        }
        Ok(())
    }
}
