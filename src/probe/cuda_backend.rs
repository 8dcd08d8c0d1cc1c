//! The parent's side of the CUDA backend: what `/proc/driver/nvidia` shows and the visible-device
//! variables select, the children (the shared child, or one per device with `--isolate`), and the
//! report entries made of what they said. The driver is loaded only in the children
//! (`super::cuda`).

use std::time::Instant;

use super::interpret::{device_from_event, smoke_from};
use super::{
    Children, ProbeOptions, count, no_hello_status, peer_results, record_run, run_children,
    shared_child, unknown_device,
};
use crate::children::protocol::Hello;
use crate::host::sysfs::{self, NvidiaProcGpu};
use crate::host::{checks, visible};
use crate::report::{
    ApiError, Backend, BackendState, BackendStatus, Device, DeviceSource, HiddenDevice, Report,
    Smoke,
};

/// CUDA's error codes the backend's status depends on (`hello`'s error).
mod code {
    use crate::probe::cuda::sys;

    pub const NO_DEVICE: i64 = sys::CUDA_ERROR_NO_DEVICE as i64;
    pub const STUB_LIBRARY: i64 = sys::CUDA_ERROR_STUB_LIBRARY as i64;
    /// `cudaErrorInsufficientDriver`: the runtime API's code (the probe program's) for a driver
    /// older than the runtime; the driver API has no code of its own for it.
    pub const INSUFFICIENT_DRIVER: i64 = 35;
}

const NO_GPU_HINT: &str = "no NVIDIA GPU is visible (check CUDA_VISIBLE_DEVICES and `nvidia-smi`)";

/// What the kernel driver's files show, before any driver library is loaded.
struct Seen {
    /// Every GPU in `/proc/driver/nvidia/gpus`, in the driver's order.
    gpus: Vec<NvidiaProcGpu>,
    /// Which of them CUDA programs see, in their numbering (`CUDA_VISIBLE_DEVICES`).
    sel: visible::Selection,
}

impl Seen {
    fn read(h: &crate::host::HostView) -> Seen {
        let gpus = sysfs::nvidia_proc_gpus(h);
        let uuids: Vec<Option<String>> = gpus.iter().map(|g| g.uuid.clone()).collect();
        let models: Vec<String> = gpus.iter().map(|g| g.model.clone()).collect();
        let sel = visible::cuda(h, &uuids, &models);
        Seen { gpus, sel }
    }

    /// The visible GPUs, in CUDA's numbering.
    fn visible(&self) -> impl Iterator<Item = &NvidiaProcGpu> {
        self.sel.order.iter().map(|i| &self.gpus[*i])
    }

    /// One entry per visible GPU, from `/proc` alone, each with `smoke`.
    fn devices(&self, smoke: impl Fn() -> Smoke) -> impl Iterator<Item = Device> {
        self.visible()
            .enumerate()
            .map(move |(i, g)| proc_device(i as u32, g, smoke()))
    }
}

/// Probes the CUDA devices and adds them, the backend's status and its run to the report.
pub(super) fn probe(opts: &ProbeOptions, report: &mut Report, t0: Instant) {
    let h = &*opts.host;
    let seen = Seen::read(h);
    let counted = count::nvidia(
        h,
        seen.gpus.len(),
        seen.sel.order.len(),
        h.env("CUDA_VISIBLE_DEVICES").as_deref(),
    );
    let run = if shared_child::wanted(opts) {
        shared_child::run(&super::cuda_command, opts, counted, t0)
    } else {
        run_children(&super::cuda_command, opts, "cuda", None, counted, t0)
    };
    let mut brun = run.backend_run(Backend::Cuda);
    let mut status = BackendStatus {
        backend: Backend::Cuda,
        status: BackendState::Ok,
        detail: None,
        driver_version: None,
        runtime_version: None,
        hint: None,
    };
    let measured = match &run.hello {
        Some(hello) => {
            status.driver_version = hello.driver_version.clone();
            status.runtime_version = hello.runtime_version.clone();
            match &hello.error {
                Some(err) => {
                    driver_unusable(&mut status, err);
                    let why = format!("the driver could not be used: {err}");
                    report.devices.extend(seen.devices(|| Smoke::not_run(&why)));
                    false
                }
                None => {
                    measured(&run, hello, opts, &seen, &mut status, report);
                    true
                }
            }
        }
        None => {
            // Died or hung before it could even say hello: what /proc knows, with the verdict.
            let first = run.devices.first().map(|(_, o)| o);
            let smoke = match first {
                Some(out) => smoke_from(out, opts.timeout, opts.smoke),
                None => Smoke::not_run("the CUDA probe did not run"),
            };
            no_hello_status(&mut status, &mut brun, first, &smoke);
            status.hint =
                Some("check `nvidia-smi` and the kernel log (dmesg) for driver errors".into());
            report.devices.extend(seen.devices(|| smoke.clone()));
            false
        }
    };
    if !seen.sel.applied.is_empty() || !seen.sel.notes.is_empty() {
        hidden_and_visibility(&seen, measured, report);
    }
    report.backends.push(status);
    record_run(report, brun);
}

/// The status when the driver answered `hello` with an error.
fn driver_unusable(status: &mut BackendStatus, err: &ApiError) {
    let (st, hint) = if err.is_library_not_found() {
        (
            BackendState::NoDriver,
            "install the NVIDIA driver; no CUDA toolkit is needed to probe",
        )
    } else {
        match err.code {
            code::NO_DEVICE => (BackendState::NoDevice, NO_GPU_HINT),
            code::STUB_LIBRARY => (
                BackendState::NoDriver,
                "only a stub libcuda.so.1 was found (a toolkit stub, not the driver): install the NVIDIA driver",
            ),
            code::INSUFFICIENT_DRIVER => (
                BackendState::Error,
                "the NVIDIA driver is older than it needs to be: update it",
            ),
            _ => (
                BackendState::Error,
                "check `nvidia-smi` and the kernel log (dmesg)",
            ),
        }
    };
    status.status = st;
    status.detail = Some(err.to_string());
    status.hint = Some(hint.into());
}

/// The devices the children measured (with `/proc`'s entry for one whose child said nothing
/// usable about it), and the pairs.
fn measured(
    run: &Children,
    hello: &Hello,
    opts: &ProbeOptions,
    seen: &Seen,
    status: &mut BackendStatus,
    report: &mut Report,
) {
    let count = hello.device_count.unwrap_or(0);
    if count == 0 {
        status.status = BackendState::NoDevice;
        status.hint = Some(NO_GPU_HINT.into());
    }
    let visible: Vec<&NvidiaProcGpu> = seen.visible().collect();
    for (i, out) in &run.devices {
        let smoke = smoke_from(out, opts.timeout, opts.smoke);
        let mut d = out
            .devices()
            .find_map(|e| device_from_event(e, Backend::Cuda, DeviceSource::Driver))
            .unwrap_or_else(|| match visible.get(*i as usize) {
                Some(g) => proc_device(*i, g, Smoke::not_run("")),
                None => unknown_device(*i, Backend::Cuda),
            });
        d.smoke = smoke;
        d.driver_version = status.driver_version.clone();
        d.runtime_version = status.runtime_version.clone();
        d.timings = run.timings(*i);
        report.devices.push(d);
    }
    if let Some(c) = &run.shared {
        status.detail = Some(shared_child::crash_note(c));
    }
    if let Some((_, out)) = &run.peer {
        let all: Vec<u32> = (0..count).collect();
        report
            .peers
            .extend(peer_results(out, &all, opts, run.missing_pair.as_ref()));
    }
}

/// With the visible-device variables set: the GPUs they hide, and how the variables were read.
fn hidden_and_visibility(seen: &Seen, measured: bool, report: &mut Report) {
    let hidden_by = seen
        .sel
        .applied
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ");
    let physical_pci: Vec<Option<String>> = seen
        .gpus
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
    let (map, basis) = visible::mapping(&seen.sel, &physical_pci, measured_pci.as_deref());
    for (i, g) in seen.gpus.iter().enumerate() {
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
    let gpus = seen
        .gpus
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
        .collect();
    report.visibility.push(checks::visibility(
        Backend::Cuda,
        &seen.sel,
        gpus,
        &map,
        basis,
    ));
}

fn proc_device(index: u32, g: &NvidiaProcGpu, smoke: Smoke) -> Device {
    let mut d = unknown_device(index, Backend::Cuda);
    d.name = g.model.clone();
    d.pci_bus_id = Some(g.pci_bus_id.clone());
    d.source = DeviceSource::Procfs;
    d.smoke = smoke;
    d
}
