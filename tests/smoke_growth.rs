//! The smoke test catches the failures it exists for (issue #19). Each test injects one failure the
//! old smoke test (equal 2 MiB chunks, one reservation at a time, write and verify on an idle GPU,
//! no later re-read, no VMM access from peers) passed, and checks that it now fails, where, and
//! what the plan says.
//!
//! CUDA path: the real `gpuprobe` child runs against a FAKE `libcuda.so.1`
//! (tests/fake_cuda/fake_libcuda.c) whose scenario reproduces the driver bug. HIP path: fake probe
//! programs (tests/fake-probes) print what the real probe program prints under the same bug.
//! Fakes measure nothing; they exist so that these checks can be tested without the hardware.
//!
//! Also here: the probe program and the CUDA child grow pools by the same schedule.

#[allow(dead_code)]
#[path = "common/fake_cuda.rs"]
mod fake_cuda;
#[path = "common/probe_bins.rs"]
mod probe_bins;
use probe_bins::built_probes;

use std::path::PathBuf;
use std::process::Command;

use fake_cuda::{FakeMachine, pattern, seed};
use serde_json::Value;

const FAST: &[&str] = &["--cycles", "3", "--timeout", "30"];
const MIB: u64 = 1 << 20;

fn smoke(report: &Value, i: usize) -> &Value {
    &report["devices"][i]["smoke"]
}

fn text(v: &Value) -> &str {
    v.as_str()
        .unwrap_or_else(|| panic!("expected a string, got {v}"))
}

fn assert_contains(haystack: &str, needle: &str) {
    assert!(
        haystack.contains(needle),
        "expected {needle:?} in:\n{haystack}"
    );
}

/// `cmake-flags --from REPORT --format json` for CUDA 12.8: the GGML_CUDA_NO_VMM flag.
fn cuda_no_vmm_from(m: &FakeMachine, report_text: &str) -> Value {
    let path = m.root.path().join("report.json");
    std::fs::write(&path, report_text).unwrap();
    let (code, stdout, stderr) = m.run(&[
        "cmake-flags",
        "--from",
        path.to_str().unwrap(),
        "--format",
        "json",
        "--toolchain",
        "none",
        "--cuda",
        "12.8",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    plan["groups"][0]["flags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "GGML_CUDA_NO_VMM")
        .cloned()
        .unwrap_or_else(|| panic!("no GGML_CUDA_NO_VMM: {plan:#}"))
}

// ---- CUDA: the real child against a fake driver ----------------------------------------------

/// Q3: hipMemSetAccess on ROCm 7.0-7.2 adds up a reservation's sub-buffers from the first one, so
/// equal chunks (the old smoke test) pass and llama.cpp's uneven growth fails.
#[test]
fn uneven_growth_meets_the_prefix_sum_set_access_check() {
    let m = FakeMachine::new("setaccess_prefix_sum");
    let (report, report_text) = m.detect(FAST);
    let s = smoke(&report, 0);
    assert_eq!(s["outcome"], "fail", "{s:#}");
    assert_eq!(s["stage"], "set_access");
    assert_eq!(s["error"]["api"], "cuMemSetAccess");
    assert_eq!(s["error"]["name"], "CUDA_ERROR_INVALID_VALUE");
    // Pools 0..2 take a 6 MiB first chunk (at their base: the first sub-buffer matches); pool 0's
    // second growth, 2 MiB, is the first call whose size is not the first sub-buffer's.
    let g = &s["growth"];
    assert_eq!(g["failed_cycle"], 0, "{s:#}");
    assert_eq!(g["failed_pool"], 0);
    assert_eq!(g["failed_growth"], 3);
    // Access over everything mapped (6 + 2 MiB, a prefix sum) works: llama.cpp PR #23900's way.
    assert_eq!(s["whole_range_access_helped"], true);
    assert_contains(text(&s["reason"]), "growth 3 of pool 0");
    assert_contains(text(&s["reason"]), "Q3");
    let f = cuda_no_vmm_from(&m, &report_text);
    assert_eq!(f["value"], "ON", "{f:#}");
    assert_contains(text(&f["reason"]), "set_access");
}

/// rocm-systems#11693: kernels right after a map go through a stale translation. A write and a
/// verify queued right after the map agree; the memory itself never got the data.
#[test]
fn data_written_right_after_a_map_is_caught_by_the_host_copy() {
    // A window longer than the whole run: only the copy engine sees the real memory.
    let m = FakeMachine::new("map_window").env("FAKE_CUDA_WINDOW_MS", "60000");
    let (report, report_text) = m.detect(FAST);
    let s = smoke(&report, 0);
    assert_eq!(s["outcome"], "fail", "{s:#}");
    assert_eq!(s["stage"], "host_compare", "{s:#}");
    let g = &s["growth"];
    assert_eq!(g["bad_check"], "host");
    assert_eq!(g["failed_cycle"], 0);
    assert_eq!(g["failed_pool"], 0);
    // All of pool 0 reads zeros: the first word is the first one of the pool.
    assert_eq!(s["first_bad_offset"], 0);
    assert_eq!(s["first_bad_value"], 0);
    assert_eq!(s["expected_value"], pattern(0, seed(0, 0)));
    assert_eq!(
        s["mismatches"],
        g["largest_pool_bytes"].as_u64().unwrap() / 4
    );
    let reason = text(&s["reason"]);
    assert_contains(reason, "copied to the host");
    assert_contains(reason, "rocm-systems#11693");
    assert_eq!(cuda_no_vmm_from(&m, &report_text)["value"], "ON");
}

#[test]
fn data_written_right_after_a_map_reads_zeros_later_on_the_gpu_too() {
    // The reported window: a couple of milliseconds. By the time the host has slept and verifies
    // again (or the cycle's later checks read the pool), the data is gone.
    let m = FakeMachine::new("map_window").env("FAKE_CUDA_WINDOW_MS", "2");
    let (report, _) = m.detect(FAST);
    let s = smoke(&report, 0);
    assert_eq!(s["outcome"], "fail", "{s:#}");
    assert_eq!(s["first_bad_value"], 0, "{s:#}");
    let check = text(&s["growth"]["bad_check"]).to_string();
    assert!(
        ["gpu", "busy", "settle", "host"].contains(&check.as_str()),
        "{s:#}"
    );
    assert_eq!(s["growth"]["failed_cycle"], 0);
}

/// llama.cpp with GGML_CUDA_P2P or NCCL grants peers access to pool memory; a peer that reads it
/// wrong fails the peer check (ordinary peer copies still work, so the old check passed).
#[test]
fn a_peer_reading_vmm_pool_memory_wrong_fails_the_pair() {
    let m = FakeMachine::new("peer_reads_fail").env("FAKE_CUDA_DEVICES", "2");
    let (report, _) = m.detect(FAST);
    for i in 0..2 {
        assert_eq!(smoke(&report, i)["outcome"], "partial", "{report:#}");
    }
    let p = &report["peers"][0];
    assert_eq!(p["can_access"], true);
    assert_eq!(p["copy_ok"], true, "ordinary peer copies still work: {p:#}");
    assert_eq!(p["outcome"], "fail", "{p:#}");
    assert_contains(
        text(&p["reason"]),
        "VMM pool with access granted to the peer",
    );
    assert_contains(text(&p["reason"]), "peer_verify");
    let vmm = &report["probe_run"]["backends"][0]["peer"]["pairs"][0];
    assert_eq!(vmm["read_ok"], false, "{vmm:#}");
    assert_eq!(vmm["stage"], "peer_verify");
    // Each device's pool grows like the smoke test's pool 0; its first chunk (6 MiB at 2 MiB
    // granularity) already reads wrong from the other device, in both directions.
    assert_eq!(vmm["mismatches"], 2 * (6 * MIB / 4), "{vmm:#}");
}

// ---- HIP: fake probe programs --------------------------------------------------------------

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `gpuprobe detect --backend hip --json` with the fake probe `name` standing in for the probe
/// program on a fake 2 x R9700 machine; returns the report.
fn hip_detect(name: &str, cycles: &str) -> Value {
    let home = tempfile::tempdir().unwrap();
    let probe = manifest_dir().join(format!("tests/fake-probes/{name}.sh"));
    assert!(probe.is_file(), "{}", probe.display());
    let out = Command::new(env!("CARGO_BIN_EXE_gpuprobe"))
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", "/usr/bin:/bin")
        .env("LANG", "C")
        .env(
            "GPUPROBE_SYSFS_ROOT",
            manifest_dir().join("tests/fixtures/sysfs/2x-r9700-gfx1201"),
        )
        .env("GPUPROBE_HIP_PROBE", &probe)
        .env("FAKE_PROBE_DEVICES", "2")
        .args([
            "detect",
            "--backend",
            "hip",
            "--json",
            "--cycles",
            cycles,
            "--timeout",
            "30",
        ])
        .output()
        .expect("run gpuprobe");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stdout));
    })
}

#[test]
fn hip_fake_prefix_sum_set_access_fails_at_the_second_growth() {
    let report = hip_detect("setaccess-prefix-sum", "200");
    for i in 0..2 {
        let s = smoke(&report, i);
        assert_eq!(s["outcome"], "fail", "{s:#}");
        assert_eq!(s["stage"], "set_access");
        assert_eq!(s["error"]["name"], "hipErrorInvalidValue");
        assert_eq!(s["growth"]["failed_growth"], 3);
        assert_eq!(s["whole_range_access_helped"], true);
        assert_contains(text(&s["reason"]), "Q3");
    }
}

#[test]
fn hip_fake_map_window_fails_when_verified_again_after_the_wait() {
    let report = hip_detect("map-window-zeros", "200");
    let s = smoke(&report, 0);
    assert_eq!(s["outcome"], "fail", "{s:#}");
    assert_eq!(s["stage"], "settle");
    assert_eq!(s["growth"]["bad_check"], "settle");
    assert_eq!(s["first_bad_value"], 0);
    assert_eq!(s["first_bad_offset"], 308 * MIB);
    assert_eq!(s["expected_value"], pattern(308 * MIB / 4, seed(0, 0)));
    assert_contains(text(&s["reason"]), "verified again after the host waited");
    assert_contains(text(&s["reason"]), "rocm-systems#11693");
}

#[test]
fn hip_fake_peer_reads_fail_the_pair_while_each_device_passes() {
    let report = hip_detect("peer-reads-fail", "200");
    for i in 0..2 {
        assert_eq!(smoke(&report, i)["outcome"], "pass", "{report:#}");
    }
    let p = &report["peers"][0];
    assert_eq!(p["outcome"], "fail", "{p:#}");
    assert_eq!(p["copy_ok"], true);
    let vmm = &report["probe_run"]["backends"][0]["peer"]["pairs"][0];
    assert_eq!(vmm["read_ok"], false);
    assert_eq!(vmm["mismatches"], 1_572_864);
}

#[test]
fn hip_fake_pass_over_too_few_cycles_is_partial() {
    let report = hip_detect("pass-gfx1201", "20");
    let s = smoke(&report, 0);
    assert_eq!(s["outcome"], "partial", "{s:#}");
    assert_contains(text(&s["reason"]), "only 20 of the 200 cycles");
}

// ---- one schedule for both implementations ---------------------------------------------------

#[test]
fn probe_program_and_cuda_child_grow_pools_by_the_same_schedule() {
    let probes = built_probes();
    if probes.is_empty() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no probe program built: scripts/test.sh builds it before cargo test"
        );
        eprintln!("skipped: no built probe program (scripts/build-probe.sh)");
        return;
    }
    let cases: &[(u64, u64)] = &[
        (4096, 33_863_958_528),       // R9700 on ROCm 7.2: 4 KiB granularity
        (2 * MIB, 150_000_000_000),   // H200: 2 MiB, past 1 GiB
        (64 * 1024, 460 * MIB),       // an APU's 512 MiB carve-out
        (2 * MIB, 0),                 // nothing free: no long phase
        (MIB, 3 * (1 << 30) + 12345), // 1 MiB, odd free size
    ];
    for probe in &probes {
        for (g, free) in cases {
            let child = Command::new(env!("CARGO_BIN_EXE_gpuprobe"))
                .args([
                    "__child",
                    "cuda",
                    "--plan",
                    &g.to_string(),
                    &free.to_string(),
                ])
                .output()
                .unwrap();
            let program = Command::new(probe)
                .args(["--plan", &g.to_string(), &free.to_string()])
                .output()
                .unwrap();
            assert!(child.status.success(), "{child:?}");
            if program.status.code() == Some(2) && std::env::var_os("CI").is_none() {
                // Built from another checkout that shares the cache (no --plan yet).
                eprintln!(
                    "skipped: {} predates --plan; rebuild it with scripts/build-probe.sh",
                    probe.display()
                );
                break;
            }
            assert!(program.status.success(), "{}: {program:?}", probe.display());
            let a: Value = serde_json::from_slice(&child.stdout).unwrap();
            let b: Value = serde_json::from_slice(&program.stdout).unwrap();
            assert_eq!(
                a,
                b,
                "{} disagrees with the CUDA child for granularity {g}, free {free}",
                probe.display()
            );
            assert!(!a["growths"].as_array().unwrap().is_empty());
        }
    }
}
