//! What `check-build --exercise inference` measured on one H200 (driver 580.159.04) with a VMM
//! build and a `GGML_CUDA_NO_VMM=ON` build of llama.cpp 11434 (scripts/gpu-inference.sh, captured
//! in tests/fixtures/nvidia-h200-driver580-inference/): every configuration agrees with the CPU
//! within the thresholds in both pools, the two pools compute the same numbers, and the memory
//! runs, too short for the 250 ms sampler, are no evidence of growth.

use std::path::Path;

use gpuprobe::inference::memory::{Sample, summarise};
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
        let first_end = points[0].t_ms;
        let s = summarise(&points, first_end).expect("samples");
        assert!(!s.keeps_growing, "{pool}: {s:?}");
    }
    // Both pools peaked alike (1092 and 1094 MiB): nothing here tells them apart.
    let peak = |p: &str| doc(p)["memory"]["summary"]["peak_mib"].as_f64().unwrap();
    assert!((peak("vmm") - peak("legacy")).abs() < 0.05 * peak("vmm"));
}
