//! `dmsim`: see `dmsim --help`, README.md and ARCHITECTURE.md.

fn main() -> std::process::ExitCode {
    dmsim::commands::main()
}
