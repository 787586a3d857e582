//! The JIT's helper processes (`pgas::jit::helpers`, `pgas jit-helper`): started on a build's
//! programs, they compile into the shared kernel cache every program whose key they compute as
//! the build did, and leave alone what they cannot do (a program NVRTC rejects, a program keyed by
//! another toolchain). Needs no GPU; needs NVRTC and the headers (`PGAS_CUDA_HOME`,
//! `PGAS_NVSHMEM_HOME`), as `tests/nvrtc/coll.rs`.

use pgas::jit::disk::{CacheKey, DiskCache, Lookup};
use pgas::jit::helpers::{Helpers, Job, JobKind};
use pgas::jit::Toolchain;
use std::path::{Path, PathBuf};
use std::process::Command;

const ARCH: (u32, u32) = (9, 0);

/// A point-to-point kernel as codegen emits one (defines, prelude, `#line`, kernel).
fn p2p(name: &str, body: &str) -> Job {
    Job {
        text: format!(
            "#define PGAS_KERNEL_NAME {name}\n{}#line 10 \"src/{name}.rs\"\nextern \"C\" __global__ void PGAS_KERNEL_NAME(float* x, unsigned long long n) {{\n{body}\n}}\n",
            pgas_codegen::PRELUDE_P2P
        ),
        key_name: name.to_owned(),
        compile_name: name.to_owned(),
        kind: JobKind::Program,
    }
}

/// [`p2p`] as codegen emits a kernel that calls no NVSHMEM (its `GENERATED` line after the
/// prelude): compiled without NVSHMEM's headers, for the tests whose mechanics (which programs
/// a helper builds, under which key) do not depend on them.
fn p2p_free(name: &str, body: &str) -> Job {
    let mut job = p2p(name, body);
    let prelude = pgas_codegen::PRELUDE_P2P;
    job.text = job.text.replacen(
        prelude,
        &format!("{prelude}{} {name}\n", pgas_codegen::nvcall::GENERATED),
        1,
    );
    job
}

fn cached(cache: &DiskCache, key: &CacheKey) -> Option<Vec<u8>> {
    match cache.load(key).unwrap() {
        Lookup::Hit(bytes) => Some(bytes.to_vec()),
        _ => None,
    }
}

/// The toolchain and an empty kernel cache in a directory of its own (`tag`).
fn fresh(tag: &str) -> (Toolchain, DiskCache, PathBuf) {
    let tc = Toolchain::discover()
        .unwrap_or_else(|e| panic!("set PGAS_CUDA_HOME / PGAS_NVSHMEM_HOME: {e}"));
    let dir = std::env::temp_dir().join(format!("pgas-jit-helpers-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cache = DiskCache::open(&dir).unwrap();
    (tc, cache, dir)
}

#[test]
fn helpers_compile_the_programs_they_can_into_the_cache_and_leave_the_rest() {
    let (tc, cache, dir) = fresh("work");
    let keyed = |job: Job| {
        let key = tc.cache_key(&job.text, &job.key_name, ARCH);
        (job, key)
    };
    let good: Vec<(Job, CacheKey)> = (0..4)
        .map(|i| {
            keyed(p2p_free(
                &format!("helper_k{i}"),
                &format!("if (n) x[0] = {i}.0f;"),
            ))
        })
        .collect();
    let rejected = keyed(p2p_free("helper_bad", "if (n) x[0] = no_such_name;"));
    // Keyed by "another toolchain": the helper's own key for it differs.
    let foreign_job = p2p_free("helper_foreign", "if (n) x[0] = 9.0f;");
    let foreign_own_key = tc.cache_key(&foreign_job.text, &foreign_job.key_name, ARCH);
    let foreign = (foreign_job, CacheKey::from_bytes(&[1u8; 32]).unwrap());
    let mut jobs = good.clone();
    jobs.push(rejected.clone());
    jobs.push(foreign.clone());

    let exe = Path::new(env!("CARGO_BIN_EXE_pgas"));
    let helpers = Helpers::start(exe, &cache, &jobs, ARCH, 2, &[]).expect("the helpers start");
    assert_eq!(helpers.count(), 2);
    helpers.wait();

    for (job, key) in &good {
        let cubin = cached(&cache, key).unwrap_or_else(|| panic!("{} not cached", job.key_name));
        assert!(
            cubin
                .windows(job.key_name.len())
                .any(|w| w == job.key_name.as_bytes()),
            "{}: the entry holds its kernel",
            job.key_name
        );
    }
    assert!(
        cached(&cache, &rejected.1).is_none(),
        "a rejected program is left to the build"
    );
    assert!(cached(&cache, &foreign.1).is_none() && cached(&cache, &foreign_own_key).is_none());
    // The job list is gone with the helpers. (This process's other tests write job lists of
    // their own meanwhile: only one that holds this test's jobs counts.)
    let lists = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(&format!("pgas-jit-jobs-{}-", std::process::id()))
        })
        .filter(|e| {
            std::fs::read_to_string(e.path().join("0.cu")).is_ok_and(|text| text == jobs[0].0.text)
        })
        .count();
    assert_eq!(lists, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_helper_command_refuses_arguments_it_cannot_use() {
    let exe = env!("CARGO_BIN_EXE_pgas");
    for args in [
        &["jit-helper"][..],
        &["jit-helper", "/nonexistent", "nine", "0", "0"],
    ] {
        let out = Command::new(exe).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("usage: pgas jit-helper"));
    }
}

#[test]
fn dropping_the_helpers_ends_them() {
    let (tc, cache, dir) = fresh("drop");
    let jobs: Vec<(Job, CacheKey)> = (0..12)
        .map(|i| {
            let job = p2p(
                &format!("helper_drop{i}"),
                &format!("if (n) x[0] = {i}.0f;"),
            );
            let key = tc.cache_key(&job.text, &job.key_name, ARCH);
            (job, key)
        })
        .collect();
    let exe = Path::new(env!("CARGO_BIN_EXE_pgas"));
    drop(Helpers::start(exe, &cache, &jobs, ARCH, 1, &[]).expect("the helper starts"));
    // Ended, not left running: nothing is added to the cache afterwards.
    let count = || {
        jobs.iter()
            .filter(|(_, k)| cached(&cache, k).is_some())
            .count()
    };
    let after_drop = count();
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(
        count(),
        after_drop,
        "a helper kept compiling after the drop"
    );
    assert!(after_drop < jobs.len(), "the helper was not ended early");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A script in `dir` that records its PID in the returned file and then becomes the real
/// helper (`pgas`), and that file.
fn pid_recording(dir: &Path) -> (PathBuf, PathBuf) {
    let pid_file = dir.join("helper.pid");
    let wrapper = dir.join("pgas-wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho $$ > '{}'\nexec '{}' \"$@\"\n",
            pid_file.display(),
            env!("CARGO_BIN_EXE_pgas")
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    (wrapper, pid_file)
}

/// The nice value of process `pid` (field 19 of `/proc/PID/stat`, after the command's name).
fn nice_of(pid: &str) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    after_name.split(' ').nth(16).unwrap().parse().unwrap()
}

#[test]
fn helpers_for_builds_nothing_waits_on_yield_the_cpus() {
    let (tc, cache, dir) = fresh("background");
    let job = p2p("helper_background", "if (n) x[0] = 4.0f;");
    let key = tc.cache_key(&job.text, &job.key_name, ARCH);
    let (wrapper, pid_file) = pid_recording(&dir);
    let helpers = Helpers::start(&wrapper, &cache, &[(job, key)], ARCH, 1, &[])
        .expect("the helper starts")
        .in_background();
    let t0 = std::time::Instant::now();
    let pid = loop {
        match std::fs::read_to_string(&pid_file) {
            Ok(pid) if pid.ends_with('\n') => break pid.trim().to_owned(),
            _ => assert!(t0.elapsed().as_secs() < 60, "the helper never started"),
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    // The helper compiles for about a second: it is still running (or a zombie, whose stat
    // still reads) until waited for.
    assert_eq!(
        nice_of(&pid),
        19,
        "a background helper runs at the lowest priority"
    );
    helpers.wait();
    assert!(
        cached(&cache, &key).is_some(),
        "and still builds its program"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_helper_killed_mid_compile_costs_time_never_a_result() {
    let (tc, cache, dir) = fresh("killed");
    let job = p2p("helper_killed", "if (n) x[0] = 3.0f;");
    let key = tc.cache_key(&job.text, &job.key_name, ARCH);
    let jobs = vec![(job.clone(), key)];
    let (wrapper, pid_file) = pid_recording(&dir);
    let helpers = Helpers::start(&wrapper, &cache, &jobs, ARCH, 1, &[]).expect("the helper starts");
    // Wait until it holds the program's lock (it compiles for about a second), then kill it.
    // The test watches for the lock file rather than trying the lock: a helper that tried while
    // the test held it for its probe would skip the program and never take the lock.
    let lock_file = dir.join(format!(".{}.cubin.lock", key.hex()));
    let t0 = std::time::Instant::now();
    while !lock_file.exists() {
        assert!(
            t0.elapsed().as_secs() < 60,
            "the helper never took the program's lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let killed = Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    helpers.wait();
    // Its lock died with it, and it left no entry, or only a whole one.
    let lock = cache.try_lock(&key).unwrap();
    assert!(lock.is_some(), "a killed helper's lock is released");
    drop(lock);
    let left = cached(&cache, &key);
    // Whoever builds next compiles the program (here a fresh helper, as the build would).
    Helpers::start(
        Path::new(env!("CARGO_BIN_EXE_pgas")),
        &cache,
        &jobs,
        ARCH,
        1,
        &[],
    )
    .expect("a second helper starts")
    .wait();
    let cubin = cached(&cache, &key).expect("the program is compiled after the kill");
    assert!(cubin.windows(13).any(|w| w == b"helper_killed"));
    if let Some(first) = left {
        assert_eq!(first, cubin, "an entry left by the killed helper is whole");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A helper compiles as the toolchain whose environment it is given
/// ([`Toolchain::helper_env`]), not as its own environment says: the JIT's quick tier keys its
/// programs with `--Ofast-compile=max` (`docs/jit.md`, "Tiers"), and its helpers must compute
/// the same keys to compile them.
#[test]
fn a_helper_keys_as_the_toolchain_whose_environment_it_is_given() {
    let (tc, cache, dir) = fresh("env");
    let quick = tc
        .quick_tier()
        .expect("nvJitLink is beside NVRTC, so the quick tier applies");
    // A kernel that calls no NVSHMEM compiles with the toolchain's own options.
    let job = p2p("helper_quick", "if (n) x[0] = 2.0f;");
    let key = quick.cache_key(&job.text, &job.key_name, ARCH);
    assert_ne!(key, tc.cache_key(&job.text, &job.key_name, ARCH));
    let jobs = vec![(job, key)];
    let exe = Path::new(env!("CARGO_BIN_EXE_pgas"));
    let run = |env: &[(&str, String)]| {
        Helpers::start(exe, &cache, &jobs, ARCH, 1, env)
            .expect("the helper starts")
            .wait()
    };
    run(&[]);
    assert!(
        cached(&cache, &key).is_none(),
        "a helper on its own environment computes another key and leaves the program"
    );
    run(&quick.helper_env());
    let cubin = cached(&cache, &key).expect("compiled under the quick tier's key");
    assert!(cubin.windows(12).any(|w| w == b"helper_quick"));
    std::fs::remove_dir_all(dir).unwrap();
}

/// A collective object given to a helper (`Job::object`: the first jobs of a build's helpers,
/// so that a kernel's objects build side by side) lands in the cache under the key the build's
/// link looks for, built for the register cap the job names.
#[test]
fn a_helper_builds_a_collective_object_under_the_key_the_link_looks_for() {
    let (tc, cache, dir) = fresh("object");
    let quick = tc
        .quick_tier()
        .expect("nvJitLink is beside NVRTC, so the quick tier applies");
    let kernels = pgas_codegen::compile_file(
        r#"
        #[pgas_kernel(max_threads = 512)]
        fn object_sum(team: Team, dst: &mut SymTensor<f32>, src: &SymTensor<f32>) {
            let n = dst.len();
            reduce_block(team, &mut dst[0..n], &src[0..n], ReduceOp::Sum);
        }
        "#,
        "object_sum.rs",
    )
    .unwrap();
    let source = kernels[0].source(true);
    let objects = pgas_codegen::nvcall::collective_objects(source);
    let [object] = &objects[..] else {
        panic!("one collective object, not {}", objects.len());
    };
    let registers = pgas_codegen::nvcall::register_cap(source);
    let key = quick.object_key(object, ARCH, registers);
    let jobs = vec![(Job::object(object, registers), key)];
    let exe = Path::new(env!("CARGO_BIN_EXE_pgas"));
    Helpers::start(exe, &cache, &jobs, ARCH, 1, &quick.helper_env())
        .expect("the helper starts")
        .wait();
    let bytes = cached(&cache, &key).expect("the object is cached under the link's key");
    assert!(
        bytes
            .windows(object.name.len())
            .any(|w| w == object.name.as_bytes()),
        "the entry defines {}",
        object.name
    );
    // Another register cap is another object, which this job does not build.
    assert!(cached(&cache, &quick.object_key(object, ARCH, 64)).is_none());
    std::fs::remove_dir_all(dir).unwrap();
}
