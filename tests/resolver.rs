//! Resolver decisions, one or more cases per quirk record, through the library API.
//! Each case states what must be planned and would fail if the record or the rule broke.

use gpuprobe::llama::LlamaTarget;
use gpuprobe::plan::{Mode, Plan};
use gpuprobe::profiles::Knowledge;
use gpuprobe::quirks::Os;
use gpuprobe::report::{Backend, Device, Host, PeerResult, Report, Smoke, SmokeOutcome, Vendor};
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
}

impl Case {
    fn new(targets: &'static str) -> Self {
        Case {
            targets,
            rocm: None,
            cuda: None,
            build: Some(11434),
            os: Os::Linux,
        }
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
        let req = Request {
            devices: Devices::Declared(k.targets.expand(self.targets).unwrap()),
            backend: None,
            llama: llama(self.build),
            rocm: self.rocm.map(|v| v.parse().unwrap()),
            cuda: self.cuda.map(|v| v.parse().unwrap()),
            rocm_source: "test".into(),
            cuda_source: "test".into(),
            os: self.os,
            env_set: vec![],
            force_no_vmm: false,
        };
        resolve(&k, &req).expect("plan")
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
        "probe-program",
    );
    d.smoke = Smoke::with_outcome(outcome, "test");
    d.smoke.stage = stage.map(str::to_string);
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
        status: "ok".into(),
        detail: None,
        driver_version: None,
        runtime_version: hip_runtime.map(str::to_string),
        hint: None,
    });
    r.devices = devices;
    r
}

fn plan_measured(r: &Report) -> Plan {
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
        .find(|e| e.name == name)
        .map(|e| e.value.clone())
}

fn warned(p: &Plan, id: &str) -> bool {
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
    // The family expands in order; the APU (gfx1103) gets its own group for its runtime env (Q11).
    assert_eq!(p.groups.len(), 2);
    assert_eq!(
        flag(&p, "gfx1100", "GPU_TARGETS").as_deref(),
        Some("gfx1100;gfx1101;gfx1102")
    );
    assert_eq!(
        flag(&p, "gfx1103", "GPU_TARGETS").as_deref(),
        Some("gfx1103")
    );
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
    for build in [4555u64, 5000, 9093, 10114, 10115, 11434] {
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
fn q1_hip_vmm_on_when_no_deny_quirk_can_match() {
    let p = Case::new("gfx90a").rocm("6.4").plan();
    assert_eq!(
        flag(&p, "gfx90a", "GGML_HIP_NO_VMM").as_deref(),
        Some("OFF")
    );
    assert!(flag_quirks(&p, "gfx90a", "GGML_HIP_NO_VMM").contains(&"Q1".to_string()));
}

#[test]
fn q3_unknown_rocm_counts_as_could_match_and_keeps_legacy_pool() {
    let p = Case::new("gfx90a").plan();
    assert_eq!(flag(&p, "gfx90a", "GGML_HIP_NO_VMM").as_deref(), Some("ON"));
    assert!(flag_quirks(&p, "gfx90a", "GGML_HIP_NO_VMM").contains(&"Q3".to_string()));
    let p = Case::new("gfx90a").rocm("7.2.1").plan();
    assert_eq!(flag(&p, "gfx90a", "GGML_HIP_NO_VMM").as_deref(), Some("ON"));
}

#[test]
fn q4_q21_gfx12_on_rocm_7_2_keep_legacy_pool_but_a_passing_smoke_test_wins() {
    let p = Case::new("gfx1201").rocm("7.2.1").plan();
    let q = flag_quirks(&p, "gfx1201", "GGML_HIP_NO_VMM");
    assert!(
        q.contains(&"Q4".to_string()) && q.contains(&"Q21".to_string()),
        "{q:?}"
    );
    let r = report(
        vec![device(0, Backend::Hip, "gfx1201", SmokeOutcome::Pass, None)],
        Some("7.2.26015"),
    );
    let p = plan_measured(&r);
    assert_eq!(
        flag(&p, "gfx1201", "GGML_HIP_NO_VMM").as_deref(),
        Some("OFF"),
        "{:?}",
        p.groups
    );
}

#[test]
fn q14_gfx906_is_denied_even_when_measured_passing() {
    let r = report(
        vec![device(0, Backend::Hip, "gfx906", SmokeOutcome::Pass, None)],
        Some("6.4.1"),
    );
    let p = plan_measured(&r);
    assert_eq!(flag(&p, "gfx906", "GGML_HIP_NO_VMM").as_deref(), Some("ON"));
    assert!(flag_quirks(&p, "gfx906", "GGML_HIP_NO_VMM").contains(&"Q14".to_string()));
    assert!(warned(&p, "Q14"));
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
            Some("6.4.1"),
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
        .plan();
    assert!(
        p.groups.len() >= 2,
        "{:?}",
        p.groups.iter().map(|g| &g.name).collect::<Vec<_>>()
    );
    let names: Vec<&String> = p.groups.iter().map(|g| &g.name).collect();
    let mut sorted = names.clone();
    sorted.dedup();
    assert_eq!(names.len(), sorted.len(), "group names are unique");
    // ROCm 7.2 denies VMM everywhere (Q3), so gfx906 joins no VMM group either way.
    let p = Case::new("gfx90a,gfx906").rocm("6.4").plan();
    assert_ne!(
        flag(&p, "gfx90a", "GGML_HIP_NO_VMM"),
        flag(&p, "gfx906", "GGML_HIP_NO_VMM")
    );
    assert_eq!(p.groups.len(), 2);
}

#[test]
fn hip_vmm_flag_is_not_emitted_before_it_existed() {
    let p = Case::new("gfx1100").rocm("6.4").build(4500).plan();
    assert_eq!(flag(&p, "gfx1100", "GGML_HIP_NO_VMM"), None);
    assert!(
        p.notes
            .iter()
            .any(|n| n.message.contains("GGML_HIP_NO_VMM is not declared"))
    );
}

// ---- other AMD quirks -------------------------------------------------------------------------

#[test]
fn q2_and_q2_old_build_warn_for_legacy_pool_builds() {
    let p = Case::new("gfx1100").rocm("7.2").build(8500).plan();
    assert!(warned(&p, "Q2") && warned(&p, "Q2-old-build"));
    let p = Case::new("gfx1100").rocm("7.2").build(11434).plan();
    assert!(warned(&p, "Q2") && !warned(&p, "Q2-old-build"));
    let p = Case::new("gfx90a").rocm("6.4").plan();
    assert!(!warned(&p, "Q2"), "a VMM build is not exposed to Q2");
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
    assert!(noted(&p, "Q7"));
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
    assert!(warned(&plan_measured(&r), "Q8"));
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
    };
    assert!(warned(&resolve(&k, &req).unwrap(), "Q9"));
    assert!(!warned(&Case::new("gfx1100").rocm("6.4").plan(), "Q9"));
}

#[test]
fn q10_strix_nightly_range_warns_on_linux_only() {
    assert!(warned(
        &Case::new("gfx1151").rocm("7.14.0a20260610").plan(),
        "Q10"
    ));
    assert!(!warned(
        &Case::new("gfx1151").rocm("7.14.0a20260608").plan(),
        "Q10"
    ));
}

#[test]
fn q11_apus_get_unified_memory_advice_discrete_gpus_do_not() {
    let p = Case::new("gfx1151,gfx1100").rocm("6.4").plan();
    assert_eq!(
        env(&p, "gfx1151", "GGML_CUDA_ENABLE_UNIFIED_MEMORY").as_deref(),
        Some("1")
    );
    assert_eq!(env(&p, "gfx1100", "GGML_CUDA_ENABLE_UNIFIED_MEMORY"), None);
}

#[test]
fn q12_uma_with_the_2d_copy_fast_path_warns_from_9827() {
    assert!(warned(
        &Case::new("gfx1151").rocm("6.4").build(9900).plan(),
        "Q12"
    ));
    assert!(!warned(
        &Case::new("gfx1151").rocm("6.4").build(9800).plan(),
        "Q12"
    ));
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
    assert!(warned(
        &Case::new("gfx1100").rocm("6.4").os(Os::Windows).plan(),
        "Q18"
    ));
    assert!(!warned(&Case::new("gfx1100").rocm("6.4").plan(), "Q18"));
}

#[test]
fn q20_gfx1152_override_advice_on_old_rocm() {
    // ROCm < 7.13 cannot build gfx1152 at all: refused, and the Q20 advice says what helps.
    let p = Case::new("gfx1152").rocm("7.2").plan();
    assert!(p.refused());
    assert!(warned(&p, "Q20"));
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
    assert!(warned(&p, "Q15-windows"));
    assert_eq!(
        flag(&p, "sm_89", "GGML_CUDA_NO_VMM").as_deref(),
        Some("OFF"),
        "a warning, not a deny, without a measurement"
    );
}

#[test]
fn q16_sm120_driver_595_graphs_advice() {
    let mut d = device(0, Backend::Cuda, "sm_120", SmokeOutcome::Pass, None);
    d.driver_version = Some("595.84".into());
    let p = plan_measured(&report(vec![d], None));
    assert_eq!(
        env(&p, "sm_120", "GGML_CUDA_DISABLE_GRAPHS").as_deref(),
        Some("1")
    );
    let mut d = device(0, Backend::Cuda, "sm_120", SmokeOutcome::Pass, None);
    d.driver_version = Some("580.159.04".into());
    let p = plan_measured(&report(vec![d], None));
    assert_eq!(env(&p, "sm_120", "GGML_CUDA_DISABLE_GRAPHS"), None);
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
    let p = Case::new("gfx1201").rocm("7.14.0").plan();
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
        assert!(
            src.to_lowercase().contains(&id),
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
