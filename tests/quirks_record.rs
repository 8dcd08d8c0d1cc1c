//! `gpuprobe quirks record`: measured failures become local quirk records, written in place
//! (comments, order and other records kept), and then take part in plans.

mod common;

use std::path::Path;

const PASSING: &str = include_str!("fixtures/nvidia-h200-driver580-e2e/detect.json");

/// The real H200 capture with its smoke result turned into an offset-access failure.
fn failing_report(dir: &Path) -> std::path::PathBuf {
    let mut v: serde_json::Value = serde_json::from_str(PASSING).unwrap();
    let smoke = &mut v["devices"][0]["smoke"];
    smoke["outcome"] = "fail".into();
    smoke["stage"] = "set_access".into();
    smoke["reason"] = "setting access on a chunk mapped at an offset failed".into();
    let p = dir.join("failing.json");
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    p
}

/// `gpuprobe quirks record --from REPORT --file FILE`.
fn record(report: &Path, file: &Path) -> std::process::Output {
    common::gpuprobe()
        .args(["quirks", "record", "--from"])
        .arg(report)
        .arg("--file")
        .arg(file)
        .output()
        .unwrap()
}

const EXISTING: &str = r#"# my site's notes: keep this comment
[[quirk]]
id = "SITE-1"   # hand-written
title = "something we saw"
summary = "kept as is"
severity = "low"
confidence = "low"
sources = ["https://example.org/1"]
"#;

#[test]
fn records_are_added_in_place_then_replaced_and_used_by_plans() {
    let dir = tempfile::tempdir().unwrap();
    let qdir = dir.path().join("quirks");
    std::fs::create_dir(&qdir).unwrap();
    let file = qdir.join("local.toml");
    std::fs::write(&file, EXISTING).unwrap();
    let report = failing_report(dir.path());

    let out = record(&report, &file);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("added LOCAL-sm_90-fail-set-access"));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.starts_with(EXISTING),
        "existing text, comments included, stays as it was:\n{text}"
    );
    assert!(
        text.contains("[quirk.match]")
            && text.contains("archs = [\"sm_90\"]")
            && text.contains("driver = \"580.159.04:580.159.04\""),
        "{text}"
    );
    assert!(
        text.contains("vmm = \"deny\"") && text.contains("measured_on = "),
        "{text}"
    );

    // Again: the record is replaced, not duplicated.
    let out = record(&report, &file);
    assert!(String::from_utf8_lossy(&out.stdout).contains("replaced LOCAL-sm_90-fail-set-access"));
    let again = std::fs::read_to_string(&file).unwrap();
    assert_eq!(again.matches("[[quirk]]").count(), 2);

    // A passing measurement on the same machine (same arch and driver) now keeps the legacy pool.
    let passing = dir.path().join("passing.json");
    std::fs::write(&passing, PASSING).unwrap();
    let out = common::gpuprobe()
        .env("GPUPROBE_QUIRKS_DIR", &qdir)
        .args([
            "cmake-flags",
            "--toolchain",
            "none",
            "--format",
            "json",
            "--from",
        ])
        .arg(&passing)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let flag = plan["groups"][0]["flags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "GGML_CUDA_NO_VMM")
        .unwrap()
        .clone();
    assert_eq!(flag["value"], "ON");
    assert!(
        flag["quirks"]
            .to_string()
            .contains("LOCAL-sm_90-fail-set-access"),
        "{flag}"
    );
}

#[test]
fn nothing_to_record_for_a_passing_report() {
    let dir = tempfile::tempdir().unwrap();
    let passing = dir.path().join("passing.json");
    std::fs::write(&passing, PASSING).unwrap();
    let file = dir.path().join("local.toml");
    let out = record(&passing, &file);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to record"));
    assert!(
        !file.exists(),
        "no file is written when there is nothing to record"
    );
}

#[test]
fn a_broken_file_is_left_untouched_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let report = failing_report(dir.path());
    let file = dir.path().join("local.toml");
    std::fs::write(&file, "[[quirk]]\nid = \"X\"\ntitle = \n").unwrap();
    let out = record(&report, &file);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("local.toml:3"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "[[quirk]]\nid = \"X\"\ntitle = \n"
    );
}

#[test]
fn a_new_file_starts_with_its_explanation() {
    let dir = tempfile::tempdir().unwrap();
    let report = failing_report(dir.path());
    let file = dir.path().join("new").join("local.toml");
    let out = record(&report, &file);
    assert!(out.status.success());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("# Local quirk records"), "{text}");
    assert!(text.find("[[quirk]]").unwrap() > text.find("send it upstream").unwrap());
}

#[test]
fn without_a_gpu_it_says_none_was_found() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("local.toml");
    let out = common::gpuprobe()
        .args(["quirks", "record", "--file"])
        .arg(&file)
        .env("GPUPROBE_SYSFS_ROOT", dir.path())
        .env("GPUPROBE_LIBCUDA", "/nonexistent/libcuda.so.1")
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("no GPU was found") && text.contains("--from"),
        "{text}"
    );
    assert!(!file.exists());
}

#[test]
fn an_inference_document_where_everything_passed_records_nothing() {
    // The real H200 document (11434, VMM build): every configuration agreed with the CPU.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("local.toml");
    let doc = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nvidia-h200-driver580-inference/inference-vmm.json");
    let out = record(&doc, &file);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("nothing to record"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!file.exists());
}

#[test]
fn help_names_the_documents_it_reads() {
    let out = common::gpuprobe()
        .args(["quirks", "record", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for doc in [
        "detect --json",
        "check-build --exercise --json",
        "--exercise inference",
    ] {
        assert!(help.contains(doc), "{doc} missing from: {help}");
    }
}
