//! Output formats for a plan. Each is a pure function of the plan (plus, for `github`, the
//! files GitHub Actions names in the environment).

pub mod args;
pub mod github;
pub mod nfd;
pub mod preset;
pub mod shell;
pub mod workflow;

use crate::neutral::inline;
use crate::plan::Plan;

/// Quotes a word for POSIX sh (see [`crate::neutral::sh_word`]).
pub use crate::neutral::sh_word as sh_quote;

/// What a configure needs besides the plan's `-D` flags, found on the machine gpuprobe runs on
/// (so not part of the plan, which is the same wherever it is made).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Configure {
    /// ROCm's clang for a HIP plan: llama.cpp's docs configure with
    /// `HIPCXX="$(hipconfig -l)/clang"`, which `-DCMAKE_HIP_COMPILER` says to CMake directly.
    pub hip_compiler: Option<String>,
    /// Why a HIP plan carries no compiler, and what the configure needs instead (a warning:
    /// stderr for `args`, an annotation for `github`).
    pub missing: Option<String>,
}

impl Configure {
    /// The configure arguments (`-DCMAKE_HIP_COMPILER=...`), after the plan's own.
    pub fn cmake_args(&self) -> Vec<String> {
        self.hip_compiler
            .iter()
            .map(|c| format!("-DCMAKE_HIP_COMPILER={c}"))
            .collect()
    }

    /// The same as environment for the configure, `NAME=VALUE` per line (`HIPCXX=...`).
    pub fn env_lines(&self) -> String {
        self.hip_compiler
            .iter()
            .map(|c| format!("HIPCXX={}", inline(c)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

pub fn json(plan: &Plan) -> String {
    // Serialising plain data with string keys cannot fail.
    serde_json::to_string_pretty(plan).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")) + "\n"
}

/// The human decision trace for `--explain`, written to stderr. Every piece of outside text is
/// one line ([`inline`]), so the layout cannot be forged.
pub fn explain(plan: &Plan, knowledge: &crate::profiles::Knowledge) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "gpuprobe: plan for {} ({:?} mode), {}, {}\n",
        plan.backend.name(),
        plan.mode,
        inline(&plan.llama.describe()),
        inline(&plan.toolkit.describe()),
    ));
    for g in &plan.groups {
        out.push_str(&format!(
            "group {} [{}]\n",
            inline(&g.name),
            inline(&g.targets.join(", "))
        ));
        for f in &g.flags {
            out.push_str(&format!(
                "  -D{}={}\n      why: {}\n",
                inline(&f.name),
                inline(&f.value),
                inline(&f.reason)
            ));
            for id in &f.quirks {
                if let Some(q) = knowledge.quirk(id) {
                    out.push_str(&format!(
                        "      {} ({} confidence): {}\n",
                        inline(id),
                        q.confidence.as_str(),
                        inline(&q.sources.join(" "))
                    ));
                }
            }
        }
        for e in &g.env {
            out.push_str(&format!(
                "  env {}={}{}\n      why: {}\n",
                inline(&e.name),
                inline(&e.value),
                e.when
                    .as_ref()
                    .map(|w| format!(" (when: {})", inline(w)))
                    .unwrap_or_default(),
                inline(&e.reason)
            ));
        }
    }
    if !plan.trace.is_empty() {
        out.push_str("decision trace:\n");
        for t in &plan.trace {
            out.push_str(&format!("  {}\n", inline(t)));
        }
    }
    out
}
