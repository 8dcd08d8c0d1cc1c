//! The CUDA probe child: device facts and the VMM-pool smoke test through the driver API,
//! printed as protocol events (probes/PROTOCOL.md). Runs only inside `gpuprobe __child cuda`.

use std::time::Instant;

use super::gpu::Context;
use super::smoke::{self, alloc_prop};
use super::{Driver, sys};
use crate::children::protocol::{
    self, DeviceEvent, DeviceFacts, DeviceFailed, Done, Hello, NotRun, PlanEvent, SmokeEvent,
    SmokeSkipped,
};
use crate::probe::events::Emitter;
use crate::report::ApiError;

pub struct Options {
    pub list: bool,
    pub device: Option<u32>,
    /// Probe every device the driver shows, each from its own thread, in this one process (the
    /// shared child, CUDA's default); with `peers`, each pair once both of its devices are done.
    pub all: bool,
    /// With `peers` alone: only the pairs of these devices (empty: all).
    pub only: Vec<u32>,
    /// Check every pair of devices (one child for all pairs, started with the device children).
    pub peers: bool,
    pub cycles: u32,
    pub smoke: bool,
    /// Print the growth schedule for (granularity, free VRAM) and stop; no driver is loaded.
    pub plan: Option<(u64, u64)>,
}

pub fn run(opts: &Options) -> i32 {
    let started = Instant::now();
    let mut out = Emitter::stdout();
    if let Some((granularity, free)) = opts.plan {
        out.emit(match crate::probe::smoke_plan::bundled() {
            Ok(p) => PlanEvent::Schedule(p.schedule(granularity, free).event(p)),
            Err(error) => PlanEvent::Failed { error },
        });
        return 0;
    }
    // Never unloaded: the child leaves with _exit, and dlclose of a driver with live contexts runs
    // its teardown first.
    let drv = match Driver::load() {
        Ok(d) => std::mem::ManuallyDrop::new(d),
        Err(e) => {
            let err = ApiError {
                // The message names the library (dlerror's text): name it once.
                api: "dlopen".into(),
                code: -1,
                name: Some(ApiError::LIBRARY_NOT_FOUND.into()),
                message: Some(e),
            };
            out.emit(hello(None, None, 0, started, Some(err)));
            out.emit(Done::default());
            return 0;
        }
    };
    let driver_version = kernel_module_version();
    let init = drv.init();
    let api_version = drv
        .version()
        .ok()
        .map(|api| format!("{}.{}", api / 1000, (api % 1000) / 10));
    let counted = init.and_then(|()| drv.device_count());
    let count = counted.as_ref().map_or(0, |n| *n);
    let shown = count.max(0) as u32;
    out.emit(hello(
        api_version,
        driver_version,
        shown,
        started,
        counted.as_ref().err().cloned(),
    ));
    if counted.is_err() {
        out.emit(Done::default());
        return 0;
    }
    if opts.list {
        for i in 0..count {
            out.emit(device_facts(&drv, i, None));
        }
    } else if opts.all {
        super::shared::run(&drv, count, opts, started);
    } else if let Some(i) = opts.device {
        // The parent may start a child for a device the driver does not show (it counts devices
        // without the driver); hello's device_count tells it to drop this one.
        if i as i32 >= count {
            out.emit(Done::default());
            return 0;
        }
        // Not released: the child leaves right after `done`, and process exit tears the context
        // down anyway (destroying it first costs time, and can block after a GPU fault). The
        // probe program leaves the same way.
        std::mem::forget(probe_device(&drv, &mut out, i as i32, opts));
    } else if opts.peers {
        super::peer::run(&drv, &mut out, count, &opts.only);
    }
    out.emit(Done::default());
    0
}

fn hello(
    runtime_version: Option<String>,
    driver_version: Option<String>,
    device_count: u32,
    started: Instant,
    error: Option<ApiError>,
) -> Hello {
    Hello {
        protocol: Some(protocol::VERSION),
        probe: Some("gpuprobe-cuda".into()),
        backend: Some(crate::report::Backend::Cuda),
        runtime_version,
        driver_version,
        device_count: Some(device_count),
        init_ms: Some(ms(started)),
        error,
    }
}

/// One device's `device` event and (unless `--no-smoke`) its `smoke` event. Returns the primary
/// context reference it holds for the whole run: releasing the last one destroys the context,
/// and creating it again would cost as much as the smoke test itself.
pub(super) fn probe_device<'a>(
    drv: &'a Driver,
    out: &mut Emitter,
    i: i32,
    opts: &Options,
) -> Result<Context<'a>, ApiError> {
    // Announced first: a device whose context never comes is reported as hanging there.
    out.stage("context", 0, 0, 0);
    let t = Instant::now();
    let hold = Context::retain(drv, i);
    let context_ms = ms(t);
    let facts = device_facts(drv, i, Some((context_ms, hold.as_ref().err())));
    let (vmm, gran) = match &facts {
        DeviceEvent::Facts(f) => (f.vmm_supported, f.granularity_recommended),
        DeviceEvent::Failed(_) => (None, None),
    };
    out.emit(facts);
    if opts.smoke {
        let smoke = match (vmm, gran) {
            (Some(true), Some(g)) if g > 0 => {
                SmokeEvent::Ran(Box::new(smoke::run(drv, out, i, g, opts.cycles)))
            }
            (Some(false), _) => not_applicable(
                "the device reports no VMM support: llama.cpp uses the legacy pool on it",
            ),
            _ => not_applicable("VMM attribute or granularity could not be read"),
        };
        out.emit(smoke);
    }
    hold
}

pub(super) fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

fn not_applicable(reason: &str) -> SmokeEvent {
    SmokeEvent::Skipped(SmokeSkipped {
        outcome: NotRun::NotRun,
        reason: reason.into(),
    })
}

/// The NVIDIA kernel module version (`580.95.05`), which quirks key on; no driver load needed.
/// Read under the injectable root (`GPUPROBE_SYSFS_ROOT`), like `/proc/driver/nvidia/gpus`.
fn kernel_module_version() -> Option<String> {
    let text =
        crate::files::read_to_string(crate::host::sysfs::root().join("proc/driver/nvidia/version"))
            .ok()?;
    let line = text.lines().next()?;
    let idx = line.find("Kernel Module")?;
    // `... x86_64 Kernel Module  580.82.07  ...` or, open flavour, `... Open Kernel Module for x86_64  580.95.05  ...`.
    line[idx + "Kernel Module".len()..]
        .split_whitespace()
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .map(str::to_string)
}

fn attr(drv: &Driver, dev: sys::CUdevice, a: sys::CUdevice_attribute) -> Option<i32> {
    drv.device_attribute(a, dev).ok()
}

/// The `device` event. `context` is the primary context's creation time and error when this child
/// made one current for `ordinal` (then free VRAM can be read and the timings are reported).
fn device_facts(
    drv: &Driver,
    ordinal: i32,
    context: Option<(f64, Option<&ApiError>)>,
) -> DeviceEvent {
    let started = Instant::now();
    let dev = match drv.device(ordinal) {
        Ok(d) => d,
        Err(e) => {
            return DeviceEvent::Failed(DeviceFailed {
                index: Some(ordinal as u32),
                error: Some(e),
            });
        }
    };
    let name = drv
        .device_name(dev)
        .unwrap_or_else(|_| "unknown NVIDIA GPU".into());
    let major = attr(drv, dev, sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    let minor = attr(drv, dev, sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    let (arch, cc) = match (major, minor) {
        (Some(a), Some(b)) => (format!("sm_{a}{b}"), Some(format!("{a}.{b}"))),
        _ => (crate::report::UNKNOWN_ARCH.to_string(), None),
    };
    let total = drv.device_total_mem(dev).ok().map(|t| t as u64);
    let pci = drv
        .device_pci_bus_id(dev)
        .ok()
        .map(|b| normalise_bus_id(&b));
    let integrated = attr(drv, dev, sys::CU_DEVICE_ATTRIBUTE_INTEGRATED).map(|v| v != 0);
    let warp = attr(drv, dev, sys::CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    let vmm = attr(
        drv,
        dev,
        sys::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
    )
    .map(|v| v != 0);
    let prop = alloc_prop(dev);
    let gran = |flag| {
        drv.allocation_granularity(&prop, flag)
            .ok()
            .map(|g| g as u64)
    };
    let (gmin, grec) = if vmm == Some(true) {
        (
            gran(sys::CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            gran(sys::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
        )
    } else {
        (None, None)
    };
    let mut free_bytes = None;
    if let Some((_, None)) = context {
        free_bytes = drv.mem_info().ok().map(|(f, _)| f as u64);
    }
    DeviceEvent::Facts(Box::new(DeviceFacts {
        index: Some(ordinal as u32),
        name,
        arch,
        arch_features: None,
        compute_capability: cc,
        vram_total_bytes: total,
        vram_free_bytes: free_bytes,
        pci_bus_id: pci,
        integrated,
        wave_size: warp.and_then(|w| u32::try_from(w).ok()),
        vmm_supported: vmm,
        granularity_min: gmin,
        granularity_recommended: grec,
        context_ms: context.map(|c| c.0),
        queries_ms: Some(started.elapsed().as_secs_f64() * 1000.0),
        error: context.and_then(|c| c.1).cloned(),
    }))
}

/// CUDA prints `00000000:19:00.0`; the report uses the common `0000:19:00.0` form.
fn normalise_bus_id(s: &str) -> String {
    let s = s.to_ascii_lowercase();
    match s.split_once(':') {
        Some((dom, rest)) => match u32::from_str_radix(dom, 16) {
            Ok(d) => format!("{d:04x}:{rest}"),
            Err(_) => s,
        },
        None => s,
    }
}
