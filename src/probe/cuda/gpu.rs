//! Handles over the safe calls (`calls.rs`): the primary context, a non-blocking stream, the smoke
//! module, device buffers, counter slots and VMM allocations release themselves on drop; a
//! reserved VA range only when told (`VaRange`). Each borrows the driver it came from.

use std::ffi::{CString, c_void};

use super::{Driver, sys};
use crate::report::{ApiError, SmokeStage};

const PTX: &str = include_str!("../../../probes/smoke.ptx");
pub const THREADS_PER_BLOCK: u32 = 256;
pub const MAX_BLOCKS: u32 = 1024;
/// Few enough blocks to be resident together on any GPU, so the busy kernel lasts about its time.
pub const BUSY_BLOCKS: u32 = 64;

// The handles may move between threads (shared.rs hands each device's to the pair checks).
// SAFETY: CUcontext is a process-wide handle, usable from any thread.
unsafe impl Send for Context<'_> {}
// SAFETY: CUstream is process-wide; used on a thread whose current context is not its own, a
// call fails with an error code and touches no host memory (users make the context current).
unsafe impl Send for Stream<'_> {}
// SAFETY: CUmodule and CUfunction are process-wide, as CUstream above.
unsafe impl Send for Kernels<'_> {}

/// A device's primary context, made current; released on drop.
pub struct Context<'a> {
    drv: &'a Driver,
    pub dev: sys::CUdevice,
    pub ctx: sys::CUcontext,
}

impl<'a> Context<'a> {
    pub fn retain(drv: &'a Driver, ordinal: i32) -> Result<Self, ApiError> {
        let dev = drv.device(ordinal)?;
        let ctx = drv.primary_ctx_retain(dev)?;
        let c = Context { drv, dev, ctx };
        c.make_current()?;
        Ok(c)
    }

    pub fn make_current(&self) -> Result<(), ApiError> {
        self.drv.ctx_set_current(self.ctx)
    }
}

impl Drop for Context<'_> {
    fn drop(&mut self) {
        let _ = self.drv.primary_ctx_release(self.dev);
    }
}

/// A stream that does not synchronise with the legacy default stream, like llama.cpp's.
pub struct Stream<'a> {
    drv: &'a Driver,
    pub raw: sys::CUstream,
}

impl<'a> Stream<'a> {
    pub fn new(drv: &'a Driver) -> Result<Self, ApiError> {
        let raw = drv.stream_create(sys::CU_STREAM_NON_BLOCKING)?;
        Ok(Stream { drv, raw })
    }

    pub fn sync(&self) -> Result<(), ApiError> {
        self.drv.stream_synchronize(self.raw)
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        let _ = self.drv.stream_destroy(self.raw);
    }
}

/// Ordinary device memory (cuMemAlloc) in the current context.
pub struct DeviceBuffer<'a> {
    drv: &'a Driver,
    pub ptr: sys::CUdeviceptr,
}

impl<'a> DeviceBuffer<'a> {
    pub fn new(drv: &'a Driver, bytes: usize) -> Result<Self, ApiError> {
        let ptr = drv.mem_alloc(bytes)?;
        Ok(DeviceBuffer { drv, ptr })
    }
}

impl Drop for DeviceBuffer<'_> {
    fn drop(&mut self) {
        let _ = self.drv.mem_free(self.ptr);
    }
}

/// Physical memory for a VMM mapping (`cuMemCreate`): released on drop, or by `release`, which
/// says whether that worked. What is mapped stays alive after the handle is released, which is
/// how llama.cpp's pool uses it.
pub struct Allocation<'a> {
    drv: &'a Driver,
    handle: sys::CUmemGenericAllocationHandle,
}

impl<'a> Allocation<'a> {
    pub fn create(
        drv: &'a Driver,
        bytes: u64,
        prop: &sys::CUmemAllocationProp,
    ) -> Result<Self, ApiError> {
        let handle = drv.mem_create(bytes as usize, prop)?;
        Ok(Allocation { drv, handle })
    }

    pub fn release(self) -> Result<(), ApiError> {
        let this = std::mem::ManuallyDrop::new(self);
        this.drv.mem_release(this.handle)
    }
}

impl Drop for Allocation<'_> {
    fn drop(&mut self) {
        let _ = self.drv.mem_release(self.handle);
    }
}

/// A reserved virtual address range (`cuMemAddressReserve`) and how much of it is mapped, from
/// its start. **Not** released on drop: after a GPU fault, unmapping can block forever, so a
/// failed test leaves its ranges to process exit (probes/PROTOCOL.md). `unmap` and `free` release
/// it stage by stage (the smoke test announces each), `release` does both and names the stage
/// that failed.
pub struct VaRange<'a> {
    drv: &'a Driver,
    base: sys::CUdeviceptr,
    reserved: u64,
    mapped: u64,
}

impl<'a> VaRange<'a> {
    pub fn reserve(drv: &'a Driver, bytes: u64) -> Result<Self, ApiError> {
        let base = drv.mem_address_reserve(bytes as usize)?;
        Ok(VaRange {
            drv,
            base,
            reserved: bytes,
            mapped: 0,
        })
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    /// Bytes mapped from the start (the pool's size).
    pub fn mapped(&self) -> u64 {
        self.mapped
    }

    /// Maps `memory` (`bytes` of it) at `offset`, the end of what is mapped so far.
    pub fn map(
        &mut self,
        offset: u64,
        bytes: u64,
        memory: &Allocation<'_>,
    ) -> Result<(), ApiError> {
        self.drv
            .mem_map(self.base + offset, bytes as usize, memory.handle)?;
        self.mapped = self.mapped.max(offset + bytes);
        Ok(())
    }

    /// Sets `access` on [offset, offset + bytes).
    pub fn set_access(
        &self,
        offset: u64,
        bytes: u64,
        access: &[sys::CUmemAccessDesc],
    ) -> Result<(), ApiError> {
        self.drv
            .mem_set_access(self.base + offset, bytes as usize, access)
    }

    /// Unmaps everything mapped, at once (as llama.cpp's CUDA pool does).
    pub fn unmap(&mut self) -> Result<(), ApiError> {
        if self.mapped > 0 {
            self.drv.mem_unmap(self.base, self.mapped as usize)?;
            self.mapped = 0;
        }
        Ok(())
    }

    /// Gives the address range back (after `unmap`).
    pub fn free(self) -> Result<(), ApiError> {
        self.drv.mem_address_free(self.base, self.reserved as usize)
    }

    /// `unmap`, then `free`; the error names the stage that failed.
    pub fn release(mut self) -> Result<(), (SmokeStage, ApiError)> {
        self.unmap().map_err(|e| (SmokeStage::Unmap, e))?;
        self.free().map_err(|e| (SmokeStage::Free, e))
    }
}

/// The smoke kernels (probes/smoke.ptx) loaded into the current context.
pub struct Kernels<'a> {
    drv: &'a Driver,
    module: sys::CUmodule,
    pub write: sys::CUfunction,
    pub verify: sys::CUfunction,
    pub busy: sys::CUfunction,
}

impl<'a> Kernels<'a> {
    pub fn load(drv: &'a Driver) -> Result<Self, ApiError> {
        let image = CString::new(PTX).map_err(|_| ApiError {
            api: "PTX".into(),
            code: -1,
            name: None,
            message: Some("NUL in PTX".into()),
        })?;
        let module = drv.module_load_data(&image)?;
        let mut k = Kernels {
            drv,
            module,
            write: std::ptr::null_mut(),
            verify: std::ptr::null_mut(),
            busy: std::ptr::null_mut(),
        };
        for (slot, name) in [
            (&mut k.write, c"gpuprobe_write"),
            (&mut k.verify, c"gpuprobe_verify"),
            (&mut k.busy, c"gpuprobe_busy"),
        ] {
            *slot = drv.module_get_function(module, name)?;
        }
        Ok(k)
    }

    /// `gpuprobe_write` over words [begin, begin + count) of `base`.
    pub fn write(
        &self,
        stream: &Stream<'_>,
        base: u64,
        begin: u64,
        count: u64,
        seed: u32,
    ) -> Result<(), ApiError> {
        let (mut b, mut w, mut n, mut s) = (base, begin, count, seed);
        let mut params: [*mut c_void; 4] = [
            (&mut b as *mut u64).cast(),
            (&mut w as *mut u64).cast(),
            (&mut n as *mut u64).cast(),
            (&mut s as *mut u32).cast(),
        ];
        self.launch(self.write, blocks_for(count), stream, &mut params)
    }

    /// `gpuprobe_verify` over words [begin, begin + count) into counter slot `slot`.
    pub fn verify(
        &self,
        stream: &Stream<'_>,
        base: u64,
        begin: u64,
        count: u64,
        seed: u32,
        slot: u64,
    ) -> Result<(), ApiError> {
        let (mut b, mut w, mut n, mut s, mut c) = (base, begin, count, seed, slot);
        let mut params: [*mut c_void; 5] = [
            (&mut b as *mut u64).cast(),
            (&mut w as *mut u64).cast(),
            (&mut n as *mut u64).cast(),
            (&mut s as *mut u32).cast(),
            (&mut c as *mut u64).cast(),
        ];
        self.launch(self.verify, blocks_for(count), stream, &mut params)
    }

    /// `gpuprobe_busy`: verifies words [0, count) over and over for about `ns` nanoseconds.
    pub fn busy(
        &self,
        stream: &Stream<'_>,
        base: u64,
        count: u64,
        seed: u32,
        slot: u64,
        ns: u64,
    ) -> Result<(), ApiError> {
        let (mut b, mut n, mut s, mut c, mut t) = (base, count, seed, slot, ns);
        let mut params: [*mut c_void; 5] = [
            (&mut b as *mut u64).cast(),
            (&mut n as *mut u64).cast(),
            (&mut s as *mut u32).cast(),
            (&mut c as *mut u64).cast(),
            (&mut t as *mut u64).cast(),
        ];
        self.launch(self.busy, BUSY_BLOCKS, stream, &mut params)
    }

    fn launch(
        &self,
        f: sys::CUfunction,
        blocks: u32,
        stream: &Stream<'_>,
        params: &mut [*mut c_void],
    ) -> Result<(), ApiError> {
        self.drv
            .launch_kernel(f, blocks, THREADS_PER_BLOCK, stream.raw, params)
    }
}

impl Drop for Kernels<'_> {
    fn drop(&mut self) {
        let _ = self.drv.module_unload(self.module);
    }
}

pub fn blocks_for(words: u64) -> u32 {
    words
        .div_ceil(u64::from(THREADS_PER_BLOCK))
        .clamp(1, u64::from(MAX_BLOCKS)) as u32
}

/// Mismatch counters: `n` slots of two u64 (count, lowest bad word), reset on a stream.
pub struct Slots<'a> {
    drv: &'a Driver,
    buf: DeviceBuffer<'a>,
    n: usize,
}

/// One slot's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotValue {
    pub mismatches: u64,
    pub first_bad_word: u64,
}

impl<'a> Slots<'a> {
    pub fn new(drv: &'a Driver, n: usize) -> Result<Self, ApiError> {
        Ok(Slots {
            drv,
            buf: DeviceBuffer::new(drv, n * 16)?,
            n,
        })
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn addr(&self, i: usize) -> u64 {
        self.buf.ptr + (i as u64) * 16
    }

    /// Queues the reset of every slot on `stream` (no host wait).
    pub fn reset(&self, stream: &Stream<'_>) -> Result<(), ApiError> {
        let init: Vec<u64> = (0..self.n).flat_map(|_| [0u64, u64::MAX]).collect();
        self.drv
            .memcpy_htod_async(self.buf.ptr, &init, stream.raw)?;
        // A pageable source is staged before the call returns, so `init` may go now.
        Ok(())
    }

    /// Reads every slot; call after the stream that used them has been synchronised.
    pub fn read(&self) -> Result<Vec<SlotValue>, ApiError> {
        let mut raw = vec![0u64; self.n * 2];
        self.drv.memcpy_dtoh(&mut raw, self.buf.ptr)?;
        Ok(raw
            .chunks_exact(2)
            .map(|c| SlotValue {
                mismatches: c[0],
                first_bad_word: c[1],
            })
            .collect())
    }
}

/// Host copy of `words` 32-bit words at device address `src` into `dst`.
pub fn copy_to_host(drv: &Driver, dst: &mut [u32], src: u64) -> Result<(), ApiError> {
    drv.memcpy_dtoh(dst, src)
}

/// Host memory the smoke test copies pool contents into: page-locked where the driver gives it
/// (the copy engine writes it directly, several times faster than a pageable copy, which the
/// driver stages through its own locked buffer and copies again), else ordinary memory.
pub enum HostWords {
    Pinned(PinnedWords),
    Pageable(Vec<u32>),
}

impl HostWords {
    /// `words` 32-bit words; never fails (pageable memory when locked memory is refused).
    pub fn new(drv: &Driver, words: usize) -> Self {
        match PinnedWords::new(drv, words) {
            Ok(p) => HostWords::Pinned(p),
            Err(_) => HostWords::Pageable(vec![0u32; words]),
        }
    }

    pub fn words(&self) -> &[u32] {
        match self {
            HostWords::Pinned(p) => p.words(),
            HostWords::Pageable(v) => v,
        }
    }

    pub fn words_mut(&mut self) -> &mut [u32] {
        match self {
            HostWords::Pinned(p) => p.words_mut(),
            HostWords::Pageable(v) => v,
        }
    }
}

/// `cuMemAllocHost` memory, freed on drop. Holds the free function rather than the driver, so it
/// can be handed to the thread that compares it.
pub struct PinnedWords {
    ptr: std::ptr::NonNull<u32>,
    len: usize,
    free: unsafe extern "C" fn(*mut c_void) -> sys::CUresult,
}

// SAFETY: the allocation is ordinary host memory owned by this value alone; the driver allows it
// to be used and freed from any thread.
unsafe impl Send for PinnedWords {}

impl PinnedWords {
    fn new(drv: &Driver, len: usize) -> Result<Self, ApiError> {
        // Without the matching free there is no way to give the memory back: do not take it.
        let free = *drv
            .raw()
            .cuMemFreeHost
            .as_ref()
            .map_err(|_| drv.missing("cuMemFreeHost"))?;
        let p = drv.mem_alloc_host(len * std::mem::size_of::<u32>())?;
        let ptr = std::ptr::NonNull::new(p.cast::<u32>()).ok_or_else(|| ApiError {
            api: "cuMemAllocHost".into(),
            code: 0,
            name: Some("NULL_POINTER".into()),
            message: Some("the driver returned success and a null pointer".into()),
        })?;
        Ok(PinnedWords { ptr, len, free })
    }

    fn words(&self) -> &[u32] {
        // SAFETY: `len` words allocated by cuMemAllocHost (suitably aligned), owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn words_mut(&mut self) -> &mut [u32] {
        // SAFETY: as in `words`; &mut self makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for PinnedWords {
    fn drop(&mut self) {
        // SAFETY: the pointer came from cuMemAllocHost and is freed once. A failure leaves the
        // memory to process exit, which is near.
        let _ = unsafe { (self.free)(self.ptr.as_ptr().cast()) };
    }
}
