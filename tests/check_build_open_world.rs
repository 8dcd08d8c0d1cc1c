//! check-build in an open world: a failure line that no signature explains is named ("unrecognised
//! failure", warning), never read as "no problems"; and real successful llama.cpp logs stay clean.
//!
//! - `tests/fixtures/open-world/failures.toml`: real failure lines from public reports (each case
//!   names its source), none of which a signature explained when collected.
//! - The clean corpus: real logs of successful llama.cpp runs of several eras, CPU and GPU (the
//!   fixtures listed in `CLEAN`, each naming its source in its header, and the H200 captures).

use std::path::{Path, PathBuf};

use gpuprobe::check_build::corpus::Corpus;
use gpuprobe::check_build::signatures::SignatureTable;
use gpuprobe::check_build::{self, CheckReport, InputInfo, InputKind, Level, Options};
use gpuprobe::platform::Os;
use gpuprobe::profiles::Knowledge;
use serde::Deserialize;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn judge(label: &str, text: &str) -> CheckReport {
    let k = Knowledge::bundled().expect("bundled knowledge");
    let signatures = SignatureTable::bundled(&k.quirks).expect("bundled signatures");
    let opts = Options {
        knowledge: &k,
        signatures: &signatures,
        binary_dir: None,
        machine: None,
        llama_build: None,
        os: Os::Linux,
        env_set: Vec::new(),
        report_path: None,
    };
    check_build::check_corpus(
        &Corpus::single(label, text),
        InputInfo {
            kind: InputKind::Log,
            path: label.into(),
            runs: vec![],
        },
        vec![],
        &opts,
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Failures {
    case: Vec<FailureCase>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FailureCase {
    source: String,
    what: String,
    log: String,
    line: usize,
    expect: String,
    /// When the report was written (the cases collected in December 2026 carry it).
    #[serde(default)]
    date: Option<String>,
    /// What check-build said when the case was collected, and how right that was.
    #[serde(default)]
    before: Option<String>,
    /// Findings that must not appear: a reading the case corrected.
    #[serde(default)]
    absent: Vec<String>,
}

fn failures() -> Vec<FailureCase> {
    let p = root().join("tests/fixtures/open-world/failures.toml");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    toml::from_str::<Failures>(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .case
}

#[test]
fn every_unexplained_failure_line_is_a_problem_that_quotes_it() {
    let cases = failures();
    assert!(cases.len() >= 34, "the corpus shrank: {}", cases.len());
    let mut wrong = Vec::new();
    for c in &cases {
        assert!(
            c.source.starts_with("https://"),
            "{}: source must be a URL",
            c.what
        );
        let r = judge("report.log", &c.log);
        let found = r
            .findings
            .iter()
            .find(|f| f.id == c.expect && f.evidence.iter().any(|q| q.line == c.line));
        let problem =
            r.summary.exit_code != 0 && r.findings.iter().any(|f| f.level >= Level::Warning);
        for a in &c.absent {
            if r.findings.iter().any(|f| &f.id == a) {
                wrong.push(format!(
                    "{} ({}): `{a}` must not be reported, got:\n{}",
                    c.what,
                    c.source,
                    check_build::render(&r)
                ));
            }
        }
        match found {
            Some(f) if problem && f.level >= Level::Warning => {
                if c.expect.starts_with("unrecognised-") {
                    assert!(
                        f.title.contains(&format!("report.log:{}", c.line)),
                        "{}",
                        f.title
                    );
                    assert!(f.fix.as_deref().is_some_and(|x| !x.is_empty()));
                }
            }
            _ => wrong.push(format!(
                "{} ({}): expected `{}` on line {}, got:\n{}",
                c.what,
                c.source,
                c.expect,
                c.line,
                check_build::render(&r)
            )),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn the_december_2026_collection_is_dated_and_records_what_was_said_before() {
    // 19 logs from public reports that no fixture held, collected to measure check-build on
    // failures it had not seen: each names its date and what check-build said then.
    let dated: Vec<FailureCase> = failures()
        .into_iter()
        .filter(|c| c.date.is_some())
        .collect();
    assert!(dated.len() >= 15, "{}", dated.len());
    let mut urls = std::collections::BTreeSet::new();
    for c in &dated {
        assert!(urls.insert(c.source.clone()), "{}: listed twice", c.source);
        let date = c.date.as_deref().unwrap_or_default();
        assert!(
            date.len() >= 7 && date[..4].parse::<u32>().is_ok_and(|y| y >= 2025),
            "{}: date `{date}`",
            c.source
        );
        let before = c.before.as_deref().unwrap_or_default();
        assert!(
            ["right", "partly", "silent", "wrong"]
                .iter()
                .any(|v| before.starts_with(v)),
            "{}: `before` must start with right / partly / silent / wrong: {before}",
            c.source
        );
    }
}

#[test]
fn the_verdict_is_never_no_problems_over_an_unexplained_failure() {
    let r = judge(
        "x.log",
        "ggml_cuda_init: found 1 ROCm devices:\nSegmentation fault (core dumped)\n",
    );
    assert_eq!(r.summary.exit_code, 1);
    let text = check_build::render(&r);
    assert!(!text.contains("no problems"), "{text}");
    assert!(text.contains("unrecognised failure"), "{text}");
}

#[test]
fn a_recognised_failure_takes_its_abort_lines_with_it() {
    // llama.cpp#22013 (ROCm, b8821): the error line is a signature's; the abort line and the failed
    // op printed before it, and the debugger's line after it, belong to it.
    let log = "/home/me/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:97: ROCm error\nggml_cuda_compute_forward: MUL_MAT failed\nROCm error: invalid device function\n  current device: 1, in function ggml_cuda_compute_forward at /home/me/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:2932\n  err\n[Inferior 1 (process 35621) detached]\n";
    let r = judge("x.log", log);
    assert!(
        r.findings
            .iter()
            .any(|f| f.id == "log-hip-invalid-device-function"),
        "{}",
        check_build::render(&r)
    );
    assert!(
        !r.findings.iter().any(|f| f.id.starts_with("unrecognised-")),
        "{}",
        check_build::render(&r)
    );
    // Far from any recognised failure, the same kind of line is named.
    let far = format!(
        "ggml_cuda_compute_forward: MUL_MAT failed\n{}{log}",
        "ok\n".repeat(10)
    );
    let r = judge("x.log", &far);
    assert!(
        r.findings.iter().any(|f| f.id == "unrecognised-ggml"),
        "{}",
        check_build::render(&r)
    );
}

/// Real logs of successful llama.cpp runs: CPU and GPU, 2023 to 2026 builds.
const CLEAN: &[&str] = &[
    "tests/fixtures/llama-logs/cpu-b11434-sdist-version-and-list.txt",
    "tests/fixtures/llama-logs/ggml-ci-v100-b968.txt",
    "tests/fixtures/llama-logs/ggml-ci-v100-b4526.txt",
    "tests/fixtures/llama-logs/h200-b11434-legacy-test-backend-ops.txt",
    "tests/fixtures/llama-logs/h200-b11434-sdist-list-devices-verbose.txt",
    "tests/fixtures/llama-logs/h200-b11434-sdist-list-devices.txt",
    "tests/fixtures/llama-logs/h200-b11434-sdist-version.txt",
    "tests/fixtures/llama-logs/lemonade-11-gfx1151-bench-b6431.txt",
    "tests/fixtures/llama-logs/lemonade-2319-rocm-7900xtx-device-info.txt",
    "tests/fixtures/llama-logs/llama-12238-gfx906-b4819-devices.txt",
    "tests/fixtures/llama-logs/llama-16659-vulkan-b6795.txt",
    "tests/fixtures/llama-logs/llama-26738-gfx900-b10301-version.txt",
    "tests/fixtures/llama-logs/llama-28338-version-b10788.txt",
    "tests/fixtures/llama-logs/rocmlibs-50-gfx1103-windows-b6367.txt",
    "tests/fixtures/nvidia-2x-h200-driver580/bench.txt",
    "tests/fixtures/nvidia-2x-h200-driver580-hostcheck/bench.txt",
    "tests/fixtures/nvidia-2x-h200-driver580-shared/bench.txt",
    "tests/fixtures/nvidia-2x-h200-driver580-v2/bench.txt",
    "tests/fixtures/nvidia-h200-driver580-smoke-v2/bench.txt",
    "tests/fixtures/nvidia-h200-driver580-e2e/test-backend-ops-counts.txt",
];

#[test]
fn real_successful_logs_stay_clean() {
    let mut alarms = Vec::new();
    for rel in CLEAN {
        let p = root().join(rel);
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let r = judge(rel, &text);
        for f in r
            .findings
            .iter()
            .filter(|f| f.id.starts_with("unrecognised-"))
        {
            alarms.push(format!("{rel}: {} {:?}", f.id, f.evidence));
        }
    }
    assert!(alarms.is_empty(), "false alarms:\n{}", alarms.join("\n"));
}

/// The model-not-found run of the H200 capture failed for a reason outside the build: one
/// recognised note, and its aftermath (llama.cpp's loading errors) is not named again.
#[test]
fn a_missing_model_file_is_one_note_not_a_build_problem() {
    let rel = "tests/fixtures/llama-logs/h200-b11434-sdist-server-lv4.txt";
    let text = std::fs::read_to_string(root().join(rel)).expect("fixture");
    let r = judge(rel, &text);
    assert!(
        r.findings
            .iter()
            .any(|f| f.id == "log-model-file-not-opened" && f.level == Level::Note),
        "{}",
        check_build::render(&r)
    );
    assert!(
        !r.findings.iter().any(|f| f.id.starts_with("unrecognised-")),
        "{}",
        check_build::render(&r)
    );
}

/// CMake's own word that an option did nothing (its warning's format, with the variables of
/// lemonade-sdk/llamacpp-rocm PR #94 and llama.cpp#8155): each name that is not an option of the
/// build is a warning naming the option meant and what the build did instead.
#[test]
fn options_cmake_did_not_use_are_warnings_that_name_the_real_option() {
    let log = "-- Configuring done (2.1s)\nCMake Warning:\n  Manually-specified variables were not used by the project:\n\n    GGML_HIP_GRAPHS\n    GGML_USE_VMM\n    LLAMA_CUBLAS\n\n\n-- Generating done (0.1s)\n";
    let k = Knowledge::bundled().expect("bundled knowledge");
    let signatures = SignatureTable::bundled(&k.quirks).expect("bundled signatures");
    let opts = Options {
        knowledge: &k,
        signatures: &signatures,
        binary_dir: None,
        machine: None,
        llama_build: Some(11434),
        os: Os::Linux,
        env_set: Vec::new(),
        report_path: None,
    };
    let r = check_build::check_corpus(
        &Corpus::single("configure.log", log),
        InputInfo {
            kind: InputKind::Log,
            path: "configure.log".into(),
            runs: vec![],
        },
        vec![],
        &opts,
    );
    let unused: Vec<&check_build::Finding> = r
        .findings
        .iter()
        .filter(|f| f.id == "cmake-unused-variable")
        .collect();
    let text = check_build::render(&r);
    // GGML_HIP_GRAPHS is an option of build 11434 (unused only because HIP was off).
    assert_eq!(unused.len(), 2, "{text}");
    let vmm = unused
        .iter()
        .find(|f| f.title.contains("`GGML_USE_VMM`"))
        .expect("GGML_USE_VMM");
    assert_eq!(vmm.level, Level::Warning);
    assert!(vmm.reason.contains("GGML_HIP_NO_VMM=OFF"), "{}", vmm.reason);
    assert!(vmm.reason.contains("legacy pool"), "{}", vmm.reason);
    assert_eq!(vmm.evidence[0].line, 6);
    let cublas = unused
        .iter()
        .find(|f| f.title.contains("`LLAMA_CUBLAS`"))
        .expect("LLAMA_CUBLAS");
    assert!(cublas.reason.contains("GGML_CUDA=ON"), "{}", cublas.reason);
    assert_eq!(r.summary.exit_code, 1, "{text}");
}
