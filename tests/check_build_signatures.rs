//! check-build's log signatures over REAL log lines: llama.cpp output of several eras and kernel
//! logs (dmesg, journalctl -k), each fixture quoting a public report (its header names the
//! source). Where no public report in reach shows a line (the flush-and-retry debug lines of
//! builds 8863 and later), the test builds it from llama.cpp's own format strings and says so.
//!
//! Levels: a symptom in the input plus confirmed quirk conditions is an error or warning;
//! conditions alone stay a note; a multi-GPU warning needs a run split across GPUs in the input.
//! One plan, one voice: every flag a finding asks for is in the plan's "would build" line.

mod common;

use std::path::{Path, PathBuf};

use gpuprobe::check_build::corpus::Corpus;
use gpuprobe::check_build::signatures::SignatureTable;
use gpuprobe::check_build::{self, CheckReport, Finding, InputInfo, InputKind, Level, Options};
use gpuprobe::plan::Mode;
use gpuprobe::platform::Os;
use gpuprobe::profiles::Knowledge;
use gpuprobe::report::{
    Backend, BackendStatus, Device, DeviceSource, Host, Report, Smoke, SmokeOutcome, SmokeStage,
};
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// helpers

fn fixture_path(dir: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
        .join(name)
}

fn llama(name: &str) -> (String, String) {
    let p = fixture_path("llama-logs", name);
    (
        name.to_string(),
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
}

fn kernel(name: &str) -> (String, String) {
    let p = fixture_path("kernel-logs", name);
    (
        name.to_string(),
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
}

fn text(label: &str, body: &str) -> (String, String) {
    (label.to_string(), body.to_string())
}

fn device(index: u32, backend: Backend, name: &str, arch: &str, smoke: SmokeOutcome) -> Device {
    let mut d = Device::new(index, backend, name, arch, DeviceSource::Driver);
    d.smoke = Smoke::with_outcome(smoke, "test");
    if smoke == SmokeOutcome::Fail {
        d.smoke.stage = Some(SmokeStage::from("set-access"));
    }
    d.vram_total_bytes = Some(32 << 30);
    d.integrated = Some(false);
    d.vmm_supported = Some(true);
    d.granularity_min = Some(4096);
    d.granularity_recommended = Some(2 << 20);
    d
}

fn machine(devices: Vec<Device>, runtime: Option<&str>, os: &str) -> Report {
    let mut r = Report::new(Host {
        os: os.into(),
        kernel: None,
    });
    let mut backends: Vec<Backend> = devices.iter().map(|d| d.backend).collect();
    backends.dedup();
    for b in backends {
        r.backends.push(BackendStatus {
            backend: b,
            status: gpuprobe::report::BackendState::Ok,
            detail: None,
            driver_version: None,
            runtime_version: runtime.map(str::to_string),
            hint: None,
        });
    }
    r.devices = devices;
    r
}

struct Case<'a> {
    inputs: Vec<(String, String)>,
    machine: Option<&'a Report>,
    build: Option<u64>,
    os: Os,
}

impl<'a> Case<'a> {
    fn new(inputs: Vec<(String, String)>) -> Self {
        Case {
            inputs,
            machine: None,
            build: None,
            os: Os::Linux,
        }
    }
    fn on(mut self, m: &'a Report) -> Self {
        self.machine = Some(m);
        self
    }
    fn build(mut self, n: u64) -> Self {
        self.build = Some(n);
        self
    }
    fn os(mut self, os: Os) -> Self {
        self.os = os;
        self
    }
    fn judge(&self) -> CheckReport {
        let k = Knowledge::bundled().expect("bundled knowledge");
        let mut corpus = Corpus::default();
        for (label, body) in &self.inputs {
            corpus.push(label.clone(), body);
        }
        let signatures = SignatureTable::bundled(&k.quirks).expect("bundled signatures");
        let opts = Options {
            knowledge: &k,
            signatures: &signatures,
            binary_dir: None,
            machine: self
                .machine
                .map(|r| check_build::machine_from(r, Mode::Report, "report test.json")),
            llama_build: self.build,
            os: self.os,
            env_set: Vec::new(),
            report_path: self.machine.map(|_| "test.json".to_string()),
        };
        let r = check_build::check_corpus(
            &corpus,
            InputInfo {
                kind: InputKind::Log,
                path: "test".into(),
                runs: vec![],
            },
            vec![],
            &opts,
        );
        assert_one_voice(&r);
        r
    }
}

fn find<'a>(r: &'a CheckReport, id: &str) -> &'a Finding {
    r.findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no finding `{id}` in:\n{}", check_build::render(r)))
}

fn has(r: &CheckReport, id: &str) -> bool {
    r.findings.iter().any(|f| f.id == id)
}

fn quoted(f: &Finding) -> Vec<String> {
    f.evidence
        .iter()
        .map(|q| format!("{}:{}: {}", q.input, q.line, q.text))
        .collect()
}

/// Every `-DNAME=VALUE` a finding asks for (its `flags`, and any written in its fix) is in the
/// "gpuprobe would build" line of the report's plan.
fn assert_one_voice(r: &CheckReport) {
    let lines: Vec<&Vec<String>> = r
        .plan
        .as_ref()
        .map(|p| p.groups.iter().map(|g| &g.cmake_args).collect())
        .unwrap_or_default();
    let in_plan = |flag: &str| lines.iter().any(|l| l.iter().any(|a| a == flag));
    for f in &r.findings {
        for flag in &f.flags {
            assert!(
                in_plan(flag),
                "finding `{}` asks for {flag}, which the plan line does not have:\n{}",
                f.id,
                check_build::render(r)
            );
        }
        let fix = f.fix.as_deref().unwrap_or("");
        // A `;` inside a -D value separates list entries (GPU_TARGETS=gfx1201;gfx1103); one that
        // ends a token separates fixes.
        for token in fix.split([' ', '(', ')', ',']) {
            let token = token.trim_end_matches(';');
            if token.starts_with("-D") && token.contains('=') {
                assert!(
                    in_plan(token),
                    "finding `{}` writes {token} in its fix, which the plan line does not have:\n{}",
                    f.id,
                    check_build::render(r)
                );
            }
        }
    }
}

fn r9700(runtime: &str, smoke: SmokeOutcome) -> Report {
    machine(
        vec![device(
            0,
            Backend::Hip,
            "AMD Radeon AI PRO R9700",
            "gfx1201",
            smoke,
        )],
        Some(runtime),
        "linux",
    )
}

// ---------------------------------------------------------------------------------------------
// the fixtures name their sources

#[test]
fn every_kernel_log_fixture_names_its_source() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel-logs");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let first = std::fs::read_to_string(&p).unwrap();
        let first = first.lines().next().unwrap_or("");
        assert!(
            first.starts_with("# source: https://"),
            "{} must start with `# source: https://...`",
            p.display()
        );
        n += 1;
    }
    assert!(n >= 5);
}

// ---------------------------------------------------------------------------------------------
// the legacy pool's out-of-memory, in three eras

#[test]
fn legacy_pool_oom_2024_wording_is_q2_confirmed() {
    // `CUDA error: out of memory` from a ROCm build, statement with look_ahead_size (< 8863).
    let r = Case::new(vec![llama("ollama-5913-rocm-legacy-oom-2024.txt")]).judge();
    let f = find(&r, "log-legacy-pool-oom");
    assert_eq!(f.level, Level::Error);
    assert_eq!(
        f.quirks,
        ["Q2", "Q2-old-build"],
        "the statement dates the build before 8863"
    );
    let q = quoted(f);
    assert!(
        q[0].starts_with("ollama-5913-rocm-legacy-oom-2024.txt:5: "),
        "{q:?}"
    );
    assert!(q[0].ends_with("CUDA error: out of memory"), "{q:?}");
    assert!(
        q.iter()
            .any(|l| l.contains(":7: ") && l.contains("look_ahead_size")),
        "{q:?}"
    );
    let fix = f.fix.as_deref().unwrap();
    assert!(fix.contains("-ctk f16 -ctv f16"), "{fix}");
    assert_eq!(
        r.build.vmm.compiled,
        Some(false),
        "the OOM proves the legacy pool"
    );
    assert!(!has(&r, "nothing-recognised"));
    assert_eq!(r.summary.exit_code, 1);
}

#[test]
fn legacy_pool_oom_on_two_no_vmm_gpus_of_build_8840() {
    // The case of the issue: a b8840-era server on two AMD GPUs listed `VMM: no` runs out of
    // memory in the legacy pool. Two real inputs given together (`--log a --log b`): the device
    // lines of llama.cpp#22013 (b8821) and the OOM lines of ollama#11713, judged as build 8840.
    let r = Case::new(vec![
        llama("llama-22013-rocm-gfx1201-gfx1103-b8821.txt"),
        llama("ollama-11713-rocm-legacy-oom-2025.txt"),
    ])
    .build(8840)
    .judge();
    let f = find(&r, "log-legacy-pool-oom");
    assert_eq!(
        f.level,
        Level::Error,
        "symptom + conditions: not `may apply`"
    );
    assert!(f.quirks.contains(&"Q2".into()) && f.quirks.contains(&"Q2-old-build".into()));
    assert_eq!(
        f.devices,
        ["ROCm0 AMD Radeon RX 9070"],
        "`current device: 0`"
    );
    let fix = f.fix.as_deref().unwrap();
    assert!(fix.contains("build 8863 or later"), "{fix}");
    assert!(fix.contains("this is build 8840"), "{fix}");
    // The quirks it confirms are not repeated as notes.
    assert!(
        !has(&r, "quirk-Q2") && !has(&r, "quirk-Q2-old-build"),
        "{}",
        check_build::render(&r)
    );
    // Each input is quoted with its own name and line numbers.
    let q = quoted(f);
    assert!(
        q[0].starts_with("ollama-11713-rocm-legacy-oom-2025.txt:4: "),
        "{q:?}"
    );
    // The kernel's own lines in that log are not GPU page faults.
    assert!(!has(&r, "log-amdgpu-page-fault"));
}

/// Lines in the format of build 11434's ggml-cuda.cu (GGML_LOG_DEBUG at line 493, ggml_cuda_error
/// at lines 105-107, behind llama-server's log prefix): no public report in reach quotes the
/// flush-and-retry debug lines, so these are built from the format strings, not copied.
const AFTER_FLUSH: &str = "0.41.127.001 D ROCm pool[0]: alloc of 2304.00 MiB failed, flushing 9216.00 MiB of cached buffers and retrying
0.41.131.420 E ROCm error: out of memory
0.41.131.421 E   current device: 0, in function alloc at /src/ggml/src/ggml-cuda/ggml-cuda.cu:502
0.41.131.421 E   err
";

#[test]
fn legacy_pool_oom_after_the_flush_and_retry_of_8863_and_later() {
    let r = Case::new(vec![
        llama("lemonade-87-r9700-no-vmm.txt"),
        text("server.log", AFTER_FLUSH),
    ])
    .judge();
    let f = find(&r, "log-legacy-pool-oom-after-flush");
    assert_eq!(f.level, Level::Error);
    assert_eq!(
        f.quirks,
        ["Q2"],
        "the flush line proves 8863 or later: not Q2-old-build"
    );
    let q = quoted(f);
    assert!(
        q[0].contains("flushing 9216.00 MiB of cached buffers"),
        "the flush is quoted first: {q:?}"
    );
    assert!(
        q.iter()
            .any(|l| l.starts_with("server.log:4: ") && l.ends_with("  err")),
        "{q:?}"
    );
    // The same without the debug line (no -lv 4): still the legacy pool after a retry.
    let quiet: String = AFTER_FLUSH
        .lines()
        .skip(1)
        .map(|l| format!("{l}\n"))
        .collect();
    let r = Case::new(vec![text("server.log", &quiet)]).judge();
    let f = find(&r, "log-legacy-pool-oom-after-flush");
    assert!(f.level >= Level::Warning);
    assert!(f.quirks.contains(&"Q2".into()));
}

#[test]
fn an_err_statement_outside_the_pool_is_not_a_pool_oom() {
    // ollama#11123: `err` in ggml_cuda_compute_forward (invalid device function).
    let r = Case::new(vec![llama("ollama-11123-rocm-invalid-device-function.txt")]).judge();
    assert!(!has(&r, "log-legacy-pool-oom") && !has(&r, "log-legacy-pool-oom-after-flush"));
    // The specific row for the error (the build has no kernel for the device) claims the line.
    let f = find(&r, "log-hip-invalid-device-function");
    assert!(!f.quirks.iter().any(|q| q.starts_with("Q2")));
    assert!(quoted(f)[0].contains("invalid device function"));
}

// ---------------------------------------------------------------------------------------------
// VMM pool failures

#[test]
fn vmm_reservation_failure_on_windows() {
    let log = llama("node-llama-cpp-580-windows-vmm-reserve.txt");
    // From the log alone the GPU's vendor is not named (`CUDA error` was printed by ROCm builds
    // too): Q15-windows is the likely cause, and it is an error either way (the process aborted).
    let r = Case::new(vec![log.clone()]).os(Os::Windows).judge();
    let f = find(&r, "log-vmm-reserve-failed");
    assert_eq!(f.level, Level::Error);
    assert!(
        f.title.contains("likely") && f.title.contains("Q15-windows"),
        "{}",
        f.title
    );
    assert_eq!(r.build.vmm.compiled, Some(true));
    // On the Windows machine with its RTX 3090 probed: confirmed, and the fix is the plan's
    // line without the VMM pool.
    let mut gpu = device(
        0,
        Backend::Cuda,
        "NVIDIA GeForce RTX 3090",
        "sm_86",
        SmokeOutcome::Fail,
    );
    gpu.smoke.stage = Some(SmokeStage::Reserve);
    let m = machine(vec![gpu], None, "windows");
    let r = Case::new(vec![log]).os(Os::Windows).on(&m).judge();
    let f = find(&r, "log-vmm-reserve-failed");
    assert_eq!(f.level, Level::Error);
    assert!(f.quirks.contains(&"Q15-windows".into()), "{:?}", f.quirks);
    assert_eq!(f.flags, ["-DGGML_CUDA_NO_VMM=ON"], "{:?}", f.fix);
}

#[test]
fn hip_vmm_invalid_argument_is_q3() {
    let log = llama("llama-26054-hipvmm-invalid-argument.txt");
    // With the machine measured (ROCm 7.2.4, the offset set-access smoke stage failed): Q3
    // confirmed; the plan keeps the legacy pool and the fix is its line.
    let m = r9700("7.2.4", SmokeOutcome::Fail);
    let r = Case::new(vec![log.clone()]).on(&m).judge();
    let f = find(&r, "log-hip-vmm-invalid-argument");
    assert_eq!(f.level, Level::Error);
    assert_eq!(f.quirks, ["Q3"]);
    assert_eq!(f.flags, ["-DGGML_HIP_NO_VMM=ON"]);
    assert!(quoted(f)[0].ends_with("HipVMM Failure: invalid argument"));
    // The same log alone: Q3 is likely (the ROCm version is unknown), still an error.
    let r = Case::new(vec![log]).judge();
    let f = find(&r, "log-hip-vmm-invalid-argument");
    assert_eq!(f.level, Level::Error);
    assert!(f.title.contains("likely Q3"), "{}", f.title);
    assert!(f.reason.contains("runtime unknown"), "{}", f.reason);
}

#[test]
fn other_hip_vmm_failures_are_errors_without_a_quirk() {
    let r = Case::new(vec![llama("koboldcpp-rocm-105-hipvmm-oom.txt")]).judge();
    let f = find(&r, "log-hip-vmm-failure");
    assert_eq!(f.level, Level::Error);
    assert!(f.quirks.is_empty());
    assert!(f.fix.as_deref().unwrap().contains("GGML_HIP_NO_VMM=ON"));
}

#[test]
fn vmm_set_access_and_map_failures_in_the_cuda_wording() {
    // The CU_CHECK format of build 11434 (ggml_cuda_error, lines 105-107; the statements of
    // ggml_cuda_pool_vmm::alloc at lines 592 and 642): no public report in reach quotes these two.
    let set_access = "CUDA error: resource not ready\n  current device: 0, in function alloc at ggml/src/ggml-cuda/ggml-cuda.cu:642\n  cuMemSetAccess(start_ptr, reserve_size, &access, 1)\n";
    let r = Case::new(vec![text("a.log", set_access)]).judge();
    assert_eq!(find(&r, "log-vmm-set-access-failed").level, Level::Error);
    let map = "CUDA error: invalid argument\n  current device: 1, in function alloc at ggml/src/ggml-cuda/ggml-cuda.cu:592\n  cuMemMap(start_ptr, reserve_size, 0, handle, 0)\n";
    let r = Case::new(vec![text("b.log", map)]).judge();
    assert_eq!(find(&r, "log-vmm-map-failed").level, Level::Error);
}

// ---------------------------------------------------------------------------------------------
// faults: the HSA line and the kernel's

#[test]
fn hsa_fault_in_a_build_before_hip_graphs_is_not_q6() {
    // llama.cpp#12238's devices and build (b4819, gfx906, VMM: no) with an HSA fault line
    // (ollama#8851's): graphs were not on by default before 8893, so not Q6.
    let r = Case::new(vec![
        llama("llama-12238-gfx906-b4819-devices.txt"),
        llama("ollama-8851-hsa-memory-access-fault.txt"),
    ])
    .judge();
    let f = find(&r, "log-hsa-memory-access-fault");
    assert_eq!(f.level, Level::Warning);
    assert!(f.quirks.is_empty(), "{:?}", f.quirks);
    assert!(f.reason.contains("do not hold"), "{}", f.reason);
}

#[test]
fn graph_replay_fault_after_a_pool_flush_is_q6_confirmed() {
    // llama.cpp#26738's version lines (b10301, gfx900), the pool's flush line (format of
    // build 11434, see AFTER_FLUSH), then the HSA fault line (ollama#8851's).
    let flush = text(
        "bench.log",
        "ROCm pool[0]: alloc of 412.50 MiB failed, flushing 1630.25 MiB of cached buffers and retrying\nROCm pool[0]: retry succeeded\n",
    );
    let fault = llama("ollama-8851-hsa-memory-access-fault.txt");
    let mut joined = flush.1.clone();
    joined.push_str(&fault.1);
    let r = Case::new(vec![
        llama("llama-26738-gfx900-b10301-version.txt"),
        text("bench.log", &joined),
    ])
    .judge();
    let f = find(&r, "log-hsa-memory-access-fault");
    assert_eq!(f.level, Level::Error, "{}", check_build::render(&r));
    assert_eq!(f.quirks, ["Q6"]);
    assert_eq!(f.env, ["GGML_CUDA_DISABLE_GRAPHS=1"]);
    assert!(
        f.fix
            .as_deref()
            .unwrap()
            .contains("export GGML_CUDA_DISABLE_GRAPHS=1")
    );
    let q = quoted(f);
    assert!(
        q[0].starts_with("bench.log:1: ") && q[0].contains("flushing"),
        "{q:?}"
    );
    assert!(
        q.iter()
            .any(|l| l.contains("Memory access fault by GPU node-1")),
        "{q:?}"
    );
    // Without the flush line (no debug log) and no word on the pool: Q6 is possible, a warning.
    let r = Case::new(vec![
        llama("llama-26738-gfx900-b10301-version.txt"),
        llama("ollama-8851-hsa-memory-access-fault.txt"),
    ])
    .judge();
    let f = find(&r, "log-hsa-memory-access-fault");
    assert_eq!(f.level, Level::Warning);
    assert!(f.title.contains("likely Q6"), "{}", f.title);
}

#[test]
fn amdgpu_faults_are_decoded_from_an_old_kernel() {
    let r = Case::new(vec![kernel("tensorflow-998-gfxhub0-dmesg.txt")]).judge();
    let f = find(&r, "log-amdgpu-page-fault");
    assert!(f.reason.contains("2 times"), "{}", f.reason);
    assert!(
        f.reason.contains(
            "status 0x00841051: permission fault (PERMISSION_FAULTS 0x5, no MAPPING_ERROR)"
        ),
        "{}",
        f.reason
    );
    assert!(f.reason.contains("a write by client 0x8"), "{}", f.reason);
    assert!(
        f.reason.contains("2 consecutive 4 KiB pages"),
        "{}",
        f.reason
    );
    // Nothing says which pool the build used: the causes are only possible.
    assert_eq!(f.level, Level::Warning);
    let q = quoted(f);
    assert!(
        q[0].starts_with("tensorflow-998-gfxhub0-dmesg.txt:10: "),
        "the decoded block: {q:?}"
    );
    assert!(
        q.iter()
            .any(|l| l.contains("VM_L2_PROTECTION_FAULT_STATUS:0x00841051"))
    );
}

#[test]
fn a_mapping_error_on_rdna4_with_the_newer_format() {
    let r = Case::new(vec![kernel("getsolus-7986-rdna4-gfxhub-dmesg.txt")]).judge();
    let f = find(&r, "log-amdgpu-page-fault");
    assert!(
        f.reason.contains("mapping error (MAPPING_ERROR 1)"),
        "{}",
        f.reason
    );
    assert!(
        f.reason.contains("a write by client SDMA0 (0xd)"),
        "{}",
        f.reason
    );
}

#[test]
fn a_journalctl_capture_with_interleaved_lines() {
    let r = Case::new(vec![kernel("rocm-legacy-5051-journalctl.txt")]).judge();
    let f = find(&r, "log-amdgpu-page-fault");
    assert!(f.reason.contains("kind is unknown"), "{}", f.reason);
    let q = quoted(f);
    assert!(q[0].contains("[gfxhub] page fault"));
    assert!(
        !q.iter().any(|l| l.contains("systemd")),
        "other programs' lines are not quoted: {q:?}"
    );
}

#[test]
fn a_follow_on_fault_with_a_zero_status_is_not_decoded() {
    let r = Case::new(vec![kernel("rocm-amdgpu-168-gfxhub-dmesg.txt")]).judge();
    let f = find(&r, "log-amdgpu-page-fault");
    assert!(f.reason.contains("not latched"), "{}", f.reason);
}

#[test]
fn permission_faults_from_a_vmm_build_on_gfx12_are_q21() {
    // A `VMM: yes` gfx1201 device line in the format a -DGGML_HIP_NO_VMM=OFF build prints
    // (lemonade #87 follow-up; the line is written in that format, not copied), with a real
    // permission-fault block (ROCm/tensorflow-upstream#998's) as the kernel side.
    let dev = text(
        "server.log",
        "ggml_cuda_init: found 1 ROCm devices (Total VRAM: 32624 MiB):\n  Device 0: AMD Radeon AI PRO R9700, gfx1201 (0x1201), VMM: yes, Wave Size: 32, VRAM: 32624 MiB\n",
    );
    let dmesg = kernel("tensorflow-998-gfxhub0-dmesg.txt");
    let r = Case::new(vec![dev.clone(), dmesg.clone()]).judge();
    let f = find(&r, "log-amdgpu-page-fault");
    assert_eq!(
        f.level,
        Level::Error,
        "Q21 covers gfx12 on every runtime: confirmed"
    );
    assert_eq!(f.quirks, ["Q21"], "a VMM build: not Q6");
    // A legacy-pool gfx12 build with the same faults: not Q21.
    let legacy = text(
        "server.log",
        "ggml_cuda_init: found 1 ROCm devices (Total VRAM: 32624 MiB):\n  Device 0: AMD Radeon AI PRO R9700, gfx1201 (0x1201), VMM: no, Wave Size: 32, VRAM: 32624 MiB\nsystem_info: n_threads = 8 | ROCm : NO_VMM = 1 | \n",
    );
    let r = Case::new(vec![legacy, dmesg.clone()]).judge();
    assert!(
        !find(&r, "log-amdgpu-page-fault")
            .quirks
            .contains(&"Q21".to_string())
    );
    // On the reporter's kind of machine (ROCm 7.2, smoke test hung): confirmed.
    let m = r9700("7.2.26015", SmokeOutcome::Hang);
    let r = Case::new(vec![dev, dmesg]).on(&m).judge();
    let f = find(&r, "log-amdgpu-page-fault");
    assert_eq!(f.level, Level::Error);
    // The hipBLASLt out-of-bounds read gives the same permission faults on gfx12 with ROCm 7.2+.
    assert_eq!(f.quirks, ["Q21", "Q34"]);
    assert_eq!(f.flags, ["-DGGML_HIP_NO_VMM=ON"]);
    assert!(
        f.evidence.iter().any(|q| q.text.contains("VMM: yes")),
        "the pool's evidence is quoted"
    );
}

#[test]
fn nvidia_xid_8_is_q16_on_any_driver() {
    // llama.cpp#27102's event: llama-server on an RTX 5090 with driver 610.57.04.
    let log = kernel("llama-27102-nvidia-xid8-journal.txt");
    let mut gpu = device(
        0,
        Backend::Cuda,
        "NVIDIA GeForce RTX 5090",
        "sm_120",
        SmokeOutcome::Pass,
    );
    gpu.driver_version = Some("610.57.04".into());
    let m = machine(vec![gpu], None, "linux");
    let r = Case::new(vec![log.clone()]).on(&m).judge();
    let f = find(&r, "log-nvidia-xid-8");
    assert_eq!(f.level, Level::Error);
    assert_eq!(f.quirks, ["Q16"]);
    // Graphs off is a mitigation named in the warning, not env advice (#27910 hung without graphs).
    assert!(f.env.is_empty(), "{:?}", f.env);
    assert!(quoted(f)[0].contains("NVRM: Xid (PCI:0000:01:00): 8, pid=709378, name=llama-server"));
    // An older driver is claimed too: 595.84 was the first reporter's driver, not where the
    // problem starts (#27910 hung on 591.74).
    let mut gpu = device(
        0,
        Backend::Cuda,
        "NVIDIA GeForce RTX 5090",
        "sm_120",
        SmokeOutcome::Pass,
    );
    gpu.driver_version = Some("580.159.04".into());
    let m = machine(vec![gpu], None, "linux");
    let r = Case::new(vec![log.clone()]).on(&m).judge();
    let f = find(&r, "log-nvidia-xid-8");
    assert_eq!(f.quirks, ["Q16"]);
    assert_eq!(f.level, Level::Error);
    // Alone (no machine): possible.
    let r = Case::new(vec![log]).judge();
    assert!(find(&r, "log-nvidia-xid-8").title.contains("likely Q16"));
}

#[test]
fn other_xids_are_reported_with_the_record_command() {
    let r = Case::new(vec![kernel("llama-27105-nvidia-xid31.txt")]).judge();
    let f = find(&r, "log-nvidia-xid");
    assert!(
        f.fix
            .as_deref()
            .unwrap()
            .contains("gpuprobe quirks record --from")
    );
}

// ---------------------------------------------------------------------------------------------
// conditions alone, evidence only, one voice

#[test]
fn a_no_vmm_build_on_a_vmm_capable_device_quotes_its_evidence() {
    // Q2's seed: a device line `VMM: no` (the H200 legacy-pool build of this repository's own
    // e2e capture) on a device whose probe says VMM is supported and whose smoke test passed.
    let h200 = machine(
        vec![device(
            0,
            Backend::Cuda,
            "NVIDIA H200",
            "sm_90",
            SmokeOutcome::Pass,
        )],
        None,
        "linux",
    );
    let r = Case::new(vec![llama("h200-b11434-legacy-test-backend-ops.txt")])
        .on(&h200)
        .build(11434)
        .judge();
    let f = find(&r, "vmm-compiled-out");
    assert_eq!(f.level, Level::Warning);
    assert_eq!(f.flags, ["-DGGML_CUDA_NO_VMM=OFF"]);
    assert!(
        quoted(f)[0].contains("Device 0: NVIDIA H200, compute capability 9.0, VMM: no"),
        "{:?}",
        quoted(f)
    );
    // Without the machine, `VMM: no` alone cannot tell compiled-out from unsupported: a note.
    let r = Case::new(vec![llama("h200-b11434-legacy-test-backend-ops.txt")])
        .build(11434)
        .judge();
    assert!(
        r.findings.iter().all(|f| f.level == Level::Note),
        "{}",
        check_build::render(&r)
    );
}

#[test]
fn multi_gpu_warning_needs_a_split_run_and_a_covered_architecture() {
    let pair = |name: &str, arch: &str| {
        machine(
            vec![
                device(0, Backend::Hip, name, arch, SmokeOutcome::Pass),
                device(1, Backend::Hip, name, arch, SmokeOutcome::Pass),
            ],
            Some("6.4.1"),
            "windows",
        )
    };
    // Q7 covers RDNA 2 and RDNA 4 pairs on Windows (the reports' OS). Devices listed, no run: a
    // note.
    let rdna2 = pair("AMD Radeon RX 6900 XT", "gfx1030");
    let listing = text(
        "server.log",
        "ggml_cuda_init: found 2 ROCm devices:\n  Device 0: AMD Radeon RX 6900 XT, gfx1030 (0x1030), VMM: no, Wave Size: 32\n  Device 1: AMD Radeon RX 6900 XT, gfx1030 (0x1030), VMM: no, Wave Size: 32\n",
    );
    let r = Case::new(vec![listing.clone()])
        .on(&rdna2)
        .os(Os::Windows)
        .build(10000)
        .judge();
    assert_eq!(find(&r, "quirk-Q7").level, Level::Note);
    // The same with a run split across ROCm0 and ROCm1 (llama.cpp#16725's buffer lines): a
    // warning, and the flag it asks for is in the plan line.
    let r = Case::new(vec![
        listing,
        llama("llama-16725-rocm-split-run-buffers.txt"),
    ])
    .on(&rdna2)
    .os(Os::Windows)
    .build(10000)
    .judge();
    let q7 = find(&r, "quirk-Q7");
    assert_eq!(q7.level, Level::Warning);
    assert_eq!(q7.flags, ["-DGGML_CUDA_NO_PEER_COPY=ON"]);
    assert!(
        quoted(q7)
            .iter()
            .any(|l| l.contains("ROCm1 model buffer size")),
        "{:?}",
        quoted(q7)
    );
    // A split run on RDNA 3 (lemonade #2319's 7900 XTX pair): Q7 does not cover gfx1100, so no
    // peer-copy warning, only the split-mode advice every AMD multi-GPU process gets.
    let rdna3 = pair("AMD Radeon RX 7900 XTX", "gfx1100");
    let r = Case::new(vec![
        llama("lemonade-2319-rocm-7900xtx-device-info.txt"),
        llama("llama-16725-rocm-split-run-buffers.txt"),
    ])
    .on(&rdna3)
    .os(Os::Windows)
    .build(10000)
    .judge();
    assert!(!has(&r, "quirk-Q7"), "{}", check_build::render(&r));
    assert!(has(&r, "quirk-Q7-split"));
    // A split run on NVIDIA GPUs: no AMD quirk.
    let h200s = machine(
        vec![
            device(0, Backend::Cuda, "NVIDIA H200", "sm_90", SmokeOutcome::Pass),
            device(1, Backend::Cuda, "NVIDIA H200", "sm_90", SmokeOutcome::Pass),
        ],
        None,
        "linux",
    );
    let split = text(
        "run.log",
        "load_tensors:        CUDA0 model buffer size = 10788.36 MiB\nload_tensors:        CUDA1 model buffer size = 22292.66 MiB\n",
    );
    let r = Case::new(vec![
        llama("h200-b11434-sdist-list-devices-verbose.txt"),
        split,
    ])
    .on(&h200s)
    .judge();
    assert!(!has(&r, "quirk-Q7") && !has(&r, "quirk-Q7-split"));
}

#[test]
fn the_plan_line_has_the_flag_the_log_asks_for_without_a_machine() {
    // Judged from the build's own device lines (no probe): the resolver alone cannot know the
    // run was split, but the log shows it, so the plan line gets NO_PEER_COPY and Q7-linux-rdna4's fix is it.
    let devices = text(
        "server.log",
        "ggml_cuda_init: found 2 ROCm devices:\n  Device 0: AMD Radeon RX 9070 XT, gfx1201 (0x1201), VMM: no, Wave Size: 32\n  Device 1: AMD Radeon RX 9070 XT, gfx1201 (0x1201), VMM: no, Wave Size: 32\n",
    );
    let r = Case::new(vec![
        devices,
        llama("llama-16725-rocm-split-run-buffers.txt"),
    ])
    .build(10000)
    .judge();
    let q7 = find(&r, "quirk-Q7-linux-rdna4");
    assert_eq!(q7.level, Level::Warning);
    let plan = r.plan.as_ref().expect("a plan for the listed devices");
    assert!(
        plan.groups[0]
            .cmake_args
            .contains(&"-DGGML_CUDA_NO_PEER_COPY=ON".to_string()),
        "{:?}",
        plan.groups[0].cmake_args
    );
    let human = check_build::render(&r);
    assert!(
        human.contains("gpuprobe would build (gfx1201): ")
            && human.contains("-DGGML_CUDA_NO_PEER_COPY=ON")
    );
}

#[test]
fn every_flag_asked_for_is_in_the_plan_line_across_all_fixtures() {
    // assert_one_voice runs in every judge(); here over every fixture, alone and on machines.
    let h200 = machine(
        vec![device(
            0,
            Backend::Cuda,
            "NVIDIA H200",
            "sm_90",
            SmokeOutcome::Pass,
        )],
        None,
        "linux",
    );
    let amd = [
        r9700("7.2.4", SmokeOutcome::Fail),
        r9700("7.14.0", SmokeOutcome::Pass),
    ];
    let mut n = 0;
    for dir in ["llama-logs", "kernel-logs"] {
        for e in std::fs::read_dir(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(dir),
        )
        .unwrap()
        {
            let p = e.unwrap().path();
            let input = (
                p.file_name().unwrap().to_string_lossy().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            );
            Case::new(vec![input.clone()]).judge();
            Case::new(vec![input.clone()]).on(&h200).judge();
            for m in &amd {
                Case::new(vec![input.clone()]).on(m).judge();
                n += 1;
            }
        }
    }
    assert!(n > 20);
}

// ---------------------------------------------------------------------------------------------
// the command

fn gp() -> assert_cmd::Command {
    common::gpuprobe()
}

#[test]
fn several_logs_stdin_and_neutralised_quotes() {
    let oom = fixture_path("llama-logs", "ollama-11713-rocm-legacy-oom-2025.txt");
    let devices = fixture_path("llama-logs", "llama-22013-rocm-gfx1201-gfx1103-b8821.txt");
    let out = gp()
        .args(["check-build", "--no-probe", "--json", "--log"])
        .arg(&devices)
        .arg("--log")
        .arg(&oom)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "log-legacy-pool-oom")
        .unwrap();
    assert_eq!(f["severity"], "error");
    assert_eq!(f["evidence"][0]["line"], 4);
    assert!(
        f["evidence"][0]["input"]
            .as_str()
            .unwrap()
            .ends_with("ollama-11713-rocm-legacy-oom-2025.txt")
    );
    // A hostile log: escape sequences in a failure line reach neither the terminal nor the JSON
    // quote raw.
    let hostile = "HipVMM Failure: invalid argument\x1b]0;owned\x07\x1b[2J\n";
    let out = gp()
        .args(["check-build", "--no-probe", "--log", "-"])
        .write_stdin(hostile)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        !shown.contains('\x1b') && !shown.contains('\x07'),
        "{shown}"
    );
    assert!(
        shown.contains("HipVMM Failure: invalid argument\\x1b]0;owned\\x07"),
        "{shown}"
    );
    let out = gp()
        .args(["check-build", "--no-probe", "--log", "-", "--log", "-"])
        .write_stdin("x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

// ---------------------------------------------------------------------------------------------
// real variants: every signature, at least two real lines from different reports

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct VariantFile {
    variant: Vec<Variant>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Variant {
    signature: String,
    source: String,
    what: String,
    log: String,
    line: usize,
}

/// Signatures with fewer than two real variants in `signature-variants/variants.toml` and the
/// open-world corpus: still to be collected. The test fails when one reaches two (remove it
/// here) or a signature not named here falls short. Beside each, what a search of public
/// GitHub issues (llama.cpp, ollama, LocalAI, koboldcpp, LM Studio, lemonade, llama-cpp-python,
/// ROCm, TheRock, rocm-libraries) found: the lines its sources quote, and no second report
/// quoting the same failure in full.
const SHORT_OF_TWO: &[&str] = &[
    // One: the H200 capture (nvidia-h200-driver580-pool-oom/oom-legacy-2330.log: the pool's
    // `alloc` after the flush and retry, at -lv 4, where 11434 prints no flush line: debug is
    // level 5 since May 2026). No public log quoting the post-8863 block (`out of memory`,
    // `in function alloc at ...:502`, `err`) was found besides the signature's sources.
    "legacy-pool-oom-after-flush",
    // rocm-systems#2516 and llama.cpp#23900 describe hipMemSetAccess failing in prose, PR #26054
    // quotes the HipVMM form (hip-vmm-invalid-argument); hipfire#635 quotes hipMemSetAccess from
    // a program other than llama.cpp. koboldcpp#612 and #1711 quote cuMemSetAccess failing with
    // `out of memory`: that is the pool running out (vmm-pool-oom), not this defect.
    "vmm-set-access-failed",
    // No public log quoting a failing cuMemMap was found (PR #4606 only shows the check; PR
    // #23732 describes cuMemMap on Jetson without a log).
    "vmm-map-failed",
    // PR #26054 quotes it; legacy-rocm-build#6521 and llama.cpp#18650 describe the same
    // hipMemSetAccess failure without the log line; lemonade's llamacpp-rocm#87 (a VMM build on
    // gfx1201) hung instead. The other `HipVMM Failure` logs say `out of memory` (hip-vmm-failure).
    "hip-vmm-invalid-argument",
    // #19949 quotes it; other reports of a missing code object quote PyTorch's
    // hipErrorNoBinaryForGpu instead, from programs other than llama.cpp (also searched: ollama,
    // llamafile, lemonade). ROCm reworded the line in rocm-systems#5164 (merged 2026-04; its
    // diff: "No compatible code objects with HIP_FORCE_SPIRV_CODEOBJECT: %d. Rebuild the
    // application with option --offload-arch=%s"), which this signature does not match; no
    // public log of that wording was found, so it is not widened yet.
    "hip-no-code-objects",
    // #27102 quotes the Xid 8 line; #27330 and beellama#65 describe Xid 8 without quoting it
    // (#27330 tabulates time, Xid, process and channel, not the kernel's line). Also searched:
    // `NVRM: Xid ... 8, pid=` with ollama and llama-server in the issue index.
    "nvidia-xid-8",
    // legacy-rocm-build#6619 quotes it (addresses elided); llama.cpp#27275 describes the
    // segfault; no other public dmesg line from a llama.cpp process was found (also searched:
    // ollama's AMD segfault reports, which quote no comgr frame).
    "amd-comgr-segfault",
    // Only builds 7538-7574 (two weeks) print it: #18421 quotes it, #18363 and PR #18457
    // discuss it without the line; #18425 (build 7538's native GB10 build) fails in ptxas
    // instead. Also searched: the 120/121 wording in the issue index.
    "cmake-cuda-plain-12x-rejected",
];

fn variants() -> Vec<Variant> {
    let p = fixture_path("signature-variants", "variants.toml");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    toml::from_str::<VariantFile>(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .variant
}

/// A variant's source is a public URL, or a log captured here on real hardware under
/// tests/fixtures/ that holds every line the variant quotes.
fn assert_source_holds(v: &Variant) {
    if v.source.starts_with("https://") {
        return;
    }
    assert!(
        v.source.starts_with("tests/fixtures/"),
        "{}: source must be a URL or a captured log under tests/fixtures/",
        v.what
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(&v.source);
    let captured = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {}: {e}", v.what, path.display()));
    for line in v.log.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            captured.lines().any(|c| c == line),
            "{}: {} does not hold the quoted line {line:?}",
            v.what,
            v.source
        );
    }
}

/// Whole logs of real out-of-memory failures on an H200 (scripts/gpu-pool-oom.sh): each is
/// named by the signature for what failed, and none of its error lines is left unrecognised
/// (before these signatures, the buffer failures read as three unrecognised failures).
#[test]
fn h200_out_of_memory_logs_are_named_and_nothing_is_left_unexplained() {
    let cases = [
        ("oom-vmm-2400.log", "log-cublas-handle-failed"),
        ("oom-legacy-2370.log", "log-cublas-handle-failed"),
        ("oom-legacy-2330.log", "log-legacy-pool-oom-after-flush"),
        ("oom-vmm-2325.log", "log-cuda-oom"),
        ("oom-legacy-2290.log", "log-cuda-oom"),
        ("oom-vmm-2250.log", "log-device-buffer-oom"),
        ("oom-vmm-1500.log", "log-device-buffer-oom"),
    ];
    for (file, want) in cases {
        let path = fixture_path("nvidia-h200-driver580-pool-oom", file);
        let log = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        let r = Case::new(vec![text(file, &log)]).judge();
        let ids: Vec<&str> = r.findings.iter().map(|f| f.id.as_str()).collect();
        assert!(ids.contains(&want), "{file}: no {want} in {ids:?}");
        let stray: Vec<&&str> = ids
            .iter()
            .filter(|i| i.starts_with("unrecognised-") || **i == "log-ggml-cuda-error")
            .collect();
        assert!(stray.is_empty(), "{file}: {stray:?} besides {want}");
    }
}

/// The ids of the bundled signatures that produce findings (not `fact` rows).
fn finding_signatures() -> Vec<String> {
    let text = include_str!("../profiles/log-signatures.toml");
    let v: toml::Value = toml::from_str(text).unwrap();
    v["signature"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s.get("class").and_then(|c| c.as_str()) != Some("fact"))
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn each_real_variant_is_claimed_by_its_signature_quoting_its_line() {
    let known = finding_signatures();
    let mut wrong = Vec::new();
    for v in variants() {
        assert_source_holds(&v);
        assert!(
            known.contains(&v.signature),
            "{}: no signature `{}`",
            v.what,
            v.signature
        );
        let label = format!("{} ({})", v.signature, v.source);
        let r = Case::new(vec![text(&label, &v.log)]).judge();
        let want = format!("log-{}", v.signature);
        let quoting = r
            .findings
            .iter()
            .find(|f| f.id == want && f.evidence.iter().any(|q| q.line == v.line));
        if quoting.is_none() {
            wrong.push(format!(
                "{} — {}: no `{want}` quoting line {}; findings: {:?}",
                v.source,
                v.what,
                v.line,
                r.findings
                    .iter()
                    .map(|f| format!(
                        "{} {:?}",
                        f.id,
                        f.evidence.iter().map(|q| q.line).collect::<Vec<_>>()
                    ))
                    .collect::<Vec<_>>()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "variants not claimed:\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn every_signature_has_two_real_variants_or_is_named_short() {
    let mut sources: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for v in variants() {
        sources.entry(v.signature).or_default().insert(v.source);
    }
    // The open-world corpus: cases a signature now explains.
    let p = fixture_path("open-world", "failures.toml");
    let corpus: toml::Value = toml::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    for c in corpus["case"].as_array().unwrap() {
        if let Some(id) = c["expect"].as_str().and_then(|e| e.strip_prefix("log-")) {
            sources
                .entry(id.to_string())
                .or_default()
                .insert(c["source"].as_str().unwrap().to_string());
        }
    }
    let mut short = Vec::new();
    let mut reached = Vec::new();
    for id in finding_signatures() {
        let n = sources.get(&id).map_or(0, |s| s.len());
        let listed = SHORT_OF_TWO.contains(&id.as_str());
        if n < 2 && !listed {
            short.push(format!("{id} ({n})"));
        }
        if n >= 2 && listed {
            reached.push(id);
        }
    }
    assert!(
        short.is_empty(),
        "signatures with fewer than two real variants from different sources: {short:?}"
    );
    assert!(
        reached.is_empty(),
        "these now have two real variants: remove them from SHORT_OF_TWO: {reached:?}"
    );
}

/// Widened patterns stay off their neighbours: real lines of a different failure, each close to
/// a signature that was made tolerant of another era or wrapper, are not claimed by it.
#[test]
fn widened_signatures_do_not_claim_neighbouring_failures() {
    let cases = [
        (
            "cuda-driver-library-not-found",
            // ggml-org/llama.cpp#23522: a server-cuda13 image missing one of llama.cpp's own
            // libraries, not the driver's.
            "llama-router-gpu  | /app/llama-server: error while loading shared libraries: libllama-common.so.0: cannot open shared object file: No such file or directory",
        ),
        (
            "amdgpu-ring-timeout",
            // ROCm/ROCR-Runtime#180: an SDMA ring, not a compute or graphics ring.
            "[  308.334535] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring sdma0 timeout, signaled seq=1255, emitted seq=1257",
        ),
        (
            "cuda-peer-access-failed",
            // ggml-org/llama.cpp#5347: peer access enabled twice, not refused by the driver.
            "CUDA error: peer access is already enabled",
        ),
        (
            "cuda-row-split-broadcast-assert",
            // ggml-org/llama.cpp#21876: tensor split mode, a different split path.
            "GGML_ASSERT(split_state.n_segments == 1) failed",
        ),
        (
            "math-library-kernels-missing",
            // ggml-org/llama.cpp#19972: rocBLAS relays a different HIP error (no kernel code for
            // the GPU at all), which math-library-invalid-device-function explains.
            "rocBLAS error from hip error code: 'hipErrorInvalidDeviceFunction':98",
        ),
        (
            "hip-msvc-cmath-clash",
            // ROCm/HIPIFY#80: libstdc++'s constexpr math against clang's CUDA headers on Linux.
            "/usr/lib/gcc/x86_64-linux-gnu/8/../../../../include/c++/8/cmath:642:3: error: constexpr function 'isnormal' without __host__ or __device__ attributes cannot overload __device__ function with same signature.  Add a __host__ attribute, or build with -fno-cuda-host-device-constexpr.",
        ),
    ];
    for (id, line) in cases {
        let r = Case::new(vec![text("neighbour.log", &format!("{line}\n"))]).judge();
        let want = format!("log-{id}");
        assert!(
            !r.findings.iter().any(|f| f.id == want),
            "{want} claimed a different failure: {line}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// consequences: ggml's error for the op a math library failed in

#[test]
fn ggml_errors_after_a_math_library_failure_are_quoted_under_it_not_a_rebuild() {
    // llama.cpp#27557 (build 10582, gfx1151, TheRock 7.14.0rc3 rocBLAS), as the variants file
    // quotes it: rocBLAS refuses its kernel file, then ggml reports the same op's failure.
    let log = "rocBLAS error from hip error code: 'hipErrorInvalidImage':200\nggml_cuda_compute_forward: SOLVE_TRI failed\nROCm error: device kernel image is invalid\n  current device: 0, in function ggml_cuda_compute_forward at ggml/src/ggml-cuda/ggml-cuda.cu:2408\nggml/src/ggml-cuda/ggml-cuda.cu:106: ROCm error\n";
    let r = Case::new(vec![text("27557.log", log)]).judge();
    let errors: Vec<&str> = r
        .findings
        .iter()
        .filter(|f| f.level == Level::Error)
        .map(|f| f.id.as_str())
        .collect();
    assert_eq!(
        errors,
        ["log-math-library-kernels-missing"],
        "{}",
        check_build::render(&r)
    );
    let q = quoted(find(&r, "log-math-library-kernels-missing"));
    assert!(
        q.iter()
            .any(|l| l.contains(":3: ROCm error: device kernel image is invalid")),
        "{q:?}"
    );
    assert!(!has(&r, "log-hip-kernel-image-invalid"));
    // The same with rocBLAS's invalid-device-function form (llama.cpp#19972) and ggml's.
    let log = "rocBLAS error from hip error code: 'hipErrorInvalidDeviceFunction':98\nggml_cuda_compute_forward: SOLVE_TRI failed\nROCm error: invalid device function\n  current device: 1, in function ggml_cuda_compute_forward at ggml/src/ggml-cuda/ggml-cuda.cu:2750\n";
    let r = Case::new(vec![text("19972.log", log)]).judge();
    assert!(has(&r, "log-math-library-invalid-device-function"));
    assert!(
        !has(&r, "log-hip-invalid-device-function"),
        "{}",
        check_build::render(&r)
    );
}

#[test]
fn ggml_errors_without_a_math_library_failure_before_them_stand_alone() {
    let ggml = "ROCm error: device kernel image is invalid\n  current device: 0, in function ggml_cuda_compute_forward at ggml/src/ggml-cuda/ggml-cuda.cu:2408\n";
    let r = Case::new(vec![text("alone.log", ggml)]).judge();
    assert!(has(&r, "log-hip-kernel-image-invalid"));
    // After the rocBLAS line, but too far from it to be the same op's failure.
    let far = format!(
        "rocBLAS error from hip error code: 'hipErrorInvalidImage':200\n{}{ggml}",
        "llama_perf_context_print: noise\n".repeat(60)
    );
    let r = Case::new(vec![text("far.log", &far)]).judge();
    assert!(has(&r, "log-math-library-kernels-missing"));
    assert!(has(&r, "log-hip-kernel-image-invalid"));
    // In another input: not the same process's failure.
    let r = Case::new(vec![
        text(
            "a.log",
            "rocBLAS error from hip error code: 'hipErrorInvalidImage':200\n",
        ),
        text("b.log", ggml),
    ])
    .judge();
    assert!(has(&r, "log-hip-kernel-image-invalid"));
}
