/*
 * FAKE libcuda.so.1 for gpuprobe's failure-injection tests (tests/cuda_faults.rs).
 *
 * This is NOT a CUDA driver and measures nothing. It exports the driver-API functions that
 * src/probe/cuda/sys.rs loads, with the C signatures of cuda.h, and behaves as the environment
 * variable FAKE_CUDA_SCENARIO says, so that the CUDA child's isolation, reporting and the
 * flag decision can be tested on machines without a GPU:
 *
 *   ok                   one "Fake GPU" (sm_90, 80 GiB, VMM, 2 MiB granularity); "device"
 *                        memory is host memory and the smoke kernels (probes/PROTOCOL.md,
 *                        Kernel ABI) are emulated on the host through the mapping table, at
 *                        launch; streams are in order, so that is what a stream would see.
 *   offset_access_fails  cuMemSetAccess fails (CUDA_ERROR_INVALID_VALUE) unless ptr is the
 *                        reservation base; access over the whole range from the base works.
 *   setaccess_prefix_sum cuMemSetAccess validates `size` the way ROCm 7.0-7.2's hipMemSetAccess
 *                        does (quirk Q3; ROCm/clr hipamd/src/hip_vm.cpp before rocm-systems PR
 *                        #2451): it adds up the reservation's mapped sub-buffers from the FIRST
 *                        one, whatever ptr is, and fails unless the running total hits `size`.
 *                        Equal chunks pass (the first sub-buffer already matches); a growth of
 *                        another size fails; access over the whole mapped range passes.
 *   map_window           for FAKE_CUDA_WINDOW_MS (default 2) ms after cuMemMap, kernels reach
 *                        the new mapping through a stale translation: their stores land in a
 *                        shadow page and their loads read it back, so a write and a verify right
 *                        after the map agree. Afterwards kernels and copies see the real memory,
 *                        which never got the data and reads zeros (rocm-systems#11693).
 *   peer_reads_fail      a kernel reading VMM memory of another device reads zeros, though
 *                        access was granted (ordinary peer copies still work).
 *   reads_zeros          mappings after the first chunk of a reservation read back zeros and
 *                        lose stores.
 *   reserve_fails        cuMemAddressReserve of >= 32 GiB: CUDA_ERROR_OUT_OF_MEMORY.
 *   init_segv            cuInit dereferences a bad pointer (SIGSEGV).
 *   init_abort           cuInit calls abort() (SIGABRT).
 *   hang_verify          cuCtxSynchronize and cuStreamSynchronize write getpid() to
 *                        $FAKE_CUDA_PIDFILE, then sleep forever (with FAKE_CUDA_HANG_DEVICE=N
 *                        only while device N's context is current).
 *   init_hang            the same in cuInit (before the child can say hello).
 *   hang_context         the same in cuDevicePrimaryCtxRetain of device FAKE_CUDA_HANG_DEVICE
 *                        (default 0).
 *   no_device            cuInit: CUDA_ERROR_NO_DEVICE.
 *   stub                 cuInit: CUDA_ERROR_STUB_LIBRARY.
 *   garbage              cuInit writes "NVRM: oops" to stdout, then everything works.
 *   garbage_exit         cuInit writes "NVRM: oops" to stdout and exits 0 at once.
 *   partial              the second cuMemMap of the process exits 0 (a report cut short).
 *   crash_map            cuMemMap of memory on device FAKE_CUDA_CRASH_DEVICE (default 0)
 *                        dereferences a bad pointer (SIGSEGV): one faulty GPU, in whatever
 *                        process probes it.
 *   neighbours           another process (pid NEIGHBOUR_PID) shares every GPU: it holds nothing
 *                        until the probe's first cuMemCreate, then takes and gives back memory
 *                        on every cuMemCreate, alternating NEIGHBOUR_HIGH and NEIGHBOUR_LOW, so
 *                        free VRAM (cuMemGetInfo) moves both ways by more than the probe's own
 *                        footprint and ends lower than it began (issue #28).
 *   leak                 cuMemRelease of the last reference keeps the memory charged to the
 *                        process (free VRAM and the NVML accounting both keep it): a real leak.
 *
 * Memory is finite: cuMemCreate fails with CUDA_ERROR_OUT_OF_MEMORY where the process's
 * allocations and the neighbour's would exceed the free VRAM.
 *
 * The same library answers a few NVML calls (tests point GPUPROBE_LIBNVML at it): nvmlInit_v2,
 * nvmlShutdown, nvmlDeviceGetHandleByPciBusId_v2 and nvmlDeviceGetComputeRunningProcesses_v3,
 * which lists this process (with a context: what it allocated plus FAKE_CONTEXT_BYTES) and, in
 * the neighbours scenario, the neighbour with what it holds.
 *
 * Threads: gpuprobe's shared CUDA child probes every device from its own thread. As in CUDA, the
 * current context belongs to the thread, sticky errors belong to the context, and free memory
 * (cuMemGetInfo) to the device; a call that hangs lets go of the fake's lock first, as a thread
 * waiting on one GPU does not stop the others.
 *
 *   FAKE_CUDA_DEVICES=N       N devices (default 1, at most 8).
 *   FAKE_CUDA_FREE_MIB=N      free VRAM before anything is allocated (default 79 GiB); what the
 *                             fake allocates is taken off it.
 *   FAKE_CUDA_PEER=yes|no     cuDeviceCanAccessPeer's answer (default yes).
 *   FAKE_CUDA_PEER_CORRUPT=1  cuMemcpyPeer flips one byte in every MiB it copies.
 *   FAKE_CUDA_INIT_MS=N       cuInit takes N ms (for orchestration tests: children overlap).
 *
 * Built with -DFAKE_OLD_DRIVER it does not export cuMemCreate, cuMemMap, cuMemSetAccess and
 * cuMemAddressReserve (a driver too old for the VMM API), while still reporting the VMM
 * attribute and granularity, so the child meets the missing symbols in the smoke test.
 */
#define _GNU_SOURCE /* PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef unsigned int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct fake_ctx *CUcontext;
typedef struct fake_module *CUmodule;
typedef struct fake_function *CUfunction;
typedef void *CUstream;

/* Layouts as in cuda.h (CUmemLocation, CUmemAllocationProp, CUmemAccessDesc). */
typedef struct {
    unsigned int type;
    union {
        int id;
        struct {
            unsigned char deviceId;
            unsigned char localityDomainId;
        } localized;
    } u;
} CUmemLocation;

typedef struct {
    unsigned int type;
    unsigned int requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;

typedef struct {
    CUmemLocation location;
    unsigned int flags;
} CUmemAccessDesc;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
    CUDA_ERROR_MISALIGNED_ADDRESS = 716,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999,
};

/* Attribute numbers from cuda.h's CUdevice_attribute. */
enum {
    ATTR_WARP_SIZE = 10,
    ATTR_INTEGRATED = 18,
    ATTR_CC_MAJOR = 75,
    ATTR_CC_MINOR = 76,
    ATTR_VMM_SUPPORTED = 102,
};

#define CU_MEM_ALLOCATION_TYPE_PINNED 1u
#define CU_MEM_LOCATION_TYPE_DEVICE 1u
#define CU_MEM_ACCESS_FLAGS_PROT_READ 1u
#define CU_MEM_ACCESS_FLAGS_PROT_READWRITE 3u

#define GIB (1ull << 30)
#define MIB (1ull << 20)
#define GRANULARITY (2 * MIB)
#define TOTAL_MEM (80 * GIB)
#define FREE_MEM (79 * GIB) /* unless FAKE_CUDA_FREE_MIB says otherwise */
#define MAX_DEVICES 8
#define MAX_RESERVATIONS 64
#define MAX_REGIONS 1024
#define MAX_ALLOCS 1024
#define NEIGHBOUR_PID 4000001u
#define NEIGHBOUR_HIGH (300 * MIB)
#define NEIGHBOUR_LOW (40 * MIB)
#define FAKE_CONTEXT_BYTES (300 * MIB)

/* ---- scenario ---------------------------------------------------------------------------- */

static const char *scenario(void) {
    const char *s = getenv("FAKE_CUDA_SCENARIO");
    return s && *s ? s : "ok";
}

static int is(const char *name) {
    return strcmp(scenario(), name) == 0;
}

static int device_count(void) {
    const char *s = getenv("FAKE_CUDA_DEVICES");
    int n = s ? atoi(s) : 1;
    if (n < 1) n = 1;
    if (n > MAX_DEVICES) n = MAX_DEVICES;
    return n;
}

/* ---- state ------------------------------------------------------------------------------- */

struct fake_module {
    int loaded;
    int has_write;
    int has_verify;
    int has_busy;
    /* The previous kernel ABI (protocol 1: gpuprobe_verify(base, count, cycle, u32 counters[2])),
     * emulated too, so the previous code can be run against the scenarios above. */
    int abi_v1;
};
struct fake_ctx {
    int device;
    int refs;
    /* A fault inside an emulated kernel: reported by the next synchronising call in this context,
     * and every call after it (CUDA's sticky errors). */
    CUresult sticky;
    int peers[MAX_DEVICES];
    struct fake_module module;
};
struct fake_function {
    int kind; /* 1 write, 2 verify, 3 busy */
};

static int initialised;
static struct fake_ctx contexts[MAX_DEVICES];
/* Like CUDA's, the current context belongs to the thread. */
static __thread struct fake_ctx *current;
/* Everything else is shared: one lock around every entry point (held while a call hangs, as a
 * hung driver call would block the others). */
static pthread_mutex_t big_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static void unlock_big(int *unused) {
    (void)unused;
    pthread_mutex_unlock(&big_lock);
}
#define API_LOCK()                 \
    pthread_mutex_lock(&big_lock); \
    __attribute__((cleanup(unlock_big))) int api_lock_guard_ = 0;  \
    (void)api_lock_guard_
static struct fake_function fn_write = {1};
static struct fake_function fn_verify = {2};
static struct fake_function fn_busy = {3};
/* Bytes allocated per device (cuMemCreate, cuMemAlloc): cuMemGetInfo takes them off the free
 * memory of the current context's device. */
static unsigned long long allocated_bytes[MAX_DEVICES];
/* leak: released memory that stays charged to the process. */
static unsigned long long leaked_bytes[MAX_DEVICES];
/* neighbours: cuMemCreate calls so far (what the neighbour holds follows them). */
static unsigned long creates_done;

static long env_long(const char *name, long fallback);

static unsigned long long neighbour_bytes(void) {
    if (!is("neighbours") || creates_done == 0) return 0;
    return creates_done % 2 ? NEIGHBOUR_HIGH : NEIGHBOUR_LOW;
}

static unsigned long long free_base(void) {
    long mib = env_long("FAKE_CUDA_FREE_MIB", -1);
    return mib >= 0 ? (unsigned long long)mib * MIB : FREE_MEM;
}

/* Free VRAM of device d: what neither this process nor the neighbour holds. */
static unsigned long long free_of(int d) {
    unsigned long long taken = allocated_bytes[d] + leaked_bytes[d] + neighbour_bytes();
    unsigned long long base = free_base();
    return base > taken ? base - taken : 0;
}

struct reservation {
    CUdeviceptr base;
    size_t size;
    int used;
};
static struct reservation reservations[MAX_RESERVATIONS];
static CUdeviceptr next_va = 0x100000000000ull; /* VMM reservations */
static CUdeviceptr next_linear = 0x7f0000000000ull; /* cuMemAlloc */

struct allocation {
    unsigned char *host;
    size_t size;
    int refs; /* the handle, plus one per mapping */
    int used;
    int device; /* the physical device (prop.location.id) */
};
static struct allocation allocations[MAX_ALLOCS];

/* A range of device addresses backed by host memory: a mapping, or a cuMemAlloc block. */
struct region {
    CUdeviceptr va;
    size_t size;
    unsigned char *host;
    int alloc; /* index into allocations, or -1 for cuMemAlloc */
    unsigned access; /* bit d: read-write access was set for device d */
    int broken; /* reads_zeros: reads give 0, stores are lost */
    int owner; /* device whose memory this is */
    unsigned char *shadow; /* map_window: what kernels reach through the stale translation */
    double mapped_at; /* map_window: when it was mapped (seconds, monotonic) */
    int used;
};
static struct region regions[MAX_REGIONS];

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long env_long(const char *name, long fallback) {
    const char *v = getenv(name);
    return v && *v ? atol(v) : fallback;
}

static void sleep_ns(unsigned long long ns) {
    struct timespec t = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&t, &t) != 0) {
    }
}

static CUresult need_ctx(void) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    if (current->sticky) return current->sticky;
    return CUDA_SUCCESS;
}

static struct region *find_region(CUdeviceptr va) {
    for (int i = 0; i < MAX_REGIONS; i++) {
        struct region *r = &regions[i];
        if (r->used && va >= r->va && va < r->va + r->size) return r;
    }
    return NULL;
}

static struct region *new_region(void) {
    for (int i = 0; i < MAX_REGIONS; i++)
        if (!regions[i].used) {
            memset(&regions[i], 0, sizeof regions[i]);
            regions[i].used = 1;
            return &regions[i];
        }
    return NULL;
}

static void drop_region(struct region *g) {
    free(g->shadow);
    memset(g, 0, sizeof *g);
}

static struct reservation *find_reservation(CUdeviceptr va) {
    for (int i = 0; i < MAX_RESERVATIONS; i++) {
        struct reservation *r = &reservations[i];
        if (r->used && va >= r->base && va < r->base + r->size) return r;
    }
    return NULL;
}

/* Host buffers of released allocations, kept for the next cuMemCreate of the same size: the smoke
 * test creates and releases the same sizes every cycle, and fresh host pages cost more than the
 * emulated kernels. A reused buffer holds the previous cycle's data: garbage, as fresh VRAM is. */
#define CACHED_BUFFERS 32
static struct {
    unsigned char *host;
    size_t size;
} cached[CACHED_BUFFERS];

static unsigned char *take_cached(size_t size) {
    for (int i = 0; i < CACHED_BUFFERS; i++)
        if (cached[i].host && cached[i].size == size) {
            unsigned char *p = cached[i].host;
            cached[i].host = NULL;
            return p;
        }
    return NULL;
}

static void put_cached(unsigned char *host, size_t size) {
    for (int i = 0; i < CACHED_BUFFERS; i++)
        if (!cached[i].host) {
            cached[i].host = host;
            cached[i].size = size;
            return;
        }
    free(host);
}

static void drop_alloc(int idx) {
    struct allocation *a = &allocations[idx];
    if (--a->refs == 0) {
        put_cached(a->host, a->size);
        allocated_bytes[a->device] -= a->size;
        if (is("leak")) leaked_bytes[a->device] += a->size;
        memset(a, 0, sizeof *a);
    }
}

/* The memory a kernel on the current device reaches in region r (NULL: zeros, stores lost). */
static unsigned char *kernel_view(struct region *r) {
    if (r->broken) return NULL;
    if (is("peer_reads_fail") && r->alloc >= 0 && current && r->owner != current->device) return NULL;
    if (r->shadow) {
        if (now_s() - r->mapped_at < (double)env_long("FAKE_CUDA_WINDOW_MS", 2) / 1000.0) return r->shadow;
        /* The translation caught up: from now on everything sees the real memory. */
        free(r->shadow);
        r->shadow = NULL;
    }
    return r->host;
}

static int can_touch(struct region *r) {
    return current && (r->access & (1u << current->device));
}

/* Copies between host memory and device addresses, region by region; `to_device` says which
 * way. Copies go through the copy engine and the current translation: they need access, see
 * the real memory, and broken mappings read zeros and drop stores. */
static CUresult copy_device(CUdeviceptr va, void *host, size_t n, int to_device) {
    unsigned char *h = host;
    while (n > 0) {
        struct region *r = find_region(va);
        if (!r || !can_touch(r)) return CUDA_ERROR_INVALID_VALUE;
        size_t off = (size_t)(va - r->va);
        size_t len = r->size - off;
        if (len > n) len = n;
        if (to_device) {
            if (!r->broken) memcpy(r->host + off, h, len);
        } else if (r->broken) {
            memset(h, 0, len);
        } else {
            memcpy(h, r->host + off, len);
        }
        va += len;
        h += len;
        n -= len;
    }
    return CUDA_SUCCESS;
}

/* ---- errors ------------------------------------------------------------------------------ */

struct error_text {
    CUresult code;
    const char *name;
    const char *message;
};

/* Names and messages as the real driver's cuGetErrorName / cuGetErrorString give them. */
static const struct error_text errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static const struct error_text *error_text(CUresult e) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == e) return &errors[i];
    return NULL;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr) {
    API_LOCK();
    const struct error_text *t = error_text(error);
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    *pStr = t ? t->name : NULL;
    return t ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr) {
    API_LOCK();
    const struct error_text *t = error_text(error);
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    *pStr = t ? t->message : NULL;
    return t ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- init, devices ----------------------------------------------------------------------- */

/* Writes getpid() to $FAKE_CUDA_PIDFILE (atomically), then waits for a signal that never comes,
 * like a host thread waiting on a GPU that stopped answering. */
static void hang_forever(void) {
    /* Every entry point takes the lock once (none calls another), so this releases it. */
    pthread_mutex_unlock(&big_lock);
    const char *pidfile = getenv("FAKE_CUDA_PIDFILE");
    if (pidfile && *pidfile) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", pidfile);
        FILE *f = fopen(tmp, "w");
        if (f) {
            fprintf(f, "%d\n", (int)getpid());
            fclose(f);
            rename(tmp, pidfile);
        }
    }
    for (;;) pause();
}

/* hang_verify: hang at a synchronising call, on every device or only on FAKE_CUDA_HANG_DEVICE. */
static void maybe_hang_at_sync(void) {
    if (!is("hang_verify")) return;
    long only = env_long("FAKE_CUDA_HANG_DEVICE", -1);
    if (only < 0 || (current && current->device == only)) hang_forever();
}

static volatile uintptr_t bad_address = 16;

EXPORT CUresult cuInit(unsigned int flags) {
    API_LOCK();
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (is("init_segv")) {
        /* A real fault (not raise()): the process's own SIGSEGV handler, if any, sees a fault
         * at an unmapped address, as with a driver crashing at init. */
        *(volatile int *)bad_address = 1;
    }
    if (is("init_abort")) abort();
    if (is("init_hang")) hang_forever();
    long init_ms = env_long("FAKE_CUDA_INIT_MS", 0);
    if (init_ms > 0) sleep_ns((unsigned long long)init_ms * 1000000ull);
    if (is("no_device")) return CUDA_ERROR_NO_DEVICE;
    if (is("stub")) return CUDA_ERROR_STUB_LIBRARY;
    if (is("garbage") || is("garbage_exit")) {
        static const char msg[] = "NVRM: oops\n";
        if (write(1, msg, sizeof msg - 1) < 0) _exit(9);
        if (is("garbage_exit")) _exit(0);
    }
    initialised = 1;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *driverVersion) {
    API_LOCK();
    if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = 12080;
    return CUDA_SUCCESS;
}

static CUresult check_device(CUdevice dev) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count) {
    API_LOCK();
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = device_count();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    API_LOCK();
    CUresult r = check_device(ordinal);
    if (r) return r;
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    API_LOCK();
    CUresult r = check_device(dev);
    if (r) return r;
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", "Fake GPU");
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    API_LOCK();
    CUresult r = check_device(dev);
    if (r) return r;
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    *bytes = TOTAL_MEM;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev) {
    API_LOCK();
    CUresult r = check_device(dev);
    if (r) return r;
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {
    case ATTR_WARP_SIZE: *pi = 32; break;
    case ATTR_INTEGRATED: *pi = 0; break;
    case ATTR_CC_MAJOR: *pi = 9; break;
    case ATTR_CC_MINOR: *pi = 0; break;
    case ATTR_VMM_SUPPORTED: *pi = 1; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev) {
    API_LOCK();
    CUresult r = check_device(dev);
    if (r) return r;
    if (!pciBusId || len < 13) return CUDA_ERROR_INVALID_VALUE;
    snprintf(pciBusId, (size_t)len, "00000000:%02X:00.0", 0x19 + dev);
    return CUDA_SUCCESS;
}

static int peer_allowed(void) {
    const char *s = getenv("FAKE_CUDA_PEER");
    return !(s && strcmp(s, "no") == 0);
}

EXPORT CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev) {
    API_LOCK();
    CUresult r = check_device(dev);
    if (!r) r = check_device(peerDev);
    if (r) return r;
    if (!canAccessPeer || dev == peerDev) return CUDA_ERROR_INVALID_DEVICE;
    *canAccessPeer = peer_allowed();
    return CUDA_SUCCESS;
}

/* ---- contexts ---------------------------------------------------------------------------- */

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    API_LOCK();
    CUresult r = check_device(dev);
    if (r) return r;
    if (is("hang_context") && dev == env_long("FAKE_CUDA_HANG_DEVICE", 0)) hang_forever();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    contexts[dev].device = dev;
    contexts[dev].refs++;
    *pctx = &contexts[dev];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    API_LOCK();
    CUresult r = check_device(dev);
    if (r) return r;
    if (contexts[dev].refs <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--contexts[dev].refs == 0 && current == &contexts[dev]) current = NULL;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    API_LOCK();
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx && (ctx < &contexts[0] || ctx >= &contexts[MAX_DEVICES] || ctx->refs <= 0)) return CUDA_ERROR_INVALID_CONTEXT;
    current = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    maybe_hang_at_sync();
    return CUDA_SUCCESS;
}

/* ---- streams: in order, and kernels run at launch, so a stream is only a handle ------------ */

struct fake_stream {
    int device;
    int live;
};
static struct fake_stream streams[64];

EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    if (!phStream || Flags > 1) return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < 64; i++)
        if (!streams[i].live) {
            streams[i].live = 1;
            streams[i].device = current->device;
            *phStream = &streams[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult check_stream(CUstream s) {
    struct fake_stream *f = s;
    if (f == NULL) return CUDA_SUCCESS; /* the legacy default stream */
    if (f < &streams[0] || f >= &streams[64] || !f->live) return CUDA_ERROR_INVALID_HANDLE;
    if (!current || f->device != current->device) return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
    API_LOCK();
    CUresult r = need_ctx();
    if (!r) r = check_stream(hStream);
    if (r) return r;
    maybe_hang_at_sync();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) {
    API_LOCK();
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    struct fake_stream *f = hStream;
    if (!f || f < &streams[0] || f >= &streams[64] || !f->live) return CUDA_ERROR_INVALID_HANDLE;
    f->live = 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    if (!peerContext || Flags != 0 || peerContext->refs <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!peer_allowed() || peerContext == current) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    if (current->peers[peerContext->device]) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    current->peers[peerContext->device] = 1;
    return CUDA_SUCCESS;
}

/* ---- modules and kernels ----------------------------------------------------------------- */

EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
    struct fake_module *m = &current->module;
    m->loaded = 1;
    m->has_write = strstr(image, ".entry gpuprobe_write(") != NULL;
    m->has_verify = strstr(image, ".entry gpuprobe_verify(") != NULL;
    m->has_busy = strstr(image, ".entry gpuprobe_busy(") != NULL;
    m->abi_v1 = strstr(image, "gpuprobe_verify_param_counters") != NULL;
    *module = (CUmodule)m;
    return CUDA_SUCCESS;
}

static struct fake_module *module_of(CUmodule hmod) {
    for (int d = 0; d < MAX_DEVICES; d++)
        if ((CUmodule)&contexts[d].module == hmod && contexts[d].module.loaded) return &contexts[d].module;
    return NULL;
}

EXPORT CUresult cuModuleUnload(CUmodule hmod) {
    API_LOCK();
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    struct fake_module *m = module_of(hmod);
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    m->loaded = 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    if (!hfunc || !name) return CUDA_ERROR_INVALID_VALUE;
    struct fake_module *m = module_of(hmod);
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    if (strcmp(name, "gpuprobe_write") == 0 && m->has_write) {
        *hfunc = &fn_write;
    } else if (strcmp(name, "gpuprobe_verify") == 0 && m->has_verify) {
        *hfunc = &fn_verify;
    } else if (strcmp(name, "gpuprobe_busy") == 0 && m->has_busy) {
        *hfunc = &fn_busy;
    } else {
        return CUDA_ERROR_NOT_FOUND;
    }
    return CUDA_SUCCESS;
}

static uint32_t pattern(uint64_t w, uint32_t seed) {
    return ((uint32_t)w * 2654435761u) ^ (seed * 2246822519u) ^ 0xA5A5A5A5u;
}

/* gpuprobe_write(u32* base, u64 word_begin, u64 word_count, u32 seed) */
static CUresult emulate_write(void **params) {
    CUdeviceptr base = *(CUdeviceptr *)params[0];
    uint64_t begin = *(uint64_t *)params[1];
    uint64_t count = *(uint64_t *)params[2];
    uint32_t seed = *(uint32_t *)params[3];
    if (base % 4) return CUDA_ERROR_MISALIGNED_ADDRESS;
    const uint32_t s = (seed * 2246822519u) ^ 0xA5A5A5A5u;
    uint64_t w = begin, end = begin + count;
    while (w < end) {
        CUdeviceptr va = base + w * 4;
        struct region *r = find_region(va);
        if (!r || !can_touch(r)) return CUDA_ERROR_ILLEGAL_ADDRESS;
        uint64_t last = w + (r->va + r->size - va) / 4;
        if (last > end) last = end;
        unsigned char *mem = kernel_view(r);
        if (mem) {
            uint32_t *p = (uint32_t *)(mem + (va - r->va));
            uint64_t n = last - w;
            for (uint64_t i = 0; i < n; i++) p[i] = ((uint32_t)(w + i) * 2654435761u) ^ s;
        }
        w = last;
    }
    return CUDA_SUCCESS;
}

/* Counts words of [begin, begin + count) that differ from the pattern into a 64-bit slot. */
static CUresult check_words(CUdeviceptr base, uint64_t begin, uint64_t count, uint32_t seed, CUdeviceptr slot_va) {
    if (base % 4 || slot_va % 8) return CUDA_ERROR_MISALIGNED_ADDRESS;
    struct region *cr = find_region(slot_va);
    if (!cr || !can_touch(cr) || slot_va + 16 > cr->va + cr->size) return CUDA_ERROR_ILLEGAL_ADDRESS;
    uint64_t *slot = (uint64_t *)(cr->host + (slot_va - cr->va));
    const uint32_t s = (seed * 2246822519u) ^ 0xA5A5A5A5u;
    uint64_t w = begin, end = begin + count;
    while (w < end) {
        CUdeviceptr va = base + w * 4;
        struct region *r = find_region(va);
        if (!r || !can_touch(r)) return CUDA_ERROR_ILLEGAL_ADDRESS;
        uint64_t last = w + (r->va + r->size - va) / 4;
        if (last > end) last = end;
        const unsigned char *mem = kernel_view(r);
        uint64_t n = last - w, bad = 0;
        if (mem) {
            const uint32_t *p = (const uint32_t *)(mem + (va - r->va));
            for (uint64_t i = 0; i < n; i++) bad += p[i] != (((uint32_t)(w + i) * 2654435761u) ^ s);
        } else {
            for (uint64_t i = 0; i < n; i++) bad += pattern(w + i, seed) != 0;
        }
        if (bad) {
            slot[0] += bad;
            for (uint64_t i = 0; i < n; i++) {
                uint32_t seen = mem ? ((const uint32_t *)(mem + (va - r->va)))[i] : 0;
                if (seen != pattern(w + i, seed)) {
                    if (w + i < slot[1]) slot[1] = w + i;
                    break;
                }
            }
        }
        w = last;
    }
    return CUDA_SUCCESS;
}

/* gpuprobe_verify(const u32* base, u64 word_begin, u64 word_count, u32 seed, u64* slot) */
static CUresult emulate_verify(void **params) {
    if (current->module.abi_v1) {
        /* gpuprobe_verify(const u32* base, u64 word_count, u32 cycle, u32* counters): the same
         * check into a scratch slot, folded into the 32-bit counters. */
        CUdeviceptr counters_va = *(CUdeviceptr *)params[3];
        struct region *cr = find_region(counters_va);
        if (!cr || !can_touch(cr) || counters_va % 4 || counters_va + 8 > cr->va + cr->size)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        uint32_t *counters = (uint32_t *)(cr->host + (counters_va - cr->va));
        static uint64_t scratch[2];
        scratch[0] = 0;
        scratch[1] = ~0ull;
        struct region *slot = new_region();
        if (!slot) return CUDA_ERROR_OUT_OF_MEMORY;
        slot->va = 0x7e0000000000ull;
        slot->size = sizeof scratch;
        slot->host = (unsigned char *)scratch;
        slot->alloc = -1;
        slot->access = ~0u;
        CUresult r = check_words(*(CUdeviceptr *)params[0], 0, *(uint64_t *)params[1], *(uint32_t *)params[2],
                                 slot->va);
        memset(slot, 0, sizeof *slot);
        counters[0] += (uint32_t)scratch[0];
        if (scratch[0] && (uint32_t)scratch[1] < counters[1]) counters[1] = (uint32_t)scratch[1];
        return r;
    }
    return check_words(*(CUdeviceptr *)params[0], *(uint64_t *)params[1], *(uint64_t *)params[2],
                       *(uint32_t *)params[3], *(CUdeviceptr *)params[4]);
}

/* gpuprobe_busy(const u32* base, u64 word_count, u32 seed, u64* slot, u64 ns): one pass, then the
 * rest of its time (the host is held meanwhile, as if it waited for the kernel). */
static CUresult emulate_busy(void **params) {
    double t0 = now_s();
    CUresult r = check_words(*(CUdeviceptr *)params[0], 0, *(uint64_t *)params[1], *(uint32_t *)params[2],
                             *(CUdeviceptr *)params[3]);
    unsigned long long ns = *(unsigned long long *)params[4];
    double left = (double)ns / 1e9 - (now_s() - t0);
    if (left > 0) sleep_ns((unsigned long long)(left * 1e9));
    return r;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                               unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                               unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra) {
    API_LOCK();
    CUresult r = need_ctx();
    if (!r) r = check_stream(hStream);
    if (r) return r;
    (void)sharedMemBytes;
    if (!kernelParams || extra) return CUDA_ERROR_INVALID_VALUE;
    if (gridDimX == 0 || gridDimY == 0 || gridDimZ == 0 || blockDimX == 0 || blockDimY == 0 || blockDimZ == 0 ||
        (unsigned long long)blockDimX * blockDimY * blockDimZ > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (!current->module.loaded) return CUDA_ERROR_INVALID_HANDLE;
    /* The launch itself succeeds; a fault inside the kernel surfaces at the next sync. */
    if (f == &fn_write) {
        current->sticky = emulate_write(kernelParams);
    } else if (f == &fn_verify) {
        current->sticky = emulate_verify(kernelParams);
    } else if (f == &fn_busy) {
        current->sticky = emulate_busy(kernelParams);
    } else {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    return CUDA_SUCCESS;
}

/* ---- ordinary memory --------------------------------------------------------------------- */

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
    *free_bytes = free_of(current->device);
    *total = TOTAL_MEM;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    struct region *g = new_region();
    unsigned char *host = malloc(bytesize);
    if (!g || !host) {
        if (g) g->used = 0;
        free(host);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memset(host, 0xCD, bytesize);
    g->va = next_linear;
    g->size = bytesize;
    g->host = host;
    g->alloc = -1;
    g->access = ~0u; /* ordinary memory: reachable from every device (peer access aside) */
    g->owner = current->device;
    allocated_bytes[current->device] += bytesize;
    next_linear += (bytesize + GRANULARITY - 1) / GRANULARITY * GRANULARITY + GRANULARITY;
    *dptr = g->va;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    API_LOCK();
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    struct region *g = find_region(dptr);
    if (!g || g->alloc != -1 || g->va != dptr) return CUDA_ERROR_INVALID_VALUE;
    allocated_bytes[g->owner] -= g->size;
    free(g->host);
    drop_region(g);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    if (dstDevice % 4) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < N; i++) {
        r = copy_device(dstDevice + 4 * i, &ui, 4, 1);
        if (r) return r;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    if (!srcHost) return CUDA_ERROR_INVALID_VALUE;
    return copy_device(dstDevice, (void *)srcHost, ByteCount, 1);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream) {
    API_LOCK();
    CUresult r = need_ctx();
    if (!r) r = check_stream(hStream);
    if (r) return r;
    if (!srcHost) return CUDA_ERROR_INVALID_VALUE;
    return copy_device(dstDevice, (void *)srcHost, ByteCount, 1);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    if (!dstHost) return CUDA_ERROR_INVALID_VALUE;
    return copy_device(srcDevice, dstHost, ByteCount, 0);
}

EXPORT CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
                             size_t ByteCount) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    if (!dstContext || !srcContext || dstContext->refs <= 0 || srcContext->refs <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    unsigned char *buf = malloc(ByteCount ? ByteCount : 1);
    if (!buf) return CUDA_ERROR_OUT_OF_MEMORY;
    r = copy_device(srcDevice, buf, ByteCount, 0);
    if (!r) {
        const char *corrupt = getenv("FAKE_CUDA_PEER_CORRUPT");
        if (corrupt && strcmp(corrupt, "1") == 0)
            for (size_t i = 0; i < ByteCount; i += MIB) buf[i] ^= 0xFF;
        r = copy_device(dstDevice, buf, ByteCount, 1);
    }
    free(buf);
    return r;
}

/* ---- virtual memory management ----------------------------------------------------------- */

static CUresult check_prop(const CUmemAllocationProp *prop) {
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.u.id < 0 || prop->location.u.id >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop, unsigned int option) {
    API_LOCK();
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = check_prop(prop);
    if (r) return r;
    if (!granularity || option > 1) return CUDA_ERROR_INVALID_VALUE;
    *granularity = GRANULARITY; /* minimum and recommended alike */
    return CUDA_SUCCESS;
}

#ifndef FAKE_OLD_DRIVER
EXPORT
#else
static __attribute__((unused))
#endif
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    if (!ptr || size == 0 || size % GRANULARITY || flags != 0 || (alignment && alignment % GRANULARITY))
        return CUDA_ERROR_INVALID_VALUE;
    (void)addr; /* a hint only */
    if (is("reserve_fails") && size >= 32 * GIB) return CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < MAX_RESERVATIONS; i++) {
        struct reservation *v = &reservations[i];
        if (!v->used) {
            v->used = 1;
            v->base = next_va;
            v->size = size;
            next_va += size + GRANULARITY;
            *ptr = v->base;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    API_LOCK();
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    struct reservation *v = find_reservation(ptr);
    if (!v || v->base != ptr || v->size != size) return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < MAX_REGIONS; i++) /* still mapped: the caller must unmap first */
        if (regions[i].used && regions[i].alloc >= 0 && regions[i].va >= v->base && regions[i].va < v->base + v->size)
            return CUDA_ERROR_INVALID_VALUE;
    memset(v, 0, sizeof *v);
    return CUDA_SUCCESS;
}

#ifndef FAKE_OLD_DRIVER
EXPORT
#else
static __attribute__((unused))
#endif
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop, unsigned long long flags) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    r = check_prop(prop);
    if (r) return r;
    if (!handle || size == 0 || size % GRANULARITY || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    creates_done++;
    if (size > free_of(prop->location.u.id)) return CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < MAX_ALLOCS; i++) {
        struct allocation *a = &allocations[i];
        if (!a->used) {
            a->host = take_cached(size);
            if (!a->host) {
                a->host = malloc(size);
                if (!a->host) return CUDA_ERROR_OUT_OF_MEMORY;
                memset(a->host, 0xCD, size); /* fresh memory is not zeroed */
            }
            if (is("map_window")) memset(a->host, 0, size); /* scrubbed: what the late reads find */
            a->size = size;
            a->refs = 1;
            a->used = 1;
            a->device = prop->location.u.id;
            allocated_bytes[a->device] += size;
            *handle = (CUmemGenericAllocationHandle)(i + 1);
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static int handle_index(CUmemGenericAllocationHandle h) {
    if (h == 0 || h > MAX_ALLOCS || !allocations[h - 1].used) return -1;
    return (int)(h - 1);
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    API_LOCK();
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    int i = handle_index(handle);
    if (i < 0) return CUDA_ERROR_INVALID_VALUE;
    drop_alloc(i);
    return CUDA_SUCCESS;
}

static int maps_done;

#ifndef FAKE_OLD_DRIVER
EXPORT
#else
static __attribute__((unused))
#endif
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle, unsigned long long flags) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    int i = handle_index(handle);
    if (i < 0 || flags != 0 || offset != 0 || size != allocations[i].size || ptr % GRANULARITY) return CUDA_ERROR_INVALID_VALUE;
    struct reservation *v = find_reservation(ptr);
    if (!v || ptr + size > v->base + v->size) return CUDA_ERROR_INVALID_VALUE;
    for (int k = 0; k < MAX_REGIONS; k++)
        if (regions[k].used && ptr < regions[k].va + regions[k].size && regions[k].va < ptr + size) return CUDA_ERROR_INVALID_VALUE;
    if (is("partial") && ++maps_done == 2) _exit(0); /* the report stops mid-smoke */
    if (is("crash_map") && allocations[i].device == env_long("FAKE_CUDA_CRASH_DEVICE", 0))
        *(volatile int *)bad_address = 1;
    struct region *g = new_region();
    if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
    g->va = ptr;
    g->size = size;
    g->host = allocations[i].host;
    g->alloc = i;
    g->access = 0;
    g->owner = allocations[i].device;
    g->broken = is("reads_zeros") && ptr != v->base;
    if (is("map_window")) {
        g->shadow = malloc(size);
        if (!g->shadow) {
            drop_region(g);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        g->mapped_at = now_s();
    }
    allocations[i].refs++;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    API_LOCK();
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    int removed = 0;
    for (int k = 0; k < MAX_REGIONS; k++) {
        struct region *g = &regions[k];
        if (!g->used || g->alloc < 0 || !(g->va < ptr + size && ptr < g->va + g->size)) continue;
        if (g->va < ptr || g->va + g->size > ptr + size) return CUDA_ERROR_INVALID_VALUE; /* partial overlap */
    }
    for (int k = 0; k < MAX_REGIONS; k++) {
        struct region *g = &regions[k];
        if (!g->used || g->alloc < 0 || g->va < ptr || g->va + g->size > ptr + size) continue;
        int a = g->alloc;
        drop_region(g);
        drop_alloc(a);
        removed++;
    }
    return removed ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* setaccess_prefix_sum: ROCm 7.0-7.2's check. The sizes of the reservation's mapped sub-buffers,
 * in address order from the FIRST one (not from ptr), are added up; the call is valid only if the
 * running total reaches `size` exactly. */
static int prefix_sum_matches(const struct reservation *v, size_t size) {
    size_t total = 0;
    CUdeviceptr at = v->base;
    for (;;) {
        struct region *next = NULL;
        for (int k = 0; k < MAX_REGIONS; k++) {
            struct region *g = &regions[k];
            if (g->used && g->alloc >= 0 && g->va >= at && g->va < v->base + v->size && (!next || g->va < next->va))
                next = g;
        }
        if (!next) return 0;
        total += next->size;
        if (total == size) return 1;
        if (total > size) return 0;
        at = next->va + next->size;
    }
}

#ifndef FAKE_OLD_DRIVER
EXPORT
#else
static __attribute__((unused))
#endif
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
    API_LOCK();
    CUresult r = need_ctx();
    if (r) return r;
    if (!desc || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
        if (desc[i].location.u.id < 0 || desc[i].location.u.id >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ)
            return CUDA_ERROR_INVALID_VALUE;
    }
    struct reservation *v = find_reservation(ptr);
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    if (is("offset_access_fails") && ptr != v->base) return CUDA_ERROR_INVALID_VALUE;
    if (is("setaccess_prefix_sum") && !prefix_sum_matches(v, size)) return CUDA_ERROR_INVALID_VALUE;
    /* The whole range must be mapped, without holes. */
    for (CUdeviceptr va = ptr; va < ptr + size;) {
        struct region *g = find_region(va);
        if (!g || g->alloc < 0) return CUDA_ERROR_INVALID_VALUE;
        va = g->va + g->size;
    }
    unsigned bits = 0;
    for (size_t i = 0; i < count; i++) bits |= 1u << desc[i].location.u.id;
    for (CUdeviceptr va = ptr; va < ptr + size;) {
        struct region *g = find_region(va);
        g->access |= bits;
        va = g->va + g->size;
    }
    return CUDA_SUCCESS;
}

/* ---- NVML (a few calls, for the per-process accounting) ----------------------------------- */

typedef int nvmlReturn_t;
struct nvml_process_info {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
};
#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7

EXPORT nvmlReturn_t nvmlInit_v2(void) {
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
    return NVML_SUCCESS;
}

/* The handle is the device index + 1; bus ids as cuDeviceGetPCIBusId writes them. */
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **device) {
    if (!bus || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (int d = 0; d < device_count(); d++) {
        char want[32];
        snprintf(want, sizeof want, "00000000:%02X:00.0", 0x19 + d);
        if (strcmp(bus, want) == 0) {
            *device = (void *)(intptr_t)(d + 1);
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count, struct nvml_process_info *infos) {
    API_LOCK();
    intptr_t d = (intptr_t)device - 1;
    if (d < 0 || d >= device_count() || !count) return NVML_ERROR_INVALID_ARGUMENT;
    struct nvml_process_info list[2];
    unsigned int n = 0;
    if (contexts[d].refs > 0) {
        struct nvml_process_info own = {(unsigned int)getpid(), FAKE_CONTEXT_BYTES + allocated_bytes[d] + leaked_bytes[d], 0, 0};
        list[n++] = own;
    }
    if (is("neighbours")) {
        struct nvml_process_info other = {NEIGHBOUR_PID, FAKE_CONTEXT_BYTES + neighbour_bytes(), 0, 0};
        list[n++] = other;
    }
    unsigned int room = *count;
    *count = n;
    if (room < n) return NVML_ERROR_INSUFFICIENT_SIZE;
    if (n && !infos) return NVML_ERROR_INVALID_ARGUMENT;
    if (n) memcpy(infos, list, n * sizeof list[0]);
    return NVML_SUCCESS;
}
