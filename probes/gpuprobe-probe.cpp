// gpuprobe-probe: the single-source probe program (HIP with hipcc, CUDA with nvcc).
//
// Implements probes/PROTOCOL.md (version 1): JSON lines on stdout, each flushed as soon as it is
// written, so that a probe that hangs or dies still leaves a record of how far it got.
//
//   gpuprobe-probe --list
//   gpuprobe-probe --device N [--cycles C] [--chunks K] [--no-smoke]
//   gpuprobe-probe --peer A B
//
// The smoke test repeats llama.cpp's VMM pool growth (ggml_cuda_pool_vmm) call for call: reserve
// 32 GiB of address space, then per chunk create -> map at an offset -> release the handle -> set
// access on the new chunk only, and at once a write kernel over the new chunk and a verify kernel over
// everything mapped so far.
//
// Exit status: 0 whenever a report was printed, 2 for bad arguments.

#include "compat.h"

#include <chrono>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>

namespace {

const int kProtocol = 1;
const uint64_t kReserveBytes = 1ull << 35;          // llama.cpp's CUDA_POOL_VMM_MAX_SIZE
const uint64_t kVramSlackBytes = 32ull << 20;        // allowed drop of free VRAM after all cycles
const uint64_t kPeerBytes = 64ull << 20;             // size of the verified peer copy
const unsigned kThreadsPerBlock = 256;
const unsigned kMaxBlocks = 1024;
const uint32_t kPeerPatternCycle = 0x5eedu;

// Fault injection for checking the failure paths on a real GPU; only test builds define it
// (-DGPUPROBE_TEST_FAULT=N). 1: skip the write kernel for chunk 1 of cycle 3 (verify must fail).
// 2: set access on chunk 1 at a misaligned address (set_access must fail, whole range must help).
#ifndef GPUPROBE_TEST_FAULT
#define GPUPROBE_TEST_FAULT 0
#endif

// ------------------------------------------------------------------------------------- kernels

__device__ __forceinline__ uint32_t gp_value(uint64_t word, uint32_t cycle) {
    return ((uint32_t)word * 2654435761u) ^ (cycle * 2246822519u) ^ 0xA5A5A5A5u;
}

// base[w] = value(w, cycle) for w in [word_begin, word_begin + word_count). Grid-stride loop; the
// launch shape is passed in so the kernel needs no device library on AMD (see compat.h).
__global__ void gp_write(uint32_t* base, uint64_t word_begin, uint64_t word_count, uint32_t cycle,
                         uint32_t threads, uint32_t blocks) {
    const uint64_t stride = (uint64_t)threads * blocks;
    for (uint64_t i = (uint64_t)gp_block_id() * threads + gp_thread_id(); i < word_count; i += stride) {
        const uint64_t w = word_begin + i;
        base[w] = gp_value(w, cycle);
    }
}

// For w in [0, word_count): count words that differ (counters[0]) and keep the lowest bad word index
// (counters[1], starts at 0xFFFFFFFF).
__global__ void gp_verify(const uint32_t* base, uint64_t word_count, uint32_t cycle, uint32_t* counters,
                          uint32_t threads, uint32_t blocks) {
    const uint64_t stride = (uint64_t)threads * blocks;
    for (uint64_t w = (uint64_t)gp_block_id() * threads + gp_thread_id(); w < word_count; w += stride) {
        if (base[w] != gp_value(w, cycle)) {
            atomicAdd(&counters[0], 1u);
            atomicMin(&counters[1], (uint32_t)w);
        }
    }
}

uint32_t host_value(uint64_t word, uint32_t cycle) {
    return ((uint32_t)word * 2654435761u) ^ (cycle * 2246822519u) ^ 0xA5A5A5A5u;
}

unsigned blocks_for(uint64_t words) {
    uint64_t b = (words + kThreadsPerBlock - 1) / kThreadsPerBlock;
    if (b < 1) b = 1;
    if (b > kMaxBlocks) b = kMaxBlocks;
    return (unsigned)b;
}

// ---------------------------------------------------------------------------------- error values

struct ApiError {
    bool set = false;
    std::string api;
    long long code = 0;
    bool has_name = false;
    std::string name;
    bool has_message = false;
    std::string message;
};

ApiError make_error(const std::string& api, long long code, const char* name, const char* message) {
    ApiError e;
    e.set = true;
    e.api = api;
    e.code = code;
    if (name != nullptr) {
        e.has_name = true;
        e.name = name;
    }
    if (message != nullptr) {
        e.has_message = true;
        e.message = message;
    }
    return e;
}

// A runtime call failed: `fn` is the name without vendor prefix ("SetDevice" -> cudaSetDevice).
ApiError rt_error(const char* fn, gpError_t r) {
    return make_error(std::string(GP_RT_PREFIX) + fn, (long long)r, gpGetErrorName(r), gpGetErrorString(r));
}

// A driver (VMM) call failed: "MemSetAccess" -> cuMemSetAccess / hipMemSetAccess.
ApiError drv_error(const char* fn, gpDrvResult r) {
    return make_error(std::string(GP_DRV_PREFIX) + fn, (long long)r, gpDrvErrorName(r), gpDrvErrorString(r));
}

ApiError load_error(const GpDrvLoadError& l) { return make_error(l.api, l.code, l.name, l.message); }

// ------------------------------------------------------------------------------------ JSON lines

class Line {
  public:
    explicit Line(const char* event) { s_ = "{\"event\":"; str_value(event); }
    Line& str(const char* k, const std::string& v) { key(k); str_value(v.c_str()); return *this; }
    Line& str_or_null(const char* k, bool has, const std::string& v) {
        key(k);
        if (has) str_value(v.c_str()); else s_ += "null";
        return *this;
    }
    Line& null(const char* k) { key(k); s_ += "null"; return *this; }
    Line& i64(const char* k, long long v) { key(k); s_ += std::to_string(v); return *this; }
    Line& u64(const char* k, uint64_t v) { key(k); s_ += std::to_string((unsigned long long)v); return *this; }
    Line& u64_or_null(const char* k, bool has, uint64_t v) { return has ? u64(k, v) : null(k); }
    Line& boolean(const char* k, bool v) { key(k); s_ += v ? "true" : "false"; return *this; }
    Line& bool_or_null(const char* k, int v) { return v < 0 ? null(k) : boolean(k, v != 0); }
    Line& f64(const char* k, double v) {
        char buf[64];
        snprintf(buf, sizeof buf, "%.3f", v);
        key(k);
        s_ += buf;
        return *this;
    }
    Line& error(const char* k, const ApiError& e) {
        key(k);
        if (!e.set) { s_ += "null"; return *this; }
        s_ += "{\"api\":";
        str_value(e.api.c_str());
        s_ += ",\"code\":" + std::to_string(e.code) + ",\"name\":";
        if (e.has_name) str_value(e.name.c_str()); else s_ += "null";
        s_ += ",\"message\":";
        if (e.has_message) str_value(e.message.c_str()); else s_ += "null";
        s_ += "}";
        return *this;
    }
    // Writes the line and flushes, so the parent sees it even if the next call never returns.
    void emit() {
        s_ += "}\n";
        fputs(s_.c_str(), stdout);
        fflush(stdout);
    }

  private:
    void key(const char* k) {
        s_ += ",";
        str_value(k);
        s_ += ":";
    }
    void str_value(const char* v) {
        s_ += '"';
        for (const unsigned char* p = (const unsigned char*)v; *p; ++p) {
            switch (*p) {
                case '"': s_ += "\\\""; break;
                case '\\': s_ += "\\\\"; break;
                case '\n': s_ += "\\n"; break;
                case '\r': s_ += "\\r"; break;
                case '\t': s_ += "\\t"; break;
                default:
                    if (*p < 0x20) {
                        char buf[8];
                        snprintf(buf, sizeof buf, "\\u%04x", *p);
                        s_ += buf;
                    } else {
                        s_ += (char)*p;
                    }
            }
        }
        s_ += '"';
    }
    std::string s_;
};

void emit_done() { Line("done").emit(); }

void emit_stage(const char* stage, uint32_t cycle, uint32_t chunk) {
    Line("stage").str("stage", stage).u64("cycle", cycle).u64("chunk", chunk).emit();
}

// ------------------------------------------------------------------------------------- arguments

enum class Mode { List, Device, Peer };

struct Args {
    Mode mode = Mode::List;
    int device = -1;
    int peer_from = -1;
    int peer_to = -1;
    uint32_t cycles = 200;
    uint32_t chunks = 4;
    bool smoke = true;
};

void usage(const char* why) {
    fprintf(stderr,
            "gpuprobe-probe: %s\n"
            "usage: gpuprobe-probe --list\n"
            "       gpuprobe-probe --device N [--cycles C] [--chunks K] [--no-smoke]\n"
            "       gpuprobe-probe --peer A B\n",
            why);
}

bool parse_uint(const char* s, unsigned long max, unsigned long* out) {
    if (s == nullptr || *s < '0' || *s > '9') return false;
    char* end = nullptr;
    unsigned long v = strtoul(s, &end, 10);
    if (*end != '\0' || v > max) return false;
    *out = v;
    return true;
}

// Returns false (after printing the reason) on bad arguments.
bool parse_args(int argc, char** argv, Args* a) {
    bool list = false, device = false, peer = false, cycles = false, chunks = false, no_smoke = false;
    unsigned long v = 0, w = 0;
    for (int i = 1; i < argc; ++i) {
        const char* arg = argv[i];
        const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
        if (strcmp(arg, "--list") == 0 && !list) {
            list = true;
        } else if (strcmp(arg, "--device") == 0 && !device) {
            if (!parse_uint(next, 1u << 20, &v)) { usage("--device needs a device index"); return false; }
            a->device = (int)v;
            device = true;
            ++i;
        } else if (strcmp(arg, "--peer") == 0 && !peer) {
            const char* next2 = i + 2 < argc ? argv[i + 2] : nullptr;
            if (!parse_uint(next, 1u << 20, &v) || !parse_uint(next2, 1u << 20, &w)) {
                usage("--peer needs two device indices");
                return false;
            }
            if (v == w) { usage("--peer needs two different devices"); return false; }
            a->peer_from = (int)v;
            a->peer_to = (int)w;
            peer = true;
            i += 2;
        } else if (strcmp(arg, "--cycles") == 0 && !cycles) {
            if (!parse_uint(next, 1000000000ul, &v) || v == 0) { usage("--cycles needs a count >= 1"); return false; }
            a->cycles = (uint32_t)v;
            cycles = true;
            ++i;
        } else if (strcmp(arg, "--chunks") == 0 && !chunks) {
            if (!parse_uint(next, 1u << 20, &v) || v == 0) { usage("--chunks needs a count >= 1"); return false; }
            a->chunks = (uint32_t)v;
            chunks = true;
            ++i;
        } else if (strcmp(arg, "--no-smoke") == 0 && !no_smoke) {
            a->smoke = false;
            no_smoke = true;
        } else {
            std::string why = std::string("unexpected or repeated argument: ") + arg;
            usage(why.c_str());
            return false;
        }
    }
    if ((int)list + (int)device + (int)peer != 1) {
        usage("give exactly one of --list, --device N, --peer A B");
        return false;
    }
    if (!device && (cycles || chunks || no_smoke)) {
        usage("--cycles, --chunks and --no-smoke go with --device");
        return false;
    }
    a->mode = list ? Mode::List : device ? Mode::Device : Mode::Peer;
    return true;
}

// ------------------------------------------------------------------------------------------ hello

// HIP: 50221153 -> "5.2.21153"; CUDA: 13050 -> "13.5". 0 (no driver) -> none.
bool format_version(int v, std::string* out) {
    if (v <= 0) return false;
    char buf[48];
#if GP_HIP
    snprintf(buf, sizeof buf, "%d.%d.%d", v / 10000000, (v / 100000) % 100, v % 100000);
#else
    snprintf(buf, sizeof buf, "%d.%d", v / 1000, (v % 1000) / 10);
#endif
    *out = buf;
    return true;
}

// Prints hello; returns the device count (0 when enumeration failed).
int emit_hello() {
    int rt = 0, drv = 0, count = 0;
    std::string rt_s, drv_s;
    bool has_rt = gpRuntimeGetVersion(&rt) == gpSuccess && format_version(rt, &rt_s);
    bool has_drv = gpDriverGetVersion(&drv) == gpSuccess && format_version(drv, &drv_s);
    ApiError err;
    gpError_t r = gpGetDeviceCount(&count);
    if (r != gpSuccess) {
        err = rt_error("GetDeviceCount", r);
        count = 0;
        (void)gpGetLastError();  // clear the sticky last error for later calls
    }
    Line("hello")
        .i64("protocol", kProtocol)
        .str("probe", "gpuprobe-probe")
        .str("backend", GP_BACKEND)
        .str_or_null("runtime_version", has_rt, rt_s)
        .str_or_null("driver_version", has_drv, drv_s)
        .i64("device_count", count)
        .error("error", err)
        .emit();
    return count;
}

// ---------------------------------------------------------------------------------------- device

struct DeviceFacts {
    int index = 0;
    bool ok = false;  // properties could be read
    std::string name, arch, arch_features, compute_capability, pci_bus_id;
    bool has_features = false, has_cc = false, has_pci = false;
    uint64_t vram_total = 0;
    bool has_free = false;
    uint64_t vram_free = 0;
    int integrated = -1, vmm = -1;
    bool has_wave = false;
    uint32_t wave = 0;
    bool has_gmin = false, has_grec = false;
    uint64_t gmin = 0, grec = 0;
    gpDevice drv_device = 0;
    bool has_drv_device = false;
    ApiError error;  // the first call that failed
};

void keep_first(ApiError* slot, const ApiError& e) {
    if (!slot->set) *slot = e;
}

DeviceFacts query_device(int index) {
    DeviceFacts f;
    f.index = index;

    gpDeviceProp prop;
    memset(&prop, 0, sizeof prop);
    gpError_t r = gpGetDeviceProperties(&prop, index);
    if (r != gpSuccess) {
        f.error = rt_error("GetDeviceProperties", r);
        (void)gpGetLastError();
        return f;
    }
    f.ok = true;
    f.name = prop.name;
    f.vram_total = (uint64_t)prop.totalGlobalMem;
#if GP_HIP
    // "gfx1201:sramecc-:xnack-" -> arch "gfx1201", features "sramecc-:xnack-"
    std::string gcn(prop.gcnArchName);
    size_t colon = gcn.find(':');
    f.arch = gcn.substr(0, colon);
    if (colon != std::string::npos && colon + 1 < gcn.size()) {
        f.arch_features = gcn.substr(colon + 1);
        f.has_features = true;
    }
#else
    int major = 0, minor = 0;
    r = gpDeviceGetAttribute(&major, GP_ATTR_CC_MAJOR, index);
    if (r == gpSuccess) r = gpDeviceGetAttribute(&minor, GP_ATTR_CC_MINOR, index);
    if (r != gpSuccess) {
        keep_first(&f.error, rt_error("DeviceGetAttribute", r));
        major = prop.major;
        minor = prop.minor;
    }
    f.arch = "sm_" + std::to_string(major) + std::to_string(minor);
    f.compute_capability = std::to_string(major) + "." + std::to_string(minor);
    f.has_cc = true;
#endif

    int v = 0;
    r = gpDeviceGetAttribute(&v, GP_ATTR_INTEGRATED, index);
    if (r == gpSuccess) f.integrated = v != 0; else keep_first(&f.error, rt_error("DeviceGetAttribute", r));
    r = gpDeviceGetAttribute(&v, GP_ATTR_WARP_SIZE, index);
    if (r == gpSuccess) { f.wave = (uint32_t)v; f.has_wave = true; }
    else keep_first(&f.error, rt_error("DeviceGetAttribute", r));

    int dom = 0, bus = 0, dev = 0;
    r = gpDeviceGetAttribute(&dom, GP_ATTR_PCI_DOMAIN, index);
    if (r == gpSuccess) r = gpDeviceGetAttribute(&bus, GP_ATTR_PCI_BUS, index);
    if (r == gpSuccess) r = gpDeviceGetAttribute(&dev, GP_ATTR_PCI_DEVICE, index);
    if (r == gpSuccess) {
        char buf[32];
        snprintf(buf, sizeof buf, "%04x:%02x:%02x.0", (unsigned)dom & 0xffffu, (unsigned)bus & 0xffu,
                 (unsigned)dev & 0x1fu);
        f.pci_bus_id = buf;
        f.has_pci = true;
    } else {
        keep_first(&f.error, rt_error("DeviceGetAttribute", r));
    }

    // Free VRAM needs the device's context.
    r = gpSetDevice(index);
    if (r == gpSuccess) {
        size_t free_b = 0, total_b = 0;
        r = gpMemGetInfo(&free_b, &total_b);
        if (r == gpSuccess) {
            f.vram_free = free_b;
            f.has_free = true;
        } else {
            keep_first(&f.error, rt_error("MemGetInfo", r));
        }
    } else {
        keep_first(&f.error, rt_error("SetDevice", r));
    }

    GpDrvLoadError le;
    if (!gpDriverLoad(&le)) {
        keep_first(&f.error, load_error(le));
        (void)gpGetLastError();
        return f;
    }
    gpDrvResult d = gpDeviceGet(&f.drv_device, index);
    if (d != (gpDrvResult)0) {
        keep_first(&f.error, drv_error("DeviceGet", d));
        return f;
    }
    f.has_drv_device = true;
    // cuDeviceGetAttribute / hipDeviceGetAttribute (VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED).
    d = gpDeviceVmmSupported(&v, f.drv_device);
    if (d == (gpDrvResult)0) f.vmm = v != 0;
    else keep_first(&f.error, drv_error("DeviceGetAttribute", d));

    gpMemAllocationProp mp = gp_pinned_prop(f.drv_device);
    size_t g = 0;
    d = gpMemGetAllocationGranularity(&g, &mp, GP_GRANULARITY_MINIMUM);
    if (d == (gpDrvResult)0) { f.gmin = g; f.has_gmin = true; }
    else if (f.vmm != 0) keep_first(&f.error, drv_error("MemGetAllocationGranularity", d));
    g = 0;
    d = gpMemGetAllocationGranularity(&g, &mp, GP_GRANULARITY_RECOMMENDED);
    if (d == (gpDrvResult)0) { f.grec = g; f.has_grec = true; }
    else if (f.vmm != 0) keep_first(&f.error, drv_error("MemGetAllocationGranularity", d));
    (void)gpGetLastError();
    return f;
}

void emit_device(const DeviceFacts& f) {
    Line("device")
        .i64("index", f.index)
        .str("name", f.name)
        .str("arch", f.arch)
        .str_or_null("arch_features", f.has_features, f.arch_features)
        .str_or_null("compute_capability", f.has_cc, f.compute_capability)
        .u64("vram_total_bytes", f.vram_total)
        .u64_or_null("vram_free_bytes", f.has_free, f.vram_free)
        .str_or_null("pci_bus_id", f.has_pci, f.pci_bus_id)
        .bool_or_null("integrated", f.integrated)
        .u64_or_null("wave_size", f.has_wave, f.wave)
        .bool_or_null("vmm_supported", f.vmm)
        .u64_or_null("granularity_min", f.has_gmin, f.gmin)
        .u64_or_null("granularity_recommended", f.has_grec, f.grec)
        .error("error", f.error)
        .emit();
}

// ----------------------------------------------------------------------------------------- smoke

struct SmokeResult {
    bool pass = false;
    const char* failed_stage = nullptr;
    ApiError error;
    uint32_t cycles_done = 0;
    uint32_t cycles = 0;
    uint32_t chunks = 0;
    uint64_t chunk_bytes = 0;
    uint64_t mismatches = 0;
    bool has_bad = false;
    uint64_t first_bad_offset = 0;
    bool has_bad_value = false;
    uint32_t first_bad_value = 0;
    uint32_t expected_value = 0;
    int whole_range_helped = -1;
    bool has_free_before = false, has_free_after = false;
    uint64_t free_before = 0, free_after = 0;
    double elapsed_ms = 0.0;
};

void emit_smoke(const SmokeResult& s) {
    Line l("smoke");
    l.str("outcome", s.pass ? "pass" : "fail");
    if (s.failed_stage != nullptr) l.str("failed_stage", s.failed_stage); else l.null("failed_stage");
    l.error("error", s.error)
        .u64("cycles_done", s.cycles_done)
        .u64("cycles", s.cycles)
        .u64("chunks_per_cycle", s.chunks)
        .u64("chunk_bytes", s.chunk_bytes)
        .u64("reserve_bytes", kReserveBytes)
        .u64("mismatches", s.mismatches)
        .u64_or_null("first_bad_offset", s.has_bad, s.first_bad_offset)
        .u64_or_null("first_bad_value", s.has_bad_value, s.first_bad_value)
        .u64_or_null("expected_value", s.has_bad, s.expected_value)
        .bool_or_null("whole_range_access_helped", s.whole_range_helped)
        .u64_or_null("vram_free_before", s.has_free_before, s.free_before)
        .u64_or_null("vram_free_after", s.has_free_after, s.free_after)
        .f64("elapsed_ms", s.elapsed_ms)
        .emit();
}

// Runs the smoke test on device f.index and fills *s. A failure returns at once: nothing is
// unmapped or freed afterwards (process exit does that), so a faulted device cannot hang the report.
void run_smoke(const DeviceFacts& f, uint32_t cycles, uint32_t chunks, SmokeResult* s) {
    s->cycles = cycles;
    s->chunks = chunks;
    auto fail = [s](const char* stage, const ApiError& e) {
        s->failed_stage = stage;
        s->error = e;
    };

    // ---- context: device, driver entry points, granularity, counters
    emit_stage("context", 0, 0);
    gpError_t r = gpSetDevice(f.index);
    if (r != gpSuccess) return fail("context", rt_error("SetDevice", r));
    GpDrvLoadError le;
    if (!gpDriverLoad(&le)) return fail("context", load_error(le));
    gpDevice dev = f.drv_device;
    gpDrvResult d;
    if (!f.has_drv_device) {
        d = gpDeviceGet(&dev, f.index);
        if (d != (gpDrvResult)0) return fail("context", drv_error("DeviceGet", d));
    }
    const gpMemAllocationProp prop = gp_pinned_prop(dev);
    const gpMemAccessDesc access = gp_readwrite_access(dev);
    uint64_t chunk = f.grec;
    if (!f.has_grec) {
        size_t g = 0;
        d = gpMemGetAllocationGranularity(&g, &prop, GP_GRANULARITY_RECOMMENDED);
        if (d != (gpDrvResult)0) return fail("context", drv_error("MemGetAllocationGranularity", d));
        chunk = g;
    }
    s->chunk_bytes = chunk;
    if (chunk == 0 || chunk % 4 != 0 || (uint64_t)chunks * chunk > kReserveBytes) {
        return fail("context", make_error("gpuprobe", 0, "bad_chunk_size",
                                          "chunks x granularity does not fit the 32 GiB reservation"));
    }
    uint32_t* counters = nullptr;
    r = gpMalloc((void**)&counters, 2 * sizeof(uint32_t));
    if (r != gpSuccess) return fail("context", rt_error("Malloc", r));
    size_t free_b = 0, total_b = 0;
    r = gpMemGetInfo(&free_b, &total_b);
    if (r != gpSuccess) return fail("context", rt_error("MemGetInfo", r));
    s->free_before = free_b;
    s->has_free_before = true;

    const uint32_t counters_init[2] = {0u, 0xFFFFFFFFu};
    const auto t0 = std::chrono::steady_clock::now();
    auto finish = [s, t0]() {
        s->elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };

    for (uint32_t c = 0; c < cycles; ++c) {
        Line("cycle").u64("cycle", c).emit();

        if (c == 0) emit_stage("reserve", c, 0);
        gp_va base = 0;
        d = gpMemAddressReserve(&base, kReserveBytes, 0, 0, 0);
        if (d != (gpDrvResult)0) { finish(); return fail("reserve", drv_error("MemAddressReserve", d)); }

        for (uint32_t k = 0; k < chunks; ++k) {
            const gp_va at = base + (gp_va)k * chunk;
            r = gpMemcpy(counters, counters_init, sizeof counters_init, gpMemcpyHostToDevice);
            if (r != gpSuccess) { finish(); return fail("verify", rt_error("Memcpy", r)); }

            if (c == 0) emit_stage("create", c, k);
            gpMemHandle h;
            memset(&h, 0, sizeof h);
            d = gpMemCreate(&h, chunk, &prop, 0);
            if (d != (gpDrvResult)0) { finish(); return fail("create", drv_error("MemCreate", d)); }

            if (c == 0) emit_stage("map", c, k);
            d = gpMemMap(at, chunk, 0, h, 0);
            if (d != (gpDrvResult)0) { finish(); return fail("map", drv_error("MemMap", d)); }

            if (c == 0) emit_stage("release", c, k);
            d = gpMemRelease(h);
            if (d != (gpDrvResult)0) { finish(); return fail("release", drv_error("MemRelease", d)); }

            if (c == 0) emit_stage("set_access", c, k);
            const gp_va access_at = (GPUPROBE_TEST_FAULT == 2 && k == 1) ? at + 4096 : at;
            d = gpMemSetAccess(access_at, chunk, &access, 1);
            if (d != (gpDrvResult)0) {
                ApiError e = drv_error("MemSetAccess", d);
                // Would access over everything mapped so far work (the gfx1151 workaround)?
                gpDrvResult whole = gpMemSetAccess(base, (size_t)(k + 1) * chunk, &access, 1);
                s->whole_range_helped = whole == (gpDrvResult)0;
                finish();
                return fail("set_access", e);
            }

            // No host delay from here to the kernels (in cycle 0 only the stage lines).
            const uint64_t new_words = chunk / 4;
            const uint64_t all_words = (uint64_t)(k + 1) * chunk / 4;
            uint32_t* words = (uint32_t*)(uintptr_t)base;
            if (c == 0) emit_stage("write", c, k);
            const unsigned wb = blocks_for(new_words);
            if (!(GPUPROBE_TEST_FAULT == 1 && c == 3 && k == 1))
                gp_write<<<wb, kThreadsPerBlock>>>(words, (uint64_t)k * new_words, new_words, c, kThreadsPerBlock, wb);
            r = gpGetLastError();
            if (r != gpSuccess) { finish(); return fail("write", rt_error("LaunchKernel", r)); }

            if (c == 0) emit_stage("verify", c, k);
            const unsigned vb = blocks_for(all_words);
            gp_verify<<<vb, kThreadsPerBlock>>>(words, all_words, c, counters, kThreadsPerBlock, vb);
            r = gpGetLastError();
            if (r != gpSuccess) { finish(); return fail("verify", rt_error("LaunchKernel", r)); }
            r = gpDeviceSynchronize();
            if (r != gpSuccess) { finish(); return fail("verify", rt_error("DeviceSynchronize", r)); }
            uint32_t got[2] = {0, 0};
            r = gpMemcpy(got, counters, sizeof got, gpMemcpyDeviceToHost);
            if (r != gpSuccess) { finish(); return fail("verify", rt_error("Memcpy", r)); }
            if (got[0] != 0) {
                finish();
                s->mismatches = got[0];
                s->has_bad = true;
                s->first_bad_offset = (uint64_t)got[1] * 4;
                s->expected_value = host_value(got[1], c);
                uint32_t bad = 0;
                if (gpMemcpy(&bad, words + got[1], sizeof bad, gpMemcpyDeviceToHost) == gpSuccess) {
                    s->first_bad_value = bad;
                    s->has_bad_value = true;
                }
                (void)gpGetLastError();
                s->failed_stage = "verify";
                return;
            }
        }

        // Unmap chunk by chunk, as the HIP pool does (ROCR-Runtime#285), then drop the range.
        for (uint32_t k = 0; k < chunks; ++k) {
            if (c == 0) emit_stage("unmap", c, k);
            d = gpMemUnmap(base + (gp_va)k * chunk, chunk);
            if (d != (gpDrvResult)0) { finish(); return fail("unmap", drv_error("MemUnmap", d)); }
        }
        if (c == 0) emit_stage("free", c, 0);
        d = gpMemAddressFree(base, kReserveBytes);
        if (d != (gpDrvResult)0) { finish(); return fail("free", drv_error("MemAddressFree", d)); }
        s->cycles_done = c + 1;
    }
    finish();

    emit_stage("vram_check", cycles, 0);
    r = gpMemGetInfo(&free_b, &total_b);
    if (r != gpSuccess) return fail("vram_check", rt_error("MemGetInfo", r));
    s->free_after = free_b;
    s->has_free_after = true;
    if (s->free_after + kVramSlackBytes < s->free_before) {
        s->failed_stage = "vram_check";
        return;
    }
    (void)gpFree(counters);
    s->pass = true;
}

// ------------------------------------------------------------------------------------------ peer

void run_peer(int from, int to, int count) {
    int can = 0;
    int copy_ok = -1;
    uint64_t mismatches = 0;
    ApiError err;
    const uint64_t words = kPeerBytes / 4;
    uint32_t* src = nullptr;
    uint32_t* dst = nullptr;
    uint32_t* counters = nullptr;
    const uint32_t counters_init[2] = {0u, 0xFFFFFFFFu};
    uint32_t got[2] = {0, 0};
    gpError_t r;

    if (from >= count || to >= count) {
        err = make_error("gpuprobe", 0, "invalid_device_index", "peer device index out of range");
        goto report;
    }
    r = gpDeviceCanAccessPeer(&can, from, to);
    if (r != gpSuccess) { err = rt_error("DeviceCanAccessPeer", r); can = 0; goto report; }
    if (can) {
        // Enable both ways, as llama.cpp does; "already enabled" is fine.
        r = gpSetDevice(from);
        if (r == gpSuccess) {
            r = gpDeviceEnablePeerAccess(to, 0);
            if (r == gpErrorPeerAccessAlreadyEnabled) r = gpSuccess;
            if (r != gpSuccess) keep_first(&err, rt_error("DeviceEnablePeerAccess", r));
        } else {
            keep_first(&err, rt_error("SetDevice", r));
        }
        int back = 0;
        if (gpDeviceCanAccessPeer(&back, to, from) == gpSuccess && back && gpSetDevice(to) == gpSuccess) {
            r = gpDeviceEnablePeerAccess(from, 0);
            if (r != gpSuccess && r != gpErrorPeerAccessAlreadyEnabled) keep_first(&err, rt_error("DeviceEnablePeerAccess", r));
        }
        (void)gpGetLastError();
    }

    // Patterned buffer on `from`, copied to `to`, verified on `to`.
    r = gpSetDevice(from);
    if (r != gpSuccess) { keep_first(&err, rt_error("SetDevice", r)); goto report; }
    r = gpMalloc((void**)&src, kPeerBytes);
    if (r != gpSuccess) { keep_first(&err, rt_error("Malloc", r)); goto report; }
    gp_write<<<kMaxBlocks, kThreadsPerBlock>>>(src, 0, words, kPeerPatternCycle, kThreadsPerBlock, kMaxBlocks);
    r = gpGetLastError();
    if (r == gpSuccess) r = gpDeviceSynchronize();
    if (r != gpSuccess) { keep_first(&err, rt_error("DeviceSynchronize", r)); goto report; }

    r = gpSetDevice(to);
    if (r != gpSuccess) { keep_first(&err, rt_error("SetDevice", r)); goto report; }
    r = gpMalloc((void**)&dst, kPeerBytes);
    if (r == gpSuccess) r = gpMalloc((void**)&counters, sizeof counters_init);
    if (r != gpSuccess) { keep_first(&err, rt_error("Malloc", r)); goto report; }
    r = gpMemset(dst, 0, kPeerBytes);
    if (r == gpSuccess) r = gpMemcpy(counters, counters_init, sizeof counters_init, gpMemcpyHostToDevice);
    if (r != gpSuccess) { keep_first(&err, rt_error("Memcpy", r)); goto report; }

    r = gpMemcpyPeer(dst, to, src, from, kPeerBytes);
    if (r == gpSuccess) r = gpDeviceSynchronize();
    if (r != gpSuccess) {
        keep_first(&err, rt_error("MemcpyPeer", r));
        copy_ok = 0;
        goto report;
    }
    gp_verify<<<kMaxBlocks, kThreadsPerBlock>>>(dst, words, kPeerPatternCycle, counters, kThreadsPerBlock, kMaxBlocks);
    r = gpGetLastError();
    if (r == gpSuccess) r = gpDeviceSynchronize();
    if (r == gpSuccess) r = gpMemcpy(got, counters, sizeof got, gpMemcpyDeviceToHost);
    if (r != gpSuccess) { keep_first(&err, rt_error("DeviceSynchronize", r)); copy_ok = 0; goto report; }
    mismatches = got[0];
    copy_ok = got[0] == 0;

report:
    Line("peer")
        .i64("from", from)
        .i64("to", to)
        .boolean("can_access", can != 0)
        .bool_or_null("copy_ok", copy_ok)
        .u64("mismatches", mismatches)
        .error("error", err)
        .emit();
}

}  // namespace

int main(int argc, char** argv) {
    Args args;
    if (!parse_args(argc, argv, &args)) return 2;

    const int count = emit_hello();
    if (count > 0) {
        switch (args.mode) {
            case Mode::List:
                for (int i = 0; i < count; ++i) emit_device(query_device(i));
                break;
            case Mode::Device: {
                DeviceFacts f = query_device(args.device);
                emit_device(f);
                if (args.smoke) {
                    SmokeResult s;
                    s.cycles = args.cycles;
                    s.chunks = args.chunks;
                    if (!f.ok) {
                        s.failed_stage = "context";
                        s.error = f.error;
                    } else {
                        run_smoke(f, args.cycles, args.chunks, &s);
                    }
                    emit_smoke(s);
                }
                break;
            }
            case Mode::Peer:
                run_peer(args.peer_from, args.peer_to, count);
                break;
        }
    }
    emit_done();
    // Leave without running destructors of a runtime that may be in a bad state; stdout is flushed.
    return 0;
}
