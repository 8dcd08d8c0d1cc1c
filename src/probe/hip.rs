//! The HIP backend: the single-source probe program (`probes/gpuprobe-probe.cpp`) built on this
//! machine with its own hipcc, for its own architectures, and cached by (source, compiler, targets).
//! That makes the probe ABI-correct for whatever ROCm is installed, and exercises the toolchain
//! that will build llama.cpp.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::toolchain::find_rocm_tool;

pub const PROBE_SOURCE: &str = include_str!("../../probes/gpuprobe-probe.cpp");
pub const PROBE_HEADER: &str = include_str!("../../probes/compat.h");
/// Use this probe program instead of building one (a prebuilt probe, or a fake in tests).
pub const PROBE_ENV: &str = "GPUPROBE_HIP_PROBE";

#[derive(Debug)]
pub enum ProbeProgram {
    Ready(PathBuf),
    NoToolchain(String),
    BuildFailed(String),
}

pub fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("gpuprobe")
}

/// The probe program for `archs`: from `$GPUPROBE_HIP_PROBE`, the cache, or a fresh hipcc build.
pub fn probe_program(archs: &[String]) -> ProbeProgram {
    if let Some(p) = std::env::var_os(PROBE_ENV).filter(|v| !v.is_empty()) {
        return ProbeProgram::Ready(PathBuf::from(p));
    }
    let Some(hipcc) = find_rocm_tool("hipcc") else {
        return ProbeProgram::NoToolchain(
            "no hipcc found (looked in $ROCM_PATH/bin, $HIP_PATH/bin, /opt/rocm/bin and PATH); install ROCm's HIP SDK \
             (e.g. `apt install rocm-hip-sdk` from AMD's repository, or Debian's `hipcc libamdhip64-dev`) to run the smoke test"
                .into(),
        );
    };
    let version = Command::new(&hipcc)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    let mut h = Sha256::new();
    h.update(PROBE_SOURCE);
    h.update(PROBE_HEADER);
    h.update(&version);
    h.update(archs.join(";"));
    let key: String = h
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let dir = cache_dir().join(format!("hip-probe-{key}"));
    let exe = dir.join("gpuprobe-probe");
    if exe.is_file() {
        return ProbeProgram::Ready(exe);
    }
    match build(&hipcc, &dir, &exe, archs) {
        Ok(()) => ProbeProgram::Ready(exe),
        Err(e) => ProbeProgram::BuildFailed(e),
    }
}

fn build(hipcc: &Path, dir: &Path, exe: &Path, archs: &[String]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let src = dir.join("gpuprobe-probe.cpp");
    std::fs::write(&src, PROBE_SOURCE).map_err(|e| format!("{}: {e}", src.display()))?;
    std::fs::write(dir.join("compat.h"), PROBE_HEADER)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    eprintln!(
        "gpuprobe: building the HIP probe for {} with {} (first run only; cached in {})",
        archs.join(", "),
        hipcc.display(),
        dir.display()
    );
    let tmp = dir.join("gpuprobe-probe.tmp");
    let mut cmd = Command::new(hipcc);
    // hipcc switches to the NVIDIA platform when it sees nvcc on PATH.
    cmd.env("HIP_PLATFORM", "amd");
    cmd.arg("-O2").arg("-std=c++17");
    for a in archs {
        cmd.arg(format!("--offload-arch={a}"));
    }
    cmd.arg("-o").arg(&tmp).arg(&src);
    let out = super::orchestrator::run(cmd, Duration::from_secs(600));
    match out.exit {
        super::orchestrator::Exit::Code(0) => {
            // Rename last, so an interrupted build never leaves a half-written probe in the cache.
            std::fs::rename(&tmp, exe).map_err(|e| format!("{}: {e}", exe.display()))
        }
        other => {
            let _ = std::fs::remove_file(&tmp);
            Err(format!(
                "hipcc failed ({other:?}): {}",
                out.stderr_tail.join(" | ")
            ))
        }
    }
}
