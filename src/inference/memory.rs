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
    /// The highest reading before the first pass began: weights, KV cache, compute buffers and
    /// the runtime, everything the process sets up before it computes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_compute_mib: Option<f64>,
    /// The buffers llama.cpp said it set up on the device (weights, KV cache, compute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_mib: Option<f64>,
    /// How far the peak rose above that: what the run's memory pool took while computing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_growth_mib: Option<f64>,
    /// The f16 copy of K and V at the full context that flash attention with a quantized KV cache
    /// dequantizes into: the most a pool that reuses its memory needs for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fa_scratch_mib: Option<f64>,
    /// The pool took more than four times that scratch (and 256 MiB besides): it keeps each size
    /// it allocated instead of reusing memory (the legacy pool before llama.cpp 9489).
    #[serde(default)]
    pub hoards: bool,
}

/// Where the phases of a memory run fall on the curve's clock.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Phases {
    /// When the output first showed that computing had begun (readings before it are the
    /// set-up).
    pub compute_start_ms: Option<u64>,
    /// When the first pass over the context ended.
    pub first_pass_end_ms: u64,
    /// What llama.cpp said it set up on the device (its buffer sizes): a reading before
    /// computing that is well below it was taken while loading, not after.
    pub setup_bytes: Option<u64>,
}

/// Slack for what the runtime adds on the first computation (math-library handles and their
/// workspaces, kernels loaded on first use), which is no pool's doing.
const RUNTIME_SLACK_MIB: f64 = 256.0;

/// Summarises `samples`; `fa_scratch` is the model's f16 K+V scratch at the full context, in
/// bytes, when known.
pub fn summarise(
    samples: &[Sample],
    phases: Phases,
    fa_scratch: Option<u64>,
) -> Option<CurveSummary> {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let first_pass_end_ms = phases.first_pass_end_ms;
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
    // The reading taken when the mark showed may already include computing: only the ones
    // before it are the set-up.
    // A reading below what llama.cpp set up was taken while it loaded (a small model loads
    // within one interval: on the H200 the only reading before computing was the process's
    // first 14 MiB): no verdict from it.
    let before_compute = phases
        .compute_start_ms
        .and_then(|start| {
            samples
                .iter()
                .filter(|s| s.t_ms < start)
                .map(|s| s.bytes)
                .max()
        })
        .filter(|b| {
            phases
                .setup_bytes
                .is_some_and(|set| *b as f64 >= 0.9 * set as f64)
        });
    let pool_growth = before_compute.map(|b| mib(peak.saturating_sub(b)));
    let scratch = fa_scratch.map(mib);
    let hoards = match (pool_growth, scratch) {
        (Some(g), Some(s)) => g > 4.0 * s + RUNTIME_SLACK_MIB,
        _ => false,
    };
    Some(CurveSummary {
        peak_mib: mib(peak),
        first_pass_peak_mib: mib(first),
        growth_after_first_pass_mib: growth,
        keeps_growing: conclusive && growth > 16.0 && growth > 0.05 * mib(first),
        before_compute_mib: before_compute.map(mib),
        setup_mib: phases.setup_bytes.map(mib),
        pool_growth_mib: pool_growth,
        fa_scratch_mib: scratch,
        hoards,
    })
}

/// The buffers llama.cpp reports setting up on `device` (`CUDA0`): the sum of its
/// `<name> model|KV|compute|... buffer size = N MiB` lines whose buffer is that device's.
pub fn setup_bytes(output: &str, device: &str) -> Option<u64> {
    let mut total: Option<f64> = None;
    for line in output.lines() {
        let Some((head, size)) = line.split_once(" buffer size =") else {
            continue;
        };
        // `load_tensors:        CUDA0 model`: the buffer's name is the word before the kind.
        let mut words = head.split_whitespace().rev();
        let (Some(_kind), Some(name)) = (words.next(), words.next()) else {
            continue;
        };
        if name != device {
            continue;
        }
        if let Some(mib) = size
            .trim()
            .strip_suffix("MiB")
            .and_then(|n| n.trim().parse::<f64>().ok())
            .filter(|m| m.is_finite() && *m >= 0.0)
        {
            *total.get_or_insert(0.0) += mib;
        }
    }
    total.map(|m| (m * (1u64 << 20) as f64) as u64)
}

/// The f16 K+V scratch at `ctx` tokens for the model whose header is `h` (llama.cpp's metadata
/// keys under the model's architecture); `None` when the header does not say (per-layer head
/// counts, say).
pub fn fa_scratch_for(h: &crate::gguf::read::Header, ctx: u32) -> Option<u64> {
    let arch = h.get_str("general.architecture")?;
    let key = |k: &str| h.get_u32(&format!("{arch}.{k}")).map(u64::from);
    let n_embd = key("embedding_length")?;
    let n_head = key("attention.head_count")?.max(1);
    let n_head_kv = key("attention.head_count_kv").unwrap_or(n_head);
    let k = key("attention.key_length").unwrap_or(n_embd / n_head);
    let v = key("attention.value_length").unwrap_or(n_embd / n_head);
    Some(fa_scratch_bytes(ctx, k * n_head_kv, v * n_head_kv))
}

/// The bytes of the f16 K and V that flash attention dequantizes a quantized cache into, at
/// `ctx` tokens, for a model whose layers hold `n_embd_k` and `n_embd_v` values per token of
/// K and V (heads × head size, KV heads only).
pub fn fa_scratch_bytes(ctx: u32, n_embd_k: u64, n_embd_v: u64) -> u64 {
    u64::from(ctx) * (n_embd_k + n_embd_v) * 2
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
        let at = |end| Phases {
            compute_start_ms: None,
            first_pass_end_ms: end,
            setup_bytes: None,
        };
        let v = summarise(&flat, at(20), None).expect("samples");
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
        let v = summarise(&creeping, at(20), None).expect("samples");
        assert!(v.keeps_growing);
        assert_eq!(v.growth_after_first_pass_mib, 1000.0);
        assert!(summarise(&[], at(5), None).is_none());
        // What the H200 showed for a pass shorter than the sampling interval: no verdict.
        let short = [s(300, 518), s(600, 1092), s(800, 1092)];
        let v = summarise(&short, at(300), None).expect("samples");
        assert!(!v.keeps_growing);
        assert_eq!(v.growth_after_first_pass_mib, 574.0);
    }

    #[test]
    fn a_pool_that_keeps_every_size_is_told_from_one_that_reuses() {
        let s = |t_ms, mib: u64| Sample {
            t_ms,
            bytes: mib << 20,
        };
        let phases = Phases {
            compute_start_ms: Some(300),
            first_pass_end_ms: 1200,
            setup_bytes: Some(1000 << 20),
        };
        let scratch = Some(208u64 << 20);
        // Reuses: rises by the scratch and the runtime's own first-use memory, then stays.
        let reuses = [
            s(0, 400),
            s(250, 1500),
            s(300, 1500),
            s(600, 1800),
            s(900, 1790),
            s(1500, 1800),
        ];
        let v = summarise(&reuses, phases, scratch).expect("samples");
        assert_eq!(v.before_compute_mib, Some(1500.0));
        assert_eq!(v.pool_growth_mib, Some(300.0));
        assert!(!v.hoards);
        // Keeps every size: grows through the first pass to many times the scratch.
        let keeps = [
            s(0, 400),
            s(250, 1500),
            s(300, 1700),
            s(600, 3000),
            s(900, 5200),
            s(1500, 5400),
        ];
        let v = summarise(&keeps, phases, scratch).expect("samples");
        assert_eq!(v.pool_growth_mib, Some(3900.0));
        assert!(v.hoards);
        // Without a scratch size or a start of computing there is no verdict.
        assert!(!summarise(&keeps, phases, None).expect("samples").hoards);
        let unmarked = Phases {
            compute_start_ms: None,
            ..phases
        };
        let v = summarise(&keeps, unmarked, scratch).expect("samples");
        assert_eq!(v.pool_growth_mib, None);
        assert!(!v.hoards);
        // What the H200 showed for llama.cpp 11434 with a 219 MiB model: loaded within one
        // interval, so the only reading before computing was the bare process. Not a verdict.
        let fast_load = [s(200, 14), s(500, 1086), s(800, 1094), s(1100, 586)];
        let v = summarise(
            &fast_load,
            Phases {
                compute_start_ms: Some(500),
                first_pass_end_ms: 800,
                setup_bytes: Some(330 << 20),
            },
            Some(48 << 20),
        )
        .expect("samples");
        assert_eq!(v.before_compute_mib, None);
        assert!(!v.hoards);
    }

    #[test]
    fn the_buffers_llama_cpp_set_up_on_a_device_are_summed() {
        let out = "load_tensors:        CUDA0 model buffer size =   219.23 MiB\n\
                   load_tensors:   CPU_Mapped model buffer size =    20.00 MiB\n\
                   llama_kv_cache:      CUDA0 KV buffer size =   102.00 MiB\n\
                   llama_context:  CUDA_Host  output buffer size =     0.50 MiB\n\
                   llama_context:      CUDA0 compute buffer size =    78.77 MiB\n\
                   llama_context:      CUDA1 compute buffer size =    10.00 MiB\n";
        let b = setup_bytes(out, "CUDA0").expect("CUDA0 buffers");
        assert_eq!(b >> 20, 400);
        assert_eq!(setup_bytes(out, "ROCm0"), None);
    }

    #[test]
    fn this_process_has_a_resident_set() {
        if cfg!(target_os = "linux") {
            assert!(HostRss.sample(std::process::id()).unwrap_or(0) > 0);
        }
    }
}
