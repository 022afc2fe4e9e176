//! DiFache's checks. The paper promises memory-node consistency, not linearizability (§3.2:
//! "a read or write may start before another write on the same object finishes"), so the
//! histories are checked as *regular* registers per object: a read returns the value of the
//! last write that completed before it started, or of a write overlapping it — "no stale read
//! after a completed write" (spec §4 invariant 1). A linearizability checker would flag the
//! legal new-then-old inversion of two reads on different CNs during one write's invalidation.
//!
//! After every simulator event ([`invariants`]), over every compute node's registered memory:
//! the hopscotch structure (spec inv. 8); mode agreement while no switching flag is raised
//! (inv. 6); owner-set soundness: a valid, enabled header's CN is in the owner set or is
//! awaiting an invalidation a collecting writer owes it (inv. 3); and no valid stale copy: with
//! no write to the object in flight, every valid, enabled, settled copy holds the memory node's
//! bytes (inv. 1/2).

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::harness::{LoggedOp, Memory};
use crate::nic::RemoteAddr;

use super::cache::{tag, MODE_ON, SWITCHING};
use super::index;
use super::layout::*;

/// In-process record of writes in flight (check mode only): which objects are being written
/// and which CNs a collecting writer still owes an invalidation. Counted, not flagged: writers
/// of different parts of one nested object (`workload.parts`) collect and invalidate the same
/// object concurrently, and one's invalidation of a CN does not pay what another owes it.
#[derive(Default)]
pub struct Tracker {
    state: Mutex<Writes>,
    /// Per object, collect CASes on its owner set that may have reset it, result not yet
    /// seen: every CN counts as owed meanwhile.
    collecting: Mutex<BTreeMap<u64, u32>>,
    /// Node restarts: CNs that have not dropped their copies since a memory node restarted
    /// without its owner sets (bit per CN); their copies are not checked against owner sets.
    unsynced: Mutex<u64>,
}

/// Per object: writes in flight, and per CN the invalidations owed to it.
type Writes = BTreeMap<u64, (u32, BTreeMap<usize, u32>)>;

impl Tracker {
    fn with<T>(&self, f: impl FnOnce(&mut Writes) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }
    pub fn begin(&self, key: u64) {
        self.with(|s| s.entry(key).or_default().0 += 1);
    }
    pub fn end(&self, key: u64) {
        self.with(|s| {
            if let Some(e) = s.get_mut(&key) {
                e.0 -= 1;
                if e.0 == 0 {
                    s.remove(&key);
                }
            }
        });
    }
    /// A collect CAS on `key`'s owner set is about to be posted.
    pub fn collecting(&self, key: u64) {
        *self.collecting.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_default() += 1;
    }
    /// A collect's result: these CNs are owed an invalidation.
    pub fn pending(&self, key: u64, cns: &[usize]) {
        let mut collecting = self.collecting.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = collecting.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                collecting.remove(&key);
            }
        }
        drop(collecting);
        self.with(|s| {
            let owed = &mut s.entry(key).or_default().1;
            for &cn in cns {
                *owed.entry(cn).or_default() += 1;
            }
        });
    }
    /// One invalidation owed to `cn` for `key` is done.
    pub fn done(&self, key: u64, cn: usize) {
        self.with(|s| {
            if let Some(e) = s.get_mut(&key) {
                if let Some(n) = e.1.get_mut(&cn) {
                    *n -= 1;
                    if *n == 0 {
                        e.1.remove(&cn);
                    }
                }
            }
        });
    }
    /// A memory node restarted: its owner sets are empty, and no CN has dropped since.
    pub fn memory_restarted(&self) {
        *self.unsynced.lock().unwrap_or_else(|e| e.into_inner()) = u64::MAX;
    }
    /// CN `cn` dropped every copy.
    pub fn dropped(&self, cn: usize) {
        *self.unsynced.lock().unwrap_or_else(|e| e.into_inner()) &= !(1u64 << (cn % 64));
    }
    fn unsynced(&self, cn: usize) -> bool {
        *self.unsynced.lock().unwrap_or_else(|e| e.into_inner()) >> (cn % 64) & 1 != 0
    }
    fn writing(&self, key: u64) -> bool {
        self.with(|s| s.get(&key).is_some_and(|e| e.0 > 0))
    }
    fn owed(&self, key: u64, cn: usize) -> bool {
        if self.collecting.lock().unwrap_or_else(|e| e.into_inner()).contains_key(&key) {
            return true;
        }
        self.with(|s| s.get(&key).is_some_and(|e| e.1.contains_key(&cn)))
    }
}

/// What the per-event invariants check (by variant).
#[derive(Clone, Copy)]
pub struct Checks {
    pub adaptive: bool,
    pub owner_sets: bool,
    pub coherent: bool,
    /// CMCache: direct-mapped slots, no index, no modes.
    pub centralized: bool,
}

/// All per-event invariants; the first broken one as (name, message).
pub fn invariants(
    layout: &Layout,
    checks: Checks,
    tracker: &Tracker,
    memory: Memory,
) -> Result<(), (&'static str, String)> {
    if checks.centralized {
        return centralized_invariants(layout, tracker, memory);
    }
    let mut holders: BTreeMap<u64, Vec<(usize, u64)>> = BTreeMap::new();
    // CNs off the coordinator's list are dead: their caches count as cleared (spec §3.9).
    let dead = if layout.recovery { memory(layout.membership()) & super::recovery::DEAD_MASK } else { 0 };
    for cn in 0..layout.compute_nodes as usize {
        if cn < 32 && dead >> cn & 1 != 0 {
            continue;
        }
        let node = layout.cn(cn);
        let load = |offset: u64| memory(RemoteAddr::new(node, offset));
        index::check(&load, layout.index_buckets, layout.index_slots)
            .map_err(|m| ("hopscotch structure", format!("cn{cn}: {m}")))?;
        for (key, hdr) in index::entries(&load, layout.index_slots) {
            let base = layout.header(hdr);
            if load(base + HDR_KEY) != key + 1 {
                continue;
            }
            let mode = load(base + HDR_MODE);
            // Holds in the simulator (a NIC atomic is one instant there). On hardware a
            // switcher's CAS can swallow a recycle's store and leave another key's word here
            // until the next access repairs it (`Cache::own_mode`); this check runs only here.
            if mode >> 32 != tag(key) {
                return Err((
                    "header tag",
                    format!("cn{cn} header {hdr} of object {key} has mode tag {:#x}", mode >> 32),
                ));
            }
            holders.entry(key).or_default().push((cn, mode));
            // A header mid-switch serves no reads (mode checks wait for the flag), so it is not settled.
            let settled = load(base + HDR_VALID) != 0
                && load(base + HDR_FILL) == 0
                && mode & MODE_ON != 0
                && mode & SWITCHING == 0;
            if !settled || !checks.coherent {
                continue;
            }
            if checks.owner_sets {
                let set = memory(layout.owner_set(key));
                if set >> (cn % 64) & 1 == 0 && !tracker.owed(key, cn) && !tracker.unsynced(cn) {
                    return Err((
                        "owner set covers valid copies",
                        format!(
                            "cn{cn} holds a valid copy of object {key} (header {hdr}, valid {:#x}) but owner set is {set:#x} and no writer owes it an invalidation",
                            load(base + HDR_VALID)
                        ),
                    ));
                }
            }
            if !tracker.writing(key) {
                let object = layout.object(key);
                for w in 0..layout.object_bytes / 8 {
                    let cached = load(layout.buffer(hdr) + w * 8);
                    let home = memory(object.add(w * 8));
                    if cached != home {
                        return Err((
                            "no valid stale copy",
                            format!(
                                "cn{cn} caches object {key} word {w} = {cached:#x} (header {hdr}: valid {:#x}, mode {mode:#x}), memory holds {home:#x}, no write in flight",
                                load(base + HDR_VALID)
                            ),
                        ));
                    }
                }
            }
        }
    }
    if checks.adaptive {
        for (key, hs) in holders {
            if hs.iter().any(|(_, m)| m & SWITCHING != 0) {
                continue;
            }
            let on: Vec<bool> = hs.iter().map(|(_, m)| m & MODE_ON != 0).collect();
            if on.iter().any(|&b| b != on[0]) {
                let who: Vec<String> = hs
                    .iter()
                    .map(|(c, m)| format!("cn{c}:{}", if m & MODE_ON != 0 { "on" } else { "off" }))
                    .collect();
                return Err((
                    "mode agreement",
                    format!("object {key} modes differ with no switch in progress: {}", who.join(" ")),
                ));
            }
        }
    }
    Ok(())
}

/// No acknowledged write lost: at the end, every written object's memory-node copy holds the
/// value of the last write that returned (writes to one object are serialized by the
/// application's lock, so their returns are ordered) or of a write that never returned (its
/// CN crashed after flushing).
pub fn check_memory(layout: &Layout, ops: &[LoggedOp], memory: Memory) -> Result<u64, String> {
    let mut by_key: BTreeMap<u64, (Option<&LoggedOp>, Vec<u64>)> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.write.is_some()) {
        let e = by_key.entry(op.key).or_default();
        match op.return_ns {
            Some(t) if e.0.is_none_or(|l| l.return_ns.is_some_and(|lt| lt < t)) => e.0 = Some(op),
            Some(_) => {}
            None => e.1.extend(op.write),
        }
    }
    let mut checked = 0;
    for (key, (last, mut allowed)) in by_key {
        let Some(last) = last else { continue };
        allowed.extend(last.write);
        let held = memory(layout.register_stamp(key));
        if !allowed.contains(&held) {
            return Err(format!(
                "object {key} holds {held:#x} at the end; the last acknowledged write (client {}, returned at {} ns) wrote {:#x}",
                last.client,
                last.return_ns.unwrap_or(0),
                last.write.unwrap_or(0)
            ));
        }
        checked += 1;
    }
    Ok(checked)
}

/// CMCache: no valid stale copy — with no write to the object in the manager, every slot
/// marked valid holds the memory node's bytes of the object its KEY names.
fn centralized_invariants(
    layout: &Layout,
    tracker: &Tracker,
    memory: Memory,
) -> Result<(), (&'static str, String)> {
    for cn in 0..layout.compute_nodes as usize {
        let node = layout.cn(cn);
        for h in 0..layout.cache_objects as u32 {
            let base = layout.header(h);
            let valid = memory(RemoteAddr::new(node, base + HDR_VALID));
            let named = memory(RemoteAddr::new(node, base + HDR_KEY));
            if valid & super::cmcache::VALID_BIT == 0 || named == 0 || tracker.writing(named - 1) {
                continue;
            }
            let object = layout.object(named - 1);
            for w in 0..layout.object_bytes / 8 {
                let cached = memory(RemoteAddr::new(node, layout.buffer(h) + w * 8));
                let home = memory(object.add(w * 8));
                if cached != home {
                    return Err((
                        "no valid stale copy",
                        format!(
                            "cn{cn} slot {h} caches object {} word {w} = {cached:#x}, memory holds {home:#x}, no write in flight",
                            named - 1
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The regular-register check over every client's logged operations (one clock): each read
/// returns the initial value (0), the value of the last write that completed before it was
/// invoked, or the value of a write that overlaps it.
pub fn check_regular(ops: &[LoggedOp]) -> Result<u64, String> {
    let mut by_key: BTreeMap<u64, (Vec<&LoggedOp>, Vec<&LoggedOp>)> = BTreeMap::new();
    for op in ops {
        let e = by_key.entry(op.key).or_default();
        if op.write.is_some() {
            e.0.push(op);
        } else {
            e.1.push(op);
        }
    }
    let mut checked = 0;
    for (key, (writes, reads)) in by_key {
        for r in reads {
            let (Some(ret), Some(value)) = (r.return_ns, r.seen) else { continue };
            let last = writes
                .iter()
                .filter(|w| w.return_ns.is_some_and(|t| t < r.invoke_ns))
                .max_by_key(|w| w.return_ns);
            let mut allowed: Vec<u64> = vec![last.map_or(0, |w| w.write.unwrap_or(0))];
            allowed.extend(
                writes
                    .iter()
                    .filter(|w| w.invoke_ns <= ret && w.return_ns.is_none_or(|t| t >= r.invoke_ns))
                    .filter_map(|w| w.write),
            );
            if !allowed.contains(&value) {
                return Err(format!(
                    "client {} read object {key} = {value:#x} in [{}, {ret}] ns; allowed {:x?} (last write completed before it: {:?})",
                    r.client,
                    r.invoke_ns,
                    allowed,
                    last.map(|w| (w.client, w.invoke_ns, w.return_ns))
                ));
            }
            checked += 1;
        }
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(client: u32, write: Option<u64>, seen: Option<u64>, inv: u64, ret: u64) -> LoggedOp {
        LoggedOp { client, key: 1, write, seen, invoke_ns: inv, return_ns: Some(ret) }
    }

    #[test]
    fn regular_allows_overlap_and_rejects_stale() {
        let w1 = op(0, Some(5), None, 10, 20);
        let w2 = op(0, Some(6), None, 30, 40);
        // Overlapping w2: old or new, in either order across clients (not linearizable, regular).
        let ok = [w1, w2, op(1, None, Some(6), 31, 35), op(2, None, Some(5), 36, 39)];
        assert_eq!(check_regular(&ok), Ok(2));
        // After w2 completed: only 6.
        let stale = [w1, w2, op(1, None, Some(5), 41, 45)];
        assert!(check_regular(&stale).unwrap_err().contains("read object 1 = 0x5"));
        // Before any write: the initial 0.
        assert_eq!(check_regular(&[w1, op(1, None, Some(0), 1, 5)]), Ok(1));
        assert!(check_regular(&[w1, op(1, None, Some(0), 21, 25)]).is_err());
    }
}
