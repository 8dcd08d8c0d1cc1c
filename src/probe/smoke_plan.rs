//! The smoke test's pool growth (`probes/smoke-plan.toml`): how many cycles count, how many pools
//! live at once, which requests each op makes, and the long phase past 1 GiB.
//!
//! The same numbers drive the CUDA child and the probe program: the program carries them in a
//! generated block (`cpp_block`), and the tests below fail when that block is stale. Both turn
//! requests into growths with llama.cpp's rule (`Pool::request`), so for a given granularity and
//! free VRAM they map the same chunks at the same offsets (`schedule`; the probe program prints its
//! own with `--plan`, and tests compare the two).

use std::sync::OnceLock;

use crate::children::protocol::{Phase, PlanGrowth, PlanSchedule};
use serde::Deserialize;

pub const PLAN_TOML: &str = include_str!("../../probes/smoke-plan.toml");

/// Upper bound on `pools` (the kernels' counter slots and the protocol's pool index assume it).
pub const MAX_POOLS: u32 = 8;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub version: u32,
    pub min_cycles: u32,
    pub pools: u32,
    pub fit_percent: u64,
    pub reserve_bytes: u64,
    pub request_alignment: u64,
    pub min_growth_kib: u64,
    pub cycle: Vec<CycleOp>,
    pub long: Long,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CycleOp {
    pub pool: u32,
    pub requests_kib: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Long {
    pub target_bytes: u64,
    pub free_divisor: u64,
    pub busy_us: u32,
    pub settle_us: u32,
    pub op: Vec<LongOp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LongOp {
    pub pool: u32,
    pub requests_per_1024: Vec<u64>,
}

/// The bundled plan. The file is part of the binary, so a parse failure is a build defect that the
/// unit tests catch; callers still get an error value rather than a panic.
pub fn bundled() -> Result<&'static Plan, String> {
    static PLAN: OnceLock<Result<Plan, String>> = OnceLock::new();
    PLAN.get_or_init(|| Plan::parse(PLAN_TOML))
        .as_ref()
        .map_err(Clone::clone)
}

impl Plan {
    pub fn parse(text: &str) -> Result<Plan, String> {
        let p: Plan = toml::from_str(text).map_err(|e| format!("probes/smoke-plan.toml: {e}"))?;
        p.validate()?;
        Ok(p)
    }

    fn validate(&self) -> Result<(), String> {
        let bad = |m: String| Err(format!("probes/smoke-plan.toml: {m}"));
        if self.pools == 0 || self.pools > MAX_POOLS {
            return bad(format!("pools must be 1..={MAX_POOLS}"));
        }
        if self.min_cycles == 0 || self.request_alignment == 0 || self.min_growth_kib == 0 {
            return bad("min_cycles, request_alignment and min_growth_kib must be > 0".into());
        }
        if self.fit_percent == 0 || self.fit_percent > 100 {
            return bad("fit_percent must be 1..=100".into());
        }
        if self.long.free_divisor == 0 || self.long.target_bytes == 0 {
            return bad("long.free_divisor and long.target_bytes must be > 0".into());
        }
        let pools = self.pools;
        let ops = self
            .cycle
            .iter()
            .map(|o| (o.pool, &o.requests_kib))
            .chain(self.long.op.iter().map(|o| (o.pool, &o.requests_per_1024)));
        for (pool, requests) in ops {
            if pool >= pools {
                return bad(format!("an op names pool {pool}, but there are {pools}"));
            }
            if requests.is_empty() || requests.contains(&0) {
                return bad("every op needs requests, none of them 0".into());
            }
        }
        Ok(())
    }

    pub fn min_growth_bytes(&self) -> u64 {
        self.min_growth_kib * 1024
    }

    /// The long phase's target for a device with `free_bytes` of free VRAM.
    pub fn long_target(&self, free_bytes: u64) -> u64 {
        self.long
            .target_bytes
            .min(free_bytes / self.long.free_divisor)
    }

    /// Growths of every phase, in order, for `granularity` and a device with `free_bytes` free.
    pub fn schedule(&self, granularity: u64, free_bytes: u64) -> Schedule {
        let mut pools = vec![Pool::default(); self.pools as usize];
        let mut cycle = Vec::new();
        for op in &self.cycle {
            let requests: Vec<u64> = op.requests_kib.iter().map(|k| k * 1024).collect();
            cycle.extend(self.run_op(&mut pools, op.pool, &requests, granularity, false));
        }
        let target = self.long_target(free_bytes);
        let mut long = Vec::new();
        for op in &self.long.op {
            let requests: Vec<u64> = op
                .requests_per_1024
                .iter()
                .map(|k| (u128::from(target) * u128::from(*k) / 1024) as u64)
                .collect();
            long.extend(self.run_op(&mut pools, op.pool, &requests, granularity, true));
        }
        Schedule {
            cycle,
            long,
            long_target: target,
        }
    }

    /// What runs on a device with `free_bytes` free: the whole schedule where all its pools fit
    /// in `fit_percent` of free VRAM, else the first pools that do (pools are independent, so
    /// that is the same schedule without the growths of the pools left out). `None` where not
    /// even pool 0 fits.
    pub fn fit(&self, granularity: u64, free_bytes: u64) -> Option<Fit> {
        let full = self.schedule(granularity, free_bytes);
        let budget = (u128::from(free_bytes) * u128::from(self.fit_percent) / 100) as u64;
        let full_need = full.need_bytes(self.pools);
        (1..=self.pools).rev().find_map(|k| {
            let s = full.only_pools(k);
            let need = s.need_bytes(self.pools);
            (need <= budget).then_some(Fit {
                schedule: s,
                pools: k,
                need_bytes: need,
                full_need_bytes: full_need,
                budget_bytes: budget,
            })
        })
    }

    fn run_op(
        &self,
        pools: &mut [Pool],
        pool: u32,
        requests: &[u64],
        granularity: u64,
        raise: bool,
    ) -> Vec<Growth> {
        let p = &mut pools[pool as usize];
        let mut out = Vec::new();
        for r in requests {
            let mut request = *r;
            if raise {
                // Keep every growth at least min_growth: raise a request that would grow less.
                let avail = p.size - p.used;
                let min = self.min_growth_bytes();
                if request > avail && request - avail < min {
                    request = avail + min;
                }
            }
            if let Some(g) = p.request(request, self.request_alignment, granularity) {
                out.push(Growth {
                    pool,
                    offset: g.0,
                    bytes: g.1,
                });
            }
        }
        p.free_all();
        out
    }
}

/// The part of the plan that fits the device's free memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fit {
    pub schedule: Schedule,
    /// Pools that run (`pools` of the plan where everything fits).
    pub pools: u32,
    /// VRAM the pools that run map at their largest.
    pub need_bytes: u64,
    /// What the whole plan would have mapped.
    pub full_need_bytes: u64,
    /// `fit_percent` of free VRAM.
    pub budget_bytes: u64,
}

/// One pool as llama.cpp keeps it: mapped size and the bytes in use (a stack).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pool {
    pub size: u64,
    pub used: u64,
}

impl Pool {
    /// `ggml_cuda_pool_vmm::alloc`: the request rounded up to the alignment; when it does not fit,
    /// the pool grows by `round_up(request - available, granularity)` at its end. Returns the
    /// growth as (offset, bytes).
    pub fn request(&mut self, bytes: u64, alignment: u64, granularity: u64) -> Option<(u64, u64)> {
        let size = bytes.div_ceil(alignment) * alignment;
        let avail = self.size - self.used;
        let grown = (size > avail).then(|| {
            let g = granularity.max(1);
            let grow = (size - avail).div_ceil(g) * g;
            let at = self.size;
            self.size += grow;
            (at, grow)
        });
        self.used += size;
        grown
    }

    pub fn free_all(&mut self) {
        self.used = 0;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Growth {
    pub pool: u32,
    /// Byte offset of the new chunk from the pool's base (= the pool's size before).
    pub offset: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The growths of every cycle (the same each cycle: pools start empty).
    pub cycle: Vec<Growth>,
    /// The growths of the long phase (cycle 0, after `cycle`, pools keep their size).
    pub long: Vec<Growth>,
    pub long_target: u64,
}

impl Schedule {
    /// Size of each pool after the cycle ops, and after the long phase.
    pub fn pool_sizes(&self, pools: u32, with_long: bool) -> Vec<u64> {
        let mut s = vec![0u64; pools as usize];
        let growths = self
            .cycle
            .iter()
            .chain(self.long.iter().filter(|_| with_long));
        for g in growths {
            s[g.pool as usize] = s[g.pool as usize].max(g.offset + g.bytes);
        }
        s
    }

    /// VRAM mapped at once at the largest: every pool at its final size (pools live together).
    pub fn need_bytes(&self, pools: u32) -> u64 {
        self.pool_sizes(pools, true).iter().sum()
    }

    /// The same schedule for pools `0..k` only.
    pub fn only_pools(&self, k: u32) -> Schedule {
        let keep = |v: &[Growth]| v.iter().filter(|g| g.pool < k).copied().collect();
        Schedule {
            cycle: keep(&self.cycle),
            long: keep(&self.long),
            long_target: self.long_target,
        }
    }

    /// The `plan` event of `--plan` mode, as the probe program prints it too.
    pub fn event(&self, plan: &Plan) -> PlanSchedule {
        let g = |phase: Phase, v: &[Growth]| -> Vec<PlanGrowth> {
            v.iter()
                .map(|g| PlanGrowth {
                    phase,
                    pool: g.pool,
                    offset: g.offset,
                    bytes: g.bytes,
                })
                .collect()
        };
        let mut growths = g(Phase::Cycle, &self.cycle);
        growths.extend(g(Phase::Long, &self.long));
        PlanSchedule {
            version: plan.version,
            min_cycles: plan.min_cycles,
            pools: plan.pools,
            long_target: self.long_target,
            growths,
        }
    }
}

/// Markers around the generated block in probes/gpuprobe-probe.cpp.
pub const CPP_BEGIN: &str = "// ---- smoke plan: generated from probes/smoke-plan.toml (GPUPROBE_BLESS=1 cargo test smoke_plan); do not edit";
pub const CPP_END: &str = "// ---- end of smoke plan";

/// The constants of `plan` as C++, between (and including) the markers.
pub fn cpp_block(plan: &Plan) -> String {
    let mut o = String::new();
    o.push_str(CPP_BEGIN);
    o.push('\n');
    let line = |o: &mut String, s: String| {
        o.push_str(&s);
        o.push('\n');
    };
    line(
        &mut o,
        format!("const uint32_t kPlanVersion = {};", plan.version),
    );
    line(
        &mut o,
        format!("const uint32_t kPlanMinCycles = {};", plan.min_cycles),
    );
    line(
        &mut o,
        format!("const uint32_t kPlanPools = {};", plan.pools),
    );
    line(
        &mut o,
        format!("const uint64_t kPlanFitPercent = {}ull;", plan.fit_percent),
    );
    line(
        &mut o,
        format!(
            "const uint64_t kPlanReserveBytes = {}ull;",
            plan.reserve_bytes
        ),
    );
    line(
        &mut o,
        format!(
            "const uint64_t kPlanRequestAlignment = {}ull;",
            plan.request_alignment
        ),
    );
    line(
        &mut o,
        format!(
            "const uint64_t kPlanMinGrowthBytes = {}ull;",
            plan.min_growth_bytes()
        ),
    );
    let (ops, requests) = flatten(plan.cycle.iter().map(|o| {
        (
            o.pool,
            o.requests_kib.iter().map(|k| k * 1024).collect::<Vec<_>>(),
        )
    }));
    line(
        &mut o,
        format!("const uint64_t kPlanCycleRequests[] = {{{requests}}};  // bytes"),
    );
    line(
        &mut o,
        format!("const PlanOp kPlanCycleOps[] = {{{ops}}};  // {{pool, first request, count}}"),
    );
    line(
        &mut o,
        format!(
            "const uint64_t kPlanLongTargetBytes = {}ull;",
            plan.long.target_bytes
        ),
    );
    line(
        &mut o,
        format!(
            "const uint64_t kPlanLongFreeDivisor = {}ull;",
            plan.long.free_divisor
        ),
    );
    line(
        &mut o,
        format!("const uint32_t kPlanBusyUs = {};", plan.long.busy_us),
    );
    line(
        &mut o,
        format!("const uint32_t kPlanSettleUs = {};", plan.long.settle_us),
    );
    let (ops, requests) = flatten(
        plan.long
            .op
            .iter()
            .map(|o| (o.pool, o.requests_per_1024.clone())),
    );
    line(
        &mut o,
        format!("const uint64_t kPlanLongRequests[] = {{{requests}}};  // 1/1024ths of the target"),
    );
    line(
        &mut o,
        format!("const PlanOp kPlanLongOps[] = {{{ops}}};  // {{pool, first request, count}}"),
    );
    o.push_str(CPP_END);
    o
}

/// (`{pool, first, count}` list, request list) as C++ initialisers.
fn flatten(ops: impl Iterator<Item = (u32, Vec<u64>)>) -> (String, String) {
    let mut op_s = Vec::new();
    let mut req_s = Vec::new();
    for (pool, reqs) in ops {
        op_s.push(format!("{{{pool}, {}, {}}}", req_s.len(), reqs.len()));
        req_s.extend(reqs.iter().map(|r| format!("{r}ull")));
    }
    (op_s.join(", "), req_s.join(", "))
}

/// The generated block as it stands in `source` (between the markers, inclusive).
pub fn cpp_block_in(source: &str) -> Option<&str> {
    let start = source.find(CPP_BEGIN)?;
    let end = source[start..].find(CPP_END)? + start + CPP_END.len();
    Some(&source[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1024;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    /// Granularities seen in the field: 4 KiB (gfx1201 on ROCm 7.2), 64 KiB, 2 MiB (NVIDIA, most AMD).
    const GRANULARITIES: [u64; 4] = [4 * KIB, 64 * KIB, MIB, 2 * MIB];

    fn plan() -> &'static Plan {
        bundled().expect("the bundled plan parses")
    }

    #[test]
    fn growth_is_llama_cpps_round_up_of_request_minus_available() {
        let mut p = Pool::default();
        // 1.5 MiB + 1 byte rounds to 128 bytes, then to the granularity.
        assert_eq!(p.request(3 * MIB / 2 + 1, 128, 2 * MIB), Some((0, 2 * MIB)));
        assert_eq!(p.used, 3 * MIB / 2 + 128);
        // Fits in what is left: no growth.
        assert_eq!(p.request(256 * KIB, 128, 2 * MIB), None);
        // 37 MiB with 1.75 MiB used: needs 37 - 0.25 MiB more, rounded to 2 MiB -> 38 MiB at 2 MiB.
        assert_eq!(p.request(37 * MIB, 128, 2 * MIB), Some((2 * MIB, 38 * MIB)));
        p.free_all();
        assert_eq!(p.used, 0);
        // Empty pool of 40 MiB: 300 MiB grows by 260 MiB.
        assert_eq!(
            p.request(300 * MIB, 128, 2 * MIB),
            Some((40 * MIB, 260 * MIB))
        );
    }

    #[test]
    fn every_cycle_pool_gets_smaller_and_larger_chunks_than_its_first_never_below_2_mib() {
        let plan = plan();
        for g in GRANULARITIES {
            let s = plan.schedule(g, 80 * GIB);
            for pool in 0..plan.pools {
                let chunks: Vec<u64> = s
                    .cycle
                    .iter()
                    .filter(|x| x.pool == pool)
                    .map(|x| x.bytes)
                    .collect();
                assert!(
                    chunks.len() >= 3,
                    "granularity {g}: pool {pool}: {chunks:?}"
                );
                let first = chunks[0];
                assert!(chunks.iter().any(|c| *c < first), "g {g}: {chunks:?}");
                assert!(chunks.iter().any(|c| *c > first), "g {g}: {chunks:?}");
                assert!(
                    chunks.windows(2).all(|w| w[0] != w[1]),
                    "neighbouring chunks of equal size hide Q3: g {g}: {chunks:?}"
                );
                assert!(
                    chunks.iter().all(|c| *c >= plan.min_growth_bytes()),
                    "g {g}: {chunks:?}"
                );
            }
        }
    }

    #[test]
    fn the_long_phase_grows_one_pool_past_1_gib_on_a_big_gpu() {
        let plan = plan();
        for g in GRANULARITIES {
            let s = plan.schedule(g, 140 * GIB);
            assert_eq!(s.long_target, GIB);
            let last = s.long.last().expect("long growths");
            assert!(last.offset < GIB && last.offset + last.bytes > GIB, "{s:?}");
            assert!(s.long.iter().all(|x| x.bytes >= plan.min_growth_bytes()));
            // Uneven: every long growth differs from the one before.
            assert!(s.long.windows(2).all(|w| w[0].bytes != w[1].bytes));
            // Offsets continue pool 0 after the cycle ops.
            let before = s.pool_sizes(plan.pools, false)[0];
            assert_eq!(s.long[0].offset, before);
        }
    }

    #[test]
    fn a_512_mib_apu_carve_out_grows_past_a_quarter_of_free_vram_and_no_further() {
        let plan = plan();
        let free = 440 * MIB; // what a 512 MiB carve-out leaves free
        for g in GRANULARITIES {
            let s = plan.schedule(g, free);
            assert_eq!(s.long_target, 110 * MIB);
            let sizes = s.pool_sizes(plan.pools, true);
            assert!(sizes[0] > s.long_target, "{sizes:?}");
            assert!(
                sizes.iter().sum::<u64>() < free * 2 / 3,
                "the whole smoke test must fit: {sizes:?} of {free}"
            );
            assert!(s.long.iter().all(|x| x.bytes >= plan.min_growth_bytes()));
        }
    }

    #[test]
    fn tiny_free_vram_still_gives_a_valid_schedule() {
        let plan = plan();
        let s = plan.schedule(2 * MIB, 0);
        assert_eq!(s.long_target, 0);
        assert!(!s.cycle.is_empty());
        assert!(s.long.is_empty(), "nothing to grow past: {s:?}");
    }

    #[test]
    fn less_free_vram_than_the_plan_needs_runs_the_pools_that_fit() {
        let plan = plan();
        // The default fake device (128 MiB free) and a big GPU run everything.
        for free in [128 * MIB, 140 * GIB] {
            let f = plan.fit(2 * MIB, free).expect("fits");
            assert_eq!(f.pools, plan.pools);
            assert_eq!(f.schedule, plan.schedule(2 * MIB, free));
        }
        // 40 MiB free (another job holds the rest): pool 0 with its long phase only.
        let f = plan.fit(2 * MIB, 40 * MIB).expect("pool 0 fits");
        assert_eq!(f.pools, 1, "{f:?}");
        assert!(
            f.need_bytes <= 30 * MIB && f.full_need_bytes > 30 * MIB,
            "{f:?}"
        );
        assert!(f.schedule.cycle.iter().all(|g| g.pool == 0));
        // 60 MiB: two pools.
        assert_eq!(plan.fit(2 * MIB, 60 * MIB).map(|f| f.pools), Some(2));
        // Not even pool 0's 18 MiB fits in three quarters of 20 MiB.
        assert_eq!(plan.fit(2 * MIB, 20 * MIB), None);
        assert_eq!(plan.fit(2 * MIB, 0), None);
    }

    #[test]
    fn plan_rejects_what_the_executors_cannot_run() {
        let good = PLAN_TOML.to_string();
        assert!(Plan::parse(&good).is_ok());
        let bad_pool = good.replacen("pool = 2\n", "pool = 9\n", 1);
        assert!(Plan::parse(&bad_pool).unwrap_err().contains("pool 9"));
        let zero = good.replacen("requests_kib = [4608]", "requests_kib = [0]", 1);
        assert!(Plan::parse(&zero).is_err());
        let unknown = format!("{good}\nsurprise = 1\n");
        assert!(Plan::parse(&unknown).is_err());
    }

    #[test]
    fn cpp_block_lists_every_request() {
        let b = cpp_block(plan());
        assert!(b.starts_with(CPP_BEGIN) && b.ends_with(CPP_END));
        assert!(b.contains("kPlanCycleRequests[] = {4718592ull, "), "{b}");
        assert!(
            b.contains("kPlanLongRequests[] = {41ull, 123ull, 307ull, 1056ull}"),
            "{b}"
        );
        assert!(
            b.contains("kPlanCycleOps[] = {{0, 0, 1}, {1, 1, 1}, {2, 2, 1}, {0, 3, 2}"),
            "{b}"
        );
    }

    /// The probe program must carry exactly the constants of the TOML file.
    #[test]
    fn smoke_plan_block_in_the_probe_program_is_current() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("probes/gpuprobe-probe.cpp");
        let source = std::fs::read_to_string(&path).expect("read the probe program");
        let fresh = cpp_block(plan());
        let Some(current) = cpp_block_in(&source) else {
            panic!("{}: no smoke plan block (markers missing)", path.display());
        };
        if current != fresh && std::env::var_os("GPUPROBE_BLESS").is_some() {
            std::fs::write(&path, source.replacen(current, &fresh, 1)).expect("rewrite");
            return;
        }
        assert_eq!(
            current, fresh,
            "the smoke plan block in probes/gpuprobe-probe.cpp is stale: run `GPUPROBE_BLESS=1 cargo test smoke_plan`"
        );
    }
}
