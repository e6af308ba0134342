//! Deserializing the TOML of a scenario with serde, every error naming its field
//! (`profiles.ci.sweep.rtt_ms[2]`).

use crate::error::FieldError;

/// Deserializes `value` as a `T`, naming the field at `at` (+ the path serde reports).
pub(crate) fn de_at<T: serde::de::DeserializeOwned>(
    value: toml::Value,
    at: &str,
) -> Result<T, FieldError> {
    T::deserialize(value).map_err(|e| {
        let shown = e.to_string();
        let mut field = at.to_string();
        if let Some(i) = shown.find("\nin `") {
            let rest = &shown[i + 5..];
            if let Some(end) = rest.find('`') {
                field = join(&field, &rest[..end]);
            }
        }
        let message = e.message().to_string();
        if let Some(rest) = message.strip_prefix("missing field `") {
            let name = rest.split('`').next().unwrap_or("");
            return FieldError::new(join(&field, name), "missing: this field is required");
        }
        if let Some(rest) = message.strip_prefix("unknown field `") {
            if let Some(end) = rest.find('`') {
                // An empty key (`"" = ...`) is named as written, quoted.
                let key = match &rest[..end] {
                    "" => "\"\"",
                    k => k,
                };
                field = join(&field, key);
            }
            let allowed = message.split_once(", expected ").map_or("", |(_, a)| a);
            let allowed = allowed
                .trim_start_matches("one of ")
                .replace("` or `", "`, `");
            return FieldError::new(field, format!("unknown field; allowed keys: {allowed}"));
        }
        FieldError::new(field, message)
    })
}

fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}.{b}"),
    }
}
