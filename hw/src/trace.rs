//! Where the backend's debugging lines go (`DMSIM_HW_TRACE`): nowhere (unset or `0`), to
//! stderr as they happen (`1`), or into a ring of the last lines held in memory and printed
//! only at the end of the process (`ring`, or `ring:N` for the last N lines; default 20,000).
//!
//! The ring exists because printing every verb slows a run enough to hide the races it is
//! meant to show: DiFache's and ScaleStore's hardware-only failures vanished with `1` (their
//! NEEDS.md). So the ring keeps each line unformatted (a boxed closure over copies of the
//! verbs and results) and formats it only when printed: after the run, or when the stall
//! watchdog gives up.

use std::collections::VecDeque;
use std::sync::{Mutex, OnceLock};

enum Mode {
    Off,
    Stderr,
    Ring(usize),
}

const DEFAULT_RING: usize = 20_000;
/// How many distinct recent lines a printed line is compared with (two threads spinning).
const FOLD_WINDOW: usize = 4;

static MODE: OnceLock<Mode> = OnceLock::new();
type Line = Box<dyn FnOnce() -> String + Send>;

static RING: Mutex<VecDeque<Line>> = Mutex::new(VecDeque::new());

fn mode() -> &'static Mode {
    MODE.get_or_init(|| match std::env::var("DMSIM_HW_TRACE").as_deref() {
        Err(_) | Ok("" | "0") => Mode::Off,
        Ok("ring") => Mode::Ring(DEFAULT_RING),
        Ok(v) => match v.strip_prefix("ring:").map(str::parse::<usize>) {
            Some(Ok(n)) if n > 0 => Mode::Ring(n),
            Some(_) => {
                eprintln!(
                    "warning: DMSIM_HW_TRACE={v}: expected ring:N with N > 0; using ring:{DEFAULT_RING}"
                );
                Mode::Ring(DEFAULT_RING)
            }
            None => Mode::Stderr,
        },
    })
}

/// Whether lines are kept at all (callers skip building them otherwise).
pub fn enabled() -> bool {
    !matches!(mode(), Mode::Off)
}

/// Record one line: `build` runs now (stderr) or when the ring is printed, so it owns
/// copies of what it prints.
pub fn line(build: impl FnOnce() -> String + Send + 'static) {
    match mode() {
        Mode::Off => {}
        Mode::Stderr => eprintln!("{}", build()),
        &Mode::Ring(cap) => {
            let mut ring = RING.lock().unwrap_or_else(|e| e.into_inner());
            if ring.len() == cap {
                ring.pop_front();
            }
            ring.push_back(Box::new(build));
        }
    }
}

/// In ring mode, print the ring to stderr (oldest first) under a header naming `why`, and
/// empty it; otherwise nothing. A line equal (but for its `[node time]` prefix) to one of
/// the last few printed is counted, not printed: a spinning lock loop would fill the log.
pub fn dump(why: &str) {
    if !matches!(mode(), Mode::Ring(_)) {
        return;
    }
    let lines = std::mem::take(&mut *RING.lock().unwrap_or_else(|e| e.into_inner()));
    let mut err = std::io::stderr().lock();
    use std::io::Write;
    let _ = writeln!(err, "--- DMSIM_HW_TRACE ring: last {} lines ({why}) ---", lines.len());
    fold(lines.into_iter().map(|l| l()), &mut err);
    let _ = writeln!(err, "--- end of ring ---");
}

/// Write `lines`, counting instead of printing each one whose body (after `[node time] `)
/// equals one of the last [`FOLD_WINDOW`] printed.
fn fold(lines: impl Iterator<Item = String>, out: &mut impl std::io::Write) {
    let mut recent: VecDeque<String> = VecDeque::new();
    let mut folded = 0u64;
    let flush = |folded: &mut u64, recent: usize, out: &mut dyn std::io::Write| {
        if *folded > 0 {
            let _ = writeln!(out, "  ... {folded} lines like the {recent} before, folded");
            *folded = 0;
        }
    };
    for l in lines {
        let body = l.split_once("] ").map_or(l.as_str(), |(_, b)| b);
        if recent.iter().any(|r| r == body) {
            folded += 1;
            continue;
        }
        flush(&mut folded, recent.len(), out);
        if recent.len() == FOLD_WINDOW {
            recent.pop_front();
        }
        recent.push_back(body.to_string());
        let _ = writeln!(out, "{l}");
    }
    flush(&mut folded, recent.len(), out);
}

#[cfg(test)]
mod tests {
    use super::fold;

    #[test]
    fn two_alternating_spinners_fold_into_one_count() {
        let mut lines = vec!["[n1 1ns] CAS a -> ok [0]".to_string()];
        for t in 2..12 {
            let who = if t % 2 == 0 { "b" } else { "c" };
            lines.push(format!("[n1 {t}ns] CAS {who} -> ok [7]"));
        }
        lines.push("[n1 99ns] WRITE 0".to_string());
        let mut out = Vec::new();
        fold(lines.into_iter(), &mut out);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "[n1 1ns] CAS a -> ok [0]\n[n1 2ns] CAS b -> ok [7]\n[n1 3ns] CAS c -> ok [7]\n\
             \x20 ... 8 lines like the 3 before, folded\n[n1 99ns] WRITE 0\n"
        );
    }
}
