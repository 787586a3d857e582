//! `pgas-run --nodes N`: a job across nodes, as the `srun` or `mpirun` command line that starts it
//! (printed with `--dry-run`, run otherwise). pgas-run's own launch stays on one node (its
//! rendezvous listens on 127.0.0.1); across nodes Slurm or MPI starts the ranks and NVSHMEM
//! bootstraps itself through its PMIx or MPI plugin, which works whatever features the program
//! was built with (`docs/runtime.md`, "Multi-node").

use crate::error::{Error, Result};

/// Which launcher starts the ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// Slurm's `srun`, inside an allocation: NVSHMEM bootstraps through PMIx.
    Srun,
    /// Open MPI's `mpirun` on named hosts: NVSHMEM bootstraps through MPI.
    Mpirun,
}

/// The multi-node part of a `pgas-run` command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nodes {
    /// Number of nodes (`--nodes`).
    pub count: usize,
    /// The launcher (`--via`; by default `srun` inside a Slurm job, else `mpirun`).
    pub via: Via,
    /// The nodes' host names, for `mpirun` (`--hosts a,b`).
    pub hosts: Option<Vec<String>>,
    /// Print the command instead of running it (`--dry-run`).
    pub dry_run: bool,
}

/// The variables every rank needs from the launching shell: pgas's and NVSHMEM's settings.
fn forwarded(name: &str) -> bool {
    name.starts_with("NVSHMEM_") || name.starts_with("PGAS_")
}

/// The command that starts `per_node` ranks of `program args` on each of `nodes.count` nodes,
/// with `env` the launching shell's environment (`NVSHMEM_*` and `PGAS_*` are passed on, and
/// `NVSHMEM_BOOTSTRAP` set to the launcher's plugin unless it is set already).
///
/// # Errors
/// `mpirun` without `--hosts`, or with another number of hosts than `--nodes`.
pub fn command(
    nodes: &Nodes, per_node: usize, program: &str, args: &[String], env: &[(String, String)],
) -> Result<Vec<String>> {
    let n = nodes.count;
    let user_bootstrap = env.iter().any(|(k, _)| k == "NVSHMEM_BOOTSTRAP");
    let mut cmd: Vec<String> = match nodes.via {
        Via::Srun => {
            let mut export = String::from("ALL");
            if !user_bootstrap {
                export.push_str(",NVSHMEM_BOOTSTRAP=PMI,NVSHMEM_BOOTSTRAP_PMI=PMIX");
            }
            vec![
                "srun".into(),
                format!("--nodes={n}"),
                format!("--ntasks-per-node={per_node}"),
                format!("--gpus-per-node={per_node}"),
                "--mpi=pmix".into(),
                "--kill-on-bad-exit=1".into(),
                format!("--export={export}"),
            ]
        }
        Via::Mpirun => {
            let hosts = nodes.hosts.as_ref().ok_or_else(|| {
                Error::Launcher(
                    "--via mpirun needs the nodes' host names: --hosts a,b (or use --via srun \
                     inside a Slurm allocation)"
                        .into(),
                )
            })?;
            if hosts.len() != n {
                return Err(Error::Launcher(format!(
                    "--nodes {n} but --hosts names {} host(s); name one per node",
                    hosts.len()
                )));
            }
            let slots: Vec<String> = hosts.iter().map(|h| format!("{h}:{per_node}")).collect();
            let mut c: Vec<String> = vec![
                "mpirun".into(),
                "-np".into(),
                (n * per_node).to_string(),
                "-H".into(),
                slots.join(","),
                "--map-by".into(),
                format!("ppr:{per_node}:node"),
                "--bind-to".into(),
                "none".into(),
            ];
            let mut names: Vec<&str> = env
                .iter()
                .map(|(k, _)| k.as_str())
                .filter(|k| forwarded(k))
                .collect();
            names.sort_unstable();
            names.dedup();
            for name in names {
                c.extend(["-x".into(), name.to_owned()]);
            }
            if !user_bootstrap {
                c.extend(["-x".into(), "NVSHMEM_BOOTSTRAP=MPI".into()]);
            }
            c
        }
    };
    cmd.push(program.to_owned());
    cmd.extend(args.iter().cloned());
    Ok(cmd)
}

/// `cmd` as one line a POSIX shell reads back as the same words.
pub fn shell_line(cmd: &[String]) -> String {
    cmd.iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
            if plain {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn srun_gets_the_shape_and_nvshmem_s_pmix_bootstrap() {
        let nodes = Nodes {
            count: 2,
            via: Via::Srun,
            hosts: None,
            dry_run: true,
        };
        let cmd = command(
            &nodes,
            4,
            "./prog",
            &["--x".into()],
            &env(&[("HOME", "/h")]),
        )
        .unwrap();
        assert_eq!(
            shell_line(&cmd),
            "srun --nodes=2 --ntasks-per-node=4 --gpus-per-node=4 --mpi=pmix \
             --kill-on-bad-exit=1 --export=ALL,NVSHMEM_BOOTSTRAP=PMI,NVSHMEM_BOOTSTRAP_PMI=PMIX \
             ./prog --x"
        );
        // A bootstrap the user chose stays theirs.
        let cmd = command(&nodes, 4, "p", &[], &env(&[("NVSHMEM_BOOTSTRAP", "MPI")])).unwrap();
        assert!(cmd.contains(&"--export=ALL".to_owned()), "{cmd:?}");
    }

    #[test]
    fn mpirun_names_every_host_and_passes_the_settings_on() {
        let nodes = Nodes {
            count: 2,
            via: Via::Mpirun,
            hosts: Some(vec!["a".into(), "b".into()]),
            dry_run: false,
        };
        let vars = env(&[
            ("PGAS_CACHE_DIR", "/shared/cache"),
            ("NVSHMEM_DISABLE_NVLS", "1"),
            ("PATH", "/bin"),
        ]);
        let cmd = command(&nodes, 8, "/shared/prog", &["it's".into()], &vars).unwrap();
        assert_eq!(
            shell_line(&cmd),
            "mpirun -np 16 -H a:8,b:8 --map-by ppr:8:node --bind-to none -x NVSHMEM_DISABLE_NVLS \
             -x PGAS_CACHE_DIR -x NVSHMEM_BOOTSTRAP=MPI /shared/prog 'it'\\''s'"
        );
    }

    #[test]
    fn mpirun_without_the_right_hosts_says_what_to_pass() {
        let mut nodes = Nodes {
            count: 3,
            via: Via::Mpirun,
            hosts: None,
            dry_run: true,
        };
        let e = command(&nodes, 1, "p", &[], &[]).unwrap_err().to_string();
        assert!(e.contains("--hosts a,b") && e.contains("--via srun"), "{e}");
        nodes.hosts = Some(vec!["a".into()]);
        let e = command(&nodes, 1, "p", &[], &[]).unwrap_err().to_string();
        assert!(e.contains("--nodes 3 but --hosts names 1"), "{e}");
    }
}
