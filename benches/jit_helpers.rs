//! What the JIT's helper processes gain (docs/jit.md, "Parallel compiles"), on the CPUs alone:
//! the same number of new programs compiled into the kernel cache by one `pgas jit-helper`
//! process, one after the other (what a single process did before helpers, as NVRTC compiles one
//! program at a time per process), and by one helper per CPU at once. Each program is one
//! point-to-point kernel (an `nvshmem_float_p`), linked against pgas's NVSHMEM library (built first, outside the
//! timings). Needs NVRTC and the headers, no GPU; the `pgas` CLI beside this binary (cargo and
//! `scripts/build-device.sh` put it there) or `PGAS_JIT_HELPER`.

mod common;

use common::{emit, show, wall, BenchResult, Figure};
use pgas::jit::disk::{CacheKey, DiskCache, Lookup};
use pgas::jit::helpers::{helper_exe, Helpers, Job, JobKind};
use pgas::jit::Toolchain;

const BENCH: &str = "jit_helpers";
const ARCH: (u32, u32) = (9, 0);
/// Programs per run.
const PROGRAMS: usize = 16;

/// Point-to-point kernel `name` as codegen emits one; `seed` makes each program new.
fn program(name: &str, seed: usize) -> Job {
    Job {
        text: format!(
            "#define PGAS_KERNEL_NAME {name}\n{}#line 1 \"benches/jit_helpers.rs\"\nextern \"C\" __global__ void PGAS_KERNEL_NAME(float* x, unsigned long long n) {{\nif (n) nvshmem_float_p(x, {seed}.0f, (nvshmem_my_pe() + 1) % nvshmem_n_pes());\n}}\n",
            pgas_codegen::PRELUDE_P2P
        ),
        key_name: name.to_owned(),
        compile_name: name.to_owned(),
        kind: JobKind::Program,
    }
}

/// Compiles `jobs` with `helpers` processes and checks every program landed in the cache.
fn run(
    exe: &std::path::Path, cache: &DiskCache, jobs: &[(Job, CacheKey)], helpers: usize,
) -> BenchResult<f64> {
    let (started, secs) =
        wall(|| Helpers::start(exe, cache, jobs, ARCH, helpers, &[]).map(Helpers::wait));
    started.ok_or("the helper processes did not start")?;
    for (job, key) in jobs {
        if !matches!(cache.load(key)?, Lookup::Hit(_)) {
            return Err(format!(
                "{} was not compiled (see the helpers' output)",
                job.key_name
            )
            .into());
        }
    }
    Ok(secs)
}

fn main() -> BenchResult<()> {
    let Some(exe) = helper_exe() else {
        println!("{BENCH}: skipped: no pgas CLI beside this binary and PGAS_JIT_HELPER unset");
        return Ok(());
    };
    let tc = Toolchain::discover()?;
    let dir = std::env::temp_dir().join(format!("pgas-{BENCH}-{}", std::process::id()));
    let cache = DiskCache::open(&dir)?;
    let keyed = |job: Job| {
        let key = tc.cache_key(&job.text, &job.key_name, ARCH);
        (job, key)
    };
    // The NVSHMEM library every linked program needs, once, outside the timings.
    run(&exe, &cache, &[keyed(program("warm", 0))], 1)?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let wide = cpus.min(PROGRAMS);
    let batch = |tag: &str| -> Vec<(Job, CacheKey)> {
        (0..PROGRAMS)
            .map(|i| keyed(program(&format!("{tag}_{i}"), i)))
            .collect()
    };
    let one = run(&exe, &cache, &batch("one"), 1)?;
    let many = run(&exe, &cache, &batch("many"), wide)?;
    let _ = std::fs::remove_dir_all(&dir);

    let machine = format!("{cpus} CPUs");
    let figs = [
        Figure {
            name: "one_process".into(),
            value: one,
            unit: "s",
            note: format!("{PROGRAMS} point-to-point programs, one after the other in one helper"),
        },
        Figure {
            name: format!("{wide}_processes"),
            value: many,
            unit: "s",
            note: format!("{PROGRAMS} other point-to-point programs, {wide} helpers at once"),
        },
        Figure {
            name: "speedup".into(),
            value: one / many,
            unit: "x",
            note: format!("one process / {wide} processes"),
        },
    ];
    println!("{BENCH} on {machine}: {PROGRAMS} new programs into the kernel cache");
    for f in &figs {
        println!(
            "  {:<14} {:>8} {}  ({})",
            f.name,
            show(f.value),
            f.unit,
            f.note
        );
        emit(BENCH, &machine, f);
    }
    Ok(())
}
