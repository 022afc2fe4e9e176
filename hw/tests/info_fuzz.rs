//! Fuzz of the rendezvous line parsers (deterministic: a fixed xorshift seed, so a failure
//! replays). Property 1: any node description within range survives `to_line` → `parse`
//! unchanged. Property 2: no input — random bytes, random tokens, a valid line with bytes
//! flipped, cut, spliced or multi-byte characters inserted — panics `NodeInfo::parse` or
//! `Hello::parse`; each gives a value or an error.

use dmsim_hw::info::NodeInfo;
use dmsim_hw::rendezvous::Hello;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A valid description of rank `rank` among `size`.
fn node(rng: &mut Rng, rank: u32, size: u32) -> NodeInfo {
    let channels = 1 + rng.below(4) as u16;
    let qpn = |rng: &mut Rng| 1 + rng.below(0xff_fffe) as u32;
    let len = rng.below(1 << 40);
    let dm_len = rng.below(1 << 20);
    NodeInfo {
        lid: rng.next() as u16,
        gid: std::array::from_fn(|_| rng.next() as u8),
        psn: rng.below(1 << 24) as u32,
        addr: rng.below(u64::MAX - len),
        len,
        rkey: rng.next() as u32,
        channels,
        verb: (0..size * channels as u32).map(|_| qpn(rng)).collect(),
        resp: (0..channels).map(|_| qpn(rng)).collect(),
        msg: (0..size).map(|j| if j == rank { 0 } else { qpn(rng) }).collect(),
        dm_addr: rng.below(u64::MAX - dm_len),
        dm_len,
        dm_rkey: rng.next() as u32,
    }
}

const PIECES: [&str; 16] = [
    "lid=",
    "gid=",
    "0x",
    "=",
    ",",
    " ",
    "ffffffffffffffffffff",
    "é",
    "\u{1F600}",
    "\0",
    "\n",
    "HELLO ",
    "dmsim-rdv/1 ",
    "-1",
    "+",
    "99999999999999999999999",
];

#[test]
fn valid_lines_round_trip() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..5_000 {
        let size = 1 + rng.below(16) as u32;
        let rank = rng.below(size as u64) as u32;
        let info = node(&mut rng, rank, size);
        assert_eq!(NodeInfo::parse(&info.to_line(), rank, size).unwrap(), info);
    }
}

#[test]
fn no_input_panics_the_parsers() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut accepted = 0;
    let rounds = 60_000;
    for round in 0..rounds {
        let size = 1 + rng.below(8) as u32;
        let rank = rng.below(size as u64 + 1) as u32; // sometimes out of range
        let valid = node(&mut rng, rank.min(size - 1), size).to_line();
        let line: String = match round % 4 {
            0 => {
                let bytes: Vec<u8> = (0..rng.below(300)).map(|_| rng.next() as u8).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            }
            1 => (0..rng.below(40)).map(|_| PIECES[rng.below(16) as usize]).collect(),
            2 => {
                // A valid line with a few bytes replaced, then made text again.
                let mut bytes = valid.clone().into_bytes();
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(bytes.len() as u64) as usize;
                    bytes[i] = rng.next() as u8;
                }
                String::from_utf8_lossy(&bytes).into_owned()
            }
            _ => {
                // Cut, or a piece spliced in at a character boundary.
                let mut at = rng.below(valid.len() as u64 + 1) as usize;
                while !valid.is_char_boundary(at) {
                    at -= 1;
                }
                match rng.below(2) {
                    0 => valid[..at].to_string(),
                    _ => format!("{}{}{}", &valid[..at], PIECES[rng.below(16) as usize], &valid[at..]),
                }
            }
        };
        if NodeInfo::parse(&line, rank, size).is_ok() {
            accepted += 1;
        }
        let _ = Hello::parse(&line);
        let _ = Hello::parse(&format!("HELLO dmsim-rdv/1 {line}"));
    }
    // Only untouched or harmlessly changed lines may pass; most inputs are rejected.
    assert!(accepted < rounds / 4, "{accepted} of {rounds} garbage lines accepted");
}

#[test]
fn hello_parses_exactly_its_format() {
    let h = Hello::parse("HELLO dmsim-rdv/1 2 3 00ff aabb").unwrap();
    assert_eq!((h.rank, h.size, h.job_hash.as_str(), h.nonce.as_str()), (2, 3, "00ff", "aabb"));
    for bad in [
        "HELLO dmsim-rdv/2 2 3 00ff aabb",
        "HELLO dmsim-rdv/1 2 3 00ff",
        "HELLO dmsim-rdv/1 2 3 00ff aabb extra",
        "HELLO dmsim-rdv/1 +2 3 00ff aabb",
        "HELLO dmsim-rdv/1 99999999999 3 00ff aabb",
        "HELLO dmsim-rdv/1 2 3 zz aabb",
        "HELLO  dmsim-rdv/1 2 3 00ff aabb",
        "",
    ] {
        assert!(Hello::parse(bad).is_err(), "{bad:?} accepted");
    }
}
