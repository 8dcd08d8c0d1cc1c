//! What `check-build --exercise inference` measured on one H200 (driver 580.159.04) with a VMM
//! build and a `GGML_CUDA_NO_VMM=ON` build of llama.cpp 11434 (scripts/gpu-inference.sh, captured
//! in tests/fixtures/nvidia-h200-driver580-inference/): every configuration agrees with the CPU
//! within the thresholds in both pools, the two pools compute the same numbers, and the memory
//! runs, too short for the 250 ms sampler, are no evidence of growth. And what it measured of the
//! legacy pool's hoarding (seed 000's mechanism): llama.cpp 9007 built both ways
//! (tests/fixtures/nvidia-h200-driver580-inference-9007/) against 11434's legacy pool over the same
//! 32k-token context.

use std::path::Path;

use gpuprobe::inference::memory::{Phases, Sample, summarise};
use serde_json::Value;

fn doc(pool: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nvidia-h200-driver580-inference")
        .join(format!("inference-{pool}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn divergences(d: &Value) -> Vec<(String, f64, f64)> {
    d["configurations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !c["divergence"].is_null())
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["divergence"]["mean_kld"].as_f64().unwrap(),
                c["divergence"]["same_top_percent"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn both_pools_pass_every_configuration_against_the_cpu() {
    for pool in ["vmm", "legacy"] {
        let d = doc(pool);
        assert_eq!(d["schema"], "gpuprobe.inference/v1");
        let max_kld = d["thresholds"]["max_mean_kld"].as_f64().unwrap();
        let min_top = d["thresholds"]["min_same_top_percent"].as_f64().unwrap();
        let runs = divergences(&d);
        // Each of FA off/on, KV q8_0 and q4_0, graphs off, MoE and MoE with CPU experts.
        assert!(runs.len() >= 7, "{pool}: {runs:?}");
        for (name, kld, top) in &runs {
            assert!(
                *kld <= max_kld && *top >= min_top,
                "{pool} {name}: {kld} {top}"
            );
        }
        for c in d["configurations"].as_array().unwrap() {
            let name = c["name"].as_str().unwrap();
            if !name.contains("memory") {
                assert_eq!(c["outcome"], "pass", "{pool} {name}");
            }
        }
    }
    // The pool changes where memory comes from, not the arithmetic.
    assert_eq!(divergences(&doc("vmm")), divergences(&doc("legacy")));
}

#[test]
fn a_memory_run_shorter_than_the_sampling_is_no_evidence_of_growth() {
    for pool in ["vmm", "legacy"] {
        let m = doc(pool)["memory"].clone();
        let points: Vec<Sample> = serde_json::from_value(m["points"].clone()).unwrap();
        assert!(points.len() < 6, "{pool}: the capture was a short run");
        let phases = Phases {
            compute_start_ms: None,
            first_pass_end_ms: points[0].t_ms,
            setup_bytes: None,
        };
        let s = summarise(&points, phases, None).expect("samples");
        assert!(!s.keeps_growing, "{pool}: {s:?}");
    }
    // Both pools peaked alike (1092 and 1094 MiB): nothing here tells them apart.
    let peak = |p: &str| doc(p)["memory"]["summary"]["peak_mib"].as_f64().unwrap();
    assert!((peak("vmm") - peak("legacy")).abs() < 0.05 * peak("vmm"));
}

fn fixture(dir: &str, file: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
        .join(file);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn summary(d: &Value) -> (f64, f64, f64, bool) {
    let s = &d["memory"]["summary"];
    (
        s["pool_growth_mib"].as_f64().unwrap(),
        s["fa_scratch_mib"].as_f64().unwrap(),
        s["before_compute_mib"].as_f64().unwrap(),
        s["hoards"].as_bool().unwrap(),
    )
}

#[test]
fn the_legacy_pool_before_9489_keeps_every_size_at_a_long_context_and_the_vmm_pool_does_not() {
    let dir = "nvidia-h200-driver580-inference-9007";
    let legacy = fixture(dir, "memory-legacy.json");
    let vmm = fixture(dir, "memory-vmm.json");
    for (d, vmm_in) in [(&legacy, false), (&vmm, true)] {
        assert_eq!(d["build"]["build"], 9007);
        assert_eq!(d["build"]["vmm"], vmm_in);
        assert_eq!(d["memory"]["context"], 32768);
        assert_eq!(d["build"]["devices"][0]["arch"], "sm_90");
    }
    let (l_growth, scratch, l_before, l_hoards) = summary(&legacy);
    let (v_growth, v_scratch, v_before, v_hoards) = summary(&vmm);
    // The same model and context: the same set-up and the same scratch.
    assert_eq!(scratch, v_scratch);
    assert_eq!(l_before, v_before);
    // The VMM pool takes about the scratch; the legacy pool over fourteen times it.
    assert!(v_growth < 1.2 * scratch + 64.0, "vmm took {v_growth} MiB");
    assert!(l_growth > 10.0 * scratch, "legacy took {l_growth} MiB");
    assert!(l_hoards && !v_hoards);
    assert_eq!(legacy["memory"]["run"]["outcome"], "fail");
    assert_eq!(vmm["memory"]["run"]["outcome"], "pass");
    // Neither grows after the first pass: the legacy pool reuses what it kept, so a test that
    // only looks for growth over time misses it.
    for d in [&legacy, &vmm] {
        assert_eq!(d["memory"]["summary"]["keeps_growing"], false);
    }
    let finding = legacy["findings"][0].as_str().unwrap();
    assert!(
        finding.contains("keeps every size it allocated"),
        "{finding}"
    );
}

#[test]
fn build_11434_legacy_pool_takes_no_more_than_the_scratch_at_the_same_context() {
    let d = fixture("nvidia-h200-driver580-inference", "memory-legacy-32k.json");
    assert_eq!(d["build"]["vmm"], false);
    assert_eq!(d["memory"]["context"], 32768);
    let (growth, scratch, _, hoards) = summary(&d);
    assert!(
        growth <= scratch,
        "took {growth} MiB, scratch {scratch} MiB"
    );
    assert!(!hoards);
    assert_eq!(d["memory"]["run"]["outcome"], "pass");
}

#[test]
fn the_9007_builds_compute_what_11434_computes_within_the_thresholds() {
    let dir = "nvidia-h200-driver580-inference-9007";
    for pool in ["vmm", "legacy"] {
        let d = fixture(dir, &format!("inference-{pool}.json"));
        let max_kld = d["thresholds"]["max_mean_kld"].as_f64().unwrap();
        for (name, kld, _) in divergences(&d) {
            assert!(kld <= max_kld, "9007 {pool} {name}: {kld}");
        }
    }
    assert_eq!(
        divergences(&fixture(dir, "inference-vmm.json")),
        divergences(&fixture(dir, "inference-legacy.json"))
    );
}
