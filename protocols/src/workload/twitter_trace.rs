//! The Twitter cache-trace CSV format (`github.com/twitter/cache-trace`), read as a stream.
//!
//! One request per line, seven fields:
//! `timestamp,anonymized key,key size,value size,client id,operation,TTL`, e.g.
//! `0,q:q:1:8WTfjZU,11,0,6,get,0` — timestamp in seconds from the trace's start, sizes in bytes,
//! the operation one of get, gets, set, add, replace, cas, append, prepend, delete, incr, decr,
//! TTL in seconds (0: none). A week of one cluster is tens of GB, so nothing here holds more than
//! one line: [`TraceReader`] parses line by line, [`TraceCursor`] replays a file over and over
//! for one client thread ([`Share`]). The published files are zstd-compressed; decompress first,
//! or stream through a named pipe (`mkfifo t.csv; zstd -dc cluster22.sort.zst > t.csv &`).
//!
//! A key may contain commas, so the key is everything between the first field and the last five.
//! Keys are kept as their 64-bit FNV-1a hash: protocols map a key to one of their objects with
//! [`TraceRecord::object`].

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// A request's operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceOp {
    Get,
    Gets,
    Set,
    Add,
    Replace,
    Cas,
    Append,
    Prepend,
    Delete,
    Incr,
    Decr,
}

const OPS: [(&str, TraceOp); 11] = [
    ("get", TraceOp::Get),
    ("gets", TraceOp::Gets),
    ("set", TraceOp::Set),
    ("add", TraceOp::Add),
    ("replace", TraceOp::Replace),
    ("cas", TraceOp::Cas),
    ("append", TraceOp::Append),
    ("prepend", TraceOp::Prepend),
    ("delete", TraceOp::Delete),
    ("incr", TraceOp::Incr),
    ("decr", TraceOp::Decr),
];

impl TraceOp {
    /// get and gets read; every other operation changes the object (the DiFache generator's
    /// mapping, `difache/trace.rs`).
    pub fn is_read(self) -> bool {
        matches!(self, TraceOp::Get | TraceOp::Gets)
    }

    pub fn name(self) -> &'static str {
        OPS.iter().find(|(_, op)| *op == self).map(|(n, _)| *n).unwrap_or("?")
    }

    fn parse(text: &str) -> Option<TraceOp> {
        OPS.iter().find(|(n, _)| *n == text).map(|(_, op)| *op)
    }
}

/// One request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    pub timestamp_s: u64,
    /// FNV-1a of the anonymized key's bytes.
    pub key: u64,
    pub key_bytes: u32,
    pub value_bytes: u32,
    pub client: u32,
    pub op: TraceOp,
    pub ttl_s: u32,
}

impl TraceRecord {
    /// The object among `objects` this request's key maps to.
    pub fn object(&self, objects: u64) -> u64 {
        self.key % objects.max(1)
    }
}

/// FNV-1a, 64 bits.
pub fn key_hash(key: &[u8]) -> u64 {
    key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// One line, without its line ending.
pub fn parse_line(line: &str) -> Result<TraceRecord, String> {
    let fields: Vec<&str> = line.split(',').collect();
    if fields.len() < 7 {
        return Err(format!(
            "{} fields, expected 7 (timestamp,key,key size,value size,client id,operation,TTL)",
            fields.len()
        ));
    }
    let n = fields.len();
    let key_from = fields[0].len() + 1;
    let key_to = line.len() - fields[n - 5..].iter().map(|f| f.len() + 1).sum::<usize>();
    let key = &line.as_bytes()[key_from..key_to];
    fn number<T: std::str::FromStr>(name: &str, text: &str) -> Result<T, String> {
        text.trim().parse().map_err(|_| format!("{name} {text:?} is not a non-negative integer in range"))
    }
    let op = fields[n - 2].trim();
    Ok(TraceRecord {
        timestamp_s: number("timestamp", fields[0])?,
        key: key_hash(key),
        key_bytes: number("key size", fields[n - 5])?,
        value_bytes: number("value size", fields[n - 4])?,
        client: number("client id", fields[n - 3])?,
        op: TraceOp::parse(op).ok_or_else(|| {
            format!(
                "operation {op:?} is not one of {}",
                OPS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            )
        })?,
        ttl_s: number("TTL", fields[n - 1])?,
    })
}

/// One line of the format for `record`, its key written as `key_text`.
pub fn write_line(out: &mut impl Write, record: &TraceRecord, key_text: &str) -> std::io::Result<()> {
    writeln!(
        out,
        "{},{},{},{},{},{},{}",
        record.timestamp_s,
        key_text,
        record.key_bytes,
        record.value_bytes,
        record.client,
        record.op.name(),
        record.ttl_s
    )
}

/// A line that cannot be used: where and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// 1-based line number (0: the file itself).
    pub line: u64,
    pub reason: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "line {}: {}", self.line, self.reason)
        }
    }
}

/// Parses a trace line by line; blank lines are skipped.
pub struct TraceReader<R> {
    input: R,
    line: String,
    line_no: u64,
}

impl<R: BufRead> TraceReader<R> {
    pub fn new(input: R) -> Self {
        TraceReader { input, line: String::new(), line_no: 0 }
    }

    /// Lines read so far.
    pub fn line_no(&self) -> u64 {
        self.line_no
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<TraceRecord, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.line.clear();
            match self.input.read_line(&mut self.line) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(TraceError { line: self.line_no + 1, reason: e.to_string() })),
            }
            self.line_no += 1;
            let text = self.line.trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() {
                continue;
            }
            return Some(parse_line(text).map_err(|reason| TraceError { line: self.line_no, reason }));
        }
    }
}

/// What [`check_file`] saw in a trace's first lines.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceSample {
    pub records: u64,
    pub reads: u64,
    pub clients_max: u32,
}

/// Open `path` and parse up to `lines` records: a bad file is reported before a run starts (the
/// rest is checked as it streams).
pub fn check_file(path: &Path, lines: u64) -> Result<TraceSample, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut sample = TraceSample::default();
    for record in TraceReader::new(BufReader::new(file)).take(lines as usize) {
        let r = record.map_err(|e| format!("{}: {e}", path.display()))?;
        sample.records += 1;
        sample.reads += r.op.is_read() as u64;
        sample.clients_max = sample.clients_max.max(r.client);
    }
    if sample.records == 0 {
        return Err(format!("{}: no requests", path.display()));
    }
    Ok(sample)
}

/// Which requests of a trace one client thread replays: node `node` of `nodes` takes the
/// clients with id ≡ node (mod nodes); of those requests, in file order and counted on across
/// passes, the k-th goes to thread k mod `threads`. Fixed by the file alone, so every backend
/// (and every schedule) gives a thread the same requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    pub node: u32,
    pub nodes: u32,
    pub thread: u32,
    pub threads: u32,
}

/// Replays a trace file for one [`Share`], from the start again after the end (a run lasts as
/// long as its scenario says, not as long as the file).
pub struct TraceCursor {
    path: PathBuf,
    reader: TraceReader<BufReader<File>>,
    share: Share,
    /// Requests of this node seen so far (the thread takes every `threads`-th).
    node_seen: u64,
    /// Requests served, and completed passes over the file.
    pub served: u64,
    pub passes: u64,
    node_seen_this_pass: u64,
}

impl TraceCursor {
    pub fn open(path: &Path, share: Share) -> Result<TraceCursor, String> {
        assert!(share.node < share.nodes && share.thread < share.threads, "{share:?}");
        Ok(TraceCursor {
            path: path.to_path_buf(),
            reader: Self::reader(path)?,
            share,
            node_seen: 0,
            served: 0,
            passes: 0,
            node_seen_this_pass: 0,
        })
    }

    fn reader(path: &Path) -> Result<TraceReader<BufReader<File>>, String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(TraceReader::new(BufReader::new(file)))
    }

    /// The next request of this share. (A node share with requests gives every thread some:
    /// the count runs on across passes.)
    pub fn next_record(&mut self) -> Result<TraceRecord, String> {
        let s = self.share;
        loop {
            match self.reader.next() {
                Some(Ok(r)) if r.client % s.nodes == s.node => {
                    let k = self.node_seen;
                    self.node_seen += 1;
                    self.node_seen_this_pass += 1;
                    if k % s.threads as u64 == s.thread as u64 {
                        self.served += 1;
                        return Ok(r);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(format!("{}: {e}", self.path.display())),
                None => {
                    if self.node_seen_this_pass == 0 {
                        return Err(format!(
                            "{}: no request of a client id = {} mod {} (this node's share)",
                            self.path.display(),
                            s.node,
                            s.nodes
                        ));
                    }
                    self.passes += 1;
                    self.node_seen_this_pass = 0;
                    self.reader = Self::reader(&self.path)?;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_published_example() {
        let r = parse_line("0,q:q:1:8WTfjZU,11,0,6,get,0").unwrap();
        assert_eq!(
            (r.timestamp_s, r.key_bytes, r.value_bytes, r.client, r.op, r.ttl_s),
            (0, 11, 0, 6, TraceOp::Get, 0)
        );
        assert_eq!(r.key, key_hash(b"q:q:1:8WTfjZU"));
        assert!(r.op.is_read());
        let w = parse_line("17,abc,3,250,2,set,3600").unwrap();
        assert!(!w.op.is_read());
        assert_eq!((w.value_bytes, w.ttl_s), (250, 3600));
    }

    #[test]
    fn a_key_may_contain_commas() {
        let r = parse_line("5,a,b,,c,7,100,1,delete,0").unwrap();
        assert_eq!(r.key, key_hash(b"a,b,,c"));
        assert_eq!((r.key_bytes, r.value_bytes, r.client, r.op), (7, 100, 1, TraceOp::Delete));
    }

    #[test]
    fn bad_lines_say_what_is_wrong_and_where() {
        let text = "0,k,1,2,3,get,0\n\n1,k,1,2,3,fetch,0\n";
        let got: Vec<_> = TraceReader::new(text.as_bytes()).collect();
        assert_eq!(got.len(), 2);
        assert!(got[0].is_ok());
        let e = got[1].clone().unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.to_string().contains("line 3: operation \"fetch\" is not one of get"), "{e}");
        assert!(parse_line("0,k,1,2").unwrap_err().contains("4 fields, expected 7"));
        assert!(parse_line("x,k,1,2,3,get,0").unwrap_err().contains("timestamp \"x\""));
        assert!(parse_line("0,k,1,-2,3,get,0").unwrap_err().contains("value size \"-2\""));
    }

    #[test]
    fn written_lines_read_back() {
        let r = TraceRecord {
            timestamp_s: 9,
            key: key_hash(b"key9"),
            key_bytes: 4,
            value_bytes: 512,
            client: 3,
            op: TraceOp::Append,
            ttl_s: 60,
        };
        let mut out = Vec::new();
        write_line(&mut out, &r, "key9").unwrap();
        assert_eq!(String::from_utf8(out.clone()).unwrap(), "9,key9,4,512,3,append,60\n");
        assert_eq!(TraceReader::new(&out[..]).next().unwrap().unwrap(), r);
    }

    #[test]
    fn a_cursor_serves_its_share_and_wraps() {
        let dir = std::env::temp_dir().join(format!("dmsim-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.csv");
        let mut text = String::new();
        for i in 0..10u32 {
            text += &format!("{i},k{i},2,8,{},get,0\n", i % 3);
        }
        std::fs::write(&path, text).unwrap();
        let share = |node, nodes, thread, threads| Share { node, nodes, thread, threads };
        let mut c = TraceCursor::open(&path, share(1, 3, 0, 1)).unwrap();
        let ts: Vec<u64> = (0..7).map(|_| c.next_record().unwrap().timestamp_s).collect();
        // Clients 1 mod 3 are lines 1, 4, 7; then the file again.
        assert_eq!(ts, [1, 4, 7, 1, 4, 7, 1]);
        assert_eq!((c.served, c.passes), (7, 2));
        // Thread 1 of 2 of that node takes its 2nd, 4th, 6th, ... request: lines 4, 1, 7, 4.
        let mut t = TraceCursor::open(&path, share(1, 3, 1, 2)).unwrap();
        let ts: Vec<u64> = (0..4).map(|_| t.next_record().unwrap().timestamp_s).collect();
        assert_eq!(ts, [4, 1, 7, 4]);
        let mut none = TraceCursor::open(&path, share(3, 4, 0, 1)).unwrap();
        assert!(none.next_record().unwrap_err().contains("no request of a client id = 3 mod 4"));
        assert_eq!(check_file(&path, 5).unwrap(), TraceSample { records: 5, reads: 5, clients_max: 2 });
        assert!(check_file(&dir.join("missing.csv"), 5).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
