//! `check-build --exercise`: does this build survive real work on this machine?
//!
//! llama.cpp's own `test-backend-ops` runs on each GPU, one device at a time, each run in its own
//! process group with a timeout, on the operations that use the memory pool hardest (quantized
//! MUL_MAT, which quantizes or dequantizes into pool buffers; FLASH_ATTN_EXT with an f16 and with
//! quantized KV at long context, which converts K/V to f16 in pool buffers). Each run is judged
//! pass / fail (the failing ops) / hang (killed at the timeout; the last op it printed) / crash
//! (the signal), and the kernel log, when readable, is scanned for GPU faults that appeared
//! during the run. The result (`gpuprobe.exercise/v1`) is workload evidence for the resolver.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::corpus::Corpus;
use super::runner::{self, Invocation};
use super::signatures::{LogKind, SignatureTable};
use super::text::neutralise;
use crate::error::{Error, Result};
use crate::report::{Backend, Report};

pub const SCHEMA: &str = "gpuprobe.exercise/v1";

/// The operations run by default.
pub const DEFAULT_OPS: &str = "MUL_MAT,FLASH_ATTN_EXT";

/// The test cases run by default (test-backend-ops `-p`, an ECMAScript regex searched in each
/// case's parameters), 2354 cases at build 11434: MUL_MAT with every quantized weight type against
/// f32 activations (1108; they quantize or dequantize into pool buffers), FLASH_ATTN_EXT with q8_0
/// and q4_0 KV caches (717; their K/V are converted to f16 in pool buffers) and with an f16 cache
/// at KV lengths from 1024 to 32768 (529). On an H200, MUL_MAT's full 1891 cases take 11 s, so
/// this subset is about a minute on a big GPU.
pub const DEFAULT_PARAMS: &str = r"^type_a=(q[0-9]|iq|mxfp|nvfp|tq)[^,]*,type_b=f32,|type_K=(q8_0|q4_0),type_V=(q8_0|q4_0),|kv=(1024|2048|4096|8192|16384|32768),.*type_K=f16,type_V=f16,";

pub use crate::evidence::WorkloadOutcome as Outcome;

/// The backend the exercised program ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BinaryBackend {
    Cuda,
    Hip,
    /// Only the CPU was exercised: not evidence about any GPU.
    Cpu,
}

impl BinaryBackend {
    pub fn gpu(self) -> Option<Backend> {
        match self {
            BinaryBackend::Cuda => Some(Backend::Cuda),
            BinaryBackend::Hip => Some(Backend::Hip),
            BinaryBackend::Cpu => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            BinaryBackend::Cuda => "cuda",
            BinaryBackend::Hip => "hip",
            BinaryBackend::Cpu => "cpu",
        }
    }
}

impl std::fmt::Display for BinaryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The whole document (see the interface note: every field is part of the contract).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Exercise {
    pub schema: String,
    pub gpuprobe_version: String,
    pub host: crate::report::Host,
    pub binary: BinaryInfo,
    /// HIP runtime (AMD) or CUDA driver API version measured on this machine.
    pub runtime_version: Option<String>,
    pub devices: Vec<DeviceResult>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct BinaryInfo {
    pub path: String,
    /// llama.cpp build number (from --llama-build or a program of the build next to it).
    pub build: Option<u64>,
    /// `cuda` or `hip` (`cpu` when only the CPU was exercised: not evidence about any GPU).
    pub backend: BinaryBackend,
    /// The VMM pool compiled in: a device line says `VMM: yes`, or the backend library lacks the
    /// `NO_VMM` feature string (true); the library has it (false); unknown (null).
    pub vmm: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct DeviceResult {
    pub index: u32,
    pub name: String,
    pub arch: String,
    pub outcome: Outcome,
    /// The operations run.
    pub ops: Vec<String>,
    pub failed_ops: Vec<String>,
    /// The last operation the run printed (for a hang: the one before the op that hung).
    pub last_op: Option<String>,
    pub signal: Option<i32>,
    pub elapsed_ms: f64,
    /// GPU faults the kernel logged during the run (neutralised lines).
    pub kernel_faults: Vec<String>,
    pub reason: Option<String>,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub test_backend_ops: PathBuf,
    /// (llama.cpp device name such as `CUDA0`, probe facts when known).
    pub devices: Vec<Target>,
    pub ops: String,
    pub params: String,
    pub jobs: usize,
    pub timeout: Duration,
    pub llama_build: Option<u64>,
    pub runtime_version: Option<String>,
    /// Program printing the kernel log (`dmesg`; `GPUPROBE_DMESG` overrides it).
    pub kernel_log: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct Target {
    /// `CUDA0`, `ROCm1`, `CPU`.
    pub device: String,
    pub index: u32,
    pub name: Option<String>,
    pub arch: Option<String>,
}

/// Finds test-backend-ops: the program itself, next to another program of the build, or in a
/// build folder's `bin/`.
pub fn locate(binary: Option<&Path>, build_dir: Option<&Path>) -> Result<PathBuf> {
    let name = if cfg!(windows) {
        "test-backend-ops.exe"
    } else {
        "test-backend-ops"
    };
    let fix = "build it: configure llama.cpp with -DLLAMA_BUILD_TESTS=ON and run `cmake --build BUILD --target test-backend-ops`; then pass --build-dir BUILD or --binary BUILD/bin/test-backend-ops";
    let (input, candidates): (String, Vec<PathBuf>) = match (binary, build_dir) {
        (Some(b), _) => {
            let b = runner::locate(b)?;
            if b.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("test-backend-ops"))
            {
                return Ok(b);
            }
            let dir = b.parent().map(Path::to_path_buf).unwrap_or_default();
            (format!("--binary {}", b.display()), vec![dir.join(name)])
        }
        (None, Some(d)) => (
            format!("--build-dir {}", d.display()),
            vec![d.join("bin").join(name), d.join(name)],
        ),
        (None, None) => {
            return Err(Error::input(
                "check-build --exercise",
                "no build to exercise",
                "pass --build-dir BUILD or --binary BUILD/bin/test-backend-ops",
            ));
        }
    };
    match candidates.iter().find(|c| c.is_file()) {
        Some(c) => runner::locate(c),
        None => Err(Error::input(
            input,
            format!(
                "no {name} there (looked for {})",
                candidates
                    .iter()
                    .map(|c| c.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            fix,
        )),
    }
}

/// The llama.cpp device names of a report's GPUs (`CUDA0`, `ROCm1`).
pub fn targets_of(report: &Report) -> Vec<Target> {
    report
        .devices
        .iter()
        .filter(|d| d.arch_known())
        .map(|d| Target {
            device: format!("{}{}", d.backend.llama_name(), d.index),
            index: d.index,
            name: Some(d.name.clone()),
            arch: Some(d.arch.clone()),
        })
        .collect()
}

/// A device given by name (`--device ROCm1`): the index is its trailing number.
pub fn target_named(device: &str, report: Option<&Report>) -> Target {
    let digits: String = device
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let index = digits.parse().unwrap_or(0);
    let known = report.and_then(|r| targets_of(r).into_iter().find(|t| t.device == device));
    Target {
        device: device.to_string(),
        index,
        name: known.as_ref().and_then(|k| k.name.clone()),
        arch: known.and_then(|k| k.arch),
    }
}

/// Runs every device in turn and assembles the document.
pub fn run(plan: &Plan, signatures: &SignatureTable) -> Exercise {
    let mut devices = Vec::new();
    let mut vmm_lines: Vec<bool> = Vec::new();
    for t in &plan.devices {
        let before = plan.kernel_log.as_deref().map(read_kernel_log);
        let jobs = plan.jobs.to_string();
        let args = [
            "test",
            "-b",
            &t.device,
            "-o",
            &plan.ops,
            "-p",
            &plan.params,
            "-j",
            &jobs,
        ];
        let inv = runner::run(&plan.test_backend_ops, &args, plan.timeout);
        let after = plan.kernel_log.as_deref().map(read_kernel_log);
        let faults = match (before, after) {
            (Some(Ok(b)), Some(Ok(a))) => Ok(new_faults(&b, &a, signatures)),
            (Some(Err(e)), _) | (_, Some(Err(e))) => Err(e),
            _ => Err("no kernel log program (dmesg) found".to_string()),
        };
        let facts = super::parse::parse(&inv.output);
        if let Some(v) = facts
            .devices
            .iter()
            .find(|d| device_matches(&t.device, d))
            .and_then(|d| d.vmm)
        {
            vmm_lines.push(v);
        }
        devices.push(judge_run(t, &plan.ops, &inv, &facts, faults));
    }
    let backend = plan
        .devices
        .iter()
        .find_map(|t| {
            if t.device.starts_with(Backend::Cuda.llama_name()) {
                Some(BinaryBackend::Cuda)
            } else if t.device.starts_with(Backend::Hip.llama_name()) {
                Some(BinaryBackend::Hip)
            } else {
                None
            }
        })
        .unwrap_or(BinaryBackend::Cpu);
    let vmm = match backend.gpu() {
        None => None,
        Some(_) if vmm_lines.contains(&true) => Some(true),
        Some(b) => no_vmm_feature(&plan.test_backend_ops, b).map(|no| !no),
    };
    Exercise {
        schema: SCHEMA.into(),
        gpuprobe_version: env!("CARGO_PKG_VERSION").into(),
        host: crate::probe::host(),
        binary: BinaryInfo {
            path: plan.test_backend_ops.display().to_string(),
            build: plan.llama_build,
            backend,
            vmm,
        },
        runtime_version: plan.runtime_version.clone(),
        devices,
    }
}

fn device_matches(device: &str, d: &super::parse::DeviceLine) -> bool {
    format!("{}{}", d.backend, d.index) == device
}

static ANSI: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
static OP_LINE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();

fn strip_ansi(s: &str) -> String {
    ANSI.get_or_init(|| Regex::new(r"\x1b\[[0-9;]*[A-Za-z]").expect("ANSI regex"))
        .replace_all(s, "")
        .into_owned()
}

/// `  MUL_MAT(type_a=q4_0,...): OK` → (op with params, status text).
fn op_line(line: &str) -> Option<(String, String, String)> {
    let re = OP_LINE.get_or_init(|| {
        // Not anchored: a message printed before the result (`failed to allocate tensors [CUDA0] `)
        // shares the op's line.
        Regex::new(r"(?:^|\s)([A-Z][A-Z0-9_]*)\((.*)\): ?(.*)$").expect("op line regex")
    });
    let c = re.captures(line)?;
    Some((c[1].to_string(), c[2].to_string(), c[3].trim().to_string()))
}

/// `  2133/2134 tests passed` → (passed, total).
fn tests_passed(line: &str) -> Option<(usize, usize)> {
    let rest = line.trim().strip_suffix(" tests passed")?;
    let (ok, total) = rest.split_once('/')?;
    Some((ok.parse().ok()?, total.parse().ok()?))
}

/// Judges one device's run from its exit and output.
pub fn judge_run(
    t: &Target,
    ops: &str,
    inv: &Invocation,
    facts: &super::parse::BuildFacts,
    faults: std::result::Result<Vec<String>, String>,
) -> DeviceResult {
    let RunOutput {
        passed,
        failed,
        last_op,
        tested_here,
        skipped_here,
        description,
        summary,
    } = read_output(&t.device, &inv.output);
    let ops_run: Vec<String> = ops
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let (faults, kernel_note) = match faults {
        Ok(f) => (f, None),
        Err(e) => (Vec::new(), Some(format!("kernel log not readable ({e})"))),
    };
    let (mut outcome, mut reason) = outcome_of(
        t,
        inv,
        facts,
        (passed, &failed, summary, tested_here && !skipped_here),
        &ops_run,
    );
    if !faults.is_empty() {
        reason.push_str(&format!(
            "; the kernel logged {} GPU fault line(s) during the run",
            faults.len()
        ));
        if outcome == Outcome::Pass {
            outcome = Outcome::Fail;
        }
    }
    if let Some(n) = kernel_note {
        reason.push_str(&format!("; {n}"));
    }
    let line = facts.devices.iter().find(|d| device_matches(&t.device, d));
    DeviceResult {
        index: t.index,
        name: neutralise(
            &t.name
                .clone()
                .or_else(|| line.map(|d| d.name.clone()))
                .or(description)
                .unwrap_or_else(|| t.device.clone()),
        ),
        arch: t
            .arch
            .clone()
            .or_else(|| line.and_then(|d| d.arch.clone()))
            .unwrap_or_else(|| "unknown".into()),
        outcome,
        ops: ops_run,
        failed_ops: failed,
        last_op: last_op.map(|o| neutralise(&o)),
        signal: inv.signal,
        elapsed_ms: inv.elapsed_ms as f64,
        kernel_faults: faults,
        reason: Some(neutralise(&reason)),
    }
}

/// What test-backend-ops printed about one device's section.
struct RunOutput {
    passed: usize,
    failed: Vec<String>,
    last_op: Option<String>,
    /// The section of the device was there (its description or memory line).
    tested_here: bool,
    skipped_here: bool,
    description: Option<String>,
    /// `  2133/2134 tests passed` of the section: the count test-backend-ops itself keeps.
    summary: Option<(usize, usize)>,
}

/// Reads test-backend-ops' output for the section of `device` (`Backend 1/2: CUDA0`): the tests
/// that passed and failed (failures whose lines could not be read still count).
fn read_output(device: &str, output: &str) -> RunOutput {
    let mut passed = 0usize;
    let mut failed: Vec<String> = Vec::new();
    let mut last_op: Option<String> = None;
    let mut tested_here = false;
    let mut skipped_here = false;
    let mut section_is_ours = false;
    let mut description: Option<String> = None;
    let mut summary: Option<(usize, usize)> = None;
    let mut in_failing_list = false;
    for raw in output.lines() {
        let line = strip_ansi(raw);
        if line.trim() == "Failing tests:" {
            in_failing_list = true;
            continue;
        }
        if in_failing_list {
            let name = line.trim();
            if name.is_empty() || !line.starts_with(' ') {
                in_failing_list = false;
            } else {
                if !failed.iter().any(|f| f == name) {
                    failed.push(name.to_string());
                }
                continue;
            }
        }
        if section_is_ours && let Some(counts) = tests_passed(&line) {
            summary = Some(counts);
        }
        if let Some(rest) = line.strip_prefix("Backend ") {
            // `Backend 1/2: CUDA0`
            section_is_ours = rest
                .split_once(": ")
                .is_some_and(|(_, name)| name.trim() == device);
            continue;
        }
        if section_is_ours {
            let l = line.trim();
            if let Some(d) = l.strip_prefix("Device description:") {
                description.get_or_insert_with(|| d.trim().to_string());
                tested_here = true;
            }
            if l.starts_with("Device memory:") {
                tested_here = true;
            }
            if l.starts_with("Skipping") {
                skipped_here = true;
            }
        }
        if let Some((op, params, status)) = op_line(&line) {
            let name = format!("{op}({params})");
            if status.ends_with("OK") {
                passed += 1;
            } else if status.ends_with("FAIL") && !failed.contains(&name) {
                failed.push(name.clone());
            }
            last_op = Some(name);
        }
    }
    if let Some((ok, total)) = summary {
        let unread = total.saturating_sub(ok).saturating_sub(failed.len());
        if unread > 0 {
            failed.push(format!(
                "{unread} more failed test(s) whose result line could not be read ({ok}/{total} tests passed)"
            ));
        }
    }
    RunOutput {
        passed,
        failed,
        last_op,
        tested_here,
        skipped_here,
        description,
        summary,
    }
}

/// How the run ended, and why in words; `tested`: the device's section was there and not
/// skipped.
fn outcome_of(
    t: &Target,
    inv: &Invocation,
    facts: &super::parse::BuildFacts,
    (passed, failed, summary, tested): (usize, &[String], Option<(usize, usize)>, bool),
    ops_run: &[String],
) -> (Outcome, String) {
    let tail = inv
        .output_tail
        .last()
        .map(|l| neutralise(&strip_ansi(l)))
        .unwrap_or_default();
    if inv.timed_out {
        (
            Outcome::Hang,
            format!(
                "killed after {:.0} s without finishing ({passed} tests had passed)",
                inv.elapsed_ms as f64 / 1000.0
            ),
        )
    } else if let Some(sig) = inv.signal {
        (
            Outcome::Crash,
            format!(
                "died with {} ({passed} tests had passed); last line: {tail}",
                crate::children::orchestrator::signal_name(sig)
            ),
        )
    } else if let Some(e) = &inv.not_started {
        (
            Outcome::NotRun,
            format!("test-backend-ops could not be started: {e}"),
        )
    } else if !failed.is_empty() {
        (Outcome::Fail, {
            let (bad, total) = match summary {
                Some((ok, total)) => (total.saturating_sub(ok), total),
                None => (failed.len(), failed.len() + passed),
            };
            let shown: Vec<String> = failed.iter().take(3).map(|f| neutralise(f)).collect();
            format!(
                "{bad} of {total} tests failed ({}): {}{}",
                inv.status,
                shown.join("; "),
                if failed.len() > 3 { "; ..." } else { "" }
            )
        })
    } else if !tested {
        let listed: Vec<String> = facts
            .devices
            .iter()
            .map(|d| format!("{}{}", d.backend, d.index))
            .collect();
        (
            Outcome::NotRun,
            format!(
                "this test-backend-ops has no device {}{}",
                t.device,
                if listed.is_empty() {
                    " (it lists no GPU: is it a build for this backend?)".to_string()
                } else {
                    format!(" (it lists {})", listed.join(", "))
                }
            ),
        )
    } else if inv.exit_code != Some(0) {
        (
            Outcome::Fail,
            format!(
                "test-backend-ops ended with {} although no test failed; last line: {tail}",
                inv.status
            ),
        )
    } else if passed == 0 {
        (
            Outcome::NotRun,
            "no test case matched the filters (or none is supported on this device)".to_string(),
        )
    } else {
        (
            Outcome::Pass,
            format!("{passed}/{passed} tests passed ({})", ops_run.join(", ")),
        )
    }
}

/// The kernel log's lines, or why it cannot be read.
pub fn read_kernel_log(program: &Path) -> std::result::Result<Vec<String>, String> {
    let inv = runner::run(program, &[], Duration::from_secs(15));
    if inv.ok() {
        Ok(inv.output.lines().map(str::to_string).collect())
    } else {
        Err(format!(
            "`{}` {}: {}",
            program.display(),
            inv.status,
            neutralise(inv.output.lines().next().unwrap_or("").trim())
        ))
    }
}

/// Fault lines in `after` that were not in `before` (the kernel's ring buffer may have moved).
pub fn new_faults(before: &[String], after: &[String], signatures: &SignatureTable) -> Vec<String> {
    let fresh: Vec<String> = match before
        .last()
        .and_then(|l| after.iter().rposition(|a| a == l))
    {
        Some(p) => after[p + 1..].to_vec(),
        None => {
            let seen: std::collections::HashSet<&String> = before.iter().collect();
            after
                .iter()
                .filter(|a| !seen.contains(a))
                .cloned()
                .collect()
        }
    };
    let corpus = Corpus::single("kernel log", &fresh.join("\n"));
    let mut out = Vec::new();
    for h in signatures.scan(&corpus, &[LogKind::Kernel]) {
        for q in h.quotes {
            if out.len() < 40 {
                out.push(q.text);
            }
        }
        if let Some(f) = h.fault
            && out.len() < 40
        {
            out.push(format!("(decoded: {})", f.describe()));
        }
    }
    out
}

/// Whether the backend library (or the program, when linked statically) carries the `NO_VMM`
/// feature string that builds without the VMM pool print in system_info. None: not found.
pub fn no_vmm_feature(tbo: &Path, backend: Backend) -> Option<bool> {
    let lib = match backend {
        Backend::Hip => "ggml-hip",
        Backend::Cuda => "ggml-cuda",
    };
    let dir = tbo.parent()?;
    let mut candidates: Vec<PathBuf> = Vec::new();
    for d in [Some(dir), dir.parent()].into_iter().flatten() {
        collect_libs(d, lib, 3, &mut candidates);
    }
    match candidates.first() {
        Some(l) => Some(has_standalone(l)),
        // Linked statically: the program carries the backend (its init log prefix) or not.
        None if file_contains(tbo, b"ggml_cuda_init").unwrap_or(false) => Some(has_standalone(tbo)),
        None => None,
    }
}

fn has_standalone(file: &Path) -> bool {
    // `NO_VMM` as its own string: preceded by a byte that cannot be part of a longer name.
    let Ok(f) = std::fs::File::open(file) else {
        return false;
    };
    let mut buf = Vec::new();
    let mut reader = std::io::BufReader::new(f);
    let mut chunk = vec![0u8; 8 << 20];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut from = 0;
        while let Some(p) = find(&buf[from..], b"NO_VMM\0") {
            let at = from + p;
            let prev = if at == 0 { 0 } else { buf[at - 1] };
            if !(prev.is_ascii_alphanumeric() || prev == b'_') {
                return true;
            }
            from = at + 1;
        }
        let keep = buf.len().saturating_sub(8);
        buf.drain(..keep);
    }
}

fn collect_libs(dir: &Path, lib: &str, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if p.is_file()
            && (name.starts_with(&format!("lib{lib}.so")) || name == format!("{lib}.dll"))
        {
            out.push(p);
        } else if depth > 0 && p.is_dir() && !e.file_type().is_ok_and(|t| t.is_symlink()) {
            collect_libs(&p, lib, depth - 1, out);
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Streams `file` looking for `needle` (files can be hundreds of MB).
fn file_contains(file: &Path, needle: &[u8]) -> std::io::Result<bool> {
    let mut f = std::io::BufReader::new(std::fs::File::open(file)?);
    let mut chunk = vec![0u8; 8 << 20];
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let n = f.read(&mut chunk)?;
        if n == 0 {
            return Ok(false);
        }
        carry.extend_from_slice(&chunk[..n]);
        if find(&carry, needle).is_some() {
            return Ok(true);
        }
        let keep = carry.len().saturating_sub(needle.len());
        carry.drain(..keep);
    }
}

impl Exercise {
    /// Exit code: 0 when every device passed, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        if !self.devices.is_empty() && self.devices.iter().all(|d| d.outcome == Outcome::Pass) {
            crate::error::exit::OK
        } else {
            crate::error::exit::PROBLEM
        }
    }

    /// Parses a document written by `check-build --exercise --json`.
    pub fn from_json(text: &str, origin: &str) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| Error::Input {
            input: origin.to_string(),
            line: Some(e.line()),
            message: format!("not JSON: {e}"),
            fix: "pass a file written by `gpuprobe check-build ./build --exercise --json`".into(),
        })?;
        Self::from_json_value(value, origin)
    }

    /// Checks the `schema` field, then the published schema, then deserialises.
    pub fn from_json_value(value: serde_json::Value, origin: &str) -> Result<Self> {
        let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        if schema != SCHEMA {
            return Err(Error::input(
                origin,
                format!("schema `{}` is not {SCHEMA}", neutralise(schema)),
                "pass a file written by `gpuprobe check-build ./build --exercise --json`",
            ));
        }
        crate::published::enforce(crate::published::Document::Exercise, &value, origin)?;
        serde_json::from_value(value).map_err(|e| {
            Error::input(
                origin,
                format!("not a gpuprobe exercise document: {e}"),
                "re-create it with `gpuprobe check-build ./build --exercise --json`",
            )
        })
    }

    /// The human summary.
    pub fn render(&self) -> String {
        let b = &self.binary;
        let vmm = match b.vmm {
            Some(true) => "VMM pool compiled in",
            Some(false) => "VMM pool compiled out (legacy pool)",
            None => "VMM pool unknown",
        };
        let mut o = format!(
            "gpuprobe check-build --exercise: {}\n  build {}, backend {}, {vmm}{}\n",
            b.path,
            b.build.map_or("unknown".to_string(), |n| n.to_string()),
            b.backend,
            self.runtime_version
                .as_deref()
                .map(|v| format!(", runtime {v}"))
                .unwrap_or_default()
        );
        for d in &self.devices {
            o.push_str(&format!(
                "  {} {} ({}): {} in {:.1} s\n",
                d.index,
                d.name,
                d.arch,
                d.outcome.as_str(),
                d.elapsed_ms / 1000.0
            ));
            if let Some(r) = &d.reason {
                o.push_str(&format!("      {r}\n"));
            }
            for f in d.failed_ops.iter().take(10) {
                o.push_str(&format!("      failed: {f}\n"));
            }
            if d.failed_ops.len() > 10 {
                o.push_str(&format!("      ... and {} more\n", d.failed_ops.len() - 10));
            }
            if matches!(d.outcome, Outcome::Hang | Outcome::Crash)
                && let Some(l) = &d.last_op
            {
                o.push_str(&format!("      last op printed: {l}\n"));
            }
            for k in d.kernel_faults.iter().take(12) {
                o.push_str(&format!("      kernel: {k}\n"));
            }
        }
        if self.devices.is_empty() {
            o.push_str("  no device was exercised\n");
        }
        let verdict = if self.exit_code() == 0 {
            "pass (exit 0)".to_string()
        } else {
            let bad: Vec<String> = self
                .devices
                .iter()
                .filter(|d| d.outcome != Outcome::Pass)
                .map(|d| format!("{} {}", d.name, d.outcome.as_str()))
                .collect();
            format!(
                "problems: {} (exit 1)",
                if bad.is_empty() {
                    "nothing exercised".into()
                } else {
                    bad.join(", ")
                }
            )
        };
        o.push_str(&format!("verdict: {verdict}\n"));
        if self.binary.vmm == Some(true)
            && self.devices.iter().any(|d| {
                matches!(d.outcome, Outcome::Hang | Outcome::Crash) || !d.kernel_faults.is_empty()
            })
        {
            o.push_str("  keep it as a local deny record: rerun with --json --output exercise.json, then gpuprobe quirks record --from exercise.json\n");
        }
        o.lines().map(|l| neutralise(l) + "\n").collect()
    }
}

/// The quirk records a saved document implies: an exercise result's workload failures, else
/// (any other schema is read as a detect report) its smoke failures; with what was not recorded.
pub fn records_of_document(
    text: &str,
    origin: &str,
) -> crate::Result<(Vec<crate::quirks::record::Record>, Vec<String>)> {
    let schema = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v.get("schema").and_then(|s| s.as_str()).map(str::to_string));
    if schema.as_deref() == Some(SCHEMA) {
        Ok(records(&Exercise::from_json(text, origin)?))
    } else {
        let report = crate::report_file::parse_report(text, origin)?;
        Ok((crate::quirks::record::from_report(&report), Vec::new()))
    }
}

/// Local quirk records (VMM denied) for the devices whose run hung, crashed or faulted, when the
/// build had the VMM pool compiled in (a failure of a legacy-pool build says nothing about VMM).
pub fn records(ex: &Exercise) -> (Vec<crate::quirks::record::Record>, Vec<String>) {
    use toml_edit::{Array, Item, Table, value};
    let mut out: Vec<crate::quirks::record::Record> = Vec::new();
    let mut skipped = Vec::new();
    for d in &ex.devices {
        let bad =
            matches!(d.outcome, Outcome::Hang | Outcome::Crash) || !d.kernel_faults.is_empty();
        if !bad {
            continue;
        }
        if ex.binary.vmm != Some(true) {
            skipped.push(format!(
                "{} ({}): {} with a build whose VMM pool is {}: not evidence against VMM",
                d.name,
                d.arch,
                d.outcome.as_str(),
                if ex.binary.vmm == Some(false) {
                    "compiled out"
                } else {
                    "unknown"
                }
            ));
            continue;
        }
        if !crate::report::arch_known(&d.arch) || ex.binary.backend == BinaryBackend::Cpu {
            skipped.push(format!(
                "{}: architecture unknown, nothing to match a record on",
                d.name
            ));
            continue;
        }
        let what = if !d.kernel_faults.is_empty()
            && !matches!(d.outcome, Outcome::Hang | Outcome::Crash)
        {
            "fault"
        } else {
            d.outcome.as_str()
        };
        let id = format!("LOCAL-{}-exercise-{what}", d.arch);
        if out.iter().any(|r| r.id == id) {
            continue;
        }
        let mut t = Table::new();
        t["id"] = value(&id);
        // The document's strings (device name, reason, kernel) become one line of text each:
        // a quirk's text may hold no control character, so a hostile name is recorded escaped
        // rather than making the whole quirk file unreadable.
        let line = |s: String| crate::neutral::inline(&s).into_owned();
        t["title"] = value(line(format!(
            "{} ({}): test-backend-ops {what} with the VMM pool, measured here",
            d.name, d.arch
        )));
        t["summary"] = value(line(format!(
            "{}. A llama.cpp build with the VMM pool did not survive its own operator tests on this device; keep the legacy pool.",
            d.reason.clone().unwrap_or_default()
        )));
        t["severity"] = value("high");
        t["confidence"] = value("medium");
        let mut measured = vec![format!(
            "gpuprobe {} check-build --exercise",
            ex.gpuprobe_version
        )];
        if let Some(k) = &ex.host.kernel {
            measured.push(format!("{} kernel {k}", ex.host.os));
        }
        if let Some(r) = &ex.runtime_version {
            measured.push(format!("runtime {r}"));
        }
        if let Some(b) = ex.binary.build {
            measured.push(format!("llama.cpp build {b}"));
        }
        t["measured_on"] = value(line(measured.join(", ")));
        let mut m = Table::new();
        m["vendor"] = value(if ex.binary.backend == BinaryBackend::Hip {
            "amd"
        } else {
            "nvidia"
        });
        m["archs"] = value(Array::from_iter([d.arch.as_str()]));
        if ex.binary.backend == BinaryBackend::Hip
            && let Some(mm) = ex
                .runtime_version
                .as_deref()
                .and_then(crate::evidence::series_of)
        {
            m["runtime"] = value(format!("{mm}:{mm}"));
        }
        t["match"] = Item::Table(m);
        let mut e = Table::new();
        e["vmm"] = value("deny");
        e["warn"] = value(line(format!(
            "measured on this machine: test-backend-ops {what} on {} with the VMM pool",
            d.name
        )));
        t["effect"] = Item::Table(e);
        t["sources"] = value(Array::new());
        out.push(crate::quirks::record::Record { id, table: t });
    }
    (out, skipped)
}
