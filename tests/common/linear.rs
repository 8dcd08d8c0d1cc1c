//! Linear time, checked so that a busy machine cannot fail the check and a quadratic step cannot
//! pass it: gpuprobe's CPU time (not wall time: a loaded machine makes a run wait, not work more)
//! on a few lines, on n and on 4n, compared within one test run.

// Waiting for the child with its resource usage takes libc.
#![allow(unsafe_code)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// CPU seconds (user and system) `cmd` spends; it must exit with 0, 1 or 2 within 300 s.
// The child is reaped by `wait4`, which also gives its resource usage (`Child::wait` does not).
#[allow(clippy::zombie_processes)]
pub fn cpu_seconds(mut cmd: Command, what: &str) -> f64 {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the program starts");
    let pid = child.id() as libc::pid_t;
    // A hang is a failure too, not a stuck test run.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waits (without blocking) for our own child, writing into the two locals.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            assert!(
                libc::WIFEXITED(status) && libc::WEXITSTATUS(status) <= 2,
                "{what}: ended with status {status:#x}"
            );
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            return secs(usage.ru_utime) + secs(usage.ru_stime);
        }
        assert_eq!(r, 0, "{what}: wait4: {}", std::io::Error::last_os_error());
        if Instant::now() > deadline {
            // SAFETY: signals our own child, which has not been reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{what}: ran past 300 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `cpu(size)` is the CPU time of one run on an input of `size` lines (or records). Measures a
/// tiny input (the cost of starting), `n` and 4·`n`, and compares the work each input added
/// beyond starting: linear work grows 4×, quadratic work 16×. The bound of 8× fails as soon as
/// a quadratic term is a third of the work at `n`. Each size runs three times and the fastest
/// run counts, so a stray slowdown (CPU time too varies on a shared machine, by a third at
/// times) cannot fail the check.
pub fn assert_linear(what: &str, n: usize, cpu: impl FnMut(usize) -> f64) {
    assert_linear_within(what, n, 8.0, cpu);
}

/// [`assert_linear`] with another bound on the ratio, for an input whose linear work per byte
/// grows with its size (megabytes of output that no longer fit a cache): a bound of 12 still
/// fails a step that is wholly quadratic (16×).
pub fn assert_linear_within(what: &str, n: usize, bound: f64, mut cpu: impl FnMut(usize) -> f64) {
    let mut best = |size: usize| (0..3).map(|_| cpu(size)).fold(f64::INFINITY, f64::min);
    let base = best(10);
    let small = best(n) - base;
    let large = best(4 * n) - base;
    eprintln!(
        "{what}: start {base:.3} s CPU, +{n} {small:.3} s, +{} {large:.3} s, ratio {:.1}",
        4 * n,
        large / small
    );
    // The input must cost something measurable, or the ratio is noise.
    assert!(
        small > 0.05,
        "{what}: {n} cost only {small:.3} s CPU beyond starting; measure a larger input"
    );
    assert!(
        large / small < bound,
        "{what}: 4× the input took {:.1}× the work ({small:.3} s → {large:.3} s CPU)",
        large / small
    );
}
