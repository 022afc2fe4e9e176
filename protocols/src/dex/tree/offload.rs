//! The compute side of an offload (§6): the cost-model decision taken during the walk, and the
//! RPC itself with its before/after steps — the I/O flag on the subtree root and the pinned
//! parent (both set by the walk), the post-RPC invalidation of the changed leaf's cached copy.

use super::*;
use crate::common::error::ProtocolError;
use crate::dex::config::OffloadPolicy;
use crate::dex::offload::{
    decode_reply, encode_request, Reply, OFFLOAD_PORT, REPLY_BYTES, REPLY_PORT_BASE, REQUEST_BYTES,
};
use crate::nic::NicError;

impl<N: Nic> Client<N> {
    /// Whether to offload a miss on a node at `level`, and whether to sample the latency of
    /// what is done. `filled`: the cache has no never-used frame left.
    pub(super) fn decide_offload(&mut self, level: u8, filled: bool) -> (bool, bool) {
        let o = self.shared.config.offload.clone();
        match o.policy {
            OffloadPolicy::Never => (false, false),
            OffloadPolicy::Always => (true, false),
            OffloadPolicy::Cost => {
                // [ART] `caching_or_push`: fetch until the fetch window is full, then offload
                // until the RPC window is. [ART] `cold_to_hot_with_rpc` offloads only once the
                // cache has filled (`state == 1 && flag`); before that the decision is a fetch,
                // timed if sampled, so the RPC window fills only afterwards. (Offload-only,
                // [ART] the `rpc_rate_` path, has no such gate.)
                let w = o.window as usize;
                if self.collector.fetch.len() < w {
                    return (false, true);
                }
                if self.collector.rpc.len() < w {
                    return (filled, true);
                }
                let mut sample = unit_f64(self.rng.next_u64()) < o.sample_rate;
                let l_s = self.shared.config.cpu.node_ns as f64;
                let fetch = (level as f64 + 1.0) * (self.collector.fetch.mean() + l_s) * o.coefficient;
                let mut offload = self.collector.rpc.mean() < fetch;
                if unit_f64(self.rng.next_u64()) < o.exploration {
                    // [ART] `caching_or_push`: the contrary action is always timed, which
                    // is how the estimate of the action not taken gets refreshed.
                    offload = !offload;
                    sample = true;
                }
                (offload && filled, sample)
            }
        }
    }

    /// Run the rest of `op` on the memory server holding the subtree under `m.child`. `None`:
    /// fall back to the normal path (a split is needed, or the memory side met a node not
    /// covering the key, which is recorded for the invariant).
    pub(super) async fn offload(&mut self, m: Miss, op: OpCode, key: u64) -> ProtocolResult<Option<u64>> {
        self.settle_cpu().await;
        let start = self.nic.now().0;
        let port = REPLY_PORT_BASE + self.thread as u16;
        self.cur.two_sided += 1;
        self.cur.offloads_level1 += u64::from(m.child_level == 1);
        self.cur.bytes += (REQUEST_BYTES + REPLY_BYTES) as u64;
        let to = m.child.node();
        let reply = match self
            .nic
            .try_send(to, OFFLOAD_PORT, encode_request(port, op, key, m.child), "offload")
            .await
        {
            Ok(()) => self.nic.try_recv(port, "offload reply").await,
            Err(e) => Err(e),
        };
        let took = self.nic.now().0 - start;
        let mut c = self.shared.cache();
        let p = &mut c.frames[m.parent];
        p.pins = p.pins.saturating_sub(1);
        Self::clear_io(&mut c, m.child);
        let reply = reply?;
        let Some(reply) = decode_reply(&reply.bytes) else {
            let bad = NicError::Unsupported { feature: "DEX offload reply", detail: "malformed".into() };
            return Err(ProtocolError::message(
                self.nic.node(),
                self.nic.now(),
                "RECV",
                to,
                port,
                "offload reply",
                bad,
            ));
        };
        if m.sample {
            self.collector.rpc.push(took, self.config().offload.window as usize);
        }
        match reply {
            Reply::Done { value, leaf } => {
                if let Some(f) = c.invalidate(leaf) {
                    c.pool.push(f);
                }
                Ok(Some(value))
            }
            Reply::Smo => Ok(None),
            Reply::Torn(at) => {
                let mut torn = self.shared.torn.lock().unwrap_or_else(|e| e.into_inner());
                torn.get_or_insert_with(|| {
                    format!(
                        "an offload of key {key} under {} met node {} not covering it",
                        m.child,
                        Gaddr(at)
                    )
                });
                Ok(None)
            }
        }
    }
}
