//! A member's side: connect to rank 0 (retrying until the deadline: it may start later, a
//! squatter may hold the port for a while), make it prove the job secret before anything about
//! this rank leaves, then prove it ourselves and read the table.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::wire::{self, Conn, SHORT_LINE};
use super::{err, hex_token, proof_parts, Met, Options, VERSION};
use crate::auth::{self, hex};
use crate::error::HwError;

/// Why one attempt failed: try again (the peer was not our rank 0, or went away before it
/// proved itself), or give up (our authenticated rank 0 said no, or disagrees).
enum Attempt {
    Retry(String),
    Fatal(HwError),
}

pub(super) fn member(
    rank: u32,
    size: u32,
    info: &str,
    o: &Options,
    deadline: Instant,
) -> Result<Met, HwError> {
    let mut log: Vec<String> = Vec::new();
    loop {
        if Instant::now() >= deadline {
            // The distinct reasons, most recent last: a squatter's refusal is worth seeing even
            // if the very last attempt found the port closed.
            let mut seen: Vec<&str> = Vec::new();
            for l in log.iter().rev() {
                if !seen.contains(&l.as_str()) && seen.len() < 3 {
                    seen.push(l);
                }
            }
            seen.reverse();
            let last = match seen.is_empty() {
                true => String::new(),
                false => format!(" ({} failed attempts: {})", log.len(), seen.join("; ")),
            };
            return Err(err(format!(
                "rank {rank}: no authenticated rank 0 at {} within {:?}{last}",
                o.addr, o.timeout
            )));
        }
        let addrs: Vec<_> = o
            .addr
            .to_socket_addrs()
            .map_err(|e| err(format!("rank {rank}: cannot resolve the rendezvous {}: {e}", o.addr)))?
            .collect();
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let Some((stream, peer)) = addrs.iter().find_map(|a| {
            TcpStream::connect_timeout(a, left.min(Duration::from_millis(500))).ok().map(|s| (s, *a))
        }) else {
            // Rank 0 may start later than we do: not worth a log line yet.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let until = (Instant::now() + o.handshake_timeout).min(deadline);
        let conn = Conn::new(format!("rank 0 at {peer}"), stream).map_err(err)?;
        match attempt(conn, rank, size, info, o, until, deadline) {
            Ok((conn, infos)) => return Ok((vec![conn], infos, log)),
            Err(Attempt::Fatal(e)) => return Err(e),
            Err(Attempt::Retry(why)) => {
                eprintln!("rendezvous (rank {rank}): {why}; retrying");
                log.push(why);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn attempt(
    mut conn: Conn,
    rank: u32,
    size: u32,
    info: &str,
    o: &Options,
    until: Instant,
    deadline: Instant,
) -> Result<(Conn, Vec<String>), Attempt> {
    let retry = Attempt::Retry;
    let nonce = auth::nonce().map_err(Attempt::Fatal)?;
    conn.send(&format!("HELLO {VERSION} {rank} {size} {} {nonce}", o.job_hash), until).map_err(retry)?;
    let line = conn.recv(until, SHORT_LINE, "CHALLENGE").map_err(retry)?;
    if let Some(why) = line.strip_prefix("REFUSED ") {
        // Not yet authenticated: it may not be our rank 0 at all.
        return Err(retry(format!(
            "{} refused us before proving the job secret: {}",
            conn.peer,
            wire::shown(why)
        )));
    }
    let t: Vec<&str> = line.split(' ').collect();
    let ["CHALLENGE", root_hash, root_nonce, proof] = t.as_slice() else {
        return Err(retry(format!(
            "{} sent {} instead of CHALLENGE: not a dmsim rank 0 ({VERSION})",
            conn.peer,
            wire::shown(&line)
        )));
    };
    if !hex_token(root_hash, 64) || !hex_token(root_nonce, 64) {
        return Err(retry(format!("{} sent a malformed CHALLENGE {}", conn.peer, wire::shown(&line))));
    }
    let (r, s) = (rank.to_string(), size.to_string());
    let nonces = [nonce.as_str(), root_nonce];
    if !o.secret.verify(&proof_parts("root", [root_hash, &o.job_hash], &r, &s, nonces), proof) {
        return Err(retry(format!(
            "{} failed authentication as rank 0 (wrong job secret, or not this job's rank 0); \
             nothing about this rank was sent to it",
            conn.peer
        )));
    }
    // Rank 0 proved the secret: answer even on a hash mismatch, so that it learns of it too.
    let mut parts = proof_parts("member", [&o.job_hash, root_hash], &r, &s, nonces);
    parts.push(info.as_bytes());
    let mine = hex(&o.secret.mac(&parts));
    conn.send(&format!("AUTH {mine} {info}"), until).map_err(retry)?;
    let fatal = |e: String| Attempt::Fatal(err(format!("rank {rank}: {e}")));
    if *root_hash != o.job_hash {
        return Err(fatal(format!(
            "job hash mismatch: {} has {root_hash}, this rank has {} (different scenario, point, \
             hardware settings or dmsim build)",
            conn.peer, o.job_hash
        )));
    }
    let head = conn.recv(deadline, SHORT_LINE, "TABLE").map_err(fatal)?;
    if let Some(why) = head.strip_prefix("REFUSED ") {
        return Err(fatal(format!("{} refused this rank: {why}", conn.peer)));
    }
    if head != format!("TABLE {size}") {
        return Err(fatal(format!("expected TABLE {size} from {}, got {}", conn.peer, wire::shown(&head))));
    }
    let mut lines = Vec::with_capacity(size as usize);
    let mut infos = Vec::with_capacity(size as usize);
    for j in 0..size {
        let line = conn.recv(deadline, o.max_info_bytes + 12, "a TABLE line").map_err(fatal)?;
        let (got, rest) = line
            .split_once(' ')
            .ok_or_else(|| fatal(format!("bad TABLE line from {}: {}", conn.peer, wire::shown(&line))))?;
        if got != j.to_string() {
            return Err(fatal(format!(
                "TABLE line for rank {j} from {} names rank {}",
                conn.peer,
                wire::shown(got)
            )));
        }
        (o.validate)(j, rest)
            .map_err(|e| fatal(format!("the table from {} has a bad line for rank {j}: {e}", conn.peer)))?;
        infos.push(rest.to_string());
        lines.push(line);
    }
    let end = conn.recv(deadline, SHORT_LINE, "END").map_err(fatal)?;
    let mut parts = proof_parts("table", [&o.job_hash, &o.job_hash], &r, &s, nonces);
    parts.extend(lines.iter().map(|l| l.as_bytes()));
    match end.strip_prefix("END ") {
        Some(p) if o.secret.verify(&parts, p) => Ok((conn, infos)),
        _ => Err(fatal(format!("the table from {} fails its proof (altered on the way?)", conn.peer))),
    }
}
