//! The HIP backend: discovery from the kernel's KFD topology (DRM's IP discovery where KFD lists
//! no GPU), the visible-device variables applied, the single-source probe program
//! (`probes/gpuprobe-probe.cpp`) built on this machine with its own hipcc for the visible GPUs'
//! targets ([`super::hip_build`]), and each visible GPU whose target could be built measured in
//! its own child. That makes the probe ABI-correct for whatever ROCm is installed, and exercises
//! the toolchain that will build llama.cpp.
//!
//! A GPU whose target the local hipcc cannot build is listed from KFD and not measured, the
//! others are; a hipcc that builds nothing gives the status `probe-build-failed`, the compiler's
//! error and the exact command, and the GPUs as KFD/DRM describe them.

use std::process::Command;

use super::count::{Count, Source};
use super::hip_build::{
    ProbeProgram, build_failed_check, error_lines, probe_program, rejected_check, say_build_failed,
};
use super::interpret::{device_from_event, smoke_from};
use super::{
    ProbeOptions, no_hello_status, peer_results, record_run, run_children, unknown_device,
};
use crate::host::sysfs::{self, DrmGpu, KfdGpu};
use crate::host::{Tool, checks, visible};
use crate::report::{
    Backend, BackendState, BackendStatus, CheckLevel, Device, DeviceSource, HiddenDevice,
    HostCheck, Report, Smoke, UNKNOWN_ARCH, Vendor,
};
use crate::targets::TargetTable;

pub use super::hip_build::{cache_dir, discard_scratch};

pub const PROBE_SOURCE: &str = include_str!("../../probes/gpuprobe-probe.cpp");
pub const PROBE_HEADER: &str = include_str!("../../probes/compat.h");
/// Use this probe program instead of building one (a prebuilt probe, or a fake in tests).
pub const PROBE_ENV: &str = "GPUPROBE_HIP_PROBE";

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
        sysfs::ArchSource::Kfd => DeviceSource::Sysfs,
        _ => DeviceSource::SysfsIpDiscovery,
    };
    d.smoke = smoke;
    d
}

/// A GPU only DRM shows (KFD lists no node for it): its architecture is IP discovery's.
fn drm_device(index: u32, g: &DrmGpu, targets: Option<&TargetTable>, smoke: Smoke) -> Device {
    let arch = g.arch.clone().unwrap_or_else(|| UNKNOWN_ARCH.into());
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
    d.source = DeviceSource::DrmIpDiscovery;
    d.smoke = smoke;
    d
}

fn apu(targets: Option<&TargetTable>, arch: &str) -> Option<bool> {
    targets.and_then(|t| t.get(arch)).map(|t| t.apu)
}

fn status(state: BackendState) -> BackendStatus {
    BackendStatus {
        backend: Backend::Hip,
        status: state,
        detail: None,
        driver_version: None,
        runtime_version: None,
        hint: None,
    }
}

fn unbuilt_smoke(arch: &str) -> Smoke {
    Smoke::not_run(format!(
        "not measured: the local hipcc cannot build {arch} (see the host check `hip-target-unbuildable`)"
    ))
}

/// Runtime devices paired with the visible KFD GPUs.
struct Paired {
    /// (runtime index, device).
    entries: Vec<(u32, Device)>,
    /// Which visible GPUs a runtime device took.
    taken: Vec<bool>,
    /// Whether PCI bus ids decided (else positions did).
    pci_ok: bool,
}

/// What one HIP probe run works with, and what it adds to the report.
struct Run<'a> {
    opts: &'a ProbeOptions,
    targets: Option<&'a TargetTable>,
    /// The KFD GPUs HIP programs see, in their numbering.
    visible: Vec<&'a KfdGpu>,
    hipcc: Option<Tool>,
    st: BackendStatus,
    checks: Vec<HostCheck>,
    /// The runtime's device list by PCI bus id, when it measured what the variables did.
    measured_pci: Option<Vec<Option<String>>>,
}

/// Probes the AMD GPUs: discovery from KFD (DRM when KFD lists none), visible-device variables
/// applied, the probe program built per target, each visible buildable device measured.
pub fn probe(opts: &ProbeOptions, report: &mut Report, t0: std::time::Instant) {
    let h = &*opts.host;
    let kfd = sysfs::kfd(h);
    let targets_owned = crate::profiles::bundled_targets().ok();
    let targets = targets_owned.as_ref();
    let forced = h.env(PROBE_ENV).is_some_and(|v| !v.is_empty());
    if kfd.gpus.is_empty() && !forced {
        let st = without_kfd_gpus(opts, targets, report);
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
    let mut run = Run {
        opts,
        targets,
        visible: sel.order.iter().map(|i| &kfd.gpus[*i]).collect(),
        hipcc: if forced { None } else { h.tool("hipcc") },
        st: status(BackendState::Ok),
        checks: Vec::new(),
        measured_pci: None,
    };
    let mut archs: Vec<String> = run
        .visible
        .iter()
        .map(|g| g.arch.clone())
        .filter(|a| crate::report::arch_known(a))
        .collect();
    archs.sort();
    archs.dedup();
    if run.visible.is_empty() {
        run.st.status = BackendState::NoDevice;
        run.st.detail = Some(format!(
            "{hidden_by} hides every AMD GPU ({} on this machine)",
            kfd.gpus.len()
        ));
        run.st.hint = Some("see the host check `visible-devices-hide-all`".into());
    } else {
        match probe_program(h, &archs) {
            ProbeProgram::NoToolchain(why) => run.no_toolchain(&why, report),
            ProbeProgram::BuildFailed { build, rejected } => {
                run.build_failed(&build, &rejected, report)
            }
            ProbeProgram::Ready {
                path,
                built_for,
                rejected,
            } => {
                for r in &rejected {
                    run.checks
                        .push(rejected_check(r, run.hipcc.as_ref(), targets));
                }
                let runnable: Vec<u32> = run
                    .visible
                    .iter()
                    .enumerate()
                    .filter(|(_, g)| forced || built_for.contains(&g.arch))
                    .map(|(i, _)| i as u32)
                    .collect();
                run.measure(&path, &runnable, &kfd.gpus, report, t0);
            }
        }
    }

    // Hidden GPUs and how the visible ones are numbered.
    if !sel.applied.is_empty() || !sel.notes.is_empty() {
        let physical_pci: Vec<Option<String>> =
            kfd.gpus.iter().map(|g| g.pci_bus_id.clone()).collect();
        let (map, basis) = visible::mapping(&sel, &physical_pci, run.measured_pci.as_deref());
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
        let described = kfd
            .gpus
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
            .collect();
        report.visibility.push(checks::visibility(
            Backend::Hip,
            &sel,
            described,
            &map,
            basis,
        ));
    }
    for g in kfd.gpus.iter().filter(|g| g.arch_source.is_fallback()) {
        run.checks.push(arch_fallback_check(g));
    }
    report.host_checks.extend(run.checks);
    report.backends.push(run.st);
}

/// KFD lists no GPU: what DRM shows, named from IP discovery, or nothing.
fn without_kfd_gpus(
    opts: &ProbeOptions,
    targets: Option<&TargetTable>,
    report: &mut Report,
) -> BackendStatus {
    let h = &*opts.host;
    let drm = sysfs::drm_amd_gpus(h);
    let mut st = status(BackendState::NoDevice);
    if drm.is_empty() {
        st.detail = Some(format!(
            "no AMD GPU in the KFD topology ({})",
            h.shown("/sys/class/kfd")
        ));
        if opts.backend == crate::report::BackendChoice::Hip {
            st.hint = Some("load the amdgpu kernel driver (the ROCm kernel module) and check /dev/kfd permissions (render/video groups)".into());
        }
        return st;
    }
    let them = if drm.len() == 1 { "it" } else { "them" };
    st.detail = Some(format!(
        "KFD lists no AMD GPU, but DRM shows {}: listed with the architecture from DRM's IP discovery (a fallback); ROCm cannot use {them} until KFD lists {them}",
        drm.len(),
    ));
    st.hint = Some("see the host check `kfd-no-gpu-node`".into());
    for (i, g) in drm.iter().enumerate() {
        report.devices.push(drm_device(
            i as u32,
            g,
            targets,
            Smoke::not_run("not run: the KFD topology lists no GPU, so ROCm cannot reach this one"),
        ));
    }
    st
}

fn arch_fallback_check(g: &KfdGpu) -> HostCheck {
    HostCheck::new(
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
    .fix("a kernel that prints gfx_target_version (Linux 5.10 and later) makes this certain")
}

impl Run<'_> {
    fn no_toolchain(&mut self, why: &str, report: &mut Report) {
        self.st.status = BackendState::NoToolchain;
        self.st.detail = Some(why.to_string());
        self.st.hint = Some("the devices listed come from sysfs; install the HIP SDK to measure VMM and run the smoke test".into());
        for (i, g) in self.visible.iter().enumerate() {
            report.devices.push(kfd_device(
                i as u32,
                g,
                self.targets,
                Smoke::not_run(format!("smoke test not run: {why}")),
            ));
        }
    }

    fn build_failed(
        &mut self,
        build: &crate::host::Build,
        rejected: &[super::hip_build::Rejected],
        report: &mut Report,
    ) {
        say_build_failed(build);
        self.st.status = BackendState::ProbeBuildFailed;
        let first = error_lines(build)
            .next()
            .or(build.output.first())
            .cloned()
            .unwrap_or_else(|| build.status.to_string());
        self.st.detail = Some(format!("the HIP probe program could not be built: {first}"));
        self.st.hint = Some("the devices listed come from KFD/DRM; the host check `hip-probe-build-failed` has the compiler's error and the command".into());
        if rejected.is_empty() {
            self.checks
                .push(build_failed_check(build, self.hipcc.as_ref()));
        }
        for r in rejected {
            self.checks
                .push(rejected_check(r, self.hipcc.as_ref(), self.targets));
        }
        for (i, g) in self.visible.iter().enumerate() {
            report.devices.push(kfd_device(
                i as u32,
                g,
                self.targets,
                Smoke::not_run(format!(
                    "smoke test not run: the probe program could not be built for {} ({first})",
                    g.arch
                )),
            ));
        }
    }

    /// Runs the probe program on the `runnable` visible GPUs and lists every visible GPU.
    fn measure(
        &mut self,
        path: &std::path::Path,
        runnable: &[u32],
        all: &[KfdGpu],
        report: &mut Report,
        t0: std::time::Instant,
    ) {
        let make = || Command::new(path);
        // KFD and the visible-device variables counted them: every child starts at once.
        let counted = Count {
            devices: runnable.len() as u32,
            source: Source::Kfd,
        };
        let run = run_children(&make, self.opts, "hip", Some(runnable), counted, t0);
        let mut brun = run.backend_run(crate::report::Backend::Hip);
        let hello = run.hello.clone().unwrap_or_default();
        self.st.runtime_version = hello.runtime_version.clone();
        self.st.driver_version = hello.driver_version.clone();
        let hello_err = hello.error.clone();
        if run.hello.is_none() || hello_err.is_some() {
            let smoke = match &hello_err {
                Some(e) => Smoke::not_run(format!("the HIP runtime sees no usable device: {e}")),
                None => match run.devices.first() {
                    Some((_, out)) => smoke_from(out, self.opts.timeout, self.opts.smoke),
                    None => Smoke::not_run("no device could be probed"),
                },
            };
            if run.hello.is_none() {
                no_hello_status(
                    &mut self.st,
                    &mut brun,
                    run.devices.first().map(|(_, o)| o),
                    &smoke,
                );
            } else {
                self.st.status = BackendState::Error;
                self.st.detail = smoke.reason.clone();
            }
            self.st.hint = Some(
                "check /dev/kfd access (render and video groups), `rocminfo`, and dmesg; see the host checks".into(),
            );
            for (i, g) in self.visible.iter().enumerate() {
                let s = if runnable.contains(&(i as u32)) {
                    smoke.clone()
                } else {
                    unbuilt_smoke(&g.arch)
                };
                report
                    .devices
                    .push(kfd_device(i as u32, g, self.targets, s));
            }
            record_run(report, brun);
            return;
        }
        let count = hello.device_count.unwrap_or(0) as usize;
        let Paired {
            mut entries,
            taken,
            pci_ok,
        } = self.pair(&run.devices);
        // The runtime's own list is the measurement of what the variables did, when every
        // device it lists was run and matched a visible KFD GPU by bus id.
        if pci_ok && runnable.len() == count && count == self.visible.len() {
            self.measured_pci = Some(entries.iter().map(|(_, d)| d.pci_bus_id.clone()).collect());
        }
        let visible = self.visible.clone();
        for (j, g) in visible.iter().enumerate() {
            if taken[j] {
                continue;
            }
            if j < count {
                // Counted by the runtime, not run: its target could not be built.
                entries.push((
                    j as u32,
                    kfd_device(j as u32, g, self.targets, unbuilt_smoke(&g.arch)),
                ));
            } else {
                self.skipped_by_runtime(g, all, count, report);
            }
        }
        entries.sort_by_key(|(i, _)| *i);
        for (i, d) in entries.iter_mut() {
            d.timings = run.timings(*i);
        }
        report.devices.extend(entries.into_iter().map(|(_, d)| d));
        if let Some((_, out)) = &run.peer {
            report
                .peers
                .extend(peer_results(out, runnable, self.opts, None));
        }
        record_run(report, brun);
    }

    /// Which visible KFD GPU each runtime device is: by PCI bus id when every device matches a
    /// different one, else by position (the runtime enumerates in KFD order). Returns the
    /// devices, which visible GPUs they took, and whether the bus ids decided.
    fn pair(&self, outcomes: &[(u32, crate::children::orchestrator::Outcome)]) -> Paired {
        let norm = |p: &Option<String>| p.as_deref().map(str::to_ascii_lowercase);
        let parsed: Vec<(u32, Smoke, Option<Device>)> = outcomes
            .iter()
            .map(|(i, out)| {
                (
                    *i,
                    smoke_from(out, self.opts.timeout, self.opts.smoke),
                    out.devices().find_map(|e| {
                        device_from_event(e, Backend::Hip, DeviceSource::ProbeProgram)
                    }),
                )
            })
            .collect();
        let by_pci: Vec<Option<usize>> = parsed
            .iter()
            .map(|(_, _, d)| {
                let p = norm(&d.as_ref()?.pci_bus_id)?;
                self.visible
                    .iter()
                    .position(|g| norm(&g.pci_bus_id).as_deref() == Some(p.as_str()))
            })
            .collect();
        let mut distinct: Vec<usize> = by_pci.iter().flatten().copied().collect();
        distinct.sort();
        distinct.dedup();
        let pci_ok = !by_pci.is_empty() && distinct.len() == by_pci.len();
        let mut taken = vec![false; self.visible.len()];
        let mut entries = Vec::new();
        for (n, (i, smoke, d)) in parsed.into_iter().enumerate() {
            let j = if pci_ok {
                by_pci[n]
            } else {
                ((i as usize) < self.visible.len()).then_some(i as usize)
            };
            let g = j.map(|j| self.visible[j]);
            if let Some(j) = j {
                taken[j] = true;
            }
            let mut d = match (d, g) {
                (Some(mut d), Some(g)) => {
                    d.integrated = d.integrated.or(Some(
                        g.cpu_cores > 0 || apu(self.targets, &g.arch) == Some(true),
                    ));
                    d
                }
                (Some(d), None) => d,
                (None, Some(g)) => kfd_device(i, g, self.targets, Smoke::not_run("")),
                (None, None) => unknown_device(i, Backend::Hip),
            };
            d.index = i;
            d.smoke = smoke;
            d.driver_version = self.st.driver_version.clone();
            d.runtime_version = self.st.runtime_version.clone();
            entries.push((i, d));
        }
        Paired {
            entries,
            taken,
            pci_ok,
        }
    }

    /// A visible KFD GPU the runtime does not list (ROCm skips GPUs it does not support).
    fn skipped_by_runtime(
        &mut self,
        g: &KfdGpu,
        all: &[KfdGpu],
        count: usize,
        report: &mut Report,
    ) {
        let phys = all.iter().position(|k| std::ptr::eq(k, g)).unwrap_or(0);
        let n = self.visible.len();
        report.hidden_devices.push(HiddenDevice {
            device: kfd_device(
                phys as u32,
                g,
                self.targets,
                Smoke::not_run("not probed: the HIP runtime does not list it"),
            ),
            hidden_by: format!("the HIP runtime (it lists {count} of the {n} visible GPUs)"),
        });
        self.checks.push(
            HostCheck::new(
                "hip-runtime-skips-gpu",
                CheckLevel::Warning,
                format!(
                    "the HIP runtime does not list the {} at KFD node {}",
                    g.arch, g.node
                ),
                format!(
                    "KFD shows {n} GPU(s) to HIP programs but the runtime lists {count}: ROCm skips GPUs it does not support (its log says \"Unsupported HSA device\"), so llama.cpp will not see this one"
                ),
            )
            .fix("nothing to do if this GPU is not meant for llama.cpp; otherwise use a ROCm that supports it"),
        );
    }
}
