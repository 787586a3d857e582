//! Every kernel of the folders in `CORPUS_DIRS` (the corpus, the GPU suite's kernels, the
//! gallery, `src/ops` and its operations' folders, `src/gemm`), both variants, specialized with
//! sample comptime values, compiled by NVRTC for sm_90 exactly as the runtime JIT would: no
//! errors and no warnings. Every file of the library that holds kernels is in the corpus or
//! compiled by another NVRTC test (`COMPILED_ELSEWHERE`), or a test here fails.
//!
//! An NVRTC compile including `nvshmem.h` takes seconds, and parsing the headers is much of it,
//! so the specializations that share a prelude (point-to-point, barrier, full) are compiled as one
//! NVRTC program each (`pgas_codegen::batch`, as the runtime's JIT batches them). Kernels with
//! device collectives spend most of their time in NVVM and ptxas on NVSHMEM's collective code, so
//! the corpus compiles with `--Ofast-compile=max` (the JIT's `PGAS_JIT_FAST_COMPILE=max`): it
//! changes optimization only, not what the front end accepts or warns about, which is what this
//! test checks. A batch that fails or warns is recompiled one specialization at a time, so every
//! report names the kernel and file it belongs to.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use pgas_codegen::{
    batch, compile_file, specialize, CompiledKernel, KernelParam, ParamKind, Prelude, Scalar,
};
use pgas_runtime::jit::{LinkTime, Toolchain};

const ARCH: (u32, u32) = (9, 0);

/// One specialization: its corpus file, symbol, full source and the prelude that source starts
/// with.
struct Spec {
    file: String,
    name: String,
    source: String,
    prelude: Prelude,
}

/// The folders of the corpus, the gallery (`examples/`, whose kernels users run first) and the
/// library (`src/ops/` and the folders of the fused operations, `src/gemm/`).
const CORPUS_DIRS: &[&str] = &[
    "tests/corpus",
    "tests/gpu_suite/kernels",
    "examples",
    "src/ops",
    "src/ops/halo",
    "src/ops/jacobi",
    "src/ops/matmul_reduce_scatter",
    "src/gemm",
    "src/attention",
    "src/ops/ulysses",
    "src/ops/ring",
];

/// The library's kernel files that other NVRTC tests compile, with the specializations they
/// launch (which the corpus's sample comptime values would not cover), and why.
const COMPILED_ELSEWHERE: &[(&str, &str)] = &[
    (
        "src/coll/kernels/",
        "tests/nvrtc/coll.rs: every specialization coll::prewarm_all lists",
    ),
    (
        "src/attention/kernel.rs",
        "tests/nvrtc/attention.rs: every specialization pgas::attention launches (its block bound and \
         warpgroups follow comptime values the corpus's samples would not give)",
    ),
    (
        "src/ops/allreduce_rmsnorm/",
        "tests/nvrtc/allreduce_rmsnorm.rs: each mode and the low-latency kernel (they share the collectives' handshakes)",
    ),
    (
        "src/ops/moe/",
        "tests/nvrtc/moe.rs: every kernel moe::prewarm_list lists, both modes",
    ),
    // The crate's documentation example (`//!` lines), not a kernel of the library.
    ("src/lib.rs", "rustdoc: the crate documentation's example"),
];

/// The corpus: every file of [`CORPUS_DIRS`] that holds kernels, as (path relative to the crate,
/// absolute path). `PGAS_CORPUS_DIRS=tests/corpus,..` keeps those folders of it only: the second
/// NVSHMEM version's run (scripts/test.sh) compiles what can differ between versions, the
/// NVSHMEM-facing text: the preludes, the intrinsic table's calls, which `tests/corpus` and
/// `tests/gpu_suite/kernels` cover row by row (`corpus_uses_every_intrinsic` in
/// codegen/tests/corpus.rs), and the NVSHMEM library of every wrapper in every type, which the
/// link test builds. The gallery's and the library's kernels add only kernel code.
fn corpus() -> Vec<(String, PathBuf)> {
    let dirs: Vec<&str> = match std::env::var("PGAS_CORPUS_DIRS") {
        Ok(v) => {
            let wanted: Vec<&str> = v.split(',').collect();
            let dirs: Vec<&str> = CORPUS_DIRS
                .iter()
                .copied()
                .filter(|d| wanted.contains(d))
                .collect();
            assert_eq!(
                dirs.len(),
                wanted.len(),
                "PGAS_CORPUS_DIRS={v}: each must be one of {CORPUS_DIRS:?}"
            );
            dirs
        }
        Err(_) => CORPUS_DIRS.to_vec(),
    };
    // A file another test compiles with the specializations the library launches is not
    // compiled again here with sample values.
    files_of(&dirs)
        .into_iter()
        .filter(|(f, _)| !COMPILED_ELSEWHERE.iter().any(|(p, _)| f.starts_with(p)))
        .collect()
}

/// Every file of `dirs` that holds kernels, as [`corpus`] gives them.
fn files_of(dirs: &[&str]) -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(root.join(dir)).expect("the folder exists") {
            let path = entry.expect("readable entry").path();
            if path.extension().is_some_and(|e| e == "rs") {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                files.push((format!("{dir}/{name}"), path));
            }
        }
    }
    files.sort();
    files
}

/// A sample value for a comptime parameter of type `s` (booleans are 0/1).
fn sample(s: Scalar) -> i128 {
    match s {
        Scalar::Bool => 1,
        _ => 4,
    }
}

fn specializations(file: &str, k: &CompiledKernel) -> Vec<Spec> {
    let comptime: Vec<(&str, i128)> = k
        .params
        .iter()
        .filter_map(|p: &KernelParam| match p.kind {
            ParamKind::Comptime(s) => Some((p.name.as_str(), sample(s))),
            // `ReduceOp::Max`: a reduction every element type has.
            ParamKind::ComptimeOp => Some((p.name.as_str(), 3)),
            _ => None,
        })
        .collect();
    variants()
        .iter()
        .map(|&(variant, checked)| {
            let (source, name) = specialize(k.source(checked), &k.cuda_name, variant, &comptime);
            Spec {
                file: file.to_owned(),
                name,
                source,
                prelude: k.prelude,
            }
        })
        .collect()
}

/// The variants each kernel is compiled in: plain and checked, or the plain one alone under
/// `PGAS_CORPUS_VARIANTS=plain`, which the second NVSHMEM version's run sets (scripts/test.sh):
/// the checked variant adds pgas's own checks (bounds, PEs, warps), whose helpers and wrappers
/// every compile parses with the prelude and the NVSHMEM library holds, so nothing in it that
/// the version could change is left out.
fn variants() -> &'static [(&'static str, bool)] {
    match std::env::var("PGAS_CORPUS_VARIANTS").as_deref() {
        Err(_) | Ok("plain,checked") => &[("plain", false), ("checked", true)],
        Ok("plain") => &[("plain", false)],
        Ok(v) => panic!("PGAS_CORPUS_VARIANTS={v}: plain, or plain,checked"),
    }
}

/// The JIT's options for `source` (sm_90a where it uses wgmma or TMA) with
/// `--Ofast-compile=max` (see the module doc).
fn options(tc: &Toolchain, source: &str) -> Vec<String> {
    let mut o = tc.options(ARCH, source);
    if !o.iter().any(|x| x.starts_with("--Ofast-compile")) {
        o.push("--Ofast-compile=max".to_owned());
    }
    o
}

/// A unit of work: specializations of one prelude as one program, or one specialization (after
/// its batch failed or warned, to say which kernel is at fault).
enum Job {
    Batch(Vec<Spec>),
    Single(Spec),
}

/// Runs `job`; returns the problems found and the jobs it leaves to do.
fn run(tc: &Toolchain, job: Job) -> (Vec<String>, Vec<Job>) {
    match job {
        Job::Batch(specs) => {
            let kind = format!("{:?}", specs[0].prelude).to_lowercase();
            let name = format!("pgas_corpus_batch_{kind}");
            let sources: Vec<&str> = specs.iter().map(|s| s.source.as_str()).collect();
            let outcome = match batch(specs[0].prelude.text(), &sources) {
                None => Err("sources do not start with their prelude".to_owned()),
                Some(src) => match tc.compile_with(&src, &name, ARCH, &options(tc, &src)) {
                    Ok(out) if out.warnings().count() == 0 => {
                        crate::keep_cubin(&name, &out.cubin);
                        Ok(())
                    }
                    Ok(out) => Err(format!("{} warning lines", out.warnings().count())),
                    Err(e) => Err(e
                        .to_string()
                        .lines()
                        .take(3)
                        .collect::<Vec<_>>()
                        .join(" | ")),
                },
            };
            match outcome {
                Ok(()) => (Vec::new(), Vec::new()),
                Err(why) => {
                    println!(
                        "a {kind} batch is not clean ({why}); compiling its kernels one by one"
                    );
                    (Vec::new(), specs.into_iter().map(Job::Single).collect())
                }
            }
        }
        Job::Single(s) => {
            match tc.compile_with(&s.source, &s.name, ARCH, &options(tc, &s.source)) {
                Ok(out) if out.warnings().count() == 0 => (Vec::new(), Vec::new()),
                Ok(out) => (
                    vec![format!("{}: {}: warnings:\n{}", s.file, s.name, out.log)],
                    Vec::new(),
                ),
                Err(e) => (vec![format!("{}: {e}", s.file)], Vec::new()),
            }
        }
    }
}

/// Every `.rs` file below `dir` (relative to the crate), recursively.
fn rust_files(root: &Path, dir: &str, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(root.join(dir)).expect("the folder exists") {
        let path = entry.expect("readable entry").path();
        let name = format!("{dir}/{}", path.file_name().unwrap().to_string_lossy());
        if path.is_dir() {
            rust_files(root, &name, out);
        } else if name.ends_with(".rs") {
            out.push(name);
        }
    }
}

/// A new fused operation's folder, or any file of the library that holds kernels, is compiled
/// by NVRTC in CI: it is in the corpus ([`CORPUS_DIRS`]) or in [`COMPILED_ELSEWHERE`]. Without
/// this, a folder left out of the list would go unchecked.
#[test]
fn every_kernel_file_of_the_library_is_compiled_in_ci() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(root, "src", &mut files);
    let in_corpus: Vec<String> = files_of(CORPUS_DIRS).into_iter().map(|(f, _)| f).collect();
    let missing: Vec<&String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(root.join(f)).expect("readable source");
            text.contains("#[pgas_kernel")
                && !in_corpus.contains(f)
                && !COMPILED_ELSEWHERE.iter().any(|(p, _)| f.starts_with(p))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "these files hold kernels that no NVRTC test compiles: {missing:?}. Fix: add their \
         folder to CORPUS_DIRS in tests/nvrtc/corpus.rs (or, where another test compiles the \
         specializations the library launches, to COMPILED_ELSEWHERE with that test's name)"
    );
}

#[test]
fn every_corpus_kernel_compiles_without_warnings() {
    let tc = crate::toolchain();
    // PGAS_CORPUS=amo,rma limits the run to those files (for quick local checks).
    let only: Option<Vec<String>> = std::env::var("PGAS_CORPUS")
        .ok()
        .map(|v| v.split(',').map(str::to_owned).collect());
    let mut specs = Vec::new();
    let mut problems = Vec::new();
    for (file, path) in corpus() {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if only.as_ref().is_some_and(|o| !o.contains(&stem)) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable corpus file");
        match compile_file(&text, &file) {
            Ok(kernels) => specs.extend(kernels.iter().flat_map(|k| specializations(&file, k))),
            Err(errors) => problems.extend(errors.iter().map(|e| format!("{file}: codegen: {e}"))),
        }
    }
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    // Per prelude, one program per core: each pays the header parse once.
    let n_specs = specs.len();
    // One program per prelude: NVRTC runs one compile at a time in a process (docs/jit.md), so
    // more programs would only parse the headers again.
    let mut jobs = Vec::new();
    for prelude in Prelude::ALL {
        let (group, rest): (Vec<Spec>, Vec<Spec>) =
            specs.into_iter().partition(|s| s.prelude == prelude);
        specs = rest;
        if !group.is_empty() {
            jobs.push(Job::Batch(group));
        }
    }
    let n_programs = jobs.len();
    let jobs = Mutex::new(jobs);
    let found = Mutex::new(problems);
    let busy = std::sync::atomic::AtomicUsize::new(0);
    let t = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let job = {
                    let mut q = jobs.lock().unwrap();
                    match q.pop() {
                        Some(j) => {
                            busy.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            j
                        }
                        // Others may still turn a failed batch into single jobs.
                        None if busy.load(std::sync::atomic::Ordering::SeqCst) > 0 => {
                            drop(q);
                            std::thread::sleep(std::time::Duration::from_millis(50));
                            continue;
                        }
                        None => return,
                    }
                };
                let (p, more) = run(&tc, job);
                found.lock().unwrap().extend(p);
                jobs.lock().unwrap().extend(more);
                busy.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            });
        }
    });
    let found = found.into_inner().unwrap();
    println!(
        "{n_specs} specializations in {n_programs} NVRTC programs compiled in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert!(found.is_empty(), "{}", found.join("\n\n"));
}

/// Whether the link test builds the collective objects and links the kernels that call them
/// (the Full group): unless `PGAS_LINK_OBJECTS=0`, which the second NVSHMEM version's run sets
/// (scripts/test.sh). An object is one NVSHMEM collective wrapper compiled alone, about 5 s
/// each; `every_corpus_kernel_compiles_without_warnings` compiles the same wrappers inline
/// against the same headers, and how an object links does not depend on the version. So in that
/// run the objects would check again, at about 100 s, what the inline compile checks.
fn link_objects() -> bool {
    match std::env::var("PGAS_LINK_OBJECTS").as_deref() {
        Err(_) | Ok("1") => true,
        Ok("0") => false,
        Ok(v) => panic!("PGAS_LINK_OBJECTS={v}: 0 or 1"),
    }
}

/// The link-time path (docs/jit.md): every specialization, batched per prelude, through NVRTC
/// to LTO-IR and nvJitLink against the NVSHMEM library of its prelude (built here from
/// NVSHMEM's headers: a different NVSHMEM fails its checks) and, for the collective kernels,
/// the object of each NVSHMEM collective they call. The image must hold every kernel and one
/// NVSHMEM device state, which `nvshmemx_cumodule_init` fills in.
#[test]
fn every_linkable_kernel_links_against_the_nvshmem_library() {
    // `--Ofast-compile=max` for the collective objects, as for the corpus above, and the link at
    // `-O0`: what this checks (every symbol resolves, no warning, every kernel in the image)
    // does not depend on optimization; the JIT links at `-O3` on the GPU machines.
    let tc = crate::toolchain()
        .with_fast_compile("max")
        .expect("a valid level")
        .with_link_time(LinkTime::All)
        .with_unoptimized_link();
    assert!(
        tc.linker().is_some(),
        "no libnvJitLink.so.13 beside NVRTC in {} (scripts/deps.sh installs the nvidia-nvjitlink wheel)",
        tc.cuda().lib_dir.display()
    );
    let mut specs = Vec::new();
    for (file, path) in corpus() {
        let text = std::fs::read_to_string(&path).expect("readable corpus file");
        let kernels = compile_file(&text, &file).unwrap_or_else(|e| panic!("{file}: {e:?}"));
        specs.extend(kernels.iter().flat_map(|k| specializations(&file, k)));
    }
    // The sm_90a kernels (wgmma, TMA, clusters) as programs of their own: their LTO-IR is
    // sm_90a's and their link targets sm_90a (the JIT never batches them with others). A
    // collective kernel with sm_90a instructions stays inline, so the full prelude has none.
    let sm90a = |s: &&Spec| s.source.contains(pgas_codegen::SM90A_MARKER);
    let mut groups: Vec<(String, Vec<&Spec>)> = Vec::new();
    for prelude in [Prelude::P2p, Prelude::Barrier, Prelude::Full] {
        if prelude == Prelude::Full && !link_objects() {
            println!("the Full group left out: PGAS_LINK_OBJECTS=0");
            continue;
        }
        let (specific, plain): (Vec<&Spec>, Vec<&Spec>) = specs
            .iter()
            .filter(|s| s.prelude == prelude)
            .partition(sm90a);
        groups.push((format!("{prelude:?}"), plain));
        if prelude != Prelude::Full && !specific.is_empty() {
            groups.push((format!("{prelude:?} sm_90a"), specific));
        }
    }
    assert!(
        groups
            .iter()
            .any(|(g, v)| g.ends_with("sm_90a") && !v.is_empty()),
        "the corpus has sm_90a kernels (src/gemm), so some group must link for sm_90a"
    );
    // The groups side by side: most of a link-time compile is nvJitLink's (and the collective
    // objects'), which runs in parallel.
    let programs: Vec<String> = groups
        .iter()
        .map(|(_, group)| {
            let sources: Vec<&str> = group.iter().map(|s| s.source.as_str()).collect();
            batch(group[0].prelude.text(), &sources).expect("sources start with their prelude")
        })
        .collect();
    let outs: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = programs
            .iter()
            .map(|program| {
                s.spawn(|| {
                    let t = std::time::Instant::now();
                    let out = tc.compile_program(None, program, "pgas_corpus_linked", ARCH);
                    (out, t.elapsed().as_secs_f64())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a link-time compile's thread"))
            .collect()
    });
    for ((prelude, group), (out, secs)) in groups.into_iter().zip(outs) {
        let out = out.unwrap_or_else(|e| panic!("{prelude}: {e}"));
        println!(
            "{} {prelude} specializations linked in {secs:.2} s (library included)",
            group.len(),
        );
        let has = |name: &str| out.cubin.windows(name.len()).any(|w| w == name.as_bytes());
        assert_eq!(
            Elf::new(&out.cubin).symbols("nvshmemi_device_state_d"),
            1,
            "{prelude}: not one NVSHMEM device state"
        );
        for s in &group {
            assert!(
                has(&s.name),
                "{prelude}: {} ({}) missing from the image",
                s.name,
                s.file
            );
        }
        assert_eq!(out.warnings().count(), 0, "{prelude}: {}", out.log);
    }
}

/// The JIT's quick tier (`docs/jit.md`, "Tiers"): a collective kernel's NVSHMEM collective is
/// built once, into the cache, and the next kernel that calls it links it: the cache gains that
/// kernel and nothing else.
#[test]
fn the_next_collective_kernel_links_the_object_the_first_one_built() {
    let tc = crate::toolchain()
        .quick_tier()
        .expect("nvJitLink beside NVRTC: the quick tier applies");
    // Bounded to 384 threads: a register cap (168) no other test's kernels have, so no other
    // test of this process has the object in memory already.
    let dir = std::env::temp_dir().join(format!("pgas-corpus-objects-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let disk = pgas_runtime::jit::disk::DiskCache::open(&dir).unwrap();
    let kernels = compile_file(
        r#"
        #[pgas_kernel(max_threads = 384)]
        fn first(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>) {
            let n = dst.len();
            reduce_block(team, &mut dst[0..n], &src[0..n], ReduceOp::Sum);
        }
        #[pgas_kernel(max_threads = 384)]
        fn next(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, k: u32) {
            let n = dst.len();
            for _ in 0..k {
                reduce_block(team, &mut dst[0..n], &src[0..n], ReduceOp::Sum);
            }
        }
        "#,
        "objects.rs",
    )
    .unwrap();
    let entries = || std::fs::read_dir(&dir).unwrap().count();
    let mut counts = Vec::new();
    let mut times = Vec::new();
    for k in &kernels {
        let (source, name) = specialize(k.source(false), &k.cuda_name, "plain", &[]);
        let t = std::time::Instant::now();
        let (out, cached) = tc
            .compile_cached(Some(&disk), None, &source, &name, ARCH)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        times.push(t.elapsed().as_secs_f64());
        assert!(!cached);
        assert_eq!(Elf::new(&out.cubin).symbols("nvshmemi_device_state_d"), 1);
        assert_eq!(
            Elf::new(&out.cubin).symbols("pgas_nv_reduce_block_f32_sum"),
            1
        );
        counts.push(entries());
    }
    println!(
        "first collective kernel {:.2} s (its object built), next {:.2} s",
        times[0], times[1]
    );
    // The first: the reduction's object and the kernel (and the barrier library, unless another
    // test of this process built it into its own cache first); the next: its kernel alone.
    assert!(
        counts[0] >= 2 && counts[1] == counts[0] + 1,
        "cache entries after each kernel: {counts:?}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A collective kernel's builds keep to the register cap its collective object was built for:
/// an unbounded kernel (a loop around `reduce_block`, as `benches/jit_costs.rs`'s
/// `unbounded_reduce_loop`) linked with an object of at most 128 registers uses at most 128
/// itself, so blocks of 512 threads fit, as the cap promises; its full build (inline) keeps to
/// the same cap, so swapping it in never refuses a launch the quick build ran. (On an H200,
/// before the inline compile passed the cap, the full build counted 130 and refused 512.)
#[test]
fn both_builds_of_a_collective_kernel_keep_to_its_objects_register_cap() {
    let tc = crate::toolchain()
        .quick_tier()
        .expect("nvJitLink beside NVRTC: the quick tier applies");
    let kernels = compile_file(
        r#"
        #[pgas_kernel]
        fn unbounded_reduce(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>, rounds: u32) {
            let n = dst.len();
            for _ in 0..rounds {
                reduce_block(team, &mut dst[0..n], &src[0..n], ReduceOp::Sum);
            }
        }
        "#,
        "unbounded.rs",
    )
    .unwrap();
    let (source, name) = specialize(
        kernels[0].source(true),
        &kernels[0].cuda_name,
        "checked",
        &[],
    );
    let cap = pgas_codegen::nvcall::register_cap(&source);
    assert_eq!(
        cap, 128,
        "an unbounded kernel's cap lets blocks of 512 threads run"
    );
    // The quick build, and the full one swapped in for it: both keep to the cap, so the full
    // build runs every block the quick one ran.
    for (build, tc) in [("quick", &tc), ("full", &crate::toolchain())] {
        let out = tc
            .compile_program(None, &source, &name, ARCH)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let regs = Elf::new(&out.cubin)
            .max_registers()
            .expect("register counts in the image");
        println!("{name}, {build} build: at most {regs} registers in any function (cap {cap})");
        assert!(
            regs > 0 && regs <= cap,
            "{build} build: {regs} registers, over the cap of {cap}"
        );
    }
}

/// An sm_90a kernel that calls no NVSHMEM (`pgas::gemm`'s, wgmma and TMA) compiles without
/// NVSHMEM's headers or library whether link-time compiles are on (the default) or off
/// (`PGAS_JIT_LTO=off`): one cache entry a kernel either way (no library is built beside it),
/// no NVSHMEM device state in its machine code (the JIT loads it without
/// `nvshmemx_cumodule_init`), and the same machine code (the kernel's `.text` section, byte for
/// byte) for the plain variant at the configurations `pgas::gemm` picks for skinny and square
/// shapes, bf16 and FP8; for a GPU that is not sm_90 it is refused. (An sm_90a kernel that calls
/// NVSHMEM links: `every_linkable_kernel_links_against_the_nvshmem_library`.)
#[test]
fn an_sm90a_kernel_without_nvshmem_compiles_alone_in_either_mode() {
    use pgas::gemm::{gemm_bf16_sm90, Chunking, GemmConfig};
    let spec = &gemm_bf16_sm90::SPEC;
    let names = spec.params.iter().filter_map(|p| match p.kind {
        pgas::kernel::ParamKind::Comptime(_) => Some(p.name),
        _ => None,
    });
    let names: Vec<&str> = names.collect();
    let linked = crate::toolchain();
    assert!(linked.linker().is_some(), "no nvJitLink beside NVRTC");
    let inline = crate::toolchain().with_link_time(LinkTime::Off);
    let dirs = ["linked", "inline"].map(|how| {
        let dir =
            std::env::temp_dir().join(format!("pgas-corpus-sm90a-{how}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let disk = pgas_runtime::jit::disk::DiskCache::open(&dir).unwrap();
        (how, dir, disk)
    });
    // M = 128 (8 stages, 64-wide tiles, no cluster) and 8192 (clusters of 2, 256-wide), FP8,
    // M = 64 (the `half` specialization, K split over 256-wide tiles) and a grouped GEMM.
    let whole = |m| GemmConfig::for_shape(m, 8192, 8192, 132);
    let configs = [
        (whole(128), Chunking::Whole, false),
        (whole(8192), Chunking::Whole, false),
        (whole(8192), Chunking::Whole, true),
        (whole(64), Chunking::Half, false),
        (
            GemmConfig::for_grouped(8192, 4096, 132),
            Chunking::Grouped,
            false,
        ),
    ];
    for (cfg, rows, fp8) in configs {
        let ct = cfg.comptime(rows, fp8);
        let comptime: Vec<(&str, i128)> = names.iter().copied().zip(ct).collect();
        let (source, name) = specialize(spec.plain_source, spec.cuda_name, "plain", &comptime);
        let mut text = Vec::new();
        for (tc, (how, _, disk)) in [&linked, &inline].into_iter().zip(&dirs) {
            let t = std::time::Instant::now();
            let (out, cached) = tc
                .compile_cached(Some(disk), None, &source, &name, ARCH)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            println!("{name} {how}: {:.2} s", t.elapsed().as_secs_f64());
            assert!(!cached);
            assert_eq!(out.warnings().count(), 0, "{}", out.log);
            assert_eq!(Elf::new(&out.cubin).symbols("nvshmemi_device_state_d"), 0);
            if *how == "inline" {
                crate::keep_cubin(&name, &out.cubin);
            }
            text.push(
                Elf::new(&out.cubin)
                    .section(&format!(".text.{name}"))
                    .expect("the kernel's code")
                    .to_vec(),
            );
        }
        assert!(
            text[0] == text[1],
            "{name}: the linked kernel's machine code differs from the inline one's ({} against {} bytes)",
            text[0].len(),
            text[1].len()
        );
    }
    // Each kernel alone, in either mode: no library.
    let entries = dirs.map(|(_, dir, _)| {
        let n = std::fs::read_dir(&dir).unwrap().count();
        std::fs::remove_dir_all(dir).unwrap();
        n
    });
    let k = configs.len();
    assert_eq!(entries, [k, k], "cache entries linked, inline");
    let (source, name) = specialize(spec.plain_source, spec.cuda_name, "plain", &[]);
    let e = linked
        .compile_program(None, &source, &name, (8, 0))
        .unwrap_err();
    assert!(e.to_string().contains("sm_90a"), "{e}");
}

/// An ELF64 image (a CUBIN), read in place: its section headers, the section of a name, the
/// symbols of a name.
struct Elf<'a>(&'a [u8]);

/// The fields of a section header the tests read.
struct Section {
    /// `sh_type` (2: a symbol table).
    kind: usize,
    /// `sh_name`: the name's offset in the section-name string table.
    name: usize,
    offset: usize,
    size: usize,
    /// `sh_link`: for a symbol table, its string table's section.
    link: usize,
    entsize: usize,
}

impl<'a> Elf<'a> {
    fn new(bytes: &'a [u8]) -> Elf<'a> {
        assert_eq!(&bytes[..5], b"\x7fELF\x02", "a CUBIN is a 64-bit ELF image");
        Elf(bytes)
    }

    fn int(&self, at: usize, width: usize) -> usize {
        let mut le = [0u8; 8];
        le[..width].copy_from_slice(&self.0[at..at + width]);
        u64::from_le_bytes(le) as usize
    }

    fn header(&self, i: usize) -> Section {
        let sh = self.int(0x28, 8) + i * self.int(0x3a, 2);
        Section {
            kind: self.int(sh + 4, 4),
            name: self.int(sh, 4),
            offset: self.int(sh + 0x18, 8),
            size: self.int(sh + 0x20, 8),
            link: self.int(sh + 0x28, 4),
            entsize: self.int(sh + 0x38, 8),
        }
    }

    fn sections(&self) -> impl Iterator<Item = Section> + '_ {
        (0..self.int(0x3c, 2)).map(|i| self.header(i))
    }

    /// The NUL-terminated string at `at` of the string table `table`.
    fn string(&self, table: &Section, at: usize) -> &'a [u8] {
        let from = table.offset + at;
        let len = self.0[from..].iter().position(|&b| b == 0).unwrap_or(0);
        &self.0[from..from + len]
    }

    /// The bytes of the section named `name`, if there is one.
    fn section(&self, name: &str) -> Option<&'a [u8]> {
        let names = self.header(self.int(0x3e, 2));
        self.sections()
            .find(|sh| self.string(&names, sh.name) == name.as_bytes())
            .map(|sh| &self.0[sh.offset..sh.offset + sh.size])
    }

    /// The most registers any function of the image uses (`EIATTR_REGCOUNT`, 0x2f, in its
    /// `.nv.info` section): what a thread of a kernel that may call any of them needs. Entries
    /// are a format byte, an attribute byte and two bytes that hold the value (formats 1-3) or
    /// the size of the value that follows (format 4, here a symbol index and its count).
    fn max_registers(&self) -> Option<u32> {
        let info = self.section(".nv.info")?;
        let (mut at, mut most) = (0, None);
        while at + 4 <= info.len() {
            let (format, attr) = (info[at], info[at + 1]);
            let size = u16::from_le_bytes([info[at + 2], info[at + 3]]) as usize;
            at += 4;
            if format == 4 {
                if attr == 0x2f && size == 8 && at + 8 <= info.len() {
                    let count = u32::from_le_bytes(info[at + 4..at + 8].try_into().unwrap());
                    most = most.max(Some(count));
                }
                at += size;
            }
        }
        most
    }

    /// How many symbols are named `name`: an image whose inputs each kept a device state of
    /// their own would have several, and `nvshmemx_cumodule_init` would fill in one.
    fn symbols(&self, name: &str) -> usize {
        self.sections()
            .filter(|sh| sh.kind == 2)
            .map(|symtab| {
                let strings = self.header(symtab.link);
                (symtab.offset..symtab.offset + symtab.size)
                    .step_by(symtab.entsize)
                    .filter(|&sym| self.string(&strings, self.int(sym, 4)) == name.as_bytes())
                    .count()
            })
            .sum()
    }
}
