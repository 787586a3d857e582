//! Compiling a plan's programs: one after the other in this process (NVRTC runs one compile at
//! a time per process), beside the helper processes, with a progress line per program when a
//! build is long enough to need one.

use std::path::PathBuf;

use super::batch::{self, Image};
use super::disk::{CacheKey, DiskCache};
use super::helpers;
use super::key::{Keyed, LinkInputs};
use super::library;
use super::plan::Program;
use super::source::Source;
use super::toolchain::Toolchain;
use crate::error::Result;

/// A build compiling at least this many kernels prints a line per batch (a first run of many
/// kernels takes seconds, and should say what it is doing).
pub(super) const PROGRESS_MIN: usize = 4;

/// Programs compiled with one toolchain, and the helper processes that may compile them beside
/// this one (the helper executable and how many may start).
pub(crate) struct Stage<'a> {
    pub tc: &'a Toolchain,
    pub programs: Vec<Program>,
    pub helpers: Option<(PathBuf, usize)>,
}

/// Compiles every stage's programs for `arch`, and returns each kernel with its image or its
/// compile error. The outer `Err` is a failure no kernel is to blame for (no NVRTC).
///
/// Every stage's helpers start before this process compiles anything, so stages overlap: the
/// few slow programs of the first (the quick builds of collective kernels, which build
/// NVSHMEM's objects) do not hold up the many of the next while CPUs idle.
pub(crate) fn compile(
    disk: Option<&DiskCache>, arch: (u32, u32), stages: Vec<Stage<'_>>,
) -> Result<Vec<(Keyed, Result<Image>)>> {
    let dump = std::env::var_os("PGAS_DUMP_DIR").map(PathBuf::from);
    let total: usize = stages
        .iter()
        .flat_map(|s| &s.programs)
        .map(|(_, m)| m.len())
        .sum();
    let progress = total >= PROGRESS_MIN;
    let started = std::time::Instant::now();
    // The helpers, dropped (ended) once every program is built.
    let helpers: Vec<helpers::Helpers> = stages
        .iter()
        .filter_map(|stage| start_helpers(stage, disk, arch))
        .chain(start_library_helpers(&stages, disk, arch))
        .collect();
    if progress && !helpers.is_empty() {
        eprintln!(
            "pgas: JIT: {} helper process(es) compile beside this one (PGAS_JIT_HELPERS=0: none)",
            helpers.iter().map(helpers::Helpers::count).sum::<usize>()
        );
    }
    // Sweeps over the programs skip those another process holds (a PE of this node compiling
    // the same kernels) and those whose library or collective objects another process is
    // building (the helpers' first jobs): this process compiles what nobody has taken instead of
    // waiting. Only when a sweep builds nothing does it wait, for the first program left, which
    // it then finds cached or builds; then it sweeps again.
    let all: Vec<(&Toolchain, &Program)> = stages
        .iter()
        .flat_map(|s| s.programs.iter().map(move |p| (s.tc, p)))
        .collect();
    let n_programs = all.len();
    let mut outcomes: Vec<Option<Vec<Result<Image>>>> = all.iter().map(|_| None).collect();
    let build = |g: usize, wait: bool| -> Result<Option<Vec<Result<Image>>>> {
        let (tc, (prelude, members)) = all[g];
        let t = std::time::Instant::now();
        let _span = tracing::info_span!(
            "pgas.compile_batch",
            kernels = members.len(),
            prelude = batch::prelude_name(*prelude)
        )
        .entered();
        let members: Vec<&Keyed> = members.iter().collect();
        let out = batch::compile(tc, disk, dump.as_deref(), *prelude, &members, arch, wait)?;
        if let (Some(_), true) = (&out, progress) {
            let sources: Vec<&Source> = members.iter().map(|m| &m.src).collect();
            eprintln!(
                "pgas: JIT: program {}/{n_programs}: {}, {}, {:.2} s",
                g + 1,
                program_members(&sources),
                batch::prelude_name(*prelude),
                t.elapsed().as_secs_f64()
            );
        }
        Ok(out)
    };
    let inputs: Vec<Vec<CacheKey>> = all
        .iter()
        .map(|(tc, (_, members))| link_keys(tc, members, arch))
        .collect();
    while let Some(first_left) = outcomes.iter().position(Option::is_none) {
        let mut built_any = false;
        for g in first_left..n_programs {
            if outcomes[g].is_some() || in_progress(&inputs[g], disk) {
                continue;
            }
            outcomes[g] = build(g, false)?;
            built_any |= outcomes[g].is_some();
        }
        if !built_any {
            outcomes[first_left] = build(first_left, true)?;
        }
    }
    // Every program is built: a helper still running has nothing left to do.
    drop(helpers);
    if progress {
        eprintln!(
            "pgas: JIT: {total} kernel(s) compiled or loaded in {:.2} s",
            started.elapsed().as_secs_f64()
        );
    }
    let mut built = Vec::with_capacity(total);
    let programs = stages.into_iter().flat_map(|s| s.programs);
    for ((_, members), outcome) in programs.zip(outcomes) {
        let outcome = outcome.expect("the sweeps end once every program is built");
        built.extend(members.into_iter().zip(outcome));
    }
    Ok(built)
}

/// The helpers of one stage, started on its programs with its toolchain's settings; `None`
/// without a helper executable or a disk cache, or with nothing to do beside the one program
/// this process compiles itself.
///
/// The collective objects the programs link and nobody has built yet come first in the
/// helpers' list (after the program this process starts with): a kernel calling several of
/// NVSHMEM's collectives would otherwise build their objects one after the other in the one
/// process that compiles it, where the helpers build them side by side (`docs/jit.md`,
/// "Tiers").
fn start_helpers(
    stage: &Stage<'_>, disk: Option<&DiskCache>, arch: (u32, u32),
) -> Option<helpers::Helpers> {
    let (Some((exe, count)), Some(disk)) = (&stage.helpers, disk) else {
        return None;
    };
    let mut programs = stage.programs.iter().filter_map(|(prelude, members)| {
        let members: Vec<&Keyed> = members.iter().collect();
        batch::job(stage.tc, *prelude, &members, arch).ok()
    });
    let mut jobs: Vec<_> = programs.next().into_iter().collect();
    jobs.extend(object_jobs(stage, disk, arch));
    jobs.extend(programs);
    if jobs.len() < 2 {
        return None;
    }
    let count = (*count).min(jobs.len() - 1);
    helpers::Helpers::start(exe, disk, &jobs, arch, count, &stage.tc.helper_env())
}

/// The keys of the NVSHMEM libraries and collective objects the kernels of `members` link.
fn link_keys(tc: &Toolchain, members: &[Keyed], arch: (u32, u32)) -> Vec<CacheKey> {
    let mut keys = Vec::new();
    for inputs in members_inputs(tc, members, arch) {
        keys.push(inputs.library);
        keys.extend(inputs.objects.iter().map(|(_, key)| *key));
    }
    keys.sort_unstable_by_key(|k| *k.as_bytes());
    keys.dedup();
    keys
}

/// Whether another process is building one of `keys` now: not built, and its entry locked
/// ([`DiskCache::held`]).
fn in_progress(keys: &[CacheKey], disk: Option<&DiskCache>) -> bool {
    disk.is_some_and(|d| {
        keys.iter()
            .any(|k| !library::built(k, Some(d)) && d.held(k))
    })
}

/// What each of `stage`'s link-time kernels links beside its own code.
fn link_inputs<'a>(
    stage: &'a Stage<'_>, arch: (u32, u32),
) -> impl Iterator<Item = LinkInputs> + 'a {
    stage
        .programs
        .iter()
        .flat_map(move |(_, members)| members_inputs(stage.tc, members, arch))
}

/// What each link-time kernel of `members` links beside its own code.
fn members_inputs<'a>(
    tc: &'a Toolchain, members: &'a [Keyed], arch: (u32, u32),
) -> impl Iterator<Item = LinkInputs> + 'a {
    members.iter().filter_map(move |k| {
        let prelude = tc.links(&k.src.text)?;
        Some(tc.link_inputs(prelude, &k.src.text, arch))
    })
}

/// The collective objects `stage`'s link-time programs link that are not built yet, each once,
/// as helper jobs under the keys their links look for.
fn object_jobs(
    stage: &Stage<'_>, disk: &DiskCache, arch: (u32, u32),
) -> Vec<(helpers::Job, CacheKey)> {
    let mut jobs: Vec<(helpers::Job, CacheKey)> = Vec::new();
    for inputs in link_inputs(stage, arch) {
        for (object, key) in &inputs.objects {
            if !library::built(key, Some(disk)) && jobs.iter().all(|(_, k)| k != key) {
                jobs.push((helpers::Job::object(object, inputs.registers), *key));
            }
        }
    }
    jobs
}

/// A helper that builds the NVSHMEM library the stages' link-time kernels link, when it is not
/// built yet and neither are the collective objects they link: NVRTC compiles one program at a
/// time in a process, so on a fresh machine the first kernel calling a collective would build
/// its object and then the library, one after the other. The build makes the objects (the
/// longer part, with its NVRTC already loaded) while the helper makes the library, which the
/// build's link then finds in the cache. `None` when there is no such library, or no helper
/// executable or disk cache (the library travels through it).
fn start_library_helpers(
    stages: &[Stage<'_>], disk: Option<&DiskCache>, arch: (u32, u32),
) -> Option<helpers::Helpers> {
    let disk = disk?;
    let (jobs, env) = library_jobs(stages, disk, arch)?;
    let exe = helpers::helper_exe()?;
    helpers::Helpers::start(&exe, disk, &jobs, arch, jobs.len(), &env)
}

/// The jobs of [`start_library_helpers`], each library once, and the environment of the
/// toolchain that keys them; `None` when there are none.
fn library_jobs(
    stages: &[Stage<'_>], disk: &DiskCache, arch: (u32, u32),
) -> Option<(Vec<(helpers::Job, CacheKey)>, HelperEnv)> {
    let mut jobs: Vec<(helpers::Job, CacheKey)> = Vec::new();
    let mut env = None;
    for stage in stages {
        for inputs in link_inputs(stage, arch) {
            let building_objects = inputs
                .objects
                .iter()
                .any(|(_, key)| !library::built(key, Some(disk)));
            let key = inputs.library;
            if building_objects
                && !library::built(&key, Some(disk))
                && jobs.iter().all(|(_, k)| *k != key)
            {
                jobs.push((helpers::Job::library(inputs.prelude), key));
                env.get_or_insert(stage.tc.helper_env());
            }
        }
    }
    Some((jobs, env?))
}

/// What [`Toolchain::helper_env`] gives.
type HelperEnv = [(&'static str, String); 2];

/// What a progress line says a program holds: its kernels by Rust name when there are few (a
/// slow program then names its culprit), else their number.
fn program_members(sources: &[&Source]) -> String {
    match sources {
        [one] => format!("1 kernel ({})", one.display),
        few if few.len() <= 3 => {
            let names: Vec<&str> = few.iter().map(|s| s.display.as_str()).collect();
            format!("{} kernels ({})", few.len(), names.join(", "))
        }
        many => format!("{} kernels", many.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jit::plan::Plan;

    fn source(name: &str) -> Source {
        Source {
            display: name.to_owned(),
            cuda_name: format!("pgas_{name}"),
            text: String::new(),
            batchable: true,
        }
    }

    #[test]
    fn progress_names_the_kernels_of_small_programs() {
        let (a, b, c, d) = (source("a"), source("b"), source("c"), source("d"));
        assert_eq!(program_members(&[&a]), "1 kernel (a)");
        assert_eq!(program_members(&[&a, &b, &c]), "3 kernels (a, b, c)");
        assert_eq!(program_members(&[&a, &b, &c, &d]), "4 kernels");
    }

    /// A kernel of the language calling one of NVSHMEM's collectives (`reduce_block`).
    const ONE_SUM: &str = r#"
            #[pgas_kernel(max_threads = 256)]
            fn one_sum(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>) {
                let n = dst.len();
                reduce_block(team, &mut dst[0..n], &src[0..n], ReduceOp::Sum);
            }
            "#;

    /// The quick toolchain, an empty cache in a folder of its own (`tag`), and the text of the
    /// one kernel of `rust` (a file of the kernel language).
    fn fixture(tag: &str, rust: &str) -> (Toolchain, DiskCache, PathBuf, String, String) {
        let Some(tc) = Toolchain::discover().ok().and_then(|t| t.quick_tier()) else {
            panic!("NVRTC and nvJitLink (PGAS_CUDA_HOME, scripts/deps.sh) for the quick tier");
        };
        let dir = std::env::temp_dir().join(format!("pgas-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let disk = DiskCache::open(&dir).unwrap();
        let kernels = pgas_codegen::compile_file(rust, &format!("{tag}.rs")).unwrap();
        let text = kernels[0].source(true).to_owned();
        (tc, disk, dir, text, kernels[0].cuda_name.clone())
    }

    /// A stage of the one kernel of `text` (compiled as `cuda_name`) for `arch`.
    fn stage<'t>(
        tc: &'t Toolchain, disk: &DiskCache, arch: (u32, u32), (text, cuda_name): (&str, &str),
    ) -> Stage<'t> {
        let src = Source {
            display: cuda_name.to_owned(),
            cuda_name: cuda_name.to_owned(),
            text: text.to_owned(),
            batchable: true,
        };
        let plan = Plan::new(tc, Some(disk), arch, std::iter::once((0, src)), 1);
        Stage {
            tc,
            programs: plan.programs,
            helpers: None,
        }
    }

    /// A stage of one collective kernel (`reduce_block`) on a fresh cache: the NVSHMEM library
    /// it links is a helper's job, under the key its link looks for; once its object is cached,
    /// nothing is (the library is then all the build has to make).
    #[test]
    fn the_library_goes_to_a_helper_only_while_the_objects_are_built_too() {
        let arch = (9, 0);
        let (tc, disk, dir, text, name) = fixture("library-jobs", ONE_SUM);
        let stages = [stage(&tc, &disk, arch, (&text, &name))];
        let (jobs, env) = library_jobs(&stages, &disk, arch).expect("the library is a job");
        let prelude = tc.links(&text).expect("the quick tier links it");
        let inputs = tc.link_inputs(prelude, &text, arch);
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].1, inputs.library);
        assert_eq!(jobs[0].0, helpers::Job::library(inputs.prelude));
        assert_eq!(env, tc.helper_env());
        let [(_, object)] = &inputs.objects[..] else {
            panic!("one collective object");
        };
        disk.store(object, b"an object").unwrap();
        assert!(library_jobs(&stages, &disk, arch).is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// The sweeps skip a collective kernel only while another process builds what it links:
    /// its object's entry locked and not yet stored, or its library's.
    #[test]
    fn a_program_whose_object_another_process_builds_is_left_for_a_later_sweep() {
        let arch = (9, 0);
        let (tc, disk, dir, text, name) = fixture("inputs-in-progress", ONE_SUM);
        let stage = stage(&tc, &disk, arch, (&text, &name));
        let prelude = tc.links(&text).expect("the quick tier links it");
        let inputs = tc.link_inputs(prelude, &text, arch);
        let object = inputs.objects[0].1;
        let keys = link_keys(&tc, &stage.programs[0].1, arch);
        assert_eq!(keys.len(), 2, "the library and the object");
        assert!(keys.contains(&inputs.library) && keys.contains(&object));
        assert!(!in_progress(&keys, Some(&disk)), "nobody builds yet");
        let building = disk.lock(&object).unwrap();
        assert!(in_progress(&keys, Some(&disk)), "its object is building");
        assert!(!in_progress(&keys, None), "without a cache, nobody else");
        disk.store(&object, b"an object").unwrap();
        assert!(
            !in_progress(&keys, Some(&disk)),
            "a stored object is built, held or not"
        );
        drop(building);
        let library = disk.lock(&inputs.library).unwrap();
        assert!(in_progress(&keys, Some(&disk)), "its library is building");
        drop(library);
        assert!(!in_progress(&keys, Some(&disk)));
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// While another process builds a collective kernel's object, the build compiles its
    /// other program first (its entry is cached while the object's lock is still held), then
    /// comes back to the collective kernel and finishes it.
    #[test]
    fn the_build_compiles_other_programs_while_an_object_is_built_elsewhere() {
        // Another architecture than the other tests': the library and the object this build
        // makes stay in the process's memory (`library::LOADED`), under keys that include it,
        // where the other tests expect them missing.
        let arch = (8, 0);
        let rust = format!(
            "{ONE_SUM}{}",
            r#"
            #[pgas_kernel]
            fn first_put(dst: &mut SymTensor<f32>, src: &SymTensor<f32>, pe: i32) {
                put_block(&mut dst[0..4], &src[0..4], pe);
            }
            "#
        );
        let (tc, disk, dir, _, _) = fixture("other-first", &rust);
        let kernels = pgas_codegen::compile_file(&rust, "other-first.rs").unwrap();
        let sources = kernels.iter().enumerate().map(|(i, k)| {
            let name = k.cuda_name.clone();
            let text = k.source(true).to_owned();
            let src = Source {
                display: name.clone(),
                cuda_name: name,
                text,
                batchable: true,
            };
            (i, src)
        });
        let plan = Plan::new(&tc, Some(&disk), arch, sources, 1);
        assert_eq!(
            plan.programs.len(),
            2,
            "a collective program and a point-to-point one"
        );
        let collective = &plan.programs[0].1[0];
        let put = plan.programs[1].1[0].key;
        let prelude = tc
            .links(&collective.src.text)
            .expect("the quick tier links it");
        let object = tc.link_inputs(prelude, &collective.src.text, arch).objects[0].1;
        let held = disk.lock(&object).unwrap();
        let stages = vec![Stage {
            tc: &tc,
            programs: plan.programs,
            helpers: None,
        }];
        std::thread::scope(|s| {
            let build = s.spawn(|| compile(Some(&disk), arch, stages));
            let t0 = std::time::Instant::now();
            let mut first = library::built(&put, Some(&disk));
            while !first && t0.elapsed().as_secs() < 60 && !build.is_finished() {
                std::thread::sleep(std::time::Duration::from_millis(20));
                first = library::built(&put, Some(&disk));
            }
            // Released unbuilt, as by a helper that failed: the build makes the object itself
            // (and a build waiting for it ends, before the assertion below can fail).
            drop(held);
            assert!(
                first,
                "the point-to-point program was not built while the object was held"
            );
            let built = build.join().unwrap().expect("NVRTC is there");
            assert_eq!(built.len(), 2);
            assert!(
                built.iter().all(|(_, image)| image.is_ok()),
                "both kernels build"
            );
        });
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A kernel calling two of NVSHMEM's collectives: on a fresh cache both objects are helper
    /// jobs of its stage, each once, under the keys its link looks for; an object already in
    /// the cache is not.
    #[test]
    fn a_stage_hands_its_missing_collective_objects_to_the_helpers() {
        let arch = (9, 0);
        let (tc, disk, dir, text, name) = fixture(
            "stage-objects",
            r#"
            #[pgas_kernel(max_threads = 256)]
            fn two_sums(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>) {
                let n = dst.len();
                reduce_block(team, &mut dst[0..n], &src[0..n], ReduceOp::Sum);
                reduce_block(team, &mut dst[0..n], &src[0..n], ReduceOp::Max);
            }
            "#,
        );
        let stage = stage(&tc, &disk, arch, (&text, &name));
        let prelude = tc.links(&text).expect("the quick tier links it");
        let inputs = tc.link_inputs(prelude, &text, arch);
        assert_eq!(inputs.objects.len(), 2, "sum and max are two objects");
        let jobs = object_jobs(&stage, &disk, arch);
        let want: Vec<_> = inputs
            .objects
            .iter()
            .map(|(o, key)| (helpers::Job::object(o, inputs.registers), *key))
            .collect();
        assert_eq!(jobs, want);
        disk.store(&inputs.objects[0].1, b"an object").unwrap();
        assert_eq!(object_jobs(&stage, &disk, arch), want[1..].to_vec());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
