//! `pgas`: the project's command-line tool. Subcommands: `doctor`, `info`, and `jit-helper`,
//! which the JIT starts itself (`pgas::jit::helpers`).

use std::process::ExitCode;

/// One entry per subcommand: name, one-line help, handler (gets the remaining arguments).
type Subcommand = (&'static str, &'static str, fn(&[String]) -> ExitCode);

const SUBCOMMANDS: &[Subcommand] = &[
    (
        "doctor",
        "check the driver, GPUs, NVRTC, NVSHMEM, MPI and bootstrap, with a fix for each missing piece",
        doctor,
    ),
    (
        "info",
        "print the versions of pgas, NVSHMEM (and its OpenSHMEM spec), NVRTC and the CUDA driver",
        info,
    ),
    (
        "jit-helper",
        "(started by the JIT) compile a build's NVRTC programs into the kernel cache beside it",
        jit_helper,
    ),
];

fn usage() -> String {
    let mut s = String::from("usage: pgas <command> [args]\n\ncommands:\n");
    for (name, help, _) in SUBCOMMANDS {
        s.push_str(&format!("  {name:<10} {help}\n"));
    }
    s
}

fn doctor(args: &[String]) -> ExitCode {
    let strict = match args {
        [] => false,
        [a] if a == "--strict" => true,
        _ => {
            eprintln!("usage: pgas doctor [--strict]\n  --strict  exit with status 1 when a piece is missing");
            return ExitCode::from(2);
        }
    };
    let report = pgas::doctor::run();
    print!("{report}");
    if strict && !report.ready() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn info(args: &[String]) -> ExitCode {
    if !args.is_empty() {
        eprintln!("usage: pgas info");
        return ExitCode::from(2);
    }
    print!("{}", pgas::info::info());
    ExitCode::SUCCESS
}

/// `pgas jit-helper DIR MAJOR MINOR START`: see `pgas::jit::helpers`. Quiet: whatever it could
/// not do, the build that started it does itself.
fn jit_helper(args: &[String]) -> ExitCode {
    use pgas::jit::{disk::DiskCache, helpers, Toolchain};
    let parsed = match args {
        [dir, major, minor, start] => major
            .parse()
            .ok()
            .zip(minor.parse().ok())
            .zip(start.parse().ok())
            .map(|(arch, start)| (std::path::Path::new(dir), arch, start)),
        _ => None,
    };
    let Some((dir, arch, start)) = parsed else {
        eprintln!("usage: pgas jit-helper DIR MAJOR MINOR START (started by the JIT, not by hand)");
        return ExitCode::from(2);
    };
    let cache = match DiskCache::dir_from_env().map(DiskCache::open) {
        Some(Ok(cache)) => cache,
        _ => return ExitCode::from(1),
    };
    let report = Toolchain::discover().and_then(|tc| helpers::run(&tc, &cache, dir, arch, start));
    match report {
        Ok(_) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(1),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None | Some("-h" | "--help" | "help") => {
            print!("{}", usage());
            ExitCode::SUCCESS
        }
        Some(cmd) => match SUBCOMMANDS.iter().find(|(name, _, _)| *name == cmd) {
            Some((_, _, run)) => run(&args[1..]),
            None => {
                eprint!("pgas: unknown command {cmd:?}\n\n{}", usage());
                ExitCode::from(2)
            }
        },
    }
}
