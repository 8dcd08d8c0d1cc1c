//! The smoke test on a busy, shared GPU (issue #28), with no GPU: the FAKE `libcuda.so.1`
//! (tests/fake_cuda/fake_libcuda.c) plays a neighbour process that takes and gives back VRAM
//! while the probe runs, a GPU with little free VRAM, and a real leak; it also answers NVML's
//! process list. What the probe concludes must not depend on what other processes do.

#[allow(dead_code)]
#[path = "common/fake_cuda.rs"]
mod fake_cuda;

use fake_cuda::FakeMachine;
use serde_json::Value;

/// The fake's neighbour process (NEIGHBOUR_PID in fake_libcuda.c).
const NEIGHBOUR_PID: u64 = 4_000_001;
const MIB: u64 = 1 << 20;
const FULL: &[&str] = &["--cycles", "200", "--timeout", "120"];
/// Fewer cycles than a pass needs: `partial` on a healthy device, quick.
const FAST: &[&str] = &["--cycles", "3", "--timeout", "20"];

fn smoke(report: &Value) -> &Value {
    &report["devices"][0]["smoke"]
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

fn notes(s: &Value) -> Vec<String> {
    s["notes"]
        .as_array()
        .map(|n| n.iter().map(|x| text(x).to_string()).collect())
        .unwrap_or_default()
}

/// A neighbour on the GPU moving free VRAM both ways (300 and 40 MiB) by more than the probe
/// maps (about 170 MiB here), and ending lower than it began: the verdict is still the probe's own.
#[test]
fn others_moving_free_vram_both_ways_leave_the_pass_alone() {
    let m = FakeMachine::new("neighbours").env("FAKE_CUDA_FREE_MIB", "512");
    let (report, _) = m.detect(FULL);
    let s = smoke(&report);
    assert_eq!(s["outcome"], "pass", "{s:#}");
    assert_eq!(s["stage"], Value::Null, "{s:#}");
    let g = &s["growth"];
    assert!(
        g["largest_pool_bytes"].as_u64().unwrap() > 100 * MIB
            && g["largest_pool_bytes"].as_u64().unwrap() < 260 * MIB,
        "the neighbour's swing must exceed the probe's footprint: {g:#}"
    );
    assert_eq!(s["cycles_done"], 200);
    let (before, after) = (
        s["vram_free_before"].as_u64().unwrap(),
        s["vram_free_after"].as_u64().unwrap(),
    );
    assert!(before > after + 32 * MIB, "the neighbour kept VRAM: {s:#}");
    let sh = &s["sharing"];
    assert_eq!(sh["source"], "nvml", "{s:#}");
    assert_eq!(sh["shared"], true);
    assert_eq!(sh["own_listed"], true);
    assert_eq!(sh["other_pids"], serde_json::json!([NEIGHBOUR_PID]));
    // The probe's own share came back to what it was.
    assert_eq!(sh["own_vram_before"], sh["own_vram_after"], "{sh:#}");
    let n = notes(s);
    assert!(
        n.iter().any(|n| n.contains("free VRAM fell by")
            && n.contains("with 1 other process on the GPU")
            && n.contains("own VRAM (NVML) came back")),
        "{n:?}"
    );

    // The text output says the GPU was shared.
    let (code, stdout, stderr) = m.run(&["detect", "--backend", "cuda", "--cycles", "3"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(
            "shared GPU: 1 other compute process seen during the smoke test (nvml: pid 4000001)"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("note: free VRAM fell by"), "{stdout}");
}

/// No NVML at all: the same neighbour, judged by the probe's own handles only; the drop of free
/// VRAM is a note.
#[test]
fn without_per_process_accounting_a_drop_of_free_vram_is_a_note() {
    let m = FakeMachine::new("neighbours")
        .env("FAKE_CUDA_FREE_MIB", "512")
        .env("GPUPROBE_LIBNVML", "/nonexistent/libnvidia-ml.so.1");
    let (report, _) = m.detect(FAST);
    let s = smoke(&report);
    // Three cycles: `partial` for the cycle count alone, not a failure.
    assert_eq!(s["outcome"], "partial", "{s:#}");
    assert_eq!(s["error"], Value::Null, "{s:#}");
    assert!(
        text(&s["reason"]).contains("only 3 of the 200 cycles"),
        "{s:#}"
    );
    assert_eq!(s.get("sharing"), None, "{s:#}");
    let n = notes(s);
    assert!(
        n.iter()
            .any(|n| n.contains("free VRAM fell by") && n.contains("without per-process")),
        "{n:?}"
    );
}

/// The check can still fail: memory the probe released stays charged to it.
#[test]
fn vram_kept_by_the_probe_itself_still_fails() {
    // Room for what leaks in three cycles, so it is not cut short for lack of memory.
    let m = FakeMachine::new("leak").env("FAKE_CUDA_FREE_MIB", "1024");
    let (report, _) = m.detect(FAST);
    let s = smoke(&report);
    assert_eq!(s["outcome"], "fail", "{s:#}");
    assert_eq!(s["stage"], "vram_check");
    assert_eq!(s["error"]["name"], "VRAM_NOT_RETURNED");
    assert_eq!(s["error"]["api"], "nvmlDeviceGetComputeRunningProcesses");
    assert_eq!(s["sharing"]["shared"], false, "{s:#}");
}

/// Another job holds most of the GPU: the plan runs the pools that fit and says `partial`.
#[test]
fn too_little_free_vram_scales_the_plan_down_to_partial() {
    let m = FakeMachine::new("ok").env("FAKE_CUDA_FREE_MIB", "40");
    let (report, report_text) = m.detect(FULL);
    let s = smoke(&report);
    assert_eq!(s["outcome"], "partial", "{s:#}");
    assert_eq!(s["error"], Value::Null, "{s:#}");
    assert_eq!(s["cycles_done"], 200);
    // Pool 0 only: its three growths a cycle.
    assert_eq!(s["chunks_per_cycle"], 3, "{s:#}");
    let reason = text(&s["reason"]);
    assert!(
        reason.contains("MiB of VRAM free: ran 1 of the plan's 3 pools"),
        "{reason}"
    );
    assert!(reason.contains("only 39 MiB"), "{reason}");
    assert!(reason.contains("lifts no deny"), "{reason}");

    // It lifts nothing and denies nothing: llama.cpp's default stays, not because of a pass.
    let path = m.root.path().join("report.json");
    std::fs::write(&path, &report_text).unwrap();
    let (code, stdout, stderr) = m.run(&[
        "cmake-flags",
        "--from",
        path.to_str().unwrap(),
        "--toolchain",
        "none",
        "--cuda",
        "12.8",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.contains("NO_VMM=ON"), "{stdout}");
}

#[test]
fn no_room_even_for_pool_0_is_not_run() {
    let m = FakeMachine::new("ok").env("FAKE_CUDA_FREE_MIB", "20");
    let (report, _) = m.detect(FULL);
    let s = smoke(&report);
    assert_eq!(s["outcome"], "not-run", "{s:#}");
    assert!(
        text(&s["reason"]).contains("only 19 MiB of VRAM free: even pool 0"),
        "{s:#}"
    );
}

/// The neighbour takes the memory after the probe measured it: out of memory mid-run is
/// `partial`, not a broken GPU.
#[test]
fn out_of_memory_mid_run_is_partial() {
    let m = FakeMachine::new("neighbours").env("FAKE_CUDA_FREE_MIB", "320");
    let (report, _) = m.detect(FULL);
    let s = smoke(&report);
    assert_eq!(s["outcome"], "partial", "{s:#}");
    assert_eq!(s["error"], Value::Null, "{s:#}");
    let reason = text(&s["reason"]);
    assert!(
        reason.contains("cuMemCreate ran out of VRAM in cycle 0")
            && reason.contains("with 1 other process on the GPU"),
        "{reason}"
    );
}
