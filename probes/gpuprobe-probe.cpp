// gpuprobe-probe: the single-source probe program (HIP with hipcc, CUDA with nvcc).
//
// Implements probes/PROTOCOL.md (version 2): JSON lines on stdout, each flushed as soon as it is
// written, so that a probe that hangs or dies still leaves a record of how far it got.
//
//   gpuprobe-probe --list
//   gpuprobe-probe --device N [--cycles C] [--no-smoke]
//   gpuprobe-probe --peers
//   gpuprobe-probe --plan GRANULARITY FREE_BYTES     (prints the growth schedule; no GPU needed)
//
// The smoke test grows pools the way llama.cpp's VMM pool (ggml_cuda_pool_vmm) grows: by
// round_up(request - available, granularity), several pools alive at once, each growth created,
// mapped at the pool's end, released and given access, with the write kernel over the new chunk and
// the verify kernel over the whole pool queued behind it on a non-blocking stream. The requests come
// from probes/smoke-plan.toml (the generated block below); the CUDA backend of gpuprobe runs the same
// plan, and `--plan` lets tests compare the two schedules.
//
// Exit status: 0 whenever a report was printed, 2 for bad arguments.

#include "compat.h"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <thread>
#include <vector>

namespace {

const int kProtocol = 2;
const uint64_t kVramSlackBytes = 32ull << 20;        // allowed drop of free VRAM after all cycles
const uint64_t kPeerBytes = 64ull << 20;             // size of the verified peer copy
const unsigned kThreadsPerBlock = 256;
const unsigned kMaxBlocks = 1024;
const unsigned kBusyBlocks = 64;                      // few enough to be resident together anywhere
const uint32_t kPeerPatternSeed = 7;
const size_t kSlots = 64;                             // mismatch counter slots per cycle
const uint64_t kHostPieceBytes = 32ull << 20;         // host comparison piece (two in flight)

// Fault injection for checking the failure paths on a real GPU; only test builds define it
// (-DGPUPROBE_TEST_FAULT=N). 1: skip the write kernel of growth 4 in cycle 3 (verify must fail).
// 2: set access on growth 3 one page off (set_access must fail, whole range must help).
// 3: zero two words of pool 0 after the last GPU-side verify (only host_compare may catch them).
#ifndef GPUPROBE_TEST_FAULT
#define GPUPROBE_TEST_FAULT 0
#endif

const auto g_started = std::chrono::steady_clock::now();

double ms_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// ---------------------------------------------------------------------------------- smoke plan

struct PlanOp {
    uint32_t pool;
    uint32_t first;
    uint32_t count;
};

// ---- smoke plan: generated from probes/smoke-plan.toml (GPUPROBE_BLESS=1 cargo test smoke_plan); do not edit
const uint32_t kPlanVersion = 2;
const uint32_t kPlanMinCycles = 200;
const uint32_t kPlanPools = 3;
const uint64_t kPlanFitPercent = 75ull;
const uint64_t kPlanReserveBytes = 34359738368ull;
const uint64_t kPlanRequestAlignment = 128ull;
const uint64_t kPlanMinGrowthBytes = 2097152ull;
const uint64_t kPlanCycleRequests[] = {4718592ull, 4718592ull, 4718592ull, 1048576ull, 6815744ull, 1048576ull, 6815744ull, 1048576ull, 6815744ull, 17825792ull, 17825792ull, 17825792ull};  // bytes
const PlanOp kPlanCycleOps[] = {{0, 0, 1}, {1, 1, 1}, {2, 2, 1}, {0, 3, 2}, {1, 5, 2}, {2, 7, 2}, {0, 9, 1}, {1, 10, 1}, {2, 11, 1}};  // {pool, first request, count}
const uint64_t kPlanLongTargetBytes = 1073741824ull;
const uint64_t kPlanLongFreeDivisor = 4ull;
const uint32_t kPlanBusyUs = 3000;
const uint32_t kPlanSettleUs = 5000;
const uint64_t kPlanLongRequests[] = {41ull, 123ull, 307ull, 1056ull};  // 1/1024ths of the target
const PlanOp kPlanLongOps[] = {{0, 0, 1}, {0, 1, 1}, {0, 2, 1}, {0, 3, 1}};  // {pool, first request, count}
// ---- end of smoke plan

// ------------------------------------------------------------------------------------- kernels

// value(w, seed); seed = cycle * 8 + pool (see probes/PROTOCOL.md).
__device__ __forceinline__ uint32_t gp_value(uint64_t word, uint32_t seed) {
    return ((uint32_t)word * 2654435761u) ^ (seed * 2246822519u) ^ 0xA5A5A5A5u;
}

// base[w] = value(w, seed) for w in [word_begin, word_begin + word_count). Grid-stride loop; the
// launch shape is passed in so the kernel needs no device library on AMD (see compat.h).
__global__ void gp_write(uint32_t* base, uint64_t word_begin, uint64_t word_count, uint32_t seed,
                         uint32_t threads, uint32_t blocks) {
    const uint64_t stride = (uint64_t)threads * blocks;
    for (uint64_t i = (uint64_t)gp_block_id() * threads + gp_thread_id(); i < word_count; i += stride) {
        const uint64_t w = word_begin + i;
        base[w] = gp_value(w, seed);
    }
}

// For w in [word_begin, word_begin + word_count): count words that differ (slot[0]) and keep the
// lowest bad word index (slot[1], starts at all ones). 64-bit counters.
__global__ void gp_verify(const uint32_t* base, uint64_t word_begin, uint64_t word_count, uint32_t seed,
                          unsigned long long* slot, uint32_t threads, uint32_t blocks) {
    const uint64_t stride = (uint64_t)threads * blocks;
    for (uint64_t i = (uint64_t)gp_block_id() * threads + gp_thread_id(); i < word_count; i += stride) {
        const uint64_t w = word_begin + i;
        if (base[w] != gp_value(w, seed)) {
            atomicAdd(&slot[0], 1ull);
            atomicMin(&slot[1], (unsigned long long)w);
        }
    }
}

// Verifies words [0, word_count) pass after pass until `ticks` of gp_wall_ticks() have passed: keeps
// the GPU on already-mapped memory while the host maps the next chunk.
__global__ void gp_busy(const uint32_t* base, uint64_t word_count, uint32_t seed, unsigned long long* slot,
                        long long ticks, uint32_t threads, uint32_t blocks) {
    const long long t0 = gp_wall_ticks();
    const uint64_t stride = (uint64_t)threads * blocks;
    const uint64_t first = (uint64_t)gp_block_id() * threads + gp_thread_id();
    for (;;) {
        for (uint64_t w = first; w < word_count; w += stride) {
            if (((volatile const uint32_t*)base)[w] != gp_value(w, seed)) {
                atomicAdd(&slot[0], 1ull);
                atomicMin(&slot[1], (unsigned long long)w);
            }
        }
        const long long now = gp_wall_ticks();
        if (t0 < 0 || now < 0 || now - t0 >= ticks) break;
    }
}

uint32_t host_value(uint64_t word, uint32_t seed) {
    return ((uint32_t)word * 2654435761u) ^ (seed * 2246822519u) ^ 0xA5A5A5A5u;
}

uint32_t seed_of(uint32_t cycle, uint32_t pool) { return (cycle << 3) | (pool & 7u); }

unsigned blocks_for(uint64_t words) {
    uint64_t b = (words + kThreadsPerBlock - 1) / kThreadsPerBlock;
    if (b < 1) b = 1;
    if (b > kMaxBlocks) b = kMaxBlocks;
    return (unsigned)b;
}

// Number of wrong words in `n` host words starting at word index `first`, and the first of them.
uint64_t host_compare(const uint32_t* words, uint64_t n, uint64_t first, uint32_t seed, uint64_t* first_bad) {
    const uint32_t s = (seed * 2246822519u) ^ 0xA5A5A5A5u;
    uint32_t w = (uint32_t)first;
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; ++i, ++w) bad += words[i] != ((w * 2654435761u) ^ s);
    if (bad != 0) {
        for (uint64_t i = 0; i < n; ++i) {
            if (words[i] != host_value(first + i, seed)) {
                *first_bad = first + i;
                break;
            }
        }
    }
    return bad;
}

// host_compare split over a few threads: one core compares about 4-5 GB/s, a PCIe 5 copy delivers
// over 50 GB/s, and the host check reads over a GiB per device.
uint64_t host_compare_parallel(const uint32_t* words, uint64_t n, uint64_t first, uint32_t seed, uint64_t* first_bad) {
    const uint64_t kMinPart = 1ull << 18;
    unsigned hw = std::thread::hardware_concurrency();
    uint64_t parts = hw == 0 ? 1 : (hw < 4 ? hw : 4);
    const uint64_t most = (n + kMinPart - 1) / kMinPart;
    if (parts > most) parts = most;
    if (parts <= 1) return host_compare(words, n, first, seed, first_bad);
    const uint64_t part = (n + parts - 1) / parts;
    std::vector<uint64_t> bad(parts, 0), at(parts, ~0ull);
    std::vector<std::thread> threads;
    for (uint64_t i = 1; i < parts; ++i) {
        const uint64_t from = i * part, len = from >= n ? 0 : (n - from < part ? n - from : part);
        threads.emplace_back([&, i, from, len]() { bad[i] = host_compare(words + from, len, first + from, seed, &at[i]); });
    }
    bad[0] = host_compare(words, part < n ? part : n, first, seed, &at[0]);
    for (std::thread& t : threads) t.join();
    uint64_t total = 0;
    for (uint64_t i = 0; i < parts; ++i) {
        if (bad[i] != 0 && total == 0) *first_bad = at[i];
        total += bad[i];
    }
    return total;
}

// --------------------------------------------------------------------------- growth schedule

struct Growth {
    uint32_t pool;
    uint64_t offset;  // from the pool's base: its size before the growth
    uint64_t bytes;
};

struct Schedule {
    std::vector<Growth> cycle;  // every cycle: pools start empty
    std::vector<Growth> lng;    // cycle 0 after `cycle`: pool growth past the target
    uint64_t long_target = 0;
};

struct PoolSim {
    uint64_t size = 0;
    uint64_t used = 0;
};

// ggml_cuda_pool_vmm::alloc: the request rounded up to the alignment; when it does not fit, the
// pool grows by round_up(request - available, granularity) at its end.
bool pool_request(PoolSim* p, uint64_t bytes, uint64_t granularity, Growth* g) {
    const uint64_t size = (bytes + kPlanRequestAlignment - 1) / kPlanRequestAlignment * kPlanRequestAlignment;
    const uint64_t avail = p->size - p->used;
    bool grew = false;
    if (size > avail) {
        const uint64_t gr = granularity == 0 ? 1 : granularity;
        const uint64_t grow = (size - avail + gr - 1) / gr * gr;
        g->offset = p->size;
        g->bytes = grow;
        p->size += grow;
        grew = true;
    }
    p->used += size;
    return grew;
}

Schedule make_schedule(uint64_t granularity, uint64_t free_bytes) {
    Schedule s;
    PoolSim pools[8];
    for (const PlanOp& op : kPlanCycleOps) {
        for (uint32_t i = 0; i < op.count; ++i) {
            Growth g{op.pool, 0, 0};
            if (pool_request(&pools[op.pool], kPlanCycleRequests[op.first + i], granularity, &g)) s.cycle.push_back(g);
        }
        pools[op.pool].used = 0;
    }
    uint64_t target = free_bytes / kPlanLongFreeDivisor;
    if (target > kPlanLongTargetBytes) target = kPlanLongTargetBytes;
    s.long_target = target;
    for (const PlanOp& op : kPlanLongOps) {
        PoolSim* p = &pools[op.pool];
        for (uint32_t i = 0; i < op.count; ++i) {
            uint64_t request = target * kPlanLongRequests[op.first + i] / 1024;
            // Keep every growth at least kPlanMinGrowthBytes: raise a request that would grow less.
            const uint64_t avail = p->size - p->used;
            if (request > avail && request - avail < kPlanMinGrowthBytes) request = avail + kPlanMinGrowthBytes;
            Growth g{op.pool, 0, 0};
            if (pool_request(p, request, granularity, &g)) s.lng.push_back(g);
        }
        p->used = 0;
    }
    return s;
}

// VRAM the schedule maps at its largest: every pool at its final size (pools live together).
uint64_t schedule_need(const Schedule& s, uint32_t pools) {
    uint64_t size[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (const std::vector<Growth>* v : {&s.cycle, &s.lng}) {
        for (const Growth& g : *v) {
            if (g.pool < pools && g.pool < 8 && g.offset + g.bytes > size[g.pool]) size[g.pool] = g.offset + g.bytes;
        }
    }
    uint64_t need = 0;
    for (uint64_t x : size) need += x;
    return need;
}

// The same schedule for pools 0..k-1 only.
Schedule only_pools(const Schedule& s, uint32_t k) {
    Schedule o;
    o.long_target = s.long_target;
    for (const Growth& g : s.cycle) if (g.pool < k) o.cycle.push_back(g);
    for (const Growth& g : s.lng) if (g.pool < k) o.lng.push_back(g);
    return o;
}

// As smoke_plan.rs's Plan::fit: the whole schedule where all its pools fit in kPlanFitPercent of
// free VRAM, else the first pools that do; *pools 0 where not even pool 0 fits.
Schedule fit_schedule(uint64_t granularity, uint64_t free_bytes, uint32_t* pools, uint64_t* need, uint64_t* full_need) {
    const Schedule full = make_schedule(granularity, free_bytes);
    // floor(free * percent / 100) without overflow, the same number smoke_plan.rs computes.
    const uint64_t budget = free_bytes / 100 * kPlanFitPercent + free_bytes % 100 * kPlanFitPercent / 100;
    *full_need = schedule_need(full, kPlanPools);
    for (uint32_t k = kPlanPools; k >= 1; --k) {
        Schedule s = only_pools(full, k);
        *need = schedule_need(s, kPlanPools);
        if (*need <= budget) {
            *pools = k;
            return s;
        }
    }
    *pools = 0;
    *need = schedule_need(only_pools(full, 1), kPlanPools);
    return Schedule();
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
    Line& u64_list(const char* k, const std::vector<uint64_t>& v) {
        key(k);
        s_ += "[";
        for (size_t i = 0; i < v.size(); ++i) s_ += (i ? "," : "") + std::to_string((unsigned long long)v[i]);
        s_ += "]";
        return *this;
    }
    Line& str_list(const char* k, const std::vector<std::string>& v) {
        key(k);
        s_ += "[";
        for (size_t i = 0; i < v.size(); ++i) {
            if (i) s_ += ",";
            str_value(v[i].c_str());
        }
        s_ += "]";
        return *this;
    }
    // A nested object written by another Line's fields (without its event).
    Line& object(const char* k, const Line& fields) {
        key(k);
        s_ += "{" + fields.s_.substr(fields.s_.find(',') + 1) + "}";
        return *this;
    }
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

void emit_stage(const char* stage, uint32_t cycle, uint32_t pool, uint32_t growth) {
    Line("stage").str("stage", stage).u64("cycle", cycle).u64("pool", pool).u64("growth", growth).emit();
}

// ------------------------------------------------------------------------------------- arguments

enum class Mode { List, Device, Peers, Plan };

struct Args {
    Mode mode = Mode::List;
    int device = -1;
    uint32_t cycles = 200;
    bool smoke = true;
    uint64_t plan_granularity = 0;
    uint64_t plan_free = 0;
};

void usage(const char* why) {
    fprintf(stderr,
            "gpuprobe-probe: %s\n"
            "usage: gpuprobe-probe --list\n"
            "       gpuprobe-probe --device N [--cycles C] [--no-smoke]\n"
            "       gpuprobe-probe --peers\n"
            "       gpuprobe-probe --plan GRANULARITY FREE_BYTES\n",
            why);
}

bool parse_uint(const char* s, unsigned long long max, unsigned long long* out) {
    if (s == nullptr || *s < '0' || *s > '9') return false;
    char* end = nullptr;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end != '\0' || v > max) return false;
    *out = v;
    return true;
}

// Returns false (after printing the reason) on bad arguments.
bool parse_args(int argc, char** argv, Args* a) {
    bool list = false, device = false, peers = false, plan = false, cycles = false, no_smoke = false;
    unsigned long long v = 0, w = 0;
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
        } else if (strcmp(arg, "--peers") == 0 && !peers) {
            peers = true;
        } else if (strcmp(arg, "--plan") == 0 && !plan) {
            const char* next2 = i + 2 < argc ? argv[i + 2] : nullptr;
            if (!parse_uint(next, 1ull << 40, &v) || !parse_uint(next2, 1ull << 50, &w) || v == 0) {
                usage("--plan needs a granularity (> 0) and free bytes");
                return false;
            }
            a->plan_granularity = v;
            a->plan_free = w;
            plan = true;
            i += 2;
        } else if (strcmp(arg, "--cycles") == 0 && !cycles) {
            if (!parse_uint(next, 1000000000ull, &v) || v == 0) { usage("--cycles needs a count >= 1"); return false; }
            a->cycles = (uint32_t)v;
            cycles = true;
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
    if ((int)list + (int)device + (int)peers + (int)plan != 1) {
        usage("give exactly one of --list, --device N, --peers, --plan G F");
        return false;
    }
    if (!device && (cycles || no_smoke)) {
        usage("--cycles and --no-smoke go with --device");
        return false;
    }
    a->mode = list ? Mode::List : device ? Mode::Device : peers ? Mode::Peers : Mode::Plan;
    return true;
}

void emit_plan(uint64_t granularity, uint64_t free_bytes) {
    const Schedule s = make_schedule(granularity, free_bytes);
    std::string g = "[";
    bool first = true;
    const struct {
        const char* phase;
        const std::vector<Growth>* v;
    } phases[] = {{"cycle", &s.cycle}, {"long", &s.lng}};
    for (const auto& ph : phases) {
        for (const Growth& x : *ph.v) {
            if (!first) g += ",";
            first = false;
            g += "{\"phase\":\"" + std::string(ph.phase) + "\",\"pool\":" + std::to_string(x.pool) +
                 ",\"offset\":" + std::to_string((unsigned long long)x.offset) +
                 ",\"bytes\":" + std::to_string((unsigned long long)x.bytes) + "}";
        }
    }
    g += "]";
    printf("{\"event\":\"plan\",\"version\":%u,\"min_cycles\":%u,\"pools\":%u,\"long_target\":%llu,\"growths\":%s}\n",
           kPlanVersion, kPlanMinCycles, kPlanPools, (unsigned long long)s.long_target, g.c_str());
    fflush(stdout);
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
        .f64("init_ms", ms_since(g_started))
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
    unsigned pci_domain = 0, pci_bus = 0, pci_device = 0;
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
        f.pci_domain = (unsigned)dom & 0xffffu;
        f.pci_bus = (unsigned)bus & 0xffu;
        f.pci_device = (unsigned)dev & 0x1fu;
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

void emit_device(const DeviceFacts& f, double context_ms, double queries_ms) {
    Line l("device");
    l
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
        .u64_or_null("granularity_recommended", f.has_grec, f.grec);
    if (context_ms >= 0) l.f64("context_ms", context_ms); else l.null("context_ms");
    l.f64("queries_ms", queries_ms).error("error", f.error).emit();
}

// ----------------------------------------------------------------------------------------- smoke

struct BadWords {
    uint64_t mismatches = 0;
    uint64_t first_offset = 0;  // bytes from the pool's base
    bool has_seen = false;
    uint32_t seen = 0;
    uint32_t expected = 0;
    const char* check = nullptr;  // gpu, busy, settle, host
};

struct SmokeResult {
    bool pass = false;
    const char* failed_stage = nullptr;
    ApiError error;
    uint32_t failed_cycle = 0;
    int failed_pool = -1;
    int failed_growth = -1;
    uint32_t cycles_done = 0;
    uint32_t cycles = 0;
    uint64_t chunk_bytes = 0;
    bool has_schedule = false;
    uint64_t growths_per_cycle = 0, long_growths = 0, long_target = 0;
    uint64_t smallest = 0, largest = 0, largest_pool = 0, host_checked = 0;
    bool has_bad = false;
    BadWords bad;
    int whole_range_helped = -1;
    bool has_free_before = false, has_free_after = false;
    uint64_t free_before = 0, free_after = 0;
    double elapsed_ms = 0.0;
    double long_ms = -1.0;
    // Too little free VRAM: "partial" (pools_run < kPlanPools, or out of memory mid-run) or
    // "not-run", with the reason.
    const char* cut_short = nullptr;
    std::string reason;
    uint32_t pools_run = 0;
    std::vector<std::string> notes;
    // KFD's per-process accounting (AMD), where the kernel offers it.
    bool has_accounting = false;
    bool has_own_before = false, has_own_after = false, own_listed = true;
    uint64_t own_before = 0, own_after = 0;
    std::vector<uint64_t> other_pids;
};

// ------------------------------------------------------------------------ per-process accounting

// KFD (the amdgpu compute driver) keeps, per process, the VRAM it holds on each GPU:
// /sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>. The smoke test judges the probe by its own
// number, so other processes on a shared GPU cannot fail it (issue #28). No KFD (NVIDIA, an old
// kernel): no accounting, and a change of free VRAM is only a note.
const char* const kKfdRoot = "/sys/class/kfd/kfd";

// Reads a small sysfs file; false when it is missing or unreadable.
bool read_small(const std::string& path, std::string* out) {
    FILE* f = fopen(path.c_str(), "r");
    if (f == nullptr) return false;
    char buf[4096];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    *out = buf;
    return true;
}

bool read_u64_file(const std::string& path, uint64_t* v) {
    std::string text;
    if (!read_small(path, &text)) return false;
    char* end = nullptr;
    const unsigned long long x = strtoull(text.c_str(), &end, 10);
    if (end == text.c_str()) return false;
    *v = x;
    return true;
}

// "key value" lines of a topology properties file.
bool property(const std::string& text, const char* key, uint64_t* v) {
    const std::string k = std::string(key) + " ";
    size_t at = 0;
    while (at < text.size()) {
        const size_t eol = text.find('\n', at);
        const std::string line = text.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
        if (line.compare(0, k.size(), k) == 0) {
            *v = strtoull(line.c_str() + k.size(), nullptr, 10);
            return true;
        }
        if (eol == std::string::npos) break;
        at = eol + 1;
    }
    return false;
}

// KFD's gpu_id of the device at PCI domain:bus:device (location_id = bus << 8 | device << 3).
bool kfd_gpu_id(const DeviceFacts& f, uint64_t* gpu_id) {
    if (!f.has_pci) return false;
    const std::string nodes = std::string(kKfdRoot) + "/topology/nodes";
    DIR* d = opendir(nodes.c_str());
    if (d == nullptr) return false;
    bool found = false;
    for (struct dirent* e = readdir(d); e != nullptr && !found; e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string node = nodes + "/" + e->d_name;
        std::string props;
        uint64_t id = 0, location = 0, domain = 0;
        if (!read_u64_file(node + "/gpu_id", &id) || id == 0) continue;  // 0: a CPU node
        if (!read_small(node + "/properties", &props) || !property(props, "location_id", &location)) continue;
        if (property(props, "domain", &domain) && domain != f.pci_domain) continue;
        if (location >> 8 == f.pci_bus && ((location >> 3) & 0x1f) == f.pci_device) {
            *gpu_id = id;
            found = true;
        }
    }
    closedir(d);
    return found;
}

struct KfdAccounting {
    bool ok = false;
    uint64_t gpu_id = 0;
    unsigned long long pid = 0;

    // This process's VRAM on the GPU; false where KFD does not list it.
    bool own(uint64_t* bytes) const {
        return read_u64_file(std::string(kKfdRoot) + "/proc/" + std::to_string(pid) + "/vram_" + std::to_string(gpu_id), bytes);
    }
    // Adds every other process with VRAM on the GPU to *others (once each).
    void others(std::vector<uint64_t>* seen) const {
        const std::string procs = std::string(kKfdRoot) + "/proc";
        DIR* d = opendir(procs.c_str());
        if (d == nullptr) return;
        for (struct dirent* e = readdir(d); e != nullptr; e = readdir(d)) {
            char* end = nullptr;
            const unsigned long long other = strtoull(e->d_name, &end, 10);
            if (end == e->d_name || *end != '\0' || other == pid) continue;
            uint64_t bytes = 0;
            if (!read_u64_file(procs + "/" + e->d_name + "/vram_" + std::to_string(gpu_id), &bytes) || bytes == 0) continue;
            bool known = false;
            for (uint64_t p : *seen) known = known || p == other;
            if (!known && seen->size() < 256) seen->push_back(other);
        }
        closedir(d);
    }
};

KfdAccounting kfd_open(const DeviceFacts& f) {
    KfdAccounting a;
    a.pid = (unsigned long long)getpid();
    a.ok = kfd_gpu_id(f, &a.gpu_id);
    return a;
}

// ", with 2 other processes on the GPU", or nothing.
std::string others_phrase(const SmokeResult& s) {
    if (s.other_pids.empty()) return "";
    if (s.other_pids.size() == 1) return ", with 1 other process on the GPU";
    return ", with " + std::to_string(s.other_pids.size()) + " other processes on the GPU";
}

void emit_smoke(const SmokeResult& s) {
    Line l("smoke");
    l.str("outcome", s.pass ? (s.cut_short != nullptr ? s.cut_short : "pass") : "fail").u64("plan_version", kPlanVersion);
    if (s.pass && s.cut_short != nullptr) l.str("reason", s.reason);
    if (s.failed_stage != nullptr) l.str("failed_stage", s.failed_stage); else l.null("failed_stage");
    l.error("error", s.error);
    l.u64_or_null("failed_cycle", s.failed_stage != nullptr, s.failed_cycle);
    l.u64_or_null("failed_pool", s.failed_pool >= 0, (uint64_t)s.failed_pool);
    l.u64_or_null("failed_growth", s.failed_growth >= 0, (uint64_t)s.failed_growth);
    l.u64("cycles_done", s.cycles_done)
        .u64("cycles", s.cycles)
        .u64("min_cycles", kPlanMinCycles)
        .u64("pools", kPlanPools)
        .u64_or_null("chunks_per_cycle", s.has_schedule, s.growths_per_cycle)
        .u64("chunk_bytes", s.chunk_bytes)
        .u64_or_null("smallest_chunk_bytes", s.smallest > 0, s.smallest)
        .u64_or_null("largest_chunk_bytes", s.largest > 0, s.largest)
        .u64("largest_pool_bytes", s.largest_pool)
        .u64_or_null("long_target_bytes", s.has_schedule, s.long_target)
        .u64_or_null("long_growths", s.has_schedule, s.long_growths)
        .u64("host_checked_bytes", s.host_checked)
        .u64("reserve_bytes", kPlanReserveBytes)
        .u64("mismatches", s.has_bad ? s.bad.mismatches : 0)
        .u64_or_null("first_bad_offset", s.has_bad, s.bad.first_offset)
        .u64_or_null("first_bad_value", s.has_bad && s.bad.has_seen, s.bad.seen)
        .u64_or_null("expected_value", s.has_bad, s.bad.expected);
    if (s.has_bad) l.str("bad_check", s.bad.check); else l.null("bad_check");
    l.bool_or_null("whole_range_access_helped", s.whole_range_helped)
        .u64_or_null("vram_free_before", s.has_free_before, s.free_before)
        .u64_or_null("vram_free_after", s.has_free_after, s.free_after)
        .f64("elapsed_ms", s.elapsed_ms);
    if (s.long_ms >= 0) l.f64("long_phase_ms", s.long_ms); else l.null("long_phase_ms");
    if (s.pools_run > 0 && s.pools_run < kPlanPools) l.u64("pools_run", s.pools_run);
    if (s.has_accounting) {
        Line a("accounting");
        a.str("source", "kfd")
            .u64_or_null("own_before", s.has_own_before, s.own_before)
            .u64_or_null("own_after", s.has_own_after, s.own_after)
            .boolean("own_listed", s.own_listed)
            .u64_list("other_pids", s.other_pids);
        l.object("accounting", a);
    }
    if (!s.notes.empty()) l.str_list("notes", s.notes);
    l.emit();
}

// One reservation as llama.cpp keeps it (the HIP pool also records every mapping, to unmap them
// one by one: ROCR-Runtime#285).
// Host memory for one piece of the host comparison: page-locked when the runtime gives it,
// ordinary memory otherwise (the comparison is the same; only the copy is slower).
class HostPiece {
  public:
    explicit HostPiece(uint64_t words) {
        void* p = nullptr;
        if (gpHostMalloc(&p, words * 4) == gpSuccess && p != nullptr) {
            locked_ = static_cast<uint32_t*>(p);
        } else {
            (void)gpGetLastError();  // a refused allocation is not this run's error
            heap_.resize(words);
        }
    }
    HostPiece(const HostPiece&) = delete;
    HostPiece& operator=(const HostPiece&) = delete;
    uint32_t* data() { return locked_ != nullptr ? locked_ : heap_.data(); }
    uint32_t operator[](uint64_t i) const { return locked_ != nullptr ? locked_[i] : heap_[i]; }
    // Not a destructor: after a fault, freeing locked memory can block, and a failed run frees
    // nothing (process exit does).
    void release() {
        if (locked_ != nullptr) (void)gpHostFree(locked_);
        locked_ = nullptr;
    }

  private:
    uint32_t* locked_ = nullptr;
    std::vector<uint32_t> heap_;
};

struct PoolState {
    gp_va base = 0;
    uint64_t size = 0;
    std::vector<Growth> mappings;
};

// What a counter slot checked.
struct SlotUse {
    uint32_t pool;
    int growth;
    const char* check;
    const char* stage;
};

struct Run {
    SmokeResult* s;
    gpStream_t stream = nullptr;
    unsigned long long* slots = nullptr;  // kSlots x {count, first bad word}
    gpMemAllocationProp prop;
    gpMemAccessDesc access;
    long long busy_ticks = 0;
    std::vector<SlotUse> uses;
    // The host comparison's two pieces, made at its first use and kept for the run (locking
    // 2 x 32 MiB of host memory costs about 30 ms on an H200 host, the copy of a GiB 20 ms).
    HostPiece* staging[2] = {nullptr, nullptr};

    bool fail(const char* stage, const ApiError& e, uint32_t cycle, int pool = -1, int growth = -1) {
        s->failed_stage = stage;
        s->error = e;
        s->failed_cycle = cycle;
        s->failed_pool = pool;
        s->failed_growth = growth;
        return false;
    }

    bool reset_slots(uint32_t cycle, const char* stage) {
        static unsigned long long init[kSlots * 2];
        for (size_t i = 0; i < kSlots; ++i) {
            init[2 * i] = 0;
            init[2 * i + 1] = ~0ull;
        }
        uses.clear();
        gpError_t r = gpMemcpyAsync(slots, init, sizeof init, gpMemcpyHostToDevice, stream);
        return r == gpSuccess || fail(stage, rt_error("MemcpyAsync", r), cycle);
    }

    unsigned long long* take_slot(uint32_t pool, int growth, const char* check, const char* stage) {
        if (uses.size() >= kSlots) return nullptr;
        uses.push_back(SlotUse{pool, growth, check, stage});
        return slots + 2 * (uses.size() - 1);
    }

    void grew(uint64_t chunk, uint64_t pool_size) {
        if (s->smallest == 0 || chunk < s->smallest) s->smallest = chunk;
        if (chunk > s->largest) s->largest = chunk;
        if (pool_size > s->largest_pool) s->largest_pool = pool_size;
    }

    bool launch_verify(const PoolState& p, uint64_t begin_word, uint64_t words, uint32_t seed,
                       unsigned long long* slot, uint32_t cycle, uint32_t pool, int growth, const char* stage) {
        if (slot == nullptr) return fail(stage, make_error("gpuprobe", 0, "TOO_MANY_CHECKS", "out of counter slots"), cycle, (int)pool, growth);
        const unsigned vb = blocks_for(words);
        gp_verify<<<vb, kThreadsPerBlock, 0, stream>>>((const uint32_t*)(uintptr_t)p.base, begin_word, words, seed,
                                                       slot, kThreadsPerBlock, vb);
        gpError_t r = gpGetLastError();
        return r == gpSuccess || fail(stage, rt_error("LaunchKernel", r), cycle, (int)pool, growth);
    }

    // One growth exactly as ggml_cuda_pool_vmm::alloc does it, then the write kernel over the new
    // chunk and the verify kernel over the whole pool, queued with no host wait.
    bool grow(std::vector<PoolState>& pools, const Growth& g, uint32_t c, int growth, bool fine) {
        PoolState& p = pools[g.pool];
        const int pool = (int)g.pool;
        emit_stage("create", c, g.pool, (uint32_t)growth);
        gpMemHandle h;
        memset(&h, 0, sizeof h);
        gpDrvResult d = gpMemCreate(&h, g.bytes, &prop, 0);
        if (d != (gpDrvResult)0) return fail("create", drv_error("MemCreate", d), c, pool, growth);
        if (p.base == 0) {
            if (fine) emit_stage("reserve", c, g.pool, (uint32_t)growth);
            d = gpMemAddressReserve(&p.base, kPlanReserveBytes, 0, 0, 0);
            if (d != (gpDrvResult)0) {
                (void)gpMemRelease(h);
                return fail("reserve", drv_error("MemAddressReserve", d), c, pool, growth);
            }
        }
        const gp_va at = p.base + g.offset;
        if (fine) emit_stage("map", c, g.pool, (uint32_t)growth);
        d = gpMemMap(at, g.bytes, 0, h, 0);
        if (d != (gpDrvResult)0) {
            (void)gpMemRelease(h);
            return fail("map", drv_error("MemMap", d), c, pool, growth);
        }
        p.mappings.push_back(g);
        p.size = g.offset + g.bytes;
        if (fine) emit_stage("release", c, g.pool, (uint32_t)growth);
        d = gpMemRelease(h);
        if (d != (gpDrvResult)0) return fail("release", drv_error("MemRelease", d), c, pool, growth);
        if (fine) emit_stage("set_access", c, g.pool, (uint32_t)growth);
        const gp_va access_at = (GPUPROBE_TEST_FAULT == 2 && growth == 3) ? at + 4096 : at;
        d = gpMemSetAccess(access_at, g.bytes, &access, 1);
        if (d != (gpDrvResult)0) {
            ApiError e = drv_error("MemSetAccess", d);
            // Would access over everything mapped so far work (llama.cpp PR #23900)?
            gpDrvResult whole = gpMemSetAccess(p.base, p.size, &access, 1);
            s->whole_range_helped = whole == (gpDrvResult)0;
            (void)gpGetLastError();
            return fail("set_access", e, c, pool, growth);
        }
        grew(g.bytes, p.size);
        const uint32_t seed = seed_of(c, g.pool);
        if (fine) emit_stage("write", c, g.pool, (uint32_t)growth);
        const unsigned wb = blocks_for(g.bytes / 4);
        if (!(GPUPROBE_TEST_FAULT == 1 && c == 3 && growth == 4))
            gp_write<<<wb, kThreadsPerBlock, 0, stream>>>((uint32_t*)(uintptr_t)p.base, g.offset / 4, g.bytes / 4, seed,
                                                          kThreadsPerBlock, wb);
        gpError_t r = gpGetLastError();
        if (r != gpSuccess) return fail("write", rt_error("LaunchKernel", r), c, pool, growth);
        if (fine) emit_stage("verify", c, g.pool, (uint32_t)growth);
        return launch_verify(p, 0, p.size / 4, seed, take_slot(g.pool, growth, "gpu", "verify"), c, g.pool, growth,
                             "verify");
    }

    // Waits for everything queued, then reads the counter slots.
    bool sync_and_check(const std::vector<PoolState>& pools, uint32_t c) {
        emit_stage("sync", c, 0, 0);
        gpError_t r = gpStreamSynchronize(stream);
        if (r != gpSuccess) return fail("sync", rt_error("StreamSynchronize", r), c);
        unsigned long long got[kSlots * 2];
        r = gpMemcpy(got, slots, sizeof got, gpMemcpyDeviceToHost);
        if (r != gpSuccess) return fail("sync", rt_error("Memcpy", r), c);
        for (size_t i = 0; i < uses.size(); ++i) {
            if (got[2 * i] == 0) continue;
            const SlotUse& u = uses[i];
            const uint64_t word = got[2 * i + 1];
            s->has_bad = true;
            s->bad.mismatches = got[2 * i];
            s->bad.first_offset = word * 4;
            s->bad.expected = host_value(word, seed_of(c, u.pool));
            s->bad.check = u.check;
            uint32_t seen = 0;
            if (gpMemcpy(&seen, (const void*)(uintptr_t)(pools[u.pool].base + word * 4), sizeof seen,
                         gpMemcpyDeviceToHost) == gpSuccess) {
                s->bad.seen = seen;
                s->bad.has_seen = true;
            }
            (void)gpGetLastError();
            std::string msg = std::to_string((unsigned long long)got[2 * i]) + " words were wrong (" + u.check + " check)";
            return fail(u.stage, make_error(strcmp(u.check, "busy") == 0 ? "gpuprobe_busy" : "gpuprobe_verify", 0,
                                            "MISMATCH", msg.c_str()),
                        c, (int)u.pool, u.growth);
        }
        return true;
    }

    // Copies the pool to the host piece by piece and compares there; a second thread compares one
    // piece while the next is copied. The pieces are page-locked where the runtime gives such
    // memory: the copy engine then writes them directly instead of staging a pageable copy.
    bool host_check(const PoolState& p, uint32_t pool, uint32_t c) {
        const uint64_t piece_words = kHostPieceBytes / 4;
        const uint64_t total = p.size / 4;
        const uint32_t seed = seed_of(c, pool);
        for (HostPiece*& h : staging)
            if (h == nullptr) h = new HostPiece(piece_words);
        HostPiece* buf[2] = {staging[0], staging[1]};
        uint64_t bad = 0, first_bad = ~0ull;
        uint32_t seen = 0;
        std::thread worker;
        gpError_t r = gpSuccess;
        int k = 0;
        for (uint64_t w = 0; w < total; w += piece_words, ++k) {
            const uint64_t n = total - w < piece_words ? total - w : piece_words;
            HostPiece& b = *buf[k % 2];
            r = gpMemcpy(b.data(), (const void*)(uintptr_t)(p.base + w * 4), n * 4, gpMemcpyDeviceToHost);
            if (worker.joinable()) worker.join();
            if (r != gpSuccess) break;
            s->host_checked += n * 4;
            worker = std::thread([&bad, &first_bad, &seen, &b, n, w, seed]() {
                uint64_t at = ~0ull;
                const uint64_t m = host_compare_parallel(b.data(), n, w, seed, &at);
                if (m != 0 && first_bad == ~0ull) {
                    first_bad = at;
                    seen = b[at - w];
                }
                bad += m;
            });
        }
        if (worker.joinable()) worker.join();
        if (r != gpSuccess) return fail("host_compare", rt_error("Memcpy", r), c, (int)pool);
        if (bad != 0) {
            s->has_bad = true;
            s->bad.mismatches = bad;
            s->bad.first_offset = first_bad * 4;
            s->bad.seen = seen;
            s->bad.has_seen = true;
            s->bad.expected = host_value(first_bad, seed);
            s->bad.check = "host";
            std::string msg = std::to_string((unsigned long long)bad) + " words copied to the host were wrong";
            return fail("host_compare", make_error("host compare", 0, "MISMATCH", msg.c_str()), c, (int)pool);
        }
        return true;
    }

    // The long phase: growth past the target with a busy kernel on already-mapped memory during each
    // growth; then sleep, verify everything again, and compare on the host.
    bool long_phase(std::vector<PoolState>& pools, const Schedule& sch, uint32_t c) {
        for (size_t j = 0; j < sch.lng.size(); ++j) {
            const Growth& g = sch.lng[j];
            const int growth = (int)(sch.cycle.size() + j);
            const PoolState& p = pools[g.pool];
            if (p.size > 0) {
                unsigned long long* slot = take_slot(g.pool, growth, "busy", "busy");
                if (slot == nullptr) return fail("busy", make_error("gpuprobe", 0, "TOO_MANY_CHECKS", "out of counter slots"), c);
                emit_stage("busy", c, g.pool, (uint32_t)growth);
                gp_busy<<<kBusyBlocks, kThreadsPerBlock, 0, stream>>>((const uint32_t*)(uintptr_t)p.base, p.size / 4,
                                                                      seed_of(c, g.pool), slot, busy_ticks,
                                                                      kThreadsPerBlock, kBusyBlocks);
                gpError_t r = gpGetLastError();
                if (r != gpSuccess) return fail("busy", rt_error("LaunchKernel", r), c, (int)g.pool, growth);
            }
            if (!grow(pools, g, c, growth, true)) return false;
        }
        if (!sync_and_check(pools, c)) return false;
        emit_stage("settle", c, 0, 0);
        std::this_thread::sleep_for(std::chrono::microseconds(kPlanSettleUs));
        if (!reset_slots(c, "settle")) return false;
        for (uint32_t q = 0; q < kPlanPools; ++q) {
            if (pools[q].size == 0) continue;
            if (!launch_verify(pools[q], 0, pools[q].size / 4, seed_of(c, q), take_slot(q, -1, "settle", "settle"), c, q,
                               -1, "settle"))
                return false;
        }
        if (!sync_and_check(pools, c)) return false;
        if (GPUPROBE_TEST_FAULT == 3 && pools[0].size > 5012345ull * 4) {
            // Words changed after every GPU-side check passed: only the host comparison sees
            // them (two, in different parts of the first piece the comparison splits).
            (void)gpMemset((void*)(uintptr_t)(pools[0].base + 12345 * 4), 0, 4);
            (void)gpMemset((void*)(uintptr_t)(pools[0].base + 5012345ull * 4), 0, 4);
            (void)gpDeviceSynchronize();
        }
        emit_stage("host_compare", c, 0, 0);
        for (uint32_t q = 0; q < kPlanPools; ++q)
            if (pools[q].size > 0 && !host_check(pools[q], q, c)) return false;
        return true;
    }

    // One cycle: fresh pools grown by the plan (and the long phase in cycle 0), every check, then
    // unmapped and freed the way llama.cpp's destructor does it.
    bool cycle(const Schedule& sch, uint32_t c) {
        const bool first = c == 0;
        std::vector<PoolState> pools(kPlanPools);
        if (!reset_slots(c, "verify")) return false;
        for (size_t i = 0; i < sch.cycle.size(); ++i)
            if (!grow(pools, sch.cycle[i], c, (int)i, first)) return false;
        // Cycle 0 ends with the late checks (after the long growths, when there are any).
        if (first) {
            const auto t = std::chrono::steady_clock::now();
            if (!long_phase(pools, sch, c)) return false;
            s->long_ms = ms_since(t);
        } else if (!sync_and_check(pools, c)) {
            return false;
        }
        emit_stage("unmap", c, 0, 0);
        for (uint32_t q = 0; q < kPlanPools; ++q) {
            PoolState& p = pools[q];
            if (p.base == 0) continue;
#if GP_HIP
            // The HIP pool unmaps mapping by mapping (ROCR-Runtime#285) ...
            for (const Growth& m : p.mappings) {
                gpDrvResult d = gpMemUnmap(p.base + m.offset, m.bytes);
                if (d != (gpDrvResult)0) return fail("unmap", drv_error("MemUnmap", d), c, (int)q);
            }
#else
            // ... the CUDA pool its whole range at once.
            gpDrvResult d0 = gpMemUnmap(p.base, p.size);
            if (d0 != (gpDrvResult)0) return fail("unmap", drv_error("MemUnmap", d0), c, (int)q);
#endif
            if (first) emit_stage("free", c, q, 0);
            gpDrvResult d = gpMemAddressFree(p.base, kPlanReserveBytes);
            if (d != (gpDrvResult)0) return fail("free", drv_error("MemAddressFree", d), c, (int)q);
        }
        return true;
    }
};

// Runs the smoke test on device f.index and fills *s. A failure returns at once: nothing is
// unmapped or freed afterwards (process exit does that), so a faulted device cannot hang the report.
void run_smoke(const DeviceFacts& f, uint32_t cycles, SmokeResult* s) {
    s->cycles = cycles;
    const auto t0 = std::chrono::steady_clock::now();
    Run run;
    run.s = s;
    emit_stage("context", 0, 0, 0);
    gpError_t r = gpSetDevice(f.index);
    if (r != gpSuccess) { run.fail("context", rt_error("SetDevice", r), 0); return; }
    GpDrvLoadError le;
    if (!gpDriverLoad(&le)) { run.fail("context", load_error(le), 0); return; }
    gpDevice dev = f.drv_device;
    gpDrvResult d;
    if (!f.has_drv_device) {
        d = gpDeviceGet(&dev, f.index);
        if (d != (gpDrvResult)0) { run.fail("context", drv_error("DeviceGet", d), 0); return; }
    }
    run.prop = gp_pinned_prop(dev);
    run.access = gp_readwrite_access(dev);
    uint64_t granularity = f.grec;
    if (!f.has_grec) {
        size_t g = 0;
        d = gpMemGetAllocationGranularity(&g, &run.prop, GP_GRANULARITY_RECOMMENDED);
        if (d != (gpDrvResult)0) { run.fail("context", drv_error("MemGetAllocationGranularity", d), 0); return; }
        granularity = g;
    }
    s->chunk_bytes = granularity;
    if (granularity == 0 || granularity % 4 != 0) {
        run.fail("context", make_error("gpuprobe", 0, "bad_granularity", "the allocation granularity is not a multiple of 4"), 0);
        return;
    }
    run.busy_ticks = (long long)kPlanBusyUs * gpWallTicksPerMs(f.index) / 1000;
    r = gpStreamCreateWithFlags(&run.stream, gpStreamNonBlocking);
    if (r != gpSuccess) { run.fail("context", rt_error("StreamCreateWithFlags", r), 0); return; }
    r = gpMalloc((void**)&run.slots, kSlots * 2 * sizeof(unsigned long long));
    if (r != gpSuccess) { run.fail("context", rt_error("Malloc", r), 0); return; }
    size_t free_b = 0, total_b = 0;
    r = gpMemGetInfo(&free_b, &total_b);
    if (r != gpSuccess) { run.fail("context", rt_error("MemGetInfo", r), 0); return; }
    s->free_before = free_b;
    s->has_free_before = true;
    const KfdAccounting kfd = kfd_open(f);
    if (kfd.ok) {
        s->has_accounting = true;
        s->has_own_before = kfd.own(&s->own_before);
        s->own_listed = s->has_own_before;
        kfd.others(&s->other_pids);
    }
    uint32_t pools_run = 0;
    uint64_t need = 0, full_need = 0;
    const Schedule sch = fit_schedule(granularity, free_b, &pools_run, &need, &full_need);
    s->pools_run = pools_run;
    const std::string free_mib = std::to_string((unsigned long long)(free_b >> 20));
    if (pools_run == 0) {
        s->cut_short = "not-run";
        s->reason = "only " + free_mib + " MiB of VRAM free" + others_phrase(*s) + ": even pool 0 of the smoke plan needs " +
                    std::to_string((unsigned long long)((need + (1u << 20) - 1) >> 20)) + " MiB within " +
                    std::to_string((unsigned long long)kPlanFitPercent) + "% of it";
        s->elapsed_ms = ms_since(t0);
        s->pass = true;
        return;
    }
    if (pools_run < kPlanPools) {
        s->cut_short = "partial";
        s->reason = "only " + free_mib + " MiB of VRAM free" + others_phrase(*s) + ": ran " + std::to_string(pools_run) +
                    " of the plan's " + std::to_string(kPlanPools) + " pools (" +
                    std::to_string((unsigned long long)((need + (1u << 20) - 1) >> 20)) + " MiB; all " +
                    std::to_string(kPlanPools) + " need " +
                    std::to_string((unsigned long long)((full_need + (1u << 20) - 1) >> 20)) + " MiB)";
        s->notes.push_back(s->reason);
    }
    s->has_schedule = true;
    s->growths_per_cycle = sch.cycle.size();
    s->long_growths = sch.lng.size();
    s->long_target = sch.long_target;

    for (uint32_t c = 0; c < cycles; ++c) {
        Line("cycle").u64("cycle", c).emit();
        if (!run.cycle(sch, c)) {
            s->elapsed_ms = ms_since(t0);
            // Another process took the memory mid-run: not the GPU's fault.
            if (s->failed_stage != nullptr && strcmp(s->failed_stage, "create") == 0 && s->error.code == 2 /* out of memory */) {
                s->cut_short = "partial";
                s->reason = s->error.api + " ran out of VRAM in cycle " + std::to_string(c) + " (" + free_mib +
                            " MiB were free before the first cycle" + others_phrase(*s) + "): the test stopped there";
                s->notes.push_back(s->reason);
                s->failed_stage = nullptr;
                s->error = ApiError();
                s->failed_pool = -1;
                s->failed_growth = -1;
                s->pass = true;
            }
            return;
        }
        s->cycles_done = c + 1;
        if (kfd.ok && c % 50 == 0) kfd.others(&s->other_pids);
    }
    emit_stage("vram_check", cycles, 0, 0);
    r = gpMemGetInfo(&free_b, &total_b);
    s->elapsed_ms = ms_since(t0);
    if (r != gpSuccess) { run.fail("vram_check", rt_error("MemGetInfo", r), cycles); return; }
    s->free_after = free_b;
    s->has_free_after = true;
    if (kfd.ok) {
        s->has_own_after = kfd.own(&s->own_after);
        s->own_listed = s->own_listed && s->has_own_after;
        kfd.others(&s->other_pids);
    }
    // Judged by what KFD charges to this process where it says; free VRAM of the whole device
    // moves with every other process on it, so a change there is a note, never a failure. The
    // probe's own handles are judged where they are released (unmap, free).
    if (s->has_own_before && s->has_own_after && s->own_after > s->own_before + kVramSlackBytes) {
        const std::string mib = std::to_string((unsigned long long)((s->own_after - s->own_before) >> 20));
        run.fail("vram_check", make_error("kfd", 0, "VRAM_NOT_RETURNED", (mib + " MiB more VRAM was charged to the probe after unmap and release than before the first cycle").c_str()), cycles);
        return;
    }
    const uint64_t moved = s->free_after > s->free_before ? s->free_after - s->free_before : s->free_before - s->free_after;
    if (moved > kVramSlackBytes) {
        s->notes.push_back(std::string("free VRAM ") + (s->free_after < s->free_before ? "fell" : "rose") + " by " +
                           std::to_string((unsigned long long)(moved >> 20)) + " MiB during the smoke test" + others_phrase(*s) + "; " +
                           (s->has_own_before && s->has_own_after
                                ? "the probe's own VRAM (KFD) came back, so other processes moved it"
                                : "without per-process accounting here it is not counted against the GPU"));
    }
    (void)gpStreamDestroy(run.stream);
    (void)gpFree(run.slots);
    for (HostPiece* h : run.staging) {
        if (h != nullptr) h->release();
        delete h;
    }
    s->pass = true;
}

// ----------------------------------------------------------------------------------------- peers

// One device's handles in the peer child.
struct PeerDev {
    bool ok = false;
    ApiError error;
    gpDevice drv = 0;
    gpStream_t stream = nullptr;
    unsigned long long* slot = nullptr;
};

// How reading one owner's pool from one peer went.
struct PeerRead {
    bool checked = false;
    uint64_t mismatches = 0;
    const char* stage = nullptr;
    ApiError error;
    bool ok() const { return mismatches == 0 && !error.set; }
};

// Grows a pool on `owner` (the plan's pool-0 growths), granting access to the owner and every peer
// in one call as llama.cpp does with GGML_CUDA_P2P or an RCCL build, and verifies each new chunk
// from each peer with a kernel running there.
void vmm_read_by_peers(std::vector<PeerDev>& devs, int owner, const std::vector<int>& peers,
                       std::vector<PeerRead>* out) {
    out->assign(peers.size(), PeerRead());
    auto fail_all = [&](const char* stage, const ApiError& e) {
        for (PeerRead& r : *out) {
            r.checked = true;
            r.stage = stage;
            r.error = e;
        }
    };
    PeerDev& od = devs[owner];
    if (!od.ok) return fail_all("peer_context", od.error);
    gpError_t r = gpSetDevice(owner);
    if (r != gpSuccess) return fail_all("peer_context", rt_error("SetDevice", r));
    const gpMemAllocationProp prop = gp_pinned_prop(od.drv);
    size_t granularity = 0;
    gpDrvResult d = gpMemGetAllocationGranularity(&granularity, &prop, GP_GRANULARITY_RECOMMENDED);
    if (d != (gpDrvResult)0) return fail_all("peer_context", drv_error("MemGetAllocationGranularity", d));
    std::vector<gpMemAccessDesc> access;
    access.push_back(gp_readwrite_access(od.drv));
    for (int p : peers) access.push_back(gp_readwrite_access(devs[p].drv));
    const Schedule sch = make_schedule(granularity, 0);
    const uint32_t seed = seed_of(4096u + (uint32_t)owner, 0);
    gp_va base = 0;
    uint64_t size = 0;
    for (const Growth& g : sch.cycle) {
        if (g.pool != 0) continue;
        r = gpSetDevice(owner);
        if (r != gpSuccess) return fail_all("peer_context", rt_error("SetDevice", r));
        gpMemHandle h;
        memset(&h, 0, sizeof h);
        d = gpMemCreate(&h, g.bytes, &prop, 0);
        if (d != (gpDrvResult)0) return fail_all("peer_create", drv_error("MemCreate", d));
        if (base == 0) {
            d = gpMemAddressReserve(&base, kPlanReserveBytes, 0, 0, 0);
            if (d != (gpDrvResult)0) return fail_all("peer_reserve", drv_error("MemAddressReserve", d));
        }
        d = gpMemMap(base + g.offset, g.bytes, 0, h, 0);
        if (d != (gpDrvResult)0) return fail_all("peer_map", drv_error("MemMap", d));
        d = gpMemRelease(h);
        if (d != (gpDrvResult)0) return fail_all("peer_release", drv_error("MemRelease", d));
        d = gpMemSetAccess(base + g.offset, g.bytes, access.data(), access.size());
        if (d != (gpDrvResult)0) return fail_all("peer_set_access", drv_error("MemSetAccess", d));
        size = g.offset + g.bytes;
        const unsigned wb = blocks_for(g.bytes / 4);
        gp_write<<<wb, kThreadsPerBlock, 0, od.stream>>>((uint32_t*)(uintptr_t)base, g.offset / 4, g.bytes / 4, seed,
                                                        kThreadsPerBlock, wb);
        r = gpGetLastError();
        if (r == gpSuccess) r = gpStreamSynchronize(od.stream);
        if (r != gpSuccess) return fail_all("peer_write", rt_error("StreamSynchronize", r));
        for (size_t i = 0; i < peers.size(); ++i) {
            PeerRead& pr = (*out)[i];
            pr.checked = true;
            if (!pr.ok()) continue;
            PeerDev& pd = devs[peers[i]];
            if (!pd.ok) {
                pr.stage = "peer_context";
                pr.error = pd.error;
                continue;
            }
            const unsigned long long init[2] = {0ull, ~0ull};
            unsigned long long got[2] = {0, 0};
            r = gpSetDevice(peers[i]);
            if (r == gpSuccess) r = gpMemcpyAsync(pd.slot, init, sizeof init, gpMemcpyHostToDevice, pd.stream);
            if (r == gpSuccess) {
                const unsigned vb = blocks_for(g.bytes / 4);
                gp_verify<<<vb, kThreadsPerBlock, 0, pd.stream>>>((const uint32_t*)(uintptr_t)base, g.offset / 4,
                                                                 g.bytes / 4, seed, pd.slot, kThreadsPerBlock, vb);
                r = gpGetLastError();
            }
            if (r == gpSuccess) r = gpStreamSynchronize(pd.stream);
            if (r == gpSuccess) r = gpMemcpy(got, pd.slot, sizeof got, gpMemcpyDeviceToHost);
            if (r != gpSuccess) {
                pr.stage = "peer_verify";
                pr.error = rt_error("StreamSynchronize", r);
                (void)gpGetLastError();
                continue;
            }
            pr.mismatches += got[0];
            if (got[0] != 0) pr.stage = "peer_verify";
        }
    }
    if (base != 0 && gpSetDevice(owner) == gpSuccess) {
        (void)gpMemUnmap(base, size);
        (void)gpMemAddressFree(base, kPlanReserveBytes);
    }
    (void)gpGetLastError();
}

// Patterned buffer on `from`, copied to `to` with the peer copy, verified on `to`. Returns copy_ok
// (-1 unknown, 0 no, 1 yes).
int peer_copy(int from, int to, bool can, uint64_t* mismatches, ApiError* err) {
    const uint64_t words = kPeerBytes / 4;
    uint32_t* src = nullptr;
    uint32_t* dst = nullptr;
    unsigned long long* slot = nullptr;
    const unsigned long long init[2] = {0ull, ~0ull};
    unsigned long long got[2] = {0, 0};
    gpError_t r;
    if (can) {
        // Enable both ways, as llama.cpp does; "already enabled" is fine.
        r = gpSetDevice(from);
        if (r == gpSuccess) {
            r = gpDeviceEnablePeerAccess(to, 0);
            if (r == gpErrorPeerAccessAlreadyEnabled) r = gpSuccess;
            if (r != gpSuccess) keep_first(err, rt_error("DeviceEnablePeerAccess", r));
        } else {
            keep_first(err, rt_error("SetDevice", r));
        }
        int back = 0;
        if (gpDeviceCanAccessPeer(&back, to, from) == gpSuccess && back && gpSetDevice(to) == gpSuccess) {
            r = gpDeviceEnablePeerAccess(from, 0);
            if (r != gpSuccess && r != gpErrorPeerAccessAlreadyEnabled) keep_first(err, rt_error("DeviceEnablePeerAccess", r));
        }
        (void)gpGetLastError();
    }
    r = gpSetDevice(from);
    if (r != gpSuccess) { keep_first(err, rt_error("SetDevice", r)); return -1; }
    r = gpMalloc((void**)&src, kPeerBytes);
    if (r != gpSuccess) { keep_first(err, rt_error("Malloc", r)); return -1; }
    gp_write<<<kMaxBlocks, kThreadsPerBlock>>>(src, 0, words, kPeerPatternSeed, kThreadsPerBlock, kMaxBlocks);
    r = gpGetLastError();
    if (r == gpSuccess) r = gpDeviceSynchronize();
    if (r != gpSuccess) { keep_first(err, rt_error("DeviceSynchronize", r)); return -1; }
    r = gpSetDevice(to);
    if (r != gpSuccess) { keep_first(err, rt_error("SetDevice", r)); return -1; }
    r = gpMalloc((void**)&dst, kPeerBytes);
    if (r == gpSuccess) r = gpMalloc((void**)&slot, sizeof init);
    if (r != gpSuccess) { keep_first(err, rt_error("Malloc", r)); return -1; }
    r = gpMemset(dst, 0, kPeerBytes);
    if (r == gpSuccess) r = gpMemcpy(slot, init, sizeof init, gpMemcpyHostToDevice);
    if (r != gpSuccess) { keep_first(err, rt_error("Memcpy", r)); return -1; }
    r = gpMemcpyPeer(dst, to, src, from, kPeerBytes);
    if (r == gpSuccess) r = gpDeviceSynchronize();
    if (r != gpSuccess) { keep_first(err, rt_error("MemcpyPeer", r)); return 0; }
    gp_verify<<<kMaxBlocks, kThreadsPerBlock>>>(dst, 0, words, kPeerPatternSeed, slot, kThreadsPerBlock, kMaxBlocks);
    r = gpGetLastError();
    if (r == gpSuccess) r = gpDeviceSynchronize();
    if (r == gpSuccess) r = gpMemcpy(got, slot, sizeof got, gpMemcpyDeviceToHost);
    if (r != gpSuccess) { keep_first(err, rt_error("DeviceSynchronize", r)); return 0; }
    (void)gpFree(dst);
    (void)gpFree(slot);
    if (gpSetDevice(from) == gpSuccess) (void)gpFree(src);
    *mismatches = got[0];
    return got[0] == 0 ? 1 : 0;
}

// --peers: every pair of devices, in one process started together with the device probes.
void run_peers(int count) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<PeerDev> devs(count);
    GpDrvLoadError le;
    const bool loaded = gpDriverLoad(&le);
    // Creating a context costs as much as the rest of a device's probe: all of them at once, one
    // thread per device (the current device is per thread).
    std::vector<std::thread> openers;
    for (int i = 0; i < count; ++i) {
        openers.emplace_back([&devs, &le, loaded, i]() {
            PeerDev& d = devs[i];
            gpError_t r = gpSetDevice(i);
            if (r == gpSuccess) r = gpFree(nullptr);  // creates the context now
            if (r == gpSuccess) r = gpStreamCreateWithFlags(&d.stream, gpStreamNonBlocking);
            if (r == gpSuccess) r = gpMalloc((void**)&d.slot, 2 * sizeof(unsigned long long));
            if (r != gpSuccess) {
                d.error = rt_error("SetDevice", r);
                (void)gpGetLastError();
                return;
            }
            if (!loaded) {
                d.error = load_error(le);
                return;
            }
            gpDrvResult dr = gpDeviceGet(&d.drv, i);
            if (dr != (gpDrvResult)0) {
                d.error = drv_error("DeviceGet", dr);
                return;
            }
            d.ok = true;
        });
    }
    for (std::thread& t : openers) t.join();
    const double contexts_ms = ms_since(t0);
    // can[a * count + b]: device a can access device b's memory (-1 unknown).
    std::vector<int> can(count * count, -1);
    for (int a = 0; a < count; ++a)
        for (int b = 0; b < count; ++b) {
            int v = 0;
            if (a != b && gpDeviceCanAccessPeer(&v, a, b) == gpSuccess) can[a * count + b] = v != 0;
            (void)gpGetLastError();
        }
    // reads[o * count + p]: device p reading device o's pool.
    std::vector<PeerRead> reads(count * count);
    for (int o = 0; o < count; ++o) {
        std::vector<int> peers;
        for (int p = 0; p < count; ++p)
            if (p != o && can[p * count + o] == 1) peers.push_back(p);
        if (peers.empty()) continue;
        std::vector<PeerRead> r;
        vmm_read_by_peers(devs, o, peers, &r);
        for (size_t i = 0; i < peers.size(); ++i) reads[o * count + peers[i]] = r[i];
    }
    for (int a = 0; a < count; ++a) {
        for (int b = a + 1; b < count; ++b) {
            const auto t = std::chrono::steady_clock::now();
            uint64_t mismatches = 0;
            ApiError err;
            const int copy_ok = peer_copy(a, b, can[a * count + b] == 1, &mismatches, &err);
            const PeerRead* both[2] = {&reads[a * count + b], &reads[b * count + a]};
            int checked = 0;
            uint64_t vmm_mismatches = 0;
            const PeerRead* bad = nullptr;
            for (const PeerRead* x : both) {
                if (!x->checked) continue;
                ++checked;
                vmm_mismatches += x->mismatches;
                if (!x->ok() && bad == nullptr) bad = x;
            }
            Line l("peer");
            l.i64("from", a).i64("to", b).bool_or_null("can_access", can[a * count + b])
                .bool_or_null("reverse_can_access", can[b * count + a])
                .bool_or_null("copy_ok", copy_ok)
                .u64("mismatches", mismatches)
                .error("error", err)
                .bool_or_null("vmm_ok", checked == 0 ? -1 : bad == nullptr)
                .u64("vmm_mismatches", vmm_mismatches);
            if (bad != nullptr && bad->stage != nullptr) l.str("vmm_stage", bad->stage); else l.null("vmm_stage");
            ApiError none;
            l.error("vmm_error", bad != nullptr ? bad->error : none).f64("copy_ms", ms_since(t)).emit();
        }
    }
    Line("peers_done").i64("devices", count).f64("contexts_ms", contexts_ms).f64("elapsed_ms", ms_since(t0)).emit();
}

}  // namespace

int main(int argc, char** argv) {
    Args args;
    if (!parse_args(argc, argv, &args)) return 2;
    if (args.mode == Mode::Plan) {
        emit_plan(args.plan_granularity, args.plan_free);
        return 0;
    }

    const int count = emit_hello();
    if (count > 0) {
        switch (args.mode) {
            case Mode::List:
                for (int i = 0; i < count; ++i) emit_device(query_device(i), -1.0, 0.0);
                break;
            case Mode::Device: {
                // The parent counts devices without a runtime and may ask for one this runtime
                // does not show: hello's device_count tells it to drop this probe.
                if (args.device >= count) break;
                const auto tc = std::chrono::steady_clock::now();
                gpError_t r = gpSetDevice(args.device);
                if (r == gpSuccess) r = gpFree(nullptr);  // creates the context now
                (void)gpGetLastError();
                const double context_ms = ms_since(tc);
                const auto tq = std::chrono::steady_clock::now();
                DeviceFacts f = query_device(args.device);
                emit_device(f, context_ms, ms_since(tq));
                if (args.smoke) {
                    SmokeResult s;
                    s.cycles = args.cycles;
                    if (!f.ok) {
                        s.failed_stage = "context";
                        s.error = f.error;
                    } else {
                        run_smoke(f, args.cycles, &s);
                    }
                    emit_smoke(s);
                }
                break;
            }
            case Mode::Peers:
                run_peers(count);
                break;
            case Mode::Plan:
                break;
        }
    }
    emit_done();
    // Leave without running the runtime's exit handlers: after a GPU fault they can block, and the
    // report is complete and flushed.
    fflush(stdout);
    fflush(stderr);
    std::_Exit(0);
}
