//! `dmsim`: see `dmsim --help`, README.md and ARCHITECTURE.md.

/// mimalloc instead of the system allocator: a fuzz schedule builds and drops a whole simulated
/// cluster, and the event loop allocates per verb; glibc's malloc/free were ~22 % of
/// `dmsim fuzz scenarios/selcc/fuzz-small.json` (perf, issue #15).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    dmsim::commands::main()
}
