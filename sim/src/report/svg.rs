//! Renders a [`Figure`] to SVG with plotters, in the look of a paper figure.
//!
//! The layout, per panel:
//!
//! ```text
//!   +------------------------------------------+
//!   |              panel title                 |
//!   |      +----------------------+            |
//!   |  y   | ▲ SELCC    (legend,  |            |
//!   | tick | ● GAM      corner    |            |
//!   |      |            with the  |            |
//!   |      |  data      least data)            |
//!   |      +----------------------+            |
//!   |        x ticks / x label                 |
//!   +------------------------------------------+
//! ```
//!
//! Choices, with reasons:
//! - Axes are our own [`Axis`] (a plotters `Ranged` over *transformed* values, `log2(x)` on a
//!   Log2 axis) with precomputed ticks, because plotters' log axes put ticks at arbitrary values
//!   and a paper's thread axis must read 1, 2, 4, 8, 16.
//! - A series name gets one colour and marker for the whole figure, so a protocol looks the same
//!   in every panel. Colours are the Tableau 10 palette (distinct on screen and in print);
//!   markers alternate filled and hollow shapes so series stay apart in greyscale too.
//! - The legend is drawn by us, inside the plot, in the candidate position covering the fewest
//!   data pixels; when every position covers data, the y range grows to leave room at the top
//!   (the usual paper fix) rather than hide points.
//! - Markers and the legend are drawn in backend pixels on the root area, which lets one marker
//!   function serve the plot and the legend and keeps edge markers whole instead of clipped.
//! - Text is emitted as SVG `<text>` (no font files needed); widths are estimated.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

use super::atomic::write_atomic;
use super::axis::{axis_for, min_max, transform, with_headroom, Axis};
use super::claims::format_number;
use super::error::ReportError;
use super::figure::{Figure, Mark, Panel, PanelKind, Scale};

#[path = "svg_legend.rs"]
mod legend;
#[path = "svg_style.rs"]
mod style;
use legend::*;
use style::*;

/// Size of one panel in the grid, in SVG pixels (about a column of a two-column paper at 2×).
pub const PANEL_WIDTH_PX: u32 = 520;
pub const PANEL_HEIGHT_PX: u32 = 380;
/// Extra height for the figure title.
const FIGURE_TITLE_HEIGHT_PX: u32 = 34;

const FONT: &str = "sans-serif";
const FONT_SIZE_FIGURE_TITLE: u32 = 20;
const FONT_SIZE_PANEL_TITLE: u32 = 16;
const FONT_SIZE_AXIS_LABEL: u32 = 14;
const FONT_SIZE_TICK: u32 = 12;
const FONT_SIZE_LEGEND: u32 = 12;
/// Width of one character as a fraction of the font size; generous for sans-serif so estimated
/// boxes are never too small.
const CHAR_WIDTH_EM: f64 = 0.6;

const MARGIN_PX: i32 = 12;
const X_LABEL_AREA_PX: i32 = 46;

const LEGEND_ROW_PX: i32 = 18;
const LEGEND_PADDING_PX: i32 = 6;
const LEGEND_SAMPLE_PX: i32 = 26;
const LEGEND_INSET_PX: i32 = 6;

const MARKER_RADIUS_PX: i32 = 4;
const LINE_WIDTH_PX: u32 = 2;
/// Fraction of a category's width used by its bar group.
const BAR_GROUP_WIDTH: f64 = 0.8;

/// Writes `figure` as an SVG file at `path`, atomically, and returns the SVG text.
pub fn write_svg(path: impl AsRef<Path>, figure: &Figure) -> Result<String, ReportError> {
    let path = path.as_ref();
    let svg = render_svg(figure).map_err(|message| ReportError::plot(path, message))?;
    write_atomic(path, svg.as_bytes())?;
    Ok(svg)
}

/// Renders `figure` to SVG text. Errors are plotters drawing errors, which the in-memory SVG
/// backend should never produce.
pub fn render_svg(figure: &Figure) -> Result<String, String> {
    let (rows, columns) = figure.grid();
    let title_height = if figure.title.trim().is_empty() { 0 } else { FIGURE_TITLE_HEIGHT_PX };
    let width = PANEL_WIDTH_PX * columns.max(1) as u32;
    let height = PANEL_HEIGHT_PX * rows.max(1) as u32 + title_height;
    let styles = Styles::of(figure);
    let mut prepared: Vec<PreparedPanel> = figure
        .panels
        .iter()
        .map(|panel| match panel.kind {
            PanelKind::Lines => prepare_lines(panel, &styles),
            PanelKind::Bars => prepare_bars(panel, &styles),
        })
        .collect();
    if figure.shared_y {
        share_y(figure, &mut prepared);
    }
    // Panels that show the same series get one legend, in the first panel.
    let series_names = |panel: &Panel| panel.series.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
    let one_legend = figure.panels.len() > 1
        && figure.panels.windows(2).all(|w| series_names(&w[0]) == series_names(&w[1]));

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|error| error.to_string())?;
        let body = if title_height > 0 {
            root.titled(&figure.title, (FONT, FONT_SIZE_FIGURE_TITLE).into_font().style(FontStyle::Bold))
                .map_err(|error| error.to_string())?
        } else {
            root.clone()
        };
        if figure.panels.is_empty() {
            draw_centered_note(&body, "(no panels)")?;
        } else {
            let areas = body.split_evenly((rows, columns));
            for (index, ((panel, area), prepared)) in
                figure.panels.iter().zip(areas.iter()).zip(prepared).enumerate()
            {
                draw_panel(&root, area, panel, prepared, &styles, !one_legend || index == 0)?;
            }
        }
        root.present().map_err(|error| error.to_string())?;
    }
    Ok(svg)
}

fn draw_centered_note<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, text: &str) -> Result<(), String> {
    let (width, height) = area.dim_in_pixel();
    let style =
        (FONT, FONT_SIZE_AXIS_LABEL).into_font().color(&NOTE_COLOR).pos(Pos::new(HPos::Center, VPos::Center));
    area.draw_text(text, &style, (width as i32 / 2, height as i32 / 2)).map_err(|error| error.to_string())
}

// ---------------------------------------------------------------------------------------------
// Panel data in axis coordinates

struct PreparedLine {
    style_index: usize,
    name: String,
    /// Runs of consecutive drawable points; a point the axes cannot place ends a run.
    segments: Vec<Vec<(f64, f64)>>,
    /// Error bars: (x, low, high) in axis coordinates.
    whiskers: Vec<(f64, f64, f64)>,
}

struct PreparedBar {
    style_index: usize,
    /// Left and right edge in category coordinates, and the value in y coordinates.
    left: f64,
    right: f64,
    value: f64,
    category: usize,
    /// Error bar (low, high) in axis coordinates.
    whisker: Option<(f64, f64)>,
}

/// A [`Mark`] in axis coordinates: the simulated point and, if given, the paper's value.
struct PreparedMark {
    sim: (f64, f64),
    paper: Option<f64>,
    label: String,
    verdict: Option<bool>,
}

struct PreparedPanel {
    lines: Vec<PreparedLine>,
    bars: Vec<PreparedBar>,
    /// Legend entries: (style index, name, has data).
    legend: Vec<(usize, String, bool)>,
    marks: Vec<PreparedMark>,
    x_axis: Axis,
    y_axis: Axis,
    /// The data's y range (with error bars and paper marks), for a y axis shared across panels.
    y_range: Option<(f64, f64)>,
    /// Finite points dropped because a log axis cannot show values <= 0.
    omitted_non_positive: usize,
    has_data: bool,
}

fn is_omitted_by_log(scale: Scale, value: f64) -> bool {
    scale != Scale::Linear && value.is_finite() && value <= 0.0
}

fn prepare_lines(panel: &Panel, styles: &Styles) -> PreparedPanel {
    let mut lines = Vec::new();
    let mut omitted_non_positive = 0;
    for series in &panel.series {
        let mut segments = Vec::new();
        let mut current = Vec::new();
        for &(x, y) in &series.points {
            match (transform(panel.x_scale, x), transform(panel.y_scale, y)) {
                (Some(x), Some(y)) => current.push((x, y)),
                _ => {
                    let omitted = is_omitted_by_log(panel.x_scale, x) || is_omitted_by_log(panel.y_scale, y);
                    if omitted && x.is_finite() && y.is_finite() {
                        omitted_non_positive += 1;
                    }
                    if !current.is_empty() {
                        segments.push(std::mem::take(&mut current));
                    }
                }
            }
        }
        if !current.is_empty() {
            segments.push(current);
        }
        let whiskers = series
            .points
            .iter()
            .zip(&series.errors)
            .filter_map(|(&(x, _), e)| {
                let (low, high) = (*e)?;
                Some((
                    transform(panel.x_scale, x)?,
                    transform(panel.y_scale, low)?,
                    transform(panel.y_scale, high)?,
                ))
            })
            .collect();
        lines.push(PreparedLine {
            style_index: styles.index(&series.name),
            name: series.name.clone(),
            segments,
            whiskers,
        });
    }
    let marks: Vec<PreparedMark> = panel
        .marks
        .iter()
        .filter_map(|m| {
            let series = panel.series.iter().find(|s| s.name == m.name_of_series())?;
            let &(x, y) = series.points.iter().find(|p| p.0 == m.x)?;
            let sim = (transform(panel.x_scale, x)?, transform(panel.y_scale, y)?);
            Some(prepared_mark(m, sim, panel.y_scale))
        })
        .collect();
    let all_points = || lines.iter().flat_map(|line| line.segments.iter().flatten());
    let x_range = min_max(all_points().map(|point| point.0));
    let y_range = min_max(
        all_points()
            .map(|point| point.1)
            .chain(lines.iter().flat_map(|l| l.whiskers.iter().flat_map(|w| [w.1, w.2])))
            .chain(marks.iter().filter_map(|m| m.paper)),
    );
    let legend =
        lines.iter().map(|line| (line.style_index, line.name.clone(), !line.segments.is_empty())).collect();
    PreparedPanel {
        has_data: x_range.is_some(),
        x_axis: axis_for(panel.x_scale, x_range, false),
        y_axis: axis_for(panel.y_scale, y_range, true),
        y_range,
        lines,
        bars: Vec::new(),
        marks,
        legend,
        omitted_non_positive,
    }
}

fn prepared_mark(m: &Mark, sim: (f64, f64), y_scale: Scale) -> PreparedMark {
    PreparedMark {
        sim,
        paper: m.paper.and_then(|p| transform(y_scale, p)),
        label: m.label.clone(),
        verdict: m.verdict,
    }
}

/// One y axis for all panels: the union of their ranges (panels of one scale and kind only).
fn share_y(figure: &Figure, prepared: &mut [PreparedPanel]) {
    let first = &figure.panels[0];
    if figure.panels.iter().any(|p| p.y_scale != first.y_scale || p.kind != first.kind) {
        return;
    }
    let union = min_max(prepared.iter().filter_map(|p| p.y_range).flat_map(|(low, high)| [low, high]));
    for p in prepared.iter_mut() {
        p.y_axis = axis_for(first.y_scale, union, true);
    }
}

fn prepare_bars(panel: &Panel, styles: &Styles) -> PreparedPanel {
    // Categories and the category index of each x.
    // Numeric categories: the distinct finite x values, ascending.
    let numeric_xs: Vec<f64> = match &panel.x_categories {
        Some(_) => Vec::new(),
        None => {
            let mut xs: Vec<f64> = panel
                .series
                .iter()
                .flat_map(|series| &series.points)
                .map(|point| point.0)
                .filter(|x| x.is_finite())
                .collect();
            xs.sort_by(f64::total_cmp);
            xs.dedup();
            xs
        }
    };
    let names: Vec<String> = match &panel.x_categories {
        Some(names) => names.clone(),
        None => numeric_xs.iter().map(|&x| format_number(x)).collect(),
    };
    let index_of = |x: f64| match &panel.x_categories {
        Some(names) => {
            let index = x.round();
            let exact = x.is_finite() && (x - index).abs() < 1e-9;
            (exact && index >= 0.0 && index < names.len() as f64).then_some(index as usize)
        }
        None => numeric_xs.binary_search_by(|probe| probe.total_cmp(&x)).ok(),
    };

    // value[series][category]; a later point for the same category replaces an earlier one.
    let mut omitted_non_positive = 0;
    let mut values: Vec<Vec<Option<f64>>> = Vec::new();
    let mut spreads: Vec<Vec<Option<(f64, f64)>>> = Vec::new();
    for series in &panel.series {
        let mut row = vec![None; names.len()];
        let mut spread = vec![None; names.len()];
        for (i, &(x, y)) in series.points.iter().enumerate() {
            let Some(category) = index_of(x) else { continue };
            match transform(panel.y_scale, y) {
                Some(y) => row[category] = Some(y),
                None if is_omitted_by_log(panel.y_scale, y) => omitted_non_positive += 1,
                None => {}
            }
            spread[category] = series.errors.get(i).copied().flatten().and_then(|(low, high)| {
                Some((transform(panel.y_scale, low)?, transform(panel.y_scale, high)?))
            });
        }
        values.push(row);
        spreads.push(spread);
    }

    // Only series with at least one bar get a slot, so groups have no holes for empty series.
    let slotted: Vec<usize> = (0..values.len()).filter(|&s| values[s].iter().any(Option::is_some)).collect();
    let slot_width = BAR_GROUP_WIDTH / slotted.len().max(1) as f64;
    let mut bars = Vec::new();
    for (slot, &series_index) in slotted.iter().enumerate() {
        let style_index = styles.index(&panel.series[series_index].name);
        for (category, value) in values[series_index].iter().enumerate() {
            if let Some(value) = *value {
                let left = category as f64 - BAR_GROUP_WIDTH / 2.0 + slot as f64 * slot_width;
                bars.push(PreparedBar {
                    style_index,
                    left: left + slot_width * 0.06,
                    right: left + slot_width * 0.94,
                    value,
                    category,
                    whisker: spreads[series_index][category],
                });
            }
        }
    }

    let x_axis = Axis {
        low: -0.5,
        high: names.len().max(1) as f64 - 0.5,
        ticks: names.iter().enumerate().map(|(index, name)| (index as f64, name.clone())).collect(),
    };
    let marks: Vec<PreparedMark> = panel
        .marks
        .iter()
        .filter_map(|m| {
            let category = index_of(m.x)?;
            let style = styles.index(m.name_of_series());
            let bar = bars.iter().find(|b| b.category == category && b.style_index == style)?;
            Some(prepared_mark(m, ((bar.left + bar.right) / 2.0, bar.value), panel.y_scale))
        })
        .collect();
    let y_range = min_max(
        bars.iter()
            .map(|bar| bar.value)
            .chain(bars.iter().filter_map(|b| b.whisker).flat_map(|w| [w.0, w.1]))
            .chain(marks.iter().filter_map(|m| m.paper)),
    );
    // Linear bars always start at zero; `min_max` with zero folded in does that.
    let y_range = match panel.y_scale {
        Scale::Linear => y_range.map(|(min, max)| (min.min(0.0), max.max(0.0))),
        _ => y_range,
    };
    let legend = panel
        .series
        .iter()
        .enumerate()
        .map(|(index, series)| (styles.index(&series.name), series.name.clone(), slotted.contains(&index)))
        .collect();
    PreparedPanel {
        has_data: !bars.is_empty(),
        x_axis,
        y_axis: axis_for(panel.y_scale, y_range, true),
        y_range,
        lines: Vec::new(),
        bars,
        marks,
        legend,
        omitted_non_positive,
    }
}

// ---------------------------------------------------------------------------------------------
// Drawing

fn plot_error<E: std::fmt::Display>(error: E) -> String {
    error.to_string()
}

fn draw_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    mut prepared: PreparedPanel,
    styles: &Styles,
    show_legend: bool,
) -> Result<(), String> {
    if !show_legend {
        prepared.legend.clear();
    }

    let mut caption = panel.title.trim().to_string();
    if prepared.omitted_non_positive > 0 {
        let note = format!("({} points ≤ 0 not shown on log axis)", prepared.omitted_non_positive);
        caption = if caption.is_empty() { note } else { format!("{caption} {note}") };
    }
    let area = if caption.is_empty() {
        area.clone()
    } else {
        area.titled(&caption, (FONT, FONT_SIZE_PANEL_TITLE).into_font().style(FontStyle::Bold))
            .map_err(plot_error)?
    };

    // The plot size follows from the panel size, the margins and the label areas; the legend
    // placement needs it before the chart exists because it may change the y range.
    let y_label_area = |axis: &Axis| {
        let ticks = axis.widest_label_chars() as f64 * f64::from(FONT_SIZE_TICK) * CHAR_WIDTH_EM;
        ticks.ceil() as i32 + 12 + FONT_SIZE_AXIS_LABEL as i32 + 8
    };
    let (area_width, area_height) = area.dim_in_pixel();
    let plot = (
        f64::from(area_width as i32 - 2 * MARGIN_PX - y_label_area(&prepared.y_axis)).max(10.0),
        f64::from(area_height as i32 - 2 * MARGIN_PX - X_LABEL_AREA_PX).max(10.0),
    );
    let (corner, y_axis) = if prepared.legend.is_empty() {
        (Corner::UpperRight, prepared.y_axis.clone())
    } else {
        place_legend(&prepared, panel.y_scale, plot)
    };
    let x_axis = prepared.x_axis.clone();

    let mut chart = ChartBuilder::on(&area)
        .margin(MARGIN_PX)
        .margin_right(MARGIN_PX + 8)
        .x_label_area_size(X_LABEL_AREA_PX)
        .y_label_area_size(y_label_area(&y_axis))
        .build_cartesian_2d(x_axis.clone(), y_axis.clone())
        .map_err(plot_error)?;

    let x_labels = |value: &f64| x_axis.label(*value);
    let y_labels = |value: &f64| y_axis.label(*value);
    let mut mesh = chart.configure_mesh();
    mesh.x_labels(x_axis.ticks.len().max(1))
        .y_labels(y_axis.ticks.len().max(1))
        .x_label_formatter(&x_labels)
        .y_label_formatter(&y_labels)
        .x_desc(panel.x_label.as_str())
        .y_desc(panel.y_label.as_str())
        .label_style((FONT, FONT_SIZE_TICK))
        .axis_desc_style((FONT, FONT_SIZE_AXIS_LABEL))
        .bold_line_style(GRID_COLOR)
        .axis_style(BLACK);
    if panel.kind == PanelKind::Bars {
        mesh.disable_x_mesh();
    }
    mesh.draw().map_err(plot_error)?;

    for line in &prepared.lines {
        let style = styles.color(line.style_index).stroke_width(LINE_WIDTH_PX);
        for segment in &line.segments {
            chart.draw_series(LineSeries::new(segment.iter().copied(), style)).map_err(plot_error)?;
        }
    }
    let bar_base = match panel.y_scale {
        Scale::Linear => 0f64.clamp(y_axis.low, y_axis.high),
        _ => y_axis.low,
    };
    for bar in &prepared.bars {
        let corners = [(bar.left, bar.value), (bar.right, bar_base)];
        chart
            .draw_series(std::iter::once(Rectangle::new(corners, styles.color(bar.style_index).filled())))
            .map_err(plot_error)?;
        chart
            .draw_series(std::iter::once(Rectangle::new(corners, BLACK.stroke_width(1))))
            .map_err(plot_error)?;
    }
    // Error bars, then markers after all lines so no line is drawn across another's marker.
    let whiskers =
        prepared.lines.iter().flat_map(|l| l.whiskers.iter().map(move |w| (l.style_index, *w))).chain(
            prepared
                .bars
                .iter()
                .filter_map(|b| b.whisker.map(|(lo, hi)| (0, ((b.left + b.right) / 2.0, lo, hi)))),
        );
    for (style_index, (x, low, high)) in whiskers {
        let color = if prepared.bars.is_empty() { styles.color(style_index) } else { BLACK };
        let (top, bottom) = (chart.backend_coord(&(x, high)), chart.backend_coord(&(x, low)));
        root.draw(&PathElement::new([top, bottom], color.stroke_width(1))).map_err(plot_error)?;
        for end in [top, bottom] {
            root.draw(&PathElement::new([(end.0 - 3, end.1), (end.0 + 3, end.1)], color.stroke_width(1)))
                .map_err(plot_error)?;
        }
    }
    for line in &prepared.lines {
        for &point in line.segments.iter().flatten() {
            draw_marker(root, chart.backend_coord(&point), styles.looks[line.style_index])?;
        }
    }
    for mark in &merged_marks(prepared.marks) {
        draw_mark(
            root,
            &chart.backend_coord(&mark.sim),
            mark.paper.map(|p| chart.backend_coord(&(mark.sim.0, p))),
            mark,
        )?;
    }

    let (x_pixels, y_pixels) = chart.plotting_area().get_pixel_range();
    root.draw(&Rectangle::new([(x_pixels.start, y_pixels.start), (x_pixels.end, y_pixels.end)], BLACK))
        .map_err(plot_error)?;
    if !prepared.has_data {
        let center = ((x_pixels.start + x_pixels.end) / 2, (y_pixels.start + y_pixels.end) / 2);
        let style = (FONT, FONT_SIZE_AXIS_LABEL)
            .into_font()
            .color(&NOTE_COLOR)
            .pos(Pos::new(HPos::Center, VPos::Center));
        root.draw_text("no data", &style, center).map_err(plot_error)?;
    }
    if !prepared.legend.is_empty() {
        let plot_actual =
            (f64::from(x_pixels.end - x_pixels.start), f64::from(y_pixels.end - y_pixels.start));
        let boxed = legend_box(corner, legend_size(&prepared.legend), plot_actual);
        let origin = (x_pixels.start, y_pixels.start);
        draw_legend(root, origin, boxed, &prepared.legend, panel.kind, styles)?;
    }
    Ok(())
}

/// Rings at one point become one ring labelled "#1,#4" (red if any of them missed).
fn merged_marks(marks: Vec<PreparedMark>) -> Vec<PreparedMark> {
    let mut out: Vec<PreparedMark> = Vec::new();
    for m in marks {
        let same = out.iter_mut().find(|o| o.paper.is_none() && m.paper.is_none() && o.sim == m.sim);
        match same {
            Some(o) => {
                o.label = format!("{},{}", o.label, m.label);
                o.verdict = match (o.verdict, m.verdict) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    _ => None,
                };
            }
            None => out.push(m),
        }
    }
    out
}

const MARK_HELD: RGBColor = RGBColor(0x1a, 0x9a, 0x3a);
const MARK_MISSED: RGBColor = RGBColor(0xd0, 0x10, 0x10);

/// A paper claim on the plot: the paper's value as a black star joined to the simulated point,
/// or a ring round the simulated point in the verdict's colour; labelled "#row".
fn draw_mark<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    &(x, y): &(i32, i32),
    paper: Option<(i32, i32)>,
    mark: &PreparedMark,
) -> Result<(), String> {
    let color = match mark.verdict {
        Some(true) => MARK_HELD,
        Some(false) => MARK_MISSED,
        None => NOTE_COLOR,
    };
    let label_at = match paper {
        Some((px, py)) => {
            root.draw(&PathElement::new([(x, y), (px, py)], color.stroke_width(1))).map_err(plot_error)?;
            let r = MARKER_RADIUS_PX + 2;
            for (dx, dy) in [(r, 0), (0, r), (r * 7 / 10, r * 7 / 10), (r * 7 / 10, -r * 7 / 10)] {
                root.draw(&PathElement::new([(px - dx, py - dy), (px + dx, py + dy)], BLACK.stroke_width(2)))
                    .map_err(plot_error)?;
            }
            (px + r + 2, py)
        }
        None => {
            root.draw(&Circle::new((x, y), MARKER_RADIUS_PX + 4, color.stroke_width(2)))
                .map_err(plot_error)?;
            (x + MARKER_RADIUS_PX + 6, y - MARKER_RADIUS_PX - 4)
        }
    };
    let style = (FONT, FONT_SIZE_TICK).into_font().color(&color).pos(Pos::new(HPos::Left, VPos::Center));
    root.draw_text(&mark.label, &style, label_at).map_err(plot_error)
}

/// Draws a series' marker centred on a backend pixel.
fn draw_marker<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    (color, shape, filled): Look,
) -> Result<(), String> {
    let r = MARKER_RADIUS_PX;
    let outline: Vec<(i32, i32)> = match shape {
        MarkerShape::Circle => {
            if filled {
                root.draw(&Circle::new((x, y), r, color.filled())).map_err(plot_error)?;
            } else {
                root.draw(&Circle::new((x, y), r, WHITE.filled())).map_err(plot_error)?;
                root.draw(&Circle::new((x, y), r, color.stroke_width(2))).map_err(plot_error)?;
            }
            return Ok(());
        }
        MarkerShape::Square => vec![(x - r, y - r), (x + r, y - r), (x + r, y + r), (x - r, y + r)],
        MarkerShape::TriangleUp => vec![(x, y - r - 1), (x + r + 1, y + r), (x - r - 1, y + r)],
        MarkerShape::TriangleDown => vec![(x - r - 1, y - r), (x + r + 1, y - r), (x, y + r + 1)],
        MarkerShape::Diamond => vec![(x, y - r - 1), (x + r + 1, y), (x, y + r + 1), (x - r - 1, y)],
    };
    let fill = if filled { color } else { WHITE };
    root.draw(&Polygon::new(outline.clone(), fill.filled())).map_err(plot_error)?;
    if !filled {
        let mut closed = outline;
        closed.push(closed[0]);
        root.draw(&PathElement::new(closed, color.stroke_width(2))).map_err(plot_error)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "svg_tests.rs"]
mod tests;
