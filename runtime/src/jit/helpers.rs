//! Helper processes that compile a build's NVRTC programs beside the process that needs them.
//!
//! NVRTC runs one compile at a time per process, so a single process with many programs to
//! compile waits for them one after the other (docs/jit.md has the figures). The PEs of a node
//! already share that work through the disk cache: each program's entry
//! is `flock`ed by whoever compiles it, the others skip it and later find it cached. Helpers are
//! more such workers, started by the build itself: `pgas jit-helper` processes (the CLI) that go
//! over the same list of programs, compile those nobody holds into the disk cache and exit. The
//! build goes over the list too, then waits for the programs a helper holds and loads them from
//! the cache, as it does for another PE's.
//!
//! A helper only ever adds cache entries: it recomputes each program's cache key with its own
//! toolchain and compiles nothing whose key differs from the build's (another NVRTC or NVSHMEM
//! than the build's would make a different CUBIN); a program it fails to compile is left to the
//! build, which compiles it again and reports the error under the kernel's name. So a helper
//! that is missing, crashes or is killed costs time, never a result.

use super::disk::{CacheKey, DiskCache, Lookup};
use super::toolchain::Toolchain;
use crate::error::{Error, Result};
use crate::launch_cause::LaunchCause;
use pgas_codegen::{nvcall, Prelude};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// One NVRTC program for the helpers: its source, the name its cache key is computed with, the
/// name it is compiled under (a batch's key is computed with `pgas_batch`, and it is compiled
/// under a name of its own, for dumps and logs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// The whole CUDA source of the program.
    pub text: String,
    /// The kernel name [`Toolchain::cache_key`] takes for this program.
    pub key_name: String,
    /// The name NVRTC compiles the program under.
    pub compile_name: String,
    /// What the text is, which says how it is keyed and built.
    pub kind: JobKind,
}

/// What a [`Job`] builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    /// An NVRTC program of kernels, keyed by [`Toolchain::cache_key`].
    Program,
    /// One of NVSHMEM's collectives as a relocatable object (`nvcall::CollectiveObject`, named
    /// by the job's `key_name`) of at most this many registers a thread, which link-time
    /// kernels link ([`Toolchain::object_key`]).
    Object(u32),
    /// The pgas NVSHMEM library of a prelude, which link-time kernels of that prelude link.
    Library(Prelude),
}

impl Job {
    /// A job that builds `object` for kernels of at most `registers` registers a thread.
    pub fn object(object: &nvcall::CollectiveObject, registers: u32) -> Job {
        Job {
            text: object.source.clone(),
            key_name: object.name.clone(),
            compile_name: object.name.clone(),
            kind: JobKind::Object(registers),
        }
    }

    /// A job that builds the pgas NVSHMEM library of `prelude`.
    pub fn library(prelude: Prelude) -> Job {
        Job {
            text: nvcall::library(prelude),
            key_name: super::toolchain::LIBRARY.to_owned(),
            compile_name: super::toolchain::LIBRARY.to_owned(),
            kind: JobKind::Library(prelude),
        }
    }

    /// The line the job list adds for this kind (none for a program).
    fn kind_line(&self) -> Option<String> {
        match self.kind {
            JobKind::Program => None,
            JobKind::Object(cap) => Some(format!("object {cap}")),
            JobKind::Library(prelude) => Some(format!("library {}", prelude.name())),
        }
    }

    /// The kind a job list's line names; a program without one.
    fn kind_of(line: Option<&str>) -> JobKind {
        let object = line
            .and_then(|l| l.strip_prefix("object "))
            .and_then(|cap| cap.parse().ok())
            .map(JobKind::Object);
        let library = line
            .and_then(|l| l.strip_prefix("library "))
            .and_then(|name| {
                Prelude::ALL
                    .into_iter()
                    .find(|p| p.name() == name)
                    .map(JobKind::Library)
            });
        object.or(library).unwrap_or(JobKind::Program)
    }
}

/// Helper processes started on a list of jobs; each exits once it has gone over the list.
/// Dropping it ends those still running: the build drops it once every program is built, so a
/// helper still running then has nothing left to compile (it may still be starting up), and
/// waiting for it would only add its start-up to a small build.
#[derive(Debug)]
pub struct Helpers {
    children: Vec<Child>,
    dir: PathBuf,
}

impl Helpers {
    /// Writes `jobs` (each with the cache key the build computed) to a fresh directory and
    /// starts `count` helpers `exe jit-helper DIR MAJOR MINOR START`, helper `h` at job `h + 1`
    /// (the build takes job 0), with `PGAS_CACHE_DIR` set to `cache`'s directory and `env` (the
    /// build toolchain's [`Toolchain::helper_env`], so a helper keys as the build does). `None`
    /// when nothing could be started (no helper is then needed for the build to finish).
    pub fn start(
        exe: &Path, cache: &DiskCache, jobs: &[(Job, CacheKey)], arch: (u32, u32), count: usize,
        env: &[(&str, String)],
    ) -> Option<Helpers> {
        if count == 0 || jobs.is_empty() {
            return None;
        }
        let dir = job_dir();
        if write_jobs(&dir, jobs).is_err() {
            let _ = std::fs::remove_dir_all(&dir);
            return None;
        }
        let mut children = Vec::new();
        for h in 0..count {
            // The list starts with its slowest programs (`super::plan`), so every process
            // starts at the next of them and then takes the first nobody holds: helper h at
            // job h + 1, the build at the top.
            let start = (h + 1) % jobs.len();
            let child = Command::new(exe)
                .arg("jit-helper")
                .arg(&dir)
                .arg(arch.0.to_string())
                .arg(arch.1.to_string())
                .arg(start.to_string())
                .env("PGAS_CACHE_DIR", cache.dir())
                // A helper's own builds start no helpers.
                .env("PGAS_JIT_HELPER", "off")
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn();
            match child {
                Ok(c) => children.push(c),
                Err(_) => break,
            }
        }
        if children.is_empty() {
            let _ = std::fs::remove_dir_all(&dir);
            return None;
        }
        Some(Helpers { children, dir })
    }

    /// Lowers the helpers to the lowest CPU priority (nice 19), for builds no launch waits on
    /// yet (a tiered kernel's full build). At a cold start those would otherwise take CPUs from
    /// the builds launches do wait on, the quick builds and the point-to-point programs: on 4 PEs
    /// sharing a 16-core machine, 32 processes compile at once. Idle CPUs still go to them.
    pub fn in_background(self) -> Helpers {
        for c in &self.children {
            lower_priority(c.id());
        }
        self
    }

    /// How many helpers run.
    pub fn count(&self) -> usize {
        self.children.len()
    }

    /// Waits until every helper has gone over the list and exited.
    pub fn wait(mut self) {
        for c in &mut self.children {
            let _ = c.wait();
        }
    }

    /// Whether every helper has exited (without waiting).
    pub fn finished(&mut self) -> bool {
        self.children
            .iter_mut()
            .all(|c| !matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        for c in &mut self.children {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Sets the nice value of process (or, on Linux, thread) `id` (0: the calling thread) to 19,
/// the lowest priority. A failure leaves its priority as it was: it only costs time.
pub(crate) fn lower_priority(id: u32) {
    // SAFETY: setpriority reads no memory of ours; `id` is a child this process has not waited
    // for yet (so its pid is not reused) or 0.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, id, 19);
    }
}

/// A fresh directory for one build's job list, under the system's temporary directory.
fn job_dir() -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::env::temp_dir().join(format!("pgas-jit-jobs-{}-{nanos}", std::process::id()))
}

/// Job `i` is `i.cu` (the source) and `i.meta` (the key in hex, the key name, the compile name,
/// a line each, then `object CAP` for an object or `library PRELUDE` for a library).
fn write_jobs(dir: &Path, jobs: &[(Job, CacheKey)]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (i, (job, key)) in jobs.iter().enumerate() {
        std::fs::write(dir.join(format!("{i}.cu")), &job.text)?;
        let mut meta = format!("{}\n{}\n{}\n", key.hex(), job.key_name, job.compile_name);
        if let Some(line) = job.kind_line() {
            meta.push_str(&line);
            meta.push('\n');
        }
        std::fs::write(dir.join(format!("{i}.meta")), meta)?;
    }
    Ok(())
}

/// The jobs of `dir`, in order, with the keys the build computed.
pub fn read_jobs(dir: &Path) -> Result<Vec<(Job, String)>> {
    let io = |e: std::io::Error| {
        let cause = LaunchCause::HelperJobs {
            dir: dir.to_owned(),
            error: e.to_string(),
        };
        Error::launch("pgas jit-helper", cause)
    };
    let mut jobs = Vec::new();
    for i in 0.. {
        let meta = dir.join(format!("{i}.meta"));
        if !meta.exists() {
            break;
        }
        let meta = std::fs::read_to_string(meta).map_err(io)?;
        let text = std::fs::read_to_string(dir.join(format!("{i}.cu"))).map_err(io)?;
        let mut lines = meta.lines();
        let (Some(key), Some(key_name), Some(compile_name)) =
            (lines.next(), lines.next(), lines.next())
        else {
            return Err(io(std::io::Error::other(format!("job {i} is incomplete"))));
        };
        let job = Job {
            text,
            key_name: key_name.to_owned(),
            compile_name: compile_name.to_owned(),
            kind: Job::kind_of(lines.next()),
        };
        jobs.push((job, key.to_owned()));
    }
    Ok(jobs)
}

/// The work of `pgas jit-helper DIR MAJOR MINOR START`: goes once over the jobs of `dir` from job
/// `start` on (wrapping round), compiling for `arch` every program that no other process holds
/// and that is not cached yet into `cache`, with `toolchain`.
pub fn run(
    toolchain: &Toolchain, cache: &DiskCache, dir: &Path, arch: (u32, u32), start: usize,
) -> Result<()> {
    let jobs = read_jobs(dir)?;
    // As the build does: with PGAS_DUMP_DIR, the source and log of every program compiled.
    let dump = std::env::var_os("PGAS_DUMP_DIR").map(PathBuf::from);
    for k in 0..jobs.len() {
        let (job, want) = &jobs[(start + k) % jobs.len()];
        let object = || nvcall::CollectiveObject {
            name: job.key_name.clone(),
            source: job.text.clone(),
        };
        // Another toolchain's key: not this helper's to compile.
        let key = match job.kind {
            JobKind::Program => toolchain.cache_key(&job.text, &job.key_name, arch),
            JobKind::Object(cap) => toolchain.object_key(&object(), arch, cap),
            JobKind::Library(prelude) => toolchain.library_key(prelude, arch),
        };
        if key.hex() != *want {
            continue;
        }
        // Held by another process, or cached already.
        let Ok(Some(_lock)) = cache.try_lock(&key) else {
            continue;
        };
        if matches!(cache.load(&key), Ok(Lookup::Hit(_))) {
            continue;
        }
        // A program NVRTC rejects is left to the build, which reports it under the kernel's name.
        let built = match job.kind {
            JobKind::Program => toolchain
                .compile_dumped(
                    Some(cache),
                    dump.as_deref(),
                    &job.text,
                    &job.compile_name,
                    arch,
                )
                .map(|c| c.cubin),
            JobKind::Object(cap) => toolchain.build_object(&object(), arch, cap, &job.compile_name),
            JobKind::Library(prelude) => toolchain.build_library(prelude, arch),
        };
        if let Ok(bytes) = built {
            cache.store(&key, &bytes)?;
        }
    }
    Ok(())
}

/// The helper executable: `PGAS_JIT_HELPER` (a path; `off` for none), else the `pgas` CLI beside
/// the running executable, one folder up (cargo puts examples, benches and tests one folder
/// below the binaries), or on `PATH` (`cargo install pgas`). Another version's CLI does no harm:
/// it cannot read the job list or computes other keys, and compiles nothing. `None` when there
/// is none: the build then compiles alone.
pub fn helper_exe() -> Option<PathBuf> {
    find_helper(
        std::env::var_os("PGAS_JIT_HELPER"),
        std::env::current_exe().ok(),
        &std::env::var_os("PATH").unwrap_or_default(),
    )
}

/// [`helper_exe`] for the value of `PGAS_JIT_HELPER`, the running executable and `PATH`.
fn find_helper(
    var: Option<std::ffi::OsString>, exe: Option<PathBuf>, path: &std::ffi::OsStr,
) -> Option<PathBuf> {
    match var {
        Some(v) if v == "off" => return None,
        Some(v) => return Some(PathBuf::from(v)),
        None => {}
    }
    let here = exe.as_deref().and_then(Path::parent);
    [here, here.and_then(Path::parent)]
        .into_iter()
        .flatten()
        .map(Path::to_path_buf)
        .chain(std::env::split_paths(path))
        .map(|d| d.join("pgas"))
        .find(|p| p.is_file())
}

/// How many helpers a build starts on a node where `node_pes` PEs build at once:
/// `PGAS_JIT_HELPERS` when set, else one per CPU this PE's share of the node leaves beside
/// itself, at most 15 (`MAX_HELPERS`). (A build starts no more than it has programs beyond its
/// own first.)
pub fn helper_count(node_pes: usize) -> usize {
    std::env::var("PGAS_JIT_HELPERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            default_count(cpus, node_pes)
        })
}

/// The most helpers a build starts by default. A compile of a collective kernel holds about
/// 0.7 GB (NVRTC 13.0, NVSHMEM 3.4.5: the peak resident size of
/// `/usr/bin/time -v python3 scripts/studies/nvrtc_study.py --reduce-algorithms`), so 16
/// compiling processes a PE fit a GPU host's memory;
/// and with the slow programs started first, more processes than the GPU suite has collective
/// programs (16) would only wait. (It was 7, which left one PE on a 16-CPU host compiling the
/// suite's 16 collective programs two rounds deep.)
const MAX_HELPERS: usize = 15;

/// [`helper_count`] without `PGAS_JIT_HELPERS`: one helper per CPU of this PE's share of `cpus`
/// beside the PE itself, at most [`MAX_HELPERS`].
fn default_count(cpus: usize, node_pes: usize) -> usize {
    (cpus / node_pes.max(1)).saturating_sub(1).min(MAX_HELPERS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_list_reads_back_as_written() {
        let dir = job_dir();
        let key = CacheKey::from_bytes(&[7u8; 32]).unwrap();
        let jobs = vec![
            (
                Job {
                    text: "extern \"C\" __global__ void a() {}\n// ünïcode\n".to_owned(),
                    key_name: "pgas_batch".to_owned(),
                    compile_name: "pgas_batch_0102".to_owned(),
                    kind: JobKind::Program,
                },
                key,
            ),
            (
                Job {
                    text: String::new(),
                    key_name: "b".to_owned(),
                    compile_name: "b".to_owned(),
                    kind: JobKind::Object(128),
                },
                key,
            ),
            (Job::library(Prelude::Barrier), key),
        ];
        write_jobs(&dir, &jobs).unwrap();
        let back = read_jobs(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(back.len(), jobs.len());
        for ((job, key), (read, hexkey)) in jobs.iter().zip(&back) {
            assert_eq!(job, read);
            assert_eq!(&key.hex(), hexkey);
        }
    }

    #[test]
    fn the_helper_is_the_variable_then_beside_the_executable_then_on_the_path() {
        let root = job_dir();
        let (bin, examples, on_path) =
            (root.join("bin"), root.join("bin/examples"), root.join("p"));
        for d in [&examples, &on_path] {
            std::fs::create_dir_all(d).unwrap();
        }
        let exe = Some(examples.join("demo"));
        let path = std::env::join_paths([&on_path]).unwrap();
        let find = |var: Option<&str>| find_helper(var.map(Into::into), exe.clone(), &path);
        assert_eq!(find(None), None, "no pgas anywhere");
        std::fs::write(on_path.join("pgas"), "").unwrap();
        assert_eq!(find(None), Some(on_path.join("pgas")));
        std::fs::write(bin.join("pgas"), "").unwrap();
        assert_eq!(
            find(None),
            Some(bin.join("pgas")),
            "one folder up wins over PATH"
        );
        std::fs::write(examples.join("pgas"), "").unwrap();
        assert_eq!(
            find(None),
            Some(examples.join("pgas")),
            "beside the executable first"
        );
        assert_eq!(find(Some("off")), None);
        assert_eq!(find(Some("/x/pgas")), Some(PathBuf::from("/x/pgas")));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn helpers_share_the_cpus_among_the_node_pes() {
        assert_eq!(default_count(16, 1), 15);
        assert_eq!(default_count(64, 1), MAX_HELPERS, "at most MAX_HELPERS");
        assert_eq!(default_count(16, 4), 3);
        assert_eq!(default_count(64, 4), 15);
        assert_eq!(default_count(2, 1), 1);
        assert_eq!(default_count(2, 2), 0);
        assert_eq!(default_count(1, 0), 0);
    }
}
