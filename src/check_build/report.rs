//! The check-build document: what was judged, what the build is, what it did not show, the
//! machine, the plan, the ranked findings and the exit code. `--json` writes it as it is; the human
//! report is rendered from it.

use std::fmt;

use schemars::JsonSchema;
use serde::Serialize;

use super::build_number::BuildNumber;
use super::finding::Finding;
use super::judge::VmmVerdict;
use super::parse::BuildFacts;
use super::plan_summary::PlanSummary;
use super::runner::Invocation;
use crate::plan::Mode;

/// Bumped when a field changes meaning or disappears; additions keep the number.
pub const SCHEMA: &str = "gpuprobe.check-build/v1";

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CheckReport {
    pub schema: &'static str,
    pub gpuprobe_version: &'static str,
    pub input: InputInfo,
    /// What the build is, as judged (derived from `extracted` and the options).
    pub build: BuildSummary,
    /// Everything recognised in the build's output, as found.
    pub extracted: BuildFacts,
    /// What the output did not show, and how to get it.
    pub not_found: Vec<Missing>,
    pub machine: MachineSummary,
    /// What gpuprobe would build for this machine (or for the build's own devices).
    pub plan: Option<PlanSummary>,
    pub findings: Vec<Finding>,
    pub summary: Summary,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InputInfo {
    /// `binary`, `log` or `binary+log`.
    #[schemars(with = "String")]
    pub kind: InputKind,
    pub path: String,
    /// The binary's runs (empty for a log).
    pub runs: Vec<Invocation>,
}

/// What check-build was given to judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum InputKind {
    #[serde(rename = "binary")]
    Binary,
    #[serde(rename = "log")]
    Log,
    #[serde(rename = "binary+log")]
    BinaryAndLog,
}

impl fmt::Display for InputKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InputKind::Binary => "binary",
            InputKind::Log => "log",
            InputKind::BinaryAndLog => "binary+log",
        })
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BuildSummary {
    pub number: BuildNumber,
    pub commit: Option<String>,
    pub semver: Option<String>,
    /// The GPU backend judged: `CUDA`, `ROCm`, `MUSA`, `Vulkan`, ...; None for CPU-only or unknown.
    pub backend: Option<String>,
    pub backends: Vec<String>,
    pub cpu_only: bool,
    pub vmm: VmmVerdict,
    /// `ARCHS` of a CUDA build (`__CUDA_ARCH_LIST__`: 900 = sm_90).
    pub archs: Option<Vec<u32>>,
    pub flags: Flags,
}

/// Compile-time features visible in system_info (None: not printed).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Flags {
    pub no_vmm: Option<bool>,
    pub no_peer_copy: Option<bool>,
    pub force_mmq: Option<bool>,
    pub force_cublas: Option<bool>,
    pub fa_all_quants: Option<bool>,
    /// CUDA graphs (printed by CUDA builds only; HIP graphs never show).
    pub use_graphs: Option<bool>,
}

#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct Missing {
    pub what: String,
    pub how: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MachineSummary {
    /// `this machine's probe`, `report FILE`, or `none`.
    pub source: String,
    /// How the devices were known: measured now, read from a report, or not at all.
    #[serde(skip)]
    pub mode: Option<Mode>,
    pub os: String,
    pub devices: Vec<MachineDevice>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MachineDevice {
    pub index: u32,
    pub backend: crate::report::Backend,
    pub name: String,
    pub arch: String,
    pub vmm_supported: Option<bool>,
    pub smoke: String,
    pub smoke_reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Summary {
    pub errors: usize,
    pub warnings: usize,
    pub notes: usize,
    /// 0: no problems (notes only); 1: warnings or errors.
    pub exit_code: i32,
}
