//! One safe method per driver call the CUDA child makes, in the manner of nvml-wrapper: every
//! argument is computed and bound before the `unsafe` block, which holds nothing but the call;
//! out-parameters are locals of the method; slices carry their own lengths. Device addresses and
//! handles are the driver's to validate (a wrong one is an error code, not host memory touched).
//! The RAII handles built on these are in `gpu.rs`; everything else in the child is safe code.

use std::ffi::c_char;

use super::{Driver, sys};
use crate::report::ApiError;

/// Looks up entry point `$f` (an error naming it when the driver lacks it) and calls it with
/// arguments that are already bound: plain names, never expressions.
macro_rules! call {
    ($drv:expr, $f:ident ( $($arg:ident),* $(,)? )) => {{
        let d: &Driver = $drv;
        match d.raw().$f.as_ref() {
            Err(_) => Err(d.missing(stringify!($f))),
            // SAFETY: the entry point has the signature bindgen derived from cuda.h; every
            // argument was bound before this block, and every pointer among them points to a
            // live local or slice of the calling method, valid (and long enough) for the call.
            Ok(func) => d.check(stringify!($f), unsafe { func($($arg),*) }),
        }
    }};
}

impl Driver {
    pub fn init(&self) -> Result<(), ApiError> {
        let flags = 0;
        call!(self, cuInit(flags))
    }

    /// The CUDA version the driver supports, as `major * 1000 + minor * 10`.
    pub fn version(&self) -> Result<i32, ApiError> {
        let mut v = 0i32;
        let out: *mut i32 = &mut v;
        call!(self, cuDriverGetVersion(out)).map(|()| v)
    }

    pub fn device_count(&self) -> Result<i32, ApiError> {
        let mut n = 0i32;
        let out: *mut i32 = &mut n;
        call!(self, cuDeviceGetCount(out)).map(|()| n)
    }

    pub fn device(&self, ordinal: i32) -> Result<sys::CUdevice, ApiError> {
        let mut dev: sys::CUdevice = 0;
        let out: *mut sys::CUdevice = &mut dev;
        call!(self, cuDeviceGet(out, ordinal)).map(|()| dev)
    }

    pub fn device_name(&self, dev: sys::CUdevice) -> Result<String, ApiError> {
        let mut buf = [0u8; 256];
        let (out, len): (*mut c_char, i32) = (buf.as_mut_ptr().cast(), buf.len() as i32);
        call!(self, cuDeviceGetName(out, len, dev)).map(|()| c_string(&buf))
    }

    pub fn device_pci_bus_id(&self, dev: sys::CUdevice) -> Result<String, ApiError> {
        let mut buf = [0u8; 64];
        let (out, len): (*mut c_char, i32) = (buf.as_mut_ptr().cast(), buf.len() as i32);
        call!(self, cuDeviceGetPCIBusId(out, len, dev)).map(|()| c_string(&buf))
    }

    pub fn device_attribute(
        &self,
        attr: sys::CUdevice_attribute,
        dev: sys::CUdevice,
    ) -> Result<i32, ApiError> {
        let mut v = 0i32;
        let out: *mut i32 = &mut v;
        call!(self, cuDeviceGetAttribute(out, attr, dev)).map(|()| v)
    }

    pub fn device_total_mem(&self, dev: sys::CUdevice) -> Result<usize, ApiError> {
        let mut bytes = 0usize;
        let out: *mut usize = &mut bytes;
        call!(self, cuDeviceTotalMem_v2(out, dev)).map(|()| bytes)
    }

    pub fn can_access_peer(&self, dev: i32, peer: i32) -> Result<bool, ApiError> {
        let mut v = 0i32;
        let out: *mut i32 = &mut v;
        call!(self, cuDeviceCanAccessPeer(out, dev, peer)).map(|()| v != 0)
    }

    pub fn allocation_granularity(
        &self,
        prop: &sys::CUmemAllocationProp,
        option: sys::CUmemAllocationGranularity_flags,
    ) -> Result<usize, ApiError> {
        let mut g = 0usize;
        let out: *mut usize = &mut g;
        let prop: *const sys::CUmemAllocationProp = prop;
        call!(self, cuMemGetAllocationGranularity(out, prop, option)).map(|()| g)
    }

    /// Free and total memory of the current context's device.
    pub fn mem_info(&self) -> Result<(usize, usize), ApiError> {
        let (mut free, mut total) = (0usize, 0usize);
        let (f, t): (*mut usize, *mut usize) = (&mut free, &mut total);
        call!(self, cuMemGetInfo_v2(f, t)).map(|()| (free, total))
    }

    pub fn primary_ctx_retain(&self, dev: sys::CUdevice) -> Result<sys::CUcontext, ApiError> {
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        let out: *mut sys::CUcontext = &mut ctx;
        call!(self, cuDevicePrimaryCtxRetain(out, dev)).map(|()| ctx)
    }

    pub fn primary_ctx_release(&self, dev: sys::CUdevice) -> Result<(), ApiError> {
        call!(self, cuDevicePrimaryCtxRelease_v2(dev))
    }

    pub fn ctx_set_current(&self, ctx: sys::CUcontext) -> Result<(), ApiError> {
        call!(self, cuCtxSetCurrent(ctx))
    }

    pub fn ctx_synchronize(&self) -> Result<(), ApiError> {
        call!(self, cuCtxSynchronize())
    }

    /// Lets the current context access `peer`'s memory.
    pub fn ctx_enable_peer_access(&self, peer: sys::CUcontext) -> Result<(), ApiError> {
        let flags = 0;
        call!(self, cuCtxEnablePeerAccess(peer, flags))
    }

    pub fn stream_create(&self, flags: u32) -> Result<sys::CUstream, ApiError> {
        let mut s: sys::CUstream = std::ptr::null_mut();
        let out: *mut sys::CUstream = &mut s;
        call!(self, cuStreamCreate(out, flags)).map(|()| s)
    }

    pub fn stream_synchronize(&self, stream: sys::CUstream) -> Result<(), ApiError> {
        call!(self, cuStreamSynchronize(stream))
    }

    pub fn stream_destroy(&self, stream: sys::CUstream) -> Result<(), ApiError> {
        call!(self, cuStreamDestroy_v2(stream))
    }

    pub fn mem_alloc(&self, bytes: usize) -> Result<sys::CUdeviceptr, ApiError> {
        let mut ptr: sys::CUdeviceptr = 0;
        let out: *mut sys::CUdeviceptr = &mut ptr;
        call!(self, cuMemAlloc_v2(out, bytes)).map(|()| ptr)
    }

    pub fn mem_free(&self, ptr: sys::CUdeviceptr) -> Result<(), ApiError> {
        call!(self, cuMemFree_v2(ptr))
    }

    /// Page-locked host memory (`cuMemAllocHost`); the caller owns it (`gpu::PinnedWords`).
    pub fn mem_alloc_host(&self, bytes: usize) -> Result<*mut std::ffi::c_void, ApiError> {
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        let out: *mut *mut std::ffi::c_void = &mut p;
        call!(self, cuMemAllocHost_v2(out, bytes)).map(|()| p)
    }

    /// Loads a module from a NUL-terminated image (PTX text).
    pub fn module_load_data(&self, image: &std::ffi::CStr) -> Result<sys::CUmodule, ApiError> {
        let mut module: sys::CUmodule = std::ptr::null_mut();
        let out: *mut sys::CUmodule = &mut module;
        let data: *const std::ffi::c_void = image.as_ptr().cast();
        call!(self, cuModuleLoadData(out, data)).map(|()| module)
    }

    pub fn module_get_function(
        &self,
        module: sys::CUmodule,
        name: &std::ffi::CStr,
    ) -> Result<sys::CUfunction, ApiError> {
        let mut f: sys::CUfunction = std::ptr::null_mut();
        let out: *mut sys::CUfunction = &mut f;
        let name: *const c_char = name.as_ptr();
        call!(self, cuModuleGetFunction(out, module, name)).map(|()| f)
    }

    pub fn module_unload(&self, module: sys::CUmodule) -> Result<(), ApiError> {
        call!(self, cuModuleUnload(module))
    }

    /// Copies `src` to device memory at `dst`, queued on `stream` (a pageable source is staged
    /// before the call returns).
    pub fn memcpy_htod_async(
        &self,
        dst: sys::CUdeviceptr,
        src: &[u64],
        stream: sys::CUstream,
    ) -> Result<(), ApiError> {
        let (from, bytes): (*const std::ffi::c_void, usize) =
            (src.as_ptr().cast(), std::mem::size_of_val(src));
        call!(self, cuMemcpyHtoDAsync_v2(dst, from, bytes, stream))
    }

    /// Copies `dst.len()` elements from device memory at `src` into `dst`.
    pub fn memcpy_dtoh<T: Copy>(
        &self,
        dst: &mut [T],
        src: sys::CUdeviceptr,
    ) -> Result<(), ApiError> {
        let (to, bytes): (*mut std::ffi::c_void, usize) =
            (dst.as_mut_ptr().cast(), std::mem::size_of_val(dst));
        call!(self, cuMemcpyDtoH_v2(to, src, bytes))
    }

    pub fn memcpy_peer(
        &self,
        dst: sys::CUdeviceptr,
        dst_ctx: sys::CUcontext,
        src: sys::CUdeviceptr,
        src_ctx: sys::CUcontext,
        bytes: usize,
    ) -> Result<(), ApiError> {
        call!(self, cuMemcpyPeer(dst, dst_ctx, src, src_ctx, bytes))
    }

    /// Launches `f` on `stream` with `blocks` x `threads` threads. `params` must match the
    /// kernel's parameters; the smoke kernels' wrappers in `gpu.rs` are the only callers.
    pub(super) fn launch_kernel(
        &self,
        f: sys::CUfunction,
        blocks: u32,
        threads: u32,
        stream: sys::CUstream,
        params: &mut [*mut std::ffi::c_void],
    ) -> Result<(), ApiError> {
        let (one, shared) = (1u32, 0u32);
        let kernel_params: *mut *mut std::ffi::c_void = params.as_mut_ptr();
        let extra: *mut *mut std::ffi::c_void = std::ptr::null_mut();
        call!(
            self,
            cuLaunchKernel(
                f,
                blocks,
                one,
                one,
                threads,
                one,
                one,
                shared,
                stream,
                kernel_params,
                extra
            )
        )
    }

    /// A physical allocation of `bytes` with `prop`.
    pub fn mem_create(
        &self,
        bytes: usize,
        prop: &sys::CUmemAllocationProp,
    ) -> Result<sys::CUmemGenericAllocationHandle, ApiError> {
        let mut handle: sys::CUmemGenericAllocationHandle = 0;
        let out: *mut sys::CUmemGenericAllocationHandle = &mut handle;
        let prop: *const sys::CUmemAllocationProp = prop;
        let flags = 0;
        call!(self, cuMemCreate(out, bytes, prop, flags)).map(|()| handle)
    }

    pub fn mem_release(&self, handle: sys::CUmemGenericAllocationHandle) -> Result<(), ApiError> {
        call!(self, cuMemRelease(handle))
    }

    /// Reserves `bytes` of virtual address space (alignment and address left to the driver).
    pub fn mem_address_reserve(&self, bytes: usize) -> Result<sys::CUdeviceptr, ApiError> {
        let mut base: sys::CUdeviceptr = 0;
        let out: *mut sys::CUdeviceptr = &mut base;
        let (alignment, addr, flags) = (0usize, 0, 0);
        call!(
            self,
            cuMemAddressReserve(out, bytes, alignment, addr, flags)
        )
        .map(|()| base)
    }

    pub fn mem_address_free(&self, base: sys::CUdeviceptr, bytes: usize) -> Result<(), ApiError> {
        call!(self, cuMemAddressFree(base, bytes))
    }

    /// Maps `handle` (from its start) at `at`.
    pub fn mem_map(
        &self,
        at: sys::CUdeviceptr,
        bytes: usize,
        handle: sys::CUmemGenericAllocationHandle,
    ) -> Result<(), ApiError> {
        let (offset, flags) = (0usize, 0);
        call!(self, cuMemMap(at, bytes, offset, handle, flags))
    }

    pub fn mem_unmap(&self, at: sys::CUdeviceptr, bytes: usize) -> Result<(), ApiError> {
        call!(self, cuMemUnmap(at, bytes))
    }

    pub fn mem_set_access(
        &self,
        at: sys::CUdeviceptr,
        bytes: usize,
        access: &[sys::CUmemAccessDesc],
    ) -> Result<(), ApiError> {
        let (desc, count): (*const sys::CUmemAccessDesc, usize) = (access.as_ptr(), access.len());
        call!(self, cuMemSetAccess(at, bytes, desc, count))
    }
}

fn c_string(buf: &[u8]) -> String {
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).trim().to_string()
}
