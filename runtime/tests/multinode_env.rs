//! What a multi-node launcher's environment makes `init` do, without running it: the bootstrap
//! `Bootstrap::Auto` picks and the GPU each process takes, for `srun` (Slurm, PMI/PMIx), `mpirun`
//! (Open MPI, MPICH/Hydra) across hosts and NVSHMEM's own bootstrap plugins. docs/runtime.md,
//! "Multi-node", describes the same table.

use pgas_runtime::bootstrap::{env, pick_device, resolve, Bootstrap};
use pgas_runtime::Error;

fn env_of(pairs: &[(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    let pairs = pairs.to_vec();
    move |k| {
        pairs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

/// What `Auto` resolves to for an MPI-style launch of several ranks: the rsmpi bootstrap with
/// the `mpi` feature, else the error that says to build with it.
fn expect_mpi(get: &dyn Fn(&str) -> Option<String>) {
    let r = resolve(Bootstrap::Auto, get);
    if cfg!(feature = "mpi") {
        assert_eq!(r.unwrap(), Bootstrap::Mpi);
    } else {
        assert!(matches!(r, Err(Error::MpiNotEnabled)), "{r:?}");
    }
}

/// Rank 5 of `srun -N 2 --ntasks-per-node 4`: the second task of node 1.
const SRUN_TASK: &[(&str, &str)] = &[
    ("SLURM_PROCID", "5"),
    ("SLURM_NTASKS", "8"),
    ("SLURM_LOCALID", "1"),
    ("SLURM_NNODES", "2"),
    ("SLURM_NODEID", "1"),
];

#[test]
fn srun_tasks_bootstrap_with_mpi_and_take_their_local_gpu() {
    let get = env_of(SRUN_TASK);
    assert_eq!(env::mpi_world_size(&get), Some(8));
    expect_mpi(&get);
    // The local id picks the GPU, never the global rank (5 would not exist on a 4-GPU node).
    assert_eq!(env::local_rank(&get).unwrap(), Some(("SLURM_LOCALID", 1)));
    assert_eq!(pick_device(None, &get, 4).unwrap(), 1);
}

#[test]
fn a_slurm_batch_script_outside_srun_is_one_pe() {
    // sbatch sets SLURM_NTASKS for the whole allocation; only srun's tasks have SLURM_PROCID.
    let get = env_of(&[("SLURM_NTASKS", "8"), ("SLURM_JOB_ID", "42")]);
    assert_eq!(env::mpi_world_size(&get), None);
    assert_eq!(resolve(Bootstrap::Auto, &get).unwrap(), Bootstrap::Single);
}

#[test]
fn srun_with_nvshmem_pmi_plugins_uses_nvshmem_bootstrap() {
    // `srun --mpi=pmix` with NVSHMEM_BOOTSTRAP=PMI and NVSHMEM_BOOTSTRAP_PMI=PMIX (or PMI-2):
    // NVSHMEM's own plugin bootstraps, pgas only picks the GPU.
    for (sel, plugin) in [("PMI", "PMIX"), ("PMI", "PMI-2"), ("PMIX", "")] {
        let pairs: Vec<(&str, &str)> = [
            ("NVSHMEM_BOOTSTRAP", sel),
            ("NVSHMEM_BOOTSTRAP_PMI", plugin),
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_LOCALID", "1"),
            ("PMIX_RANK", "5"),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .collect();
        let get = env_of(&pairs);
        assert_eq!(
            resolve(Bootstrap::Auto, &get).unwrap(),
            Bootstrap::Nvshmem,
            "{sel}"
        );
        assert_eq!(pick_device(None, &get, 2).unwrap(), 1);
    }
}

#[test]
fn mpirun_across_hosts_bootstraps_with_mpi() {
    // Open MPI: rank 6 of 8, the third on its host.
    let ompi = env_of(&[
        ("OMPI_COMM_WORLD_SIZE", "8"),
        ("OMPI_COMM_WORLD_RANK", "6"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "2"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
    ]);
    expect_mpi(&ompi);
    assert_eq!(pick_device(None, &ompi, 4).unwrap(), 2);
    // MPICH / Hydra (PMI_SIZE, MPI_LOCALRANKID) and MVAPICH2.
    let hydra = env_of(&[
        ("PMI_SIZE", "8"),
        ("PMI_RANK", "3"),
        ("MPI_LOCALRANKID", "3"),
    ]);
    expect_mpi(&hydra);
    assert_eq!(pick_device(None, &hydra, 4).unwrap(), 3);
    let mv2 = env_of(&[
        ("MV2_COMM_WORLD_SIZE", "2"),
        ("MV2_COMM_WORLD_LOCAL_RANK", "0"),
    ]);
    expect_mpi(&mv2);
    // PMIx-only launchers (prterun).
    expect_mpi(&env_of(&[("PMIX_SIZE", "16")]));
}

#[test]
fn a_local_rank_beyond_the_node_gpus_names_the_variable() {
    let get = env_of(&[
        ("OMPI_COMM_WORLD_SIZE", "16"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "8"),
    ]);
    let e = pick_device(None, &get, 8).unwrap_err().to_string();
    assert!(
        e.contains("GPU 8") && e.contains("OMPI_COMM_WORLD_LOCAL_RANK=8") && e.contains("Fix:"),
        "{e}"
    );
}

#[test]
fn pgas_run_variables_win_over_a_surrounding_mpi_job() {
    // pgas-run started inside an allocation: its own rendezvous, not the outer launcher's.
    let get = env_of(&[
        ("PGAS_RANK", "1"),
        ("PGAS_DEVICE", "3"),
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_LOCALID", "0"),
    ]);
    assert_eq!(resolve(Bootstrap::Auto, &get).unwrap(), Bootstrap::Launcher);
    assert_eq!(pick_device(None, &get, 4).unwrap(), 3);
}
