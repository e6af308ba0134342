//! Build script: obtains vmlinux.h from the running kernel's BTF, compiles the BPF
//! programs in ../bpf into libbpf-cargo skeletons, and builds the host-side C shim
//! that lets unit tests run H-TCP's fixed-point code (bpf/htcp_math.h).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;

/// BPF objects built into skeletons: (source stem, skeleton module file).
const PROGS: &[&str] = &["reno", "htcp", "trace"];

fn vmlinux_h(include: &Path) -> PathBuf {
    let dst = include.join("vmlinux.h");
    println!("cargo:rerun-if-env-changed=CCTL_VMLINUX_H");
    println!("cargo:rerun-if-env-changed=CCTL_BTF");
    if let Some(given) = env::var_os("CCTL_VMLINUX_H") {
        std::fs::copy(&given, &dst).unwrap_or_else(|e| {
            panic!(
                "copying CCTL_VMLINUX_H={}: {e}",
                Path::new(&given).display()
            )
        });
        return dst;
    }
    let btf = env::var("CCTL_BTF").unwrap_or_else(|_| "/sys/kernel/btf/vmlinux".into());
    let out = Command::new("bpftool")
        .args(["btf", "dump", "file", &btf, "format", "c"])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "running bpftool to dump vmlinux.h from {btf}: {e} \
                 (install bpftool: `make deps`, or set CCTL_VMLINUX_H=/path/to/vmlinux.h)"
            )
        });
    if !out.status.success() {
        panic!(
            "bpftool btf dump file {btf} failed: {} (the kernel needs CONFIG_DEBUG_INFO_BTF; \
             or set CCTL_VMLINUX_H=/path/to/vmlinux.h)",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::write(&dst, out.stdout).expect("writing vmlinux.h");
    dst
}

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let bpf_dir = manifest
        .join("..")
        .join("bpf")
        .canonicalize()
        .expect("bpf/ directory");
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    let include = out.join("include");
    std::fs::create_dir_all(&include).unwrap();
    vmlinux_h(&include);

    for prog in PROGS {
        let src = bpf_dir.join(format!("{prog}.bpf.c"));
        let skel = out.join(format!("{prog}.skel.rs"));
        SkeletonBuilder::new()
            .source(&src)
            .clang_args([
                "-I".as_ref(),
                include.as_os_str(),
                "-I".as_ref(),
                bpf_dir.as_os_str(),
                "-Wall".as_ref(),
                "-Wno-unused-function".as_ref(),
            ])
            .build_and_generate(&skel)
            .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
    }

    cc::Build::new()
        .file(manifest.join("csrc").join("htcp_shim.c"))
        .include(&bpf_dir)
        .warnings(true)
        .compile("cctl_htcp_shim");

    println!("cargo:rerun-if-changed={}", bpf_dir.display());
    for entry in std::fs::read_dir(&bpf_dir).unwrap() {
        println!("cargo:rerun-if-changed={}", entry.unwrap().path().display());
    }
    println!("cargo:rerun-if-changed=csrc/htcp_shim.c");
}
