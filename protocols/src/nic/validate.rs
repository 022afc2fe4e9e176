//! Checks both backends run before posting: batch shape, alignment, and that every range lies
//! in the region (host or device memory) it names. Errors are values, never panics.

use super::{Cluster, NicError, NicResult, NodeId, RemoteAddr, Space, Verb, MAX_BATCH};

/// [`validate_batch_in`] for a cluster without device memory.
pub fn validate_batch(cluster: &Cluster, own: NodeId, verbs: &[Verb]) -> NicResult<NodeId> {
    validate_batch_in(cluster, &[], own, verbs)
}

/// Checks a batch against the cluster shape and returns its target node. `own` is the posting
/// node: READ/WRITE local ranges must lie in its host region. `device_bytes[i]` is node i's
/// device memory size (missing entries: none).
pub fn validate_batch_in(
    cluster: &Cluster,
    device_bytes: &[u64],
    own: NodeId,
    verbs: &[Verb],
) -> NicResult<NodeId> {
    if verbs.is_empty() {
        return Err(NicError::BadBatch { reason: "empty batch" });
    }
    if verbs.len() > MAX_BATCH {
        return Err(NicError::BadBatch { reason: "more than MAX_BATCH verbs" });
    }
    let target = verbs[0].remote().node;
    for verb in verbs {
        let remote = verb.remote();
        if remote.node != target {
            return Err(NicError::BadBatch { reason: "a batch goes to one target node" });
        }
        let len_bytes = match *verb {
            Verb::Read { local_bytes, len_bytes, .. } | Verb::Write { local_bytes, len_bytes, .. } => {
                // Local buffers are host memory: a device bit makes the offset fall outside.
                check_host(cluster, RemoteAddr::new(own, local_bytes), len_bytes as u64)?;
                len_bytes as u64
            }
            _ => 8,
        };
        check_range_in(cluster, device_bytes, remote, len_bytes)?;
    }
    Ok(target)
}

/// Checks that `[offset, offset+len)` is aligned and inside `addr.node`'s host region.
pub fn check_range(cluster: &Cluster, addr: RemoteAddr, len_bytes: u64) -> NicResult<()> {
    check_range_in(cluster, &[], addr, len_bytes)
}

/// Checks that `[offset, offset+len)` is aligned and inside the space `addr` names: the host
/// region, or device memory of `device_bytes[node]` bytes.
pub fn check_range_in(
    cluster: &Cluster,
    device_bytes: &[u64],
    addr: RemoteAddr,
    len_bytes: u64,
) -> NicResult<()> {
    match addr.space() {
        Space::Host => check_host(cluster, addr, len_bytes),
        Space::Device => {
            let size = device_bytes.get(addr.node.index()).copied().unwrap_or(0);
            let size = if addr.node.index() < cluster.node_count() { size } else { 0 };
            check_in(addr, addr.offset_in_space(), len_bytes, size)
        }
    }
}

fn check_host(cluster: &Cluster, addr: RemoteAddr, len_bytes: u64) -> NicResult<()> {
    let size = if addr.node.index() < cluster.node_count() {
        cluster.region_size_bytes.get(addr.node.index()).copied().unwrap_or(0)
    } else {
        0
    };
    check_in(addr, addr.offset_bytes, len_bytes, size)
}

fn check_in(addr: RemoteAddr, offset: u64, len_bytes: u64, size: u64) -> NicResult<()> {
    if !offset.is_multiple_of(8) || !len_bytes.is_multiple_of(8) {
        return Err(NicError::Unaligned { offset_bytes: addr.offset_bytes, len_bytes });
    }
    if offset.checked_add(len_bytes).is_none_or(|end| end > size) {
        return Err(NicError::BadAddress {
            node: addr.node,
            offset_bytes: addr.offset_bytes,
            len_bytes,
            region_size_bytes: size,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::NodeKind;
    use super::*;

    #[test]
    fn device_addresses_check_against_device_memory() {
        // Goal: a device address is checked against the node's device memory, never its host
        // region; no device memory means every device address is a BadAddress value.
        let c = Cluster { kinds: vec![NodeKind::Memory, NodeKind::Compute], region_size_bytes: vec![64, 16] };
        let m = NodeId(0);
        let cas = |a| [Verb::Cas { remote: a, expect: 0, swap: 1 }];
        assert_eq!(validate_batch_in(&c, &[32], NodeId(1), &cas(RemoteAddr::device(m, 24))), Ok(m));
        assert!(matches!(
            validate_batch_in(&c, &[32], NodeId(1), &cas(RemoteAddr::device(m, 32))),
            Err(NicError::BadAddress { region_size_bytes: 32, .. })
        ));
        assert!(matches!(
            validate_batch(&c, NodeId(1), &cas(RemoteAddr::device(m, 0))),
            Err(NicError::BadAddress { region_size_bytes: 0, .. })
        ));
        assert!(matches!(
            validate_batch_in(&c, &[32], NodeId(1), &cas(RemoteAddr::device(m, 4))),
            Err(NicError::Unaligned { .. })
        ));
        let local_dm =
            [Verb::Read { remote: RemoteAddr::new(m, 0), local_bytes: RemoteAddr::DEVICE_BIT, len_bytes: 8 }];
        assert!(matches!(
            validate_batch_in(&c, &[32, 32], NodeId(1), &local_dm),
            Err(NicError::BadAddress { .. })
        ));
    }
}
