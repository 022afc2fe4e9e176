//! One TCP connection of the rendezvous, bounded: every line has a length cap, must be
//! printable ASCII, and every read and write is bounded by an absolute deadline that bytes
//! arriving one at a time do not extend (each system call gets only what is left of it).

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::TcpStream;
use std::time::Instant;

/// Cap on control lines (HELLO, CHALLENGE, REFUSED, TABLE, END, BARRIER, GO).
pub(crate) const SHORT_LINE: usize = 512;

pub(crate) struct Conn {
    /// Who is on the other side, for messages: "127.0.0.1:4000", later "rank 2 at 127.0.0.1:4000".
    pub(crate) peer: String,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    pub(crate) fn new(peer: String, stream: TcpStream) -> Result<Conn, String> {
        stream.set_nodelay(true).ok();
        let writer = stream.try_clone().map_err(|e| format!("socket to {peer}: {e}"))?;
        Ok(Conn { peer, reader: BufReader::new(stream), writer })
    }

    /// Sends `line` and its newline before `deadline`.
    pub(crate) fn send(&mut self, line: &str, deadline: Instant) -> Result<(), String> {
        debug_assert!(!line.contains('\n'));
        let bytes = format!("{line}\n").into_bytes();
        let mut sent = 0;
        while sent < bytes.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "timed out sending to {} ({sent} of {} bytes taken)",
                    self.peer,
                    bytes.len()
                ));
            }
            self.writer.set_write_timeout(Some(left)).map_err(|e| format!("socket to {}: {e}", self.peer))?;
            match self.writer.write(&bytes[sent..]) {
                Ok(0) => return Err(format!("{} closed the connection", self.peer)),
                Ok(n) => sent += n,
                Err(e) if retry(e.kind()) => {}
                Err(e) => return Err(format!("sending to {}: {e}", self.peer)),
            }
        }
        Ok(())
    }

    /// The next line (without its `\n`), at most `cap` bytes of printable ASCII, before
    /// `deadline`; `what` names the expected message in errors.
    pub(crate) fn recv(&mut self, deadline: Instant, cap: usize, what: &str) -> Result<String, String> {
        let mut line: Vec<u8> = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "timed out waiting for {what} from {} ({} bytes of it came)",
                    self.peer,
                    line.len()
                ));
            }
            self.reader
                .get_ref()
                .set_read_timeout(Some(left))
                .map_err(|e| format!("socket to {}: {e}", self.peer))?;
            let buf = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if retry(e.kind()) => continue,
                Err(e) => return Err(format!("reading {what} from {}: {e}", self.peer)),
            };
            if buf.is_empty() {
                return Err(if line.is_empty() {
                    format!("{} closed the connection while we waited for {what}", self.peer)
                } else {
                    format!(
                        "{} closed the connection in the middle of {what} (truncated after {} bytes)",
                        self.peer,
                        line.len()
                    )
                });
            }
            let (take, complete) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i, true),
                None => (buf.len(), false),
            };
            if line.len() + take > cap {
                return Err(format!("{what} from {} is longer than {cap} bytes", self.peer));
            }
            line.extend_from_slice(&buf[..take]);
            self.reader.consume(take + complete as usize);
            if complete {
                break;
            }
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if let Some(i) = line.iter().position(|b| !(b' '..=b'~').contains(b)) {
            return Err(format!(
                "{what} from {} has a byte {:#04x} at offset {i}: only printable ASCII is allowed",
                self.peer, line[i]
            ));
        }
        Ok(String::from_utf8(line).expect("printable ASCII is UTF-8"))
    }
}

fn retry(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted)
}

/// `line` shortened for an error message (a hostile peer's line may be long).
pub(crate) fn shown(line: &str) -> String {
    match line.char_indices().nth(80) {
        Some((i, _)) => format!("{:?}…", &line[..i]),
        None => format!("{line:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::Duration;

    fn pair() -> (Conn, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, peer) = l.accept().unwrap();
        (Conn::new(peer.to_string(), server).unwrap(), client)
    }

    #[test]
    fn lines_are_capped_ascii_and_complete() {
        let (mut c, mut w) = pair();
        let soon = || Instant::now() + Duration::from_secs(5);
        w.write_all(b"HELLO ok\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n").unwrap();
        assert_eq!(c.recv(soon(), 16, "HELLO").unwrap(), "HELLO ok");
        let e = c.recv(soon(), 16, "HELLO").unwrap_err();
        assert!(e.contains("longer than 16 bytes"), "{e}");
        let (mut c, mut w) = pair();
        w.write_all("gid=\u{e9}\n".as_bytes()).unwrap();
        let e = c.recv(soon(), 64, "AUTH").unwrap_err();
        assert!(e.contains("byte 0xc3 at offset 4"), "{e}");
        let (mut c, mut w) = pair();
        w.write_all(b"HELLO half").unwrap();
        w.shutdown(std::net::Shutdown::Write).unwrap();
        let e = c.recv(soon(), 64, "HELLO").unwrap_err();
        assert!(e.contains("in the middle of HELLO (truncated after 10 bytes)"), "{e}");
    }

    #[test]
    fn one_byte_at_a_time_does_not_extend_the_deadline() {
        // Goal: the deadline is absolute. Method: a writer drips a byte every 50 ms without a
        // newline; a 400 ms deadline must end the read at about 400 ms, not later.
        let (mut c, mut w) = pair();
        let drip = std::thread::spawn(move || {
            for _ in 0..40 {
                if w.write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let start = Instant::now();
        let e = c.recv(start + Duration::from_millis(400), 1 << 20, "HELLO").unwrap_err();
        let took = start.elapsed();
        assert!(e.contains("timed out waiting for HELLO"), "{e}");
        assert!(took < Duration::from_millis(1500), "the deadline was extended: {took:?}");
        drop(c);
        drip.join().unwrap();
    }

    #[test]
    fn a_peer_that_never_reads_cannot_block_a_send_past_its_deadline() {
        let (mut c, _w) = pair(); // `_w` never reads
        let big = "y".repeat(64 << 20);
        let start = Instant::now();
        let e = c.send(&big, start + Duration::from_millis(300)).unwrap_err();
        assert!(e.contains("timed out sending"), "{e}");
        assert!(start.elapsed() < Duration::from_millis(1500), "{:?}", start.elapsed());
    }
}
