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
    let mut ready: Vec<usize> =
        (0..node_count).filter(|n| graph.included[*n] && in_degree[*n] == 0).collect();
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
        node = *predecessors[node]
            .iter()
            .find(|p| !removed[**p])
            .expect("leftover nodes have leftover predecessors");
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

/// Program order is transitive, so a run of `po` edges in a cycle can be shown as one edge; the
/// cycle is rotated first so that no run wraps around its end.
fn compact(cycle: &[(usize, usize, EdgeKind)]) -> Vec<(usize, usize, EdgeKind)> {
    let after_other =
        cycle.iter().position(|(_, _, kind)| *kind != EdgeKind::ProgramOrder).map_or(0, |i| i + 1);
    let mut compacted: Vec<(usize, usize, EdgeKind)> = Vec::with_capacity(cycle.len());
    for offset in 0..cycle.len() {
        let (from, to, kind) = cycle[(after_other + offset) % cycle.len()];
        match compacted.last_mut() {
            Some(last) if last.2 == EdgeKind::ProgramOrder && kind == EdgeKind::ProgramOrder => last.1 = to,
            _ => compacted.push((from, to, kind)),
        }
    }
    compacted
}

/// Longest cycle spelled out in a violation; longer ones are cut in the middle.
const CYCLE_EDGES_SHOWN_MAX: usize = 24;

fn cycle_violation(history: &History, graph: &Graph, cycle: &[(usize, usize, EdgeKind)]) -> Violation {
    let cycle = compact(cycle);
    let mut chain = graph.name(history, cycle[0].0);
    let mut keys = BTreeSet::new();
    let mut ops = Vec::new();
    for (index, (from, to, kind)) in cycle.iter().enumerate() {
        let shown = index < CYCLE_EDGES_SHOWN_MAX / 2 || index >= cycle.len() - CYCLE_EDGES_SHOWN_MAX / 2;
        if shown {
            chain.push_str(&format!(" -{kind}→ {}", graph.name(history, *to)));
        } else if index == CYCLE_EDGES_SHOWN_MAX / 2 {
            chain.push_str(&format!(" … ({} edges) …", cycle.len() - CYCLE_EDGES_SHOWN_MAX));
        }
        if *from < graph.record_count {
            let record = history.record(OpId(*from as u32));
            keys.insert(record.op.key());
            if shown {
                ops.push(*record);
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::history::Op;
    use crate::check::linearizability::check_linearizability;
    use crate::check::testkit::Script;

    const X: u64 = 1;
    const Y: u64 = 2;

    #[test]
    fn store_buffering_is_not_sc() {
        // Goal: the store-buffer litmus (P1: W x=1; R y=0 ‖ P2: W y=1; R x=0) is rejected with
        // its four-edge cycle. Method: all four operations overlap as much as sequential clients
        // allow. Per-key linearizability rejects it too: with sequential clients, program order
        // is part of real time, so by locality per-key linearizability implies SC; the SC checker
        // earns its keep on protocols that promise only SC (see `stale_read_is_sc_but_not_linearizable`).
        let mut script = Script::with_write_order();
        script.write(1, X, 1, (0, 10));
        script.commit(X, 1, 9);
        script.write(2, Y, 1, (0, 10));
        script.commit(Y, 1, 9);
        script.read(1, Y, 0, (11, 20));
        script.read(2, X, 0, (11, 20));
        let violation = check_sequential_consistency(&script.history).unwrap_err();
        assert_eq!(violation.checker, "sequential consistency");
        assert_eq!(violation.keys, vec![Key(X), Key(Y)]);
        assert_eq!(violation.ops.len(), 4, "{violation}");
        assert!(
            violation.explanation.contains("-po→") && violation.explanation.contains("-fr→"),
            "{violation}"
        );
        assert!(check_linearizability(&script.history).is_err());
    }

    #[test]
    fn message_passing_is_not_sc() {
        // Goal: the message-passing litmus (P1: W data=1; W flag=1 ‖ P2: R flag=1; R data=0) is
        // rejected: seeing the flag but not the data it guards.
        let (data, flag) = (X, Y);
        let mut script = Script::with_write_order();
        script.write(1, data, 1, (0, 10));
        script.commit(data, 1, 9);
        script.write(1, flag, 1, (11, 20));
        script.commit(flag, 1, 19);
        script.read(2, flag, 1, (15, 25));
        script.read(2, data, 0, (26, 30));
        let violation = check_sequential_consistency(&script.history).unwrap_err();
        assert!(violation.explanation.contains("-rf→"), "{violation}");
    }

    #[test]
    fn sc_interleavings_are_accepted() {
        // Goal: the allowed outcomes of the same litmus shapes pass: store buffering where one
        // read sees the other's write, message passing that sees both or neither.
        let mut script = Script::with_write_order();
        script.write(1, X, 1, (0, 10));
        script.commit(X, 1, 9);
        script.write(2, Y, 1, (0, 10));
        script.commit(Y, 1, 9);
        script.read(1, Y, 1, (11, 20));
        script.read(2, X, 0, (11, 20));
        // Message passing on other keys, reading both new values.
        script.write(3, 10, 1, (0, 10));
        script.commit(10, 1, 5);
        script.write(3, 11, 1, (11, 20));
        script.commit(11, 1, 15);
        script.read(4, 11, 1, (21, 25));
        script.read(4, 10, 1, (26, 30));
        let report = check_sequential_consistency(&script.history).unwrap();
        assert_eq!(report.keys_by_write_order, 4);
        assert!(report.is_complete());
        // (Not linearizable: P2's read of x=0 began after P1's write of x returned.)
    }

    #[test]
    fn stale_read_is_sc_but_not_linearizable() {
        // Goal: SC ignores real time. A read long after a write may return the old value if no
        // client's own order forbids it; linearizability rejects the same history.
        let mut script = Script::with_write_order();
        script.write(1, X, 1, (0, 10));
        script.commit(X, 1, 5);
        script.read(2, X, 0, (100, 110));
        assert!(check_sequential_consistency(&script.history).is_ok());
        assert!(check_linearizability(&script.history).is_err());
    }

    #[test]
    fn a_client_must_see_its_own_write() {
        // Goal: reading the old value after one's own write is a po + fr cycle.
        let mut script = Script::with_write_order();
        script.write(1, X, 1, (0, 10));
        script.commit(X, 1, 5);
        script.read(1, X, 0, (20, 30));
        let violation = check_sequential_consistency(&script.history).unwrap_err();
        assert_eq!(violation.ops.len(), 2, "{violation}");
    }

    #[test]
    fn atomics_and_pending_ops_in_the_graph() {
        // Goal: CAS/FAA commits are writes in the order, a failed CAS reads, pending operations
        // count only if they committed. Method: a counter incremented by two clients, one FAA
        // pending but committed, a failed CAS observing the final value; then the same with the
        // failed CAS observing a value its own client had already seen overwritten.
        let build = |stale: bool| {
            let mut script = Script::with_write_order();
            script.faa(1, X, 1, 0, (0, 10));
            script.commit(X, 1, 5);
            script.pending(2, Op::Faa { key: Key(X), add: 1 }, 12);
            script.commit(X, 2, 14);
            script.read(3, X, 2, (20, 30));
            script.cas(3, X, 7, 8, if stale { 1 } else { 2 }, (31, 40));
            script.pending(4, Op::Write { key: Key(X), value: 9 }, 50);
            script
        };
        assert!(check_sequential_consistency(&build(false).history).is_ok());
        assert!(check_sequential_consistency(&build(true).history).is_err());
    }

    #[test]
    fn thin_air_and_ambiguous_keys() {
        // Goal: a read of a value never committed is a violation; a key whose commits cannot be
        // matched to writers is reported unknown, not guessed.
        let mut script = Script::with_write_order();
        script.read(1, X, 3, (0, 10));
        let violation = check_sequential_consistency(&script.history).unwrap_err();
        assert!(violation.explanation.contains("never held"), "{violation}");

        let mut script = Script::with_write_order();
        script.write(1, X, 1, (0, 10));
        script.write(2, X, 1, (0, 10));
        script.commit(X, 1, 5);
        script.commit(X, 1, 6);
        let report = check_sequential_consistency(&script.history).unwrap();
        assert_eq!(report.unknown.len(), 1);
        assert_eq!(report.unknown[0].key, Key(X));
    }

    #[test]
    fn long_chains_do_not_recurse() {
        // Goal: the graph search is iterative, and a long cycle is reported short. Method: one
        // client with 200,000 operations (a chain that deep would overflow a recursive DFS), then
        // close a cycle by reading the initial value of a key it wrote first; the report collapses
        // the program-order run into one edge.
        let mut script = Script::with_write_order();
        script.write(1, X, 1, (0, 1));
        script.commit(X, 1, 1);
        for i in 0..200_000u64 {
            script.read(1, Y, 0, (2 + 2 * i, 3 + 2 * i));
        }
        assert!(check_sequential_consistency(&script.history).is_ok());
        script.read(1, X, 0, (1_000_000, 1_000_001));
        let violation = check_sequential_consistency(&script.history).unwrap_err();
        assert_eq!(violation.keys, vec![Key(X)], "{violation}");
        assert_eq!(violation.ops.len(), 2, "{violation}");
    }
}
