//! Integration test of the trust check on every reader of cctl's state: a planted
//! symbolic link, a group-writable record and a record owned by another user, in
//! `/run/cctl`, `/run/cctl-policy` and the pin directories, are each refused by every
//! command that reads them, with exit 9 and the command that fixes it, and nothing in
//! the kernel changes. The test's name is `tr_reno` (cctl's reno); guards put every
//! planted file back and unload the name even when an assertion fails.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use cctl_loader::registry;
use cctl_loader::{kernel, policy};
use cctl_tests::{available, cctl_bin, clean_slate, require_root, KERNEL};

const NAME: &str = "tr_reno";
/// Exit code of an untrusted file (cli/src/exit.rs).
const UNTRUSTED: i32 = 9;

/// One way to make a file untrustworthy, undone on drop.
enum Plant {
    /// The file moved aside and a symbolic link to it put in its place.
    Symlink { path: PathBuf, aside: PathBuf },
    /// Mode changed (group- or other-writable); the old mode is restored.
    Mode { path: PathBuf, old: u32 },
    /// Owner changed to `nobody`; root is restored.
    Owner { path: PathBuf },
    /// A symbolic link planted beside cctl's entries; removed.
    Extra { path: PathBuf },
}

/// Plants one fault (and labels it).
type MakePlant<'a> = Box<dyn Fn() -> Plant + 'a>;

impl Plant {
    fn symlink(path: &Path) -> Plant {
        let aside = std::env::temp_dir().join(format!(
            "cctl-trust-aside-{}-{}",
            std::process::id(),
            path.file_name().unwrap().to_string_lossy()
        ));
        std::fs::copy(path, &aside).unwrap();
        std::fs::remove_file(path).unwrap();
        std::os::unix::fs::symlink(&aside, path).unwrap();
        Plant::Symlink {
            path: path.into(),
            aside,
        }
    }

    fn mode(path: &Path, mode: u32) -> Plant {
        let old = std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        Plant::Mode {
            path: path.into(),
            old,
        }
    }

    fn owner(path: &Path) -> Plant {
        std::os::unix::fs::chown(path, Some(65534), None).unwrap();
        Plant::Owner { path: path.into() }
    }

    fn extra(path: &Path, target: &Path) -> Plant {
        std::os::unix::fs::symlink(target, path)
            .unwrap_or_else(|e| panic!("planting a link at {}: {e}", path.display()));
        Plant::Extra { path: path.into() }
    }

    /// The path the refusal must name.
    fn path(&self) -> &Path {
        match self {
            Plant::Symlink { path, .. }
            | Plant::Mode { path, .. }
            | Plant::Owner { path }
            | Plant::Extra { path } => path,
        }
    }

    /// The fix the refusal must give.
    fn fix(&self) -> String {
        match self {
            Plant::Symlink { path, .. } | Plant::Extra { path } => format!("rm {}", path.display()),
            Plant::Mode { path, .. } => format!("chmod go-w {}", path.display()),
            Plant::Owner { path } => format!("chown root:root {}", path.display()),
        }
    }
}

impl Drop for Plant {
    fn drop(&mut self) {
        match self {
            Plant::Symlink { path, aside } => {
                let _ = std::fs::remove_file(&*path);
                let _ = std::fs::copy(&*aside, &*path);
                let _ = std::fs::remove_file(&*aside);
            }
            Plant::Mode { path, old } => {
                let _ = std::fs::set_permissions(&*path, std::fs::Permissions::from_mode(*old));
            }
            Plant::Owner { path } => {
                let _ = std::os::unix::fs::chown(&*path, Some(0), None);
            }
            Plant::Extra { path } => {
                let _ = std::fs::remove_file(&*path);
            }
        }
    }
}

/// Runs `cctl ARGS` and checks the refusal: exit 9, the planted path and its fix on
/// stderr.
fn refused(plant: &Plant, label: &str, args: &[&str]) {
    let out = Command::new(cctl_bin()).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(UNTRUSTED),
        "{label}: `cctl {}` should be refused with exit 9; stdout {} stderr {stderr}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains(&plant.path().display().to_string()) && stderr.contains(&plant.fix()),
        "{label}: `cctl {}` must name {} and `{}`: {stderr}",
        args.join(" "),
        plant.path().display(),
        plant.fix()
    );
}

/// Plants one fault, checks that every reader refuses it, and undoes it; returns the
/// number of refusals checked.
fn refused_by_all(label: &str, make: &MakePlant, readers: &[(&str, Vec<&str>)]) -> usize {
    let plant = make();
    for (reader, args) in readers {
        refused(&plant, &format!("{label} / {reader}"), args);
    }
    readers.len()
}

fn registered() -> bool {
    available().iter().any(|n| n == NAME)
}

#[test]
fn every_reader_refuses_a_planted_or_writable_record_or_pin_and_changes_nothing() {
    require_root();
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    clean_slate("cctl-tr-", &[NAME]);
    let (_, _guard) = cctl_tests::load_owned_as("reno", NAME);
    let dir = std::env::temp_dir().join(format!("cctl-trust-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("cctl.toml");
    std::fs::write(
        &config,
        format!("default = \"{}\"\n", kernel::default_cc().unwrap()),
    )
    .unwrap();
    let config = config.to_str().unwrap().to_string();

    // The commands that read the registry's records and pins.
    let readers: Vec<(&str, Vec<&str>)> = vec![
        ("list", vec!["list"]),
        ("list --json", vec!["list", "--json"]),
        ("set", vec!["set", NAME, "beta_pct=50"]),
        ("upgrade", vec!["upgrade", NAME]),
        ("rollback", vec!["rollback", NAME]),
        ("unload", vec!["unload", NAME]),
        ("apply --dry-run", vec!["apply", "--dry-run", &config]),
    ];
    let record = Path::new(registry::META_DIR).join(format!("{NAME}.json"));
    let pin = Path::new(registry::PIN_DIR).join(NAME);
    let versions = Path::new(registry::VERSION_DIR).join(NAME);
    let plants: Vec<(&str, MakePlant)> = vec![
        (
            "record replaced by a symlink",
            Box::new(|| Plant::symlink(&record)),
        ),
        (
            "group-writable record",
            Box::new(|| Plant::mode(&record, 0o664)),
        ),
        (
            "other-writable record",
            Box::new(|| Plant::mode(&record, 0o646)),
        ),
        ("record owned by nobody", Box::new(|| Plant::owner(&record))),
        (
            "symlink planted in /run/cctl",
            Box::new(|| Plant::extra(&Path::new(registry::META_DIR).join("zz.json"), &record)),
        ),
        (
            "group-writable link pin",
            Box::new(|| Plant::mode(&pin, 0o660)),
        ),
        ("link pin owned by nobody", Box::new(|| Plant::owner(&pin))),
        (
            "symlink planted among the link pins",
            Box::new(|| Plant::extra(&Path::new(registry::PIN_DIR).join("zz_evil"), &pin)),
        ),
        (
            "other-writable version directory",
            Box::new(|| Plant::mode(&versions, 0o757)),
        ),
    ];
    let mut refusals = 0;
    for (label, make) in &plants {
        refusals += refused_by_all(label, make, &readers);
        assert!(registered(), "{label}: {NAME} must still be registered");
        let out = Command::new(cctl_bin()).args(["list"]).output().unwrap();
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains(NAME),
            "{label}: after the fix `cctl list` works and shows {NAME}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // The policy's records: its metadata directory and pin directory.
    std::fs::create_dir_all(policy::META_DIR).unwrap();
    let cgroups = Path::new(policy::META_DIR).join("cgroups.json");
    let made_cgroups = !cgroups.exists();
    if made_cgroups {
        std::fs::write(&cgroups, "{\"cgroups\":{}}").unwrap();
        std::fs::set_permissions(&cgroups, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let policy_readers: Vec<(&str, Vec<&str>)> = vec![
        ("policy list", vec!["policy", "list"]),
        ("policy add", vec!["policy", "add", "--port", "47401", NAME]),
        ("policy remove", vec!["policy", "remove", "--port", "47401"]),
        ("apply --dry-run", vec!["apply", "--dry-run", &config]),
    ];
    let policy_plants: Vec<(&str, MakePlant)> = vec![
        (
            "policy record replaced by a symlink",
            Box::new(|| Plant::symlink(&cgroups)),
        ),
        (
            "group-writable policy record",
            Box::new(|| Plant::mode(&cgroups, 0o664)),
        ),
        (
            "policy record owned by nobody",
            Box::new(|| Plant::owner(&cgroups)),
        ),
    ];
    for (label, make) in &policy_plants {
        refusals += refused_by_all(label, make, &policy_readers);
    }
    if made_cgroups {
        std::fs::remove_file(&cgroups).unwrap();
    }
    assert!(
        !policy::list()
            .unwrap()
            .iter()
            .any(|r| r.target == policy::Target::Port { port: 47401 }),
        "no refused `policy add` may leave a rule"
    );
    assert!(
        registered(),
        "{NAME} is still registered after every refusal"
    );
    println!(
        "{refusals} refusals: {} registry plants × {} readers, {} policy plants × {} readers",
        plants.len(),
        readers.len(),
        policy_plants.len(),
        policy_readers.len()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
