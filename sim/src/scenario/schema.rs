//! The JSON Schema of scenario files (`dmsim schema`, generated from the same serde types the
//! loader parses with, so the two cannot drift) and a validator for the part of JSON Schema
//! that the generated schema uses, so a test can hold every shipped scenario against it.
//!
//! `protocol_options`, `workload` and `fuzz` are free-form here: each protocol parses its own
//! sections with field paths at load time (`dmsim run --dry-run` checks them).

use serde_json::Value;

use super::ScenarioFile;

/// The schema, as JSON.
pub fn scenario_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(ScenarioFile)).expect("a schema is JSON")
}

/// Problems with `doc` against `schema` (empty: valid), each naming its JSON path.
pub fn validate(schema: &Value, doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    check(schema, schema, doc, "(top level)", &mut out);
    out
}

fn check(root: &Value, schema: &Value, doc: &Value, path: &str, out: &mut Vec<String>) {
    let Some(s) = schema.as_object() else {
        if schema == &Value::Bool(false) {
            out.push(format!("{path}: not allowed"));
        }
        return;
    };
    if let Some(reference) = s.get("$ref").and_then(Value::as_str) {
        match resolve(root, reference) {
            Some(target) => check(root, target, doc, path, out),
            None => out.push(format!("{path}: schema reference {reference} does not resolve")),
        }
    }
    if let Some(types) = s.get("type") {
        let names: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.iter().any(|t| has_type(doc, t)) {
            out.push(format!("{path}: expected {}, found {}", names.join(" or "), type_name(doc)));
            return;
        }
    }
    if let Some(options) = s.get("enum").and_then(Value::as_array) {
        if !options.contains(doc) {
            out.push(format!("{path}: {doc} is not one of {}", Value::Array(options.clone())));
        }
    }
    if let Some(constant) = s.get("const") {
        if constant != doc {
            out.push(format!("{path}: expected {constant}"));
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = s.get(key).and_then(Value::as_array) {
            let fits = branches.iter().filter(|b| validate_at(root, b, doc, path).is_empty()).count();
            let ok = if key == "anyOf" { fits >= 1 } else { fits == 1 };
            if !ok {
                out.push(format!("{path}: matches {fits} of the {} allowed shapes ({key})", branches.len()));
            }
        }
    }
    if let Some(n) = doc.as_f64() {
        if s.get("minimum").and_then(Value::as_f64).is_some_and(|min| n < min) {
            out.push(format!("{path}: {n} is below the minimum {}", s["minimum"]));
        }
        if s.get("maximum").and_then(Value::as_f64).is_some_and(|max| n > max) {
            out.push(format!("{path}: {n} is above the maximum {}", s["maximum"]));
        }
    }
    if let Some(object) = doc.as_object() {
        let properties = s.get("properties").and_then(Value::as_object);
        for name in
            s.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
        {
            if !object.contains_key(name) {
                out.push(format!("{}: missing", join(path, name)));
            }
        }
        for (key, value) in object {
            let here = join(path, key);
            match (properties.and_then(|p| p.get(key)), s.get("additionalProperties")) {
                (Some(sub), _) => check(root, sub, value, &here, out),
                (None, Some(Value::Bool(false))) => out.push(format!("{here}: unknown field")),
                (None, Some(extra)) => check(root, extra, value, &here, out),
                (None, None) => {}
            }
        }
    }
    if let (Some(items), Some(array)) = (s.get("items"), doc.as_array()) {
        for (i, item) in array.iter().enumerate() {
            check(root, items, item, &format!("{path}[{i}]"), out);
        }
    }
}

fn validate_at(root: &Value, schema: &Value, doc: &Value, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    check(root, schema, doc, path, &mut out);
    out
}

/// `#/$defs/Name` (or `#/definitions/Name`) within the root schema.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

fn has_type(doc: &Value, t: &str) -> bool {
    match t {
        "null" => doc.is_null(),
        "boolean" => doc.is_boolean(),
        "string" => doc.is_string(),
        "array" => doc.is_array(),
        "object" => doc.is_object(),
        "number" => doc.is_number(),
        "integer" => doc.is_i64() || doc.is_u64() || doc.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => true,
    }
}

fn type_name(doc: &Value) -> &'static str {
    match doc {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn join(path: &str, key: &str) -> String {
    if path == "(top level)" {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_schema_rejects_what_the_loader_rejects() {
        // Goal: unknown fields, wrong types, missing required fields and out-of-range integers
        // are schema errors naming their path; a minimal valid file passes.
        let schema = scenario_schema();
        let good = json!({"paper": "p", "name": "n", "protocol": "selcc",
            "cluster": {"memory_nodes": 1, "compute_nodes": 2, "nic_profile": "cx3_fdr56"},
            "run": {"seeds": 2, "full_payload": true}, "$schema": "../schema.json"});
        assert_eq!(validate(&schema, &good), Vec::<String>::new());
        let mut bad = good.clone();
        bad["cluster"]["nodes"] = json!(3);
        bad["cluster"]["compute_nodes"] = json!("two");
        bad["run"]["seeds"] = json!(-1);
        bad.as_object_mut().unwrap().remove("protocol");
        let problems = validate(&schema, &bad).join("\n");
        for wanted in [
            "cluster.nodes: unknown field",
            "cluster.compute_nodes: expected integer",
            "run.seeds",
            "protocol: missing",
        ] {
            assert!(problems.contains(wanted), "{wanted:?} in:\n{problems}");
        }
    }
}
