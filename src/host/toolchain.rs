//! Finding the toolchains on this machine: nvcc (CUDA toolkit) and hipcc/hipconfig (ROCm).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::version::Version;

/// `ROCM_PATH`, `HIP_PATH`, then `/opt/rocm`, then PATH.
pub fn find_rocm_tool(name: &str) -> Option<PathBuf> {
    for var in ["ROCM_PATH", "HIP_PATH"] {
        if let Some(dir) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let p = Path::new(&dir).join("bin").join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let opt = Path::new("/opt/rocm/bin").join(name);
    if opt.is_file() {
        return Some(opt);
    }
    which::which(name).ok()
}

pub fn find_nvcc() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("CUDA_HOME")
        .or_else(|| std::env::var_os("CUDA_PATH"))
        .filter(|v| !v.is_empty())
    {
        let p = Path::new(&home).join("bin/nvcc");
        if p.is_file() {
            return Some(p);
        }
    }
    which::which("nvcc").ok()
}

/// How long a toolchain program may take to print its version. `hipconfig` is a Perl script
/// that may query the system; well under a second is usual, ten seconds is broken.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

fn output(cmd: &Path, args: &[&str]) -> Option<String> {
    let mut c = Command::new(cmd);
    c.args(args);
    match crate::process::output(c, VERSION_TIMEOUT) {
        Ok(out) => Some(out.stdout + &out.stderr),
        Err(e) => {
            // The caller goes on without a version; say why, once, on stderr.
            crate::neutral::eprintln(&format!(
                "gpuprobe: note: `{} {}` {e}; its version is unknown (give --cuda/--rocm VER instead)",
                crate::neutral::inline(&cmd.display().to_string()),
                args.join(" ")
            ));
            None
        }
    }
}

/// `Cuda compilation tools, release 13.0, V13.0.88` → 13.0.
pub fn parse_nvcc_version(text: &str) -> Option<Version> {
    let idx = text.find("release ")?;
    let v = text[idx + 8..].split([',', ' ', '\n']).next()?;
    v.parse().ok()
}

/// `6.2.41133-dd7f95766` or `HIP version: 5.2.21153-0` → 6.2.41133.
pub fn parse_hip_version(text: &str) -> Option<Version> {
    text.lines().find_map(|l| {
        let l = l.trim().trim_start_matches("HIP version:").trim();
        let v = l.split(['-', ' ']).next()?;
        (v.chars().next()?.is_ascii_digit() && v.contains('.')).then(|| v.parse().ok())?
    })
}

/// The CUDA toolkit version of `nvcc` (given path, or found), with where it came from.
pub fn cuda_version(nvcc: Option<&Path>) -> Option<(Version, String)> {
    let path = nvcc.map(Path::to_path_buf).or_else(find_nvcc)?;
    let v = parse_nvcc_version(&output(&path, &["--version"])?)?;
    Some((v, format!("{} --version", path.display())))
}

/// The ROCm version: `/opt/rocm/.info/version` when present, else hipconfig's HIP version
/// (HIP and ROCm share major.minor).
pub fn rocm_version(hipconfig: Option<&Path>) -> Option<(Version, String)> {
    if hipconfig.is_none() {
        for base in [
            std::env::var_os("ROCM_PATH").map(PathBuf::from),
            Some(PathBuf::from("/opt/rocm")),
        ]
        .into_iter()
        .flatten()
        {
            let info = base.join(".info/version");
            if let Ok(t) = crate::files::read_to_string(&info)
                && let Some(v) = t
                    .trim()
                    .split(['-', ' '])
                    .next()
                    .and_then(|v| v.parse().ok())
            {
                return Some((v, info.display().to_string()));
            }
        }
    }
    let path = hipconfig
        .map(Path::to_path_buf)
        .or_else(|| find_rocm_tool("hipconfig"))?;
    let v = parse_hip_version(&output(&path, &["--version"])?)?;
    Some((v, format!("{} --version", path.display())))
}

/// ROCm's clang, as llama.cpp's build docs derive it (`HIPCXX="$(hipconfig -l)/clang"`): the
/// folder `hipconfig -l` prints, with a `clang` in it. `hipconfig` is the given one, else the one
/// found as for the ROCm version. The error says what was missing, for the user's message.
pub fn hip_clang(hipconfig: Option<&Path>) -> Result<PathBuf, String> {
    let tool = hipconfig
        .map(Path::to_path_buf)
        .or_else(|| find_rocm_tool("hipconfig"))
        .ok_or_else(|| {
            "no hipconfig found (ROCM_PATH, HIP_PATH, /opt/rocm/bin, PATH)".to_string()
        })?;
    let mut c = Command::new(&tool);
    c.arg("-l");
    let out = crate::process::output(c, VERSION_TIMEOUT)
        .map_err(|e| format!("`{} -l` {e}", tool.display()))?;
    // hipconfig prints the folder without a newline; some versions print a banner first.
    let dir = out
        .stdout
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .ok_or_else(|| format!("`{} -l` printed nothing", tool.display()))?;
    let clang = Path::new(dir).join("clang");
    if clang.is_file() {
        Ok(clang)
    } else {
        Err(format!(
            "`{} -l` names {dir}, which holds no clang",
            tool.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tool_versions() {
        let nvcc = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0";
        assert_eq!(parse_nvcc_version(nvcc).unwrap().to_string(), "13.0");
        assert_eq!(
            parse_hip_version("6.2.41133-dd7f95766")
                .unwrap()
                .to_string(),
            "6.2.41133"
        );
        assert_eq!(
            parse_hip_version("Traceback...\n5.2.21153-0\n")
                .unwrap()
                .to_string(),
            "5.2.21153"
        );
        assert!(parse_hip_version("garbage").is_none());
    }
}
