//! The binary's contract: exit codes, error messages that name the input and the fix, and the
//! output formats (snapshots).

mod common;

use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;

fn gp() -> Command {
    common::gpuprobe()
}

fn stdout_of(args: &[&str]) -> String {
    let out = gp().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

const LEMONADE: &str = "gfx1151,gfx1150,gfx120X,gfx110X,gfx103X,gfx90a,gfx908";

#[test]
fn detect_without_a_gpu_succeeds_and_says_what_to_do() {
    let root = tempfile::tempdir().unwrap();
    gp().args(["detect"])
        .env("GPUPROBE_SYSFS_ROOT", root.path())
        .env("GPUPROBE_LIBCUDA", "/nonexistent/libcuda.so.1")
        .assert()
        .success()
        .stdout(
            predicate::str::contains("No GPU found").and(predicate::str::contains("--targets")),
        );
    gp().args(["detect", "--require-gpu"])
        .env("GPUPROBE_SYSFS_ROOT", root.path())
        .env("GPUPROBE_LIBCUDA", "/nonexistent/libcuda.so.1")
        .assert()
        .code(3);
}

#[test]
fn unknown_target_is_exit_2_with_suggestion() {
    gp().args(["cmake-flags", "--targets", "gfx1100,gfx11OO"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("unknown GPU target `gfx11OO`")
                .and(predicate::str::contains("did you mean")),
        )
        .stdout(predicate::str::is_empty());
}

#[test]
fn mixed_vendors_are_refused_with_exit_1_and_nothing_on_stdout() {
    gp().args([
        "cmake-flags",
        "--targets",
        "gfx1100,sm_90",
        "--toolchain",
        "none",
    ])
    .assert()
    .code(1)
    .stdout(predicate::str::is_empty())
    .stderr(predicate::str::contains("--backend"));
}

#[test]
fn unbuildable_target_is_refused_and_nothing_half_written() {
    gp().args(["cmake-flags", "--targets", "sm_61,sm_90", "--cuda", "13.0"])
        .assert()
        .code(1)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("sm_61"));
}

#[test]
fn bad_versions_and_reports_are_exit_2() {
    gp().args(["cmake-flags", "--targets", "gfx1100", "--rocm", "seven"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--rocm"));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("r.json");
    std::fs::write(&bad, "{\"schema\": \"other/v9\"}").unwrap();
    gp().args(["cmake-flags", "--from"])
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("schema"));
    std::fs::write(&bad, "{ not json").unwrap();
    gp().args(["cmake-flags", "--from"])
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("r.json:1"));
}

#[test]
fn malformed_user_quirk_file_names_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("local.toml");
    std::fs::write(
        &f,
        "[[quirk]]\nid = \"LOCAL1\"\ntitle = \"t\"\nsummary = \"s\"\nseverity = \"high\"\nconfidence = \"sure\"\nsources = [\"https://example.org\"]\n",
    )
    .unwrap();
    gp().env("GPUPROBE_QUIRKS_DIR", dir.path())
        .args(["cmake-flags", "--targets", "gfx1100"])
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(
            predicate::str::contains("local.toml:6").and(predicate::str::contains("confidence")),
        );
    std::fs::write(
        &f,
        "[[quirk]]\nid = \"LOCAL1\"\ntitle = \"t\"\nsummary = \"s\"\nseverity = \"high\"\nconfidence = \"high\"\nsources = [\"https://example.org\"]\n[quirk.match]\nruntime = \"7.2\"\n",
    )
    .unwrap();
    gp().env("GPUPROBE_QUIRKS_DIR", dir.path())
        .args(["quirks", "list"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("local.toml:9")
                .and(predicate::str::contains("runtime"))
                .and(predicate::str::contains("min:max")),
        );
}

#[test]
fn user_quirk_file_is_merged_and_applied() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("site.toml"),
        r#"# a site-local record
[[quirk]]
id = "SITE-1"
title = "our gfx1100 boxes need peer copies off"
summary = "measured here"
severity = "medium"
confidence = "high"
sources = ["https://example.org/ticket/1"]
[quirk.match]
archs = ["gfx1100"]
[quirk.effect]
vmm = "deny"
"#,
    )
    .unwrap();
    let out = gp()
        .env("GPUPROBE_QUIRKS_DIR", dir.path())
        .args([
            "cmake-flags",
            "--targets",
            "gfx1100",
            "--rocm",
            "6.4",
            "--format",
            "args",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("-DGGML_HIP_NO_VMM=ON"));
    gp().env("GPUPROBE_QUIRKS_DIR", dir.path())
        .args(["quirks", "show", "SITE-1"])
        .assert()
        .success()
        .stdout(predicate::str::contains("example.org/ticket/1"));
}

#[test]
fn quirks_show_and_unknown_id() {
    gp().args(["quirks", "show", "Q3"])
        .assert()
        .success()
        .stdout(predicate::str::contains("https://"));
    gp().args(["quirks", "show", "Q99"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("Q21"));
}

#[test]
fn shell_output_is_valid_sh() {
    for args in [
        vec!["cmake-flags", "--targets", LEMONADE, "--rocm", "7.14.0"],
        vec!["cmake-flags", "--targets", "sm_86,sm_90", "--cuda", "12.8"],
    ] {
        let text = stdout_of(&args);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("build.sh");
        std::fs::write(&f, &text).unwrap();
        let st = std::process::Command::new("sh")
            .arg("-n")
            .arg(&f)
            .status()
            .unwrap();
        assert!(st.success(), "sh -n failed on:\n{text}");
    }
}

#[test]
fn github_format_needs_github_output() {
    gp().args(["cmake-flags", "--targets", "gfx1100", "--format", "github"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("GITHUB_OUTPUT"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let sum = dir.path().join("sum");
    // Annotations for errors and warnings only: here the plan's warnings (gfx1036's rocBLAS,
    // Q30) and the configure's missing HIP compiler (not looked for); its notes stay in the
    // summary.
    let run = gp()
        .args([
            "cmake-flags",
            "--targets",
            &format!("{LEMONADE},gfx1036"),
            "--rocm",
            "7.2.1",
            "--toolchain",
            "none",
            "--format",
            "github",
        ])
        .env("GITHUB_OUTPUT", &out)
        .env("GITHUB_STEP_SUMMARY", &sum)
        .output()
        .unwrap();
    assert!(run.status.success());
    let annotations = String::from_utf8(run.stdout).unwrap();
    assert!(
        annotations.contains("::warning title=gpuprobe::Q30"),
        "{annotations}"
    );
    assert!(
        annotations.contains("::warning title=gpuprobe configure::"),
        "{annotations}"
    );
    assert!(!annotations.contains("::notice"), "{annotations}");
    for line in annotations.lines() {
        assert!(
            !line.contains("may apply") && !line.contains("::Q2:"),
            "a note annotated: {line}"
        );
    }
    let o = std::fs::read_to_string(&out).unwrap();
    let matrix = o.lines().find_map(|l| l.strip_prefix("matrix=")).unwrap();
    let m: serde_json::Value = serde_json::from_str(matrix).unwrap();
    assert!(!m["include"].as_array().unwrap().is_empty());
    assert!(o.contains("cmake-args=-DGGML_HIP=ON"));
    assert!(
        std::fs::read_to_string(&sum)
            .unwrap()
            .contains("| group | targets |")
    );
}

#[test]
fn preset_is_valid_json_with_cache_variables() {
    // A measured pass (synthetic test input) for gfx1101 on ROCm 7.14: the VMM pool.
    let text = stdout_of(&[
        "cmake-flags",
        "--targets",
        "gfx1101",
        "--rocm",
        "7.14.0",
        "--from",
        "tests/fixtures/synthetic/gfx1101-rocm7.14-linux-smoke-pass.json",
        "--format",
        "preset",
    ]);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["version"], 3);
    assert_eq!(
        v["configurePresets"][0]["cacheVariables"]["GGML_HIP_NO_VMM"],
        "OFF"
    );
    assert_eq!(
        v["configurePresets"][0]["cacheVariables"]["GPU_TARGETS"],
        "gfx1101"
    );
}

#[test]
fn preset_is_accepted_by_real_cmake() {
    if which_cmake().is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "cmake is missing in CI: .ci/run must install it"
        );
        return;
    }
    let text = stdout_of(&[
        "cmake-flags",
        "--targets",
        LEMONADE,
        "--rocm",
        "7.14.0",
        "--format",
        "preset",
    ]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.21)\nproject(p NONE)\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("CMakeUserPresets.json"), &text).unwrap();
    let out = std::process::Command::new("cmake")
        .arg("--list-presets")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(listed.contains("\"gpuprobe-hip\""), "{listed}");
}

fn which_cmake() -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("cmake"))
        .find(|p| p.is_file())
}

#[test]
fn explain_names_quirks_and_sources_on_stderr() {
    gp().args([
        "cmake-flags",
        "--targets",
        "gfx1201",
        "--rocm",
        "7.2.1",
        "--explain",
        "--format",
        "args",
    ])
    .assert()
    .success()
    .stderr(
        predicate::str::contains("Q21")
            .and(predicate::str::contains("https://"))
            .and(predicate::str::contains("decision trace")),
    );
}

#[test]
fn completions_and_man_page_come_from_the_cli_definition() {
    gp().args(["completions", "bash"])
        .assert()
        .success()
        .stdout(predicate::str::contains("cmake-flags"));
    gp().args(["man"])
        .assert()
        .success()
        .stdout(predicate::str::contains(".TH gpuprobe"));
}

// ---- snapshots of each format -------------------------------------------------------------

#[test]
fn snapshot_shell_hip_lemonade_targets() {
    insta::assert_snapshot!(stdout_of(&[
        "cmake-flags",
        "--targets",
        LEMONADE,
        "--rocm",
        "7.14.0",
        "--llama-build",
        "11434"
    ]));
}

#[test]
fn snapshot_shell_cuda() {
    insta::assert_snapshot!(stdout_of(&[
        "cmake-flags",
        "--targets",
        "sm_86,sm_89,sm_90,sm_120",
        "--cuda",
        "12.8",
        "--llama-build",
        "11434"
    ]));
}

#[test]
fn snapshot_args_rocm_7_2() {
    insta::assert_snapshot!(stdout_of(&[
        "cmake-flags",
        "--targets",
        "gfx1201,gfx1100",
        "--rocm",
        "7.2.1",
        "--llama-build",
        "11434",
        "--format",
        "args"
    ]));
}

#[test]
fn snapshot_json_plan() {
    insta::assert_snapshot!(stdout_of(&[
        "cmake-flags",
        "--targets",
        "gfx1151,gfx906",
        "--rocm",
        "6.4",
        "--llama-build",
        "9601",
        "--format",
        "json"
    ]));
}

#[test]
fn snapshot_preset() {
    insta::assert_snapshot!(stdout_of(&[
        "cmake-flags",
        "--targets",
        "gfx90a,gfx906",
        "--rocm",
        "6.4",
        "--llama-build",
        "11434",
        "--format",
        "preset"
    ]));
}

#[test]
fn snapshot_from_h200_report() {
    insta::assert_snapshot!(stdout_of(&[
        "cmake-flags",
        "--from",
        "tests/fixtures/nvidia-2x-h200-driver580/detect.json",
        "--toolchain",
        "none",
        "--llama-build",
        "11434"
    ]));
}

#[test]
fn a_toolkit_no_target_needs_is_named_not_dropped() {
    gp().args([
        "cmake-flags",
        "--targets",
        "gfx1100",
        "--rocm",
        "7.2.1",
        "--cuda",
        "12.8",
        "--format",
        "args",
    ])
    .assert()
    .success()
    .stderr(predicate::str::contains(
        "--cuda 12.8 is not used: no GPU of this plan needs CUDA",
    ));
}

#[test]
fn backend_leaving_out_declared_targets_names_them_and_the_call_that_plans_them() {
    let both = [
        "cmake-flags",
        "--targets",
        "gfx1100,sm_90",
        "--rocm",
        "7.2.1",
        "--cuda",
        "12.8",
        "--format",
        "args",
    ];
    let out = gp()
        .args(both)
        .args(["--backend", "cuda"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--backend cuda leaves out gfx1100") && err.contains("--backend hip"),
        "{err}"
    );
    let cuda_args = String::from_utf8_lossy(&out.stdout);
    assert!(
        cuda_args.contains("CMAKE_CUDA_ARCHITECTURES") && !cuda_args.contains("gfx1100"),
        "{cuda_args}"
    );
    // The call the warning names plans the targets left out, with both toolkits given.
    let hip = gp().args(both).args(["--backend", "hip"]).output().unwrap();
    assert!(
        hip.status.success(),
        "{}",
        String::from_utf8_lossy(&hip.stderr)
    );
    assert!(String::from_utf8_lossy(&hip.stdout).contains("gfx1100"));
    assert!(String::from_utf8_lossy(&hip.stderr).contains("leaves out sm_90"));
}

/// The `gpuprobe ...` command in a printed line (a hint or a `fix:`), as a shell would split it:
/// from `gpuprobe` to a `#` comment.
fn pasted_command(line: &str) -> Option<Vec<String>> {
    let at = line.find("gpuprobe ")?;
    let cmd = line[at..].split('#').next()?.trim();
    Some(cmd.split_whitespace().skip(1).map(String::from).collect())
}

/// Every `gpuprobe ...` command a `fix:` or `Next:` line names: in backticks, else from
/// `gpuprobe ` to a `#` comment, a `(` aside or the end of the clause.
fn fix_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(at) = line.find("fix:").or_else(|| line.find("Next:")) else {
            continue;
        };
        let rest = &line[at..];
        let quoted: Vec<&str> = rest
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|q| q.starts_with("gpuprobe "))
            .collect();
        if !quoted.is_empty() {
            out.extend(quoted.iter().map(|q| q.to_string()));
        } else if let Some(g) = rest.find("gpuprobe ") {
            let cmd = rest[g..].split(['#', '(', ';']).next().unwrap_or("").trim();
            out.push(cmd.trim_end_matches(['.', ',']).to_string());
        }
    }
    out
}

/// Every `fix:` and `Next:` line gpuprobe prints, as far as a machine without a GPU can show
/// them (the no-GPU outputs and errors below, the snapshot corpus, the README) runs as pasted
/// and is not refused (exit 1 or 2; exit 3 only says the command needs a GPU). The files such a command names exist in the folder it runs in, as they
/// would for the user: `report.json` (the H200 capture), `exercise.json`, `./build` (a build
/// folder with a FAKE llama-cli).
#[test]
fn every_printed_fix_and_next_step_runs_without_a_gpu() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let empty = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::copy(
        root.join("tests/fixtures/nvidia-h200-driver580-e2e/detect.json"),
        work.path().join("report.json"),
    )
    .unwrap();
    std::fs::copy(
        root.join("tests/fixtures/nvidia-h200-driver580-smoke-v2/exercise-legacy.json"),
        work.path().join("exercise.json"),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        let bin = work.path().join("build/bin");
        std::fs::create_dir_all(&bin).unwrap();
        // test-backend-ops for `--exercise ./build`, which then finds no GPU here (exit 3).
        std::fs::write(bin.join("test-backend-ops"), "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(
            bin.join("test-backend-ops"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        // llama-cli for `check-build ./build`, llama-perplexity for `--exercise inference`: both
        // list no device here (the inference exercise then exits 3).
        for name in ["llama-cli", "llama-perplexity"] {
            let prog = bin.join(name);
            std::fs::write(
                &prog,
                "#!/bin/sh\ncase \"$1\" in --version) echo 'version: 11434 (abcdef0)' >&2 ;; --list-devices) echo 'Available devices:'; echo '  (none)' ;; esac\n",
            )
            .unwrap();
            std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    let no_gpu = |args: &[&str]| {
        let out = gp()
            .args(args)
            .current_dir(work.path())
            .env("GPUPROBE_SYSFS_ROOT", empty.path())
            .env("GPUPROBE_LIBCUDA", "/nonexistent/libcuda.so.1")
            .output()
            .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let log = root.join("tests/fixtures/llama-logs/h200-b11434-sdist-version.txt");
    let mut printed = String::new();
    for args in [
        vec!["detect"],
        vec!["cmake-flags"],
        vec!["prebuilt"],
        vec!["workflow", "--targets", "gfx1100"],
        vec!["check-build"],
        vec!["check-build", "--no-probe", "--log", log.to_str().unwrap()],
        vec!["check-build", "--no-probe", empty.path().to_str().unwrap()],
        vec!["quirks", "record"],
        vec!["quirks", "record", "--from", "nothing.json"],
    ] {
        printed.push_str(&no_gpu(&args));
    }
    let mut commands = fix_commands(&printed);
    let from_output = commands.len();
    for entry in std::fs::read_dir(root.join("tests/snapshots")).unwrap() {
        commands.extend(fix_commands(
            &std::fs::read_to_string(entry.unwrap().path()).unwrap(),
        ));
    }
    commands.extend(fix_commands(
        &std::fs::read_to_string(root.join("README.md")).unwrap(),
    ));
    commands.sort();
    commands.dedup();
    assert!(from_output >= 4, "too few fix commands printed:\n{printed}");
    for c in &commands {
        let words: Vec<&str> = c.split_whitespace().skip(1).collect();
        let out = gp()
            .args(&words)
            .current_dir(work.path())
            .env("GPUPROBE_SYSFS_ROOT", empty.path())
            .env("GPUPROBE_LIBCUDA", "/nonexistent/libcuda.so.1")
            .output()
            .unwrap();
        // Refused: bad input or usage (2) or a refused plan (1). Exit 3 is a command that
        // needs a GPU this machine lacks, as printed for a machine with one.
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "printed `{c}` is refused (exit {:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn commands_printed_without_a_gpu_run_as_pasted() {
    // No GPU: detect's hints and cmake-flags' fix. They run here as the user would paste them,
    // on this machine's toolkits (the test install puts Debian's hipcc 5.2 on PATH, which cannot
    // build gfx1100: the printed commands must not depend on it).
    let root = tempfile::tempdir().unwrap();
    let no_gpu = |args: &[&str]| {
        gp().args(args)
            .env("GPUPROBE_SYSFS_ROOT", root.path())
            .env("GPUPROBE_LIBCUDA", "/nonexistent/libcuda.so.1")
            .output()
            .unwrap()
    };
    let detect = no_gpu(&["detect"]);
    let plan = no_gpu(&["cmake-flags"]);
    assert_eq!(plan.status.code(), Some(3), "{plan:?}");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&detect.stdout),
        String::from_utf8_lossy(&plan.stderr)
    );
    let commands: Vec<Vec<String>> = printed
        .lines()
        .filter(|l| l.trim_start().starts_with("gpuprobe ") || l.contains("fix:"))
        .filter_map(pasted_command)
        .collect();
    assert!(commands.len() >= 3, "too few commands printed: {printed}");
    for c in commands {
        let out = gp().args(&c).output().unwrap();
        assert!(
            out.status.success(),
            "printed `gpuprobe {}` fails: {}",
            c.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A FAKE hipconfig (failure injection: the real ones on a test machine are Debian's, whose
/// `-l` names a folder without `clang`): `-l` prints the folder `clang` is in, if given.
fn fake_hipconfig(dir: &Path, with_clang: bool) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let llvm = dir.join("rocm/llvm/bin");
    std::fs::create_dir_all(&llvm).unwrap();
    if with_clang {
        std::fs::write(llvm.join("clang"), "").unwrap();
    }
    let p = dir.join("hipconfig");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\ncase \"$1\" in -l) printf '%s' '{}' ;; --version) echo 6.4.43482-0f2d60242 ;; esac\n",
            llvm.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn args_and_github_carry_the_hip_compiler_that_shell_sets() {
    let dir = tempfile::tempdir().unwrap();
    let hipconfig = fake_hipconfig(dir.path(), true);
    let clang = dir.path().join("rocm/llvm/bin/clang");
    let tc = hipconfig.to_str().unwrap();
    let args = stdout_of(&[
        "cmake-flags",
        "--targets",
        "gfx1100",
        "--toolchain",
        tc,
        "--format",
        "args",
    ]);
    assert!(
        args.trim_end()
            .ends_with(&format!("-DCMAKE_HIP_COMPILER={}", clang.display())),
        "{args}"
    );
    let out = dir.path().join("out");
    gp().args([
        "cmake-flags",
        "--targets",
        "gfx1100",
        "--toolchain",
        tc,
        "--format",
        "github",
    ])
    .env("GITHUB_OUTPUT", &out)
    .assert()
    .success();
    let o = std::fs::read_to_string(&out).unwrap();
    let cmake_args = o
        .lines()
        .find_map(|l| l.strip_prefix("cmake-args="))
        .unwrap();
    assert!(cmake_args.ends_with(&format!("-DCMAKE_HIP_COMPILER={}", clang.display())));
    assert!(o.contains(&format!("HIPCXX={}", clang.display())), "{o}");
    // HIPCXX already set: CMake reads it, nothing is added.
    let out = gp()
        .args([
            "cmake-flags",
            "--targets",
            "gfx1100",
            "--toolchain",
            tc,
            "--format",
            "args",
        ])
        .env("HIPCXX", "/usr/local/bin/my-clang")
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("CMAKE_HIP_COMPILER"));
    // CUDA plans have no HIP compiler to add.
    let args = stdout_of(&[
        "cmake-flags",
        "--targets",
        "sm_90",
        "--cuda",
        "12.8",
        "--format",
        "args",
    ]);
    assert!(!args.contains("CMAKE_HIP_COMPILER"), "{args}");
}

#[test]
fn args_without_a_rocm_clang_says_what_the_configure_needs() {
    let dir = tempfile::tempdir().unwrap();
    let hipconfig = fake_hipconfig(dir.path(), false);
    let out = gp()
        .args([
            "cmake-flags",
            "--targets",
            "gfx1100",
            "--toolchain",
            hipconfig.to_str().unwrap(),
            "--format",
            "args",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("CMAKE_HIP_COMPILER"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: no ROCm clang")
            && err.contains("holds no clang")
            && err.contains("HIPCXX="),
        "{err}"
    );
    let out = gp()
        .args([
            "cmake-flags",
            "--targets",
            "gfx1100",
            "--rocm",
            "6.4",
            "--toolchain",
            "none",
            "--format",
            "args",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--toolchain none"));
}

/// A user quirk file holding one record with this `[quirk.match]` body (and `measured_on` when
/// given), and what `cmake-flags` says when it loads it.
fn with_quirk_match(body: &str, measured_on: Option<&str>) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let measured = measured_on
        .map(|m| format!("measured_on = \"{m}\"\n"))
        .unwrap_or_default();
    std::fs::write(
        dir.path().join("site.toml"),
        format!(
            "[[quirk]]\nid = \"SITE-2\"\ntitle = \"t\"\nsummary = \"s\"\nseverity = \"medium\"\nconfidence = \"high\"\nsources = [\"https://example.org/2\"]\n{measured}[quirk.match]\n{body}\n[quirk.effect]\nvmm = \"deny\"\n"
        ),
    )
    .unwrap();
    gp().env("GPUPROBE_QUIRKS_DIR", dir.path())
        .args([
            "cmake-flags",
            "--targets",
            "gfx1100",
            "--rocm",
            "6.4",
            "--format",
            "args",
        ])
        .output()
        .unwrap()
}

#[test]
fn quirk_records_are_held_to_the_target_table() {
    let cases = [
        // (match body, what the error must say)
        (
            "archs = [\"gfx110\"]",
            vec![
                "site.toml:2",
                "SITE-2",
                "unknown GPU target `gfx110`",
                "did you mean",
                "gfx1100",
            ],
        ),
        (
            "archs = [\"90\"]",
            vec!["match.archs", "write it as `sm_90`"],
        ),
        (
            "vendor = \"nvidia\"\narchs = [\"gfx1100\"]",
            vec![
                "SITE-2",
                "match.vendor = \"nvidia\"",
                "gfx1100",
                "amd target",
                "never match",
            ],
        ),
        (
            "vendor = \"amd\"\narchs = [\"gfx120X\", \"sm_90\"]",
            vec!["sm_90", "nvidia target"],
        ),
    ];
    for (body, says) in cases {
        let out = with_quirk_match(body, None);
        assert_eq!(out.status.code(), Some(2), "{body}");
        assert!(out.stdout.is_empty(), "{body}: nothing half-written");
        let err = String::from_utf8_lossy(&out.stderr);
        for s in says {
            assert!(err.contains(s), "{body}: `{s}` missing from: {err}");
        }
    }
    // What the table knows passes, family tokens included.
    let out = with_quirk_match("vendor = \"amd\"\narchs = [\"gfx110X\", \"gfx1201\"]", None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A record `quirks record` wrote for a measured GPU newer than the table still loads.
    let out = with_quirk_match("archs = [\"gfx1310\"]", Some("gpuprobe detect on host-1"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = with_quirk_match("archs = [\"gfx1310\"]", None);
    assert_eq!(out.status.code(), Some(2));
}
