//! cctl's Debian package checked against Debian's conventions: scripts/deb.sh builds it
//! from the `cctl` built next to this test (as `make deb` does from the release binary),
//! lintian --pedantic finds no error or warning (`make deb-check`), and the package holds
//! the man pages, completions and units, depends on what the testbed runs, and has the
//! maintainer scripts that reload systemd and stop the units on removal. Needs cargo-deb
//! and lintian (`scripts/install-deps.sh --packaging`, which `make test` runs first); no root.

use std::path::{Path, PathBuf};
use std::process::Command;

use cctl_tests::cctl_bin;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (scripts/install-deps.sh installs it)"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the package's control file says for `field` (dpkg-deb -f).
fn field(deb: &Path, field: &str) -> String {
    run(Command::new("dpkg-deb").arg("-f").arg(deb).arg(field))
        .trim()
        .to_string()
}

/// The package's names in a Depends-like field, without versions or alternatives' bars.
fn names(relations: &str) -> Vec<String> {
    relations
        .split([',', '|'])
        .map(|r| r.split('(').next().unwrap_or("").trim().to_string())
        .filter(|r| !r.is_empty())
        .collect()
}

#[test]
fn the_package_is_lintian_clean_and_holds_pages_completions_units_and_scripts() {
    let bin = cctl_bin();
    let out_dir = repo().join("target/package-test");
    let started = std::time::Instant::now();
    let log = run(Command::new("bash")
        .arg(repo().join("scripts/deb.sh"))
        .env("BIN", &bin)
        .env("OUT", &out_dir)
        .env("LINT", "1"));
    eprintln!(
        "{log}built and linted in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(log.contains("lintian: no errors or warnings"), "{log}");
    let deb = std::fs::read_dir(&out_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .expect("a .deb in target/package-test");

    // The files: every man page the binary writes (gzip'd), the completions, the units.
    let listing = run(Command::new("dpkg-deb").arg("-c").arg(&deb));
    let has = |path: &str| {
        listing
            .lines()
            .any(|l| l.split_whitespace().nth(5) == Some(&format!("./{path}")))
    };
    let pages_dir = std::env::temp_dir().join(format!("cctl-package-man-{}", std::process::id()));
    run(Command::new(&bin).arg("--man-pages").arg(&pages_dir));
    let mut pages: Vec<String> = std::fs::read_dir(&pages_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    std::fs::remove_dir_all(&pages_dir).unwrap();
    pages.sort();
    assert!(pages.iter().any(|p| p == "cctl.toml.5"), "{pages:?}");
    for page in &pages {
        let section = page.rsplit('.').next().unwrap();
        let path = format!("usr/share/man/man{section}/{page}.gz");
        assert!(has(&path), "{path} in the package:\n{listing}");
    }
    for path in [
        "usr/bin/cctl",
        "etc/cctl/cctl.toml",
        "usr/share/bash-completion/completions/cctl",
        "usr/share/zsh/vendor-completions/_cctl",
        "usr/share/fish/vendor_completions.d/cctl.fish",
        "usr/share/doc/cctl/copyright",
        "usr/share/doc/cctl/changelog.Debian.gz",
    ] {
        assert!(has(path), "{path} in the package:\n{listing}");
    }
    let units: Vec<String> = std::fs::read_dir(repo().join("deploy/systemd"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".service"))
        .collect();
    assert!(units.iter().any(|u| u == "cctl-apply.service"), "{units:?}");
    let unpacked = std::env::temp_dir().join(format!("cctl-package-root-{}", std::process::id()));
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked));
    for unit in &units {
        let path = format!("usr/lib/systemd/system/{unit}");
        assert!(has(&path), "{path} in the package:\n{listing}");
        let text = std::fs::read_to_string(unpacked.join(&path)).unwrap();
        assert!(
            text.lines()
                .any(|l| l.starts_with("ExecStart=/usr/bin/cctl ")),
            "{unit} runs the packaged binary"
        );
        // Documentation= names the package's own pages.
        let docs: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("Documentation="))
            .flat_map(str::split_whitespace)
            .collect();
        assert!(!docs.is_empty(), "{unit} has Documentation=");
        for doc in docs {
            let (name, section) = doc
                .strip_prefix("man:")
                .and_then(|d| d.strip_suffix(')'))
                .and_then(|d| d.split_once('('))
                .unwrap_or_else(|| panic!("{unit}: {doc} is a man:NAME(SECTION) page"));
            let path = format!("usr/share/man/man{section}/{name}.{section}.gz");
            assert!(has(&path), "{unit}'s {doc}: {path} in the package");
        }
    }
    let copyright = std::fs::read_to_string(unpacked.join("usr/share/doc/cctl/copyright")).unwrap();
    assert!(
        copyright.contains("\nCopyright: ") && copyright.contains(" Redistribution and use"),
        "a DEP-5 copyright with the BSD text:\n{copyright}"
    );
    std::fs::remove_dir_all(&unpacked).unwrap();

    // Depends: the packages of every program the testbed runs (ip, tc, ethtool, sysctl).
    let depends = names(&field(&deb, "Depends"));
    assert!(depends.iter().any(|d| d == "iproute2"), "{depends:?}");
    for (tool, package) in cctl_netem::tc::TOOLS {
        assert!(
            depends.iter().any(|d| d == package),
            "Depends lacks {package} (for {tool}): {depends:?}"
        );
    }

    // Maintainer scripts (cargo-deb's systemd-units): reload systemd on install, never
    // enable or start a unit by itself (opt-in), stop both units on removal.
    let control = std::env::temp_dir().join(format!("cctl-package-ctl-{}", std::process::id()));
    run(Command::new("dpkg-deb").arg("-e").arg(&deb).arg(&control));
    let script = |name: &str| {
        std::fs::read_to_string(control.join(name))
            .unwrap_or_else(|e| panic!("the package has a {name} script: {e}"))
    };
    let (postinst, prerm, postrm) = (script("postinst"), script("prerm"), script("postrm"));
    std::fs::remove_dir_all(&control).unwrap();
    assert!(postinst.contains("daemon-reload"), "postinst:\n{postinst}");
    assert!(
        !postinst.contains("deb-systemd-invoke start"),
        "the units are opt-in:\n{postinst}"
    );
    for unit in &units {
        assert!(
            prerm.contains("deb-systemd-invoke stop") && prerm.contains(unit.as_str()),
            "prerm stops {unit}:\n{prerm}"
        );
        assert!(
            postrm.contains(unit.as_str()),
            "postrm purges {unit}:\n{postrm}"
        );
    }

    // The changelog's latest entry is this version, by the package's maintainer.
    let changelog = std::fs::read_to_string(repo().join("deploy/debian/changelog")).unwrap();
    let first = changelog.lines().next().unwrap();
    let version = field(&deb, "Version");
    assert!(
        first.starts_with(&format!("cctl ({version}) ")),
        "deploy/debian/changelog starts with this version ({version}): {first}"
    );
    let trailer = changelog
        .lines()
        .find_map(|l| l.strip_prefix(" -- "))
        .expect("a changelog trailer");
    let maintainer = field(&deb, "Maintainer");
    assert!(
        trailer.starts_with(&format!("{maintainer}  ")),
        "the changelog entry is by the maintainer ({maintainer}): {trailer}"
    );
}
