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
//!
//! **Perfetto** ([`TraceSink::Perfetto`]): the same events as Chrome trace-event JSON, which
//! <https://ui.perfetto.dev> and `chrome://tracing` open. One process per node; in it one track
//! per task (each doorbell batch it posted is a slice from post to completion, named by its
//! verbs), a `memory` track (each verb as it executes at the target, with a flow arrow from the
//! batch that posted it), `messages`, `marks`, `faults` and `storage` tracks, and a counter per
//! word an atomic touched (latch words: the value after each atomic; counters are doubles, so
//! words above 2^53 lose their low bits in the plot, never in the simulation).

use std::fmt::Write as _;
use std::io::Write;

/// Where trace lines go.
pub enum TraceSink {
    Off,
    Memory(Vec<String>),
    Writer(Box<dyn Write>),
    /// Chrome trace-event JSON (see the module docs), not lines.
    Perfetto(Box<dyn Write>),
}

pub struct Trace {
    hash: u64,
    sink: TraceSink,
    line: String,
    write_error: Option<String>,
    perfetto: Option<Perfetto>,
}

/// Track ids above every task id: the per-node tracks that are not tasks.
const TRACK_BASE: u64 = 1 << 32;

/// A node's track that is not a task, by trace `what`.
fn track_of(what: &str) -> (u64, &'static str) {
    match what {
        "RECV" => (TRACK_BASE + 1, "messages"),
        "MARK" => (TRACK_BASE + 2, "marks"),
        "FAULT" => (TRACK_BASE + 3, "faults"),
        "SSDR" | "SSDW" => (TRACK_BASE + 4, "storage"),
        _ => (TRACK_BASE, "memory"),
    }
}

/// The trace-event writer's state: names already announced, the next flow id.
#[derive(Default)]
struct Perfetto {
    named: std::collections::BTreeSet<(u16, u64)>,
    next_flow: u64,
    events: u64,
}

/// Nanoseconds as the format's microseconds, exactly (three decimals).
fn micros(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// One step of the rolling hash (a 64-bit multiply-rotate mix; not cryptographic).
#[inline]
pub fn mix(hash: u64, value: u64) -> u64 {
    (hash ^ value).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31) ^ (hash >> 17)
}

impl Trace {
    pub fn new(sink: TraceSink) -> Trace {
        let perfetto = matches!(sink, TraceSink::Perfetto(_)).then(Perfetto::default);
        let mut trace =
            Trace { hash: 0xcbf2_9ce4_8422_2325, sink, line: String::new(), write_error: None, perfetto };
        trace.raw("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
        trace
    }

    /// Whether Perfetto events are written ([`TraceSink::Perfetto`]).
    #[inline]
    pub fn perfetto(&self) -> bool {
        self.perfetto.is_some()
    }

    /// Write `text` to a Perfetto sink as is.
    fn raw(&mut self, text: &str) {
        if let (Some(_), TraceSink::Perfetto(w)) = (&self.perfetto, &mut self.sink) {
            if let Err(e) = w.write_all(text.as_bytes()) {
                self.write_error.get_or_insert_with(|| e.to_string());
            }
        }
    }

    /// One trace event object (Perfetto only); names the node and track the first time.
    fn event(&mut self, node: u16, track: u64, track_name: impl FnOnce() -> String, body: &str) {
        let Some(p) = &mut self.perfetto else { return };
        let mut text = String::new();
        let separate = |text: &mut String, p: &mut Perfetto| {
            if p.events > 0 {
                text.push_str(",\n");
            }
            p.events += 1;
        };
        if p.named.insert((node, u64::MAX)) {
            separate(&mut text, p);
            let _ = write!(
                text,
                r#"{{"ph":"M","name":"process_name","pid":{node},"tid":0,"args":{{"name":"node {node}"}}}}"#
            );
        }
        if p.named.insert((node, track)) {
            separate(&mut text, p);
            let name = serde_json::to_string(&track_name()).unwrap_or_default();
            let _ = write!(
                text,
                r#"{{"ph":"M","name":"thread_name","pid":{node},"tid":{track},"args":{{"name":{name}}}}}"#
            );
        }
        separate(&mut text, p);
        let _ = write!(text, r#"{{"pid":{node},"tid":{track},{body}}}"#);
        self.raw(&text);
    }

    /// The first of `count` fresh flow ids (Perfetto only; 0 otherwise).
    pub fn flow_ids(&mut self, count: u64) -> u64 {
        match &mut self.perfetto {
            Some(p) => {
                let first = p.next_flow + 1;
                p.next_flow += count;
                first
            }
            None => 0,
        }
    }

    /// A task's doorbell batch, from post to completion, with flow `flow_ids` leaving it.
    pub fn batch_slice(
        &mut self,
        node: u16,
        task: u32,
        name: &str,
        span_ns: std::ops::Range<u64>,
        detail: &str,
        flow_ids: std::ops::Range<u64>,
    ) {
        if self.perfetto.is_none() {
            return;
        }
        let track = task as u64;
        let label = || if task == u32::MAX { "unawaited posts".to_string() } else { format!("task {task}") };
        let (name, detail) = (json_string(name), json_string(detail));
        let body = format!(
            r#""ph":"X","name":{name},"ts":{},"dur":{},"args":{{"verbs":{detail}}}"#,
            micros(span_ns.start),
            micros(span_ns.end - span_ns.start)
        );
        self.event(node, track, label, &body);
        for id in flow_ids {
            let body =
                format!(r#""ph":"s","name":"verb","cat":"verb","id":{id},"ts":{}"#, micros(span_ns.start));
            self.event(node, track, label, &body);
        }
    }

    /// A flow arriving at the event just traced at `node`'s `what` track (Perfetto only).
    pub fn flow_end(&mut self, time_ns: u64, node: u16, what: &str, id: u64) {
        if self.perfetto.is_none() {
            return;
        }
        let (track, label) = track_of(what);
        let body =
            format!(r#""ph":"f","bp":"e","name":"verb","cat":"verb","id":{id},"ts":{}"#, micros(time_ns));
        self.event(node, track, || label.to_string(), &body);
    }

    /// A word's value after an atomic, as a counter track of `node` (Perfetto only).
    pub fn counter(&mut self, time_ns: u64, node: u16, word: &str, value: u64) {
        if self.perfetto.is_none() {
            return;
        }
        let body = format!(
            r#""ph":"C","name":{},"ts":{},"args":{{"value":{value}}}"#,
            json_string(word),
            micros(time_ns)
        );
        self.event(node, 0, || "counters".to_string(), &body);
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

    /// Append a line built by `f` (called only when tracing is on). Under Perfetto the line's
    /// detail becomes a 1 ns slice on the node's track for `what`.
    pub fn line(&mut self, time_ns: u64, node: u16, what: &str, f: impl FnOnce(&mut String)) {
        if !self.enabled() {
            return;
        }
        self.line.clear();
        if self.perfetto.is_some() {
            f(&mut self.line);
            let (track, label) = track_of(what);
            let (name, detail) = (json_string(what), json_string(self.line.trim_end()));
            let body = format!(
                r#""ph":"X","name":{name},"ts":{},"dur":0.001,"args":{{"detail":{detail}}}"#,
                micros(time_ns)
            );
            self.event(node, track, || label.to_string(), &body);
            return;
        }
        let _ = write!(self.line, "{time_ns:>10} n{node:<2} {what:<6} ");
        f(&mut self.line);
        let text = self.line.trim_end();
        match &mut self.sink {
            TraceSink::Off | TraceSink::Perfetto(_) => {}
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
        if self.perfetto.is_some() {
            self.raw("\n]}\n");
            self.perfetto = None;
        }
        if let TraceSink::Writer(w) | TraceSink::Perfetto(w) = &mut self.sink {
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

/// `text` as a JSON string literal.
fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_string())
}
