//! Fuzzing of TOML parsers with proptest (the `cctl apply` configuration of the loader, the
//! scenarios of cctl-scenario): random documents built from the schema's keys,
//! and valid files mutated (cut, spliced, tokens inserted, values swapped). A run lasts
//! a budget of CPU time: `CCTL_FUZZ_SECONDS` (default 2; `make test` sets 60) spread over
//! the host's CPUs, with the seed from `CCTL_FUZZ_SEED` (default: from the clock, printed
//! so a failure can be replayed).

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// Environment variable with the time budget of one fuzz run, in seconds.
pub const SECONDS_ENV: &str = "CCTL_FUZZ_SECONDS";
/// Environment variable with the seed of a fuzz run (to replay one).
pub const SEED_ENV: &str = "CCTL_FUZZ_SEED";

/// The time budget of one fuzz run: `CCTL_FUZZ_SECONDS`, default 2 s.
pub fn budget() -> Duration {
    let s = std::env::var(SECONDS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(2.0);
    Duration::from_secs_f64(s)
}

/// Snippets inserted by mutations: TOML punctuation and awkward values.
const TOKENS: &[&str] = &[
    "=",
    "\"",
    "'",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    ",",
    ".",
    "\n",
    "#",
    " ",
    "\\",
    "-1",
    "0",
    "1",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "-9223372036854775808",
    "9223372036854775807",
    "1e400",
    "nan",
    "inf",
    "-0.0",
    "true",
    "false",
    "\"\"",
    "\"x\"",
    "''",
    "1979-05-27T07:32:00Z",
    "[]",
    "{}",
    "\"\\u00e9\"",
    "\"a\\u0000b\"",
    "\"../..\"",
    "\"/\"",
    "é",
    "\u{200b}",
];

#[derive(Debug, Clone)]
enum Mutation {
    /// Remove `len` bytes at a fraction of the text.
    Delete(f64, usize),
    /// Insert a snippet at a fraction of the text.
    Insert(f64, String),
    /// Replace what follows the `=` of a line with a snippet.
    ReplaceValue(f64, String),
    /// Repeat a line.
    DuplicateLine(f64),
    /// Swap two lines.
    SwapLines(f64, f64),
    /// Keep only the start.
    Truncate(f64),
}

fn at(text: &str, frac: f64) -> usize {
    let mut i = ((text.len() as f64) * frac.clamp(0.0, 1.0)) as usize;
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(text: &mut String, m: &Mutation) {
    match m {
        Mutation::Delete(f, len) => {
            let start = at(text, *f);
            let mut end = (start + len).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            text.replace_range(start..end, "");
        }
        Mutation::Insert(f, s) => {
            let i = at(text, *f);
            text.insert_str(i, s);
        }
        Mutation::ReplaceValue(f, s) => {
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            if lines.is_empty() {
                return;
            }
            let n = ((lines.len() as f64) * f.clamp(0.0, 0.999)) as usize;
            if let Some((k, _)) = lines[n].split_once('=') {
                lines[n] = format!("{k}= {s}");
            }
            *text = lines.join("\n");
        }
        Mutation::DuplicateLine(f) => {
            let mut lines: Vec<&str> = text.lines().collect();
            if lines.is_empty() {
                return;
            }
            let n = ((lines.len() as f64) * f.clamp(0.0, 0.999)) as usize;
            lines.insert(n, lines[n]);
            *text = lines.join("\n");
        }
        Mutation::SwapLines(a, b) => {
            let mut lines: Vec<&str> = text.lines().collect();
            if lines.is_empty() {
                return;
            }
            let i = ((lines.len() as f64) * a.clamp(0.0, 0.999)) as usize;
            let j = ((lines.len() as f64) * b.clamp(0.0, 0.999)) as usize;
            lines.swap(i, j);
            *text = lines.join("\n");
        }
        Mutation::Truncate(f) => {
            let i = at(text, *f);
            text.truncate(i);
        }
    }
}

fn snippet(words: &'static [&'static str]) -> BoxedStrategy<String> {
    prop_oneof![
        4 => proptest::sample::select(TOKENS).prop_map(str::to_string),
        2 => proptest::sample::select(words).prop_map(|w| w.to_string()),
        2 => proptest::sample::select(words).prop_map(|w| format!("\"{w}\"")),
        1 => any::<i64>().prop_map(|i| i.to_string()),
        1 => "[ -~]{0,12}",
    ]
    .boxed()
}

fn mutation(words: &'static [&'static str]) -> BoxedStrategy<Mutation> {
    let f = 0.0..1.0f64;
    prop_oneof![
        (f.clone(), 1..40usize).prop_map(|(f, n)| Mutation::Delete(f, n)),
        (f.clone(), snippet(words)).prop_map(|(f, s)| Mutation::Insert(f, s)),
        (f.clone(), snippet(words)).prop_map(|(f, s)| Mutation::ReplaceValue(f, s)),
        f.clone().prop_map(Mutation::DuplicateLine),
        (f.clone(), f.clone()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        f.prop_map(Mutation::Truncate),
    ]
    .boxed()
}

/// A TOML value of any kind, with keys and strings from `words` (the schema's keys and
/// plausible values) or random ones.
fn value(words: &'static [&'static str]) -> BoxedStrategy<toml::Value> {
    let key = prop_oneof![
        4 => proptest::sample::select(words).prop_map(str::to_string),
        1 => "[a-z_]{1,10}",
    ];
    let leaf = prop_oneof![
        any::<i64>().prop_map(toml::Value::Integer),
        (-5i64..70000).prop_map(toml::Value::Integer),
        any::<f64>().prop_map(toml::Value::Float),
        any::<bool>().prop_map(toml::Value::Boolean),
        proptest::sample::select(words).prop_map(|w| toml::Value::String(w.to_string())),
        ".{0,16}".prop_map(toml::Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(toml::Value::Array),
            proptest::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| toml::Value::Table(m.into_iter().collect())),
        ]
    })
    .boxed()
}

/// Documents to feed a TOML parser: `seeds` (valid files) mutated 1-6 times, tables of
/// random values under the schema's keys (`words`) serialized as TOML, and mutations of
/// those.
pub fn documents(seeds: Vec<String>, words: &'static [&'static str]) -> BoxedStrategy<String> {
    let mutated = (
        proptest::sample::select(seeds),
        proptest::collection::vec(mutation(words), 1..7),
    )
        .prop_map(|(mut text, ms)| {
            for m in &ms {
                apply(&mut text, m);
            }
            text
        });
    let generated = proptest::collection::btree_map(
        proptest::sample::select(words).prop_map(str::to_string),
        value(words),
        0..5,
    )
    .prop_map(|m| {
        let t: toml::Table = m.into_iter().collect();
        toml::to_string(&t).unwrap_or_default()
    });
    let generated_mutated = (
        generated.clone(),
        proptest::collection::vec(mutation(words), 1..4),
    )
        .prop_map(|(mut text, ms)| {
            for m in &ms {
                apply(&mut text, m);
            }
            text
        });
    prop_oneof![5 => mutated, 3 => generated, 2 => generated_mutated].boxed()
}

/// Threads a fuzz run uses: the host's CPUs (at most 8), or 1 when `CCTL_FUZZ_SEED` is
/// set (a replay is one thread's sequence).
fn threads() -> u64 {
    if std::env::var_os(SEED_ENV).is_some() {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8) as u64)
}

/// Feeds documents of `strategy()` to `check` until the time [`budget`] is spent, in CPU
/// time: on N threads (the host's CPUs, at most 8) for budget/N wall-clock seconds each,
/// each thread with its own seed and at least one document. A panic in `check` (the
/// parser's, or the caller's assertion about the error) fails the run with the document and
/// the seed to replay it (`CCTL_FUZZ_SEED` runs one thread on that seed for the whole
/// budget). Returns the number of documents checked.
pub fn run(
    what: &str,
    strategy: impl Fn() -> BoxedStrategy<String> + Sync,
    check: impl Fn(&str) + Sync,
) -> u64 {
    let seed: u64 = std::env::var(SEED_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    let threads = threads();
    let budget = budget().div_f64(threads as f64);
    let start = Instant::now();
    let one = |seed: u64| -> Result<u64, String> {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
        let mut runner = TestRunner::new_with_rng(Config::default(), rng);
        let strategy = strategy();
        let mut n = 0u64;
        while n == 0 || start.elapsed() < budget {
            let doc = strategy
                .new_tree(&mut runner)
                .expect("the document strategies never reject")
                .current();
            if let Err(cause) = std::panic::catch_unwind(AssertUnwindSafe(|| check(&doc))) {
                let msg = cause
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| cause.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                return Err(format!(
                    "fuzzing {what}: document #{n} failed ({msg}); replay with {SEED_ENV}={seed}\n--- document ---\n{doc}\n---"
                ));
            }
            n += 1;
        }
        Ok(n)
    };
    let results: Vec<Result<u64, String>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                let one = &one;
                sc.spawn(move || one(seed.wrapping_add(k)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a fuzz thread panicked".into()))
            })
            .collect()
    });
    let mut n = 0;
    for r in results {
        match r {
            Ok(k) => n += k,
            Err(e) => panic!("{e}"),
        }
    }
    eprintln!(
        "fuzzed {what}: {n} documents on {threads} thread(s) in {:.1} s ({SEED_ENV}={seed}, thread k: +k)",
        start.elapsed().as_secs_f64()
    );
    n
}

/// `doc` with TOML's string escapes decoded (`\uXXXX`, `\UXXXXXXXX`, `\t`, `\n`, `\"`, `\\`,
/// ...), so that a check that a key an error names was written in the document also finds a
/// key written escaped (`"\u00e9"` names `é`). An escape that is not valid TOML is kept as
/// written.
pub fn unescaped(doc: &str) -> String {
    let mut out = String::with_capacity(doc.len());
    let mut chars = doc.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let simple = match chars.peek() {
            Some('b') => Some('\u{8}'),
            Some('t') => Some('\t'),
            Some('n') => Some('\n'),
            Some('f') => Some('\u{c}'),
            Some('r') => Some('\r'),
            Some('"') => Some('"'),
            Some('\\') => Some('\\'),
            _ => None,
        };
        if let Some(s) = simple {
            chars.next();
            out.push(s);
            continue;
        }
        let digits = match chars.peek() {
            Some('u') => 4,
            Some('U') => 8,
            _ => {
                out.push(c);
                continue;
            }
        };
        let rest: String = chars.clone().skip(1).take(digits).collect();
        match u32::from_str_radix(&rest, 16).ok().and_then(char::from_u32) {
            Some(decoded) if rest.len() == digits => {
                for _ in 0..=digits {
                    chars.next();
                }
                out.push(decoded);
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_keep_text_valid_utf8_at_any_position() {
        let mut t = String::from("a = \"é\"\nb = 1\n");
        for m in [
            Mutation::Delete(0.3, 5),
            Mutation::Insert(0.55, "[[".into()),
            Mutation::ReplaceValue(0.9, "-1".into()),
            Mutation::DuplicateLine(0.0),
            Mutation::SwapLines(0.0, 0.99),
            Mutation::Truncate(0.41),
        ] {
            apply(&mut t, &m);
            assert!(t.is_char_boundary(t.len()));
        }
    }

    #[test]
    fn escaped_keys_are_decoded_and_bad_escapes_kept() {
        assert_eq!(unescaped(r#""\u00e9" = 1"#), "\"é\" = 1");
        assert_eq!(unescaped(r#""\U0001F600\t\"x\\""#), "\"😀\t\"x\\\"");
        assert_eq!(unescaped(r#"\uZZZZ \u12"#), r#"\uZZZZ \u12"#);
        assert_eq!(unescaped("plain"), "plain");
    }
}
