//! Running the programs gpuprobe asks for facts (`hipconfig`, `nvcc`, `hipcc --version`, `git`):
//! each in its own process group, with a timeout, its output bounded, and the whole group killed
//! when it is over, so that a program that never exits, or leaves children behind, cannot hang
//! gpuprobe.
//!
//! Children that leave the group (`setsid`) are caught where the platform allows: on Linux,
//! gpuprobe makes itself a child subreaper ([`adopt_orphans`]), so such escapees become its own
//! children, and [`kill_adopted`] ends them before gpuprobe exits.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most kept of each output stream; the rest is read and dropped so the child never blocks.
pub const MAX_OUTPUT_BYTES: usize = 1 << 20;

/// How long to wait for the pipes after the child itself exited: a grandchild outside the group
/// may hold them open forever, and the child's answer is complete once it has exited.
pub const PIPE_GRACE: Duration = Duration::from_millis(200);

#[derive(Debug)]
pub struct Captured {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

#[derive(Debug)]
pub enum RunError {
    /// The program could not be started (not found, not executable).
    Spawn(std::io::Error),
    /// It ran past the deadline and was killed with its group.
    TimedOut { after: Duration },
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spawn(e) => write!(f, "could not be started: {e}"),
            RunError::TimedOut { after } => write!(
                f,
                "did not finish within {} s and was killed",
                after.as_secs_f64()
            ),
        }
    }
}

/// Puts the command in a new process group and, on Linux, has it killed when gpuprobe dies.
pub fn isolate(cmd: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        #[cfg(target_os = "linux")]
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

/// SIGKILL to the process group `pgid` (a child started with [`isolate`] leads its own group).
pub fn kill_group(pgid: u32) {
    #[cfg(unix)]
    if let Ok(pid) = i32::try_from(pgid)
        && pid > 0
    {
        // SAFETY: plain syscall; a group that no longer exists gives ESRCH, which is fine.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    #[cfg(not(unix))]
    let _ = pgid;
}

fn drain<R: Read + Send + 'static>(mut r: R) -> (Arc<Mutex<Vec<u8>>>, std::thread::JoinHandle<()>) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let shared = Arc::clone(&buf);
    let h = std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match r.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let Ok(mut b) = shared.lock() else { return };
                    let room = MAX_OUTPUT_BYTES.saturating_sub(b.len());
                    b.extend_from_slice(&chunk[..n.min(room)]);
                }
            }
        }
    });
    (buf, h)
}

fn take(buf: &Arc<Mutex<Vec<u8>>>) -> String {
    buf.lock()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Runs `cmd` (stdin closed) and captures its output, killing its process group at `timeout`.
pub fn output(mut cmd: Command, timeout: Duration) -> Result<Captured, RunError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    isolate(&mut cmd);
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    let pgid = child.id();
    let readers = [
        child.stdout.take().map(drain),
        child.stderr.take().map(drain),
    ];
    let deadline = Instant::now() + timeout;
    let mut nap = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => break None,
            Ok(None) => {
                std::thread::sleep(nap.min(deadline.saturating_duration_since(Instant::now())));
                nap = (nap * 2).min(Duration::from_millis(20));
            }
            Err(_) => break None,
        }
    };
    // Whatever is left of the group (a background helper, a hung grandchild) goes with it.
    kill_group(pgid);
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(RunError::TimedOut { after: timeout });
    };
    let grace = Instant::now() + PIPE_GRACE;
    for (_, h) in readers.iter().flatten() {
        while !h.is_finished() && Instant::now() < grace {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let [out, err] = readers;
    Ok(Captured {
        status,
        stdout: out.map(|(b, _)| take(&b)).unwrap_or_default(),
        stderr: err.map(|(b, _)| take(&b)).unwrap_or_default(),
    })
}

/// Makes gpuprobe the reaper of its orphaned descendants (Linux), so that a child's child that
/// called `setsid` to leave its process group still ends up under gpuprobe. Call once, early.
pub fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain prctl on this process; failure only means escapees are not caught.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Children already sent SIGKILL and reaped by a thread of their own (probe children left after
/// their report, see `children::orchestrator::Exit::AfterDone`): they run no code of theirs again,
/// and what remains of them is the kernel tearing down their GPU state, which gpuprobe's exit
/// does not wait for.
static DYING: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Records `pid` as killed and being reaped elsewhere (see [`DYING`]).
pub fn dying(pid: u32) {
    if let Ok(mut d) = DYING.lock() {
        d.push(pid);
    }
}

/// Kills every remaining child of this process, with its process group, and reaps it. Call when
/// all of gpuprobe's own children have been waited for (at exit): what is left was adopted.
pub fn kill_adopted() {
    #[cfg(target_os = "linux")]
    for _ in 0..8 {
        let me = std::process::id();
        // Left unreaped, a dying child passes to PID 1 at gpuprobe's exit; an init that never
        // reaps (`tail -f /dev/null` in a CI job container) would keep it as a zombie for good.
        let dying = if init_reaps() {
            DYING.lock().map(|d| d.clone()).unwrap_or_default()
        } else {
            Vec::new()
        };
        let orphans: Vec<u32> = children_of(me)
            .into_iter()
            .filter(|p| !dying.contains(p))
            .collect();
        if orphans.is_empty() {
            return;
        }
        for pid in orphans {
            kill_group(pid);
            if let Ok(p) = i32::try_from(pid) {
                // SAFETY: plain syscalls on a process that is our child.
                unsafe {
                    libc::kill(p, libc::SIGKILL);
                    libc::waitpid(p, std::ptr::null_mut(), 0);
                }
            }
        }
    }
}

/// Whether PID 1 is an init that reaps the orphans it is given (read from `/proc/1/comm`).
#[cfg(target_os = "linux")]
fn init_reaps() -> bool {
    let Ok(f) = std::fs::File::open("/proc/1/comm") else {
        return false;
    };
    let mut name = String::new();
    if std::io::Read::read_to_string(&mut std::io::Read::take(f, 64), &mut name).is_err() {
        return false;
    }
    is_reaping_init(&name)
}

/// Whether a PID 1 of this name (`/proc/1/comm`) reaps the orphans it is given.
#[cfg(target_os = "linux")]
fn is_reaping_init(comm: &str) -> bool {
    const REAPERS: &[&str] = &[
        "systemd",
        "init",
        "tini",
        "docker-init",
        "dumb-init",
        "catatonit",
        "s6-svscan",
        "runit",
        "openrc-init",
    ];
    REAPERS.contains(&comm.trim())
}

/// Process ids whose parent is `parent`, from /proc.
#[cfg(target_os = "linux")]
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                == Some(parent)
        })
        .collect()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn only_an_init_that_reaps_lets_dying_children_go_unwaited() {
        assert!(is_reaping_init("systemd\n"));
        assert!(is_reaping_init("tini"));
        // CI job containers and lent machines run these as PID 1; they never reap orphans.
        assert!(!is_reaping_init("tail\n"));
        assert!(!is_reaping_init("sleep"));
        assert!(!is_reaping_init("process_api"));
        assert!(!is_reaping_init(""));
    }

    fn sh(script: &str) -> Command {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(script);
        c
    }

    #[test]
    fn captures_output_and_status() {
        let out = output(
            sh("echo out; echo err >&2; exit 3"),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn a_program_that_never_exits_is_killed_at_the_deadline() {
        let t = Instant::now();
        let e = output(sh("sleep 30"), Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, RunError::TimedOut { .. }), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn an_exited_program_is_complete_even_if_a_grandchild_holds_its_pipe() {
        // The grandchild leaves the process group, so killing the group does not close the pipe.
        let t = Instant::now();
        let out = output(
            sh("echo 6.2.41133; setsid sleep 10 & exit 0"),
            Duration::from_secs(20),
        )
        .unwrap();
        assert_eq!(out.stdout.trim(), "6.2.41133");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn output_is_bounded() {
        let out = output(sh("head -c 3000000 /dev/zero"), Duration::from_secs(20)).unwrap();
        assert_eq!(out.stdout.len(), MAX_OUTPUT_BYTES);
    }
}

/// Ends this process at once, without running exit handlers (a probe child after its report: a
/// driver's handlers, and destructors of contexts after a GPU fault, can block).
pub fn exit_at_once(code: i32) -> ! {
    #[cfg(unix)]
    // SAFETY: _exit only ends the process; nothing after it runs.
    unsafe {
        libc::_exit(code)
    }
    #[cfg(not(unix))]
    std::process::exit(code)
}

/// Ends the way a Unix tool ends when its reader goes away (`gpuprobe ... | head`): quietly, by
/// SIGPIPE (status 141 in the shell). Rust ignores SIGPIPE, so restore it and raise it.
pub fn die_of_sigpipe() -> ! {
    #[cfg(unix)]
    // SAFETY: plain syscalls on this process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(128 + 13)
}

/// The effective user id: who owns what gpuprobe creates, and whose files it may trust.
#[cfg(unix)]
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
pub fn euid() -> u32 {
    0
}

/// Whether the kernel lets this process read and write `p` (effective ids, ACLs included).
#[cfg(unix)]
pub fn may_read_write(p: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path and plain flags; faccessat does not keep the pointer.
    unsafe {
        libc::faccessat(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::R_OK | libc::W_OK,
            libc::AT_EACCESS,
        ) == 0
    }
}

/// A FIFO at `p` (tests: it stands in for a device node, which must never be read or replaced).
#[cfg(all(test, unix))]
pub(crate) fn mkfifo(p: &std::path::Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("a path without NUL");
    // SAFETY: plain syscall on a NUL-terminated path.
    let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(r, 0, "mkfifo {p:?}");
}
