//! Sequential consistency across keys, given the recorded write order.
//!
//! A history is sequentially consistent if one interleaving of all clients' operations, each
//! client's in its own order, explains every returned value. With the write order of each key
//! known (the simulator records it), this is a graph question (Shasha & Snir; the "axiomatic"
//! memory-model style): nodes are the operations that took effect, plus one "initial write" per
//! key, and edges are
//!
//! * `po` program order: consecutive operations of one client;
//! * `wo` write order: consecutive commits of one key (initial value first);
//! * `rf` reads-from: the commit whose value a read (or failed CAS) returned → that read;
//! * `fr` from-read: a read → the commit right after the one it read from, which overwrote it.
//!
//! The history is sequentially consistent with that write order iff the graph is acyclic. The check
//! is Kahn's algorithm, O(V + E), iterative. On a cycle, the reported one is a shortest cycle
//! through some node left over by Kahn — usually the litmus-sized core of the problem.
//!
//! Real time plays no part: SC allows a read to return a value overwritten long ago if no client's
//! own order forbids it. Pair with [`super::linearizability`].

use std::collections::{BTreeSet, VecDeque};
use std::fmt;

use super::history::{ClientId, History, Key, OpId, Record};
use super::order::{self, Resolution};
use super::{Report, Unknown, Violation};

const CHECKER: &str = "sequential consistency";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EdgeKind {
    ProgramOrder,
    WriteOrder,
    ReadsFrom,
    FromRead,
}

impl fmt::Display for EdgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EdgeKind::ProgramOrder => "po",
            EdgeKind::WriteOrder => "wo",
            EdgeKind::ReadsFrom => "rf",
            EdgeKind::FromRead => "fr",
        })
    }
}

/// Nodes `0..records.len()` are operations (by `OpId`); the rest are initial writes, one per key.
struct Graph {
    included: Vec<bool>,
    initial_keys: Vec<Key>,
    edges: Vec<(usize, usize, EdgeKind)>,
    record_count: usize,
}

impl Graph {
    fn add_initial(&mut self, key: Key) -> usize {
        self.initial_keys.push(key);
        self.included.push(true);
        self.record_count + self.initial_keys.len() - 1
    }

    fn edge(&mut self, from: usize, to: usize, kind: EdgeKind) {
        assert!(self.included[from] && self.included[to], "edge between excluded nodes");
        assert_ne!(from, to, "self edge {kind}");
        self.edges.push((from, to, kind));
    }

    fn name(&self, history: &History, node: usize) -> String {
        if node < self.record_count {
            let record = history.record(OpId(node as u32));
            format!("{} ({} {})", record.id, record.client, op_text(record))
        } else {
            format!("initial value of {}", self.initial_keys[node - self.record_count])
        }
    }
}

fn op_text(record: &Record) -> String {
    // The record's display minus its id, client and times, e.g. "read(k1) → 0".
    let full = record.to_string();
    let without_prefix = full.splitn(3, ' ').nth(2).unwrap_or(&full).to_string();
    match without_prefix.rfind(" [") {
        Some(cut) => without_prefix[..cut].to_string(),
        None => without_prefix,
    }
}

/// Checks sequential consistency of the whole history against its recorded write order.
///
/// Panics if the history has no write order: without it the problem is NP-complete in general
/// (Gibbons & Korach) and this checker does not search.
pub fn check_sequential_consistency(history: &History) -> Result<Report, Violation> {
    assert!(history.has_write_order(), "sequential consistency check needs a history with a write order");
    let record_count = history.records().len();
    let mut graph = Graph {
        included: vec![false; record_count],
        initial_keys: Vec::new(),
        edges: Vec::new(),
        record_count,
    };
    let mut report = Report::default();

    for (key, ops) in history.by_key() {
        let key_order = match order::resolve(history, key, &ops, CHECKER)? {
            Resolution::Resolved(key_order) => key_order,
            Resolution::Ambiguous(reason) => {
                // Without knowing who wrote what, add no edges for this key; its completed
                // operations still order their clients' other operations (sound, not complete).
                for id in &ops {
                    graph.included[id.index()] = !history.record(*id).is_pending();
                }
                report.unknown.push(Unknown { key, reason });
                continue;
            }
        };
        report.keys_by_write_order += 1;

        let mut nodes = vec![graph.add_initial(key)];
        for writer in key_order.writers.iter().skip(1) {
            let writer = writer.expect("positions after 0 have writers").index();
            graph.included[writer] = true;
            nodes.push(writer);
        }
        for pair in nodes.windows(2) {
            graph.edge(pair[0], pair[1], EdgeKind::WriteOrder);
        }
        for id in &ops {
            let record = history.record(*id);
            if key_order.position_of_writer(*id).is_some() {
                continue;
            }
            let Some(value) = record.returned() else { continue };
            let Some(position) = key_order.position_of_value(value) else {
                return Err(Violation {
                    checker: CHECKER,
                    keys: vec![key],
                    ops: vec![*record],
                    at: record.completion.map(|c| c.at),
                    explanation: format!(
                        "{id} returned {value}, a value {key} never held in the recorded write order \
                         (initial value {}).",
                        history.initial_value(key)
                    ),
                });
            };
            graph.included[id.index()] = true;
            graph.edge(nodes[position], id.index(), EdgeKind::ReadsFrom);
            if let Some(next) = nodes.get(position + 1) {
                graph.edge(id.index(), *next, EdgeKind::FromRead);
            }
        }
    }

    // Program order. A client's records are in invocation order because it is sequential.
    let mut last_by_client: std::collections::BTreeMap<ClientId, usize> = Default::default();
    for record in history.records() {
        if !graph.included[record.id.index()] {
            continue;
        }
        if let Some(previous) = last_by_client.insert(record.client, record.id.index()) {
            graph.edge(previous, record.id.index(), EdgeKind::ProgramOrder);
        }
    }

    match find_cycle(&graph) {
        None => Ok(report),
        Some(cycle) => Err(cycle_violation(history, &graph, &cycle)),
    }
}

/// Kahn's algorithm; on failure, a shortest cycle through one of the leftover nodes, as
/// `(from, to, kind)` edges in order.
fn find_cycle(graph: &Graph) -> Option<Vec<(usize, usize, EdgeKind)>> {
    let node_count = graph.included.len();
    let mut successors: Vec<Vec<(usize, EdgeKind)>> = vec![Vec::new(); node_count];
    let mut predecessors: Vec<Vec<usize>> = vec![Vec::new(); node_count];
    let mut in_degree = vec![0usize; node_count];
    for (from, to, kind) in &graph.edges {
        successors[*from].push((*to, *kind));
        predecessors[*to].push(*from);
        in_degree[*to] += 1;
    }
    let mut ready: Vec<usize> = (0..node_count).filter(|n| graph.included[*n] && in_degree[*n] == 0).collect();
    let mut removed = vec![false; node_count];
    while let Some(node) = ready.pop() {
        removed[node] = true;
        for (next, _) in &successors[node] {
            in_degree[*next] -= 1;
            if in_degree[*next] == 0 {
                ready.push(*next);
            }
        }
    }
    let leftover = (0..node_count).find(|n| graph.included[*n] && !removed[*n])?;

    // Every leftover node has a leftover predecessor, so walking backwards must repeat a node,
    // and the repeated node lies on a cycle.
    let mut seen = BTreeSet::new();
    let mut node = leftover;
    while seen.insert(node) {
        node = *predecessors[node].iter().find(|p| !removed[**p]).expect("leftover nodes have leftover predecessors");
    }
    let anchor = node;

    // Breadth-first from the anchor back to itself over leftover nodes: a shortest cycle.
    let mut parent: Vec<Option<(usize, EdgeKind)>> = vec![None; node_count];
    let mut queue = VecDeque::from([anchor]);
    let mut closing = None;
    'search: while let Some(node) = queue.pop_front() {
        for (next, kind) in &successors[node] {
            if removed[*next] {
                continue;
            }
            if *next == anchor {
                closing = Some((node, *kind));
                break 'search;
            }
            if parent[*next].is_none() {
                parent[*next] = Some((node, *kind));
                queue.push_back(*next);
            }
        }
    }
    let (last, last_kind) = closing.expect("the anchor lies on a cycle");
    let mut cycle = vec![(last, anchor, last_kind)];
    let mut node = last;
    while node != anchor {
        let (previous, kind) = parent[node].expect("nodes on the path have parents");
        cycle.push((previous, node, kind));
        node = previous;
    }
    cycle.reverse();
    Some(cycle)
}

fn cycle_violation(history: &History, graph: &Graph, cycle: &[(usize, usize, EdgeKind)]) -> Violation {
    let mut chain = graph.name(history, cycle[0].0);
    let mut keys = BTreeSet::new();
    let mut ops = Vec::new();
    for (from, to, kind) in cycle {
        chain.push_str(&format!(" -{kind}→ {}", graph.name(history, *to)));
        if *from < graph.record_count {
            let record = history.record(OpId(*from as u32));
            keys.insert(record.op.key());
            ops.push(*record);
        } else {
            keys.insert(graph.initial_keys[from - graph.record_count]);
        }
    }
    Violation {
        checker: CHECKER,
        keys: keys.into_iter().collect(),
        ops,
        at: None,
        explanation: format!(
            "No single interleaving of the clients' operations explains the values they returned: the \
             ordering constraints form a cycle {chain}. (po: one client's program order; wo: the \
             recorded write order of a key; rf: a read returned that write's value; fr: a read \
             returned a value that this write later overwrote.) Typical causes: a stale cached copy \
             read after the client's own later write elsewhere, or an invalidation that arrived \
             after a newer value was already visible."
        ),
    }
}
