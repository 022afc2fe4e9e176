//! Rank 0's side: listen exactly where told, read handshakes concurrently (each on its own
//! thread under its own short deadline), take a rank only from a member that proved the job
//! secret, validate its info line, then send every member the table.

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::wire::{self, Conn, SHORT_LINE};
use super::{err, proof_parts, Hello, Met, Options};
use crate::auth::{self, hex};
use crate::error::HwError;

/// Drops logged one by one; after that only every 100th (a flood must not flood the log).
const LOG_EACH: usize = 20;

/// What a handshake thread reports to the root's loop.
enum Event {
    Joined {
        rank: u32,
        conn: Conn,
        info: String,
        nonces: (String, String),
    },
    /// A connection dropped without harm to the job (malformed, slow, unauthenticated).
    Dropped(String),
    /// An authenticated member that disagrees: the launch is broken.
    Fatal(String),
}

/// Listens on `addr` exactly (every resolved address is tried), or on every interface at its
/// port when `all` is set.
pub(super) fn listen(addr: &str, all: bool) -> Result<TcpListener, HwError> {
    let (host, port) =
        addr.rsplit_once(':').ok_or_else(|| err(format!("rendezvous {addr:?}: expected HOST:PORT")))?;
    let port: u16 = port.parse().map_err(|_| err(format!("rendezvous {addr:?}: bad port {port:?}")))?;
    if all {
        return TcpListener::bind(("::", port))
            .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
            .map_err(|e| err(format!("rank 0 cannot listen on every interface at port {port}: {e}")));
    }
    let resolved: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| err(format!("rank 0 cannot resolve the rendezvous host {host:?} ({addr}): {e}")))?
        .collect();
    let mut last = None;
    for a in &resolved {
        match TcpListener::bind(a) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(format!("{a}: {e}")),
        }
    }
    Err(err(format!(
        "rank 0 cannot listen on the rendezvous {addr} ({}): rank 0 must run on the host it names; \
         pass --rendezvous-listen-all to listen on every interface instead",
        last.unwrap_or_else(|| "it resolves to no address".into())
    )))
}

pub(super) fn root(size: u32, info: &str, o: &Options, deadline: Instant) -> Result<Met, HwError> {
    let listener = listen(&o.addr, o.listen_all)?;
    listener.set_nonblocking(true).map_err(|e| err(format!("listener on {}: {e}", o.addr)))?;
    let (tx, rx) = mpsc::channel::<Event>();
    let pending = Arc::new(AtomicUsize::new(0));
    let shared = Arc::new(o.clone());
    let mut infos: Vec<Option<String>> = vec![None; size as usize];
    infos[0] = Some(info.to_string());
    let mut joined: Vec<(u32, Conn, (String, String))> = Vec::new();
    let mut log: Vec<String> = Vec::new();
    let mut drops = 0usize;
    let mut drop_line = |log: &mut Vec<String>, why: String| {
        drops += 1;
        if drops <= LOG_EACH || drops.is_multiple_of(100) {
            eprintln!(
                "rendezvous (rank 0): dropped {why}{}",
                if drops == LOG_EACH { " (logging every 100th from now)" } else { "" }
            );
        }
        if log.len() == 4 * LOG_EACH {
            log.remove(0);
        }
        log.push(why);
    };
    while joined.len() + 1 < size as usize {
        while let Ok(event) = rx.try_recv() {
            match event {
                Event::Joined { rank, conn, info, nonces } => {
                    if let Some((_, first, _)) = joined.iter().find(|(r, _, _)| *r == rank) {
                        return Err(err(format!(
                            "rank {rank} joined twice: first {}, again from {} (two processes with one rank?)",
                            first.peer, conn.peer
                        )));
                    }
                    infos[rank as usize] = Some(info);
                    joined.push((rank, conn, nonces));
                }
                Event::Dropped(why) => drop_line(&mut log, why),
                Event::Fatal(why) => return Err(err(why)),
            }
        }
        if joined.len() + 1 == size as usize {
            break;
        }
        if Instant::now() >= deadline {
            let missing: Vec<String> =
                (1..size).filter(|r| infos[*r as usize].is_none()).map(|r| r.to_string()).collect();
            let dropped = match log.last() {
                Some(last) => format!("; {drops} connection(s) were dropped, the last: {last}"),
                None => String::new(),
            };
            return Err(err(format!(
                "ranks {} did not join the rendezvous at {} within {:?}{dropped}",
                missing.join(","),
                o.addr,
                o.timeout
            )));
        }
        match listener.accept() {
            Ok((stream, peer)) => {
                if pending.load(Ordering::Acquire) >= o.max_pending {
                    refuse_busy(stream, o.max_pending);
                    drop_line(&mut log, format!("{peer}: {} handshakes already pending", o.max_pending));
                    continue;
                }
                pending.fetch_add(1, Ordering::AcqRel);
                let (tx, pending, o) = (tx.clone(), pending.clone(), shared.clone());
                let slot = pending.clone();
                let spawned =
                    std::thread::Builder::new().name(format!("rendezvous {peer}")).spawn(move || {
                        let until = (Instant::now() + o.handshake_timeout).min(deadline);
                        let event = handshake(stream, peer, size, &o, until);
                        // Report before freeing the slot, so the drop is logged before whoever
                        // takes the slot joins.
                        let _ = tx.send(event); // the root may have finished: nothing to tell
                        pending.fetch_sub(1, Ordering::AcqRel);
                    });
                if let Err(e) = spawned {
                    // The connection went with the closure: it is closed. Not the job's end.
                    slot.fetch_sub(1, Ordering::AcqRel);
                    drop_line(&mut log, format!("{peer}: no thread to read its handshake: {e}"));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => {
                // Out of descriptors, a connection reset before accept: not the job's end.
                drop_line(&mut log, format!("accept on {}: {e}", o.addr));
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    drop(listener);
    joined.sort_by_key(|(r, _, _)| *r);
    let infos: Vec<String> = infos.into_iter().map(Option::unwrap_or_default).collect();
    let lines: Vec<String> = infos.iter().enumerate().map(|(r, i)| format!("{r} {i}")).collect();
    let mut conns = Vec::with_capacity(joined.len());
    for (rank, mut conn, (nm, nr)) in joined {
        let (r, s) = (rank.to_string(), size.to_string());
        let mut parts = proof_parts("table", [&o.job_hash, &o.job_hash], &r, &s, [&nm, &nr]);
        parts.extend(lines.iter().map(|l| l.as_bytes()));
        let proof = hex(&o.secret.mac(&parts));
        let send = |conn: &mut Conn| -> Result<(), String> {
            conn.send(&format!("TABLE {size}"), deadline)?;
            for l in &lines {
                conn.send(l, deadline)?;
            }
            conn.send(&format!("END {proof}"), deadline)
        };
        send(&mut conn).map_err(|e| err(format!("sending the table: {e}")))?;
        conns.push(conn);
    }
    Ok((conns, infos, log))
}

/// The REFUSED line telling a peer why: printable ASCII and within the control-line cap (the
/// reason may quote what the peer sent).
fn refusal(why: &str) -> String {
    let why: String = why.chars().take(400).map(|c| if (' '..='~').contains(&c) { c } else { '?' }).collect();
    format!("REFUSED {why}")
}

fn refuse_busy(stream: TcpStream, max: usize) {
    stream.set_nonblocking(true).ok();
    let _ = std::io::Write::write_all(
        &mut &stream,
        format!("REFUSED rank 0 has {max} handshakes pending; retry\n").as_bytes(),
    );
}

/// One connection from HELLO to AUTH, before `until`; a dropped peer is told why (briefly:
/// it may not read).
fn handshake(stream: TcpStream, peer: SocketAddr, size: u32, o: &Options, until: Instant) -> Event {
    let mut conn = None;
    let event = shake(stream, peer, size, o, until, &mut conn);
    if let (Event::Dropped(why), Some(conn)) = (&event, conn.as_mut()) {
        let _ = conn.send(&refusal(why), Instant::now() + Duration::from_millis(100));
    }
    event
}

fn shake(
    stream: TcpStream,
    peer: SocketAddr,
    size: u32,
    o: &Options,
    until: Instant,
    slot: &mut Option<Conn>,
) -> Event {
    if let Err(e) = stream.set_nonblocking(false) {
        return Event::Dropped(format!("{peer}: {e}"));
    }
    let conn = match Conn::new(peer.to_string(), stream) {
        Ok(c) => slot.insert(c),
        Err(e) => return Event::Dropped(e),
    };
    let hello = match conn.recv(until, SHORT_LINE, "HELLO").and_then(|l| Hello::parse(&l)) {
        Ok(h) => h,
        Err(e) => return Event::Dropped(format!("{peer}: {e}")),
    };
    let nonce = match auth::nonce() {
        Ok(n) => n,
        Err(e) => return Event::Fatal(e.to_string()),
    };
    let (r, s) = (hello.rank.to_string(), hello.size.to_string());
    let nonces = [hello.nonce.as_str(), nonce.as_str()];
    let proof = hex(&o.secret.mac(&proof_parts("root", [&o.job_hash, &hello.job_hash], &r, &s, nonces)));
    if let Err(e) = conn.send(&format!("CHALLENGE {} {nonce} {proof}", o.job_hash), until) {
        return Event::Dropped(format!("{peer} claiming rank {r}: {e}"));
    }
    let line = match conn.recv(until, o.max_info_bytes + 100, "AUTH") {
        Ok(l) => l,
        Err(e) => return Event::Dropped(format!("{peer} claiming rank {r}: {e}")),
    };
    let (proof, info) = match line.strip_prefix("AUTH ").and_then(|l| l.split_once(' ')) {
        Some(x) => x,
        None => {
            return Event::Dropped(format!(
                "{peer} claiming rank {r}: expected AUTH, got {}",
                wire::shown(&line)
            ))
        }
    };
    let mut parts = proof_parts("member", [&hello.job_hash, &o.job_hash], &r, &s, nonces);
    parts.push(info.as_bytes());
    if !o.secret.verify(&parts, proof) {
        return Event::Dropped(format!(
            "{peer} claiming rank {r}: failed authentication (wrong job secret, or not a rank of this job)"
        ));
    }
    // Authenticated from here on: a disagreement is the launch's mistake, and fatal.
    let who = format!("rank {r} at {peer}");
    let fatal = |conn: &mut Conn, why: String| {
        let _ = conn.send(&refusal(&why), until);
        Event::Fatal(why)
    };
    if hello.job_hash != o.job_hash {
        return fatal(
            conn,
            format!(
                "job hash mismatch: rank 0 has {}, {who} has {} (different scenario, point, hardware \
                 settings or dmsim build)",
                o.job_hash, hello.job_hash
            ),
        );
    }
    if hello.size != size || hello.rank == 0 || hello.rank >= size {
        return fatal(conn, format!("{who} was started as rank {r} of {s}; rank 0 has size {size}"));
    }
    if let Err(e) = (o.validate)(hello.rank, info) {
        return fatal(conn, format!("{who} sent a bad info line: {e}"));
    }
    conn.peer = who;
    let info = info.to_string();
    match slot.take() {
        Some(conn) => Event::Joined { rank: hello.rank, conn, info, nonces: (hello.nonce, nonce) },
        None => Event::Dropped(format!("{peer}: lost its connection")),
    }
}
