//! The backend-independent plans `dmsim hw run` executes, run here in the simulator: the same
//! per-node tasks and report/metrics code as on hardware, so a hardware run's logic is tested
//! without a NIC.

use std::path::Path;

use dmsim_sim::runners::plan::{run_in_sim, Plan};
use dmsim_sim::runners::selcc::SelccPlan;
use dmsim_sim::runners::RunOptions;
use dmsim_sim::scenario;
use dmsim_sim::trace::TraceSink;

#[test]
fn selcc_plan_drains_and_frees_every_latch() {
    // Goal: the SELCC hardware plan (drain at end, memory nodes count held latches after the
    // compute nodes finish) reports work done and no latch left held.
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hw/vm/scenarios/selcc-3node.json");
    let s = scenario::load(&file).expect("scenario loads");
    let point = &s.points[0];
    let plan = SelccPlan::new(point).expect("plan builds");
    assert_eq!(plan.cluster().node_count(), 3);
    let result = run_in_sim(&plan, point, RunOptions { trace: TraceSink::Off }).expect("run finishes");
    assert_eq!(result.ops, 2 * 2 * 200);
    assert_eq!(result.metrics["latches_held_at_end"], 0.0);
    assert!(result.metrics["throughput_mops"] > 0.0);
    assert!(result.metrics["invalidation_ratio"] > 0.0, "hot lines must conflict: {:?}", result.metrics);
}
