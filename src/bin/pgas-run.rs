//! `pgas-run -n N [--gpus LIST] -- PROGRAM ARGS`: one process per GPU on this node.
//! The logic lives in `pgas::launcher`.

use pgas::launcher;

fn main() {
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
    launcher::forward_signals();
    let result = launcher::visible_gpus().and_then(|n| launcher::launch(&args, n));
    if let Err(e) = &result {
        eprintln!("{e}");
    }
    std::process::exit(launcher::exit_code(&result));
}
