//! `pgas`: the project's command-line tool. Subcommands: `doctor`, `info`.

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
