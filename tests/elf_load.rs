//! `check-build --binary` reads the program's ELF headers before running it and names what this
//! machine lacks. Every binary here is compiled by the test with the system C compiler, with real
//! sonames and symbol versions; nothing is a fake file with an ELF-looking name.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command as Std;

use serde_json::Value;
use tempfile::TempDir;

fn cc() -> Option<PathBuf> {
    which::which("cc").or_else(|_| which::which("gcc")).ok()
}

/// Compiles with `cc args...` in `dir`, failing the test with the compiler's output.
fn compile(dir: &Path, args: &[&str]) {
    let out = Std::new(cc().unwrap())
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A shared library `soname` whose only symbol is `sym` (optionally in version node `node`).
fn stub_library(dir: &Path, soname: &str, sym: &str, node: Option<&str>) {
    write(dir, "stub.c", &format!("int {sym}(void) {{ return 0; }}\n"));
    let mut args = vec![
        "-shared".to_string(),
        "-fPIC".into(),
        "-nostdlib".into(),
        format!("-Wl,-soname,{soname}"),
    ];
    if let Some(n) = node {
        write(
            dir,
            "stub.map",
            &format!("{n} {{ global: {sym}; local: *; }};\n"),
        );
        args.push("-Wl,--version-script=stub.map".into());
    }
    args.extend(["-o".into(), soname.into(), "stub.c".into()]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    compile(dir, &a);
}

/// A program that answers `--version` and `--list-devices` like a CPU llama.cpp build and
/// calls `sym` (from a library it links) only when given `--call`.
const LLAMA_LIKE: &str = r#"
#include <stdio.h>
#include <string.h>
extern int SYM(void);
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--call") == 0) return SYM();
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        fprintf(stderr, "version: 11434 (0123abc)\nbuilt with cc for x86_64-linux-gnu\n");
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--list-devices") == 0) {
        printf("Available devices:\n");
        return 0;
    }
    return 0;
}
"#;

fn check_build(bin: &Path, extra: &[&str]) -> (i32, Value, String) {
    let out = common::gpuprobe()
        .args(["check-build", "--json"])
        .args(extra)
        .arg("--binary")
        .arg(bin)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        out.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn findings<'a>(v: &'a Value, id: &str) -> Vec<&'a Value> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == id)
        .collect()
}

fn have_cc() -> bool {
    if cc().is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have a C compiler"
        );
        eprintln!("skipping: no C compiler");
        return false;
    }
    true
}

#[test]
fn a_missing_library_is_named_before_the_program_is_run() {
    if !have_cc() {
        return;
    }
    let t = TempDir::new().unwrap();
    let stub = t.path().join("stub");
    std::fs::create_dir_all(&stub).unwrap();
    stub_library(&stub, "libhipblas.so.3", "hipblasCreate", None);
    write(
        t.path(),
        "main.c",
        &LLAMA_LIKE.replace("SYM", "hipblasCreate"),
    );
    compile(
        t.path(),
        &["-o", "llama-cli", "main.c", "stub/libhipblas.so.3"],
    );
    std::fs::remove_dir_all(&stub).unwrap();
    let bin = t.path().join("llama-cli");
    // The loader agrees: the program cannot start here.
    let run = Std::new(&bin).arg("--version").output().unwrap();
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("libhipblas.so.3"),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );

    let (code, v, stderr) = check_build(&bin, &["--no-probe"]);
    assert_eq!(code, 1, "{v:#}");
    let f = findings(&v, "missing-library");
    assert_eq!(f.len(), 1, "{v:#}");
    assert_eq!(f[0]["severity"], "error");
    assert_eq!(f[0]["title"], "this machine lacks libhipblas.so.3");
    assert!(
        f[0]["reason"]
            .as_str()
            .unwrap()
            .contains("the program cannot start")
    );
    assert!(
        f[0]["fix"].as_str().unwrap().contains("ROCm 7.x"),
        "hipBLAS 3 is ROCm 7: {:#}",
        f[0]
    );
    assert_eq!(
        v["input"]["runs"],
        serde_json::json!([]),
        "a program that cannot load is not run"
    );
    assert!(stderr.contains("cannot start on this machine"), "{stderr}");
}

#[test]
fn a_missing_glibc_version_is_named_with_what_this_machine_has() {
    if !have_cc() {
        return;
    }
    let t = TempDir::new().unwrap();
    let stub = t.path().join("stub");
    std::fs::create_dir_all(&stub).unwrap();
    // A libc.so.6 from the future: its symbol carries GLIBC_2.99, which no glibc defines. The
    // program links only that (no C runtime: the linker would drop a second libc.so.6), so its
    // only needs are libc.so.6 and GLIBC_2.99 from it; the loader refuses it before any of its code runs.
    stub_library(&stub, "libc.so.6", "gpuprobe_future", Some("GLIBC_2.99"));
    write(
        t.path(),
        "start.c",
        "extern int gpuprobe_future(void);\nvoid _start(void) { gpuprobe_future(); __builtin_trap(); }\n",
    );
    compile(
        t.path(),
        &[
            "-nostdlib",
            "-fno-stack-protector",
            "-o",
            "llama-cli",
            "start.c",
            "stub/libc.so.6",
        ],
    );
    std::fs::remove_dir_all(&stub).unwrap();
    let bin = t.path().join("llama-cli");
    let run = Std::new(&bin).arg("--version").output().unwrap();
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("GLIBC_2.99"),
        "the loader refuses it too: {}",
        String::from_utf8_lossy(&run.stderr)
    );

    let (code, v, _) = check_build(&bin, &["--no-probe"]);
    assert_eq!(code, 1, "{v:#}");
    let f = findings(&v, "missing-symbol-version");
    assert_eq!(f.len(), 1, "{v:#}");
    assert_eq!(f[0]["title"], "this machine's libc.so.6 lacks GLIBC_2.99");
    let reason = f[0]["reason"].as_str().unwrap();
    assert!(reason.contains("defines only up to GLIBC_2."), "{reason}");
    assert!(
        f[0]["fix"].as_str().unwrap().contains("newer Linux"),
        "{:#}",
        f[0]
    );
    assert!(findings(&v, "missing-library").is_empty(), "{v:#}");
}

#[test]
fn a_backend_beside_the_program_that_cannot_load_is_named_and_its_cuda_checked_against_the_driver()
{
    if !have_cc() {
        return;
    }
    let t = TempDir::new().unwrap();
    let stub = t.path().join("stub");
    std::fs::create_dir_all(&stub).unwrap();
    stub_library(&stub, "libcudart.so.13", "cudaGetDeviceCount", None);
    // The program itself loads; the CUDA backend beside it (loaded with dlopen by llama.cpp's
    // GGML_BACKEND_DL builds) needs the CUDA 13 runtime, which is not here.
    write(
        t.path(),
        "main.c",
        &(LLAMA_LIKE.replace("SYM", "gpuprobe_local") + "int gpuprobe_local(void) { return 0; }\n"),
    );
    compile(t.path(), &["-o", "llama-cli", "main.c"]);
    write(
        t.path(),
        "backend.c",
        "extern int cudaGetDeviceCount(void);\nint ggml_backend_init(void) { return cudaGetDeviceCount(); }\n",
    );
    compile(
        t.path(),
        &[
            "-shared",
            "-fPIC",
            "-o",
            "libggml-cuda.so",
            "backend.c",
            "stub/libcudart.so.13",
        ],
    );
    std::fs::remove_dir_all(&stub).unwrap();
    let bin = t.path().join("llama-cli");

    // A machine whose driver supports CUDA 12.4.
    let report = serde_json::json!({
        "schema": "gpuprobe.report/v1", "gpuprobe_version": "0.1.0",
        "host": {"os": "linux", "kernel": null},
        "backends": [{"backend": "cuda", "status": "ok", "detail": null,
                      "driver_version": "550.54.14", "runtime_version": "12.4", "hint": null}],
        "devices": []
    });
    let rp = write(t.path(), "report.json", &report.to_string());
    let (code, v, _) = check_build(&bin, &["--from", rp.to_str().unwrap()]);
    assert_eq!(code, 1, "{v:#}");
    let f = findings(&v, "missing-library");
    assert_eq!(f.len(), 1, "{v:#}");
    assert_eq!(f[0]["title"], "this machine lacks libcudart.so.13");
    assert!(
        f[0]["reason"]
            .as_str()
            .unwrap()
            .contains("the backend libggml-cuda.so will not load"),
        "{:#}",
        f[0]
    );
    let t13 = findings(&v, "toolkit-newer-than-driver");
    assert_eq!(t13.len(), 1, "{v:#}");
    assert_eq!(t13[0]["severity"], "error");
    let reason = t13[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("libcudart.so.13")
            && reason.contains("driver 550.54.14, which supports CUDA 12.4"),
        "{reason}"
    );
    assert!(
        t13[0]["fix"].as_str().unwrap().contains("branch 580"),
        "{:#}",
        t13[0]
    );
    // The program itself was run (it loads) and read.
    assert_eq!(v["build"]["number"]["value"], 11434, "{v:#}");
    assert_eq!(findings(&v, "loads-here").len(), 1, "{v:#}");
}

#[test]
fn the_real_cpu_llama_build_loads_here() {
    let Some(bin) = std::env::var_os("GPUPROBE_LLAMA_CPU_BIN").filter(|p| Path::new(p).is_file())
    else {
        assert!(
            std::env::var_os("CI").is_none(),
            "GPUPROBE_LLAMA_CPU_BIN must point at the CPU build in CI"
        );
        eprintln!("skipped: GPUPROBE_LLAMA_CPU_BIN not set (scripts/test.sh builds it)");
        return;
    };
    let (code, v, _) = check_build(Path::new(&bin), &["--no-probe", "--llama-build", "11434"]);
    assert_eq!(code, 0, "{v:#}");
    let f = findings(&v, "loads-here");
    assert_eq!(f.len(), 1, "{v:#}");
    assert!(
        f[0]["reason"]
            .as_str()
            .unwrap()
            .contains("the newest glibc version it needs is GLIBC_2."),
        "{:#}",
        f[0]
    );
    assert!(findings(&v, "missing-library").is_empty());
    assert!(findings(&v, "missing-symbol-version").is_empty());
}
