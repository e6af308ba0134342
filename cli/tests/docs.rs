//! The documentation against today's CLI: docs/reference/commands.md is what `make docs` generates,
//! every subcommand has an example, every `cctl ...` line of README.md and docs/*.md parses,
//! and every link between them resolves. No root, no kernel: lines are checked with
//! `CCTL_PARSE_ONLY=1`, which makes `cctl` parse its arguments and exit.

use std::path::Path;

mod common;
use common::root;

/// What `cctl --markdown-help` prints today.
fn generated_reference() -> String {
    let o = common::run(&["--markdown-help".to_string()], false);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("the reference is UTF-8")
}

/// README.md, CONTRIBUTING.md, CHANGELOG.md and every .md file under docs/ (at any
/// depth), as (path relative to the root, text).
fn documents() -> Vec<(String, String)> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).expect("docs/ exists") {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = format!("{rel}/{name}");
            if e.file_type().unwrap().is_dir() {
                walk(&e.path(), &rel, out);
            } else if name.ends_with(".md") {
                out.push(rel);
            }
        }
    }
    let mut files: Vec<String> = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md"]
        .iter()
        .filter(|f| root().join(f).exists())
        .map(|f| f.to_string())
        .collect();
    let mut docs = Vec::new();
    walk(&root().join("docs"), "docs", &mut docs);
    docs.sort();
    files.extend(docs);
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(root().join(&f)).unwrap();
            (f, text)
        })
        .collect()
}

/// The lines inside fenced code blocks, as (1-based line number, line); continuation lines
/// ending in `\` are joined to the next and numbered by their first.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_code = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !in_code {
            continue;
        }
        let (n, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        joined.push_str(line.trim());
        if let Some(stripped) = joined.strip_suffix('\\') {
            pending = Some((n, format!("{} ", stripped.trim_end())));
        } else {
            out.push((n, joined));
        }
    }
    out
}

/// Splits a shell line into words, honouring single and double quotes, and stops at the
/// first unquoted comment (`#` after a space) or shell operator (`|`, `>`, `<` outside a
/// `<placeholder>`, `;`, `&`).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    let mut in_placeholder = false;
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    in_word = true;
                }
                ' ' | '\t' => {
                    if in_word {
                        words.push(std::mem::take(&mut word));
                        in_word = false;
                    }
                }
                '#' if !in_word => break,
                // A `<...>` placeholder stays (part of) a word; any other `<` or `>` is
                // a redirection.
                '<' if chars[i..].contains(&'>') => {
                    in_placeholder = true;
                    word.push(c);
                    in_word = true;
                }
                '>' if in_placeholder => {
                    in_placeholder = false;
                    word.push(c);
                }
                '|' | '<' | '>' | ';' | '&' => break,
                _ => {
                    word.push(c);
                    in_word = true;
                }
            },
        }
        i += 1;
    }
    if in_word {
        words.push(word);
    }
    words
}

/// A documented command: where it is and the words after `cctl`.
struct Example {
    place: String,
    args: Vec<String>,
}

/// Every `cctl ...` command line in the code blocks of README.md and docs/*.md (not the
/// generated docs/reference/commands.md). A line counts when, after an optional `$ ` prompt, `sudo`
/// and `VAR=value` assignments, its first word is `cctl` and the next word does not end
/// in `:` (that is output: `cctl: error ...`, `cctl trace: 812 samples ...`).
fn examples() -> Vec<Example> {
    let mut out = Vec::new();
    for (file, text) in documents() {
        if file == "docs/reference/commands.md" {
            continue;
        }
        for (n, line) in code_lines(&text) {
            let line = line.strip_prefix("$ ").unwrap_or(&line);
            let mut words = shell_words(line).into_iter().peekable();
            while let Some(w) = words.peek() {
                if w == "sudo" || (w.contains('=') && !w.starts_with('-')) {
                    words.next();
                } else {
                    break;
                }
            }
            if words.next().as_deref() != Some("cctl") {
                continue;
            }
            let args: Vec<String> = words.collect();
            if args.first().is_some_and(|a| a.ends_with(':')) {
                continue;
            }
            out.push(Example {
                place: format!("{file}:{n}"),
                args,
            });
        }
    }
    out
}

/// The command paths the reference documents (`cctl`, `cctl list`, `cctl bench run`, ...),
/// from its `## \`cctl ...\`` headings.
fn subcommand_paths(reference: &str) -> Vec<Vec<String>> {
    reference
        .lines()
        .filter_map(|l| l.strip_prefix("## `")?.strip_suffix('`'))
        .map(|p| p.split(' ').skip(1).map(str::to_string).collect::<Vec<_>>())
        .filter(|p: &Vec<String>| !p.is_empty())
        .collect()
}

#[test]
fn the_command_reference_is_what_make_docs_generates() {
    let generated = generated_reference();
    common::assert_generated("docs/reference/commands.md", &generated);
}

#[test]
fn the_command_reference_holds_every_exit_code_of_exit_rs() {
    let reference = generated_reference();
    let exit_rs = std::fs::read_to_string(root().join("cli/src/exit.rs")).expect("cli/src/exit.rs");
    let mut codes = 0;
    for line in exit_rs.lines() {
        let Some(decl) = line.trim().strip_prefix("pub const ") else {
            continue;
        };
        let Some((name, value)) = decl
            .strip_suffix(';')
            .and_then(|d| d.split_once(": i32 = "))
        else {
            continue;
        };
        codes += 1;
        let row = format!("| {value} | `{name}` |");
        assert!(reference.contains(&row), "no row {row:?} in the reference");
    }
    assert!(codes >= 10, "found only {codes} exit codes in exit.rs");
}

#[test]
fn every_subcommand_has_an_example_in_the_readme_or_docs() {
    let examples = examples();
    let paths = subcommand_paths(&generated_reference());
    assert!(
        paths.len() > 20,
        "the reference lists {} commands",
        paths.len()
    );
    let missing: Vec<String> = paths
        .iter()
        .filter(|path| !examples.iter().any(|e| e.args.starts_with(path)))
        .map(|p| format!("cctl {}", p.join(" ")))
        .collect();
    assert!(
        missing.is_empty(),
        "no example line `cctl <subcommand> ...` in a code block of README.md or docs/*.md for: {}",
        missing.join(", ")
    );
}

/// Commands that change nothing and need no root; they run for real, not just parse.
fn runs_for_real(args: &[String]) -> bool {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let listing = words.first() == Some(&"list") && !words.contains(&"--bpf-stats");
    listing
        || matches!(
            words.as_slice(),
            ["bench", "list"] | ["bench", "list", "--json"] | ["--version"]
        )
        || words.last() == Some(&"--help")
}

#[test]
fn every_documented_cctl_line_parses_with_todays_cli() {
    let examples = examples();
    assert!(
        examples.len() > 50,
        "found only {} example lines",
        examples.len()
    );
    let mut failures = Vec::new();
    for e in &examples {
        // Skip rule: a `<...>` placeholder stands for a value the reader chooses. The line
        // is checked up to it, with `--help` after the words before it (so the subcommand
        // path and every complete flag before it must exist); a flag the cut leaves without
        // its value is dropped with it.
        let mut args = e.args.clone();
        if let Some(at) = args.iter().position(|a| a.contains('<') && a.contains('>')) {
            args.truncate(at);
            if args
                .last()
                .is_some_and(|a| a.starts_with("--") && !a.contains('='))
            {
                args.pop();
            }
            args.push("--help".to_string());
        }
        let real = runs_for_real(&args);
        let o = common::run(&args, !real);
        if o.status.code() != Some(0) {
            failures.push(format!(
                "{}: cctl {} -> exit {:?}: {}",
                e.place,
                args.join(" "),
                o.status.code(),
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} documented command line(s) fail with today's cctl:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn parse_only_mode_still_refuses_bad_arguments() {
    let o = common::run(&["bench", "run", "--no-such-flag"], true);
    assert_eq!(o.status.code(), Some(2));
    let o = common::run(&["load", "htcp"], true);
    assert_eq!(o.status.code(), Some(0), "parse only: nothing is loaded");
}

/// GitHub's anchor for a heading: lower case, only letters, digits, `-`, `_` and spaces
/// kept, spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown file's headings (outside code blocks), with GitHub's `-1`,
/// `-2`, ... for repeated ones.
fn anchors(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let base = slug(title);
        let n = out
            .iter()
            .filter(|a| {
                *a == &base
                    || a.strip_prefix(&base)
                        .is_some_and(|r| r.starts_with('-') && r[1..].parse::<u32>().is_ok())
            })
            .count();
        out.push(if n == 0 { base } else { format!("{base}-{n}") });
    }
    out
}

/// The lines of a markdown text outside fenced code blocks, as (0-based index, line).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut in_code = false;
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let fence = line.trim_start().starts_with("```");
            if fence {
                in_code = !in_code;
            }
            !fence && !in_code
        })
        .collect()
}

/// Every `](target)` of a markdown text outside code blocks.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in prose_lines(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                out.push((i + 1, rest[..end].to_string()));
                rest = &rest[end..];
            }
        }
    }
    out
}

#[test]
fn every_link_of_the_readme_and_docs_resolves() {
    let mut broken = Vec::new();
    for (file, text) in documents() {
        let dir = Path::new(&file).parent().unwrap_or(Path::new(""));
        for (n, target) in link_targets(&text) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let linked = if path.is_empty() {
                text.clone()
            } else {
                let p = root().join(dir).join(path);
                if !path.ends_with(".md") {
                    if !p.exists() {
                        broken.push(format!("{file}:{n}: ({target}): no file {path}"));
                    }
                    continue;
                }
                match std::fs::read_to_string(&p) {
                    Ok(t) => t,
                    Err(_) if p.is_dir() => String::new(),
                    Err(_) => {
                        broken.push(format!("{file}:{n}: ({target}): no file {path}"));
                        continue;
                    }
                }
            };
            if let Some(a) = anchor {
                if !anchors(&linked).iter().any(|h| h == a) {
                    broken.push(format!(
                        "{file}:{n}: ({target}): no heading with anchor #{a}"
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_follow_githubs_rules() {
    assert_eq!(
        slug("Paper-scale sweeps: `--jobs`, `--shard`, `--resume`, `cctl bench merge`"),
        "paper-scale-sweeps---jobs---shard---resume-cctl-bench-merge"
    );
    assert_eq!(
        slug("`cctl bench perf` — what cctl costs (`make bench`)"),
        "cctl-bench-perf--what-cctl-costs-make-bench"
    );
    assert_eq!(
        anchors("# A\n```\n# not a heading\n```\n## A\n"),
        ["a", "a-1"]
    );
}

/// The top-level entries of the repository a documented path may start with.
const REPO_ROOTS: &[&str] = &[
    "bpf/", "cli/", "crates/", "deploy/", "docs/", "loader/", "scripts/", "tests/", ".ci/",
];

/// Every repository path named in inline code (`` `loader/src/kernel.rs` ``) of a text
/// outside code blocks, as (1-based line, path): a word that starts with one of
/// [`REPO_ROOTS`] and holds no placeholder (`<`, `{`, `$`, `…`, `...`). A trailing
/// `:line`, `#anchor`, `(...)` or punctuation is cut off; `*` is kept (a glob).
fn repository_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in prose_lines(text) {
        for (k, span) in line.split('`').enumerate() {
            if k % 2 == 0 {
                continue; // outside inline code
            }
            for word in span.split_whitespace() {
                let word = word.trim_matches(|c: char| ",;.)(\"'".contains(c));
                if !REPO_ROOTS.iter().any(|r| word.starts_with(r)) {
                    continue;
                }
                if ["<", "{", "$", "…", "...", "N"]
                    .iter()
                    .any(|p| word.contains(p))
                {
                    continue;
                }
                let path = word.split([':', '#', '(']).next().unwrap_or(word);
                out.push((i + 1, path.trim_end_matches('.').to_string()));
            }
        }
    }
    out
}

/// Whether a repository path exists; one with `*` exists when some file of its directory
/// matches the pattern (`*` any run of characters, within the last component only).
fn path_exists(path: &str) -> bool {
    let p = root().join(path);
    if !path.contains('*') {
        return p.exists();
    }
    let (dir, pattern) = path.rsplit_once('/').unwrap_or(("", path));
    if dir.contains('*') {
        return root().join(dir.split('*').next().unwrap()).exists();
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    std::fs::read_dir(root().join(dir))
        .map(|entries| {
            entries.filter_map(|e| e.ok()).any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let mut rest = name.as_str();
                for (i, part) in parts.iter().enumerate() {
                    match rest.find(part) {
                        Some(at) if i > 0 || at == 0 => rest = &rest[at + part.len()..],
                        _ => return false,
                    }
                }
                parts.last().is_some_and(|l| l.is_empty()) || rest.is_empty()
            })
        })
        .unwrap_or(false)
}

#[test]
fn every_repository_path_the_docs_name_exists() {
    let mut missing = Vec::new();
    let mut checked = 0;
    for (file, text) in documents() {
        if file == "docs/reference/commands.md" {
            continue;
        }
        for (n, path) in repository_paths(&text) {
            checked += 1;
            if !path_exists(&path) {
                missing.push(format!("{file}:{n}: `{path}` does not exist"));
            }
        }
    }
    assert!(
        checked > 100,
        "found only {checked} repository paths in the docs"
    );
    assert!(
        missing.is_empty(),
        "{} path(s) named in the docs do not exist:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

/// The sections of a markdown text: (1-based line of the heading, heading, body), the
/// text before the first heading under an empty heading.
fn sections(text: &str) -> Vec<(usize, String, String)> {
    let mut out = vec![(1, String::new(), String::new())];
    let mut in_code = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if !in_code && line.starts_with('#') && line.trim_start_matches('#').starts_with(' ') {
            out.push((i + 1, line.to_string(), String::new()));
            continue;
        }
        let last = out.last_mut().unwrap();
        last.2.push_str(line);
        last.2.push('\n');
    }
    out
}

/// Whether a text names a date (`2026-11-27`).
fn names_a_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.windows(10).any(|w| {
        w.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
    })
}

/// Whether a text names where its figures come from: a make target, a results directory,
/// a test or example file, a script, or a cctl command that makes them.
fn names_a_source(text: &str) -> bool {
    [
        "make ",
        "results/",
        "tests/",
        "scripts/",
        "examples/",
        "cctl bench",
        "cctl conform",
        "test-times.tsv",
    ]
    .iter()
    .any(|s| text.contains(s))
}

/// Units a measured figure is given in.
const UNITS: &[&str] = &[
    "%", "s ", "s,", "s.", "s)", "s;", "ms", "min", "µs", "us", "ns", "h ", "mbit", "gbit", "kbit",
    "kib", "mib", "gib", "kb", "mb", "gb", "segments", "packets", "samples", "steps", "runs",
    "flows", "sets", "cpu", "x ", "×",
];

/// Whether a text reports a measurement: "measured" or "took" followed within 60
/// characters by a number with a unit (`Measured here: 4 boots in 390 s`, `took 13-22 ms`),
/// not the word in passing ("the measured reason", "beside the measured M3 R_rtt").
fn reports_a_measurement(text: &str) -> bool {
    let lower = text.to_lowercase();
    ["measured", "took "].iter().any(|w| {
        lower.match_indices(w).any(|(at, _)| {
            let next: Vec<char> = lower[at + w.len()..].chars().take(60).collect();
            (0..next.len()).any(|i| {
                let starts = next[i].is_ascii_digit()
                    && (i == 0 || !(next[i - 1].is_alphanumeric() || next[i - 1] == '.'));
                if !starts {
                    return false;
                }
                let mut j = i;
                while j < next.len() && (next[j].is_ascii_digit() || ".,".contains(next[j])) {
                    j += 1;
                }
                while j < next.len() && next[j] == ' ' {
                    j += 1;
                }
                let rest: String = next[j..].iter().collect::<String>() + " ";
                UNITS.iter().any(|u| rest.starts_with(u))
            })
        })
    })
}

#[test]
fn every_measured_figure_names_its_source_and_date() {
    let mut bad = Vec::new();
    let mut measured = 0;
    for (file, text) in documents() {
        if file == "docs/reference/commands.md" || file == "CHANGELOG.md" {
            continue;
        }
        for (line, heading, body) in sections(&text) {
            if !reports_a_measurement(&body) {
                continue;
            }
            measured += 1;
            let whole = format!("{heading}\n{body}");
            if !names_a_date(&whole) || !names_a_source(&whole) {
                bad.push(format!(
                    "{file}:{line} {heading:?}: measured figures without {}",
                    match (names_a_date(&whole), names_a_source(&whole)) {
                        (false, false) =>
                            "a date and a source (make target, results directory, test)",
                        (false, true) => "a date",
                        _ => "a source (make target, results directory, test)",
                    }
                ));
            }
        }
    }
    assert!(
        measured > 10,
        "found only {measured} sections with measured figures"
    );
    assert!(
        bad.is_empty(),
        "{} section(s) give measured figures without their source and date:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn the_docs_checks_find_paths_dates_and_sources() {
    let text = "See `loader/src/kernel.rs:12` and `crates/<x>/a.rs`.\n```\n`bpf/none`\n```\n";
    assert_eq!(
        repository_paths(text),
        [(1, "loader/src/kernel.rs".to_string())]
    );
    assert!(path_exists("bpf/algo/*.bpf.c"));
    assert!(!path_exists("bpf/algo/*.nothing"));
    assert!(!path_exists("tests/tests/modern/parking.rs"));
    assert!(names_a_date("on 2026-11-27 here"));
    assert!(!names_a_date("on 2026-11 here"));
    assert!(names_a_source("(`make bench-speed`)"));
    assert!(reports_a_measurement("Measured here: 4 boots in 390 s"));
    assert!(!reports_a_measurement(
        "its measured reason (`conform tolerance`)"
    ));
    assert!(!reports_a_measurement(
        "drawn beside the measured M3 R_rtt.\n\nUnit: ratio. T0.2"
    ));
    assert!(!reports_a_measurement(
        "flow N measured over its base RTT; near 1 when"
    ));
    assert!(reports_a_measurement("it took 5 min 39 s"));
    let s = sections("intro\n# A\nmeasured\n```\n# code\n```\n## B\nx\n");
    assert_eq!(s.len(), 3);
    assert_eq!(s[1].1, "# A");
    assert!(s[1].2.contains("# code"));
}
