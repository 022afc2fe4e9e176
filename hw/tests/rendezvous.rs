//! The rendezvous on loopback against the attacks of issue 19: an impostor, a fake root, a
//! wrong job hash, a slow-loris client, a huge line, a client that never reads, 200 idle
//! connections, malformed UTF-8, a truncated HELLO, random garbage. Each is refused with a
//! clear error (the root's log, or the attacker's own error) while the real ranks complete.
//! No RDMA needed: the info lines are plain text here.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dmsim_hw::auth::Secret;
use dmsim_hw::rendezvous::{Options, Rendezvous};
use dmsim_hw::HwError;

const HASH: &str = "00112233445566778899aabbccddeeff";

fn secret(s: &str) -> Secret {
    Secret::new(&format!("test-secret-of-sixteen-{s}"), "test").unwrap()
}

fn free_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap().to_string();
    drop(l);
    a
}

fn opts(addr: &str) -> Options {
    let mut o = Options::new(addr, secret("job"), HASH, Duration::from_secs(15));
    o.handshake_timeout = Duration::from_secs(1);
    o
}

type Outcome = Result<(Rendezvous, Vec<String>), HwError>;

fn spawn_rank(rank: u32, size: u32, o: Options) -> JoinHandle<Outcome> {
    std::thread::spawn(move || {
        let (mut rv, infos) = Rendezvous::exchange(rank, size, &format!("info-of-{rank} rkey=0x5ecre7"), &o)?;
        rv.barrier("connected", Duration::from_secs(10))?;
        Ok((rv, infos))
    })
}

/// Every rank of `handles` (rank order) completed with every rank's line.
fn all_complete(handles: Vec<JoinHandle<Outcome>>) -> Vec<Rendezvous> {
    let size = handles.len();
    let want: Vec<String> = (0..size).map(|r| format!("info-of-{r} rkey=0x5ecre7")).collect();
    handles
        .into_iter()
        .enumerate()
        .map(|(r, h)| {
            let (rv, infos) = h.join().unwrap().unwrap_or_else(|e| panic!("rank {r} failed: {e}"));
            assert_eq!(infos, want);
            rv
        })
        .collect()
}

/// Connects to `addr`, retrying until something listens.
fn raw(addr: &str) -> TcpStream {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return s,
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("nothing listens at {addr}: {e}"),
        }
    }
}

/// Everything the peer sends until it closes (or 5 s pass).
fn drain(mut s: TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

fn logged(rv: &Rendezvous, what: &str) -> bool {
    rv.log().iter().any(|l| l.contains(what))
}

/// A 3-rank job where an attacker acts first: `attack` runs once the root listens, then the
/// real members start (after `attack` returned if `after`, else 200 ms into it, so that they
/// meet the root while the attack goes on); every real rank must complete. Returns the root's
/// log and what `attack` returned.
fn with_attack<T: Send + 'static>(
    after: bool,
    attack: impl FnOnce(String) -> T + Send + 'static,
) -> (Vec<String>, T) {
    let addr = free_addr();
    let root = spawn_rank(0, 3, opts(&addr));
    let a = addr.clone();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let attacker = std::thread::spawn(move || {
        let t = attack(a);
        let _ = done_tx.send(());
        t
    });
    match after {
        true => done_rx.recv().unwrap(),
        false => std::thread::sleep(Duration::from_millis(200)),
    }
    let members = [1, 2].map(|r| spawn_rank(r, 3, opts(&addr)));
    let ranks = all_complete([root].into_iter().chain(members).collect());
    (ranks[0].log().to_vec(), attacker.join().unwrap())
}

#[test]
fn three_ranks_exchange_lines_and_pass_barriers_whatever_the_start_order() {
    let addr = free_addr();
    let handles: Vec<_> = [2u32, 1, 0].into_iter().map(|r| spawn_rank(r, 3, opts(&addr))).collect();
    let mut handles: Vec<_> = handles.into_iter().rev().collect(); // rank order
    let ranks = all_complete(std::mem::take(&mut handles));
    assert!(ranks[0].log().is_empty(), "nothing to refuse: {:?}", ranks[0].log());
}

#[test]
fn a_missing_rank_is_a_timeout_naming_it() {
    let mut o = opts(&free_addr());
    o.timeout = Duration::from_millis(300);
    let e = Rendezvous::exchange(0, 3, "root", &o).err().unwrap().to_string();
    assert!(e.contains("ranks 1,2 did not join the rendezvous"), "{e}");
}

#[test]
fn a_member_without_root_gives_up() {
    let mut o = opts(&free_addr());
    o.timeout = Duration::from_millis(300);
    let e = Rendezvous::exchange(1, 2, "m", &o).err().unwrap().to_string();
    assert!(e.contains("no authenticated rank 0"), "{e}");
}

#[test]
fn a_rank_that_leaves_fails_the_barrier() {
    let addr = free_addr();
    let o = opts(&addr);
    let member = std::thread::spawn(move || {
        let (rv, _) = Rendezvous::exchange(1, 2, "m", &o).unwrap();
        drop(rv); // leaves without reaching the barrier
    });
    let (mut rv, _) = Rendezvous::exchange(0, 2, "r", &opts(&addr)).unwrap();
    member.join().unwrap();
    let e = rv.barrier("done", Duration::from_secs(5)).unwrap_err().to_string();
    assert!(e.contains("rank 1 at") && e.contains("closed the connection"), "{e}");
}

#[test]
fn an_impostor_without_the_secret_gets_no_rank_and_no_info() {
    // A member of another job (wrong secret) claims rank 1, and a raw client tries a forged
    // proof; neither is admitted, and neither sees rank 0's info line.
    let (log, (wrong, forged)) = with_attack(true, |addr| {
        let mut o = opts(&addr);
        o.secret = secret("other-job");
        o.timeout = Duration::from_secs(1);
        let wrong = Rendezvous::exchange(1, 3, "impostor", &o).err().map(|e| e.to_string());
        let mut s = raw(&addr);
        s.write_all(format!("HELLO dmsim-rdv/1 1 3 {HASH} {}\n", "ab".repeat(16)).as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        s.write_all(format!("AUTH {} impostor-info\n", "00".repeat(32)).as_bytes()).unwrap();
        (wrong, drain(s))
    });
    let wrong = wrong.expect("the impostor must not complete");
    assert!(wrong.contains("failed authentication as rank 0"), "{wrong}");
    assert!(log.iter().any(|l| l.contains("claiming rank 1: failed authentication")), "{log:?}");
    assert!(forged.starts_with("CHALLENGE ") && !forged.contains("info-of-0"), "{forged}");
    assert!(forged.contains("REFUSED") && forged.contains("failed authentication"), "{forged}");
}

#[test]
fn a_fake_root_learns_nothing_and_the_member_waits_for_the_real_one() {
    // A fake root squats on the port first, answers with a made-up proof and records what it
    // gets, then leaves; the member refuses it, retries, and completes with the real root.
    let addr = free_addr();
    let squatter = TcpListener::bind(&addr).unwrap();
    let member = spawn_rank(1, 2, opts(&addr));
    let (mut s, _) = squatter.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut hello = [0u8; 512];
    let n = s.read(&mut hello).unwrap();
    s.write_all(format!("CHALLENGE {HASH} {} {}\n", "cd".repeat(16), "ef".repeat(32)).as_bytes()).unwrap();
    let rest = drain(s);
    let seen = format!("{}{rest}", String::from_utf8_lossy(&hello[..n]));
    assert!(seen.starts_with("HELLO dmsim-rdv/1 1 2 "), "{seen}");
    assert!(!seen.contains("info-of-1") && !seen.contains("5ecre7"), "the fake root got the info: {seen}");
    drop(squatter);
    let root = spawn_rank(0, 2, opts(&addr));
    let ranks = all_complete(vec![root, member]);
    assert!(logged(&ranks[1], "failed authentication as rank 0"), "{:?}", ranks[1].log());
}

#[test]
fn a_root_with_another_secret_is_refused_by_every_member() {
    // The fake root speaks the protocol but holds another job's secret: it cannot prove
    // itself, gets nobody's info, and times out; the members then meet the real root.
    let addr = free_addr();
    let mut fake = opts(&addr);
    fake.secret = secret("other-job");
    fake.timeout = Duration::from_millis(1500);
    let fake = std::thread::spawn(move || {
        Rendezvous::exchange(0, 3, "fake-root", &fake).err().map(|e| e.to_string())
    });
    std::thread::sleep(Duration::from_millis(100));
    let members = [1, 2].map(|r| spawn_rank(r, 3, opts(&addr)));
    let fake_error = fake.join().unwrap().expect("the fake root must not complete");
    assert!(fake_error.contains("ranks 1,2 did not join"), "{fake_error}");
    let root = spawn_rank(0, 3, opts(&addr));
    let ranks = all_complete([root].into_iter().chain(members).collect());
    assert!(logged(&ranks[1], "failed authentication as rank 0"), "{:?}", ranks[1].log());
}

#[test]
fn a_wrong_job_hash_ends_both_sides_naming_both_hashes() {
    let addr = free_addr();
    let mut other = opts(&addr);
    other.job_hash = "ffffffffffffffffffffffffffffffff".into();
    let start = Instant::now();
    let member =
        std::thread::spawn(move || Rendezvous::exchange(1, 2, "m", &other).err().map(|e| e.to_string()));
    let root = Rendezvous::exchange(0, 2, "r", &opts(&addr)).err().map(|e| e.to_string());
    let member = member.join().unwrap();
    for e in [root, member] {
        let e = e.expect("a job hash mismatch must fail");
        assert!(e.contains("job hash mismatch") && e.contains(HASH) && e.contains("ffffffff"), "{e}");
    }
    assert!(start.elapsed() < Duration::from_secs(5), "a mismatch must end the exchange at once");
}

#[test]
fn a_slow_loris_is_dropped_at_its_deadline_while_the_real_ranks_complete() {
    // One byte every 100 ms never completes a HELLO: the handshake deadline (1 s here) is not
    // extended by them. The real ranks complete meanwhile.
    let start = Instant::now();
    let (_, told) = with_attack(false, move |addr| {
        let mut s = raw(&addr);
        s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let mut told = Vec::new();
        for b in format!("HELLO dmsim-rdv/1 1 3 {HASH} ").bytes() {
            let _ = s.write_all(&[b]);
            let mut buf = [0u8; 512];
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => told.extend_from_slice(&buf[..n]),
                Err(_) => {} // the read timeout is the drip's pause
            }
        }
        (String::from_utf8_lossy(&told).into_owned(), start.elapsed())
    });
    let (told, at) = told;
    assert!(told.contains("REFUSED") && told.contains("timed out waiting for HELLO"), "{told}");
    assert!(at < Duration::from_secs(3), "dropped only after {at:?}");
}

#[test]
fn a_huge_line_is_cut_at_the_cap_on_both_sides() {
    // To the root: 64 MiB without a newline.
    let (log, ()) = with_attack(true, |addr| {
        let mut s = raw(&addr);
        let chunk = vec![b'A'; 1 << 20];
        for _ in 0..64 {
            if s.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    assert!(log.iter().any(|l| l.contains("HELLO from") && l.contains("longer than 512 bytes")), "{log:?}");
    // To a member, from a fake root.
    let addr = free_addr();
    let squatter = TcpListener::bind(&addr).unwrap();
    let member = spawn_rank(1, 2, opts(&addr));
    let (mut s, _) = squatter.accept().unwrap();
    let chunk = vec![b'B'; 1 << 20];
    for _ in 0..64 {
        if s.write_all(&chunk).is_err() {
            break;
        }
    }
    drop((s, squatter));
    let ranks = all_complete(vec![spawn_rank(0, 2, opts(&addr)), member]);
    assert!(logged(&ranks[1], "CHALLENGE from rank 0 at") && logged(&ranks[1], "longer than 512 bytes"));
}

#[test]
fn a_client_that_never_reads_nor_answers_is_dropped() {
    let (log, told) = with_attack(false, |addr| {
        let mut s = raw(&addr);
        s.write_all(format!("HELLO dmsim-rdv/1 2 3 {HASH} {}\n", "ab".repeat(16)).as_bytes()).unwrap();
        std::thread::sleep(Duration::from_secs(2)); // never reads, never sends AUTH
        drain(s)
    });
    let _ = log;
    assert!(told.starts_with("CHALLENGE ") && told.contains("REFUSED"), "{told}");
    assert!(told.contains("claiming rank 2: timed out waiting for AUTH"), "{told}");
}

#[test]
fn two_hundred_idle_connections_do_not_keep_the_real_ranks_out() {
    let start = Instant::now();
    let (log, idle) = with_attack(true, |addr| {
        let first = raw(&addr);
        let mut idle = vec![first];
        idle.extend((1..200).filter_map(|_| TcpStream::connect(&addr).ok()));
        idle
    });
    assert!(idle.len() >= 150, "only {} idle connections opened", idle.len());
    assert!(log.iter().any(|l| l.contains("handshakes already pending")), "{log:?}");
    assert!(log.iter().any(|l| l.contains("timed out waiting for HELLO")), "{log:?}");
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
}

#[test]
fn malformed_utf8_and_a_truncated_hello_are_dropped() {
    let (log, ()) = with_attack(true, |addr| {
        let mut s = raw(&addr);
        s.write_all(b"HELLO dmsim-rdv/1 1 3 \xc3\x28 abab\n").unwrap();
        drain(s);
        let mut s = raw(&addr);
        s.write_all(format!("HELLO dmsim-rdv/1 2 3 {HASH}").as_bytes()).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        drain(s);
    });
    assert!(log.iter().any(|l| l.contains("byte 0xc3 at offset 22")), "{log:?}");
    assert!(log.iter().any(|l| l.contains("in the middle of HELLO (truncated")), "{log:?}");
}

#[test]
fn random_garbage_connections_are_dropped_without_ending_the_job() {
    // 100 connections of random bytes (some with newlines, some HELLO-like prefixes).
    let (log, ()) = with_attack(true, |addr| {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..100 {
            let mut s = raw(&addr);
            let len = (next() % 700) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if i % 3 == 0 {
                bytes.splice(0..0, format!("HELLO dmsim-rdv/1 {} 3 {HASH} ", i % 4).bytes());
            }
            let _ = s.write_all(&bytes);
            let _ = s.shutdown(Shutdown::Write);
            drain(s); // until rank 0 has dropped it
        }
    });
    assert!(log.len() >= 50, "{} of 100 garbage connections logged: {log:?}", log.len());
}

#[test]
fn an_authenticated_rank_with_a_bad_info_line_ends_the_job_naming_it() {
    // The root validates each line before relaying it (here: lines must start with "info-").
    let addr = free_addr();
    let strict = |addr: &str| {
        let mut o = opts(addr);
        o.validate = Arc::new(|rank, line| match line.starts_with("info-") {
            true => Ok(()),
            false => Err(format!("rank {rank}: not an info line")),
        });
        o
    };
    let o = strict(&addr);
    let member =
        std::thread::spawn(move || Rendezvous::exchange(1, 2, "gid=zz", &o).err().map(|e| e.to_string()));
    let root = Rendezvous::exchange(0, 2, "info-of-0", &strict(&addr)).err().map(|e| e.to_string());
    let root = root.expect("the root must refuse the line");
    assert!(
        root.contains("rank 1 at 127.0.0.1:") && root.contains("bad info line: rank 1: not an info line"),
        "{root}"
    );
    let member = member.join().unwrap().expect("the member must be told");
    assert!(member.contains("refused this rank") && member.contains("not an info line"), "{member}");
}

#[test]
fn rank_0_binds_exactly_where_told_or_fails_clearly() {
    for addr in ["192.0.2.1:18515", "no-such-host.invalid:18515"] {
        let mut o = opts(addr);
        o.timeout = Duration::from_millis(300);
        let e = Rendezvous::exchange(0, 2, "r", &o).err().expect("must not bind elsewhere").to_string();
        assert!(e.contains("rank 0 cannot") && e.contains(addr.split(':').next().unwrap()), "{e}");
    }
    // With --rendezvous-listen-all it listens on every interface at that port.
    let port = free_addr().rsplit_once(':').unwrap().1.to_string();
    let mut o = opts(&format!("192.0.2.1:{port}"));
    o.listen_all = true;
    let root = spawn_rank(0, 2, o);
    let member = spawn_rank(1, 2, opts(&format!("127.0.0.1:{port}")));
    all_complete(vec![root, member]);
}
