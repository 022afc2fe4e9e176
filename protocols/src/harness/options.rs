//! Options from scenario JSON, with the failing field's path in every error.
//!
//! One merge rule for every protocol ([`merge_options`]): start from a named preset of the
//! protocol's typed options, overlay the scenario's object recursively, reject unknown keys at
//! their path, then deserialize into the typed options. `dmsim run`, `fuzz` and `hw run` all go
//! through it, so one scenario means one configuration everywhere.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

/// One thing wrong with a scenario, at a field path (`workload.read_ratio`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub path: String,
    pub reason: String,
}

impl Problem {
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Problem {
        Problem { path: path.into(), reason: reason.into() }
    }

    /// The same problem under `prefix` (`compare_with.x` + `workload.y`).
    pub fn under(self, prefix: &str) -> Problem {
        Problem { path: join_path(prefix, &self.path), reason: self.reason }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() { "(top level)" } else { &self.path };
        write!(f, "{path}: {}", self.reason)
    }
}

/// Problems as one line (`a: x; b: y`), for run-time errors.
pub fn problems_line(problems: &[Problem]) -> String {
    problems.iter().map(Problem::to_string).collect::<Vec<_>>().join("; ")
}

/// Deserialize with the failing field's path (`prefix` is prepended).
pub fn parse_typed<T: DeserializeOwned>(value: &Value, prefix: &str) -> Result<T, Problem> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let path = join_path(prefix, if inner == "." { "" } else { &inner });
        Problem::new(path, e.into_inner().to_string())
    })
}

pub fn join_path(prefix: &str, inner: &str) -> String {
    match (prefix.is_empty(), inner.is_empty()) {
        (true, _) => inner.to_string(),
        (false, true) => prefix.to_string(),
        (false, false) => format!("{prefix}.{inner}"),
    }
}

/// The typed options at `at` (`protocol_options`): the preset named by the object's `preset`
/// key (default `"default"`) from `presets`, with the rest of the object merged over it
/// recursively. Keys in `reserved` may not be set here (another section decides them; the
/// reason says which). `null` means no overrides.
pub fn merge_options<T: Serialize + DeserializeOwned>(
    value: &Value,
    at: &str,
    presets: &[(&str, T)],
    reserved: &[(&str, &str)],
) -> Result<T, Problem> {
    let mut overlay = match value {
        Value::Null => Map::new(),
        Value::Object(m) => m.clone(),
        _ => return Err(Problem::new(at, "must be an object of options")),
    };
    let preset = match overlay.remove("preset") {
        None => "default".to_string(),
        Some(Value::String(s)) => s,
        Some(_) => return Err(Problem::new(join_path(at, "preset"), "must be a string")),
    };
    let Some((_, base)) = presets.iter().find(|(name, _)| *name == preset) else {
        let known: Vec<&str> = presets.iter().map(|(n, _)| *n).collect();
        return Err(Problem::new(
            join_path(at, "preset"),
            format!("unknown preset {preset:?} (known: {})", known.join(", ")),
        ));
    };
    for (field, source) in reserved {
        if overlay.contains_key(*field) {
            return Err(Problem::new(join_path(at, field), format!("set by {source}")));
        }
    }
    let mut merged = serde_json::to_value(base).map_err(|e| Problem::new(at, e.to_string()))?;
    merge_into(&mut merged, &overlay, at)?;
    parse_typed(&merged, at)
}

/// Merge `overlay` into `base` (objects recursively); unknown keys are errors at their path.
fn merge_into(base: &mut Value, overlay: &Map<String, Value>, at: &str) -> Result<(), Problem> {
    let Some(object) = base.as_object_mut() else {
        return Err(Problem::new(at, "is not an object of options"));
    };
    for (k, v) in overlay {
        let path = join_path(at, k);
        let Some(slot) = object.get_mut(k) else {
            let known: Vec<&String> = object.keys().collect();
            return Err(Problem::new(path, format!("unknown option (known: {known:?})")));
        };
        match (slot.is_object(), v.as_object()) {
            (true, Some(inner)) => merge_into(slot, inner, &path)?,
            (true, None) => return Err(Problem::new(path, "expected an object")),
            _ => *slot = v.clone(),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct Inner {
        a: u32,
        b: u32,
    }
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    struct Opts {
        x: u32,
        inner: Inner,
    }

    fn presets() -> Vec<(&'static str, Opts)> {
        vec![
            ("default", Opts { x: 1, inner: Inner { a: 2, b: 3 } }),
            ("big", Opts { x: 100, inner: Inner { a: 200, b: 300 } }),
        ]
    }

    #[test]
    fn merges_recursively_over_the_named_preset() {
        let v = serde_json::json!({ "preset": "big", "inner": { "b": 7 } });
        let o: Opts = merge_options(&v, "protocol_options", &presets(), &[]).unwrap();
        assert_eq!(o, Opts { x: 100, inner: Inner { a: 200, b: 7 } });
        let o: Opts = merge_options(&Value::Null, "protocol_options", &presets(), &[]).unwrap();
        assert_eq!(o.x, 1);
    }

    #[test]
    fn errors_name_the_field() {
        let bad = |v: Value| merge_options::<Opts>(&v, "po", &presets(), &[("x", "workload.x")]).unwrap_err();
        assert_eq!(bad(serde_json::json!({ "inner": { "c": 1 } })).path, "po.inner.c");
        assert_eq!(bad(serde_json::json!({ "preset": "huge" })).path, "po.preset");
        assert_eq!(bad(serde_json::json!({ "x": 3 })).reason, "set by workload.x");
        assert_eq!(bad(serde_json::json!({ "inner": { "a": "z" } })).path, "po.inner.a");
        assert_eq!(bad(serde_json::json!([1])).path, "po");
    }
}
