//! Compiling many kernels as one. NVRTC spends most of a compile parsing NVSHMEM's headers, so
//! the pending specializations that share a prelude become one NVRTC program
//! ([`pgas_codegen::batch`]) and one CUBIN ("image") that loads as one module.
//!
//! On disk a batch is one entry, named by the hash of the whole program, plus one small link per
//! kernel, named by the kernel's own key and holding the batch's key: a later process that wants
//! any of the kernels finds the link, then the image. A missing or corrupt image behind a link is a
//! miss, and the kernel is rebuilt.

use std::path::Path;
use std::sync::Arc;

use super::disk::{CacheKey, DiskCache, EntryLock, Lookup};
use super::helpers::{Job, JobKind};
use super::key::{Keyed, BATCH_KEY_NAME};
use super::source::Source;
use super::toolchain::Toolchain;
use crate::error::{Error, Result};
use crate::launch_cause::LaunchCause;
use pgas_codegen::Prelude;

/// A link entry's payload starts with this (a CUBIN starts with ELF's magic, so the two cannot be
/// confused), followed by the 32-byte key of the image.
const LINK: &[u8; 8] = b"PGASLNK1";

/// A compiled CUBIN and the key it is cached (and loaded) under; several kernels may share one.
#[derive(Clone, Debug)]
pub(crate) struct Image {
    pub key: CacheKey,
    pub cubin: Arc<[u8]>,
}

/// The image that holds the kernel of `key`, from the disk cache: its own CUBIN, or the batch
/// its link names. `None` when either is missing, corrupt (corrupt entries are removed) or
/// unreadable (reported once by the cache).
pub(crate) fn lookup(disk: &DiskCache, key: &CacheKey) -> Option<Image> {
    let Lookup::Hit(payload) = disk.load_or_miss(key) else {
        return None;
    };
    match payload.strip_prefix(LINK) {
        None => Some(Image {
            key: *key,
            cubin: payload.into(),
        }),
        Some(target) => {
            let target = CacheKey::from_bytes(target)?;
            match disk.load_or_miss(&target) {
                Lookup::Hit(cubin) if !cubin.starts_with(LINK) => Some(Image {
                    key: target,
                    cubin: cubin.into(),
                }),
                _ => None,
            }
        }
    }
}

/// Which prelude a source starts with, for grouping and for progress lines. Raw kernels are
/// never batched (two may share a symbol name).
pub(crate) fn prelude_of(src: &Source) -> Option<Prelude> {
    // An sm_90a kernel compiles alone: batched, it would make its neighbours sm_90a too, and
    // on a GPU without wgmma fail them with it.
    if !src.batchable || src.text.contains(pgas_codegen::SM90A_MARKER) {
        return None;
    }
    Prelude::of_source(&src.text)
}

/// How many kernels one NVRTC program of `prelude` takes, for `n` pending kernels and
/// `compilers` processes compiling on this node (its PEs and their helper processes, see
/// [`super::helpers`]). NVRTC runs one compile at a time per process (docs/jit.md), so a process
/// gains nothing from more programs; the processes of a node do, as each compiles its share of
/// the programs (the others find them in the shared cache). So a group is cut into one program
/// per compiler, except that point-to-point and barrier kernels, whose cost is mostly the header
/// parse (1.4-1.9 s, then a fraction of a second per kernel), keep at least 8 a program.
/// Full-prelude kernels (a device collective) cost mostly NVVM and ptxas on NVSHMEM's collective
/// code, and in one program that cost grows faster than the kernels do (docs/jit.md), so each
/// compiles alone. Raw kernels compile alone.
pub(crate) fn chunk_size(prelude: Option<Prelude>, n: usize, compilers: usize) -> usize {
    match prelude {
        Some(Prelude::P2p | Prelude::Barrier) => n.div_ceil(compilers.max(1)).max(MIN_BATCH),
        Some(Prelude::Full) | None => 1,
    }
}

/// The fewest point-to-point or barrier kernels worth a program of their own (see
/// [`chunk_size`]).
const MIN_BATCH: usize = 8;

/// Whether a kernel's program is one a build starts before the others: a device collective's
/// (the full prelude, linked or not, sm_90a or not). Its NVVM and ptxas time on NVSHMEM's
/// collective code is ten times a point-to-point batch's (`docs/jit.md`), so a build
/// whose slowest program starts last waits for it after the rest is done: the GPU suite's
/// `bounded_all_reduce`, the slowest, was once program 24 of 25, and the prewarm waited for it
/// long after the others (`docs/jit.md`).
/// Started first, the slow programs run side by side in the build and its helpers while the
/// cheap ones fill the processes they leave free.
pub(crate) fn starts_first(src: &Source) -> bool {
    Prelude::of_source(&src.text) == Some(Prelude::Full)
}

/// `members` cut into as many programs as [`chunk_size`] asks for, each within that size and
/// their costs (`cost`, the kernel's source length: a long kernel takes NVVM and ptxas longer)
/// balanced: the costliest first, each onto the program with the least cost so far (the earlier
/// on a tie). The kernels of one kind stand together in a build's list (the suite's own kernels
/// first, a generic kernel's instances side by side), so programs cut in order made one program
/// of the costly ones, which the whole build then waited for (a 33-kernel program of 17.9 s
/// where the others took 0.5-5 s, on 4 PEs sharing an H200, `docs/jit.md`). Each program keeps
/// its kernels in the order wanted, and every process of a node cuts the same programs.
pub(crate) fn chunks<T>(
    prelude: Option<Prelude>, members: Vec<T>, compilers: usize, cost: impl Fn(&T) -> usize,
) -> Vec<Vec<T>> {
    if members.is_empty() {
        return Vec::new();
    }
    let size = chunk_size(prelude, members.len(), compilers);
    let count = members.len().div_ceil(size);
    let costs: Vec<usize> = members.iter().map(cost).collect();
    let mut order: Vec<usize> = (0..members.len()).collect();
    // Stable: equal costs keep their order.
    order.sort_by_key(|&i| std::cmp::Reverse(costs[i]));
    // Each program's (cost, kernels), and each kernel's program.
    let mut load = vec![(0usize, 0usize); count];
    let mut program_of = vec![0usize; members.len()];
    for i in order {
        let p = (0..count)
            .filter(|&p| load[p].1 < size)
            .min_by_key(|&p| (load[p].0, p))
            .expect("count programs of size kernels hold every kernel");
        load[p].0 += costs[i];
        load[p].1 += 1;
        program_of[i] = p;
    }
    let mut out: Vec<Vec<T>> = (0..count).map(|_| Vec::new()).collect();
    for (m, p) in members.into_iter().zip(program_of) {
        out[p].push(m);
    }
    out
}

/// A prelude's name in progress lines.
pub(crate) fn prelude_name(prelude: Option<Prelude>) -> &'static str {
    prelude.map_or("raw kernel", Prelude::name)
}

/// Compiles `members` (all with prelude `prelude`; one kernel when it is a raw one) into one
/// image, stores it and a link per kernel, and returns one result per member. When NVRTC rejects
/// the batch, each kernel is compiled alone, so every failing kernel is reported under its own name
/// and Rust line and the others still build. The outer `Err` is a failure no kernel is to blame
/// for (no NVRTC); a cache that cannot be read, locked or written is skipped (see
/// [`super::disk`]).
///
/// With a disk cache, the program's entry is locked across processes first. `wait: false` returns
/// `Ok(None)` at once when another process holds it (it is compiling the same program), so the
/// caller can compile other programs meanwhile and come back with `wait: true`, which then finds
/// the entry. NVRTC runs one compile at a time per process; this is how the PEs of a node share
/// the work.
pub(crate) fn compile(
    tc: &Toolchain, disk: Option<&DiskCache>, dump: Option<&Path>, prelude: Option<Prelude>,
    members: &[&Keyed], arch: (u32, u32), wait: bool,
) -> Result<Option<Vec<Result<Image>>>> {
    // `None`: another process holds the program (only when not waiting).
    let lock = |key: &CacheKey| -> Option<Option<EntryLock>> {
        match disk {
            None => Some(None),
            Some(d) => d.lock_or_warn(key, wait),
        }
    };
    let Some((program, key)) = batch_program(tc, prelude, members, arch)? else {
        let mut out = Vec::new();
        for m in members {
            let Some(_lock) = lock(&m.key) else {
                return Ok(None);
            };
            out.push(alone(tc, disk, dump, m, arch)?);
        }
        return Ok(Some(out));
    };
    let Some(_lock) = lock(&key) else {
        return Ok(None);
    };
    let cached = disk.and_then(|d| lookup(d, &key));
    let image = match cached {
        Some(image) => image,
        None => match tc.compile_dumped(disk, dump, &program, &batch_name(&key), arch) {
            Ok(compiled) => {
                let image = Image {
                    key,
                    cubin: compiled.cubin.into(),
                };
                if let Some(d) = disk {
                    d.store_or_warn(&key, &image.cubin);
                }
                image
            }
            Err(Error::Compile { .. }) => {
                let mut out = Vec::new();
                for m in members {
                    let _lock = disk.map(|d| d.lock_or_warn(&m.key, true));
                    out.push(alone(tc, disk, dump, m, arch)?);
                }
                return Ok(Some(out));
            }
            Err(e) => return Err(e),
        },
    };
    if let Some(d) = disk {
        let mut link = LINK.to_vec();
        link.extend_from_slice(image.key.as_bytes());
        for m in members {
            d.store_or_warn(&m.key, &link);
        }
    }
    Ok(Some(members.iter().map(|_| Ok(image.clone())).collect()))
}

/// The batch program of `members` (`prelude` once, then each member in a namespace of its own)
/// and its cache key; `None` when they are compiled a kernel a program (no shared prelude, or
/// one member). [`compile`] and [`job`] both take it from here, so a helper's job is the
/// program the build compiles.
fn batch_program(
    tc: &Toolchain, prelude: Option<Prelude>, members: &[&Keyed], arch: (u32, u32),
) -> Result<Option<(String, CacheKey)>> {
    let (Some(prelude), [_, _, ..]) = (prelude, members) else {
        return Ok(None);
    };
    let texts: Vec<&str> = members.iter().map(|m| m.src.text.as_str()).collect();
    let text = pgas_codegen::batch(prelude.text(), &texts)
        .ok_or_else(|| Error::launch(&members[0].src.display, LaunchCause::BatchWithoutPrelude))?;
    let key = tc.batch_key(&text, arch);
    Ok(Some((text, key)))
}

/// The program [`compile`] would compile for `members` as a job for the helper processes (see
/// [`super::helpers`]), with its cache key.
pub(crate) fn job(
    tc: &Toolchain, prelude: Option<Prelude>, members: &[&Keyed], arch: (u32, u32),
) -> Result<(Job, CacheKey)> {
    if let Some((text, key)) = batch_program(tc, prelude, members, arch)? {
        let job = Job {
            text,
            key_name: BATCH_KEY_NAME.to_owned(),
            compile_name: batch_name(&key),
            kind: JobKind::Program,
        };
        return Ok((job, key));
    }
    // One kernel a program (see `compile`): a raw kernel or a group of one.
    let Keyed { src, key, .. } = members[0];
    let job = Job {
        text: src.text.clone(),
        key_name: src.cuda_name.clone(),
        compile_name: src.cuda_name.clone(),
        kind: JobKind::Program,
    };
    Ok((job, *key))
}

/// One kernel compiled on its own (a raw kernel, a batch of one, or a member of a batch NVRTC
/// rejected), cached under its own key; the caller holds the key's lock.
fn alone(
    tc: &Toolchain, disk: Option<&DiskCache>, dump: Option<&Path>, kernel: &Keyed, arch: (u32, u32),
) -> Result<Result<Image>> {
    let Keyed { src, key, .. } = kernel;
    let key = *key;
    if let Some(image) = disk.and_then(|d| lookup(d, &key)) {
        return Ok(Ok(image));
    }
    let compiled = match tc.compile_dumped(disk, dump, &src.text, &src.cuda_name, arch) {
        Ok(c) => c,
        Err(Error::Compile { location, log, .. }) => {
            return Ok(Err(Error::Compile {
                kernel: format!("{} ({})", src.display, src.cuda_name),
                location,
                log,
            }))
        }
        Err(e) => return Err(e),
    };
    if let Some(d) = disk {
        d.store_or_warn(&key, &compiled.cubin);
    }
    Ok(Ok(Image {
        key,
        cubin: compiled.cubin.into(),
    }))
}

/// The dump-file name of a batch program.
fn batch_name(key: &CacheKey) -> String {
    format!("pgas_batch_{}", &key.hex()[..12])
}

/// These compile real NVSHMEM kernels with NVRTC (no GPU): CI points `PGAS_CUDA_HOME` and
/// `PGAS_NVSHMEM_HOME` at the pinned wheels. A few compiles of seconds each.
#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn toolchain() -> Toolchain {
        Toolchain::discover()
            .unwrap_or_else(|e| panic!("set PGAS_CUDA_HOME / PGAS_NVSHMEM_HOME: {e}"))
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pgas-batch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// A point-to-point specialization as codegen emits one: defines, prelude, `#line`, kernel.
    fn spec(name: &str, body: &str) -> Source {
        let text = format!(
            "#define PGAS_KERNEL_NAME {name}\n{}#line 10 \"src/{name}.rs\"\nextern \"C\" __global__ void PGAS_KERNEL_NAME(float* x, unsigned long long n) {{\n{body}\n}}\n",
            pgas_codegen::PRELUDE_P2P
        );
        Source {
            display: format!("{name}_rust"),
            cuda_name: name.to_owned(),
            text,
            batchable: true,
        }
    }

    /// [`spec`] as codegen emits a kernel that calls no NVSHMEM (its `GENERATED` line after the
    /// prelude): it compiles without NVSHMEM's headers, in a tenth of the time, for the tests
    /// whose mechanics (batching, the cache, errors) do not depend on them.
    fn spec_free(name: &str, body: &str) -> Source {
        let mut s = spec(name, body);
        let prelude = pgas_codegen::PRELUDE_P2P;
        s.text = s.text.replacen(
            prelude,
            &format!("{prelude}{} {name}\n", pgas_codegen::nvcall::GENERATED),
            1,
        );
        s
    }

    const ARCH: (u32, u32) = (9, 0);

    /// A specialization with its key, as the build plans it.
    fn keyed(tc: &Toolchain, src: Source) -> Keyed {
        tc.keyed(0, src, ARCH)
    }

    #[test]
    fn sm90a_kernels_are_never_batched() {
        let mut wg = spec("batch_wg", "if (n) x[0] = 1.0f;");
        wg.text = wg.text.replacen(
            "#line 10",
            &format!("{}\n#line 10", pgas_codegen::SM90A_MARKER),
            1,
        );
        assert_eq!(prelude_of(&wg), None);
        assert_eq!(prelude_of(&spec("batch_x", "")), Some(Prelude::P2p));
    }

    fn has_symbol(cubin: &[u8], name: &str) -> bool {
        cubin.windows(name.len()).any(|w| w == name.as_bytes())
    }

    #[test]
    fn a_batch_is_one_image_with_a_link_per_kernel_and_survives_concurrent_builders() {
        let tc = toolchain();
        let dir = tmpdir("ok");
        let a = keyed(&tc, spec("batch_a", "if (n) x[0] = 1.0f;"));
        let b = keyed(
            &tc,
            spec(
                "batch_b",
                "if (n) nvshmem_float_p(x, 2.0f, (nvshmem_my_pe() + 1) % nvshmem_n_pes());",
            ),
        );
        let c = keyed(&tc, spec("batch_c", "if (n > 1) x[1] = x[0];"));
        let members = [&a, &b, &c];
        let prelude = prelude_of(&a.src);
        assert_eq!(prelude, Some(Prelude::P2p));
        // Two PEs building the same batch into one cache at once: both succeed, and the entries
        // they leave are whole.
        let outcomes: Vec<Vec<Result<Image>>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let disk = DiskCache::open(&dir).unwrap();
                        compile(&tc, Some(&disk), None, prelude, &members, ARCH, true)
                            .unwrap()
                            .unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let disk = DiskCache::open(&dir).unwrap();
        for images in outcomes {
            let keys: Vec<CacheKey> = images.into_iter().map(|r| r.unwrap().key).collect();
            assert!(
                keys.windows(2).all(|k| k[0] == k[1]),
                "one image for the batch"
            );
        }
        let image = lookup(&disk, &b.key).unwrap();
        for m in members {
            let found = lookup(&disk, &m.key).unwrap();
            assert_eq!(
                found.key, image.key,
                "{} links to the batch",
                m.src.cuda_name
            );
            assert!(
                has_symbol(&image.cubin, &m.src.cuda_name),
                "{} in the image",
                m.src.cuda_name
            );
        }
        // No temporary files left behind.
        let stray: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(stray.is_empty(), "{stray:?}");

        // A corrupt image behind a link is a miss (and removed), so the kernel is rebuilt.
        let path = disk.path(&image.key);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        assert!(lookup(&disk, &a.key).is_none());
        assert!(!path.exists(), "the truncated image was removed");
        // A truncated link is a miss too.
        let link = disk.path(&c.key);
        let bytes = std::fs::read(&link).unwrap();
        std::fs::write(&link, &bytes[..bytes.len() - 5]).unwrap();
        assert!(lookup(&disk, &c.key).is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_helper_job_is_the_program_compile_builds_under_its_key() {
        let tc = toolchain();
        let dir = tmpdir("job");
        let disk = DiskCache::open(&dir).unwrap();
        let a = keyed(&tc, spec_free("job_a", "if (n) x[0] = 6.0f;"));
        let b = keyed(&tc, spec_free("job_b", "if (n) x[0] = 7.0f;"));
        let (batch_job, batch_key) = job(&tc, Some(Prelude::P2p), &[&a, &b], ARCH).unwrap();
        let (one_job, one_key) = job(&tc, Some(Prelude::P2p), &[&a], ARCH).unwrap();
        assert_eq!(batch_job.compile_name, batch_name(&batch_key));
        assert_eq!(one_key, tc.cache_key(&a.src.text, &a.src.cuda_name, ARCH));
        assert_eq!(
            (one_job.text.as_str(), one_job.key_name.as_str()),
            (a.src.text.as_str(), "job_a")
        );
        // The keys a helper recomputes from the job are the build's.
        assert_eq!(
            tc.cache_key(&batch_job.text, &batch_job.key_name, ARCH),
            batch_key
        );
        // What `compile` stores for the batch is under the job's key.
        compile(
            &tc,
            Some(&disk),
            None,
            Some(Prelude::P2p),
            &[&a, &b],
            ARCH,
            false,
        )
        .unwrap()
        .unwrap();
        assert!(matches!(disk.load(&batch_key), Ok(Lookup::Hit(_))));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_program_another_pe_holds_is_skipped_then_waited_for_and_found_cached() {
        let tc = toolchain();
        let dir = tmpdir("held");
        let disk = DiskCache::open(&dir).unwrap();
        let a = keyed(&tc, spec_free("held_a", "if (n) x[0] = 4.0f;"));
        let b = keyed(&tc, spec_free("held_b", "if (n) x[0] = 5.0f;"));
        let members = [&a, &b];
        let texts = [a.src.text.as_str(), b.src.text.as_str()];
        let program = pgas_codegen::batch(Prelude::P2p.text(), &texts).unwrap();
        let key = tc.cache_key(&program, "pgas_batch", ARCH);
        // Another PE holds the program's lock while it compiles it.
        let other = disk.lock(&key).unwrap();
        let skipped = compile(
            &tc,
            Some(&disk),
            None,
            Some(Prelude::P2p),
            &members,
            ARCH,
            false,
        );
        assert!(
            skipped.unwrap().is_none(),
            "the first pass leaves a held program alone"
        );
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                compile(
                    &tc,
                    Some(&disk),
                    None,
                    Some(Prelude::P2p),
                    &members,
                    ARCH,
                    true,
                )
                .unwrap()
                .unwrap()
            });
            // The other PE stores the program, then releases it: the waiter must load that
            // entry (recognizable by its bytes) rather than compile the program again.
            let marker = b"\x7fELF stored by the other PE".to_vec();
            disk.store(&key, &marker).unwrap();
            drop(other);
            let got = waiter.join().unwrap();
            for r in got {
                let image = r.unwrap();
                assert_eq!((image.key, &image.cubin[..]), (key, &marker[..]));
            }
        });
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_rejected_batch_names_every_failing_kernel_and_builds_the_others() {
        let tc = toolchain();
        let dir = tmpdir("bad");
        let disk = DiskCache::open(&dir).unwrap();
        let good = keyed(&tc, spec_free("batch_good", "if (n) x[0] = 3.0f;"));
        let bad1 = keyed(&tc, spec_free("batch_bad1", "x[0] = undefined_one;"));
        let bad2 = keyed(&tc, spec_free("batch_bad2", "\n\nx[0] = undefined_two;"));
        let members = [&bad1, &good, &bad2];
        let out = compile(
            &tc,
            Some(&disk),
            None,
            prelude_of(&good.src),
            &members,
            ARCH,
            true,
        )
        .unwrap()
        .unwrap();
        let err = |r: &Result<Image>| match r {
            Err(Error::Compile {
                kernel, location, ..
            }) => (kernel.clone(), location.clone()),
            other => panic!("expected a compile error, got {other:?}"),
        };
        assert_eq!(
            err(&out[0]),
            (
                "batch_bad1_rust (batch_bad1)".to_owned(),
                Some("src/batch_bad1.rs:11".to_owned())
            )
        );
        assert_eq!(
            err(&out[2]),
            (
                "batch_bad2_rust (batch_bad2)".to_owned(),
                Some("src/batch_bad2.rs:13".to_owned())
            )
        );
        let image = out[1].as_ref().unwrap();
        assert!(has_symbol(&image.cubin, "batch_good"));
        assert_eq!(
            lookup(&disk, &good.key).unwrap().key,
            image.key,
            "the good kernel is cached under its own key"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn kernels_build_from_memory_when_the_cache_cannot_be_written() {
        let tc = toolchain();
        let dir = tmpdir("unwritable");
        let disk = DiskCache::open(&dir).unwrap();
        // The directory turns into a file: no entry can be read, locked or written (see
        // disk.rs); a full disk fails the same calls.
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::write(&dir, b"").unwrap();
        let a = keyed(&tc, spec_free("nodisk_a", "if (n) x[0] = 6.0f;"));
        let b = keyed(&tc, spec_free("nodisk_b", "if (n) x[0] = 7.0f;"));
        for (members, prelude) in [(vec![&a, &b], prelude_of(&a.src)), (vec![&a], None)] {
            let out = compile(&tc, Some(&disk), None, prelude, &members, ARCH, true)
                .unwrap()
                .unwrap();
            for (m, r) in members.iter().zip(out) {
                let image = r.unwrap();
                assert!(
                    has_symbol(&image.cubin, &m.src.cuda_name),
                    "{}",
                    m.src.cuda_name
                );
            }
        }
        assert!(disk.warned(), "the failure is reported (once)");
        std::fs::remove_file(dir).unwrap();
    }

    #[test]
    fn programs_are_cut_among_the_compiling_processes() {
        let p2p = Some(Prelude::P2p);
        let full = Some(Prelude::Full);
        let sizes = |p, n, compilers| -> Vec<usize> {
            chunks(p, (0..n).collect::<Vec<_>>(), compilers, |_| 1)
                .iter()
                .map(Vec::len)
                .collect()
        };
        assert_eq!(sizes(p2p, 34, 1), [34]);
        assert_eq!(sizes(p2p, 34, 2), [17, 17]);
        assert_eq!(sizes(p2p, 34, 8), [7, 7, 7, 7, 6]);
        assert_eq!(sizes(p2p, 3, 4), [3]);
        assert_eq!(sizes(full, 3, 1), [1, 1, 1]);
        assert_eq!(sizes(full, 3, 4), [1, 1, 1]);
        assert_eq!(sizes(None, 3, 1), [1, 1, 1]);
        assert!(sizes(full, 0, 8).is_empty());
    }

    /// The costly kernels, which stand together in the list, spread over the programs, each
    /// program in the order wanted.
    #[test]
    fn programs_balance_their_kernels_costs() {
        // 16 kernels: the first four cost 10 each, the others 1; programs of 8 at the most.
        let cost = |k: &usize| if *k < 4 { 10 } else { 1 };
        let programs = chunks(Some(Prelude::P2p), (0..16).collect(), 2, cost);
        assert_eq!(
            programs,
            [
                vec![0, 2, 4, 6, 8, 10, 12, 14],
                vec![1, 3, 5, 7, 9, 11, 13, 15]
            ]
        );
        let costs: Vec<usize> = programs.iter().map(|p| p.iter().map(cost).sum()).collect();
        assert_eq!(costs, [26, 26]);
        // In the wanted order instead, one program would hold all four: 44 against 8.
    }

    #[test]
    fn collective_kernels_start_first_sm90a_or_not() {
        let full = |name: &str| {
            let mut s = spec(name, "");
            s.text = s
                .text
                .replacen(pgas_codegen::PRELUDE_P2P, pgas_codegen::PRELUDE, 1);
            s
        };
        assert!(starts_first(&full("first_full")));
        let mut wg = full("first_wg");
        wg.text = wg.text.replacen(
            "#line 10",
            &format!("{}\n#line 10", pgas_codegen::SM90A_MARKER),
            1,
        );
        assert!(starts_first(&wg));
        assert!(!starts_first(&spec("first_p2p", "")));
        let mut barrier = spec("first_barrier", "");
        barrier.text =
            barrier
                .text
                .replacen(pgas_codegen::PRELUDE_P2P, pgas_codegen::PRELUDE_BARRIER, 1);
        assert!(!starts_first(&barrier));
    }

    #[test]
    fn raw_kernels_and_other_preludes_are_never_batched() {
        let mut raw = spec("raw", "");
        raw.batchable = false;
        assert_eq!(prelude_of(&raw), None);
        let mut odd = spec("odd", "");
        odd.text = "extern \"C\" __global__ void odd() {}".to_owned();
        assert_eq!(prelude_of(&odd), None);
        assert_eq!(prelude_name(None), "raw kernel");
    }
}
