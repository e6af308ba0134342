//! The workspace's layout holds: the pure crates of the testbed (scenario, metrics, netem,
//! report, plot, and what they need) build without the loader, so without clang and kernel
//! BTF; and within every crate no file imports a file that imports it back, directly or
//! through others (Cargo already refuses such circles between crates); and `bpf/` keeps
//! its three folders apart: every algorithm program has its declaration, and nothing else
//! is a struct_ops algorithm.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::root;

/// The crates `cargo test -p ...` must build and test on a machine without clang or BTF.
const PURE: &[&str] = &[
    "cctl-scenario",
    "cctl-metrics",
    "cctl-netem",
    "cctl-report",
    "cctl-plot",
];

/// What needs clang and kernel BTF to build: the loader (its BPF skeletons) and libbpf.
const NEEDS_BPF_TOOLCHAIN: &[&str] = &["cctl-loader", "libbpf-cargo", "libbpf-sys"];

fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

#[test]
fn the_pure_crates_depend_on_neither_the_loader_nor_libbpf_even_in_their_tests() {
    let m = metadata();
    let name_of: BTreeMap<&str, &str> = m["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    // Every dependency edge of the resolved graph, of every kind (normal, dev, build).
    let deps: BTreeMap<&str, Vec<&str>> = m["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let to = n["deps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["pkg"].as_str().unwrap())
                .collect();
            (n["id"].as_str().unwrap(), to)
        })
        .collect();
    for pure in PURE {
        let (start, _) = name_of
            .iter()
            .find(|(_, n)| *n == pure)
            .unwrap_or_else(|| panic!("{pure} is a package of the workspace"));
        let mut seen = BTreeSet::new();
        let mut todo = vec![(*start, vec![*pure])];
        while let Some((id, path)) = todo.pop() {
            if !seen.insert(id) {
                continue;
            }
            for d in deps.get(id).into_iter().flatten() {
                let name = name_of[d];
                let mut p = path.clone();
                p.push(name);
                assert!(
                    !NEEDS_BPF_TOOLCHAIN.contains(&name),
                    "{pure} depends on {name}, which needs clang and kernel BTF: {}",
                    p.join(" -> ")
                );
                todo.push((d, p));
            }
        }
    }
}

/// The file a `crate::a::b` path of crate source dir `src` names: `a/b.rs`, `a/b/mod.rs`,
/// `a.rs` or `a/mod.rs` (the longest that exists); `None` for the crate root's own items.
fn file_of(src: &Path, segments: &[&str]) -> Option<PathBuf> {
    for n in (1..=segments.len().min(3)).rev() {
        let rel: PathBuf = segments[..n].iter().collect();
        for f in [rel.with_extension("rs"), rel.join("mod.rs")] {
            if src.join(&f).is_file() {
                return Some(f);
            }
        }
    }
    None
}

/// The code of a file without its comments (a doc link is not an import) and its
/// `#[cfg(test)]` modules (tests may import anything).
fn without_tests(text: &str) -> String {
    let code = match text.find("#[cfg(test)]\nmod ") {
        Some(i) => &text[..i],
        None => text,
    };
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each file's imports of other files of its crate (`crate::x::...`, `super::...`).
fn import_graph(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p.strip_prefix(src).unwrap().to_path_buf());
            }
        }
    }
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut graph = BTreeMap::new();
    for f in files {
        let text = without_tests(&std::fs::read_to_string(src.join(&f)).unwrap());
        // The module path of this file: a/b.rs and a/b/mod.rs are `a::b`.
        let mut module: Vec<String> = f
            .with_extension("")
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        if matches!(
            module.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            module.pop();
        }
        let mut to = BTreeSet::new();
        for (prefix, base) in [
            ("crate::", Vec::new()),
            ("super::", module[..module.len().saturating_sub(1)].to_vec()),
        ] {
            for (i, _) in text.match_indices(prefix) {
                // `$crate::` in a macro is resolved where the macro is used, not here.
                if i > 0 && text[..i].ends_with(|c: char| ident(c) || c == ':' || c == '$') {
                    continue;
                }
                let rest = &text[i + prefix.len()..];
                let path: Vec<&str> = rest
                    .split("::")
                    .map(|s| &s[..s.find(|c: char| !ident(c)).unwrap_or(s.len())])
                    .take_while(|s| !s.is_empty() && s.chars().next().unwrap().is_lowercase())
                    .collect();
                let mut segments: Vec<&str> = base.iter().map(String::as_str).collect();
                segments.extend(path);
                if let Some(target) = file_of(src, &segments) {
                    if target != f {
                        to.insert(target);
                    }
                }
            }
        }
        graph.insert(f, to);
    }
    graph
}

/// A circle of `graph`, as the files along it, if there is one.
fn find_circle(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Option<Vec<PathBuf>> {
    fn visit(
        f: &PathBuf,
        graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        stack: &mut Vec<PathBuf>,
        done: &mut BTreeSet<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        if let Some(at) = stack.iter().position(|s| s == f) {
            let mut c = stack[at..].to_vec();
            c.push(f.clone());
            return Some(c);
        }
        if done.contains(f) {
            return None;
        }
        stack.push(f.clone());
        for t in graph.get(f).into_iter().flatten() {
            if let Some(c) = visit(t, graph, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(f.clone());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|f| visit(f, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let m = metadata();
    let root = std::fs::canonicalize(root()).unwrap();
    let mut checked = 0;
    for p in m["packages"].as_array().unwrap() {
        let manifest = Path::new(p["manifest_path"].as_str().unwrap());
        if !manifest.starts_with(&root) {
            continue;
        }
        let src = manifest.parent().unwrap().join("src");
        if !src.is_dir() {
            continue;
        }
        let graph = import_graph(&src);
        if let Some(c) = find_circle(&graph) {
            panic!(
                "a circle of imports in {}: {}",
                p["name"],
                c.iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" -> ")
            );
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} crates were checked");
}

#[test]
fn the_circle_finder_finds_a_circle_through_three_files() {
    let g: BTreeMap<PathBuf, BTreeSet<PathBuf>> = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .iter()
        .map(|(f, t)| (PathBuf::from(f), BTreeSet::from([PathBuf::from(t)])))
        .collect();
    let c = find_circle(&g).expect("a circle");
    assert_eq!(c.first(), c.last());
    assert_eq!(c.len(), 4);
    let mut acyclic = g.clone();
    acyclic.insert("c".into(), BTreeSet::new());
    assert_eq!(find_circle(&acyclic), None);
}

/// Every integration-test target of the workspace (`cargo metadata`: kind "test"), as
/// (package, target name, source path relative to the root).
fn test_targets(m: &serde_json::Value) -> Vec<(String, String, String)> {
    let root = std::fs::canonicalize(root()).unwrap();
    let members: BTreeSet<&str> = m["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    let mut out = Vec::new();
    for p in m["packages"].as_array().unwrap() {
        if !members.contains(p["id"].as_str().unwrap()) {
            continue;
        }
        for t in p["targets"].as_array().unwrap() {
            if t["kind"].as_array().unwrap().iter().any(|k| k == "test") {
                let src = PathBuf::from(t["src_path"].as_str().unwrap());
                out.push((
                    p["name"].as_str().unwrap().to_string(),
                    t["name"].as_str().unwrap().to_string(),
                    src.strip_prefix(&root)
                        .unwrap_or(&src)
                        .display()
                        .to_string(),
                ));
            }
        }
    }
    out
}

/// The Makefile's tiers (`make -s test-targets`): tier name -> test target names.
fn tiers() -> BTreeMap<String, BTreeSet<String>> {
    let out = Command::new("make")
        .args(["-s", "--no-print-directory", "test-targets"])
        .current_dir(root())
        .output()
        .expect("make runs");
    assert!(
        out.status.success(),
        "make test-targets: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(tier, names)| {
            (
                tier.trim().to_string(),
                names.split_whitespace().map(str::to_string).collect(),
            )
        })
        .collect()
}

#[test]
fn every_test_target_runs_in_a_tier_of_make_test() {
    let m = metadata();
    let targets = test_targets(&m);
    assert!(
        targets.len() >= 20,
        "cargo metadata lists the test targets: {targets:?}"
    );
    let tiers = tiers();
    assert!(
        tiers.contains_key("unit") && tiers.contains_key("kernel"),
        "make test-targets prints the unit and kernel tiers: {tiers:?}"
    );
    let in_no_tier: Vec<_> = targets
        .iter()
        .filter(|(_, name, _)| !tiers.values().any(|t| t.contains(name)))
        .collect();
    assert!(
        in_no_tier.is_empty(),
        "test targets that neither `make check` nor `make test` runs (the Makefile's \
         UNIT_TEST_FILES and KERNEL_TEST_FILES must cover them): {in_no_tier:?}"
    );
    // A name in a tier that is no target would make cargo fail ("no test target named").
    let names: BTreeSet<&String> = targets.iter().map(|(_, n, _)| n).collect();
    for (tier, listed) in &tiers {
        for n in listed {
            assert!(
                names.contains(n),
                "tier {tier} names `{n}`, which is no test target"
            );
        }
    }
}

/// The file names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn bpf_holds_the_algorithms_the_tool_programs_and_the_shared_headers_apart() {
    let bpf = root().join("bpf");
    assert_eq!(
        names(&bpf),
        ["algo", "include", "probe"],
        "bpf/ holds only three folders"
    );
    let decls = root().join("loader/src/algo");
    for f in names(&bpf.join("algo")) {
        let key = f
            .strip_suffix(".bpf.c")
            .or_else(|| f.strip_suffix("_math.h"))
            .unwrap_or_else(|| {
                panic!("bpf/algo/{f}: only <key>.bpf.c and <key>_math.h belong here")
            });
        assert!(
            decls.join(key).join("mod.rs").is_file(),
            "bpf/algo/{f}: no declaration loader/src/algo/{key}/mod.rs"
        );
        if f.ends_with("_math.h") {
            continue;
        }
        let text = std::fs::read_to_string(bpf.join("algo").join(&f)).unwrap();
        assert!(
            text.contains("SEC(\".struct_ops"),
            "bpf/algo/{f}: an algorithm program defines a struct_ops map"
        );
    }
    for f in names(&bpf.join("probe")) {
        assert!(
            f.ends_with(".bpf.c"),
            "bpf/probe/{f}: only programs belong here"
        );
        let text = std::fs::read_to_string(bpf.join("probe").join(&f)).unwrap();
        assert!(
            !text.contains("SEC(\".struct_ops"),
            "bpf/probe/{f}: a tool program that defines a congestion-control algorithm belongs in bpf/algo/"
        );
    }
    for f in names(&bpf.join("include")) {
        assert!(
            f.ends_with(".h"),
            "bpf/include/{f}: only headers belong here"
        );
    }
}
