//! `check-build --exercise inference`: does the whole model run on this machine's GPUs give the
//! answers the CPU gives, in every configuration people use, and does its memory stay put over a
//! long context?
//!
//! gpuprobe writes small llama-architecture models itself ([`model`]: dense and mixture-of-experts,
//! seeded random f16 weights), runs the build's own `llama-perplexity` on the CPU alone as the
//! reference, then once per configuration (each GPU alone, all GPUs split by layer and by row,
//! flash attention on and off, f16/q8_0/q4_0 KV cache, CUDA/HIP graphs off, MoE experts partly on
//! the CPU) with `--kl-divergence`, and judges each by the KL divergence and top-token agreement
//! against thresholds derived from CPU-against-CPU noise ([`thresholds`]). One more run with flash
//! attention and a q8_0 KV cache over a long context samples the process's memory ([`memory`]).
//! Every run is an isolated child with a timeout ([`process`]); the result
//! (`gpuprobe.inference/v1`) is evidence at the `inference` level.

pub mod configs;
pub mod kld;
pub mod memory;
pub mod model;
pub mod process;
pub mod records;
pub mod run;
pub mod thresholds;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use kld::Divergence;
pub use memory::{CurveSummary, Sample};
pub use thresholds::Thresholds;

pub const SCHEMA: &str = "gpuprobe.inference/v1";

/// How one configuration's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Within the thresholds.
    Pass,
    /// Ran to the end, but its output differs from the CPU's beyond the thresholds (or the
    /// kernel logged GPU faults during it).
    Fail,
    /// Killed at its timeout.
    Hang,
    /// Died of a signal.
    Crash,
    /// Exited with an error, or printed no result.
    Error,
    /// The build lacks a flag the configuration needs: not run, and not a pass.
    Unsupported,
    /// Not run: its reference failed, or the time budget ran out.
    NotRun,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Hang => "hang",
            Outcome::Crash => "crash",
            Outcome::Error => "error",
            Outcome::Unsupported => "unsupported",
            Outcome::NotRun => "not-run",
        }
    }
    /// Evidence that something is wrong with the build on this machine.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::Fail | Outcome::Hang | Outcome::Crash | Outcome::Error
        )
    }
}

/// The whole document.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Inference {
    pub schema: String,
    pub gpuprobe_version: String,
    pub host: crate::report::Host,
    pub build: BuildInfo,
    /// HIP runtime (AMD) or CUDA driver API version measured on this machine.
    pub runtime_version: Option<String>,
    pub models: Vec<ModelInfo>,
    pub thresholds: Thresholds,
    /// The CPU runs every configuration is compared with.
    pub references: Vec<RunResult>,
    pub configurations: Vec<RunResult>,
    pub memory: Option<MemoryResult>,
    /// One line per failing configuration: what to avoid, with the measured numbers.
    pub findings: Vec<String>,
    pub elapsed_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct BuildInfo {
    /// The folder of the build's programs.
    pub dir: String,
    /// llama.cpp build number, when known.
    pub build: Option<u64>,
    /// `cuda`, `hip`, or `cpu` (no GPU device was exercised: not evidence about any GPU).
    pub backend: String,
    /// The VMM pool compiled in (true), compiled out (false), unknown (null).
    pub vmm: Option<bool>,
    /// The devices exercised (`CUDA0`, `ROCm1`), with their architecture when the probe knew it.
    pub devices: Vec<DeviceInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct DeviceInfo {
    pub device: String,
    pub name: Option<String>,
    pub arch: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ModelInfo {
    /// `dense`, `moe`, or `user`.
    pub kind: String,
    /// `synthetic` (written by gpuprobe) or the user's file.
    pub source: String,
    pub bytes: u64,
    pub n_embd: Option<u64>,
    pub n_layer: Option<u64>,
    pub n_expert: Option<u64>,
    pub n_vocab: Option<u64>,
}

/// One run of `llama-perplexity`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RunResult {
    /// `CUDA0 fa-on kv-q8_0`, `cpu-reference dense kv-f16 fa-off`.
    pub name: String,
    pub devices: Vec<String>,
    /// The program's arguments beyond the model and files.
    pub args: Vec<String>,
    /// Environment set for the run (`GGML_CUDA_DISABLE_GRAPHS=1`).
    pub env: Vec<String>,
    /// The reference it is compared with (configurations only).
    pub reference: Option<String>,
    pub outcome: Outcome,
    pub divergence: Option<Divergence>,
    /// Perplexity of a reference run (its own output's estimate).
    pub perplexity: Option<f64>,
    pub elapsed_ms: u64,
    /// The last line it printed (for a hang: where it stopped).
    pub last_line: Option<String>,
    pub kernel_faults: Vec<String>,
    pub reason: String,
    /// What a failure of this configuration tells people to avoid.
    pub avoid: Option<String>,
}

/// What the pool took while computing, against what flash attention needs at that context.
fn pool_line(c: &CurveSummary) -> String {
    match (c.before_compute_mib, c.pool_growth_mib) {
        (Some(before), Some(growth)) => format!(
            "  memory before computing {before:.0} MiB, taken while computing {growth:.0} MiB{}{}\n",
            c.fa_scratch_mib
                .map(|f| format!(" (flash attention's f16 K+V at this context: {f:.0} MiB)"))
                .unwrap_or_default(),
            if c.hoards {
                " (keeps every size it allocated)"
            } else {
                ""
            }
        ),
        _ => String::new(),
    }
}

/// The memory of one long-context run over time.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct MemoryResult {
    pub run: RunResult,
    /// What was sampled (`nvidia-smi used_memory`, `kfd vram`, `host rss`).
    pub sampler: String,
    pub context: u32,
    pub passes: u32,
    pub points: Vec<Sample>,
    pub summary: Option<CurveSummary>,
}

impl Inference {
    /// 0: every configuration run passed; 1: one failed, hung or crashed.
    pub fn exit_code(&self) -> i32 {
        let bad = self
            .configurations
            .iter()
            .chain(&self.references)
            .chain(self.memory.iter().map(|m| &m.run))
            .any(|r| r.outcome.is_failure());
        i32::from(bad)
    }

    /// One line per run, then the thresholds, the memory curve and the findings.
    pub fn render(&self) -> String {
        let mut s = format!(
            "inference exercise of {} ({}{}), {} device(s)\n",
            self.build.dir,
            self.build.backend,
            match self.build.vmm {
                Some(true) => ", VMM pool",
                Some(false) => ", legacy pool",
                None => "",
            },
            self.build.devices.len()
        );
        for m in &self.models {
            s.push_str(&format!(
                "model {}: {} ({:.1} MiB)\n",
                m.kind,
                m.source,
                m.bytes as f64 / 1048576.0
            ));
        }
        s.push_str(&format!("thresholds: {}\n", self.thresholds.describe()));
        for r in self.references.iter().chain(&self.configurations) {
            s.push_str(&line(r));
        }
        if let Some(m) = &self.memory {
            s.push_str(&line(&m.run));
            match &m.summary {
                Some(c) => s.push_str(&(format!(
                    "  memory ({}), context {} x {} passes: peak {:.0} MiB, first pass {:.0} MiB, {:.0} MiB more after it{}\n",
                    m.sampler,
                    m.context,
                    m.passes,
                    c.peak_mib,
                    c.first_pass_peak_mib,
                    c.growth_after_first_pass_mib,
                    if c.keeps_growing { " (keeps growing)" } else { "" }
                ) + &pool_line(c))),
                None => s.push_str(&format!("  memory ({}): no reading\n", m.sampler)),
            }
            if !m.points.is_empty() {
                let step = m.points.len().div_ceil(12).max(1);
                let pts: Vec<String> = m
                    .points
                    .iter()
                    .step_by(step)
                    .map(|p| {
                        format!(
                            "{:.1}s:{:.0}",
                            p.t_ms as f64 / 1000.0,
                            p.bytes as f64 / 1048576.0
                        )
                    })
                    .collect();
                s.push_str(&format!("  curve (s:MiB): {}\n", pts.join(" ")));
            }
        }
        for f in &self.findings {
            s.push_str(&format!("finding: {f}\n"));
        }
        s.push_str(&format!("total {:.1} s\n", self.elapsed_ms as f64 / 1000.0));
        s
    }
}

fn line(r: &RunResult) -> String {
    let nums = match &r.divergence {
        Some(d) => format!(
            "mean KLD {:.6}, max {:.4}{}, same top {:.2}%",
            d.mean_kld,
            d.max_kld,
            d.kld_p999
                .map(|p| format!(", 99.9% {p:.4}"))
                .unwrap_or_default(),
            d.same_top_percent
        ),
        None => match r.perplexity {
            Some(p) => format!("PPL {p:.3}"),
            None => String::new(),
        },
    };
    format!(
        "{:<8} {:<44} {:>7.1} s  {}{}\n",
        r.outcome.as_str(),
        r.name,
        r.elapsed_ms as f64 / 1000.0,
        nums,
        if r.outcome == Outcome::Pass || r.reason.is_empty() {
            String::new()
        } else {
            format!(" ({})", r.reason)
        }
    )
}
