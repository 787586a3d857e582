//! PNG plots of benchmark results (`plotters`, bitmap backend). Text is drawn with an embedded
//! font (DejaVu Sans Mono, `fonts/`, its license beside it): the GPU machines have no system
//! fonts, and a plot must never fail for want of one.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use std::error::Error;
use std::path::Path;

static FONT: &[u8] = include_bytes!("fonts/DejaVuSansMono.ttf");
const FAMILY: &str = "sans-serif";
const COLORS: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(0, 0, 0),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
];

/// One line of a plot: its legend and its (x, y) points (non-finite ones are left out).
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// `1KiB`, `256MiB`, ...: sizes as the tables print them.
pub fn human(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{}GiB", b >> 30),
        b if b >= 1 << 20 => format!("{}MiB", b >> 20),
        b if b >= 1 << 10 => format!("{}KiB", b >> 10),
        b => format!("{b}B"),
    }
}

fn register() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // A second registration would only replace the same font; a failure shows at the first text.
    ONCE.call_once(|| {
        let _ = register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

/// A log-log plot of `series` against message size in bytes, written to `path` (PNG).
pub fn log_log_by_size(
    path: &Path, title: &str, y_label: &str, series: &[Series],
) -> Result<(), Box<dyn Error>> {
    log_log_by_bytes(path, title, "message size", y_label, series)
}

/// [`log_log_by_size`] with the x axis (a size in bytes, labelled at whole powers of two) named
/// `x_label`.
pub fn log_log_by_bytes(
    path: &Path, title: &str, x_label: &str, y_label: &str, series: &[Series],
) -> Result<(), Box<dyn Error>> {
    register();
    let points = || {
        series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|(x, y)| x.is_finite() && y.is_finite() && *x > 0.0 && *y > 0.0)
    };
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points() {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if x0 > x1 {
        return Err(format!("{}: nothing to plot", path.display()).into());
    }
    // Sizes are powers of two: the x axis is log2(bytes), labelled in bytes at whole powers.
    let (x0, x1) = (x0.log2().floor() - 0.5, x1.log2().ceil() + 0.5);
    let root = BitMapBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FAMILY, 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x0..x1, (y0 / 1.5..y1 * 1.5).log_scale())?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_labels(((x1 - x0) as usize).min(16))
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 && *x >= 0.0 {
                human(1usize << (x.round() as u32))
            } else {
                String::new()
            }
        })
        .y_labels(12)
        .label_style((FAMILY, 14))
        .draw()?;
    lines(&mut chart, series, |&(x, y)| {
        x.is_finite() && y.is_finite() && x > 0.0 && y > 0.0
    })?;
    root.present()?;
    Ok(())
}

/// What [`collective`] plots: file names `{stem}_latency.png` / `{stem}_busbw.png`, the title's
/// `what`, and the bus bandwidth factor (nccl-tests' convention) with its formula for the axis.
pub struct Collective<'a> {
    pub stem: &'a str,
    pub what: &'a str,
    pub bus_factor: f64,
    pub bus_text: &'a str,
}

/// The two plots of one collective of `benches/coll.rs` in `dir`: `{stem}_latency.png` (up to
/// 1 MiB, microseconds, graph-captured) and, with more than one PE, `{stem}_busbw.png` (from
/// 1 MiB, bus bandwidth, best of eager and graph). `results[size][method][eager, graph]` in
/// microseconds, NaN where not run; `methods` names the methods in that order.
#[allow(clippy::too_many_arguments)]
pub fn collective<R: AsRef<[[f64; 2]]>>(
    dir: &Path, c: &Collective<'_>, machine: &str, sizes: &[usize], results: &[R],
    methods: &[&str], n: usize,
) -> Result<(), Box<dyn Error>> {
    let busbw = |bytes: usize, us: f64| bytes as f64 / (us * 1e-6) * c.bus_factor / 1e9;
    let series = |small: bool| -> Vec<Series> {
        methods
            .iter()
            .enumerate()
            .map(|(mi, name)| Series {
                name: name.to_string(),
                points: sizes
                    .iter()
                    .zip(results)
                    .filter(|(b, _)| {
                        if small {
                            **b <= 1 << 20
                        } else {
                            **b >= 1 << 20
                        }
                    })
                    .map(|(&b, r)| {
                        let r = r.as_ref();
                        let y = if small {
                            r[mi][1]
                        } else {
                            busbw(b, r[mi][0].min(r[mi][1]))
                        };
                        (b as f64, y)
                    })
                    .collect(),
            })
            .filter(|s| s.points.iter().any(|(_, y)| y.is_finite() && *y > 0.0))
            .collect()
    };
    log_log_by_size(
        &dir.join(format!("{}_latency.png", c.stem)),
        &format!("{} latency, graph-captured ({machine})", c.what),
        "microseconds",
        &series(true),
    )?;
    if n > 1 {
        log_log_by_size(
            &dir.join(format!("{}_busbw.png", c.stem)),
            &format!("{} bus bandwidth ({machine})", c.what),
            &format!("GB/s (bytes x {} / time)", c.bus_text),
            &series(false),
        )?;
    }
    Ok(())
}

/// A plot of `series` against a power-of-two count (GEMM rows, say) on a log2 x axis labelled
/// with the counts, and a linear y axis from 0, written to `path` (PNG).
pub fn by_count(
    path: &Path, title: &str, (x_desc, y_desc): (&str, &str), series: &[Series],
) -> Result<(), Box<dyn Error>> {
    register();
    let finite = |&&(x, y): &&(f64, f64)| x.is_finite() && y.is_finite() && x > 0.0;
    let pts: Vec<&(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(finite)
        .collect();
    if pts.is_empty() {
        return Err(format!("{}: nothing to plot", path.display()).into());
    }
    let x0 = pts
        .iter()
        .map(|p| p.0)
        .fold(f64::MAX, f64::min)
        .log2()
        .floor()
        - 0.5;
    let x1 = pts
        .iter()
        .map(|p| p.0)
        .fold(f64::MIN, f64::max)
        .log2()
        .ceil()
        + 0.5;
    let y1 = pts.iter().map(|p| p.1).fold(0.0, f64::max) * 1.15;
    let root = BitMapBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FAMILY, 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x0..x1, 0.0..y1)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(((x1 - x0) as usize).min(16))
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 && *x >= 0.0 {
                format!("{}", 1u64 << (x.round() as u32))
            } else {
                String::new()
            }
        })
        .y_labels(12)
        .label_style((FAMILY, 14))
        .draw()?;
    lines(&mut chart, series, |&(x, y)| {
        x.is_finite() && y.is_finite() && x > 0.0
    })?;
    root.present()?;
    Ok(())
}

/// Draws each series as a line with a dot at each point `keep` accepts (x on the chart's log2
/// axis), and the legend, upper left.
fn lines<'a, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, BitMapBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    series: &[Series], keep: impl Fn(&(f64, f64)) -> bool,
) -> Result<(), Box<dyn Error>> {
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(|p| keep(p))
            .map(|&(x, y)| (x.log2(), y))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(s.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(2))
            });
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FAMILY, 14))
        .draw()?;
    Ok(())
}
