//! Build script: obtains vmlinux.h from the running kernel's BTF, compiles every
//! BPF program — the algorithms `../bpf/algo/<key>.bpf.c` and the tool programs
//! `../bpf/probe/<name>.bpf.c`, both against the shared headers of `../bpf/include/` —
//! into a libbpf-cargo skeleton and an object the binary embeds (both listed in
//! `$OUT_DIR/skels.rs`, which lib.rs includes), writes the algorithm catalogue
//! `$OUT_DIR/catalogue.rs` from the declarations present (`src/algo/<key>/mod.rs`,
//! ordered by their `id`; each needs its `bpf/algo/<key>.bpf.c`), and compiles every
//! `bpf/algo/<key>_math.h` for the host (with `CCTL_MATH` empty, so its functions are
//! external) together with Rust bindings to them (`$OUT_DIR/math.rs`, by bindgen), so
//! that unit tests run the very code the BPF programs inline.

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

/// The source folders under `bpf/`: the algorithms (with their `_math.h`), the tool
/// programs, and the headers both include.
struct Dirs {
    algo: PathBuf,
    probe: PathBuf,
    include: PathBuf,
}

/// Compiles `bpf/<dir>/<prog>.bpf.c` (and its CCTL_LIVE_CONST variant, when it has live
/// tunables) into `out`, generates its skeleton, and returns its module in skels.rs.
/// `vmlinux` is the folder holding the generated vmlinux.h.
fn build_prog(prog: &str, dir: &Path, dirs: &Dirs, vmlinux: &Path, out: &Path) -> String {
    let src = dir.join(format!("{prog}.bpf.c"));
    let shown = format!(
        "bpf/{}/{prog}.bpf.c",
        dir.file_name().unwrap().to_string_lossy()
    );
    // The objects' BTF names their source files: as /cctl/..., wherever the clone is (the
    // Makefile remaps Rust's paths alike), so that two clones build the same objects.
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the loader is a member of the workspace");
    let prefix_map = format!("-ffile-prefix-map={}=/cctl", workspace.display());
    let clang_args = |extra: &[&str]| -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> = vec![
            prefix_map.clone().into(),
            "-I".into(),
            vmlinux.into(),
            "-I".into(),
            dirs.include.as_os_str().into(),
            "-I".into(),
            dir.into(),
            "-Wall".into(),
            "-Wno-unused-function".into(),
        ];
        v.extend(extra.iter().map(|a| a.into()));
        v
    };
    // A program with live tunables is also built with them as .rodata constants
    // (CCTL_LIVE_CONST), the baseline `cctl bench perf`'s live part measures the
    // live build's per-ACK cost against.
    let has_live = std::fs::read_to_string(&src)
        .expect("reading a BPF source")
        .contains("CCTL_LIVE_PARAMS(");
    let konst = if has_live {
        SkeletonBuilder::new()
            .source(&src)
            .obj(out.join(format!("{prog}.const.bpf.o")))
            .clang_args(clang_args(&["-DCCTL_LIVE_CONST"]))
            .build()
            .unwrap_or_else(|e| panic!("building {} (CCTL_LIVE_CONST): {e:#}", src.display()));
        format!(
            "    /// The same program with its live tunables as `.rodata` constants\n    \
             /// (built with -DCCTL_LIVE_CONST), for `cctl bench perf --parts live`.\n    \
             pub const OBJECT_CONST: Option<&[u8]> = Some(include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{prog}.const.bpf.o\")));\n"
        )
    } else {
        "    /// No live tunables: no constant build.\n    pub const OBJECT_CONST: Option<&[u8]> = None;\n".to_string()
    };
    let skel = out.join(format!("{prog}.skel.rs"));
    SkeletonBuilder::new()
        .source(&src)
        .obj(out.join(format!("{prog}.bpf.o")))
        .clang_args(clang_args(&[]))
        .build_and_generate(&skel)
        .unwrap_or_else(|e| panic!("building {}: {e:#}", src.display()));
    format!(
        "/// {shown}\npub mod {prog} {{\n    include!(concat!(env!(\"OUT_DIR\"), \"/{prog}.skel.rs\"));\n    \
         /// The program's source text (its header: references, differences, tolerances).\n    \
         pub const SOURCE: &str = include_str!({src:?});\n    \
         /// The compiled object (ELF with BTF), as embedded in the binary.\n    \
         pub const OBJECT: &[u8] = include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{prog}.bpf.o\"));\n{konst}}}\n"
    )
}

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let bpf = manifest
        .join("..")
        .join("bpf")
        .canonicalize()
        .expect("bpf/ directory");
    let dirs = Dirs {
        algo: bpf.join("algo"),
        probe: bpf.join("probe"),
        include: bpf.join("include"),
    };
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    let vmlinux = out.join("include");
    std::fs::create_dir_all(&vmlinux).unwrap();
    vmlinux_h(&vmlinux);

    let algos = stems(&dirs.algo, ".bpf.c");
    let probes = stems(&dirs.probe, ".bpf.c");
    if let Some(both) = algos.iter().find(|a| probes.contains(a)) {
        panic!("bpf/algo/{both}.bpf.c and bpf/probe/{both}.bpf.c: a program name is one skeleton module, so it must be unique");
    }
    let progs: Vec<(&String, &Path)> = algos
        .iter()
        .map(|a| (a, dirs.algo.as_path()))
        .chain(probes.iter().map(|p| (p, dirs.probe.as_path())))
        .collect();
    // One thread per program (clang and the skeleton for each take ~1 s; the rest of the
    // workspace waits on this crate), joined in order so skels.rs is the same every time.
    let skels: String = std::thread::scope(|sc| {
        let handles: Vec<_> = progs
            .iter()
            .map(|&(prog, dir)| {
                let (dirs, vmlinux, out) = (&dirs, &vmlinux, &out);
                sc.spawn(move || build_prog(prog, dir, dirs, vmlinux, out))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("building a BPF program"))
            .collect()
    });

    std::fs::write(out.join("skels.rs"), skels).expect("writing skels.rs");

    let algo_decls = manifest.join("src").join("algo");
    catalogue(&algo_decls, &algos, &out);
    host_math(&dirs, &out);

    for dir in [&dirs.algo, &dirs.probe, &dirs.include, &algo_decls] {
        println!("cargo:rerun-if-changed={}", dir.display());
        for entry in std::fs::read_dir(dir).unwrap() {
            println!("cargo:rerun-if-changed={}", entry.unwrap().path().display());
        }
    }
}

/// The `id: N` of an algorithm's declaration (`src/algo/<key>/mod.rs`).
fn declared_id(decl: &Path) -> u8 {
    let text = std::fs::read_to_string(decl).unwrap_or_else(|e| panic!("{}: {e}", decl.display()));
    let ids: Vec<u8> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("id:"))
        .map(|v| {
            v.trim().trim_end_matches(',').parse().unwrap_or_else(|_| {
                panic!("{}: `id:` must be an integer in 1..=255", decl.display())
            })
        })
        .collect();
    match ids[..] {
        [id] if id > 0 => id,
        _ => panic!(
            "{}: expected exactly one `id: N` (N in 1..=255) in its declare_algorithm! block",
            decl.display()
        ),
    }
}

/// Writes `catalogue.rs`: one module per declaration directory `algo/<key>/` and
/// `ALGORITHMS`, ordered by id. Ids must be unique and every key needs
/// `bpf/algo/<key>.bpf.c` (`algos`: the stems found there).
fn catalogue(algo_dir: &Path, algos: &[String], out: &Path) {
    let mut decls: Vec<(u8, String)> = Vec::new();
    for entry in std::fs::read_dir(algo_dir).unwrap() {
        let path = entry.unwrap().path();
        let decl = path.join("mod.rs");
        if !decl.is_file() {
            continue;
        }
        let key = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            algos.contains(&key),
            "{}: no BPF program bpf/algo/{key}.bpf.c for this declaration",
            decl.display()
        );
        let id = declared_id(&decl);
        if let Some((_, other)) = decls.iter().find(|(i, _)| *i == id) {
            panic!("algorithm id {id} is declared twice: {other} and {key}; ids are never reused");
        }
        decls.push((id, key));
    }
    decls.sort();
    let mut text = String::new();
    for (_, key) in &decls {
        text += &format!(
            "#[path = {:?}]\npub mod {key};\n",
            algo_dir.join(key).join("mod.rs").display().to_string()
        );
    }
    text += "\n/// Every algorithm this binary carries, in id order (generated from the declarations).\n";
    text += "pub const ALGORITHMS: &[crate::catalogue::Algorithm] = &[\n";
    for (_, key) in &decls {
        text += &format!("    {key}::ALGORITHM,\n");
    }
    text += "];\n";
    std::fs::write(out.join("catalogue.rs"), text).expect("writing catalogue.rs");
}

/// Compiles every `bpf/algo/*_math.h` for the host in one translation unit with `CCTL_MATH`
/// empty (external functions, each defined once even where one header includes
/// another), and generates their Rust declarations with bindgen into `math.rs`.
fn host_math(dirs: &Dirs, out: &Path) {
    let mut unit = String::from(
        "/* Generated by loader/build.rs: the algorithms' fixed-point rules for the host. */\n\
         #include <linux/types.h>\n#include \"cctl.h\"\n",
    );
    for h in stems(&dirs.algo, "_math.h") {
        unit += &format!("#include \"{h}_math.h\"\n");
    }
    let c = out.join("cctl_math.c");
    std::fs::write(&c, &unit).expect("writing cctl_math.c");
    cc::Build::new()
        .include(&dirs.include)
        .include(&dirs.algo)
        .define("CCTL_MATH", Some(""))
        .warnings(true)
        .file(&c)
        .compile("cctl_math");
    let bindings = bindgen::Builder::default()
        .header(c.display().to_string())
        .clang_arg(format!("-I{}", dirs.include.display()))
        .clang_arg(format!("-I{}", dirs.algo.display()))
        .clang_arg("-DCCTL_MATH=")
        .allowlist_file(r".*_math\.h")
        .allowlist_file(r".*/cctl\.h")
        .derive_default(true)
        .layout_tests(true)
        .generate()
        .unwrap_or_else(|e| panic!("bindgen over bpf/algo/*_math.h: {e}"));
    bindings
        .write_to_file(out.join("math.rs"))
        .expect("writing math.rs");
}
