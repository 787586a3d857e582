//! CUDA MPS under `--share-gpus`: finding the MPS server in its fault state, and restarting it.
//!
//! When a client of an MPS server dies with work on the GPU (a trapped kernel, a SIGKILL while a
//! kernel waits), the server is left in a fault state, and the next process on that GPU fails
//! at its first step ("CUDA error while creating the CUDA context", "unspecified launch
//! failure"), whatever it runs. Nothing in CUDA says so. So `pgas-run` probes, before a job that
//! shares GPUs and after one in which a rank died: a child process (this same program, with
//! [`PROBE_VAR`] set) makes a context on each shared GPU, allocates and synchronizes. When a
//! probe fails, the launcher restarts the MPS control daemon (`quit`, then `-d`, with the
//! launcher's environment, so `CUDA_MPS_PIPE_DIRECTORY` and friends carry over) and probes
//! again; when that fails too, the error says what happened and the commands that clear it.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Set (to a GPU ordinal) in the environment of the probe process `pgas-run` starts: the
/// program then runs [`probe_main`] instead of a job.
pub const PROBE_VAR: &str = "PGAS_RUN_MPS_PROBE";

/// How long a probe may take.
const LIMIT: Duration = Duration::from_secs(20);
/// How long a `quit`, a SIGKILL or a start of the daemon may take.
const QUIT_LIMIT: Duration = Duration::from_secs(5);
/// How long a faulted server gets to heal itself before the daemon is restarted.
pub(super) const RECOVER: Duration = Duration::from_secs(5);

/// The probe process's work: a context on GPU `ordinal`, one allocation, one synchronize. Exit
/// status 0 when all of it worked; otherwise the error is printed and the status is 1.
pub fn probe_main(ordinal: &str) -> i32 {
    let run = || -> std::result::Result<(), String> {
        let ordinal: usize = ordinal
            .parse()
            .map_err(|_| format!("{PROBE_VAR}={ordinal:?} is not a GPU ordinal"))?;
        // SAFETY: only tries to open the driver library (cudarc panics on a call without it).
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err("no NVIDIA driver (libcuda.so.1) here".into());
        }
        let ctx = cudarc::driver::CudaContext::new(ordinal)
            .map_err(|e| format!("creating a CUDA context on GPU {ordinal}: {e:?}"))?;
        let stream = ctx.default_stream();
        let buf = stream
            .alloc_zeros::<u8>(1 << 20)
            .map_err(|e| format!("allocating on GPU {ordinal}: {e:?}"))?;
        stream
            .synchronize()
            .map_err(|e| format!("synchronizing GPU {ordinal}: {e:?}"))?;
        drop(buf);
        Ok(())
    };
    match run() {
        Ok(()) => 0,
        Err(e) => {
            println!("{e}");
            1
        }
    }
}

/// Runs `cmd` with `input` on its standard input for at most `limit`; its status (`None`: it
/// did not end in time and was killed) and its output.
fn run_bounded(mut cmd: Command, input: &str, limit: Duration) -> Result<(Option<i32>, String)> {
    let program = format!("{:?}", cmd.get_program());
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Launcher(format!("cannot start {program}: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.as_bytes());
    }
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().ok().flatten() {
            break Some(status.code().unwrap_or(-1));
        }
        if start.elapsed() >= limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = child
        .wait_with_output()
        .map(|o| {
            let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&o.stderr));
            text.trim().to_string()
        })
        .unwrap_or_default();
    Ok((status, output))
}

/// The MPS daemon `pgas-run` checks, and how it probes a GPU.
pub(super) struct Mps<'a> {
    /// The daemon's control pipe folder (`CUDA_MPS_PIPE_DIRECTORY`, or its default).
    pub(super) pipe: &'a Path,
    /// The control program (`nvidia-cuda-mps-control`).
    pub(super) control: &'a str,
    /// The command that probes one GPU (exit status 0: it can take new clients).
    pub(super) probe: &'a dyn Fn(usize) -> Command,
    /// How long a faulted server gets to heal itself before the daemon is restarted
    /// ([`RECOVER`]).
    pub(super) recover: Duration,
}

/// The probe `pgas-run` runs: itself, with [`PROBE_VAR`] naming the GPU.
pub(super) fn self_probe(gpu: usize) -> Command {
    // A launcher that cannot name its own program probes nothing it could run; the spawn then
    // fails with the reason.
    let exe = std::env::current_exe().unwrap_or_else(|_| "pgas-run".into());
    let mut cmd = Command::new(exe);
    cmd.env(PROBE_VAR, gpu.to_string());
    cmd
}

/// The commands that clear a faulted MPS server by hand.
const CLEAR: &str = "`echo quit | nvidia-cuda-mps-control`, end every process still using the \
                     GPU (nvidia-smi lists them), then `nvidia-cuda-mps-control -d`";

impl Mps<'_> {
    /// Probes each GPU of `gpus`; the first failure, described.
    fn probe(&self, gpus: &[usize]) -> Result<Option<String>> {
        for &gpu in gpus {
            let (status, output) = run_bounded((self.probe)(gpu), "", LIMIT)?;
            match status {
                Some(0) => {}
                Some(_) => return Ok(Some(format!("GPU {gpu}: {output}"))),
                None => {
                    return Ok(Some(format!(
                        "GPU {gpu}: creating a CUDA context did not finish within {} s",
                        LIMIT.as_secs()
                    )))
                }
            }
        }
        Ok(None)
    }

    /// Waits until the daemon is up (`up`) or gone, for at most [`QUIT_LIMIT`].
    fn await_daemon(&self, up: bool) -> bool {
        let start = Instant::now();
        while daemon_alive(self.pipe) != up {
            if start.elapsed() >= QUIT_LIMIT {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    }

    /// Restarts the MPS control daemon: `quit`, and where it does not stop in time (a server in
    /// its fault state can keep `quit` waiting), SIGKILL for the daemon and its servers; then
    /// `-d`.
    fn restart(&self) -> Result<()> {
        let _ = run_bounded(Command::new(self.control), "quit\n", QUIT_LIMIT)?;
        if !self.await_daemon(false) {
            kill_daemon(self.pipe);
            if !self.await_daemon(false) {
                return Err(Error::Launcher(format!(
                    "the CUDA MPS daemon did not stop, after `quit` and SIGKILL; clear it with \
                     {CLEAR}"
                )));
            }
        }
        // A daemon that was killed leaves its pipe and pid files behind.
        for stale in ["control", PID_FILE] {
            let _ = std::fs::remove_file(self.pipe.join(stale));
        }
        let mut start = Command::new(self.control);
        start.arg("-d");
        let (status, output) = run_bounded(start, "", QUIT_LIMIT)?;
        if status != Some(0) || !self.await_daemon(true) {
            return Err(Error::Launcher(format!(
                "restarting the CUDA MPS daemon (`nvidia-cuda-mps-control -d`) failed ({output}); \
                 start it by hand"
            )));
        }
        Ok(())
    }

    /// Makes sure the MPS server of `gpus` can take new clients: probes; when a probe fails,
    /// probes again for up to `recover` (a server heals itself once every client of the
    /// faulted context has exited), then restarts the daemon. `Ok(Some(what))` when it waited
    /// or restarted (`what` says why, for the user); `Err` when the server stays unusable.
    pub(super) fn ensure_healthy(&self, gpus: &[usize]) -> Result<Option<String>> {
        let Some(fault) = self.probe(gpus)? else {
            return Ok(None);
        };
        let start = Instant::now();
        while start.elapsed() < self.recover {
            std::thread::sleep(Duration::from_millis(250));
            if self.probe(gpus)?.is_none() {
                return Ok(Some(format!(
                    "the CUDA MPS server could not take new clients ({fault}); it recovered by \
                     itself within {} ms",
                    start.elapsed().as_millis()
                )));
            }
        }
        self.restart()?;
        match self.probe(gpus)? {
            None => Ok(Some(format!(
                "the CUDA MPS server could not take new clients ({fault}) for {:.1} s, left in its \
                 fault state by a process that died with work on the GPU; pgas-run restarted the \
                 MPS daemon",
                self.recover.as_secs_f64()
            ))),
            Some(still) => Err(Error::Launcher(format!(
                "the CUDA MPS server cannot take new clients ({fault}), and it still cannot after \
                 pgas-run restarted the MPS daemon ({still}). Clear it with {CLEAR}"
            ))),
        }
    }
}

/// The file in the pipe folder that holds the control daemon's process id.
const PID_FILE: &str = "nvidia-cuda-mps-control.pid";

/// The process id in `pipe`'s pid file, if there is one.
fn daemon_pid(pipe: &Path) -> Option<i32> {
    std::fs::read_to_string(pipe.join(PID_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether process `pid` runs (exists and is not a zombie).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        // The state follows the command name, which is in parentheses.
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().to_string())
        })
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

/// Whether the MPS control daemon whose pipe folder is `pipe` is up: its pid file names a
/// running process, or, where there is no pid file, its control pipe exists.
pub(super) fn daemon_alive(pipe: &Path) -> bool {
    match daemon_pid(pipe) {
        Some(pid) => running(pid),
        None => pipe.join("control").exists(),
    }
}

/// SIGKILLs the control daemon of `pipe` and every MPS server process.
fn kill_daemon(pipe: &Path) {
    let mut victims: Vec<i32> = daemon_pid(pipe).into_iter().collect();
    if let Ok(procs) = std::fs::read_dir("/proc") {
        for entry in procs.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains("nvidia-cuda-mps-server") {
                victims.push(pid);
            }
        }
    }
    for pid in victims {
        // SAFETY: kill(2) with a pid read just now; a process that has exited since makes it
        // fail with ESRCH, which is ignored.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A fake control program over `dir`: `-d` creates the control file and marks the server
    /// healthy when `heals`; `quit` removes the control file.
    fn fixture(dir: &Path, heals: bool) -> String {
        std::fs::create_dir_all(dir).unwrap();
        let control = dir.join("mps-control");
        let mark = if heals { "touch \"$d/healthy\"" } else { ":" };
        std::fs::write(
            &control,
            format!(
                "#!/bin/sh\nd={d}\nif [ \"$1\" = -d ]; then touch \"$d/control\"; {mark}; \
                 else read -r c; [ \"$c\" = quit ] && rm -f \"$d/control\"; fi\n",
                d = dir.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&control, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.join("control"), "").unwrap();
        control.display().to_string()
    }

    fn probe_in(dir: &Path) -> impl Fn(usize) -> Command {
        let marker = dir.join("healthy");
        move |gpu| {
            let mut cmd = Command::new("sh");
            cmd.arg("-c").arg(format!(
                "test -f {} || {{ echo 'CUDA_ERROR_UNKNOWN on GPU {gpu}'; exit 1; }}",
                marker.display()
            ));
            cmd
        }
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("pgas-mps-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// `ensure_healthy(gpus)` against a fake daemon in a fresh folder named `name`: the server
    /// starts healthy (`healthy`) or not, and a restart heals it (`heals`) or not. Returns the
    /// result and whether the daemon runs afterwards.
    fn ensure(
        name: &str, healthy: bool, heals: bool, gpus: &[usize],
    ) -> (Result<Option<String>>, bool) {
        let dir = scratch(name);
        let control = fixture(&dir, heals);
        if healthy {
            std::fs::write(dir.join("healthy"), "").unwrap();
        }
        let probe = probe_in(&dir);
        let mps = Mps {
            pipe: &dir,
            control: &control,
            probe: &probe,
            recover: Duration::ZERO,
        };
        let result = mps.ensure_healthy(gpus);
        let running = dir.join("control").exists();
        let _ = std::fs::remove_dir_all(&dir);
        (result, running)
    }

    #[test]
    fn a_healthy_server_is_left_alone() {
        assert!(ensure("healthy", true, true, &[0]).0.unwrap().is_none());
    }

    #[test]
    fn a_faulted_server_is_restarted_and_named() {
        let (result, running) = ensure("heals", false, true, &[0, 1]);
        let note = result.unwrap().expect("a restart");
        assert!(
            note.contains("CUDA_ERROR_UNKNOWN on GPU 0") && note.contains("restarted"),
            "{note}"
        );
        assert!(running, "the daemon runs again");
    }

    #[test]
    fn a_server_that_stays_faulted_is_an_error_with_the_commands() {
        let e = ensure("stuck", false, false, &[0])
            .0
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("still cannot")
                && e.contains("echo quit | nvidia-cuda-mps-control")
                && e.contains("nvidia-cuda-mps-control -d"),
            "{e}"
        );
    }
}
