//! The plan: what to build and why. Produced by `resolve`, consumed by every emitter.

use schemars::JsonSchema;
use serde::Serialize;

use crate::quirks::{Os, Severity};
use crate::report::Backend;

pub const SCHEMA: &str = "gpuprobe.plan/v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Devices measured on this machine now.
    Probe,
    /// Devices read from a saved `detect --json` report.
    Report,
    /// Declared targets only (CI without a GPU).
    Targets,
    /// Declared GPUs of one machine (`--machine`): one build for all of them, and what depends
    /// on the machine's set of GPUs (several GPUs, an iGPU next to a dGPU) is known.
    Machine,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Plan {
    pub schema: &'static str,
    pub gpuprobe_version: &'static str,
    pub mode: Mode,
    pub backend: Backend,
    pub os: Os,
    pub llama: LlamaRef,
    pub toolkit: ToolkitRef,
    pub groups: Vec<Group>,
    /// Things that apply: act on them.
    pub warnings: Vec<Note>,
    /// Things that could apply, with what would make them apply.
    pub notes: Vec<Note>,
    /// Reasons the plan cannot work. Non-empty means exit 1.
    pub refusals: Vec<Note>,
    /// Decision trace for `--explain`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LlamaRef {
    pub build: Option<u64>,
    /// The build used for option look-ups and quirk ranges.
    pub effective_build: u64,
    pub source: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ToolkitRef {
    pub name: &'static str,
    pub version: Option<String>,
    pub source: String,
}

/// Targets that need the same flags and environment: one configure + build.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Group {
    pub name: String,
    pub targets: Vec<String>,
    /// Probed device indices in this group (empty in targets-only mode).
    pub devices: Vec<u32>,
    /// VMM pool compiled in?
    pub vmm: bool,
    pub flags: Vec<Flag>,
    pub env: Vec<EnvAdvice>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Flag {
    pub name: String,
    pub value: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quirks: Vec<String>,
    /// For a decision kept on the safe side: what would lift it, as something the user can run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lift: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct EnvAdvice {
    pub name: String,
    pub value: String,
    pub reason: String,
    /// A workload condition under which it applies; None means always at run time.
    pub when: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quirks: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Note {
    pub severity: Severity,
    pub message: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quirks: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
}

impl Group {
    pub fn flag(&self, name: &str) -> Option<&Flag> {
        self.flags.iter().find(|f| f.name == name)
    }

    /// `-DNAME=VALUE` for each flag, in order.
    pub fn cmake_args(&self) -> Vec<String> {
        self.flags
            .iter()
            .map(|f| format!("-D{}={}", f.name, f.value))
            .collect()
    }
}

impl Plan {
    pub fn refused(&self) -> bool {
        !self.refusals.is_empty()
    }
}
