//! The GAM-like RPC directory baseline (`protocol: "gam"`) on the §7.1 micro-benchmark.
//!
//! `workload` is the same [`MicroSpec`] the SELCC runner reads (sharing ratio, read ratio,
//! zipf, locality, GCL size, threads), so one scenario's `workload` section drives both.
//! `protocol_options` (all optional):
//!
//! | field | default | meaning |
//! |---|---|---|
//! | `variant` | `"seq"` | `"tso"` (store buffers) or `"seq"` (each write waits) |
//! | `cache_frames` | 4096 | cached blocks per compute node |
//! | `handler_tasks` | `cluster.memory_node_cores` (1 if unmodelled) | directory handlers per memory node |
//! | `compute_workers` | 1 | request-worker servers per compute node (1 = GAM's serialized queue) |
//! | `inv_handlers` | 1 | invalidation handler tasks per compute node |
//! | `write_buffer_entries` | 16 | TSO store-buffer entries per thread |
//! | `worker_ns`, `access_ns`, `enqueue_ns` | 200, 100, 50 | compute-side CPU costs |
//! | `handler_service_ns`, `handler_copy_ns_per_kib` | 600, 150 | memory-node CPU per message / per KiB copied |
//! | `check` | false | check every read against the latest write and SWMR after every event |
//!
//! Metrics use the SELCC runner's names where they mean the same thing (`throughput_mops`,
//! `cache_hit_ratio`, `invalidation_ratio`), plus `rpcs_per_op`, `messages_per_op`, ….

use std::collections::BTreeMap;
use std::sync::Arc;

use dmsim_protocols::gam::bench::{cluster_stats, home_tasks, node_tasks};
use dmsim_protocols::gam::check::{check_swmr, Oracle};
use dmsim_protocols::gam::directory::HomeStats;
use dmsim_protocols::gam::stats::Stats;
use dmsim_protocols::gam::{Config, CpuCosts, Layout, NodeState, Variant};
use dmsim_protocols::nic::{Cluster, Nanos, Nic, NodeKind};
use dmsim_protocols::workload::micro::MicroSpec;
use serde::Deserialize;

use super::common::{cluster, require_finished, sim_config};
use super::{PointResult, RunOptions};
use crate::engine::Sim;
use crate::scenario::load::parse_typed;
use crate::scenario::{Point, PointConfig, Problem};

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    variant: Option<Variant>,
    cache_frames: Option<u32>,
    handler_tasks: Option<u32>,
    compute_workers: Option<u32>,
    inv_handlers: Option<u32>,
    write_buffer_entries: Option<u32>,
    worker_ns: Option<u64>,
    access_ns: Option<u64>,
    enqueue_ns: Option<u64>,
    handler_service_ns: Option<u64>,
    handler_copy_ns_per_kib: Option<u64>,
    #[serde(default)]
    check: bool,
}

struct Parsed {
    spec: MicroSpec,
    config: Config,
    check: bool,
}

/// Accept the SELCC runner's run-shape fields too, so one scenario's `workload` drives both
/// protocols (a GAM series in a SELCC figure): `threads_total` → `threads_per_node`,
/// `ops_per_node` → `ops_per_thread`, `cache_ratio` → cache frames, `sharing_model`
/// `fixed_total` (GAM's only model; the SELCC figures that carry GAM use 100 % sharing, where the
/// models coincide). Returns the workload in `MicroSpec` form and the cache frames it implied.
fn run_shape(point: &PointConfig) -> Result<(serde_json::Value, Option<u32>), Problem> {
    let mut w = point.workload.clone();
    let Some(map) = w.as_object_mut() else { return Ok((w, None)) };
    map.retain(|_, v| !v.is_null());
    if map.contains_key("compare_with") {
        return Err(Problem::new("workload.compare_with", "the gam runner compares nothing"));
    }
    match map.remove("sharing_model").as_ref().and_then(|v| v.as_str()) {
        None | Some("fixed_total") => {}
        Some(_) if map.get("sharing_ratio").and_then(|v| v.as_f64()) == Some(1.0) => {}
        Some(other) => {
            return Err(Problem::new(
                "workload.sharing_model",
                format!("gam supports fixed_total only, not {other:?}"),
            ))
        }
    }
    // The SELCC runner's defaults, so a shared workload means the same thing to both.
    map.entry("gcl_size_bytes").or_insert(2048.into());
    map.entry("access_bytes").or_insert(8.into());
    let nodes = point.cluster.compute_nodes.max(1) as u64;
    if let Some(total) = map.remove("threads_total") {
        let total =
            total.as_u64().ok_or_else(|| Problem::new("workload.threads_total", "must be an integer"))?;
        if total % nodes != 0 || total < nodes {
            return Err(Problem::new(
                "workload.threads_total",
                format!("{total} threads do not split over {nodes} compute nodes"),
            ));
        }
        map.insert("threads_per_node".into(), (total / nodes).into());
    }
    if let Some(ops) = map.remove("ops_per_node") {
        let ops = ops.as_u64().ok_or_else(|| Problem::new("workload.ops_per_node", "must be an integer"))?;
        let threads = map.get("threads_per_node").and_then(|v| v.as_u64()).unwrap_or(1).max(1);
        map.insert("ops_per_thread".into(), (ops / threads).max(1).into());
    }
    let mut frames = None;
    if let Some(ratio) = map.remove("cache_ratio") {
        let ratio = ratio.as_f64().filter(|r| *r > 0.0 && r.is_finite());
        let ratio =
            ratio.ok_or_else(|| Problem::new("workload.cache_ratio", "must be a positive fraction"))?;
        let gcls = map.get("gcl_count").and_then(|v| v.as_f64()).unwrap_or(0.0);
        frames = Some((ratio * gcls).ceil().min(u32::MAX as f64) as u32);
    }
    Ok((w, frames))
}

fn parse(point: &PointConfig) -> Result<Parsed, Problem> {
    let (workload, implied_frames) = run_shape(point)?;
    let spec: MicroSpec = parse_typed(&workload, "workload")?;
    let options: Options = if point.protocol_options.is_null() {
        Options::default()
    } else {
        parse_typed(&point.protocol_options, "protocol_options")?
    };
    let base = Config::seq();
    let costs = CpuCosts::default();
    let config = Config {
        variant: options.variant.unwrap_or(Variant::Seq),
        gcl_size_bytes: spec.gcl_size_bytes,
        cache_frames: options.cache_frames.or(implied_frames).unwrap_or(base.cache_frames),
        threads_per_node: spec.threads_per_node,
        handler_tasks: options.handler_tasks.unwrap_or(point.cluster.memory_node_cores.unwrap_or(1)),
        compute_workers: options.compute_workers.unwrap_or(base.compute_workers),
        inv_handlers: options.inv_handlers.unwrap_or(base.inv_handlers),
        write_buffer_entries: options.write_buffer_entries.unwrap_or(base.write_buffer_entries),
        cpu: CpuCosts {
            worker_ns: options.worker_ns.unwrap_or(costs.worker_ns),
            access_ns: options.access_ns.unwrap_or(costs.access_ns),
            enqueue_ns: options.enqueue_ns.unwrap_or(costs.enqueue_ns),
            handler_service_ns: options.handler_service_ns.unwrap_or(costs.handler_service_ns),
            handler_copy_ns_per_kib: options.handler_copy_ns_per_kib.unwrap_or(costs.handler_copy_ns_per_kib),
        },
    };
    Ok(Parsed { spec, config, check: options.check })
}

/// "field: reason" from a protocol validator → a problem at `prefix.field`.
fn problem_at(prefix: &str, text: &str) -> Problem {
    match text.split_once(": ") {
        Some((field, reason)) if !field.contains(' ') => Problem::new(format!("{prefix}.{field}"), reason),
        _ => Problem::new(prefix, text),
    }
}

pub fn check(config: &PointConfig) -> Vec<Problem> {
    let parsed = match parse(config) {
        Ok(p) => p,
        Err(p) => return vec![p],
    };
    let compute = config.cluster.compute_nodes as usize;
    // `MicroSpec::validate` partitions the blocks by the sharing ratio, which overflows when the
    // ratio is out of range: report that alone first.
    let sharing = parsed.spec.sharing_ratio;
    let mut out: Vec<Problem> = if (0.0..=1.0).contains(&sharing) {
        parsed.spec.validate(compute.max(1)).iter().map(|p| problem_at("workload", p)).collect()
    } else {
        vec![Problem::new("workload.sharing_ratio", format!("{sharing} is outside [0, 1]"))]
    };
    for p in parsed.config.validate() {
        // Fields the runner copies from the workload are reported there.
        let prefix = if p.starts_with("threads_per_node") || p.starts_with("gcl_size_bytes") {
            "workload"
        } else {
            "protocol_options"
        };
        out.push(problem_at(prefix, &p));
    }
    if compute > dmsim_protocols::gam::layout::MAX_COMPUTE_NODES {
        out.push(Problem::new("cluster.compute_nodes", "GAM sharer bitmaps allow at most 64 compute nodes"));
    }
    if parsed.spec.gcl_count == 0 {
        out.push(Problem::new("workload.gcl_count", "must be at least 1"));
    }
    out
}

/// The runner's metrics from the compute nodes' and homes' counters over `span_s` seconds.
fn metrics(
    total: &Stats,
    home: &HomeStats,
    span_s: f64,
    reads_checked: Option<u64>,
) -> BTreeMap<String, f64> {
    let ops = total.ops;
    let per_op = |x: u64| x as f64 / ops.max(1) as f64;
    let home_messages = home.replies + home.invalidations_sent + home.recalls_sent;
    let mut metrics = BTreeMap::new();
    metrics.insert("throughput_mops".into(), ops as f64 / span_s.max(1e-12) / 1e6);
    metrics.insert("ops".into(), ops as f64);
    metrics.insert("cache_hit_ratio".into(), total.hit_ratio());
    metrics.insert("invalidation_ratio".into(), total.invalidation_ratio());
    metrics.insert("rpcs_per_op".into(), total.rpcs_per_op());
    metrics.insert("messages_per_op".into(), per_op(total.messages_sent + home_messages));
    metrics.insert("latency_ns_avg".into(), per_op(total.latency_ns_total));
    metrics.insert("fetch_retries_per_op".into(), per_op(total.fetch_retries));
    metrics.insert("writebacks_per_op".into(), per_op(total.writebacks));
    metrics.insert("home_queued_ratio".into(), home.queued as f64 / home.requests.max(1) as f64);
    metrics.insert("buffer_forwards_per_op".into(), per_op(total.buffer_forwards));
    if let Some(reads) = reads_checked {
        metrics.insert("reads_checked".into(), reads as f64);
    }
    metrics
}

pub fn run(point: &Point, options: RunOptions) -> Result<PointResult, String> {
    let Parsed { spec, config, check } =
        parse(&point.config).map_err(|p| format!("{}: {}", p.path, p.reason))?;
    let cluster_spec = &point.config.cluster;
    let shape = cluster(cluster_spec, 0, 0);
    let layout = Layout::new(&shape, config.gcl_size_bytes, spec.gcl_count, config.cache_frames);
    let cl = cluster(cluster_spec, layout.memory_region_bytes(), layout.compute_region_bytes());
    let mut sim = Sim::new(sim_config(point, cl.clone(), options.trace));
    let oracle = check.then(|| Arc::new(Oracle::new(config.gcl_size_bytes)));

    let mut directories = Vec::new();
    for mn in cl.memory_nodes() {
        let home = home_tasks(sim.nic(mn), &config, &layout);
        for t in home.daemons {
            sim.spawn_daemon(mn, t);
        }
        directories.push(home.directory);
    }
    let mut nodes = Vec::new();
    for cn in cl.compute_nodes() {
        let tasks = node_tasks(sim.nic(cn), &config, &layout, &spec, point.seed, oracle.clone());
        for t in tasks.mains {
            sim.spawn_main(cn, t);
        }
        for t in tasks.daemons {
            sim.spawn_daemon(cn, t);
        }
        nodes.push(tasks.node);
    }
    if check {
        let states: Vec<Arc<NodeState>> = nodes.iter().map(|n| n.state.clone()).collect();
        sim.set_checker(move |_| {
            let refs: Vec<&NodeState> = states.iter().map(|s| s.as_ref()).collect();
            check_swmr(&refs)
        });
    }
    let outcome = sim.run();
    // A protocol error is the cause of whatever else went wrong: report the earliest.
    let homes = directories.iter().filter_map(|d| d.lock().unwrap().first_error());
    if let Some(e) = nodes.iter().filter_map(|n| n.first_error()).chain(homes).min_by_key(|e| (e.at, e.node))
    {
        return Err(format!("protocol error: {e}"));
    }
    require_finished(&outcome)?;
    if let Some(oracle) = &oracle {
        if let Some(v) = oracle.violations().first() {
            return Err(format!("read-latest violated: {v}"));
        }
    }

    let total = cluster_stats(&nodes);
    let mut home = HomeStats::default();
    for d in &directories {
        home.merge(&d.lock().unwrap().stats);
    }
    let start_ns = total.first_op_start_ns.unwrap_or(0);
    let span_s =
        outcome.end_time.saturating_sub(dmsim_protocols::nic::Nanos(start_ns)).as_secs_f64().max(1e-12);
    let ops = total.ops;
    let metrics = metrics(&total, &home, span_s, oracle.as_ref().map(|o| o.reads_checked()));
    Ok(PointResult::simulated(&outcome, metrics, ops))
}

/// GAM on the micro-benchmark as a backend-independent [`super::plan::Plan`], so `dmsim hw run`
/// runs the baseline of SELCC's Fig. 13/14 on real nodes too: memory nodes run the home
/// directory handlers, compute nodes the clients with their caches. Throughput is over the
/// slowest node's elapsed time (per-node clocks are not comparable on hardware).
pub struct GamPlan {
    spec: MicroSpec,
    config: Config,
    layout: Layout,
    cluster: Cluster,
    seed: u64,
}

impl GamPlan {
    pub fn new(point: &Point) -> Result<GamPlan, String> {
        if let Some(p) = check(&point.config).first() {
            return Err(format!("{}: {}", p.path, p.reason));
        }
        let Parsed { spec, config, check } =
            parse(&point.config).map_err(|p| format!("{}: {}", p.path, p.reason))?;
        if check {
            return Err("protocol_options.check: the read-latest oracle needs one process; \
                        remove it for hardware runs"
                .into());
        }
        let shape = cluster(&point.config.cluster, 0, 0);
        let layout = Layout::new(&shape, config.gcl_size_bytes, spec.gcl_count, config.cache_frames);
        let cluster =
            cluster(&point.config.cluster, layout.memory_region_bytes(), layout.compute_region_bytes());
        Ok(GamPlan { spec, config, layout, cluster, seed: point.seed })
    }
}

/// A GAM node's report: a home's counters or a compute node's.
#[derive(serde::Serialize, Deserialize)]
enum GamReport {
    Home(HomeStats),
    Compute(Stats),
}

impl super::plan::Plan for GamPlan {
    fn cluster(&self) -> Cluster {
        self.cluster.clone()
    }

    fn node<N: Nic>(&self, nic: N) -> super::plan::NodeRun {
        use super::plan::{NodeReport, NodeRun};
        let report = |r: GamReport| NodeReport {
            extra: serde_json::to_value(r).expect("stats serialize"),
            ..NodeReport::default()
        };
        if self.cluster.kinds[nic.node().index()] == NodeKind::Memory {
            let home = home_tasks(nic, &self.config, &self.layout);
            let directory = home.directory;
            return NodeRun {
                progress: None,
                mains: Vec::new(),
                daemons: home.daemons,
                collect: Box::new(move || {
                    let directory = directory.lock().unwrap_or_else(|e| e.into_inner());
                    let error = directory.first_error().map(|e| e.to_string());
                    NodeReport { error, ..report(GamReport::Home(directory.stats.clone())) }
                }),
            };
        }
        let tasks = node_tasks(nic, &self.config, &self.layout, &self.spec, self.seed, None);
        let node = tasks.node;
        let watched = node.clone();
        NodeRun {
            progress: Some(std::sync::Arc::new(move || watched.stats().ops)),
            mains: tasks.mains,
            daemons: tasks.daemons,
            collect: Box::new(move || NodeReport {
                error: node.first_error().map(|e| e.to_string()),
                ..report(GamReport::Compute(node.stats()))
            }),
        }
    }

    fn metrics(&self, reports: &[super::plan::NodeReport], elapsed: Nanos) -> BTreeMap<String, f64> {
        let mut total = Stats::default();
        let mut home = HomeStats::default();
        for r in reports {
            match serde_json::from_value::<GamReport>(r.extra.clone()) {
                Ok(GamReport::Home(h)) => home.merge(&h),
                Ok(GamReport::Compute(s)) => total.merge(&s),
                Err(_) => {}
            }
        }
        metrics(&total, &home, elapsed.as_secs_f64(), None)
    }

    fn ops(&self, reports: &[super::plan::NodeReport]) -> u64 {
        reports
            .iter()
            .filter_map(|r| match serde_json::from_value::<GamReport>(r.extra.clone()) {
                Ok(GamReport::Compute(s)) => Some(s.ops),
                _ => None,
            })
            .sum()
    }
}
