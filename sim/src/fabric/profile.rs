//! NIC profiles: the fabric knobs for one testbed, as JSON with a one-line source per value.
//!
//! Named profiles live in `sim/profiles/<name>.json` and are compiled in. A scenario names one
//! and may override single fields; `dmsim hw calibrate` writes one from measurements.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Every knob of the modelled fabric. Units are in the names; times in integer nanoseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Link rate in each direction, Gbit/s.
    pub link_bandwidth_gbps: f64,
    /// Bytes of headers on the wire per message (request or response).
    pub header_bytes: u32,
    /// Idle round trip of an 8-byte verb, per class.
    pub latency_ns_read: u64,
    pub latency_ns_write: u64,
    pub latency_ns_atomic: u64,
    pub latency_ns_send: u64,
    /// Per-NIC message-rate caps, per verb class, in million operations per second.
    pub rate_mops_read: f64,
    pub rate_mops_write: f64,
    pub rate_mops_atomic: f64,
    pub rate_mops_send: f64,
    /// Service time of the per-address atomic unit: atomics on one word serialize at this pace.
    pub atomic_service_ns: u64,
    /// Outstanding work requests per QP before a post fails.
    pub qp_outstanding_max: u32,
    /// Upper bound of the uniform extra one-way latency drawn per message (0 = none).
    pub jitter_ns_max: u64,
    /// Compute-node local costs protocols charge with `cpu(ns)`.
    pub cpu_ns_local_access: u64,
    pub cpu_ns_per_kib_copy: u64,
    /// SSD model (ScaleStore).
    pub ssd_latency_ns_read: u64,
    pub ssd_latency_ns_write: u64,
    pub ssd_bandwidth_mbps: f64,
    /// SSD commands in service at once (NVMe queue depth the node uses).
    #[serde(default = "one")]
    pub ssd_queue_depth: u32,
    /// Bytes of on-chip NIC device memory (0: none). A node gets device memory only when the
    /// run asks for it: `SimConfig::enable_device_memory` gives each home node this much (a run
    /// may also set `SimConfig::device_memory_bytes` per node directly).
    #[serde(default)]
    pub device_memory_bytes: u64,
    /// Round-trip time a verb on device memory saves against host memory (no PCIe trip to DRAM).
    #[serde(default)]
    pub device_latency_saving_ns: u64,
    /// Service time of the device-memory atomic unit (per word, like `atomic_service_ns`).
    #[serde(default)]
    pub device_atomic_service_ns: u64,
    /// Service time of a masked atomic on the per-word atomic unit (host memory).
    #[serde(default)]
    pub masked_atomic_service_ns: u64,
    /// Unsignaled work requests in flight per QP before `post_unsignaled` fails.
    #[serde(default = "sixteen")]
    pub unsignaled_max: u32,
    /// How a READ/WRITE over 64 bytes lands when the run does not ask for any-order tearing
    /// (`SimConfig::torn_large_verbs`): `none` (at once) or `ascending` (64-byte pieces in
    /// increasing address order across its transfer time).
    #[serde(default)]
    pub tear_order: TearOrder,
    /// Where each value comes from (field name → one line).
    #[serde(default)]
    pub notes: BTreeMap<String, String>,
}

/// The landing order of a large verb's 64-byte pieces (see [`Profile::tear_order`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TearOrder {
    /// The whole verb takes effect at once.
    #[default]
    None,
    /// Pieces take effect in increasing address order, spread over the verb's transfer time.
    Ascending,
}

fn one() -> u32 {
    1
}

fn sixteen() -> u32 {
    16
}

const NAMED: &[(&str, &str)] = &[
    ("cx3_fdr56", include_str!("../../profiles/cx3_fdr56.json")),
    ("cx4_100g", include_str!("../../profiles/cx4_100g.json")),
    ("cx5_100g", include_str!("../../profiles/cx5_100g.json")),
    ("cx5_nvme_scalestore", include_str!("../../profiles/cx5_nvme_scalestore.json")),
];

/// The smallest rate or bandwidth a profile may state (its unit: Mops, Gb/s, MB/s).
const RATE_MIN: f64 = 0.001;
/// The longest duration a profile may state: one second.
const DURATION_MAX_NS: u64 = 1_000_000_000;

impl Profile {
    /// The compiled-in profile `name`, or `None`.
    pub fn named(name: &str) -> Option<Profile> {
        let (_, text) = NAMED.iter().find(|(n, _)| *n == name)?;
        let profile: Profile = serde_json::from_str(text).expect("compiled-in profile parses");
        Some(profile)
    }

    pub fn names() -> Vec<&'static str> {
        NAMED.iter().map(|(n, _)| *n).collect()
    }

    /// Every problem with the values, as (field, reason).
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        // Rates and bandwidths: positive and within a physical range, so that one operation's
        // service time stays a sane number of picoseconds (1e-300 Mops would overflow them).
        let mut rate = |field: &str, v: f64, max: f64| {
            if !(v.is_finite() && (RATE_MIN..=max).contains(&v)) {
                out.push((field.to_string(), format!("must be a number in [{RATE_MIN}, {max}], got {v:?}")));
            }
        };
        rate("link_bandwidth_gbps", self.link_bandwidth_gbps, 100_000.0);
        rate("rate_mops_read", self.rate_mops_read, 100_000.0);
        rate("rate_mops_write", self.rate_mops_write, 100_000.0);
        rate("rate_mops_atomic", self.rate_mops_atomic, 100_000.0);
        rate("rate_mops_send", self.rate_mops_send, 100_000.0);
        rate("ssd_bandwidth_mbps", self.ssd_bandwidth_mbps, 100_000_000.0);
        for (field, v) in [
            ("latency_ns_read", self.latency_ns_read),
            ("latency_ns_write", self.latency_ns_write),
            ("latency_ns_atomic", self.latency_ns_atomic),
            ("latency_ns_send", self.latency_ns_send),
        ] {
            if !(2..=DURATION_MAX_NS).contains(&v) {
                out.push((
                    field.to_string(),
                    format!("a round trip must be in [2, {DURATION_MAX_NS}] ns, got {v}"),
                ));
            }
        }
        // Every other duration: at most one second (a 2^64 − 1 jitter would wrap the clock).
        for (field, v) in [
            ("atomic_service_ns", self.atomic_service_ns),
            ("jitter_ns_max", self.jitter_ns_max),
            ("cpu_ns_local_access", self.cpu_ns_local_access),
            ("cpu_ns_per_kib_copy", self.cpu_ns_per_kib_copy),
            ("ssd_latency_ns_read", self.ssd_latency_ns_read),
            ("ssd_latency_ns_write", self.ssd_latency_ns_write),
            ("device_latency_saving_ns", self.device_latency_saving_ns),
            ("device_atomic_service_ns", self.device_atomic_service_ns),
            ("masked_atomic_service_ns", self.masked_atomic_service_ns),
        ] {
            if v > DURATION_MAX_NS {
                out.push((field.to_string(), format!("must be at most {DURATION_MAX_NS} ns (1 s), got {v}")));
            }
        }
        if self.header_bytes > 1 << 20 {
            out.push(("header_bytes".into(), format!("must be at most 1 MiB, got {}", self.header_bytes)));
        }
        for (field, v) in [
            ("qp_outstanding_max", self.qp_outstanding_max),
            ("ssd_queue_depth", self.ssd_queue_depth),
            ("unsignaled_max", self.unsignaled_max),
        ] {
            if v == 0 {
                out.push((field.into(), "must be at least 1".into()));
            }
        }
        let saving = self.device_latency_saving_ns;
        if saving > 0 && saving * 2 >= self.latency_ns_atomic.min(self.latency_ns_read) {
            out.push((
                "device_latency_saving_ns".into(),
                "must be less than half the smallest READ/atomic round trip".into(),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_profiles_parse_validate_and_document_every_value() {
        // Goal: each shipped profile loads, passes validation, and has a source note per knob.
        for name in Profile::names() {
            let p = Profile::named(name).unwrap();
            assert_eq!(p.name, name);
            assert!(p.problems().is_empty(), "{name}: {:?}", p.problems());
            let json = serde_json::to_value(&p).unwrap();
            for key in json.as_object().unwrap().keys() {
                if ["name", "description", "notes"].contains(&key.as_str()) {
                    continue;
                }
                assert!(p.notes.contains_key(key), "{name}: no note for {key}");
            }
        }
        assert!(Profile::named("cx9").is_none());
    }
}
