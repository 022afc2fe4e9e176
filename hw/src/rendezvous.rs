//! The TCP rendezvous at rank 0: every rank sends one line describing itself, rank 0 answers
//! with all lines, and the same connections then carry named barriers.
//!
//! Wire format (text, one message per line, UTF-8, `\n`-terminated):
//!
//! ```text
//!   member → root   HELLO <rank> <size> <info>
//!   root → member   TABLE <size>            followed by <size> lines: <rank> <info>
//!   member → root   BARRIER <name>
//!   root → member   GO <name>
//! ```
//!
//! `<info>` is opaque here (the bootstrap puts QP numbers, GID and rkey in it); it must not
//! contain a newline. Every step is bounded by the caller's timeout, and a peer that closes its
//! connection, sends garbage, or claims a wrong rank/size is an error naming it.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::error::HwError;

fn err(msg: impl Into<String>) -> HwError {
    HwError::Bootstrap(msg.into())
}

struct Conn {
    rank: u32,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn new(rank: u32, stream: TcpStream) -> Result<Conn, HwError> {
        stream.set_nodelay(true).ok();
        let writer = stream.try_clone().map_err(|e| err(format!("clone socket: {e}")))?;
        Ok(Conn { rank, reader: BufReader::new(stream), writer })
    }

    fn send(&mut self, line: &str) -> Result<(), HwError> {
        debug_assert!(!line.contains('\n'));
        self.writer
            .write_all(format!("{line}\n").as_bytes())
            .map_err(|e| err(format!("send to rank {}: {e}", self.rank)))
    }

    fn recv(&mut self, deadline: Instant, what: &str) -> Result<String, HwError> {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        self.reader.get_ref().set_read_timeout(Some(left)).ok();
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Err(err(format!("rank {} closed the connection while we waited for {what}", self.rank))),
            Ok(_) => Ok(line.trim_end_matches(['\r', '\n']).to_string()),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                Err(err(format!("timed out waiting for {what} from rank {}", self.rank)))
            }
            Err(e) => Err(err(format!("reading {what} from rank {}: {e}", self.rank))),
        }
    }
}

/// The connections left open after the exchange, for barriers.
pub struct Rendezvous {
    rank: u32,
    size: u32,
    /// Root: one per other rank (ordered by rank). Member: the one to the root.
    conns: Vec<Conn>,
}

impl Rendezvous {
    /// Exchanges `info` among `size` ranks through the root listening at `addr`. Returns the
    /// open rendezvous and every rank's info, indexed by rank.
    pub fn exchange(
        rank: u32,
        size: u32,
        addr: &str,
        info: &str,
        timeout: Duration,
    ) -> Result<(Rendezvous, Vec<String>), HwError> {
        if rank >= size {
            return Err(err(format!("rank {rank} is not below size {size}")));
        }
        if info.contains('\n') {
            return Err(err("info line contains a newline"));
        }
        let deadline = Instant::now() + timeout;
        if size == 1 {
            return Ok((Rendezvous { rank, size, conns: Vec::new() }, vec![info.to_string()]));
        }
        if rank == 0 {
            Self::root(size, addr, info, deadline, timeout)
        } else {
            Self::member(rank, size, addr, info, deadline, timeout)
        }
    }

    fn root(
        size: u32,
        addr: &str,
        info: &str,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(Rendezvous, Vec<String>), HwError> {
        let listener = TcpListener::bind(addr)
            .or_else(|first| {
                // The rendezvous host name may resolve to an address of another interface (or
                // not at all inside a container): listen on every interface on that port.
                let port = addr.rsplit(':').next().unwrap_or("");
                TcpListener::bind(format!("0.0.0.0:{port}")).map_err(|_| first)
            })
            .map_err(|e| err(format!("rank 0 cannot listen on {addr}: {e}")))?;
        listener.set_nonblocking(true).map_err(|e| err(format!("listener: {e}")))?;
        let mut infos: Vec<Option<String>> = vec![None; size as usize];
        infos[0] = Some(info.to_string());
        let mut conns: Vec<Conn> = Vec::new();
        while conns.len() + 1 < size as usize {
            match listener.accept() {
                Ok((stream, peer)) => {
                    stream.set_nonblocking(false).map_err(|e| err(format!("socket: {e}")))?;
                    let mut conn = Conn::new(u32::MAX, stream)?;
                    let hello = conn.recv(deadline, "HELLO")?;
                    let mut parts = hello.splitn(4, ' ');
                    let (tag, r, s, rest) = (parts.next(), parts.next(), parts.next(), parts.next());
                    let r: u32 = r
                        .and_then(|r| r.parse().ok())
                        .ok_or_else(|| err(format!("bad HELLO from {peer}: {hello:?}")))?;
                    let s: u32 = s
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| err(format!("bad HELLO from {peer}: {hello:?}")))?;
                    if tag != Some("HELLO") || rest.is_none() {
                        return Err(err(format!("bad HELLO from {peer}: {hello:?}")));
                    }
                    if s != size {
                        return Err(err(format!(
                            "rank {r} at {peer} thinks the size is {s}, rank 0 says {size}"
                        )));
                    }
                    if r == 0 || r >= size || infos[r as usize].is_some() {
                        return Err(err(format!("rank {r} at {peer} is out of range or a duplicate")));
                    }
                    infos[r as usize] = rest.map(str::to_string);
                    conn.rank = r;
                    conns.push(conn);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() > deadline {
                        let missing: Vec<String> = (1..size)
                            .filter(|r| infos[*r as usize].is_none())
                            .map(|r| r.to_string())
                            .collect();
                        return Err(err(format!(
                            "ranks {} did not reach the rendezvous {addr} within {timeout:?}",
                            missing.join(",")
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(err(format!("accept on {addr}: {e}"))),
            }
        }
        conns.sort_by_key(|c| c.rank);
        let infos: Vec<String> = infos.into_iter().map(|i| i.unwrap_or_default()).collect();
        for conn in &mut conns {
            conn.send(&format!("TABLE {size}"))?;
            for (r, i) in infos.iter().enumerate() {
                conn.send(&format!("{r} {i}"))?;
            }
        }
        Ok((Rendezvous { rank: 0, size, conns }, infos))
    }

    fn member(
        rank: u32,
        size: u32,
        addr: &str,
        info: &str,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(Rendezvous, Vec<String>), HwError> {
        // Rank 0 may start later than we do: retry until the deadline.
        let stream = loop {
            let attempt = addr
                .to_socket_addrs()
                .map_err(|e| err(format!("cannot resolve rendezvous {addr}: {e}")))?
                .find_map(|a| TcpStream::connect_timeout(&a, Duration::from_millis(500)).ok());
            if let Some(s) = attempt {
                break s;
            }
            if Instant::now() > deadline {
                return Err(err(format!("rank {rank}: no rank 0 listening at {addr} within {timeout:?}")));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut conn = Conn::new(0, stream)?;
        conn.send(&format!("HELLO {rank} {size} {info}"))?;
        let head = conn.recv(deadline, "TABLE")?;
        if head != format!("TABLE {size}") {
            return Err(err(format!("rank {rank}: expected TABLE {size} from rank 0, got {head:?}")));
        }
        let mut infos = Vec::with_capacity(size as usize);
        for r in 0..size {
            let line = conn.recv(deadline, "TABLE line")?;
            let (got, rest) = line.split_once(' ').ok_or_else(|| err(format!("bad TABLE line {line:?}")))?;
            if got != r.to_string() {
                return Err(err(format!("TABLE line for rank {r} names rank {got}")));
            }
            infos.push(rest.to_string());
        }
        Ok((Rendezvous { rank, size, conns: vec![conn] }, infos))
    }

    pub fn rank(&self) -> u32 {
        self.rank
    }
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Returns once every rank has called `barrier(name)`; an error if any rank disconnects,
    /// names another barrier, or the timeout passes.
    pub fn barrier(&mut self, name: &str, timeout: Duration) -> Result<(), HwError> {
        let deadline = Instant::now() + timeout;
        if self.rank == 0 {
            for conn in &mut self.conns {
                let line = conn.recv(deadline, &format!("BARRIER {name}"))?;
                if line != format!("BARRIER {name}") {
                    return Err(err(format!(
                        "rank {} sent {line:?} while rank 0 waited at barrier {name}",
                        conn.rank
                    )));
                }
            }
            for conn in &mut self.conns {
                conn.send(&format!("GO {name}"))?;
            }
        } else if let Some(conn) = self.conns.first_mut() {
            conn.send(&format!("BARRIER {name}"))?;
            let line = conn.recv(deadline, &format!("GO {name}"))?;
            if line != format!("GO {name}") {
                return Err(err(format!("rank {}: expected GO {name}, got {line:?}", self.rank)));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free_addr() -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap().to_string();
        drop(l);
        a
    }

    #[test]
    fn three_ranks_exchange_lines_and_pass_barriers() {
        // Goal: every rank gets every rank's line in rank order, whatever order they start in;
        // barriers release all ranks. Method: members start before the root (they must retry).
        let addr = free_addr();
        let t = Duration::from_secs(10);
        let handles: Vec<_> = [2u32, 1, 0]
            .into_iter()
            .map(|rank| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let (mut rv, infos) =
                        Rendezvous::exchange(rank, 3, &addr, &format!("info-of-{rank} x=1"), t)?;
                    rv.barrier("connected", t)?;
                    rv.barrier("done", t)?;
                    Ok::<_, HwError>(infos)
                })
            })
            .collect();
        for h in handles {
            let infos = h.join().unwrap().unwrap();
            assert_eq!(infos, vec!["info-of-0 x=1", "info-of-1 x=1", "info-of-2 x=1"]);
        }
    }

    #[test]
    fn a_missing_rank_is_a_timeout_naming_it() {
        let addr = free_addr();
        let e = match Rendezvous::exchange(0, 3, &addr, "root", Duration::from_millis(200)) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("no member connected, yet the exchange succeeded"),
        };
        assert!(e.contains("ranks 1,2 did not reach the rendezvous"), "{e}");
    }

    #[test]
    fn a_member_without_root_gives_up() {
        let addr = free_addr();
        let e = Rendezvous::exchange(1, 2, &addr, "m", Duration::from_millis(300)).err().unwrap().to_string();
        assert!(e.contains("no rank 0 listening"), "{e}");
    }

    #[test]
    fn a_rank_that_leaves_fails_the_barrier() {
        let addr = free_addr();
        let t = Duration::from_secs(5);
        let a2 = addr.clone();
        let member = std::thread::spawn(move || {
            let (rv, _) = Rendezvous::exchange(1, 2, &a2, "m", t).unwrap();
            drop(rv); // leaves without reaching the barrier
        });
        let (mut rv, _) = Rendezvous::exchange(0, 2, &addr, "r", t).unwrap();
        member.join().unwrap();
        let e = rv.barrier("done", t).unwrap_err().to_string();
        assert!(e.contains("rank 1 closed the connection"), "{e}");
    }
}
