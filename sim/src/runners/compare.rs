//! `compare_with`: a point's reference runs, for a paper's "N× over X" claims.

use serde_json::{Map, Value};

use crate::scenario::load::parse_typed;
use crate::scenario::{PointConfig, Problem};

/// The point's config with one `compare_with` entry's overrides applied (dotted paths into
/// `protocol`, `cluster`, `workload`, `protocol_options`). A reference never compares further.
pub fn reference(config: &PointConfig, overrides: &Map<String, Value>) -> Result<PointConfig, Problem> {
    let mut doc = serde_json::to_value(config).map_err(|e| Problem::new("", e.to_string()))?;
    for (path, v) in overrides {
        let parts: Vec<&str> = path.split('.').collect();
        if !["protocol", "cluster", "workload", "protocol_options"].contains(&parts[0]) {
            return Err(Problem::new(
                path.clone(),
                "must start with protocol, cluster, workload or protocol_options",
            ));
        }
        let mut cursor = &mut doc;
        for (i, part) in parts.iter().enumerate() {
            if part.is_empty() {
                return Err(Problem::new(path.clone(), "empty path segment"));
            }
            if cursor.is_null() {
                *cursor = Value::Object(Map::new());
            }
            let Some(object) = cursor.as_object_mut() else {
                return Err(Problem::new(
                    path.clone(),
                    format!("{:?} is not an object", parts[..i].join(".")),
                ));
            };
            if i + 1 == parts.len() {
                object.insert(part.to_string(), v.clone());
                break;
            }
            cursor = object.entry(part.to_string()).or_insert(Value::Null);
        }
    }
    if let Some(object) = doc.as_object_mut() {
        object.remove("compare_with");
    }
    parse_typed(&doc, "")
}
