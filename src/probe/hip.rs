//! The HIP backend: the single-source probe program (`probes/gpuprobe-probe.cpp`) built on this
//! machine with its own hipcc, for its own architectures, and cached by (source, compiler, targets).
//! That makes the probe ABI-correct for whatever ROCm is installed, and exercises the toolchain
//! that will build llama.cpp.
//!
//! One target the local hipcc cannot build never blocks the others: when the build for every
//! target fails, the targets are tried on their own, each rejected one becomes a host check with
//! the minimum ROCm from `profiles/targets.toml`, and the others are built and measured. A hipcc
//! that builds nothing gives the status `probe-build-failed`, the compiler's error and the exact
//! command, and the devices as KFD/DRM describe them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::interpret::{device_from_event, smoke_from};
use super::sysfs::{self, DrmGpu, KfdGpu};
use super::{ProbeOptions, run_devices, run_peers, unknown_device};
use crate::host::{Build, HostView, checks, visible};
use crate::report::{
    Backend, BackendStatus, CheckLevel, Device, HiddenDevice, HostCheck, Report, Smoke, Vendor,
};
use crate::targets::TargetTable;

pub const PROBE_SOURCE: &str = include_str!("../../probes/gpuprobe-probe.cpp");
pub const PROBE_HEADER: &str = include_str!("../../probes/compat.h");
/// Use this probe program instead of building one (a prebuilt probe, or a fake in tests).
pub const PROBE_ENV: &str = "GPUPROBE_HIP_PROBE";
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

pub fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("gpuprobe")
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
    let build = |set: &[String]| -> (Build, PathBuf) {
        let dir = cache_dir().join(format!(
            "hip-probe-{}",
            cache_key(&hipcc.version_output, set)
        ));
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

fn error_lines(b: &Build) -> impl Iterator<Item = &String> {
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
    let tmp = dir.join("gpuprobe-probe.tmp");
    let src = dir.join("gpuprobe-probe.cpp");
    cmd.arg("-o").arg(&tmp).arg(&src);
    let command = shell_words(&cmd);
    let fail = |status: String, output: Vec<String>| Build {
        archs: archs.to_vec(),
        command: command.clone(),
        ok: false,
        status,
        output,
    };
    if exe.is_file() {
        return Build {
            archs: archs.to_vec(),
            command: command.clone(),
            ok: true,
            status: "cached".into(),
            output: Vec::new(),
        };
    }
    let prepared = std::fs::create_dir_all(dir)
        .and_then(|_| std::fs::write(&src, PROBE_SOURCE))
        .and_then(|_| std::fs::write(dir.join("compat.h"), PROBE_HEADER));
    if let Err(e) = prepared {
        return fail(
            "not started".into(),
            vec![format!("cannot prepare {}: {e}", dir.display())],
        );
    }
    eprintln!(
        "gpuprobe: building the HIP probe for {} with {} (first run only; cached in {})",
        archs.join(", "),
        hipcc.display(),
        dir.display()
    );
    let out = super::orchestrator::run(cmd, BUILD_TIMEOUT);
    let mut output: Vec<String> = out.garbage.clone();
    output.extend(out.events.iter().map(Value::to_string));
    output.extend(out.stderr_tail.iter().cloned());
    match out.exit {
        super::orchestrator::Exit::Code(0) => {
            // Rename last, so an interrupted build never leaves a half-written probe in the cache.
            match std::fs::rename(&tmp, exe) {
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
            let _ = std::fs::remove_file(&tmp);
            let status = match other {
                super::orchestrator::Exit::Code(c) => format!("exit {c}"),
                super::orchestrator::Exit::Signal(s) => {
                    format!("killed by {}", super::orchestrator::signal_name(s))
                }
                super::orchestrator::Exit::TimedOut => {
                    format!("no result within {} s", BUILD_TIMEOUT.as_secs())
                }
                super::orchestrator::Exit::SpawnFailed(e) => format!("not started: {e}"),
            };
            fail(status, output)
        }
    }
}

/// A device as KFD (and DRM) describe it, numbered `index`.
pub(super) fn kfd_device(
    index: u32,
    g: &KfdGpu,
    targets: Option<&TargetTable>,
    smoke: Smoke,
) -> Device {
    let mut d = unknown_device(index, Backend::Hip);
    d.vendor = Vendor::Amd;
    d.name = g
        .product_name
        .clone()
        .unwrap_or_else(|| format!("AMD {}", g.arch));
    d.arch = g.arch.clone();
    d.vram_total_bytes = g.vram_total_bytes;
    d.vram_free_bytes = match (g.vram_total_bytes, g.vram_used_bytes) {
        (Some(t), Some(u)) => Some(t.saturating_sub(u)),
        _ => None,
    };
    d.pci_bus_id = g.pci_bus_id.clone();
    d.wave_size = g.wave_size;
    d.integrated = Some(g.cpu_cores > 0 || apu(targets, &g.arch) == Some(true));
    d.source = match g.arch_source {
        sysfs::ArchSource::Kfd => "sysfs".into(),
        _ => "sysfs-ip-discovery".into(),
    };
    d.smoke = smoke;
    d
}

/// A GPU only DRM shows (KFD lists no node for it): its architecture is IP discovery's.
fn drm_device(index: u32, g: &DrmGpu, targets: Option<&TargetTable>, smoke: Smoke) -> Device {
    let arch = g.arch.clone().unwrap_or_else(|| "unknown".into());
    let mut d = unknown_device(index, Backend::Hip);
    d.vendor = Vendor::Amd;
    d.name = g
        .product_name
        .clone()
        .unwrap_or_else(|| format!("AMD {arch}"));
    d.vram_total_bytes = g.vram_total_bytes;
    d.vram_free_bytes = match (g.vram_total_bytes, g.vram_used_bytes) {
        (Some(t), Some(u)) => Some(t.saturating_sub(u)),
        _ => None,
    };
    d.pci_bus_id = g.pci_bus_id.clone();
    d.integrated = apu(targets, &arch);
    d.wave_size = targets.and_then(|t| t.get(&arch)).map(|t| t.wave_size);
    d.arch = arch;
    d.source = "drm-ip-discovery".into();
    d.smoke = smoke;
    d
}

fn apu(targets: Option<&TargetTable>, arch: &str) -> Option<bool> {
    targets.and_then(|t| t.get(arch)).map(|t| t.apu)
}

fn rejected_check(
    r: &Rejected,
    hipcc: Option<&crate::host::Tool>,
    targets: Option<&TargetTable>,
) -> HostCheck {
    let version = hipcc
        .and_then(|t| crate::probe::toolchain::parse_hip_version(&t.version_output))
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
        .unwrap_or_else(|| r.build.status.clone());
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

fn build_failed_check(b: &Build, hipcc: Option<&crate::host::Tool>) -> HostCheck {
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

fn say_build_failed(b: &Build) {
    eprintln!(
        "gpuprobe: the HIP probe program could not be built ({}):",
        b.status
    );
    eprintln!("  command: {}", crate::host::printable(&b.command));
    for l in b.output.iter().rev().take(12).rev() {
        eprintln!("  | {}", crate::host::printable(l));
    }
    eprintln!(
        "gpuprobe: falling back to what the kernel (KFD/DRM) says about the GPUs; the smoke test is not run"
    );
}

fn status(state: &str) -> BackendStatus {
    BackendStatus {
        backend: Backend::Hip,
        status: state.into(),
        detail: None,
        driver_version: None,
        runtime_version: None,
        hint: None,
    }
}

/// Probes the AMD GPUs: discovery from KFD (DRM when KFD lists none), visible-device variables
/// applied, the probe program built per target, each visible buildable device measured.
pub fn probe(opts: &ProbeOptions, report: &mut Report) {
    let h = &*opts.host;
    let kfd = sysfs::kfd(h);
    let targets_owned = crate::profiles::bundled_targets().ok();
    let targets = targets_owned.as_ref();
    let forced = h.env(PROBE_ENV).is_some_and(|v| !v.is_empty());
    if kfd.gpus.is_empty() && !forced {
        let drm = sysfs::drm_amd_gpus(h);
        let mut st = status("no-device");
        if drm.is_empty() {
            st.detail = Some(format!(
                "no AMD GPU in the KFD topology ({})",
                h.shown("/sys/class/kfd")
            ));
            if opts.backend == crate::cli::BackendChoice::Hip {
                st.hint = Some("load the amdgpu kernel driver (the ROCm kernel module) and check /dev/kfd permissions (render/video groups)".into());
            }
        } else {
            st.detail = Some(format!(
                "KFD lists no AMD GPU, but DRM shows {}: listed with the architecture from DRM's IP discovery (a fallback); ROCm cannot use {} until KFD lists {}",
                drm.len(),
                if drm.len() == 1 { "it" } else { "them" },
                if drm.len() == 1 { "it" } else { "them" },
            ));
            st.hint = Some("see the host check `kfd-no-gpu-node`".into());
            for (i, g) in drm.iter().enumerate() {
                report.devices.push(drm_device(
                    i as u32,
                    g,
                    targets,
                    Smoke::not_run(
                        "not run: the KFD topology lists no GPU, so ROCm cannot reach this one",
                    ),
                ));
            }
        }
        report.backends.push(st);
        return;
    }

    // Which GPUs HIP programs see, and under which numbers.
    let uuids: Vec<Option<String>> = kfd.gpus.iter().map(KfdGpu::uuid).collect();
    let sel = visible::hip(h, &uuids);
    let hidden_by = sel
        .applied
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ");
    let visible_gpus: Vec<&KfdGpu> = sel.order.iter().map(|i| &kfd.gpus[*i]).collect();
    let mut st = status("ok");
    let mut checks: Vec<HostCheck> = Vec::new();

    let mut archs: Vec<String> = visible_gpus
        .iter()
        .map(|g| g.arch.clone())
        .filter(|a| a != "unknown")
        .collect();
    archs.sort();
    archs.dedup();
    let program = if visible_gpus.is_empty() {
        None
    } else {
        Some(probe_program(h, &archs))
    };
    let hipcc = if forced { None } else { h.tool("hipcc") };
    let mut measured_pci: Option<Vec<Option<String>>> = None;

    match program {
        None => {
            st.status = "no-device".into();
            st.detail = Some(format!(
                "{hidden_by} hides every AMD GPU ({} on this machine)",
                kfd.gpus.len()
            ));
            st.hint = Some("see the host check `visible-devices-hide-all`".into());
        }
        Some(ProbeProgram::NoToolchain(why)) => {
            st.status = "no-toolchain".into();
            st.detail = Some(why.clone());
            st.hint = Some("the devices listed come from sysfs; install the HIP SDK to measure VMM and run the smoke test".into());
            for (i, g) in visible_gpus.iter().enumerate() {
                report.devices.push(kfd_device(
                    i as u32,
                    g,
                    targets,
                    Smoke::not_run(format!("smoke test not run: {why}")),
                ));
            }
        }
        Some(ProbeProgram::BuildFailed { build, rejected }) => {
            say_build_failed(&build);
            st.status = "probe-build-failed".into();
            let first = error_lines(&build)
                .next()
                .or(build.output.first())
                .cloned()
                .unwrap_or_else(|| build.status.clone());
            st.detail = Some(format!("the HIP probe program could not be built: {first}"));
            st.hint = Some("the devices listed come from KFD/DRM; the host check `hip-probe-build-failed` has the compiler's error and the command".into());
            if rejected.is_empty() {
                checks.push(build_failed_check(&build, hipcc.as_ref()));
            }
            for r in &rejected {
                checks.push(rejected_check(r, hipcc.as_ref(), targets));
            }
            for (i, g) in visible_gpus.iter().enumerate() {
                report.devices.push(kfd_device(
                    i as u32,
                    g,
                    targets,
                    Smoke::not_run(format!(
                        "smoke test not run: the probe program could not be built for {} ({first})",
                        g.arch
                    )),
                ));
            }
        }
        Some(ProbeProgram::Ready {
            path,
            built_for,
            rejected,
        }) => {
            for r in &rejected {
                checks.push(rejected_check(r, hipcc.as_ref(), targets));
            }
            let runnable: Vec<u32> = visible_gpus
                .iter()
                .enumerate()
                .filter(|(_, g)| forced || built_for.contains(&g.arch))
                .map(|(i, _)| i as u32)
                .collect();
            let make = || Command::new(&path);
            let run = run_devices(&make, opts, "hip", Some(&runnable));
            let hello = run.hello.clone().unwrap_or(Value::Null);
            st.runtime_version = hello["runtime_version"].as_str().map(str::to_string);
            st.driver_version = hello["driver_version"].as_str().map(str::to_string);
            let hello_err = super::interpret::api_error(&hello["error"]);
            if run.hello.is_none() || hello_err.is_some() {
                let smoke = match &hello_err {
                    Some(e) => {
                        Smoke::not_run(format!("the HIP runtime sees no usable device: {e}"))
                    }
                    None => match run.devices.first() {
                        Some((_, out)) => smoke_from(out, opts.timeout, opts.smoke),
                        None => Smoke::not_run("no device could be probed"),
                    },
                };
                st.status = "error".into();
                st.detail = smoke.reason.clone();
                st.hint = Some(
                    "check /dev/kfd access (render and video groups), `rocminfo`, and dmesg; see the host checks".into(),
                );
                for (i, g) in visible_gpus.iter().enumerate() {
                    let s = if runnable.contains(&(i as u32)) {
                        smoke.clone()
                    } else {
                        unbuilt_smoke(&g.arch)
                    };
                    report.devices.push(kfd_device(i as u32, g, targets, s));
                }
            } else {
                let count = hello["device_count"].as_u64().unwrap_or(0) as usize;
                let norm = |p: &Option<String>| p.as_deref().map(str::to_ascii_lowercase);
                // Which KFD GPU each runtime device is: by PCI bus id when every device matches a
                // different one, else by position (the runtime enumerates in KFD order).
                let parsed: Vec<(u32, Smoke, Option<Device>)> = run
                    .devices
                    .iter()
                    .map(|(i, out)| {
                        (
                            *i,
                            smoke_from(out, opts.timeout, opts.smoke),
                            out.events_of("device")
                                .find_map(|e| device_from_event(e, Backend::Hip, "probe-program")),
                        )
                    })
                    .collect();
                let by_pci: Vec<Option<usize>> = parsed
                    .iter()
                    .map(|(_, _, d)| {
                        let p = norm(&d.as_ref()?.pci_bus_id)?;
                        visible_gpus
                            .iter()
                            .position(|g| norm(&g.pci_bus_id).as_deref() == Some(p.as_str()))
                    })
                    .collect();
                let mut distinct: Vec<usize> = by_pci.iter().flatten().copied().collect();
                distinct.sort();
                distinct.dedup();
                let pci_ok = !by_pci.is_empty() && distinct.len() == by_pci.len();
                let mut taken = vec![false; visible_gpus.len()];
                let mut entries: Vec<(u32, Device)> = Vec::new();
                for (n, (i, smoke, d)) in parsed.into_iter().enumerate() {
                    let j = if pci_ok {
                        by_pci[n]
                    } else {
                        ((i as usize) < visible_gpus.len()).then_some(i as usize)
                    };
                    let g = j.map(|j| visible_gpus[j]);
                    if let Some(j) = j {
                        taken[j] = true;
                    }
                    let mut d = match (d, g) {
                        (Some(mut d), Some(g)) => {
                            d.integrated = d
                                .integrated
                                .or(Some(g.cpu_cores > 0 || apu(targets, &g.arch) == Some(true)));
                            d
                        }
                        (Some(d), None) => d,
                        (None, Some(g)) => kfd_device(i, g, targets, Smoke::not_run("")),
                        (None, None) => unknown_device(i, Backend::Hip),
                    };
                    d.index = i;
                    d.smoke = smoke;
                    d.driver_version = st.driver_version.clone();
                    d.runtime_version = st.runtime_version.clone();
                    entries.push((i, d));
                }
                // The runtime's own list is the measurement of what the variables did, when every
                // device it lists was run and matched a visible KFD GPU by bus id.
                if pci_ok && runnable.len() == count && count == visible_gpus.len() {
                    measured_pci =
                        Some(entries.iter().map(|(_, d)| d.pci_bus_id.clone()).collect());
                }
                for (j, g) in visible_gpus.iter().enumerate() {
                    if taken[j] {
                        continue;
                    }
                    if j < count {
                        // Counted by the runtime, not run: its target could not be built.
                        entries.push((
                            j as u32,
                            kfd_device(j as u32, g, targets, unbuilt_smoke(&g.arch)),
                        ));
                    } else {
                        let phys = kfd
                            .gpus
                            .iter()
                            .position(|k| std::ptr::eq(k, *g))
                            .unwrap_or(j);
                        report.hidden_devices.push(HiddenDevice {
                            device: kfd_device(
                                phys as u32,
                                g,
                                targets,
                                Smoke::not_run("not probed: the HIP runtime does not list it"),
                            ),
                            hidden_by: format!(
                                "the HIP runtime (it lists {count} of the {} visible GPUs)",
                                visible_gpus.len()
                            ),
                        });
                        checks.push(
                            HostCheck::new(
                                "hip-runtime-skips-gpu",
                                CheckLevel::Warning,
                                format!("the HIP runtime does not list the {} at KFD node {}", g.arch, g.node),
                                format!(
                                    "KFD shows {} GPU(s) to HIP programs but the runtime lists {count}: ROCm skips GPUs it does not support (its log says \"Unsupported HSA device\"), so llama.cpp will not see this one",
                                    visible_gpus.len()
                                ),
                            )
                            .fix("nothing to do if this GPU is not meant for llama.cpp; otherwise use a ROCm that supports it"),
                        );
                    }
                }
                entries.sort_by_key(|(i, _)| *i);
                report.devices.extend(entries.into_iter().map(|(_, d)| d));
                if runnable.len() >= 2 && opts.smoke {
                    report
                        .peers
                        .extend(run_peers(&make, &runnable, opts, "hip"));
                }
            }
        }
    }

    // Hidden GPUs and how the visible ones are numbered.
    let physical_pci: Vec<Option<String>> = kfd.gpus.iter().map(|g| g.pci_bus_id.clone()).collect();
    let (map, basis) = visible::mapping(&sel, &physical_pci, measured_pci.as_deref());
    if !sel.applied.is_empty() || !sel.notes.is_empty() {
        for (i, g) in kfd.gpus.iter().enumerate() {
            if map[i].is_none() {
                report.hidden_devices.push(HiddenDevice {
                    device: kfd_device(
                        i as u32,
                        g,
                        targets,
                        Smoke::not_run(format!("not probed: hidden by {hidden_by}")),
                    ),
                    hidden_by: hidden_by.clone(),
                });
            }
        }
        report.visibility.push(checks::visibility(
            Backend::Hip,
            &sel,
            kfd.gpus
                .iter()
                .map(|g| {
                    (
                        g.product_name
                            .clone()
                            .unwrap_or_else(|| format!("AMD {}", g.arch)),
                        g.arch.clone(),
                        g.pci_bus_id.clone(),
                    )
                })
                .collect(),
            &map,
            basis,
        ));
    }
    for g in kfd.gpus.iter().filter(|g| g.arch_source.is_fallback()) {
        checks.push(HostCheck::new(
            "arch-from-ip-discovery",
            CheckLevel::Warning,
            format!("KFD node {} has no gfx_target_version", g.node),
            match &g.arch_source {
                sysfs::ArchSource::IpDiscovery { gc } => format!(
                    "its architecture, {}, comes from DRM's IP discovery (GC {gc}): a fallback, not what ROCm reports",
                    g.arch
                ),
                _ => "its architecture is unknown: neither KFD nor DRM IP discovery names it".into(),
            },
        )
        .fix("a kernel that prints gfx_target_version (Linux 5.10 and later) makes this certain"));
    }
    report.host_checks.extend(checks);
    report.backends.push(st);
}

fn unbuilt_smoke(arch: &str) -> Smoke {
    Smoke::not_run(format!(
        "not measured: the local hipcc cannot build {arch} (see the host check `hip-target-unbuildable`)"
    ))
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
