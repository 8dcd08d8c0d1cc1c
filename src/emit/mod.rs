//! Output formats for a plan. Each is a pure function of the plan (plus, for `github`, the
//! files GitHub Actions names in the environment).

pub mod args;
pub mod github;
pub mod preset;
pub mod shell;
pub mod workflow;

use crate::plan::Plan;

/// Quotes a word for POSIX sh when it needs quoting.
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-=./:,+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

pub fn json(plan: &Plan) -> String {
    // Serialising plain data with string keys cannot fail.
    serde_json::to_string_pretty(plan).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")) + "\n"
}

/// The human decision trace for `--explain`, written to stderr.
pub fn explain(plan: &Plan, knowledge: &crate::profiles::Knowledge) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "gpuprobe: plan for {} ({:?} mode), llama.cpp build {} ({}), {} {}\n",
        plan.backend.name(),
        plan.mode,
        plan.llama.effective_build,
        plan.llama.source,
        plan.toolkit.name,
        plan.toolkit.version.as_deref().unwrap_or("version unknown"),
    ));
    for g in &plan.groups {
        out.push_str(&format!("group {} [{}]\n", g.name, g.targets.join(", ")));
        for f in &g.flags {
            out.push_str(&format!(
                "  -D{}={}\n      why: {}\n",
                f.name, f.value, f.reason
            ));
            for id in &f.quirks {
                if let Some(q) = knowledge.quirk(id) {
                    out.push_str(&format!(
                        "      {id} ({} confidence): {}\n",
                        q.confidence.as_str(),
                        q.sources.join(" ")
                    ));
                }
            }
        }
        for e in &g.env {
            out.push_str(&format!(
                "  env {}={}{}\n      why: {}\n",
                e.name,
                e.value,
                e.when
                    .as_ref()
                    .map(|w| format!(" (when: {w})"))
                    .unwrap_or_default(),
                e.reason
            ));
        }
    }
    if !plan.trace.is_empty() {
        out.push_str("decision trace:\n");
        for t in &plan.trace {
            out.push_str(&format!("  {t}\n"));
        }
    }
    out
}
