//! `check-build --exercise inference` against the REAL CPU llama.cpp build of the 11434 sdist
//! (scripts/build-llama-cpu.sh; scripts/test.sh sets GPUPROBE_LLAMA_CPU_BIN to a program of it).
//!
//! A CPU-only build has no GPU device, so the test gives it three fake ones through a wrapper
//! `llama-perplexity` that runs the real program: FAKE0 runs it unchanged (it must pass: the CPU
//! against itself), FAKE1 runs it with another RoPE base (a real run whose logits differ: it must
//! fail by gpuprobe's own thresholds), FAKE2 stops making progress (it must be killed at the
//! timeout and reported as a hang with its last line). The first `-t 1` run loses its summary as
//! llama.cpp's logger can at exit (it must be run again, not reported as an error).

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn cpu_build() -> Option<PathBuf> {
    match std::env::var_os("GPUPROBE_LLAMA_CPU_BIN").filter(|p| Path::new(p).is_file()) {
        Some(bin) => Some(Path::new(&bin).parent()?.to_path_buf()),
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "GPUPROBE_LLAMA_CPU_BIN must point at the CPU build in CI"
            );
            eprintln!("skipped: GPUPROBE_LLAMA_CPU_BIN not set (scripts/test.sh builds it)");
            None
        }
    }
}

/// A build folder whose llama-perplexity maps the fake devices onto the real CPU program.
fn fake_build(real: &Path, dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let script = format!(
        r#"#!/bin/sh
real='{}'
mark='{}'
mode=cpu
skip=0
prev=
for a in "$@"; do
    shift
    if [ "$prev" = -t ] && [ "$a" = 1 ] && [ ! -e "$mark" ]; then mode=lose-summary; fi
    prev=$a
    if [ "$skip" = 1 ]; then
        skip=0
        case "$a" in
            FAKE1) mode=perturb ;;
            FAKE2) mode=hang ;;
        esac
        continue
    fi
    if [ "$a" = -dev ]; then skip=1; continue; fi
    set -- "$@" "$a"
done
case "$mode" in
    perturb) exec "$real" "$@" --rope-freq-base 500 --override-kv llama.attention.layer_norm_rms_epsilon=float:1.0 ;;
    hang) echo "load_tensors: loading model tensors"; exec sleep 600 ;;
    lose-summary)
        # What llama.cpp's leaked logger does at exit on a busy machine: the run is sound, the
        # lines from the summary on never reach the output, and it exits 0.
        : > "$mark"
        "$real" "$@" 2>&1 | sed '/statistics ======/,$d'
        exit 0 ;;
    *) exec "$real" "$@" ;;
esac
"#,
        real.join("llama-perplexity").display(),
        dir.join("summary-lost-once").display()
    );
    let p = bin.join("llama-perplexity");
    std::fs::write(&p, script).expect("wrapper");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    dir.to_path_buf()
}

#[test]
fn the_cpu_passes_a_perturbed_run_fails_and_a_hang_is_killed() {
    let Some(real) = cpu_build() else { return };
    assert!(
        real.join("llama-perplexity").is_file(),
        "the CPU build lacks llama-perplexity: scripts/build-llama-cpu.sh builds it"
    );
    let tmp = tempfile::tempdir().expect("temp dir");
    let build = fake_build(&real, &tmp.path().join("build"));
    let out = tmp.path().join("inference.json");
    let assert = Command::cargo_bin("gpuprobe")
        .expect("binary")
        .args(["check-build", "--exercise", "inference", "--build-dir"])
        .arg(&build)
        .args([
            "--device",
            "FAKE0",
            "--device",
            "FAKE1",
            "--device",
            "FAKE2",
            "--configs",
            "base,kv-q8_0",
            "--memory-context",
            "256",
            "--exercise-timeout",
            "20",
            "--model-mib",
            "4",
        ])
        .arg("--work-dir")
        .arg(tmp.path().join("work"))
        .arg("--output")
        .arg(&out)
        .timeout(std::time::Duration::from_secs(600))
        .assert()
        .code(1);
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    eprintln!("{stdout}");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("document")).expect("JSON");
    assert_eq!(doc["schema"], "gpuprobe.inference/v1");

    // The CPU against itself: KLD about 0, the same top token everywhere.
    let refs = doc["references"].as_array().expect("references");
    let noise: Vec<&serde_json::Value> = refs
        .iter()
        .filter(|r| {
            r["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("cpu-noise"))
        })
        .collect();
    assert_eq!(noise.len(), 2, "{refs:#?}");
    for n in &noise {
        assert_eq!(n["outcome"], "pass", "{n:#?}");
        assert!(
            n["divergence"]["mean_kld"].as_f64().expect("kld") < 1e-3,
            "{n:#?}"
        );
        assert!(
            n["divergence"]["same_top_percent"].as_f64().expect("top") > 99.0,
            "{n:#?}"
        );
    }
    // The wrapper lost the threads run's summary once, as llama.cpp's logger can at exit: it
    // ran again and passed, and says so.
    let threads = noise
        .iter()
        .find(|n| n["name"] == "cpu-noise threads")
        .expect("threads run");
    let why = threads["reason"].as_str().unwrap_or_default();
    assert!(why.starts_with("ran twice"), "{threads:#?}");
    assert!(why.contains("llama.cpp#22142"), "{threads:#?}");
    let t = &doc["thresholds"];
    assert!(t["max_mean_kld"].as_f64().expect("limit") >= 0.01);

    let configs = doc["configurations"].as_array().expect("configurations");
    let find = |name: &str| {
        configs
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {configs:#?}"))
    };
    let same = find("FAKE0 fa-off kv-f16");
    assert_eq!(same["outcome"], "pass", "{same:#?}");
    assert!(same["divergence"]["mean_kld"].as_f64().expect("kld") < 1e-3);
    assert!(
        same["divergence"]["same_top_percent"]
            .as_f64()
            .expect("top")
            > 99.0
    );
    let q8 = find("FAKE0 fa-on kv-q8_0");
    assert_eq!(q8["outcome"], "pass", "{q8:#?}");

    let perturbed = find("FAKE1 fa-off kv-f16");
    assert_eq!(perturbed["outcome"], "fail", "{perturbed:#?}");
    let kld = perturbed["divergence"]["mean_kld"].as_f64().expect("kld");
    assert!(
        kld > t["max_mean_kld"].as_f64().expect("limit"),
        "{perturbed:#?}"
    );

    let hung = find("FAKE2 fa-off kv-f16");
    assert_eq!(hung["outcome"], "hang", "{hung:#?}");
    assert!(
        hung["reason"]
            .as_str()
            .expect("reason")
            .contains("loading model tensors"),
        "{hung:#?}"
    );

    let findings = doc["findings"].as_array().expect("findings");
    assert!(
        findings.iter().any(|f| f
            .as_str()
            .is_some_and(|f| f.starts_with("FAKE1 fa-off kv-f16: fail"))),
        "{findings:#?}"
    );

    // The long run's memory was sampled (the CPU build's resident set).
    let mem = &doc["memory"];
    assert_eq!(mem["sampler"], "host rss");
    assert_eq!(mem["run"]["outcome"], "pass", "{mem:#?}");
    assert!(!mem["points"].as_array().expect("points").is_empty());
    assert!(stdout.contains("thresholds: mean KLD <="));
}

#[test]
fn the_synthetic_model_loads_and_a_user_model_is_checked_first() {
    let Some(real) = cpu_build() else { return };
    let tmp = tempfile::tempdir().expect("temp dir");
    let bad = tmp.path().join("bad.gguf");
    std::fs::write(&bad, b"not a model").expect("write");
    Command::cargo_bin("gpuprobe")
        .expect("binary")
        .args(["check-build", "--exercise", "inference", "--build-dir"])
        .arg(&real)
        .arg("--model")
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("not a usable GGUF model"));
}
