//! Verb-level tests on a real RDMA device (Soft-RoCE in the VM: `hw/vm/test.sh`).
//!
//! Goal: every verb the backend uses gives the result the NIC trait promises, and every failure
//! mode it must survive becomes an error value naming device, QP, verb and wr_id.
//! Method: two RC QPs on one device connected to each other (real RC traffic through the
//! provider and the kernel's rxe stack), one "remote" region per test; results are checked
//! against the words in the region.
//!
//! The tests need a device: they read `DMSIM_HW_DEVICE` (and `DMSIM_HW_GID_INDEX`) and return
//! early with a note when it is unset, so `cargo test --features rdma` passes on hosts with no
//! RDMA. The VM harness sets both.
#![cfg(feature = "rdma")]

use std::sync::Arc;
use std::time::Duration;

use dmsim_hw::verbs::{self, *};
use dmsim_protocols::memory::Region;

const TIMEOUT: Duration = Duration::from_secs(10);

struct Pair {
    cq: Arc<Cq>,
    a: Arc<Qp>,
    b: Option<Arc<Qp>>,
    /// Local buffer of A (results, payloads).
    local: Arc<Mr>,
    /// The region A's verbs target (registered for remote access).
    remote: Arc<Mr>,
    next_wr_id: u64,
    /// Completions polled while waiting for another one (RECV and SEND completions share the
    /// CQ and may arrive in either order).
    seen: Vec<Completion>,
}

fn device() -> Option<(String, Option<u8>)> {
    let dev = std::env::var("DMSIM_HW_DEVICE").ok()?;
    let gid = std::env::var("DMSIM_HW_GID_INDEX").ok().and_then(|g| g.parse().ok());
    Some((dev, gid))
}

fn pair_with(timeout: u8, retry_cnt: u8) -> Option<Pair> {
    let Some((dev, gid_index)) = device() else {
        eprintln!("note: DMSIM_HW_DEVICE unset; skipping real-verbs test");
        return None;
    };
    let ctx = Context::open(Some(&dev)).expect("open device");
    let port = ctx.port(1).expect("port");
    assert!(port.active, "port 1 of {dev} is not active");
    let pd = Pd::new(&ctx).unwrap();
    let cq = Cq::new(&ctx, 256).unwrap();
    let caps = QpCaps { max_send_wr: 64, max_recv_wr: 16 };
    let a = Qp::new_rc(&pd, &cq, &cq, caps).unwrap();
    let b = Qp::new_rc(&pd, &cq, &cq, caps).unwrap();
    let gid = match gid_index {
        Some(i) => ctx.gid(1, i).unwrap(),
        None => [0; 16],
    };
    let params = |psn| ConnectParams {
        port: 1,
        gid_index,
        mtu: port.active_mtu,
        local_psn: psn,
        max_rd_atomic: 16,
        timeout,
        retry_cnt,
        rnr_retry: 7,
    };
    a.connect(&RemoteQp { qpn: b.qpn(), psn: 200, lid: port.lid, gid }, &params(100)).unwrap();
    b.connect(&RemoteQp { qpn: a.qpn(), psn: 100, lid: port.lid, gid }, &params(200)).unwrap();
    let local = Mr::register(&pd, Arc::new(Region::new(4096)), Access::Local).unwrap();
    let remote = Mr::register(&pd, Arc::new(Region::new(4096)), Access::Remote).unwrap();
    Some(Pair { cq, a, b: Some(b), local, remote, next_wr_id: 1, seen: Vec::new() })
}

impl Pair {
    fn rbuf(&self, offset: u64) -> RemoteBuf {
        RemoteBuf { addr: self.remote.addr() + offset, rkey: self.remote.rkey() }
    }
    fn wr(&mut self, op: SendOp, local_offset: u64, len: u32, signaled: bool) -> SendWr {
        let wr_id = self.next_wr_id;
        self.next_wr_id += 1;
        SendWr { wr_id, op, local: LocalBuf::new(&self.local, local_offset, len).unwrap(), signaled }
    }
    /// Posts `wrs` (last one signaled) and waits for the signaled completion.
    fn run(&mut self, wrs: &[SendWr]) -> Result<Completion, dmsim_hw::HwError> {
        self.a.post_send(wrs)?;
        let last = wrs.last().unwrap();
        let mut others = Vec::new();
        let c = verbs::wait_completion(&self.cq, &self.a, last.op.name(), last.wr_id, TIMEOUT, &mut others)?;
        for o in others {
            if o.qp_num == self.a.qpn() {
                verbs::check(&o, &self.a, "earlier WR in batch")?;
            } else {
                self.seen.push(o);
            }
        }
        verbs::check(&c, &self.a, last.op.name())?;
        Ok(c)
    }
    fn one(&mut self, op: SendOp, local_offset: u64, len: u32) -> Result<Completion, dmsim_hw::HwError> {
        let wr = self.wr(op, local_offset, len, true);
        self.run(&[wr])
    }
}

#[test]
fn write_then_read_round_trips() {
    let Some(mut p) = pair_with(14, 7) else { return };
    p.local.region().write_words(0, &[11, 22, 33, 44]);
    p.one(SendOp::Write(p.rbuf(64)), 0, 32).unwrap();
    let mut words = [0; 4];
    p.remote.region().read_words(64, &mut words);
    assert_eq!(words, [11, 22, 33, 44], "WRITE landed in the remote region");
    p.remote.region().write_words(1024, &[7; 16]);
    p.one(SendOp::Read(p.rbuf(1024)), 256, 128).unwrap();
    let mut back = [0; 16];
    p.local.region().read_words(256, &mut back);
    assert_eq!(back, [7; 16], "READ copied 128 bytes");
}

#[test]
fn cas_returns_old_value_whether_or_not_it_swaps() {
    let Some(mut p) = pair_with(14, 7) else { return };
    p.remote.region().store(8, 5);
    p.one(SendOp::Cas { remote: p.rbuf(8), compare: 5, swap: 9 }, 0, 8).unwrap();
    assert_eq!(p.local.region().load(0), 5, "successful CAS returns the old value");
    assert_eq!(p.remote.region().load(8), 9);
    p.one(SendOp::Cas { remote: p.rbuf(8), compare: 5, swap: 1 }, 0, 8).unwrap();
    assert_eq!(p.local.region().load(0), 9, "failed CAS returns the current value");
    assert_eq!(p.remote.region().load(8), 9, "failed CAS leaves the word alone");
}

#[test]
fn faa_adds_and_wraps() {
    let Some(mut p) = pair_with(14, 7) else { return };
    p.remote.region().store(16, u64::MAX - 1);
    p.one(SendOp::Faa { remote: p.rbuf(16), add: 3 }, 8, 8).unwrap();
    assert_eq!(p.local.region().load(8), u64::MAX - 1);
    assert_eq!(p.remote.region().load(16), 1, "FAA wraps");
    for _ in 0..100 {
        p.one(SendOp::Faa { remote: p.rbuf(16), add: 1 }, 8, 8).unwrap();
    }
    assert_eq!(p.remote.region().load(16), 101);
}

#[test]
fn doorbell_batch_runs_in_order_with_one_signaled_completion() {
    // SELCC's acquire shape: CAS the latch, then READ the line, in one chained post; and the
    // release shape: WRITE the line back, then FAA the latch.
    let Some(mut p) = pair_with(14, 7) else { return };
    p.remote.region().write_words(128, &[1, 2, 3, 4, 5, 6, 7, 8]);
    let cas = p.wr(SendOp::Cas { remote: p.rbuf(0), compare: 0, swap: 42 }, 0, 8, false);
    let read = p.wr(SendOp::Read(p.rbuf(128)), 64, 64, true);
    p.run(&[cas, read]).unwrap();
    assert_eq!(p.local.region().load(0), 0);
    assert_eq!(p.remote.region().load(0), 42);
    let mut line = [0; 8];
    p.local.region().read_words(64, &mut line);
    assert_eq!(line, [1, 2, 3, 4, 5, 6, 7, 8]);

    p.local.region().write_words(64, &[9; 8]);
    let write = p.wr(SendOp::Write(p.rbuf(128)), 64, 64, false);
    let faa = p.wr(SendOp::Faa { remote: p.rbuf(0), add: u64::MAX - 41 }, 8, 8, false);
    // Per-QP order: a READ after the WRITE sees it.
    let check = p.wr(SendOp::Read(p.rbuf(128)), 512, 64, true);
    p.run(&[write, faa, check]).unwrap();
    assert_eq!(p.remote.region().load(0), 0, "FAA released the latch");
    p.local.region().read_words(512, &mut line);
    assert_eq!(line, [9; 8], "READ after WRITE on one QP sees the WRITE");
}

#[test]
fn send_recv_delivers_bytes() {
    let Some(mut p) = pair_with(14, 7) else { return };
    let b = p.b.clone().unwrap();
    let recv_mr = p.remote.clone();
    b.post_recv(999, &LocalBuf::new(&recv_mr, 2048, 256).unwrap()).unwrap();
    p.local.region().write_words(0, &[0xfeed, 0xbeef]);
    p.one(SendOp::Send, 0, 16).unwrap();
    let c = match p.seen.iter().position(|c| c.wr_id == 999) {
        Some(i) => p.seen.remove(i),
        None => verbs::wait_completion(&p.cq, &b, "RECV", 999, TIMEOUT, &mut Vec::new()).unwrap(),
    };
    verbs::check(&c, &b, "RECV").unwrap();
    assert_eq!(c.byte_len, 16);
    assert_eq!(c.qp_num, b.qpn());
    assert_eq!(recv_mr.region().load(2048), 0xfeed);
    assert_eq!(recv_mr.region().load(2056), 0xbeef);
}

#[test]
fn bad_rkey_is_an_error_value_naming_the_verb() {
    let Some(mut p) = pair_with(14, 7) else { return };
    let bad = RemoteBuf { addr: p.remote.addr(), rkey: p.remote.rkey() ^ 0x5a5a_0000 };
    let err = p.one(SendOp::Read(bad), 0, 8).unwrap_err();
    let msg = err.to_string();
    eprintln!("bad rkey -> {msg}");
    assert!(msg.contains("READ") && msg.contains("qp") && msg.contains("wr_id"), "{msg}");
    // The QP is now in the error state: further verbs are flushed, again as errors.
    let err = p.one(SendOp::Faa { remote: p.rbuf(0), add: 1 }, 0, 8).unwrap_err();
    eprintln!("after error -> {err}");
}

#[test]
fn out_of_bounds_remote_address_is_an_error() {
    let Some(mut p) = pair_with(14, 7) else { return };
    let past_end = p.rbuf(4096);
    let err = p.one(SendOp::Write(past_end), 0, 64).unwrap_err();
    eprintln!("out of bounds -> {err}");
    assert!(err.to_string().contains("WRITE"));
}

#[test]
fn local_buffer_outside_its_region_is_refused_before_posting() {
    let Some(p) = pair_with(14, 7) else { return };
    let err = LocalBuf::new(&p.local, 4090, 8).err().expect("out of range");
    assert!(err.to_string().contains("outside registered region"), "{err}");
}

#[test]
fn peer_that_went_away_gives_an_error_not_a_hang() {
    // Method: destroy B, then READ from A. Nobody answers, so the requester retries and gives up
    // after retry_cnt timeouts (4.096 µs · 2^10 ≈ 4 ms each, 2 retries): a RETRY_EXC error well
    // inside the 10 s bound.
    let Some(mut p) = pair_with(10, 2) else { return };
    drop(p.b.take());
    let start = std::time::Instant::now();
    let err = p.one(SendOp::Read(p.rbuf(0)), 0, 8).unwrap_err();
    eprintln!("peer gone -> {err} after {:?}", start.elapsed());
    assert!(matches!(err, dmsim_hw::HwError::Verb { .. }), "{err}");
    assert!(err.to_string().to_lowercase().contains("retry"), "{err}");
}

#[test]
fn a_completion_that_never_comes_times_out() {
    // wait_completion on a wr_id that was never posted must end with a Timeout value.
    let Some(p) = pair_with(14, 7) else { return };
    let mut others = Vec::new();
    let err = verbs::wait_completion(&p.cq, &p.a, "READ", 0xdead, Duration::from_millis(50), &mut others)
        .unwrap_err();
    assert!(matches!(err, dmsim_hw::HwError::Timeout { .. }), "{err}");
}
