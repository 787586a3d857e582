//! `pgas-run -n N [--gpus LIST] -- PROGRAM ARGS`: one process per GPU on this node;
//! `pgas-run --nodes M -n N -- PROGRAM ARGS`: a job across nodes through srun or mpirun.
//! The logic lives in `pgas::launcher`.

use pgas::launcher::{self, multinode};

fn main() {
    // The child `pgas-run` starts to probe an MPS server (launcher::mps), not a job.
    if let Some(gpu) = std::env::var_os(launcher::mps::PROBE_VAR) {
        std::process::exit(launcher::mps::probe_main(&gpu.to_string_lossy()));
    }
    let args = match launcher::parse_args(std::env::args_os().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{}", launcher::USAGE);
            return;
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Some(nodes) = &args.nodes {
        let words = |v: &[std::ffi::OsString]| -> Vec<String> {
            v.iter().map(|a| a.to_string_lossy().into_owned()).collect()
        };
        let env: Vec<(String, String)> = std::env::vars().collect();
        let cmd = match multinode::command(
            nodes,
            args.nproc,
            &args.program.to_string_lossy(),
            &words(&args.args),
            &env,
        ) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("pgas-run: {e}");
                std::process::exit(2);
            }
        };
        if nodes.dry_run {
            println!("{}", multinode::shell_line(&cmd));
            return;
        }
        match std::process::Command::new(&cmd[0]).args(&cmd[1..]).status() {
            Ok(status) => std::process::exit(status.code().unwrap_or(1)),
            Err(e) => {
                eprintln!(
                    "pgas-run: could not start {} ({e}); run inside a Slurm allocation for \
                     srun, or install Open MPI for mpirun (--dry-run prints the command)",
                    cmd[0]
                );
                std::process::exit(127);
            }
        }
    }
    launcher::forward_signals();
    let result = launcher::visible_gpus().and_then(|n| launcher::launch(&args, n));
    if let Err(e) = &result {
        eprintln!("{e}");
    }
    std::process::exit(launcher::exit_code(&result));
}
