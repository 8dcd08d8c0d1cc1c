//! Runs probe children in isolation: each in its own process group, with a deadline, read line
//! by line as it writes, killed as a group on timeout, and never outliving gpuprobe.
//!
//! A GPU fault can leave the host thread waiting forever on a completion signal, and a driver
//! can segfault at init; neither may hang or crash gpuprobe itself.

use std::io::{BufRead, BufReader, Read};
#[cfg(unix)]
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::protocol::{DeviceEvent, Event, Hello, Peer, PeersDone, Received, SmokeEvent};
use crate::report::SmokeStage;

/// How a child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// Killed by us at the deadline.
    TimedOut,
    /// Could not be started at all.
    SpawnFailed(String),
    /// Said `done` (its report is complete) and was then left to end: its group was sent SIGKILL
    /// and the process reaped in the background, its exit status not read. Only for children
    /// started with [`Running::ends_at_done`]: the probes leave with `_exit(0)` right after
    /// `done`, and what remains is the kernel tearing down their GPU state (about 100 ms per GPU
    /// on an H200), which gpuprobe has no reason to wait for.
    AfterDone,
}

impl Exit {
    /// The exit code the child's end stands for: its own, or 0 for one left after `done`.
    pub fn code(&self) -> Option<i32> {
        match self {
            Exit::Code(c) => Some(*c),
            Exit::AfterDone => Some(0),
            Exit::Signal(_) | Exit::TimedOut | Exit::SpawnFailed(_) => None,
        }
    }
}

/// Everything a child said, and how it ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Its protocol lines, in order.
    pub events: Vec<Received>,
    /// Lines on stdout that were not JSON objects with an `event` key.
    pub garbage: Vec<String>,
    pub stderr_tail: Vec<String>,
    pub exit: Exit,
    pub elapsed: Duration,
}

impl Outcome {
    /// A child that could not be started at all.
    pub fn spawn_failed(why: String) -> Self {
        Outcome {
            events: Vec::new(),
            garbage: Vec::new(),
            stderr_tail: Vec::new(),
            exit: Exit::SpawnFailed(why),
            elapsed: Duration::ZERO,
        }
    }

    fn all(&self) -> impl DoubleEndedIterator<Item = &Event> {
        self.events.iter().map(Received::event)
    }
    pub fn hello(&self) -> Option<&Hello> {
        self.all().find_map(|e| match e {
            Event::Hello(h) => Some(h),
            _ => None,
        })
    }
    pub fn devices(&self) -> impl Iterator<Item = &DeviceEvent> {
        self.all().filter_map(|e| match e {
            Event::Device(d) => Some(d),
            _ => None,
        })
    }
    pub fn smoke(&self) -> Option<&SmokeEvent> {
        self.all().find_map(|e| match e {
            Event::Smoke(s) => Some(s),
            _ => None,
        })
    }
    pub fn peers(&self) -> impl Iterator<Item = &Peer> {
        self.all().filter_map(|e| match e {
            Event::Peer(p) => Some(p),
            _ => None,
        })
    }
    pub fn peers_done(&self) -> Option<&PeersDone> {
        self.all().find_map(|e| match e {
            Event::PeersDone(p) => Some(p),
            _ => None,
        })
    }
    pub fn complete(&self) -> bool {
        self.all().any(|e| matches!(e, Event::Done(_)))
    }
    /// The last stage the child announced before it stopped.
    pub fn last_stage(&self) -> Option<SmokeStage> {
        self.all().rev().find_map(|e| match e {
            Event::Stage(s) => Some(s.stage.clone()),
            _ => None,
        })?
    }
    pub fn last_cycle(&self) -> Option<u32> {
        self.all().rev().find_map(|e| match e {
            Event::Cycle(c) => Some(c.cycle),
            _ => None,
        })?
    }
}

enum Msg {
    /// A protocol event, parsed on the reader thread (in parallel with every other child).
    Event(Box<Received>),
    /// A line that is not one.
    Garbage(String),
    /// Stdout closed, and when: the child's end, even if the parent reads it much later.
    Eof(Instant),
}

/// A running child whose stdout is being read on a thread.
pub struct Running {
    child: Child,
    rx: Receiver<Msg>,
    stderr: Option<std::thread::JoinHandle<()>>,
    stderr_tail: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    started: Instant,
    deadline: Instant,
    events: Vec<Received>,
    garbage: Vec<String>,
    eof: bool,
    ended: Option<Instant>,
    /// Stop at `done` (see [`Exit::AfterDone`]).
    until_done: bool,
    /// The process is reaped by a thread of its own: nothing here may wait for it.
    detached: bool,
}

/// Starts `cmd` in a new process group, with the parent-death signal set so that it dies with us.
pub fn spawn(mut cmd: Command, timeout: Duration) -> Result<Running, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        cmd.process_group(0);
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                #[cfg(target_os = "linux")]
                {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }
    let program = format!("{:?}", cmd.get_program());
    // Before the fork: a child's time includes its own start, and its clock never starts before ours.
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let stdout = child.stdout.take().ok_or("child has no stdout")?;
    let stderr = child.stderr.take().ok_or("child has no stderr")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            // Bounded line length: garbage without newlines must not eat memory.
            match reader.by_ref().take(1 << 20).read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf).trim_end().to_string();
                    if line.trim().is_empty() {
                        continue;
                    }
                    let msg = match Received::parse(&line) {
                        Some(r) => Msg::Event(Box::new(r)),
                        None => Msg::Garbage(line.chars().take(200).collect()),
                    };
                    if tx.send(msg).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = tx.send(Msg::Eof(Instant::now()));
    });
    // Shared rather than returned: a grandchild that left the group can keep stderr open forever,
    // and gpuprobe must not wait for it.
    let stderr_tail = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let tail = std::sync::Arc::clone(&stderr_tail);
    let stderr = std::thread::spawn(move || {
        let reader = BufReader::new(stderr.take(4 << 20));
        for line in reader.split(b'\n').map_while(Result::ok) {
            let Ok(mut t) = tail.lock() else { return };
            t.push(String::from_utf8_lossy(&line).trim_end().to_string());
            if t.len() > 20 {
                t.remove(0);
            }
        }
    });
    Ok(Running {
        child,
        rx,
        stderr: Some(stderr),
        stderr_tail,
        started,
        deadline: started + timeout,
        events: Vec::new(),
        garbage: Vec::new(),
        eof: false,
        ended: None,
        until_done: false,
        detached: false,
    })
}

impl Running {
    fn take(&mut self, msg: Msg) {
        match msg {
            Msg::Eof(at) => {
                self.eof = true;
                self.ended = Some(at);
            }
            Msg::Event(r) => self.events.push(*r),
            Msg::Garbage(l) => {
                if self.garbage.len() < 20 {
                    self.garbage.push(l);
                }
            }
        }
    }

    /// Waits (until the deadline) for the child's `hello`; returns it if it came.
    pub fn wait_for_hello(&mut self) -> Option<Hello> {
        loop {
            let hello = self.events.iter().find_map(|r| match r.event() {
                Event::Hello(h) => Some(h),
                _ => None,
            });
            if let Some(h) = hello {
                return Some(h.clone());
            }
            if self.eof {
                return None;
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match self.rx.recv_timeout(left) {
                Ok(m) => self.take(m),
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => self.eof = true,
            }
        }
    }

    /// Marks a protocol child whose report ends with `done`: [`Running::finish`] returns as soon as
    /// it came, without waiting for the process to end (see [`Exit::AfterDone`]).
    pub fn ends_at_done(mut self) -> Self {
        self.until_done = true;
        self
    }

    /// The process's own `done` came (the shared CUDA child also ends each device's part with a
    /// `done` tagged with the device; those do not end the report).
    fn answered(&self) -> bool {
        self.until_done && self.events.iter().any(Received::ends_stream)
    }

    /// Reads until the child closes stdout and exits, or the deadline passes (then kills the group).
    /// A child that has exited is complete: a grandchild that left the group may hold the pipe
    /// open forever, so after the exit only a short grace is given to what is still in it.
    pub fn finish(mut self) -> Outcome {
        let mut timed_out = false;
        let mut exited_at: Option<Instant> = None;
        while !self.eof && !self.answered() {
            let now = Instant::now();
            if exited_at.is_some_and(|t| now >= t + crate::process::PIPE_GRACE) {
                break;
            }
            // A child that is still running and still talking past its deadline is hung too
            // (one that already exited is not, however late this is called).
            if exited_at.is_none() && now >= self.deadline + crate::process::PIPE_GRACE {
                if matches!(self.child.try_wait(), Ok(Some(_))) {
                    exited_at = Some(now);
                    crate::process::kill_group(self.child.id());
                } else {
                    timed_out = true;
                    break;
                }
            }
            let left = self.deadline.saturating_duration_since(now);
            // Past the deadline, what is already queued is still read (this child may be
            // finished while another one was waited for).
            let wait = if left.is_zero() && exited_at.is_some() {
                Duration::from_millis(20)
            } else {
                left.min(Duration::from_millis(20))
            };
            match self.rx.recv_timeout(wait) {
                Ok(m) => self.take(m),
                Err(RecvTimeoutError::Timeout) => {
                    if exited_at.is_none() && matches!(self.child.try_wait(), Ok(Some(_))) {
                        exited_at = Some(Instant::now());
                        // Grandchildren still in the group go now; their pipe ends close.
                        crate::process::kill_group(self.child.id());
                    } else if left.is_zero() && exited_at.is_none() {
                        timed_out = true;
                        break;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => self.eof = true,
            }
        }
        let exit = if timed_out {
            self.kill_group();
            Exit::TimedOut
        } else if self.answered() {
            self.leave_after_done()
        } else {
            self.wait_until_deadline()
        };
        // Drain what arrived before the kill.
        while let Ok(m) = self.rx.try_recv() {
            self.take(m);
        }
        if let Some(h) = self.stderr.take() {
            // A child left after `done` closes stderr only at its end; its report is complete.
            let grace = if self.detached { 0 } else { 500 };
            let until = Instant::now() + Duration::from_millis(grace);
            while !h.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
        let stderr_tail = self
            .stderr_tail
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default();
        Outcome {
            events: std::mem::take(&mut self.events),
            garbage: std::mem::take(&mut self.garbage),
            stderr_tail,
            exit,
            elapsed: self
                .ended
                .unwrap_or_else(Instant::now)
                .saturating_duration_since(self.started),
        }
    }

    fn wait_until_deadline(&mut self) -> Exit {
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    // The group may still hold grandchildren that keep a GPU context alive.
                    self.kill_group();
                    return exit_of(status);
                }
                Ok(None) if Instant::now() >= self.deadline => {
                    self.kill_group();
                    return Exit::TimedOut;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                Err(e) => return Exit::SpawnFailed(e.to_string()),
            }
        }
    }

    /// The child said `done`: an exit already visible is read; otherwise the group gets SIGKILL
    /// (the probes are in `_exit` by now; anything else of theirs must not outlive the report) and
    /// a thread of its own reaps the process while the kernel tears its GPU state down.
    fn leave_after_done(&mut self) -> Exit {
        if let Ok(Some(status)) = self.child.try_wait() {
            self.kill_group();
            return exit_of(status);
        }
        #[cfg(unix)]
        {
            let pid = self.child.id() as i32;
            // SAFETY: plain syscalls on our own child's group and pid; the pid cannot be reused
            // before it is reaped, which only the thread below does.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            self.detached = true;
            crate::process::dying(self.child.id());
            std::thread::spawn(move || {
                let mut status = 0;
                // SAFETY: as above; `status` outlives the call.
                unsafe { libc::waitpid(pid, &mut status, 0) };
            });
            Exit::AfterDone
        }
        #[cfg(not(unix))]
        self.wait_until_deadline()
    }

    fn kill_group(&mut self) {
        #[cfg(unix)]
        {
            let pid = self.child.id() as i32;
            // SAFETY: plain syscall; the group id is the child's pid because of process_group(0).
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        if let Ok(None) = self.child.try_wait() {
            self.kill_group();
        }
    }
}

/// Runs one child to completion.
pub fn run(cmd: Command, timeout: Duration) -> Outcome {
    match spawn(cmd, timeout) {
        Ok(r) => r.finish(),
        Err(e) => Outcome::spawn_failed(e),
    }
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    match (status.code(), exit_signal(&status)) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        _ => Exit::Code(-1),
    }
}

#[cfg(unix)]
fn exit_signal(status: &std::process::ExitStatus) -> Option<i32> {
    status.signal()
}

// Process groups and signals are Unix notions; elsewhere a child is killed by itself and a crash
// shows as an exit code.
#[cfg(not(unix))]
fn exit_signal(_status: &std::process::ExitStatus) -> Option<i32> {
    None
}

#[cfg(not(unix))]
pub fn signal_name(_sig: i32) -> &'static str {
    "signal"
}

/// Human name of a signal number.
#[cfg(unix)]
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}
