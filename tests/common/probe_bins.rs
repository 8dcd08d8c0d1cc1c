//! The probe programs scripts/test.sh builds, for the tests that run them.

use std::path::{Path, PathBuf};

/// Probe programs built by scripts/test.sh (hipcc and nvcc), or named by GPUPROBE_PROBE_BIN.
pub fn built_probes() -> Vec<PathBuf> {
    if let Some(p) = std::env::var_os("GPUPROBE_PROBE_BIN") {
        return vec![PathBuf::from(p)];
    }
    let cache = std::env::var_os("GPUPROBE_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/gpuprobe-dev")))
        .unwrap_or_default();
    ["gpuprobe-probe-hip", "gpuprobe-probe-cuda"]
        .iter()
        .map(|n| cache.join("probe").join(n))
        .filter(|p| p.is_file())
        .collect()
}
