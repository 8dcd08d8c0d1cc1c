//! `gpuprobe workflow`: one plan per OS from the declared targets (without the targets that OS's
//! toolkit does not support), turned into a GitHub Actions release workflow (one job per OS, one
//! matrix entry per plan group, or per GPU family for Windows HIP; a release job), printed,
//! written atomically (`--output`) or compared with a file (`--check`, exit 1 and a unified diff
//! on drift).

use std::path::Path;

use anyhow::Result;

use super::cmake_flags::llama_target;
use super::print;
use crate::cli::{BackendChoice, WorkflowArgs};
use crate::emit::workflow::{
    self as wf, Entry, Job, JobBundle, Release, ToolVersion, Tools, Workflow,
};
use crate::error::{Error, exit};
use crate::llama::LlamaTarget;
use crate::plan::Plan;
use crate::profiles::Knowledge;
use crate::quirks::Os;
use crate::report::Backend;
use crate::resolve::{Devices, Request, resolve};
use crate::toolkits::ToolkitTable;

const LLAMA_REPOSITORY: &str = "ggml-org/llama.cpp";

pub fn run(a: &WorkflowArgs) -> Result<i32> {
    let k = Knowledge::load()?;
    if !k.user_quirk_files.is_empty() {
        let files: Vec<String> = k
            .user_quirk_files
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        crate::neutral::eprintln(&format!(
            "gpuprobe: note: user quirk files are part of this plan ({}); a CI job that runs `--check` needs the same files",
            files.join(", ")
        ));
    }
    let built = build(&k, a)?;
    for w in &built.warnings {
        crate::neutral::eprintln(&format!("gpuprobe: warning: {w}"));
    }
    if !built.refusals.is_empty() {
        for r in &built.refusals {
            crate::neutral::eprintln(&format!("gpuprobe: refused: {r}"));
        }
        return Ok(exit::PROBLEM);
    }
    let text = wf::render(&built.workflow)?;
    if let Some(path) = &a.check {
        return check(path, &text);
    }
    if let Some(path) = &a.output {
        // A fresh repository has no .github/workflows yet: make it, as workflow generators do,
        // and say so (a mistyped directory shows up here rather than as a silent new tree).
        let created = crate::files::create_parent_dirs(path, "--output")?;
        if let Some(dir) = created.first() {
            eprintln!(
                "gpuprobe: created directory {} (it did not exist)",
                dir.display()
            );
        }
        if let Err(e) = crate::files::write_atomic(path, text.as_bytes(), "--output") {
            crate::files::remove_dirs(&created);
            return Err(e.into());
        }
        crate::neutral::eprintln(&format!("gpuprobe: wrote {}", path.display()));
        return Ok(exit::OK);
    }
    print(&text)?;
    Ok(exit::OK)
}

/// The workflow, plus what the plans said that is not part of it.
struct Built {
    workflow: Workflow,
    warnings: Vec<String>,
    refusals: Vec<String>,
}

fn build(k: &Knowledge, a: &WorkflowArgs) -> Result<Built> {
    refuse_native(&a.targets)?;
    let targets = k.targets.expand(&a.targets)?;
    let oses = parse_oses(&a.os)?;
    let backend = a.backend.and_then(BackendChoice::backend);
    let rocm = a
        .rocm
        .as_deref()
        .map(|s| ToolVersion::parse("--rocm", s))
        .transpose()?;
    let cuda = a
        .cuda
        .as_deref()
        .map(|s| ToolVersion::parse("--cuda", s))
        .transpose()?;

    let (llama_ref, ref_build, build_number) = llama_ref_and_build(k, a)?;
    let llama = llama_target(None, build_number, k)?;
    let docs = crate::evidence::load_all(&a.from)?;
    let evidence = crate::evidence::Evidence::with_documents(&docs)?;

    let (per_os, dropped) = targets_per_os(k, &targets, &oses)?;

    let plans = plans_per_os(
        k,
        &per_os,
        backend,
        &llama,
        (rocm.as_ref(), cuda.as_ref()),
        &evidence,
    )?;
    let plan_backend = plans[0].1.backend;
    let version = toolkit_version(plan_backend, rocm.as_ref(), cuda.as_ref())?;

    let tk = ToolkitTable::bundled()?;
    let effective_build = llama.effective_build(&k.options);
    let mut refusals = Vec::new();
    let mut warnings: Vec<String> = dropped.clone();
    let mut jobs = Vec::new();
    for (os, plan) in &plans {
        for r in &plan.refusals {
            refusals.push(format!("{}: {}", os.as_str(), r.message));
        }
        for w in &plan.warnings {
            let text = w.message.clone();
            if !warnings.contains(&text) {
                warnings.push(text);
            }
        }
        jobs.push(job(
            k,
            &tk,
            *os,
            plan,
            &version,
            &llama_ref,
            effective_build,
        )?);
    }

    let backend_word = plan_backend.as_str();
    let toolkit = plan_backend.toolkit();
    let command = regenerate_command(
        a,
        &oses,
        plan_backend,
        version.text(),
        &llama_ref,
        (ref_build, llama.effective_build(&k.options)),
    )?;

    let mut header = vec![
        format!(
            "Builds llama.cpp {llama_ref} for {toolkit} {} with the flags gpuprobe resolved for each group of targets.",
            version.text()
        ),
        format!(
            "Generated by gpuprobe {}. Do not edit: regenerate with",
            env!("CARGO_PKG_VERSION")
        ),
        format!("  {command} --output <this file>"),
        "and let CI fail on drift with `--check <this file>` (exit 1 and a diff when out of date)."
            .into(),
        String::new(),
        format!(
            "Plan: llama.cpp options and quirks of build {} ({}); one job per OS, one matrix entry per group:",
            llama.effective_build(&k.options),
            if build_number.is_some() {
                "from --llama-ref/--llama-build"
            } else {
                "newest known build"
            }
        ),
    ];
    header.extend(group_lines(&plans));
    let notes = runtime_notes_of(&plans);
    header.extend(header_tail(&dropped, &notes));
    let release_notes = release_notes(&llama_ref, toolkit, version.text(), &notes);
    let needs = jobs.iter().map(|j| j.id).collect();
    Ok(Built {
        workflow: Workflow {
            name: format!("llama.cpp {llama_ref} ({toolkit} {})", version.text()),
            header,
            backend: backend_word,
            llama_repository: LLAMA_REPOSITORY.into(),
            llama_ref: llama_ref.clone(),
            expected_build: ref_build.map(|n| n.to_string()).unwrap_or_default(),
            jobs,
            tools: Tools {
                python: tk.build.python.clone(),
                pip: tk.pip_tools(),
            },
            release: Release {
                needs,
                notes: release_notes,
            },
        },
        warnings,
        refusals,
    })
}

/// One plan per OS, from the targets its job builds.
fn plans_per_os(
    k: &Knowledge,
    per_os: &[(Os, Vec<String>)],
    backend: Option<Backend>,
    llama: &LlamaTarget,
    (rocm, cuda): (Option<&ToolVersion>, Option<&ToolVersion>),
    evidence: &crate::evidence::Evidence,
) -> Result<Vec<(Os, Plan)>> {
    let mut plans: Vec<(Os, Plan)> = Vec::new();
    for (os, os_targets) in per_os {
        let req = Request {
            devices: Devices::Declared(os_targets.clone()),
            backend,
            llama: llama.clone(),
            rocm: rocm.map(|v| v.version().clone()),
            cuda: cuda.map(|v| v.version().clone()),
            rocm_source: "--rocm".into(),
            cuda_source: "--cuda".into(),
            os: *os,
            // The runner's environment, not this machine's: nothing is set there.
            env_set: Vec::new(),
            force_no_vmm: false,
            evidence: evidence.clone(),
        };
        plans.push((*os, resolve(k, &req)?));
    }
    Ok(plans)
}

/// One header line per OS and plan group: its targets and its pool.
fn group_lines(plans: &[(Os, Plan)]) -> Vec<String> {
    let mut header = Vec::new();
    for (os, plan) in plans {
        for g in &plan.groups {
            let vmm = match vmm_expectation(g) {
                (_, Some(true)) => "legacy pool",
                (_, Some(false)) => "VMM pool",
                (_, None) => "VMM not expressible",
            };
            header.extend(wrap(
                &format!(
                    "{}: {} [{}], {vmm}",
                    os.as_str(),
                    g.name,
                    g.targets.join(" ")
                ),
                96,
                "  ",
            ));
        }
    }
    header
}

/// The header's end: dropped targets, what a package holds, and the runtime notes.
fn header_tail(dropped: &[String], notes: &[String]) -> Vec<String> {
    let mut header = Vec::new();
    if !dropped.is_empty() {
        header.push(String::new());
        for d in dropped {
            header.extend(wrap(&format!("Dropped: {d}."), 96, "  "));
        }
    }
    header.push(String::new());
    header.push(
        "Packages: one archive per matrix entry (programs, their libraries and the GPU runtime, LICENSE,"
            .into(),
    );
    header.push(
        "README.package.txt), proven self-contained by a self-check; a v* tag publishes them with SHA256SUMS."
            .into(),
    );
    if !notes.is_empty() {
        header.push(String::new());
        header.push(
            "Runtime notes for the built binaries (also in each package's README.package.txt):"
                .into(),
        );
        for n in notes {
            header.extend(wrap(&format!("- {n}"), 96, "  "));
        }
    }
    header
}

/// The targets as typed (`--targets gfx1100,gfx120X`), for the regeneration command.
fn target_items(list: &str) -> Vec<&str> {
    list.split([',', ';', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// `native` detects the GPU of the build machine, and a CI build machine has none.
fn refuse_native(list: &str) -> Result<(), Error> {
    if let Some(n) = target_items(list)
        .iter()
        .find(|i| i.eq_ignore_ascii_case("native"))
    {
        return Err(Error::input(
            "--targets",
            format!(
                "`{n}` is not a target here: a CI build machine has no GPU for CMake to detect, so `native` builds for nothing or for the wrong GPU ({})",
                crate::quirks::ids::NATIVE_ARCH_IN_CI
            ),
            "name the architectures, e.g. --targets gfx1100,gfx120X or --targets sm_86,sm_90",
        ));
    }
    Ok(())
}

/// The llama.cpp ref to build, the build number a `bN` ref names, and the build number the plans
/// use (given, else the ref's; None: the newest known build, said on stderr).
fn llama_ref_and_build(
    k: &Knowledge,
    a: &WorkflowArgs,
) -> Result<(String, Option<u64>, Option<u64>)> {
    let llama_ref = match &a.llama_ref {
        Some(r) => {
            check_git_ref(r)?;
            r.clone()
        }
        None => format!("b{}", k.options.meta.newest_build),
    };
    let ref_build = llama_ref
        .strip_prefix('b')
        .and_then(|n| n.parse::<u64>().ok())
        .filter(|n| *n > 0);
    if let (Some(given), Some(from_ref)) = (a.llama_build, ref_build)
        && given != from_ref
    {
        return Err(Error::input(
            "--llama-build",
            format!("build {given} does not match --llama-ref {llama_ref} (build {from_ref})"),
            "leave --llama-build out (a bN ref gives the build), or make them agree",
        )
        .into());
    }
    let build_number = a.llama_build.or(ref_build);
    if build_number.is_none() {
        crate::neutral::eprintln(&format!(
            "gpuprobe: note: --llama-ref {llama_ref} is not a bN tag and --llama-build is not given: options and quirks are taken for the newest known build ({}), and the built binary's build number is not checked",
            k.options.meta.newest_build
        ));
    }
    Ok((llama_ref, ref_build, build_number))
}

/// The targets each OS's job builds, and what was dropped from a job and why: a target the OS's
/// toolkit does not support (Instinct on Windows ROCm) leaves that OS's job.
#[allow(clippy::type_complexity)]
fn targets_per_os(
    k: &Knowledge,
    targets: &[String],
    oses: &[Os],
) -> Result<(Vec<(Os, Vec<String>)>, Vec<String>), Error> {
    let mut dropped: Vec<String> = Vec::new();
    let mut per_os: Vec<(Os, Vec<String>)> = Vec::new();
    for os in oses {
        let (keep, drop): (Vec<String>, Vec<String>) = targets
            .iter()
            .cloned()
            .partition(|t| k.targets.get(t).is_none_or(|t| t.supported_on(*os)));
        if !drop.is_empty() {
            let why = drop
                .iter()
                .filter_map(|t| k.targets.get(t).and_then(|t| t.os_note.clone()))
                .next()
                .unwrap_or_else(|| "its toolkit does not support them".into());
            dropped.push(format!(
                "{} dropped from the {} job: {why}",
                drop.join(", "),
                os.as_str()
            ));
        }
        if keep.is_empty() {
            return Err(Error::input(
                "--targets",
                format!(
                    "no target is left for {}: {}",
                    os.as_str(),
                    dropped.last().map(String::as_str).unwrap_or("")
                ),
                format!(
                    "leave {} out of --os, or add targets it supports",
                    os.as_str()
                ),
            ));
        }
        per_os.push((*os, keep));
    }
    Ok((per_os, dropped))
}

/// The version of the toolkit the workflow installs: the one given for the plans' backend.
fn toolkit_version(
    plan_backend: Backend,
    rocm: Option<&ToolVersion>,
    cuda: Option<&ToolVersion>,
) -> Result<ToolVersion, Error> {
    let version = match (plan_backend, rocm, cuda) {
        (Backend::Hip, Some(v), None) => v.clone(),
        (Backend::Cuda, None, Some(v)) => v.clone(),
        (Backend::Hip, None, Some(_)) => {
            return Err(Error::input(
                "--cuda",
                "the targets are AMD GPUs, built with ROCm",
                "give --rocm VER instead, e.g. --rocm 7.2.1 or --rocm 7.14.0",
            ));
        }
        (Backend::Cuda, Some(_), None) => {
            return Err(Error::input(
                "--rocm",
                "the targets are NVIDIA GPUs, built with CUDA",
                "give --cuda VER instead, e.g. --cuda 12.8",
            ));
        }
        (Backend::Hip, None, None) => {
            return Err(Error::input(
                "--rocm",
                "the workflow installs ROCm, and needs its version",
                "give --rocm VER, e.g. --rocm 7.2.1 (AMD's rocm/dev image, Linux) or --rocm 7.14.0 (TheRock wheels)",
            ));
        }
        (Backend::Cuda, None, None) => {
            return Err(Error::input(
                "--cuda",
                "the workflow installs CUDA, and needs its version",
                "give --cuda VER, e.g. --cuda 12.8",
            ));
        }
        (_, Some(_), Some(_)) => {
            return Err(Error::input(
                "--rocm/--cuda",
                "give the version of one toolkit only",
                "drop --rocm or --cuda",
            ));
        }
    };
    Ok(version)
}

/// The command that regenerates this workflow, for its header.
fn regenerate_command(
    a: &WorkflowArgs,
    oses: &[Os],
    plan_backend: Backend,
    version: &str,
    llama_ref: &str,
    (ref_build, effective_build): (Option<u64>, u64),
) -> Result<String, Error> {
    let mut command = format!(
        "gpuprobe workflow --targets {} --os {}",
        target_items(&a.targets).join(","),
        oses.iter()
            .map(|o| o.as_str())
            .collect::<Vec<_>>()
            .join(",")
    );
    if let Some(b) = a.backend.and_then(BackendChoice::backend) {
        command.push_str(&format!(" --backend {}", b.as_str()));
    }
    command.push_str(&format!(" --{} {}", plan_backend.toolkit_option(), version));
    command.push_str(&format!(" --llama-ref {llama_ref}"));
    for p in &a.from {
        command.push_str(&format!(" --from {}", shown_path(p)?));
    }
    if a.llama_build.is_some() && ref_build.is_none() {
        command.push_str(&format!(" --llama-build {effective_build}"));
    }
    Ok(command)
}

/// Everything the plans say about running the built binaries, once, with the OS where it
/// applies to one OS only.
fn runtime_notes_of(plans: &[(Os, Plan)]) -> Vec<String> {
    let per_os_notes: Vec<(Os, Vec<String>)> = plans
        .iter()
        .map(|(os, p)| (*os, runtime_notes(p)))
        .collect();
    let mut notes: Vec<String> = Vec::new();
    for (os, list) in &per_os_notes {
        for n in list {
            let everywhere = per_os_notes.iter().all(|(_, l)| l.contains(n));
            let line = if everywhere || per_os_notes.len() == 1 {
                n.clone()
            } else {
                format!("[{}] {n}", os.as_str())
            };
            if !notes.contains(&line) {
                notes.push(line);
            }
        }
    }
    notes
}

/// The text of the GitHub release a `v*` tag publishes.
fn release_notes(llama_ref: &str, toolkit: &str, version: &str, notes: &[String]) -> String {
    let mut release_notes = format!(
        "llama.cpp {llama_ref} built for {toolkit} {} by a workflow that gpuprobe generated.\n\n\
         Each archive holds one build group's programs and libraries, the GPU runtime libraries they load, \
         LICENSE and README.package.txt (contents, what the machine needs, runtime notes). \
         Every archive passed a self-check: unpacked alone, every library it loads comes from the package, \
         the base system or the GPU driver, and llama-cli --version runs in a clean environment. \
         SHA256SUMS lists the checksums.\n",
        version
    );
    if !notes.is_empty() {
        release_notes.push_str("\nRuntime notes:\n\n");
        for n in notes {
            release_notes.push_str(&format!("- {n}\n"));
        }
    }
    release_notes
}

/// What a plan says about running the built binaries: its warnings, what may apply, and the
/// runtime environment it advises, each once.
fn runtime_notes(plan: &Plan) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: String| {
        if !out.contains(&s) {
            out.push(s);
        }
    };
    for n in plan.warnings.iter().chain(&plan.notes) {
        push(n.message.clone());
    }
    for g in &plan.groups {
        for e in &g.env {
            let when = e
                .when
                .as_deref()
                .map(|w| format!(" when {w}"))
                .unwrap_or_default();
            push(format!(
                "run the {} build ({}) with {}={}{when}: {}",
                g.name,
                g.targets.join(", "),
                e.name,
                e.value,
                e.reason
            ));
        }
    }
    out
}

/// One OS's job: runner, toolkit install, and the plan's groups as matrix entries.
fn job(
    k: &Knowledge,
    tk: &ToolkitTable,
    os: Os,
    plan: &Plan,
    version: &ToolVersion,
    llama_ref: &str,
    build: u64,
) -> Result<Job> {
    let mut install = wf::install(tk, plan.backend, os, version)?;
    install.comment = wrap(&install.comment.join(" "), 96, "");
    let (id, default_runner) = match os {
        Os::Windows => ("windows", wf::WINDOWS_RUNNER),
        Os::Linux | Os::Wsl => ("linux", wf::LINUX_RUNNER),
    };
    let (runner, runner_comment) = runner_for(k, plan, default_runner)?;
    let toolkit_word = plan.backend.toolkit_option();
    let mut entries = Vec::new();
    for g in &plan.groups {
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
        // Windows HIP: one entry per GPU family, each a shorter build with its own compiler
        // cache (llama.cpp's windows-rocm job at build 11434 builds 20 targets in one job).
        let split = os == Os::Windows && plan.backend == Backend::Hip;
        for (suffix, targets) in family_split(k, &g.targets, split) {
            let group = match suffix {
                Some(f) => format!("{}-{f}", g.name),
                None => g.name.clone(),
            };
            let mut args = g.cmake_args();
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
                group: group.clone(),
                targets: targets.join(";"),
                cmake_args: args.join(" "),
                vmm_flag: flag.unwrap_or("").to_string(),
                expect_no_vmm: match no_vmm {
                    Some(true) => "1".into(),
                    Some(false) => "0".into(),
                    None => String::new(),
                },
                artifact: format!(
                    "llama-{}-{id}-{toolkit_word}{}-{group}",
                    sanitize(llama_ref),
                    version.text(),
                ),
                rocm_extras: if install.kind == crate::emit::workflow::InstallKind::RocmWheels {
                    targets
                        .iter()
                        .map(|t| format!("device-{t}"))
                        .collect::<Vec<_>>()
                        .join(",")
                } else {
                    String::new()
                },
                comment: wrap(
                    &format!("{}: {vmm_words}: {reason}", targets.join(", ")),
                    94,
                    "",
                ),
            });
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
    let b = match plan.backend {
        Backend::Cuda => tk.cuda.bundle(),
        Backend::Hip => tk.rocm.bundle(),
    };
    let bundle = JobBundle {
        driver_libs: b.driver_libs.get(os).join(" "),
        expect: b.bundle_expect.get(os).join(";"),
        extra: b.bundle_extra.get(os).join(";"),
        data: b.bundle_data.get(os).join(";"),
    };
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
        ccache: os == Os::Windows && plan.backend == Backend::Hip,
        install,
        entries,
        package_args,
        package_comment,
        bundle,
        notes,
    })
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
                )
                .into());
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
fn check_matrix_flags(g: &crate::plan::Group) -> Result<()> {
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
                if q.is_empty() { "plan".to_string() } else { format!("quirk {q}") },
                format!("flag -D{}={} cannot be passed through a workflow matrix (names are A-Z, 0-9, _; values have no spaces or quotes)", f.name, f.value),
                "correct the quirk record's effect.set",
            )
            .into());
        }
    }
    Ok(())
}

/// The package README's notes: what the machine needs, and what the plan says about run time.
fn package_notes(needs: &str, plan: &Plan) -> String {
    let mut notes = format!("  - {needs}\n");
    let runtime = runtime_notes(plan);
    if !runtime.is_empty() {
        notes.push_str("\nAt run time:\n");
        for n in runtime {
            for (i, line) in wrap(&n, 94, "    ").into_iter().enumerate() {
                notes.push_str(if i == 0 { "  - " } else { "" });
                notes.push_str(&line);
                notes.push('\n');
            }
        }
    }
    notes
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
fn vmm_expectation(g: &crate::plan::Group) -> (Option<&'static str>, Option<bool>) {
    for name in ["GGML_HIP_NO_VMM", "GGML_CUDA_NO_VMM"] {
        if let Some(f) = g.flag(name) {
            return (Some(name), Some(f.value.eq_ignore_ascii_case("ON")));
        }
    }
    (None, None)
}

fn parse_oses(list: &str) -> Result<Vec<Os>, Error> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let os = match item.to_ascii_lowercase().as_str() {
            "linux" | "ubuntu" => Os::Linux,
            "windows" => Os::Windows,
            _ => {
                return Err(Error::input(
                    "--os",
                    format!("unknown OS `{item}`"),
                    "use linux, windows or linux,windows",
                ));
            }
        };
        if !out.contains(&os) {
            out.push(os);
        }
    }
    if out.is_empty() {
        return Err(Error::input(
            "--os",
            "no operating system given",
            "use linux, windows or linux,windows",
        ));
    }
    Ok(out)
}

/// A git ref that can go into the workflow as data: tag, branch or commit, the characters of
/// `git check-ref-format` minus everything a shell or YAML would read specially.
fn check_git_ref(r: &str) -> Result<(), Error> {
    let ok_chars = r
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c));
    let ok_shape = !r.is_empty()
        && r.len() <= 200
        && !r.starts_with(['-', '/', '.'])
        && !r.ends_with(['/', '.'])
        && !r.contains("..")
        && !r.contains("//")
        && !r.ends_with(".lock");
    if ok_chars && ok_shape {
        Ok(())
    } else {
        Err(Error::input(
            "--llama-ref",
            format!("`{r}` is not a git tag, branch or commit that gpuprobe can put in a workflow"),
            "use a release tag such as b11434, a branch name or a commit hash (letters, digits, . _ / -)",
        ))
    }
}

/// A `--from` path as it may appear in the workflow's header comment: plain characters only.
fn shown_path(p: &Path) -> Result<String, Error> {
    let text = p.display().to_string();
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/-+".contains(c))
    {
        Ok(text)
    } else {
        Err(Error::input(
            "--from",
            format!("`{text}` cannot be written into the workflow's regenerate command"),
            "use a path of letters, digits and . _ / - +",
        ))
    }
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

/// Splits `text` into comment lines of at most `width` characters (longer words stay whole);
/// continuation lines start with `indent`.
fn wrap(text: &str, width: usize, indent: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
            line.push_str(indent);
        }
        if !line.is_empty() && !line.ends_with(' ') {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.trim().is_empty() {
        lines.push(line);
    }
    lines
}

/// `--check FILE`: 0 when FILE is what would be generated, 1 with a unified diff on stdout when not.
fn check(path: &Path, text: &str) -> Result<i32> {
    let (current, missing) = match crate::files::read_bytes(path, crate::files::MAX_INPUT_BYTES) {
        Ok(b) => (String::from_utf8_lossy(&b).replace("\r\n", "\n"), false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), true),
        Err(e) => {
            return Err(Error::input(
                format!("--check {}", path.display()),
                format!("cannot read: {e}"),
                "give the path of the workflow file to compare",
            )
            .into());
        }
    };
    if !missing && current == text {
        crate::neutral::eprintln(&format!("gpuprobe: {} is up to date", path.display()));
        return Ok(exit::OK);
    }
    let name = path.display().to_string();
    print(&diff::unified(
        &current,
        text,
        &name,
        &format!("{name} (generated)"),
        3,
    ))?;
    if missing {
        crate::neutral::eprintln(&format!(
            "gpuprobe: {name} does not exist; write it with the same arguments and --output {name}"
        ));
    } else {
        crate::neutral::eprintln(&format!(
            "gpuprobe: {name} is out of date; regenerate it with the same arguments and --output {name}"
        ));
    }
    Ok(exit::PROBLEM)
}

/// A line diff in unified format, as `diff -u` writes it.
mod diff {
    pub fn unified(old: &str, new: &str, old_name: &str, new_name: &str, context: usize) -> String {
        // Compared line by line, as the lines are read: a missing final newline is no change.
        let ended = |s: &str| {
            if s.is_empty() || s.ends_with('\n') {
                s.to_string()
            } else {
                format!("{s}\n")
            }
        };
        let (old, new) = (ended(old), ended(new));
        let hunks = similar::TextDiff::from_lines(&old, &new)
            .unified_diff()
            .context_radius(context)
            .to_string();
        format!("--- {old_name}\n+++ {new_name}\n{hunks}")
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn shows_a_changed_line_with_context() {
            let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
            let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
            let d = super::unified(old, new, "x", "y", 3);
            assert_eq!(
                d,
                "--- x\n+++ y\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"
            );
        }

        #[test]
        fn a_missing_final_newline_is_no_change() {
            let d = super::unified("a\nb", "a\nB\n", "x", "y", 3);
            assert_eq!(d, "--- x\n+++ y\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n");
            assert_eq!(super::unified("a", "a\n", "x", "y", 3), "--- x\n+++ y\n");
        }

        #[test]
        fn diffs_against_an_empty_file() {
            let d = super::unified("", "a\nb\n", "x", "y", 3);
            assert_eq!(d, "--- x\n+++ y\n@@ -0,0 +1,2 @@\n+a\n+b\n");
        }

        #[test]
        fn separates_distant_changes_into_hunks() {
            let old: String = (0..30).map(|i| format!("{i}\n")).collect();
            let new: String = (0..30)
                .map(|i| match i {
                    3 => "three\n".to_string(),
                    25 => "twenty-five\n".to_string(),
                    _ => format!("{i}\n"),
                })
                .collect();
            let d = super::unified(&old, &new, "x", "y", 3);
            assert_eq!(d.matches("@@ -").count(), 2, "{d}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_comment_lines() {
        assert_eq!(wrap("aaa bbb ccc", 7, "  "), vec!["aaa bbb", "  ccc"]);
        assert_eq!(wrap("", 7, ""), Vec::<String>::new());
    }

    #[test]
    fn accepts_only_plain_git_refs() {
        for ok in [
            "b11434",
            "master",
            "feature/x-1",
            "0123456789abcdef0123456789abcdef01234567",
        ] {
            assert!(check_git_ref(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "$(touch x)",
            "-rf",
            "a..b",
            "a b",
            "x;y",
            "v1.lock",
            "a\nb",
            "${{ github.token }}",
        ] {
            assert!(check_git_ref(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_os_lists() {
        assert_eq!(
            parse_oses("linux, windows,linux").unwrap(),
            vec![Os::Linux, Os::Windows]
        );
        assert!(parse_oses("macos").is_err());
        assert!(parse_oses(" , ").is_err());
    }
}
