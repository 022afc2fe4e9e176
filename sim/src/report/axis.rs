//! Plot axes in *transformed* coordinates (`log2(x)` on a Log2 axis) with precomputed, readable
//! ticks: 1, 2, 4, 8, 16 on a thread axis; 0, 0.5, 1.0 or 0, 5 K, 10 K on linear ones. plotters'
//! own log axes put ticks at arbitrary values, so [`super::svg`] draws with these instead.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};

use super::claims::format_number;
use super::figure::Scale;

/// Maps a value to its axis coordinate; `None` for values the scale cannot place (non-finite, or
/// `<= 0` on a log axis).
pub(super) fn transform(scale: Scale, value: f64) -> Option<f64> {
    if !value.is_finite() {
        return None;
    }
    match scale {
        Scale::Linear => Some(value),
        Scale::Log2 => (value > 0.0).then(|| value.log2()),
        Scale::Log10 => (value > 0.0).then(|| value.log10()),
    }
}

pub(super) fn untransform(scale: Scale, coordinate: f64) -> f64 {
    match scale {
        Scale::Linear => coordinate,
        Scale::Log2 => coordinate.exp2(),
        Scale::Log10 => 10f64.powf(coordinate),
    }
}

/// One axis in transformed coordinates, with its ticks and their labels decided up front.
#[derive(Clone, Debug)]
pub(super) struct Axis {
    pub(super) low: f64,
    pub(super) high: f64,
    /// (coordinate, label), ascending.
    pub(super) ticks: Vec<(f64, String)>,
}

impl Axis {
    pub(super) fn label(&self, coordinate: f64) -> String {
        let tolerance = (self.high - self.low).abs() * 1e-9;
        self.ticks
            .iter()
            .find(|(tick, _)| (tick - coordinate).abs() <= tolerance)
            .map_or_else(String::new, |(_, label)| label.clone())
    }

    /// Fraction of the axis length at `coordinate` (0 at `low`, 1 at `high`).
    pub(super) fn fraction(&self, coordinate: f64) -> f64 {
        (coordinate - self.low) / (self.high - self.low)
    }

    pub(super) fn widest_label_chars(&self) -> usize {
        self.ticks.iter().map(|(_, label)| label.chars().count()).max().unwrap_or(1)
    }
}

impl Ranged for Axis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        // Clamped so that a value far outside the range cannot overflow i32 pixel arithmetic.
        let fraction = self.fraction(*value).clamp(-4.0, 5.0);
        limit.0 + (fraction * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Light (minor) grid lines are not drawn: paper figures rarely have them.
        if hint.weight().allow_light_points() || hint.max_num_points() == 0 {
            return Vec::new();
        }
        let stride = self.ticks.len().div_ceil(hint.max_num_points()).max(1);
        self.ticks.iter().step_by(stride).map(|(tick, _)| *tick).collect()
    }

    fn range(&self) -> Range<f64> {
        self.low..self.high
    }
}

/// A step of 1, 2 or 5 times a power of ten close to `raw`.
pub(super) fn nice_step(raw: f64) -> f64 {
    let power = 10f64.powf(raw.log10().floor());
    let mantissa = raw / power;
    let nice = if mantissa <= 1.0 {
        1.0
    } else if mantissa <= 2.0 {
        2.0
    } else if mantissa <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// Labels for linear ticks that are multiples of `step`: just enough decimals, and k/M/G for large
/// magnitudes so labels stay short.
pub(super) fn linear_labeller(step: f64, magnitude: f64) -> impl Fn(f64) -> String {
    let (divisor, suffix) = if magnitude >= 1e9 {
        (1e9, "G")
    } else if magnitude >= 1e6 {
        (1e6, "M")
    } else if magnitude >= 1e5 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    let scaled_step = step / divisor;
    let decimals = if scaled_step >= 1.0 { 0 } else { (-scaled_step.log10()).ceil().max(0.0) as usize };
    move |value: f64| {
        let text = format!("{:.decimals$}", value / divisor);
        // "-0.0" from rounding a tiny negative reads as "0.0".
        let is_negative_zero = text.starts_with('-') && text[1..].chars().all(|c| c == '0' || c == '.');
        let text = if is_negative_zero { text[1..].to_string() } else { text };
        format!("{text}{suffix}")
    }
}

/// Ticks at multiples of a nice step inside `[low, high]`.
pub(super) fn linear_ticks(low: f64, high: f64, target_count: f64) -> Vec<(f64, String)> {
    let step = nice_step((high - low) / target_count);
    let first = (low / step - 1e-9).ceil() as i64;
    let last = (high / step + 1e-9).floor() as i64;
    let labeller = linear_labeller(step, low.abs().max(high.abs()));
    (first..=last).map(|k| k as f64 * step).map(|value| (value, labeller(value))).collect()
}

/// A linear axis over data in `[min, max]`. `from_zero` (y axes) extends the range to zero and
/// snaps the far end to a tick; otherwise both ends get a little padding so edge markers show.
pub(super) fn linear_axis(range: Option<(f64, f64)>, from_zero: bool) -> Axis {
    let (mut low, mut high) = match range {
        None => (0.0, 1.0),
        Some((min, max)) if min == max => {
            let half = if min == 0.0 { 0.5 } else { min.abs() * 0.5 };
            if from_zero && min == 0.0 {
                (0.0, 1.0)
            } else {
                (min - half, max + half)
            }
        }
        Some((min, max)) => (min, max),
    };
    if from_zero {
        low = low.min(0.0);
        high = high.max(0.0);
        let span = high - low;
        let step = nice_step(span / 5.0);
        if high > 0.0 {
            high = ((high + span * 0.02) / step).ceil() * step;
        }
        if low < 0.0 {
            low = ((low - span * 0.02) / step).floor() * step;
        }
    } else {
        let pad = (high - low) * 0.04;
        low -= pad;
        high += pad;
    }
    Axis { low, high, ticks: linear_ticks(low, high, 5.0) }
}

/// Label of a power of the log base: 1, 2, …, 512, 1K, 2K, …, 1M for base 2; 0.01, 1, 10, 100,
/// 1000, 10k, 1M for base 10.
pub(super) fn log_tick_label(scale: Scale, exponent: i32) -> String {
    match scale {
        Scale::Log2 => match exponent {
            e if (-10..0).contains(&e) => format_number(f64::from(e).exp2()),
            e if (0..10).contains(&e) => format!("{}", 1u64 << e),
            e if (10..20).contains(&e) => format!("{}K", 1u64 << (e - 10)),
            e if (20..30).contains(&e) => format!("{}M", 1u64 << (e - 20)),
            e if (30..40).contains(&e) => format!("{}G", 1u64 << (e - 30)),
            e => format!("2^{e}"),
        },
        _ => match exponent {
            e if (-3..4).contains(&e) => format_number(10f64.powi(e)),
            e if (4..6).contains(&e) => format!("{}k", 10u64.pow((e - 3) as u32)),
            e if (6..9).contains(&e) => format!("{}M", 10u64.pow((e - 6) as u32)),
            e if (9..12).contains(&e) => format!("{}G", 10u64.pow((e - 9) as u32)),
            e => format!("1e{e}"),
        },
    }
}

/// A log axis over transformed data in `[min, max]` (exponents). Ticks sit on integer exponents,
/// thinned to at most about eight; when the data spans less than one power, nice linear values
/// inside the range are used instead so the axis is never bare.
pub(super) fn log_axis(scale: Scale, range: Option<(f64, f64)>) -> Axis {
    let (min, max) = range.unwrap_or((0.0, 1.0));
    let pad = ((max - min) * 0.03).max(0.25);
    let (low, high) = (min - pad, max + pad);
    let first = low.ceil() as i32;
    let last = high.floor() as i32;
    let count = (last - first + 1).max(0);
    if count >= 2 {
        // Thinned ticks stay on multiples of the stride, so 1 (2^0, 10^0) is kept when in range.
        let stride = (count as usize).div_ceil(8) as i32;
        let ticks = (first..=last)
            .filter(|exponent| exponent.rem_euclid(stride) == 0)
            .map(|exponent| (f64::from(exponent), log_tick_label(scale, exponent)))
            .collect();
        return Axis { low, high, ticks };
    }
    let (raw_low, raw_high) = (untransform(scale, low), untransform(scale, high));
    let ticks = linear_ticks(raw_low, raw_high, 4.0)
        .into_iter()
        .filter_map(|(value, label)| transform(scale, value).map(|coordinate| (coordinate, label)))
        .collect();
    Axis { low, high, ticks }
}

pub(super) fn axis_for(scale: Scale, range: Option<(f64, f64)>, from_zero: bool) -> Axis {
    match scale {
        Scale::Linear => linear_axis(range, from_zero),
        Scale::Log2 | Scale::Log10 => log_axis(scale, range),
    }
}

/// Grows the top of a y axis so that the data (ending at `data_high`) stays below the top
/// `fraction` of the plot, and recomputes the ticks.
pub(super) fn with_headroom(axis: &Axis, scale: Scale, fraction: f64) -> Axis {
    let high = axis.low + (axis.high - axis.low) / (1.0 - fraction);
    let ticks = match scale {
        Scale::Linear => linear_ticks(axis.low, high, 5.0),
        Scale::Log2 | Scale::Log10 => {
            let grown = log_axis(scale, Some((axis.low, high)));
            grown.ticks.into_iter().filter(|(tick, _)| *tick >= axis.low && *tick <= high).collect()
        }
    };
    Axis { low: axis.low, high, ticks }
}

pub(super) fn min_max(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |range, value| match range {
        None => Some((value, value)),
        Some((min, max)) => Some((min.min(value), max.max(value))),
    })
}
