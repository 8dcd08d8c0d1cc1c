// compat.h: the small portability layer that lets gpuprobe-probe.cpp build with both hipcc (HIP)
// and nvcc (CUDA) from one source.
//
// The probe code uses only `gp*` names. Here they become the CUDA runtime / driver names or the HIP
// names. Runtime calls map one to one. The virtual-memory (VMM) calls differ more:
//   * HIP: hipMem* live in the HIP runtime library and take `void*` addresses.
//   * CUDA: cuMem* live in the driver (libcuda). The probe must not link libcuda (the PyPI CUDA wheels
//     carry no libcuda stub, and a machine with only a driver must still run it), so the entry points
//     are fetched at run time through cudart (cudaGetDriverEntryPointByVersion) using the PFN typedefs
//     of cudaTypedefs.h. Addresses are CUdeviceptr.
// Both are wrapped here behind one signature that takes `gp_va` (a 64-bit virtual address) so that the
// probe code has no #if for them.
//
// HIP ABI notes (why this file avoids some shortcuts):
//   * hipMemAllocationProp changed its member order after ROCm 5.2 (5.2.3 starts with compressionType;
//     later versions start with type). The prop is therefore zero-initialised and filled by member
//     name, never by position.
//   * hipDeviceAttributeVirtualMemoryManagementSupported appears in ROCm 5.3 headers; its value is 89
//     from 5.3 through 7.x. Debian's 5.2.3 headers lack it, so the literal is used there.
//   * What this file and the probe rely on in each header generation (member types and offsets, struct
//     sizes, enum values) is asserted at compile time by compat-hip-check.cpp, which CI builds against
//     every generation it has (scripts/build-probe.sh hip-check).
//   * Kernels use amdgcn builtins for thread/block ids instead of threadIdx/blockIdx, so that they
//     need no ROCm device library (lets gfx11/gfx12 targets build with `-nogpulib` where the
//     toolchain's device libs stop short of them).
#ifndef GPUPROBE_COMPAT_H
#define GPUPROBE_COMPAT_H

#include <stdint.h>
#include <string.h>

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__)
#define GP_HIP 1
#else
#define GP_HIP 0
#endif

// A virtual address in device address space, whatever the vendor's pointer type.
typedef unsigned long long gp_va;

#if GP_HIP
// ============================================================================================ HIP
#include <hip/hip_runtime.h>
#include <hip/hip_version.h>

// The header generation, from the macros of hip_version.h.
#define GP_HIP_AT_LEAST(major, minor) \
    (HIP_VERSION_MAJOR > (major) || (HIP_VERSION_MAJOR == (major) && HIP_VERSION_MINOR >= (minor)))

#define GP_BACKEND "hip"
#define GP_RT_PREFIX "hip"   // prefix of runtime API names in error reports
#define GP_DRV_PREFIX "hip"  // prefix of VMM API names in error reports

typedef hipError_t gpError_t;
typedef hipError_t gpDrvResult;
typedef hipDeviceProp_t gpDeviceProp;
typedef hipDeviceAttribute_t gpDeviceAttr;
typedef hipMemGenericAllocationHandle_t gpMemHandle;
typedef hipMemAllocationProp gpMemAllocationProp;
typedef hipMemAccessDesc gpMemAccessDesc;
typedef hipMemAllocationGranularity_flags gpGranularityFlags;
typedef int gpDevice;

#define gpSuccess hipSuccess
#define gpErrorPeerAccessAlreadyEnabled hipErrorPeerAccessAlreadyEnabled
#define gpGetErrorName hipGetErrorName
#define gpGetErrorString hipGetErrorString
#define gpGetDeviceCount hipGetDeviceCount
#define gpSetDevice hipSetDevice
#define gpGetDeviceProperties hipGetDeviceProperties
#define gpDeviceGetAttribute hipDeviceGetAttribute
#define gpMemGetInfo hipMemGetInfo
#define gpMalloc hipMalloc
#define gpFree hipFree
#define gpMemcpy hipMemcpy
#define gpMemset hipMemset
#define gpMemcpyHostToDevice hipMemcpyHostToDevice
#define gpMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpDeviceSynchronize hipDeviceSynchronize
#define gpGetLastError hipGetLastError
#define gpDriverGetVersion hipDriverGetVersion
#define gpRuntimeGetVersion hipRuntimeGetVersion
#define gpDeviceCanAccessPeer hipDeviceCanAccessPeer
#define gpDeviceEnablePeerAccess hipDeviceEnablePeerAccess
#define gpMemcpyPeer hipMemcpyPeer
#define gpHostMalloc(p, bytes) hipHostMalloc((p), (bytes), 0)
#define gpHostFree hipHostFree

#define GP_ATTR_INTEGRATED hipDeviceAttributeIntegrated
#define GP_ATTR_WARP_SIZE hipDeviceAttributeWarpSize
#define GP_ATTR_PCI_DOMAIN hipDeviceAttributePciDomainID
#define GP_ATTR_PCI_BUS hipDeviceAttributePciBusId
#define GP_ATTR_PCI_DEVICE hipDeviceAttributePciDeviceId
// Named from HIP 5.3 on. Debian's 5.2.3 headers lack the name; its value is 89 in every generation
// that has it (probes/compat-hip-check.cpp asserts that for each header generation CI compiles), so a
// 5.2 build asks a newer libamdhip64.so.5 the same question.
#if GP_HIP_AT_LEAST(5, 3)
#define GP_ATTR_VMM hipDeviceAttributeVirtualMemoryManagementSupported
#else
#define GP_ATTR_VMM ((hipDeviceAttribute_t)89)
#endif

#define GP_GRANULARITY_MINIMUM hipMemAllocationGranularityMinimum
#define GP_GRANULARITY_RECOMMENDED hipMemAllocationGranularityRecommended

// Kernel-side ids without the device library (see the header comment).
#define gp_thread_id() ((unsigned)__builtin_amdgcn_workitem_id_x())
#define gp_block_id() ((unsigned)__builtin_amdgcn_workgroup_id_x())

static inline const char* gpDrvErrorName(gpDrvResult r) { return hipGetErrorName(r); }
static inline const char* gpDrvErrorString(gpDrvResult r) { return hipGetErrorString(r); }

// Nothing to load: hipMem* are part of the runtime library.
struct GpDrvLoadError {
    const char* api;
    long long code;
    const char* name;
    const char* message;
};
static inline bool gpDriverLoad(GpDrvLoadError* e) {
    (void)e;
    return true;
}

static inline gpDrvResult gpDeviceGet(gpDevice* d, int ordinal) {
    *d = ordinal;
    return hipSuccess;
}
static inline gpDrvResult gpDeviceVmmSupported(int* v, gpDevice d) {
    return hipDeviceGetAttribute(v, GP_ATTR_VMM, d);
}
static inline gpDrvResult gpMemAddressReserve(gp_va* p, size_t size, size_t align, gp_va addr,
                                              unsigned long long flags) {
    void* v = nullptr;
    hipError_t r = hipMemAddressReserve(&v, size, align, (void*)(uintptr_t)addr, flags);
    *p = (gp_va)(uintptr_t)v;
    return r;
}
static inline gpDrvResult gpMemAddressFree(gp_va p, size_t size) {
    return hipMemAddressFree((void*)(uintptr_t)p, size);
}
static inline gpDrvResult gpMemCreate(gpMemHandle* h, size_t size, const gpMemAllocationProp* prop,
                                      unsigned long long flags) {
    return hipMemCreate(h, size, prop, flags);
}
static inline gpDrvResult gpMemRelease(gpMemHandle h) { return hipMemRelease(h); }
static inline gpDrvResult gpMemMap(gp_va p, size_t size, size_t offset, gpMemHandle h,
                                   unsigned long long flags) {
    return hipMemMap((void*)(uintptr_t)p, size, offset, h, flags);
}
static inline gpDrvResult gpMemUnmap(gp_va p, size_t size) {
    return hipMemUnmap((void*)(uintptr_t)p, size);
}
static inline gpDrvResult gpMemSetAccess(gp_va p, size_t size, const gpMemAccessDesc* desc,
                                         size_t count) {
    return hipMemSetAccess((void*)(uintptr_t)p, size, desc, count);
}
static inline gpDrvResult gpMemGetAllocationGranularity(size_t* g, const gpMemAllocationProp* prop,
                                                        gpGranularityFlags option) {
    return hipMemGetAllocationGranularity(g, prop, option);
}

// Pinned device memory on `d`, the prop llama.cpp's VMM pool uses. Filled by member name only.
static inline gpMemAllocationProp gp_pinned_prop(gpDevice d) {
    gpMemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = hipMemAllocationTypePinned;
    prop.location.type = hipMemLocationTypeDevice;
    prop.location.id = d;
    return prop;
}
static inline gpMemAccessDesc gp_readwrite_access(gpDevice d) {
    gpMemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = hipMemLocationTypeDevice;
    desc.location.id = d;
    desc.flags = hipMemAccessFlagsProtReadWrite;
    return desc;
}

// Streams, and a device clock at a constant rate (the smoke test's busy kernel). gp_wall_ticks()
// is negative where the target has no constant-rate counter; the busy kernel then makes one pass.
typedef hipStream_t gpStream_t;
#define gpStreamNonBlocking hipStreamNonBlocking
#define gpStreamCreateWithFlags hipStreamCreateWithFlags
#define gpStreamSynchronize hipStreamSynchronize
#define gpStreamDestroy hipStreamDestroy
#define gpMemcpyAsync hipMemcpyAsync
__device__ static inline long long gp_wall_ticks() {
#if defined(__HIP_DEVICE_COMPILE__) && __has_builtin(__builtin_readsteadycounter)
    return (long long)__builtin_readsteadycounter();  // s_memrealtime, or s_sendmsg_rtn on gfx11+
#elif defined(__HIP_DEVICE_COMPILE__) && __has_builtin(__builtin_amdgcn_s_memrealtime)
    return (long long)__builtin_amdgcn_s_memrealtime();
#else
    return -1;
#endif
}
// Ticks of gp_wall_ticks() per millisecond. ROCm 6 reports the rate; before it, 100 MHz is the
// counter's rate on the GPUs those versions support.
static inline int gpWallTicksPerMs(int device) {
#if HIP_VERSION >= 60000000
    int khz = 0;
    if (hipDeviceGetAttribute(&khz, hipDeviceAttributeWallClockRate, device) == hipSuccess && khz > 0) return khz;
    (void)hipGetLastError();
#else
    (void)device;
#endif
    return 100000;
}

#else
// =========================================================================================== CUDA
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#define GP_BACKEND "cuda"
#define GP_RT_PREFIX "cuda"
#define GP_DRV_PREFIX "cu"

typedef cudaError_t gpError_t;
typedef CUresult gpDrvResult;
typedef cudaDeviceProp gpDeviceProp;
typedef cudaDeviceAttr gpDeviceAttr;
typedef CUmemGenericAllocationHandle gpMemHandle;
typedef CUmemAllocationProp gpMemAllocationProp;
typedef CUmemAccessDesc gpMemAccessDesc;
typedef CUmemAllocationGranularity_flags gpGranularityFlags;
typedef CUdevice gpDevice;

#define gpSuccess cudaSuccess
#define gpErrorPeerAccessAlreadyEnabled cudaErrorPeerAccessAlreadyEnabled
#define gpGetErrorName cudaGetErrorName
#define gpGetErrorString cudaGetErrorString
#define gpGetDeviceCount cudaGetDeviceCount
#define gpSetDevice cudaSetDevice
#define gpGetDeviceProperties cudaGetDeviceProperties
#define gpDeviceGetAttribute cudaDeviceGetAttribute
#define gpMemGetInfo cudaMemGetInfo
#define gpMalloc cudaMalloc
#define gpFree cudaFree
#define gpMemcpy cudaMemcpy
#define gpMemset cudaMemset
#define gpMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpDeviceSynchronize cudaDeviceSynchronize
#define gpGetLastError cudaGetLastError
#define gpDriverGetVersion cudaDriverGetVersion
#define gpRuntimeGetVersion cudaRuntimeGetVersion
#define gpDeviceCanAccessPeer cudaDeviceCanAccessPeer
#define gpDeviceEnablePeerAccess cudaDeviceEnablePeerAccess
#define gpMemcpyPeer cudaMemcpyPeer
#define gpHostMalloc(p, bytes) cudaMallocHost((p), (bytes))
#define gpHostFree cudaFreeHost

#define GP_ATTR_INTEGRATED cudaDevAttrIntegrated
#define GP_ATTR_WARP_SIZE cudaDevAttrWarpSize
#define GP_ATTR_PCI_DOMAIN cudaDevAttrPciDomainId
#define GP_ATTR_PCI_BUS cudaDevAttrPciBusId
#define GP_ATTR_PCI_DEVICE cudaDevAttrPciDeviceId
#define GP_ATTR_CC_MAJOR cudaDevAttrComputeCapabilityMajor
#define GP_ATTR_CC_MINOR cudaDevAttrComputeCapabilityMinor

#define GP_GRANULARITY_MINIMUM CU_MEM_ALLOC_GRANULARITY_MINIMUM
#define GP_GRANULARITY_RECOMMENDED CU_MEM_ALLOC_GRANULARITY_RECOMMENDED

#define gp_thread_id() (threadIdx.x)
#define gp_block_id() (blockIdx.x)

// Driver entry points, fetched through cudart. The version numbers are the CUDA versions that
// introduced each symbol's current ABI (the suffix of its PFN typedef).
struct GpDriverTable {
    bool loaded;
    PFN_cuGetErrorName_v6000 getErrorName;
    PFN_cuGetErrorString_v6000 getErrorString;
    PFN_cuDeviceGet_v2000 deviceGet;
    PFN_cuDeviceGetAttribute_v2000 deviceGetAttribute;
    PFN_cuMemAddressReserve_v10020 memAddressReserve;
    PFN_cuMemAddressFree_v10020 memAddressFree;
    PFN_cuMemCreate_v10020 memCreate;
    PFN_cuMemRelease_v10020 memRelease;
    PFN_cuMemMap_v10020 memMap;
    PFN_cuMemUnmap_v10020 memUnmap;
    PFN_cuMemSetAccess_v10020 memSetAccess;
    PFN_cuMemGetAllocationGranularity_v10020 memGetAllocationGranularity;
};
static GpDriverTable gp_drv;

struct GpDrvLoadError {
    const char* api;
    long long code;
    const char* name;     // error name (cudaError_t name, or the entry-point query result)
    const char* message;  // the symbol that could not be had
};

// Fetch one driver symbol at ABI version `version`. False (with *e filled) when cudart or the driver
// cannot provide it.
static inline bool gp_entry_point(const char* symbol, void** fn, unsigned version, GpDrvLoadError* e) {
    *fn = nullptr;
#if CUDART_VERSION >= 12050
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSuccess;
    cudaError_t r = cudaGetDriverEntryPointByVersion(symbol, fn, version, cudaEnableDefault, &q);
    const char* api = "cudaGetDriverEntryPointByVersion";
#elif CUDART_VERSION >= 12000
    (void)version;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSuccess;
    cudaError_t r = cudaGetDriverEntryPoint(symbol, fn, cudaEnableDefault, &q);
    const char* api = "cudaGetDriverEntryPoint";
#else
    (void)version;
    int q = 0;  // CUDA 11 reports no query result
    cudaError_t r = cudaGetDriverEntryPoint(symbol, fn, cudaEnableDefault);
    const char* api = "cudaGetDriverEntryPoint";
#endif
    if (r != cudaSuccess) {
        e->api = api;
        e->code = (long long)r;
        e->name = cudaGetErrorName(r);
        e->message = symbol;
        return false;
    }
#if CUDART_VERSION >= 12000
    const bool found = q == cudaDriverEntryPointSuccess && *fn != nullptr;
    const char* why = q == cudaDriverEntryPointVersionNotSufficent ? "cudaDriverEntryPointVersionNotSufficent"
                                                                    : "cudaDriverEntryPointSymbolNotFound";
#else
    const bool found = *fn != nullptr;
    const char* why = "cudaDriverEntryPointSymbolNotFound";
#endif
    if (!found) {
        e->api = api;
        e->code = (long long)q;
        e->name = why;
        e->message = symbol;
        *fn = nullptr;
        return false;
    }
    return true;
}

#define GP_ENTRY(sym, field, ver)                                                        \
    do {                                                                                 \
        void* fp_ = nullptr;                                                             \
        if (!gp_entry_point(sym, &fp_, ver, e)) return false;                            \
        memcpy(&gp_drv.field, &fp_, sizeof fp_);                                         \
    } while (0)

static inline bool gpDriverLoad(GpDrvLoadError* e) {
    if (gp_drv.loaded) return true;
    GP_ENTRY("cuGetErrorName", getErrorName, 6000);
    GP_ENTRY("cuGetErrorString", getErrorString, 6000);
    GP_ENTRY("cuDeviceGet", deviceGet, 2000);
    GP_ENTRY("cuDeviceGetAttribute", deviceGetAttribute, 2000);
    GP_ENTRY("cuMemAddressReserve", memAddressReserve, 10020);
    GP_ENTRY("cuMemAddressFree", memAddressFree, 10020);
    GP_ENTRY("cuMemCreate", memCreate, 10020);
    GP_ENTRY("cuMemRelease", memRelease, 10020);
    GP_ENTRY("cuMemMap", memMap, 10020);
    GP_ENTRY("cuMemUnmap", memUnmap, 10020);
    GP_ENTRY("cuMemSetAccess", memSetAccess, 10020);
    GP_ENTRY("cuMemGetAllocationGranularity", memGetAllocationGranularity, 10020);
    gp_drv.loaded = true;
    return true;
}
#undef GP_ENTRY

static inline const char* gpDrvErrorName(gpDrvResult r) {
    const char* s = nullptr;
    if (gp_drv.getErrorName == nullptr || gp_drv.getErrorName(r, &s) != CUDA_SUCCESS) return nullptr;
    return s;
}
static inline const char* gpDrvErrorString(gpDrvResult r) {
    const char* s = nullptr;
    if (gp_drv.getErrorString == nullptr || gp_drv.getErrorString(r, &s) != CUDA_SUCCESS) return nullptr;
    return s;
}

// All wrappers below require a successful gpDriverLoad() first.
static inline gpDrvResult gpDeviceGet(gpDevice* d, int ordinal) { return gp_drv.deviceGet(d, ordinal); }
static inline gpDrvResult gpDeviceVmmSupported(int* v, gpDevice d) {
    return gp_drv.deviceGetAttribute(v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d);
}
static inline gpDrvResult gpMemAddressReserve(gp_va* p, size_t size, size_t align, gp_va addr,
                                              unsigned long long flags) {
    CUdeviceptr v = 0;
    CUresult r = gp_drv.memAddressReserve(&v, size, align, (CUdeviceptr)addr, flags);
    *p = (gp_va)v;
    return r;
}
static inline gpDrvResult gpMemAddressFree(gp_va p, size_t size) {
    return gp_drv.memAddressFree((CUdeviceptr)p, size);
}
static inline gpDrvResult gpMemCreate(gpMemHandle* h, size_t size, const gpMemAllocationProp* prop,
                                      unsigned long long flags) {
    return gp_drv.memCreate(h, size, prop, flags);
}
static inline gpDrvResult gpMemRelease(gpMemHandle h) { return gp_drv.memRelease(h); }
static inline gpDrvResult gpMemMap(gp_va p, size_t size, size_t offset, gpMemHandle h,
                                   unsigned long long flags) {
    return gp_drv.memMap((CUdeviceptr)p, size, offset, h, flags);
}
static inline gpDrvResult gpMemUnmap(gp_va p, size_t size) {
    return gp_drv.memUnmap((CUdeviceptr)p, size);
}
static inline gpDrvResult gpMemSetAccess(gp_va p, size_t size, const gpMemAccessDesc* desc,
                                         size_t count) {
    return gp_drv.memSetAccess((CUdeviceptr)p, size, desc, count);
}
static inline gpDrvResult gpMemGetAllocationGranularity(size_t* g, const gpMemAllocationProp* prop,
                                                        gpGranularityFlags option) {
    return gp_drv.memGetAllocationGranularity(g, prop, option);
}

static inline gpMemAllocationProp gp_pinned_prop(gpDevice d) {
    gpMemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = (int)d;
    return prop;
}
static inline gpMemAccessDesc gp_readwrite_access(gpDevice d) {
    gpMemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = (int)d;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return desc;
}

// Streams, and a device clock at a constant rate (%globaltimer, nanoseconds).
typedef cudaStream_t gpStream_t;
#define gpStreamNonBlocking cudaStreamNonBlocking
#define gpStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpStreamSynchronize cudaStreamSynchronize
#define gpStreamDestroy cudaStreamDestroy
#define gpMemcpyAsync cudaMemcpyAsync
__device__ static inline long long gp_wall_ticks() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return (long long)t;
}
static inline int gpWallTicksPerMs(int device) {
    (void)device;
    return 1000000;
}

#endif  // GP_HIP

#endif  // GPUPROBE_COMPAT_H
