//! One run of a llama.cpp program for the inference exercise: an isolated child (own process
//! group, timeout, killed with its children) through `children::orchestrator`, both output
//! streams into one capped file, extra environment, and, when asked, the process's memory sampled
//! while it runs (its PID comes from a file the launching shell writes before `exec`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::memory::{Sample, Sampler};
use crate::children::orchestrator::{self, Exit};

const MAX_OUTPUT: u64 = 8 << 20;

#[derive(Debug, Clone)]
pub struct Ran {
    pub status: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub not_started: Option<String>,
    pub elapsed_ms: u64,
    pub output: String,
    pub samples: Vec<Sample>,
    /// For each mark asked for, the time of the first reading at which the output held it (only
    /// while memory is sampled): where a phase of the run began or ended, on the curve's clock.
    pub marks_ms: Vec<Option<u64>>,
}

impl Ran {
    pub fn ok(&self) -> bool {
        self.exit_code == Some(0)
    }
    /// The last non-empty line printed: where a run that hung had got to.
    pub fn last_line(&self) -> Option<String> {
        self.output
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| crate::check_build::text::neutralise(&l.chars().take(300).collect::<String>()))
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn temp(kind: &str) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!(
        "gpuprobe-inference-{}-{n}.{kind}",
        std::process::id()
    ))
}

/// The most of the output searched for marks at each reading: the lines that mark phases come
/// early or are short, and a run that prints more is not held up by rereading it.
const MARK_SCAN: u64 = 4 << 20;

/// Runs `program args` with `env` added, under `timeout`; samples its memory every `every` with
/// `sampler` when one is given, noting when each of `marks` first shows in its output.
pub fn run(
    program: &Path,
    args: &[String],
    env: &[(String, String)],
    timeout: Duration,
    sampler: Option<(&dyn Sampler, Duration)>,
    marks: &[&str],
) -> Ran {
    let out = temp("out");
    let pidf = temp("pid");
    let not_started = |why: String| Ran {
        status: format!("not started: {why}"),
        exit_code: None,
        signal: None,
        timed_out: false,
        not_started: Some(why),
        elapsed_ms: 0,
        output: String::new(),
        samples: Vec::new(),
        marks_ms: vec![None; marks.len()],
    };
    if let Err(e) = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&out)
    {
        return not_started(format!("cannot create {}: {e}", out.display()));
    }
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("ulimit -f 16384 2>/dev/null; out=$1; pidf=$2; shift 2; echo $$ >\"$pidf\"; exec \"$@\" >\"$out\" 2>&1")
        .arg("gpuprobe-inference")
        .arg(&out)
        .arg(&pidf)
        .arg(program)
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let stop = AtomicBool::new(false);
    let (outcome, samples, marks_ms) = std::thread::scope(|s| {
        let handle = sampler.map(|(sampler, every)| {
            let stop = &stop;
            let pidf = &pidf;
            let out = &out;
            s.spawn(move || {
                let mut samples = Vec::new();
                let mut marks_ms: Vec<Option<u64>> = vec![None; marks.len()];
                let mut pid: Option<u32> = None;
                while !stop.load(Ordering::Relaxed) {
                    if pid.is_none() {
                        pid = std::fs::read_to_string(pidf)
                            .ok()
                            .and_then(|t| t.trim().parse().ok());
                    }
                    if let Some(p) = pid
                        && let Some(bytes) = sampler.sample(p)
                    {
                        let t_ms = started.elapsed().as_millis() as u64;
                        samples.push(Sample { t_ms, bytes });
                        note_marks(out, marks, &mut marks_ms, t_ms);
                    }
                    // Short runs end within one interval: poll quickly until the first reading,
                    // so even those leave a point on the curve, and until the first mark, so
                    // the set-up before it is read (a small model loads within 250 ms).
                    let wait = if samples.is_empty() {
                        every.min(Duration::from_millis(10))
                    } else if marks_ms.first().is_some_and(Option::is_none) {
                        every.min(Duration::from_millis(50))
                    } else {
                        every
                    };
                    std::thread::sleep(wait);
                }
                (samples, marks_ms)
            })
        });
        let outcome = orchestrator::run(cmd, timeout);
        stop.store(true, Ordering::Relaxed);
        let (samples, marks_ms) = handle
            .and_then(|h| h.join().ok())
            .unwrap_or_else(|| (Vec::new(), vec![None; marks.len()]));
        (outcome, samples, marks_ms)
    });
    let elapsed = started.elapsed();
    let mut output = String::new();
    if let Ok(f) = std::fs::File::open(&out) {
        let mut bytes = Vec::new();
        let _ = f.take(MAX_OUTPUT).read_to_end(&mut bytes);
        output = String::from_utf8_lossy(&bytes).into_owned();
    }
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&pidf);
    for l in outcome.garbage.iter().chain(&outcome.stderr_tail) {
        if !l.trim().is_empty() {
            output.push_str(l);
            output.push('\n');
        }
    }
    let secs = timeout.as_secs_f64();
    let (status, exit_code, signal, timed_out, not) = match &outcome.exit {
        Exit::Code(c) => (format!("exit {c}"), Some(*c), None, false, None),
        Exit::AfterDone => ("finished".into(), Some(0), None, false, None),
        Exit::Signal(s) => (
            format!("signal {s} ({})", orchestrator::signal_name(*s)),
            None,
            Some(*s),
            false,
            None,
        ),
        Exit::TimedOut => (
            format!("timed out after {secs:.0} s and was killed"),
            None,
            None,
            true,
            None,
        ),
        Exit::SpawnFailed(e) => (
            format!("not started: {e}"),
            None,
            None,
            false,
            Some(e.clone()),
        ),
    };
    Ran {
        status,
        exit_code,
        signal,
        timed_out,
        not_started: not,
        elapsed_ms: elapsed.as_millis() as u64,
        output,
        samples,
        marks_ms,
    }
}

/// Sets the time of each mark not yet seen that the output now holds.
fn note_marks(out: &Path, marks: &[&str], seen: &mut [Option<u64>], t_ms: u64) {
    if seen.iter().all(Option::is_some) {
        return;
    }
    let Ok(f) = std::fs::File::open(out) else {
        return;
    };
    let mut bytes = Vec::new();
    if f.take(MARK_SCAN).read_to_end(&mut bytes).is_err() {
        return;
    }
    let text = String::from_utf8_lossy(&bytes);
    for (mark, at) in marks.iter().zip(seen.iter_mut()) {
        if at.is_none() && text.contains(mark) {
            *at = Some(t_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inference::memory::HostRss;

    #[test]
    fn a_run_shorter_than_the_sampling_interval_still_leaves_a_reading() {
        // On the H200 a 0.3 s CPU run sampled every 250 ms left no point at all.
        let sh = Path::new("/bin/sh");
        let ran = run(
            sh,
            &["-c".to_string(), "sleep 0.15".to_string()],
            &[],
            Duration::from_secs(10),
            Some((&HostRss, Duration::from_millis(250))),
            &[],
        );
        assert_eq!(ran.exit_code, Some(0), "{}", ran.status);
        assert!(!ran.samples.is_empty(), "no reading of a 0.15 s run");
    }

    #[test]
    fn marks_are_timed_on_the_curve_clock() {
        let sh = Path::new("/bin/sh");
        let ran = run(
            sh,
            &[
                "-c".to_string(),
                "echo loading; sleep 0.4; echo computing; sleep 0.4".to_string(),
            ],
            &[],
            Duration::from_secs(10),
            Some((&HostRss, Duration::from_millis(50))),
            &["computing", "loading", "never printed"],
        );
        assert_eq!(ran.exit_code, Some(0), "{}", ran.status);
        let loading = ran.marks_ms[1].expect("loading was printed");
        let computing = ran.marks_ms[0].expect("computing was printed");
        assert!(computing >= loading + 300, "{loading} ms, {computing} ms");
        assert_eq!(ran.marks_ms[2], None);
    }
}
