//! Failure injection for the CUDA path, with no GPU: the real `gpuprobe` binary loads a FAKE
//! `libcuda.so.1` (tests/fake_cuda/fake_libcuda.c, built here with the `cc` crate) through
//! GPUPROBE_LIBCUDA, and FAKE_CUDA_SCENARIO makes that fake misbehave the way real drivers and
//! GPUs do (offset access refused, fresh mappings reading zeros, reservation refused, crashes
//! and hangs at various points, garbage on stdout, missing entry points). Each test checks
//! what `detect --json` records for the device and what `cmake-flags` decides from it.
//!
//! The `ok` scenario is a fake too: it emulates the smoke kernels on the host so the decision
//! plumbing for a passing device can be tested. It says nothing about real hardware.

// This harness signals and inspects processes through libc.
#![allow(unsafe_code)]

#[allow(dead_code)]
#[path = "common/fake_cuda.rs"]
mod fake_cuda;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fake_cuda::{FREE_MIB, FakeMachine, OPEN_MODULE, PROPRIETARY_MODULE, pattern, seed};
use serde_json::Value;

/// Cycle count and timeout where neither matters to the test: fewer cycles than a pass needs,
/// so a healthy device comes out `partial`.
const FAST: &[&str] = &["--cycles", "3", "--timeout", "20"];
/// The cycles a pass needs (probes/smoke-plan.toml).
const MIN_CYCLES: &str = "200";
/// Toolkit given, so decisions do not depend on an nvcc on this machine.
const PLAN: &[&str] = &["--toolchain", "none", "--cuda", "12.8"];
const CHUNK: u64 = 2 << 20;
const RESERVE: u64 = 1 << 35;

fn cuda_backend(report: &Value) -> &Value {
    report["backends"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["backend"] == "cuda"))
        .unwrap_or_else(|| panic!("no cuda backend entry in {report:#}"))
}

fn devices(report: &Value) -> &Vec<Value> {
    report["devices"].as_array().expect("devices array")
}

fn smoke(report: &Value, i: usize) -> &Value {
    let d = devices(report);
    assert!(d.len() > i, "device {i} missing: {report:#}");
    &d[i]["smoke"]
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

/// `cmake-flags --format json` probing the fake machine; must exit 0.
fn plan_probing(m: &FakeMachine, extra: &[&str]) -> Value {
    let mut args = vec!["cmake-flags", "--format", "json", "--backend", "cuda"];
    args.extend_from_slice(FAST);
    args.extend_from_slice(PLAN);
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = m.run(&args);
    assert_eq!(
        code, 0,
        "cmake-flags exited {code}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("plan is not JSON ({e}):\n{stdout}"))
}

fn save_report(m: &FakeMachine, report_text: &str) -> PathBuf {
    let p = m.root.path().join("report.json");
    std::fs::write(&p, report_text).unwrap();
    p
}

/// `cmake-flags --from REPORT --format args`: (exit code, stdout, stderr).
fn args_from_report(m: &FakeMachine, report: &Path, extra: &[&str]) -> (i32, String, String) {
    let r = report.to_str().unwrap();
    let mut args = vec!["cmake-flags", "--from", r, "--format", "args"];
    args.extend_from_slice(PLAN);
    args.extend_from_slice(extra);
    m.run(&args)
}

/// The single group's flag `name`, if planned.
fn flag<'a>(plan: &'a Value, name: &str) -> Option<&'a Value> {
    let groups = plan["groups"].as_array().expect("groups");
    assert_eq!(groups.len(), 1, "expected one build group: {plan:#}");
    groups[0]["flags"]
        .as_array()
        .expect("flags")
        .iter()
        .find(|f| f["name"] == name)
}

/// Both ways of deciding (probing now, and from the saved report) keep the legacy pool, and
/// the probing plan's reason names what was measured.
fn assert_vmm_denied(m: &FakeMachine, report_text: &str, reason_needles: &[&str]) {
    let plan = plan_probing(m, &[]);
    let f = flag(&plan, "GGML_CUDA_NO_VMM")
        .unwrap_or_else(|| panic!("no GGML_CUDA_NO_VMM in {plan:#}"));
    assert_eq!(f["value"], "ON", "{plan:#}");
    let reason = text(&f["reason"]);
    assert_contains(reason, "device 0 (Fake GPU)");
    for n in reason_needles {
        assert_contains(reason, n);
    }
    assert_eq!(plan["refusals"], serde_json::json!([]));

    let report = save_report(m, report_text);
    let (code, stdout, stderr) = args_from_report(m, &report, &[]);
    assert_eq!(code, 0, "cmake-flags --from exited {code}: {stderr}");
    assert_contains(&stdout, "-DGGML_CUDA_NO_VMM=ON");
    assert!(!stdout.contains("-DGGML_CUDA_NO_VMM=OFF"), "{stdout}");
}

/// `cmake-flags` refused (exit 1), said why on stderr, and printed no flags.
fn assert_refused((code, stdout, stderr): (i32, String, String), why: &str) {
    assert_eq!(
        code, 1,
        "cmake-flags must refuse\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_contains(&stderr, "gpuprobe: refused: ");
    assert_contains(&stderr, why);
    assert!(
        !stdout.contains("-D"),
        "no flags on a refused plan: {stdout}"
    );
}

fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // A zombie has ended; only its parent's bookkeeping remains.
        Ok(stat) => {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                == Some("Z")
        }
    }
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn wait_for_pidfile(p: &Path, limit: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            start.elapsed() < limit,
            "the fake driver never reached the hanging call ({})",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A minimal llama.cpp source tree that declares the CUDA options the peer tests need, so they
/// do not depend on which options the bundled table lists.
fn fake_llama_tree(root: &Path) -> PathBuf {
    let dir = root.join("llama.cpp");
    std::fs::create_dir_all(dir.join("ggml")).unwrap();
    std::fs::write(
        dir.join("CMakeLists.txt"),
        "project(\"llama.cpp\" C CXX)\nadd_subdirectory(ggml)\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("ggml/CMakeLists.txt"),
        "option(GGML_CUDA \"ggml: use CUDA\" OFF)\n\
         option(GGML_CUDA_NO_VMM \"ggml: do not try to use CUDA VMM\" OFF)\n\
         option(GGML_CUDA_NO_PEER_COPY \"ggml: do not use peer to peer copies\" OFF)\n\
         option(GGML_NATIVE \"ggml: optimize the build for the current system\" ON)\n",
    )
    .unwrap();
    dir
}

// ---- the fake healthy device -------------------------------------------------------------

#[test]
fn fake_ok_device_passes_and_plans_vmm_on() {
    let m = FakeMachine::new("ok").with_proc_nvidia(OPEN_MODULE, "0000:19:00.0", "Fake GPU");
    let (report, report_text) = m.detect(&["--cycles", MIN_CYCLES, "--timeout", "120"]);
    let b = cuda_backend(&report);
    assert_eq!(b["status"], "ok", "{b:#}");
    assert_eq!(b["runtime_version"], "12.8");
    // Read from the injected root, not the real /proc.
    assert_eq!(b["driver_version"], "580.95.05");

    assert_eq!(devices(&report).len(), 1, "{report:#}");
    let d = &devices(&report)[0];
    assert_eq!(d["index"], 0);
    assert_eq!(d["vendor"], "nvidia");
    assert_eq!(d["name"], "Fake GPU");
    assert_eq!(d["arch"], "sm_90");
    assert_eq!(d["compute_capability"], "9.0");
    assert_eq!(d["vram_total_bytes"], 80u64 << 30);
    assert_eq!(d["vram_free_bytes"], FREE_MIB << 20);
    assert_eq!(d["pci_bus_id"], "0000:19:00.0");
    assert_eq!(d["integrated"], false);
    assert_eq!(d["wave_size"], 32);
    assert_eq!(d["vmm_supported"], true);
    assert_eq!(d["granularity_min"], CHUNK);
    assert_eq!(d["granularity_recommended"], CHUNK);
    assert_eq!(d["source"], "driver");
    assert_eq!(d["driver_version"], "580.95.05");

    let s = &d["smoke"];
    assert_eq!(s["outcome"], "pass", "{s:#}");
    assert_eq!(s["stage"], Value::Null);
    assert_eq!(s["error"], Value::Null);
    assert_eq!(s["cycles_done"], 200);
    assert_eq!(s["cycles"], 200);
    // 3 pools x (first, smaller, larger growth) every cycle.
    assert_eq!(s["chunks_per_cycle"], 9);
    assert_eq!(s["chunk_bytes"], CHUNK);
    assert_eq!(s["reserve_bytes"], RESERVE);
    assert_eq!(s["mismatches"], 0);
    let g = &s["growth"];
    assert_eq!(g["min_cycles"], 200);
    assert_eq!(g["pools"], 3);
    assert_eq!(g["smallest_chunk_bytes"], CHUNK);
    // At 2 MiB granularity the first growths are 6 MiB, then 2 and 10 MiB.
    assert!(
        g["largest_chunk_bytes"].as_u64().unwrap() > 10 << 20,
        "{g:#}"
    );
    // Small fake VRAM: the long phase grows past a quarter of free VRAM, not 1 GiB.
    let target = s["vram_free_before"].as_u64().unwrap() / 4;
    assert!(
        target <= (FREE_MIB << 20) / 4 && target > (FREE_MIB << 20) / 5,
        "{s:#}"
    );
    assert_eq!(g["long_target_bytes"], target);
    assert!(g["largest_pool_bytes"].as_u64().unwrap() > target, "{g:#}");
    assert!(g["host_checked_bytes"].as_u64().unwrap() >= target, "{g:#}");
    // What the fake allocated came back.
    assert_eq!(s["vram_free_before"], s["vram_free_after"], "{s:#}");
    assert_contains(text(&s["reason"]), "200 cycles of 3 pools");
    assert_eq!(report["peers"], serde_json::json!([]));
    let t = &d["timings"];
    for k in [
        "start_ms",
        "driver_init_ms",
        "context_ms",
        "queries_ms",
        "smoke_ms",
        "wall_ms",
    ] {
        assert!(t[k].as_f64().is_some(), "timing {k} missing: {t:#}");
    }

    let saved = save_report(&m, &report_text);
    let (code, stdout, stderr) = args_from_report(&m, &saved, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_contains(&stdout, "-DGGML_CUDA=ON");
    assert_contains(&stdout, "-DCMAKE_CUDA_ARCHITECTURES=90");
    assert_contains(&stdout, "-DGGML_CUDA_NO_VMM=OFF");
    assert!(!stdout.contains("NO_VMM=ON"), "{stdout}");
    let (code, stdout, _) = m.run(&[
        "cmake-flags",
        "--from",
        saved.to_str().unwrap(),
        "--format",
        "json",
        "--toolchain",
        "none",
        "--cuda",
        "12.8",
    ]);
    assert_eq!(code, 0);
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    let f = flag(&plan, "GGML_CUDA_NO_VMM").expect("GGML_CUDA_NO_VMM planned");
    assert_eq!(f["value"], "OFF", "{plan:#}");
    assert_contains(text(&f["reason"]), "smoke test passed");
}

#[test]
fn too_few_cycles_are_partial_and_lift_nothing() {
    let m = FakeMachine::new("ok");
    let (report, report_text) = m.detect(FAST);
    let s = smoke(&report, 0);
    assert_eq!(s["outcome"], "partial", "{s:#}");
    assert_eq!(s["cycles_done"], 3);
    assert_eq!(s["error"], Value::Null);
    assert_contains(text(&s["reason"]), "only 3 of the 200 cycles");
    // Nothing was seen wrong, so CUDA keeps llama.cpp's default (VMM on), but not because of a pass.
    let (code, stdout, stderr) = args_from_report(&m, &save_report(&m, &report_text), &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stdout.contains("NO_VMM=ON"), "{stdout}");
    let plan = plan_probing(&m, &[]);
    if let Some(f) = flag(&plan, "GGML_CUDA_NO_VMM") {
        assert!(!text(&f["reason"]).contains("smoke test passed"), "{f:#}");
    }
}

#[test]
fn driver_version_from_either_kernel_module_flavour() {
    for (line, version) in [
        (OPEN_MODULE, "580.95.05"),
        (PROPRIETARY_MODULE, "550.163.01"),
    ] {
        let m = FakeMachine::new("ok").with_proc_nvidia(line, "0000:19:00.0", "Fake GPU");
        let (report, _) = m.detect(&["--no-smoke", "--timeout", "20"]);
        assert_eq!(
            cuda_backend(&report)["driver_version"],
            version,
            "from {line:?}"
        );
        assert_eq!(devices(&report)[0]["driver_version"], version);
        assert_eq!(smoke(&report, 0)["outcome"], "not-run");
        assert_eq!(smoke(&report, 0)["reason"], "skipped (--no-smoke)");
    }
}

// ---- measured failures ---------------------------------------------------------------------

#[test]
fn offset_set_access_failure_is_recorded_with_the_workaround_verdict() {
    let m = FakeMachine::new("offset_access_fails");
    let (report, report_text) = m.detect(FAST);
    let s = smoke(&report, 0);
    assert_eq!(s["outcome"], "fail", "{s:#}");
    assert_eq!(s["stage"], "set_access");
    assert_eq!(s["error"]["api"], "cuMemSetAccess");
    assert_eq!(s["error"]["code"], 1);
    assert_eq!(s["error"]["name"], "CUDA_ERROR_INVALID_VALUE");
    assert_eq!(s["error"]["message"], "invalid argument");
    assert_eq!(s["whole_range_access_helped"], true);
    assert_eq!(s["cycles_done"], 0);
    assert_eq!(s["mismatches"], 0);
    // Pools 0, 1 and 2 take their first chunk at the base; pool 0's second growth is at an offset.
    assert_eq!(s["growth"]["failed_cycle"], 0);
    assert_eq!(s["growth"]["failed_pool"], 0);
    assert_eq!(s["growth"]["failed_growth"], 3);
    assert_contains(
        text(&s["reason"]),
        "access over the whole mapped range worked",
    );
    assert_eq!(devices(&report)[0]["vmm_supported"], true);

    assert_vmm_denied(
        &m,
        &report_text,
        &[
            "fail at stage set_access",
            "cuMemSetAccess returned CUDA_ERROR_INVALID_VALUE (1)",
        ],
    );
}

#[test]
fn fresh_mappings_reading_zeros_are_counted() {
    let m = FakeMachine::new("reads_zeros");
    let (report, report_text) = m.detect(FAST);
    let s = smoke(&report, 0);
    assert_eq!(s["outcome"], "fail", "{s:#}");
    assert_eq!(s["stage"], "verify");
    // Pool 0's second chunk (2 MiB at offset 6 MiB at 2 MiB granularity) reads zeros, every word.
    let (offset, bytes) = (6u64 << 20, 2u64 << 20);
    assert_eq!(s["mismatches"], bytes / 4);
    assert_eq!(s["first_bad_offset"], offset);
    assert_eq!(s["first_bad_value"], 0);
    assert_eq!(s["expected_value"], pattern(offset / 4, seed(0, 0)));
    assert_eq!(s["error"]["api"], "gpuprobe_verify");
    assert_eq!(s["error"]["name"], "MISMATCH");
    assert_eq!(s["cycles_done"], 0);
    assert_eq!(s["growth"]["bad_check"], "gpu");
    assert_eq!(s["growth"]["failed_pool"], 0);
    assert_eq!(s["growth"]["failed_growth"], 3);
    assert_contains(text(&s["reason"]), "freshly mapped memory reads zeros");

    assert_vmm_denied(
        &m,
        &report_text,
        &["fail at stage verify", "524288 mismatched words"],
    );
}

#[test]
fn refused_32_gib_reservation_is_stage_reserve() {
    let m = FakeMachine::new("reserve_fails");
    let (report, report_text) = m.detect(FAST);
    let s = smoke(&report, 0);
    assert_eq!(s["outcome"], "fail", "{s:#}");
    assert_eq!(s["stage"], "reserve");
    assert_eq!(s["error"]["api"], "cuMemAddressReserve");
    assert_eq!(s["error"]["code"], 2);
    assert_eq!(s["error"]["name"], "CUDA_ERROR_OUT_OF_MEMORY");
    assert_eq!(s["error"]["message"], "out of memory");
    assert_eq!(s["reserve_bytes"], RESERVE);
    assert_eq!(s["cycles_done"], 0);
    assert_contains(text(&s["reason"]), "32 GiB");

    assert_vmm_denied(
        &m,
        &report_text,
        &["fail at stage reserve", "CUDA_ERROR_OUT_OF_MEMORY"],
    );
    let plan = plan_probing(&m, &[]);
    let q = &flag(&plan, "GGML_CUDA_NO_VMM").unwrap()["quirks"];
    assert!(
        q.as_array().is_some_and(|q| q.iter().any(|q| q == "Q15")),
        "Q15 expected: {q}"
    );
}

// ---- crashes, hangs, bad output --------------------------------------------------------------

fn crash_at_init(scenario: &str, signal: i32, name: &str) {
    // No /proc entries: the crash is recorded on the backend, nothing is invented.
    let bare = FakeMachine::new(scenario);
    let (report, _) = bare.detect(FAST);
    let b = cuda_backend(&report);
    assert_eq!(b["status"], "error", "{b:#}");
    let detail = text(&b["detail"]);
    assert_contains(detail, &format!("{name} ({signal})"));
    assert_contains(detail, "before the first stage");
    assert_eq!(devices(&report).len(), 0);

    // With the kernel module's /proc entries, the device is known and carries the verdict.
    let m = FakeMachine::new(scenario).with_proc_nvidia(
        OPEN_MODULE,
        "0000:19:00.0",
        "Fake GPU (from /proc)",
    );
    let (report, report_text) = m.detect(FAST);
    let d = &devices(&report)[0];
    assert_eq!(d["name"], "Fake GPU (from /proc)");
    assert_eq!(d["source"], "procfs");
    assert_eq!(d["pci_bus_id"], "0000:19:00.0");
    assert_eq!(d["smoke"]["outcome"], "crash", "{d:#}");
    assert_eq!(d["smoke"]["signal"], signal);
    assert_eq!(d["smoke"]["stage"], Value::Null);

    let why = format!("crashes at driver initialisation (signal {signal})");
    let mut args = vec!["cmake-flags", "--format", "args", "--backend", "cuda"];
    args.extend_from_slice(FAST);
    args.extend_from_slice(PLAN);
    assert_refused(m.run(&args), &why);
    assert_refused(
        args_from_report(&m, &save_report(&m, &report_text), &[]),
        &why,
    );
}

#[test]
fn segfault_at_init_is_a_crash_and_refuses_a_plan() {
    crash_at_init("init_segv", 11, "SIGSEGV");
}

#[test]
fn abort_at_init_is_a_crash_and_refuses_a_plan() {
    crash_at_init("init_abort", 6, "SIGABRT");
}

#[test]
fn hang_in_verify_is_killed_at_the_deadline() {
    let m = FakeMachine::new("hang_verify");
    let pidfile = m.root.path().join("hung.pid");
    let m = m.env("FAKE_CUDA_PIDFILE", pidfile.to_str().unwrap());
    let started = Instant::now();
    let (report, report_text) = m.detect(&["--cycles", "3", "--timeout", "2"]);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(2),
        "returned before the deadline: {took:?}"
    );
    assert!(
        took < Duration::from_secs(15),
        "the deadline was not enforced: {took:?}"
    );

    let s = smoke(&report, 0);
    assert_eq!(s["outcome"], "hang", "{s:#}");
    // The host waits for the queued kernels at `sync`: that is where a faulted GPU stops answering.
    assert_eq!(s["stage"], "sync");
    let reason = text(&s["reason"]);
    assert_contains(reason, "no result within 2 s");
    assert_contains(reason, "sync");
    assert_eq!(devices(&report)[0]["timings"]["smoke_ms"], Value::Null);
    // Device facts came before the hang and are kept.
    assert_eq!(devices(&report)[0]["name"], "Fake GPU");
    assert_eq!(devices(&report)[0]["arch"], "sm_90");

    let pid = wait_for_pidfile(&pidfile, Duration::from_secs(1));
    assert!(
        process_gone(pid),
        "the hung probe child {pid} outlived gpuprobe"
    );

    let saved = save_report(&m, &report_text);
    let (code, stdout, stderr) = args_from_report(&m, &saved, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_contains(&stdout, "-DGGML_CUDA_NO_VMM=ON");
    let (code, stdout, _) = m.run(&[
        "cmake-flags",
        "--from",
        saved.to_str().unwrap(),
        "--format",
        "json",
        "--toolchain",
        "none",
        "--cuda",
        "12.8",
    ]);
    assert_eq!(code, 0);
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    let reason = text(&flag(&plan, "GGML_CUDA_NO_VMM").unwrap()["reason"]);
    assert_contains(reason, "VMM smoke test hang at stage sync");
}

#[test]
fn killing_gpuprobe_takes_the_hung_child_along() {
    let m = FakeMachine::new("hang_verify");
    let pidfile = m.root.path().join("hung.pid");
    let m = m.env("FAKE_CUDA_PIDFILE", pidfile.to_str().unwrap());
    let mut cmd = m.std_command(&[
        "detect",
        "--json",
        "--backend",
        "cuda",
        "--cycles",
        "3",
        "--timeout",
        "120",
    ]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut gpuprobe = cmd.spawn().expect("start gpuprobe");
    let child = wait_for_pidfile(&pidfile, Duration::from_secs(20));
    assert_eq!(
        parent_of(child),
        Some(gpuprobe.id() as i32),
        "the hung process is gpuprobe's probe child"
    );
    assert!(!process_gone(child));

    gpuprobe.kill().expect("SIGKILL gpuprobe"); // SIGKILL: no cleanup code of gpuprobe runs
    gpuprobe.wait().unwrap();
    let start = Instant::now();
    while !process_gone(child) {
        if start.elapsed() > Duration::from_secs(5) {
            // Do not leave it hanging around after the failure.
            // SAFETY: plain syscall on a pid we checked is gpuprobe's (now orphaned) child.
            unsafe { libc::kill(child, libc::SIGKILL) };
            panic!("probe child {child} survived gpuprobe's SIGKILL");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn garbage_line_before_a_complete_report_is_ignored() {
    let m = FakeMachine::new("garbage");
    let (report, _) = m.detect(FAST);
    assert_eq!(cuda_backend(&report)["status"], "ok");
    let d = &devices(&report)[0];
    assert_eq!(d["name"], "Fake GPU");
    assert_eq!(d["smoke"]["outcome"], "partial", "{d:#}");
    assert_eq!(d["smoke"]["cycles_done"], 3);
}

#[test]
fn garbage_instead_of_a_report_is_bad_output() {
    let bare = FakeMachine::new("garbage_exit");
    let (report, _) = bare.detect(FAST);
    let b = cuda_backend(&report);
    assert_eq!(b["status"], "error", "{b:#}");
    assert_contains(text(&b["detail"]), "not the probe protocol");
    assert_contains(text(&b["detail"]), "NVRM: oops");

    let m =
        FakeMachine::new("garbage_exit").with_proc_nvidia(OPEN_MODULE, "0000:19:00.0", "Fake GPU");
    let (report, report_text) = m.detect(FAST);
    let d = &devices(&report)[0];
    assert_eq!(d["source"], "procfs");
    assert_eq!(d["arch"], "unknown");
    assert_eq!(d["smoke"]["outcome"], "bad-output", "{d:#}");
    assert_contains(text(&d["smoke"]["reason"]), "NVRM: oops");
    // No architecture was measured: no plan, rather than CMAKE_CUDA_ARCHITECTURES=unknown.
    assert_refused(
        args_from_report(&m, &save_report(&m, &report_text), &[]),
        "architecture could not be measured",
    );
}

#[test]
fn hang_before_hello_is_killed_and_blocks_a_plan() {
    let m = FakeMachine::new("init_hang").with_proc_nvidia(OPEN_MODULE, "0000:19:00.0", "Fake GPU");
    let pidfile = m.root.path().join("hung.pid");
    let m = m.env("FAKE_CUDA_PIDFILE", pidfile.to_str().unwrap());
    let (report, report_text) = m.detect(&["--cycles", "3", "--timeout", "2"]);
    let b = cuda_backend(&report);
    // Killed at the deadline: `hang`, not `error`, with the stage it was in.
    assert_eq!(b["status"], "hang", "{b:#}");
    assert_contains(
        text(&b["detail"]),
        "killed at the deadline during driver_init",
    );
    assert_contains(
        text(&b["detail"]),
        "no result within 2 s before the first stage",
    );
    let run = &report["probe_run"]["backends"][0];
    assert_eq!(run["backend"], "cuda");
    assert_eq!(run["last_stage"], "driver_init", "{run:#}");
    let s = smoke(&report, 0);
    assert_eq!(s["outcome"], "hang", "{s:#}");
    assert_eq!(s["stage"], Value::Null);
    let pid = wait_for_pidfile(&pidfile, Duration::from_secs(1));
    assert!(
        process_gone(pid),
        "the hung probe child {pid} outlived gpuprobe"
    );
    assert_refused(
        args_from_report(&m, &save_report(&m, &report_text), &[]),
        "architecture could not be measured",
    );
}

#[test]
fn report_cut_short_is_bad_output_at_the_last_stage() {
    let m = FakeMachine::new("partial");
    let (report, report_text) = m.detect(FAST);
    let s = smoke(&report, 0);
    assert_eq!(s["outcome"], "bad-output", "{s:#}");
    assert_eq!(s["stage"], "map");
    let reason = text(&s["reason"]);
    assert_contains(reason, "exit code 0");
    assert_contains(reason, "no complete report");
    assert_eq!(devices(&report)[0]["name"], "Fake GPU");

    assert_vmm_denied(
        &m,
        &report_text,
        &["VMM smoke test bad-output at stage map"],
    );
}

// ---- no usable driver ------------------------------------------------------------------------

#[test]
fn no_device_is_a_backend_status_not_an_error() {
    let m = FakeMachine::new("no_device");
    let (report, _) = m.detect(FAST);
    let b = cuda_backend(&report);
    assert_eq!(b["status"], "no-device", "{b:#}");
    assert_contains(
        text(&b["detail"]),
        "cuInit returned CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected",
    );
    assert_contains(text(&b["hint"]), "no NVIDIA GPU is visible");
    assert_eq!(devices(&report).len(), 0);

    let (code, stdout, _) = m.run(&["detect", "--backend", "cuda"]);
    assert_eq!(code, 0);
    assert_contains(&stdout, "No GPU found on this machine.");
    assert_contains(&stdout, "no-device");

    let (code, _, stderr) = m.run(&["detect", "--json", "--backend", "cuda", "--require-gpu"]);
    assert_eq!(code, 3, "{stderr}");
    assert_contains(&stderr, "--require-gpu");
}

#[test]
fn stub_library_says_install_the_driver() {
    let m = FakeMachine::new("stub");
    let (report, _) = m.detect(FAST);
    let b = cuda_backend(&report);
    assert_eq!(b["status"], "no-driver", "{b:#}");
    assert_contains(
        text(&b["detail"]),
        "CUDA_ERROR_STUB_LIBRARY (34): CUDA driver is a stub library",
    );
    assert_contains(text(&b["hint"]), "stub");
    assert_eq!(devices(&report).len(), 0);

    let (code, _, _) = m.run(&["detect", "--json", "--backend", "cuda", "--require-gpu"]);
    assert_eq!(code, 3);
    let mut args = vec!["cmake-flags", "--backend", "cuda"];
    args.extend_from_slice(FAST);
    args.extend_from_slice(PLAN);
    let (code, _, stderr) = m.run(&args);
    assert_eq!(code, 3, "{stderr}");
    assert_contains(&stderr, "no GPU found to plan for");
}

#[test]
fn missing_library_is_no_driver() {
    let m = FakeMachine::new("ok");
    let missing = m.root.path().join("nowhere/libcuda.so.1");
    let m = m.lib_path(missing);
    let (report, _) = m.detect(FAST);
    let b = cuda_backend(&report);
    assert_eq!(b["status"], "no-driver", "{b:#}");
    assert_contains(text(&b["detail"]), "LIBRARY_NOT_FOUND");
    // dlerror's text already names the file: the message names it once, hint included.
    let named = format!("{} {}", text(&b["detail"]), text(&b["hint"]));
    assert_eq!(named.matches("libcuda.so").count(), 1, "{named}");
    assert_contains(text(&b["hint"]), "install the NVIDIA driver");
    assert_eq!(devices(&report).len(), 0);
}

#[test]
fn old_driver_without_vmm_entry_points_degrades() {
    let m = FakeMachine::new("ok").old_driver();
    let (code, stdout, stderr) = m.run(&[
        "detect",
        "--json",
        "--backend",
        "cuda",
        "--cycles",
        "3",
        "--timeout",
        "20",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let d = &devices(&report)[0];
    assert_eq!(d["name"], "Fake GPU");
    assert_eq!(d["arch"], "sm_90");
    assert_eq!(d["vmm_supported"], true);
    assert_eq!(d["granularity_recommended"], CHUNK);
    let s = &d["smoke"];
    assert_eq!(s["outcome"], "fail", "{s:#}");
    // llama.cpp creates the first chunk before it reserves the range: the first call missing.
    assert_eq!(s["stage"], "create");
    assert_eq!(s["error"]["api"], "cuMemCreate");
    assert_eq!(s["error"]["name"], "SYMBOL_NOT_FOUND");
    assert_eq!(s["error"]["code"], -1);
    assert!(
        s["stderr_tail"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| !text(l).contains("panicked")),
        "{s:#}"
    );

    assert_vmm_denied(&m, &stdout, &["SYMBOL_NOT_FOUND"]);

    let (report, _) = m.detect(&["--no-smoke", "--timeout", "20"]);
    assert_eq!(smoke(&report, 0)["outcome"], "not-run");
    assert_eq!(devices(&report)[0]["name"], "Fake GPU");
}

// ---- two devices -----------------------------------------------------------------------------

fn two_devices(peer: &str, corrupt: bool) -> (FakeMachine, Value, String) {
    let mut m = FakeMachine::new("ok")
        .env("FAKE_CUDA_DEVICES", "2")
        .env("FAKE_CUDA_PEER", peer);
    if corrupt {
        m = m.env("FAKE_CUDA_PEER_CORRUPT", "1");
    }
    let (report, text) = m.detect(FAST);
    let ds = devices(&report);
    assert_eq!(ds.len(), 2, "{report:#}");
    assert_eq!(ds[0]["pci_bus_id"], "0000:19:00.0");
    assert_eq!(ds[1]["pci_bus_id"], "0000:1a:00.0");
    assert_eq!(ds[1]["index"], 1);
    for d in ds {
        assert_eq!(d["smoke"]["outcome"], "partial", "{d:#}");
    }
    let peers = report["peers"].as_array().expect("peers");
    assert_eq!(peers.len(), 1, "one pair: {report:#}");
    assert_eq!(peers[0]["from"], 0);
    assert_eq!(peers[0]["to"], 1);
    (m, report, text)
}

fn peer_copy_flag(m: &FakeMachine, report_text: &str) -> (Option<Value>, String) {
    let tree = fake_llama_tree(m.root.path());
    let tree = tree.to_str().unwrap();
    let extra = ["--llama-cpp", tree, "--llama-build", "11434"];
    let plan = plan_probing(m, &extra);
    let f = flag(&plan, "GGML_CUDA_NO_PEER_COPY").cloned();
    let (code, stdout, stderr) = args_from_report(m, &save_report(m, report_text), &extra);
    assert_eq!(code, 0, "{stderr}");
    (f, stdout)
}

#[test]
fn two_devices_with_peer_access_copy_correctly() {
    let (m, report, report_text) = two_devices("yes", false);
    let p = &report["peers"][0];
    assert_eq!(p["can_access"], true);
    assert_eq!(p["copy_ok"], true);
    assert_eq!(p["mismatches"], 0);
    assert_eq!(p["outcome"], "pass");
    // Each device's VMM pool, with access granted to the other, was read correctly from it.
    let run = &report["probe_run"]["backends"][0];
    let peer = &run["peer"];
    let vmm = &peer["pairs"][0];
    assert_eq!(vmm["from"], 0);
    assert_eq!(vmm["to"], 1);
    assert_eq!(vmm["reverse_can_access"], true);
    assert_eq!(vmm["read_ok"], true, "{peer:#}");
    assert_eq!(vmm["mismatches"], 0);
    // In the shared child, once both devices were done, on the contexts they already had (the
    // peer child of `--isolate` is tests/orchestration.rs's).
    let devs = devices(&report);
    let both_done = devs
        .iter()
        .map(|d| {
            d["timings"]["start_ms"].as_f64().unwrap() + d["timings"]["wall_ms"].as_f64().unwrap()
        })
        .fold(0.0, f64::max);
    let peer_start = peer["start_ms"].as_f64().unwrap();
    assert!(
        peer_start >= both_done - 1.0,
        "peer checks started at {peer_start} ms, before both devices were done ({both_done} ms)"
    );
    assert_eq!(peer["contexts_ms"], Value::Null, "{peer:#}");
    let (f, args) = peer_copy_flag(&m, &report_text);
    assert!(f.is_none(), "no peer-copy flag for a healthy pair: {f:?}");
    assert!(!args.contains("NO_PEER_COPY"), "{args}");
}

#[test]
fn two_devices_without_peer_access_plan_no_peer_copy() {
    let (m, report, report_text) = two_devices("no", false);
    let p = &report["peers"][0];
    assert_eq!(p["can_access"], false);
    assert_eq!(p["copy_ok"], true);
    let (f, args) = peer_copy_flag(&m, &report_text);
    let f = f.expect("GGML_CUDA_NO_PEER_COPY planned");
    assert_eq!(f["value"], "ON");
    assert_eq!(f["quirks"], serde_json::json!(["Q17"]));
    assert_contains(&args, "-DGGML_CUDA_NO_PEER_COPY=ON");
}

#[test]
fn corrupting_peer_copy_is_caught() {
    let (m, report, report_text) = two_devices("yes", true);
    let p = &report["peers"][0];
    assert_eq!(p["can_access"], true);
    assert_eq!(p["copy_ok"], false);
    // One byte flipped per MiB of the 64 MiB copy.
    assert_eq!(p["mismatches"], 64);
    assert_eq!(p["outcome"], "fail");
    assert_contains(text(&p["reason"]), "64 words differ after the peer copy");
    let (f, args) = peer_copy_flag(&m, &report_text);
    assert_eq!(f.expect("GGML_CUDA_NO_PEER_COPY planned")["value"], "ON");
    assert_contains(&args, "-DGGML_CUDA_NO_PEER_COPY=ON");
}
