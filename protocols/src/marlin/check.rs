//! Marlin's invariants at quiescence (`Plan::verify`, after Sherman's tree checks: fences,
//! reachability, sorted separators, no key twice among published slots, no lost key):
//!
//! * every slot is empty or published: a claimed key without an item pointer left behind
//!   means an insert lost its slot or was cut short;
//! * every published pointer names an item of the layout, and the item holds the slot's key
//!   (items are immutable; a stray pointer or an item written after its publication shows);
//! * no key twice in the leaf level, claimed slots included;
//! * every leaf's Spear word is 0 (no IDU or SMO still holds it).

use std::collections::BTreeSet;

use crate::harness::Memory;
use crate::sherman::check::read;
use crate::sherman::layout::{Gaddr, Layout};

pub fn check_items(layout: &Layout, memory: Memory) -> Result<(), String> {
    let mut addr = Gaddr(memory(layout.root_ptr()));
    loop {
        let node = read(layout, memory, addr)?;
        if node.is_leaf() {
            break;
        }
        addr = node.leftmost;
    }
    let mut keys = BTreeSet::new();
    while !addr.is_null() {
        let leaf = read(layout, memory, addr)?;
        for (i, s) in leaf.slots.iter().enumerate() {
            if s.key == 0 {
                if s.value != 0 {
                    return Err(format!("leaf {addr} slot {i}: an item pointer without a key"));
                }
                continue;
            }
            if s.value == 0 {
                return Err(format!("leaf {addr} slot {i}: key {} claimed but never published", s.key));
            }
            let item = Gaddr(s.value);
            if !layout.is_item(item) {
                return Err(format!("leaf {addr} slot {i}: key {} points to {item}, not an item", s.key));
            }
            let held = memory(item.remote());
            if held != s.key {
                return Err(format!("leaf {addr} slot {i}: key {}'s item {item} holds key {held}", s.key));
            }
            if !keys.insert(s.key) {
                return Err(format!("key {} is in two leaf slots", s.key));
            }
        }
        let spear = memory(layout.spear_addr(addr));
        if spear != 0 {
            return Err(format!("leaf {addr}: Spear word {:#x} at quiescence", spear));
        }
        addr = leaf.sibling;
    }
    Ok(())
}
