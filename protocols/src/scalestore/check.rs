//! ScaleStore's invariants (spec §4), over every node's state after every simulator event,
//! and the end-of-run checks. Client histories (one record per operation, a write with the
//! value it replaced under node-exclusive ownership) go to the simulator's per-key
//! linearizability checker: sequential consistency through the page API.
//!
//! 1. **One exclusive owner per page** (SWMR): at most one node holds a page Hot in
//!    node-exclusive mode, and then no other node holds it Hot at all.
//! 2. **Shared copies agree**: every Hot copy of a page has the same records.
//! 3. **The directory agrees with owners and sharers**, allowing for its immediate updates
//!    running ahead: every node holding a page Hot is one of the directory's holders in that
//!    mode, or is owed the invalidation or transfer that will remove it; an exclusive page has
//!    exactly one holder, its anchor; shared pages' anchors are holders.
//! 4. **Owner stability**: the node the directory names as a page's owner or anchor has a
//!    frame for it (it will hand the page on; R1). A transfer that finds no frame panics
//!    (`node.rs`), which the fuzzer also reports.
//! 5. At the end of a quiesced run: nothing owed, no frame mid-fetch, and every directory
//!    holder holds the page Hot in the directory's mode (metadata convergence). A frame mid-
//!    eviction (or read back by its directory) when the run stopped counts as held: the page
//!    providers are daemons, stopped wherever they were.
//! 6. **Evicted pages** (spec §3.11): a page no node holds has no anchor but the storage
//!    device, which has its current version (`on_ssd`); an exclusive page is never only on the
//!    device; the device is a shared page's source only while it is clean. (A Hot copy of a
//!    page the directory lists nowhere fails 3: no page is both evicted and owned.)
//! 7. The cache's occupancy count is the number of present frames.

use std::sync::Mutex;

use crate::harness::{Invariants, Memory, Violation};
use crate::nic::NodeId;

use super::layout::Layout;
use super::state::{bits, FrameState, NodeState, Owed, SSD};

/// The per-event hook of a plan in check mode: invariants 1–4 and 6–7 over every node's state.
pub fn hook(
    layout: &Layout,
    owed: &Owed,
    states: Vec<Option<std::sync::Arc<Mutex<NodeState>>>>,
) -> Invariants {
    let states: Vec<std::sync::Arc<Mutex<NodeState>>> = states.into_iter().flatten().collect();
    let (layout, owed) = (layout.clone(), owed.clone());
    Box::new(move |memory: Memory, _| {
        let refs: Vec<&Mutex<NodeState>> = states.iter().map(|s| s.as_ref()).collect();
        invariants(&layout, &refs, &owed, memory).map_err(|(name, m)| Violation::new(name, m))
    })
}

/// The end-of-run check of the record-operation plans: no node failed, and after a quiesced
/// run with every node's state kept (check mode, one process) metadata convergence.
pub fn verify_records(
    layout: &Layout,
    reports: &[crate::harness::NodeReport],
    states: &[std::sync::Arc<Mutex<NodeState>>],
    quiesce: bool,
    owed: Option<&Owed>,
) -> Result<(), Violation> {
    if let Some(e) = crate::harness::first_error(reports) {
        return Err(Violation::new("no protocol error", e.to_string()));
    }
    if let (true, true, Some(owed)) = (quiesce, states.len() == layout.nodes as usize, owed) {
        let refs: Vec<&Mutex<NodeState>> = states.iter().map(|s| s.as_ref()).collect();
        converged(layout, &refs, owed).map_err(|(name, m)| Violation::new(name, m))?;
    }
    Ok(())
}

/// Invariants 1–4, 6, 7.
pub fn invariants(
    layout: &Layout,
    nodes: &[&Mutex<NodeState>],
    owed: &Owed,
    memory: Memory,
) -> Result<(), (String, String)> {
    let guards: Vec<_> = nodes.iter().map(|m| m.lock().unwrap_or_else(|e| e.into_inner())).collect();
    let states: Vec<&NodeState> = guards.iter().map(|g| &**g).collect();
    let owed_map = owed.lock().unwrap_or_else(|e| e.into_inner());
    let owed = |g: u64, n: u16| owed_map.contains_key(&(g, n));
    for g in 0..layout.total_pages() {
        let d = layout.directory(g);
        let entry = states[d.index()].dir[(g % layout.pages_per_node) as usize];
        let mut exclusive_owner = None;
        let mut hot = Vec::new();
        for (n, st) in states.iter().enumerate() {
            let Some(f) = st.frames[g as usize] else { continue };
            if f.state != FrameState::Hot {
                continue;
            }
            hot.push(n);
            if f.exclusive {
                if let Some(o) = exclusive_owner {
                    return Err((
                        "one exclusive owner per page".into(),
                        format!("page {g}: n{o} and n{n} both hold it node-exclusive"),
                    ));
                }
                exclusive_owner = Some(n);
            }
            let listed = entry.holders >> n & 1 == 1 && entry.exclusive == f.exclusive;
            if !listed && !owed(g, n as u16) {
                return Err((
                    "directory agrees with owners and sharers".into(),
                    format!(
                        "page {g}: n{n} holds it {} but directory n{} lists holders {:#b} ({}) and owes it nothing",
                        if f.exclusive { "exclusive" } else { "shared" },
                        d.0,
                        entry.holders,
                        if entry.exclusive { "exclusive" } else { "shared" }
                    ),
                ));
            }
        }
        if let (Some(o), true) = (exclusive_owner, hot.len() > 1) {
            return Err((
                "one exclusive owner per page".into(),
                format!("page {g}: n{o} holds it exclusive while nodes {hot:?} hold it"),
            ));
        }
        if hot.len() > 1 {
            for k in 0..layout.keys_per_page {
                let key = g * layout.keys_per_page + k;
                let first = memory(layout.record(NodeId(hot[0] as u16), key));
                for &n in &hot[1..] {
                    let v = memory(layout.record(NodeId(n as u16), key));
                    if v != first {
                        return Err((
                            "shared copies agree".into(),
                            format!("page {g} record {key}: n{} has {first:#x}, n{n} has {v:#x}", hot[0]),
                        ));
                    }
                }
            }
        }
        if entry.anchor == SSD || entry.holders == 0 {
            if entry.anchor != SSD || !entry.on_ssd || entry.exclusive {
                return Err((
                    "evicted pages".into(),
                    format!("page {g}: holders {:#b}, anchor {}, but {entry:?}", entry.holders, entry.anchor),
                ));
            }
            continue;
        }
        if entry.exclusive && (entry.holders.count_ones() != 1 || entry.holders != 1 << entry.anchor) {
            return Err((
                "directory agrees with owners and sharers".into(),
                format!("page {g}: exclusive with holders {:#b}, anchor n{}", entry.holders, entry.anchor),
            ));
        }
        if entry.holders >> entry.anchor & 1 == 0 {
            return Err((
                "directory agrees with owners and sharers".into(),
                format!("page {g}: anchor n{} is not a holder ({:#b})", entry.anchor, entry.holders),
            ));
        }
        // An unconfirmed anchor whose copy failed has no frame until it asks again.
        if states[entry.anchor as usize].frames[g as usize].is_none()
            && !owed(g, entry.anchor)
            && !entry.unconfirmed
        {
            let frames: Vec<_> = states.iter().map(|s| s.frames[g as usize]).collect();
            return Err((
                "owner stability".into(),
                format!("page {g}: directory names n{} its owner/anchor, which has no frame ({entry:?}; frames {frames:?})", entry.anchor),
            ));
        }
    }
    for (n, st) in states.iter().enumerate() {
        let present = st.frames.iter().filter(|f| f.is_some()).count() as u64;
        let evicting =
            st.frames.iter().filter(|f| f.is_some_and(|f| f.state == FrameState::Evicting)).count() as u64;
        if present != st.used || evicting != st.evicting {
            return Err((
                "cache occupancy".into(),
                format!(
                    "n{n}: {present} frames present ({evicting} evicting), {} ({}) counted",
                    st.used, st.evicting
                ),
            ));
        }
    }
    Ok(())
}

/// Invariant 5, after a quiesced run.
pub fn converged(layout: &Layout, nodes: &[&Mutex<NodeState>], owed: &Owed) -> Result<(), (String, String)> {
    let guards: Vec<_> = nodes.iter().map(|m| m.lock().unwrap_or_else(|e| e.into_inner())).collect();
    if let Some(((g, o), c)) = owed.lock().unwrap_or_else(|e| e.into_inner()).iter().next() {
        return Err((
            "metadata convergence".into(),
            format!("n{o} still owes {c} invalidation(s)/transfer(s) of page {g}"),
        ));
    }
    for (n, st) in guards.iter().enumerate() {
        let settled = |f: &super::state::Frame| {
            f.state == FrameState::Hot || f.state == FrameState::Evicting || f.pulled
        };
        if let Some(g) = st.frames.iter().position(|f| f.is_some_and(|f| !settled(&f))) {
            return Err(("metadata convergence".into(), format!("n{n} still fetching page {g} at the end")));
        }
    }
    for g in 0..layout.total_pages() {
        let d = layout.directory(g).index();
        let entry = guards[d].dir[(g % layout.pages_per_node) as usize];
        for n in bits(entry.holders) {
            let f = guards[n as usize].frames[g as usize];
            let held = |f: super::state::Frame| {
                (f.state == FrameState::Hot || f.state == FrameState::Evicting || f.pulled)
                    && f.exclusive == entry.exclusive
            };
            if !f.is_some_and(held) {
                return Err((
                    "metadata convergence".into(),
                    format!("page {g}: directory lists n{n} as a holder, which has {f:?}"),
                ));
            }
        }
    }
    Ok(())
}
