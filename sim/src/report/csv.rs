//! Long-format tables written as CSV (RFC 4180 quoting, `\n` line ends).
//!
//! Long format means one row per measurement (`protocol, threads, seed, throughput_mops`), not
//! one column per series: it is what pandas, R and gnuplot all read without reshaping, and adding
//! a sweep axis adds a column instead of multiplying columns.

use std::fmt::Write as _;
use std::path::Path;

use super::atomic::write_atomic;
use super::error::ReportError;
use super::figure::Figure;

/// One cell.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Written with Rust's shortest round-trip formatting (`3`, `0.1`, `1250000`); NaN and
    /// infinities as `NaN`, `inf`, `-inf`, which pandas reads back as floats.
    Num(f64),
    /// Exact integers (counts, nanoseconds) that must not pass through `f64`.
    Int(i64),
    Str(String),
}

impl Value {
    fn write_to(&self, out: &mut String) {
        match self {
            Value::Num(number) => write_number(out, *number),
            Value::Int(number) => {
                let _ = write!(out, "{number}");
            }
            Value::Str(text) => write_field(out, text),
        }
    }
}

fn write_number(out: &mut String, number: f64) {
    if number.is_nan() {
        out.push_str("NaN");
    } else if number.is_infinite() {
        out.push_str(if number > 0.0 { "inf" } else { "-inf" });
    } else {
        let _ = write!(out, "{number}");
    }
}

/// Quotes a field when it holds a separator, a quote, a line break, or leading/trailing spaces
/// (which many readers would trim); embedded quotes are doubled.
fn write_field(out: &mut String, text: &str) {
    let needs_quotes = text.contains([',', '"', '\n', '\r'])
        || text.starts_with(' ')
        || text.ends_with(' ')
        || text.starts_with('\t')
        || text.ends_with('\t');
    if needs_quotes {
        out.push('"');
        for character in text.chars() {
            if character == '"' {
                out.push('"');
            }
            out.push(character);
        }
        out.push('"');
    } else {
        out.push_str(text);
    }
}

impl From<f64> for Value {
    fn from(number: f64) -> Value {
        Value::Num(number)
    }
}

impl From<i64> for Value {
    fn from(number: i64) -> Value {
        Value::Int(number)
    }
}

impl From<u32> for Value {
    fn from(number: u32) -> Value {
        Value::Int(i64::from(number))
    }
}

impl From<u64> for Value {
    /// Values above `i64::MAX` fall back to `Num` (and lose precision) rather than wrap.
    fn from(number: u64) -> Value {
        match i64::try_from(number) {
            Ok(number) => Value::Int(number),
            Err(_) => Value::Num(number as f64),
        }
    }
}

impl From<usize> for Value {
    fn from(number: usize) -> Value {
        Value::from(number as u64)
    }
}

impl From<&str> for Value {
    fn from(text: &str) -> Value {
        Value::Str(text.to_string())
    }
}

impl From<String> for Value {
    fn from(text: String) -> Value {
        Value::Str(text)
    }
}

/// A table in long format. Every row must have exactly `columns.len()` cells; [`write_csv`]
/// refuses a ragged table instead of writing a file that parses wrongly.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

impl Table {
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = S>) -> Table {
        Table { columns: columns.into_iter().map(Into::into).collect(), rows: Vec::new() }
    }

    /// Appends a row; its width is checked when the table is written.
    pub fn push_row(&mut self, row: Vec<Value>) {
        self.rows.push(row);
    }

    /// The plotted data of a figure in long format: `panel, series, x, y`, one row per point, in
    /// figure order, non-finite values included (they are data too, only the plot skips them).
    pub fn from_figure(figure: &Figure) -> Table {
        let mut table = Table::new(["panel", "series", "x", "y"]);
        for panel in &figure.panels {
            for series in &panel.series {
                for &(x, y) in &series.points {
                    table.push_row(vec![
                        Value::from(panel.title.as_str()),
                        Value::from(series.name.as_str()),
                        Value::Num(x),
                        Value::Num(y),
                    ]);
                }
            }
        }
        table
    }

    /// The first ragged row, as (row index, width).
    fn first_ragged_row(&self) -> Option<(usize, usize)> {
        let width = self.columns.len();
        self.rows
            .iter()
            .enumerate()
            .find(|(_, row)| row.len() != width)
            .map(|(index, row)| (index, row.len()))
    }

    /// The CSV text: a header line and one line per row, each ending in `\n`.
    ///
    /// Panics on a ragged table; [`write_csv`] checks first and returns an error instead.
    pub fn to_csv_string(&self) -> String {
        assert!(self.first_ragged_row().is_none(), "ragged table");
        let mut out = String::new();
        for (index, column) in self.columns.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            write_field(&mut out, column);
        }
        out.push('\n');
        for row in &self.rows {
            for (index, cell) in row.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                cell.write_to(&mut out);
            }
            out.push('\n');
        }
        out
    }
}

/// Writes `table` as CSV to `path`, atomically.
pub fn write_csv(path: impl AsRef<Path>, table: &Table) -> Result<(), ReportError> {
    let path = path.as_ref();
    if table.columns.is_empty() {
        return Err(ReportError::invalid(path, "the table has no columns"));
    }
    if let Some((index, width)) = table.first_ragged_row() {
        let message =
            format!("row {index} has {width} cells but the table has {} columns", table.columns.len());
        return Err(ReportError::invalid(path, message));
    }
    write_atomic(path, table.to_csv_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::error::ReportErrorCause;
    use crate::report::test_support::scratch_dir;

    fn field(text: &str) -> String {
        let mut out = String::new();
        write_field(&mut out, text);
        out
    }

    /// Goal: RFC 4180 quoting — plain fields stay bare, separators, quotes, line breaks and
    /// edge spaces force quotes, and embedded quotes are doubled.
    #[test]
    fn quoting() {
        assert_eq!(field("selcc"), "selcc");
        assert_eq!(field(""), "");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
        assert_eq!(field("cr\r"), "\"cr\r\"");
        assert_eq!(field(" padded"), "\" padded\"");
        assert_eq!(field("inner space"), "inner space");
    }

    /// Goal: numbers round-trip and special floats are spelled the way pandas reads them.
    #[test]
    fn numbers() {
        let mut table = Table::new(["a", "b", "c", "d", "e", "f"]);
        table.push_row(vec![
            Value::Num(3.0),
            Value::Num(0.1),
            Value::Num(f64::NAN),
            Value::Num(f64::NEG_INFINITY),
            Value::from(u64::MAX),
            Value::from(-7i64),
        ]);
        let text = table.to_csv_string();
        assert_eq!(text, "a,b,c,d,e,f\n3,0.1,NaN,-inf,18446744073709552000,-7\n");
    }

    /// Goal: a whole table with a quoted header and string cells is written to disk as expected.
    #[test]
    fn writes_file() {
        let dir = scratch_dir("csv-write");
        let path = dir.join("data.csv");
        let mut table = Table::new(["protocol", "label, quoted", "throughput_mops"]);
        table.push_row(vec!["selcc".into(), "x\"y".into(), 12.5.into()]);
        table.push_row(vec!["gam".into(), "".into(), 3usize.into()]);
        write_csv(&path, &table).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "protocol,\"label, quoted\",throughput_mops\nselcc,\"x\"\"y\",12.5\ngam,,3\n");
    }

    /// Goal: a ragged row is refused with an error naming the path and the row, and no file
    /// appears.
    #[test]
    fn ragged_row_is_an_error() {
        let dir = scratch_dir("csv-ragged");
        let path = dir.join("data.csv");
        let mut table = Table::new(["a", "b"]);
        table.push_row(vec![1.0.into(), 2.0.into()]);
        table.push_row(vec![1.0.into()]);
        let error = write_csv(&path, &table).unwrap_err();
        assert!(matches!(error.cause, ReportErrorCause::Invalid(_)));
        let message = error.to_string();
        assert!(message.contains("data.csv") && message.contains("row 1"), "{message}");
        assert!(!path.exists());
    }

    /// Goal: `from_figure` flattens panels and series in order.
    #[test]
    fn from_figure_is_long_format() {
        use crate::report::figure::{Panel, Series};
        let mut panel = Panel::lines("p", "x", "y");
        panel.series.push(Series::new("s", vec![(1.0, 2.0), (2.0, f64::NAN)]));
        let figure = Figure { title: "f".into(), panels: vec![panel], columns: 1, shared_y: false };
        let text = Table::from_figure(&figure).to_csv_string();
        assert_eq!(text, "panel,series,x,y\np,s,1,2\np,s,2,NaN\n");
    }
}
