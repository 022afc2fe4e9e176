//! Bindings to the system's libibverbs, generated from its own `<infiniband/verbs.h>`.
//!
//! Why not the `ibverbs-sys` crate: its build script configures and compiles the whole vendored
//! rdma-core with cmake (about 12 minutes on a 2-core machine, on every clean build) only to
//! generate these bindings, and links against that copy. libibverbs' ABI is stable, the
//! project's installer (`hw/scripts/install-deps.sh`) already installs `libibverbs-dev`, and
//! bindgen over the installed header takes seconds.
//!
//! Header search: `DMSIM_VERBS_INCLUDE` (a directory holding `infiniband/verbs.h`), else what
//! `pkg-config --cflags libibverbs` says, else the compiler's default paths.
//!
//! Without the `generate` feature (workspace-wide builds that do not ask for RDMA) this does
//! nothing and the crate is empty.

#[cfg(not(feature = "generate"))]
fn main() {}

#[cfg(feature = "generate")]
fn main() {
    use std::env;
    use std::path::PathBuf;
    use std::process::Command;

    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-env-changed=DMSIM_VERBS_INCLUDE");
    println!("cargo:rustc-link-lib=ibverbs");

    let mut clang_args: Vec<String> = Vec::new();
    if let Ok(dir) = env::var("DMSIM_VERBS_INCLUDE") {
        clang_args.push(format!("-I{dir}"));
    } else if let Ok(out) =
        Command::new("pkg-config").args(["--cflags", "--libs-only-L", "libibverbs"]).output()
    {
        if out.status.success() {
            for flag in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Some(dir) = flag.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={dir}");
                } else {
                    clang_args.push(flag.to_string());
                }
            }
        }
    }

    let bindings = bindgen::Builder::default()
        .header("wrapper.h")
        .clang_args(&clang_args)
        .allowlist_function("ibv_.*")
        .allowlist_type("ibv_.*")
        .allowlist_var("IBV_LINK_LAYER_.*")
        // Flag sets are combined with `|` in dmsim-hw; the other enums are matched on.
        .bitfield_enum("ibv_access_flags")
        .bitfield_enum("ibv_qp_attr_mask")
        .bitfield_enum("ibv_wc_flags")
        .bitfield_enum("ibv_send_flags")
        .bitfield_enum("ibv_port_cap_flags")
        .constified_enum_module("ibv_qp_type")
        .constified_enum_module("ibv_qp_state")
        .constified_enum_module("ibv_port_state")
        .constified_enum_module("ibv_wc_opcode")
        .constified_enum_module("ibv_wr_opcode")
        .constified_enum_module("ibv_wc_status")
        .derive_default(true)
        .derive_debug(true)
        .prepend_enum_name(false)
        .size_t_is_usize(true)
        .layout_tests(false)
        .generate()
        .unwrap_or_else(|e| {
            panic!(
                "cannot generate libibverbs bindings ({e}): is libibverbs-dev installed? \
                 Run hw/scripts/install-deps.sh as root, or set DMSIM_VERBS_INCLUDE to the \
                 directory holding infiniband/verbs.h"
            )
        });
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings.write_to_file(out.join("bindings.rs")).expect("cannot write the generated bindings");
}
