//! Each audited or added quirk record at both sides of its range, through the real resolver: the
//! version or build before and after the bound, the architecture and OS in and out of scope, the
//! kernel known or not. One row per case; a row says whether the record applies (a warning, a
//! flag or env advice it gives), could apply (a note saying what would make it apply), or is
//! absent from the plan.

use gpuprobe::evidence::Evidence;
use gpuprobe::llama::LlamaTarget;
use gpuprobe::plan::{Mode, Plan};
use gpuprobe::platform::Os;
use gpuprobe::profiles::Knowledge;
use gpuprobe::report::{Backend, Device, DeviceSource, Host, Report, Smoke, SmokeOutcome};
use gpuprobe::resolve::{Devices, Request, resolve};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Applies,
    Possible,
    Absent,
}
use Seen::{Absent, Applies, Possible};

/// How the GPUs are given: declared targets, one machine's GPUs, or a measured report with a
/// Linux kernel (`uname -r`).
#[derive(Clone, Copy)]
enum Gpus {
    Targets(&'static str),
    Machine(&'static str),
    Measured {
        arch: &'static str,
        count: u32,
        apu: bool,
        kernel: Option<&'static str>,
    },
}

struct Row {
    quirk: &'static str,
    gpus: Gpus,
    os: Os,
    toolkit: Option<&'static str>,
    build: u64,
    want: Seen,
}

const fn row(
    quirk: &'static str,
    gpus: Gpus,
    os: Os,
    toolkit: Option<&'static str>,
    build: u64,
    want: Seen,
) -> Row {
    Row {
        quirk,
        gpus,
        os,
        toolkit,
        build,
        want,
    }
}

const L: Os = Os::Linux;
const W: Os = Os::Windows;
const B: u64 = 11434;

const fn t(s: &'static str) -> Gpus {
    Gpus::Targets(s)
}
const fn m(s: &'static str) -> Gpus {
    Gpus::Machine(s)
}
const fn apu(arch: &'static str, kernel: Option<&'static str>) -> Gpus {
    Gpus::Measured {
        arch,
        count: 1,
        apu: true,
        kernel,
    }
}
const fn dgpu(arch: &'static str, kernel: Option<&'static str>) -> Gpus {
    Gpus::Measured {
        arch,
        count: 1,
        apu: false,
        kernel,
    }
}

const ROWS: &[Row] = &[
    // Q3: from ROCm 7.0, open-ended (7.14 was only "reported clean").
    row("Q3", t("gfx1100"), L, Some("6.4"), B, Absent),
    row("Q3", t("gfx1100"), L, Some("7.0"), B, Applies),
    row("Q3", t("gfx1100"), L, Some("7.14"), B, Applies),
    row("Q3", t("gfx1100"), L, Some("7.15"), B, Applies),
    row("Q3", t("sm_90"), L, Some("12.8"), B, Absent),
    // Q4: gfx12 on Linux from ROCm 7.2.
    row("Q4", t("gfx1201"), L, Some("7.1"), B, Absent),
    row("Q4", t("gfx1201"), L, Some("7.2"), B, Applies),
    row("Q4", t("gfx1201"), L, Some("7.14"), B, Applies),
    row("Q4", t("gfx1100"), L, Some("7.2"), B, Absent),
    row("Q4", t("gfx1201"), W, Some("7.2"), B, Absent),
    // Q33: ROCm 7.14 on gfx1201 and gfx1100 only.
    row("Q33", t("gfx1100"), L, Some("7.13"), B, Absent),
    row("Q33", t("gfx1100"), L, Some("7.14"), B, Applies),
    row("Q33", t("gfx1201"), L, Some("7.14"), B, Applies),
    row("Q33", t("gfx1101"), L, Some("7.14"), B, Absent),
    // Q21: gfx12 on Linux, any runtime.
    row("Q21", t("gfx1201"), L, Some("7.2"), B, Applies),
    row("Q21", t("gfx1100"), L, Some("7.2"), B, Absent),
    row("Q21", t("gfx1201"), W, Some("7.2"), B, Absent),
    // Q34: hipBLASLt from ROCm 7.2 on gfx12.
    row("Q34", t("gfx1201"), L, Some("7.1"), B, Absent),
    row("Q34", t("gfx1201"), L, Some("7.2"), B, Applies),
    row("Q34", t("gfx1200"), L, Some("7.14"), B, Applies),
    row("Q34", t("gfx1100"), L, Some("7.2"), B, Absent),
    // Q22: no longer ends at ROCm 7.0 (a target, not a release).
    row("Q22", t("gfx906"), L, Some("6.4"), B, Applies),
    row("Q22", t("gfx906"), L, Some("7.0"), B, Applies),
    row("Q22", t("sm_90"), L, Some("12.8"), B, Absent),
    // Q7: by OS and cause.
    row("Q7", m("gfx1201,gfx1201"), W, Some("7.1"), B, Applies),
    row("Q7", m("gfx1030,gfx1030"), W, Some("6.4"), B, Applies),
    row("Q7", m("gfx1201"), W, Some("7.1"), B, Absent),
    row("Q7", m("gfx1100,gfx1100"), W, Some("7.1"), B, Absent),
    row("Q7", m("gfx1201,gfx1201"), L, Some("7.2"), B, Absent),
    row(
        "Q7-linux-rdna4",
        m("gfx1200,gfx1200"),
        L,
        Some("7.2"),
        B,
        Applies,
    ),
    row(
        "Q7-linux-rdna4",
        m("gfx1201,gfx1201"),
        L,
        Some("7.2"),
        B,
        Applies,
    ),
    row(
        "Q7-linux-rdna4",
        m("gfx1201,gfx1201"),
        W,
        Some("7.1"),
        B,
        Absent,
    ),
    row(
        "Q7-linux-kernel",
        m("gfx906,gfx906"),
        L,
        Some("6.3"),
        B,
        Applies,
    ),
    row("Q7-linux-kernel", m("gfx906"), L, Some("6.3"), B, Absent),
    row(
        "Q7-linux-kernel",
        m("gfx900,gfx900"),
        L,
        Some("6.3.2"),
        B,
        Applies,
    ),
    row("Q7-linux-kernel", m("gfx900"), L, Some("6.3.2"), B, Absent),
    row(
        "Q7-linux-kernel",
        m("gfx1030,gfx1030"),
        L,
        Some("6.3"),
        B,
        Absent,
    ),
    // Q11 / Q11-gtt: unified memory works on every kernel (Q11); the GTT alternative exists
    // from Linux 6.10 (Q11-gtt), could apply when the kernel is unknown.
    row(
        "Q11",
        apu("gfx1151", Some("6.8.0-45-generic")),
        L,
        Some("7.2"),
        9826,
        Applies,
    ),
    row(
        "Q11",
        apu("gfx1151", Some("6.10.0")),
        L,
        Some("7.2"),
        9826,
        Applies,
    ),
    row(
        "Q11-gtt",
        apu("gfx1151", Some("6.8.0-45-generic")),
        L,
        Some("7.2"),
        9826,
        Absent,
    ),
    row(
        "Q11-gtt",
        apu("gfx1151", Some("6.9.12")),
        L,
        Some("7.2"),
        9826,
        Absent,
    ),
    row(
        "Q11-gtt",
        apu("gfx1151", Some("6.10.0")),
        L,
        Some("7.2"),
        9826,
        Applies,
    ),
    row(
        "Q11-gtt",
        apu("gfx1151", Some("7.0.0-28-generic")),
        L,
        Some("7.2"),
        9826,
        Applies,
    ),
    row(
        "Q11-gtt",
        apu("gfx1151", None),
        L,
        Some("7.2"),
        9826,
        Possible,
    ),
    row("Q11-gtt", t("gfx1151"), L, Some("7.2"), 9826, Possible),
    row("Q11-gtt", t("gfx1151"), W, Some("7.1"), 9826, Absent),
    row(
        "Q11",
        dgpu("gfx1100", Some("6.8.0")),
        L,
        Some("7.2"),
        9826,
        Absent,
    ),
    row(
        "Q11-gtt",
        dgpu("gfx1100", Some("6.12.0")),
        L,
        Some("7.2"),
        9826,
        Absent,
    ),
    // Q15-jetson: Orin seen (deny); older Jetsons extrapolated (a liftable deny).
    row("Q15-jetson", t("sm_87"), L, Some("12.6"), B, Applies),
    row("Q15-jetson", t("sm_72"), L, Some("12.6"), B, Absent),
    row("Q15-jetson-older", t("sm_72"), L, Some("12.6"), B, Applies),
    row("Q15-jetson-older", t("sm_87"), L, Some("12.6"), B, Absent),
    // Q16: no driver bound any more; OSes with reports.
    row("Q16", t("sm_120"), L, Some("12.8"), B, Applies),
    row("Q16", t("sm_120"), W, Some("12.8"), B, Applies),
    row("Q16", t("sm_89"), L, Some("12.8"), B, Absent),
    // Q20: code objects from ROCm 7.13 (was 7.14).
    row("Q20", t("gfx1152"), L, Some("7.12"), B, Applies),
    row("Q20", t("gfx1152"), L, Some("7.13"), B, Absent),
    // Q20-build: before #24129 (first checked build with it: 9563; 9553 lacks it).
    row("Q20-build", t("gfx1152"), L, Some("7.14"), 9409, Applies),
    row("Q20-build", t("gfx1153"), L, Some("7.14"), 9409, Applies),
    row("Q20-build", t("gfx1152"), L, Some("7.14"), 9553, Applies),
    row("Q20-build", t("gfx1152"), L, Some("7.14"), 9563, Absent),
    row("Q20-build", t("gfx1151"), L, Some("7.14"), 9409, Absent),
    // Q32: open-ended from 7.2 (7.13 was seen working, not a fix).
    row("Q32", t("gfx1151"), L, Some("7.1"), B, Absent),
    row("Q32", t("gfx1151"), L, Some("7.2"), B, Applies),
    row("Q32", t("gfx1151"), L, Some("7.13"), B, Applies),
    row("Q32-mmap", t("gfx1151"), L, Some("6.4"), B, Applies),
    row("Q32-mmap", t("gfx1150"), L, Some("6.4"), B, Absent),
    // Q35: Linux 6.18 and later on RDNA3 and gfx1201.
    row(
        "Q35",
        dgpu("gfx1100", Some("6.17.9")),
        L,
        Some("7.2"),
        B,
        Absent,
    ),
    row(
        "Q35",
        dgpu("gfx1100", Some("6.18.3-arch1-1")),
        L,
        Some("7.2"),
        B,
        Applies,
    ),
    row(
        "Q35",
        dgpu("gfx1201", Some("7.0.1")),
        L,
        Some("7.2"),
        B,
        Applies,
    ),
    row(
        "Q35",
        dgpu("gfx1030", Some("6.18.3")),
        L,
        Some("7.2"),
        B,
        Absent,
    ),
    row("Q35", t("gfx1100"), L, Some("7.2"), B, Possible),
    row("Q35", t("gfx1100"), W, Some("7.1"), B, Absent),
    // Q36: HIP graphs on by default from 8893; the rocWMMA path gone from 10115.
    row("Q36", t("gfx1201"), W, Some("7.1"), 8892, Absent),
    row("Q36", t("gfx1201"), W, Some("7.1"), 9553, Applies),
    row("Q36", t("gfx1201"), W, Some("7.1"), 10115, Absent),
    row("Q36", t("gfx1201"), L, Some("7.2"), 9553, Absent),
    // Q37: automatic peer access before #21910 (first checked build with the opt-in: 9007).
    row("Q37", m("sm_89,sm_89"), L, Some("12.8"), 8700, Applies),
    row("Q37", m("sm_89,sm_89"), L, Some("12.8"), 9007, Absent),
    row("Q37", m("sm_89"), L, Some("12.8"), 8700, Absent),
    // Q38: multi-GPU ROCm checkpoint restore on Linux.
    row("Q38", m("gfx1201,gfx1201"), L, Some("7.2"), B, Applies),
    row("Q38", m("gfx1201"), L, Some("7.2"), B, Absent),
    row("Q38", m("gfx1100,gfx1100"), W, Some("7.1"), B, Absent),
    row("Q38", m("gfx906,gfx906"), L, Some("7.2.4"), 10088, Applies),
    row("Q38", m("gfx1201,gfx1201"), L, Some("7.2"), 8000, Absent),
    // Q40: Strix Halo page faults that follow the kernel/driver (no kernel range: not one boundary).
    row("Q40", t("gfx1151"), L, Some("7.2.1"), B, Applies),
    row("Q40", t("gfx1151"), W, Some("7.2.1"), B, Absent),
    row("Q40", t("gfx1150"), L, Some("7.2.1"), B, Absent),
    // Q39: rocBLAS in one process over GPUs of two architectures (Linux, no fixed release named).
    row(
        "Q39",
        m("gfx908,gfx908,gfx1030"),
        L,
        Some("7.1.0"),
        B,
        Applies,
    ),
    row("Q39", m("gfx1201,gfx1100"), L, Some("7.2.1"), B, Applies),
    row("Q39", m("gfx1201,gfx1201"), L, Some("7.2.1"), B, Absent),
    row("Q39", m("gfx1201"), L, Some("7.2.1"), B, Absent),
    row("Q39", t("gfx1201,gfx1100"), L, Some("7.2.1"), B, Possible),
    row("Q39", m("gfx1201,gfx1100"), W, Some("7.1"), B, Absent),
    // Q42: ROCm 6.4.3 on gfx900/gfx906/gfx1031 (6.4.1 worked; Linux; no fixed release named).
    row("Q42", t("gfx900"), L, Some("6.4.1"), B, Absent),
    row("Q42", t("gfx900"), L, Some("6.4.3"), B, Applies),
    row("Q42", t("gfx1031"), L, Some("6.4.3"), B, Applies),
    row("Q42", t("gfx906"), L, Some("7.0"), B, Applies),
    row("Q42", t("gfx1030"), L, Some("6.4.3"), B, Absent),
    row("Q42", t("gfx1031"), W, Some("6.4.3"), B, Absent),
    row("Q42", t("gfx1031"), L, None, B, Possible),
];

fn report(arch: &str, count: u32, apu: bool, kernel: Option<&str>, rocm: &str) -> Report {
    let mut r = Report::new(Host {
        os: "linux".into(),
        kernel: kernel.map(str::to_string),
    });
    r.backends.push(gpuprobe::report::BackendStatus {
        backend: Backend::Hip,
        status: gpuprobe::report::BackendState::Ok,
        detail: None,
        driver_version: None,
        runtime_version: Some(rocm.to_string()),
        hint: None,
    });
    for i in 0..count {
        let mut d = Device::new(
            i,
            Backend::Hip,
            format!("test {arch}"),
            arch,
            DeviceSource::ProbeProgram,
        );
        d.smoke = Smoke::with_outcome(SmokeOutcome::NotRun, "test");
        d.integrated = Some(apu);
        d.vram_total_bytes = Some(16 << 30);
        d.wave_size = Some(32);
        r.devices.push(d);
    }
    r
}

fn plan(k: &Knowledge, r: &Row) -> Plan {
    let toolkit = r.toolkit.map(|v| v.parse().unwrap());
    let cuda = |names: &[String]| names.iter().any(|n| n.starts_with("sm_"));
    let measured;
    let (devices, is_cuda) = match r.gpus {
        Gpus::Targets(s) => {
            let names = k.targets.expand(s).unwrap();
            let c = cuda(&names);
            (Devices::Declared(names), c)
        }
        Gpus::Machine(s) => {
            let names: Vec<String> = s.split(',').map(str::to_string).collect();
            let c = cuda(&names);
            (Devices::Machine(names), c)
        }
        Gpus::Measured {
            arch,
            count,
            apu,
            kernel,
        } => {
            measured = report(arch, count, apu, kernel, r.toolkit.unwrap_or("7.2"));
            (
                Devices::Measured {
                    report: &measured,
                    mode: Mode::Report,
                },
                false,
            )
        }
    };
    let req = Request {
        devices,
        backend: None,
        llama: LlamaTarget {
            build: Some(r.build),
            source: "test".into(),
            checkout: None,
        },
        rocm: if is_cuda { None } else { toolkit.clone() },
        cuda: if is_cuda { toolkit } else { None },
        rocm_source: "test".into(),
        cuda_source: "test".into(),
        os: r.os,
        env_set: vec![],
        force_no_vmm: false,
        evidence: Evidence::default(),
    };
    resolve(k, &req).expect("plan")
}

fn seen(p: &Plan, id: &str) -> Seen {
    let has = |q: &[String]| q.iter().any(|x| x == id);
    // A record of level "note" that applies says so in a note of its own; a "may apply" note is
    // one that could apply.
    let acts = p.warnings.iter().any(|n| has(&n.quirks))
        || p.notes
            .iter()
            .any(|n| has(&n.quirks) && !n.message.contains(" may apply: "))
        || p.groups.iter().any(|g| {
            g.flags.iter().any(|f| has(&f.quirks)) || g.env.iter().any(|e| has(&e.quirks))
        });
    if acts {
        Applies
    } else if p.notes.iter().any(|n| has(&n.quirks)) {
        Possible
    } else {
        Absent
    }
}

#[test]
fn each_audited_record_at_both_sides_of_its_range() {
    let k = Knowledge::bundled().expect("bundled profiles load");
    let mut wrong = Vec::new();
    for r in ROWS {
        let p = plan(&k, r);
        let got = seen(&p, r.quirk);
        if got != r.want {
            let gpus = match r.gpus {
                Gpus::Targets(s) | Gpus::Machine(s) => s.to_string(),
                Gpus::Measured { arch, kernel, .. } => format!("{arch} kernel {kernel:?}"),
            };
            wrong.push(format!(
                "{} on {gpus} {:?} toolkit {:?} build {}: want {:?}, got {got:?}",
                r.quirk, r.os, r.toolkit, r.build, r.want
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} rows:\n{}",
        wrong.len(),
        ROWS.len(),
        wrong.join("\n")
    );
}

/// Unified memory is advised on every kernel; the GTT route is offered as the alternative only
/// where the kernel has it (6.10 and later), and a kernel string that is not a version is unknown.
#[test]
fn the_gtt_alternative_follows_the_kernel() {
    let k = Knowledge::bundled().expect("bundled profiles load");
    let at = |kernel: Option<&'static str>| {
        let p = plan(
            &k,
            &row("Q11", apu("gfx1151", kernel), L, Some("7.2"), 9826, Applies),
        );
        let uma = p
            .groups
            .iter()
            .flat_map(|g| &g.env)
            .any(|e| e.name == "GGML_CUDA_ENABLE_UNIFIED_MEMORY" && e.value == "1");
        (uma, seen(&p, "Q11-gtt"))
    };
    assert_eq!(at(Some("6.8.0")), (true, Absent));
    assert_eq!(at(Some("6.10.0-rc1")), (true, Applies));
    assert_eq!(at(None), (true, Possible));
    assert_eq!(at(Some("unknown")), (true, Possible));
}

/// Q7's remedy is the CMake flag, on the OS the reports come from.
#[test]
fn peer_copy_flag_follows_os_and_pair() {
    let k = Knowledge::bundled().expect("bundled profiles load");
    let flag = |gpus, os, rocm| {
        let p = plan(&k, &row("Q7", gpus, os, Some(rocm), B, Applies));
        p.groups.iter().any(|g| {
            g.flag("GGML_CUDA_NO_PEER_COPY")
                .is_some_and(|f| f.value == "ON")
        })
    };
    assert!(flag(m("gfx1201,gfx1201"), W, "7.1"));
    assert!(flag(m("gfx1201,gfx1201"), L, "7.2"));
    assert!(!flag(m("gfx1100,gfx1100"), L, "7.2"));
    assert!(!flag(m("gfx1201"), W, "7.1"));
}
