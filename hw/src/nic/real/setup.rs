//! Construction: local resources first (their numbers go into the info line exchanged at the
//! rendezvous), then the connection of every QP to its partner.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};

use dmsim_protocols::memory::Region;
use dmsim_protocols::nic::{self, NodeId, MAX_BATCH};

use super::messages::{msg_buf_bytes, Inbox};
use super::slots::{QpState, SLOT_BITS};
use super::{HwNic, NodeState, PeerRegion, WeakPoller};
use crate::config::HwConfig;
use crate::error::HwError;
use crate::info::NodeInfo;
use crate::runtime::Runtime;
use crate::verbs::{Access, ConnectParams, Context as Device, Cq, Mr, Pd, Qp, QpCaps, RemoteQp};

/// Resources created before the exchange.
pub(crate) struct LocalSetup {
    me: NodeId,
    size: usize,
    config: HwConfig,
    port: u8,
    gid_index: Option<u8>,
    mtu: u32,
    max_rd_atomic: u8,
    pub(crate) info: NodeInfo,
    device: Arc<Device>,
    region_mr: Arc<Mr>,
    device_mr: Option<Arc<Mr>>,
    ssd: Option<std::fs::File>,
    scratch_mr: Arc<Mr>,
    msg_send_mr: Arc<Mr>,
    msg_recv_mr: Arc<Mr>,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    verb: Vec<Vec<Arc<Qp>>>,
    resp: Vec<Arc<Qp>>,
    msg: Vec<Option<Arc<Qp>>>,
}

/// Picks the RoCE GID index when none was given: the first IPv4-mapped GID (RoCE v2 over
/// IPv4 on rxe and on ConnectX with default settings), else 0.
fn auto_gid_index(device: &Device, port: u8) -> u8 {
    (0..16u8)
        .find(|&i| device.gid(port, i).is_ok_and(|g| g[..10] == [0; 10] && g[10] == 0xff && g[11] == 0xff))
        .unwrap_or(0)
}

pub(crate) fn setup_local(
    me: NodeId,
    cluster: &nic::Cluster,
    device_name: Option<&str>,
    port: u8,
    gid_index: Option<u8>,
    config: &HwConfig,
) -> Result<LocalSetup, HwError> {
    let size = cluster.node_count();
    let device = Device::open(device_name)?;
    let dev_err = |what: String| HwError::Device { device: device.name().to_string(), what };
    let port_info = device.port(port)?;
    if !port_info.active {
        return Err(dev_err(format!("port {port} is not ACTIVE")));
    }
    let caps = device.caps()?;
    if !caps.atomics {
        return Err(dev_err("device does not support atomics (atomic_cap NONE)".into()));
    }
    if config.qp_depth == 0 || config.qp_depth > (1 << SLOT_BITS) || config.qp_depth > caps.max_qp_wr {
        return Err(HwError::Config(format!(
            "qp_depth {} must be in 1..={}",
            config.qp_depth,
            caps.max_qp_wr.min(1 << SLOT_BITS)
        )));
    }
    let gid_index = match gid_index {
        Some(i) => Some(i),
        None if port_info.ethernet => Some(auto_gid_index(&device, port)),
        None => None,
    };
    let gid = match gid_index {
        Some(i) => device.gid(port, i)?,
        None => [0; 16],
    };
    let pd = Pd::new(&device)?;
    let channels = config.channels.max(1) as usize;
    let qp_count = size * channels + channels + size;
    let send_cq = Cq::new(&device, (qp_count as u32 * config.qp_depth + 64).min(caps.max_cqe))?;
    let recv_cq = Cq::new(&device, (size as u32 * config.message_depth + 64).min(caps.max_cqe))?;
    let region_bytes = cluster.region_size_bytes[me.index()].max(8);
    let region_mr = Mr::register(&pd, Arc::new(Region::new(region_bytes)), Access::Remote)?;
    // Emulated device memory: a second remotely accessible region with its own rkey.
    let device_mr = match config.device_memory_bytes / 8 * 8 {
        0 => None,
        bytes => Some(Mr::register(&pd, Arc::new(Region::new(bytes)), Access::Remote)?),
    };
    let ssd = match &config.ssd_path {
        None => None,
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .and_then(|f| f.set_len(config.ssd_bytes).map(|()| f))
                .map_err(|e| HwError::Config(format!("storage file {}: {e}", path.display())))?;
            Some(file)
        }
    };
    let scratch_bytes = qp_count as u64 * config.qp_depth as u64 * MAX_BATCH as u64 * 8;
    let scratch_mr = Mr::register(&pd, Arc::new(Region::new(scratch_bytes)), Access::Local)?;
    let msg_bytes = size as u64 * config.message_depth as u64 * msg_buf_bytes(config);
    let msg_send_mr = Mr::register(&pd, Arc::new(Region::new(msg_bytes)), Access::Local)?;
    let msg_recv_mr = Mr::register(&pd, Arc::new(Region::new(msg_bytes)), Access::Local)?;
    let verb_caps = QpCaps { max_send_wr: config.qp_depth, max_recv_wr: 1 };
    let mut verb = Vec::with_capacity(size);
    for _ in 0..size {
        let per: Result<Vec<_>, _> =
            (0..channels).map(|_| Qp::new_rc(&pd, &send_cq, &recv_cq, verb_caps)).collect();
        verb.push(per?);
    }
    let resp: Vec<Arc<Qp>> = (0..channels)
        .map(|_| Qp::new_rc(&pd, &send_cq, &recv_cq, QpCaps { max_send_wr: 1, max_recv_wr: 1 }))
        .collect::<Result<_, _>>()?;
    let msg_caps = QpCaps { max_send_wr: config.message_depth, max_recv_wr: config.message_depth };
    let msg: Vec<Option<Arc<Qp>>> =
        (0..size)
            .map(|j| {
                if j == me.index() {
                    Ok(None)
                } else {
                    Qp::new_rc(&pd, &send_cq, &recv_cq, msg_caps).map(Some)
                }
            })
            .collect::<Result<_, _>>()?;
    let info = NodeInfo {
        lid: port_info.lid,
        gid,
        psn: (me.0 as u32).wrapping_mul(7919).wrapping_add(0x1234) & 0xff_ffff,
        addr: region_mr.addr(),
        len: region_mr.len_bytes(),
        rkey: region_mr.rkey(),
        channels: channels as u16,
        verb: verb.iter().flatten().map(|q| q.qpn()).collect(),
        resp: resp.iter().map(|q| q.qpn()).collect(),
        msg: msg.iter().map(|q| q.as_ref().map_or(0, |q| q.qpn())).collect(),
        dm_addr: device_mr.as_ref().map_or(0, |m| m.addr()),
        dm_len: device_mr.as_ref().map_or(0, |m| m.len_bytes()),
        dm_rkey: device_mr.as_ref().map_or(0, |m| m.rkey()),
    };
    Ok(LocalSetup {
        me,
        size,
        config: config.clone(),
        port,
        gid_index,
        mtu: port_info.active_mtu,
        max_rd_atomic: caps.max_qp_rd_atom.clamp(1, 16) as u8,
        info,
        device,
        region_mr,
        device_mr,
        ssd,
        scratch_mr,
        msg_send_mr,
        msg_recv_mr,
        send_cq,
        recv_cq,
        verb,
        resp,
        msg,
    })
}

/// Connects every QP to its partner described in `infos` and returns the node's first handle.
pub(crate) fn connect(
    setup: LocalSetup,
    cluster: nic::Cluster,
    infos: &[NodeInfo],
    runtime: Runtime,
) -> Result<HwNic, HwError> {
    let me = setup.me;
    let channels = setup.config.channels.max(1) as usize;
    let params = ConnectParams {
        port: setup.port,
        gid_index: setup.gid_index,
        mtu: setup.mtu,
        local_psn: setup.info.psn,
        max_rd_atomic: setup.max_rd_atomic,
        timeout: setup.config.ack_timeout,
        retry_cnt: setup.config.retry_count,
        rnr_retry: 7,
    };
    let remote =
        |j: usize, qpn: u32| RemoteQp { qpn, psn: infos[j].psn, lid: infos[j].lid, gid: infos[j].gid };
    let mut peers = Vec::with_capacity(setup.size);
    let mut device_peers = Vec::with_capacity(setup.size);
    let mut device_bytes = Vec::with_capacity(setup.size);
    for (j, info) in infos.iter().enumerate() {
        if info.channels as usize != channels {
            return Err(HwError::Bootstrap(format!(
                "rank {j} uses {} channels, rank {} uses {channels}",
                info.channels, me.0
            )));
        }
        if info.len < cluster.region_size_bytes[j] {
            return Err(HwError::Bootstrap(format!(
                "rank {j} registered {} bytes but the cluster shape says {}",
                info.len, cluster.region_size_bytes[j]
            )));
        }
        peers.push(PeerRegion { addr: info.addr, rkey: info.rkey });
        device_peers.push(PeerRegion { addr: info.dm_addr, rkey: info.dm_rkey });
        device_bytes.push(info.dm_len);
    }
    let mut qps = Vec::new();
    let mut verb_qp = vec![Vec::with_capacity(channels); setup.size];
    let device = setup.device.name().to_string();
    for (j, per) in setup.verb.iter().enumerate() {
        for (c, qp) in per.iter().enumerate() {
            if j == me.index() {
                let partner = &setup.resp[c];
                qp.connect(&remote(j, partner.qpn()), &params)?;
                partner.connect(&remote(j, qp.qpn()), &params)?;
            } else {
                qp.connect(&remote(j, infos[j].verb[me.index() * channels + c]), &params)?;
            }
            let index = qps.len();
            let name = format!("n{}->n{j}/c{c} ({device} qp {:#x})", me.0, qp.qpn());
            qps.push(QpState::new(qp.clone(), index, NodeId(j as u16), name, setup.config.qp_depth));
            verb_qp[j].push(index);
        }
    }
    let mut msg_qp = vec![None; setup.size];
    for (j, qp) in setup.msg.iter().enumerate() {
        let Some(qp) = qp else { continue };
        qp.connect(&remote(j, infos[j].msg[me.index()]), &params)?;
        let index = qps.len();
        let name = format!("n{}<->n{j}/msg ({device} qp {:#x})", me.0, qp.qpn());
        qps.push(QpState::new(qp.clone(), index, NodeId(j as u16), name, setup.config.message_depth));
        msg_qp[j] = Some(index);
    }
    let node = Arc::new(NodeState {
        me,
        device: device.clone(),
        gone: (0..setup.size).map(|_| AtomicBool::new(false)).collect(),
        cluster,
        config: setup.config,
        runtime: runtime.clone(),
        region_mr: setup.region_mr,
        _device_mr: setup.device_mr,
        ssd: setup.ssd,
        device_peers,
        device_bytes,
        scratch_mr: setup.scratch_mr,
        msg_send_mr: setup.msg_send_mr,
        msg_recv_mr: setup.msg_recv_mr,
        peers,
        qps,
        verb_qp,
        msg_qp,
        send_cq: setup.send_cq,
        recv_cq: setup.recv_cq,
        inbox: Mutex::new(Inbox::default()),
        poll_lock: Mutex::new(()),
        in_flight: AtomicUsize::new(0),
        trace: crate::trace::enabled(),
        _resp: setup.resp,
    });
    for j in 0..node.cluster.node_count() {
        if j != me.index() {
            for k in 0..node.config.message_depth {
                node.post_recv_buffer(NodeId(j as u16), k);
            }
        }
    }
    // Weak: the node owns the runtime handle, so a strong poller would be a reference cycle.
    runtime.add_poller(Arc::new(WeakPoller(Arc::downgrade(&node))));
    Ok(HwNic { node, channel: 0 })
}
