//! The benchmark plots render on any machine: `benches/common/plot.rs` draws the all-reduce plots
//! of `benches/coll.rs` from GPU run 14's recorded figures
//! (`docs/figures/2026-11-23-h200x2-run14/coll_figures.jsonl`), and the all-gather + GEMM plot of
//! `benches/ag_gemm.rs` from run agmm-1's (`docs/figures/2026-11-23-h100x1-agmm/figures.jsonl`),
//! with the embedded font, and the files are PNG images of the expected size. `PGAS_PLOTS_TO=DIR`
//! also writes them to DIR (how the copies in those runs' folders, on the branch `evidence`, were
//! made).

#[path = "../benches/common/plot.rs"]
#[allow(dead_code)]
mod plot;

use std::path::Path;

const METHODS: [&str; 5] = ["one_shot", "two_shot", "auto", "nvshmem", "nccl"];
const SIZES: [usize; 10] = [
    8,
    1 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
    64 << 20,
    256 << 20,
    1 << 30,
];

/// The (name, value) of each figure a run recorded in `docs/figures/<run>/<file>`.
fn figures(run_file: &str) -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(run_file);
    let text = std::fs::read_to_string(&path).expect("the recorded figures are in the repository");
    let field = |line: &str, key: &str| -> Option<String> {
        let at = line.find(&format!("\"{key}\":"))? + key.len() + 3;
        let rest = line[at..].trim_start_matches('"');
        let end = rest.find(['"', ',', '}'])?;
        Some(rest[..end].to_owned())
    };
    text.lines()
        .filter_map(|line| Some((field(line, "name")?, field(line, "value")?)))
        .collect()
}

/// `results[size][method][eager, graph]` from the `FIGURE` lines `benches/coll.rs` printed.
fn recorded() -> Vec<[[f64; 2]; 5]> {
    let mut out = vec![[[f64::NAN; 2]; 5]; SIZES.len()];
    for (name, value) in figures("docs/figures/2026-11-23-h200x2-run14/coll_figures.jsonl") {
        for (si, &b) in SIZES.iter().enumerate() {
            for (mi, m) in METHODS.iter().enumerate() {
                for (gi, mode) in ["eager", "graph"].iter().enumerate() {
                    if name == format!("allreduce_bf16_{}_{m}_{mode}", plot::human(b)) {
                        out[si][mi][gi] = value.parse().expect("a number");
                    }
                }
            }
        }
    }
    out
}

fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

/// The all-reduce as `benches/coll.rs` plots it (2 PEs: bus factor 2(n-1)/n = 1).
const ALL_REDUCE: plot::Collective<'static> = plot::Collective {
    stem: "allreduce",
    what: "bf16 all-reduce Sum",
    bus_factor: 1.0,
    bus_text: "2(n-1)/n",
};

#[test]
fn all_reduce_plots_render_from_recorded_figures() {
    let results = recorded();
    assert!(
        results[4][2][1].is_finite() && results[8][4][0].is_finite(),
        "the recorded figures hold 1 MiB auto and 256 MiB NCCL"
    );
    let dir = std::env::temp_dir().join(format!("pgas-plots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let machine = "NVIDIA H200 x2 PE, run 14";
    plot::collective(&dir, &ALL_REDUCE, machine, &SIZES, &results, &METHODS, 2).unwrap();
    for name in ["allreduce_latency.png", "allreduce_busbw.png"] {
        assert_eq!(png_size(&dir.join(name)), (960, 600), "{name}");
    }
    if let Some(to) = std::env::var_os("PGAS_PLOTS_TO") {
        plot::collective(
            Path::new(&to),
            &ALL_REDUCE,
            machine,
            &SIZES,
            &results,
            &METHODS,
            2,
        )
        .unwrap();
    }
    // Nothing finite to draw is an error, not an empty picture.
    let empty = vec![[[f64::NAN; 2]; 5]; SIZES.len()];
    assert!(plot::collective(&dir, &ALL_REDUCE, machine, &SIZES, &empty, &METHODS, 2).is_err());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_tokens_plot_renders_with_the_embedded_font() {
    let dir = std::env::temp_dir().join(format!("pgas-plots-tokens-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("moe_gbs.png");
    let series = vec![
        plot::Series {
            name: "pgas dispatch".into(),
            points: vec![(256.0, 115.0), (1024.0, 418.0), (4096.0, 567.0)],
        },
        plot::Series {
            name: "not run".into(),
            points: vec![(256.0, f64::NAN)],
        },
    ];
    plot::by_count(&path, "MoE", ("tokens per GPU", "GB/s"), &series).unwrap();
    let png = std::fs::read(&path).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    assert!(png.len() > 10_000, "{} bytes", png.len());
    assert!(plot::by_count(&path, "MoE", ("x", "y"), &series[1..]).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ag_gemm_plot_renders_from_recorded_figures() {
    // (legend, figure) per line of benches/ag_gemm.rs's plot, in its order.
    let methods = [
        ("cuBLAS+NCCL", "cublas_nccl_us"),
        ("pgas kernel", "pgas_kernel_us"),
        ("pgas::ops", "pgas_ops_us"),
    ];
    let recorded = figures("docs/figures/2026-11-23-h100x1-agmm/figures.jsonl");
    let series: Vec<plot::Series> = methods
        .iter()
        .map(|(legend, figure)| {
            let mut points: Vec<(f64, f64)> = recorded
                .iter()
                .filter_map(|(name, value)| {
                    let (shape, what) = name.strip_prefix("ag_gemm_")?.split_once('/')?;
                    let m: f64 = shape.split('x').next()?.parse().ok()?;
                    let us: f64 = value.parse().ok()?;
                    (what == *figure).then_some((m, us / 1e3))
                })
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            plot::Series {
                name: (*legend).into(),
                points,
            }
        })
        .collect();
    assert!(
        series.iter().all(|s| s.points.len() == 5),
        "five shapes a method were recorded"
    );
    let title = "all-gather + GEMM, N = K = 8192, bf16, NVIDIA H100 80GB HBM3 x1 PE";
    let labels = ("M (rows of C)", "ms per call (lower is better)");
    let dir = std::env::temp_dir().join(format!("pgas-plots-ag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    plot::by_count(&dir.join("ag_gemm.png"), title, labels, &series).unwrap();
    assert_eq!(png_size(&dir.join("ag_gemm.png")), (960, 600));
    if let Some(to) = std::env::var_os("PGAS_PLOTS_TO") {
        plot::by_count(&Path::new(&to).join("ag_gemm.png"), title, labels, &series).unwrap();
    }
    // Nothing finite to draw is an error, not an empty picture.
    let empty = [plot::Series {
        name: "none".into(),
        points: vec![(1024.0, f64::NAN)],
    }];
    assert!(plot::by_count(&dir.join("none.png"), title, labels, &empty).is_err());
    std::fs::remove_dir_all(dir).unwrap();
}

/// The speed-ups over cuBLAS + NCCL a run recorded in `log` (`FIGURE` lines of `bench`), by M,
/// one series a `(legend, figure)`.
fn speedups(log: &str, bench: &str, methods: &[(&str, &str)]) -> Vec<plot::Series> {
    let recorded = figures(log);
    methods
        .iter()
        .map(|(legend, figure)| {
            let mut points: Vec<(f64, f64)> = recorded
                .iter()
                .filter_map(|(name, value)| {
                    let (shape, what) = name.strip_prefix(bench)?.split_once('/')?;
                    let m: f64 = shape.split('x').next()?.parse().ok()?;
                    (what == *figure).then_some((m, value.parse().ok()?))
                })
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            plot::Series {
                name: (*legend).into(),
                points,
            }
        })
        .collect()
}

#[test]
fn fused_speedup_plots_render_from_run_44() {
    // (legend, figure) per line of benches/ag_gemm.rs's speed-up plot, in its order.
    let methods = [
        ("pgas one kernel", "pgas_kernel_speedup"),
        ("pgas::ops (cuBLAS)", "pgas_ops_speedup"),
        ("pgas per shard", "pgas_per_shard_speedup"),
    ];
    let run = "docs/figures/2026-11-26-h100x4-run44";
    let dir = std::env::temp_dir().join(format!("pgas-plots-x-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (pes, log) in [(2, "ag2_new.log"), (4, "ag4_new.log")] {
        let series = speedups(&format!("{run}/{log}"), "ag_gemm_", &methods);
        assert!(
            series.iter().all(|s| s.points.len() == 5),
            "five shapes a path were recorded on {pes} PEs"
        );
        let title = format!(
            "all-gather + GEMM over cuBLAS + NCCL, N = K = 8192, NVIDIA H100 80GB HBM3 x{pes} PE"
        );
        let labels = ("M (rows of C)", "speed-up (higher is better)");
        let name = format!("ag_gemm_speedup_{pes}pe.png");
        plot::by_count(&dir.join(&name), &title, labels, &series).unwrap();
        assert_eq!(png_size(&dir.join(&name)), (960, 600));
        if let Some(to) = std::env::var_os("PGAS_PLOTS_TO") {
            plot::by_count(&Path::new(&to).join(&name), &title, labels, &series).unwrap();
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}
