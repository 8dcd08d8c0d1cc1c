//! One machine, one build: the GPUs one process sees (listed in one log, or in one report) get one
//! rebuild that covers all of them, or the advice to hide the one that fails; never advice for one
//! GPU that breaks another in the same process (unified memory next to a dGPU, a target list
//! without a visible GPU's architecture).
//!
//! The log is written from llama.cpp build 11434's own format strings with the machine of
//! llama.cpp#22013 (its header says so): an RX 9070 (gfx1201) as device 0, a Radeon 740M iGPU
//! (gfx1103) as device 1, `invalid device function` on device 1.

use std::path::Path;

use gpuprobe::check_build::corpus::Corpus;
use gpuprobe::check_build::signatures::SignatureTable;
use gpuprobe::check_build::{self, CheckReport, InputInfo, InputKind, Level, Options};
use gpuprobe::plan::Mode;
use gpuprobe::platform::Os;
use gpuprobe::profiles::Knowledge;
use gpuprobe::report::{
    Backend, BackendState, BackendStatus, Device, DeviceSource, Host, Report, Smoke, SmokeOutcome,
};

const LOG: &str =
    "tests/fixtures/synthetic/b11434-format-gfx1201-gfx1103-invalid-device-function.txt";

fn judge(machine: Option<&Report>) -> CheckReport {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(LOG);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let k = Knowledge::bundled().expect("bundled knowledge");
    let signatures = SignatureTable::bundled(&k.quirks).expect("bundled signatures");
    let opts = Options {
        knowledge: &k,
        signatures: &signatures,
        binary_dir: None,
        machine: machine.map(|r| check_build::machine_from(r, Mode::Report, "report r.json")),
        llama_build: Some(11434),
        os: Os::Linux,
        env_set: Vec::new(),
        report_path: machine.map(|_| "r.json".to_string()),
    };
    check_build::check_corpus(
        &Corpus::single("server.log", &text),
        InputInfo {
            kind: InputKind::Log,
            path: "server.log".into(),
            runs: vec![],
        },
        vec![],
        &opts,
    )
}

fn device(index: u32, name: &str, arch: &str, integrated: bool) -> Device {
    let mut d = Device::new(index, Backend::Hip, name, arch, DeviceSource::Driver);
    d.smoke = Smoke::with_outcome(SmokeOutcome::Pass, "test");
    d.integrated = Some(integrated);
    d.vram_total_bytes = Some(16 << 30);
    d
}

fn dgpu_and_igpu() -> Report {
    let mut r = Report::new(Host {
        os: "linux".into(),
        kernel: None,
    });
    r.backends.push(BackendStatus {
        backend: Backend::Hip,
        status: BackendState::Ok,
        detail: None,
        driver_version: None,
        runtime_version: Some("7.2.26015".into()),
        hint: None,
    });
    r.devices = vec![
        device(0, "AMD Radeon RX 9070", "gfx1201", false),
        device(1, "AMD Radeon 740M Graphics", "gfx1103", true),
    ];
    r
}

/// The answer for the dGPU + iGPU process: one error, whose fix keeps both architectures in one
/// build or hides the iGPU, and nothing that turns unified memory on for the process.
fn assert_one_machine(r: &CheckReport) {
    let text = check_build::render(r);
    let errors: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.level == Level::Error)
        .collect();
    assert_eq!(errors.len(), 1, "one error:\n{text}");
    let e = errors[0];
    assert_eq!(e.id, "log-hip-invalid-device-function", "{text}");
    assert_eq!(
        r.findings[0].id, e.id,
        "the decisive finding first:\n{text}"
    );
    let fix = e.fix.as_deref().unwrap_or("");
    assert!(
        fix.contains("gfx1201;gfx1103") || fix.contains("gfx1103;gfx1201"),
        "the rebuild keeps both architectures: {fix}"
    );
    assert!(
        fix.contains("HIP_VISIBLE_DEVICES=0"),
        "or hides the iGPU: {fix}"
    );
    assert!(
        !fix.contains("-DGPU_TARGETS=gfx1103 ") && !fix.ends_with("-DGPU_TARGETS=gfx1103"),
        "{fix}"
    );
    for f in &r.findings {
        assert!(
            !f.env
                .iter()
                .any(|v| v.starts_with("GGML_CUDA_ENABLE_UNIFIED_MEMORY")),
            "{} asks for unified memory in a process with a dGPU:\n{text}",
            f.id
        );
        let fx = f.fix.as_deref().unwrap_or("");
        assert!(
            !fx.contains("export GGML_CUDA_ENABLE_UNIFIED_MEMORY"),
            "{}: {fx}",
            f.id
        );
    }
    // One plan, one build line, with both architectures.
    let plan = r.plan.as_ref().expect("a plan");
    assert_eq!(plan.groups.len(), 1, "{text}");
    let targets = &plan.groups[0].targets;
    assert!(
        targets.contains(&"gfx1201".to_string()) && targets.contains(&"gfx1103".to_string()),
        "{targets:?}"
    );
    assert!(
        text.trim_end()
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("decisive: error")),
        "the last line names the decisive problem:\n{text}"
    );
}

#[test]
fn a_dgpu_and_an_igpu_in_one_log_get_one_build_or_the_igpu_hidden() {
    assert_one_machine(&judge(None));
}

#[test]
fn the_same_with_a_report_of_the_machine() {
    let m = dgpu_and_igpu();
    assert_one_machine(&judge(Some(&m)));
}

#[test]
fn json_keeps_the_notes_the_human_report_folds() {
    let r = judge(None);
    let notes = r
        .findings
        .iter()
        .filter(|f| f.level == Level::Note && f.title.contains(" may apply: "))
        .count();
    let text = check_build::render(&r);
    let verbose = check_build::render_verbose(&r);
    if notes > 0 {
        assert!(text.contains("more quirk(s) may apply"), "{text}");
        assert!(!text.contains(" may apply: "), "{text}");
        assert!(verbose.contains(" may apply: "), "{verbose}");
    }
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(
        json["findings"].as_array().map(Vec::len),
        Some(r.findings.len())
    );
}
