//! Running a llama.cpp binary to read what it says about itself: `--version` and
//! `--list-devices`, each in an isolated child (own process group, timeout, killed with its
//! children, never outliving gpuprobe) through `child::orchestrator`.
//!
//! A llama.cpp binary prints some of this on stdout and some on stderr, interleaved (device
//! lines on stderr, `Available devices:` on stdout); both go to one file in the order written,
//! so nothing is cut to the orchestrator's tail and the order is kept. The file is capped.

use std::io::Read;
#[cfg(unix)]
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;

use super::finding::{Finding, Level};
use super::parse;
use crate::children::orchestrator::{self, Exit};
use crate::error::Error;

/// At most this much output is kept from one run.
const MAX_OUTPUT: u64 = 8 << 20;

/// One run of the binary.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct Invocation {
    pub args: Vec<String>,
    /// `exit 0`, `exit 1`, `signal 11 (SIGSEGV)`, `timed out after 30 s`, `not started: ...`.
    pub status: String,
    /// Why the program could not be started, when it could not (`status` says it for people).
    #[serde(skip)]
    pub not_started: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub elapsed_ms: u64,
    /// The last lines it printed (stdout and stderr together).
    pub output_tail: Vec<String>,
    #[serde(skip)]
    pub output: String,
}

impl Invocation {
    pub fn ok(&self) -> bool {
        self.exit_code == Some(0)
    }
    pub fn command(&self, binary: &Path) -> String {
        let mut s = binary.display().to_string();
        for a in &self.args {
            s.push(' ');
            s.push_str(a);
        }
        s
    }
}

/// What running the binary produced: the text to parse, each run, and findings about the runs.
#[derive(Debug, Clone)]
pub struct BinaryOutput {
    pub text: String,
    pub runs: Vec<Invocation>,
    pub findings: Vec<Finding>,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn temp_path() -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!(
        "gpuprobe-check-build-{}-{n}-{nanos}.out",
        std::process::id()
    ))
}

/// `binary args...` with stdout and stderr both going, in order, to `out`.
#[cfg(unix)]
fn output_command(binary: &Path, args: &[&str], out: &Path) -> Command {
    // `ulimit -f` caps the file (in 512- or 1024-byte blocks, depending on the shell).
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("ulimit -f 16384 2>/dev/null; out=$1; shift; exec \"$@\" >\"$out\" 2>&1")
        .arg("gpuprobe-check-build")
        .arg(out)
        .arg(binary)
        .args(args);
    cmd
}

/// Without a POSIX shell the binary runs directly; its stdout lands in the file and its stderr
/// reaches the orchestrator's tail, which `run` appends.
#[cfg(not(unix))]
fn output_command(binary: &Path, args: &[&str], out: &Path) -> Command {
    let mut cmd = Command::new(binary);
    cmd.args(args);
    if let Ok(f) = std::fs::OpenOptions::new().append(true).open(out) {
        cmd.stdout(f);
    }
    cmd
}

/// Runs `binary args...` with both output streams into one capped file, under `timeout`.
pub fn run(binary: &Path, args: &[&str], timeout: Duration) -> Invocation {
    let args_owned: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let out_path = temp_path();
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&out_path);
    if let Err(e) = created {
        let why = format!("cannot create {}: {e}", out_path.display());
        return Invocation {
            args: args_owned,
            status: format!("not started: {why}"),
            not_started: Some(why),
            exit_code: None,
            signal: None,
            timed_out: false,
            elapsed_ms: 0,
            output_tail: Vec::new(),
            output: String::new(),
        };
    }
    let cmd = output_command(binary, args, &out_path);
    // Timed here: the program's stdout goes to the file, so the orchestrator's clock (which stops
    // when stdout closes) would stop at the exec.
    let started = std::time::Instant::now();
    let outcome = orchestrator::run(cmd, timeout);
    let elapsed = started.elapsed();
    let mut output = String::new();
    if let Ok(f) = std::fs::File::open(&out_path) {
        let mut bytes = Vec::new();
        let _ = f.take(MAX_OUTPUT).read_to_end(&mut bytes);
        output = decode(&bytes);
    }
    let _ = std::fs::remove_file(&out_path);
    // What the shell itself said (exec failures), and stray stdout, go after the output.
    for l in outcome.garbage.iter().chain(&outcome.stderr_tail) {
        if !l.trim().is_empty() {
            output.push_str(l);
            output.push('\n');
        }
    }
    let not_started = match &outcome.exit {
        Exit::SpawnFailed(e) => Some(e.clone()),
        _ => None,
    };
    let (status, exit_code, signal, timed_out) = match &outcome.exit {
        Exit::Code(c) => (format!("exit {c}"), Some(*c), None, false),
        // Only probe children end this way; kept for completeness.
        Exit::AfterDone => ("finished its report".into(), Some(0), None, false),
        Exit::Signal(s) => (
            format!("signal {s} ({})", orchestrator::signal_name(*s)),
            None,
            Some(*s),
            false,
        ),
        Exit::TimedOut => (
            format!("timed out after {} s and was killed", fmt_secs(timeout)),
            None,
            None,
            true,
        ),
        Exit::SpawnFailed(e) => (format!("not started: {e}"), None, None, false),
    };
    let lines: Vec<&str> = output.lines().filter(|l| !l.trim().is_empty()).collect();
    let output_tail = lines[lines.len().saturating_sub(12)..]
        .iter()
        .map(|l| l.chars().take(300).collect())
        .collect();
    Invocation {
        args: args_owned,
        status,
        not_started,
        exit_code,
        signal,
        timed_out,
        elapsed_ms: elapsed.as_millis() as u64,
        output_tail,
        output,
    }
}

fn fmt_secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s:.1}")
    }
}

/// Text from a file or a process: UTF-8 (lossy), or UTF-16 with a byte-order mark (what
/// PowerShell's `>` writes on Windows), as plain lines (see [`plain_lines`]).
pub fn decode(bytes: &[u8]) -> String {
    let text = if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        let le = bytes[0] == 0xFF;
        let units: Vec<u16> = bytes[2..]
            .chunks_exact(2)
            .map(|c| {
                if le {
                    u16::from_le_bytes([c[0], c[1]])
                } else {
                    u16::from_be_bytes([c[0], c[1]])
                }
            })
            .collect();
        String::from_utf16_lossy(&units)
    } else {
        let b = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(bytes);
        String::from_utf8_lossy(b).into_owned()
    };
    plain_lines(&text)
}

/// Lines as a program's output is read line by line: `\r\n` (and `\r\r\n`) and a lone `\r`
/// (classic Mac files, progress redrawn in place) each end a line, so no line runs into the
/// next; and terminal control sequences (CSI: `ESC [`, parameters, one final letter: colours as
/// llama.cpp's `--log-colors` writes them around its log prefix, a progress line's erase) are
/// removed, so a coloured log is read as the same log without colours. Any other escape (an OSC
/// title, a sequence cut short) stays, with the text it carries, to be shown escaped wherever
/// the line is printed: removing text that only looks like a sequence could hide a failure.
pub fn plain_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                while chars.next_if_eq(&'\r').is_some() {}
                if chars.peek() != Some(&'\n') {
                    out.push('\n');
                }
            }
            '\x1b' if chars.peek() == Some(&'[') => {
                let mut seq = String::from("\x1b[");
                chars.next();
                // Parameter and intermediate bytes, then one final byte.
                while let Some(p) = chars.next_if(|p| matches!(p, '\x20'..='\x3f')) {
                    seq.push(p);
                }
                if chars.next_if(|f| matches!(f, '\x40'..='\x7e')).is_none() {
                    out.push_str(&seq);
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// Finds the program: a path, or a bare name on PATH. Exit-2 errors name the input and the fix.
pub fn locate(binary: &Path) -> Result<PathBuf, Error> {
    let shown = binary.display().to_string();
    let input = format!("--binary {shown}");
    let path = if binary.components().count() == 1 && !binary.exists() {
        which::which(binary).map_err(|_| {
            Error::input(
                &input,
                "no such file, and no program of that name on PATH",
                "pass the path of a llama.cpp program, e.g. --binary build/bin/llama-cli",
            )
        })?
    } else {
        binary.to_path_buf()
    };
    // The shell looks a bare name up on PATH: make a relative path explicit.
    let path = if path.is_relative() {
        std::env::current_dir()
            .map(|d| d.join(&path))
            .unwrap_or(path)
    } else {
        path
    };
    let meta = std::fs::metadata(&path).map_err(|e| {
        let fix = if e.kind() == std::io::ErrorKind::NotFound {
            "check the path; llama.cpp puts its programs in <build dir>/bin (e.g. build/bin/llama-cli)"
        } else {
            "check the path and its permissions"
        };
        Error::input(&input, format!("cannot read: {e}"), fix)
    })?;
    if meta.is_dir() {
        let candidates: Vec<String> = [
            "llama-cli",
            "bin/llama-cli",
            "llama-server",
            "bin/llama-server",
            "llama",
            "bin/llama",
        ]
        .iter()
        .map(|c| path.join(c))
        .filter(|p| p.is_file())
        .map(|p| p.display().to_string())
        .collect();
        let fix = match candidates.first() {
            Some(c) => format!("pass the program, e.g. --binary {c}"),
            None => "pass a llama.cpp program (llama-cli, llama-server), not a folder".into(),
        };
        return Err(Error::input(&input, "is a directory", fix));
    }
    #[cfg(unix)]
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(Error::input(
            &input,
            "is not executable",
            format!(
                "pass the llama.cpp program itself, or make it executable (chmod +x {shown}); to judge saved output use --log FILE"
            ),
        ));
    }
    Ok(path)
}

fn first_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .chars()
        .take(300)
        .collect()
}

/// Runs `--version` and `--list-devices` (and `--verbose --list-devices` when the device lines
/// are needed and not printed otherwise). Errors (exit 2) when the program cannot be run or is
/// not llama.cpp; a hang or crash while listing devices is a finding.
pub fn examine(binary: &Path, timeout: Duration) -> Result<BinaryOutput, Error> {
    let path = locate(binary)?;
    let input = format!("--binary {}", binary.display());
    let mut runs = Vec::new();
    let mut findings = Vec::new();

    let version = run(&path, &["--version"], timeout);
    let out = version.output.clone();
    check_version_run(&input, &version, timeout)?;
    let mut text = out;
    runs.push(version);

    let mut prefix: Vec<&str> = Vec::new();
    let mut list = run(&path, &["--list-devices"], timeout);
    if list.output.contains("unknown command") {
        // The unified `llama` program takes a subcommand first.
        runs.push(list);
        prefix.push("cli");
        list = run(&path, &["cli", "--list-devices"], timeout);
    }
    findings.extend(list_findings(&list, binary, timeout));
    let list_ok = list.ok();
    text.push('\n');
    text.push_str(&list.output);
    runs.push(list);

    // Since the logs were trimmed (build ~9829) the per-device lines, which carry `VMM: yes/no`,
    // need --verbose; ask for them when a CUDA-family device was listed without them.
    let facts = parse::parse(&text);
    let family = facts
        .gpu_backend()
        .filter(|b| parse::CUDA_FAMILY.contains(b))
        .map(str::to_string);
    if list_ok
        && let Some(b) = family
        && !facts.devices.iter().any(|d| d.backend == b)
    {
        let mut args = prefix.clone();
        args.extend(["--verbose", "--list-devices"]);
        let verbose = run(&path, &args, timeout);
        if verbose.timed_out {
            findings.push(
                Finding::new(
                    "list-devices-hang",
                    Level::Error,
                    "listing the devices with --verbose hangs",
                    format!(
                        "`{}` did not finish within {} s and was killed",
                        verbose.command(binary),
                        fmt_secs(timeout)
                    ),
                )
                .fix("look at the kernel log (`dmesg`) for GPU faults and run `gpuprobe detect`"),
            );
        }
        text.push('\n');
        text.push_str(&verbose.output);
        runs.push(verbose);
    }
    Ok(BinaryOutput {
        text,
        runs,
        findings,
    })
}

/// `--version` must run and print a llama.cpp version line; anything else is bad input, named.
fn check_version_run(input: &str, version: &Invocation, timeout: Duration) -> Result<(), Error> {
    let out = &version.output;
    if let Some(e) = &version.not_started {
        return Err(Error::input(
            input,
            format!("cannot be started: {e}"),
            "check that it is a program for this machine",
        ));
    }
    if version.timed_out {
        return Err(Error::input(
            input,
            format!(
                "`--version` did not finish within {} s and was killed",
                fmt_secs(timeout)
            ),
            "check that this is a llama.cpp program (llama-cli, llama-server); if GPU start-up is that slow here, raise --timeout",
        ));
    }
    if out.contains("error while loading shared libraries") {
        return Err(Error::input(
            input,
            format!(
                "cannot be run: {}",
                first_line(
                    out.lines()
                        .find(|l| l.contains("error while loading shared libraries"))
                        .unwrap_or(out)
                )
            ),
            "run it where its libraries are found: keep it next to libllama/libggml*, or set LD_LIBRARY_PATH to the folder that holds them",
        ));
    }
    if matches!(version.exit_code, Some(126) | Some(127)) {
        return Err(Error::input(
            input,
            format!("cannot be run ({}): {}", version.status, first_line(out)),
            "check that it is a program built for this machine (`file` shows its architecture)",
        ));
    }
    let facts = parse::parse(out);
    if facts.version.line.is_none() {
        let said = first_line(out);
        let what = if let Some(s) = version.signal {
            format!(
                "`--version` crashed ({}) before printing a version",
                orchestrator::signal_name(s)
            )
        } else if said.is_empty() {
            format!("`--version` printed nothing ({})", version.status)
        } else {
            format!(
                "`--version` printed no llama.cpp version line ({}); it said: {said}",
                version.status
            )
        };
        return Err(Error::input(
            input,
            what,
            "pass a llama.cpp program (llama-cli, llama-server, llama-bench...), or judge saved output with --log FILE",
        ));
    }
    Ok(())
}

/// What a failed `--list-devices` says: a hang or crash at backend start-up, an option the
/// build does not know, or another failure.
fn list_findings(list: &Invocation, binary: &Path, timeout: Duration) -> Option<Finding> {
    let mut findings = Vec::new();
    let list_cmd = list.command(binary);
    if list.timed_out {
        findings.push(
            Finding::new(
                "list-devices-hang",
                Level::Error,
                "listing the devices hangs",
                format!(
                    "`{list_cmd}` did not finish within {} s and was killed: initialising the GPU backend hangs on this machine, so llama.cpp would hang at start-up too",
                    fmt_secs(timeout)
                ),
            )
            .fix("look at the kernel log (`dmesg`) for GPU faults and run `gpuprobe detect`; if start-up is only slow here, raise --timeout"),
        );
    } else if let Some(sig) = list.signal {
        findings.push(
            Finding::new(
                "list-devices-crash",
                Level::Error,
                "listing the devices crashes",
                format!(
                    "`{list_cmd}` died with {} while initialising the backends{}",
                    orchestrator::signal_name(sig),
                    list.output_tail.last().map(|l| format!("; last line: {l}")).unwrap_or_default()
                ),
            )
            .fix(format!("run `gpuprobe detect`: a crash at driver initialisation (e.g. quirk {}) affects every GPU program; check the driver and runtime versions", crate::quirks::ids::HSA_INIT_CRASH)),
        );
    } else if !list.ok() {
        let unsupported = [
            "invalid argument",
            "unknown argument",
            "unrecognized",
            "unknown option",
        ]
        .iter()
        .any(|m| list.output.contains(m));
        if unsupported {
            findings.push(Finding::new(
                "list-devices-unsupported",
                Level::Note,
                "this build does not know --list-devices",
                format!("`{list_cmd}` answered: {}", first_line(&list.output)),
            ));
        } else {
            findings.push(
                Finding::new(
                    "list-devices-failed",
                    Level::Warning,
                    "listing the devices failed",
                    format!(
                        "`{list_cmd}` ended with {}{}",
                        list.status,
                        list.output_tail
                            .last()
                            .map(|l| format!("; last line: {l}"))
                            .unwrap_or_default()
                    ),
                )
                .fix("run the command yourself to see the whole message; then `gpuprobe detect`"),
            );
        }
    }
    findings.pop()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_utf16_with_bom() {
        let s = "version: 4579 (abc1234)\r\n";
        let mut b = vec![0xFF, 0xFE];
        for u in s.encode_utf16() {
            b.extend(u.to_le_bytes());
        }
        assert_eq!(decode(&b), "version: 4579 (abc1234)\n");
        assert_eq!(decode(b"\xEF\xBB\xBFhi\r\n"), "hi\n");
    }

    #[test]
    fn a_lone_carriage_return_ends_a_line_and_colours_are_removed() {
        assert_eq!(plain_lines("a\rb\r\nc\r\r\nd\r"), "a\nb\nc\nd\n");
        assert_eq!(
            plain_lines("\x1b[34m0.00.378.221\x1b[0m \x1b[32mI \x1b[0mbuild: 4526\x1b[0m"),
            "0.00.378.221 I build: 4526"
        );
        // A progress line's erase goes; an OSC title, an escape that is no sequence and a CSI
        // cut short stay.
        assert_eq!(
            plain_lines("a\x1b[2Kb\x1b]0;t\x07c\x1bxd\x1b[12\ne"),
            "ab\x1b]0;t\x07c\x1bxd\x1b[12\ne"
        );
    }
}
