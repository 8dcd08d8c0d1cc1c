//! NVML's per-process accounting, loaded at run time in the child (issue #28): which processes
//! hold memory on the GPU, and how much of it is this process's own. The smoke test's memory check
//! judges the probe by its own share, so other jobs on a shared GPU cannot fail it; a machine
//! without `libnvidia-ml.so.1` simply has no accounting.

use std::ffi::{CString, c_char, c_int, c_uint, c_ulonglong, c_void};

/// Library names tried in order; `GPUPROBE_LIBNVML` overrides (tests point it at a fake).
const CANDIDATES: &[&str] = &["libnvidia-ml.so.1", "libnvidia-ml.so"];
const NVML_SUCCESS: c_int = 0;
const NVML_ERROR_INSUFFICIENT_SIZE: c_int = 7;
/// `usedGpuMemory` when the driver cannot say (Windows WDDM, some containers).
const NVML_VALUE_NOT_AVAILABLE: c_ulonglong = c_ulonglong::MAX;
/// More processes than this on one GPU is not an answer to trust.
const MAX_PROCESSES: c_uint = 4096;

type Device = *mut c_void;
type Init = unsafe extern "C" fn() -> c_int;
type HandleByBusId = unsafe extern "C" fn(*const c_char, *mut Device) -> c_int;
type Processes = unsafe extern "C" fn(Device, *mut c_uint, *mut c_void) -> c_int;

/// `nvmlProcessInfo_t` of the `_v2`/`_v3` entry points.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ProcessInfoV2 {
    pid: c_uint,
    used_gpu_memory: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

/// `nvmlProcessInfo_t` of the unsuffixed (first) entry point.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ProcessInfoV1 {
    pid: c_uint,
    used_gpu_memory: c_ulonglong,
}

/// One process with a compute context on the GPU; `used` is `None` where NVML cannot say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    pub used: Option<u64>,
}

pub struct Nvml {
    // Kept loaded for the function pointers below; nvmlShutdown runs on drop.
    lib: libloading::Library,
    device: Device,
    processes: Processes,
    v2_layout: bool,
}

impl Nvml {
    /// NVML's handle of the GPU at PCI bus id `bus_id` (as `cuDeviceGetPCIBusId` gives it).
    pub fn open(bus_id: &str) -> Result<Nvml, String> {
        let names: Vec<String> = match std::env::var("GPUPROBE_LIBNVML") {
            Ok(p) if !p.is_empty() => vec![p],
            _ => CANDIDATES.iter().map(|s| s.to_string()).collect(),
        };
        // SAFETY: loading NVML runs its initialisers, which every NVIDIA tool runs; this happens
        // only in the isolated child.
        let lib = names
            .iter()
            .find_map(|n| unsafe { libloading::Library::new(n) }.ok())
            .ok_or_else(|| format!("{} not found", names.join(", ")))?;
        let bus = CString::new(bus_id).map_err(|_| "PCI bus id with a NUL byte".to_string())?;
        // SAFETY: the symbols have the C signatures of nvml.h given by the types above; the
        // pointers are used only while `lib` is loaded (it lives in the returned value).
        unsafe {
            let init: Init = *lib
                .get::<Init>(b"nvmlInit_v2\0")
                .map_err(|e| format!("nvmlInit_v2: {e}"))?;
            let by_bus: HandleByBusId = *lib
                .get::<HandleByBusId>(b"nvmlDeviceGetHandleByPciBusId_v2\0")
                .map_err(|e| format!("nvmlDeviceGetHandleByPciBusId_v2: {e}"))?;
            let (processes, v2_layout) = [
                (&b"nvmlDeviceGetComputeRunningProcesses_v3\0"[..], true),
                (b"nvmlDeviceGetComputeRunningProcesses_v2\0", true),
                (b"nvmlDeviceGetComputeRunningProcesses\0", false),
            ]
            .into_iter()
            .find_map(|(name, v2)| lib.get::<Processes>(name).ok().map(|f| (*f, v2)))
            .ok_or("no nvmlDeviceGetComputeRunningProcesses entry point")?;
            let r = init();
            if r != NVML_SUCCESS {
                return Err(format!("nvmlInit_v2 returned {r}"));
            }
            let mut nvml = Nvml {
                lib,
                device: std::ptr::null_mut(),
                processes,
                v2_layout,
            };
            let r = by_bus(bus.as_ptr(), &mut nvml.device);
            if r != NVML_SUCCESS {
                return Err(format!(
                    "nvmlDeviceGetHandleByPciBusId_v2({bus_id}) returned {r}"
                ));
            }
            Ok(nvml)
        }
    }

    /// The processes with a compute context on the GPU now.
    pub fn processes(&self) -> Result<Vec<Process>, String> {
        // The list can grow between the count and the fetch: ask again with the new count.
        let mut want: c_uint = 0;
        for _ in 0..4 {
            let mut count = want;
            let got = if self.v2_layout {
                let mut buf = vec![ProcessInfoV2::default(); want as usize];
                let r = self.call(&mut count, buf.as_mut_ptr().cast());
                r.map(|()| {
                    buf.truncate(count as usize);
                    buf.iter()
                        .map(|p| process(p.pid, p.used_gpu_memory))
                        .collect()
                })
            } else {
                let mut buf = vec![ProcessInfoV1::default(); want as usize];
                let r = self.call(&mut count, buf.as_mut_ptr().cast());
                r.map(|()| {
                    buf.truncate(count as usize);
                    buf.iter()
                        .map(|p| process(p.pid, p.used_gpu_memory))
                        .collect()
                })
            };
            match got {
                Ok(list) => return Ok(list),
                Err(Some(n)) if n <= MAX_PROCESSES => want = n + 4,
                Err(Some(n)) => return Err(format!("NVML lists {n} processes")),
                Err(None) => break,
            }
        }
        Err("nvmlDeviceGetComputeRunningProcesses failed".into())
    }

    /// One call; `Err(Some(n))` when the buffer needs room for `n`.
    fn call(&self, count: &mut c_uint, buf: *mut c_void) -> Result<(), Option<c_uint>> {
        let room = *count;
        let buf = if room == 0 { std::ptr::null_mut() } else { buf };
        // SAFETY: `buf` has room for `room` entries of the layout this entry point writes.
        let r = unsafe { (self.processes)(self.device, count, buf) };
        match r {
            NVML_SUCCESS if *count <= room || room == 0 && *count == 0 => Ok(()),
            NVML_SUCCESS | NVML_ERROR_INSUFFICIENT_SIZE => Err(Some(*count)),
            _ => Err(None),
        }
    }
}

fn process(pid: c_uint, used: c_ulonglong) -> Process {
    Process {
        pid,
        used: (used != NVML_VALUE_NOT_AVAILABLE).then_some(used),
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: nvmlShutdown takes no arguments and returns nvmlReturn_t, as `Init`; it is
        // paired with the nvmlInit_v2 that succeeded in `open`, while the library is loaded.
        unsafe {
            if let Ok(shutdown) = self.lib.get::<Init>(b"nvmlShutdown\0") {
                shutdown();
            }
        }
    }
}
