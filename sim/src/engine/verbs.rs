//! Verbs and messages through the modelled fabric: post → arrive → exec → done.
//!
//! Each verb of a doorbell batch is its own set of events, so another node's verb can execute
//! between two verbs of one batch at the target, as on hardware; the per-QP clamps keep one
//! QP's verbs in post order (arrival, execution and completion are each monotonic per QP).
//!
//! Device memory (`Space::Device` addresses) is a second region per node: verbs on it save
//! `device_saving_oneway_ps` each way and its atomics queue on their own per-word unit (the
//! keys carry the device bit) with `device_atomic_service_ps`. Masked atomics run on the same
//! per-word unit as CAS/FAA with `masked_atomic_service_ps`. An unsignaled post is an op nobody
//! waits for: same events, freed at its last completion, bounded per QP by `unsignaled_max`.
//!
//! Simplification, documented: a READ's data is copied into the initiator's region when it
//! executes at the target, not when the response lands. Protocols must (and on hardware do)
//! wait for completion before reading the buffer, so the difference is invisible to a correct
//! protocol; a buggy one that peeks early sees the data sooner than on hardware.

use std::fmt::Write as _;

use dmsim_protocols::memory::Region;
use dmsim_protocols::nic::{
    masked, validate_batch_in, BatchResult, Message, NicError, NicResult, NodeId, RemoteAddr, Space, Verb,
    VerbClass, MAX_BATCH,
};

use super::executor::wake_task;
use super::queue::EventKind;
use super::world::{TearMode, World};
use crate::fabric::{class_index, ps_to_ns_ceil, reserve, QpState, Wait};

/// Bytes per chunk when large verbs are torn (a cache line).
pub const TEAR_CHUNK_BYTES: u32 = 64;

/// A posted batch (or one SEND) in flight.
pub struct Op {
    /// The waiting task, or `u32::MAX` if its future was dropped.
    pub task: u32,
    pub source: NodeId,
    pub target: NodeId,
    pub channel: u16,
    pub qp: u32,
    pub verbs: [Verb; MAX_BATCH],
    pub len: u8,
    pub send: Option<(u16, Vec<u8>)>,
    pub results: [u64; MAX_BATCH],
    pub arrive_ps: [u64; MAX_BATCH],
    pub exec_ps: [u64; MAX_BATCH],
    /// Pieces of each torn verb that have landed so far.
    pub pieces_landed: [u16; MAX_BATCH],
    pub done_count: u8,
    pub finished: bool,
    /// Posted with `post_unsignaled`: nobody waits, and it counts in the QP's unsignaled bound.
    pub unsignaled: bool,
    /// When it was posted, and the first of its verbs' flow ids (Perfetto traces only).
    pub posted_ns: u64,
    pub flow: u64,
    /// A verb reached a crashed memory node: the batch fails (`engine/fault.rs`).
    pub failed: bool,
}

const NO_VERB: Verb =
    Verb::WriteWord { remote: dmsim_protocols::nic::RemoteAddr::new(NodeId(0), 0), value: 0 };

impl Op {
    fn class(&self, i: usize) -> VerbClass {
        if self.send.is_some() {
            VerbClass::Send
        } else {
            self.verbs[i].class()
        }
    }
    /// Bytes carried by the request and by the response of verb `i`.
    fn wire_bytes(&self, i: usize) -> (u64, u64) {
        if let Some((_, bytes)) = &self.send {
            return (bytes.len() as u64, 0);
        }
        match self.verbs[i] {
            Verb::Read { len_bytes, .. } => (0, len_bytes as u64),
            Verb::Write { len_bytes, .. } => (len_bytes as u64, 0),
            Verb::WriteWord { .. } => (8, 0),
            Verb::Cas { .. } => (16, 8),
            Verb::Faa { .. } => (8, 8),
            // Compare, swap and both masks / add and boundary mask.
            Verb::MaskedCas { .. } => (32, 8),
            Verb::MaskedFaa { .. } => (16, 8),
        }
    }
}

impl World {
    fn qp_index(&mut self, source: NodeId, target: NodeId, channel: u16) -> u32 {
        let next = self.qp_states.len() as u32;
        let index = *self.qps.entry((source.0, target.0, channel)).or_insert(next);
        if index == next {
            self.qp_states.push(QpState::default());
        }
        index
    }

    fn alloc_op(&mut self, op: Op) -> u32 {
        match self.free_ops.pop() {
            Some(i) => {
                self.ops[i as usize] = op;
                i
            }
            None => {
                self.ops.push(op);
                self.ops.len() as u32 - 1
            }
        }
    }

    /// Post a doorbell batch for `task`; returns the operation id to poll.
    pub fn post_batch(&mut self, source: NodeId, channel: u16, verbs: &[Verb], task: u32) -> NicResult<u32> {
        let target = validate_batch_in(&self.cluster, &self.device_bytes, source, verbs)?;
        let mut array = [NO_VERB; MAX_BATCH];
        array[..verbs.len()].copy_from_slice(verbs);
        self.post(source, target, channel, array, verbs.len(), None, task)
    }

    /// Post a batch nobody waits for (`Nic::post_unsignaled`).
    pub fn post_unsignaled(&mut self, source: NodeId, channel: u16, verbs: &[Verb]) -> NicResult<()> {
        let target = validate_batch_in(&self.cluster, &self.device_bytes, source, verbs)?;
        let qp = self.qp_index(source, target, channel);
        let max = self.params.unsignaled_max;
        if self.qp_states[qp as usize].unsignaled + verbs.len() as u32 > max {
            return Err(NicError::QpOverflow {
                qp: format!("{}>{}.{} (unsignaled)", source.0, target.0, channel),
                cap: max,
            });
        }
        let mut array = [NO_VERB; MAX_BATCH];
        array[..verbs.len()].copy_from_slice(verbs);
        let id = self.post(source, target, channel, array, verbs.len(), None, u32::MAX)?;
        self.ops[id as usize].unsignaled = true;
        self.qp_states[qp as usize].unsignaled += verbs.len() as u32;
        Ok(())
    }

    /// One-way propagation of verb `i` of `op` (shorter on device memory).
    fn oneway_ps(&self, op: &Op, i: usize, class: usize) -> u64 {
        let base = self.params.oneway_ps[class];
        if op.send.is_none() && op.verbs[i].remote().space() == Space::Device {
            base.saturating_sub(self.params.device_saving_oneway_ps)
        } else {
            base
        }
    }

    /// Post one SEND of `bytes` to `(target, port)`.
    pub fn post_send(
        &mut self,
        source: NodeId,
        channel: u16,
        target: NodeId,
        port: u16,
        bytes: Vec<u8>,
        task: u32,
    ) -> NicResult<u32> {
        if target.index() >= self.cluster.node_count() {
            return Err(NicError::PeerGone { node: target });
        }
        self.post(source, target, channel, [NO_VERB; MAX_BATCH], 1, Some((port, bytes)), task)
    }

    #[allow(clippy::too_many_arguments)]
    fn post(
        &mut self,
        source: NodeId,
        target: NodeId,
        channel: u16,
        verbs: [Verb; MAX_BATCH],
        len: usize,
        send: Option<(u16, Vec<u8>)>,
        task: u32,
    ) -> NicResult<u32> {
        let qp = self.qp_index(source, target, channel);
        let cap = self.params.qp_outstanding_max;
        if self.qp_states[qp as usize].outstanding + len as u32 > cap {
            return Err(NicError::QpOverflow { qp: format!("{}>{}.{}", source.0, target.0, channel), cap });
        }
        let op = Op {
            task,
            source,
            target,
            channel,
            qp,
            verbs,
            len: len as u8,
            send,
            results: [0; MAX_BATCH],
            arrive_ps: [0; MAX_BATCH],
            exec_ps: [0; MAX_BATCH],
            pieces_landed: [0; MAX_BATCH],
            done_count: 0,
            finished: false,
            unsignaled: false,
            posted_ns: self.now_ns,
            flow: self.trace.flow_ids(len as u64),
            failed: false,
        };
        let id = self.alloc_op(op);
        self.verbs.batches += 1;
        let now_ps = self.now_ns * crate::fabric::PS_PER_NS;
        for i in 0..len {
            let op = &self.ops[id as usize];
            let class = class_index(op.class(i));
            let (request_bytes, _) = op.wire_bytes(i);
            let node = &mut self.nodes[source.index()];
            // Doorbell batch: the NIC issues the chained requests back to back.
            let issue = reserve(&mut node.nic_issue_free_ps, now_ps, self.params.cost_ps[class]);
            node.waited(Wait::Issue, now_ps, issue);
            let wire = self.params.wire_ps(request_bytes);
            let leave = reserve(&mut node.egress_free_ps, issue, wire);
            node.waited(Wait::RequestEgress, issue, leave);
            let oneway = self.oneway_ps(&self.ops[id as usize], i, class);
            let mut jitter = self.jitter_ps();
            if self.ops[id as usize].send.is_some() {
                // Injected SEND delay or drop+retransmit (engine/fault.rs); 0 without a plan.
                jitter += self.send_fault_ps(source, target);
            } else {
                // Injected one-sided verb delay (engine/fault.rs); 0 without a plan.
                jitter += self.verb_fault_ps(source, target);
            }
            let qp_state = &mut self.qp_states[qp as usize];
            // Per-QP FIFO on the wire: a later request never overtakes an earlier one.
            let arrive = (leave + oneway + jitter).max(qp_state.last_arrive_ps);
            qp_state.last_arrive_ps = arrive;
            qp_state.outstanding += 1;
            qp_state.verbs_posted += 1;
            self.ops[id as usize].arrive_ps[i] = arrive;
            self.queue.push(ps_to_ns_ceil(arrive), EventKind::Arrive { op: id, verb: i as u8 });
        }
        Ok(id)
    }

    /// The request has reached the target: ingress serialization, NIC processing, atomic unit.
    pub fn arrive(&mut self, id: u32, i: usize) {
        let op = &self.ops[id as usize];
        let (target, qp, class) = (op.target, op.qp, op.class(i));
        let (request_bytes, _) = op.wire_bytes(i);
        let arrive = op.arrive_ps[i];
        let node = &mut self.nodes[target.index()];
        let wire = self.params.wire_ps(request_bytes);
        let start = reserve(&mut node.ingress_free_ps, arrive, wire);
        let received = node.waited(Wait::RequestIngress, arrive, start) + wire;
        let mut exec =
            reserve(&mut node.nic_process_free_ps, received, self.params.cost_ps[class_index(class)]);
        node.waited(Wait::Process, received, exec);
        if class == VerbClass::Atomic {
            let verb = op.verbs[i];
            let service = if verb.remote().space() == Space::Device {
                self.params.device_atomic_service_ps
            } else if verb.is_masked() {
                self.params.masked_atomic_service_ps
            } else {
                self.params.atomic_service_ps
            };
            // Device words carry the device bit in the key: their own unit.
            let free = self.atomic_free_ps.entry((target.0, verb.remote().offset_bytes)).or_insert(0);
            let start = reserve(free, exec, service);
            exec = self.nodes[target.index()].waited(Wait::AtomicUnit, exec, start);
        }
        let span = self.tear_span_ps(id, i);
        let qp_state = &mut self.qp_states[qp as usize];
        exec = exec.max(qp_state.last_exec_ps);
        // A torn verb occupies the QP until its last chunk has taken effect.
        qp_state.last_exec_ps = exec + span;
        self.ops[id as usize].exec_ps[i] = exec;
        self.queue.push(ps_to_ns_ceil(exec), EventKind::Exec { op: id, verb: i as u8, chunk: 0 });
    }

    /// How many pieces verb `i` executes in (1 unless tearing is on and it is long).
    fn chunks(&self, id: u32, i: usize) -> u16 {
        if self.tear == TearMode::Off {
            return 1;
        }
        match self.ops[id as usize].verbs[i] {
            Verb::Read { len_bytes, .. } | Verb::Write { len_bytes, .. }
                if self.ops[id as usize].send.is_none() =>
            {
                len_bytes.div_ceil(TEAR_CHUNK_BYTES).max(1) as u16
            }
            _ => 1,
        }
    }

    /// How long the chunks of a torn verb take to land: its payload's wire time (0 if untorn).
    fn tear_span_ps(&self, id: u32, i: usize) -> u64 {
        if self.chunks(id, i) <= 1 {
            return 0;
        }
        self.params.wire_ps(self.ops[id as usize].verbs[i].payload_bytes() as u64)
    }

    /// The verb takes effect at the target's memory; then its response leaves.
    ///
    /// `chunk` 0 is the verb reaching memory. A torn verb then lands as `chunks` separate
    /// 64-byte pieces (`chunk` = piece + 1). Any-order tearing draws each piece's time from the
    /// choice source within the verb's transfer time: DMA gives no order among the cache lines
    /// of one verb, so a READ overlapping a WRITE may see any mix of old and new lines, and the
    /// fuzzer can steer it. Ascending tearing lands piece k at `(k+1)/chunks` of the transfer
    /// time (no choice): lower addresses first, as Sherman observed on its RNICs.
    pub fn exec(&mut self, id: u32, i: usize, chunk: u16) {
        if chunk == 0 && !self.faults.memory_crashes.is_empty() {
            let op = &self.ops[id as usize];
            if self.faults.memory_down(op.target, op.posted_ns, self.now_ns) {
                self.fail_verb(id, i);
                return;
            }
        }
        let chunks = self.chunks(id, i);
        let op = &self.ops[id as usize];
        let (source, target) = (op.source, op.target);
        if let Some((port, bytes)) = &op.send {
            let message = Message { from: source, port: *port, bytes: bytes.clone() };
            let flow = op.flow + i as u64;
            self.deliver(target, message);
            self.trace.flow_end(self.now_ns, target.0, "RECV", flow);
        } else if chunks > 1 && chunk == 0 {
            self.trace_verb(id, i, 0);
            let span_ns = ps_to_ns_ceil(self.tear_span_ps(id, i));
            let ascending = self.tear == TearMode::Ascending;
            for piece in 0..chunks {
                let delay = if ascending {
                    span_ns * (piece as u64 + 1) / chunks as u64
                } else {
                    self.choice.choose(crate::choice::ChoiceKind::Jitter, span_ns + 1)
                };
                self.queue
                    .push(self.now_ns + delay, EventKind::Exec { op: id, verb: i as u8, chunk: piece + 1 });
            }
            return;
        } else {
            let verb = op.verbs[i];
            let result = self.apply(source, verb, chunk.saturating_sub(1), chunks);
            self.ops[id as usize].results[i] = result;
            if chunks == 1 {
                self.trace_verb(id, i, result);
            } else {
                let op = &mut self.ops[id as usize];
                op.pieces_landed[i] += 1;
                if op.pieces_landed[i] < chunks {
                    return;
                }
            }
        }
        let op = &self.ops[id as usize];
        let class = class_index(op.class(i));
        let (_, response_bytes) = op.wire_bytes(i);
        let (qp, exec_ps) = (op.qp, op.exec_ps[i]);
        let wire = self.params.wire_ps(response_bytes);
        let now_ps = (self.now_ns * crate::fabric::PS_PER_NS).max(exec_ps);
        let leave = reserve(&mut self.nodes[target.index()].egress_free_ps, now_ps, wire);
        self.nodes[target.index()].waited(Wait::ResponseEgress, now_ps, leave);
        let oneway = self.oneway_ps(&self.ops[id as usize], i, class);
        let jitter = self.jitter_ps();
        let reach = leave + oneway + jitter;
        let start = reserve(&mut self.nodes[source.index()].ingress_free_ps, reach, wire);
        let received = self.nodes[source.index()].waited(Wait::ResponseIngress, reach, start) + wire;
        // Injected one-sided response delay (engine/fault.rs; 0 without a plan), added after
        // the requester's ingress: the ingress is one reservation cursor taken in event order,
        // so a late `reach` would block every response reserved after it, even earlier ones.
        let late =
            if self.ops[id as usize].send.is_none() { self.response_fault_ps(source, target) } else { 0 };
        let qp_state = &mut self.qp_states[qp as usize];
        let done = (received + late).max(qp_state.last_done_ps);
        qp_state.last_done_ps = done;
        self.queue.push(ps_to_ns_ceil(done), EventKind::Done { op: id, verb: i as u8 });
    }

    /// Verb `i` of `id` reached a crashed memory node: it takes no effect, and its completion
    /// (an error for the whole batch) comes after the requester's timeout.
    fn fail_verb(&mut self, id: u32, i: usize) {
        let op = &mut self.ops[id as usize];
        op.failed = true;
        let (qp, target, source) = (op.qp, op.target, op.source);
        let now = self.now_ns;
        self.trace.hash_event(now, 10, (id as u64) << 8 | i as u64);
        self.trace.line(now, target.0, "FAULT", |l| {
            let _ = write!(l, "verb from n{} lost at crashed n{}", source.0, target.0);
        });
        let timeout_ps = self.faults.timeout_ns() * crate::fabric::PS_PER_NS;
        let qp_state = &mut self.qp_states[qp as usize];
        let done = (now * crate::fabric::PS_PER_NS + timeout_ps).max(qp_state.last_done_ps);
        qp_state.last_done_ps = done;
        self.queue.push(ps_to_ns_ceil(done), EventKind::Done { op: id, verb: i as u8 });
    }

    /// The region and offset an address names (host region or device memory).
    fn memory(&self, addr: RemoteAddr) -> (&Region, u64) {
        match addr.space() {
            Space::Host => (&self.regions[addr.node.index()], addr.offset_bytes),
            Space::Device => (&self.device_regions[addr.node.index()], addr.offset_in_space()),
        }
    }

    /// A verb changed `len` bytes at `addr`: wake `wait_word` waiters (host memory only).
    fn changed(&mut self, addr: RemoteAddr, len: u64) {
        if addr.space() == Space::Host {
            self.watch_notify(addr.node, addr.offset_bytes, len);
        }
    }

    /// Apply one verb (or one chunk of it) to memory; returns the verb's result word.
    fn apply(&mut self, source: NodeId, verb: Verb, piece: u16, chunks: u16) -> u64 {
        match verb {
            Verb::Read { remote, local_bytes, len_bytes }
            | Verb::Write { remote, local_bytes, len_bytes } => {
                let (offset, len) = if chunks > 1 {
                    let start = piece as u64 * TEAR_CHUNK_BYTES as u64;
                    (start, (len_bytes as u64 - start).min(TEAR_CHUNK_BYTES as u64))
                } else {
                    (0, len_bytes as u64)
                };
                let s = &self.regions[source.index()];
                let (t, t_offset) = self.memory(remote);
                if matches!(verb, Verb::Read { .. }) {
                    s.copy_from(local_bytes + offset, t, t_offset + offset, len);
                    self.verbs.read += (offset == 0) as u64;
                    self.changed(RemoteAddr::new(source, local_bytes + offset), len);
                } else {
                    t.copy_from(t_offset + offset, s, local_bytes + offset, len);
                    self.verbs.write += (offset == 0) as u64;
                    self.changed(remote.add(offset), len);
                }
                self.verbs.bytes += len;
                0
            }
            Verb::WriteWord { remote, value } => {
                let (t, offset) = self.memory(remote);
                t.store(offset, value);
                self.verbs.write += 1;
                self.verbs.bytes += 8;
                self.changed(remote, 8);
                0
            }
            Verb::Cas { .. } | Verb::Faa { .. } | Verb::MaskedCas { .. } | Verb::MaskedFaa { .. } => {
                self.verbs.atomic += 1;
                let remote = verb.remote();
                let (t, offset) = self.memory(remote);
                let old = match verb {
                    Verb::Cas { expect, swap, .. } => t.cas_local(offset, expect, swap),
                    Verb::Faa { add, .. } => t.faa_local(offset, add),
                    _ => {
                        // The run is one thread: load, compute, store is atomic here.
                        let old = t.load(offset);
                        t.store(offset, masked::apply(&verb, old).expect("an atomic"));
                        old
                    }
                };
                self.changed(remote, 8);
                old
            }
        }
    }

    fn trace_verb(&mut self, id: u32, i: usize, result: u64) {
        if !self.trace.enabled() {
            return;
        }
        let op = &self.ops[id as usize];
        let (verb, qp) = (op.verbs[i], (op.source.0, op.target.0, op.channel));
        let now = self.now_ns;
        self.trace.line(now, verb.remote().node.0, verb.name(), |l| {
            let _ = match verb {
                Verb::Read { remote, len_bytes, .. } | Verb::Write { remote, len_bytes, .. } => {
                    write!(l, "{remote} len={len_bytes}")
                }
                Verb::WriteWord { remote, value } => write!(l, "{remote} val={value:#x}"),
                Verb::Cas { remote, expect, swap } => {
                    write!(l, "{remote} exp={expect:#x} swp={swap:#x} old={result:#x}")
                }
                Verb::Faa { remote, add } => write!(l, "{remote} add={add:#x} old={result:#x}"),
                Verb::MaskedCas { remote, expect, compare_mask, swap, swap_mask } => write!(
                    l,
                    "{remote} exp={expect:#x}/{compare_mask:#x} swp={swap:#x}/{swap_mask:#x} old={result:#x}"
                ),
                Verb::MaskedFaa { remote, add, boundary_mask } => {
                    write!(l, "{remote} add={add:#x} bnd={boundary_mask:#x} old={result:#x}")
                }
            };
            let _ = write!(l, " qp={}>{}.{}", qp.0, qp.1, qp.2);
        });
        if self.trace.perfetto() {
            let remote = verb.remote();
            self.trace.flow_end(now, remote.node.0, verb.name(), op.flow + i as u64);
            if matches!(verb.class(), VerbClass::Atomic) {
                let (region, offset) = self.memory(remote);
                let value = region.load(offset);
                self.trace.counter(now, remote.node.0, &remote.to_string(), value);
            }
        }
    }

    /// The finished batch `id` as a slice on its task's track (Perfetto traces only).
    fn trace_batch(&mut self, id: u32) {
        if !self.trace.perfetto() {
            return;
        }
        let op = &self.ops[id as usize];
        let verbs = &op.verbs[..op.len as usize];
        let name = if op.send.is_some() {
            "SEND".to_string()
        } else {
            verbs.iter().map(|v| v.name()).collect::<Vec<_>>().join("+")
        };
        let detail =
            verbs.iter().map(|v| format!("{} {}", v.name(), v.remote())).collect::<Vec<_>>().join("; ");
        let (source, task, posted, flows) =
            (op.source.0, op.task, op.posted_ns, op.flow..op.flow + op.len as u64);
        let detail = format!("{detail} qp={}>{}.{}", op.source.0, op.target.0, op.channel);
        self.trace.batch_slice(source, task, &name, posted..self.now_ns, &detail, flows);
    }

    /// The response reached the initiator; the batch completes with its last verb.
    pub fn done(&mut self, id: u32, _i: usize) {
        let op = &mut self.ops[id as usize];
        op.done_count += 1;
        let qp_state = &mut self.qp_states[op.qp as usize];
        qp_state.outstanding -= 1;
        if op.unsignaled {
            qp_state.unsignaled -= 1;
        }
        if op.done_count < op.len {
            return;
        }
        op.finished = true;
        if op.send.is_some() {
            self.verbs.send += 1;
        }
        self.trace_batch(id);
        let op = &self.ops[id as usize];
        if op.task == u32::MAX {
            self.free_ops.push(id); // nobody waits: the future was dropped
        } else {
            wake_task(op.task);
        }
    }

    /// The result of a finished operation (freeing it), or `None` while in flight. A batch
    /// with a verb lost at a crashed memory node fails as a timeout.
    pub fn take_result(&mut self, id: u32) -> Option<NicResult<BatchResult>> {
        let op = &self.ops[id as usize];
        if !op.finished {
            return None;
        }
        let result = if op.failed {
            let what = format!("verb to crashed node {}", op.target);
            Err(NicError::Timeout { what, after: dmsim_protocols::nic::Nanos(self.faults.timeout_ns()) })
        } else {
            Ok(BatchResult::new(&op.results[..op.len as usize]))
        };
        self.free_ops.push(id);
        Some(result)
    }

    /// The waiting future was dropped: free the op when it completes.
    pub fn abandon(&mut self, id: u32) {
        let op = &mut self.ops[id as usize];
        if op.finished {
            self.free_ops.push(id);
        } else {
            op.task = u32::MAX;
        }
    }

    fn deliver(&mut self, node: NodeId, message: Message) {
        let now = self.now_ns;
        self.trace.line(now, node.0, "RECV", |l| {
            let _ = write!(l, "port={} from={} len={}", message.port, message.from, message.bytes.len());
        });
        let inbox = self.inboxes.entry((node.0, message.port)).or_default();
        inbox.messages.push_back(message);
        if let Some(task) = inbox.waiters.pop_front() {
            wake_task(task);
        }
    }

    /// Take the next message on `(node, port)`, or register `task` as waiting.
    pub fn recv(&mut self, node: NodeId, port: u16, task: u32) -> Option<Message> {
        let inbox = self.inboxes.entry((node.0, port)).or_default();
        if let Some(message) = inbox.messages.pop_front() {
            return Some(message);
        }
        if !inbox.waiters.contains(&task) {
            inbox.waiters.push_back(task);
        }
        None
    }

    /// A receiving future was dropped: stop waiting and pass a pending wake-up on.
    pub fn cancel_recv(&mut self, node: NodeId, port: u16, task: u32) {
        if let Some(inbox) = self.inboxes.get_mut(&(node.0, port)) {
            inbox.waiters.retain(|t| *t != task);
            if !inbox.messages.is_empty() {
                if let Some(next) = inbox.waiters.front() {
                    wake_task(*next);
                }
            }
        }
    }
}
