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
    let path = root().join("docs/reference/commands.md");
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = generated_reference();
    if on_disk != generated {
        let first = on_disk
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| on_disk.lines().count().min(generated.lines().count()));
        panic!(
            "docs/reference/commands.md is stale (first difference at line {}: {:?} on disk, {:?} generated): run `make docs`",
            first + 1,
            on_disk.lines().nth(first).unwrap_or("<end of file>"),
            generated.lines().nth(first).unwrap_or("<end of file>"),
        );
    }
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

/// Every `](target)` of a markdown text outside code blocks.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
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
