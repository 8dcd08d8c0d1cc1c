//! One OS's job: its runner, its toolkit install, and its matrix entries (one per plan group,
//! or per GPU family of a group for Windows HIP), checked to be passable through a matrix.

use crate::emit::workflow::{Entry, Install, InstallKind, Job, JobBundle};
use crate::error::{Error, Result};
use crate::plan::{Group, Plan};
use crate::platform::Os;
use crate::profiles::Knowledge;
use crate::report::Backend;
use crate::toolkits::{RocmNoKernels, ToolkitTable};
use crate::version::ToolVersion;

use super::install::install;
use super::notes::{package_notes, wrap};

/// The default runner images, versioned rather than `-latest` so that a generated workflow does
/// not change under its user. Linux builds on the oldest supported Ubuntu (glibc 2.35), so the
/// packages run on as many distributions as possible. A quirk record's `effect.runner`
/// overrides them (Q18).
pub const LINUX_RUNNER: &str = "ubuntu-22.04";
pub const WINDOWS_RUNNER: &str = "windows-2022";

/// What every entry of a job shares: the OS's id, the toolkit and its version, the ref.
struct EntryContext<'a> {
    k: &'a Knowledge,
    id: &'static str,
    install: &'a Install,
    version: &'a ToolVersion,
    llama_ref: &'a str,
    /// Windows HIP: one entry per GPU family, each a shorter build with its own compiler
    /// cache (llama.cpp's windows-rocm job at build 11434 builds 20 targets in one job).
    split: bool,
    toolkit_word: &'static str,
}

/// One OS's job: runner, toolkit install, and the plan's groups as matrix entries.
pub(super) fn job(
    k: &Knowledge,
    tk: &ToolkitTable,
    os: Os,
    plan: &Plan,
    version: &ToolVersion,
    llama_ref: &str,
    build: u64,
) -> Result<Job> {
    let mut install = install(tk, plan.backend, os, version)?;
    install.comment = wrap(&install.comment.join(" "), 96, "");
    let (id, default_runner) = match os {
        Os::Windows => ("windows", WINDOWS_RUNNER),
        Os::Linux | Os::Wsl => ("linux", LINUX_RUNNER),
    };
    let (runner, runner_comment) = runner_for(k, plan, default_runner)?;
    let cx = EntryContext {
        k,
        id,
        install: &install,
        version,
        llama_ref,
        split: os == Os::Windows && plan.backend == Backend::Hip,
        toolkit_word: plan.backend.toolkit_option(),
    };
    let job_bundle = bundle(tk, plan.backend, os);
    let no_kernels = match plan.backend {
        Backend::Hip => tk.rocm.no_kernels_for(version.major_minor()),
        Backend::Cuda => Vec::new(),
    };
    let mut entries = Vec::new();
    for g in &plan.groups {
        let mut es = group_entries(&cx, g)?;
        for e in &mut es {
            e.bundle_data = entry_bundle_data(&job_bundle.data, &e.targets, &no_kernels);
        }
        entries.extend(es);
    }
    // Two entries whose GPUs share a name (a CUDA job with two groups) keep apart by group.
    let names: Vec<String> = entries.iter().map(|e| e.artifact.clone()).collect();
    for e in &mut entries {
        if names.iter().filter(|n| **n == e.artifact).count() > 1 {
            e.artifact = format!("{}-{}", e.artifact, e.group);
        }
    }
    let flags = tk.package_flags(os, |o| k.options.declared(o, build));
    let package_args = flags
        .iter()
        .map(|f| f.flag.clone())
        .collect::<Vec<_>>()
        .join(" ");
    let package_comment = flags
        .iter()
        .flat_map(|f| wrap(&format!("{}: {}", f.flag, f.why), 96, "  "))
        .collect();
    let notes = package_notes(&install.needs, plan);
    Ok(Job {
        id,
        runner,
        runner_comment,
        container: install.container.clone(),
        cli_needs: match (plan.backend, os) {
            (Backend::Cuda, Os::Windows) => "nvcuda.dll",
            (Backend::Cuda, _) => "libcuda-stub",
            (Backend::Hip, _) => "",
        },
        bundle: job_bundle,
        install,
        entries,
        package_args,
        package_comment,
        notes,
    })
}

/// An entry's `LIBRARY=FOLDER=TARGETS` pairs: each kernel folder of the job's bundle data with
/// the entry's targets (`;`-separated) that the toolkit builds that library's kernels for.
fn entry_bundle_data(data: &str, targets: &str, no_kernels: &[&RocmNoKernels]) -> String {
    data.split(';')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let folder = pair.split_once('=').map(|(_, f)| f).unwrap_or("");
            let covered: Vec<&str> = targets
                .split(';')
                .filter(|t| {
                    !t.is_empty()
                        && !no_kernels
                            .iter()
                            .any(|r| r.folder == folder && r.targets.iter().any(|x| x == t))
                })
                .collect();
            format!("{pair}={}", covered.join(","))
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// What the package step bundles for this backend and OS.
fn bundle(tk: &ToolkitTable, backend: Backend, os: Os) -> JobBundle {
    let b = match backend {
        Backend::Cuda => tk.cuda.bundle(),
        Backend::Hip => tk.rocm.bundle(),
    };
    JobBundle {
        driver_libs: b.driver_libs.get(os).join(" "),
        expect: b.bundle_expect.get(os).join(";"),
        extra: b.bundle_extra.get(os).join(";"),
        data: b.bundle_data.get(os).join(";"),
    }
}

/// The matrix entries of one plan group: one, or one per GPU family when the job splits.
fn group_entries(cx: &EntryContext<'_>, g: &Group) -> Result<Vec<Entry>> {
    check_matrix_flags(g)?;
    let (flag, no_vmm) = vmm_expectation(g);
    let vmm_words = match no_vmm {
        Some(true) => "legacy pool (VMM compiled out)",
        Some(false) => "VMM pool compiled in",
        None => "VMM decision not expressible in this build",
    };
    let reason = flag
        .and_then(|n| g.flag(n))
        .map(|f| f.reason.clone())
        .unwrap_or_else(|| "the build does not declare the VMM option".into());
    let mut entries = Vec::new();
    for (suffix, targets) in family_split(cx.k, &g.targets, cx.split) {
        let group = match suffix {
            Some(f) => format!("{}-{f}", g.name),
            None => g.name.clone(),
        };
        let mut args = g.cmake_args();
        for (f, a) in g.flags.iter().zip(args.iter_mut()) {
            if f.name == "CMAKE_CUDA_ARCHITECTURES" {
                *a = format!("-D{}={}", f.name, release_cuda_archs(&f.value));
            }
        }
        if suffix.is_some() {
            for (f, a) in g.flags.iter().zip(args.iter_mut()) {
                if ["GPU_TARGETS", "AMDGPU_TARGETS", "CMAKE_HIP_ARCHITECTURES"]
                    .contains(&f.name.as_str())
                {
                    *a = format!("-D{}={}", f.name, targets.join(";"));
                }
            }
        }
        entries.push(Entry {
            artifact: format!(
                "llama-{}-bin-{}-{}-{}{}-x64",
                sanitize(cx.llama_ref),
                if cx.id == "windows" { "win" } else { "ubuntu" },
                cx.toolkit_word,
                cx.version.text(),
                gpu_label(cx, &targets),
            ),
            group,
            targets: targets.join(";"),
            cmake_args: args.join(" "),
            vmm_flag: flag.unwrap_or("").to_string(),
            expect_no_vmm: match no_vmm {
                Some(true) => "1".into(),
                Some(false) => "0".into(),
                None => String::new(),
            },
            rocm_extras: if cx.install.kind == InstallKind::RocmWheels {
                targets
                    .iter()
                    .map(|t| format!("device-{t}"))
                    .collect::<Vec<_>>()
                    .join(",")
            } else {
                String::new()
            },
            bundle_data: String::new(),
            comment: wrap(
                &format!("{}: {vmm_words}: {reason}", targets.join(", ")),
                94,
                "",
            ),
        });
    }
    Ok(entries)
}

/// A release build's CUDA architecture list, as ggml's own default list is written: device code
/// only (`-real`) for every declared architecture, plus PTX (`-virtual`) for the newest one that
/// is not architecture-specific, which the driver compiles for GPUs newer than any in the list.
/// A bare entry builds both for every architecture (about twice the compile time and library
/// size). `12Xa`/`12Xf` PTX runs on no later GPU, so it gets none, as in ggml's default (whose
/// Blackwell entries are `120a-real`/`121a-real` alone). Entries already suffixed stay as given.
pub fn release_cuda_archs(value: &str) -> String {
    let archs: Vec<&str> = value.split(';').filter(|a| !a.is_empty()).collect();
    let bare = |a: &str| !a.contains('-');
    let newest_portable = archs
        .iter()
        .filter(|a| bare(a) && a.chars().all(|c| c.is_ascii_digit()))
        .max_by_key(|a| a.parse::<u32>().unwrap_or(0));
    let mut out: Vec<String> = archs
        .iter()
        .map(|a| {
            if bare(a) {
                format!("{a}-real")
            } else {
                (*a).to_string()
            }
        })
        .collect();
    if let Some(v) = newest_portable {
        out.push(format!("{v}-virtual"));
    }
    out.join(";")
}

/// The part of an asset's name that says which GPUs it is for: a HIP package's GPU families
/// (`-gfx110X-gfx120X`; a target in no family by its own name), as ROCm packages are told apart.
/// A CUDA package runs on every GPU its architecture list (and PTX) covers, so its name carries
/// none; the release notes' table lists the architectures of every asset.
fn gpu_label(cx: &EntryContext<'_>, targets: &[String]) -> String {
    if cx.toolkit_word != "rocm" {
        return String::new();
    }
    family_split(cx.k, targets, true)
        .into_iter()
        .map(|(family, members)| {
            format!(
                "-{}",
                family.map_or_else(|| members.join("-"), |f| f.to_string())
            )
        })
        .collect()
}

/// The runner image of a job, and why: a quirk that matched this plan (its warning is in the
/// plan) may name it (Q18 pins windows-2022 for Windows HIP builds), else the versioned default.
fn runner_for(k: &Knowledge, plan: &Plan, default_runner: &str) -> Result<(String, Vec<String>)> {
    // A quirk that matched this plan (its warning is in the plan) may name the runner image:
    // Q18 pins windows-2022 for Windows HIP builds.
    let from_quirk = plan
        .warnings
        .iter()
        .flat_map(|n| n.quirks.iter())
        .filter_map(|id| k.quirk(id))
        .find_map(|q| q.effect.runner.as_ref().map(|r| (r.clone(), q)));
    Ok(match from_quirk {
        Some((r, q)) => {
            if r.is_empty()
                || !r
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            {
                return Err(Error::input(
                    format!("quirk {}", q.id),
                    format!("effect.runner `{r}` is not a runner label"),
                    "write a GitHub runner image label such as windows-2022",
                ));
            }
            let why = wrap(
                &format!("{r}, not the newer images: {} ({}).", q.title, q.id),
                96,
                "",
            );
            (r, why)
        }
        None => (
            default_runner.to_string(),
            vec![format!(
                "{default_runner}: a versioned image, so the workflow does not change under its users."
            )],
        ),
    })
}

/// Flags reach the build through a workflow matrix: names are A-Z, 0-9, _; values have no
/// spaces or quotes (a quirk file could say otherwise).
fn check_matrix_flags(g: &Group) -> Result<()> {
    for f in &g.flags {
        let bad = |c: char| c.is_whitespace() || c.is_control() || "\"'`\\".contains(c);
        if f.name.is_empty()
            || !f
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
            || f.value.chars().any(bad)
        {
            let q = f.quirks.join(", ");
            return Err(Error::input(
                if q.is_empty() {
                    "plan".to_string()
                } else {
                    format!("quirk {q}")
                },
                format!(
                    "flag -D{}={} cannot be passed through a workflow matrix (names are A-Z, 0-9, _; values have no spaces or quotes)",
                    f.name, f.value
                ),
                "correct the quirk record's effect.set",
            ));
        }
    }
    Ok(())
}

/// `targets` as one list (`split` false), or split by the GPU family each target belongs to in
/// `profiles/targets.toml`, in order of first appearance (a target in no family stands alone).
fn family_split<'a>(
    k: &'a Knowledge,
    targets: &[String],
    split: bool,
) -> Vec<(Option<&'a str>, Vec<String>)> {
    if !split {
        return vec![(None, targets.to_vec())];
    }
    let mut out: Vec<(Option<&'a str>, Vec<String>)> = Vec::new();
    for t in targets {
        let family = k
            .targets
            .family
            .iter()
            .find(|f| f.members.contains(t))
            .map(|f| f.token.as_str())
            .or_else(|| k.targets.get(t).map(|x| x.name.as_str()));
        match out.iter_mut().find(|(f, _)| *f == family) {
            Some((_, list)) => list.push(t.clone()),
            None => out.push((family, vec![t.clone()])),
        }
    }
    out
}

/// The group's VMM flag and whether it compiles the VMM pool out (`Some(true)`), in
/// (`Some(false)`), or is not set (`None`).
pub(super) fn vmm_expectation(g: &Group) -> (Option<&'static str>, Option<bool>) {
    for name in ["GGML_HIP_NO_VMM", "GGML_CUDA_NO_VMM"] {
        if let Some(f) = g.flag(name) {
            return (Some(name), Some(f.value.eq_ignore_ascii_case("ON")));
        }
    }
    (None, None)
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}
