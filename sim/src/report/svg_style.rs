//! Series looks: palette, markers, and "family / variant" shading.

use super::*;

/// Tableau 10.
pub(super) const PALETTE: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];
pub(super) const GRID_COLOR: RGBColor = RGBColor(0xdd, 0xdd, 0xdd);
pub(super) const NOTE_COLOR: RGBColor = RGBColor(0x77, 0x77, 0x77);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MarkerShape {
    Circle,
    Square,
    TriangleUp,
    Diamond,
    TriangleDown,
}

/// Marker of the n-th series of a figure: five shapes, filled first, then hollow.
pub(super) fn marker_of(style_index: usize) -> (MarkerShape, bool) {
    const SHAPES: [MarkerShape; 5] = [
        MarkerShape::Circle,
        MarkerShape::Square,
        MarkerShape::TriangleUp,
        MarkerShape::Diamond,
        MarkerShape::TriangleDown,
    ];
    (SHAPES[style_index % SHAPES.len()], (style_index / SHAPES.len()).is_multiple_of(2))
}

pub(super) fn color_of(style_index: usize) -> RGBColor {
    PALETTE[style_index % PALETTE.len()]
}

/// Colour, marker shape and fill of a series.
pub(super) type Look = (RGBColor, MarkerShape, bool);

/// The look of every series name of a figure, in order of first appearance. When every name is
/// "family / variant" and families repeat, a family keeps one hue and marker shape and its
/// variants get lighter shades and alternate filled and hollow markers, so pairs read as pairs.
pub(super) struct Styles {
    pub(super) names: Vec<String>,
    pub(super) looks: Vec<Look>,
}

impl Styles {
    pub(super) fn of(figure: &Figure) -> Styles {
        let names = style_registry(figure);
        let split: Vec<Option<(&str, &str)>> = names.iter().map(|n| n.split_once(" / ")).collect();
        let (mut families, mut variants): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
        for &(family, variant) in split.iter().flatten() {
            if !families.contains(&family) {
                families.push(family);
            }
            if !variants.contains(&variant) {
                variants.push(variant);
            }
        }
        let grouped = names.len() > 1 && split.iter().all(Option::is_some) && families.len() < names.len();
        let looks = (0..names.len())
            .map(|i| match split[i].filter(|_| grouped) {
                Some((family, variant)) => {
                    let f = families.iter().position(|x| *x == family).unwrap_or(0);
                    let v = variants.iter().position(|x| *x == variant).unwrap_or(0);
                    let lighten =
                        if variants.len() > 1 { 0.5 * v as f64 / (variants.len() - 1) as f64 } else { 0.0 };
                    (tint(color_of(f), lighten), marker_of(f).0, v % 2 == 0)
                }
                None => {
                    let (shape, filled) = marker_of(i);
                    (color_of(i), shape, filled)
                }
            })
            .collect();
        Styles { names, looks }
    }

    pub(super) fn index(&self, name: &str) -> usize {
        style_index(&self.names, name)
    }

    pub(super) fn color(&self, index: usize) -> RGBColor {
        self.looks[index].0
    }
}

/// `color` moved towards white by `amount` (0 = unchanged, 1 = white).
pub(super) fn tint(color: RGBColor, amount: f64) -> RGBColor {
    let mix = |c: u8| (f64::from(c) + (255.0 - f64::from(c)) * amount).round() as u8;
    RGBColor(mix(color.0), mix(color.1), mix(color.2))
}

/// Series names in order of first appearance in the figure; a name's index picks its style.
pub(super) fn style_registry(figure: &Figure) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for series in figure.panels.iter().flat_map(|panel| &panel.series) {
        if !names.contains(&series.name) {
            names.push(series.name.clone());
        }
    }
    names
}

pub(super) fn style_index(style_names: &[String], name: &str) -> usize {
    style_names.iter().position(|known| known == name).unwrap_or(0)
}
