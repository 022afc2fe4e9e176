//! SELCC's micro-benchmark clients with every operation logged for the history checkers, on
//! any backend: an [`Observer`] of [`super::bench::run_observed_worker`].
//!
//! One [`LoggedOp`] per accessed word. A write also logs the value it replaced (read under the
//! exclusive latch), which is how the checkers (`dmsim_sim::check::merge`) rebuild each key's write order where
//! no simulator can watch the commits (on hardware). Keys are `gcl_index · words_per_gcl + word`.

use std::sync::Arc;

use super::bench::run_observed_worker;
use super::Node;
use crate::common::bench::Logger;
use crate::harness::OpLog;
use crate::nic::Nic;
use crate::workload::micro::MicroStream;

/// One front-end thread whose operations land in `log` as `client`.
pub async fn recorded_worker<N: Nic>(
    node: Arc<Node<N>>,
    thread: u32,
    client: u32,
    stream: MicroStream,
    log: OpLog,
    drain_at_end: bool,
) {
    let logger = Logger::new(log, client, node.config.gcl_size_bytes as u64);
    run_observed_worker(node, thread, stream, drain_at_end, logger).await
}
