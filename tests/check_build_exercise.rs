//! `gpuprobe check-build --exercise` with FAKE test-backend-ops programs (failure injection: they
//! print test-backend-ops' output format for the device named by `-b`, then pass, fail, hang or
//! segfault; they measure nothing). The pass path against the REAL program is in
//! tests/check_build_real.rs. The JSON is checked against the exercise interface.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use gpuprobe::check_build::exercise::{Exercise, Outcome};
use serde_json::Value;

fn gp() -> Command {
    let mut c = common::gpuprobe();
    // No host kernel log in these tests unless a test provides a fake one.
    c.env("GPUPROBE_DMESG", "/nonexistent-dmesg");
    c
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// The start of test-backend-ops' output for `$dev` (the `-b` argument), as build 11434 prints
/// it: the backend's init lines, the device header, then per-case lines.
const HEAD: &str = r#"
dev=""; while [ $# -gt 0 ]; do [ "$1" = "-b" ] && dev=$2; shift; done
echo "ggml_cuda_init: found 1 CUDA devices (Total VRAM: 143155 MiB):"
echo "  Device 0: NVIDIA H200, compute capability 9.0, VMM: $VMM, VRAM: 143155 MiB"
echo "Testing 2 devices"
echo
echo "Backend 1/2: CUDA0"
if [ "$dev" != CUDA0 ]; then echo "  Skipping"; echo "Backend 2/2: CPU"; echo "  Skipping"; echo "2/2 backends passed"; exit 0; fi
echo "  Device description: NVIDIA H200"
echo "  Device memory: 143155 MB (142629 MB free)"
echo
printf '  MUL_MAT(type_a=q4_0,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1): \033[1;32mOK\033[0m\n'
printf '  FLASH_ATTN_EXT(hsk=128,hsv=128,nh=8,nr23=[4,1],kv=1024,nb=32,mask=1,sinks=0,max_bias=0.000000,logit_softcap=0.000000,prec=f32,type_K=q8_0,type_V=q8_0,permute=[0,1,2,3],kv_view=0,v_is_view_of_k=0,n_kv_max=0): \033[1;32mOK\033[0m\n'
"#;

const PASS_TAIL: &str = r#"
echo "  2/2 tests passed"
printf '  Backend CUDA0: \033[1;32mOK\033[0m\n'
echo "Backend 2/2: CPU"
echo "  Skipping"
echo "2/2 backends passed"
printf '\033[1;32mOK\033[0m\n'
"#;

fn build_dir(tbo_body: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("bin")).unwrap();
    script(&d.path().join("bin"), "test-backend-ops", tbo_body);
    d
}

fn run(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> (std::process::Output, Value) {
    let mut c = gp();
    c.args(["check-build", "--exercise", "--json", "--build-dir"])
        .arg(dir)
        .args(["--device", "CUDA0"])
        .args(extra)
        .timeout(Duration::from_secs(60));
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    meets_the_published_schema(&v);
    (out, v)
}

/// Every document these runs write (pass, fail, hang, crash, not run) validates against
/// schemas/gpuprobe.exercise.v1.schema.json.
fn meets_the_published_schema(doc: &Value) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schemas/gpuprobe.exercise.v1.schema.json"
    );
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{doc:#}\n{}", errors.join("\n"));
}

#[test]
fn a_passing_run_is_workload_evidence_in_the_interface_shape() {
    let d = build_dir(&format!("{HEAD}{PASS_TAIL}"));
    let (out, v) = run(d.path(), &["--llama-build", "11434"], &[("VMM", "yes")]);
    assert_eq!(out.status.code(), Some(0), "{v}");
    // Exactly the fields of the interface, with their types.
    let keys = |o: &Value| -> Vec<String> {
        let mut k: Vec<String> = o.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(
        keys(&v),
        [
            "binary",
            "devices",
            "gpuprobe_version",
            "host",
            "runtime_version",
            "schema"
        ]
    );
    assert_eq!(v["schema"], "gpuprobe.exercise/v1");
    assert_eq!(keys(&v["host"]), ["kernel", "os"]);
    assert_eq!(keys(&v["binary"]), ["backend", "build", "path", "vmm"]);
    assert_eq!(v["binary"]["backend"], "cuda");
    assert_eq!(v["binary"]["build"], 11434);
    assert_eq!(v["binary"]["vmm"], true, "the device line says VMM: yes");
    assert!(
        v["binary"]["path"]
            .as_str()
            .unwrap()
            .ends_with("bin/test-backend-ops")
    );
    let dev = &v["devices"][0];
    assert_eq!(
        keys(dev),
        [
            "arch",
            "elapsed_ms",
            "failed_ops",
            "index",
            "kernel_faults",
            "last_op",
            "name",
            "ops",
            "outcome",
            "reason",
            "signal"
        ]
    );
    assert_eq!(dev["outcome"], "pass");
    assert_eq!(dev["index"], 0);
    assert_eq!(dev["name"], "NVIDIA H200");
    assert_eq!(dev["arch"], "sm_90", "from the run's own device line");
    assert_eq!(dev["ops"], serde_json::json!(["MUL_MAT", "FLASH_ATTN_EXT"]));
    assert!(dev["elapsed_ms"].is_f64());
    assert!(dev["reason"].as_str().unwrap().contains("2/2 tests passed"));
    // The document parses with the exercise type (what `cmake-flags --from` and `quirks record
    // --from` read).
    let ex = Exercise::from_json(&String::from_utf8_lossy(&out.stdout), "stdout").unwrap();
    assert_eq!(ex.devices[0].outcome, Outcome::Pass);
}

#[test]
fn failing_ops_are_listed() {
    let body = format!(
        r#"{HEAD}
printf '  MUL_MAT(type_a=q6_K,type_b=f32,m=16,n=9,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1): [MUL_MAT] NMSE = 0.5 > 0.0005 \033[1;31mFAIL\033[0m\n'
echo "  2/3 tests passed"
printf '  Backend CUDA0: \033[1;31mFAIL\033[0m\n'
echo "Failing tests:"
echo "  MUL_MAT(type_a=q6_K,type_b=f32,m=16,n=9,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)"
exit 1"#
    );
    let d = build_dir(&body);
    let (out, v) = run(d.path(), &[], &[("VMM", "yes")]);
    assert_eq!(out.status.code(), Some(1));
    let dev = &v["devices"][0];
    assert_eq!(dev["outcome"], "fail");
    assert_eq!(
        dev["failed_ops"],
        serde_json::json!([
            "MUL_MAT(type_a=q6_K,type_b=f32,m=16,n=9,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)"
        ])
    );
    assert!(
        dev["reason"]
            .as_str()
            .unwrap()
            .contains("1 of 3 tests failed")
    );
}

/// Seen on an H200 (legacy-pool build of 11434): test-backend-ops exited 1 and printed `FAIL`
/// last, but no op line ended in FAIL. A message printed before the result shares the op's
/// line, and the summary count is the one test-backend-ops itself keeps: both must count.
#[test]
fn failures_without_a_clean_op_line_are_still_counted() {
    let body = format!(
        r#"{HEAD}
printf '  MUL_MAT(type_a=q4_0,type_b=f32,m=16,n=1,k=256): \033[1;32mOK\033[0m\n'
printf 'failed to allocate tensors [CUDA0]   FLASH_ATTN_EXT(hsk=128,hsv=128,type_K=q8_0): \033[1;31mFAIL\033[0m\n'
echo "  3/5 tests passed"
printf '  Backend CUDA0: \033[1;31mFAIL\033[0m\n'
echo "0/1 backends passed"
printf '\033[1;31mFAIL\033[0m\n'
exit 1"#
    );
    let d = build_dir(&body);
    let (out, v) = run(d.path(), &[], &[("VMM", "no")]);
    assert_eq!(out.status.code(), Some(1));
    let dev = &v["devices"][0];
    assert_eq!(dev["outcome"], "fail");
    let failed: Vec<&str> = dev["failed_ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert_eq!(failed[0], "FLASH_ATTN_EXT(hsk=128,hsv=128,type_K=q8_0)");
    assert!(failed[1].starts_with("1 more failed test"), "{failed:?}");
    let reason = dev["reason"].as_str().unwrap();
    assert!(reason.contains("2 of 5 tests failed"), "{reason}");
    assert!(reason.contains("FLASH_ATTN_EXT(hsk=128"), "{reason}");
}

#[test]
fn a_hang_is_killed_at_the_timeout_with_its_process_group() {
    let pidfile = tempfile::NamedTempFile::new().unwrap();
    let body = format!(
        "{HEAD}\n(sleep 300; echo never) & echo $! > {}\nwait",
        pidfile.path().display()
    );
    let d = build_dir(&body);
    let started = Instant::now();
    let (out, v) = run(d.path(), &["--exercise-timeout", "2"], &[("VMM", "yes")]);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "took {took:?}");
    assert_eq!(out.status.code(), Some(1));
    let dev = &v["devices"][0];
    assert_eq!(dev["outcome"], "hang");
    assert!(
        dev["last_op"]
            .as_str()
            .unwrap()
            .starts_with("FLASH_ATTN_EXT(hsk=128"),
        "{dev}"
    );
    assert!(dev["elapsed_ms"].as_f64().unwrap() >= 2000.0);
    // The background child of the hung program died with it (the whole group is killed).
    let pid: u32 = std::fs::read_to_string(pidfile.path())
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let alive =
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
    assert!(!alive, "process {pid} of the hung run is still alive");
    let human = gp()
        .args([
            "check-build",
            "--exercise",
            "--exercise-timeout",
            "2",
            "--build-dir",
        ])
        .arg(d.path())
        .args(["--device", "CUDA0"])
        .env("VMM", "yes")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("hang in "), "{text}");
    assert!(text.contains("last op printed: FLASH_ATTN_EXT("), "{text}");
    assert!(
        text.contains("verdict: problems: NVIDIA H200 hang (exit 1)"),
        "{text}"
    );
    assert!(
        !text.contains('\x1b'),
        "no escape sequence reaches the terminal: {text}"
    );
}

#[test]
fn a_segfault_is_a_crash_with_its_signal() {
    let d = build_dir(&format!("{HEAD}\nkill -SEGV $$"));
    let (out, v) = run(d.path(), &[], &[("VMM", "yes")]);
    assert_eq!(out.status.code(), Some(1));
    let dev = &v["devices"][0];
    assert_eq!(dev["outcome"], "crash");
    assert_eq!(dev["signal"], 11);
    assert!(dev["reason"].as_str().unwrap().contains("SIGSEGV"), "{dev}");
    assert!(
        dev["last_op"]
            .as_str()
            .unwrap()
            .starts_with("FLASH_ATTN_EXT")
    );
}

#[test]
fn a_device_the_build_does_not_have_is_not_run() {
    let d = build_dir(&format!("{HEAD}{PASS_TAIL}"));
    let out = gp()
        .args(["check-build", "--exercise", "--json", "--build-dir"])
        .arg(d.path())
        .args(["--device", "ROCm0"])
        .env("VMM", "yes")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["devices"][0]["outcome"], "not-run");
    assert!(
        v["devices"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("has no device ROCm0 (it lists CUDA0)"),
        "{v}"
    );
    assert_eq!(v["binary"]["backend"], "hip");
}

#[test]
fn gpu_faults_logged_by_the_kernel_during_the_run_fail_it() {
    // A fake `dmesg`: the baseline first, then the same with an amdgpu fault block appended (the
    // block's lines as ROCm/amdgpu#168 quotes them).
    let d = build_dir(&format!("{HEAD}{PASS_TAIL}"));
    let state = d.path().join("dmesg-calls");
    let fake = script(
        d.path(),
        "dmesg",
        &format!(
            r#"n=$(cat {s} 2>/dev/null || echo 0); echo $((n+1)) > {s}
echo "[    1.000000] Linux version 6.8.0"
echo "[    2.000000] amdgpu 0000:2b:00.0: amdgpu: SMU is initialized successfully!"
[ "$n" -ge 1 ] || exit 0
echo "[  283.724153] amdgpu 0000:2b:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:7 pasid:32771, for process test-backend-ops pid 5044 thread test-backend-ops pid 5072)"
echo "[  283.724157] amdgpu 0000:2b:00.0: amdgpu:   in page starting at address 0x0000800505606000 from client 0x1b (UTCL2)"
echo "[  283.724128] amdgpu 0000:2b:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00701031"
printf '[  283.724131] amdgpu 0000:2b:00.0: amdgpu: \t Faulty UTCL2 client ID: TCP (0x8)\n'"#,
            s = state.display()
        ),
    );
    let (out, v) = run(
        d.path(),
        &[],
        &[("VMM", "yes"), ("GPUPROBE_DMESG", fake.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(1));
    let dev = &v["devices"][0];
    assert_eq!(
        dev["outcome"], "fail",
        "tests passed, but the GPU faulted: {dev}"
    );
    let faults: Vec<&str> = dev["kernel_faults"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(faults[0].contains("[gfxhub] page fault"), "{faults:?}");
    assert!(
        faults
            .iter()
            .any(|f| f.contains("permission fault") && f.contains("TCP (0x8)")),
        "{faults:?}"
    );
    assert!(
        !faults.iter().any(|f| f.contains("SMU is initialized")),
        "old lines are not new"
    );
}

#[test]
fn an_unreadable_kernel_log_is_said_not_hidden() {
    let d = build_dir(&format!("{HEAD}{PASS_TAIL}"));
    let denied = script(
        d.path(),
        "dmesg",
        "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1",
    );
    let (out, v) = run(
        d.path(),
        &[],
        &[("VMM", "yes"), ("GPUPROBE_DMESG", denied.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(0));
    let reason = v["devices"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("kernel log not readable") && reason.contains("Operation not permitted"),
        "{reason}"
    );
}

#[test]
fn the_legacy_pool_library_says_vmm_false() {
    // `VMM: no` alone cannot tell compiled-out from unsupported; the library's NO_VMM feature can.
    let d = build_dir(&format!("{HEAD}{PASS_TAIL}"));
    std::fs::write(
        d.path().join("bin").join("libggml-cuda.so"),
        b"\x7fELF....\0ARCHS\0NO_VMM\0USE_GRAPHS\0",
    )
    .unwrap();
    let (_, v) = run(d.path(), &[], &[("VMM", "no")]);
    assert_eq!(v["binary"]["vmm"], false);
    std::fs::write(
        d.path().join("bin").join("libggml-cuda.so"),
        b"\x7fELF....\0ARCHS\0GGML_CUDA_NO_VMM\0USE_GRAPHS\0",
    )
    .unwrap();
    let (_, v) = run(d.path(), &[], &[("VMM", "no")]);
    assert_eq!(
        v["binary"]["vmm"], true,
        "a longer name ending in NO_VMM is not the feature"
    );
}

#[test]
fn devices_come_from_a_saved_report() {
    let d = build_dir(&format!("{HEAD}{PASS_TAIL}"));
    let report = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nvidia-h200-driver580-e2e/detect.json");
    let out = gp()
        .args(["check-build", "--exercise", "--json", "--build-dir"])
        .arg(d.path())
        .arg("--from")
        .arg(&report)
        .env("VMM", "yes")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["devices"].as_array().unwrap().len(), 1);
    assert_eq!(v["devices"][0]["arch"], "sm_90");
    assert_eq!(v["runtime_version"], "13.0", "{v}");
}

#[test]
fn output_file_is_written_and_quirks_record_takes_a_hang() {
    let d = build_dir(&format!("{HEAD}\nsleep 300"));
    let doc = d.path().join("exercise.json");
    let out = gp()
        .args([
            "check-build",
            "--exercise",
            "--exercise-timeout",
            "1",
            "--build-dir",
        ])
        .arg(d.path())
        .args(["--device", "CUDA0", "--output"])
        .arg(&doc)
        .env("VMM", "yes")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let file = d.path().join("local.toml");
    let rec = gp()
        .args(["quirks", "record", "--from"])
        .arg(&doc)
        .arg("--file")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        rec.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&rec.stderr)
    );
    let toml = std::fs::read_to_string(&file).unwrap();
    assert!(
        toml.contains("id = \"LOCAL-sm_90-exercise-hang\""),
        "{toml}"
    );
    assert!(toml.contains("vmm = \"deny\""), "{toml}");
    assert!(toml.contains("archs = [\"sm_90\"]"), "{toml}");
    // The record takes part in plans made here: the resolver now keeps the legacy pool.
    let plan = gp()
        .env("GPUPROBE_QUIRKS_DIR", d.path())
        .args(["cmake-flags", "--targets", "sm_90", "--format", "args"])
        .output()
        .unwrap();
    let args = String::from_utf8_lossy(&plan.stdout);
    assert!(args.contains("-DGGML_CUDA_NO_VMM=ON"), "{args}");
}

#[test]
fn a_legacy_pool_failure_is_not_recorded_against_vmm() {
    let d = build_dir(&format!("{HEAD}\nkill -SEGV $$"));
    std::fs::write(d.path().join("bin").join("libggml-cuda.so"), b"\0NO_VMM\0").unwrap();
    let doc = d.path().join("exercise.json");
    gp().args(["check-build", "--exercise", "--build-dir"])
        .arg(d.path())
        .args(["--device", "CUDA0", "--output"])
        .arg(&doc)
        .env("VMM", "no")
        .output()
        .unwrap();
    let file = d.path().join("local.toml");
    let rec = gp()
        .args(["quirks", "record", "--from"])
        .arg(&doc)
        .arg("--file")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(rec.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&rec.stdout).contains("nothing to record"));
    assert!(String::from_utf8_lossy(&rec.stderr).contains("not evidence against VMM"));
    assert!(!file.exists());
}

#[test]
fn bad_exercise_inputs_are_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let out = gp()
        .args(["check-build", "--exercise", "--build-dir"])
        .arg(d.path())
        .args(["--device", "CUDA0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no test-backend-ops there"), "{err}");
    assert!(err.contains("-DLLAMA_BUILD_TESTS=ON"), "{err}");
    let out = gp()
        .args([
            "check-build",
            "--exercise",
            "--exercise-timeout",
            "-1",
            "--build-dir",
        ])
        .arg(d.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_resolver_reads_the_exercise_document() {
    // What `cmake-flags --from` ingests (src/evidence.rs) reads what --exercise writes.
    let d = build_dir(&format!("{HEAD}{PASS_TAIL}"));
    let doc = d.path().join("exercise.json");
    let out = gp()
        .args(["check-build", "--exercise", "--build-dir"])
        .arg(d.path())
        .args(["--device", "CUDA0", "--llama-build", "11434", "--output"])
        .arg(&doc)
        .env("VMM", "yes")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    match gpuprobe::evidence::load_document(&doc).unwrap() {
        gpuprobe::evidence::Document::Exercise(e) => {
            assert_eq!(e.binary.vmm, Some(true));
            assert_eq!(e.binary.build, Some(11434));
            assert_eq!(e.devices[0].outcome.as_str(), "pass");
            assert_eq!(e.devices[0].arch, "sm_90");
        }
        other => panic!("read as {other:?}"),
    }
    let plan = gp()
        .args([
            "cmake-flags",
            "--targets",
            "sm_90",
            "--format",
            "args",
            "--from",
        ])
        .arg(&doc)
        .output()
        .unwrap();
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    assert!(String::from_utf8_lossy(&plan.stdout).contains("-DCMAKE_CUDA_ARCHITECTURES=90"));
}
