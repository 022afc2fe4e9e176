//! The job secret and what it proves: every rank of one launch holds the same secret (from the
//! launcher's environment or a file), and the rendezvous uses it for challenge–response in both
//! directions (HMAC-SHA256 over both sides' fresh nonces). The secret itself never goes on the
//! wire, into a log line or into the results; `Secret`'s `Debug` prints no byte of it.
//!
//! Also here: the job hash, a SHA-256 over what must be identical on every rank (scenario,
//! point, hardware settings, dmsim version), sent in HELLO so that a rank started with another
//! scenario or build is refused with both hashes named.

use std::fmt;
use std::path::Path;

use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

use crate::error::HwError;

/// Environment variable holding the job secret (the launcher exports it to every rank).
pub const SECRET_ENV: &str = "DMSIM_JOB_SECRET";
/// Shortest accepted secret: 16 characters (e.g. `openssl rand -hex 16` gives 32).
pub const MIN_SECRET_BYTES: usize = 16;
/// Bytes of a nonce (hex on the wire).
pub const NONCE_BYTES: usize = 16;

type HmacSha256 = hmac::Hmac<Sha256>;

/// The per-job shared secret. Deliberately neither `Display` nor `Clone`-into-string.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret(<{} bytes, hidden>)", self.0.len())
    }
}

impl Secret {
    /// A secret from its text; surrounding whitespace (a file's final newline) is dropped.
    /// `source` names where it came from, for the error.
    pub fn new(text: &str, source: &str) -> Result<Secret, HwError> {
        let text = text.trim();
        if text.len() < MIN_SECRET_BYTES {
            return Err(HwError::Config(format!(
                "job secret from {source} is {} characters; at least {MIN_SECRET_BYTES} are needed \
                 (e.g. `openssl rand -hex 32`)",
                text.len()
            )));
        }
        Ok(Secret(text.as_bytes().to_vec()))
    }

    /// The secret in `path` (whole file, trimmed).
    pub fn from_file(path: &Path) -> Result<Secret, HwError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| HwError::Config(format!("job secret file {}: {e}", path.display())))?;
        Secret::new(&text, &format!("file {}", path.display()))
    }

    /// The secret in `$DMSIM_JOB_SECRET`, if set; `env` looks a variable up.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Option<Secret>, HwError> {
        env(SECRET_ENV).map(|v| Secret::new(&v, &format!("${SECRET_ENV}"))).transpose()
    }

    /// HMAC-SHA256 over `parts`, each length-prefixed so that no two part lists collide.
    pub fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        for p in parts {
            mac.update(&(p.len() as u64).to_le_bytes());
            mac.update(p);
        }
        mac.finalize().into_bytes().into()
    }

    /// Whether `proof` (hex) is the MAC of `parts`; compared in constant time.
    pub fn verify(&self, parts: &[&[u8]], proof: &str) -> bool {
        let Some(bytes) = from_hex(proof) else { return false };
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        for p in parts {
            mac.update(&(p.len() as u64).to_le_bytes());
            mac.update(p);
        }
        mac.verify_slice(&bytes).is_ok()
    }
}

/// A fresh random nonce, hex.
pub fn nonce() -> Result<String, HwError> {
    let mut bytes = [0u8; NONCE_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|e| HwError::Bootstrap(format!("no randomness for a rendezvous nonce: {e}")))?;
    Ok(hex(&bytes))
}

/// The job hash: SHA-256 of `parts` (length-prefixed), first 16 bytes as 32 hex digits.
pub fn job_hash(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    hex(&h.finalize()[..16])
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Lower- or upper-case hex to bytes; `None` for odd length or a non-hex character.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    let t = text.as_bytes();
    if !t.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    t.chunks(2).map(|p| Some(digit(p[0])? << 4 | digit(p[1])?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_matches_rfc4231_case_2() {
        // Goal: the MAC is standard HMAC-SHA256 (our length prefixes aside). Method: a key too
        // short for `Secret::new` goes in directly; RFC 4231 test case 2, unprefixed.
        let key = b"Jefe";
        let mut mac = HmacSha256::new_from_slice(key).unwrap();
        mac.update(b"what do ya want for nothing?");
        let out: [u8; 32] = mac.finalize().into_bytes().into();
        assert_eq!(hex(&out), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn secrets_verify_their_own_macs_only_and_never_print() {
        let a = Secret::new("0123456789abcdef-job-a\n", "test").unwrap();
        let b = Secret::new("0123456789abcdef-job-b", "test").unwrap();
        let proof = hex(&a.mac(&[b"root", b"n1"]));
        assert!(a.verify(&[b"root", b"n1"], &proof));
        assert!(!b.verify(&[b"root", b"n1"], &proof), "another secret must not verify");
        assert!(!a.verify(&[b"root", b"n2"], &proof), "another nonce must not verify");
        assert!(!a.verify(&[b"ro", b"otn1"], &proof), "parts are length-prefixed");
        assert!(!a.verify(&[b"root", b"n1"], "zz"), "garbage is no proof");
        assert!(!format!("{a:?}").contains("0123"), "Debug must hide the secret");
        let e = Secret::new("short", "$DMSIM_JOB_SECRET").unwrap_err().to_string();
        assert!(e.contains("$DMSIM_JOB_SECRET") && e.contains("at least 16"), "{e}");
        assert!(!e.contains("short"), "the error must not echo the secret: {e}");
    }

    #[test]
    fn nonces_differ_and_hex_round_trips() {
        let (x, y) = (nonce().unwrap(), nonce().unwrap());
        assert_ne!(x, y);
        assert_eq!(x.len(), 2 * NONCE_BYTES);
        assert_eq!(from_hex(&x).map(|b| hex(&b)), Some(x));
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
        assert_ne!(job_hash(&[b"ab", b"c"]), job_hash(&[b"a", b"bc"]));
    }
}
