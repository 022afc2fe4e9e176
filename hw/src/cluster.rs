//! Cluster bootstrap: who am I, who are the others, and one connected [`HwNic`] per process.
//!
//! 1. Rank and size come from flags, else from the launcher's environment (Slurm, Open MPI,
//!    PMI — see [`discover_rank_size`]). Node `i` of the scenario's cluster is rank `i`.
//! 2. Each rank opens the device, registers its region and creates its QPs, then sends one
//!    [`NodeInfo`](crate::info::NodeInfo) line to the TCP rendezvous at rank 0
//!    ([`Rendezvous`]), which answers with every rank's line. Ranks prove to each other that
//!    they hold the job secret ([`Secret`], from the launcher) and agree on the job hash
//!    ([`job_hash_of`]: the caller's description of the job, the hardware settings, the cluster
//!    shape and the dmsim version).
//! 3. Each rank connects its QPs (INIT → RTR → RTS) and posts receive buffers; a barrier
//!    ("connected") makes sure no rank posts a verb before its peers' QPs can answer.
//!
//! Every step is bounded by [`HwConfig::bootstrap_timeout`]; a missing rank, a bad line or a
//! device problem is an [`HwError`] naming it.

use std::time::Duration;

use dmsim_protocols::nic;

use crate::auth::{self, Secret};
use crate::config::HwConfig;
use crate::error::HwError;
use crate::nic::HwNic;
use crate::rendezvous::Rendezvous;
use crate::runtime::Runtime;

/// What `dmsim hw run` passes in (perftest-style flags: `-d DEVICE`, `-x GID_INDEX`).
#[derive(Clone, Debug)]
pub struct BootstrapOptions {
    /// `--rank`; else the launcher's environment.
    pub rank: Option<u32>,
    /// `--size`; else the launcher's environment.
    pub size: Option<u32>,
    /// `--rendezvous HOST:PORT` of rank 0; else `$DMSIM_RENDEZVOUS`. Not needed for size 1.
    pub rendezvous: Option<String>,
    /// `-d`: device name; the first device if `None`.
    pub device: Option<String>,
    /// `-i`: port number (1-based, as in perftest).
    pub port: u8,
    /// `-x`: GID index for RoCE; chosen automatically (first IPv4-mapped GID) if `None` on an
    /// Ethernet port; ignored on InfiniBand (LID routing).
    pub gid_index: Option<u8>,
    /// The cluster's shape, identical on every rank (from the scenario file).
    pub shape: nic::Cluster,
    pub config: HwConfig,
    /// The job secret (`--job-secret-file`); else `$DMSIM_JOB_SECRET`. Needed for size > 1.
    pub secret: Option<Secret>,
    /// What this job runs (e.g. the scenario's hash and the point), to be equal on every rank;
    /// goes into the job hash.
    pub job: String,
    /// Rank 0 listens on every interface rather than exactly on the rendezvous address.
    pub listen_all: bool,
}

impl BootstrapOptions {
    pub fn new(shape: nic::Cluster) -> BootstrapOptions {
        BootstrapOptions {
            rank: None,
            size: None,
            rendezvous: None,
            device: None,
            port: 1,
            gid_index: None,
            shape,
            config: HwConfig::default(),
            secret: None,
            job: String::new(),
            listen_all: false,
        }
    }
}

/// Rank and size from flags, else `SLURM_PROCID`/`SLURM_NTASKS`, else
/// `OMPI_COMM_WORLD_RANK`/`OMPI_COMM_WORLD_SIZE`, else `PMI_RANK`/`PMI_SIZE`. `env` looks a
/// variable up (pass `|k| std::env::var(k).ok()`).
pub fn discover_rank_size(
    rank: Option<u32>,
    size: Option<u32>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(u32, u32), HwError> {
    const LAUNCHERS: [(&str, &str); 3] = [
        ("SLURM_PROCID", "SLURM_NTASKS"),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMI_RANK", "PMI_SIZE"),
    ];
    let parse = |key: &str, value: String| -> Result<u32, HwError> {
        value.trim().parse().map_err(|_| HwError::Config(format!("{key}={value:?} is not a number")))
    };
    let (rank, size) = match (rank, size) {
        (Some(r), Some(s)) => (r, s),
        (None, None) => {
            let found = LAUNCHERS.iter().find_map(|(rk, sk)| match (env(rk), env(sk)) {
                (Some(r), Some(s)) => Some((*rk, r, *sk, s)),
                _ => None,
            });
            match found {
                Some((rk, r, sk, s)) => (parse(rk, r)?, parse(sk, s)?),
                None => {
                    return Err(HwError::Config(
                        "no rank/size: pass --rank and --size, or run under srun / mpirun \
                         (SLURM_PROCID+SLURM_NTASKS, OMPI_COMM_WORLD_RANK+SIZE, PMI_RANK+PMI_SIZE)"
                            .into(),
                    ))
                }
            }
        }
        _ => return Err(HwError::Config("--rank and --size must be given together".into())),
    };
    if size == 0 || rank >= size {
        return Err(HwError::Config(format!("rank {rank} must be below size {size}")));
    }
    Ok((rank, size))
}

/// One process's view of the running cluster.
pub struct HwCluster {
    rank: u32,
    size: u32,
    nic: HwNic,
    rendezvous: Rendezvous,
    timeout: Duration,
}

impl HwCluster {
    pub fn rank(&self) -> u32 {
        self.rank
    }
    pub fn size(&self) -> u32 {
        self.size
    }
    /// This node's NIC on channel 0 (`nic.qp(c)` for others).
    pub fn nic(&self) -> HwNic {
        self.nic.clone()
    }
    pub fn runtime(&self) -> &Runtime {
        self.nic.runtime()
    }
    /// Runs `main` (and the tasks it spawns) on this node's runtime until `main` ends.
    pub fn block_on<T: Send + 'static>(
        &self,
        main: impl std::future::Future<Output = T> + Send + 'static,
    ) -> T {
        self.nic.runtime().block_on(self.nic.config().threads, main)
    }
    /// Waits until every rank reaches the barrier `name`, bounded by the bootstrap timeout.
    /// While it waits, this node keeps serving: its spawned tasks (message handlers that peers
    /// still depend on, e.g. SELCC's invalidation handlers) run and its CQs are polled.
    pub fn barrier(&mut self, name: &str) -> Result<(), HwError> {
        let timeout = self.timeout;
        self.serving_barrier(name, timeout)
    }

    /// Runs `main` like [`HwCluster::block_on`], then keeps this node serving until every rank
    /// has reached the barrier `name`, waiting at most `timeout` for the slowest rank.
    pub fn block_on_until_all<T: Send + 'static>(
        &mut self,
        name: &str,
        timeout: Duration,
        main: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<T, HwError> {
        let value = self.block_on(main);
        self.serving_barrier(name, timeout).map(|()| value)
    }

    /// The closing barrier (bounded by [`HwConfig::finish_timeout`], since ranks may finish
    /// their work far apart): no rank tears down its memory or stops its handlers while another
    /// may still use them.
    pub fn finish(mut self) -> Result<(), HwError> {
        let timeout = self.nic.config().finish_timeout;
        self.serving_barrier("finish", timeout)
    }

    fn serving_barrier(&mut self, name: &str, timeout: Duration) -> Result<(), HwError> {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let all_done = Arc::new(AtomicBool::new(false));
        let HwCluster { nic, rendezvous, .. } = self;
        let threads = nic.config().threads;
        let runtime = nic.runtime().clone();
        std::thread::scope(|scope| {
            let barrier = {
                let all_done = all_done.clone();
                scope.spawn(move || {
                    let result = rendezvous.barrier(name, timeout);
                    all_done.store(true, Ordering::Release);
                    result
                })
            };
            let sleeper = runtime.clone();
            runtime.block_on(threads, async move {
                while !all_done.load(Ordering::Acquire) {
                    sleeper.sleep(Duration::from_millis(1)).await;
                }
            });
            barrier
                .join()
                .unwrap_or_else(|_| Err(HwError::Bootstrap(format!("barrier {name}: thread panicked"))))
        })
    }
}

impl Drop for HwCluster {
    fn drop(&mut self) {
        // Pending tasks hold NIC handles; drop them so the device resources are released.
        self.nic.runtime().clear();
    }
}

/// Discovers rank and size, exchanges QP information through the rendezvous and connects.
/// Without the `rdma` feature this returns [`HwError::NotBuilt`].
pub fn bootstrap(opts: BootstrapOptions) -> Result<HwCluster, HwError> {
    let env = |k: &str| std::env::var(k).ok();
    let (rank, size) = discover_rank_size(opts.rank, opts.size, env)?;
    if opts.shape.node_count() != size as usize || opts.shape.region_size_bytes.len() != size as usize {
        return Err(HwError::Config(format!(
            "the scenario has {} nodes but the launcher started {size} ranks",
            opts.shape.node_count()
        )));
    }
    let rendezvous = match (&opts.rendezvous, size) {
        (Some(r), _) => r.clone(),
        (None, 1) => String::new(),
        (None, _) => std::env::var("DMSIM_RENDEZVOUS").map_err(|_| {
            HwError::Config(
                "no rendezvous: pass --rendezvous HOST:PORT (rank 0's address) or set DMSIM_RENDEZVOUS"
                    .into(),
            )
        })?,
    };
    let secret = match (opts.secret.clone(), size) {
        (Some(s), _) => s,
        (None, 1) => Secret::new("unused-for-one-rank", "a one-rank job")?,
        (None, _) => Secret::from_env(|k| std::env::var(k).ok())?.ok_or_else(|| {
            HwError::Config(format!(
                "no job secret: export {} (the same random value on every rank, e.g. \
                 `export {0}=$(openssl rand -hex 32)` before srun/mpirun) or pass --job-secret-file",
                auth::SECRET_ENV
            ))
        })?,
    };
    connect_all(rank, size, &rendezvous, secret, opts)
}

/// The job hash every rank sends in HELLO: `job` (the caller's description), the settings that
/// must agree between ranks, the cluster shape and this build's version.
pub fn job_hash_of(job: &str, config: &HwConfig, shape: &nic::Cluster) -> String {
    // Local settings (device, port, GID index, storage path) may differ between ranks.
    let settings = format!(
        "channels={} qp_depth={} verb_timeout={:?} recv_timeout={:?} max_message_bytes={} \
         message_depth={} ack_timeout={} retry_count={} device_memory_bytes={} ssd_bytes={}",
        config.channels,
        config.qp_depth,
        config.verb_timeout,
        config.recv_timeout,
        config.max_message_bytes,
        config.message_depth,
        config.ack_timeout,
        config.retry_count,
        config.device_memory_bytes,
        config.ssd_bytes
    );
    let shape = format!("{:?} {:?}", shape.kinds, shape.region_size_bytes);
    auth::job_hash(&[
        b"dmsim-job/1",
        env!("CARGO_PKG_VERSION").as_bytes(),
        job.as_bytes(),
        settings.as_bytes(),
        shape.as_bytes(),
    ])
}

/// The rendezvous options of this bootstrap: root and members validate every info line.
fn rendezvous_options(
    addr: &str,
    secret: Secret,
    size: u32,
    opts: &BootstrapOptions,
) -> crate::rendezvous::Options {
    let hash = job_hash_of(&opts.job, &opts.config, &opts.shape);
    let mut o = crate::rendezvous::Options::new(addr, secret, &hash, opts.config.bootstrap_timeout);
    o.listen_all = opts.listen_all;
    // An info line lists (size + 1) · channels + size QP numbers of at most 8 digits.
    let qps = (size as usize + 1) * opts.config.channels.max(1) as usize + size as usize;
    o.max_info_bytes = 1024 + 9 * qps;
    o.validate = std::sync::Arc::new(move |rank, line| {
        crate::info::NodeInfo::parse(line, rank, size).map(|_| ()).map_err(|e| e.to_string())
    });
    o
}

#[cfg(not(feature = "rdma"))]
fn connect_all(
    _rank: u32,
    size: u32,
    rendezvous: &str,
    secret: Secret,
    opts: BootstrapOptions,
) -> Result<HwCluster, HwError> {
    let _ = (Rendezvous::exchange, Runtime::new, rendezvous_options(rendezvous, secret, size, &opts));
    Err(HwError::NotBuilt)
}

#[cfg(feature = "rdma")]
fn connect_all(
    rank: u32,
    size: u32,
    rendezvous: &str,
    secret: Secret,
    opts: BootstrapOptions,
) -> Result<HwCluster, HwError> {
    use crate::info::NodeInfo;
    use crate::nic::real;
    let me = nic::NodeId(rank as u16);
    let timeout = opts.config.bootstrap_timeout;
    let setup =
        real::setup_local(me, &opts.shape, opts.device.as_deref(), opts.port, opts.gid_index, &opts.config)?;
    let options = rendezvous_options(rendezvous, secret, size, &opts);
    let (mut rendezvous, lines) = Rendezvous::exchange(rank, size, &setup.info.to_line(), &options)?;
    let infos: Vec<NodeInfo> = lines
        .iter()
        .enumerate()
        .map(|(r, l)| NodeInfo::parse(l, r as u32, size))
        .collect::<Result<_, _>>()?;
    let nic = real::connect(setup, opts.shape, &infos, Runtime::new())?;
    rendezvous.barrier("connected", timeout)?;
    Ok(HwCluster { rank, size, nic, rendezvous, timeout })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| pairs.iter().find(|(pk, _)| pk == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn rank_and_size_come_from_flags_then_launchers() {
        assert_eq!(discover_rank_size(Some(1), Some(3), env_of(&[("SLURM_PROCID", "0")])).unwrap(), (1, 3));
        let slurm =
            env_of(&[("SLURM_PROCID", "2"), ("SLURM_NTASKS", "4"), ("PMI_RANK", "0"), ("PMI_SIZE", "4")]);
        assert_eq!(discover_rank_size(None, None, slurm).unwrap(), (2, 4));
        let ompi = env_of(&[("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2")]);
        assert_eq!(discover_rank_size(None, None, ompi).unwrap(), (1, 2));
        let pmi = env_of(&[("PMI_RANK", "0"), ("PMI_SIZE", "1")]);
        assert_eq!(discover_rank_size(None, None, pmi).unwrap(), (0, 1));
    }

    #[test]
    fn bad_rank_and_size_are_errors_not_panics() {
        let none = env_of(&[]);
        assert!(discover_rank_size(None, None, &none).unwrap_err().to_string().contains("--rank"));
        assert!(discover_rank_size(Some(1), None, &none).is_err());
        assert!(discover_rank_size(Some(3), Some(3), &none).is_err());
        let garbage = env_of(&[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "2")]);
        assert!(discover_rank_size(None, None, garbage).unwrap_err().to_string().contains("SLURM_PROCID"));
    }

    #[test]
    fn shape_must_match_the_launcher() {
        let shape = nic::Cluster { kinds: vec![nic::NodeKind::Memory], region_size_bytes: vec![64] };
        let mut opts = BootstrapOptions::new(shape);
        opts.rank = Some(0);
        opts.size = Some(2);
        let e = bootstrap(opts).err().unwrap().to_string();
        assert!(e.contains("1 nodes but the launcher started 2"), "{e}");
    }

    #[test]
    fn more_than_one_rank_needs_a_job_secret() {
        if std::env::var_os(auth::SECRET_ENV).is_some() {
            return; // the environment provides one: nothing to check here
        }
        let shape = nic::Cluster { kinds: vec![nic::NodeKind::Memory; 2], region_size_bytes: vec![64; 2] };
        let mut opts = BootstrapOptions::new(shape);
        (opts.rank, opts.size, opts.rendezvous) = (Some(1), Some(2), Some("127.0.0.1:9".into()));
        let e = bootstrap(opts).err().unwrap().to_string();
        assert!(e.contains("no job secret") && e.contains("DMSIM_JOB_SECRET"), "{e}");
    }

    #[test]
    fn the_job_hash_covers_job_settings_and_shape_but_not_local_paths() {
        let shape = nic::Cluster { kinds: vec![nic::NodeKind::Memory; 2], region_size_bytes: vec![64; 2] };
        let config = HwConfig::default();
        let base = job_hash_of("scenario ab point 0", &config, &shape);
        assert_eq!(base.len(), 32);
        assert_ne!(base, job_hash_of("scenario ab point 1", &config, &shape));
        assert_ne!(
            base,
            job_hash_of("scenario ab point 0", &HwConfig { channels: 2, ..config.clone() }, &shape)
        );
        let bigger = nic::Cluster { region_size_bytes: vec![64, 128], ..shape.clone() };
        assert_ne!(base, job_hash_of("scenario ab point 0", &config, &bigger));
        let local = HwConfig { ssd_path: Some("/tmp/rank-1".into()), ..config.clone() };
        assert_eq!(base, job_hash_of("scenario ab point 0", &local, &shape));
    }

    #[cfg(not(feature = "rdma"))]
    #[test]
    fn without_rdma_bootstrap_says_so() {
        let shape = nic::Cluster { kinds: vec![nic::NodeKind::Memory], region_size_bytes: vec![64] };
        let mut opts = BootstrapOptions::new(shape);
        opts.rank = Some(0);
        opts.size = Some(1);
        let e = bootstrap(opts).err().unwrap();
        assert_eq!(e, HwError::NotBuilt);
        assert!(e.to_string().contains("built without --features rdma"));
    }
}
