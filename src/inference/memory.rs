//! A process's memory over time: the per-process accounting of the driver (NVIDIA:
//! `nvidia-smi --query-compute-apps`; AMD: the KFD's `/sys/class/kfd/kfd/proc/PID/vram_*`), or,
//! for a CPU-only run, the process's resident set. Samplers are values of a trait so tests give
//! their own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One reading.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Sample {
    /// Milliseconds since the run started.
    pub t_ms: u64,
    pub bytes: u64,
}

/// Reads how much memory process `pid` holds; `None` when it cannot tell (not yet on the GPU).
pub trait Sampler: Sync {
    fn sample(&self, pid: u32) -> Option<u64>;
    /// What it measures, for the document (`nvidia-smi used_memory`, `kfd vram`, `host rss`).
    fn name(&self) -> String;
}

/// `nvidia-smi --query-compute-apps=pid,used_memory`, each call under a timeout.
pub struct NvidiaSmi {
    pub program: PathBuf,
}

impl Sampler for NvidiaSmi {
    fn sample(&self, pid: u32) -> Option<u64> {
        let mut cmd = Command::new(&self.program);
        cmd.args([
            "--query-compute-apps=pid,used_memory",
            "--format=csv,noheader,nounits",
        ]);
        let out = crate::children::orchestrator::run(cmd, Duration::from_secs(5));
        parse_compute_apps(&out.garbage.join("\n"), pid)
    }
    fn name(&self) -> String {
        "nvidia-smi used_memory".into()
    }
}

/// The MiB `nvidia-smi` lists for `pid` (summed over its GPUs), in bytes.
pub fn parse_compute_apps(text: &str, pid: u32) -> Option<u64> {
    let mut total: Option<u64> = None;
    for line in text.lines() {
        let mut parts = line.split(',').map(str::trim);
        let (Some(p), Some(m)) = (parts.next(), parts.next()) else {
            continue;
        };
        if p.parse::<u32>().ok() == Some(pid)
            && let Ok(mib) = m.parse::<u64>()
        {
            *total.get_or_insert(0) += mib << 20;
        }
    }
    total
}

/// AMD's KFD: `vram_<gpu id>` files under `/sys/class/kfd/kfd/proc/<pid>/` (bytes), summed.
pub struct KfdVram {
    pub root: PathBuf,
}

impl Sampler for KfdVram {
    fn sample(&self, pid: u32) -> Option<u64> {
        let dir = self.root.join(pid.to_string());
        let mut total = None;
        for e in std::fs::read_dir(dir).ok()?.flatten() {
            if e.file_name().to_string_lossy().starts_with("vram_")
                && let Some(t) = read_small(&e.path(), 64)
                && let Ok(v) = t.trim().parse::<u64>()
            {
                *total.get_or_insert(0) += v;
            }
        }
        total
    }
    fn name(&self) -> String {
        "kfd vram".into()
    }
}

/// The resident set of a process (`/proc/PID/status` VmRSS): what a CPU-only run grows.
pub struct HostRss;

impl Sampler for HostRss {
    fn sample(&self, pid: u32) -> Option<u64> {
        let t = read_small(Path::new(&format!("/proc/{pid}/status")), 64 << 10)?;
        t.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb << 10)
    }
    fn name(&self) -> String {
        "host rss".into()
    }
}

fn read_small(path: &Path, limit: u64) -> Option<String> {
    crate::files::read_bytes(path, limit)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// What a memory curve shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CurveSummary {
    pub peak_mib: f64,
    /// The highest reading by the end of the first pass over the context.
    pub first_pass_peak_mib: f64,
    /// How much higher the peak got after the first pass (0 when it did not).
    pub growth_after_first_pass_mib: f64,
    /// Grew by more than 5% (and 16 MiB) after the first pass, when the same work repeats: memory
    /// the process keeps instead of reusing.
    pub keeps_growing: bool,
}

/// Summarises `samples`, the first pass ending at `first_pass_end_ms`.
pub fn summarise(samples: &[Sample], first_pass_end_ms: u64) -> Option<CurveSummary> {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let peak = samples.iter().map(|s| s.bytes).max()?;
    let first = samples
        .iter()
        .filter(|s| s.t_ms <= first_pass_end_ms)
        .map(|s| s.bytes)
        .max()?;
    let growth = mib(peak.saturating_sub(first));
    // A pass shorter than a few sampling intervals shows the process loading, not what it keeps:
    // on the H200 a 16k-token pass of a 200 MiB model took under half a second, and the 250 ms
    // samples read the loading ramp as growth in a VMM and a legacy-pool build alike. Growth is
    // only told with at least three readings in the first pass and three after it.
    let during = samples
        .iter()
        .filter(|s| s.t_ms <= first_pass_end_ms)
        .count();
    let after = samples.len() - during;
    let conclusive = during >= 3 && after >= 3;
    Some(CurveSummary {
        peak_mib: mib(peak),
        first_pass_peak_mib: mib(first),
        growth_after_first_pass_mib: growth,
        keeps_growing: conclusive && growth > 16.0 && growth > 0.05 * mib(first),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_apps_are_summed_per_process() {
        let t = "1234, 500\n99, 7\n1234, 20\nbad line\n";
        assert_eq!(parse_compute_apps(t, 1234), Some(520 << 20));
        assert_eq!(parse_compute_apps(t, 5), None);
    }

    #[test]
    fn growth_after_the_first_pass_is_told() {
        let s = |t_ms, mib: u64| Sample {
            t_ms,
            bytes: mib << 20,
        };
        let flat = [s(0, 100), s(10, 900), s(20, 1000), s(30, 1000), s(40, 1005)];
        let v = summarise(&flat, 20).expect("samples");
        assert!(!v.keeps_growing);
        assert_eq!(v.peak_mib, 1005.0);
        let creeping = [
            s(0, 100),
            s(10, 900),
            s(20, 1000),
            s(30, 1400),
            s(40, 1900),
            s(50, 2000),
        ];
        let v = summarise(&creeping, 20).expect("samples");
        assert!(v.keeps_growing);
        assert_eq!(v.growth_after_first_pass_mib, 1000.0);
        assert!(summarise(&[], 5).is_none());
        // What the H200 showed for a pass shorter than the sampling interval: no verdict.
        let short = [s(300, 518), s(600, 1092), s(800, 1092)];
        let v = summarise(&short, 300).expect("samples");
        assert!(!v.keeps_growing);
        assert_eq!(v.growth_after_first_pass_mib, 574.0);
    }

    #[test]
    fn this_process_has_a_resident_set() {
        if cfg!(target_os = "linux") {
            assert!(HostRss.sample(std::process::id()).unwrap_or(0) > 0);
        }
    }
}
