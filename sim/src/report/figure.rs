//! What a plot says, independent of how it is drawn.
//!
//! A [`Figure`] is a grid of [`Panel`]s, like a paper figure with sub-figures (a), (b), (c). The
//! types are plain data with serde derives so a scenario file can carry plot settings and a
//! summary can embed them; rendering lives in `svg.rs`.

use serde::{Deserialize, Serialize};

/// A whole figure: a title and panels laid out row by row, `columns` per row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub title: String,
    pub panels: Vec<Panel>,
    /// Panels per row. 0 means "choose": up to three per row.
    #[serde(default)]
    pub columns: usize,
    /// One y range for every panel (the union of their data), where the paper's panels share
    /// a scale so that heights compare across panels.
    #[serde(default)]
    pub shared_y: bool,
}

/// How an axis maps values to positions. On log axes, values `<= 0` cannot be placed and are
/// omitted; the panel title says how many were.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    #[default]
    Linear,
    /// Ticks at powers of two (1, 2, 4, …, 1K): thread counts, object sizes.
    Log2,
    /// Ticks at powers of ten: key counts, latencies spanning decades.
    Log10,
}

/// How the series of a panel are drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PanelKind {
    /// Lines with a marker at each point. Points are joined *in the order given*, not sorted by
    /// x, so that throughput–latency curves (where x can fall again past saturation) draw right.
    /// A non-finite point breaks the line.
    #[default]
    Lines,
    /// Grouped bars: one group per x category, one bar per series inside each group.
    ///
    /// With `x_categories = Some(names)`, a point's x is the index of its category in `names`
    /// (0-based; points whose x is not an index of `names` are omitted). With `None`, the distinct
    /// finite x values of all series, in ascending order, are the categories and are labelled with
    /// their numbers. The x scale is ignored for bars.
    Bars,
}

/// One sub-plot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    #[serde(default)]
    pub x_scale: Scale,
    #[serde(default)]
    pub y_scale: Scale,
    #[serde(default)]
    pub kind: PanelKind,
    #[serde(default)]
    pub series: Vec<Series>,
    /// Category names for [`PanelKind::Bars`]; ignored for lines.
    #[serde(default)]
    pub x_categories: Option<Vec<String>>,
    /// Paper claims located on this panel (see [`Mark`]).
    #[serde(default)]
    pub marks: Vec<Mark>,
}

/// A paper claim drawn where it sits: at a series' point (x as in the series' points). With a
/// `paper` value (a number the paper prints for the plotted metric) the paper's value is drawn
/// as a black marker beside the simulated one; without, the simulated point is ringed in the
/// claim's verdict colour. Either way it is labelled with the claim's row number in
/// `paper-vs-sim.md`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mark {
    pub series: String,
    pub x: f64,
    #[serde(default)]
    pub paper: Option<f64>,
    pub label: String,
    /// Within tolerance (or, for a trend row, the trend holding); `None` when not evaluated.
    #[serde(default)]
    pub verdict: Option<bool>,
}

/// A named sequence of (x, y) points. Within one figure a series name always gets the same colour
/// and marker, so "SELCC" looks the same in every panel. Names of the form "family / variant"
/// (e.g. "30% / 8GB") share a colour per family and a shade per variant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Per point, the (low, high) spread over seeds, drawn as an error bar; empty when each
    /// point is one run.
    #[serde(default)]
    pub errors: Vec<Option<(f64, f64)>>,
}

impl Figure {
    pub fn new(title: impl Into<String>) -> Figure {
        Figure { title: title.into(), panels: Vec::new(), columns: 0, shared_y: false }
    }

    /// The panel grid as (rows, columns), resolving `columns == 0`; (0, 0) without panels.
    pub fn grid(&self) -> (usize, usize) {
        let count = self.panels.len();
        if count == 0 {
            return (0, 0);
        }
        let columns = if self.columns == 0 { count.min(3) } else { self.columns.min(count) };
        (count.div_ceil(columns), columns)
    }
}

impl Panel {
    /// A line panel with linear axes and no series yet.
    pub fn lines(title: impl Into<String>, x_label: impl Into<String>, y_label: impl Into<String>) -> Panel {
        Panel {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            kind: PanelKind::Lines,
            series: Vec::new(),
            x_categories: None,
            marks: Vec::new(),
        }
    }

    /// A grouped-bar panel over the given categories; points use category indices as x.
    pub fn bars<S: Into<String>>(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
        categories: impl IntoIterator<Item = S>,
    ) -> Panel {
        Panel {
            kind: PanelKind::Bars,
            x_categories: Some(categories.into_iter().map(Into::into).collect()),
            ..Panel::lines(title, x_label, y_label)
        }
    }

    pub fn with_scales(mut self, x_scale: Scale, y_scale: Scale) -> Panel {
        self.x_scale = x_scale;
        self.y_scale = y_scale;
        self
    }

    pub fn with_series(mut self, series: Series) -> Panel {
        self.series.push(series);
        self
    }
}

impl Mark {
    pub(crate) fn name_of_series(&self) -> &str {
        &self.series
    }
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), points, errors: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_resolves_auto_columns() {
        let mut figure = Figure::new("f");
        assert_eq!(figure.grid(), (0, 0));
        for count in 1..=7 {
            figure.panels.push(Panel::lines(format!("p{count}"), "x", "y"));
        }
        assert_eq!(figure.grid(), (3, 3));
        figure.columns = 2;
        assert_eq!(figure.grid(), (4, 2));
        figure.columns = 10;
        assert_eq!(figure.grid(), (1, 7));
    }

    #[test]
    fn serde_names_are_lowercase() {
        let panel = Panel::bars("p", "x", "y", ["a"]).with_scales(Scale::Log2, Scale::Log10);
        let json = serde_json::to_value(&panel).unwrap();
        assert_eq!(json["x_scale"], "log2");
        assert_eq!(json["y_scale"], "log10");
        assert_eq!(json["kind"], "bars");
        let back: Panel = serde_json::from_value(json).unwrap();
        assert_eq!(back, panel);
    }
}
