//! Each per-build fact from llama.cpp's sources (profiles/llama-facts.toml), through the resolver,
//! at both sides of its range: the last build before the change and the first one with it.

use gpuprobe::llama::LlamaTarget;
use gpuprobe::plan::Plan;
use gpuprobe::platform::Os;
use gpuprobe::profiles::Knowledge;
use gpuprobe::resolve::{Devices, Request, resolve};

fn plan(targets: &str, rocm: Option<&str>, cuda: Option<&str>, build: u64, os: Os) -> Plan {
    let k = Knowledge::bundled().expect("bundled profiles load");
    let req = Request {
        devices: Devices::Declared(k.targets.expand(targets).expect("known targets")),
        backend: None,
        llama: LlamaTarget {
            build: Some(build),
            source: "test".into(),
            checkout: None,
        },
        rocm: rocm.map(|v| v.parse().expect("version")),
        cuda: cuda.map(|v| v.parse().expect("version")),
        rocm_source: "test".into(),
        cuda_source: "test".into(),
        os,
        env_set: vec![],
        force_no_vmm: false,
        evidence: Default::default(),
    };
    resolve(&k, &req).expect("plan")
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Want {
    /// A refusal containing the text.
    Refused(&'static str),
    /// A warning containing the text, and no refusal containing it.
    Warned(&'static str),
    /// Neither a refusal nor a warning containing the text.
    Clear(&'static str),
}

struct Case {
    what: &'static str,
    targets: &'static str,
    rocm: Option<&'static str>,
    cuda: Option<&'static str>,
    build: u64,
    os: Os,
    want: Want,
}

const fn hip(
    what: &'static str,
    t: &'static str,
    rocm: Option<&'static str>,
    build: u64,
    want: Want,
) -> Case {
    Case {
        what,
        targets: t,
        rocm,
        cuda: None,
        build,
        os: Os::Linux,
        want,
    }
}

const fn cuda(
    what: &'static str,
    t: &'static str,
    v: &'static str,
    build: u64,
    os: Os,
    want: Want,
) -> Case {
    Case {
        what,
        targets: t,
        rocm: None,
        cuda: Some(v),
        build,
        os,
        want,
    }
}

const FLOOR61: &str = "requires ROCm/HIP >= 6.1";
const FLOOR55: &str = "requires ROCm/HIP >= 5.5";
const PDL: &str = "Programmatic Dependent Launch";

const CASES: &[Case] = &[
    // hip_min_version: 6.1 from build 6152 (29c8fbe4e), 5.5 from 4598 (27d135c97).
    hip(
        "ROCm 5.7.1 at b11434",
        "gfx1030",
        Some("5.7.1"),
        11434,
        Want::Refused(FLOOR61),
    ),
    hip(
        "ROCm 6.0 at b6152",
        "gfx1030",
        Some("6.0"),
        6152,
        Want::Refused(FLOOR61),
    ),
    hip(
        "ROCm 6.0 at b6151",
        "gfx1030",
        Some("6.0"),
        6151,
        Want::Clear("requires ROCm/HIP"),
    ),
    hip(
        "ROCm 6.1 at b6152",
        "gfx1030",
        Some("6.1"),
        6152,
        Want::Clear("requires ROCm/HIP"),
    ),
    hip(
        "ROCm 5.4 at b4598",
        "gfx1030",
        Some("5.4"),
        4598,
        Want::Refused(FLOOR55),
    ),
    hip(
        "ROCm 5.4 at b4597",
        "gfx1030",
        Some("5.4"),
        4597,
        Want::Clear("requires ROCm/HIP"),
    ),
    // amd_arch:gfx950: named from build 8739 (#21570).
    hip(
        "gfx950 at b8738",
        "gfx950",
        Some("7.0"),
        8738,
        Want::Warned("predates b8739"),
    ),
    hip(
        "gfx950 at b8739",
        "gfx950",
        Some("7.0"),
        8739,
        Want::Clear("vendor header names"),
    ),
    // amd_arch:gfx1152/gfx1153: named from build 9563 (#24129; 9553 is the last release without).
    hip(
        "gfx1152 at b9553",
        "gfx1152",
        None,
        9553,
        Want::Warned("corrupted output"),
    ),
    hip(
        "gfx1152 at b9563",
        "gfx1152",
        None,
        9563,
        Want::Clear("vendor header names"),
    ),
    hip(
        "gfx1153 at b9553",
        "gfx1153",
        None,
        9553,
        Want::Warned("predates b9563"),
    ),
    hip(
        "gfx1153 at b9563",
        "gfx1153",
        None,
        9563,
        Want::Clear("vendor header names"),
    ),
    // cuda_pdl_min_cudart: PDL from build 9254 (e94722822) with CUDART >= 11.8; CUDA 12.0 has the
    // device functions, MSVC needs 12.3 before it compiles PDL at all.
    cuda(
        "CUDA 11.8 sm_90 at b9254",
        "sm_90",
        "11.8",
        9254,
        Os::Linux,
        Want::Refused(PDL),
    ),
    cuda(
        "CUDA 11.8 sm_90 at b9253",
        "sm_90",
        "11.8",
        9253,
        Os::Linux,
        Want::Clear(PDL),
    ),
    cuda(
        "CUDA 11.8 sm_90 at b11434",
        "sm_90",
        "11.8",
        11434,
        Os::Linux,
        Want::Refused(PDL),
    ),
    cuda(
        "CUDA 12.0 sm_90 at b11434",
        "sm_90",
        "12.0",
        11434,
        Os::Linux,
        Want::Clear(PDL),
    ),
    cuda(
        "CUDA 11.8 sm_89 at b11434",
        "sm_89",
        "11.8",
        11434,
        Os::Linux,
        Want::Clear(PDL),
    ),
    cuda(
        "CUDA 11.8 sm_90 on Windows",
        "sm_90",
        "11.8",
        11434,
        Os::Windows,
        Want::Clear(PDL),
    ),
    // Targets no ROCm release supports: refused with the alternative.
    hip(
        "gfx90c (Renoir APU)",
        "gfx90c",
        None,
        11434,
        Want::Refused("Vulkan"),
    ),
    hip(
        "gfx11-generic",
        "gfx11-generic",
        None,
        11434,
        Want::Refused("generic code-object target"),
    ),
];

/// The CMAKE_CUDA_ARCHITECTURES value planned for sm_120 with CUDA 12.8 at `build`.
fn sm120_spelling(build: u64) -> String {
    let p = plan("sm_120", None, Some("12.8"), build, Os::Linux);
    p.groups[0]
        .flag("CMAKE_CUDA_ARCHITECTURES")
        .expect("architectures flag")
        .value
        .clone()
}

/// cuda_arch_12x (profiles/llama-options.toml): plain 120 up to 7531; 120a from 7532 (ptxas
/// rejects plain 120, #17906), through 7538-7574 (CMake rejects it) and from 7575 (rewritten).
#[test]
fn blackwell_spelling_at_each_boundary() {
    for (build, want) in [
        (7531, "120"),
        (7532, "120a"),
        (7537, "120a"),
        (7538, "120a"),
        (7574, "120a"),
        (7575, "120a"),
    ] {
        assert_eq!(sm120_spelling(build), want, "build {build}");
    }
}

#[test]
fn each_fact_at_both_sides_of_its_range() {
    let mut failures = Vec::new();
    for c in CASES {
        let p = plan(c.targets, c.rocm, c.cuda, c.build, c.os);
        let has =
            |notes: &[gpuprobe::plan::Note], s: &str| notes.iter().any(|n| n.message.contains(s));
        let ok = match c.want {
            Want::Refused(s) => has(&p.refusals, s),
            Want::Warned(s) => has(&p.warnings, s) && !has(&p.refusals, s),
            Want::Clear(s) => !has(&p.warnings, s) && !has(&p.refusals, s),
        };
        if !ok {
            failures.push(format!(
                "{}: wanted {:?}; refusals {:?}; warnings {:?}",
                c.what,
                c.want,
                p.refusals.iter().map(|n| &n.message).collect::<Vec<_>>(),
                p.warnings.iter().map(|n| &n.message).collect::<Vec<_>>()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The refusal names the fix, and the fix's version is one the floor accepts.
#[test]
fn hip_floor_refusal_names_the_fix() {
    let p = plan("gfx1100", Some("5.7.1"), None, 11434, Os::Linux);
    let r = p
        .refusals
        .iter()
        .find(|n| n.message.contains(FLOOR61))
        .expect("refused");
    assert!(r.message.contains("llama.cpp b6152+"), "{}", r.message);
    assert!(
        r.message.contains("fix: build with ROCm 6.1 or later"),
        "{}",
        r.message
    );
    assert!(r.message.contains("before 6152"), "{}", r.message);
}
