//! Turning what a probe child said and how it ended into report entries.

use std::time::Duration;

use serde_json::Value;

use super::orchestrator::{Exit, Outcome, signal_name};
use crate::report::{ApiError, Backend, Device, Smoke, SmokeOutcome, Vendor};

pub fn api_error(v: &Value) -> Option<ApiError> {
    if v.is_null() || !v.is_object() {
        return None;
    }
    Some(ApiError {
        api: v["api"].as_str().unwrap_or("unknown").to_string(),
        code: v["code"].as_i64().unwrap_or(-1),
        name: v["name"].as_str().map(str::to_string),
        message: v["message"].as_str().map(str::to_string),
    })
}

/// A device from a `device` event; `None` if the event lacks the essentials.
pub fn device_from_event(e: &Value, backend: Backend, source: &str) -> Option<Device> {
    let index = e["index"].as_u64()? as u32;
    let name = e["name"].as_str()?.to_string();
    let arch = e["arch"].as_str()?.to_string();
    let u = |k: &str| e[k].as_u64();
    Some(Device {
        index,
        backend,
        vendor: match backend {
            Backend::Cuda => Vendor::Nvidia,
            Backend::Hip => Vendor::Amd,
        },
        name,
        arch,
        arch_features: e["arch_features"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        compute_capability: e["compute_capability"].as_str().map(str::to_string),
        vram_total_bytes: u("vram_total_bytes"),
        vram_free_bytes: u("vram_free_bytes"),
        pci_bus_id: e["pci_bus_id"].as_str().map(str::to_string),
        integrated: e["integrated"].as_bool(),
        wave_size: u("wave_size").map(|w| w as u32),
        vmm_supported: e["vmm_supported"].as_bool(),
        granularity_min: u("granularity_min"),
        granularity_recommended: u("granularity_recommended"),
        driver_version: None,
        runtime_version: None,
        source: source.to_string(),
        smoke: Smoke::not_run("not measured"),
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
        Exit::Code(code) => match out.event("smoke") {
            Some(ev) if out.complete() && *code == 0 => from_event(ev),
            Some(ev) => {
                let mut s = from_event(ev);
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
                let mut s =
                    Smoke::with_outcome(SmokeOutcome::BadOutput, format!("the probe {what}"));
                s.stage = out.last_stage();
                s
            }
        },
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

fn from_event(ev: &Value) -> Smoke {
    let outcome = match ev["outcome"].as_str() {
        Some("pass") => SmokeOutcome::Pass,
        Some("fail") => SmokeOutcome::Fail,
        Some("not-run") => SmokeOutcome::NotRun,
        _ => SmokeOutcome::BadOutput,
    };
    let u = |k: &str| ev[k].as_u64();
    let mut s = Smoke::with_outcome(outcome, "");
    s.stage = ev["failed_stage"].as_str().map(str::to_string);
    s.error = api_error(&ev["error"]);
    s.cycles_done = u("cycles_done").map(|v| v as u32);
    s.cycles = u("cycles").map(|v| v as u32);
    s.chunks_per_cycle = u("chunks_per_cycle").map(|v| v as u32);
    s.chunk_bytes = u("chunk_bytes");
    s.reserve_bytes = u("reserve_bytes");
    s.mismatches = u("mismatches");
    s.first_bad_offset = u("first_bad_offset");
    s.first_bad_value = u("first_bad_value").map(|v| v as u32);
    s.expected_value = u("expected_value").map(|v| v as u32);
    s.whole_range_access_helped = ev["whole_range_access_helped"].as_bool();
    s.vram_free_before = u("vram_free_before");
    s.vram_free_after = u("vram_free_after");
    s.elapsed_ms = ev["elapsed_ms"].as_f64();
    s.reason = Some(match outcome {
        SmokeOutcome::Pass => format!(
            "{} cycles x {} chunks of {}: reserve 32 GiB, map at offset, access on the new chunk, write + verify across chunks, per-chunk unmap; all correct{}",
            s.cycles_done.unwrap_or(0),
            s.chunks_per_cycle.unwrap_or(0),
            s.chunk_bytes.map(human_bytes).unwrap_or_else(|| "?".into()),
            s.elapsed_ms
                .map(|m| format!(" in {m:.0} ms"))
                .unwrap_or_default()
        ),
        SmokeOutcome::NotRun => ev["reason"].as_str().unwrap_or("not run").to_string(),
        _ => fail_reason(&s),
    });
    s
}

fn fail_reason(s: &Smoke) -> String {
    let stage = s.stage.as_deref().unwrap_or("unknown stage");
    let mut r = match stage {
        "reserve" if s.error.as_ref().is_some_and(|e| e.name.as_deref() == Some("SYMBOL_NOT_FOUND")) => {
            "the driver lacks the VMM entry points (too old for llama.cpp's VMM pool)".to_string()
        }
        "reserve" => "reserving llama.cpp's 32 GiB virtual range failed (WSL/WDDM/Jetson do this: Q15)".to_string(),
        "set_access" => "setting access on a chunk mapped at an offset failed (the HipVMM 'invalid argument' abort: Q3)".to_string(),
        "verify" if s.mismatches.unwrap_or(0) > 0 => {
            let mut m = format!("{} words read back wrong right after mapping", s.mismatches.unwrap_or(0));
            if let (Some(o), Some(v), Some(x)) = (s.first_bad_offset, s.first_bad_value, s.expected_value) {
                m.push_str(&format!(" (first at offset {o:#x}: read {v:#010x}, expected {x:#010x})"));
            }
            if s.first_bad_value == Some(0) {
                m.push_str("; freshly mapped memory reads zeros (Q4)");
            }
            m
        }
        "vram_check" => "free VRAM did not return after unmapping and releasing".to_string(),
        other => format!("failed at stage {other}"),
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
