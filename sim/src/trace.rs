//! The run trace: a rolling hash of every engine event, and optionally one line per
//! protocol-visible event.
//!
//! Line format (fixed columns, space-separated):
//!
//! ```text
//! <time_ns> <node> <what> <detail...>
//!      2150 n1 CAS    n0+0x0 exp=0x0 swp=0x10000 old=0x0 qp=1>0.3
//!      3200 n2 MARK   acquire_x 3
//! ```
//!
//! * `time_ns` — virtual time of the event, right-aligned to 10 columns;
//! * `node` — the node where the event takes effect (the *target* of a verb);
//! * `what` — `READ`/`WRITE`/`WRITEW`/`CAS`/`FAA`/`MCAS`/`MFAA` (masked atomics) executing at
//!   the target (a device-memory address prints as `n0+dm:0x..`), `SSDR`/`SSDW` for a storage
//!   command completing, `RECV` for a message delivered to a port, `MARK` for a protocol mark,
//!   `FAULT` for an injected fault;
//! * `qp=a>b.c` — the queue pair (source node a, target b, channel c).
//!
//! The hash covers every event, traced or not (wakes, arrivals, completions), so two runs with
//! equal hashes took the same path through the engine.

use std::fmt::Write as _;
use std::io::Write;

/// Where trace lines go.
pub enum TraceSink {
    Off,
    Memory(Vec<String>),
    Writer(Box<dyn Write>),
}

pub struct Trace {
    hash: u64,
    sink: TraceSink,
    line: String,
    write_error: Option<String>,
}

/// One step of the rolling hash (a 64-bit multiply-rotate mix; not cryptographic).
#[inline]
pub fn mix(hash: u64, value: u64) -> u64 {
    (hash ^ value).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31) ^ (hash >> 17)
}

impl Trace {
    pub fn new(sink: TraceSink) -> Trace {
        Trace { hash: 0xcbf2_9ce4_8422_2325, sink, line: String::new(), write_error: None }
    }

    #[inline]
    pub fn hash_event(&mut self, time_ns: u64, a: u64, b: u64) {
        self.hash = mix(mix(mix(self.hash, time_ns), a), b);
    }

    pub fn hash(&self) -> u64 {
        self.hash
    }

    #[inline]
    pub fn enabled(&self) -> bool {
        !matches!(self.sink, TraceSink::Off)
    }

    /// Append a line built by `f` (called only when tracing is on).
    pub fn line(&mut self, time_ns: u64, node: u16, what: &str, f: impl FnOnce(&mut String)) {
        if !self.enabled() {
            return;
        }
        self.line.clear();
        let _ = write!(self.line, "{time_ns:>10} n{node:<2} {what:<6} ");
        f(&mut self.line);
        let text = self.line.trim_end();
        match &mut self.sink {
            TraceSink::Off => {}
            TraceSink::Memory(lines) => lines.push(text.to_string()),
            TraceSink::Writer(w) => {
                if let Err(e) = writeln!(w, "{text}") {
                    self.write_error.get_or_insert_with(|| e.to_string());
                }
            }
        }
    }

    /// Flush a writer sink; returns the first write error, if any.
    pub fn finish(&mut self) -> Result<(), String> {
        if let TraceSink::Writer(w) = &mut self.sink {
            if let Err(e) = w.flush() {
                self.write_error.get_or_insert_with(|| e.to_string());
            }
        }
        match self.write_error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The lines of a memory sink (empty otherwise).
    pub fn take_lines(&mut self) -> Vec<String> {
        match &mut self.sink {
            TraceSink::Memory(lines) => std::mem::take(lines),
            _ => Vec::new(),
        }
    }
}
