//! `github`: step outputs (`cmake-args`, `configure-env`, `env`, `matrix`, `plan`) to `$GITHUB_OUTPUT`, a summary
//! table to `$GITHUB_STEP_SUMMARY`, and annotations on stdout for errors (refusals) and warnings
//! only: notes inform, so they are in the summary, never an annotation.
//!
//! Each output entry is made by [`neutral::github_line`] or [`neutral::github_block`], each piece
//! of summary text by [`neutral::markdown`] or [`neutral::markdown_code`], each annotation by
//! [`neutral::annotation`]: no value can add an output, a Markdown structure or a second command.

use std::io::Write;
use std::path::Path;

use serde_json::json;

use crate::error::{Error, Result};
use crate::neutral;
use crate::plan::Plan;

use super::Configure;

/// The matrix usable with `fromJSON(...)`: one entry per group.
pub fn matrix(plan: &Plan) -> serde_json::Value {
    let include: Vec<serde_json::Value> = plan
        .groups
        .iter()
        .map(|g| {
            json!({
                "name": g.name,
                "targets": g.targets.join(";"),
                "cmake-args": g.cmake_args().join(" "),
                "vmm": g.vmm,
            })
        })
        .collect();
    json!({ "include": include })
}

/// Unconditional runtime env advice, `NAME=VALUE` per line (conditional advice stays in the summary).
pub fn env_lines(plan: &Plan) -> String {
    let mut lines: Vec<String> = Vec::new();
    for g in &plan.groups {
        for e in g.env.iter().filter(|e| e.when.is_none()) {
            let l = format!("{}={}", neutral::inline(&e.name), neutral::inline(&e.value));
            if !lines.contains(&l) {
                lines.push(l);
            }
        }
    }
    lines.join("\n")
}

pub fn summary(plan: &Plan) -> String {
    use neutral::{markdown as md, markdown_code as code};
    let mut s = String::new();
    let status = if plan.refused() { "refused" } else { "ok" };
    s.push_str(&format!(
        "### gpuprobe: llama.cpp {} plan ({status})\n\n",
        plan.backend.name()
    ));
    s.push_str(&format!(
        "{}, {}\n\n",
        md(&plan.llama.describe()),
        md(&plan.toolkit.describe())
    ));
    s.push_str("| group | targets | VMM | flags | why |\n|---|---|---|---|---|\n");
    for g in &plan.groups {
        let vmm_reason = g
            .flags
            .iter()
            .find(|f| f.name.ends_with("_NO_VMM"))
            .map(|f| f.reason.as_str())
            .unwrap_or("");
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            md(&g.name),
            md(&g.targets.join(", ")),
            if g.vmm { "on" } else { "off" },
            code(&g.cmake_args().join(" ")).replace('|', "\\|"),
            md(vmm_reason)
        ));
    }
    // Every runtime note for the built binaries: the environment the plan advises, then the
    // warnings and the notes.
    let env: Vec<String> = plan
        .groups
        .iter()
        .flat_map(|g| {
            g.env.iter().map(move |e| {
                let when = e
                    .when
                    .as_deref()
                    .map(|w| format!(" when {w}"))
                    .unwrap_or_default();
                format!(
                    "- {} for {} ({}){}: {}\n",
                    code(&format!("{}={}", e.name, e.value)),
                    md(&g.name),
                    md(&g.targets.join(", ")),
                    md(&when),
                    md(&e.reason)
                )
            })
        })
        .collect();
    if !env.is_empty() {
        s.push_str("\n**Run the built binaries with**\n\n");
        for line in env {
            s.push_str(&line);
        }
    }
    for (label, notes) in [
        ("Refused", &plan.refusals),
        ("Warnings", &plan.warnings),
        ("Notes", &plan.notes),
    ] {
        if notes.is_empty() {
            continue;
        }
        s.push_str(&format!("\n**{label}**\n\n"));
        for n in notes {
            s.push_str(&format!("- {}\n", md(&n.message)));
        }
    }
    s
}

/// Writes outputs and summary to the files GitHub names; returns the annotation lines for stdout.
pub fn write(
    plan: &Plan,
    configure: &Configure,
    output: &Path,
    summary_path: Option<&Path>,
) -> Result<String> {
    let plan_json = serde_json::to_string(plan).unwrap_or_default();
    let args = plan
        .groups
        .first()
        .map(|g| {
            let mut args = g.cmake_args();
            args.extend(configure.cmake_args());
            args.join(" ")
        })
        .unwrap_or_default();
    let mut out = String::new();
    out.push_str(&neutral::github_line("cmake-args", &args));
    out.push_str(&neutral::github_block(
        "configure-env",
        &configure.env_lines(),
    ));
    out.push_str(&neutral::github_line("matrix", &matrix(plan).to_string()));
    out.push_str(&neutral::github_block("env", &env_lines(plan)));
    out.push_str(&neutral::github_block("plan", &plan_json));
    append(output, "$GITHUB_OUTPUT", &out)?;
    if let Some(p) = summary_path {
        append(p, "$GITHUB_STEP_SUMMARY", &summary(plan))?;
    }
    let mut annotations = String::new();
    for n in &plan.refusals {
        annotations.push_str(&format!(
            "::error title=gpuprobe::{}\n",
            neutral::annotation(&n.message)
        ));
    }
    for n in &plan.warnings {
        annotations.push_str(&format!(
            "::warning title=gpuprobe::{}\n",
            neutral::annotation(&n.message)
        ));
    }
    if let Some(m) = &configure.missing {
        annotations.push_str(&format!(
            "::warning title=gpuprobe configure::{}\n",
            neutral::annotation(m)
        ));
    }
    if let Some(m) = groups_left_out_of_cmake_args(plan) {
        annotations.push_str(&format!(
            "::warning title=gpuprobe cmake-args::{}\n",
            neutral::annotation(&m)
        ));
    }
    Ok(annotations)
}

/// `cmake-args` is one build: with several groups (flags that differ), the targets of every group
/// after the first are only in `matrix`, and are named here so that no build leaves them out
/// unsaid.
pub fn groups_left_out_of_cmake_args(plan: &Plan) -> Option<String> {
    let (first, rest) = plan.groups.split_first()?;
    if rest.is_empty() {
        return None;
    }
    let others: Vec<String> = rest
        .iter()
        .map(|g| format!("{} ({})", g.name, g.targets.join(", ")))
        .collect();
    Some(format!(
        "cmake-args holds build group {} ({}) only; {} need other flags and are in the matrix output only: build every matrix entry (strategy.matrix: fromJSON(matrix)), or those targets are not built",
        first.name,
        first.targets.join(", "),
        others.join(", ")
    ))
}

fn append(path: &Path, input: &str, text: &str) -> Result<()> {
    let mut f = crate::files::open_append(path, input)?;
    f.write_all(text.as_bytes())
        .map_err(|e| Error::io_on(path, "append to", e))
}
