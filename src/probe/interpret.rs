//! Turning what a probe child said and how it ended into report entries.

use std::time::Duration;

use crate::children::orchestrator::{Exit, Outcome, signal_name};
use crate::children::protocol::{Accounting, DeviceEvent, SmokeResult, Verdict};
use crate::report::{
    ApiError, Backend, BadCheck, Device, DeviceSource, GpuSharing, Smoke, SmokeGrowth,
    SmokeOutcome, SmokeStage,
};

/// A device from a `device` event; `None` if the event lacks the essentials.
pub fn device_from_event(
    e: &DeviceEvent,
    backend: Backend,
    source: DeviceSource,
) -> Option<Device> {
    let e = e.facts()?;
    Some(Device {
        index: e.index?,
        backend,
        vendor: backend.vendor(),
        name: e.name.clone(),
        arch: e.arch.clone(),
        arch_features: e.arch_features.clone().filter(|s| !s.is_empty()),
        compute_capability: e.compute_capability.clone(),
        vram_total_bytes: e.vram_total_bytes,
        vram_free_bytes: e.vram_free_bytes,
        pci_bus_id: e.pci_bus_id.clone(),
        integrated: e.integrated,
        wave_size: e.wave_size,
        vmm_supported: e.vmm_supported,
        granularity_min: e.granularity_min,
        granularity_recommended: e.granularity_recommended,
        driver_version: None,
        runtime_version: None,
        source,
        smoke: Smoke::not_run("not measured"),
        timings: None,
    })
}

/// The smoke verdict from a child that was asked to run it.
pub fn smoke_from(out: &Outcome, timeout: Duration, smoke_requested: bool) -> Smoke {
    let stage_note = || {
        let stage = out.last_stage();
        let cycle = out.last_cycle();
        match (stage, cycle) {
            (Some(s), Some(c)) if c > 0 => format!("during cycle {c} (last announced stage: {s})"),
            (Some(s), _) => format!("at stage {s}"),
            (None, _) => "before the first stage (driver/runtime initialisation)".to_string(),
        }
    };
    let mut s = match &out.exit {
        Exit::SpawnFailed(e) => Smoke::not_run(format!("the probe could not be started: {e}")),
        Exit::TimedOut => {
            let mut s = Smoke::with_outcome(
                SmokeOutcome::Hang,
                format!(
                    "no result within {} s {}: the GPU or its driver stopped answering (a page fault can leave the host waiting forever); the probe was killed",
                    trim_secs(timeout.as_secs_f64()),
                    stage_note()
                ),
            );
            s.stage = out.last_stage();
            s
        }
        Exit::Signal(sig) => {
            let mut s = Smoke::with_outcome(
                SmokeOutcome::Crash,
                format!(
                    "the probe died with {} ({sig}) {}",
                    signal_name(*sig),
                    stage_note()
                ),
            );
            s.signal = Some(*sig);
            s.stage = out.last_stage();
            s
        }
        Exit::Code(_) | Exit::AfterDone => {
            let code = out.exit.code().unwrap_or(0);
            smoke_from_report(out, code, smoke_requested, stage_note)
        }
    };
    s.stderr_tail = out
        .stderr_tail
        .iter()
        .rev()
        .take(8)
        .rev()
        .cloned()
        .collect();
    if s.outcome == SmokeOutcome::Pass {
        s.stderr_tail.clear();
    }
    s
}

/// The smoke verdict from a child that ended by itself with exit `code`.
fn smoke_from_report(
    out: &Outcome,
    code: i32,
    smoke_requested: bool,
    stage_note: impl Fn() -> String,
) -> Smoke {
    match out.smoke().map(|e| e.result()) {
        Some(ev) if out.complete() && code == 0 => from_event(&ev),
        Some(ev) => {
            let mut s = from_event(&ev);
            if !out.complete() {
                s.outcome = SmokeOutcome::BadOutput;
                s.reason = Some(format!(
                    "the probe's report ended early (exit {code}, no `done`)"
                ));
            }
            s
        }
        None if !smoke_requested && out.complete() => Smoke::not_run("skipped (--no-smoke)"),
        None => {
            let what = if !out.garbage.is_empty() {
                format!(
                    "printed output that is not the probe protocol (e.g. {:?})",
                    out.garbage[0]
                )
            } else if out.complete() {
                "finished without a smoke result".to_string()
            } else {
                format!(
                    "stopped {} with exit code {code} and no complete report",
                    stage_note()
                )
            };
            let mut s = Smoke::with_outcome(SmokeOutcome::BadOutput, format!("the probe {what}"));
            s.stage = out.last_stage();
            s
        }
    }
}

fn from_event(ev: &SmokeResult) -> Smoke {
    let outcome = match ev.outcome {
        Some(Verdict::Pass) => SmokeOutcome::Pass,
        Some(Verdict::Fail) => SmokeOutcome::Fail,
        Some(Verdict::NotRun) => SmokeOutcome::NotRun,
        Some(Verdict::Partial) => SmokeOutcome::Partial,
        None => SmokeOutcome::BadOutput,
    };
    let mut s = Smoke::with_outcome(outcome, "");
    s.stage = ev.failed_stage.clone();
    s.error = ev.error.clone();
    s.cycles_done = ev.cycles_done;
    s.cycles = ev.cycles;
    s.chunks_per_cycle = ev.chunks_per_cycle;
    s.chunk_bytes = ev.chunk_bytes;
    s.reserve_bytes = ev.reserve_bytes;
    s.mismatches = ev.mismatches;
    s.first_bad_offset = ev.first_bad_offset;
    s.first_bad_value = ev.first_bad_value;
    s.expected_value = ev.expected_value;
    s.whole_range_access_helped = ev.whole_range_access_helped;
    s.vram_free_before = ev.vram_free_before;
    s.vram_free_after = ev.vram_free_after;
    s.elapsed_ms = ev.elapsed_ms;
    let growth = SmokeGrowth {
        plan_version: ev.plan_version,
        min_cycles: ev.min_cycles,
        pools: ev.pools,
        failed_cycle: ev.failed_cycle,
        failed_pool: ev.failed_pool,
        failed_growth: ev.failed_growth,
        bad_check: ev.bad_check.clone(),
        smallest_chunk_bytes: ev.smallest_chunk_bytes,
        largest_chunk_bytes: ev.largest_chunk_bytes,
        largest_pool_bytes: ev.largest_pool_bytes,
        long_target_bytes: ev.long_target_bytes,
        long_growths: ev.long_growths,
        host_checked_bytes: ev.host_checked_bytes,
        long_phase_ms: ev.long_phase_ms,
    };
    s.growth = (growth != SmokeGrowth::default()).then_some(growth);
    // The parent's own plan decides how many cycles count: a probe cannot lower the bar.
    let min_cycles = crate::probe::smoke_plan::bundled()
        .map(|p| p.min_cycles)
        .unwrap_or(u32::MAX);
    s.sharing = ev.accounting.as_ref().and_then(sharing);
    s.notes = ev
        .notes
        .iter()
        .take(MAX_NOTES)
        .map(|n| bounded(n))
        .collect();
    // Fewer pools than the parent's plan is a scaled-down test, whatever the child called it.
    let plan_pools = crate::probe::smoke_plan::bundled().map_or(0, |p| p.pools);
    let scaled = ev.pools_run.filter(|k| *k < plan_pools);
    if outcome == SmokeOutcome::Pass && scaled.is_some() {
        s.outcome = SmokeOutcome::Partial;
    }
    if outcome == SmokeOutcome::Pass && s.cycles_done.unwrap_or(0) < min_cycles {
        s.outcome = SmokeOutcome::Partial;
    }
    s.reason = Some(match s.outcome {
        SmokeOutcome::Pass => pass_reason(&s),
        // The child cut the test short for lack of free VRAM: its reason says how.
        SmokeOutcome::Partial if outcome == SmokeOutcome::Partial || scaled.is_some() => {
            let why = ev.reason.as_deref().map_or_else(
                || {
                    format!(
                        "only {} of the plan's {plan_pools} pools fitted in the free VRAM",
                        scaled.unwrap_or(0)
                    )
                },
                bounded,
            );
            format!("{}; {why}: lifts no deny", pass_reason(&s))
        }
        SmokeOutcome::Partial => format!(
            "{}; only {} of the {min_cycles} cycles a result needs to lift a deny (run with the default --cycles)",
            pass_reason(&s),
            s.cycles_done.unwrap_or(0)
        ),
        SmokeOutcome::NotRun => ev.reason.clone().unwrap_or_else(|| "not run".into()),
        _ => fail_reason(&s),
    });
    s
}

/// Notes kept from a child, and the length of each: the child is not trusted to be brief.
const MAX_NOTES: usize = 16;
const MAX_NOTE_CHARS: usize = 400;

fn bounded(text: &str) -> String {
    text.chars().take(MAX_NOTE_CHARS).collect()
}

/// The report's view of the child's accounting: `shared` when anyone else was seen.
fn sharing(a: &Accounting) -> Option<GpuSharing> {
    let source = a.source.as_deref().map(bounded)?;
    let mut other_pids = a.other_pids.clone().unwrap_or_default();
    other_pids.sort_unstable();
    other_pids.dedup();
    other_pids.truncate(256);
    Some(GpuSharing {
        source,
        shared: !other_pids.is_empty(),
        other_pids,
        own_listed: a.own_listed.unwrap_or(false),
        own_vram_before: a.own_before,
        own_vram_after: a.own_after,
    })
}

fn pass_reason(s: &Smoke) -> String {
    let g = s.growth.clone().unwrap_or_default();
    let mut r = format!(
        "{} cycles of {} pools grown like llama.cpp's VMM pool ({} growths per cycle",
        s.cycles_done.unwrap_or(0),
        g.pools.unwrap_or(1),
        s.chunks_per_cycle.unwrap_or(0),
    );
    if let (Some(a), Some(b)) = (g.smallest_chunk_bytes, g.largest_chunk_bytes) {
        r.push_str(&format!(
            ", chunks {} to {}",
            human_bytes(a),
            human_bytes(b)
        ));
    }
    r.push(')');
    if let Some(p) = g.largest_pool_bytes.filter(|p| *p > 0) {
        r.push_str(&format!(", one pool grown to {}", human_bytes(p)));
    }
    if let Some(h) = g.host_checked_bytes.filter(|h| *h > 0) {
        r.push_str(&format!(", {} compared on the host", human_bytes(h)));
    }
    r.push_str(": all correct");
    if let Some(m) = s.elapsed_ms {
        r.push_str(&format!(" in {m:.0} ms"));
    }
    r
}

fn fail_reason(s: &Smoke) -> String {
    let mut r = match &s.stage {
        Some(SmokeStage::Reserve)
            if s.error.as_ref().is_some_and(ApiError::is_symbol_not_found) =>
        {
            "the driver lacks the VMM entry points (too old for llama.cpp's VMM pool)".to_string()
        }
        Some(SmokeStage::Reserve) => {
            "reserving llama.cpp's 32 GiB virtual range failed (WSL/WDDM/Jetson do this: Q15)"
                .to_string()
        }
        Some(SmokeStage::SetAccess) => {
            let g = s.growth.as_ref();
            match g.and_then(|g| g.failed_growth) {
                Some(n) if n > 0 => format!(
                    "setting access on a pool growth mapped at an offset failed (growth {n}{}: the HipVMM 'invalid argument' abort: Q3)",
                    g.and_then(|g| g.failed_pool).map(|p| format!(" of pool {p}")).unwrap_or_default()
                ),
                _ => "setting access on a chunk mapped at an offset failed (the HipVMM 'invalid argument' abort: Q3)".to_string(),
            }
        }
        Some(
            SmokeStage::Verify | SmokeStage::Busy | SmokeStage::Settle | SmokeStage::HostCompare,
        ) if s.mismatches.unwrap_or(0) > 0 => {
            let check = s.growth.as_ref().and_then(|g| g.bad_check.as_ref());
            let when = match check {
                Some(BadCheck::Settle) => {
                    "read back wrong when verified again after the host waited"
                }
                Some(BadCheck::Host) => {
                    "differed when the pool was copied to the host and compared there"
                }
                Some(BadCheck::Busy) => "read back wrong while the next chunk was being mapped",
                _ => "read back wrong right after mapping",
            };
            let mut m = format!("{} words {when}", s.mismatches.unwrap_or(0));
            if let (Some(o), Some(v), Some(x)) =
                (s.first_bad_offset, s.first_bad_value, s.expected_value)
            {
                m.push_str(&format!(
                    " (first at offset {o:#x}: read {v:#010x}, expected {x:#010x})"
                ));
            }
            if let Some(c) = s
                .growth
                .as_ref()
                .and_then(|g| g.failed_cycle)
                .filter(|c| *c > 0)
            {
                m.push_str(&format!(" in cycle {c}"));
            }
            if s.first_bad_value == Some(0) {
                m.push_str(if matches!(check, Some(BadCheck::Settle | BadCheck::Host)) {
                    "; memory written right after its mapping reads zeros later: the write went through a mapping that was not yet in place (rocm-systems#11693, Q4)"
                } else {
                    "; freshly mapped memory reads zeros (Q4)"
                });
            }
            m
        }
        Some(SmokeStage::VramCheck) => {
            "free VRAM did not return after unmapping and releasing".to_string()
        }
        other => format!(
            "failed at stage {}",
            other.as_ref().map_or("unknown stage", SmokeStage::as_str)
        ),
    };
    if let Some(e) = &s.error
        && s.mismatches.unwrap_or(0) == 0
    {
        r.push_str(&format!(": {e}"));
    }
    if let Some(h) = s.whole_range_access_helped {
        r.push_str(if h {
            "; access over the whole mapped range worked (the workaround of llama.cpp PR #23900 would help)"
        } else {
            "; access over the whole mapped range failed too"
        });
    }
    r
}

pub fn human_bytes(b: u64) -> String {
    if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{} GiB", b >> 30)
    } else if b >= 1 << 20 {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

fn trim_secs(s: f64) -> String {
    let t = format!("{s:.2}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}
