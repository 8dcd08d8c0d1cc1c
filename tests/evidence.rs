//! Evidence through the binary: `--from` documents (reports, exercise documents, directories) in
//! cmake-flags and workflow, the measured records shipped in profiles/measured.toml checked
//! against their captures, `--machine`, `--os wsl`, and `quirks show`'s evidence and fix lines.
//!
//! The documents under tests/fixtures/synthetic/ are SYNTHETIC test inputs written by hand (see
//! their README); no AMD document here comes from real hardware.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

const LEMONADE: &str = "gfx1151,gfx1150,gfx120X,gfx110X,gfx103X,gfx90a,gfx908";
const SMOKE_GFX1101: &str = "tests/fixtures/synthetic/gfx1101-rocm7.14-linux-smoke-pass.json";
const EXERCISE_GFX1201: &str = "tests/fixtures/synthetic/gfx1201-rocm7.14-linux-exercise-pass.json";
const INFERENCE_GFX1201: &str =
    "tests/fixtures/synthetic-inference/gfx1201-rocm7.14-linux-inference-pass.json";
const INFERENCE_HANG_GFX1201: &str =
    "tests/fixtures/synthetic-inference/gfx1201-rocm7.14-linux-inference-hang.json";
const LEGACY_9007_MEMORY: &str =
    "tests/fixtures/nvidia-h200-driver580-inference-9007/memory-legacy.json";

use common::run_in_repo as run;

fn plan(args: &[&str]) -> Value {
    let mut a = vec!["cmake-flags", "--format", "json", "--toolchain", "none"];
    a.extend_from_slice(args);
    let (code, out, err) = run(&a);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

/// (group targets, VMM compiled in) for each group of a plan.
fn groups(p: &Value) -> Vec<(Vec<String>, bool)> {
    p["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["targets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_str().unwrap().to_string())
                    .collect(),
                g["vmm"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// Per job of a generated workflow: (job id, [(targets, expect_no_vmm)]). Read from the matrix
/// lines the template writes, one `- group:` entry at a time.
fn workflow_matrix(text: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut jobs: Vec<(String, Vec<(String, String)>)> = Vec::new();
    let mut in_jobs = false;
    let mut targets: Option<String> = None;
    for line in text.lines() {
        if line == "jobs:" {
            in_jobs = true;
            continue;
        }
        if !in_jobs {
            continue;
        }
        if let Some(id) = line.strip_prefix("  ").and_then(|l| l.strip_suffix(':'))
            && !id.starts_with(' ')
        {
            jobs.push((id.to_string(), Vec::new()));
            continue;
        }
        let t = line.trim();
        if let Some(v) = t.strip_prefix("targets: ") {
            targets = Some(v.trim_matches('"').to_string());
        } else if let Some(v) = t.strip_prefix("expect_no_vmm: ")
            && let Some(tg) = targets.take()
        {
            jobs.last_mut()
                .unwrap()
                .1
                .push((tg, v.trim_matches('"').to_string()));
        }
    }
    // The release job publishes what the build jobs made; it builds nothing.
    jobs.retain(|(id, _)| id != "release");
    jobs
}

fn workflow(args: &[&str]) -> Vec<(String, Vec<(String, String)>)> {
    let mut a = vec!["workflow", "--targets", LEMONADE, "--llama-ref", "b11434"];
    a.extend_from_slice(args);
    let (code, out, err) = run(&a);
    assert_eq!(code, 0, "{err}");
    workflow_matrix(&out)
}

/// A copy of the synthetic gfx1101 report with its HIP runtime set to `version`.
fn synthetic_report_on(dir: &Path, version: &str) -> PathBuf {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(SMOKE_GFX1101)).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    for b in v["backends"].as_array_mut().unwrap() {
        b["runtime_version"] = version.into();
    }
    for d in v["devices"].as_array_mut().unwrap() {
        d["runtime_version"] = version.into();
    }
    let path = dir.join(format!("gfx1101-{version}.json"));
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

#[test]
fn workflow_keeps_every_hip_target_on_the_legacy_pool_without_evidence() {
    for (rocm, os) in [
        ("7.13.0", "linux,windows"),
        ("7.14.0", "linux,windows"),
        // gpuprobe installs ROCm before 7.13 only on Linux (AMD's rocm/dev images).
        ("7.2.1", "linux"),
        ("6.4", "linux"),
    ] {
        let jobs = workflow(&["--rocm", rocm, "--os", os]);
        assert_eq!(jobs.len(), os.split(',').count(), "{rocm}: {jobs:?}");
        for (job, entries) in &jobs {
            assert!(!entries.is_empty(), "{rocm} {job}");
            for (targets, no_vmm) in entries {
                assert_eq!(
                    no_vmm, "1",
                    "ROCm {rocm}, {job}: {targets} compiled with VMM"
                );
            }
        }
    }
}

#[test]
fn a_measured_pass_moves_exactly_that_architecture_into_a_vmm_group() {
    // ROCm 7.14: the synthetic report's gfx1101 smoke pass (Linux) moves gfx1101, and only it,
    // into a VMM group of the Linux job; Windows has no evidence (and Q23 needs a workload there).
    let jobs = workflow(&[
        "--rocm",
        "7.14.0",
        "--os",
        "linux,windows",
        "--from",
        SMOKE_GFX1101,
    ]);
    for (job, entries) in &jobs {
        let vmm: Vec<&String> = entries
            .iter()
            .filter(|(_, no_vmm)| no_vmm == "0")
            .map(|(t, _)| t)
            .collect();
        match job.as_str() {
            "linux" => assert_eq!(vmm, vec!["gfx1101"], "{entries:?}"),
            _ => assert!(vmm.is_empty(), "{job}: {entries:?}"),
        }
        let all: Vec<&str> = entries.iter().flat_map(|(t, _)| t.split(';')).collect();
        // Windows ROCm has no Instinct support: gfx90a and gfx908 leave that job
        // (profiles/targets.toml).
        let want = if job == "windows" { 12 } else { 14 };
        assert_eq!(all.len(), want, "every target is still built once: {all:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    // The same evidence on another ROCm series moves nothing.
    let jobs = workflow(&["--rocm", "7.13.0", "--os", "linux", "--from", SMOKE_GFX1101]);
    assert!(jobs[0].1.iter().all(|(_, v)| v == "1"), "{jobs:?}");
    // A 7.2 pass lifts Q3 for gfx1101 on ROCm 7.2.1 (gfx12 stays: Q21 needs a workload pass).
    let r72 = synthetic_report_on(dir.path(), "7.2.26015");
    let jobs = workflow(&[
        "--rocm",
        "7.2.1",
        "--os",
        "linux",
        "--from",
        r72.to_str().unwrap(),
    ]);
    let vmm: Vec<&String> = jobs[0]
        .1
        .iter()
        .filter(|(_, v)| v == "0")
        .map(|(t, _)| t)
        .collect();
    assert_eq!(vmm, vec!["gfx1101"], "{jobs:?}");
    // On ROCm 6.4 too the measured pass lifts the legacy pool: Q22 names no fixed release, so it
    // is open-ended and lifted by a smoke pass on the same series.
    let r64 = synthetic_report_on(dir.path(), "6.4.43483");
    let jobs = workflow(&[
        "--rocm",
        "6.4",
        "--os",
        "linux",
        "--from",
        r64.to_str().unwrap(),
    ]);
    let vmm: Vec<&String> = jobs[0]
        .1
        .iter()
        .filter(|(_, v)| v == "0")
        .map(|(t, _)| t)
        .collect();
    assert_eq!(vmm, vec!["gfx1101"], "{jobs:?}");
}

#[test]
fn the_workflow_header_regenerates_with_the_evidence() {
    let (code, out, err) = run(&[
        "workflow",
        "--targets",
        "gfx1101",
        "--rocm",
        "7.14.0",
        "--from",
        SMOKE_GFX1101,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("--from {SMOKE_GFX1101} --output <this file>")),
        "{out}"
    );
    let (code, _, err) = run(&[
        "workflow",
        "--targets",
        "gfx1101",
        "--rocm",
        "7.14.0",
        "--from",
        "bad path.json",
    ]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn a_workload_document_is_not_enough_for_gfx12_and_a_directory_counts() {
    let p = plan(&["--targets", "gfx1201,gfx1101", "--rocm", "7.14.0"]);
    assert!(groups(&p).iter().all(|(_, vmm)| !vmm), "{p:#}");
    // Q21 asks gfx12 for an inference pass; the operator tests' pass does not lift it.
    let p = plan(&[
        "--targets",
        "gfx1201,gfx1101",
        "--rocm",
        "7.14.0",
        "--from",
        EXERCISE_GFX1201,
    ]);
    assert_eq!(
        groups(&p),
        vec![(vec!["gfx1201".into(), "gfx1101".into()], false)]
    );
    // A directory: both synthetic documents; only the smoke pass on gfx1101 lifts anything.
    let p = plan(&[
        "--targets",
        "gfx1201,gfx1101,gfx90a",
        "--rocm",
        "7.14.0",
        "--from",
        "tests/fixtures/synthetic",
    ]);
    assert_eq!(
        groups(&p),
        vec![
            (vec!["gfx1201".into(), "gfx90a".into()], false),
            (vec!["gfx1101".into()], true)
        ]
    );
    let lift = p["groups"][0]["flags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "GGML_HIP_NO_VMM")
        .unwrap()["lift"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        lift.contains("--exercise inference") && lift.contains("ROCm 7.14"),
        "{lift}"
    );
}

#[test]
fn from_alone_plans_one_report_or_the_union_of_several() {
    // One report: that machine (its own smoke pass is evidence).
    let p = plan(&["--from", SMOKE_GFX1101]);
    assert_eq!(p["mode"], "report");
    assert_eq!(groups(&p), vec![(vec!["gfx1101".into()], true)]);
    // Several reports: the union of their GPUs as targets, their common OS and ROCm series.
    let dir = tempfile::tempdir().unwrap();
    let other = synthetic_report_on(dir.path(), "7.14.60850");
    let text = std::fs::read_to_string(&other)
        .unwrap()
        .replace("gfx1101", "gfx1030");
    std::fs::write(&other, text).unwrap();
    let p = plan(&["--from", SMOKE_GFX1101, "--from", other.to_str().unwrap()]);
    assert_eq!(p["mode"], "targets");
    assert_eq!(p["toolkit"]["version"], "7.14");
    assert_eq!(
        groups(&p),
        vec![(vec!["gfx1101".into(), "gfx1030".into()], true)]
    );
    // Exercise documents alone say nothing about which GPUs to plan for.
    let (code, _, err) = run(&[
        "cmake-flags",
        "--toolchain",
        "none",
        "--from",
        EXERCISE_GFX1201,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("evidence only"), "{err}");
    // Unreadable and foreign documents are input errors.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"schema\": \"something/v9\"}").unwrap();
    let (code, _, err) = run(&[
        "cmake-flags",
        "--targets",
        "gfx1101",
        "--from",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("something/v9"), "{err}");
    let empty = tempfile::tempdir().unwrap();
    let (code, _, err) = run(&[
        "cmake-flags",
        "--targets",
        "gfx1101",
        "--from",
        empty.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn machine_and_wsl_on_the_command_line() {
    let p = plan(&["--machine", "gfx1201,gfx1103", "--rocm", "7.14.0"]);
    assert_eq!(p["mode"], "machine");
    assert_eq!(p["groups"].as_array().unwrap().len(), 1);
    assert!(
        p["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["quirks"] == serde_json::json!(["Q8"])),
        "{p:#}"
    );
    let (code, _, err) = run(&["cmake-flags", "--machine", "gfx120X", "--toolchain", "none"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("family"), "{err}");
    let (code, _, err) = run(&[
        "cmake-flags",
        "--machine",
        "gfx1201",
        "--targets",
        "gfx1101",
    ]);
    assert_eq!(code, 2, "{err}");
    let p = plan(&["--targets", "sm_89", "--cuda", "12.8", "--os", "wsl"]);
    assert_eq!(p["os"], "wsl");
    assert!(
        p["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["quirks"] == serde_json::json!(["Q15-windows"])),
        "{p:#}"
    );
}

#[test]
fn quirks_show_names_the_evidence_and_the_fix() {
    let (code, out, _) = run(&["quirks", "show", "Q21"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("evidence that lifts it: an inference pass"),
        "{out}"
    );
    let (_, out, _) = run(&["quirks", "show", "Q23"]);
    assert!(
        out.contains("evidence that lifts it: a workload pass"),
        "{out}"
    );
    assert!(out.contains("fix: no fix known"), "{out}");
    let (_, out, _) = run(&["quirks", "show", "Q3"]);
    assert!(
        out.contains("evidence that lifts it: a smoke pass"),
        "{out}"
    );
    // No release carries the develop fix: no fix bound, the PR is among the sources.
    assert!(out.contains("fix: no fix known"), "{out}");
    assert!(
        out.contains("https://github.com/ROCm/rocm-systems/pull/2451"),
        "{out}"
    );
    let (_, out, _) = run(&["quirks", "show", "Q22"]);
    assert!(
        out.contains("evidence that lifts it: a smoke pass"),
        "{out}"
    );
    let (_, out, _) = run(&["quirks", "show", "Q13"]);
    assert!(out.contains("fix: llama.cpp build 10115"), "{out}");
}

#[test]
fn shipped_measured_records_match_their_captures() {
    let ev = gpuprobe::evidence::Evidence::bundled().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for r in &ev.records {
        let origin = r
            .origin
            .split_once('(')
            .and_then(|(_, rest)| rest.strip_suffix(')'))
            .unwrap();
        let path = root.join(origin);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{origin}: {e}"));
        assert!(
            !origin.contains("synthetic"),
            "a shipped record must come from a real capture: {origin}"
        );
        match r.level {
            gpuprobe::evidence::Level::Smoke => {
                let report = gpuprobe::report::Report::from_json(&text, origin).unwrap();
                let mut from_capture = gpuprobe::evidence::Evidence::default();
                from_capture.add_report(&report, origin);
                let key = gpuprobe::evidence::Key {
                    arch: &r.arch,
                    backend: r.backend,
                    series: r.series.as_ref(),
                    os: r.os,
                };
                let f = from_capture.find(&key);
                assert!(
                    f.best_pass.is_some_and(|p| p.level == r.level) && f.failures.is_empty(),
                    "{origin} does not show a {:?} pass for {}",
                    r.level,
                    r.arch
                );
            }
            gpuprobe::evidence::Level::Workload => {
                // The end-to-end log: a VMM build (`VMM: yes`, no NO_VMM feature) passing
                // test-backend-ops on the device.
                assert!(text.contains("VMM: yes"), "{origin}");
                assert!(
                    text.contains("libggml-cuda NO_VMM feature string present: no"),
                    "{origin}"
                );
                assert!(
                    text.contains("test-backend-ops MUL_MAT (vmm): rc=0"),
                    "{origin}"
                );
                assert!(text.contains("E2E OK (vmm)"), "{origin}");
            }
            gpuprobe::evidence::Level::Inference => {
                let doc = gpuprobe::evidence::load_document(&path).unwrap();
                let mut from_capture = gpuprobe::evidence::Evidence::default();
                from_capture.add(&doc, origin);
                let key = gpuprobe::evidence::Key {
                    arch: &r.arch,
                    backend: r.backend,
                    series: r.series.as_ref(),
                    os: r.os,
                };
                assert!(
                    from_capture
                        .find(&key)
                        .best_pass
                        .is_some_and(|p| p.level == r.level),
                    "{origin} does not show an inference pass for {}",
                    r.arch
                );
            }
            gpuprobe::evidence::Level::Attribute => {}
        }
    }
}

/// The NO_VMM flag of the group holding `arch`.
fn hip_flag(p: &Value, arch: &str) -> Value {
    p["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["targets"].as_array().unwrap().iter().any(|t| t == arch))
        .unwrap()["flags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "GGML_HIP_NO_VMM")
        .unwrap()
        .clone()
}

#[test]
fn an_inference_pass_lifts_what_operator_tests_cannot_and_a_hang_keeps_the_legacy_pool() {
    // Q5 (gfx12 hung on the first real request) asks for a whole model run: the operator tests'
    // pass is not enough, and the lift says what is.
    let p = plan(&[
        "--targets",
        "gfx1201",
        "--rocm",
        "7.14.0",
        "--from",
        EXERCISE_GFX1201,
    ]);
    let f = hip_flag(&p, "gfx1201");
    assert_eq!(f["value"], "ON", "{f:#}");
    let lift = f["lift"].as_str().unwrap_or_default();
    assert!(lift.contains("--exercise inference"), "{lift}");
    // An inference pass on the same architecture, ROCm series and OS lifts it.
    let p = plan(&[
        "--targets",
        "gfx1201",
        "--rocm",
        "7.14.0",
        "--from",
        INFERENCE_GFX1201,
    ]);
    let f = hip_flag(&p, "gfx1201");
    assert_eq!(f["value"], "OFF", "{f:#}");
    // Not on another series.
    let p = plan(&[
        "--targets",
        "gfx1201",
        "--rocm",
        "7.2.0",
        "--from",
        INFERENCE_GFX1201,
    ]);
    assert_eq!(hip_flag(&p, "gfx1201")["value"], "ON");
    // A hang on record keeps the legacy pool whatever passed.
    let p = plan(&[
        "--targets",
        "gfx1201",
        "--rocm",
        "7.14.0",
        "--from",
        INFERENCE_GFX1201,
        "--from",
        INFERENCE_HANG_GFX1201,
    ]);
    let f = hip_flag(&p, "gfx1201");
    assert_eq!(f["value"], "ON", "{f:#}");
    assert!(
        f.to_string().contains("inference run"),
        "the reason names the measured hang: {f:#}"
    );
}

#[test]
fn a_broken_inference_document_is_refused_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("inference.json");
    std::fs::write(
        &bad,
        r#"{"schema": "gpuprobe.inference/v1", "build": {"backend": "hip"}}"#,
    )
    .unwrap();
    let (code, _, err) = run(&[
        "cmake-flags",
        "--targets",
        "gfx1201",
        "--rocm",
        "7.14.0",
        "--from",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("inference.json") && err.contains("gpuprobe.inference/v1"),
        "{err}"
    );
}

#[test]
fn quirks_record_turns_a_measured_hoarding_pool_into_a_warning_and_a_hang_into_a_deny() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("local.toml");
    let (code, out, err) = run(&[
        "quirks",
        "record",
        "--from",
        LEGACY_9007_MEMORY,
        "--file",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("LOCAL-sm_90-inference-memory"), "{text}");
    assert!(
        text.contains("3072 MiB"),
        "the measured number is kept: {text}"
    );
    assert!(
        !text.contains("vmm = "),
        "a legacy-pool build's memory says nothing against VMM: {text}"
    );
    let (code, out, err) = run(&[
        "quirks",
        "record",
        "--from",
        INFERENCE_HANG_GFX1201,
        "--file",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("LOCAL-gfx1201-inference-hang"), "{text}");
    assert!(text.contains("vmm = \"deny\""), "{text}");
    assert!(text.contains("runtime = \"7.14:7.14\""), "{text}");
}
