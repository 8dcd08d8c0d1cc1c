//! Measuring this machine's GPUs. Every device is probed in its own child process
//! (`orchestrator`), in parallel, with a timeout; the parent never loads a GPU driver itself.

pub mod child;
pub mod cuda;
pub mod env;
pub mod events;
pub mod hip;
pub mod interpret;
pub mod orchestrator;
pub mod smoke_pattern;
pub mod sysfs;
pub mod toolchain;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::cli::BackendChoice;
use crate::report::{
    Backend, BackendStatus, Device, Host, PeerResult, Report, Smoke, SmokeOutcome, Vendor,
};
use interpret::{device_from_event, smoke_from};
use orchestrator::{Outcome, Running};

#[derive(Debug, Clone)]
pub struct ProbeOptions {
    pub backend: BackendChoice,
    pub smoke: bool,
    pub timeout: Duration,
    pub cycles: u32,
}

pub fn host() -> Host {
    let os = if std::env::var_os("WSL_DISTRO_NAME").is_some()
        || std::fs::read_to_string("/proc/version").is_ok_and(|v| v.contains("microsoft"))
    {
        "wsl"
    } else {
        std::env::consts::OS
    };
    Host {
        os: os.to_string(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_string()),
    }
}

/// Probes every backend asked for and returns the report. Never fails: what could not be
/// measured is recorded as such.
pub fn detect(opts: &ProbeOptions) -> Report {
    let mut report = Report::new(host());
    report.environment = env::notices();
    if matches!(opts.backend, BackendChoice::Auto | BackendChoice::Cuda) {
        probe_cuda(opts, &mut report);
    }
    if matches!(opts.backend, BackendChoice::Auto | BackendChoice::Hip) {
        probe_hip(opts, &mut report);
    }
    report
}

/// How a backend's children are started: `--device N` etc. are appended.
type ChildCommand<'a> = &'a dyn Fn() -> Command;

fn cuda_command() -> Command {
    let exe = std::env::current_exe().unwrap_or_else(|_| "gpuprobe".into());
    let mut c = Command::new(exe);
    c.args(["__child", "cuda"]);
    c
}

fn device_args(cmd: &mut Command, index: u32, opts: &ProbeOptions) {
    cmd.arg("--device")
        .arg(index.to_string())
        .arg("--cycles")
        .arg(opts.cycles.to_string());
    if !opts.smoke {
        cmd.arg("--no-smoke");
    }
}

/// Result of running one backend's children.
struct BackendRun {
    hello: Option<Value>,
    devices: Vec<(u32, Outcome)>,
}

/// Starts device 0's child; its `hello` tells how many devices there are, and the other
/// children start at once, so enumeration costs no extra driver initialisation.
fn run_devices(make: ChildCommand<'_>, opts: &ProbeOptions) -> BackendRun {
    let spawn = |i: u32| -> Result<Running, String> {
        let mut c = make();
        device_args(&mut c, i, opts);
        orchestrator::spawn(c, opts.timeout)
    };
    let mut first = match spawn(0) {
        Ok(r) => r,
        Err(e) => {
            return BackendRun {
                hello: None,
                devices: vec![(0, Outcome::spawn_failed(e))],
            };
        }
    };
    let hello = first.wait_for("hello");
    let count = hello
        .as_ref()
        .and_then(|h| h["device_count"].as_u64())
        .unwrap_or(0) as u32;
    // Spawned from this thread, which outlives them: the parent-death signal follows the thread.
    let others: Vec<(u32, Result<Running, String>)> = (1..count).map(|i| (i, spawn(i))).collect();
    let mut devices = vec![(0, first.finish())];
    for (i, r) in others {
        let out = match r {
            Ok(r) => r.finish(),
            Err(e) => Outcome::spawn_failed(e),
        };
        devices.push((i, out));
    }
    BackendRun { hello, devices }
}

fn hello_error(hello: &Value) -> Option<crate::report::ApiError> {
    interpret::api_error(&hello["error"])
}

fn probe_cuda(opts: &ProbeOptions, report: &mut Report) {
    let proc_gpus = sysfs::nvidia_proc_gpus(&sysfs::root());
    let run = run_devices(&cuda_command, opts);
    let mut status = BackendStatus {
        backend: Backend::Cuda,
        status: "ok".into(),
        detail: None,
        driver_version: None,
        runtime_version: None,
        hint: None,
    };
    let Some(hello) = run.hello.clone() else {
        // Died or hung before it could even say hello: record what /proc knows, with the verdict.
        let (_, out) = &run.devices[0];
        let smoke = smoke_from(out, opts.timeout, opts.smoke);
        status.status = "error".into();
        status.detail = Some(format!(
            "the CUDA probe did not start properly: {}",
            smoke.reason.clone().unwrap_or_default()
        ));
        status.hint =
            Some("check `nvidia-smi` and the kernel log (dmesg) for driver errors".into());
        for (i, g) in proc_gpus.iter().enumerate() {
            report.devices.push(proc_device(i as u32, g, smoke.clone()));
        }
        report.backends.push(status);
        return;
    };
    status.driver_version = hello["driver_version"].as_str().map(str::to_string);
    status.runtime_version = hello["runtime_version"].as_str().map(str::to_string);
    if let Some(err) = hello_error(&hello) {
        let (st, hint) = match (err.name.as_deref(), err.code) {
            (Some("LIBRARY_NOT_FOUND"), _) => (
                "no-driver",
                "install the NVIDIA driver (it provides libcuda.so.1); no CUDA toolkit is needed to probe",
            ),
            (_, 100) => (
                "no-device",
                "no NVIDIA GPU is visible (check CUDA_VISIBLE_DEVICES and `nvidia-smi`)",
            ),
            (_, 34) => (
                "no-driver",
                "only a stub libcuda.so.1 was found (a toolkit stub, not the driver): install the NVIDIA driver",
            ),
            (_, 35) => (
                "error",
                "the NVIDIA driver is older than it needs to be: update it",
            ),
            _ => ("error", "check `nvidia-smi` and the kernel log (dmesg)"),
        };
        status.status = st.into();
        status.detail = Some(err.to_string());
        status.hint = Some(hint.into());
        for (i, g) in proc_gpus.iter().enumerate() {
            report.devices.push(proc_device(
                i as u32,
                g,
                Smoke::not_run(format!("the driver could not be used: {err}")),
            ));
        }
        report.backends.push(status);
        return;
    }
    let count = hello["device_count"].as_u64().unwrap_or(0);
    if count == 0 {
        status.status = "no-device".into();
        status.hint =
            Some("no NVIDIA GPU is visible (check CUDA_VISIBLE_DEVICES and `nvidia-smi`)".into());
    }
    for (i, out) in &run.devices {
        let smoke = smoke_from(out, opts.timeout, opts.smoke);
        let mut d = out
            .events_of("device")
            .find_map(|e| device_from_event(e, Backend::Cuda, "driver"))
            .unwrap_or_else(|| match proc_gpus.get(*i as usize) {
                Some(g) => proc_device(*i, g, Smoke::not_run("")),
                None => unknown_device(*i, Backend::Cuda),
            });
        d.smoke = smoke;
        d.driver_version = status.driver_version.clone();
        d.runtime_version = status.runtime_version.clone();
        report.devices.push(d);
    }
    report.backends.push(status);
    if count >= 2 && opts.smoke {
        report
            .peers
            .extend(run_peers(&cuda_command, count as u32, opts));
    }
}

fn run_peers(make: ChildCommand<'_>, count: u32, opts: &ProbeOptions) -> Vec<PeerResult> {
    let mut running = Vec::new();
    for a in 0..count {
        for b in (a + 1)..count {
            let mut c = make();
            c.arg("--peer").arg(a.to_string()).arg(b.to_string());
            running.push((a, b, orchestrator::spawn(c, opts.timeout)));
        }
    }
    running
        .into_iter()
        .map(|(a, b, r)| {
            let out = match r {
                Ok(r) => r.finish(),
                Err(e) => Outcome::spawn_failed(e),
            };
            let smoke = smoke_from(&out, opts.timeout, true);
            match out.event("peer") {
                Some(p) if out.complete() => {
                    let copy_ok = p["copy_ok"].as_bool();
                    PeerResult {
                        from: a,
                        to: b,
                        can_access: p["can_access"].as_bool(),
                        copy_ok,
                        mismatches: p["mismatches"].as_u64(),
                        outcome: if copy_ok == Some(true) {
                            SmokeOutcome::Pass
                        } else {
                            SmokeOutcome::Fail
                        },
                        reason: interpret::api_error(&p["error"])
                            .map(|e| e.to_string())
                            .or_else(|| {
                                p["mismatches"]
                                    .as_u64()
                                    .filter(|m| *m > 0)
                                    .map(|m| format!("{m} words differ after the peer copy"))
                            }),
                    }
                }
                _ => PeerResult {
                    from: a,
                    to: b,
                    can_access: None,
                    copy_ok: None,
                    mismatches: None,
                    outcome: smoke.outcome,
                    reason: smoke.reason,
                },
            }
        })
        .collect()
}

fn proc_device(index: u32, g: &sysfs::NvidiaProcGpu, smoke: Smoke) -> Device {
    let mut d = unknown_device(index, Backend::Cuda);
    d.name = g.model.clone();
    d.pci_bus_id = Some(g.pci_bus_id.clone());
    d.source = "procfs".into();
    d.smoke = smoke;
    d
}

fn unknown_device(index: u32, backend: Backend) -> Device {
    Device::new(index, backend, "unknown", "unknown", "none")
}

fn kfd_device(index: u32, g: &sysfs::KfdGpu, targets_apu: Option<bool>, smoke: Smoke) -> Device {
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
    d.integrated = Some(g.cpu_cores > 0 || targets_apu == Some(true));
    d.source = "sysfs".into();
    d.smoke = smoke;
    d
}

fn probe_hip(opts: &ProbeOptions, report: &mut Report) {
    let gpus = sysfs::kfd_gpus(&sysfs::root());
    let targets = crate::profiles::bundled_targets().ok();
    let apu_of = |arch: &str| targets.as_ref().and_then(|t| t.get(arch)).map(|t| t.apu);
    let mut status = BackendStatus {
        backend: Backend::Hip,
        status: "ok".into(),
        detail: None,
        driver_version: None,
        runtime_version: None,
        hint: None,
    };
    let forced = std::env::var_os(hip::PROBE_ENV).is_some();
    if gpus.is_empty() && !forced {
        status.status = "no-device".into();
        status.detail = Some(format!(
            "no AMD GPU in the KFD topology ({}sys/class/kfd)",
            sysfs::root().display()
        ));
        if opts.backend == BackendChoice::Hip {
            status.hint = Some("load the amdgpu kernel driver (the ROCm kernel module) and check /dev/kfd permissions (render/video groups)".into());
        }
        report.backends.push(status);
        return;
    }
    let mut archs: Vec<String> = gpus.iter().map(|g| g.arch.clone()).collect();
    archs.sort();
    archs.dedup();
    let program = match hip::probe_program(&archs) {
        hip::ProbeProgram::Ready(p) => p,
        hip::ProbeProgram::NoToolchain(why) | hip::ProbeProgram::BuildFailed(why) => {
            status.status = "no-toolchain".into();
            status.detail = Some(why.clone());
            status.hint = Some("the devices listed come from sysfs; install the HIP SDK to measure VMM and run the smoke test".into());
            for (i, g) in gpus.iter().enumerate() {
                report.devices.push(kfd_device(
                    i as u32,
                    g,
                    apu_of(&g.arch),
                    Smoke::not_run(format!("smoke test not run: {why}")),
                ));
            }
            report.backends.push(status);
            return;
        }
    };
    let make = || Command::new(&program);
    let run = run_devices(&make, opts);
    let hello = run.hello.clone().unwrap_or(Value::Null);
    status.runtime_version = hello["runtime_version"].as_str().map(str::to_string);
    status.driver_version = hello["driver_version"].as_str().map(str::to_string);
    if run.hello.is_none() || hello_error(&hello).is_some() {
        let (_, out) = &run.devices[0];
        let smoke = match hello_error(&hello) {
            Some(e) => Smoke::not_run(format!("the HIP runtime sees no usable device: {e}")),
            None => smoke_from(out, opts.timeout, opts.smoke),
        };
        status.status = "error".into();
        status.detail = smoke.reason.clone();
        status.hint =
            Some("check /dev/kfd access (render and video groups), `rocminfo`, and dmesg".into());
        for (i, g) in gpus.iter().enumerate() {
            report
                .devices
                .push(kfd_device(i as u32, g, apu_of(&g.arch), smoke.clone()));
        }
        report.backends.push(status);
        return;
    }
    for (i, out) in &run.devices {
        let smoke = smoke_from(out, opts.timeout, opts.smoke);
        let from_probe = out
            .events_of("device")
            .find_map(|e| device_from_event(e, Backend::Hip, "probe-program"));
        let mut d = match (from_probe, gpus.get(*i as usize)) {
            (Some(mut d), Some(g)) => {
                d.integrated = d
                    .integrated
                    .or(Some(g.cpu_cores > 0 || apu_of(&g.arch) == Some(true)));
                d
            }
            (Some(d), None) => d,
            (None, Some(g)) => kfd_device(*i, g, apu_of(&g.arch), Smoke::not_run("")),
            (None, None) => unknown_device(*i, Backend::Hip),
        };
        d.smoke = smoke;
        d.driver_version = status.driver_version.clone();
        d.runtime_version = status.runtime_version.clone();
        report.devices.push(d);
    }
    let count = hello["device_count"].as_u64().unwrap_or(0) as u32;
    report.backends.push(status);
    if count >= 2 && opts.smoke {
        report.peers.extend(run_peers(&make, count, opts));
    }
}
