//! The benchmark plots render on any machine: `benches/common/plot.rs` draws the all-reduce plots
//! of `benches/coll.rs` from GPU run 14's recorded figures
//! (`docs/gpu-runs/2026-11-23-h200x2-run14/coll_figures.jsonl`), with the embedded font, and the
//! files are PNG images of the expected size. `PGAS_PLOTS_TO=DIR` also writes them to DIR (how the
//! copies in that run's folder were made).

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

/// `results[size][method][eager, graph]` from the `FIGURE` lines `benches/coll.rs` printed.
fn recorded() -> Vec<[[f64; 2]; 5]> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/gpu-runs/2026-11-23-h200x2-run14/coll_figures.jsonl");
    let text = std::fs::read_to_string(&path).expect("the recorded figures are in the repository");
    let field = |line: &str, key: &str| -> Option<String> {
        let at = line.find(&format!("\"{key}\":"))? + key.len() + 3;
        let rest = line[at..].trim_start_matches('"');
        let end = rest.find(['"', ',', '}'])?;
        Some(rest[..end].to_owned())
    };
    let mut out = vec![[[f64::NAN; 2]; 5]; SIZES.len()];
    for line in text.lines() {
        let (Some(name), Some(value)) = (field(line, "name"), field(line, "value")) else {
            continue;
        };
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
    plot::all_reduce(&dir, machine, &SIZES, &results, &METHODS, 2).unwrap();
    for name in ["allreduce_latency.png", "allreduce_busbw.png"] {
        assert_eq!(png_size(&dir.join(name)), (960, 600), "{name}");
    }
    if let Some(to) = std::env::var_os("PGAS_PLOTS_TO") {
        plot::all_reduce(Path::new(&to), machine, &SIZES, &results, &METHODS, 2).unwrap();
    }
    // Nothing finite to draw is an error, not an empty picture.
    let empty = vec![[[f64::NAN; 2]; 5]; SIZES.len()];
    assert!(plot::all_reduce(&dir, machine, &SIZES, &empty, &METHODS, 2).is_err());
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
    plot::linear_by_doubling(&path, "MoE", "tokens per GPU", "GB/s", &series).unwrap();
    let png = std::fs::read(&path).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    assert!(png.len() > 10_000, "{} bytes", png.len());
    assert!(plot::linear_by_doubling(&path, "MoE", "x", "y", &series[1..]).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
