//! `gpuprobe workflow` and the GitHub Action: snapshots of the generated workflows, the rules
//! every generated workflow keeps (checked on the parsed YAML), `--check`/`--output`, bad input,
//! and action.yml run in a local harness (tests/action_harness.sh).
//!
//! YAML is parsed by Python's yaml module (the action harness needs it anyway): GPUPROBE_PYTHON,
//! else the lint venv's python ($GPUPROBE_TOOLS/lint or .cache/tools/lint, made by
//! scripts/lint-workflows.sh), else python3.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpuprobe::emit::workflow::ACTIONS;
use serde_json::Value;

/// The standard target sets (scripts/lint-workflows.sh lints the same ones).
const CASES: &[(&str, &[&str])] = &[
    // lemonade-sdk/llamacpp-rocm's default list; TheRock 7.14.0 wheels on both OSes.
    (
        "lemonade_rocm7_14",
        &[
            "--targets",
            "gfx1151,gfx1150,gfx120X,gfx110X,gfx103X,gfx90a,gfx908",
            "--rocm",
            "7.14.0",
            "--os",
            "linux,windows",
        ],
    ),
    (
        "cuda12_8",
        &[
            "--targets",
            "sm_86,sm_89,sm_90,sm_120",
            "--cuda",
            "12.8",
            "--os",
            "linux,windows",
        ],
    ),
    // A HIP nightly on Linux and Windows: dGPUs and an APU, split by the plan on Linux only.
    (
        "hip_nightly_linux_windows",
        &[
            "--targets",
            "gfx1201,gfx1100,gfx1151",
            "--rocm",
            "7.14.0a20260608",
            "--os",
            "linux,windows",
            "--llama-ref",
            "b11434",
        ],
    ),
    // ROCm 7.2.1: gfx12 keeps the legacy pool (Q3/Q4/Q21); rocm/dev container.
    (
        "rocm7_2_1_gfx12_legacy",
        &[
            "--targets",
            "gfx120X,gfx1100,gfx90a",
            "--rocm",
            "7.2.1",
            "--os",
            "linux",
        ],
    ),
    // Build 4500 predates GGML_HIP_NO_VMM (build 4555): the VMM decision cannot be expressed.
    (
        "old_build_b4500",
        &[
            "--targets",
            "gfx1100,gfx1030",
            "--rocm",
            "6.1.2",
            "--llama-ref",
            "b4500",
        ],
    ),
    // A branch ref: no build number to check; CUDA 13 on both OSes.
    (
        "cuda13_branch",
        &[
            "--targets",
            "sm_90,sm_120",
            "--cuda",
            "13.0",
            "--os",
            "linux,windows",
            "--llama-ref",
            "master",
        ],
    ),
];

fn gpuprobe(args: &[&str]) -> Output {
    let config = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_gpuprobe"))
        .args(args)
        // No user quirk files: the generated workflow depends on the bundled data only.
        .env("XDG_CONFIG_HOME", config.path())
        .env_remove("GPUPROBE_QUIRKS_DIR")
        .output()
        .unwrap()
}

fn workflow(args: &[&str]) -> String {
    let mut all = vec!["workflow"];
    all.extend_from_slice(args);
    let out = gpuprobe(&all);
    assert!(
        out.status.success(),
        "gpuprobe {all:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("GPUPROBE_PYTHON") {
        return p.into();
    }
    let tools = std::env::var_os("GPUPROBE_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".cache/tools"));
    let venv = tools.join("lint/bin/python");
    if venv.exists() {
        venv
    } else {
        "python3".into()
    }
}

/// YAML → JSON through Python's yaml.safe_load (YAML 1.1: the key `on` becomes `true`).
fn yaml(text: &str) -> Value {
    use std::io::Write;
    let mut child = Command::new(python())
        .args([
            "-c",
            "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 is needed to parse YAML (set GPUPROBE_PYTHON)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "not valid YAML, or no PyYAML (pip install pyyaml, or run scripts/lint-workflows.sh once): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

#[test]
fn generated_workflows_match_their_snapshots() {
    for (name, args) in CASES {
        insta::assert_snapshot!(*name, workflow(args));
    }
}

#[test]
fn every_generated_workflow_keeps_the_rules() {
    let pinned: Vec<String> = ACTIONS
        .iter()
        .map(|a| format!("{}@{}", a.repo, a.sha))
        .collect();
    for (name, args) in CASES {
        let text = workflow(args);
        let doc = yaml(&text);
        assert_eq!(
            doc["permissions"],
            serde_json::json!({ "contents": "read" }),
            "{name}: least permissions"
        );
        assert!(
            doc["concurrency"]["group"].is_string(),
            "{name}: a concurrency group"
        );
        assert!(
            doc.get("on").or_else(|| doc.get("true")).is_some(),
            "{name}: triggers"
        );
        let jobs = doc["jobs"].as_object().unwrap();
        assert!(!jobs.is_empty(), "{name}: jobs");
        for (id, job) in jobs {
            if id == "release" {
                assert_eq!(
                    job["permissions"],
                    serde_json::json!({ "contents": "write" }),
                    "{name}: the release job publishes"
                );
                assert_eq!(job["if"], "startsWith(github.ref, 'refs/tags/v')", "{name}");
                continue;
            }
            assert!(
                job.get("permissions").is_none(),
                "{name}/{id}: only the release job has its own permissions"
            );
            let entries = job["strategy"]["matrix"]["include"].as_array().unwrap();
            assert!(!entries.is_empty(), "{name}/{id}: matrix entries");
            for e in entries {
                let targets = e["targets"].as_str().unwrap();
                let args = e["cmake_args"].as_str().unwrap();
                let explicit = args
                    .split(' ')
                    .find(|a| {
                        [
                            "-DGPU_TARGETS=",
                            "-DAMDGPU_TARGETS=",
                            "-DCMAKE_CUDA_ARCHITECTURES=",
                        ]
                        .iter()
                        .any(|p| a.starts_with(p))
                    })
                    .unwrap_or_else(|| panic!("{name}/{id}: no explicit architectures in {args}"));
                assert!(!explicit.contains("native"), "{name}/{id}: {explicit}");
                if explicit.contains("GPU_TARGETS=") {
                    assert!(
                        explicit.ends_with(&format!("GPU_TARGETS={targets}")),
                        "{name}/{id}: the entry builds its own targets: {explicit}"
                    );
                }
                assert!(["0", "1", ""].contains(&e["expect_no_vmm"].as_str().unwrap()));
            }
            let steps = job["steps"].as_array().unwrap();
            for s in steps {
                if let Some(run) = s.get("run").and_then(Value::as_str) {
                    assert!(
                        !run.contains("${{"),
                        "{name}/{id}: an expression inside run: in step {}",
                        s["name"]
                    );
                }
                if let Some(uses) = s.get("uses").and_then(Value::as_str) {
                    let (_, sha) = uses.split_once('@').unwrap();
                    assert!(
                        sha.len() == 40 && sha.chars().all(|c| c.is_ascii_hexdigit()),
                        "{name}/{id}: {uses} is not pinned by commit"
                    );
                    assert!(
                        pinned.iter().any(|p| p == uses),
                        "{name}/{id}: {uses} is not from the ACTIONS table"
                    );
                    if uses.starts_with("actions/checkout@") {
                        assert_eq!(
                            s["with"]["persist-credentials"],
                            Value::Bool(false),
                            "{name}/{id}: persist-credentials"
                        );
                    }
                }
            }
            assert!(
                steps
                    .iter()
                    .any(|s| s["name"] == "Check the build against the plan"),
                "{name}/{id}: the post-build check"
            );
        }
        let mut all = Vec::new();
        strings(&doc, &mut all);
        assert!(
            !all.iter()
                .any(|s| s.trim() == "native" || s.contains("=native")),
            "{name}: native"
        );
        // The version comment after every pinned commit, for people who read the file.
        for line in text.lines().filter(|l| l.trim_start().starts_with("uses:")) {
            let a = ACTIONS.iter().find(|a| line.contains(a.sha)).unwrap();
            assert!(
                line.ends_with(&format!("# {}", a.version)),
                "{name}: {line}"
            );
        }
    }
}

#[test]
fn windows_hip_runs_on_the_runner_the_quirk_names() {
    let doc = yaml(&workflow(CASES[0].1));
    assert_eq!(doc["jobs"]["windows"]["runs-on"], "windows-2022");
    let text = workflow(CASES[0].1);
    assert!(text.contains("(Q18)"), "the runner comment cites Q18");
}

#[test]
fn toolchains_follow_the_version() {
    let legacy = yaml(&workflow(CASES[3].1));
    assert_eq!(
        legacy["jobs"]["linux"]["container"]["image"],
        "rocm/dev-ubuntu-22.04:7.2.1"
    );
    let cuda = yaml(&workflow(CASES[1].1));
    assert_eq!(
        cuda["jobs"]["linux"]["container"]["image"],
        "nvidia/cuda:12.8.0-devel-ubuntu22.04"
    );
    assert_eq!(cuda["jobs"]["windows"]["env"]["CUDA_MAJOR_MINOR"], "12.8");
    let wheels = yaml(&workflow(CASES[2].1));
    assert_eq!(
        wheels["jobs"]["linux"]["env"]["ROCM_INDEX_URL"],
        "https://rocm.nightlies.amd.com/whl-multi-arch/"
    );
    assert_eq!(
        wheels["jobs"]["windows"]["env"]["ROCM_VERSION"],
        "7.14.0a20260608"
    );
}

#[test]
fn gfx12_keeps_the_legacy_pool_on_rocm_7_2_1() {
    let doc = yaml(&workflow(CASES[3].1));
    let entries = doc["jobs"]["linux"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap();
    let gfx12 = entries
        .iter()
        .find(|e| e["targets"].as_str().unwrap().contains("gfx1201"))
        .unwrap();
    assert!(
        gfx12["cmake_args"]
            .as_str()
            .unwrap()
            .contains("-DGGML_HIP_NO_VMM=ON")
    );
    assert_eq!(gfx12["expect_no_vmm"], "1");
}

#[test]
fn an_old_build_gets_no_vmm_flag_and_no_vmm_expectation() {
    let doc = yaml(&workflow(CASES[4].1));
    for e in doc["jobs"]["linux"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
    {
        assert!(
            !e["cmake_args"].as_str().unwrap().contains("NO_VMM"),
            "GGML_HIP_NO_VMM does not exist at build 4500"
        );
        assert_eq!(e["expect_no_vmm"], "");
        assert_eq!(e["vmm_flag"], "");
    }
    assert_eq!(
        doc["jobs"]["linux"]["env"]["LLAMA_CPP_EXPECTED_BUILD"],
        "4500"
    );
}

#[test]
fn check_is_quiet_and_zero_when_the_file_is_current() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("llama.yml");
    let args = CASES[1].1;
    let mut write = vec!["workflow"];
    write.extend_from_slice(args);
    write.extend_from_slice(&["--output", file.to_str().unwrap()]);
    assert!(gpuprobe(&write).status.success());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        workflow(args),
        "--output writes what stdout shows"
    );
    let mut check = vec!["workflow"];
    check.extend_from_slice(args);
    check.extend_from_slice(&["--check", file.to_str().unwrap()]);
    let out = gpuprobe(&check);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    // A checkout with CRLF line ends is not drift.
    std::fs::write(&file, workflow(args).replace('\n', "\r\n")).unwrap();
    assert_eq!(gpuprobe(&check).status.code(), Some(0));
}

#[test]
fn check_exits_1_with_a_unified_diff_on_drift() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("llama.yml");
    let args = CASES[1].1;
    let good = workflow(args);
    std::fs::write(
        &file,
        good.replace("timeout-minutes: 300", "timeout-minutes: 30"),
    )
    .unwrap();
    let mut check = vec!["workflow"];
    check.extend_from_slice(args);
    check.extend_from_slice(&["--check", file.to_str().unwrap()]);
    let out = gpuprobe(&check);
    assert_eq!(out.status.code(), Some(1));
    let diff = String::from_utf8(out.stdout).unwrap();
    let shown = file.display().to_string();
    assert!(
        diff.starts_with(&format!("--- {shown}\n+++ {shown} (generated)\n@@ -")),
        "{diff}"
    );
    assert!(
        diff.contains("\n-    timeout-minutes: 30\n+    timeout-minutes: 300\n"),
        "{diff}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("out of date"));

    // A missing file is drift too: all of it is to be added.
    let missing = dir.path().join("missing.yml");
    let mut check = vec!["workflow"];
    check.extend_from_slice(args);
    check.extend_from_slice(&["--check", missing.to_str().unwrap()]);
    let out = gpuprobe(&check);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("@@ -0,0 +1,"));
}

#[test]
fn output_never_leaves_a_partial_or_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("is-a-directory");
    std::fs::create_dir(&target).unwrap();
    let mut args = vec!["workflow"];
    args.extend_from_slice(CASES[1].1);
    args.extend_from_slice(&["--output", target.to_str().unwrap()]);
    assert_eq!(gpuprobe(&args).status.code(), Some(2));
    let mut args = vec!["workflow"];
    args.extend_from_slice(CASES[1].1);
    // Missing directories are created; a file where one must go is bad input.
    std::fs::write(dir.path().join("a-file"), "").unwrap();
    let nowhere = dir.path().join("a-file/dir/llama.yml");
    args.extend_from_slice(&["--output", nowhere.to_str().unwrap()]);
    assert_eq!(gpuprobe(&args).status.code(), Some(2));
    // A bad target fails before anything is written.
    let file = dir.path().join("llama.yml");
    assert_eq!(
        gpuprobe(&[
            "workflow",
            "--targets",
            "gfx9999",
            "--rocm",
            "7.2.1",
            "--output",
            file.to_str().unwrap()
        ])
        .status
        .code(),
        Some(2)
    );
    let mut left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(
        left,
        vec![
            std::ffi::OsString::from("a-file"),
            std::ffi::OsString::from("is-a-directory")
        ],
        "nothing else in the directory"
    );
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
}

#[test]
fn bad_input_exits_2_with_a_message_and_no_workflow() {
    let marker =
        std::env::temp_dir().join(format!("gpuprobe-workflow-pwned-{}", std::process::id()));
    let hostile = format!("$(touch {})", marker.display());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--targets", "native", "--rocm", "7.2.1"], "native"),
        (
            vec!["--targets", "gfx1100,NATIVE", "--cuda", "12.8"],
            "native",
        ),
        (
            vec!["--targets", "gfx9999", "--rocm", "7.2.1"],
            "unknown GPU target",
        ),
        (
            vec!["--targets", &hostile, "--rocm", "7.2.1"],
            "unknown GPU target",
        ),
        (
            vec!["--targets", "gfx1100", "--rocm", "7.2.1", "--os", "macos"],
            "unknown OS",
        ),
        (vec!["--targets", "gfx1100"], "--rocm"),
        (vec!["--targets", "sm_90"], "--cuda"),
        (vec!["--targets", "sm_90", "--rocm", "7.2.1"], "NVIDIA"),
        (vec!["--targets", "gfx1100", "--cuda", "12.8"], "AMD"),
        (
            vec!["--targets", "gfx1100", "--rocm", "7.2.1", "--os", "windows"],
            "HIP SDK",
        ),
        (
            vec!["--targets", "gfx1100", "--rocm", "7.10.0"],
            "per GPU family",
        ),
        (
            vec!["--targets", "gfx1100", "--rocm", "7.2;rm -rf /"],
            "not a toolkit version",
        ),
        (
            vec![
                "--targets",
                "gfx1100",
                "--rocm",
                "7.2.1",
                "--llama-ref",
                "$(id)",
            ],
            "--llama-ref",
        ),
        (
            vec![
                "--targets",
                "gfx1100",
                "--rocm",
                "7.2.1",
                "--llama-ref",
                "b5000",
                "--llama-build",
                "6000",
            ],
            "does not match",
        ),
        (
            vec!["--targets", "gfx1100", "--rocm", "7.2.1", "--cuda", "12.8"],
            "cannot be used with",
        ),
    ];
    for (args, says) in cases {
        let mut all = vec!["workflow"];
        all.extend_from_slice(&args);
        let out = gpuprobe(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(says),
            "{args:?} should say `{says}`: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{args:?} printed a workflow");
    }
    assert!(!marker.exists(), "a target was run as a command");
}

#[test]
fn a_plan_that_cannot_work_exits_1() {
    // CUDA 13 builds nothing below sm_75.
    let out = gpuprobe(&["workflow", "--targets", "sm_61", "--cuda", "13.0"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("refused"));
    assert!(out.stdout.is_empty());
}

#[test]
fn action_yml_is_composite_pinned_and_takes_inputs_through_env() {
    let text = std::fs::read_to_string(repo().join("action.yml")).unwrap();
    let doc = yaml(&text);
    assert_eq!(doc["runs"]["using"], "composite");
    for input in [
        "targets",
        "machine",
        "backend",
        "rocm",
        "cuda",
        "from",
        "os",
        "toolchain-version",
        "llama-ref",
        "llama-cpp",
        "llama-cpp-dir",
        "probe",
        "format",
        "install",
    ] {
        assert!(doc["inputs"][input].is_object(), "input {input}");
    }
    // One naming scheme: an input that passes a CLI option has the option's name, and the
    // earlier names say they are deprecated.
    let help = |cmd: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuprobe"))
            .args([cmd, "--help"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (plan_help, workflow_help) = (help("cmake-flags"), help("workflow"));
    for input in [
        "targets",
        "machine",
        "backend",
        "rocm",
        "cuda",
        "from",
        "os",
        "llama-cpp",
        "format",
    ] {
        assert!(
            plan_help.contains(&format!("--{input} ")),
            "cmake-flags has no --{input}"
        );
    }
    assert!(workflow_help.contains("--llama-ref "));
    for old in ["toolchain-version", "llama-cpp-dir"] {
        let d = doc["inputs"][old]["description"].as_str().unwrap();
        assert!(d.starts_with("Deprecated"), "{old}: {d}");
    }
    for output in [
        "cmake-args",
        "configure-env",
        "env",
        "matrix",
        "plan-file",
        "report",
    ] {
        assert!(
            doc["outputs"][output]["value"].is_string(),
            "output {output}"
        );
    }
    for s in doc["runs"]["steps"].as_array().unwrap() {
        if let Some(run) = s["run"].as_str() {
            assert!(
                !run.contains("${{"),
                "an expression inside run: in step {}",
                s["name"]
            );
            assert_eq!(s["shell"], "bash");
        }
        if let Some(uses) = s["uses"].as_str() {
            let a = ACTIONS
                .iter()
                .find(|a| uses == format!("{}@{}", a.repo, a.sha))
                .unwrap_or_else(|| panic!("{uses} is not from the ACTIONS table"));
            let line = text.lines().find(|l| l.contains(a.sha)).unwrap();
            assert!(line.ends_with(&format!("# {}", a.version)), "{line}");
        }
    }
}

#[test]
fn action_yml_runs_in_the_local_harness() {
    let out = Command::new("bash")
        .arg(repo().join("tests/action_harness.sh"))
        .arg(env!("CARGO_BIN_EXE_gpuprobe"))
        .env("GPUPROBE_PYTHON", python())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("action_harness: all checks passed"),
        "{stdout}"
    );
}

#[test]
fn the_check_script_is_valid_bash() {
    let script = repo().join("templates/check-build.sh");
    let out = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(Path::new(&script).exists());
}

/// Runs templates/check-build.sh the way the generated workflow does, over a fake build tree.
fn run_check(
    no_vmm_in_lib: bool,
    cache: &str,
    version_line: &str,
    expect_no_vmm: &str,
) -> (i32, String, String) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("build/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let mut lib = b"\x7fELF...FORCE_CUBLAS\0".to_vec();
    if no_vmm_in_lib {
        lib.extend_from_slice(b"NO_VMM\0");
    }
    lib.extend_from_slice(b"USE_GRAPHS\0");
    std::fs::write(bin.join("libggml-hip.so"), lib).unwrap();
    std::fs::write(
        dir.path().join("build/CMakeCache.txt"),
        format!("GGML_HIP:BOOL=ON\n{cache}\nGPU_TARGETS:STRING=gfx1100\n"),
    )
    .unwrap();
    let cli = bin.join("llama-cli");
    std::fs::write(&cli, format!("#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{version_line}' >&2; echo 'built with cc for x86_64' >&2; else echo 'Available devices:'; fi\n")).unwrap();
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = dir.path().join("check.sh");
    std::fs::write(&script, gpuprobe::emit::workflow::CHECK_SCRIPT).unwrap();
    let summary = dir.path().join("summary.md");
    let out = Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail"])
        .arg(&script)
        .current_dir(dir.path())
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("RUNNER_TEMP", dir.path())
        .env("GPUPROBE_OS", "linux")
        .env("GPUPROBE_BACKEND", "hip")
        .env("GPUPROBE_CLI_NEEDS", "")
        .env("GPUPROBE_GROUP", "hip-legacy-pool")
        .env("GPUPROBE_TARGETS", "gfx1100")
        .env("GPUPROBE_VMM_FLAG", "GGML_HIP_NO_VMM")
        .env("GPUPROBE_EXPECT_NO_VMM", expect_no_vmm)
        .env("LLAMA_CPP_REF", "b11434")
        .env("LLAMA_CPP_EXPECTED_BUILD", "11434")
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        std::fs::read_to_string(&summary).unwrap_or_default(),
    )
}

#[test]
fn the_check_script_passes_a_build_that_matches_the_plan() {
    let (code, stdout, summary) = run_check(
        true,
        "GGML_HIP_NO_VMM:BOOL=ON",
        "version: 0.6.0-dev (build 11434, commit 1a2b3c4)",
        "1",
    );
    assert_eq!(code, 0, "{stdout}\n{summary}");
    assert!(
        summary.contains(
            "| VMM pool in libggml-hip.so | compiled out (NO_VMM) | compiled out (NO_VMM) | ok |"
        ),
        "{summary}"
    );
    assert!(
        summary.contains("| GGML_HIP_NO_VMM in CMakeCache.txt | ON | ON | ok |"),
        "{summary}"
    );
    assert!(
        summary.contains("| llama-cli --version | build 11434 |"),
        "{summary}"
    );
    // The old version format (up to build 10393) is read too.
    let (code, _, _) = run_check(
        false,
        "GGML_HIP_NO_VMM:BOOL=OFF",
        "version: 11434 (1a2b3c4)",
        "0",
    );
    assert_eq!(code, 0);
}

#[test]
fn the_check_script_fails_when_the_library_does_not_match_the_plan() {
    // The plan wants VMM, but the flag never reached CMake (e.g. the non-option -DGGML_USE_VMM=ON):
    // the library still has NO_VMM.
    let (code, stdout, summary) = run_check(
        true,
        "GGML_USE_VMM:UNINITIALIZED=ON",
        "version: 0.6.0-dev (build 11434, commit 1a2b3c4)",
        "0",
    );
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains(
            "::error title=gpuprobe build check (hip-legacy-pool)::the VMM pool is compiled out"
        ),
        "{stdout}"
    );
    assert!(summary.contains("MISMATCH"), "{summary}");
    // A build without git history reports build 0.
    let (code, stdout, _) = run_check(
        false,
        "GGML_HIP_NO_VMM:BOOL=OFF",
        "version: 0.6.0-dev (build 0, commit unknown)",
        "0",
    );
    assert_eq!(code, 1);
    assert!(stdout.contains("expected 11434"), "{stdout}");
}

#[test]
fn the_header_command_regenerates_the_same_workflow() {
    for (name, args) in CASES {
        let text = workflow(args);
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("#   gpuprobe workflow "))
            .unwrap();
        let command = line
            .trim_start_matches(['#', ' '])
            .trim_end_matches(" --output <this file>");
        let words: Vec<&str> = command.split_whitespace().skip(2).collect();
        assert_eq!(
            workflow(&words),
            text,
            "{name}: `{command}` does not give the same workflow"
        );
    }
}

fn steps_named(job: &Value) -> Vec<&str> {
    job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect()
}

#[test]
fn every_build_job_packages_self_checks_and_uploads_the_archive() {
    for (name, args) in CASES {
        let doc = yaml(&workflow(args));
        for (id, job) in doc["jobs"].as_object().unwrap() {
            if id == "release" {
                continue;
            }
            let steps = steps_named(job);
            let at = |n: &str| {
                steps
                    .iter()
                    .position(|s| s.starts_with(n))
                    .unwrap_or_else(|| panic!("{name}/{id}: no step `{n}` in {steps:?}"))
            };
            assert!(
                at("Configure and build") < at("Package the build"),
                "{name}/{id}"
            );
            assert!(
                at("Package the build") < at("Self-check the package"),
                "{name}/{id}"
            );
            assert!(
                at("Self-check the package") < at("Upload the package"),
                "{name}/{id}"
            );
            let upload = &job["steps"][at("Upload the package")];
            assert_eq!(upload["with"]["archive"], Value::Bool(false), "{name}/{id}");
            let ext = if id == "linux" { "tar.gz" } else { "zip" };
            assert!(
                upload["with"]["path"].as_str().unwrap().ends_with(ext),
                "{name}/{id}"
            );
            let check = job["steps"][at("Self-check the package")]["run"]
                .as_str()
                .unwrap();
            assert!(
                check.contains("is NOT self-contained"),
                "{name}/{id}: the self-check script is inlined"
            );
            let package = job["steps"][at("Package the build")]["run"]
                .as_str()
                .unwrap();
            assert!(package.contains("README.package.txt"), "{name}/{id}");
        }
    }
}

#[test]
fn release_flags_follow_the_os_and_the_llama_build() {
    let doc = yaml(&workflow(CASES[0].1));
    let linux = doc["jobs"]["linux"]["env"]["GPUPROBE_PACKAGE_ARGS"]
        .as_str()
        .unwrap();
    for f in [
        "-DCMAKE_INSTALL_RPATH=$ORIGIN",
        "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
        "-DGGML_BACKEND_DL=ON",
        "-DGGML_CPU_ALL_VARIANTS=ON",
        "-DLLAMA_USE_PREBUILT_UI=OFF",
        "-DLLAMA_BUILD_UI=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
    ] {
        assert!(linux.split(' ').any(|a| a == f), "linux lacks {f}: {linux}");
    }
    let windows = doc["jobs"]["windows"]["env"]["GPUPROBE_PACKAGE_ARGS"]
        .as_str()
        .unwrap();
    for f in [
        "-DLLAMA_BUILD_BORINGSSL=ON",
        "-DGGML_OPENMP=OFF",
        "-DGGML_CPU_ALL_VARIANTS=ON",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
    ] {
        assert!(
            windows.split(' ').any(|a| a == f),
            "windows lacks {f}: {windows}"
        );
    }
    assert!(!windows.contains("RPATH"), "{windows}");
    // Build 4500 predates GGML_BACKEND_DL's successor options and LLAMA_BUILD_TOOLS: llama-cli
    // is still an example there, so examples stay on; BoringSSL is not there either.
    let old = yaml(&workflow(CASES[4].1));
    let args = old["jobs"]["linux"]["env"]["GPUPROBE_PACKAGE_ARGS"]
        .as_str()
        .unwrap();
    assert!(!args.contains("EXAMPLES"), "{args}");
    assert!(!args.contains("BORINGSSL"), "{args}");
    // 4500 has no tools/ui (the UI is in the source tree) and no UI options to give.
    assert!(!args.contains("_UI="), "{args}");
    assert!(args.contains("-DCMAKE_INSTALL_RPATH=$ORIGIN"), "{args}");
}

#[test]
fn linux_builds_run_on_the_oldest_supported_ubuntu() {
    for (name, args) in CASES {
        let doc = yaml(&workflow(args));
        let linux = &doc["jobs"]["linux"];
        if linux.is_null() {
            continue;
        }
        let image = linux["container"]["image"].as_str().unwrap_or("");
        assert!(
            image.contains("ubuntu22.04")
                || image.contains("ubuntu-22.04")
                || linux["runs-on"] == "ubuntu-22.04",
            "{name}: {image} / {}",
            linux["runs-on"]
        );
    }
}

#[test]
fn windows_cuda_components_follow_the_cuda_major() {
    let sub = |case: usize| -> String {
        yaml(&workflow(CASES[case].1))["jobs"]["windows"]["env"]["CUDA_SUBPACKAGES"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let c12 = sub(1);
    let c13 = sub(5);
    for p in ["crt", "nvvm", "nvptxcompiler"] {
        assert!(c13.split(' ').any(|s| s == p), "CUDA 13 needs {p}: {c13}");
        assert!(
            !c12.split(' ').any(|s| s == p),
            "CUDA 12 has {p} in nvcc: {c12}"
        );
    }
    let doc = yaml(&workflow(CASES[5].1));
    assert_eq!(
        doc["jobs"]["windows"]["env"]["CUDA_RUNTIME_SUBDIRS"],
        "bin/x64 bin"
    );
    assert_eq!(
        doc["jobs"]["windows"]["env"]["GPUPROBE_BUNDLE_EXPECT"],
        "cudart64_*.dll;cublas64_*.dll;cublasLt64_*.dll"
    );
}

#[test]
fn windows_hip_is_split_by_family_without_instinct_targets() {
    let text = workflow(CASES[0].1);
    let doc = yaml(&text);
    let groups = |os: &str| -> Vec<(String, String)> {
        doc["jobs"][os]["strategy"]["matrix"]["include"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["group"].as_str().unwrap().to_string(),
                    e["targets"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let windows = groups("windows");
    assert!(windows.len() >= 4, "{windows:?}");
    assert!(
        windows
            .iter()
            .any(|(g, t)| g.ends_with("gfx110X") && t.contains("gfx1100"))
    );
    for (_, t) in &windows {
        assert!(!t.contains("gfx90a") && !t.contains("gfx908"), "{t}");
    }
    assert!(groups("linux").iter().any(|(_, t)| t.contains("gfx90a")));
    assert!(
        text.contains("# Dropped: gfx90a, gfx908 dropped from the windows job"),
        "{text}"
    );
    // A compiler cache, never restored for a release build.
    let cache = doc["jobs"]["windows"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "Restore the compiler cache")
        .expect("a compiler cache on Windows HIP");
    assert_eq!(
        cache["with"]["lookup-only"],
        "${{ startsWith(github.ref, 'refs/tags/') }}"
    );
    // Nothing but Instinct targets on Windows: refused.
    let out = gpuprobe(&[
        "workflow",
        "--targets",
        "gfx90a,gfx942",
        "--rocm",
        "7.14.0",
        "--os",
        "windows",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no target is left for windows"));
}

#[test]
fn therock_entries_install_the_device_code_of_their_targets() {
    let doc = yaml(&workflow(CASES[2].1));
    for os in ["linux", "windows"] {
        for e in doc["jobs"][os]["strategy"]["matrix"]["include"]
            .as_array()
            .unwrap()
        {
            let want: Vec<String> = e["targets"]
                .as_str()
                .unwrap()
                .split(';')
                .map(|t| format!("device-{t}"))
                .collect();
            assert_eq!(e["rocm_extras"], want.join(","), "{os}");
        }
    }
    let classic = yaml(&workflow(CASES[3].1));
    for e in classic["jobs"]["linux"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
    {
        assert_eq!(e["rocm_extras"], "", "no wheels, no extras");
    }
}

#[test]
fn the_header_and_the_packages_carry_every_runtime_note() {
    // Each OS's plan, as cmake-flags gives it, against the workflow's header and package notes.
    let args = CASES[0].1;
    let text = workflow(args);
    let header: String = text
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim())
        .collect::<Vec<_>>()
        .join(" ");
    let doc = yaml(&text);
    for os in ["linux", "windows"] {
        let out = gpuprobe(&[
            "cmake-flags",
            "--targets",
            args[1],
            "--rocm",
            "7.14.0",
            "--os",
            os,
            "--llama-build",
            "11434",
            "--format",
            "json",
        ]);
        let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
        let notes: String = doc["jobs"][os]["env"]["GPUPROBE_NOTES"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let mut seen = 0;
        for kind in ["warnings", "notes"] {
            for n in plan[kind].as_array().unwrap() {
                let m: String = n["message"]
                    .as_str()
                    .unwrap()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                assert!(header.contains(&m), "{os}: the header lacks `{m}`");
                assert!(notes.contains(&m), "{os}: the package notes lack `{m}`");
                seen += 1;
            }
        }
        for g in plan["groups"].as_array().unwrap() {
            for e in g["env"].as_array().unwrap() {
                let advice = format!(
                    "{}={}",
                    e["name"].as_str().unwrap(),
                    e["value"].as_str().unwrap()
                );
                assert!(header.contains(&advice), "{os}: the header lacks {advice}");
                assert!(
                    notes.contains(&advice),
                    "{os}: the package notes lack {advice}"
                );
            }
        }
        assert!(seen > 0, "{os}: the plan has notes to carry");
    }
    assert!(
        header.contains("Q7 may apply"),
        "the may-apply notes are there too"
    );
}

/// What actions/download-artifact does with one artifact uploaded with `archive: false`, at the
/// commit the workflow pins (v8.0.1, @actions/artifact 6.2.1; the source is cited next to the
/// pin in src/emit/workflow.rs): a download served as a zip (content type application/zip, or a
/// URL ending in .zip) is unpacked into `path` unless `skip-decompress` is true; anything else,
/// or a zip with skip-decompress, is written to `path` as the file it was.
fn download_artifact_v8(with: &Value, artifact: &Path, dest: &Path) {
    let skip = match &with["skip-decompress"] {
        Value::Bool(b) => *b,
        Value::String(s) => s == "true",
        Value::Null => false,
        other => panic!("skip-decompress: {other}"),
    };
    let name = artifact.file_name().unwrap().to_str().unwrap();
    std::fs::create_dir_all(dest).unwrap();
    if name.ends_with(".zip") && !skip {
        let o = Command::new(python())
            .args(["-m", "zipfile", "-e"])
            .arg(artifact)
            .arg(dest)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    } else {
        std::fs::copy(artifact, dest.join(name)).unwrap();
    }
}

/// Runs the release job of `doc` on two packages (a Linux .tar.gz and a Windows .zip) with the
/// download modelled by [`download_artifact_v8`] and `gh` replaced by a recorder: the exit
/// status, the output, and what `gh release create` was given.
fn run_release_job(doc: &Value, with_override: Option<&Value>) -> (Option<i32>, String, String) {
    let release = &doc["jobs"]["release"];
    let steps = release["steps"].as_array().unwrap();
    let step = |n: &str| {
        steps
            .iter()
            .find(|s| s["name"].as_str().is_some_and(|x| x.starts_with(n)))
            .unwrap_or_else(|| panic!("no release step {n}"))
    };
    let download = step("Download the packages");
    assert!(
        download["uses"]
            .as_str()
            .unwrap()
            .starts_with("actions/download-artifact@")
    );
    let with = with_override.unwrap_or(&download["with"]);
    let root = tempfile::tempdir().unwrap();
    let uploads = root.path().join("uploads");
    let pkg = uploads.join("llama-b1-windows-rocm7.14.0-hip");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("llama-cli.exe"), "MZ").unwrap();
    let zip = uploads.join("llama-b1-windows-rocm7.14.0-hip.zip");
    let o = Command::new(python())
        .args(["-m", "zipfile", "-c"])
        .arg(&zip)
        .arg(&pkg)
        .output()
        .unwrap();
    assert!(o.status.success());
    let tar = uploads.join("llama-b1-linux-rocm7.14.0-hip.tar.gz");
    let o = Command::new("tar")
        .arg("-czf")
        .arg(&tar)
        .arg("-C")
        .arg(&uploads)
        .arg("llama-b1-windows-rocm7.14.0-hip")
        .output()
        .unwrap();
    assert!(o.status.success());
    let workspace = root.path().join("workspace");
    let dest = workspace.join(with["path"].as_str().unwrap());
    for a in [&zip, &tar] {
        download_artifact_v8(with, a, &dest);
    }
    let bin = root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = root.path().join("gh.log");
    std::fs::write(
        bin.join("gh"),
        format!("#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\n", log.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("gh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let publish = step("Publish the release");
    let temp = root.path().join("temp");
    std::fs::create_dir_all(&temp).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let o = Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c"])
        .arg(publish["run"].as_str().unwrap())
        .current_dir(&workspace)
        .env("PATH", path)
        .env("RUNNER_TEMP", &temp)
        .env("RELEASE_TAG", "v1")
        .env("RELEASE_NOTES", "notes")
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (
        o.status.code(),
        out,
        std::fs::read_to_string(&log).unwrap_or_default(),
    )
}

#[test]
fn the_release_job_publishes_zip_and_tar_archives_as_files() {
    let doc = yaml(&workflow(CASES[0].1));
    let (code, out, gh) = run_release_job(&doc, None);
    assert_eq!(code, Some(0), "{out}");
    for f in [
        "llama-b1-windows-rocm7.14.0-hip.zip",
        "llama-b1-linux-rocm7.14.0-hip.tar.gz",
        "SHA256SUMS",
    ] {
        assert!(gh.lines().any(|l| l == f), "{f} not released: {gh}");
    }
    assert!(
        out.contains("  llama-b1-windows-rocm7.14.0-hip.zip"),
        "{out}"
    );
    // The same download without skip-decompress unpacks the zip into a directory, and the
    // checksum step fails on it: the input is what makes the Windows release possible.
    let mut without = doc["jobs"]["release"]["steps"][0]["with"].clone();
    without.as_object_mut().unwrap().remove("skip-decompress");
    let (code, out, gh) = run_release_job(&doc, Some(&without));
    assert_ne!(code, Some(0), "{out}");
    assert!(out.contains("Is a directory"), "{out}");
    assert!(gh.is_empty());
}

/// `bash`'s case-insensitive glob match, as templates/package.sh and self-check.sh match names.
fn bash_glob_matches(glob: &str, name: &str) -> bool {
    Command::new("bash")
        .args([
            "-c",
            "shopt -s nocasematch; case \"$2\" in $1) exit 0 ;; esac; exit 1",
            "_",
            glob,
            name,
        ])
        .status()
        .unwrap()
        .success()
}

#[test]
fn a_target_the_rocm_release_ships_no_device_code_for_is_refused_when_generated() {
    // TheRock (ROCm 7.13+) builds device code for its declared targets only
    // (profiles/toolkits.toml [[rocm.device_code]]); gfx1013 is not one of them, so the
    // package step would find no rocBLAS kernels for it. Refused now, not hours into the run.
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("release.yml");
    let out = gpuprobe(&[
        "workflow",
        "--targets",
        "gfx1151,gfx1013,gfx110X",
        "--rocm",
        "7.14.0",
        "--os",
        "linux,windows",
        "--output",
        out_file.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(!out_file.exists(), "nothing is written: {stderr}");
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    for says in [
        "--targets: ROCm 7.14.0 ships no device code for gfx1013",
        "no rocBLAS kernels",
        "linux group ",
        "windows group ",
        "no device code for gfx1013",
        "therock_amdgpu_targets.cmake",
    ] {
        assert!(stderr.contains(says), "should say `{says}`: {stderr}");
    }
    // The fix is a command that works when pasted: the same workflow without gfx1013.
    let fix = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("fix: leave gfx1013 out: "))
        .unwrap_or_else(|| panic!("no fix line: {stderr}"));
    let words: Vec<&str> = fix.split_whitespace().collect();
    assert_eq!(words[0], "gpuprobe");
    assert!(!fix.contains("gfx1013"), "{fix}");
    let text = workflow(&words[2..]);
    assert!(
        text.contains("gfx1151") && text.contains("gfx1103"),
        "{fix}"
    );

    // Only that target: nothing is left, and the fix names the targets the release has code for.
    let out = gpuprobe(&["workflow", "--targets", "gfx1013", "--rocm", "7.13.0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("fix: name targets that ROCm 7.13.0 ships device code for (gfx900"),
        "{stderr}"
    );
}

#[test]
fn every_device_code_target_is_a_known_amd_target() {
    let tk = gpuprobe::toolkits::ToolkitTable::bundled().unwrap();
    let k = gpuprobe::profiles::Knowledge::load().unwrap();
    assert!(!tk.rocm.device_code.is_empty());
    for r in &tk.rocm.device_code {
        assert!(r.source.contains("89553ce"), "{}", r.source);
        for t in &r.targets {
            let known = k
                .targets
                .get(t)
                .unwrap_or_else(|| panic!("{t} is not in targets.toml"));
            assert_eq!(known.vendor, gpuprobe::report::Vendor::Amd, "{t}");
        }
        // Every standard TheRock case generates: their targets all have device code.
        for t in [
            "gfx1151", "gfx1150", "gfx1200", "gfx1201", "gfx1100", "gfx1103", "gfx1030", "gfx1034",
            "gfx90a", "gfx908",
        ] {
            assert!(r.targets.iter().any(|x| x == t), "{t}");
        }
    }
}

#[test]
fn therock_kernel_folders_are_required_only_for_targets_the_library_has_kernels_for() {
    // TheRock builds no hipBLASLt for gfx103X (profiles/toolkits.toml [[rocm.no_kernels]]):
    // those entries must not require its kernel folder; gfx110X entries must.
    let doc = yaml(&workflow(CASES[0].1));
    let mut seen_103 = 0;
    for os in ["linux", "windows"] {
        let env = &doc["jobs"][os]["env"];
        assert_eq!(
            env["GPUPROBE_BUNDLE_DATA"], "${{ matrix.bundle_data }}",
            "{os}"
        );
        for e in doc["jobs"][os]["strategy"]["matrix"]["include"]
            .as_array()
            .unwrap()
        {
            let targets: Vec<&str> = e["targets"].as_str().unwrap().split(';').collect();
            let data = e["bundle_data"].as_str().unwrap();
            let folder = |f: &str| -> Vec<&str> {
                data.split(';')
                    .find_map(|p| {
                        let mut it = p.splitn(3, '=');
                        let (_, fo, t) = (it.next()?, it.next()?, it.next()?);
                        (fo == f).then(|| t.split(',').filter(|x| !x.is_empty()).collect())
                    })
                    .unwrap_or_else(|| panic!("{os}: no {f} in {data}"))
            };
            assert_eq!(folder("rocblas/library"), targets, "{os}: {data}");
            let lt = folder("hipblaslt/library");
            for t in &targets {
                let is_103 = t.starts_with("gfx103");
                seen_103 += usize::from(is_103);
                assert_eq!(lt.contains(t), !is_103, "{os} {t}: {data}");
            }
        }
    }
    assert!(seen_103 > 0, "the case has gfx103X targets");
}

#[test]
fn windows_rocm_dlls_are_found_under_either_spelling() {
    // HIP SDK 25.Q3: hipblas.dll, hipblaslt.dll; TheRock 7.13+ / ROCm 7.x: hipblas.dll or
    // libhipblas.dll, libhipblaslt.dll. Each must be bundled and its kernels checked.
    let doc = yaml(&workflow(CASES[0].1));
    let env = &doc["jobs"]["windows"]["env"];
    let globs = |name: &str| -> Vec<String> {
        env[name]
            .as_str()
            .unwrap()
            .split(';')
            .map(str::to_string)
            .collect()
    };
    let expect = globs("GPUPROBE_BUNDLE_EXPECT");
    let extra = globs("GPUPROBE_BUNDLE_EXTRA");
    let entry = &doc["jobs"]["windows"]["strategy"]["matrix"]["include"][0];
    let data_libs: Vec<String> = entry["bundle_data"]
        .as_str()
        .unwrap()
        .split(';')
        .map(|p| p.split('=').next().unwrap().to_string())
        .collect();
    let matched = |list: &[String], dll: &str| list.iter().any(|g| bash_glob_matches(g, dll));
    for dll in ["hipblas.dll", "libhipblas.dll", "rocblas.dll"] {
        assert!(matched(&expect, dll), "{dll} not expected by {expect:?}");
    }
    for dll in ["hipblaslt.dll", "libhipblaslt.dll"] {
        assert!(matched(&extra, dll), "{dll} not bundled by {extra:?}");
        assert!(
            matched(&data_libs, dll),
            "{dll}'s kernels not packed: {data_libs:?}"
        );
        assert!(
            !matched(&expect, dll),
            "hipBLASLt is not hipBLAS: {expect:?}"
        );
    }
}

/// The rendered CMAKE_CUDA_ARCHITECTURES of every entry of `job`.
fn cuda_archs_of(doc: &Value, job: &str) -> Vec<String> {
    doc["jobs"][job]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let args = e["cmake_args"].as_str().unwrap();
            args.split(' ')
                .find_map(|a| a.strip_prefix("-DCMAKE_CUDA_ARCHITECTURES="))
                .unwrap_or_else(|| panic!("no CUDA architectures in {args}"))
                .to_string()
        })
        .collect()
}

#[test]
fn cuda_releases_build_device_code_per_arch_and_ptx_once() {
    // Build 11434 spells Blackwell 120a (architecture-specific): its PTX would run on no later
    // GPU, so the forward-compatible PTX is the newest plain arch's, as in ggml's default list.
    let doc = yaml(&workflow(CASES[1].1));
    for job in ["linux", "windows"] {
        assert_eq!(
            cuda_archs_of(&doc, job),
            ["86-real;89-real;90-real;120a-real;90-virtual"],
            "{job}"
        );
    }
    let doc = yaml(&workflow(CASES[5].1));
    assert_eq!(
        cuda_archs_of(&doc, "linux"),
        ["90-real;120a-real;90-virtual"]
    );
    // The plan itself (cmake-flags) keeps bare entries: its users build for their own GPUs.
    let out = gpuprobe(&[
        "cmake-flags",
        "--targets",
        "sm_86,sm_90",
        "--cuda",
        "12.8",
        "--format",
        "args",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("-DCMAKE_CUDA_ARCHITECTURES=86;90")
            || text.contains("-DCMAKE_CUDA_ARCHITECTURES=\"86;90\"")
            || text.contains("'-DCMAKE_CUDA_ARCHITECTURES=86;90'"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every rendered entry passes the pattern ggml itself uses for an architecture list
    // (ggml-cuda/CMakeLists.txt, the native-list check), read from the real sources when present.
    let Some(src) = std::env::var_os("GPUPROBE_LLAMA_SOURCES") else {
        eprintln!("ggml pattern part skipped: GPUPROBE_LLAMA_SOURCES not set");
        return;
    };
    let cmake = PathBuf::from(src).join("11434/ggml/src/ggml-cuda/CMakeLists.txt");
    let text = std::fs::read_to_string(&cmake).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("CMAKE_CUDA_ARCHITECTURES_NATIVE MATCHES \""))
        .expect("ggml's architecture-list pattern");
    let pattern = line.split("MATCHES \"").nth(1).unwrap();
    let pattern = &pattern[..pattern.find('"').unwrap()];
    let re = regex::Regex::new(pattern).unwrap();
    for job in ["linux", "windows"] {
        for list in cuda_archs_of(&yaml(&workflow(CASES[1].1)), job) {
            assert!(re.is_match(&list), "{list} fails ggml's {pattern}");
        }
    }
    assert!(
        text.contains("86-real") && text.contains("90-virtual"),
        "ggml's default list no longer uses -real/-virtual entries"
    );
}

#[test]
fn assets_say_which_gpus_and_the_notes_map_each_gpu_to_its_archive() {
    let doc = yaml(&workflow(CASES[0].1));
    let names = |job: &str| -> Vec<String> {
        doc["jobs"][job]["strategy"]["matrix"]["include"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["artifact"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(
        names("windows").contains(&"llama-b11434-bin-win-rocm-7.14.0-gfx110X-x64".to_string()),
        "{:?}",
        names("windows")
    );
    for n in names("linux") {
        assert!(
            n.starts_with("llama-b11434-bin-ubuntu-rocm-7.14.0-") && n.contains("gfx110X"),
            "{n}"
        );
    }
    let publish = doc["jobs"]["release"]["steps"][1]["env"].clone();
    let notes = publish["RELEASE_NOTES"].as_str().unwrap();
    let assets = publish["RELEASE_ASSETS"].as_str().unwrap();
    // Every GPU of every entry is in the notes' table, on the row of its own archive.
    for job in ["linux", "windows"] {
        for e in doc["jobs"][job]["strategy"]["matrix"]["include"]
            .as_array()
            .unwrap()
        {
            let ext = if job == "windows" { "zip" } else { "tar.gz" };
            let file = format!("{}.{ext}", e["artifact"].as_str().unwrap());
            assert!(assets.split(' ').any(|a| a == file), "{file}: {assets}");
            let row = notes
                .lines()
                .find(|l| l.ends_with(&format!("`{file}` |")))
                .unwrap_or_else(|| panic!("no row for {file}:\n{notes}"));
            for t in e["targets"].as_str().unwrap().split(';') {
                assert!(row.contains(t), "{t} not on {row}");
            }
        }
    }
    // CUDA: one archive per OS, named without architectures, all of them in the table.
    let cuda = yaml(&workflow(CASES[1].1));
    let env = &cuda["jobs"]["release"]["steps"][1]["env"];
    assert_eq!(
        env["RELEASE_ASSETS"].as_str().unwrap(),
        "llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz llama-b11434-bin-win-cuda-12.8-x64.zip"
    );
    assert!(
        env["RELEASE_NOTES"]
            .as_str()
            .unwrap()
            .contains("| sm_86, sm_89, sm_90, sm_120 | `llama-b11434-bin-win-cuda-12.8-x64.zip` |")
    );
    // The publish step refuses a release that lacks an archive the notes name.
    let root = tempfile::tempdir().unwrap();
    let dist = root.path().join("dist");
    std::fs::create_dir_all(&dist).unwrap();
    std::fs::write(
        dist.join("llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz"),
        "x",
    )
    .unwrap();
    let o = Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c"])
        .arg(cuda["jobs"]["release"]["steps"][1]["run"].as_str().unwrap())
        .current_dir(root.path())
        .env("RUNNER_TEMP", root.path())
        .env("RELEASE_ASSETS", env["RELEASE_ASSETS"].as_str().unwrap())
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "llama-b11434-bin-win-cuda-12.8-x64.zip (named in the release notes) was not downloaded"
        ),
        "{err}"
    );
}

#[test]
fn no_two_entries_of_a_job_build_the_same_flags() {
    for (name, args) in CASES {
        let doc = yaml(&workflow(args));
        for (id, job) in doc["jobs"].as_object().unwrap() {
            let Some(entries) = job["strategy"]["matrix"]["include"].as_array() else {
                continue;
            };
            // Flags other than the target list: entries that agree on them are one build.
            let mut seen: Vec<String> = Vec::new();
            for e in entries {
                let flags: Vec<&str> = e["cmake_args"]
                    .as_str()
                    .unwrap()
                    .split(' ')
                    .filter(|a| !a.contains("_TARGETS=") && !a.contains("ARCHITECTURES="))
                    .collect();
                let key = flags.join(" ");
                let split_by_family =
                    id == "windows" && e["group"].as_str().unwrap().contains("-gfx");
                assert!(
                    split_by_family || !seen.contains(&key),
                    "{name}/{id}: two entries build {key}"
                );
                seen.push(key);
            }
        }
    }
}

#[test]
fn every_build_job_caches_compiles_through_ggmls_own_ccache() {
    for (name, args) in CASES {
        let text = workflow(args);
        // An explicit launcher turns GGML_CCACHE off, and covers C and C++ only.
        assert!(!text.contains("COMPILER_LAUNCHER="), "{name}");
        let doc = yaml(&text);
        for (id, job) in doc["jobs"].as_object().unwrap() {
            if id == "release" {
                continue;
            }
            let steps = job["steps"].as_array().unwrap();
            let cache = steps
                .iter()
                .find(|s| s["name"] == "Restore the compiler cache")
                .unwrap_or_else(|| panic!("{name}/{id}: no compiler cache"));
            let uses = cache["uses"].as_str().unwrap();
            let sha = uses.strip_prefix("actions/cache@").unwrap();
            assert!(
                sha.len() == 40 && sha.chars().all(|c| c.is_ascii_hexdigit()),
                "{uses}"
            );
            assert_eq!(cache["with"]["path"], ".ccache", "{name}/{id}");
            let all: String = steps
                .iter()
                .filter_map(|s| s["run"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            assert!(all.contains("ccache --show-stats"), "{name}/{id}");
            assert!(
                all.contains("CCACHE_DIR=$GITHUB_WORKSPACE/.ccache"),
                "{name}/{id}"
            );
            assert!(
                all.lines()
                    .any(|l| l.contains("install") && l.split_whitespace().any(|w| w == "ccache")),
                "{name}/{id}: ccache is not installed"
            );
        }
    }
    // What the template relies on, in ggml's own CMake code.
    let Some(src) = std::env::var_os("GPUPROBE_LLAMA_SOURCES") else {
        eprintln!("ggml part skipped: GPUPROBE_LLAMA_SOURCES not set");
        return;
    };
    let cmake =
        std::fs::read_to_string(PathBuf::from(src).join("11434/ggml/src/CMakeLists.txt")).unwrap();
    assert!(cmake.contains(
        "if (GGML_CCACHE AND NOT CMAKE_C_COMPILER_LAUNCHER AND NOT CMAKE_CXX_COMPILER_LAUNCHER)"
    ));
    // A global compile-rule launcher: every language's compiles (HIP and CUDA too).
    assert!(
        cmake.contains(
            "set_property(GLOBAL PROPERTY RULE_LAUNCH_COMPILE \"${GGML_CCACHE_VARIANT}\")"
        )
    );
}
