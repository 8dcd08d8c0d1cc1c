//! Resolver decisions, one or more cases per quirk record, through the library API.
//! Each case states what must be planned and would fail if the record or the rule broke.

use gpuprobe::evidence::{Evidence, Level, Record, Verdict};
use gpuprobe::llama::LlamaTarget;
use gpuprobe::plan::{Group, Mode, Plan};
use gpuprobe::platform::Os;
use gpuprobe::profiles::Knowledge;
use gpuprobe::report::{
    Backend, Device, DeviceSource, Host, PeerResult, Report, Smoke, SmokeOutcome, SmokeStage,
    Vendor,
};
use gpuprobe::resolve::{Devices, Request, resolve};

fn k() -> Knowledge {
    Knowledge::bundled().expect("bundled profiles load")
}

fn llama(build: Option<u64>) -> LlamaTarget {
    LlamaTarget {
        build,
        source: "test".into(),
        checkout: None,
    }
}

struct Case {
    targets: &'static str,
    rocm: Option<&'static str>,
    cuda: Option<&'static str>,
    build: Option<u64>,
    os: Os,
    machine: bool,
    evidence: Evidence,
}

impl Case {
    fn new(targets: &'static str) -> Self {
        Case {
            targets,
            rocm: None,
            cuda: None,
            build: Some(11434),
            os: Os::Linux,
            machine: false,
            evidence: Evidence::default(),
        }
    }
    /// The targets are the GPUs of one machine (`--machine`).
    fn machine(mut self) -> Self {
        self.machine = true;
        self
    }
    /// A measured record for `arch` on `series` (synthetic, in memory: a test input).
    fn evidence(
        mut self,
        arch: &str,
        series: &str,
        os: Os,
        level: Level,
        verdict: Verdict,
    ) -> Self {
        self.evidence
            .records
            .push(record(arch, series, os, level, verdict));
        self
    }
    fn rocm(mut self, v: &'static str) -> Self {
        self.rocm = Some(v);
        self
    }
    fn cuda(mut self, v: &'static str) -> Self {
        self.cuda = Some(v);
        self
    }
    fn build(mut self, b: u64) -> Self {
        self.build = Some(b);
        self
    }
    fn os(mut self, os: Os) -> Self {
        self.os = os;
        self
    }
    fn plan(&self) -> Plan {
        let k = k();
        let names: Vec<String> = if self.machine {
            self.targets
                .split(',')
                .map(|t| t.trim().to_string())
                .collect()
        } else {
            k.targets.expand(self.targets).unwrap()
        };
        let req = Request {
            devices: if self.machine {
                Devices::Machine(names)
            } else {
                Devices::Declared(names)
            },
            backend: None,
            llama: llama(self.build),
            rocm: self.rocm.map(|v| v.parse().unwrap()),
            cuda: self.cuda.map(|v| v.parse().unwrap()),
            rocm_source: "test".into(),
            cuda_source: "test".into(),
            os: self.os,
            env_set: vec![],
            force_no_vmm: false,
            evidence: self.evidence.clone(),
        };
        resolve(&k, &req).expect("plan")
    }
}

/// A synthetic measured record (test input, never shipped).
fn record(arch: &str, series: &str, os: Os, level: Level, verdict: Verdict) -> Record {
    let backend = if arch.starts_with("sm_") {
        Backend::Cuda
    } else {
        Backend::Hip
    };
    Record {
        arch: arch.into(),
        backend,
        series: Some(series.parse().unwrap()),
        os,
        level,
        verdict,
        origin: "synthetic test record".into(),
        detail: format!("synthetic {} {verdict:?}", level.as_str()),
    }
}

fn device(
    index: u32,
    backend: Backend,
    arch: &str,
    outcome: SmokeOutcome,
    stage: Option<&str>,
) -> Device {
    let mut d = Device::new(
        index,
        backend,
        format!("test {arch}"),
        arch,
        DeviceSource::ProbeProgram,
    );
    d.smoke = Smoke::with_outcome(outcome, "test");
    d.smoke.stage = stage.map(SmokeStage::from);
    d.vram_total_bytes = Some(32 << 30);
    d.integrated = Some(false);
    d.wave_size = Some(32);
    d.vmm_supported = Some(true);
    d.granularity_min = Some(4096);
    d.granularity_recommended = Some(2 << 20);
    d
}

fn report(devices: Vec<Device>, hip_runtime: Option<&str>) -> Report {
    let mut r = Report::new(Host {
        os: "linux".into(),
        kernel: None,
    });
    r.backends.push(gpuprobe::report::BackendStatus {
        backend: devices.first().map_or(Backend::Hip, |d| d.backend),
        status: gpuprobe::report::BackendState::Ok,
        detail: None,
        driver_version: None,
        runtime_version: hip_runtime.map(str::to_string),
        hint: None,
    });
    r.devices = devices;
    r
}

fn plan_measured(r: &Report) -> Plan {
    plan_measured_with(r, Evidence::default())
}

fn plan_measured_with(r: &Report, evidence: Evidence) -> Plan {
    let k = k();
    let req = Request {
        devices: Devices::Measured {
            report: r,
            mode: Mode::Report,
        },
        backend: None,
        llama: llama(Some(11434)),
        rocm: None,
        cuda: None,
        rocm_source: "test".into(),
        cuda_source: "test".into(),
        os: Os::Linux,
        env_set: vec![],
        force_no_vmm: false,
        evidence,
    };
    resolve(&k, &req).expect("plan")
}

/// The value of `name` in the group holding `target`.
fn flag(p: &Plan, target: &str, name: &str) -> Option<String> {
    let g = p
        .groups
        .iter()
        .find(|g| g.targets.iter().any(|t| t == target))?;
    g.flag(name).map(|f| f.value.clone())
}

fn flag_quirks(p: &Plan, target: &str, name: &str) -> Vec<String> {
    let g = p
        .groups
        .iter()
        .find(|g| g.targets.iter().any(|t| t == target))
        .unwrap();
    g.flag(name).map(|f| f.quirks.clone()).unwrap_or_default()
}

fn env(p: &Plan, target: &str, name: &str) -> Option<String> {
    let g = p
        .groups
        .iter()
        .find(|g| g.targets.iter().any(|t| t == target))?;
    g.env
        .iter()
        .find(|e| e.name == name && advice_holds_for(e, target))
        .map(|e| e.value.clone())
}

/// Advice that a shared build carries for some of its targets says so in `when`
/// ("the GPU is gfx1103 (...)"); other advice holds for every target of the group.
fn advice_holds_for(e: &gpuprobe::plan::EnvAdvice, target: &str) -> bool {
    match e
        .when
        .as_deref()
        .and_then(|w| w.strip_prefix("the GPU is "))
    {
        Some(rest) => rest
            .split(" (")
            .next()
            .unwrap_or("")
            .split(", ")
            .any(|t| t == target),
        None => true,
    }
}

/// The record's text is in the plan: a warning, or a note the record asked for (`level =
/// "note"`; a "may apply" note does not count). Which of the two is `severity_policy` below.
fn told(p: &Plan, id: &str) -> bool {
    in_warnings(p, id)
        || p.notes
            .iter()
            .any(|n| n.quirks.iter().any(|q| q == id) && n.message.starts_with(&format!("{id}: ")))
}

fn in_warnings(p: &Plan, id: &str) -> bool {
    p.warnings.iter().any(|n| n.quirks.iter().any(|q| q == id))
}

fn noted(p: &Plan, id: &str) -> bool {
    p.notes.iter().any(|n| n.quirks.iter().any(|q| q == id))
}

fn all_args(p: &Plan) -> Vec<String> {
    p.groups.iter().flat_map(|g| g.cmake_args()).collect()
}

// ---- principles -------------------------------------------------------------------------

#[test]
fn never_native_never_use_vmm_never_p2p_zero() {
    for (targets, rocm, cuda) in [
        (
            "gfx1151,gfx1150,gfx120X,gfx110X,gfx103X,gfx90a,gfx908",
            Some("7.14.0"),
            None,
        ),
        ("gfx1201", None, None),
        ("sm_75,sm_86,sm_90,sm_120", None, Some("12.8")),
    ] {
        let mut c = Case::new(targets);
        c.rocm = rocm;
        c.cuda = cuda;
        let p = c.plan();
        for a in all_args(&p) {
            assert!(!a.contains("native"), "{a}");
            assert!(!a.contains("GGML_USE_VMM"), "{a}");
        }
        for g in &p.groups {
            assert!(
                !g.env
                    .iter()
                    .any(|e| e.name == "GGML_CUDA_P2P" && e.value == "0")
            );
        }
    }
}

#[test]
fn q19_explicit_architectures_are_listed() {
    let p = Case::new("gfx110X").rocm("6.4").plan();
    // The family expands in order, in one build: the APU's runtime advice (Q11) does not change
    // what is compiled, so gfx1103 shares the build and keeps its advice as its own.
    assert_eq!(p.groups.len(), 1, "{:?}", p.groups);
    assert_eq!(
        flag(&p, "gfx1103", "GPU_TARGETS").as_deref(),
        Some("gfx1100;gfx1101;gfx1102;gfx1103")
    );
    assert_eq!(
        env(&p, "gfx1103", "GGML_CUDA_ENABLE_UNIFIED_MEMORY").as_deref(),
        Some("1")
    );
    assert_eq!(env(&p, "gfx1100", "GGML_CUDA_ENABLE_UNIFIED_MEMORY"), None);
    let p = Case::new("sm_86,90").cuda("12.8").plan();
    assert_eq!(
        flag(&p, "sm_86", "CMAKE_CUDA_ARCHITECTURES").as_deref(),
        Some("86;90")
    );
    assert_eq!(flag(&p, "sm_86", "GGML_CUDA").as_deref(), Some("ON"));
    assert!(flag_quirks(&p, "sm_86", "CMAKE_CUDA_ARCHITECTURES").contains(&"Q19".to_string()));
}

#[test]
fn cuda_and_hip_in_one_build_is_refused() {
    let k = k();
    let req = Request {
        devices: Devices::Declared(k.targets.expand("gfx1100,sm_90").unwrap()),
        backend: None,
        llama: llama(Some(11434)),
        rocm: None,
        cuda: None,
        rocm_source: "t".into(),
        cuda_source: "t".into(),
        os: Os::Linux,
        env_set: vec![],
        force_no_vmm: false,
        evidence: Evidence::default(),
    };
    let e = resolve(&k, &req).unwrap_err();
    assert_eq!(e.exit_code(), 1);
    assert!(e.to_string().contains("--backend"), "{e}");
}

#[test]
fn toolkit_that_cannot_build_a_target_is_refused_with_the_fix() {
    let p = Case::new("sm_70,sm_90").cuda("13.0").plan();
    assert!(p.refused());
    let msg = &p.refusals[0].message;
    assert!(msg.contains("sm_70") && msg.contains("12"), "{msg}");
    let p = Case::new("gfx1152").rocm("7.12").plan();
    assert!(p.refused(), "gfx1152 needs ROCm 7.13+ (Q20)");
    assert!(!Case::new("gfx1152").rocm("7.13").plan().refused());
}

#[test]
fn unknown_targets_suggest_the_nearest() {
    let e = k().targets.expand("gfx1210").unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(
        e.to_string().contains("did you mean") && e.to_string().contains("gfx1200"),
        "{e}"
    );
    let e = k().targets.expand("sm_91").unwrap_err();
    assert!(e.to_string().contains("sm_90"), "{e}");
}

#[test]
fn flags_absent_from_the_build_are_never_emitted() {
    let k = k();
    for build in [4500u64, 4550, 4555, 5000, 9093, 10114, 10115, 11434] {
        let p = Case::new("gfx1100,gfx1151").rocm("6.4").build(build).plan();
        for g in &p.groups {
            for f in &g.flags {
                if f.name.starts_with("CMAKE_") {
                    continue;
                }
                assert!(
                    k.options.declared(&f.name, build),
                    "build {build}: {} is not declared",
                    f.name
                );
            }
        }
    }
}

// ---- HIP VMM ------------------------------------------------------------------------------

#[test]
fn q1_hip_vmm_only_on_a_measured_pass_for_the_same_arch_series_and_os() {
    // No evidence: llama.cpp's default, whatever the ROCm version.
    let p = Case::new("gfx90a").rocm("7.14.0").plan();
    assert_eq!(flag(&p, "gfx90a", "GGML_HIP_NO_VMM").as_deref(), Some("ON"));
    let f = p.groups[0].flag("GGML_HIP_NO_VMM").unwrap();
    assert!(f.quirks.contains(&"Q1".to_string()), "{:?}", f.quirks);
    let lift = f.lift.as_deref().unwrap();
    assert!(
        lift.contains("gpuprobe detect --json") && lift.contains("--from"),
        "{lift}"
    );
    // A smoke pass on the same arch, series and OS lifts it.
    let ok = Case::new("gfx90a")
        .rocm("7.14.0")
        .evidence("gfx90a", "7.14", Os::Linux, Level::Smoke, Verdict::Pass)
        .plan();
    assert_eq!(
        flag(&ok, "gfx90a", "GGML_HIP_NO_VMM").as_deref(),
        Some("OFF")
    );
    // ...but not a pass on another series, OS or architecture, nor the attribute alone.
    for (arch, series, os, level) in [
        ("gfx90a", "7.13", Os::Linux, Level::Smoke),
        ("gfx90a", "7.14", Os::Windows, Level::Smoke),
        ("gfx942", "7.14", Os::Linux, Level::Smoke),
        ("gfx90a", "7.14", Os::Linux, Level::Attribute),
    ] {
        let p = Case::new("gfx90a")
            .rocm("7.14.0")
            .evidence(arch, series, os, level, Verdict::Pass)
            .plan();
        assert_eq!(
            flag(&p, "gfx90a", "GGML_HIP_NO_VMM").as_deref(),
            Some("ON"),
            "{arch} {series} {os:?} {level:?}"
        );
    }
    // A failure on record for the same key wins over a pass.
    let p = Case::new("gfx90a")
        .rocm("7.14.0")
        .evidence("gfx90a", "7.14", Os::Linux, Level::Workload, Verdict::Pass)
        .evidence("gfx90a", "7.14", Os::Linux, Level::Smoke, Verdict::Fail)
        .plan();
    let f = p.groups[0].flag("GGML_HIP_NO_VMM").unwrap();
    assert_eq!(f.value, "ON");
    assert!(f.reason.contains("measured failure"), "{}", f.reason);
}

#[test]
fn unknown_rocm_keeps_the_legacy_pool_and_asks_for_the_version() {
    let p = Case::new("gfx90a")
        .evidence("gfx90a", "7.14", Os::Linux, Level::Workload, Verdict::Pass)
        .plan();
    let f = p.groups[0].flag("GGML_HIP_NO_VMM").unwrap();
    assert_eq!(f.value, "ON");
    assert!(
        f.lift.as_deref().unwrap().contains("--rocm"),
        "{:?}",
        f.lift
    );
}

#[test]
fn q22_hip_vmm_is_denied_until_a_measured_pass_on_every_rocm() {
    // AMD named ROCm 7.0 as the target of a fix, not a release carrying one: open-ended, lifted by
    // a measured pass on the same series (the smoke test unmaps mapping by mapping, as #285 fails).
    let p = Case::new("gfx90a").rocm("6.4").plan();
    let f = p.groups[0].flag("GGML_HIP_NO_VMM").unwrap();
    assert_eq!(f.value, "ON");
    assert!(f.quirks.contains(&"Q22".to_string()));
    let p = Case::new("gfx90a").rocm("7.2.1").plan();
    assert!(flag_quirks(&p, "gfx90a", "GGML_HIP_NO_VMM").contains(&"Q22".to_string()));
    let p = Case::new("gfx90a")
        .rocm("6.4")
        .evidence("gfx90a", "6.4", Os::Linux, Level::Smoke, Verdict::Pass)
        .plan();
    assert_eq!(p.groups[0].flag("GGML_HIP_NO_VMM").unwrap().value, "OFF");
}

#[test]
fn q3_offset_mapping_needs_a_smoke_pass_on_every_rocm_from_7_0() {
    let p = Case::new("gfx1100").rocm("7.2.1").plan();
    assert!(flag_quirks(&p, "gfx1100", "GGML_HIP_NO_VMM").contains(&"Q3".to_string()));
    // 7.14 was only reported clean; no release carries the fix, so it stays in the range.
    let p = Case::new("gfx1100").rocm("7.14.0").plan();
    assert!(flag_quirks(&p, "gfx1100", "GGML_HIP_NO_VMM").contains(&"Q3".to_string()));
    let p = Case::new("gfx1100").rocm("6.4").plan();
    assert!(!flag_quirks(&p, "gfx1100", "GGML_HIP_NO_VMM").contains(&"Q3".to_string()));
}

#[test]
fn q4_q21_gfx12_needs_an_inference_pass_a_smoke_or_workload_pass_is_not_enough() {
    let p = Case::new("gfx1201").rocm("7.2.1").plan();
    let q = flag_quirks(&p, "gfx1201", "GGML_HIP_NO_VMM");
    assert!(
        q.contains(&"Q4".to_string()) && q.contains(&"Q21".to_string()),
        "{q:?}"
    );
    // This machine's smoke test passed: still the legacy pool (Q21 needs a whole model run).
    let r = report(
        vec![device(0, Backend::Hip, "gfx1201", SmokeOutcome::Pass, None)],
        Some("7.2.26015"),
    );
    let p = plan_measured(&r);
    let f = p.groups[0].flag("GGML_HIP_NO_VMM").unwrap();
    assert_eq!(f.value, "ON", "{}", f.reason);
    assert!(
        f.lift.as_deref().unwrap().contains("--exercise inference"),
        "{:?}",
        f.lift
    );
    // The operator tests passing on the same series and OS is not enough either.
    let pass = |level| {
        let mut ev = Evidence::default();
        ev.records
            .push(record("gfx1201", "7.2", Os::Linux, level, Verdict::Pass));
        plan_measured_with(&r, ev)
    };
    assert_eq!(
        flag(&pass(Level::Workload), "gfx1201", "GGML_HIP_NO_VMM").as_deref(),
        Some("ON")
    );
    // An inference pass on the same series and OS lifts it.
    let p = pass(Level::Inference);
    assert_eq!(
        flag(&p, "gfx1201", "GGML_HIP_NO_VMM").as_deref(),
        Some("OFF"),
        "{:?}",
        p.groups
    );
}

#[test]
fn q14_gfx906_warns_from_rocm_6_4_and_keeps_vmm_by_evidence_only() {
    let r = report(
        vec![device(0, Backend::Hip, "gfx906", SmokeOutcome::Pass, None)],
        Some("6.4.1"),
    );
    let p = plan_measured(&r);
    // A smoke pass on this machine lifts Q22 (open-ended, liftable) on ROCm 6.4 too.
    assert_eq!(
        flag(&p, "gfx906", "GGML_HIP_NO_VMM").as_deref(),
        Some("OFF")
    );
    assert!(flag(&p, "gfx906", "GGML_HIP_NO_VMM").is_some());
    assert!(told(&p, "Q14"));
    assert!(!told(&Case::new("gfx906").rocm("6.3").plan(), "Q14"));
    // ROCm 7.14 with this machine's smoke pass: Q14 warns but does not deny.
    let r = report(
        vec![device(0, Backend::Hip, "gfx906", SmokeOutcome::Pass, None)],
        Some("7.14.0"),
    );
    let p = plan_measured(&r);
    assert_eq!(
        flag(&p, "gfx906", "GGML_HIP_NO_VMM").as_deref(),
        Some("OFF"),
        "{:#?}",
        p.groups[0].flags
    );
    assert!(told(&p, "Q14"));
}

#[test]
fn measured_failures_keep_the_legacy_pool_with_the_measured_reason() {
    for (outcome, stage, word) in [
        (SmokeOutcome::Fail, Some("set_access"), "set_access"),
        (SmokeOutcome::Hang, Some("write"), "hang"),
        (SmokeOutcome::Crash, Some("set_access"), "crash"),
        (SmokeOutcome::Fail, Some("verify"), "verify"),
    ] {
        let r = report(
            vec![device(0, Backend::Hip, "gfx1100", outcome, stage)],
            Some("7.14.0"),
        );
        let p = plan_measured(&r);
        let g = &p.groups[0];
        let f = g.flag("GGML_HIP_NO_VMM").unwrap();
        assert_eq!(f.value, "ON");
        assert!(f.reason.contains(word), "{}", f.reason);
    }
}

#[test]
fn mixed_vmm_decisions_become_separate_groups() {
    let p = Case::new("gfx1151,gfx1150,gfx120X,gfx110X,gfx103X,gfx90a,gfx908")
        .rocm("7.14.0")
        .evidence("gfx90a", "7.14", Os::Linux, Level::Smoke, Verdict::Pass)
        .plan();
    let names: Vec<&String> = p.groups.iter().map(|g| &g.name).collect();
    let mut sorted = names.clone();
    sorted.dedup();
    assert_eq!(names.len(), sorted.len(), "group names are unique");
    let vmm: Vec<&Group> = p.groups.iter().filter(|g| g.vmm).collect();
    assert_eq!(vmm.len(), 1, "{names:?}");
    assert_eq!(vmm[0].targets, vec!["gfx90a".to_string()]);
    assert_eq!(
        flag(&p, "gfx908", "GGML_HIP_NO_VMM").as_deref(),
        Some("ON"),
        "gfx908 has no pass on record"
    );
}

#[test]
fn builds_4548_to_4554_switch_hip_vmm_with_ggml_cuda_no_vmm() {
    // HIP VMM was on by default there: keeping the legacy pool needs GGML_CUDA_NO_VMM=ON.
    let p = Case::new("gfx1101").rocm("7.14.0").build(4550).plan();
    assert_eq!(
        flag(&p, "gfx1101", "GGML_CUDA_NO_VMM").as_deref(),
        Some("ON")
    );
    assert_eq!(flag(&p, "gfx1101", "GGML_HIP_NO_VMM"), None);
    let p = Case::new("gfx1101")
        .rocm("7.14.0")
        .build(4550)
        .evidence("gfx1101", "7.14", Os::Linux, Level::Smoke, Verdict::Pass)
        .plan();
    assert_eq!(
        flag(&p, "gfx1101", "GGML_CUDA_NO_VMM").as_deref(),
        Some("OFF")
    );
    // From 4555 GGML_HIP_NO_VMM switches it.
    let p = Case::new("gfx1101").rocm("7.14.0").build(4555).plan();
    assert_eq!(
        flag(&p, "gfx1101", "GGML_HIP_NO_VMM").as_deref(),
        Some("ON")
    );
    assert_eq!(flag(&p, "gfx1101", "GGML_CUDA_NO_VMM"), None);
}

#[test]
fn before_build_4548_hip_has_no_vmm_pool_and_no_vmm_flag() {
    let p = Case::new("gfx1100").rocm("6.4").build(4500).plan();
    assert_eq!(flag(&p, "gfx1100", "GGML_HIP_NO_VMM"), None);
    assert_eq!(flag(&p, "gfx1100", "GGML_CUDA_NO_VMM"), None);
    assert!(!p.groups[0].vmm);
    assert!(
        p.notes
            .iter()
            .any(|n| n.message.contains("no VMM pool for HIP")),
        "{:?}",
        p.notes
    );
}

// ---- other AMD quirks -------------------------------------------------------------------------

#[test]
fn q2_and_q2_old_build_warn_for_legacy_pool_builds() {
    let p = Case::new("gfx1100").rocm("7.2").build(8500).plan();
    assert!(told(&p, "Q2") && told(&p, "Q2-old-build") && told(&p, "Q2-pre-9489"));
    let p = Case::new("gfx1100").rocm("7.2").build(9000).plan();
    assert!(!told(&p, "Q2-old-build") && told(&p, "Q2-pre-9489"));
    let p = Case::new("gfx1100").rocm("7.2").build(11434).plan();
    assert!(told(&p, "Q2") && !told(&p, "Q2-old-build") && !told(&p, "Q2-pre-9489"));
    // The text fits the build: nothing about later builds on the newest one.
    let q2 = p.notes.iter().find(|n| n.quirks == ["Q2"]).unwrap();
    assert!(!q2.message.contains("9489"), "{}", q2.message);
    let p = Case::new("gfx90a")
        .rocm("7.14")
        .evidence("gfx90a", "7.14", Os::Linux, Level::Smoke, Verdict::Pass)
        .plan();
    assert!(!told(&p, "Q2"), "a VMM build is not exposed to Q2");
}

#[test]
fn q6_graphs_env_advice_only_for_legacy_pool_builds_from_8893() {
    let p = Case::new("gfx1100").rocm("7.2").build(9000).plan();
    assert_eq!(
        env(&p, "gfx1100", "GGML_CUDA_DISABLE_GRAPHS").as_deref(),
        Some("1")
    );
    let g = &p.groups[0];
    assert!(
        g.env
            .iter()
            .find(|e| e.name == "GGML_CUDA_DISABLE_GRAPHS")
            .unwrap()
            .when
            .is_some()
    );
    let p = Case::new("gfx1100").rocm("7.2").build(8800).plan();
    assert_eq!(env(&p, "gfx1100", "GGML_CUDA_DISABLE_GRAPHS"), None);
}

#[test]
fn q6_cuda_legacy_pool_plans_get_the_graphs_advice_too() {
    // Jetson keeps the legacy pool (Q15-jetson): the shared pool/graph bug applies.
    let p = Case::new("sm_87").cuda("12.8").build(11434).plan();
    assert_eq!(flag(&p, "sm_87", "GGML_CUDA_NO_VMM").as_deref(), Some("ON"));
    assert_eq!(
        env(&p, "sm_87", "GGML_CUDA_DISABLE_GRAPHS").as_deref(),
        Some("1")
    );
    assert!(p.groups[0].env[0].quirks.contains(&"Q6-cuda".to_string()));
    // Which records ask for graphs off (Q28 does too, for every CUDA build before 10531).
    let graphs_off_by = |build: u64| -> Vec<String> {
        let p = Case::new("sm_87").cuda("12.8").build(build).plan();
        p.groups[0]
            .env
            .iter()
            .filter(|e| e.name == "GGML_CUDA_DISABLE_GRAPHS")
            .flat_map(|e| e.quirks.clone())
            .collect()
    };
    assert!(graphs_off_by(8900).contains(&"Q6-cuda".to_string()));
    assert!(
        !graphs_off_by(8800).contains(&"Q6-cuda".to_string()),
        "before the flush-and-retry path (8863) the pool never frees under a graph"
    );
    // A VMM build is not exposed.
    let p = Case::new("sm_90").cuda("12.8").plan();
    assert!(p.groups[0].env.is_empty());
}

#[test]
fn q7_multi_gpu_amd_sets_no_peer_copy_and_is_only_a_note_when_unknown() {
    let r = report(
        vec![
            device(0, Backend::Hip, "gfx1201", SmokeOutcome::Pass, None),
            device(1, Backend::Hip, "gfx1201", SmokeOutcome::Pass, None),
        ],
        Some("7.14.0"),
    );
    let p = plan_measured(&r);
    assert_eq!(
        flag(&p, "gfx1201", "GGML_CUDA_NO_PEER_COPY").as_deref(),
        Some("ON")
    );
    let p = Case::new("gfx1201").rocm("7.14.0").plan();
    assert_eq!(flag(&p, "gfx1201", "GGML_CUDA_NO_PEER_COPY"), None);
    assert!(noted(&p, "Q7-linux-rdna4"));
    // On Windows it is Q7 (cross-device synchronisation), on Linux Q7-linux-rdna4.
    let p = Case::new("gfx1201").rocm("7.14.0").os(Os::Windows).plan();
    assert!(noted(&p, "Q7") && !noted(&p, "Q7-linux-rdna4"));
    // Scoped to the RDNA 2/RDNA 4 GPUs the reports cover; every AMD multi-GPU box gets -sm layer.
    let p = Case::new("gfx942,gfx942").rocm("7.14.0").machine().plan();
    assert_eq!(flag(&p, "gfx942", "GGML_CUDA_NO_PEER_COPY"), None);
    assert!(!told(&p, "Q7") && told(&p, "Q7-split"));
    let sm = p.notes.iter().find(|n| n.quirks == ["Q7-split"]).unwrap();
    assert!(sm.message.contains("-sm layer"), "{}", sm.message);
}

#[test]
fn a_declared_machine_makes_machine_quirks_definite_and_one_build() {
    // dGPU + iGPU in one box: Q8 applies (not "may apply"), one build for both.
    let p = Case::new("gfx1201,gfx1103").rocm("7.14.0").machine().plan();
    assert_eq!(p.mode, Mode::Machine);
    assert!(told(&p, "Q8"), "{:?}", p.notes);
    assert_eq!(p.groups.len(), 1, "{:?}", p.groups);
    assert_eq!(p.groups[0].targets, vec!["gfx1201", "gfx1103"]);
    // The same targets declared for unknown machines: Q8 unknown; their flags agree, so one
    // build, with the APU's advice for the APU only.
    let p = Case::new("gfx1201,gfx1103").rocm("7.14.0").plan();
    assert!(!told(&p, "Q8") && noted(&p, "Q8"));
    assert_eq!(p.groups.len(), 1, "{:?}", p.groups);
    // Two of a kind: multi-GPU is known.
    let p = Case::new("gfx1201,gfx1201").rocm("7.14.0").machine().plan();
    assert_eq!(
        flag(&p, "gfx1201", "GGML_CUDA_NO_PEER_COPY").as_deref(),
        Some("ON")
    );
    let p = Case::new("gfx1201").rocm("7.14.0").machine().plan();
    assert_eq!(flag(&p, "gfx1201", "GGML_CUDA_NO_PEER_COPY"), None);
    assert!(!noted(&p, "Q7"), "one GPU: multi-GPU is known to be false");
    // One build: the legacy pool when any GPU of the machine needs it.
    let p = Case::new("gfx90a,gfx908")
        .rocm("7.14.0")
        .machine()
        .evidence("gfx90a", "7.14", Os::Linux, Level::Smoke, Verdict::Pass)
        .plan();
    assert_eq!(p.groups.len(), 1);
    let f = p.groups[0].flag("GGML_HIP_NO_VMM").unwrap();
    assert_eq!(f.value, "ON");
    assert!(f.reason.starts_with("gfx908:"), "{}", f.reason);
}

#[test]
fn q8_igpu_next_to_dgpu_warns() {
    let mut igpu = device(1, Backend::Hip, "gfx1036", SmokeOutcome::Pass, None);
    igpu.integrated = Some(true);
    let r = report(
        vec![
            device(0, Backend::Hip, "gfx1201", SmokeOutcome::Pass, None),
            igpu,
        ],
        Some("6.4.1"),
    );
    assert!(told(&plan_measured(&r), "Q8"));
}

#[test]
fn q9_hsa_override_set_warns() {
    let k = k();
    let req = Request {
        devices: Devices::Declared(vec!["gfx1100".into()]),
        backend: None,
        llama: llama(Some(11434)),
        rocm: Some("6.4".parse().unwrap()),
        cuda: None,
        rocm_source: "t".into(),
        cuda_source: "t".into(),
        os: Os::Linux,
        env_set: vec!["HSA_OVERRIDE_GFX_VERSION".into()],
        force_no_vmm: false,
        evidence: Evidence::default(),
    };
    assert!(told(&resolve(&k, &req).unwrap(), "Q9"));
    assert!(!told(&Case::new("gfx1100").rocm("6.4").plan(), "Q9"));
}

#[test]
fn q10_strix_nightly_range_warns_on_linux_only() {
    assert!(told(
        &Case::new("gfx1151").rocm("7.14.0a20260610").plan(),
        "Q10"
    ));
    assert!(!told(
        &Case::new("gfx1151").rocm("7.14.0a20260608").plan(),
        "Q10"
    ));
    // Fixed in 7.14.0 (rocm-systems#7053): the final release and later are clean.
    for v in ["7.14.0", "7.14.1", "7.15.0a20260701"] {
        assert!(!told(&Case::new("gfx1151").rocm(v).plan(), "Q10"), "{v}");
    }
    assert!(told(
        &Case::new("gfx1201").rocm("7.14.0a20260612").plan(),
        "Q10"
    ));
    assert!(!told(
        &Case::new("gfx1151")
            .rocm("7.14.0a20260610")
            .os(Os::Windows)
            .plan(),
        "Q10"
    ));
}

#[test]
fn q11_apus_get_unified_memory_advice_discrete_gpus_do_not() {
    let p = Case::new("gfx1151,gfx1100").rocm("6.4").build(9800).plan();
    assert_eq!(
        env(&p, "gfx1151", "GGML_CUDA_ENABLE_UNIFIED_MEMORY").as_deref(),
        Some("1")
    );
    assert_eq!(env(&p, "gfx1100", "GGML_CUDA_ENABLE_UNIFIED_MEMORY"), None);
}

#[test]
fn q12_uma_with_the_2d_copy_fast_path_warns_from_9827() {
    assert!(told(
        &Case::new("gfx1151").rocm("6.4").build(9900).plan(),
        "Q12"
    ));
    assert!(!told(
        &Case::new("gfx1151").rocm("6.4").build(9800).plan(),
        "Q12"
    ));
}

#[test]
fn q12_withdraws_q11s_unified_memory_where_it_garbles_output() {
    let p = Case::new("gfx1151").rocm("7.14.0").build(11434).plan();
    // Q11's advice (and its warning, which recommends it) is withdrawn; Q12 says what instead.
    assert!(!told(&p, "Q11") && told(&p, "Q12"));
    assert_eq!(env(&p, "gfx1151", "GGML_CUDA_ENABLE_UNIFIED_MEMORY"), None);
    let q12 = p.notes.iter().find(|n| n.quirks == ["Q12"]).unwrap();
    assert!(q12.message.contains("carve-out"), "{}", q12.message);
    let p = Case::new("gfx1151").rocm("7.14.0").build(9826).plan();
    assert_eq!(
        env(&p, "gfx1151", "GGML_CUDA_ENABLE_UNIFIED_MEMORY").as_deref(),
        Some("1")
    );
}

#[test]
fn q13_rocwmma_off_for_rdna3_before_its_removal_and_absent_after() {
    let p = Case::new("gfx1100").rocm("6.4").build(9601).plan();
    assert_eq!(
        flag(&p, "gfx1100", "GGML_HIP_ROCWMMA_FATTN").as_deref(),
        Some("OFF")
    );
    let p = Case::new("gfx1100").rocm("6.4").build(10200).plan();
    assert_eq!(flag(&p, "gfx1100", "GGML_HIP_ROCWMMA_FATTN"), None);
}

#[test]
fn q18_windows_hip_warns_about_the_runner() {
    let p = Case::new("gfx1100").rocm("6.4").os(Os::Windows).plan();
    assert!(told(&p, "Q18"));
    assert!(!told(&Case::new("gfx1100").rocm("6.4").plan(), "Q18"));
    // The clash is VS 2026's MSVC v145; the VS 2022 toolset is the way out, not a dead end.
    let q18 = p
        .warnings
        .iter()
        .find(|n| n.quirks.iter().any(|q| q == "Q18"))
        .unwrap();
    assert!(q18.message.contains("v145"), "{}", q18.message);
    assert!(q18.message.contains("VS 2022 toolset"), "{}", q18.message);
    assert!(!q18.message.contains("14.40 or later"), "{}", q18.message);
    assert_eq!(
        k().quirk("Q18").unwrap().effect.runner.as_deref(),
        Some("windows-2022")
    );
}

#[test]
fn q26_sm_tensor_peer_access_ends_at_build_9875() {
    let at = |build: u64| {
        Case::new("sm_75,sm_75")
            .machine()
            .cuda("12.4")
            .build(build)
            .plan()
    };
    let p = at(9600);
    assert!(told(&p, "Q26"));
    let w = p
        .warnings
        .iter()
        .find(|n| n.quirks.iter().any(|q| q == "Q26"))
        .unwrap();
    assert!(w.message.contains("9875") && w.message.contains("GGML_CUDA_NO_VMM=ON"));
    assert!(
        !all_args(&p).iter().any(|a| a == "-DGGML_CUDA_NO_VMM=ON"),
        "a warning, not a flag: the workload is not visible to the plan"
    );
    assert!(told(&at(9874), "Q26"));
    assert!(!told(&at(9875), "Q26"), "the first build with #24491");
    assert!(!told(&at(8737), "Q26"), "before -sm tensor existed");
    // One GPU, or GPUs that are not one machine (unknown): never definite.
    assert!(!told(
        &Case::new("sm_75").cuda("12.4").build(9600).plan(),
        "Q26"
    ));
    let p = Case::new("sm_75").cuda("12.4").build(9600).plan();
    assert!(noted(&p, "Q26") || !told(&p, "Q26"));
}

#[test]
fn q25_cuda_below_11_7_warns_for_targets_older_toolkits_could_build() {
    assert!(told(&Case::new("sm_86").cuda("11.5").plan(), "Q25"));
    assert!(told(&Case::new("sm_75").cuda("11.6").plan(), "Q25"));
    assert!(!told(&Case::new("sm_86").cuda("11.7").plan(), "Q25"));
    assert!(!told(&Case::new("sm_86").cuda("12.8").plan(), "Q25"));
    // sm_89 and later already need 11.8 from the target table: a refusal, not this warning.
    let p = Case::new("sm_89").cuda("11.5").plan();
    assert!(p.refused());
    assert!(!told(&p, "Q25"));
    // Unknown toolkit: said as a possibility, never as a warning.
    let p = Case::new("sm_86").plan();
    assert!(noted(&p, "Q25") && !told(&p, "Q25"));
}

#[test]
fn q28_graphs_with_speculative_decoding_advice_before_build_10531() {
    let p = Case::new("sm_70").cuda("12.4").build(10107).plan();
    assert!(told(&p, "Q28"));
    assert_eq!(
        env(&p, "sm_70", "GGML_CUDA_DISABLE_GRAPHS").as_deref(),
        Some("1")
    );
    let p = Case::new("sm_70").cuda("12.4").build(10531).plan();
    assert!(!told(&p, "Q28"));
    assert_eq!(env(&p, "sm_70", "GGML_CUDA_DISABLE_GRAPHS"), None);
    assert!(!told(
        &Case::new("gfx1100").rocm("7.2.1").build(10107).plan(),
        "Q28"
    ));
}

#[test]
fn q20_gfx1152_override_advice_on_old_rocm() {
    // ROCm < 7.13 cannot build gfx1152 at all: refused, and the Q20 advice says what helps.
    let p = Case::new("gfx1152").rocm("7.2").plan();
    assert!(p.refused());
    assert!(told(&p, "Q20"));
    // 7.13 ships gfx1152 code objects: Q20 no longer applies there. Before it, the override
    // stopgap needs gfx1150 in the same build, so it is not advised for a build without it.
    let p = Case::new("gfx1152").rocm("7.13").plan();
    assert!(!told(&p, "Q20"));
    assert_eq!(env(&p, "gfx1152", "HSA_OVERRIDE_GFX_VERSION"), None);
    let p = Case::new("gfx1152").rocm("7.12").plan();
    assert!(
        p.notes.iter().any(|n| n.message.contains("add gfx1150")),
        "{:?}",
        p.notes
    );
    let p = Case::new("gfx1152,gfx1150").rocm("7.12").machine().plan();
    assert_eq!(
        env(&p, "gfx1152", "HSA_OVERRIDE_GFX_VERSION").as_deref(),
        Some("11.5.0")
    );
    assert!(!told(&Case::new("gfx1152").rocm("7.14").plan(), "Q20"));
}

// ---- NVIDIA quirks -----------------------------------------------------------------------------

#[test]
fn q15_reservation_failure_denies_cuda_vmm_but_declared_targets_keep_it() {
    let r = report(
        vec![device(
            0,
            Backend::Cuda,
            "sm_86",
            SmokeOutcome::Fail,
            Some("reserve"),
        )],
        None,
    );
    let p = plan_measured(&r);
    assert_eq!(flag(&p, "sm_86", "GGML_CUDA_NO_VMM").as_deref(), Some("ON"));
    assert!(flag_quirks(&p, "sm_86", "GGML_CUDA_NO_VMM").contains(&"Q15".to_string()));
    let p = Case::new("sm_86").cuda("12.8").plan();
    assert_eq!(
        flag(&p, "sm_86", "GGML_CUDA_NO_VMM").as_deref(),
        Some("OFF")
    );
}

#[test]
fn q15_jetson_and_q15_windows() {
    let p = Case::new("sm_87").cuda("12.8").plan();
    assert_eq!(flag(&p, "sm_87", "GGML_CUDA_NO_VMM").as_deref(), Some("ON"));
    let p = Case::new("sm_89").cuda("12.8").os(Os::Windows).plan();
    assert!(told(&p, "Q15-windows"));
    assert_eq!(
        flag(&p, "sm_89", "GGML_CUDA_NO_VMM").as_deref(),
        Some("OFF"),
        "a warning, not a deny, without a measurement"
    );
}

#[test]
fn q16_sm120_warns_on_every_driver_and_sets_no_env() {
    // Graphs off did not stop the hang in every report: a warning naming the mitigation, no env.
    let mut d = device(0, Backend::Cuda, "sm_120", SmokeOutcome::Pass, None);
    d.driver_version = Some("595.84".into());
    let p = plan_measured(&report(vec![d], None));
    assert!(told(&p, "Q16"));
    assert_eq!(env(&p, "sm_120", "GGML_CUDA_DISABLE_GRAPHS"), None);
    let mut d = device(0, Backend::Cuda, "sm_120", SmokeOutcome::Pass, None);
    d.driver_version = Some("580.159.04".into());
    let p = plan_measured(&report(vec![d], None));
    assert!(
        told(&p, "Q16"),
        "595.84 was the reporter's driver, not a lower bound"
    );
    // Open-ended: no fixed driver is known.
    let mut d = device(0, Backend::Cuda, "sm_120", SmokeOutcome::Pass, None);
    d.driver_version = Some("600.10".into());
    let p = plan_measured(&report(vec![d], None));
    assert!(told(&p, "Q16"));
}

#[test]
fn q17_cuda_pair_without_peer_access_gets_no_peer_copy() {
    let mut r = report(
        vec![
            device(0, Backend::Cuda, "sm_89", SmokeOutcome::Pass, None),
            device(1, Backend::Cuda, "sm_89", SmokeOutcome::Pass, None),
        ],
        None,
    );
    r.peers.push(PeerResult {
        from: 0,
        to: 1,
        can_access: Some(false),
        copy_ok: Some(true),
        mismatches: Some(0),
        outcome: SmokeOutcome::Pass,
        reason: None,
    });
    assert_eq!(
        flag(&plan_measured(&r), "sm_89", "GGML_CUDA_NO_PEER_COPY").as_deref(),
        Some("ON")
    );
    r.peers[0].can_access = Some(true);
    assert_eq!(
        flag(&plan_measured(&r), "sm_89", "GGML_CUDA_NO_PEER_COPY"),
        None
    );
}

#[test]
fn crash_at_driver_init_refuses_the_plan() {
    let r = report(
        vec![device(
            0,
            Backend::Hip,
            "gfx1151",
            SmokeOutcome::Crash,
            None,
        )],
        Some("7.14.0"),
    );
    let p = plan_measured(&r);
    assert!(p.refused());
    assert!(p.refusals[0].message.contains("initialisation"));
}

#[test]
fn contested_q5_never_has_an_effect() {
    let k = k();
    let q5 = k.quirk("Q5").unwrap();
    assert!(q5.contested);
    let p = Case::new("gfx1201")
        .rocm("7.14.0")
        .evidence(
            "gfx1201",
            "7.14",
            Os::Linux,
            Level::Inference,
            Verdict::Pass,
        )
        .plan();
    assert_eq!(
        flag(&p, "gfx1201", "GGML_HIP_NO_VMM").as_deref(),
        Some("OFF")
    );
    assert!(!flag_quirks(&p, "gfx1201", "GGML_HIP_NO_VMM").contains(&"Q5".to_string()));
}

#[test]
fn every_quirk_record_is_exercised_by_some_case_here() {
    // Keeps this file honest when records are added: name each id in a test above.
    let src = include_str!("resolver.rs");
    for q in k().quirks {
        let id = q.id.to_lowercase().replace('-', "_");
        let quoted = format!("\"{}\"", q.id);
        assert!(
            src.to_lowercase().contains(&id) || src.contains(&quoted),
            "no resolver case mentions {}",
            q.id
        );
    }
}

#[test]
fn h200_fixture_plans_vmm_on_for_sm_90() {
    let text = include_str!("fixtures/nvidia-2x-h200-driver580/detect.json");
    let r = Report::from_json(text, "fixture").unwrap();
    assert_eq!(r.devices.len(), 2);
    assert!(
        r.devices
            .iter()
            .all(|d| d.smoke.outcome == SmokeOutcome::Pass && d.arch == "sm_90")
    );
    assert_eq!(r.devices[0].granularity_recommended, Some(2 << 20));
    let p = plan_measured(&r);
    assert_eq!(p.backend, Backend::Cuda);
    assert_eq!(
        flag(&p, "sm_90", "CMAKE_CUDA_ARCHITECTURES").as_deref(),
        Some("90")
    );
    assert_eq!(
        flag(&p, "sm_90", "GGML_CUDA_NO_VMM").as_deref(),
        Some("OFF")
    );
    assert_eq!(
        flag(&p, "sm_90", "GGML_CUDA_NO_PEER_COPY"),
        None,
        "peer access and copy passed"
    );
    assert_eq!(r.devices[0].vendor, Vendor::Nvidia);
}

#[test]
fn h200_e2e_fixture_has_the_driver_version_and_plans_vmm_on() {
    let text = include_str!("fixtures/nvidia-h200-driver580-e2e/detect.json");
    let r = Report::from_json(text, "fixture").unwrap();
    assert_eq!(r.devices.len(), 1);
    let d = &r.devices[0];
    assert_eq!(d.driver_version.as_deref(), Some("580.159.04"));
    assert_eq!(d.smoke.cycles_done, Some(200));
    let (before, after) = (
        d.smoke.vram_free_before.unwrap(),
        d.smoke.vram_free_after.unwrap(),
    );
    assert!(
        after + (32 << 20) >= before,
        "free VRAM came back: {before} -> {after}"
    );
    let p = plan_measured(&r);
    assert_eq!(
        flag(&p, "sm_90", "GGML_CUDA_NO_VMM").as_deref(),
        Some("OFF")
    );
    assert!(
        p.refusals.is_empty() && p.warnings.is_empty(),
        "{:?} {:?}",
        p.refusals,
        p.warnings
    );
}

// ---- knowledge by era and toolkit ----------------------------------------------------------------

#[test]
fn blackwell_12x_is_spelled_for_the_build_era() {
    // Builds 7538-7574 stop on a plain 121 ("use 121a or 121f"); later ones rewrite it.
    for (build, want) in [
        (7000u64, "121"),
        (7540, "121a"),
        (7575, "121a"),
        (11434, "121a"),
    ] {
        let p = Case::new("sm_121").cuda("13.0").build(build).plan();
        assert_eq!(
            flag(&p, "sm_121", "CMAKE_CUDA_ARCHITECTURES").as_deref(),
            Some(want),
            "build {build}"
        );
    }
    let p = Case::new("sm_90,sm_120").cuda("12.8").build(7540).plan();
    assert_eq!(
        flag(&p, "sm_90", "CMAKE_CUDA_ARCHITECTURES").as_deref(),
        Some("90;120a")
    );
}

#[test]
fn toolkit_minimums_are_stated_when_the_toolkit_is_unknown() {
    let p = Case::new("sm_120,sm_86,sm_121").plan();
    let need = |arch: &str, text: &str| {
        p.notes
            .iter()
            .any(|n| n.targets == [arch] && n.message.contains(text))
    };
    assert!(need("sm_120", "needs CUDA 12.8 or newer"), "{:?}", p.notes);
    assert!(need("sm_86", "needs CUDA 11.1 or newer"));
    assert!(need("sm_121", "needs CUDA 12.9 or newer"));
    // Targets with the same requirement share one note.
    let p = Case::new("gfx1100,gfx1101").plan();
    assert!(
        p.notes
            .iter()
            .any(|n| n.targets == ["gfx1100", "gfx1101"] && n.message.contains("ROCm 5.4")),
        "{:?}",
        p.notes
    );
    let p = Case::new("sm_120").cuda("12.8").plan();
    assert!(!p.notes.iter().any(|n| n.message.contains("needs CUDA")));
    let p = Case::new("sm_50").plan();
    assert!(p.notes.iter().any(|n| n.message.contains("12.x or older")));
}

#[test]
fn q23_windows_hip_vmm_needs_a_workload_pass_on_windows() {
    let base = || Case::new("gfx1151").rocm("7.14.0").os(Os::Windows);
    let p = base()
        .evidence("gfx1151", "7.14", Os::Windows, Level::Smoke, Verdict::Pass)
        .plan();
    assert_eq!(
        flag(&p, "gfx1151", "GGML_HIP_NO_VMM").as_deref(),
        Some("ON")
    );
    assert!(flag_quirks(&p, "gfx1151", "GGML_HIP_NO_VMM").contains(&"Q23".to_string()));
    let p = base()
        .evidence(
            "gfx1151",
            "7.14",
            Os::Windows,
            Level::Workload,
            Verdict::Pass,
        )
        .plan();
    assert_eq!(
        flag(&p, "gfx1151", "GGML_HIP_NO_VMM").as_deref(),
        Some("OFF")
    );
    // A Linux smoke pass lifts Linux only.
    let p = Case::new("gfx1151")
        .rocm("7.14.0")
        .evidence("gfx1151", "7.14", Os::Linux, Level::Smoke, Verdict::Pass)
        .plan();
    assert_eq!(
        flag(&p, "gfx1151", "GGML_HIP_NO_VMM").as_deref(),
        Some("OFF")
    );
}

#[test]
fn no_bounded_record_acts_without_a_recorded_fix() {
    // The loader enforces it (a bundled file that broke it would not load); this says so for
    // every record, and that each fix has an https source.
    for q in k().quirks {
        if q.contested || !q.has_effect() {
            continue;
        }
        assert!(
            q.bounded_ranges().is_empty(),
            "{} ends a range without a fix: {:?}",
            q.id,
            q.bounded_ranges()
        );
        if let Some(f) = &q.fixed_in {
            assert!(!f.sources.is_empty(), "{}", q.id);
            assert!(
                f.sources.iter().all(|s| s.starts_with("https://")),
                "{}",
                q.id
            );
        }
    }
    // And the loader rejects one that does.
    let bad = r#"
[[quirk]]
id = "X1"
title = "t"
summary = "s"
severity = "high"
confidence = "high"
sources = ["https://example.org/a"]
[quirk.match]
runtime = "7.0:7.2"
[quirk.effect]
warn = "w"
"#;
    let f: gpuprobe::quirks::QuirkFile = toml::from_str(bad).unwrap();
    let e = f.validate(bad, "bad.toml").unwrap_err().to_string();
    assert!(
        e.contains("without a recorded fix") && e.contains("fixed_in"),
        "{e}"
    );
    let fixed = bad.replace("7.0:7.2", "7.0:")
        + "[quirk.fixed_in]\nruntime = \"7.3\"\nsources = [\"https://example.org/fix\"]\n";
    let f: gpuprobe::quirks::QuirkFile = toml::from_str(&fixed).unwrap();
    f.validate(&fixed, "ok.toml").unwrap();
    let no_source = bad.replace("7.0:7.2", "7.0:") + "[quirk.fixed_in]\nruntime = \"7.3\"\n";
    let f: gpuprobe::quirks::QuirkFile = toml::from_str(&no_source).unwrap();
    assert!(f.validate(&no_source, "x.toml").is_err());
}

/// One row: targets (machine when `machine`), runtime, OS, build, evidence → the VMM flag value
/// and which records must (and must not) apply.
struct Row {
    targets: &'static str,
    machine: bool,
    rocm: Option<&'static str>,
    cuda: Option<&'static str>,
    os: Os,
    build: u64,
    evidence: &'static [(&'static str, &'static str, Os, Level, Verdict)],
    /// Expected value of the VMM flag for the first target (None: no flag).
    vmm_flag: Option<&'static str>,
    /// Records that must be among the plan's warnings, VMM-flag quirks or env/flag quirks.
    applies: &'static [&'static str],
    /// Records that must not apply (warnings, VMM flag, env, flags).
    absent: &'static [&'static str],
    /// Plan a measured machine instead (one device per target) with this smoke outcome and stage.
    smoke: Option<(SmokeOutcome, Option<&'static str>)>,
    /// The measured devices' driver version.
    driver: Option<&'static str>,
    /// Environment variables set where the plan is made.
    env_set: &'static [&'static str],
    /// The measured pair 0-1 has no peer access.
    no_peer: bool,
}

const R: Row = Row {
    targets: "",
    machine: false,
    rocm: None,
    cuda: None,
    os: Os::Linux,
    build: 11434,
    evidence: &[],
    vmm_flag: None,
    applies: &[],
    absent: &[],
    smoke: None,
    driver: None,
    env_set: &[],
    no_peer: false,
};

use Level::{Inference as I, Smoke as S, Workload as W};
use Os::{Linux as L, Windows as Win};
use Verdict::{Fail as F, Pass as P};

#[rustfmt::skip]
const TABLE: &[Row] = &[
    // HIP VMM: llama.cpp's default without evidence, on evidence of the right strength only.
    Row { targets: "gfx1101", rocm: Some("7.14.0"), vmm_flag: Some("ON"), applies: &["Q1", "Q2", "Q3"], absent: &["Q33"], ..R },
    Row { targets: "gfx1101", rocm: Some("7.14.0"), evidence: &[("gfx1101", "7.14", L, S, P)], vmm_flag: Some("OFF"), applies: &["Q1"], absent: &["Q2", "Q6"], ..R },
    Row { targets: "gfx1101", rocm: Some("7.14.0"), evidence: &[("gfx1101", "7.14", L, S, P), ("gfx1101", "7.14", L, W, F)], vmm_flag: Some("ON"), applies: &["Q2"], ..R },
    // gfx1100 on ROCm 7.14: VMM memory reading back zeros after churn (Q33) needs a workload pass.
    Row { targets: "gfx1100", rocm: Some("7.14.0"), evidence: &[("gfx1100", "7.14", L, S, P)], vmm_flag: Some("ON"), applies: &["Q33"], ..R },
    Row { targets: "gfx1100", rocm: Some("7.14.0"), evidence: &[("gfx1100", "7.14", L, W, P)], vmm_flag: Some("OFF"), applies: &["Q33"], ..R },
    Row { targets: "gfx1100", rocm: Some("7.13.0"), evidence: &[("gfx1100", "7.13", L, S, P)], vmm_flag: Some("OFF"), absent: &["Q33"], ..R },
    Row { targets: "gfx1100", rocm: Some("7.2.1"), evidence: &[("gfx1100", "7.2", L, S, P)], vmm_flag: Some("OFF"), applies: &["Q3"], ..R },
    Row { targets: "gfx1100", rocm: Some("7.2.1"), vmm_flag: Some("ON"), applies: &["Q3", "Q6"], ..R },
    Row { targets: "gfx1030", rocm: Some("6.4.3"), evidence: &[("gfx1030", "6.4", L, W, P)], vmm_flag: Some("OFF"), ..R },
    Row { targets: "gfx942", rocm: Some("6.2"), vmm_flag: Some("ON"), applies: &["Q22"], absent: &["Q3"], ..R },
    // gfx12: Q4 needs a smoke pass, Q21 an inference pass (a workload pass is not enough).
    Row { targets: "gfx1201", rocm: Some("7.2.1"), evidence: &[("gfx1201", "7.2", L, S, P)], vmm_flag: Some("ON"), applies: &["Q3", "Q4", "Q21"], ..R },
    Row { targets: "gfx1201", rocm: Some("7.2.1"), evidence: &[("gfx1201", "7.2", L, W, P)], vmm_flag: Some("ON"), applies: &["Q3", "Q4", "Q21"], ..R },
    Row { targets: "gfx1201", rocm: Some("7.2.1"), evidence: &[("gfx1201", "7.2", L, I, P)], vmm_flag: Some("OFF"), applies: &["Q3", "Q4", "Q21"], ..R },
    Row { targets: "gfx1200", rocm: Some("7.13.0a20260515"), vmm_flag: Some("ON"), applies: &["Q3", "Q4", "Q21"], ..R },
    Row { targets: "gfx1201", rocm: Some("7.14.0"), evidence: &[("gfx1201", "7.14", L, S, P)], vmm_flag: Some("ON"), applies: &["Q3", "Q4", "Q21", "Q33", "Q34"], ..R },
    Row { targets: "gfx1201", rocm: Some("7.14.0"), evidence: &[("gfx1201", "7.14", L, I, P)], vmm_flag: Some("OFF"), applies: &["Q4", "Q21"], ..R },
    Row { targets: "gfx1201", rocm: Some("7.14.0"), os: Win, evidence: &[("gfx1201", "7.14", Win, W, P)], vmm_flag: Some("OFF"), applies: &["Q23", "Q18"], absent: &["Q21", "Q4", "Q34"], ..R },
    Row { targets: "gfx1151", rocm: Some("7.14.0"), os: Win, evidence: &[("gfx1151", "7.14", Win, S, P)], vmm_flag: Some("ON"), applies: &["Q23", "Q18"], absent: &["Q11", "Q10", "Q40"], ..R },
    // Build eras of the HIP VMM switch.
    Row { targets: "gfx1100", rocm: Some("7.14.0"), build: 4550, vmm_flag: Some("ON"), applies: &["Q2-old-build", "Q2-pre-9489"], ..R },
    Row { targets: "gfx1100", rocm: Some("6.1"), build: 4500, vmm_flag: None, applies: &["Q2"], absent: &["Q1"], ..R },
    // Legacy-pool warnings by build.
    Row { targets: "gfx1100", rocm: Some("7.2.1"), build: 8500, vmm_flag: Some("ON"), applies: &["Q2", "Q2-old-build", "Q2-pre-9489", "Q13"], absent: &["Q6"], ..R },
    Row { targets: "gfx1100", rocm: Some("7.2.1"), build: 10200, vmm_flag: Some("ON"), applies: &["Q2", "Q6"], absent: &["Q13", "Q2-pre-9489"], ..R },
    // APUs, unified memory and the 2D-copy path.
    Row { targets: "gfx1151", rocm: Some("7.14.0"), build: 9800, vmm_flag: Some("ON"), applies: &["Q11", "Q13"], absent: &["Q12", "Q10"], ..R },
    Row { targets: "gfx1151", rocm: Some("7.14.0"), build: 11434, vmm_flag: Some("ON"), applies: &["Q12"], absent: &["Q10", "Q11"], ..R },
    Row { targets: "gfx1150", rocm: Some("7.14.0a20260610"), vmm_flag: Some("ON"), applies: &["Q10", "Q11", "Q3"], ..R },
    Row { targets: "gfx1151", rocm: Some("7.14.0"), evidence: &[("gfx1151", "7.14", L, S, P)], vmm_flag: Some("OFF"), applies: &["Q12"], absent: &["Q10", "Q11"], ..R },
    // Machines: multi-GPU and iGPU-next-to-dGPU records apply definitely.
    Row { targets: "gfx1030,gfx1201", machine: true, rocm: Some("7.14.0"), vmm_flag: Some("ON"), applies: &["Q7-linux-rdna4", "Q7-split", "Q38"], absent: &["Q7"], ..R },
    Row { targets: "gfx1030,gfx1201", machine: true, rocm: Some("7.14.0"), os: Win, vmm_flag: Some("ON"), applies: &["Q7", "Q7-split"], absent: &["Q7-linux-rdna4", "Q38"], ..R },
    Row { targets: "gfx906,gfx906", machine: true, rocm: Some("6.3"), vmm_flag: Some("ON"), applies: &["Q7-linux-kernel", "Q7-split"], absent: &["Q7"], ..R },
    Row { targets: "gfx1201,gfx1036", machine: true, rocm: Some("7.14.0"), vmm_flag: Some("ON"), applies: &["Q8", "Q7-split"], ..R },
    Row { targets: "gfx1100,gfx1100", machine: true, rocm: Some("7.14.0"), vmm_flag: Some("ON"), applies: &["Q7-split"], absent: &["Q7", "Q8", "Q39"], ..R },
    // GPUs of two architectures in one process: rocBLAS's one solution library (Q39).
    Row { targets: "gfx908,gfx908,gfx1030", machine: true, rocm: Some("7.1.0"), vmm_flag: Some("ON"), applies: &["Q39", "Q7-split"], ..R },
    Row { targets: "gfx908,gfx1030", machine: true, rocm: Some("7.1.0"), os: Win, vmm_flag: Some("ON"), absent: &["Q39"], ..R },
    // Strix Halo page faults that follow the kernel/driver (Q40): Linux only.
    Row { targets: "gfx1151", rocm: Some("7.2.1"), vmm_flag: Some("ON"), applies: &["Q40"], ..R },
    // ROCm 6.4.3 on GPUs outside its support list where 6.4.1 worked (Q42): Linux only.
    Row { targets: "gfx900", rocm: Some("6.4.3"), vmm_flag: Some("ON"), applies: &["Q42"], ..R },
    Row { targets: "gfx1031", rocm: Some("6.4.1"), vmm_flag: Some("ON"), absent: &["Q42"], ..R },
    Row { targets: "gfx1031", rocm: Some("6.4.3"), os: Win, vmm_flag: Some("ON"), absent: &["Q42"], ..R },
    Row { targets: "gfx900", rocm: Some("7.2.1"), vmm_flag: Some("ON"), applies: &["Q14", "Q3"], ..R },
    Row { targets: "gfx906", rocm: Some("6.3"), vmm_flag: Some("ON"), applies: &["Q22"], absent: &["Q14"], ..R },
    Row { targets: "gfx1152", rocm: Some("7.13"), vmm_flag: Some("ON"), applies: &["Q11", "Q3"], absent: &["Q13", "Q20", "Q20-build", "Q11-gtt"], ..R },
    Row { targets: "gfx1152", rocm: Some("7.14"), build: 9409, vmm_flag: Some("ON"), applies: &["Q20-build"], ..R },
    Row { targets: "gfx1151", rocm: Some("6.4.4"), vmm_flag: Some("ON"), applies: &["Q32-mmap"], absent: &["Q20-build"], ..R },
    Row { targets: "gfx1152", rocm: Some("7.14"), vmm_flag: Some("ON"), absent: &["Q20"], ..R },
    // NVIDIA.
    Row { targets: "sm_90", cuda: Some("13.0"), vmm_flag: Some("OFF"), absent: &["Q15", "Q6-cuda", "Q2"], ..R },
    Row { targets: "sm_87", cuda: Some("12.6"), vmm_flag: Some("ON"), applies: &["Q15-jetson", "Q2", "Q6-cuda"], absent: &["Q15-jetson-older"], ..R },
    Row { targets: "sm_72", cuda: Some("12.6"), vmm_flag: Some("ON"), applies: &["Q15-jetson-older"], absent: &["Q15-jetson"], ..R },
    // GB10 keeps the legacy pool (one measured report); RTX 50 warns of the bogus shared-memory limit.
    Row { targets: "sm_121", cuda: Some("13.0"), vmm_flag: Some("ON"), applies: &["Q15-gb10", "Q2"], absent: &["Q15-jetson", "Q41"], ..R },
    Row { targets: "sm_120", cuda: Some("13.2"), vmm_flag: Some("OFF"), applies: &["Q41", "Q16"], absent: &["Q15-gb10"], ..R },
    Row { targets: "sm_120", cuda: Some("13.3"), os: Win, vmm_flag: Some("OFF"), applies: &["Q41", "Q15-windows"], ..R },
    Row { targets: "sm_89", cuda: Some("13.2"), vmm_flag: Some("OFF"), absent: &["Q41", "Q15-gb10"], ..R },
    Row { targets: "sm_89,sm_89", machine: true, cuda: Some("12.8"), build: 8700, vmm_flag: Some("OFF"), applies: &["Q37"], ..R },
    Row { targets: "sm_89,sm_89", machine: true, cuda: Some("12.8"), build: 9007, vmm_flag: Some("OFF"), absent: &["Q37"], ..R },
    Row { targets: "sm_89", cuda: Some("12.8"), os: Win, vmm_flag: Some("OFF"), applies: &["Q15-windows"], ..R },
    Row { targets: "sm_120", cuda: Some("12.8"), os: Os::Wsl, vmm_flag: Some("OFF"), applies: &["Q15-windows"], absent: &["Q16"], ..R },
    Row { targets: "sm_86,sm_86", machine: true, cuda: Some("12.8"), vmm_flag: Some("OFF"), absent: &["Q17", "Q7"], ..R },
    Row { targets: "sm_90", cuda: Some("13.0"), build: 7000, vmm_flag: Some("OFF"), applies: &["Q19"], absent: &["Q6-cuda"], ..R },
    // Measured machines: smoke outcome, driver, environment and peer access.
    Row { targets: "sm_86", cuda: Some("12.8"), smoke: Some((SmokeOutcome::Fail, Some("reserve"))), vmm_flag: Some("ON"), applies: &["Q15", "Q2", "Q6-cuda"], ..R },
    Row { targets: "sm_120", cuda: Some("13.2"), smoke: Some((SmokeOutcome::Pass, None)), driver: Some("595.84"), vmm_flag: Some("OFF"), applies: &["Q16"], ..R },
    Row { targets: "sm_120", cuda: Some("13.0"), smoke: Some((SmokeOutcome::Pass, None)), driver: Some("580.159.04"), vmm_flag: Some("OFF"), applies: &["Q16"], ..R },
    Row { targets: "sm_89,sm_89", cuda: Some("12.8"), smoke: Some((SmokeOutcome::Pass, None)), no_peer: true, vmm_flag: Some("OFF"), applies: &["Q17"], ..R },
    Row { targets: "gfx1201", rocm: Some("7.2.1"), smoke: Some((SmokeOutcome::Pass, None)), vmm_flag: Some("ON"), applies: &["Q4", "Q21"], absent: &["Q5"], ..R },
    Row { targets: "gfx1101", rocm: Some("7.14.0"), smoke: Some((SmokeOutcome::Pass, None)), env_set: &["HSA_OVERRIDE_GFX_VERSION"], vmm_flag: Some("OFF"), applies: &["Q9"], absent: &["Q29"], ..R },
    Row { targets: "gfx1101", rocm: Some("7.14.0"), smoke: Some((SmokeOutcome::Pass, None)), env_set: &["ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"], vmm_flag: Some("OFF"), applies: &["Q29"], absent: &["Q9"], ..R },
    // gfx1036: AMD's rocBLAS has no kernels for it on any ROCm (Q30); a neighbouring RDNA2 target does not get it.
    Row { targets: "gfx1036", rocm: Some("6.4.1"), vmm_flag: Some("ON"), applies: &["Q30"], ..R },
    Row { targets: "gfx1030", rocm: Some("6.4.1"), vmm_flag: Some("ON"), absent: &["Q30"], ..R },
    // Debug (-O0) HIP builds on ROCm 7.11+ on Radeon families (Q31); not before 7.11, not on CDNA.
    Row { targets: "gfx1100", rocm: Some("7.11.0"), vmm_flag: Some("ON"), applies: &["Q31"], ..R },
    Row { targets: "gfx1201", rocm: Some("7.14.0"), vmm_flag: Some("ON"), applies: &["Q31"], ..R },
    Row { targets: "gfx1100", rocm: Some("7.2.1"), vmm_flag: Some("ON"), absent: &["Q31"], ..R },
    Row { targets: "gfx942", rocm: Some("7.11.0"), vmm_flag: Some("ON"), absent: &["Q31"], ..R },
    // gfx1151 on the ROCm 7.2.x runtime: HSA `Memory in use` at model load, reported working on 7.13 (Q32).
    Row { targets: "gfx1151", rocm: Some("7.2.4"), vmm_flag: Some("ON"), applies: &["Q32"], ..R },
    Row { targets: "gfx1151", rocm: Some("7.13.0"), vmm_flag: Some("ON"), applies: &["Q32"], ..R },
    Row { targets: "gfx1201", rocm: Some("7.1.1"), os: Win, build: 9553, vmm_flag: Some("ON"), applies: &["Q36"], absent: &["Q35"], ..R },
    Row { targets: "gfx1201", rocm: Some("7.1.1"), os: Win, build: 10115, vmm_flag: Some("ON"), absent: &["Q36"], ..R },
    Row { targets: "gfx1151", rocm: Some("6.4.4"), vmm_flag: Some("ON"), absent: &["Q32"], ..R },
    Row { targets: "gfx1100", rocm: Some("7.2.4"), vmm_flag: Some("ON"), absent: &["Q32"], ..R },
    // Toolkit regressions for RDNA1/RDNA2: Linux ROCm 7.1+ comgr (Q24), Windows HIP SDK 7.1+ enumeration (Q27).
    Row { targets: "gfx1030", rocm: Some("7.1.1"), vmm_flag: Some("ON"), applies: &["Q24", "Q3"], absent: &["Q27"], ..R },
    Row { targets: "gfx1030", rocm: Some("7.2.1"), vmm_flag: Some("ON"), applies: &["Q24"], ..R },
    Row { targets: "gfx1030", rocm: Some("6.4.3"), vmm_flag: Some("ON"), applies: &["Q22"], absent: &["Q24", "Q27"], ..R },
    Row { targets: "gfx1030", rocm: Some("7.1.1"), os: Win, vmm_flag: Some("ON"), applies: &["Q27", "Q18", "Q23"], absent: &["Q24"], ..R },
    Row { targets: "gfx1010", rocm: Some("7.1.1"), os: Win, vmm_flag: Some("ON"), applies: &["Q27"], ..R },
    Row { targets: "gfx1030", rocm: Some("6.4.3"), os: Win, vmm_flag: Some("ON"), applies: &["Q18"], absent: &["Q27"], ..R },
    Row { targets: "gfx1100", rocm: Some("7.1.1"), os: Win, vmm_flag: Some("ON"), applies: &["Q18"], absent: &["Q27", "Q24"], ..R },
    // CUDA toolkit minimum (Q25), -sm tensor before 9875 (Q26), graphs + speculative decoding before 10531 (Q28).
    Row { targets: "sm_86", cuda: Some("11.5"), vmm_flag: Some("OFF"), applies: &["Q25"], ..R },
    Row { targets: "sm_86", cuda: Some("11.7"), vmm_flag: Some("OFF"), absent: &["Q25"], ..R },
    Row { targets: "sm_75,sm_75", machine: true, cuda: Some("12.4"), build: 9600, vmm_flag: Some("OFF"), applies: &["Q26", "Q28"], absent: &["Q25", "Q17"], ..R },
    Row { targets: "sm_75,sm_75", machine: true, cuda: Some("12.4"), build: 9875, vmm_flag: Some("OFF"), applies: &["Q28"], absent: &["Q26"], ..R },
    Row { targets: "sm_87,sm_87", machine: true, cuda: Some("12.6"), build: 9600, vmm_flag: Some("ON"), applies: &["Q15-jetson", "Q28"], absent: &["Q26"], ..R },
    Row { targets: "sm_90", cuda: Some("13.0"), build: 10530, vmm_flag: Some("OFF"), applies: &["Q28"], absent: &["Q26"], ..R },
    Row { targets: "sm_90", cuda: Some("13.0"), build: 10531, vmm_flag: Some("OFF"), absent: &["Q28"], ..R },
    // Device-node access on Linux (Q43): every AMD plan there, none on Windows or for NVIDIA.
    Row { targets: "gfx1032", rocm: Some("6.4.1"), vmm_flag: Some("ON"), applies: &["Q43"], ..R },
    Row { targets: "gfx1032", rocm: Some("6.4.1"), os: Win, vmm_flag: Some("ON"), absent: &["Q43"], ..R },
    Row { targets: "sm_86", cuda: Some("12.8"), vmm_flag: Some("OFF"), absent: &["Q43"], ..R },
    // RDNA4 on Windows needs HIP SDK 6.4.2 (Q44): before it, not from it, not on Linux.
    Row { targets: "gfx1201", rocm: Some("6.4.1"), os: Win, vmm_flag: Some("ON"), applies: &["Q44"], ..R },
    Row { targets: "gfx1200", rocm: Some("6.3"), os: Win, vmm_flag: Some("ON"), applies: &["Q44"], ..R },
    Row { targets: "gfx1201", rocm: Some("6.4.2"), os: Win, vmm_flag: Some("ON"), absent: &["Q44"], ..R },
    Row { targets: "gfx1201", rocm: Some("6.4.1"), vmm_flag: Some("ON"), absent: &["Q44"], ..R }];

/// Targets, ROCm, CUDA, OS, one machine, the record, its fixed build.
type BuildBoundRow = (
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
    Os,
    bool,
    &'static str,
    u64,
);

/// Without a build number a plan is for the newest build gpuprobe knows, but an unknown build is
/// no evidence that a fix is in: each record whose range ends at a fixed build, and that would
/// match the build before it, is a note naming that bound, with none of its flags or env (the
/// plan is for the newest build). Given a build, the record is judged on either side of the bound
/// as usual, and the note is gone.
#[test]
fn plans_without_a_build_name_the_records_that_end_at_a_fixed_build() {
    #[rustfmt::skip]
    let rows: &[BuildBoundRow] = &[
        ("gfx1152", Some("7.13"), None, Os::Linux, false, "Q20-build", 9563),
        ("gfx1153", Some("7.14"), None, Os::Linux, false, "Q20-build", 9563),
        ("gfx1100", Some("7.2.1"), None, Os::Linux, false, "Q2-old-build", 8863),
        ("gfx1100", Some("7.2.1"), None, Os::Linux, false, "Q2-pre-9489", 9489),
        ("gfx1100", Some("7.2.1"), None, Os::Linux, false, "Q13", 10115),
        ("gfx1201", Some("7.1.1"), None, Os::Windows, false, "Q36", 10115),
        ("sm_90", None, Some("13.0"), Os::Linux, false, "Q28", 10531),
        ("sm_75,sm_75", None, Some("12.4"), Os::Linux, true, "Q26", 9875),
        ("sm_89,sm_89", None, Some("12.8"), Os::Linux, true, "Q37", 9007),
    ];
    let case = |targets, rocm, cuda, os, machine, build| {
        let mut c = Case::new(targets).os(os);
        c.rocm = rocm;
        c.cuda = cuda;
        c.machine = machine;
        c.build = build;
        c.plan()
    };
    let acts = |p: &Plan, id: &str| {
        p.groups.iter().any(|g| {
            g.flags.iter().any(|f| f.quirks.iter().any(|q| q == id))
                || g.env.iter().any(|e| e.quirks.iter().any(|q| q == id))
        })
    };
    let named = |p: &Plan, id: &str| {
        p.warnings
            .iter()
            .chain(&p.notes)
            .filter(|n| !n.message.contains(" may apply: "))
            .any(|n| n.quirks.iter().any(|q| q == id))
    };
    for &(targets, rocm, cuda, os, machine, id, fixed) in rows {
        let p = case(targets, rocm, cuda, os, machine, None);
        let notes: Vec<&str> = p
            .notes
            .iter()
            .filter(|n| n.quirks == [id.to_string()])
            .map(|n| n.message.as_str())
            .collect();
        assert_eq!(notes.len(), 1, "{targets} {id}: {:#?}", p.notes);
        assert!(
            notes[0].starts_with(&format!("{id}, with a llama.cpp build before {fixed}: "))
                && notes[0].contains("No build was given: this plan is for build 11434")
                && notes[0].contains("--llama-build N"),
            "{}",
            notes[0]
        );
        assert!(!p.warnings.iter().any(|n| n.quirks.iter().any(|q| q == id)));
        assert!(
            !acts(&p, id),
            "{targets} {id}: its advice is for older builds"
        );
        let before = case(targets, rocm, cuda, os, machine, Some(fixed - 1));
        assert!(
            named(&before, id) || acts(&before, id),
            "{targets} {id} at {}",
            fixed - 1
        );
        assert!(
            !before
                .notes
                .iter()
                .any(|n| n.message.contains("No build was given"))
        );
        let at = case(targets, rocm, cuda, os, machine, Some(fixed));
        assert!(
            !named(&at, id) && !acts(&at, id),
            "{targets} {id} at {fixed}"
        );
    }
    // Other facts still decide: no gfx1152 record for gfx1151, no multi-GPU record for one GPU,
    // no legacy-pool record where VMM is on.
    for (targets, cuda, id) in [
        ("gfx1151", None, "Q20-build"),
        ("sm_89", Some("12.8"), "Q37"),
        ("sm_90", Some("13.0"), "Q2-old-build"),
    ] {
        let mut c = Case::new(targets);
        c.rocm = if cuda.is_none() { Some("7.14") } else { None };
        c.cuda = cuda;
        c.machine = cuda.is_some();
        c.build = None;
        let p = c.plan();
        assert!(
            !p.notes.iter().any(|n| n.quirks.iter().any(|q| q == id)),
            "{targets} {id}: {:#?}",
            p.notes
        );
    }
}

#[test]
fn decision_table_covers_every_record() {
    let k = k();
    let mut seen: std::collections::BTreeSet<String> = Default::default();
    for (i, row) in TABLE.iter().enumerate() {
        let mut c = Case::new(row.targets).build(row.build).os(row.os);
        c.rocm = row.rocm;
        c.cuda = row.cuda;
        c.machine = row.machine;
        for (arch, series, os, level, verdict) in row.evidence {
            c = c.evidence(arch, series, *os, *level, *verdict);
        }
        let p = match row.smoke {
            None => c.plan(),
            Some((outcome, stage)) => {
                let backend = if row.cuda.is_some() {
                    Backend::Cuda
                } else {
                    Backend::Hip
                };
                let devices = row
                    .targets
                    .split(',')
                    .enumerate()
                    .map(|(n, arch)| {
                        let mut d = device(n as u32, backend, arch, outcome, stage);
                        d.driver_version = row.driver.map(str::to_string);
                        d
                    })
                    .collect();
                let mut r = report(devices, row.rocm);
                if row.no_peer {
                    r.peers.push(PeerResult {
                        from: 0,
                        to: 1,
                        can_access: Some(false),
                        copy_ok: Some(true),
                        mismatches: Some(0),
                        outcome: SmokeOutcome::Pass,
                        reason: None,
                    });
                }
                let req = Request {
                    devices: Devices::Measured {
                        report: &r,
                        mode: Mode::Report,
                    },
                    backend: None,
                    llama: llama(Some(row.build)),
                    rocm: row.rocm.map(|v| v.parse().unwrap()),
                    cuda: row.cuda.map(|v| v.parse().unwrap()),
                    rocm_source: "test".into(),
                    cuda_source: "test".into(),
                    os: row.os,
                    env_set: row.env_set.iter().map(|e| e.to_string()).collect(),
                    force_no_vmm: false,
                    evidence: c.evidence.clone(),
                };
                resolve(&k, &req).expect("plan")
            }
        };
        let first = row.targets.split(',').next().unwrap();
        let g = p
            .groups
            .iter()
            .find(|g| g.targets.iter().any(|t| t == first))
            .unwrap();
        let vmm = g
            .flags
            .iter()
            .find(|f| f.name.ends_with("_NO_VMM"))
            .map(|f| f.value.as_str());
        assert_eq!(
            vmm, row.vmm_flag,
            "row {i} ({}): {:?}",
            row.targets, g.flags
        );
        let mut applied: Vec<String> = p
            .warnings
            .iter()
            .chain(
                p.notes
                    .iter()
                    .filter(|n| !n.message.contains(" may apply: ")),
            )
            .flat_map(|n| n.quirks.clone())
            .collect();
        for g in &p.groups {
            for f in &g.flags {
                applied.extend(f.quirks.clone());
            }
            for e in &g.env {
                applied.extend(e.quirks.clone());
            }
        }
        // Records whose advice was dropped or withdrawn still applied: their warning says so.
        for id in row.applies {
            assert!(
                applied.iter().any(|a| a == id),
                "row {i} ({} {:?} {:?}): {id} does not apply; applied {applied:?}",
                row.targets,
                row.rocm.or(row.cuda),
                row.os
            );
            seen.insert(id.to_string());
        }
        for id in row.absent {
            assert!(
                !applied.iter().any(|a| a == id),
                "row {i} ({}): {id} applies but must not",
                row.targets
            );
            seen.insert(id.to_string());
        }
    }
    assert!(TABLE.len() >= 30, "{} rows", TABLE.len());
    for q in &k.quirks {
        assert!(seen.contains(&q.id), "no table row for {}", q.id);
    }
}

/// A smoke condition is one of the outcomes a device's smoke test can have: a misspelt one
/// (`reserve_fail`) would never match, so the file is refused, naming the field and the line.
#[test]
fn a_quirk_with_an_unknown_smoke_outcome_is_refused() {
    let record = |smoke: &str| {
        format!(
            "[[quirk]]\nid = \"X2\"\ntitle = \"t\"\nsummary = \"s\"\nseverity = \"high\"\nconfidence = \"high\"\nsources = [\"https://example.org/a\"]\n[quirk.match]\nsmoke = [\"{smoke}\"]\n[quirk.effect]\nwarn = \"w\"\n"
        )
    };
    let ok = record("reserve-fail");
    let f: gpuprobe::quirks::QuirkFile = gpuprobe::toml_file::parse_toml(&ok, "ok.toml").unwrap();
    assert_eq!(
        f.quirk[0].when.smoke,
        [gpuprobe::quirks::SmokeCondition::ReserveFail]
    );
    let bad = record("reserve_fail");
    let e = gpuprobe::toml_file::parse_toml::<gpuprobe::quirks::QuirkFile>(&bad, "bad.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.toml") && e.contains("reserve_fail"), "{e}");
}

#[test]
fn cmake_args_names_the_targets_it_leaves_to_the_matrix() {
    let one = Case::new("gfx110X,gfx120X").rocm("7.14.0").plan();
    assert_eq!(one.groups.len(), 1);
    assert_eq!(
        gpuprobe::emit::github::groups_left_out_of_cmake_args(&one),
        None
    );
    // Two builds (a second group with other flags): every target after the first is named.
    let mut two = one.clone();
    let mut g = two.groups[0].clone();
    g.name = "hip-legacy-pool".into();
    g.targets = vec!["gfx1200".into(), "gfx1201".into()];
    g.vmm = false;
    two.groups[0].targets.retain(|t| t.starts_with("gfx110"));
    two.groups.push(g);
    let m = gpuprobe::emit::github::groups_left_out_of_cmake_args(&two).unwrap();
    assert!(m.contains("hip-legacy-pool (gfx1200, gfx1201)"), "{m}");
    assert!(m.contains("matrix"), "{m}");
    let dir = tempfile::tempdir().unwrap();
    let annotations =
        gpuprobe::emit::github::write(&two, &Default::default(), &dir.path().join("out"), None)
            .unwrap();
    assert!(
        annotations.lines().any(
            |l| l.starts_with("::warning title=gpuprobe cmake-args::") && l.contains("gfx1201")
        ),
        "{annotations}"
    );
}

/// The severity policy (README "Errors, warnings and notes"): a warning only where the user must
/// act; what the plan already did, and advice for run time, are notes.
#[test]
fn severity_policy_warns_only_where_the_user_must_act() {
    // A legacy-pool ROCm 7.11 build on Radeon, from an old llama.cpp build: Q2 (runtime advice),
    // Q31 (Release, which the plan builds) and Q3 (VMM kept off) inform; Q2-old-build (upgrade)
    // asks for action.
    let p = Case::new("gfx1100").rocm("7.11").build(8000).plan();
    for id in ["Q2", "Q31", "Q3"] {
        assert!(
            told(&p, id) && !in_warnings(&p, id),
            "{id} should be a note: {:?}",
            p.warnings
        );
    }
    assert!(in_warnings(&p, "Q2-old-build"), "{:?}", p.warnings);
    // Every warning the bundled records make carries an action word; notes need none.
    let k = Knowledge::bundled().unwrap();
    for q in k
        .quirks
        .iter()
        .filter(|q| q.effect.level == gpuprobe::quirks::WarnLevel::Warning)
    {
        if let Some(w) = &q.effect.warn {
            let acts = [
                "Use ", "use ", "Build ", "build ", "Install", "Set ", "Unset", "Run ", "run ",
                "Select", "Hide", "pass ",
            ];
            assert!(
                acts.iter().any(|a| w.contains(a)),
                "{}: a warning names no action: {w}",
                q.id
            );
        }
    }
}
