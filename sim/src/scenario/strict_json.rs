//! JSON parsing that refuses duplicate keys. `serde_json::Value` keeps the last of two equal
//! keys silently, so `{"read_ratio": 0.5, "read_ratio": 0.9}` would run a workload its author
//! did not read; scenario, profile and replay files go through [`parse`] instead, read with a
//! size limit by [`read_input`].

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The largest input file read whole (scenarios, profiles, replays, summaries): 64 MiB. A
/// path to `/dev/zero` or a huge file is an error, not an out-of-memory.
pub const INPUT_BYTES_MAX: u64 = 64 << 20;

/// Read a whole text input file, refusing one over [`INPUT_BYTES_MAX`] bytes and refusing a FIFO
/// or socket outright: opening a FIFO blocks until some writer appears, which would hang a dry
/// run instead of rejecting the input.
pub fn read_input(path: impl AsRef<std::path::Path>) -> std::io::Result<String> {
    use std::io::Read;
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let kind = std::fs::metadata(path.as_ref())?.file_type();
        if kind.is_fifo() || kind.is_socket() {
            return Err(std::io::Error::other("a FIFO or socket, not a file; give a regular file"));
        }
    }
    let mut text = String::new();
    std::fs::File::open(path.as_ref())?.take(INPUT_BYTES_MAX + 1).read_to_string(&mut text)?;
    if text.len() as u64 > INPUT_BYTES_MAX {
        return Err(std::io::Error::other(format!("larger than {} MiB, not read", INPUT_BYTES_MAX >> 20)));
    }
    Ok(text)
}

/// Parse `text` as JSON; a repeated key in any object is an error (with its line and column).
pub fn parse(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str::<Strict>(text).map(|s| s.0)
}

struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v).map(Value::Number).ok_or_else(|| E::custom(format!("{v} is not a JSON number")))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            let Strict(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_to_serde_json_without_duplicates_and_an_error_naming_the_key_with_them() {
        let text = r#"{"a": [1, -2, 2.5, "x", null, true], "b": {"c": 18446744073709551615}}"#;
        assert_eq!(parse(text).unwrap(), serde_json::from_str::<Value>(text).unwrap());
        let err = parse("{\"w\": {\"read_ratio\": 0.5,\n \"read_ratio\": 0.9}}").unwrap_err();
        assert!(err.to_string().contains("duplicate key \"read_ratio\""), "{err}");
        assert_eq!(err.line(), 2);
    }

    #[test]
    fn an_endless_input_is_refused_after_the_limit() {
        let err = read_input("/dev/zero").unwrap_err();
        assert!(err.to_string().contains("larger than 64 MiB"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        // Goal: a named pipe given as a scenario or profile file (nobody writes to it) is an
        // error at once; before, `open` blocked and the dry run hung.
        let dir = std::env::temp_dir().join(format!("dmsim-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("profile.json");
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().map(|s| s.success());
        if made.ok() != Some(true) {
            eprintln!("SKIP: mkfifo unavailable");
            return;
        }
        let err = read_input(&fifo).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
