//! Tests of `svg.rs`, kept apart so the module reads top-down.
use super::*;
use crate::report::axis::{linear_axis, linear_labeller, log_axis, log_tick_label};
use crate::report::figure::{Mark, Series};
use crate::report::test_support::{leftover_temp_files, scratch_dir};

fn throughput_figure() -> Figure {
    let threads = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
    let selcc: Vec<(f64, f64)> = threads.iter().map(|&t| (t, 1.8 * t / (1.0 + t / 40.0))).collect();
    let gam: Vec<(f64, f64)> = threads.iter().map(|&t| (t, 0.9 * t / (1.0 + t / 10.0))).collect();
    let sel: Vec<(f64, f64)> = threads.iter().map(|&t| (t, 1.2 * t / (1.0 + t / 20.0))).collect();
    let lines = Panel::lines("(a) read-intensive", "threads per CN", "throughput (Mops)")
        .with_scales(Scale::Log2, Scale::Linear)
        .with_series(Series::new("SELCC", selcc))
        .with_series(Series::new("SEL", sel))
        .with_series(Series::new("GAM", gam));
    let latency = Panel::lines("(b) p99 latency", "keys", "latency (us)")
        .with_scales(Scale::Log10, Scale::Log10)
        .with_series(Series::new("SELCC", vec![(1e3, 3.0), (1e4, 4.5), (1e5, 9.0), (1e6, 40.0)]))
        .with_series(Series::new("GAM", vec![(1e3, 12.0), (1e4, 30.0), (1e5, 120.0), (1e6, 900.0)]));
    let mut bars = Panel::bars("(c) YCSB", "workload", "throughput (Mops)", ["A", "B", "C", "D"]);
    bars.series.push(Series::new("SELCC", vec![(0.0, 30.0), (1.0, 55.0), (2.0, 70.0), (3.0, 62.0)]));
    bars.series.push(Series::new("GAM", vec![(0.0, 8.0), (1.0, 12.0), (2.0, 15.0), (3.0, 13.0)]));
    bars.series.push(Series::new("SEL", vec![(0.0, 20.0), (1.0, 31.0), (2.0, 40.0)]));
    Figure {
        title: "SELCC Fig. 12 (simulated)".into(),
        panels: vec![lines, latency, bars],
        columns: 3,
        shared_y: false,
    }
}

/// Text content of the SVG's <text> elements (plotters escapes XML in them).
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|rest| rest.split_once('>'))
        .map(|(_, rest)| rest.split("</text>").next().unwrap_or("").trim().to_string())
        .collect()
}

fn render(figure: &Figure) -> String {
    let svg = render_svg(figure).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    assert!(svg.trim_end().ends_with("</svg>"));
    svg
}

/// Goal: a realistic three-panel figure (lines on log2 x, log-log lines, grouped bars) is
/// written, and every series name, panel title and axis label appears as SVG text.
#[test]
fn lines_bars_and_log_axes() {
    let dir = scratch_dir("svg-figure");
    let path = dir.join("plot.svg");
    let figure = throughput_figure();
    write_svg(&path, &figure).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    let texts = svg_texts(&svg);
    for expected in
        ["SELCC", "SEL", "GAM", "(a) read-intensive", "(c) YCSB", "threads per CN", "latency (us)"]
    {
        assert!(texts.iter().any(|text| text == expected), "missing {expected:?} in {texts:?}");
    }
    // Log2 ticks read as powers of two, log10 ticks as powers of ten, bars as categories.
    for tick in ["1", "2", "4", "8", "16", "32", "64", "1000", "10k", "100k", "1M", "A", "D"] {
        assert!(texts.iter().any(|text| text == tick), "missing tick {tick:?} in {texts:?}");
    }
    assert!(svg.contains("<polyline") || svg.contains("<path"), "no lines drawn");
    assert!(leftover_temp_files(&dir).is_empty());
}

/// Goal: degenerate inputs render without panicking: an empty series, a panel without
/// series, a single point, all-zero y, NaN and infinities, non-positive values on log axes,
/// and bars whose x is not a category.
#[test]
fn degenerate_inputs() {
    let panels = vec![
        Panel::lines("empty series", "x", "y").with_series(Series::new("nothing", vec![])),
        Panel::lines("no series", "x", "y"),
        Panel::lines("single point", "x", "y").with_series(Series::new("one", vec![(3.0, 7.0)])),
        Panel::lines("all zero", "x", "y").with_series(Series::new("zeros", vec![(0.0, 0.0), (1.0, 0.0)])),
        Panel::lines("non-finite", "x", "y").with_series(Series::new(
            "gappy",
            vec![(1.0, 1.0), (2.0, f64::NAN), (3.0, 3.0), (f64::INFINITY, 4.0), (5.0, f64::NEG_INFINITY)],
        )),
        Panel::lines("log", "x", "y")
            .with_scales(Scale::Log2, Scale::Log10)
            .with_series(Series::new("mixed", vec![(0.0, 1.0), (1.0, -5.0), (2.0, 10.0), (4.0, 100.0)])),
        Panel::lines("log one point", "x", "y")
            .with_scales(Scale::Log10, Scale::Log2)
            .with_series(Series::new("lonely", vec![(50.0, 3.0)])),
        Panel::bars("bars", "c", "y", ["a", "b"])
            .with_series(Series::new("in", vec![(0.0, 1.0), (1.0, 0.0)]))
            .with_series(Series::new("out", vec![(7.0, 1.0), (0.5, 2.0), (f64::NAN, 1.0)])),
        Panel::bars("bars no categories", "c", "y", Vec::<String>::new()),
        Panel {
            x_categories: None,
            ..Panel::bars("numeric bars", "size (B)", "y", Vec::<String>::new())
                .with_scales(Scale::Linear, Scale::Log10)
                .with_series(Series::new("s", vec![(64.0, 10.0), (4096.0, 1000.0), (256.0, 0.0)]))
        },
    ];
    let figure = Figure { title: String::new(), panels, columns: 0, shared_y: false };
    let svg = render(&figure);
    let texts = svg_texts(&svg);
    assert!(texts.iter().any(|text| text == "nothing (no data)"), "{texts:?}");
    assert!(texts.iter().any(|text| text == "no data"));
    assert!(texts.iter().any(|text| text.contains("points ≤ 0 not shown")), "{texts:?}");
    assert!(texts.iter().any(|text| text == "4096"), "numeric categories: {texts:?}");
    assert!(!svg.contains("NaN"), "NaN leaked into the SVG");
    assert!(!svg.contains("inf\""), "infinity leaked into the SVG");
}

/// Not a check: writes the sample figures to $DMSIM_REPORT_PREVIEW_DIR for a human to look
/// at (`rsvg-convert -o plot.png plot.svg`). Does nothing when the variable is unset.
#[test]
fn preview() {
    let Some(dir) = std::env::var_os("DMSIM_REPORT_PREVIEW_DIR") else { return };
    let dir = std::path::PathBuf::from(dir);
    write_svg(dir.join("figure.svg"), &throughput_figure()).unwrap();
    let crowded = Panel::lines("crowded", "x", "y")
        .with_series(Series::new("a", (0..=20).map(|i| (f64::from(i), 10.0)).collect()))
        .with_series(Series::new("bb", (0..=20).map(|i| (f64::from(i), 6.0)).collect()))
        .with_series(Series::new("ccc", (0..=20).map(|i| (f64::from(i), 3.0)).collect()))
        .with_series(Series::new("dddd", (0..=20).map(|i| (f64::from(i), 0.0)).collect()));
    let degenerate = Figure {
        title: "degenerate".into(),
        panels: vec![
            crowded,
            Panel::lines("empty", "x", "y").with_series(Series::new("nothing", vec![])),
            Panel::lines("single", "x", "y").with_series(Series::new("one", vec![(3.0, 7.0)])),
            Panel::lines("zeros + NaN", "x", "y")
                .with_series(Series::new("z", vec![(0.0, 0.0), (1.0, 0.0), (2.0, f64::NAN), (3.0, 0.0)])),
            Panel::lines("log with <= 0", "x", "y")
                .with_scales(Scale::Log2, Scale::Log10)
                .with_series(Series::new("m", vec![(0.0, 1.0), (1.0, -5.0), (2.0, 10.0), (4.0, 100.0)])),
            Panel {
                x_categories: None,
                ..Panel::bars("numeric bars, log y", "size (B)", "ops", Vec::<String>::new())
                    .with_scales(Scale::Linear, Scale::Log10)
                    .with_series(Series::new("s", vec![(64.0, 10.0), (4096.0, 1000.0), (256.0, 50.0)]))
                    .with_series(Series::new("t", vec![(64.0, 20.0), (4096.0, 300.0)]))
            },
        ],
        columns: 3,
        shared_y: false,
    };
    write_svg(dir.join("degenerate.svg"), &degenerate).unwrap();
}

/// Goal: names with XML metacharacters come out escaped, so the SVG stays well-formed.
#[test]
fn text_is_escaped() {
    let panel = Panel::lines("p & q", "x", "y").with_series(Series::new("A&B <x>", vec![(1.0, 1.0)]));
    let svg = render(&Figure { title: "t".into(), panels: vec![panel], columns: 1, shared_y: false });
    assert!(svg.contains("A&amp;B &lt;x&gt;"));
    assert!(svg.contains("p &amp; q"));
    assert!(!svg.contains("A&B"));
}

#[test]
fn figure_without_panels() {
    let svg = render(&Figure::new("nothing yet"));
    assert!(svg_texts(&svg).iter().any(|text| text == "(no panels)"));
}

/// Goal: the legend avoids data. Method: a line hugging the top-left to bottom-right
/// diagonal must push the legend to the upper-right or lower-left; a line crossing every
/// corner region forces headroom.
#[test]
fn legend_avoids_data() {
    let falling = Panel::lines("t", "x", "y")
        .with_series(Series::new("falling", (0..=20).map(|i| (f64::from(i), 20.0 - f64::from(i))).collect()));
    let mut prepared = prepare_lines(&falling, &styles_of(&falling));
    // Tight axes, so the line really runs through the upper-left and lower-right corners.
    prepared.x_axis = Axis { low: 0.0, high: 20.0, ticks: Vec::new() };
    prepared.y_axis = Axis { low: 0.0, high: 20.0, ticks: Vec::new() };
    let (corner, axis) = place_legend(&prepared, Scale::Linear, (400.0, 280.0));
    assert!(matches!(corner, Corner::UpperRight | Corner::LowerLeft), "{corner:?}");
    assert_eq!(axis.high, prepared.y_axis.high);

    let names: Vec<String> = (0..3).map(|i| format!("series {i}")).collect();
    let mut crowded = Panel::lines("t", "x", "y");
    for (index, name) in names.iter().enumerate() {
        // Levels 10, 6.7, 3.3 and 0: no gap between lines is as tall as the legend.
        let level = 10.0 - index as f64 * 10.0 / 3.0;
        crowded.series.push(Series::new(name.clone(), (0..=20).map(|i| (f64::from(i), level)).collect()));
    }
    crowded.series.push(Series::new("low", (0..=20).map(|i| (f64::from(i), 0.0)).collect()));
    let prepared = prepare_lines(&crowded, &styles_of(&crowded));
    let (corner, axis) = place_legend(&prepared, Scale::Linear, (400.0, 280.0));
    assert!(matches!(corner, Corner::UpperLeft | Corner::UpperRight | Corner::UpperMiddle));
    assert!(axis.high > prepared.y_axis.high, "expected headroom");
}

#[test]
fn axis_ticks() {
    let axis = linear_axis(Some((0.0, 9.3)), true);
    assert_eq!(axis.low, 0.0);
    assert!(axis.high >= 9.3);
    let labels: Vec<&str> = axis.ticks.iter().map(|(_, label)| label.as_str()).collect();
    assert_eq!(labels, ["0", "2", "4", "6", "8", "10"]);

    let axis = linear_axis(Some((0.0, 0.19)), true);
    assert_eq!(axis.ticks[0].1, "0.00");
    assert_eq!(axis.ticks[1].1, "0.05");
    assert_eq!(linear_labeller(0.5, 1.0)(-1e-17), "0.0");

    let axis = linear_axis(Some((0.0, 2.5e6)), true);
    assert!(axis.ticks.iter().any(|(_, label)| label == "1M"), "{:?}", axis.ticks);

    let axis = log_axis(Scale::Log2, Some((0.0, 20.0)));
    assert!(axis.ticks.len() <= 11, "{:?}", axis.ticks);
    assert_eq!(axis.ticks[0].1, "1");

    // Less than one power of ten still gets labelled ticks.
    let axis = log_axis(Scale::Log10, Some((20f64.log10(), 80f64.log10())));
    assert!(axis.ticks.len() >= 2, "{:?}", axis.ticks);

    assert_eq!(log_tick_label(Scale::Log2, 12), "4K");
    assert_eq!(log_tick_label(Scale::Log10, -2), "0.01");
    assert_eq!(log_tick_label(Scale::Log10, 7), "10M");
}

/// Goal: a series keeps its colour and marker across panels, in order of first appearance.
#[test]
fn styles_follow_names() {
    let figure = throughput_figure();
    let names = style_registry(&figure);
    assert_eq!(names, ["SELCC", "SEL", "GAM"]);
    assert_eq!(style_index(&names, "GAM"), 2);
    assert_ne!(marker_of(0), marker_of(5));
    assert_ne!(color_of(0), color_of(1));
}

fn styles_of(panel: &Panel) -> Styles {
    let mut figure = Figure::new("");
    figure.panels.push(panel.clone());
    Styles::of(&figure)
}

/// Goal: what a reader of a paper figure needs. "family / variant" series share a hue (variants
/// lighter); panels with the same series draw one legend; `shared_y` gives every panel one y
/// range; claims are marked and labelled; seeds' spread draws as error bars.
#[test]
fn families_one_legend_shared_y_marks_and_error_bars() {
    let a = Panel::lines("a", "x", "y")
        .with_series(Series::new("0% / 8GB", vec![(1.0, 1.0), (2.0, 2.0)]))
        .with_series(Series::new("0% / 16GB", vec![(1.0, 1.5), (2.0, 2.5)]))
        .with_series(Series::new("100% / 8GB", vec![(1.0, 0.5), (2.0, 0.7)]));
    let styles = styles_of(&a);
    assert_eq!(styles.names.len(), 3);
    let (base, light, other) = (styles.looks[0], styles.looks[1], styles.looks[2]);
    assert_eq!(base.1, light.1, "variants keep the family's marker shape");
    assert!(
        light.0 .0 >= base.0 .0 && light.0 .1 >= base.0 .1 && light.0 .2 >= base.0 .2,
        "variant is lighter"
    );
    assert_ne!(base.0, other.0, "another family, another hue");

    let mut b = a.clone();
    b.title = "b".into();
    for s in &mut b.series {
        for p in &mut s.points {
            p.1 *= 10.0;
        }
    }
    b.series[0].errors = vec![Some((9.0, 11.0)), None];
    b.marks.push(Mark {
        series: "0% / 8GB".into(),
        x: 2.0,
        paper: Some(25.0),
        label: "#1".into(),
        verdict: Some(false),
    });
    b.marks.push(Mark {
        series: "100% / 8GB".into(),
        x: 2.0,
        paper: None,
        label: "#2".into(),
        verdict: Some(true),
    });
    let figure = Figure { title: "f".into(), panels: vec![a.clone(), b], columns: 2, shared_y: true };
    let svg = render(&figure);
    let texts = svg_texts(&svg);
    assert_eq!(texts.iter().filter(|t| *t == "0% / 16GB").count(), 1, "one legend: {texts:?}");
    assert!(texts.iter().any(|t| t == "#1") && texts.iter().any(|t| t == "#2"), "{texts:?}");
    // The y range takes in the paper's value (25) and the error bar.
    let top_tick = texts.iter().filter_map(|t| t.parse::<f64>().ok()).fold(0.0, f64::max);
    assert!(top_tick >= 25.0, "{texts:?}");
    let separate = render(&Figure { shared_y: false, ..figure.clone() });
    assert_ne!(svg, separate, "shared_y changes the drawing");
}
