//! What one node tells the others at bootstrap: its port address, its registered region, and
//! the numbers of the QPs it created for each peer. One line of `key=value` tokens.
//!
//! ```text
//! lid=0 gid=00000000000000000000ffff0a4d0001 psn=4660 addr=0x7f.. len=1048576 rkey=0x1234
//!   channels=2 verb=17,18,19,20 resp=21,22 msg=0,23 dm_addr=0x0 dm_len=0 dm_rkey=0x0
//! ```
//! `dm_*` describe the node's (emulated) device memory region; `dm_len=0` means none.
//! `verb` lists `size × channels` QP numbers, target-major: entry `t·channels + c` is this
//! node's QP for verbs to node `t` on channel `c`. `resp` are the partners of this node's
//! loopback QPs (verbs to itself). `msg` has one QP per peer for SEND/RECV (0 for itself).

use crate::error::HwError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    pub lid: u16,
    pub gid: [u8; 16],
    pub psn: u32,
    pub addr: u64,
    pub len: u64,
    pub rkey: u32,
    pub channels: u16,
    pub verb: Vec<u32>,
    pub resp: Vec<u32>,
    pub msg: Vec<u32>,
    pub dm_addr: u64,
    pub dm_len: u64,
    pub dm_rkey: u32,
}

fn list(v: &[u32]) -> String {
    v.iter().map(|q| q.to_string()).collect::<Vec<_>>().join(",")
}

impl NodeInfo {
    pub fn to_line(&self) -> String {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "lid={} gid={gid} psn={} addr={:#x} len={} rkey={:#x} channels={} verb={} resp={} msg={} \
             dm_addr={:#x} dm_len={} dm_rkey={:#x}",
            self.lid,
            self.psn,
            self.addr,
            self.len,
            self.rkey,
            self.channels,
            list(&self.verb),
            list(&self.resp),
            list(&self.msg),
            self.dm_addr,
            self.dm_len,
            self.dm_rkey
        )
    }

    /// Parses a line from rank `rank` of a cluster of `size` nodes, checking every value's
    /// range, list lengths and that addresses do not wrap. Any input gives a value or an error
    /// naming the rank and the key, never a panic (see `tests/info_fuzz.rs`).
    pub fn parse(line: &str, rank: u32, size: u32) -> Result<NodeInfo, HwError> {
        let bad = |what: &str| {
            HwError::Bootstrap(format!("rank {rank} sent a bad info line ({what}): {}", shown(line)))
        };
        let mut info = NodeInfo {
            lid: 0,
            gid: [0; 16],
            psn: 0,
            addr: 0,
            len: 0,
            rkey: 0,
            channels: 0,
            verb: vec![],
            resp: vec![],
            msg: vec![],
            dm_addr: 0,
            dm_len: 0,
            dm_rkey: 0,
        };
        let mut seen = [false; KEYS.len()];
        for token in line.split(' ') {
            let (key, value) = token.split_once('=').ok_or_else(|| bad("token without '='"))?;
            let k = KEYS.iter().position(|k| *k == key).ok_or_else(|| bad("unknown key"))?;
            if std::mem::replace(&mut seen[k], true) {
                return Err(bad(&format!("{key} given twice")));
            }
            let num = |v: &str| -> Result<u64, HwError> {
                let (digits, radix) = match v.strip_prefix("0x") {
                    Some(hex) => (hex, 16),
                    None => (v, 10),
                };
                // `from_str_radix` accepts a leading '+': only digits here.
                if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
                    return Err(bad(key));
                }
                u64::from_str_radix(digits, radix).map_err(|_| bad(key))
            };
            let qpn = |v: &str| -> Result<u32, HwError> {
                match num(v)? {
                    q if q <= MAX_QPN => Ok(q as u32),
                    _ => Err(bad(&format!("{key}: a QP number has 24 bits"))),
                }
            };
            let nums = |v: &str| -> Result<Vec<u32>, HwError> {
                if v.is_empty() {
                    return Ok(vec![]);
                }
                v.split(',').map(qpn).collect()
            };
            match key {
                "lid" => info.lid = u16::try_from(num(value)?).map_err(|_| bad(key))?,
                "gid" => {
                    let hex = value.as_bytes();
                    if hex.len() != 32 || !hex.iter().all(u8::is_ascii_hexdigit) {
                        return Err(bad("gid must be 32 hex digits"));
                    }
                    for (byte, pair) in info.gid.iter_mut().zip(hex.chunks(2)) {
                        let digit = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                        *byte = digit(pair[0]) << 4 | digit(pair[1]);
                    }
                }
                "psn" => match num(value)? {
                    p if p <= MAX_QPN => info.psn = p as u32,
                    _ => return Err(bad("psn has 24 bits")),
                },
                "addr" => info.addr = num(value)?,
                "len" => info.len = num(value)?,
                "rkey" => info.rkey = u32::try_from(num(value)?).map_err(|_| bad(key))?,
                "channels" => match num(value)? {
                    c if (1..=MAX_CHANNELS).contains(&c) => info.channels = c as u16,
                    _ => return Err(bad(&format!("channels must be in 1..={MAX_CHANNELS}"))),
                },
                "verb" => info.verb = nums(value)?,
                "resp" => info.resp = nums(value)?,
                "msg" => info.msg = nums(value)?,
                "dm_addr" => info.dm_addr = num(value)?,
                "dm_len" => info.dm_len = num(value)?,
                "dm_rkey" => info.dm_rkey = u32::try_from(num(value)?).map_err(|_| bad(key))?,
                _ => unreachable!("key checked against KEYS"),
            }
        }
        if let Some(k) = seen.iter().position(|s| !s) {
            return Err(bad(&format!("{} missing", KEYS[k])));
        }
        let c = info.channels as usize;
        if info.verb.len() != size as usize * c || info.resp.len() != c || info.msg.len() != size as usize {
            return Err(bad("QP lists do not match size and channels"));
        }
        if info.msg.iter().enumerate().any(|(j, q)| (*q == 0) != (j as u32 == rank)) {
            return Err(bad("msg must name a QP for every other rank and 0 for itself"));
        }
        if info.addr.checked_add(info.len).is_none() || info.dm_addr.checked_add(info.dm_len).is_none() {
            return Err(bad("a region wraps around the address space"));
        }
        Ok(info)
    }
}

/// The keys of an info line, each exactly once.
const KEYS: [&str; 13] = [
    "lid", "gid", "psn", "addr", "len", "rkey", "channels", "verb", "resp", "msg", "dm_addr", "dm_len",
    "dm_rkey",
];
/// QP numbers and PSNs are 24-bit.
const MAX_QPN: u64 = 0xff_ffff;
/// More channels than any configuration uses (`HwConfig::channels` is a `u16`).
const MAX_CHANNELS: u64 = 256;

/// `line` shortened for an error message.
fn shown(line: &str) -> String {
    match line.char_indices().nth(120) {
        Some((i, _)) => format!("{:?}…", &line[..i]),
        None => format!("{line:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_line_round_trips_and_rejects_garbage() {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12] = 10;
        let info = NodeInfo {
            lid: 3,
            gid,
            psn: 0x1234,
            addr: 0x7f00_dead_b000,
            len: 1 << 20,
            rkey: 0xabcd,
            channels: 2,
            verb: vec![17, 18, 19, 20],
            resp: vec![21, 22],
            msg: vec![0, 23],
            dm_addr: 0x7f00_0000_1000,
            dm_len: 4096,
            dm_rkey: 0x77,
        };
        let line = info.to_line();
        assert_eq!(NodeInfo::parse(&line, 0, 2).unwrap(), info);
        assert!(NodeInfo::parse(&line, 0, 3).is_err(), "list lengths must match the size");
        assert!(NodeInfo::parse("lid=1", 1, 2).is_err());
        let e = NodeInfo::parse(&line.replace("rkey=0xabcd", "rkey=zz"), 4, 2).unwrap_err().to_string();
        assert!(e.contains("rank 4") && e.contains("rkey"), "{e}");
        let twice = format!("{line} lid=3");
        assert!(NodeInfo::parse(&line, 1, 2).unwrap_err().to_string().contains("0 for itself"));
        assert!(NodeInfo::parse(&twice, 0, 2).unwrap_err().to_string().contains("lid given twice"));
        let gid =
            line.replace("gid=00000000000000000000ffff0a000000", "gid=\u{e9}000000000000000000ffff0a000000");
        assert_eq!(gid.len(), line.len(), "same length, one multi-byte character");
        assert!(NodeInfo::parse(&gid, 0, 2).unwrap_err().to_string().contains("gid must be 32 hex digits"));
        let wraps = line.replace("addr=0x7f00deadb000", "addr=0xffffffffffffff00");
        assert!(NodeInfo::parse(&wraps, 0, 2).unwrap_err().to_string().contains("wraps"));
        let big_qpn = line.replace("resp=21,22", "resp=21,16777216");
        assert!(NodeInfo::parse(&big_qpn, 0, 2).unwrap_err().to_string().contains("24 bits"));
        assert!(NodeInfo::parse(&line.replace("lid=3", "lid=+3"), 0, 2).is_err(), "only digits");
    }
}
