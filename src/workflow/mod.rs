//! The release workflow's model: one plan per OS from the declared targets (without the targets
//! that OS's toolkit does not support), turned into the data of a GitHub Actions workflow (one job
//! per OS, one matrix entry per plan group, or per GPU family for Windows HIP; a release job) that
//! [`crate::emit::workflow`] renders.
//!
//! - `inputs`: what the user gave, checked (targets, OSes, toolkit version, llama.cpp ref).
//! - `install`: the toolkit install for a backend, OS and version.
//! - `jobs`: one OS's job and its matrix entries.
//! - `notes`: the prose: header comment, runtime notes, package and release notes.

mod inputs;
pub mod install;
mod jobs;
mod notes;

use std::path::PathBuf;

use crate::emit::workflow::{Release, Tools, Workflow};
use crate::error::{Error, Result};
use crate::evidence::Evidence;
use crate::plan::Plan;
use crate::platform::Os;
use crate::profiles::Knowledge;
use crate::report::Backend;
use crate::resolve::{Devices, Request, resolve};
use crate::toolkits::ToolkitTable;

pub use inputs::check_git_ref;
pub use jobs::{LINUX_RUNNER, WINDOWS_RUNNER};

const LLAMA_REPOSITORY: &str = "ggml-org/llama.cpp";

/// What the workflow is asked for, as given on the command line (each is checked here).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--targets`: architectures and family tokens, comma-, semicolon- or space-separated.
    pub targets: String,
    /// `--os`: `linux`, `windows` or both, comma-separated.
    pub os: String,
    /// `--from`: documents with measured evidence.
    pub from: Vec<PathBuf>,
    pub backend: Option<Backend>,
    pub rocm: Option<String>,
    pub cuda: Option<String>,
    pub llama_ref: Option<String>,
    pub llama_build: Option<u64>,
}

/// The workflow, plus what the plans said that is not part of it.
#[derive(Debug, Clone)]
pub struct Built {
    pub workflow: Workflow,
    /// Plan warnings and dropped targets, each once.
    pub warnings: Vec<String>,
    /// Plan refusals, prefixed with their OS: there is no workflow to write when any is here.
    pub refusals: Vec<String>,
}

/// Builds the workflow for `o`. `note` receives what the user should know about how the input
/// was read (a ref that is not a bN tag, a build newer than the option table), as it is found.
pub fn build(k: &Knowledge, o: &Options, note: &mut dyn FnMut(&str)) -> Result<Built> {
    let input = inputs::Inputs::read(k, o, note)?;
    let plans = plans_per_os(k, &input)?;
    let plan_backend = plans[0].1.backend;
    let version = inputs::toolkit_version(plan_backend, input.rocm.as_ref(), input.cuda.as_ref())?;
    let tk = ToolkitTable::bundled()?;
    let effective_build = input.llama.effective_build(&k.options);
    if plan_backend == Backend::Hip {
        refuse_targets_without_device_code(&tk, o, &input, &plans, &version, effective_build)?;
    }
    let (warnings, refusals) = plan_messages(&plans, &input.dropped);
    let jobs = plans
        .iter()
        .map(|(os, plan)| {
            jobs::job(
                k,
                &tk,
                *os,
                plan,
                &version,
                &input.llama_ref,
                effective_build,
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let toolkit = plan_backend.toolkit();
    let command =
        notes::regenerate_command(o, &input, plan_backend, version.text(), effective_build)?;
    let runtime = notes::runtime_notes_of(&plans);
    let header = notes::header(
        k,
        &input,
        &plans,
        (toolkit, version.text()),
        &command,
        &runtime,
    );
    let llama_ref = input.llama_ref;
    Ok(Built {
        workflow: Workflow {
            name: format!("llama.cpp {llama_ref} ({toolkit} {version})"),
            header,
            backend: plan_backend.as_str(),
            llama_repository: LLAMA_REPOSITORY.into(),
            expected_build: input.ref_build.map(|n| n.to_string()).unwrap_or_default(),
            release: Release {
                needs: jobs.iter().map(|j| j.id).collect(),
                notes: notes::release_notes(
                    &llama_ref,
                    toolkit,
                    version.text(),
                    &runtime,
                    &release_assets(&jobs),
                ),
                assets: release_assets(&jobs).into_iter().map(|(_, a)| a).collect(),
            },
            llama_ref,
            jobs,
            tools: Tools {
                python: tk.build.python.clone(),
                pip: tk.pip_tools(),
            },
        },
        warnings,
        refusals,
    })
}

/// A group naming a target that the chosen ROCm release ships no device code for cannot be
/// packaged (the package step would find no rocBLAS kernels for it, hours into the run): refused
/// here, naming each such group, the reason from `profiles/toolkits.toml`, and the command
/// without those targets.
fn refuse_targets_without_device_code(
    tk: &ToolkitTable,
    o: &Options,
    input: &inputs::Inputs,
    plans: &[(Os, Plan)],
    version: &crate::version::ToolVersion,
    effective_build: u64,
) -> Result<()> {
    let Some(record) = tk.rocm.device_code_for(version.major_minor()) else {
        return Ok(());
    };
    let has_code = |t: &String| record.targets.contains(t);
    let mut refused: Vec<String> = Vec::new();
    let mut groups: Vec<String> = Vec::new();
    for (os, plan) in plans {
        for g in &plan.groups {
            let missing: Vec<&String> = g.targets.iter().filter(|t| !has_code(t)).collect();
            if missing.is_empty() {
                continue;
            }
            groups.push(format!(
                "{} group {} ({}: no device code for {})",
                os.as_str(),
                g.name,
                g.targets.join(", "),
                missing
                    .iter()
                    .map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            for t in missing {
                if !refused.contains(t) {
                    refused.push(t.clone());
                }
            }
        }
    }
    if refused.is_empty() {
        return Ok(());
    }
    let mut kept: Vec<String> = Vec::new();
    for (_, targets) in &input.per_os {
        for t in targets {
            if !refused.contains(t) && !kept.contains(t) {
                kept.push(t.clone());
            }
        }
    }
    let fix = if kept.is_empty() {
        format!(
            "name targets that ROCm {} ships device code for ({})",
            version.text(),
            record.targets.join(", ")
        )
    } else {
        let without = Options {
            targets: kept.join(","),
            ..o.clone()
        };
        format!(
            "leave {} out: {}",
            refused.join(", "),
            notes::regenerate_command(
                &without,
                input,
                Backend::Hip,
                version.text(),
                effective_build
            )?
        )
    };
    Err(Error::input(
        "--targets",
        format!(
            "ROCm {} ships no device code for {}, so the package step would find no rocBLAS kernels for it: {} [source: {}]. Refused: {}",
            version.text(),
            refused.join(", "),
            record.why,
            record.source,
            groups.join("; ")
        ),
        fix,
    ))
}

/// Every archive the build jobs upload, with the GPU targets it is for.
fn release_assets(jobs: &[crate::emit::workflow::Job]) -> Vec<(String, String)> {
    jobs.iter()
        .flat_map(|j| {
            let ext = if j.id == "windows" { "zip" } else { "tar.gz" };
            j.entries
                .iter()
                .map(move |e| (e.targets.clone(), format!("{}.{ext}", e.artifact)))
        })
        .collect()
}

/// The plans' warnings (after the dropped targets, each once) and refusals (with their OS).
fn plan_messages(plans: &[(Os, Plan)], dropped: &[String]) -> (Vec<String>, Vec<String>) {
    let mut refusals = Vec::new();
    let mut warnings: Vec<String> = dropped.to_vec();
    for (os, plan) in plans {
        for r in &plan.refusals {
            refusals.push(format!("{}: {}", os.as_str(), r.message));
        }
        for w in &plan.warnings {
            if !warnings.contains(&w.message) {
                warnings.push(w.message.clone());
            }
        }
    }
    (warnings, refusals)
}

/// One plan per OS, from the targets its job builds.
fn plans_per_os(k: &Knowledge, input: &inputs::Inputs) -> Result<Vec<(Os, Plan)>> {
    let mut plans: Vec<(Os, Plan)> = Vec::new();
    for (os, os_targets) in &input.per_os {
        let req = Request {
            devices: Devices::Declared(os_targets.clone()),
            backend: input.backend,
            llama: input.llama.clone(),
            rocm: input.rocm.as_ref().map(|v| v.version().clone()),
            cuda: input.cuda.as_ref().map(|v| v.version().clone()),
            rocm_source: "--rocm".into(),
            cuda_source: "--cuda".into(),
            os: *os,
            // The runner's environment, not this machine's: nothing is set there.
            env_set: Vec::new(),
            force_no_vmm: false,
            evidence: input.evidence.clone(),
        };
        plans.push((*os, resolve(k, &req)?));
    }
    Ok(plans)
}

/// The evidence the plans may use: `profiles/measured.toml` and the `--from` documents.
fn evidence_of(o: &Options, note: &mut dyn FnMut(&str)) -> Result<Evidence> {
    let docs = crate::evidence::load_all(&o.from)?;
    for n in crate::evidence::document_notes(&docs) {
        note(&n);
    }
    Evidence::with_documents(&docs)
}
