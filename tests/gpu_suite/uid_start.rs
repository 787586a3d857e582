//! `gpu_suite --uid-bootstrap DIR [CASE...]`: the start-up that a program drives itself
//! (`UniqueId::new`, its bytes through a channel of the program's, `builder().unique_id(id,
//! rank, n_pes)`), not pgas's own bootstraps. The channel is a file in DIR: rank 0 writes the id
//! there (write, then rename, so no rank reads half of it) and the others poll for it. Under
//! `pgas-run -n N` the rank and size come from `PGAS_RANK` / `PGAS_WORLD_SIZE` and the file name
//! from `PGAS_RUN_ID`, but the launcher's rendezvous is not used; alone, it is rank 0 of 1.
//! Then the `uid_start/*` cases and the host collectives run on the context it made.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::runner::{self, case, Case};
use crate::util::{self, check_eq, CaseResult};
use pgas::bootstrap::UniqueId;
use pgas::prelude::*;

pub const CASES: &[Case] = &[case("uid_start/world_from_a_file", world)];

/// How long the other ranks wait for rank 0's file.
const WAIT: Duration = Duration::from_secs(60);

fn env_usize(var: &str) -> Result<Option<usize>, String> {
    std::env::var(var)
        .ok()
        .map(|v| {
            v.parse()
                .map_err(|_| format!("{var}={v:?} is not a number"))
        })
        .transpose()
}

/// Rank 0 makes the id and publishes it in `file`; the others read it.
fn exchange(rank: usize, file: &Path) -> Result<UniqueId, String> {
    if rank == 0 {
        let id = UniqueId::new().map_err(|e| format!("UniqueId::new: {e}"))?;
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, id.as_bytes())
            .and_then(|()| std::fs::rename(&tmp, file))
            .map_err(|e| format!("writing {}: {e}", file.display()))?;
        return Ok(id);
    }
    let start = Instant::now();
    loop {
        if let Ok(bytes) = std::fs::read(file) {
            return UniqueId::from_bytes(&bytes).map_err(|e| format!("{}: {e}", file.display()));
        }
        if start.elapsed() > WAIT {
            return Err(format!(
                "rank 0 wrote no id to {} within {WAIT:?}",
                file.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn run(dir: &str, filters: &[String]) -> ExitCode {
    let setup = || -> Result<(UniqueId, usize, usize, PathBuf), String> {
        let rank = env_usize("PGAS_RANK")?.unwrap_or(0);
        let n = env_usize("PGAS_WORLD_SIZE")?.unwrap_or(1);
        let run_id =
            std::env::var("PGAS_RUN_ID").unwrap_or_else(|_| std::process::id().to_string());
        let file = Path::new(dir).join(format!("pgas-uid-{run_id}"));
        Ok((exchange(rank, &file)?, rank, n, file))
    };
    let (id, rank, n, file) = match setup() {
        Ok(v) => v,
        Err(e) => {
            println!("gpu_suite: FAIL uid bootstrap: {e}");
            println!("gpu_suite: 0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    };
    let init = pgas::builder().unique_id(id, rank, n).init();
    if rank == 0 {
        // Every rank has read the file once init returned (init waits for all of them).
        let _ = std::fs::remove_file(&file);
    }
    let cases = [CASES, crate::host_collectives::CASES].concat();
    runner::run_with(init, &cases, &[], filters)
}

/// The context is the job pgas-run described, started by the unique id: this PE's number is its
/// rank, and every PE's number arrives in the right place of an fcollect.
fn world(p: &Pgas) -> CaseResult {
    let (me, n) = (util::me(p), util::npes(p));
    util::ensure(p.bootstrap() == Bootstrap::UniqueId, || {
        format!("bootstrap {:?}, expected UniqueId", p.bootstrap())
    })?;
    let rank = env_usize("PGAS_RANK")?.unwrap_or(0);
    let size = env_usize("PGAS_WORLD_SIZE")?.unwrap_or(1);
    util::ensure(me == rank && n == size, || {
        format!("PE {me} of {n}, expected rank {rank} of {size}")
    })?;
    let src = p.alloc_from(&[me as u64 + 1])?;
    let dst = p.alloc::<u64>(n)?;
    p.fcollect(Team::WORLD, &dst, &src)?;
    util::settle(p)?;
    check_eq(
        "fcollect of PE numbers",
        &dst.to_vec()?,
        &(1..=n as u64).collect::<Vec<_>>(),
    )
}
