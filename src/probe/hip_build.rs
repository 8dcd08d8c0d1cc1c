//! Building the HIP probe program on this machine with its own hipcc, cached by (source,
//! compiler, targets). One target the local hipcc cannot build never blocks the others: when the
//! build for every target fails, the targets the compiler named (else all) are tried on their
//! own, the ones it refuses are set aside with its error, and the rest are built together. Every
//! build goes through the host view, so a dump records it and a replay repeats it without hipcc.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::hip::{PROBE_ENV, PROBE_HEADER, PROBE_SOURCE};
use crate::host::{Build, HostView, Tool};
use crate::report::{CheckLevel, HostCheck};
use crate::targets::TargetTable;

/// How long one hipcc run may take.
const BUILD_TIMEOUT: Duration = Duration::from_secs(600);

/// A target the local hipcc could not build, and what it said.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub arch: String,
    pub build: Build,
}

#[derive(Debug)]
pub enum ProbeProgram {
    /// Built (or given) for `built_for`; `rejected` targets could not be built.
    Ready {
        path: PathBuf,
        built_for: Vec<String>,
        rejected: Vec<Rejected>,
    },
    NoToolchain(String),
    /// Nothing could be built: the attempt for all targets, and any target tried alone.
    BuildFailed {
        build: Build,
        rejected: Vec<Rejected>,
    },
}

/// The user's own cache for probe programs (see [`crate::private_dir::cache_root`]), or why
/// there is none.
pub fn cache_dir() -> Result<PathBuf, crate::private_dir::Untrusted> {
    crate::private_dir::cache_root()
}

/// Private directories made for one run when there is no cache to trust; removed by
/// [`discard_scratch`] before gpuprobe exits.
static SCRATCH: std::sync::Mutex<Vec<tempfile::TempDir>> = std::sync::Mutex::new(Vec::new());

/// Removes the probe programs built for this run only (no trusted cache).
pub fn discard_scratch() {
    if let Ok(mut dirs) = SCRATCH.lock() {
        dirs.clear();
    }
}

/// A fresh directory only we can enter (mkdtemp: a new name, mode 0700), for one build.
fn scratch_dir() -> std::io::Result<PathBuf> {
    let dir = tempfile::Builder::new().prefix("gpuprobe-hip-").tempdir()?;
    let path = dir.path().to_path_buf();
    if let Ok(mut dirs) = SCRATCH.lock() {
        dirs.push(dir);
    } else {
        let _ = dir.keep();
    }
    Ok(path)
}

/// The file beside a cached probe that holds its SHA-256, written when it was built.
const HASH_FILE: &str = "gpuprobe-probe.sha256";

/// The largest probe program gpuprobe will hash (a real one is a few MiB).
const MAX_PROBE_BYTES: u64 = 256 << 20;

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads a file without following a symlink at its last component, only if it is a regular
/// file that we own and nobody else may write.
fn read_ours(path: &Path, limit: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = opts.open(path).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > limit {
        return None;
    }
    crate::private_dir::owned_and_private(path, &meta).ok()?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= limit).then_some(bytes)
}

/// A cached probe is used only if its directory and the program are ours and private, and the
/// program still has the hash recorded when it was built.
fn cached_probe_is_ours(dir: &Path, exe: &Path) -> bool {
    if crate::private_dir::check(dir).is_err() {
        return false;
    }
    let (Some(program), Some(recorded)) = (
        read_ours(exe, MAX_PROBE_BYTES),
        read_ours(&dir.join(HASH_FILE), 128),
    ) else {
        return false;
    };
    String::from_utf8_lossy(&recorded).trim() == sha256_hex(&program)
}

/// Creates or replaces `dir/name` with `bytes`: a new file (create-new, never through a planted
/// link) renamed over the name, which replaces a link rather than writing where it points.
fn write_new(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    let prefix = format!(".{name}.");
    let mut b = tempfile::Builder::new();
    b.prefix(&prefix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut tmp = b.tempfile_in(dir)?;
    tmp.as_file_mut().write_all(bytes)?;
    tmp.as_file_mut().sync_all()?;
    tmp.persist(dir.join(name)).map_err(|e| e.error)?;
    Ok(())
}

fn cache_key(version: &str, archs: &[String]) -> String {
    let mut h = Sha256::new();
    h.update(PROBE_SOURCE);
    h.update(PROBE_HEADER);
    h.update(version);
    h.update(archs.join(";"));
    h.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The probe program for `archs`: from `$GPUPROBE_HIP_PROBE`, the cache, or fresh hipcc builds.
pub fn probe_program(h: &HostView, archs: &[String]) -> ProbeProgram {
    if let Some(p) = h.env(PROBE_ENV).filter(|v| !v.is_empty()) {
        return ProbeProgram::Ready {
            path: PathBuf::from(p),
            built_for: archs.to_vec(),
            rejected: Vec::new(),
        };
    }
    let Some(hipcc) = h.tool("hipcc") else {
        return ProbeProgram::NoToolchain(
            "no hipcc found (looked in $ROCM_PATH/bin, $HIP_PATH/bin, /opt/rocm/bin and PATH); install ROCm's HIP SDK \
             (e.g. `apt install rocm-hip-sdk` from AMD's repository, or Debian's `hipcc libamdhip64-dev`) to run the smoke test"
                .into(),
        );
    };
    let cache = cache_dir();
    if let Err(why) = &cache {
        crate::neutral::eprintln(&format!(
            "gpuprobe: note: not caching the HIP probe program ({why}); it is built for this run only"
        ));
    }
    let build = |set: &[String]| -> (Build, PathBuf) {
        let name = format!("hip-probe-{}", cache_key(&hipcc.version_output, set));
        // A directory that fails the ownership check is not ours to use: build aside instead.
        let dir = match &cache {
            Ok(root) if crate::private_dir::make_private(&root.join(&name)).is_ok() => {
                root.join(&name)
            }
            _ => scratch_dir().map_or_else(|_| std::env::temp_dir().join(&name), |d| d.join(&name)),
        };
        let exe = dir.join("gpuprobe-probe");
        let b = h.build(set, || build_live(Path::new(&hipcc.path), &dir, &exe, set));
        (b, exe)
    };
    let (all, exe) = build(archs);
    if all.ok {
        return ProbeProgram::Ready {
            path: exe,
            built_for: archs.to_vec(),
            rejected: Vec::new(),
        };
    }
    if archs.len() < 2 {
        let rejected = archs
            .iter()
            .filter(|a| rejects_target(&all, a))
            .map(|a| Rejected {
                arch: a.clone(),
                build: all.clone(),
            })
            .collect();
        return ProbeProgram::BuildFailed {
            build: all,
            rejected,
        };
    }
    // Try first the targets the compiler named in its error, then every target, on its own.
    let named: Vec<String> = archs
        .iter()
        .filter(|a| error_lines(&all).any(|l| mentions(l, a)))
        .cloned()
        .collect();
    let suspects = if named.is_empty() || named.len() == archs.len() {
        archs.to_vec()
    } else {
        named
    };
    let mut rejected = Vec::new();
    for a in &suspects {
        let (b, _) = build(std::slice::from_ref(a));
        if !b.ok {
            rejected.push(Rejected {
                arch: a.clone(),
                build: b,
            });
        }
    }
    let rest: Vec<String> = archs
        .iter()
        .filter(|a| !rejected.iter().any(|r| &r.arch == *a))
        .cloned()
        .collect();
    if rest.is_empty() {
        // Nothing builds: blame a target only where the compiler said it was the target.
        rejected.retain(|r| rejects_target(&r.build, &r.arch));
        return ProbeProgram::BuildFailed {
            build: all,
            rejected,
        };
    }
    if rejected.is_empty() {
        return ProbeProgram::BuildFailed {
            build: all,
            rejected,
        };
    }
    let (b, exe) = build(&rest);
    if b.ok {
        ProbeProgram::Ready {
            path: exe,
            built_for: rest,
            rejected,
        }
    } else {
        let mut rejected = rejected;
        rejected.retain(|r| rejects_target(&r.build, &r.arch));
        ProbeProgram::BuildFailed { build: b, rejected }
    }
}

pub(super) fn error_lines(b: &Build) -> impl Iterator<Item = &String> {
    b.output
        .iter()
        .filter(|l| l.to_ascii_lowercase().contains("error"))
}

/// `line` names target `arch` as a word (`gfx942`, not a prefix of `gfx9420`).
fn mentions(line: &str, arch: &str) -> bool {
    line.match_indices(arch).any(|(i, _)| {
        !line[i + arch.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

/// The compiler refused `arch` itself (an unknown target, or no device library for it), as
/// opposed to failing for a reason every target shares.
fn rejects_target(b: &Build, arch: &str) -> bool {
    const SAYS: &[&str] = &[
        "invalid target id",
        "unsupported",
        "unknown target",
        "not a recognized processor",
        "invalid offload arch",
        "unknown offload arch",
        "device library",
        "device-lib",
    ];
    error_lines(b).any(|l| {
        let low = l.to_ascii_lowercase();
        mentions(l, arch) && SAYS.iter().any(|s| low.contains(s))
    })
}

fn shell_words(cmd: &Command) -> String {
    let mut parts: Vec<String> = cmd
        .get_envs()
        .filter_map(|(k, v)| {
            Some(format!(
                "{}={}",
                k.to_string_lossy(),
                crate::emit::sh_quote(&v?.to_string_lossy())
            ))
        })
        .collect();
    parts.push(crate::emit::sh_quote(&cmd.get_program().to_string_lossy()));
    parts.extend(
        cmd.get_args()
            .map(|a| crate::emit::sh_quote(&a.to_string_lossy())),
    );
    parts.join(" ")
}

/// One hipcc run (or the cache): the probe for `archs` at `exe`.
fn build_live(hipcc: &Path, dir: &Path, exe: &Path, archs: &[String]) -> Build {
    let mut cmd = Command::new(hipcc);
    // hipcc switches to the NVIDIA platform when it sees nvcc on PATH.
    cmd.env("HIP_PLATFORM", "amd");
    cmd.arg("-O2").arg("-std=c++17");
    for a in archs {
        cmd.arg(format!("--offload-arch={a}"));
    }
    let src = dir.join("gpuprobe-probe.cpp");
    let fail = |command: String, status: String, output: Vec<String>| Build {
        archs: archs.to_vec(),
        command,
        ok: false,
        status: status.into(),
        output,
    };
    if cached_probe_is_ours(dir, exe) {
        cmd.arg("-o").arg(exe).arg(&src);
        return Build {
            archs: archs.to_vec(),
            command: shell_words(&cmd),
            ok: true,
            status: "cached".into(),
            output: Vec::new(),
        };
    }
    // hipcc writes into a fresh directory of its own, so no name it writes can be planted.
    let out_dir = crate::private_dir::make_private(dir)
        .map_err(|e| std::io::Error::other(e.0))
        .and_then(|_| write_new(dir, "gpuprobe-probe.cpp", PROBE_SOURCE.as_bytes(), 0o600))
        .and_then(|_| write_new(dir, "compat.h", PROBE_HEADER.as_bytes(), 0o600))
        .and_then(|_| {
            tempfile::Builder::new()
                .prefix(".gpuprobe-probe.")
                .tempdir_in(dir)
        });
    let out_dir = match out_dir {
        Ok(d) => d,
        Err(e) => {
            cmd.arg("-o").arg(exe).arg(&src);
            return fail(
                shell_words(&cmd),
                "not started".into(),
                vec![format!(
                    "cannot prepare {}: {e}",
                    crate::neutral::inline(&dir.display().to_string())
                )],
            );
        }
    };
    let tmp = out_dir.path().join("gpuprobe-probe");
    cmd.arg("-o").arg(&tmp).arg(&src);
    let command = shell_words(&cmd);
    let fail = |status: String, output: Vec<String>| fail(command.clone(), status, output);
    crate::neutral::eprintln(&format!(
        "gpuprobe: building the HIP probe for {} with {} (first run only; cached in {})",
        archs.join(", "),
        hipcc.display(),
        dir.display()
    ));
    let out = crate::children::orchestrator::run(cmd, BUILD_TIMEOUT);
    let mut output: Vec<String> = out.garbage.clone();
    output.extend(out.events.iter().map(|e| e.raw.to_string()));
    output.extend(out.stderr_tail.iter().cloned());
    match out.exit {
        crate::children::orchestrator::Exit::Code(0) => {
            // The hash first, the rename last: an interrupted build never leaves a probe that
            // passes the check half-written.
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                // Whatever the umask: a program others could rewrite is never trusted later.
                let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755));
            }
            let recorded = read_ours(&tmp, MAX_PROBE_BYTES)
                .ok_or_else(|| {
                    std::io::Error::other("the built program is not a private file of ours")
                })
                .and_then(|p| write_new(dir, HASH_FILE, sha256_hex(&p).as_bytes(), 0o600))
                .and_then(|_| std::fs::rename(&tmp, exe));
            match recorded {
                Ok(()) => Build {
                    archs: archs.to_vec(),
                    command,
                    ok: true,
                    status: "built".into(),
                    output: Vec::new(),
                },
                Err(e) => fail("exit 0".into(), vec![format!("{}: {e}", exe.display())]),
            }
        }
        other => {
            let status = match other {
                crate::children::orchestrator::Exit::Code(c) => format!("exit {c}"),
                crate::children::orchestrator::Exit::Signal(s) => {
                    format!(
                        "killed by {}",
                        crate::children::orchestrator::signal_name(s)
                    )
                }
                crate::children::orchestrator::Exit::TimedOut => {
                    format!("no result within {} s", BUILD_TIMEOUT.as_secs())
                }
                crate::children::orchestrator::Exit::SpawnFailed(e) => format!("not started: {e}"),
                crate::children::orchestrator::Exit::AfterDone => {
                    "ended without a compiler exit code".into()
                }
            };
            fail(status, output)
        }
    }
}

pub(super) fn rejected_check(
    r: &Rejected,
    hipcc: Option<&Tool>,
    targets: Option<&TargetTable>,
) -> HostCheck {
    let version = hipcc
        .and_then(|t| crate::host::toolchain::parse_hip_version(&t.version_output))
        .map(|v| format!("HIP {v}"))
        .unwrap_or_else(|| "version unknown".into());
    let path = hipcc.map(|t| t.path.as_str()).unwrap_or("hipcc");
    let need = targets.and_then(|t| t.get(&r.arch)).map(|t| {
        let min = t
            .toolkit
            .min
            .as_ref()
            .map(|m| format!("ROCm {m} or newer"))
            .unwrap_or_else(|| format!("ROCm in {}", t.toolkit));
        format!(
            "; gpuprobe's target table says {min} builds {}{}",
            r.arch,
            t.toolkit_note
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        )
    });
    let first = error_lines(&r.build)
        .next()
        .or(r.build.output.first())
        .cloned()
        .unwrap_or_else(|| r.build.status.to_string());
    HostCheck::new(
        "hip-target-unbuildable",
        CheckLevel::Warning,
        format!("the local hipcc cannot build {}", r.arch),
        format!(
            "{path} ({version}) failed to build the probe for {} ({}: {first}){}: the {} GPU(s) are listed from KFD but not measured; the other targets were built and measured",
            r.arch,
            r.build.status,
            need.unwrap_or_default(),
            r.arch
        ),
    )
    .fix(match targets.and_then(|t| t.get(&r.arch)).and_then(|t| t.toolkit.min.as_ref()) {
        Some(min) => format!(
            "install ROCm {min} or newer and point ROCM_PATH at it (or put its hipcc first on PATH); or build the probe elsewhere (scripts/build-probe.sh hip OUT {}) and pass it with GPUPROBE_HIP_PROBE",
            r.arch
        ),
        None => format!(
            "use a ROCm whose compiler knows {}, or pass a probe built elsewhere with GPUPROBE_HIP_PROBE",
            r.arch
        ),
    })
    .evidence(
        std::iter::once(format!("command: {}", r.build.command))
            .chain(r.build.output.iter().cloned()),
    )
}

pub(super) fn build_failed_check(b: &Build, hipcc: Option<&Tool>) -> HostCheck {
    HostCheck::new(
        "hip-probe-build-failed",
        CheckLevel::Error,
        "the HIP probe program could not be built",
        format!(
            "{} failed to build the probe for {} ({}); the GPUs are listed from KFD/DRM, without VMM facts or smoke test",
            hipcc.map(|t| t.path.as_str()).unwrap_or("hipcc"),
            b.archs.join(", "),
            b.status
        ),
    )
    .fix("run the command below to see the whole error; a hipcc that cannot compile HIP usually lacks the HIP runtime headers or device libraries (Debian: `apt install libamdhip64-dev`; AMD's packages: `rocm-hip-sdk`), or belongs to a different ROCm than ROCM_PATH")
    .evidence(std::iter::once(format!("command: {}", b.command)).chain(b.output.iter().cloned()))
}

pub(super) fn say_build_failed(b: &Build) {
    crate::neutral::eprintln(&format!(
        "gpuprobe: the HIP probe program could not be built ({}):",
        b.status
    ));
    crate::neutral::eprintln(&format!(
        "  command: {}",
        crate::host::printable(&b.command)
    ));
    for l in b.output.iter().rev().take(12).rev() {
        crate::neutral::eprintln(&format!("  | {}", crate::host::printable(l)));
    }
    crate::neutral::eprintln(
        "gpuprobe: falling back to what the kernel (KFD/DRM) says about the GPUs; the smoke test is not run",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_named_as_a_word() {
        assert!(mentions(
            "clang: error: unsupported HIP gpu architecture: gfx942",
            "gfx942"
        ));
        assert!(!mentions("error: gfx9420 is odd", "gfx942"));
        assert!(mentions("'gfx90a' is not a recognized processor", "gfx90a"));
    }

    #[test]
    fn a_target_is_blamed_only_when_the_compiler_refuses_it() {
        let b = |line: &str| Build {
            archs: vec![],
            command: String::new(),
            ok: false,
            status: "exit 1".into(),
            output: vec![line.to_string()],
        };
        assert!(rejects_target(
            &b("clang: error: invalid target ID 'gfx942'; format is ..."),
            "gfx942"
        ));
        assert!(rejects_target(
            &b("clang: error: cannot find ROCm device library for gfx1100; provide its path"),
            "gfx1100"
        ));
        assert!(!rejects_target(
            &b("1 error generated when compiling for gfx906."),
            "gfx906"
        ));
        assert!(!rejects_target(
            &b("fatal error: 'hip/hip_runtime.h' file not found"),
            "gfx906"
        ));
    }

    #[test]
    fn commands_are_shell_quoted() {
        let mut c = Command::new("/opt/my rocm/bin/hipcc");
        c.env("HIP_PLATFORM", "amd")
            .arg("--offload-arch=gfx90a")
            .arg("-o")
            .arg("/tmp/a b");
        assert_eq!(
            shell_words(&c),
            "HIP_PLATFORM=amd '/opt/my rocm/bin/hipcc' --offload-arch=gfx90a -o '/tmp/a b'"
        );
    }
}
