//! Without `rdma`: a type with the real one's API that cannot be constructed.

use std::convert::Infallible;
use std::future::Future;

use dmsim_protocols::memory::Region;
use dmsim_protocols::nic::{self, BatchResult, Message, Nanos, NicResult, NodeId, Verb};

use crate::config::HwConfig;
use crate::runtime::Runtime;

/// The NIC of one node on real RDMA. Built without `rdma`: uninhabited.
#[derive(Clone)]
pub struct HwNic {
    never: Infallible,
}

impl HwNic {
    pub fn runtime(&self) -> &Runtime {
        match self.never {}
    }
    pub fn config(&self) -> &HwConfig {
        match self.never {}
    }
    pub fn device(&self) -> &str {
        match self.never {}
    }
}

// `ready(never)` only names a concrete future type; it is never reached.
#[allow(unreachable_code)]
impl nic::Nic for HwNic {
    fn node(&self) -> NodeId {
        match self.never {}
    }
    fn cluster(&self) -> &nic::Cluster {
        match self.never {}
    }
    fn local(&self) -> &Region {
        match self.never {}
    }
    fn qp(&self, _channel: u16) -> Self {
        match self.never {}
    }
    fn channel(&self) -> u16 {
        match self.never {}
    }
    fn now(&self) -> Nanos {
        match self.never {}
    }
    fn sleep(&self, _duration: Nanos) -> impl Future<Output = ()> + Send {
        std::future::ready(match self.never {})
    }
    fn cpu(&self, _duration: Nanos) -> impl Future<Output = ()> + Send {
        std::future::ready(match self.never {})
    }
    fn spawn(&self, _task: impl Future<Output = ()> + Send + 'static) {
        match self.never {}
    }
    fn batch(&self, _verbs: &[Verb]) -> impl Future<Output = NicResult<BatchResult>> + Send {
        std::future::ready(match self.never {})
    }
    fn send(&self, _to: NodeId, _port: u16, _bytes: Vec<u8>) -> impl Future<Output = NicResult<()>> + Send {
        std::future::ready(match self.never {})
    }
    fn recv(&self, _port: u16) -> impl Future<Output = NicResult<Message>> + Send {
        std::future::ready(match self.never {})
    }
    fn mark(&self, _label: &'static str, _value: u64) {
        match self.never {}
    }
    fn post_unsignaled(&self, _verbs: &[Verb]) -> NicResult<()> {
        match self.never {}
    }
}
