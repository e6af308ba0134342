//! Build script: obtains vmlinux.h from the running kernel's BTF, compiles every
//! BPF program `../bpf/<name>.bpf.c` into a libbpf-cargo skeleton (listed in
//! `$OUT_DIR/skels.rs`, which lib.rs includes), and builds the host-side C shims
//! `csrc/*.c` that let unit tests run the algorithms' fixed-point code
//! (`bpf/<algo>_math.h`) on the host.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;

/// Sorted file names in `dir` that end with `suffix`, without the suffix.
fn stems(dir: &Path, suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(suffix).map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

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

    let progs = stems(&bpf_dir, ".bpf.c");
    let mut skels = String::new();
    for prog in &progs {
        skels += &format!(
            "/// bpf/{prog}.bpf.c\npub mod {prog} {{\n    include!(concat!(env!(\"OUT_DIR\"), \"/{prog}.skel.rs\"));\n}}\n"
        );
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

    std::fs::write(out.join("skels.rs"), skels).expect("writing skels.rs");

    let csrc = manifest.join("csrc");
    let mut shims = cc::Build::new();
    shims.include(&bpf_dir).warnings(true);
    for shim in stems(&csrc, ".c") {
        shims.file(csrc.join(format!("{shim}.c")));
    }
    shims.compile("cctl_shims");

    println!("cargo:rerun-if-changed={}", bpf_dir.display());
    for entry in std::fs::read_dir(&bpf_dir).unwrap() {
        println!("cargo:rerun-if-changed={}", entry.unwrap().path().display());
    }
    println!("cargo:rerun-if-changed=csrc");
    for entry in std::fs::read_dir(&csrc).unwrap() {
        println!("cargo:rerun-if-changed={}", entry.unwrap().path().display());
    }
}
