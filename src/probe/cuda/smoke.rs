//! The VMM pool smoke test through the driver API (probes/PROTOCOL.md, "The smoke test"): pools
//! grown the way llama.cpp grows `ggml_cuda_pool_vmm`, by the shared plan (`smoke_plan`), with
//! the write and verify kernels queued behind the growth on a non-blocking stream.

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::gpu::{Allocation, Context, HostWords, Kernels, Slots, Stream, VaRange, copy_to_host};
use super::nvml::Nvml;
use super::{Driver, sys};
use crate::children::protocol::{Accounting, SmokeResult, Verdict};
use crate::probe::events::Emitter;
use crate::probe::smoke_pattern::{compare_parallel, compare_threads, seed, value};
use crate::probe::smoke_plan::{self, Growth, Plan, Schedule};
use crate::report::{ApiError, SmokeStage};

/// Free VRAM may drift by this much between before and after without counting as a leak.
pub const VRAM_TOLERANCE: u64 = 32 << 20;
/// Counter slots per cycle: one per growth, busy kernel and late re-verify.
const SLOTS: usize = 64;
/// Host comparison works in pieces of this many bytes (two in flight).
const HOST_PIECE: u64 = 32 << 20;

/// What went wrong, where.
#[derive(Debug, Clone)]
pub struct Failure {
    pub stage: SmokeStage,
    pub error: ApiError,
    pub cycle: u32,
    pub pool: Option<u32>,
    pub growth: Option<u32>,
    pub whole_range_helped: Option<bool>,
    pub bad: Option<BadWords>,
}

/// Words that read back wrong.
#[derive(Debug, Clone)]
pub struct BadWords {
    pub mismatches: u64,
    /// Byte offset from the pool's base.
    pub first_offset: u64,
    pub seen: Option<u32>,
    pub expected: u32,
    /// Which check saw it: `gpu` (verify after a growth), `busy`, `settle` (verify again after
    /// the host slept), `host` (copied to the host and compared there).
    pub check: &'static str,
}

/// Boxed: a failure carries a lot and travels up every `?`.
type Fail = Box<Failure>;

impl Failure {
    fn api(stage: impl Into<SmokeStage>, cycle: u32, error: ApiError) -> Fail {
        Box::new(Failure {
            stage: stage.into(),
            error,
            cycle,
            pool: None,
            growth: None,
            whole_range_helped: None,
            bad: None,
        })
    }
    fn at(mut self: Box<Self>, pool: u32, growth: Option<u32>) -> Fail {
        self.pool = Some(pool);
        self.growth = growth;
        self
    }
}

#[derive(Debug, Default, Clone)]
struct Stats {
    growths: u64,
    smallest_chunk: Option<u64>,
    largest_chunk: Option<u64>,
    largest_pool: u64,
    host_checked_bytes: u64,
    long_phase_ms: Option<f64>,
}

impl Stats {
    fn grew(&mut self, chunk: u64, pool_size: u64) {
        self.growths += 1;
        self.smallest_chunk = Some(self.smallest_chunk.map_or(chunk, |s| s.min(chunk)));
        self.largest_chunk = Some(self.largest_chunk.map_or(chunk, |s| s.max(chunk)));
        self.largest_pool = self.largest_pool.max(pool_size);
    }
}

/// One reservation as llama.cpp keeps it: its range (from the first growth on), and where it
/// starts and how much of it is mapped, which the checks read.
#[derive(Default)]
struct Pool<'a> {
    range: Option<VaRange<'a>>,
    base: u64,
    size: u64,
}

/// What a counter slot checked.
#[derive(Debug, Clone, Copy)]
struct SlotUse {
    pool: u32,
    growth: Option<u32>,
    check: &'static str,
    stage: &'static str,
}

struct Run<'a, 'o> {
    drv: &'a Driver,
    out: &'o mut Emitter,
    plan: &'static Plan,
    stream: Stream<'a>,
    kernels: Kernels<'a>,
    slots: Slots<'a>,
    prop: sys::CUmemAllocationProp,
    access: Vec<sys::CUmemAccessDesc>,
    stats: Stats,
    /// The host comparison's two pieces, made at its first use and kept for the whole run
    /// (locking 2 x 32 MiB of host memory costs about 30 ms, the copy of a GiB into it 20 ms).
    staging: Vec<HostWords>,
}

pub fn alloc_prop(dev: sys::CUdevice) -> sys::CUmemAllocationProp {
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

pub fn readwrite_access(dev: sys::CUdevice) -> sys::CUmemAccessDesc {
    let mut desc = sys::CUmemAccessDesc::default();
    desc.location.type_ = sys::CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.__bindgen_anon_1.id = dev;
    desc.flags = sys::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    desc
}

fn free_vram(drv: &Driver) -> Option<u64> {
    drv.mem_info().ok().map(|(f, _)| f as u64)
}

/// Runs the smoke test on `ordinal` with allocation granularity `granularity`; returns the
/// protocol's `smoke` event.
pub fn run(
    drv: &Driver,
    out: &mut Emitter,
    ordinal: i32,
    granularity: u64,
    cycles: u32,
) -> SmokeResult {
    let started = Instant::now();
    let mut stats = Stats::default();
    let mut free = (None, None);
    let mut cycles_done = 0;
    let mut schedule = None;
    let mut pools_run = None;
    let mut sharing = None;
    let mut notes = Vec::new();
    // Set where the outcome is not the run's own pass or fail: too little free VRAM.
    let mut cut_short: Option<(Verdict, String)> = None;
    let plan = smoke_plan::bundled();
    out.stage("context", 0, 0, 0);
    let result = match plan.clone() {
        Err(e) => Err(Failure::api(
            "context",
            0,
            ApiError {
                api: "gpuprobe".into(),
                code: 0,
                name: Some("BAD_PLAN".into()),
                message: Some(e),
            },
        )),
        Ok(plan) => Context::retain(drv, ordinal)
            .map_err(|e| Failure::api("context", 0, e))
            .and_then(|ctx| {
                let r = setup(drv, out, plan, ctx.dev).and_then(|mut run| {
                    let mut acct = Sharing::open(drv, ctx.dev);
                    let before = free_vram(drv);
                    free.0 = before;
                    acct.sample(true);
                    let fit = match before {
                        Some(b) => plan.fit(granularity, b),
                        // Free VRAM unknown: the plan as it stands, without the long phase.
                        None => {
                            let s = plan.schedule(granularity, 0);
                            Some(smoke_plan::Fit {
                                need_bytes: s.need_bytes(plan.pools),
                                full_need_bytes: s.need_bytes(plan.pools),
                                budget_bytes: 0,
                                schedule: s,
                                pools: plan.pools,
                            })
                        }
                    };
                    let Some(fit) = fit else {
                        let full = plan.schedule(granularity, before.unwrap_or(0));
                        let pool0 = full.only_pools(1).need_bytes(plan.pools);
                        cut_short = Some((
                            Verdict::NotRun,
                            format!(
                                "only {} MiB of VRAM free{}: even pool 0 of the smoke plan needs {} MiB within {}% of it",
                                before.unwrap_or(0) >> 20,
                                acct.others_phrase(),
                                pool0.div_ceil(1 << 20),
                                plan.fit_percent
                            ),
                        ));
                        sharing = acct.accounting();
                        return Ok(());
                    };
                    if fit.pools < plan.pools {
                        let why = format!(
                            "only {} MiB of VRAM free{}: ran {} of the plan's {} pools ({} MiB; all {} need {} MiB)",
                            before.unwrap_or(0) >> 20,
                            acct.others_phrase(),
                            fit.pools,
                            plan.pools,
                            fit.need_bytes.div_ceil(1 << 20),
                            plan.pools,
                            fit.full_need_bytes.div_ceil(1 << 20)
                        );
                        notes.push(why.clone());
                        cut_short = Some((Verdict::Partial, why));
                        pools_run = Some(fit.pools);
                    }
                    let s = fit.schedule;
                    schedule = Some(s.clone());
                    let r = run
                        .cycles(&s, cycles, &mut cycles_done, &mut acct)
                        .and_then(|()| {
                            // Everything unmapped and freed; the handles of the run itself
                            // remain, as they did when `before` was read.
                            run.out.stage("vram_check", cycles, 0, 0);
                            free.1 = free_vram(drv);
                            acct.sample(false);
                            vram_check(free, &acct, cycles, &mut notes)
                        });
                    stats = run.stats.clone();
                    sharing = acct.accounting();
                    let r = match r {
                        // Another process took the memory mid-run: not the GPU's fault.
                        Err(f) if out_of_memory(&f) => {
                            let why = format!(
                                "{} ran out of VRAM in cycle {} ({} MiB were free before the first cycle{}): the test stopped there",
                                f.error.api,
                                f.cycle,
                                before.unwrap_or(0) >> 20,
                                acct.others_phrase()
                            );
                            notes.push(why.clone());
                            cut_short = Some((Verdict::Partial, why));
                            Ok(())
                        }
                        r => r,
                    };
                    if r.is_err() || cut_short.is_some() {
                        // After a fault, releasing handles can block forever; the process exits
                        // right after the report and the driver cleans up then.
                        std::mem::forget(run);
                    }
                    r
                });
                if r.is_ok() && cut_short.is_none() {
                    drop(ctx);
                } else {
                    std::mem::forget(ctx);
                }
                r
            }),
    };
    let plan = plan.ok();
    let (fail, bad) = match &result {
        Ok(()) => (None, None),
        Err(f) => (Some(f), f.bad.as_ref()),
    };
    let s = schedule.as_ref();
    let (verdict, reason) = match (fail, cut_short) {
        (Some(_), _) => (Verdict::Fail, None),
        (None, Some((v, why))) => (v, Some(why)),
        (None, None) => (Verdict::Pass, None),
    };
    SmokeResult {
        outcome: Some(verdict),
        reason,
        plan_version: plan.map(|p| p.version),
        failed_stage: fail.map(|f| f.stage.clone()),
        error: fail.map(|f| f.error.clone()),
        failed_cycle: fail.map(|f| f.cycle),
        failed_pool: fail.and_then(|f| f.pool),
        failed_growth: fail.and_then(|f| f.growth),
        cycles_done: Some(cycles_done),
        cycles: Some(cycles),
        min_cycles: plan.map(|p| p.min_cycles),
        pools: plan.map(|p| p.pools),
        chunks_per_cycle: s.map(|s| s.cycle.len() as u32),
        chunk_bytes: Some(granularity),
        smallest_chunk_bytes: stats.smallest_chunk,
        largest_chunk_bytes: stats.largest_chunk,
        largest_pool_bytes: Some(stats.largest_pool),
        long_target_bytes: s.map(|s| s.long_target),
        long_growths: s.map(|s| s.long.len() as u32),
        host_checked_bytes: Some(stats.host_checked_bytes),
        reserve_bytes: plan.map(|p| p.reserve_bytes),
        mismatches: Some(bad.map_or(0, |b| b.mismatches)),
        first_bad_offset: bad.map(|b| b.first_offset),
        first_bad_value: bad.and_then(|b| b.seen),
        expected_value: bad.map(|b| b.expected),
        bad_check: bad.map(|b| b.check.into()),
        whole_range_access_helped: fail.and_then(|f| f.whole_range_helped),
        vram_free_before: free.0,
        vram_free_after: free.1,
        elapsed_ms: Some(started.elapsed().as_secs_f64() * 1000.0),
        long_phase_ms: stats.long_phase_ms,
        pools_run,
        accounting: sharing,
        notes,
    }
}

fn setup<'a, 'o>(
    drv: &'a Driver,
    out: &'o mut Emitter,
    plan: &'static Plan,
    dev: sys::CUdevice,
) -> Result<Run<'a, 'o>, Fail> {
    let ctx_fail = |e| Failure::api("context", 0, e);
    let kernels = Kernels::load(drv).map_err(ctx_fail)?;
    let stream = Stream::new(drv).map_err(ctx_fail)?;
    let slots = Slots::new(drv, SLOTS).map_err(ctx_fail)?;
    Ok(Run {
        drv,
        out,
        plan,
        stream,
        kernels,
        slots,
        prop: alloc_prop(dev),
        access: vec![readwrite_access(dev)],
        stats: Stats::default(),
        staging: Vec::new(),
    })
}

/// A failure for lack of memory at `create`: on a shared GPU, others took what the test needed.
fn out_of_memory(f: &Failure) -> bool {
    f.stage == SmokeStage::Create && f.error.code == i64::from(sys::CUDA_ERROR_OUT_OF_MEMORY)
}

/// Did the probe get back what it mapped? Judged by what the driver charges to this process
/// where it says (NVML); free VRAM of the whole device moves with every other process on it, so
/// a drop there is a note, never a failure (issue #28: 13 of 40 concurrent runs failed on it).
/// The probe's own handles are judged where they are released: a failed unmap, release or free
/// fails the test at that stage.
fn vram_check(
    free: (Option<u64>, Option<u64>),
    acct: &Sharing,
    cycles: u32,
    notes: &mut Vec<String>,
) -> Result<(), Fail> {
    if let (Some(b), Some(a)) = (acct.own_before, acct.own_after)
        && a > b + VRAM_TOLERANCE
    {
        return Err(Failure::api(
            "vram_check",
            cycles,
            ApiError {
                api: "nvmlDeviceGetComputeRunningProcesses".into(),
                code: 0,
                name: Some("VRAM_NOT_RETURNED".into()),
                message: Some(format!(
                    "{} MiB more VRAM was charged to the probe after unmap and release than before the first cycle",
                    (a - b) >> 20
                )),
            },
        ));
    }
    if let (Some(b), Some(a)) = free
        && a.abs_diff(b) > VRAM_TOLERANCE
    {
        let (dir, by) = if a < b {
            ("fell", b - a)
        } else {
            ("rose", a - b)
        };
        let judged = if acct.own_before.is_some() && acct.own_after.is_some() {
            "the probe's own VRAM (NVML) came back, so other processes moved it"
        } else {
            "without per-process accounting here it is not counted against the GPU"
        };
        notes.push(format!(
            "free VRAM {dir} by {} MiB during the smoke test{}; {judged}",
            by >> 20,
            acct.others_phrase()
        ));
    }
    Ok(())
}

/// The driver's per-process accounting through the test: this process's usage before and after,
/// and every other process seen.
struct Sharing {
    nvml: Option<Nvml>,
    pid: u32,
    own_before: Option<u64>,
    own_after: Option<u64>,
    own_listed: bool,
    others: BTreeSet<u32>,
    samples: u32,
}

impl Sharing {
    fn open(drv: &Driver, dev: sys::CUdevice) -> Sharing {
        let nvml = drv
            .device_pci_bus_id(dev)
            .ok()
            .and_then(|bus| Nvml::open(&bus).ok());
        Sharing {
            nvml,
            pid: std::process::id(),
            own_before: None,
            own_after: None,
            own_listed: true,
            others: BTreeSet::new(),
            samples: 0,
        }
    }

    /// Reads the process list; `first` for the sample before the first cycle, else the last.
    fn sample(&mut self, first: bool) {
        let Some(list) = self.nvml.as_ref().and_then(|n| n.processes().ok()) else {
            return;
        };
        self.samples += 1;
        let own = list.iter().find(|p| p.pid == self.pid);
        self.own_listed &= own.is_some();
        let used = own.and_then(|p| p.used);
        if first {
            self.own_before = used;
        } else {
            self.own_after = used;
        }
        self.others
            .extend(list.iter().filter(|p| p.pid != self.pid).map(|p| p.pid));
    }

    /// Another look at who is on the GPU, between the first and the last sample.
    fn sample_others(&mut self) {
        let Some(list) = self.nvml.as_ref().and_then(|n| n.processes().ok()) else {
            return;
        };
        self.others
            .extend(list.iter().filter(|p| p.pid != self.pid).map(|p| p.pid));
    }

    /// `", with 2 other processes on the GPU"`, or nothing where none (or no list) was seen.
    fn others_phrase(&self) -> String {
        match self.others.len() {
            0 => String::new(),
            1 => ", with 1 other process on the GPU".into(),
            n => format!(", with {n} other processes on the GPU"),
        }
    }

    fn accounting(&self) -> Option<Accounting> {
        (self.samples > 0).then(|| Accounting {
            source: Some("nvml".into()),
            own_before: self.own_before,
            own_after: self.own_after,
            own_listed: Some(self.own_listed),
            other_pids: Some(self.others.iter().copied().collect()),
        })
    }
}

impl<'a> Run<'a, '_> {
    fn cycles(
        &mut self,
        s: &Schedule,
        cycles: u32,
        done: &mut u32,
        acct: &mut Sharing,
    ) -> Result<(), Fail> {
        for c in 0..cycles {
            self.out.cycle(c);
            self.cycle(s, c, c == 0)?;
            *done = c + 1;
            // Who else is on the GPU, now and then (a list costs well under a millisecond).
            if c % 50 == 0 {
                acct.sample_others();
            }
        }
        Ok(())
    }

    /// One cycle: fresh pools grown by the cycle ops (and, in cycle 0, the long phase), every
    /// check, then unmapped and freed the way llama.cpp's destructor does it.
    fn cycle(&mut self, s: &Schedule, c: u32, first: bool) -> Result<(), Fail> {
        let mut pools: Vec<Pool<'_>> = (0..self.plan.pools).map(|_| Pool::default()).collect();
        let mut uses: Vec<SlotUse> = Vec::new();
        self.slots
            .reset(&self.stream)
            .map_err(|e| Failure::api("verify", c, e))?;
        for (i, g) in s.cycle.iter().enumerate() {
            self.grow_and_check(&mut pools, g, c, i as u32, first, &mut uses)?;
        }
        // Cycle 0 ends with the late checks (after the long growths, when there are any).
        if first {
            let t = Instant::now();
            self.long_phase(&mut pools, s, c, &mut uses)?;
            self.stats.long_phase_ms = Some(t.elapsed().as_secs_f64() * 1000.0);
        } else {
            self.sync_and_check(&pools, c, &uses)?;
        }
        self.out.stage("unmap", c, 0, 0);
        for (p, pool) in pools.into_iter().enumerate() {
            let Some(mut range) = pool.range else {
                continue;
            };
            // The CUDA pool unmaps its whole range at once (the HIP pool mapping by mapping).
            range
                .unmap()
                .map_err(|e| Failure::api("unmap", c, e).at(p as u32, None))?;
            if first {
                self.out.stage("free", c, p as u32, 0);
            }
            range
                .free()
                .map_err(|e| Failure::api("free", c, e).at(p as u32, None))?;
        }
        Ok(())
    }

    /// The long phase: pool growth past the target with a busy kernel on already-mapped memory
    /// during each growth; then sleep, verify everything again, and compare on the host.
    fn long_phase(
        &mut self,
        pools: &mut [Pool<'a>],
        s: &Schedule,
        c: u32,
        uses: &mut Vec<SlotUse>,
    ) -> Result<(), Fail> {
        let busy_ns = u64::from(self.plan.long.busy_us) * 1000;
        for (j, g) in s.long.iter().enumerate() {
            let growth = (s.cycle.len() + j) as u32;
            let pool = &pools[g.pool as usize];
            if pool.size > 0 {
                let slot = self.take_slot(uses, g.pool, Some(growth), "busy", "busy", c)?;
                self.out.stage("busy", c, g.pool, growth);
                self.kernels
                    .busy(
                        &self.stream,
                        pool.base,
                        pool.size / 4,
                        seed(c, g.pool),
                        slot,
                        busy_ns,
                    )
                    .map_err(|e| Failure::api("busy", c, e).at(g.pool, Some(growth)))?;
            }
            self.grow_and_check(pools, g, c, growth, true, uses)?;
        }
        self.sync_and_check(pools, c, uses)?;
        self.out.stage("settle", c, 0, 0);
        std::thread::sleep(Duration::from_micros(u64::from(self.plan.long.settle_us)));
        uses.clear();
        self.slots
            .reset(&self.stream)
            .map_err(|e| Failure::api("settle", c, e))?;
        for (p, pool) in pools.iter().enumerate() {
            if pool.size == 0 {
                continue;
            }
            let p = p as u32;
            let slot = self.take_slot(uses, p, None, "settle", "settle", c)?;
            self.kernels
                .verify(&self.stream, pool.base, 0, pool.size / 4, seed(c, p), slot)
                .map_err(|e| Failure::api("settle", c, e).at(p, None))?;
        }
        self.sync_and_check(pools, c, uses)?;
        self.out.stage("host_compare", c, 0, 0);
        for (p, pool) in pools.iter().enumerate() {
            if pool.size > 0 {
                self.host_compare(pool, p as u32, c)?;
            }
        }
        Ok(())
    }

    fn take_slot(
        &self,
        uses: &mut Vec<SlotUse>,
        pool: u32,
        growth: Option<u32>,
        check: &'static str,
        stage: &'static str,
        c: u32,
    ) -> Result<u64, Fail> {
        if uses.len() >= self.slots.len() {
            return Err(Failure::api(
                stage,
                c,
                ApiError {
                    api: "gpuprobe".into(),
                    code: 0,
                    name: Some("TOO_MANY_CHECKS".into()),
                    message: Some(format!("the plan needs more than {SLOTS} counter slots")),
                },
            ));
        }
        uses.push(SlotUse {
            pool,
            growth,
            check,
            stage,
        });
        Ok(self.slots.addr(uses.len() - 1))
    }

    /// One growth exactly as `ggml_cuda_pool_vmm::alloc` does it, then the write kernel over the
    /// new chunk and the verify kernel over the whole pool, queued with no host wait.
    fn grow_and_check(
        &mut self,
        pools: &mut [Pool<'a>],
        g: &Growth,
        c: u32,
        growth: u32,
        fine: bool,
        uses: &mut Vec<SlotUse>,
    ) -> Result<(), Fail> {
        let p = g.pool;
        let fail = |stage, e| Failure::api(stage, c, e).at(p, Some(growth));
        let drv = self.drv;
        let pool = &mut pools[p as usize];
        let announce = |out: &mut Emitter, stage: &str| {
            if fine {
                out.stage(stage, c, p, growth);
            }
        };
        // Every cycle names the growth it is in, so a hang in a late cycle still has a stage.
        self.out.stage("create", c, p, growth);
        // llama.cpp creates the physical memory first and reserves on the first growth only.
        // Released when it goes out of scope on a failure below.
        let memory = Allocation::create(drv, g.bytes, &self.prop).map_err(|e| fail("create", e))?;
        let range = match &mut pool.range {
            Some(r) => r,
            None => {
                announce(self.out, "reserve");
                let r = VaRange::reserve(drv, self.plan.reserve_bytes)
                    .map_err(|e| fail("reserve", e))?;
                pool.base = r.base();
                pool.range.insert(r)
            }
        };
        announce(self.out, "map");
        range
            .map(g.offset, g.bytes, &memory)
            .map_err(|e| fail("map", e))?;
        pool.size = range.mapped();
        announce(self.out, "release");
        memory.release().map_err(|e| fail("release", e))?;
        announce(self.out, "set_access");
        if let Err(e) = range.set_access(g.offset, g.bytes, &self.access) {
            // Would access over everything mapped so far work (llama.cpp PR #23900)?
            let whole = range.set_access(0, range.mapped(), &self.access);
            let mut f = fail("set_access", e);
            f.whole_range_helped = Some(whole.is_ok());
            return Err(f);
        }
        self.stats.grew(g.bytes, pool.size);
        let (base, size, s) = (pool.base, pool.size, seed(c, p));
        announce(self.out, "write");
        self.kernels
            .write(&self.stream, base, g.offset / 4, g.bytes / 4, s)
            .map_err(|e| fail("write", e))?;
        announce(self.out, "verify");
        let slot = self.take_slot(uses, p, Some(growth), "gpu", "verify", c)?;
        self.kernels
            .verify(&self.stream, base, 0, size / 4, s, slot)
            .map_err(|e| fail("verify", e))
    }

    /// Waits for everything queued, then reads the counter slots.
    fn sync_and_check(&mut self, pools: &[Pool], c: u32, uses: &[SlotUse]) -> Result<(), Fail> {
        self.out.stage("sync", c, 0, 0);
        self.stream.sync().map_err(|e| Failure::api("sync", c, e))?;
        let values = self.slots.read().map_err(|e| Failure::api("sync", c, e))?;
        let Some((u, v)) = uses.iter().zip(&values).find(|(_, v)| v.mismatches > 0) else {
            return Ok(());
        };
        let pool = &pools[u.pool as usize];
        let mut seen = 0u32;
        let seen = copy_to_host(
            self.drv,
            std::slice::from_mut(&mut seen),
            pool.base + v.first_bad_word * 4,
        )
        .ok()
        .map(|()| seen);
        let s = seed(c, u.pool);
        let mut f =
            Failure::api(u.stage, c, mismatch_error(v.mismatches, u.check)).at(u.pool, u.growth);
        f.bad = Some(BadWords {
            mismatches: v.mismatches,
            first_offset: v.first_bad_word * 4,
            seen,
            expected: value(v.first_bad_word, s),
            check: u.check,
        });
        Err(f)
    }

    /// Copies the pool to the host, piece by piece, and compares there (a second thread compares
    /// one piece while the next is copied).
    fn host_compare(&mut self, pool: &Pool, p: u32, c: u32) -> Result<(), Fail> {
        let s = seed(c, p);
        let drv = self.drv;
        let piece_words = (HOST_PIECE / 4) as usize;
        let total_words = pool.size / 4;
        let (work_tx, work_rx) = mpsc::sync_channel::<(HostWords, usize, u64)>(1);
        let (free_tx, free_rx) = mpsc::channel::<HostWords>();
        let mut staging = std::mem::take(&mut self.staging);
        staging.resize_with(2, || HostWords::new(drv, piece_words));
        for buf in staging {
            let _ = free_tx.send(buf);
        }
        let threads = compare_threads();
        let (copied, bad, failed_piece) = std::thread::scope(|scope| {
            let checker = scope.spawn(move || {
                let mut bad: Option<(u64, u64, u32)> = None;
                for (buf, len, first) in work_rx {
                    let words = &buf.words()[..len];
                    if bad.is_none() {
                        let (n, at) = compare_parallel(words, first, s, threads);
                        if let Some(at) = at {
                            bad = Some((n, at, words[(at - first) as usize]));
                        }
                    } else if let Some((n, _, _)) = bad.as_mut() {
                        *n += compare_parallel(words, first, s, threads).0;
                    }
                    let _ = free_tx.send(buf);
                }
                bad
            });
            let mut copied: Result<u64, ApiError> = Ok(0);
            let mut failed_piece = None;
            let mut w = 0u64;
            while w < total_words {
                let Ok(mut buf) = free_rx.recv() else { break };
                let len = (total_words - w).min(piece_words as u64) as usize;
                if let Err(e) = copy_to_host(drv, &mut buf.words_mut()[..len], pool.base + w * 4) {
                    copied = Err(e);
                    failed_piece = Some(buf);
                    break;
                }
                if work_tx.send((buf, len, w)).is_err() {
                    break;
                }
                w += len as u64;
                copied = copied.map(|b| b + len as u64 * 4);
            }
            drop(work_tx);
            (copied, checker.join().ok().flatten(), failed_piece)
        });
        let pieces: Vec<HostWords> = free_rx.try_iter().chain(failed_piece).collect();
        if copied.is_err() {
            // A copy that failed may have left the context faulted, and freeing locked memory
            // then can block; the process ends right after the report.
            std::mem::forget(pieces);
        } else {
            self.staging = pieces;
        }
        let bytes = copied.map_err(|e| Failure::api("host_compare", c, e).at(p, None))?;
        self.stats.host_checked_bytes += bytes;
        if let Some((n, at, seen)) = bad {
            let mut f = Failure::api("host_compare", c, mismatch_error(n, "host")).at(p, None);
            f.bad = Some(BadWords {
                mismatches: n,
                first_offset: at * 4,
                seen: Some(seen),
                expected: value(at, s),
                check: "host",
            });
            return Err(f);
        }
        Ok(())
    }
}

fn mismatch_error(n: u64, check: &str) -> ApiError {
    let (api, how) = match check {
        "host" => ("host compare", "copied to the host"),
        "busy" => ("gpuprobe_busy", "read while the next chunk was mapped"),
        "settle" => ("gpuprobe_verify", "read again after the host waited"),
        _ => ("gpuprobe_verify", "read back right after mapping"),
    };
    ApiError {
        api: api.into(),
        code: 0,
        name: Some("MISMATCH".into()),
        message: Some(format!("{n} words {how} were wrong")),
    }
}
