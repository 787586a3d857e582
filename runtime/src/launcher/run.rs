//! Starting, watching and stopping the ranks.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::args::RunArgs;
use super::mps;
use crate::bootstrap::{env, rendezvous};
use crate::error::{Error, Result};

/// Overrides the number of visible GPUs (for testing the launcher on machines without one).
pub const GPU_COUNT_VAR: &str = "PGAS_RUN_GPU_COUNT";

/// How long stopped ranks get to exit after SIGTERM before SIGKILL. Every rank must be gone
/// within 5 s of a death; the rest of that is for the driver to tear down a killed rank's GPU
/// context, which `wait` includes.
const GRACE: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(20);

/// Signal that asked the launcher to stop (0: none).
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
}

/// Makes SIGINT, SIGTERM and SIGHUP stop the ranks instead of killing only the launcher (each
/// rank runs in its own process group, so a terminal's Ctrl-C does not reach it directly).
/// For `pgas-run`'s `main`.
pub fn forward_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

/// Number of GPUs the launcher may use: `PGAS_RUN_GPU_COUNT` if set, else CUDA's device count.
pub fn visible_gpus() -> Result<usize> {
    if let Some(n) = env::parse_usize(&env::process, GPU_COUNT_VAR)? {
        return Ok(n);
    }
    crate::device::gpu_count().map_err(|e| match e {
        Error::NoCudaDriver => Error::Launcher(format!(
            "no NVIDIA driver (libcuda.so.1) on this machine, so no GPU to start ranks on; run `pgas doctor`. \
             (To exercise the launcher without GPUs, set {GPU_COUNT_VAR}=N.)"
        )),
        other => other,
    })
}

/// The exit code `pgas-run` ends with after `launch` returned this.
pub fn exit_code(result: &Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(Error::RankFailed { status, .. }) => status_code(status),
        Err(_) => 1,
    }
}

/// Runs the job: checks the GPUs, starts one process per rank, relays their output and waits.
/// `Ok` when every rank exited with status 0; [`Error::RankFailed`] names the first that did not.
pub fn launch(args: &RunArgs, gpus_visible: usize) -> Result<()> {
    let devices = assign_gpus(args, gpus_visible)?;
    let sharing = sharing_env(&devices, &env::process)?;
    // Ranks sharing a GPU run under CUDA MPS, whose server a dead client can leave unusable.
    let shared: Vec<usize> = if ranks_per_gpu(&devices) > 1 {
        let mut gpus = devices.clone();
        gpus.sort_unstable();
        gpus.dedup();
        gpus
    } else {
        Vec::new()
    };
    let pipe = mps_pipe_dir(&env::process);
    let mps = mps::Mps {
        pipe: &pipe,
        control: "nvidia-cuda-mps-control",
        probe: &mps::self_probe,
        recover: mps::RECOVER,
    };
    if !shared.is_empty() {
        if let Some(note) = mps.ensure_healthy(&shared)? {
            eprintln!("pgas-run: before the job: {note}");
        }
    }
    let token = job_token();
    let server = rendezvous::Server::start(token.clone())?;
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut ranks: Vec<Rank> = Vec::with_capacity(args.nproc);
    for (rank, device) in devices.iter().enumerate() {
        let mut cmd = Command::new(&args.program);
        cmd.args(&args.args)
            .env(env::RANK, rank.to_string())
            .env(env::WORLD_SIZE, args.nproc.to_string())
            .env(env::LOCAL_RANK, rank.to_string())
            .env(env::LOCAL_WORLD_SIZE, args.nproc.to_string())
            .env(env::DEVICE, device.to_string())
            .env(env::RENDEZVOUS, server.addr().to_string())
            .env(env::RUN_ID, &token)
            .envs(sharing.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Own process group, so stopping a rank also stops what it started.
            .process_group(0);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                stop_all(&mut ranks);
                return Err(Error::Launcher(format!(
                    "cannot start {:?} for rank {rank}: {e}",
                    args.program
                )));
            }
        };
        relay(child.stdout.take(), rank, false, done_tx.clone());
        relay(child.stderr.take(), rank, true, done_tx.clone());
        ranks.push(Rank {
            rank,
            child,
            status: None,
        });
    }
    drop(done_tx);
    let result = watch(&mut ranks);
    // Let the relays flush what the ranks wrote last; a grandchild that kept a pipe open must
    // not keep the launcher alive, hence the bound.
    let deadline = Instant::now() + Duration::from_secs(2);
    for _ in 0..2 * ranks.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    drop(server);
    // A rank that died with work on the GPU may have left the MPS server in its fault state:
    // mend it now, so the next job on this GPU starts.
    if result.is_err() && !shared.is_empty() {
        // Every rank is gone now; the check below may take seconds, so say when they ended.
        eprintln!(
            "pgas-run: every rank ended at {} ms (Unix time); checking the CUDA MPS server",
            unix_ms()
        );
        match mps.ensure_healthy(&shared) {
            Ok(None) => {}
            Ok(Some(note)) => eprintln!("pgas-run: after the job: {note}"),
            Err(e) => eprintln!("pgas-run: after the job: {e}"),
        }
    }
    result
}

struct Rank {
    rank: usize,
    child: Child,
    status: Option<ExitStatus>,
}

fn assign_gpus(args: &RunArgs, visible: usize) -> Result<Vec<usize>> {
    let devices: Vec<usize> = match &args.gpus {
        Some(list) => list[..args.nproc].to_vec(),
        // Round robin: with --share-gpus, rank r shares GPU r % visible.
        None => (0..args.nproc).map(|r| r % visible.max(1)).collect(),
    };
    if args.gpus.is_none() && args.nproc > visible && !args.share_gpus {
        return Err(Error::Launcher(format!(
            "asked for {} ranks but only {visible} GPU(s) are visible; pgas-run starts one rank per GPU. \
             Use -n {visible} or fewer (CUDA_VISIBLE_DEVICES limits what is visible), or --share-gpus \
             to put several ranks on one GPU under CUDA MPS (for development)",
            args.nproc
        )));
    }
    if let Some(bad) = devices.iter().find(|&&d| d >= visible) {
        return Err(Error::Launcher(format!(
            "--gpus names GPU {bad} but only {visible} GPU(s) are visible (ordinals 0..{visible})"
        )));
    }
    Ok(devices)
}

/// The most ranks any one GPU gets.
fn ranks_per_gpu(devices: &[usize]) -> usize {
    devices
        .iter()
        .map(|d| devices.iter().filter(|&e| e == d).count())
        .max()
        .unwrap_or(0)
}

/// Where CUDA MPS keeps its control pipe: `CUDA_MPS_PIPE_DIRECTORY`, else its default.
fn mps_pipe_dir(get: &dyn Fn(&str) -> Option<String>) -> std::path::PathBuf {
    get("CUDA_MPS_PIPE_DIRECTORY")
        .unwrap_or_else(|| "/tmp/nvidia-mps".to_string())
        .into()
}

/// The environment ranks that share a GPU need, or why they cannot share. NVSHMEM runs several
/// processes on one GPU only under CUDA MPS, and only with every API when their
/// `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` add up to at most 100 per GPU (without MPS it stops at
/// the first collective with "not supported with limited MPG"); so the daemon must be running
/// and each rank gets an equal share, unless the user set one. Every GPU in use must hold as
/// many ranks: NVSHMEM sets up sharing (with start-up collectives over every PE) only on the
/// PEs that share their GPU, so a rank alone on its GPU beside shared ones never joins them and
/// the job hangs at start (seen with 3 ranks on 2 GPUs; `docs/runtime.md`, "Several ranks on
/// one GPU").
fn sharing_env(
    devices: &[usize], get: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(&'static str, String)>> {
    let per_gpu = ranks_per_gpu(devices);
    if per_gpu <= 1 {
        return Ok(Vec::new());
    }
    let fewest = devices
        .iter()
        .map(|d| devices.iter().filter(|&e| e == d).count())
        .min()
        .unwrap_or(0);
    if fewest != per_gpu {
        let mut used: Vec<usize> = devices.to_vec();
        used.sort_unstable();
        used.dedup();
        let counts: Vec<String> = used
            .iter()
            .map(|g| format!("GPU {g}: {}", devices.iter().filter(|&d| d == g).count()))
            .collect();
        return Err(Error::Launcher(format!(
            "--share-gpus would put unequal numbers of ranks on the GPUs ({}); NVSHMEM then hangs \
             at start (it sets up GPU sharing only on the ranks that share theirs, with start-up \
             collectives the others never join). Use -n a multiple of the GPU count, or --gpus \
             to place as many ranks on every GPU in use",
            counts.join(", ")
        )));
    }
    let pipe = mps_pipe_dir(get);
    if !mps::daemon_alive(&pipe) {
        return Err(Error::Launcher(format!(
            "{per_gpu} ranks share a GPU, which NVSHMEM supports only under CUDA MPS, and no MPS \
             control daemon is running (no {}): start it with `nvidia-cuda-mps-control -d` \
             (stop it with `echo quit | nvidia-cuda-mps-control`)",
            pipe.join("control").display()
        )));
    }
    const SHARE: &str = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
    Ok(match get(SHARE) {
        Some(_) => Vec::new(),
        None => vec![(SHARE, (100 / per_gpu).to_string())],
    })
}

/// Milliseconds since the Unix epoch.
fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn job_token() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{:x}-{:x}", std::process::id(), nanos)
}

/// Copies a rank's stdout or stderr to ours, line by line, with a `[rank N]` prefix.
fn relay(
    pipe: Option<impl Read + Send + 'static>, rank: usize, is_err: bool, done: mpsc::Sender<()>,
) {
    let Some(pipe) = pipe else {
        let _ = done.send(());
        return;
    };
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = prefix_line(rank, &line);
                    // One write per line under the lock, so lines of different ranks never mix.
                    let _ = if is_err {
                        std::io::stderr().lock().write_all(&text)
                    } else {
                        std::io::stdout().lock().write_all(&text)
                    };
                }
            }
        }
        let _ = done.send(());
    });
}

/// `[rank N] line\n` (a newline is added when the rank's last line lacked one).
pub(crate) fn prefix_line(rank: usize, line: &[u8]) -> Vec<u8> {
    let mut out = format!("[rank {rank}] ").into_bytes();
    out.extend_from_slice(line);
    if !line.ends_with(b"\n") {
        out.push(b'\n');
    }
    out
}

/// Waits for all ranks; on the first failure (or a signal to the launcher), stops the rest.
fn watch(ranks: &mut [Rank]) -> Result<()> {
    loop {
        let mut running = 0;
        for r in ranks.iter_mut() {
            if r.status.is_none() {
                match r.child.try_wait() {
                    Ok(Some(st)) => {
                        r.status = Some(st);
                        if !st.success() {
                            let failed = (r.rank, describe(st));
                            stop_all(ranks);
                            return Err(Error::RankFailed {
                                rank: failed.0,
                                status: failed.1,
                            });
                        }
                    }
                    Ok(None) => running += 1,
                    Err(e) => {
                        let rank = r.rank;
                        stop_all(ranks);
                        return Err(Error::Launcher(format!("cannot wait for rank {rank}: {e}")));
                    }
                }
            }
        }
        if running == 0 {
            return Ok(());
        }
        let sig = STOP_SIGNAL.load(Ordering::SeqCst);
        if sig != 0 {
            stop_all(ranks);
            return Err(Error::Launcher(format!(
                "stopped by signal {sig}; all ranks were stopped"
            )));
        }
        std::thread::sleep(POLL);
    }
}

/// SIGTERM to every running rank's process group, SIGKILL to whatever is left after [`GRACE`].
fn stop_all(ranks: &mut [Rank]) {
    let signal_all = |ranks: &mut [Rank], sig| {
        for r in ranks.iter_mut().filter(|r| r.status.is_none()) {
            // SAFETY: kill has no memory effects here; the rank's pid is its process group id
            // (process_group(0) at spawn), and it is not reaped yet, so the id is still its.
            unsafe { libc::kill(-(r.child.id() as libc::pid_t), sig) };
        }
    };
    signal_all(ranks, libc::SIGTERM);
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline && reap(ranks) > 0 {
        std::thread::sleep(POLL);
    }
    signal_all(ranks, libc::SIGKILL);
    for r in ranks.iter_mut().filter(|r| r.status.is_none()) {
        r.status = r.child.wait().ok();
    }
}

/// Collects exited ranks; returns how many still run.
fn reap(ranks: &mut [Rank]) -> usize {
    let mut running = 0;
    for r in ranks.iter_mut().filter(|r| r.status.is_none()) {
        match r.child.try_wait() {
            Ok(Some(st)) => r.status = Some(st),
            _ => running += 1,
        }
    }
    running
}

/// `exited with status 3` / `was killed by signal 11 (SIGSEGV)`.
fn describe(st: ExitStatus) -> String {
    match (st.code(), st.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig} ({})", signal_name(sig)),
        _ => format!("ended with {st}"),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGINT => "SIGINT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGXCPU => "SIGXCPU",
        _ => "signal",
    }
}

/// The exit code for a failed rank's status text: its code, or 128 + signal like a shell.
fn status_code(status: &str) -> i32 {
    let num = |prefix: &str| {
        status
            .strip_prefix(prefix)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<i32>().ok())
    };
    match (num("exited with status "), num("was killed by signal ")) {
        (Some(code), _) if code != 0 => code,
        (_, Some(sig)) => 128 + sig,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_get_a_rank_prefix() {
        assert_eq!(prefix_line(3, b"hello\n"), b"[rank 3] hello\n");
        assert_eq!(prefix_line(0, b"tail"), b"[rank 0] tail\n");
    }

    #[test]
    fn statuses_map_to_shell_exit_codes() {
        assert_eq!(status_code("exited with status 3"), 3);
        assert_eq!(status_code("was killed by signal 11 (SIGSEGV)"), 139);
        assert_eq!(
            describe(ExitStatus::from_raw(3 << 8)),
            "exited with status 3"
        );
        assert_eq!(
            describe(ExitStatus::from_raw(libc::SIGSEGV)),
            "was killed by signal 11 (SIGSEGV)"
        );
    }

    #[test]
    fn more_ranks_than_gpus_is_refused() {
        let args = RunArgs {
            nproc: 3,
            gpus: None,
            share_gpus: false,
            nodes: None,
            program: "true".into(),
            args: vec![],
        };
        let e = assign_gpus(&args, 2).unwrap_err().to_string();
        assert!(e.contains("3 ranks") && e.contains("only 2 GPU"), "{e}");
        let args = RunArgs {
            nproc: 2,
            gpus: Some(vec![1, 4]),
            share_gpus: false,
            nodes: None,
            program: "true".into(),
            args: vec![],
        };
        let e = assign_gpus(&args, 2).unwrap_err().to_string();
        assert!(e.contains("GPU 4"), "{e}");
        let args = RunArgs {
            nproc: 1,
            gpus: Some(vec![1, 0]),
            share_gpus: false,
            nodes: None,
            program: "true".into(),
            args: vec![],
        };
        assert_eq!(assign_gpus(&args, 2).unwrap(), vec![1]);
    }

    #[test]
    fn shared_gpus_go_round_robin_under_mps_with_equal_shares() {
        let args = RunArgs {
            nproc: 4,
            gpus: None,
            share_gpus: true,
            nodes: None,
            program: "true".into(),
            args: vec![],
        };
        let devices = assign_gpus(&args, 1).unwrap();
        assert_eq!(devices, vec![0, 0, 0, 0]);
        assert_eq!(assign_gpus(&args, 2).unwrap(), vec![0, 1, 0, 1]);
        assert_eq!(ranks_per_gpu(&[0, 1, 0, 1]), 2);

        // Unequal shares are refused before the MPS check: NVSHMEM would hang at start.
        let any_pipe =
            |k: &str| (k == "CUDA_MPS_PIPE_DIRECTORY").then(|| "/nonexistent".to_string());
        let e = sharing_env(&[0, 1, 0], &any_pipe).unwrap_err().to_string();
        assert!(
            e.contains("GPU 0: 2, GPU 1: 1") && e.contains("multiple of the GPU count"),
            "{e}"
        );
        // Two ranks on GPU 0 and none elsewhere is an equal share of the GPUs in use.
        assert!(sharing_env(&[0, 0], &any_pipe)
            .unwrap_err()
            .to_string()
            .contains("nvidia-cuda-mps-control -d"));

        // One rank per GPU needs nothing; sharing needs the MPS daemon's control pipe.
        let nothing = |_: &str| None;
        assert!(sharing_env(&[0, 1], &nothing).unwrap().is_empty());
        let dir = std::env::temp_dir().join(format!("pgas-mps-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir_s = dir.to_string_lossy().into_owned();
        let no_daemon = |k: &str| (k == "CUDA_MPS_PIPE_DIRECTORY").then(|| dir_s.clone());
        let e = sharing_env(&devices, &no_daemon).unwrap_err().to_string();
        assert!(
            e.contains("nvidia-cuda-mps-control -d") && e.contains("4 ranks"),
            "{e}"
        );
        std::fs::write(dir.join("control"), b"").unwrap();
        assert_eq!(
            sharing_env(&devices, &no_daemon).unwrap(),
            vec![("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25".to_string())]
        );
        // A share the user chose is kept.
        let chosen = |k: &str| match k {
            "CUDA_MPS_PIPE_DIRECTORY" => Some(dir_s.clone()),
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" => Some("40".to_string()),
            _ => None,
        };
        assert!(sharing_env(&devices, &chosen).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
