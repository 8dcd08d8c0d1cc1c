//! The CUDA probe child: device facts and the VMM-pool smoke test through the driver API,
//! printed as protocol events (probes/PROTOCOL.md). Runs only inside `gpuprobe __child cuda`.

use std::ffi::{CString, c_void};
use std::time::Instant;

use serde_json::{Value, json};

use super::driver::cu;
use super::{Driver, sys};
use crate::probe::events::{Emitter, api_error_json};
use crate::probe::smoke_pattern::value;
use crate::report::ApiError;

const PTX: &str = include_str!("../../../probes/smoke.ptx");
/// llama.cpp's `CUDA_POOL_VMM_MAX_SIZE`.
pub const RESERVE_BYTES: u64 = 1 << 35;
/// Free VRAM may drift by this much between before and after without counting as a leak.
pub const VRAM_TOLERANCE: u64 = 32 << 20;

pub struct Options {
    pub list: bool,
    pub device: Option<u32>,
    pub peer: Option<(u32, u32)>,
    pub cycles: u32,
    pub chunks: u32,
    pub smoke: bool,
}

pub fn run(opts: &Options) -> i32 {
    let mut out = Emitter::stdout();
    let drv = match Driver::load() {
        Ok(d) => d,
        Err(e) => {
            let err = ApiError {
                api: "dlopen(libcuda.so.1)".into(),
                code: -1,
                name: Some("LIBRARY_NOT_FOUND".into()),
                message: Some(e),
            };
            out.emit(json!({"event":"hello","protocol":1,"probe":"gpuprobe-cuda","backend":"cuda","runtime_version":null,"driver_version":null,"device_count":0,"error":api_error_json(&err)}));
            out.emit(json!({"event":"done"}));
            return 0;
        }
    };
    let driver_version = kernel_module_version();
    let init = cu!(&drv, cuInit(0));
    let mut api = 0i32;
    let api_version = cu!(&drv, cuDriverGetVersion(&mut api))
        .ok()
        .map(|_| format!("{}.{}", api / 1000, (api % 1000) / 10));
    let mut count = 0i32;
    let counted = init.and_then(|_| cu!(&drv, cuDeviceGetCount(&mut count)));
    let error = counted.as_ref().err().map(api_error_json);
    out.emit(json!({
        "event": "hello", "protocol": 1, "probe": "gpuprobe-cuda", "backend": "cuda",
        "runtime_version": api_version, "driver_version": driver_version,
        "device_count": if counted.is_ok() { count } else { 0 }, "error": error,
    }));
    if counted.is_err() {
        out.emit(json!({"event":"done"}));
        return 0;
    }
    if opts.list {
        for i in 0..count {
            out.emit(device_facts(&drv, i, false));
        }
    } else if let Some(i) = opts.device {
        if i as i32 >= count {
            eprintln!("device {i} does not exist ({count} devices)");
            return 2;
        }
        // One primary-context reference for the whole run: releasing the last one destroys the
        // context, and creating it again would cost as much as the smoke test itself.
        let mut dev: sys::CUdevice = 0;
        let _hold = cu!(&drv, cuDeviceGet(&mut dev, i as i32))
            .ok()
            .and_then(|_| Context::retain(&drv, dev).ok());
        let facts = device_facts(&drv, i as i32, true);
        let gran = facts["granularity_recommended"].as_u64();
        let vmm = facts["vmm_supported"].as_bool();
        out.emit(facts);
        if opts.smoke {
            let smoke = match (vmm, gran) {
                (Some(true), Some(g)) if g > 0 => {
                    smoke(&drv, &mut out, i as i32, g, opts.cycles, opts.chunks)
                }
                (Some(false), _) => not_applicable(
                    "the device reports no VMM support: llama.cpp uses the legacy pool on it",
                ),
                _ => not_applicable("VMM attribute or granularity could not be read"),
            };
            out.emit(smoke);
        }
    } else if let Some((a, b)) = opts.peer {
        out.emit(peer(&drv, a as i32, b as i32));
    }
    out.emit(json!({"event":"done"}));
    0
}

fn not_applicable(reason: &str) -> Value {
    json!({"event":"smoke","outcome":"not-run","reason":reason})
}

/// The NVIDIA kernel module version (`580.95.05`), which quirks key on; no driver load needed.
/// Read under the injectable root (`GPUPROBE_SYSFS_ROOT`), like `/proc/driver/nvidia/gpus`.
fn kernel_module_version() -> Option<String> {
    let text =
        std::fs::read_to_string(crate::probe::sysfs::root().join("proc/driver/nvidia/version"))
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
    let mut v = 0i32;
    cu!(drv, cuDeviceGetAttribute(&mut v, a, dev))
        .ok()
        .map(|_| v)
}

fn alloc_prop(dev: sys::CUdevice) -> sys::CUmemAllocationProp {
    let mut location = sys::CUmemLocation {
        type_: sys::CU_MEM_LOCATION_TYPE_DEVICE,
        ..Default::default()
    };
    location.__bindgen_anon_1.id = dev;
    sys::CUmemAllocationProp {
        type_: sys::CU_MEM_ALLOCATION_TYPE_PINNED,
        location,
        ..Default::default()
    }
}

fn device_facts(drv: &Driver, ordinal: i32, with_context: bool) -> Value {
    let mut dev: sys::CUdevice = 0;
    if let Err(e) = cu!(drv, cuDeviceGet(&mut dev, ordinal)) {
        return json!({"event":"device","index":ordinal,"error":api_error_json(&e)});
    }
    let mut name = [0u8; 256];
    let name = cu!(
        drv,
        cuDeviceGetName(name.as_mut_ptr().cast(), name.len() as i32, dev)
    )
    .ok()
    .map(|_| c_string(&name))
    .unwrap_or_else(|| "unknown NVIDIA GPU".into());
    let major = attr(drv, dev, sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    let minor = attr(drv, dev, sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    let (arch, cc) = match (major, minor) {
        (Some(a), Some(b)) => (format!("sm_{a}{b}"), Some(format!("{a}.{b}"))),
        _ => ("unknown".to_string(), None),
    };
    let mut total: usize = 0;
    let total = cu!(drv, cuDeviceTotalMem_v2(&mut total, dev))
        .ok()
        .map(|_| total as u64);
    let mut bus = [0u8; 64];
    let pci = cu!(
        drv,
        cuDeviceGetPCIBusId(bus.as_mut_ptr().cast(), bus.len() as i32, dev)
    )
    .ok()
    .map(|_| normalise_bus_id(&c_string(&bus)));
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
        let mut g: usize = 0;
        cu!(drv, cuMemGetAllocationGranularity(&mut g, &prop, flag))
            .ok()
            .map(|_| g as u64)
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
    if with_context && let Some(ctx) = Context::retain(drv, dev).ok() {
        let (mut f, mut t) = (0usize, 0usize);
        free_bytes = cu!(drv, cuMemGetInfo_v2(&mut f, &mut t))
            .ok()
            .map(|_| f as u64);
        drop(ctx);
    }
    json!({
        "event": "device", "index": ordinal, "name": name, "arch": arch, "arch_features": null,
        "compute_capability": cc, "vram_total_bytes": total, "vram_free_bytes": free_bytes,
        "pci_bus_id": pci, "integrated": integrated, "wave_size": warp, "vmm_supported": vmm,
        "granularity_min": gmin, "granularity_recommended": grec, "error": null,
    })
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

fn c_string(buf: &[u8]) -> String {
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).trim().to_string()
}

/// The primary context, made current; released on drop.
struct Context<'a> {
    drv: &'a Driver,
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
}

impl<'a> Context<'a> {
    fn retain(drv: &'a Driver, dev: sys::CUdevice) -> Result<Self, ApiError> {
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        cu!(drv, cuDevicePrimaryCtxRetain(&mut ctx, dev))?;
        let c = Context { drv, dev, ctx };
        cu!(drv, cuCtxSetCurrent(ctx))?;
        Ok(c)
    }
}

impl Drop for Context<'_> {
    fn drop(&mut self) {
        let _ = cu!(self.drv, cuDevicePrimaryCtxRelease_v2(self.dev));
    }
}

struct Kernels {
    module: sys::CUmodule,
    write: sys::CUfunction,
    verify: sys::CUfunction,
}

fn load_kernels(drv: &Driver) -> Result<Kernels, ApiError> {
    let image = CString::new(PTX).map_err(|_| ApiError {
        api: "PTX".into(),
        code: -1,
        name: None,
        message: Some("NUL in PTX".into()),
    })?;
    let mut module: sys::CUmodule = std::ptr::null_mut();
    cu!(drv, cuModuleLoadData(&mut module, image.as_ptr().cast()))?;
    let mut write: sys::CUfunction = std::ptr::null_mut();
    let mut verify: sys::CUfunction = std::ptr::null_mut();
    cu!(
        drv,
        cuModuleGetFunction(&mut write, module, c"gpuprobe_write".as_ptr())
    )?;
    cu!(
        drv,
        cuModuleGetFunction(&mut verify, module, c"gpuprobe_verify".as_ptr())
    )?;
    Ok(Kernels {
        module,
        write,
        verify,
    })
}

fn launch(
    drv: &Driver,
    f: sys::CUfunction,
    words: u64,
    params: &mut [*mut c_void],
) -> Result<(), ApiError> {
    let blocks = words.div_ceil(256).clamp(1, 1024) as u32;
    cu!(
        drv,
        cuLaunchKernel(
            f,
            blocks,
            1,
            1,
            256,
            1,
            1,
            0,
            std::ptr::null_mut(),
            params.as_mut_ptr(),
            std::ptr::null_mut()
        )
    )
}

/// Result of the smoke test as it accumulates.
#[derive(Default)]
struct SmokeState {
    failed_stage: Option<&'static str>,
    error: Option<ApiError>,
    cycles_done: u32,
    mismatches: u64,
    first_bad_offset: Option<u64>,
    first_bad_value: Option<u32>,
    expected_value: Option<u32>,
    whole_range_helped: Option<bool>,
    free_before: Option<u64>,
    free_after: Option<u64>,
}

impl SmokeState {
    fn fail(&mut self, stage: &'static str, e: ApiError) {
        if self.failed_stage.is_none() {
            self.failed_stage = Some(stage);
            self.error = Some(e);
        }
    }
}

fn smoke(
    drv: &Driver,
    out: &mut Emitter,
    ordinal: i32,
    chunk: u64,
    cycles: u32,
    chunks: u32,
) -> Value {
    let started = Instant::now();
    let mut st = SmokeState::default();
    out.stage("context", 0, 0);
    let mut dev: sys::CUdevice = 0;
    let ctx = cu!(drv, cuDeviceGet(&mut dev, ordinal)).and_then(|_| Context::retain(drv, dev));
    match ctx {
        Err(e) => st.fail("context", e),
        Ok(ctx) => {
            match load_kernels(drv) {
                Err(e) => st.fail("context", e),
                Ok(k) => {
                    run_cycles(drv, out, dev, &k, chunk, cycles, chunks, &mut st);
                    let _ = cu!(drv, cuModuleUnload(k.module));
                }
            }
            drop(ctx);
        }
    }
    let pass = st.failed_stage.is_none();
    json!({
        "event": "smoke", "outcome": if pass { "pass" } else { "fail" },
        "failed_stage": st.failed_stage, "error": st.error.as_ref().map(api_error_json),
        "cycles_done": st.cycles_done, "cycles": cycles, "chunks_per_cycle": chunks,
        "chunk_bytes": chunk, "reserve_bytes": RESERVE_BYTES, "mismatches": st.mismatches,
        "first_bad_offset": st.first_bad_offset, "first_bad_value": st.first_bad_value,
        "expected_value": st.expected_value, "whole_range_access_helped": st.whole_range_helped,
        "vram_free_before": st.free_before, "vram_free_after": st.free_after,
        "elapsed_ms": started.elapsed().as_secs_f64() * 1000.0,
    })
}

#[allow(clippy::too_many_arguments)]
fn run_cycles(
    drv: &Driver,
    out: &mut Emitter,
    dev: sys::CUdevice,
    k: &Kernels,
    chunk: u64,
    cycles: u32,
    chunks: u32,
    st: &mut SmokeState,
) {
    let mut counters: sys::CUdeviceptr = 0;
    if let Err(e) = cu!(drv, cuMemAlloc_v2(&mut counters, 8)) {
        return st.fail("context", e);
    }
    let free_now = || {
        let (mut f, mut t) = (0usize, 0usize);
        cu!(drv, cuMemGetInfo_v2(&mut f, &mut t))
            .ok()
            .map(|_| f as u64)
    };
    st.free_before = free_now();
    let prop = alloc_prop(dev);
    let mut desc = sys::CUmemAccessDesc::default();
    desc.location.type_ = sys::CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.__bindgen_anon_1.id = dev;
    desc.flags = sys::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for cycle in 0..cycles {
        out.cycle(cycle);
        let announce = |out: &mut Emitter, stage: &str, c: u32| {
            if cycle == 0 {
                out.stage(stage, cycle, c);
            }
        };
        announce(out, "reserve", 0);
        let mut base: sys::CUdeviceptr = 0;
        if let Err(e) = cu!(
            drv,
            cuMemAddressReserve(&mut base, RESERVE_BYTES as usize, 0, 0, 0)
        ) {
            st.fail("reserve", e);
            break;
        }
        let mut mapped: u32 = 0;
        'chunks: for c in 0..chunks {
            let offset = u64::from(c) * chunk;
            let ptr = base + offset;
            // Counters are reset before mapping, so nothing sits between map and the kernels.
            if let Err(e) = cu!(drv, cuMemsetD32_v2(counters, 0, 1))
                .and_then(|_| cu!(drv, cuMemsetD32_v2(counters + 4, u32::MAX, 1)))
            {
                st.fail("verify", e);
                break 'chunks;
            }
            announce(out, "create", c);
            let mut handle: sys::CUmemGenericAllocationHandle = 0;
            if let Err(e) = cu!(drv, cuMemCreate(&mut handle, chunk as usize, &prop, 0)) {
                st.fail("create", e);
                break 'chunks;
            }
            announce(out, "map", c);
            if let Err(e) = cu!(drv, cuMemMap(ptr, chunk as usize, 0, handle, 0)) {
                let _ = cu!(drv, cuMemRelease(handle));
                st.fail("map", e);
                break 'chunks;
            }
            mapped += 1;
            announce(out, "release", c);
            if let Err(e) = cu!(drv, cuMemRelease(handle)) {
                st.fail("release", e);
                break 'chunks;
            }
            announce(out, "set_access", c);
            if let Err(e) = cu!(drv, cuMemSetAccess(ptr, chunk as usize, &desc, 1)) {
                // Would the whole-range workaround (llama.cpp PR #23900) have worked?
                let whole = cu!(
                    drv,
                    cuMemSetAccess(base, (offset + chunk) as usize, &desc, 1)
                );
                st.whole_range_helped = Some(whole.is_ok());
                st.fail("set_access", e);
                break 'chunks;
            }
            announce(out, "write", c);
            let words_begin = offset / 4;
            let mut p_base = base;
            let mut p_begin = words_begin;
            let mut p_count = chunk / 4;
            let mut p_cycle = cycle;
            let mut wparams: [*mut c_void; 4] = [
                (&mut p_base as *mut u64).cast(),
                (&mut p_begin as *mut u64).cast(),
                (&mut p_count as *mut u64).cast(),
                (&mut p_cycle as *mut u32).cast(),
            ];
            if let Err(e) = launch(drv, k.write, p_count, &mut wparams) {
                st.fail("write", e);
                break 'chunks;
            }
            announce(out, "verify", c);
            let mut v_base = base;
            let mut v_words = (offset + chunk) / 4;
            let mut v_cycle = cycle;
            let mut v_counters = counters;
            let mut vparams: [*mut c_void; 4] = [
                (&mut v_base as *mut u64).cast(),
                (&mut v_words as *mut u64).cast(),
                (&mut v_cycle as *mut u32).cast(),
                (&mut v_counters as *mut u64).cast(),
            ];
            let verified = launch(drv, k.verify, v_words, &mut vparams)
                .and_then(|_| cu!(drv, cuCtxSynchronize()));
            if let Err(e) = verified {
                st.fail("verify", e);
                break 'chunks;
            }
            let mut host = [0u32; 2];
            if let Err(e) = cu!(drv, cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), counters, 8)) {
                st.fail("verify", e);
                break 'chunks;
            }
            if host[0] > 0 {
                st.mismatches += u64::from(host[0]);
                let word = u64::from(host[1]);
                st.first_bad_offset = Some(word * 4);
                st.expected_value = Some(value(word, cycle));
                let mut seen = 0u32;
                if cu!(
                    drv,
                    cuMemcpyDtoH_v2((&mut seen as *mut u32).cast(), base + word * 4, 4)
                )
                .is_ok()
                {
                    st.first_bad_value = Some(seen);
                }
                st.fail(
                    "verify",
                    ApiError {
                        api: "gpuprobe_verify".into(),
                        code: 0,
                        name: Some("MISMATCH".into()),
                        message: Some(format!("{} words read back wrong", host[0])),
                    },
                );
                break 'chunks;
            }
        }
        // The HIP pool unmaps each mapping separately (ROCR-Runtime#285); do the same everywhere.
        announce(out, "unmap", 0);
        for c in 0..mapped {
            if let Err(e) = cu!(drv, cuMemUnmap(base + u64::from(c) * chunk, chunk as usize)) {
                st.fail("unmap", e);
            }
        }
        announce(out, "free", 0);
        if let Err(e) = cu!(drv, cuMemAddressFree(base, RESERVE_BYTES as usize)) {
            st.fail("free", e);
        }
        if st.failed_stage.is_some() {
            break;
        }
        st.cycles_done = cycle + 1;
    }
    let _ = cu!(drv, cuMemFree_v2(counters));
    if st.failed_stage.is_none() {
        out.stage("vram_check", cycles.saturating_sub(1), 0);
        // The counters buffer was allocated before `free_before` and is freed now, so compare
        // with its size allowed for.
        st.free_after = free_now();
        if let (Some(b), Some(a)) = (st.free_before, st.free_after)
            && a + VRAM_TOLERANCE < b
        {
            st.fail(
                "vram_check",
                ApiError {
                    api: "cuMemGetInfo".into(),
                    code: 0,
                    name: Some("VRAM_NOT_RETURNED".into()),
                    message: Some(format!(
                        "{} MiB of VRAM did not come back after unmap and release",
                        (b - a) >> 20
                    )),
                },
            );
        }
    }
}

fn peer(drv: &Driver, a: i32, b: i32) -> Value {
    let mut da: sys::CUdevice = 0;
    let mut db: sys::CUdevice = 0;
    let r = cu!(drv, cuDeviceGet(&mut da, a)).and_then(|_| cu!(drv, cuDeviceGet(&mut db, b)));
    if let Err(e) = r {
        return json!({"event":"peer","from":a,"to":b,"can_access":null,"copy_ok":null,"mismatches":0,"error":api_error_json(&e)});
    }
    let mut can = 0i32;
    let can_access = cu!(drv, cuDeviceCanAccessPeer(&mut can, da, db))
        .ok()
        .map(|_| can != 0);
    let (ok, mismatches, err) = match peer_copy(drv, da, db, can_access == Some(true)) {
        Ok(m) => (Some(m == 0), m, None),
        Err(e) => (Some(false), 0, Some(api_error_json(&e))),
    };
    json!({"event":"peer","from":a,"to":b,"can_access":can_access,"copy_ok":ok,"mismatches":mismatches,"error":err})
}

/// Copies a 64 MiB pattern from a to b with cuMemcpyPeer and counts words that differ.
fn peer_copy(
    drv: &Driver,
    da: sys::CUdevice,
    db: sys::CUdevice,
    enable: bool,
) -> Result<u64, ApiError> {
    const BYTES: usize = 64 << 20;
    let words = BYTES / 4;
    let cb = Context::retain(drv, db)?;
    let mut dst: sys::CUdeviceptr = 0;
    cu!(drv, cuMemAlloc_v2(&mut dst, BYTES))?;
    let ca = Context::retain(drv, da)?;
    if enable {
        // Already-enabled is fine; anything else shows up in the copy.
        let _ = cu!(drv, cuCtxEnablePeerAccess(cb.ctx, 0));
    }
    let mut src: sys::CUdeviceptr = 0;
    cu!(drv, cuMemAlloc_v2(&mut src, BYTES))?;
    let pattern: Vec<u32> = (0..words as u64).map(|w| value(w, 7)).collect();
    cu!(drv, cuMemcpyHtoD_v2(src, pattern.as_ptr().cast(), BYTES))?;
    cu!(drv, cuMemcpyPeer(dst, cb.ctx, src, ca.ctx, BYTES))?;
    cu!(drv, cuCtxSynchronize())?;
    let mut back = vec![0u32; words];
    cu!(drv, cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dst, BYTES))?;
    let mismatches = back.iter().zip(&pattern).filter(|(x, y)| x != y).count() as u64;
    let _ = cu!(drv, cuMemFree_v2(src));
    let _ = cu!(drv, cuMemFree_v2(dst));
    Ok(mismatches)
}
