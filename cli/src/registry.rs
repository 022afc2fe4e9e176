//! The registry: every protocol `dmsim` knows, one line each. The only place that names them.
//!
//! A protocol's whole definition lives in its folder under `protocols/src/` (its
//! [`Protocol`](dmsim_protocols::harness::Protocol) implementation); registering it here gives
//! it `dmsim run`, `fuzz`, `replay` and `hw run`.

use std::sync::Arc;

use dmsim_protocols::harness::Protocol;
use dmsim_sim::runners::{Driver, Registry, SimProtocol};

use crate::commands::hw_run::{HwDriver, HwProtocol};

/// One registered protocol, as each backend drives it.
struct Registered {
    sim: Arc<dyn SimProtocol>,
    hw: Arc<dyn HwProtocol>,
}

fn entry<P: Protocol + Clone>(protocol: P) -> Registered {
    Registered { sim: Arc::new(Driver(protocol.clone())), hw: Arc::new(HwDriver(protocol)) }
}

fn all() -> Vec<Registered> {
    vec![
        entry(dmsim_protocols::nic_micro::NicMicro),
        entry(dmsim_protocols::selcc::Selcc),
        entry(dmsim_protocols::gam::Gam),
        entry(dmsim_protocols::sherman::Sherman),
        entry(dmsim_protocols::marlin::Marlin),
        entry(dmsim_protocols::smart::Smart),
        entry(dmsim_protocols::dex::Dex),
        entry(dmsim_protocols::blink::Blink),
        entry(dmsim_protocols::difache::Difache),
        entry(dmsim_protocols::scalestore::ScaleStore),
        entry(dmsim_protocols::scalestore::ScaleStoreDm),
        entry(dmsim_protocols::txn::Tpcc),
        entry(dmsim_protocols::dolphin::Dolphin),
        entry(dmsim_protocols::scalestore::BlinkScaleStore),
        entry(dmsim_protocols::namdb::NamDb),
        entry(dmsim_protocols::farm::Farm),
    ]
}

/// The simulator's registry (scenario loading, `run`, `fuzz`, `replay`).
pub fn sim() -> Registry {
    let mut registry = Registry::new();
    for r in all() {
        registry.add(r.sim);
    }
    registry
}

/// The hardware driver of the protocol named `name`.
pub fn hw(name: &str) -> Option<Arc<dyn HwProtocol>> {
    all().into_iter().find(|r| r.sim.names().contains(&name)).map(|r| r.hw)
}
