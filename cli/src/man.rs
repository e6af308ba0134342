//! The man pages (`cctl --man-pages DIR`): cctl(1) and a page per subcommand from the clap
//! definitions (clap_mangen), with EXIT STATUS built from [`crate::exit::ALL`] and SEE ALSO;
//! and cctl.toml(5), the `cctl apply` configuration file, built from the parser's key lists
//! ([`cctl_loader::config`]) and the algorithm catalogue.

use std::io::Write;
use std::path::{Path, PathBuf};

use cctl_loader::{catalogue, config};
use clap_mangen::roff::{bold, italic, roman, Inline, Roff};
use clap_mangen::Man;

use crate::exit;

/// Pages each command's SEE ALSO names besides its parent and its subcommands, by page name.
const SEE_ALSO: &[(&str, &[&str])] = &[
    ("cctl", &["cctl.toml(5)", "ip(8)", "tc(8)", "systemctl(1)"]),
    ("cctl-apply", &["cctl.toml(5)", "systemctl(1)"]),
    ("cctl-policy", &["cctl.toml(5)"]),
    ("cctl-default", &["cctl.toml(5)"]),
    ("cctl-load", &["cctl.toml(5)"]),
    ("cctl-bench", &["ip(8)", "tc(8)", "tc-netem(8)"]),
    ("cctl-demo", &["ip(8)", "tc(8)"]),
];

/// Writes every page into `dir` (created if missing): `cctl.1`, one `cctl-<sub>[-<sub>].1`
/// per subcommand at every depth (not clap's `help` subcommands) and `cctl.toml.5`.
/// `cmd` is the top-level command, unbuilt. Returns the paths written, `cctl.1` first.
///
/// Errors: creating the directory or writing a page.
pub fn write_all(cmd: clap::Command, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut out = Vec::new();
    let mut pages = Vec::new();
    collect(&built(cmd), None, &mut pages);
    for (file, text) in pages.into_iter().chain([config_page()]) {
        let path = dir.join(file);
        std::fs::File::create(&path)?.write_all(text.as_bytes())?;
        out.push(path);
    }
    Ok(out)
}

/// `cmd` as the pages show it: built (subcommands know their page names), with the version,
/// without clap's `help` subcommands.
fn built(cmd: clap::Command) -> clap::Command {
    fn without_help_subcommands(cmd: clap::Command) -> clap::Command {
        cmd.disable_help_subcommand(true)
            .mut_subcommands(without_help_subcommands)
    }
    let mut cmd = without_help_subcommands(cmd.version(cctl_loader::version()));
    cmd.build();
    cmd
}

/// `cmd`'s page and those of its subcommands, as (file name, roff text).
fn collect(cmd: &clap::Command, parent: Option<&str>, pages: &mut Vec<(String, String)>) {
    let page = command_page(cmd, parent);
    let name = page_name(cmd).to_string();
    pages.push(page);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, Some(&name), pages);
    }
}

/// The page name of a built command: `cctl`, `cctl-bench-run`.
fn page_name(cmd: &clap::Command) -> &str {
    cmd.get_display_name().unwrap_or_else(|| cmd.get_name())
}

/// One command's page: clap_mangen's title, NAME, SYNOPSIS, DESCRIPTION, OPTIONS and
/// SUBCOMMANDS, then NOTES from the command's after-help (the top level's after-help is the
/// exit-code table, which becomes EXIT STATUS), EXIT STATUS, VERSION and SEE ALSO.
fn command_page(cmd: &clap::Command, parent: Option<&str>) -> (String, String) {
    let man = Man::new(cmd.clone()).source(source());
    let file = man.get_filename();
    let mut buf = Vec::new();
    let memory = "writing into memory";
    man.render_title(&mut buf).expect(memory);
    man.render_name_section(&mut buf).expect(memory);
    man.render_synopsis_section(&mut buf).expect(memory);
    if cmd.get_long_about().or(cmd.get_about()).is_some() {
        man.render_description_section(&mut buf).expect(memory);
    }
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut buf).expect(memory);
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(&mut buf).expect(memory);
    }
    let mut roff = Roff::new();
    let name = page_name(cmd);
    if parent.is_some() {
        if let Some(notes) = cmd.get_after_long_help().or(cmd.get_after_help()) {
            roff.control("SH", ["NOTES"]);
            text_block(&mut roff, &notes.to_string());
        }
    }
    exit_status(&mut roff, parent.is_none());
    roff.control("SH", ["VERSION"]);
    roff.text([roman(cctl_loader::version())]);
    let mut see_also: Vec<String> = parent.map(|p| format!("{p}(1)")).into_iter().collect();
    see_also.extend(
        cmd.get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| format!("{}(1)", page_name(s))),
    );
    see_also.extend(
        SEE_ALSO
            .iter()
            .filter(|(page, _)| *page == name)
            .flat_map(|(_, pages)| pages.iter().map(|p| p.to_string())),
    );
    see_also_section(&mut roff, &see_also);
    buf.extend(roff.render().into_bytes());
    (file, String::from_utf8(buf).expect("roff is UTF-8"))
}

/// The footer's source of every page: `cctl 0.1.0 (96c6bdc0a1b2)`.
fn source() -> String {
    format!("cctl {}", cctl_loader::version())
}

/// A line of help text: `code` spans (between backticks) in bold, the rest roman.
fn inline(text: &str) -> Vec<Inline> {
    if !text.matches('`').count().is_multiple_of(2) {
        return vec![roman(text)];
    }
    text.split('`')
        .enumerate()
        .filter(|(_, part)| !part.is_empty())
        .map(|(i, part)| if i % 2 == 1 { bold(part) } else { roman(part) })
        .collect()
}

/// Text from a help string as roff: a line indented by spaces is kept as it is (an example
/// command or file), with its indented neighbours in one no-fill block; every other line is
/// a paragraph of its own.
fn text_block(roff: &mut Roff, text: &str) {
    let mut literal = false;
    for line in text.lines() {
        let indented = line.starts_with(' ');
        if indented && !literal {
            roff.control("PP", [])
                .control("nf", [])
                .control("RS", ["4"]);
            literal = true;
        } else if !indented && literal {
            roff.control("RE", []).control("fi", []);
            literal = false;
        }
        if indented {
            roff.text([roman(line.trim_start())]);
        } else if !line.trim().is_empty() {
            roff.control("PP", []).text(inline(line));
        }
    }
    if literal {
        roff.control("RE", []).control("fi", []);
    }
}

/// EXIT STATUS: on cctl(1) every code of [`exit::ALL`] with its name and meaning; on a
/// subcommand's page a pointer to it.
fn exit_status(roff: &mut Roff, top: bool) {
    roff.control("SH", ["EXIT STATUS"]);
    if !top {
        roff.text([
            roman("As for every cctl command: see "),
            bold("cctl"),
            roman("(1), EXIT STATUS."),
        ]);
        return;
    }
    roff.text([roman(
        "Every command exits with one of these codes (cli/src/exit.rs):",
    )]);
    for (code, name, meaning) in exit::ALL {
        let meaning = meaning.split_whitespace().collect::<Vec<_>>().join(" ");
        roff.control("TP", ["5"])
            .text([
                bold(code.to_string()),
                roman(" ("),
                italic(*name),
                roman(")"),
            ])
            .text(inline(&meaning));
    }
}

/// SEE ALSO: the pages as `name(section)`, the names in bold, comma-separated.
fn see_also_section(roff: &mut Roff, pages: &[String]) {
    if pages.is_empty() {
        return;
    }
    roff.control("SH", ["SEE ALSO"]);
    let mut line: Vec<Inline> = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        let (name, section) = page.split_once('(').unwrap_or((page, ""));
        if i > 0 {
            line.push(roman(", "));
        }
        line.push(bold(name));
        line.push(roman(format!("({section}")));
    }
    roff.text(line);
}

/// What each key of the configuration means, by (table, key): "" is the top level,
/// "algorithm" an `[[algorithm]]` entry, "policy" a `[[policy]]` entry. Each key of the
/// parser's lists ([`config::TOP_KEYS`], [`config::ALGORITHM_KEYS`],
/// [`config::POLICY_KEYS`]) has exactly one entry (a unit test checks it both ways); the
/// type words come from the parser too ([`config::expected_words`]).
const KEY_DOCS: &[(&str, &str, &str)] = &[
    (
        "",
        "default",
        "Optional. The default congestion control of the network namespace cctl runs in \
         (net.ipv4.tcp_congestion_control): a name this file registers or one the kernel \
         already has (cubic, reno).",
    ),
    (
        "",
        "algorithm",
        "Optional. The names to have registered, one [[algorithm]] entry each (below).",
    ),
    (
        "",
        "policy",
        "Optional. The congestion control of new connections by port or cgroup, one \
         [[policy]] entry each (below).",
    ),
    (
        "algorithm",
        "algo",
        "Required. The algorithm's key (ALGORITHMS below; cctl list).",
    ),
    (
        "algorithm",
        "name",
        "Optional. The name to register it under, 1 to 15 characters of [A-Za-z0-9_]. \
         Default: the algorithm's name (bpf_<algo>), or bpf_<algo>_<tag> with a profile. \
         Each name appears once; give names to register one algorithm twice.",
    ),
    (
        "algorithm",
        "profile",
        "Optional. A parameter set to start from (ALGORITHMS below): a paper's variant or \
         linux, today's Linux module.",
    ),
    (
        "algorithm",
        "params",
        "Optional. Tunables over the profile's (or the paper's) values, as key = integer; \
         each is checked against its range as cctl load --param checks it.",
    ),
    (
        "policy",
        "port",
        "A TCP port, 1 to 65535: connections to or from it get cc. Give port or cgroup, \
         not both; one rule per port.",
    ),
    (
        "policy",
        "cgroup",
        "A cgroup v2 directory, absolute or relative to the cgroup2 mount \
         (system.slice/backup.service): connections of its processes get cc. One rule \
         per cgroup.",
    ),
    (
        "policy",
        "cc",
        "Required. The congestion control those connections get: a name this file \
         registers or one the kernel has.",
    ),
];

/// The example of cctl.toml(5): every key of the schema (a unit test parses it and checks
/// that it uses each).
const EXAMPLE: &str = r#"default = "bpf_htcp"

[[algorithm]]
algo = "htcp"
params = { beta_min_pct = 60 }

[[algorithm]]
name = "cubic_lx"
algo = "cubic"
profile = "linux"

[[policy]]
port = 5201
cc = "cubic_lx"

[[policy]]
cgroup = "system.slice/backup.service"
cc = "reno""#;

/// The tables of the file with the parser's key list of each, in the page's order.
fn tables() -> [(&'static str, &'static str, &'static [&'static str]); 3] {
    [
        ("", "TOP-LEVEL KEYS", config::TOP_KEYS),
        ("algorithm", "[[algorithm]] ENTRIES", config::ALGORITHM_KEYS),
        ("policy", "[[policy]] ENTRIES", config::POLICY_KEYS),
    ]
}

fn key_doc(table: &str, key: &str) -> Option<&'static str> {
    KEY_DOCS
        .iter()
        .find(|(t, k, _)| *t == table && *k == key)
        .map(|(_, _, d)| *d)
}

/// cctl.toml(5): the file's format, its keys, the algorithms with their profiles and
/// parameters, an example, the files and what errors do.
fn config_page() -> (String, String) {
    let mut r = Roff::new();
    r.control("TH", ["cctl.toml", "5", "", &source()]);
    r.control("SH", ["NAME"])
        .text([roman("cctl.toml - the configuration file of cctl apply")]);
    r.control("SH", ["SYNOPSIS"])
        .text([bold(config::DEFAULT_PATH)]);
    r.control("SH", ["DESCRIPTION"]).text([
        bold("cctl apply"),
        roman(format!(
            " (and cctl-apply.service at boot) makes the kernel match this file: it registers \
             the algorithms the file lists, upgrades a name whose parameters differ, sets the \
             default congestion control and the policy rules, and unloads the names cctl \
             loaded that the file does not list (not while established connections use \
             them). Without a file argument it reads {}.",
            config::DEFAULT_PATH
        )),
    ]);
    r.control("PP", []).text([roman(
        "The file is TOML. Every key is optional unless its entry says otherwise; a key not \
         listed here is an error. An empty file asks for nothing: applying it unloads what \
         cctl loaded and removes its policy rules.",
    )]);
    for (table, heading, keys) in tables() {
        r.control("SH", [heading]);
        for key in keys {
            r.control("TP", [])
                .text([
                    bold(*key),
                    roman(format!(": {}", config::expected_words(key))),
                ])
                .text([roman(key_doc(table, key).unwrap_or(""))]);
        }
    }
    r.control("SH", ["ALGORITHMS"]).text([roman(
        "The values of algo, with the name each registers by default, its profiles and its \
         parameters (unit, range and the paper's default; live ones can change while \
         loaded, with cctl set):",
    )]);
    for a in catalogue::ALGORITHMS {
        r.control("TP", []).text([
            bold(a.key),
            roman(format!(" ({}) - {}", a.cc_name, a.summary)),
        ]);
        if !a.profiles.is_empty() {
            let names: Vec<&str> = a.profiles.iter().map(|p| p.name).collect();
            r.text([roman(format!("Profiles: {}.", names.join(", ")))]);
        }
        if a.params.is_empty() {
            r.text([roman("No parameters.")]);
        }
        for p in a.params {
            r.control("br", []).text([
                bold(p.key),
                roman(format!(
                    " ({}, {} to {}, default {}{}): {}",
                    p.unit,
                    p.min,
                    p.max,
                    p.default,
                    if p.live { ", live" } else { "" },
                    p.doc
                )),
            ]);
        }
    }
    r.control("SH", ["EXAMPLE"])
        .control("nf", [])
        .control("RS", ["4"]);
    for line in EXAMPLE.lines() {
        r.text([roman(line)]);
    }
    r.control("RE", []).control("fi", []);
    r.control("PP", []).text([
        roman("Check a change with "),
        bold("cctl apply --dry-run"),
        roman(" before "),
        bold("systemctl restart cctl-apply.service"),
        roman("."),
    ]);
    r.control("SH", ["FILES"])
        .control("TP", [])
        .text([bold(config::DEFAULT_PATH)])
        .text([roman(
            "The file cctl apply and cctl-apply.service read. It must be writable by root only.",
        )]);
    r.control("SH", ["DIAGNOSTICS"]).text([roman(format!(
        "A file that is not TOML, or has an unknown key, a value of the wrong type or out of \
         range, or a name given twice, changes nothing: cctl apply names the field \
         (algorithm[1].params.beta_min_pct) and what is allowed, and exits {}. A file or \
         directory others than root can write is not used (exit {}).",
        exit::USAGE,
        exit::UNTRUSTED
    ))]);
    see_also_section(
        &mut r,
        &[
            "cctl(1)".into(),
            "cctl-apply(1)".into(),
            "cctl-load(1)".into(),
            "cctl-policy(1)".into(),
            "cctl-default(1)".into(),
            "systemctl(1)".into(),
        ],
    );
    ("cctl.toml.5".into(), r.render())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_the_parser_allows_is_described_once_and_nothing_else() {
        let mut allowed: Vec<(&str, &str)> = tables()
            .iter()
            .flat_map(|(t, _, keys)| keys.iter().map(move |k| (*t, *k)))
            .collect();
        let mut documented: Vec<(&str, &str)> = KEY_DOCS.iter().map(|(t, k, _)| (*t, *k)).collect();
        allowed.sort();
        documented.sort();
        assert_eq!(
            documented, allowed,
            "KEY_DOCS against the parser's key lists"
        );
        let (_, page) = config_page();
        for (table, heading, keys) in tables() {
            assert!(page.contains(heading), "{heading}");
            for key in keys {
                assert!(
                    page.contains(&format!("\\fB{key}\\fR: ")),
                    "{table}.{key} in cctl.toml.5"
                );
            }
        }
    }

    #[test]
    fn the_example_of_cctl_toml_5_parses_and_uses_every_key() {
        let cfg = config::Config::parse(EXAMPLE, Path::new("cctl.toml")).unwrap();
        assert_eq!(cfg.algorithms.len(), 2);
        assert_eq!(cfg.policy.len(), 2);
        for (table, _, keys) in tables() {
            for key in keys {
                let used = EXAMPLE
                    .lines()
                    .any(|l| l.starts_with(&format!("{key} = ")) || l == format!("[[{key}]]"));
                assert!(used, "the example uses {table}.{key}");
            }
        }
    }

    #[test]
    fn cctl_1_has_an_exit_status_entry_per_code_and_no_markdown_table() {
        let cmd = built(<crate::Cli as clap::CommandFactory>::command());
        let (file, page) = command_page(&cmd, None);
        assert_eq!(file, "cctl.1");
        for (code, name, _) in exit::ALL {
            assert!(
                page.contains(&format!(".TP 5\n\\fB{code}\\fR (\\fI{name}\\fR)")),
                "{code} {name} in:\n{page}"
            );
        }
        assert!(
            !page.contains("|---"),
            "the markdown table is not on the page"
        );
        assert!(!page.contains(".SH EXTRA"));
        assert!(
            page.contains(".SH \"SEE ALSO\"\n\\fBcctl\\-list\\fR(1)"),
            "{page}"
        );
        assert!(page.contains("\\fBcctl.toml\\fR(5)"));
        assert!(
            !page.contains("cctl\\-help"),
            "no page for clap's help subcommand"
        );
    }

    #[test]
    fn a_subcommand_page_names_its_parent_and_keeps_its_examples_as_lines() {
        let cmd = built(<crate::Cli as clap::CommandFactory>::command());
        let apply = cmd.find_subcommand("apply").unwrap();
        let (file, page) = command_page(apply, Some("cctl"));
        assert_eq!(file, "cctl-apply.1");
        assert!(page.contains(".SH NOTES"), "{page}");
        assert!(
            page.contains(".nf\n.RS 4\ndefault = \"bpf_htcp\"\n"),
            "{page}"
        );
        assert!(
            page.contains("\\fBcctl\\fR(1), \\fBcctl.toml\\fR(5)"),
            "{page}"
        );
    }

    #[test]
    fn every_algorithm_of_the_catalogue_is_on_cctl_toml_5() {
        let (_, page) = config_page();
        for a in catalogue::ALGORITHMS {
            assert!(
                page.contains(&format!("\\fB{}\\fR ({})", a.key, a.cc_name)),
                "{}",
                a.key
            );
            for p in a.params {
                assert!(
                    page.contains(&format!("\\fB{}\\fR (", p.key)),
                    "{}.{}",
                    a.key,
                    p.key
                );
            }
        }
    }
}
