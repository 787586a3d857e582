//! Command line of `pgas-run`.

use std::ffi::OsString;

use super::multinode::{Nodes, Via};
use crate::error::{Error, Result};

/// `pgas-run --help`.
pub const USAGE: &str = "\
usage: pgas-run -n N [--gpus LIST] [--share-gpus] -- PROGRAM [ARGS...]
       pgas-run --nodes M -n N [--via srun|mpirun] [--hosts H1,H2,..] [--dry-run] -- PROGRAM [ARGS...]

Starts N copies of PROGRAM on this node, one per GPU, bootstrapped together for pgas::init().
With --nodes, starts N on each of M nodes through srun or mpirun (NVSHMEM bootstraps through
its PMIx or MPI plugin); PROGRAM must be at the same path on every node.

  -n, --nproc-per-node N   number of ranks (default: the length of --gpus)
  --gpus LIST              comma-separated GPU ordinals, rank i uses the i-th (default: 0..N)
  --share-gpus             let several ranks share a GPU (more ranks than GPUs, or a GPU named
                           twice in --gpus), for developing multi-PE code on fewer GPUs: needs
                           CUDA MPS running (`nvidia-cuda-mps-control -d`) and as many ranks on
                           every GPU in use (NVSHMEM hangs otherwise); timings mean nothing
  --nodes M                a job of M nodes, N ranks (and GPUs) each
  --via srun|mpirun        its launcher (default: srun inside a Slurm job, else mpirun)
  --hosts LIST             comma-separated host names, one per node (mpirun)
  --dry-run                print the srun/mpirun command instead of running it
  -h, --help               this help

Output lines are prefixed with [rank N]. If a rank fails, the others are stopped and pgas-run
exits non-zero, naming the rank.";

/// What `pgas-run` was asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunArgs {
    /// Number of ranks.
    pub nproc: usize,
    /// GPU of each rank, if given (`--gpus`).
    pub gpus: Option<Vec<usize>>,
    /// Whether ranks may share a GPU (`--share-gpus`; NVSHMEM needs CUDA MPS for that).
    pub share_gpus: bool,
    /// A job across nodes (`--nodes`), `nproc` ranks each.
    pub nodes: Option<Nodes>,
    /// The program to run.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

fn usage_err(msg: impl Into<String>) -> Error {
    Error::Launcher(format!("{}\n\n{USAGE}", msg.into()))
}

/// Parses the arguments after the program name. `Ok(None)` means `--help` was asked for.
// Long on purpose: one match arm per flag of `pgas-run`, in the order `--help` lists them.
pub fn parse_args(argv: impl IntoIterator<Item = OsString>) -> Result<Option<RunArgs>> {
    let mut it = argv.into_iter();
    let mut nproc = None;
    let mut gpus = None;
    let mut share_gpus = false;
    let (mut node_count, mut via, mut hosts, mut dry_run) = (None, None, None, false);
    let mut program = None;
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy().into_owned();
        let (flag, inline) = match s.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (s.clone(), None),
        };
        let mut value = |name: &str| -> Result<String> {
            inline
                .clone()
                .or_else(|| it.next().map(|v| v.to_string_lossy().into_owned()))
                .ok_or_else(|| usage_err(format!("{name} needs a value")))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "-n" | "--nproc-per-node" | "--nproc" => {
                let v = value(&flag)?;
                let n: usize = v
                    .parse()
                    .map_err(|_| usage_err(format!("{flag} {v:?}: expected a number of ranks")))?;
                if n == 0 {
                    return Err(usage_err(format!("{flag} must be at least 1")));
                }
                nproc = Some(n);
            }
            "--gpus" => gpus = Some(parse_gpu_list(&value("--gpus")?)?),
            "--share-gpus" => share_gpus = true,
            "--nodes" => {
                let v = value("--nodes")?;
                node_count =
                    Some(v.parse::<usize>().ok().filter(|&m| m >= 1).ok_or_else(|| {
                        usage_err(format!(
                            "--nodes {v:?}: expected a number of nodes, at least 1"
                        ))
                    })?);
            }
            "--via" => {
                via = Some(match value("--via")?.as_str() {
                    "srun" => Via::Srun,
                    "mpirun" => Via::Mpirun,
                    other => {
                        return Err(usage_err(format!(
                            "--via {other:?}: expected srun or mpirun"
                        )))
                    }
                })
            }
            "--hosts" => {
                hosts = Some(
                    value("--hosts")?
                        .split(',')
                        .map(|h| h.trim().to_owned())
                        .filter(|h| !h.is_empty())
                        .collect::<Vec<_>>(),
                )
            }
            "--dry-run" => dry_run = true,
            "--" => {
                program = it.next();
                break;
            }
            _ if s.starts_with('-') => return Err(usage_err(format!("unknown option {s:?}"))),
            // `pgas-run -n 2 ./prog args` works too: the first free word is the program.
            _ => {
                program = Some(arg);
                break;
            }
        }
    }
    let program = program.ok_or_else(|| usage_err("no PROGRAM given (put it after `--`)"))?;
    if let Some(list) = gpus.as_ref().filter(|_| !share_gpus) {
        let mut sorted = list.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != list.len() {
            return Err(usage_err(
                "--gpus names a GPU twice; pgas runs one rank per GPU (--share-gpus lets ranks \
                 share one under CUDA MPS, for development)",
            ));
        }
    }
    let nproc = match (nproc, &gpus) {
        (Some(n), Some(list)) if n > list.len() => {
            return Err(usage_err(format!(
                "-n {n} asks for more ranks than the {} GPU(s) in --gpus",
                list.len()
            )))
        }
        (Some(n), _) => n,
        (None, Some(list)) => list.len(),
        (None, None) => return Err(usage_err("say how many ranks with -n N")),
    };
    let nodes =
        match node_count {
            None if via.is_some() || hosts.is_some() || dry_run => {
                return Err(usage_err(
                    "--via, --hosts and --dry-run are for jobs across nodes: add --nodes M",
                ))
            }
            None => None,
            Some(_) if gpus.is_some() || share_gpus => return Err(usage_err(
                "--gpus and --share-gpus are for one node; across nodes each rank takes the GPU \
                 of its local rank",
            )),
            Some(count) => Some(Nodes {
                count,
                via: via.unwrap_or(if std::env::var_os("SLURM_JOB_ID").is_some() {
                    Via::Srun
                } else {
                    Via::Mpirun
                }),
                hosts,
                dry_run,
            }),
        };
    Ok(Some(RunArgs {
        nproc,
        gpus,
        share_gpus,
        nodes,
        program,
        args: it.collect(),
    }))
}

fn parse_gpu_list(text: &str) -> Result<Vec<usize>> {
    text.split(',')
        .map(|g| {
            g.trim()
                .parse()
                .map_err(|_| usage_err(format!("--gpus {text:?}: expected ordinals like 0,1,3")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Option<RunArgs>> {
        parse_args(args.iter().map(OsString::from))
    }

    #[test]
    fn parses_the_usual_forms() {
        let a = p(&["-n", "2", "--", "prog", "-x", "--y"]).unwrap().unwrap();
        assert_eq!((a.nproc, a.gpus, a.program), (2, None, "prog".into()));
        assert_eq!(a.args, vec![OsString::from("-x"), OsString::from("--y")]);
        let b = p(&["--gpus=1,0", "prog"]).unwrap().unwrap();
        assert_eq!((b.nproc, b.gpus), (2, Some(vec![1, 0])));
        let c = p(&["--nproc-per-node", "1", "--gpus", "3,2", "--", "prog"])
            .unwrap()
            .unwrap();
        assert_eq!(c.nproc, 1);
        assert!(!c.share_gpus);
        let d = p(&["-n", "4", "--share-gpus", "--gpus", "0,0,1,1", "prog"])
            .unwrap()
            .unwrap();
        assert_eq!(
            (d.nproc, d.gpus, d.share_gpus),
            (4, Some(vec![0, 0, 1, 1]), true)
        );
        assert!(p(&["--help"]).unwrap().is_none());
        let e = p(&[
            "--nodes=2",
            "-n",
            "4",
            "--via",
            "mpirun",
            "--hosts",
            "a,b",
            "--dry-run",
            "--",
            "prog",
        ])
        .unwrap()
        .unwrap();
        let nodes = e.nodes.unwrap();
        assert_eq!((e.nproc, nodes.count, nodes.via), (4, 2, Via::Mpirun));
        assert_eq!(nodes.hosts, Some(vec!["a".to_owned(), "b".to_owned()]));
        assert!(nodes.dry_run && a.nodes.is_none());
    }

    #[test]
    fn bad_command_lines_say_why() {
        for (args, want) in [
            (&["--", "prog"][..], "-n N"),
            (&["-n", "0", "prog"][..], "at least 1"),
            (&["-n", "x", "prog"][..], "expected a number"),
            (&["-n", "2"][..], "no PROGRAM"),
            (&["-n", "3", "--gpus", "0,1", "prog"][..], "more ranks than"),
            (&["--gpus", "0,0", "prog"][..], "--share-gpus"),
            (&["--bogus", "prog"][..], "unknown option"),
            (&["-n", "2", "--nodes", "0", "prog"][..], "at least 1"),
            (
                &["-n", "2", "--nodes", "2", "--via", "ssh", "prog"][..],
                "srun or mpirun",
            ),
            (&["-n", "2", "--dry-run", "prog"][..], "add --nodes M"),
            (&["--nodes", "2", "--gpus", "0,1", "prog"][..], "one node"),
        ] {
            let e = p(args).unwrap_err().to_string();
            assert!(e.contains(want) && e.contains("usage:"), "{args:?}: {e}");
        }
    }
}
