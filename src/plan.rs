//! The plan: what to build and why. Produced by `resolve`, consumed by every emitter.

use schemars::JsonSchema;
use serde::Serialize;

use crate::platform::Os;
use crate::quirks::Severity;
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

impl LlamaRef {
    /// `llama.cpp build 11434 (--llama-build)`, for headers.
    pub fn describe(&self) -> String {
        format!("llama.cpp build {} ({})", self.effective_build, self.source)
    }
}

impl ToolkitRef {
    /// `ROCm 7.2.1 (--rocm)`, or `CUDA version unknown` (no source to name then).
    pub fn describe(&self) -> String {
        match &self.version {
            Some(v) => format!("{} {v} ({})", self.name, self.source),
            None => format!("{} version unknown", self.name),
        }
    }
}

/// The quirk ids of `known` that `text` names, as whole words (`Q2` is not named by `Q2-old-build`).
pub fn named_quirks(text: &str, known: &[String]) -> Vec<String> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    known
        .iter()
        .filter(|id| {
            text.match_indices(id.as_str()).any(|(at, _)| {
                let before = text[..at].chars().next_back();
                let after = text[at + id.len()..].chars().next();
                !before.is_some_and(word) && !after.is_some_and(word)
            })
        })
        .cloned()
        .collect()
}

/// Cites at the end of a text (`(see Q1, Q4)`) the ids it lists but does not name, so that a
/// reader of the text sees every record the list holds. (The list says which records apply; a
/// text that names a record which does not apply is fixed where it is written.)
pub fn cite_quirks(text: &mut String, ids: &[String], known: &[String]) {
    let named = named_quirks(text, known);
    let unnamed: Vec<&str> = ids
        .iter()
        .filter(|i| !named.contains(i))
        .map(String::as_str)
        .collect();
    if !unnamed.is_empty() {
        text.push_str(&format!(" (see {})", unnamed.join(", ")));
    }
}

impl Plan {
    /// Every flag's, env advice's and note's text names the quirk ids it lists.
    pub fn cite_quirks(&mut self, known: &[String]) {
        for g in &mut self.groups {
            for f in &mut g.flags {
                cite_quirks(&mut f.reason, &f.quirks, known);
            }
            for e in &mut g.env {
                cite_quirks(&mut e.reason, &e.quirks, known);
            }
        }
        for n in self
            .warnings
            .iter_mut()
            .chain(&mut self.notes)
            .chain(&mut self.refusals)
        {
            cite_quirks(&mut n.message, &n.quirks, known);
        }
    }

    pub fn refused(&self) -> bool {
        !self.refusals.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn quirk_ids_are_named_as_whole_words() {
        let known = ids(&["Q1", "Q2", "Q2-old-build", "Q11", "Q12"]);
        assert_eq!(
            named_quirks("Q12: gfx1151 (Q11's advice); see Q2-old-build", &known),
            ids(&["Q2-old-build", "Q11", "Q12"])
        );
        assert!(named_quirks("Q21 matches", &known).is_empty());
    }

    #[test]
    fn listed_ids_the_text_does_not_name_are_cited() {
        let known = ids(&["Q1", "Q2", "Q4", "Q21"]);
        let mut text = "keep the legacy pool: Q21 matches; VRAM creep (Q2)".to_string();
        cite_quirks(&mut text, &ids(&["Q21", "Q1", "Q4", "Q2"]), &known);
        assert_eq!(
            text,
            "keep the legacy pool: Q21 matches; VRAM creep (Q2) (see Q1, Q4)"
        );
        let before = text.clone();
        cite_quirks(&mut text, &ids(&["Q21", "Q1"]), &known);
        assert_eq!(text, before, "nothing to cite twice");
    }
}
