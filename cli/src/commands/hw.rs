//! `dmsim hw`: real RDMA. `calibrate` measures a device and writes a NIC profile the simulator
//! loads; `run` executes a scenario point's workload with one process per node.

use std::path::PathBuf;
use std::process::ExitCode;

use dmsim_hw::calibrate::{calibrate, CalibrateOptions, Calibration};
use dmsim_hw::HwError;

use super::{exit, shown};
use dmsim_sim::fabric::Profile;

#[derive(clap::Subcommand)]
pub enum HwCommand {
    /// Measure per-verb latency, bandwidth and atomic rates of a device; write a NIC profile.
    Calibrate(CalibrateArgs),
    /// Run a scenario's workload on real nodes (one process per node; see README).
    Run(super::hw_run::HwRunArgs),
}

/// Which device, port and GID: perftest's `-d`, `-i`, `-x`.
#[derive(clap::Args)]
pub struct DeviceArgs {
    /// RDMA device (perftest -d); the first device if omitted.
    #[arg(short = 'd', long)]
    pub device: Option<String>,
    /// Port number (perftest -i).
    #[arg(short = 'i', long, default_value_t = 1)]
    pub port: u8,
    /// GID index for RoCE (perftest -x); the first IPv4-mapped GID if omitted.
    #[arg(short = 'x', long)]
    pub gid_index: Option<u8>,
}

#[derive(clap::Args)]
pub struct CalibrateArgs {
    #[command(flatten)]
    pub nic: DeviceArgs,
    /// Timed verbs per latency measurement (perftest -n).
    #[arg(short = 'n', long, default_value_t = 1000)]
    pub iterations: u32,
    /// Profile fields the device cannot measure are taken from this named profile.
    #[arg(long, default_value = "cx5_100g")]
    pub base: String,
    /// Name of the written profile.
    #[arg(long, default_value = "calibrated")]
    pub name: String,
    /// Where to write the profile JSON (default: print it).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn hw(command: HwCommand) -> ExitCode {
    match command {
        HwCommand::Calibrate(args) => calibrate_command(args),
        HwCommand::Run(args) => super::hw_run::run(args),
    }
}

/// Exit status for a hardware error: unavailable RDMA is its own status.
pub fn hw_error(e: &HwError) -> ExitCode {
    eprintln!("error: {e}");
    match e {
        HwError::NotBuilt | HwError::Device { .. } => ExitCode::from(exit::NO_RDMA),
        HwError::Config(_) => ExitCode::from(exit::BAD_INPUT),
        _ => ExitCode::from(exit::FAILURE),
    }
}

fn calibrate_command(args: CalibrateArgs) -> ExitCode {
    let Some(base) = Profile::named(&args.base) else {
        eprintln!("error: --base: unknown profile {:?} (known: {})", args.base, Profile::names().join(", "));
        return ExitCode::from(exit::BAD_INPUT);
    };
    let options = CalibrateOptions {
        device: args.nic.device.clone(),
        port: args.nic.port,
        gid_index: args.nic.gid_index,
        iterations: args.iterations.max(1),
        ..CalibrateOptions::default()
    };
    let measured = match calibrate(&options) {
        Ok(c) => c,
        Err(e) => return hw_error(&e),
    };
    println!("{measured}");
    let profile = profile_from(&measured, base, &args.name);
    let text = serde_json::to_string_pretty(&profile).expect("profile serializes");
    match &args.out {
        None => println!("{text}"),
        Some(path) => {
            if let Err(e) = std::fs::write(path, text + "\n") {
                eprintln!("error: {}: {e}", shown(path));
                return ExitCode::from(exit::IO);
            }
            println!("wrote {}", shown(path));
        }
    }
    ExitCode::SUCCESS
}

/// A simulator profile from measurements: latencies are medians of 8-byte verbs, the link rate
/// the better of READ/WRITE bandwidth, the atomic unit's service time the inverse of the
/// same-address rate. Knobs a single client cannot measure (per-class NIC rate caps, CPU, SSD)
/// keep the base profile's values, and the notes say which is which.
pub fn profile_from(c: &Calibration, mut p: Profile, name: &str) -> Profile {
    let source = format!("measured by `dmsim hw calibrate` on {}", c.device);
    let set = |p: &mut Profile, field: &str, note: String| {
        p.notes.insert(field.to_string(), note);
    };
    p.name = name.to_string();
    p.description = format!("Calibrated on device {} ({} iterations per latency)", c.device, c.iterations);
    p.latency_ns_read = c.read_latency_ns.p50.max(2);
    p.latency_ns_write = c.write_latency_ns.p50.max(2);
    p.latency_ns_atomic = c.cas_latency_ns.p50.max(c.faa_latency_ns.p50).max(2);
    // SEND is not measured separately: assume it sits between WRITE and READ, as on ConnectX.
    p.latency_ns_send = (p.latency_ns_write + p.latency_ns_read) / 2;
    for f in ["latency_ns_read", "latency_ns_write", "latency_ns_atomic"] {
        set(&mut p, f, format!("p50 of 8-byte verbs, {source}"));
    }
    set(&mut p, "latency_ns_send", format!("mean of measured READ and WRITE latency, {source}"));
    let bandwidth_mb_s = c.read_bandwidth_mb_s.max(c.write_bandwidth_mb_s);
    if bandwidth_mb_s > 0.0 {
        p.link_bandwidth_gbps = bandwidth_mb_s * 8.0 / 1000.0;
        set(
            &mut p,
            "link_bandwidth_gbps",
            format!("best of READ/WRITE bandwidth at {} B, {source}", c.bandwidth_message_bytes),
        );
    }
    if c.same_address_atomic_mops > 0.0 {
        p.atomic_service_ns = (1e3 / c.same_address_atomic_mops).round().max(1.0) as u64;
        set(&mut p, "atomic_service_ns", format!("1 / same-address FAA rate, {source}"));
    }
    if c.distinct_address_atomic_mops > 0.0 {
        p.rate_mops_atomic = c.distinct_address_atomic_mops;
        set(
            &mut p,
            "rate_mops_atomic",
            format!("distinct-address FAA rate (lower bound of the cap), {source}"),
        );
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmsim_hw::calibrate::LatencyNs;

    #[test]
    fn calibration_maps_onto_a_valid_profile() {
        // Goal: measured numbers land in the right knobs and the result passes validation.
        let lat = |p50| LatencyNs { min: p50 - 10, p50, mean: p50, p99: p50 * 2, max: p50 * 3 };
        let c = Calibration {
            device: "rxe0".into(),
            iterations: 100,
            read_latency_ns: lat(95_000),
            write_latency_ns: lat(55_000),
            cas_latency_ns: lat(60_000),
            faa_latency_ns: lat(58_000),
            batch_cas_read_latency_ns: lat(120_000),
            bandwidth_message_bytes: 65536,
            read_bandwidth_mb_s: 15.0,
            write_bandwidth_mb_s: 17.0,
            same_address_atomic_mops: 0.02,
            distinct_address_atomic_mops: 0.03,
        };
        let p = profile_from(&c, Profile::named("cx5_100g").unwrap(), "rxe");
        assert_eq!(p.latency_ns_read, 95_000);
        assert_eq!(p.latency_ns_atomic, 60_000);
        assert_eq!(p.atomic_service_ns, 50_000);
        assert!((p.link_bandwidth_gbps - 0.136).abs() < 1e-9);
        assert!(p.problems().is_empty(), "{:?}", p.problems());
        assert!(p.notes["latency_ns_read"].contains("rxe0"));
    }
}
