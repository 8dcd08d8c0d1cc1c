//! `gpuprobe prebuilt` as a user runs it: a saved H200 report, declared GPUs, the URL format,
//! bad input, and the `cmake-flags` command printed when no asset fits, run as printed.

mod common;

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = common::gpuprobe().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn h200() -> String {
    root()
        .join("tests/fixtures/nvidia-2x-h200-driver580-hostcheck/detect.json")
        .display()
        .to_string()
}

#[test]
fn an_h200_with_driver_580_gets_the_linux_cuda_12_8_asset_and_why() {
    let (code, out, err) = run(&["prebuilt", "--from", &h200(), "--cpu", "x64"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("download: llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz"),
        "{out}"
    );
    assert!(out.contains("https://github.com/ggml-org/llama.cpp/releases/download/b11434/llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz"));
    assert!(out.contains("cudart-llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz"));
    assert!(out.contains("sm_90: PTX only"), "{out}");
    assert!(out.contains("driver 580.159.04 (CUDA 13.0)"), "{out}");
    assert!(
        out.contains("memory pool: built with the VMM pool, as gpuprobe advises"),
        "{out}"
    );
    assert!(
        out.contains("ubuntu-cuda-13.4-x64.tar.gz: sm_90 is covered only by PTX"),
        "{out}"
    );
    assert!(
        out.contains("gpuprobe check-build --binary llama-b11434/llama-cli"),
        "{out}"
    );
    assert!(out.contains("not downloaded"), "{out}");
}

#[test]
fn url_format_prints_the_asset_then_its_runtime() {
    let (code, out, _) = run(&[
        "prebuilt",
        "--from",
        &h200(),
        "--cpu",
        "x64",
        "--format",
        "url",
    ]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].ends_with("/b11434/llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz"));
    assert!(lines[1].ends_with("/b11434/cudart-llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz"));
}

#[test]
fn when_none_fits_the_printed_cmake_flags_command_works() {
    // Windows arm64 at b10306: only a CPU asset (the CUDA arm64 asset starts at b10345).
    let (code, out, err) = run(&[
        "prebuilt",
        "--targets",
        "sm_86",
        "--os",
        "windows",
        "--cpu",
        "arm64",
        "--llama-build",
        "10306",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("no asset fits"), "{out}");
    let cmd = out
        .lines()
        .find_map(|l| l.strip_prefix("build instead: "))
        .unwrap_or_else(|| panic!("no build-instead line:\n{out}"));
    assert_eq!(
        cmd,
        "gpuprobe cmake-flags --targets sm_86 --llama-build 10306 --os windows"
    );
    let words: Vec<&str> = cmd.split(' ').skip(1).collect();
    let (code, flags, err) = run(&words);
    assert_eq!(code, 0, "{flags}{err}");
    assert!(flags.contains("CMAKE_CUDA_ARCHITECTURES"), "{flags}");

    // From a report: the command names the report.
    let (code, out, _) = run(&[
        "prebuilt",
        "--from",
        &h200(),
        "--os",
        "macos",
        "--cpu",
        "arm64",
    ]);
    assert_eq!(code, 1);
    let cmd = out
        .lines()
        .find_map(|l| l.strip_prefix("build instead: "))
        .unwrap();
    assert!(cmd.starts_with("gpuprobe cmake-flags --from "), "{cmd}");
    let words: Vec<&str> = cmd.split(' ').skip(1).collect();
    let (code, flags, err) = run(&words);
    assert_eq!(code, 0, "{flags}{err}");
}

#[test]
fn bad_input_is_named_with_exit_2() {
    let (code, _, err) = run(&["prebuilt", "--targets", "sm_86", "--driver", "five-fifty"]);
    assert_eq!(code, 2);
    assert!(err.contains("--driver"), "{err}");
    let (code, _, err) = run(&["prebuilt", "--targets", "sm_86", "--llama-build", "1000"]);
    assert_eq!(code, 2);
    assert!(err.contains("starts at build"), "{err}");
    let (code, _, err) = run(&["prebuilt", "--targets", "gfx9999x"]);
    assert_eq!(code, 2, "{err}");
}
