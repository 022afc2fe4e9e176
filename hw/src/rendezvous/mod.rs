//! The TCP rendezvous at rank 0: every rank proves it belongs to the job, sends one line
//! describing itself, and gets every rank's line back; the same connections then carry named
//! barriers.
//!
//! Wire format (printable ASCII, one message per `\n`-terminated line, `V` = `dmsim-rdv/1`):
//!
//! ```text
//!   member → root   HELLO V <rank> <size> <job-hash> <member-nonce>
//!   root → member   CHALLENGE <root-job-hash> <root-nonce> <root-proof>   (or REFUSED <why>)
//!   member → root   AUTH <member-proof> <info>
//!   root → member   TABLE <size>, then <size> lines "<rank> <info>", then END <table-proof>
//!                   (or REFUSED <why>)
//!   member → root   BARRIER <name>
//!   root → member   GO <name>
//! ```
//!
//! Proofs are HMAC-SHA256 under the job secret ([`crate::auth`]) over both nonces, both job
//! hashes, rank and size (the member's also over its info, the table's over every line), each
//! with its own label, so neither side can replay or reflect the other's. A member sends its
//! info (QP numbers, region address and rkey) only to a root that proved the secret; the root
//! takes a rank only from a member that proved it. The exchange authenticates; it does not
//! encrypt (the same numbers travel in clear in RoCE headers), and an attacker on the network
//! path, who can relay a whole TCP conversation, is out of its scope (the table's proof still
//! stops it from altering what a member receives).
//!
//! Bounds: every line has a cap (control lines [`wire::SHORT_LINE`], info lines
//! [`Options::max_info_bytes`]) and must be printable ASCII; each connection's handshake has
//! its own short deadline ([`Options::handshake_timeout`]) inside the exchange's one overall
//! deadline; the root reads handshakes concurrently (at most [`Options::max_pending`] at once,
//! more are refused) and drops a connection that is malformed, slow or unauthenticated with a
//! logged line, without ending the job. An *authenticated* peer that disagrees (another job
//! hash, size or rank range, a bad info line, a rank that joins twice) ends the exchange with
//! an error naming it: that is a launch mistake, not an outsider.

mod member;
mod root;
pub(crate) mod wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::auth::Secret;
use crate::error::HwError;
use wire::Conn;

/// Protocol name and version, first word after HELLO.
pub const VERSION: &str = "dmsim-rdv/1";

/// Checks one rank's info line (rank, line); the root runs it before relaying, members again.
pub type Validator = Arc<dyn Fn(u32, &str) -> Result<(), String> + Send + Sync>;

/// How to meet: where, as which job, within which bounds.
#[derive(Clone)]
pub struct Options {
    /// Rank 0's `HOST:PORT`.
    pub addr: String,
    pub secret: Secret,
    /// Hash of what must be equal on every rank ([`crate::auth::job_hash`]).
    pub job_hash: String,
    /// Root: listen on every interface (port of `addr`) instead of exactly `addr`.
    pub listen_all: bool,
    /// The one deadline of the whole exchange.
    pub timeout: Duration,
    /// Deadline of one connection's handshake (HELLO to AUTH), inside `timeout`.
    pub handshake_timeout: Duration,
    /// Cap on an info line.
    pub max_info_bytes: usize,
    /// Root: handshakes read at once; connections beyond are refused and closed.
    pub max_pending: usize,
    pub validate: Validator,
}

impl Options {
    pub fn new(addr: &str, secret: Secret, job_hash: &str, timeout: Duration) -> Options {
        Options {
            addr: addr.to_string(),
            secret,
            job_hash: job_hash.to_string(),
            listen_all: false,
            timeout,
            handshake_timeout: Duration::from_secs(10),
            max_info_bytes: 64 << 10,
            max_pending: 64,
            validate: Arc::new(|_, _| Ok(())),
        }
    }
}

/// What one side ends the exchange with: its open connections, every rank's info line and
/// the log of what it refused or retried.
type Met = (Vec<Conn>, Vec<String>, Vec<String>);

fn err(msg: impl Into<String>) -> HwError {
    HwError::Bootstrap(msg.into())
}

/// The connections left open after the exchange, for barriers.
pub struct Rendezvous {
    rank: u32,
    size: u32,
    /// Root: one per other rank (ordered by rank). Member: the one to the root.
    conns: Vec<Conn>,
    /// What was refused or retried on the way (also printed to stderr as it happened).
    log: Vec<String>,
}

impl Rendezvous {
    /// Exchanges `info` among `size` ranks through the root listening at `options.addr`.
    /// Returns the open rendezvous and every rank's info, indexed by rank.
    pub fn exchange(
        rank: u32,
        size: u32,
        info: &str,
        options: &Options,
    ) -> Result<(Rendezvous, Vec<String>), HwError> {
        if rank >= size {
            return Err(err(format!("rank {rank} is not below size {size}")));
        }
        if info.len() > options.max_info_bytes || info.bytes().any(|b| !(b' '..=b'~').contains(&b)) {
            return Err(err(format!(
                "this rank's info line must be printable ASCII of at most {} bytes",
                options.max_info_bytes
            )));
        }
        if size == 1 {
            return Ok((
                Rendezvous { rank, size, conns: Vec::new(), log: Vec::new() },
                vec![info.to_string()],
            ));
        }
        let deadline = Instant::now() + options.timeout;
        let (conns, infos, log) = if rank == 0 {
            root::root(size, info, options, deadline)?
        } else {
            member::member(rank, size, info, options, deadline)?
        };
        Ok((Rendezvous { rank, size, conns, log }, infos))
    }

    pub fn rank(&self) -> u32 {
        self.rank
    }
    pub fn size(&self) -> u32 {
        self.size
    }
    /// Connections refused and attempts retried during the exchange, one line each.
    pub fn log(&self) -> &[String] {
        &self.log
    }

    /// Returns once every rank has called `barrier(name)`; an error if any rank disconnects,
    /// names another barrier, or the timeout passes.
    pub fn barrier(&mut self, name: &str, timeout: Duration) -> Result<(), HwError> {
        let deadline = Instant::now() + timeout;
        let what = format!("BARRIER {name}");
        if self.rank == 0 {
            for conn in &mut self.conns {
                let line = conn.recv(deadline, wire::SHORT_LINE, &what).map_err(err)?;
                if line != what {
                    return Err(err(format!(
                        "{} sent {} while rank 0 waited at barrier {name}",
                        conn.peer,
                        wire::shown(&line)
                    )));
                }
            }
            for conn in &mut self.conns {
                conn.send(&format!("GO {name}"), deadline).map_err(err)?;
            }
        } else if let Some(conn) = self.conns.first_mut() {
            conn.send(&what, deadline).map_err(err)?;
            let line = conn.recv(deadline, wire::SHORT_LINE, &format!("GO {name}")).map_err(err)?;
            if line != format!("GO {name}") {
                return Err(err(format!(
                    "rank {}: expected GO {name} from {}, got {}",
                    self.rank,
                    conn.peer,
                    wire::shown(&line)
                )));
            }
        }
        Ok(())
    }
}

/// What the root's proof covers (label `root`), the member's (label `member`, plus its info)
/// and the table's (label `table`, plus every line).
fn proof_parts<'a>(
    label: &'a str,
    hashes: [&'a str; 2],
    rank: &'a str,
    size: &'a str,
    nonces: [&'a str; 2],
) -> Vec<&'a [u8]> {
    let mut parts: Vec<&[u8]> = vec![VERSION.as_bytes(), label.as_bytes()];
    parts.extend([hashes[0], hashes[1], rank, size, nonces[0], nonces[1]].map(str::as_bytes));
    parts
}

/// Whether `t` looks like a hex token of 1..=`max` digits.
fn hex_token(t: &str, max: usize) -> bool {
    !t.is_empty() && t.len() <= max && t.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The HELLO line, parsed for syntax only (its claims are checked once it authenticates).
#[derive(Debug, PartialEq, Eq)]
pub struct Hello {
    pub rank: u32,
    pub size: u32,
    pub job_hash: String,
    pub nonce: String,
}

impl Hello {
    pub fn parse(line: &str) -> Result<Hello, String> {
        let t: Vec<&str> = line.split(' ').collect();
        match t.as_slice() {
            ["HELLO", v, ..] if *v != VERSION => {
                Err(format!("speaks {}, rank 0 speaks {VERSION}", wire::shown(v)))
            }
            ["HELLO", _, rank, size, hash, nonce] => {
                let num = |s: &str, what: &str| {
                    if s.is_empty() || s.len() > 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(format!("{what} {} is not a number", wire::shown(s)));
                    }
                    s.parse::<u32>().map_err(|_| format!("{what} {s} is out of range"))
                };
                if !hex_token(hash, 64) || !hex_token(nonce, 64) {
                    return Err("job hash and nonce must be hex".into());
                }
                Ok(Hello {
                    rank: num(rank, "rank")?,
                    size: num(size, "size")?,
                    job_hash: hash.to_string(),
                    nonce: nonce.to_string(),
                })
            }
            _ => Err(format!(
                "expected HELLO {VERSION} <rank> <size> <job-hash> <nonce>, got {}",
                wire::shown(line)
            )),
        }
    }
}
