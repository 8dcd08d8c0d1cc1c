//! Measuring this machine's GPUs. Every device is probed in its own child process
//! (`orchestrator`), in parallel, with a timeout; the parent never loads a GPU driver itself.

pub mod child;
pub mod cuda;
pub mod env;
pub mod events;
pub mod hip;
pub mod hip_build;
pub mod interpret;
pub mod orchestrator;
pub mod recorded;
pub mod smoke_pattern;
pub mod sysfs;
pub mod toolchain;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::cli::BackendChoice;
use crate::host::{HostView, checks, visible};
use crate::report::{
    Backend, BackendStatus, Device, HiddenDevice, Host, PeerResult, Report, Smoke, SmokeOutcome,
};
use interpret::{device_from_event, smoke_from};
use orchestrator::Outcome;

#[derive(Debug, Clone)]
pub struct ProbeOptions {
    pub backend: BackendChoice,
    pub smoke: bool,
    pub timeout: Duration,
    pub cycles: u32,
    /// Where facts come from: this machine (under `GPUPROBE_SYSFS_ROOT`), or a replayed dump.
    pub host: Arc<HostView>,
}

/// This machine's OS and kernel.
pub fn host() -> Host {
    host_of(&HostView::live())
}

pub fn host_of(h: &HostView) -> Host {
    let os = if h.env("WSL_DISTRO_NAME").is_some()
        || h.read("/proc/version")
            .is_some_and(|v| v.to_ascii_lowercase().contains("microsoft"))
    {
        "wsl"
    } else {
        std::env::consts::OS
    };
    Host {
        os: os.to_string(),
        kernel: h
            .read("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string()),
    }
}

/// Probes every backend asked for and returns the report. Never fails: what could not be
/// measured is recorded as such.
pub fn detect(opts: &ProbeOptions) -> Report {
    let h = &*opts.host;
    let mut report = Report::new(host_of(h));
    report.environment = env::notices_of(h);
    let cuda = matches!(opts.backend, BackendChoice::Auto | BackendChoice::Cuda);
    let amd = matches!(opts.backend, BackendChoice::Auto | BackendChoice::Hip);
    if cuda {
        probe_cuda(opts, &mut report);
    }
    if amd {
        hip::probe(opts, &mut report);
    }
    let mut found = checks::run(h, &report, amd, cuda);
    found.append(&mut report.host_checks);
    checks::sort(&mut found);
    report.host_checks = found;
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
pub(crate) struct BackendRun {
    pub(crate) hello: Option<Value>,
    pub(crate) devices: Vec<(u32, Outcome)>,
}

/// Starts the first wanted device's child; its `hello` tells how many devices there are, and the
/// other children start at once, so enumeration costs no extra driver initialisation. `only`
/// limits the run to some device indices (targets the probe program was built for). Children
/// are named `<key> device N` for recording and replay.
pub(crate) fn run_devices(
    make: ChildCommand<'_>,
    opts: &ProbeOptions,
    key: &str,
    only: Option<&[u32]>,
) -> BackendRun {
    let h = &*opts.host;
    let start = |i: u32| {
        recorded::start(
            h,
            &format!("{key} device {i}"),
            || {
                let mut c = make();
                device_args(&mut c, i, opts);
                c
            },
            opts.timeout,
        )
    };
    let first_index = match only {
        Some(o) => match o.first() {
            Some(i) => *i,
            None => {
                return BackendRun {
                    hello: None,
                    devices: Vec::new(),
                };
            }
        },
        None => 0,
    };
    let mut first = start(first_index);
    let hello = first.wait_for("hello");
    let count = hello
        .as_ref()
        .and_then(|h| h["device_count"].as_u64())
        .unwrap_or(0) as u32;
    let wanted = |i: u32| i != first_index && only.is_none_or(|o| o.contains(&i));
    // Spawned from this thread, which outlives them: the parent-death signal follows the thread.
    let others: Vec<(u32, recorded::Started)> = (0..count)
        .filter(|i| wanted(*i))
        .map(|i| (i, start(i)))
        .collect();
    let mut devices = vec![(first_index, first.finish(h))];
    for (i, r) in others {
        devices.push((i, r.finish(h)));
    }
    devices.sort_by_key(|(i, _)| *i);
    BackendRun { hello, devices }
}

fn hello_error(hello: &Value) -> Option<crate::report::ApiError> {
    interpret::api_error(&hello["error"])
}

fn probe_cuda(opts: &ProbeOptions, report: &mut Report) {
    let h = &*opts.host;
    let proc_gpus = sysfs::nvidia_proc_gpus(h);
    let uuids: Vec<Option<String>> = proc_gpus.iter().map(|g| g.uuid.clone()).collect();
    let models: Vec<String> = proc_gpus.iter().map(|g| g.model.clone()).collect();
    let sel = visible::cuda(h, &uuids, &models);
    // What /proc knows, restricted to what CUDA programs would see, in their numbering.
    let proc_visible: Vec<&sysfs::NvidiaProcGpu> =
        sel.order.iter().map(|i| &proc_gpus[*i]).collect();
    let run = run_devices(&cuda_command, opts, "cuda", None);
    let mut status = BackendStatus {
        backend: Backend::Cuda,
        status: "ok".into(),
        detail: None,
        driver_version: None,
        runtime_version: None,
        hint: None,
    };
    let mut measured = false;
    if let Some(hello) = run.hello.clone() {
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
            for (i, g) in proc_visible.iter().enumerate() {
                report.devices.push(proc_device(
                    i as u32,
                    g,
                    Smoke::not_run(format!("the driver could not be used: {err}")),
                ));
            }
        } else {
            let count = hello["device_count"].as_u64().unwrap_or(0);
            if count == 0 {
                status.status = "no-device".into();
                status.hint = Some(
                    "no NVIDIA GPU is visible (check CUDA_VISIBLE_DEVICES and `nvidia-smi`)".into(),
                );
            }
            for (i, out) in &run.devices {
                let smoke = smoke_from(out, opts.timeout, opts.smoke);
                let mut d = out
                    .events_of("device")
                    .find_map(|e| device_from_event(e, Backend::Cuda, "driver"))
                    .unwrap_or_else(|| match proc_visible.get(*i as usize) {
                        Some(g) => proc_device(*i, g, Smoke::not_run("")),
                        None => unknown_device(*i, Backend::Cuda),
                    });
                d.smoke = smoke;
                d.driver_version = status.driver_version.clone();
                d.runtime_version = status.runtime_version.clone();
                report.devices.push(d);
            }
            measured = true;
            if count >= 2 && opts.smoke {
                let all: Vec<u32> = (0..count as u32).collect();
                report
                    .peers
                    .extend(run_peers(&cuda_command, &all, opts, "cuda"));
            }
        }
    } else {
        // Died or hung before it could even say hello: record what /proc knows, with the verdict.
        let smoke = match run.devices.first() {
            Some((_, out)) => smoke_from(out, opts.timeout, opts.smoke),
            None => Smoke::not_run("the CUDA probe did not run"),
        };
        status.status = "error".into();
        status.detail = Some(format!(
            "the CUDA probe did not start properly: {}",
            smoke.reason.clone().unwrap_or_default()
        ));
        status.hint =
            Some("check `nvidia-smi` and the kernel log (dmesg) for driver errors".into());
        for (i, g) in proc_visible.iter().enumerate() {
            report.devices.push(proc_device(i as u32, g, smoke.clone()));
        }
    }
    if !sel.applied.is_empty() || !sel.notes.is_empty() {
        let hidden_by = sel
            .applied
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        let physical_pci: Vec<Option<String>> = proc_gpus
            .iter()
            .map(|g| Some(g.pci_bus_id.clone()))
            .collect();
        let measured_pci: Option<Vec<Option<String>>> = measured.then(|| {
            report
                .devices
                .iter()
                .filter(|d| d.backend == Backend::Cuda)
                .map(|d| d.pci_bus_id.clone())
                .collect()
        });
        let (map, basis) = visible::mapping(&sel, &physical_pci, measured_pci.as_deref());
        for (i, g) in proc_gpus.iter().enumerate() {
            if map[i].is_none() {
                report.hidden_devices.push(HiddenDevice {
                    device: proc_device(
                        i as u32,
                        g,
                        Smoke::not_run(format!("not probed: hidden by {hidden_by}")),
                    ),
                    hidden_by: hidden_by.clone(),
                });
            }
        }
        report.visibility.push(checks::visibility(
            Backend::Cuda,
            &sel,
            proc_gpus
                .iter()
                .map(|g| {
                    // /proc has no architecture; the driver's answer for the same bus has.
                    let arch = report
                        .devices
                        .iter()
                        .find(|d| d.pci_bus_id.as_deref() == Some(g.pci_bus_id.as_str()))
                        .map(|d| d.arch.clone())
                        .unwrap_or_default();
                    (g.model.clone(), arch, Some(g.pci_bus_id.clone()))
                })
                .collect(),
            &map,
            basis,
        ));
    }
    report.backends.push(status);
}

/// Peer access and a verified copy for each pair of `indices`; children `<key> peer A B`.
pub(crate) fn run_peers(
    make: ChildCommand<'_>,
    indices: &[u32],
    opts: &ProbeOptions,
    key: &str,
) -> Vec<PeerResult> {
    let h = &*opts.host;
    let mut running = Vec::new();
    for (n, &a) in indices.iter().enumerate() {
        for &b in &indices[n + 1..] {
            let started = recorded::start(
                h,
                &format!("{key} peer {a} {b}"),
                || {
                    let mut c = make();
                    c.arg("--peer").arg(a.to_string()).arg(b.to_string());
                    c
                },
                opts.timeout,
            );
            running.push((a, b, started));
        }
    }
    running
        .into_iter()
        .map(|(a, b, r)| {
            let out = r.finish(h);
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

pub(crate) fn unknown_device(index: u32, backend: Backend) -> Device {
    Device::new(index, backend, "unknown", "unknown", "none")
}
