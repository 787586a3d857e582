//! `pgas-run`, the single-node launcher: one process per GPU, like
//! `torchrun --nproc-per-node`.
//!
//! ```text
//! pgas-run -n N [--gpus LIST] [--share-gpus] -- PROGRAM [ARGS...]
//! ```
//!
//! `--share-gpus` lets several ranks share a GPU, under CUDA MPS (see `docs/runtime.md`).
//!
//! Each rank gets `PGAS_RANK`, `PGAS_WORLD_SIZE`, `PGAS_LOCAL_RANK`, `PGAS_LOCAL_WORLD_SIZE`,
//! `PGAS_DEVICE` (its GPU) and the rendezvous address and job token, on top of the launcher's own
//! environment (so `NVSHMEM_DISABLE_NVLS` and friends pass through). Output lines are prefixed
//! with `[rank N]`. When a rank fails, the others are stopped (SIGTERM, then SIGKILL after 2 s)
//! and `pgas-run` exits non-zero naming the rank and how it ended. With `--nodes`, a job across
//! nodes is handed to `srun` or `mpirun` ([`multinode`]).

mod args;
pub mod mps;
pub mod multinode;
mod run;

pub use args::{parse_args, RunArgs, USAGE};
pub use run::{exit_code, forward_signals, launch, visible_gpus, GPU_COUNT_VAR};
