//! Legend placement (the corner hiding the least data) and drawing.

use super::*;

// ---------------------------------------------------------------------------------------------
// Legend placement

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Corner {
    UpperLeft,
    UpperRight,
    LowerRight,
    LowerLeft,
    UpperMiddle,
    MiddleRight,
    MiddleLeft,
    LowerMiddle,
}

/// Candidate legend positions, most preferred first.
pub(super) const CORNERS: [Corner; 8] = [
    Corner::UpperLeft,
    Corner::UpperRight,
    Corner::LowerRight,
    Corner::LowerLeft,
    Corner::UpperMiddle,
    Corner::MiddleRight,
    Corner::MiddleLeft,
    Corner::LowerMiddle,
];

/// A pixel rectangle relative to the plot area's top-left corner: (left, top, right, bottom).
pub(super) type PixelBox = (f64, f64, f64, f64);

pub(super) fn legend_size(legend: &[(usize, String, bool)]) -> (f64, f64) {
    let chars = legend.iter().map(|(_, name, has_data)| legend_text(name, *has_data).chars().count()).max();
    let text_width = chars.unwrap_or(0) as f64 * f64::from(FONT_SIZE_LEGEND) * CHAR_WIDTH_EM;
    let width = f64::from(2 * LEGEND_PADDING_PX + LEGEND_SAMPLE_PX + 6) + text_width;
    let height = f64::from(2 * LEGEND_PADDING_PX + LEGEND_ROW_PX * legend.len() as i32);
    (width, height)
}

pub(super) fn legend_text(name: &str, has_data: bool) -> String {
    if has_data {
        name.to_string()
    } else {
        format!("{name} (no data)")
    }
}

pub(super) fn legend_box(corner: Corner, size: (f64, f64), plot: (f64, f64)) -> PixelBox {
    let inset = f64::from(LEGEND_INSET_PX);
    let (width, height) = size;
    let left = match corner {
        Corner::UpperLeft | Corner::LowerLeft | Corner::MiddleLeft => inset,
        Corner::UpperRight | Corner::LowerRight | Corner::MiddleRight => plot.0 - inset - width,
        Corner::UpperMiddle | Corner::LowerMiddle => (plot.0 - width) / 2.0,
    };
    let top = match corner {
        Corner::UpperLeft | Corner::UpperRight | Corner::UpperMiddle => inset,
        Corner::LowerLeft | Corner::LowerRight | Corner::LowerMiddle => plot.1 - inset - height,
        Corner::MiddleLeft | Corner::MiddleRight => (plot.1 - height) / 2.0,
    };
    (left, top, left + width, top + height)
}

/// How much data a legend box would hide: line samples (markers and points every few pixels
/// along each segment) inside it, plus bar area under it in units of 16 px².
pub(super) fn covered_data(
    prepared: &PreparedPanel,
    x_axis: &Axis,
    y_axis: &Axis,
    plot: (f64, f64),
    boxed: PixelBox,
) -> f64 {
    let (left, top, right, bottom) = boxed;
    let to_pixels = |(x, y): (f64, f64)| (x_axis.fraction(x) * plot.0, (1.0 - y_axis.fraction(y)) * plot.1);
    let margin = f64::from(MARKER_RADIUS_PX);
    let inside = |(px, py): (f64, f64)| {
        px >= left - margin && px <= right + margin && py >= top - margin && py <= bottom + margin
    };
    let mut score = 0.0;
    for line in &prepared.lines {
        for segment in &line.segments {
            let pixels: Vec<(f64, f64)> = segment.iter().copied().map(to_pixels).collect();
            score += pixels.iter().filter(|&&point| inside(point)).count() as f64 * 4.0;
            for pair in pixels.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                let length = ((b.0 - a.0).powi(2) + (b.1 - a.1).powi(2)).sqrt();
                let steps = (length / 4.0).ceil().max(1.0) as usize;
                for step in 1..steps {
                    let t = step as f64 / steps as f64;
                    if inside((a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t)) {
                        score += 1.0;
                    }
                }
            }
        }
    }
    let base = y_axis.low.max(y_axis.low.min(0.0)).min(y_axis.high);
    let base = if y_axis.low <= 0.0 && y_axis.high >= 0.0 { 0.0 } else { base };
    for bar in &prepared.bars {
        let (x0, y0) = to_pixels((bar.left, bar.value));
        let (x1, y1) = to_pixels((bar.right, base));
        let width = (right.min(x1.max(x0)) - left.max(x0.min(x1))).max(0.0);
        let height = (bottom.min(y1.max(y0)) - top.max(y0.min(y1))).max(0.0);
        score += width * height / 16.0;
    }
    score
}

/// Picks the legend position and, when every position would hide data, the grown y axis.
pub(super) fn place_legend(prepared: &PreparedPanel, y_scale: Scale, plot: (f64, f64)) -> (Corner, Axis) {
    let size = legend_size(&prepared.legend);
    let best = |y_axis: &Axis, corners: &[Corner]| {
        let mut best = (corners[0], f64::INFINITY);
        for &corner in corners {
            let covered =
                covered_data(prepared, &prepared.x_axis, y_axis, plot, legend_box(corner, size, plot));
            if covered < best.1 {
                best = (corner, covered);
            }
        }
        best
    };
    let (corner, covered) = best(&prepared.y_axis, &CORNERS);
    if covered == 0.0 {
        return (corner, prepared.y_axis.clone());
    }
    // Make room above the data when the legend is small enough for that to look sane.
    let fraction = (size.1 + f64::from(2 * LEGEND_INSET_PX)) / plot.1;
    if fraction < 0.45 {
        let grown = with_headroom(&prepared.y_axis, y_scale, fraction);
        let upper = [Corner::UpperLeft, Corner::UpperRight, Corner::UpperMiddle];
        let (corner, _) = best(&grown, &upper);
        return (corner, grown);
    }
    (corner, prepared.y_axis.clone())
}

pub(super) fn draw_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    origin: (i32, i32),
    boxed: PixelBox,
    legend: &[(usize, String, bool)],
    kind: PanelKind,
    styles: &Styles,
) -> Result<(), String> {
    let left = origin.0 + boxed.0.round() as i32;
    let top = origin.1 + boxed.1.round() as i32;
    let corners = [(left, top), (origin.0 + boxed.2.round() as i32, origin.1 + boxed.3.round() as i32)];
    // Slightly translucent so that data the legend could not avoid still shows through.
    root.draw(&Rectangle::new(corners, WHITE.mix(0.88).filled())).map_err(plot_error)?;
    root.draw(&Rectangle::new(corners, RGBColor(0xaa, 0xaa, 0xaa).stroke_width(1))).map_err(plot_error)?;
    let text_style =
        (FONT, FONT_SIZE_LEGEND).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    for (row, (style_index, name, has_data)) in legend.iter().enumerate() {
        let center_y = top + LEGEND_PADDING_PX + LEGEND_ROW_PX * row as i32 + LEGEND_ROW_PX / 2;
        let sample_left = left + LEGEND_PADDING_PX;
        let sample_right = sample_left + LEGEND_SAMPLE_PX;
        let color = styles.color(*style_index);
        match kind {
            PanelKind::Lines => {
                let line = [(sample_left, center_y), (sample_right, center_y)];
                root.draw(&PathElement::new(line, color.stroke_width(LINE_WIDTH_PX))).map_err(plot_error)?;
                draw_marker(root, ((sample_left + sample_right) / 2, center_y), styles.looks[*style_index])?;
            }
            PanelKind::Bars => {
                let swatch = [(sample_left + 4, center_y - 6), (sample_right - 4, center_y + 6)];
                root.draw(&Rectangle::new(swatch, color.filled())).map_err(plot_error)?;
                root.draw(&Rectangle::new(swatch, BLACK.stroke_width(1))).map_err(plot_error)?;
            }
        }
        let text = legend_text(name, *has_data);
        root.draw_text(&text, &text_style, (sample_right + 6, center_y)).map_err(plot_error)?;
    }
    Ok(())
}
