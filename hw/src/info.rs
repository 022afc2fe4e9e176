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

    /// Parses a line from rank `rank` of a cluster of `size` nodes, checking list lengths.
    pub fn parse(line: &str, rank: u32, size: u32) -> Result<NodeInfo, HwError> {
        let bad =
            |what: &str| HwError::Bootstrap(format!("rank {rank} sent a bad info line ({what}): {line:?}"));
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
        let mut seen = 0u32;
        for token in line.split_whitespace() {
            let (key, value) = token.split_once('=').ok_or_else(|| bad("token without '='"))?;
            let num = |v: &str| -> Result<u64, HwError> {
                match v.strip_prefix("0x") {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => v.parse(),
                }
                .map_err(|_| bad(key))
            };
            let nums = |v: &str| -> Result<Vec<u32>, HwError> {
                if v.is_empty() {
                    return Ok(vec![]);
                }
                v.split(',').map(|q| q.parse::<u32>().map_err(|_| bad(key))).collect()
            };
            match key {
                "lid" => info.lid = u16::try_from(num(value)?).map_err(|_| bad(key))?,
                "gid" => {
                    if value.len() != 32 {
                        return Err(bad("gid must be 32 hex digits"));
                    }
                    for (i, byte) in info.gid.iter_mut().enumerate() {
                        *byte = u8::from_str_radix(&value[2 * i..2 * i + 2], 16).map_err(|_| bad(key))?;
                    }
                }
                "psn" => info.psn = u32::try_from(num(value)?).map_err(|_| bad(key))?,
                "addr" => info.addr = num(value)?,
                "len" => info.len = num(value)?,
                "rkey" => info.rkey = u32::try_from(num(value)?).map_err(|_| bad(key))?,
                "channels" => info.channels = u16::try_from(num(value)?).map_err(|_| bad(key))?,
                "verb" => info.verb = nums(value)?,
                "resp" => info.resp = nums(value)?,
                "msg" => info.msg = nums(value)?,
                "dm_addr" => info.dm_addr = num(value)?,
                "dm_len" => info.dm_len = num(value)?,
                "dm_rkey" => info.dm_rkey = u32::try_from(num(value)?).map_err(|_| bad(key))?,
                _ => return Err(bad("unknown key")),
            }
            seen += 1;
        }
        if seen != 13 {
            return Err(bad("expected 13 keys"));
        }
        let c = info.channels as usize;
        if c == 0
            || info.verb.len() != size as usize * c
            || info.resp.len() != c
            || info.msg.len() != size as usize
        {
            return Err(bad("QP lists do not match size and channels"));
        }
        Ok(info)
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
        assert_eq!(NodeInfo::parse(&line, 1, 2).unwrap(), info);
        assert!(NodeInfo::parse(&line, 1, 3).is_err(), "list lengths must match the size");
        assert!(NodeInfo::parse("lid=1", 1, 2).is_err());
        let e = NodeInfo::parse(&line.replace("rkey=0xabcd", "rkey=zz"), 4, 2).unwrap_err().to_string();
        assert!(e.contains("rank 4") && e.contains("rkey"), "{e}");
    }
}
