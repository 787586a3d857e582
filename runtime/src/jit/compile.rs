//! Compiling a plan's programs: one after the other in this process (NVRTC runs one compile at
//! a time per process), beside the helper processes, with a progress line per program when a
//! build is long enough to need one.

use std::path::PathBuf;

use super::batch::{self, Image};
use super::disk::DiskCache;
use super::helpers;
use super::key::Keyed;
use super::plan::Program;
use super::source::Source;
use super::toolchain::Toolchain;
use crate::error::Result;

/// A build compiling at least this many kernels prints a line per batch (a first run of many
/// kernels takes seconds, and should say what it is doing).
pub(super) const PROGRESS_MIN: usize = 4;

/// Compiles `programs` for `arch` (with `helpers`, the helper executable and how many may
/// start), and returns each kernel with its image or its compile error. The outer `Err` is a
/// failure no kernel is to blame for (no NVRTC).
pub(crate) fn compile(
    tc: &Toolchain,
    disk: Option<&DiskCache>,
    arch: (u32, u32),
    programs: Vec<Program>,
    helpers: Option<(PathBuf, usize)>,
) -> Result<Vec<(Keyed, Result<Image>)>> {
    let dump = std::env::var_os("PGAS_DUMP_DIR").map(PathBuf::from);
    let total: usize = programs.iter().map(|(_, m)| m.len()).sum();
    let progress = total >= PROGRESS_MIN;
    let started = std::time::Instant::now();
    // The helpers, dropped (ended) once every program is built.
    let helpers = match (helpers, disk) {
        (Some((exe, helper_count)), Some(disk)) if programs.len() > 1 => {
            let jobs: Vec<_> = programs
                .iter()
                .filter_map(|(prelude, members)| {
                    let members: Vec<&Keyed> = members.iter().collect();
                    batch::job(tc, *prelude, &members, arch).ok()
                })
                .collect();
            let count = helper_count.min(programs.len() - 1);
            helpers::Helpers::start(&exe, disk, &jobs, arch, count, &tc.helper_env())
        }
        _ => None,
    };
    if let (Some(h), true) = (&helpers, progress) {
        eprintln!(
            "pgas: JIT: {} helper process(es) compile beside this one (PGAS_JIT_HELPERS=0: none)",
            h.count()
        );
    }
    // A first pass skips the programs another process holds (a PE of this node compiling the
    // same kernels); the second waits for those and then finds them cached.
    let n_programs = programs.len();
    let mut outcomes: Vec<Option<Vec<Result<Image>>>> = programs.iter().map(|_| None).collect();
    for wait in [false, true] {
        for (g, (prelude, members)) in programs.iter().enumerate() {
            if outcomes[g].is_some() {
                continue;
            }
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
            outcomes[g] = out;
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
    for ((_, members), outcome) in programs.into_iter().zip(outcomes) {
        let outcome = outcome.expect("the waiting pass builds every program");
        built.extend(members.into_iter().zip(outcome));
    }
    Ok(built)
}

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
}
