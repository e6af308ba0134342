//! Keeps docs/reference/scenarios.md true to the parser: the keys each table of a scenario
//! file may have are read from the parser's own types (the field lists serde derives for
//! them, the schedule entries' and random draws' key lists), and the reference's key tables
//! must name exactly those; its complete example must parse and expand.
//!
//! The reference marks each key table with `<!-- keys: GROUP -->` (a group of
//! [`accepted`]) and its example with `<!-- example -->` before a ```` ```toml ```` block.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use serde::de::{DeserializeOwned, Visitor};

use crate::expect::{RawExpect, RawWhere};
use crate::model::{Profile, PARAMS, STRING_SWEEPS};
use crate::schedule::{entry_keys, Quantity};
use crate::schema::{RawFlow, RawLayer, RawProfiles, RawTop, Scenario};
use crate::topology::{RawHop, RawTopology};
use crate::traffic::RawProbe;

/// What [`FieldCatcher`] ends with: the field list of the struct it was asked for, or
/// anything else serde asked of it.
#[derive(Debug)]
enum Caught {
    Fields(&'static [&'static str]),
    Other(String),
}

impl fmt::Display for Caught {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for Caught {}

impl serde::de::Error for Caught {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Caught::Other(msg.to_string())
    }
}

/// A deserializer that answers a struct's request with the struct's own field names (serde
/// derive passes them, after `rename`, to `deserialize_struct`) and fails on anything else.
struct FieldCatcher;

impl<'de> serde::Deserializer<'de> for FieldCatcher {
    type Error = Caught;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Caught> {
        Err(Caught::Other("not a struct".into()))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Caught> {
        Err(Caught::Fields(fields))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The keys serde accepts for the table type `T`.
fn fields_of<T: DeserializeOwned>() -> BTreeSet<&'static str> {
    match T::deserialize(FieldCatcher) {
        Err(Caught::Fields(f)) => f.iter().copied().collect(),
        Err(Caught::Other(e)) => panic!("{}: {e}", std::any::type_name::<T>()),
        Ok(_) => panic!("{} deserialized from nothing", std::any::type_name::<T>()),
    }
}

/// The keys the parser accepts, by group (the reference's `<!-- keys: GROUP -->`).
fn accepted() -> BTreeMap<&'static str, BTreeSet<&'static str>> {
    let schedule = entry_keys(Quantity::Rate)
        .into_iter()
        .chain(entry_keys(Quantity::Rtt))
        .collect();
    BTreeMap::from([
        ("top", fields_of::<RawTop>()),
        ("profiles", fields_of::<RawProfiles>()),
        ("layer", fields_of::<RawLayer>()),
        ("flows", fields_of::<RawFlow>()),
        ("topology", fields_of::<RawTopology>()),
        ("topology.bottlenecks", fields_of::<RawHop>()),
        ("probes", fields_of::<RawProbe>()),
        ("expect", fields_of::<RawExpect>()),
        ("expect.where", fields_of::<RawWhere>()),
        ("schedule", schedule),
        ("draw", crate::expr::DRAW_FORMS.iter().copied().collect()),
    ])
}

const REFERENCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../docs/reference/scenarios.md"
);

fn reference() -> String {
    std::fs::read_to_string(REFERENCE).unwrap_or_else(|e| panic!("{REFERENCE}: {e}"))
}

/// One key table of the reference.
#[derive(Debug)]
struct KeyTable {
    group: String,
    /// 1-based line of its header.
    line: usize,
    header: Vec<String>,
    /// (line, key, cells) per row.
    rows: Vec<(usize, String, Vec<String>)>,
}

fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_string()).collect()
}

/// The key tables of `text`: every table whose first header cell is `key`, each of which
/// must follow a `<!-- keys: GROUP -->` line; every marker must be followed by one.
fn key_tables(text: &str) -> Result<Vec<KeyTable>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut marker: Option<(usize, String)> = None;
    let mut in_code = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if in_code || line.is_empty() {
            i += 1;
            continue;
        }
        if let Some(rest) = line.strip_prefix("<!-- keys:") {
            if let Some((at, g)) = &marker {
                return Err(format!("line {at}: `keys: {g}` is not followed by a table"));
            }
            let group = rest.trim_end_matches("-->").trim().to_string();
            marker = Some((i + 1, group));
            i += 1;
            continue;
        }
        if !line.starts_with('|') {
            if let Some((at, g)) = &marker {
                return Err(format!("line {at}: `keys: {g}` is not followed by a table"));
            }
            i += 1;
            continue;
        }
        // A table: header, separator, rows.
        let header = cells(line);
        let start = i;
        i += 2;
        let mut rows = Vec::new();
        while i < lines.len() && lines[i].trim().starts_with('|') {
            rows.push((i + 1, lines[i]));
            i += 1;
        }
        let marked = marker.take();
        if header.first().map(String::as_str) != Some("key") {
            if let Some((at, g)) = marked {
                return Err(format!(
                    "line {at}: `keys: {g}` is followed by a table whose first column is not `key`"
                ));
            }
            continue;
        }
        let Some((_, group)) = marked else {
            return Err(format!(
                "line {}: a key table without a `<!-- keys: GROUP -->` line before it",
                start + 1
            ));
        };
        let mut parsed = Vec::new();
        for (n, row) in rows {
            let c = cells(row);
            let key = c[0]
                .strip_prefix('`')
                .and_then(|k| k.strip_suffix('`'))
                .filter(|k| !k.contains('`'))
                .ok_or_else(|| format!("line {n}: the key cell `{}` is not one `key`", c[0]))?;
            if c.len() != header.len() {
                return Err(format!(
                    "line {n}: {} cells, the header has {}",
                    c.len(),
                    header.len()
                ));
            }
            parsed.push((n, key.to_string(), c));
        }
        out.push(KeyTable {
            group,
            line: start + 1,
            header,
            rows: parsed,
        });
    }
    if let Some((at, g)) = marker {
        return Err(format!("line {at}: `keys: {g}` is not followed by a table"));
    }
    Ok(out)
}

#[test]
fn the_field_lists_are_the_ones_the_parser_names_for_an_unknown_key() {
    // What a user is told for a misspelt key, per serde table, against what the catcher reads.
    fn told<T: DeserializeOwned>() -> BTreeSet<String> {
        let mut t = toml::Table::new();
        t.insert("zz_no_such_key".into(), toml::Value::Integer(1));
        let Err(e) = crate::de::de_at::<T>(toml::Value::Table(t), "t") else {
            panic!("an unknown key was accepted")
        };
        let (_, allowed) = e
            .message
            .split_once("allowed keys: ")
            .unwrap_or_else(|| panic!("{}", e.message));
        allowed
            .split(", ")
            .map(|k| k.trim_matches('`').to_string())
            .collect()
    }
    fn same<T: DeserializeOwned>() {
        let caught: BTreeSet<String> = fields_of::<T>().iter().map(|k| k.to_string()).collect();
        assert_eq!(told::<T>(), caught, "{}", std::any::type_name::<T>());
    }
    same::<RawTop>();
    same::<RawProfiles>();
    same::<RawLayer>();
    same::<RawFlow>();
    same::<RawTopology>();
    same::<RawHop>();
    same::<RawProbe>();
    same::<RawExpect>();
    same::<RawWhere>();
    assert!(
        fields_of::<RawExpect>().contains("where"),
        "serde's rename is read"
    );
}

#[test]
fn the_scenario_reference_names_exactly_the_keys_the_parser_accepts() {
    let tables = key_tables(&reference()).unwrap_or_else(|e| panic!("{REFERENCE}: {e}"));
    let accepted = accepted();
    let mut problems = Vec::new();
    let mut documented: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for t in &tables {
        let Some(group) = accepted.get_key_value(t.group.as_str()).map(|(g, _)| *g) else {
            problems.push(format!(
                "line {}: unknown group `{}`; groups: {}",
                t.line,
                t.group,
                accepted.keys().copied().collect::<Vec<_>>().join(", ")
            ));
            continue;
        };
        let seen = documented.entry(group).or_default();
        for (n, key, _) in &t.rows {
            if !seen.insert(key) {
                problems.push(format!("line {n}: `{key}` is in the {group} tables twice"));
            }
        }
    }
    for (group, keys) in &accepted {
        let doc = documented.remove(group).unwrap_or_default();
        for k in keys.difference(&doc) {
            problems.push(format!(
                "{group}: the parser accepts `{k}`, the reference lacks it"
            ));
        }
        for k in doc.difference(keys) {
            problems.push(format!(
                "{group}: the reference names `{k}`, the parser refuses it"
            ));
        }
    }
    assert!(problems.is_empty(), "{REFERENCE}:\n{}", problems.join("\n"));
}

#[test]
fn the_scenario_reference_marks_exactly_the_keys_a_sweep_may_vary() {
    let tables = key_tables(&reference()).unwrap();
    let mut marked = BTreeSet::new();
    for t in tables.iter().filter(|t| t.group == "layer") {
        let col = t
            .header
            .iter()
            .position(|h| h == "sweep")
            .unwrap_or_else(|| panic!("line {}: a layer table needs a `sweep` column", t.line));
        for (n, key, c) in &t.rows {
            match c[col].as_str() {
                "yes" => {
                    marked.insert(key.as_str());
                }
                "" | "no" => {}
                other => panic!("line {n}: sweep column `{other}`; expected yes or no"),
            }
        }
    }
    let sweepable: BTreeSet<&str> = PARAMS.iter().chain(STRING_SWEEPS).copied().collect();
    assert_eq!(marked, sweepable, "{REFERENCE}: the `sweep` column");
}

#[test]
fn the_scenario_reference_example_parses_and_expands() {
    let text = reference();
    let after = text
        .split_once("<!-- example -->")
        .expect("the reference has an <!-- example --> marker")
        .1;
    let body = after
        .trim_start()
        .strip_prefix("```toml\n")
        .expect("```toml right after <!-- example -->");
    let toml = &body[..body.find("\n```").expect("the example's block ends")];
    let s = Scenario::parse(toml, Path::new("docs/reference/scenarios.md"))
        .unwrap_or_else(|e| panic!("the reference's example: {e}"));
    for profile in Profile::ALL {
        let points = s.expand(profile, s.seed(profile)).unwrap();
        assert!(!points.is_empty(), "{profile}");
        assert!(points.iter().all(|p| !p.flows.is_empty()), "{profile}");
    }
}

#[test]
fn key_tables_need_their_marker() {
    let bare = "| key | meaning |\n|---|---|\n| `a` | x |\n";
    assert!(key_tables(bare).unwrap_err().contains("without"));
    let lonely = "<!-- keys: top -->\n\ntext\n";
    assert!(key_tables(lonely).unwrap_err().contains("not followed"));
    let good = "<!-- keys: top -->\n\n| key | meaning |\n|---|---|\n| `id` | x |\n\n| other | t |\n|-|-|\n| 1 | 2 |\n";
    let t = key_tables(good).unwrap();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].rows[0].1, "id");
}
