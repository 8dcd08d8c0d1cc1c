//! `gpuprobe check-build`: facts extracted from real llama.cpp output of several eras
//! (tests/fixtures/llama-logs, each with a header naming its source), findings against
//! machines described as `detect` reports, and the command's contract with fake binaries
//! (a hang, a non-llama program, a binary that needs --verbose for its device lines).
//!
//! The fake binaries are shell scripts written by the tests: they print text in the formats
//! llama.cpp prints and measure nothing.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use gpuprobe::check_build::signatures::SignatureTable;
use gpuprobe::check_build::{
    self, BuildFacts, CheckReport, Finding, InputInfo, InputKind, Level, Options,
};
use gpuprobe::plan::Mode;
use gpuprobe::platform::Os;
use gpuprobe::profiles::Knowledge;
use gpuprobe::report::{
    Backend, BackendStatus, Device, DeviceSource, Host, Report, Smoke, SmokeOutcome, SmokeStage,
};
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// helpers

fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/llama-logs")
        .join(name)
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixture_path(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn facts(name: &str) -> BuildFacts {
    check_build::parse::parse(&fixture(name))
}

fn knowledge() -> Knowledge {
    Knowledge::bundled().expect("bundled knowledge")
}

fn smoke(outcome: SmokeOutcome, stage: Option<&str>) -> Smoke {
    let mut s = Smoke::with_outcome(outcome, "test");
    s.stage = stage.map(SmokeStage::from);
    s
}

fn device(index: u32, backend: Backend, name: &str, arch: &str, smoke: Smoke) -> Device {
    let mut d = Device::new(index, backend, name, arch, DeviceSource::Driver);
    d.smoke = smoke;
    d.vram_total_bytes = Some(32 << 30);
    d.integrated = Some(false);
    d.wave_size = Some(32);
    d.vmm_supported = Some(true);
    d.granularity_min = Some(4096);
    d.granularity_recommended = Some(2 << 20);
    d
}

fn report(devices: Vec<Device>, runtime: Option<&str>) -> Report {
    let mut r = Report::new(Host {
        os: "linux".into(),
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

fn h200s(outcome0: Smoke, outcome1: Smoke) -> Report {
    report(
        vec![
            device(0, Backend::Cuda, "NVIDIA H200", "sm_90", outcome0),
            device(1, Backend::Cuda, "NVIDIA H200", "sm_90", outcome1),
        ],
        None,
    )
}

fn pass() -> Smoke {
    smoke(SmokeOutcome::Pass, None)
}

/// Judges `text` against `machine` (None: --no-probe).
fn judge(
    text: &str,
    machine: Option<&Report>,
    llama_build: Option<u64>,
    env_set: &[&str],
) -> CheckReport {
    let k = knowledge();
    let signatures = SignatureTable::bundled(&k.quirks).expect("bundled signatures");
    let opts = Options {
        knowledge: &k,
        signatures: &signatures,
        binary_dir: None,
        machine: machine.map(|r| check_build::machine_from(r, Mode::Report, "report test.json")),
        llama_build,
        os: Os::Linux,
        env_set: env_set.iter().map(|s| s.to_string()).collect(),
        report_path: machine.map(|_| "test.json".to_string()),
    };
    check_build::check(
        text,
        InputInfo {
            kind: InputKind::Log,
            path: "test".into(),
            runs: vec![],
        },
        vec![],
        &opts,
    )
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

fn gp() -> Command {
    common::gpuprobe()
}

/// Writes an executable shell script (a FAKE llama.cpp binary).
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn ids(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// fixtures: every file names its source

#[test]
fn every_fixture_names_its_source() {
    for e in std::fs::read_dir(fixture_path("")).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        let first = text.lines().next().unwrap_or("");
        assert!(
            first.starts_with("# source: https://")
                || first.starts_with("# source: captured by this project"),
            "{} must start with a `# source:` line, has: {first}",
            p.display()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// extraction, era by era

#[test]
fn h200_sdist_version_build_0_is_unknown() {
    let f = facts("h200-b11434-sdist-version.txt");
    assert_eq!(f.version.semver.as_deref(), Some("0.6.0-dev"));
    assert_eq!(f.version.reported_build, Some(0));
    assert_eq!(f.version.build, None);
    assert_eq!(f.version.commit, None);
    assert_eq!(f.version.compiler.as_deref(), Some("GNU 13.3.0"));
    assert_eq!(f.version.target.as_deref(), Some("Linux x86_64"));
}

#[test]
fn h200_list_devices_without_verbose_has_no_device_lines() {
    let f = facts("h200-b11434-sdist-list-devices.txt");
    assert_eq!(f.gpu_backend(), Some("CUDA"));
    assert!(f.devices.is_empty());
    let names: Vec<&str> = f.listed.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["CUDA0", "CUDA1"]);
    assert_eq!(f.listed[0].description, "NVIDIA H200");
    assert_eq!(f.listed[0].total_mib, Some(143155));
    assert_eq!(f.listed[0].free_mib, Some(142629));
    assert_eq!(f.vmm_compiled().0, None);
}

#[test]
fn h200_verbose_list_devices_with_log_prefix() {
    let f = facts("h200-b11434-sdist-list-devices-verbose.txt");
    assert_eq!(f.inits.len(), 1);
    assert_eq!(f.inits[0].backend, "CUDA");
    assert_eq!(f.inits[0].count, 2);
    assert_eq!(f.inits[0].total_vram_mib, Some(286311));
    assert_eq!(f.devices.len(), 2);
    let d = &f.devices[1];
    assert_eq!(
        (d.backend.as_str(), d.index, d.name.as_str()),
        ("CUDA", 1, "NVIDIA H200")
    );
    assert_eq!(d.compute_capability.as_deref(), Some("9.0"));
    assert_eq!(d.arch.as_deref(), Some("sm_90"));
    assert_eq!(d.vmm, Some(true));
    assert_eq!(d.vram_mib, Some(143155));
    assert!(
        d.line.starts_with("0.00.228.601 I"),
        "keeps the original line: {}",
        d.line
    );
    let (vmm, evidence) = f.vmm_compiled();
    assert_eq!(vmm, Some(true));
    assert!(evidence.contains("VMM: yes"), "{evidence}");
}

#[test]
fn h200_server_trace_log_has_system_info_and_device_info() {
    let f = facts("h200-b11434-sdist-server-lv4.txt");
    assert_eq!(f.version.reported_build, Some(0));
    assert_eq!(f.version.build, None);
    assert_eq!(f.version.compiler.as_deref(), Some("GNU 13.3.0"));
    assert_eq!(f.cuda_archs(), Some(vec![900]));
    let cuda = f.cuda_registry().unwrap();
    assert_eq!(cuda.name, "CUDA");
    assert_eq!(cuda.get("USE_GRAPHS"), Some("1"));
    assert_eq!(
        cuda.get("FA_QUANTS"),
        Some("q4_0-q4_0,q8_0-q8_0,f16-f16,bf16-bf16")
    );
    assert!(!cuda.has("NO_VMM"));
    assert_eq!(f.vmm_compiled().0, Some(true));
    // device_info lists the CPU too; it is not a GPU.
    let listed: Vec<(&str, bool)> = f.listed.iter().map(|d| (d.name.as_str(), d.gpu)).collect();
    assert_eq!(listed, [("CUDA0", true), ("CUDA1", true), ("CPU", false)]);
    assert_eq!(f.backends, ["CUDA"]);
    assert!(
        f.registries
            .iter()
            .any(|r| r.name == "CPU" && r.get("AMX_INT8") == Some("1"))
    );
}

#[test]
fn cpu_only_build_says_so() {
    let f = facts("cpu-b11434-sdist-version-and-list.txt");
    assert!(f.list_seen && f.list_none);
    assert!(f.cpu_only());
    assert_eq!(f.gpu_backend(), None);
    assert!(f.listed.is_empty() && f.devices.is_empty());
    assert_eq!(f.version.semver.as_deref(), Some("0.6.0-dev"));
}

#[test]
fn rocm_device_lines_before_the_version_b8821() {
    let f = facts("llama-22013-rocm-gfx1201-gfx1103-b8821.txt");
    assert_eq!(f.version.build, Some(8821));
    assert_eq!(f.version.commit.as_deref(), Some("4adac43f6"));
    assert_eq!(f.inits[0].total_vram_mib, Some(31898));
    let d: Vec<(&str, Option<&str>, Option<u64>)> = f
        .devices
        .iter()
        .map(|d| (d.name.as_str(), d.arch.as_deref(), d.vram_mib))
        .collect();
    assert_eq!(
        d,
        [
            ("AMD Radeon RX 9070", Some("gfx1201"), Some(16304)),
            ("AMD Radeon 740M Graphics", Some("gfx1103"), Some(15594))
        ]
    );
    assert!(
        f.devices
            .iter()
            .all(|d| d.backend == "ROCm" && d.vmm == Some(false) && d.wave_size == Some(32))
    );
    assert_eq!(f.devices[1].arch_id.as_deref(), Some("0x1103"));
    assert_eq!(
        f.vmm_compiled().0,
        None,
        "VMM: no alone cannot tell compiled-out from unsupported"
    );
}

#[test]
fn rocm_no_vmm_from_lemonade_87() {
    let f = facts("lemonade-87-r9700-no-vmm.txt");
    let r = f.cuda_registry().unwrap();
    assert_eq!(r.name, "ROCm");
    assert_eq!(r.get("NO_VMM"), Some("1"));
    assert_eq!(r.get("PEER_MAX_BATCH_SIZE"), Some("128"));
    assert_eq!(f.vmm_compiled().0, Some(false));
    assert_eq!(f.cuda_archs(), None, "HIP prints no ARCHS");
    let d = &f.devices[0];
    assert_eq!(
        (d.name.as_str(), d.arch.as_deref(), d.wave_size, d.vram_mib),
        (
            "AMD Radeon AI PRO R9700",
            Some("gfx1201"),
            Some(32),
            Some(32624)
        )
    );
}

#[test]
fn launcher_prefix_and_truncated_system_info_from_lemonade_2319() {
    let f = facts("lemonade-2319-rocm-7900xtx-device-info.txt");
    let listed: Vec<(&str, Option<u64>, bool)> = f
        .listed
        .iter()
        .map(|d| (d.name.as_str(), d.total_mib, d.gpu))
        .collect();
    assert_eq!(
        listed,
        [
            ("ROCm0", Some(24560), true),
            ("ROCm1", Some(24560), true),
            ("CPU", Some(29906), false)
        ]
    );
    assert_eq!(f.listed[0].description, "AMD Radeon RX 7900 XTX");
    assert_eq!(f.gpu_backend(), Some("ROCm"));
    assert_eq!(f.vmm_compiled().0, Some(false));
    assert_eq!(f.feature_flag("NO_PEER_COPY"), Some(false));
}

#[test]
fn ci_log_of_build_4526_v100() {
    let f = facts("ggml-ci-v100-b4526.txt");
    assert_eq!(f.version.build, Some(4526));
    assert_eq!(f.version.commit.as_deref(), Some("a94f3b272"));
    assert_eq!(f.version.source.as_deref(), Some("log"));
    assert_eq!(f.version.target.as_deref(), Some("x86_64-linux-gnu"));
    assert_eq!(f.init_force_mmq, Some(false));
    assert_eq!(f.init_force_cublas, Some(false));
    assert_eq!(f.inits[0].total_vram_mib, None);
    assert_eq!(f.devices[0].arch.as_deref(), Some("sm_70"));
    assert_eq!(f.devices[0].vmm, Some(true));
    assert_eq!(f.devices[0].vram_mib, None);
    assert_eq!(f.cuda_archs(), Some(vec![700]));
    assert_eq!(
        f.cuda_registry().unwrap().get("PEER_MAX_BATCH_SIZE"),
        Some("128")
    );
    assert_eq!(f.vmm_compiled().0, Some(true));
    // `using device CUDA0 (...) - 15841 MiB free` and the KV buffer line are not device list entries.
    assert!(f.listed.is_empty(), "{:?}", f.listed);
}

#[test]
fn oldest_era_build_968() {
    let f = facts("ggml-ci-v100-b968.txt");
    assert_eq!(f.version.build, Some(968));
    assert_eq!(f.version.commit.as_deref(), Some("acfc547"));
    assert_eq!(f.inits[0].line, "ggml_init_cublas: found 1 CUDA devices:");
    let d = &f.devices[0];
    assert_eq!(
        (d.name.as_str(), d.arch.as_deref(), d.vmm),
        ("Tesla V100-PCIE-16GB", Some("sm_70"), None)
    );
    assert!(f.system_info_seen);
    assert!(
        f.registries.is_empty(),
        "CPU flags without a registry name are not backend features: {:?}",
        f.registries
    );
    assert_eq!(f.vmm_compiled().0, None);
}

#[test]
fn llama_bench_build_line_and_device_without_vram() {
    let f = facts("lemonade-11-gfx1151-bench-b6431.txt");
    assert_eq!(f.version.build, Some(6431));
    assert_eq!(f.version.commit.as_deref(), Some("4f63cd70"));
    assert_eq!(f.version.source.as_deref(), Some("bench"));
    let d = &f.devices[0];
    assert_eq!(
        (d.arch.as_deref(), d.vmm, d.wave_size, d.vram_mib),
        (Some("gfx1151"), Some(false), Some(32), None)
    );
}

#[test]
fn new_version_format_from_issue_28338() {
    let f = facts("llama-28338-version-b10788.txt");
    assert_eq!(f.version.semver.as_deref(), Some("0.3.0-dev"));
    assert_eq!(f.version.build, Some(10788));
    assert_eq!(f.version.commit.as_deref(), Some("e107984bc"));
}

#[test]
fn rocm_init_failure_is_recorded() {
    let f = facts("llama-20142-rocm-no-device-b8204.txt");
    assert_eq!(f.version.build, Some(8204));
    assert_eq!(f.init_errors.len(), 1, "{:?}", f.init_errors);
    assert_eq!(f.init_errors[0].backend, "ROCm");
    assert_eq!(
        f.init_errors[0].message,
        "no ROCm-capable device is detected"
    );
    assert_eq!(f.gpu_backend(), Some("ROCm"));
}

#[test]
fn vulkan_build_with_unknown_commit() {
    let f = facts("llama-16659-vulkan-b6795.txt");
    assert_eq!(f.version.build, Some(6795));
    assert_eq!(f.version.commit, None);
    assert_eq!(
        f.version.target.as_deref(),
        Some("x86_64-unknown-freebsd14.3")
    );
    assert_eq!(f.gpu_backend(), Some("Vulkan"));
    assert_eq!(
        f.devices.len(),
        1,
        "the repeated init lines give one device"
    );
    assert_eq!(f.listed[0].name, "Vulkan0");
    assert_eq!(f.listed[0].total_mib, Some(6144));
}

#[test]
fn windows_rocm_lines_with_trailing_spaces() {
    let f = facts("rocmlibs-50-gfx1103-windows-b6367.txt");
    assert_eq!(f.version.build, Some(6367));
    assert_eq!(f.version.commit.as_deref(), Some("2c8dac72"));
    assert_eq!(f.version.target.as_deref(), Some("x86_64-pc-windows-msvc"));
    assert!(
        f.version
            .compiler
            .as_deref()
            .unwrap()
            .starts_with("clang version 20.0.0git")
    );
    assert_eq!(f.devices[0].arch.as_deref(), Some("gfx1103"));
    assert_eq!(f.devices[0].wave_size, Some(32));
    assert_eq!(f.init_force_mmq, Some(false));
}

// ---------------------------------------------------------------------------------------------
// judging against a machine

#[test]
fn h200_build_on_h200_with_passing_smoke_has_no_problems() {
    let text = fixture("h200-b11434-sdist-list-devices-verbose.txt")
        + &fixture("h200-b11434-sdist-server-lv4.txt");
    let m = h200s(pass(), pass());
    let r = judge(&text, Some(&m), None, &[]);
    assert_eq!(r.summary.exit_code, 0, "{}", check_build::render(&r));
    assert_eq!(r.summary.warnings + r.summary.errors, 0);
    assert_eq!(find(&r, "vmm-ok").level, Level::Note);
    assert_eq!(find(&r, "arch-ok").devices.len(), 2);
    let unknown = find(&r, "build-unknown");
    assert!(unknown.fix.as_deref().unwrap().contains("--llama-build"));
    assert_eq!(r.build.vmm.compiled, Some(true));
    assert_eq!(r.build.archs, Some(vec![900]));
    assert_eq!(r.build.flags.use_graphs, Some(true));
    assert_eq!(r.build.flags.no_vmm, Some(false));
    let plan = r.plan.as_ref().unwrap();
    assert!(
        plan.groups[0]
            .cmake_args
            .contains(&"-DCMAKE_CUDA_ARCHITECTURES=90".to_string()),
        "{:?}",
        plan.groups
    );
}

#[test]
fn llama_build_option_replaces_build_0() {
    let text = fixture("h200-b11434-sdist-version.txt");
    let r = judge(&text, None, Some(11434), &[]);
    assert_eq!(r.build.number.value, Some(11434));
    assert_eq!(r.build.number.source.to_string(), "--llama-build");
    assert!(!has(&r, "build-unknown"));
}

#[test]
fn vmm_build_on_a_device_whose_smoke_test_hangs_is_an_error() {
    let text = fixture("h200-b11434-sdist-list-devices-verbose.txt");
    let m = h200s(pass(), smoke(SmokeOutcome::Hang, Some("kernel-write")));
    let r = judge(&text, Some(&m), None, &[]);
    let f = find(&r, "vmm-unsafe");
    assert_eq!(f.level, Level::Error);
    assert!(
        f.reason.contains("device 1 (NVIDIA H200)") && f.reason.contains("hang"),
        "{}",
        f.reason
    );
    assert!(
        f.fix.as_deref().unwrap().contains("-DGGML_CUDA_NO_VMM=ON"),
        "{:?}",
        f.fix
    );
    assert_eq!(r.summary.exit_code, 1);
}

#[test]
fn vmm_build_where_the_32_gib_reservation_fails_is_an_error_citing_q15() {
    let text = fixture("h200-b11434-sdist-server-lv4.txt");
    let failed = smoke(SmokeOutcome::Fail, Some("reserve"));
    let m = h200s(failed.clone(), failed);
    let r = judge(&text, Some(&m), Some(11434), &[]);
    let f = find(&r, "vmm-unsafe");
    assert_eq!(f.level, Level::Error);
    assert!(f.quirks.contains(&"Q15".to_string()), "{:?}", f.quirks);
    assert!(f.fix.as_deref().unwrap().contains("-DGGML_CUDA_NO_VMM=ON"));
}

fn r9700(runtime: &str, s: Smoke) -> Report {
    report(
        vec![device(
            0,
            Backend::Hip,
            "AMD Radeon AI PRO R9700",
            "gfx1201",
            s,
        )],
        Some(runtime),
    )
}

#[test]
fn no_vmm_build_on_gfx12_where_only_the_smoke_test_passed_is_fine() {
    // Q21: on gfx12 a passing smoke test is not enough (the reporter's device passed the VMM
    // checks and still hung on a real request); without a workload pass gpuprobe builds the
    // legacy pool too, so a NO_VMM build is what it would build.
    let r = judge(
        &fixture("lemonade-87-r9700-no-vmm.txt"),
        Some(&r9700("7.14.0", pass())),
        Some(10001),
        &[],
    );
    assert!(!has(&r, "vmm-compiled-out"), "{}", check_build::render(&r));
    let f = find(&r, "vmm-ok");
    assert!(f.title.contains("without VMM"), "{}", f.title);
}

#[test]
fn no_vmm_build_where_vmm_is_unsafe_is_fine() {
    let failed = smoke(SmokeOutcome::Fail, Some("set-access"));
    let r = judge(
        &fixture("lemonade-87-r9700-no-vmm.txt"),
        Some(&r9700("7.2.26015", failed)),
        Some(10001),
        &[],
    );
    let f = find(&r, "vmm-ok");
    assert!(f.title.contains("without VMM"), "{}", f.title);
    assert!(!has(&r, "vmm-compiled-out"));
    // Build 10001 has #23907: the legacy-pool advice is information.
    assert_eq!(find(&r, "quirk-Q2").level, Level::Note);
    assert!(!has(&r, "quirk-Q2-old-build"));
}

#[test]
fn old_no_vmm_build_predates_the_flush_and_retry_fix() {
    // b8821 prints `VMM: no` for a device this machine's probe says supports VMM: compiled out.
    let mut igpu = device(
        1,
        Backend::Hip,
        "AMD Radeon 740M Graphics",
        "gfx1103",
        smoke(SmokeOutcome::NotRun, None),
    );
    igpu.integrated = Some(true);
    let m = report(
        vec![
            device(
                0,
                Backend::Hip,
                "AMD Radeon RX 9070",
                "gfx1201",
                smoke(SmokeOutcome::Fail, Some("set-access")),
            ),
            igpu,
        ],
        Some("7.2.1"),
    );
    let r = judge(
        &fixture("llama-22013-rocm-gfx1201-gfx1103-b8821.txt"),
        Some(&m),
        None,
        &[],
    );
    assert_eq!(
        r.build.vmm.compiled,
        Some(false),
        "{}",
        r.build.vmm.evidence
    );
    assert!(
        r.build.vmm.evidence.contains("VMM: no"),
        "{}",
        r.build.vmm.evidence
    );
    // Conditions alone (no out-of-memory in this output): notes, with the reason.
    let old = find(&r, "quirk-Q2-old-build");
    assert_eq!(old.level, Level::Note);
    assert!(old.reason.contains("8863"));
    assert!(old.reason.contains("shows no symptom"), "{}", old.reason);
    let q2 = find(&r, "quirk-Q2");
    assert_eq!(q2.level, Level::Note);
    assert!(q2.reason.contains("predates #23907"), "{}", q2.reason);
    // The evidence: the device line that says `VMM: no`, and the version line.
    let quoted: Vec<&str> = old.evidence.iter().map(|q| q.text.as_str()).collect();
    assert!(quoted.iter().any(|t| t.contains("VMM: no")), "{quoted:?}");
    assert!(
        quoted.iter().any(|t| t.contains("version: 8821")),
        "{quoted:?}"
    );
    // The iGPU next to the dGPU (Q8).
    assert!(has(&r, "quirk-Q8"));
}

#[test]
fn unknown_build_number_leaves_the_flush_retry_check_open() {
    let r = judge(&fixture("lemonade-87-r9700-no-vmm.txt"), None, None, &[]);
    let f = find(&r, "quirk-Q2-old-build");
    assert_eq!(f.level, Level::Note);
    assert!(f.title.contains("may apply"));
    assert!(f.reason.contains("llama.cpp build"), "{}", f.reason);
}

#[test]
fn cuda_archs_without_the_device_architecture() {
    // A build for sm_70 only (ARCHS = 700) on an H200 (sm_90).
    let r = judge(
        &fixture("ggml-ci-v100-b4526.txt"),
        Some(&h200s(pass(), pass())),
        None,
        &[],
    );
    let f = find(&r, "arch-missing");
    assert_eq!(f.level, Level::Warning);
    assert!(
        f.reason.contains("ARCHS = 700") && f.reason.contains("900"),
        "{}",
        f.reason
    );
    assert!(
        f.fix
            .as_deref()
            .unwrap()
            .contains("-DCMAKE_CUDA_ARCHITECTURES=90"),
        "{:?}",
        f.fix
    );
    assert_eq!(f.devices.len(), 2);
}

// Synthetic system_info strings in the real format (`ggml_backend_cuda_get_features` in ggml-cuda.cu), for the other two cases.
#[test]
fn cuda_archs_same_major_and_all_newer() {
    let m = report(
        vec![device(
            0,
            Backend::Cuda,
            "NVIDIA GeForce RTX 4090",
            "sm_89",
            pass(),
        )],
        None,
    );
    let r = judge(
        "system_info: n_threads = 8 / 16 | CUDA : ARCHS = 750,800,860 | USE_GRAPHS = 1 | ",
        Some(&m),
        Some(9000),
        &[],
    );
    let f = find(&r, "arch-compatible");
    assert_eq!(f.level, Level::Note);
    assert!(f.title.contains("860"), "{}", f.title);
    let m = report(
        vec![device(0, Backend::Cuda, "Tesla T4", "sm_75", pass())],
        None,
    );
    let r = judge(
        "system_info: n_threads = 8 / 16 | CUDA : ARCHS = 800,900 | ",
        Some(&m),
        Some(9000),
        &[],
    );
    assert_eq!(find(&r, "arch-missing").level, Level::Error);
}

#[test]
fn hip_archs_are_not_printed_and_the_report_says_so() {
    let r = judge(
        &fixture("lemonade-87-r9700-no-vmm.txt"),
        Some(&r9700("7.14.0", pass())),
        None,
        &[],
    );
    let f = find(&r, "archs-not-visible");
    assert_eq!(f.level, Level::Note);
    assert!(f.reason.contains("gfx1201"));
}

#[test]
fn apu_gets_the_unified_memory_advice_from_q11() {
    let mut apu = device(0, Backend::Hip, "AMD Radeon Graphics", "gfx1151", pass());
    apu.integrated = Some(true);
    let m = report(vec![apu], Some("7.14.0"));
    let r = judge(
        &fixture("lemonade-11-gfx1151-bench-b6431.txt"),
        Some(&m),
        None,
        &[],
    );
    let f = find(&r, "quirk-Q11");
    assert_eq!(f.level, Level::Warning);
    assert!(
        f.fix
            .as_deref()
            .unwrap()
            .contains("export GGML_CUDA_ENABLE_UNIFIED_MEMORY=1"),
        "{:?}",
        f.fix
    );
    // Already set where llama.cpp runs: information only.
    let r = judge(
        &fixture("lemonade-11-gfx1151-bench-b6431.txt"),
        Some(&m),
        None,
        &["GGML_CUDA_ENABLE_UNIFIED_MEMORY"],
    );
    assert_eq!(find(&r, "quirk-Q11").level, Level::Note);
}

#[test]
fn multi_gpu_rocm_no_vmm_build_peer_copies_and_graph_advice() {
    let m = report(
        vec![
            device(0, Backend::Hip, "AMD Radeon RX 7900 XTX", "gfx1100", pass()),
            device(1, Backend::Hip, "AMD Radeon RX 7900 XTX", "gfx1100", pass()),
        ],
        Some("7.13.0"),
    );
    let r = judge(
        &fixture("lemonade-2319-rocm-7900xtx-device-info.txt"),
        Some(&m),
        Some(10000),
        &[],
    );
    // Q7's peer-copy corruption is recorded for Radeon VII, RDNA 2 and RDNA 4 pairs, not RDNA 3;
    // every AMD multi-GPU process gets the split-mode advice (Q7-split).
    assert!(!has(&r, "quirk-Q7"));
    let split = find(&r, "quirk-Q7-split");
    assert!(
        split.reason.contains("-sm layer")
            || split.fix.as_deref().unwrap_or("").contains("-sm layer"),
        "{split:?}"
    );
    // Q6: runtime advice for a no-VMM HIP build with graphs (build 10000 >= 8893), for a workload.
    let q6 = find(&r, "quirk-Q6");
    assert_eq!(q6.level, Level::Note);
    assert!(
        q6.fix
            .as_deref()
            .unwrap()
            .contains("export GGML_CUDA_DISABLE_GRAPHS=1 (only for MoE"),
        "{:?}",
        q6.fix
    );
    // VMM passed on both on ROCm 7.13 (gfx1100 on 7.14 would need a workload pass, Q33): the NO_VMM build is a warning with the rebuild command.
    let v = find(&r, "vmm-compiled-out");
    let fix = v.fix.as_deref().unwrap();
    assert!(fix.contains("-DGGML_HIP_NO_VMM=OFF"), "{fix}");
    assert!(!fix.contains("GGML_CUDA_NO_PEER_COPY"), "{fix}");
    assert_eq!(v.devices.len(), 2);
}

#[test]
fn hip_vmm_build_on_gfx12_without_a_probe_is_flagged_from_the_quirks() {
    // Synthetic device line in the b4596+ HIP format, as a -DGGML_HIP_NO_VMM=OFF build prints it
    // (lemonade #87 follow-up: `VMM: yes`, no `NO_VMM = 1`).
    let text = "ggml_cuda_init: found 1 ROCm devices (Total VRAM: 32624 MiB):\n  Device 0: AMD Radeon AI PRO R9700, gfx1201 (0x1201), VMM: yes, Wave Size: 32, VRAM: 32624 MiB\nversion: 8900 (606fa42aa)\n";
    let r = judge(text, None, None, &[]);
    assert_eq!(r.build.vmm.compiled, Some(true));
    let f = find(&r, "vmm-unsafe");
    assert_eq!(f.level, Level::Warning, "nothing measured: a warning");
    assert!(f.quirks.contains(&"Q21".to_string()), "{:?}", f.quirks);
    assert!(f.fix.as_deref().unwrap().contains("-DGGML_HIP_NO_VMM=ON"));
    // On a machine where ROCm 7.2 is measured and the smoke test hangs: an error.
    let m = r9700("7.2.26015", smoke(SmokeOutcome::Hang, Some("kernel-read")));
    let r = judge(text, Some(&m), None, &[]);
    assert_eq!(find(&r, "vmm-unsafe").level, Level::Error);
}

#[test]
fn cpu_only_build_on_a_gpu_machine() {
    let text = fixture("cpu-b11434-sdist-version-and-list.txt");
    let r = judge(&text, Some(&h200s(pass(), pass())), None, &[]);
    let f = find(&r, "cpu-only");
    assert_eq!(f.level, Level::Warning);
    assert!(f.reason.contains("NVIDIA H200"));
    let r = judge(&text, Some(&report(vec![], None)), None, &[]);
    assert_eq!(find(&r, "cpu-only").level, Level::Note);
    assert_eq!(r.summary.exit_code, 0);
    assert!(r.build.cpu_only);
    let r = judge(&text, None, None, &[]);
    assert_eq!(r.summary.exit_code, 0);
}

#[test]
fn cuda_build_on_an_amd_machine() {
    let r = judge(
        &fixture("h200-b11434-sdist-list-devices-verbose.txt"),
        Some(&r9700("7.14.0", pass())),
        None,
        &[],
    );
    let f = find(&r, "backend-mismatch");
    assert_eq!(f.level, Level::Error);
    assert!(f.reason.contains("gfx1201"));
}

#[test]
fn rocm_build_that_found_no_device() {
    let r = judge(
        &fixture("llama-20142-rocm-no-device-b8204.txt"),
        None,
        None,
        &[],
    );
    // The hip-no-device signature claims the line; the built-in finding for a backend that did
    // not start gives way to it: one line, one finding.
    let f = find(&r, "log-hip-no-device");
    assert_eq!(f.level, Level::Error);
    // The finding quotes the line it rests on, with its number in the log.
    let text =
        std::fs::read_to_string(fixture_path("llama-20142-rocm-no-device-b8204.txt")).unwrap();
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with("ggml_cuda_init: failed to initialize ROCm"))
        .unwrap();
    assert_eq!(f.evidence[0].line, line);
    let on_that_line: Vec<&str> = r
        .findings
        .iter()
        .filter(|f| f.level != Level::Note && f.evidence.iter().any(|q| q.line == line))
        .map(|f| f.id.as_str())
        .collect();
    assert_eq!(
        on_that_line,
        ["log-hip-no-device"],
        "{}",
        check_build::render(&r)
    );
}

#[test]
fn cuda_build_that_found_no_device_is_one_finding_not_also_unrecognised() {
    let log = "ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected\n";
    let r = judge(log, None, None, &[]);
    let f = find(&r, "backend-init-failed");
    assert_eq!(f.level, Level::Error);
    assert!(f.reason.contains("no CUDA-capable device is detected"));
    assert!(
        !r.findings.iter().any(|f| f.id.starts_with("unrecognised-")),
        "the line is explained: {}",
        check_build::render(&r)
    );
    // A failure line nobody explains, beside it, is still named.
    let log = format!("{log}CUDA error: the launch timed out and was terminated\n");
    let r = judge(&log, None, None, &[]);
    assert!(has(&r, "backend-init-failed"));
    assert!(
        r.findings
            .iter()
            .any(|f| f.id.starts_with("unrecognised-") || f.id.starts_with("log-")),
        "{}",
        check_build::render(&r)
    );
}

#[test]
fn vulkan_build_is_not_judged_for_vmm() {
    let r = judge(&fixture("llama-16659-vulkan-b6795.txt"), None, None, &[]);
    assert_eq!(r.build.backend.as_deref(), Some("Vulkan"));
    assert!(has(&r, "backend-not-judged"));
    assert!(!has(&r, "vmm-unknown") && !has(&r, "archs-unknown"));
    assert_eq!(r.summary.exit_code, 0);
}

#[test]
fn unknown_text_reports_what_was_not_found() {
    let r = judge(
        "Segmentation fault (core dumped)\nhello | x : y\n",
        None,
        None,
        &[],
    );
    assert!(has(&r, "nothing-recognised"));
    // A crash line that no signature explains is named, and the verdict is not "no problems".
    assert!(has(&r, "unrecognised-process"));
    assert_eq!(r.summary.exit_code, 1);
    let what: Vec<&str> = r.not_found.iter().map(|m| m.what.as_str()).collect();
    assert!(what.iter().any(|w| w.contains("version")), "{what:?}");
    assert!(what.iter().any(|w| w.contains("system_info")), "{what:?}");
}

#[test]
fn human_report_names_build_machine_and_findings() {
    let text = fixture("h200-b11434-sdist-list-devices-verbose.txt");
    let r = judge(
        &text,
        Some(&h200s(
            pass(),
            smoke(SmokeOutcome::Hang, Some("kernel-write")),
        )),
        None,
        &[],
    );
    let out = check_build::render(&r);
    for want in [
        "backend     CUDA",
        "CUDA1 NVIDIA H200  sm_90  VMM: yes  143155 MiB",
        "VMM pool    compiled in",
        "this machine (from report test.json)",
        "error    built with VMM",
        "problems found (exit 1)",
    ] {
        assert!(out.contains(want), "{want:?} missing from:\n{out}");
    }
}

// ---------------------------------------------------------------------------------------------
// the command: binaries, logs, exit codes

#[test]
fn binary_that_hangs_on_list_devices_is_killed_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let bin = script(
        dir.path(),
        "llama-cli",
        "case \"$1\" in\n  --version) echo 'version: 0.6.0-dev (build 11434, commit 0123abcd)' >&2; echo 'built with GNU 13.3.0 for Linux x86_64' >&2 ;;\n  *) exec sleep 600 ;;\nesac",
    );
    let start = Instant::now();
    let out = gp()
        .args([
            "check-build",
            "--no-probe",
            "--json",
            "--timeout",
            "2",
            "--binary",
        ])
        .arg(&bin)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let took = start.elapsed();
    assert_eq!(
        out.status.code(),
        Some(1),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let v = json_of(&out);
    assert!(
        ids(&v).contains(&"list-devices-hang".to_string()),
        "{:?}",
        ids(&v)
    );
    let hang = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "list-devices-hang")
        .unwrap();
    assert_eq!(hang["severity"], "error");
    assert!(hang["reason"].as_str().unwrap().contains("within 2 s"));
    assert_eq!(v["summary"]["errors"], 1);
    assert_eq!(v["extracted"]["version"]["build"], 11434);
    let runs = v["input"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["args"][0], "--version");
    assert_eq!(runs[0]["exit_code"], 0);
    assert_eq!(runs[1]["args"][0], "--list-devices");
    assert_eq!(runs[1]["timed_out"], true);
}

#[test]
fn binary_that_hangs_on_version_is_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bin = script(dir.path(), "llama-server", "exec sleep 600");
    gp().args(["check-build", "--no-probe", "--timeout", "1", "--binary"])
        .arg(&bin)
        .timeout(Duration::from_secs(60))
        .assert()
        .code(2)
        .stderr(
            predicates::str::contains("`--version` did not finish within 1 s")
                .and(predicates::str::contains("fix:")),
        )
        .stdout("");
}

use predicates::prelude::*;

/// A FAKE binary that behaves like the real build-11434 llama-cli captured on the H200: the
/// device lines only with --verbose, on stderr, with the log prefix; the list on stdout.
fn fake_h200_cli(dir: &Path) -> PathBuf {
    let verbose = fixture("h200-b11434-sdist-list-devices-verbose.txt");
    let lines: Vec<&str> = verbose.lines().skip(1).collect();
    let (dev, list) = lines.split_at(3);
    let body = format!(
        "verbose=0\nfor a in \"$@\"; do\n  case \"$a\" in\n    --version) echo 'version: 0.6.0-dev (build 0, commit unknown)' >&2; echo 'built with GNU 13.3.0 for Linux x86_64' >&2; exit 0 ;;\n    --verbose) verbose=1 ;;\n    --list-devices)\n      if [ $verbose = 1 ]; then\n        cat >&2 <<'EOF'\n{}\nEOF\n      fi\n      cat <<'EOF'\n{}\nEOF\n      exit 0 ;;\n  esac\ndone\necho 'error: invalid argument' >&2\nexit 1",
        dev.join("\n"),
        list.join("\n")
    );
    script(dir, "llama-cli", &body)
}

#[test]
fn binary_device_lines_come_from_the_verbose_retry() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_h200_cli(dir.path());
    let rep = dir.path().join("report.json");
    std::fs::write(&rep, serde_json::to_string(&h200s(pass(), pass())).unwrap()).unwrap();
    let out = gp()
        .args(["check-build", "--json", "--llama-build", "11434", "--from"])
        .arg(&rep)
        .arg("--binary")
        .arg(&bin)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v = json_of(&out);
    assert_eq!(v["schema"], "gpuprobe.check-build/v1");
    let args: Vec<String> = v["input"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        args,
        ["--version", "--list-devices", "--verbose --list-devices"]
    );
    assert_eq!(v["extracted"]["devices"].as_array().unwrap().len(), 2);
    assert_eq!(v["extracted"]["devices"][0]["vmm"], true);
    assert_eq!(v["build"]["vmm"]["compiled"], true);
    assert_eq!(v["build"]["number"]["value"], 11434);
    assert_eq!(v["build"]["backend"], "CUDA");
    assert_eq!(v["machine"]["source"], format!("report {}", rep.display()));
    assert!(ids(&v).contains(&"vmm-ok".to_string()), "{:?}", ids(&v));
    assert_eq!(v["summary"]["exit_code"], 0);
}

#[test]
fn cpu_only_binary_says_no_gpu_devices() {
    let dir = tempfile::tempdir().unwrap();
    let text = fixture("cpu-b11434-sdist-version-and-list.txt");
    let lines: Vec<&str> = text.lines().skip(1).collect();
    let body = format!(
        "case \"$1\" in\n  --version) printf '%s\\n' '{}' '{}' >&2 ;;\n  --list-devices) printf '%s\\n' '{}' '{}' ;;\n  *) exit 1 ;;\nesac",
        lines[0], lines[1], lines[2], lines[3]
    );
    let bin = script(dir.path(), "llama-cli", &body);
    let out = gp()
        .args(["check-build", "--no-probe", "--binary"])
        .arg(&bin)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("none: CPU only (no GPU device listed)"),
        "{stdout}"
    );
    assert!(stdout.contains("the build has no GPU backend"), "{stdout}");
    // Two runs only: no --verbose retry for a build without a GPU backend.
    assert!(!stdout.contains("ran --verbose"), "{stdout}");
}

#[test]
fn bad_binaries_are_exit_2_naming_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("llama-cli");
    std::fs::write(&plain, "not a program").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    gp().args(["check-build", "--no-probe", "--binary"])
        .arg(&plain)
        .assert()
        .code(2)
        .stderr(
            predicates::str::contains("is not executable")
                .and(predicates::str::contains("chmod +x")),
        );
    gp().args(["check-build", "--no-probe", "--binary"])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicates::str::contains("is a directory"));
    gp().args([
        "check-build",
        "--no-probe",
        "--binary",
        "/nonexistent/build/bin/llama-cli",
    ])
    .assert()
    .code(2)
    .stderr(
        predicates::str::contains("--binary /nonexistent/build/bin/llama-cli")
            .and(predicates::str::contains("fix:")),
    );
    let other = script(dir.path(), "other", "echo hello");
    gp().args(["check-build", "--no-probe", "--binary"])
        .arg(&other)
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "printed no llama.cpp version line",
        ));
    let missing_lib = script(
        dir.path(),
        "llama-bench",
        "echo './llama-bench: error while loading shared libraries: libggml.so: cannot open shared object file: No such file or directory' >&2; exit 127",
    );
    gp().args(["check-build", "--no-probe", "--binary"])
        .arg(&missing_lib)
        .assert()
        .code(2)
        .stderr(
            predicates::str::contains("libggml.so")
                .and(predicates::str::contains("LD_LIBRARY_PATH")),
        );
}

#[test]
fn logs_from_a_file_and_from_stdin() {
    let path = fixture_path("lemonade-87-r9700-no-vmm.txt");
    let out = gp()
        .args(["check-build", "--no-probe", "--json", "--log"])
        .arg(&path)
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["build"]["vmm"]["compiled"], false);
    assert_eq!(v["build"]["flags"]["no_vmm"], true);
    assert_eq!(v["input"]["kind"], "log");
    let out = gp()
        .args([
            "check-build",
            "--no-probe",
            "--json",
            "--llama-build",
            "9000",
            "--log",
            "-",
        ])
        .write_stdin(fixture("h200-b11434-sdist-server-lv4.txt"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = json_of(&out);
    assert_eq!(v["build"]["archs"], serde_json::json!([900]));
    assert_eq!(v["extracted"]["version"]["reported_build"], 0);
}

#[test]
fn bad_inputs_are_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "\n").unwrap();
    gp().args(["check-build", "--no-probe", "--log"])
        .arg(&empty)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("is empty").and(predicates::str::contains("2>&1")));
    gp().args(["check-build", "--no-probe", "--log", "/nonexistent/out.txt"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--log /nonexistent/out.txt"));
    gp().args(["check-build", "--no-probe", "--llama-build", "0", "--log"])
        .arg(fixture_path("llama-28338-version-b10788.txt"))
        .assert()
        .code(2);
    let bad = dir.path().join("report.json");
    std::fs::write(&bad, "{").unwrap();
    gp().args(["check-build", "--from"])
        .arg(&bad)
        .arg("--log")
        .arg(fixture_path("llama-28338-version-b10788.txt"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("not JSON"));
}

/// llama.cpp's HIP builds leave the VMM pool out from build 4555 on (#11420 added
/// `GGML_HIP_NO_VMM`, default ON); 4548-4554 had it on by default. The hint follows the option
/// table, not the first release tag (b4557).
#[test]
fn vmm_unknown_hint_follows_the_hip_switch_era() {
    let text: String = fixture("llama-22013-rocm-gfx1201-gfx1103-b8821.txt")
        .lines()
        .filter(|l| !l.contains("version:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let hint = "HIP builds leave it out unless built with -DGGML_HIP_NO_VMM=OFF";
    for (build, expected) in [(4554, false), (4555, true), (4556, true), (8821, true)] {
        let r = judge(&text, None, Some(build), &[]);
        assert_eq!(
            r.build.number.value,
            Some(build),
            "the build given is the one judged"
        );
        let f = find(&r, "vmm-unknown");
        assert_eq!(
            f.reason.contains(hint),
            expected,
            "build {build}: {}",
            f.reason
        );
    }
}

// ---------------------------------------------------------------------------------------------
// what check-build accepts: a build folder, a program or a log, named or as PATH

#[test]
fn no_input_names_every_accepted_input() {
    let out = gp().args(["check-build", "--no-probe"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for accepted in [
        "check-build ./build",
        "--build-dir",
        "--binary",
        "--log out.txt",
        "--log -",
    ] {
        assert!(err.contains(accepted), "{accepted} missing from: {err}");
    }
    assert!(!err.contains("required"), "{err}");
}

#[test]
fn a_build_folder_runs_its_program_as_path_or_build_dir() {
    let dir = tempfile::tempdir().unwrap();
    let build = dir.path().join("build");
    std::fs::create_dir_all(build.join("bin")).unwrap();
    let cli = fake_h200_cli(&build.join("bin"));
    std::fs::write(build.join("CMakeCache.txt"), "GGML_CUDA:BOOL=ON\n").unwrap();
    for how in [
        vec![build.clone()],
        vec!["--build-dir".into(), build.clone()],
    ] {
        let out = gp()
            .args([
                "check-build",
                "--json",
                "--no-probe",
                "--llama-build",
                "11434",
            ])
            .args(&how)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{how:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v = json_of(&out);
        assert_eq!(v["input"]["kind"], "binary", "{how:?}");
        assert_eq!(v["input"]["path"], cli.display().to_string());
        assert_eq!(v["build"]["backend"], "CUDA");
    }
}

#[test]
fn a_file_as_path_is_a_program_when_executable_and_a_log_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let cli = fake_h200_cli(dir.path());
    let out = gp()
        .args([
            "check-build",
            "--json",
            "--no-probe",
            "--llama-build",
            "11434",
        ])
        .arg(&cli)
        .output()
        .unwrap();
    assert_eq!(json_of(&out)["input"]["kind"], "binary");
    let log = dir.path().join("server.log");
    std::fs::write(&log, fixture("lemonade-87-r9700-no-vmm.txt")).unwrap();
    let out = gp()
        .args(["check-build", "--json", "--no-probe"])
        .arg(&log)
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["input"]["kind"], "log");
    assert_eq!(v["build"]["vmm"]["compiled"], false);
}

#[test]
fn folders_without_a_program_are_exit_2_saying_what_was_looked_for() {
    let dir = tempfile::tempdir().unwrap();
    let out = gp()
        .args(["check-build", "--no-probe"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("llama-cli") && err.contains("cmake --build"),
        "{err}"
    );
    // llama.cpp's source folder given for its build folder.
    std::fs::write(dir.path().join("CMakeLists.txt"), "project(llama.cpp)\n").unwrap();
    let out = gp()
        .args(["check-build", "--no-probe", "--build-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("source folder") && err.contains("cmake -B"),
        "{err}"
    );
    gp().args(["check-build", "--no-probe", "/nonexistent/build"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("/nonexistent/build"));
}
