use std::path::Path;

use anyhow::Result;

use super::detect::probe_options;
use super::print;
use crate::cli::{CmakeFlagsArgs, Format, OsChoice};
use crate::devices::{fleet, host_os, machine_gpus, plan_backends};
use crate::emit;
use crate::evidence::Document;
use crate::host::toolchain;
use crate::llama::LlamaTarget;
use crate::plan::Mode;
use crate::platform::Os;
use crate::profiles::Knowledge;
use crate::report::{Backend, Report};
use crate::resolve::{Devices, Request, resolve};
use crate::version::Version;

fn parse_version(flag: &str, s: &str) -> Result<Version> {
    s.parse::<Version>().map_err(|e| {
        crate::Error::input(flag, e.to_string(), "give a version such as 6.4.1 or 12.8").into()
    })
}

pub fn run(a: &CmakeFlagsArgs) -> Result<i32> {
    // Usage errors first, before any probing or planning.
    let github_output = github_output(a)?;
    let k = Knowledge::load()?;
    let (llama, notes) = LlamaTarget::select(a.llama_cpp.as_deref(), a.llama_build, &k.options)?;
    for n in &notes {
        super::note(n);
    }
    let (mut kits, auto_toolchain) = toolkits_given(a)?;

    // --from: every document is evidence; without --targets/--machine the reports are also
    // what to plan for (one report: that machine; several: the union of their GPUs).
    let docs = crate::evidence::load_all(&a.from)?;
    for n in crate::evidence::document_notes(&docs) {
        super::note(&n);
    }
    let evidence = crate::evidence::Evidence::with_documents(&docs)?;
    let report_owned: Report;
    let (devices, fleet_os, fleet_series) = match declared_devices(&k, a, &docs)? {
        Some(d) => d,
        None => {
            report_owned = probe_here(a)?;
            let devices = Devices::Measured {
                report: &report_owned,
                mode: Mode::Probe,
            };
            (devices, None, None)
        }
    };
    let report = match &devices {
        Devices::Measured { report, .. } => Some(*report),
        Devices::Declared(_) | Devices::Machine(_) => None,
    };
    let backend = a.probe.backend.backend();
    name_targets_outside_backend(&k, backend, &devices);
    let backends = plan_backends(&k, backend, &devices);
    if auto_toolchain {
        kits.find(&backends);
    }
    name_unused_toolkits(a, &backends);
    if kits.rocm.is_none()
        && let Some(v) = fleet_series
    {
        super::note(&format!(
            "ROCm {v}: the runtime every report measured (override with --rocm VER)"
        ));
        kits.rocm = Some(v);
        kits.rocm_source = "the reports' HIP runtime".into();
    }
    let os = match a.os {
        Some(OsChoice::Linux) => Os::Linux,
        Some(OsChoice::Windows) => Os::Windows,
        Some(OsChoice::Wsl) => Os::Wsl,
        None => fleet_os.unwrap_or_else(|| host_os(report)),
    };
    let env_set = match report {
        Some(r) => r.environment.iter().map(|e| e.name.clone()).collect(),
        None => crate::probe::env::set_names(),
    };
    let req = Request {
        devices,
        backend,
        llama,
        rocm: kits.rocm,
        cuda: kits.cuda,
        rocm_source: kits.rocm_source,
        cuda_source: kits.cuda_source,
        os,
        env_set,
        force_no_vmm: a.force_no_vmm,
        evidence,
    };
    let mut plan = resolve(&k, &req)?;
    if report.is_none() {
        // The resolver names these from a measured report; where nothing was measured, the
        // planning shell's own values are all there is (quirks matched on their names, Q9, Q29).
        for e in crate::probe::env::notices() {
            plan.warnings.push(crate::plan::Note {
                severity: crate::quirks::Severity::Medium,
                message: format!(
                    "{}={} is set where this plan is made: {}",
                    e.name,
                    crate::neutral::inline(&e.value),
                    e.effect
                ),
                quirks: Vec::new(),
                targets: Vec::new(),
            });
        }
    }
    if a.explain {
        super::eprint(&emit::explain(&plan, &k));
    }
    if plan.refused() && a.format != Format::Json {
        for r in &plan.refusals {
            super::eprint(&format!(
                "gpuprobe: refused: {}\n",
                crate::neutral::inline(&r.message)
            ));
        }
        return Ok(crate::error::exit::PROBLEM);
    }
    print_plan(a, &plan, github_output.as_deref())?;
    Ok(if plan.refused() {
        crate::error::exit::PROBLEM
    } else {
        0
    })
}

/// `--format github` writes to `$GITHUB_OUTPUT`: a usage error outside GitHub Actions.
fn github_output(a: &CmakeFlagsArgs) -> Result<Option<std::ffi::OsString>, crate::Error> {
    Ok(match a.format {
        Format::Github => Some(
            std::env::var_os("GITHUB_OUTPUT")
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    crate::Error::input(
                        "--format github",
                        "GITHUB_OUTPUT is not set (not running in GitHub Actions)",
                        "use --format json or shell outside GitHub Actions",
                    )
                })?,
        ),
        _ => None,
    })
}

/// The toolkit versions a plan is for, and where each came from.
struct Toolkits {
    rocm: Option<Version>,
    cuda: Option<Version>,
    rocm_source: String,
    cuda_source: String,
}

/// `--backend` picks one backend out of declared targets of both vendors (llama.cpp builds one
/// backend at a time); the targets it leaves out are named with the call that plans them.
fn name_targets_outside_backend(k: &Knowledge, backend: Option<Backend>, devices: &Devices<'_>) {
    let (Some(b), Devices::Declared(names) | Devices::Machine(names)) = (backend, devices) else {
        return;
    };
    let outside: Vec<&str> = names
        .iter()
        .filter(|n| {
            k.targets
                .get(n.as_str())
                .is_some_and(|t| t.vendor.backend() != b)
        })
        .map(String::as_str)
        .collect();
    if outside.is_empty() {
        return;
    }
    let other = match b {
        Backend::Cuda => Backend::Hip,
        Backend::Hip => Backend::Cuda,
    };
    super::warn(&format!(
        "--backend {} leaves out {} (the {} backend builds them): this plan is not for them; \
         plan them with the same arguments and --backend {}",
        b.as_str(),
        outside.join(", "),
        other.name(),
        other.as_str()
    ));
}

/// A toolkit version given for a backend no target of the plan uses changes nothing: say so
/// instead of dropping it in silence.
fn name_unused_toolkits(a: &CmakeFlagsArgs, backends: &[Backend]) {
    for (given, backend, flag) in [
        (a.cuda.as_deref(), Backend::Cuda, "--cuda"),
        (a.rocm.as_deref(), Backend::Hip, "--rocm"),
    ] {
        if let Some(v) = given
            && !backends.contains(&backend)
        {
            super::warn(&format!(
                "{flag} {} is not used: no GPU of this plan needs {} (drop {flag}, or add its targets)",
                crate::neutral::inline(v),
                backend.name()
            ));
        }
    }
}

/// The toolkits given (`--rocm`, `--cuda`, a `--toolchain` path, checked before anything is
/// probed), and whether to look for them (`--toolchain auto` with no version given).
fn toolkits_given(a: &CmakeFlagsArgs) -> Result<(Toolkits, bool)> {
    let mut rocm = a
        .rocm
        .as_deref()
        .map(|s| parse_version("--rocm", s))
        .transpose()?;
    let mut cuda = a
        .cuda
        .as_deref()
        .map(|s| parse_version("--cuda", s))
        .transpose()?;
    let mut rocm_source = "--rocm".to_string();
    let mut cuda_source = "--cuda".to_string();
    // An explicit toolkit path is input: checked before anything is probed. `auto` asks only
    // for the toolkits of the backend(s) the plan is about, once the devices are known.
    let auto_toolchain = match a.toolchain.as_str() {
        "none" => false,
        "auto" => rocm.is_none() && cuda.is_none(),
        path => {
            let p = Path::new(path);
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            let found = if name.starts_with("nvcc") {
                toolchain::cuda_version(Some(p)).map(|(v, s)| (Backend::Cuda, v, s))
            } else {
                toolchain::rocm_version(Some(p)).map(|(v, s)| (Backend::Hip, v, s))
            };
            match found {
                Some((Backend::Cuda, v, s)) => {
                    cuda = Some(v);
                    cuda_source = s;
                }
                Some((Backend::Hip, v, s)) => {
                    rocm = Some(v);
                    rocm_source = s;
                }
                None => {
                    return Err(crate::Error::input(
                        "--toolchain",
                        format!("`{path}` did not report a version (expected nvcc or hipconfig)"),
                        "pass the path of nvcc or hipconfig, or `auto`, or give --cuda/--rocm",
                    )
                    .into());
                }
            }
            false
        }
    };
    Ok((
        Toolkits {
            rocm,
            cuda,
            rocm_source,
            cuda_source,
        },
        auto_toolchain,
    ))
}

/// The devices to plan for when they are given: declared targets, a declared machine, one
/// report, or the union of several (with the OS and runtime series they share). None: probe
/// this machine.
#[allow(clippy::type_complexity)]
fn declared_devices<'a>(
    k: &Knowledge,
    a: &CmakeFlagsArgs,
    docs: &'a [(std::path::PathBuf, Document)],
) -> Result<Option<(Devices<'a>, Option<Os>, Option<Version>)>> {
    let reports: Vec<&Report> = docs
        .iter()
        .filter_map(|(_, d)| match d {
            Document::Report(r) => Some(r),
            Document::Exercise(_) | Document::Inference(_) | Document::Nodes(_) => None,
        })
        .collect();
    let members = fleet_members(docs);
    let mut fleet_os: Option<Os> = None;
    let mut fleet_series: Option<Version> = None;
    let devices = if let Some(list) = &a.targets {
        Devices::Declared(k.targets.expand(list)?)
    } else if let Some(list) = &a.machine {
        Devices::Machine(machine_gpus(k, list)?)
    } else if let ([one], 1) = (reports.as_slice(), members.len()) {
        let origin = docs
            .iter()
            .find(|(_, d)| matches!(d, Document::Report(_)))
            .map(|(p, _)| p.display().to_string())
            .unwrap_or_else(|| "--from".into());
        crate::report_file::require_devices(one, &origin)?;
        Devices::Measured {
            report: one,
            mode: Mode::Report,
        }
    } else if !members.is_empty() {
        let fleet = fleet(k, &members)?;
        for u in &fleet.unknown {
            super::note(u);
        }
        fleet_os = fleet.os;
        fleet_series = fleet.hip_series;
        Devices::Declared(fleet.archs)
    } else if !docs.is_empty() {
        return Err(crate::Error::input(
            "--from",
            "exercise documents are evidence only: they say whether a build passed, not which GPUs to plan for",
            "add --targets LIST, --machine LIST, or a `gpuprobe detect --json` report",
        )
        .into());
    } else {
        return Ok(None);
    };
    Ok(Some((devices, fleet_os, fleet_series)))
}

/// Every machine the documents describe: each report, and each labelled node of a dump (whose
/// unlabelled nodes and unreadable labels are named here, once).
fn fleet_members(docs: &[(std::path::PathBuf, Document)]) -> Vec<crate::devices::Member> {
    let mut members = Vec::new();
    for (path, d) in docs {
        let origin = path.display().to_string();
        match d {
            Document::Report(r) => members.push(crate::devices::Member::of_report(r, &origin)),
            Document::Nodes(n) => {
                members.extend(
                    n.nodes
                        .iter()
                        .map(|node| crate::devices::Member::of_node(node, &origin)),
                );
            }
            Document::Exercise(_) | Document::Inference(_) => {}
        }
    }
    members
}

/// Probes this machine; finding no GPU is an error here (there is nothing to plan for).
fn probe_here(a: &CmakeFlagsArgs) -> Result<Report> {
    let report = crate::probe::detect(&probe_options(&a.probe)?);
    if report.devices.is_empty() {
        super::eprint(&super::detect::table(&report));
        return Err(crate::Error::Environment {
            message: "no GPU found to plan for".into(),
            // A command that runs as pasted, whatever toolkit this machine has: the version given
            // means no local hipcc or nvcc is asked (an old one would refuse newer targets).
            fix: "declare the targets and the toolkit that will build them: \
                  gpuprobe cmake-flags --targets gfx1100,gfx120X --rocm 7.2.1   # NVIDIA: --targets sm_86,sm_90 --cuda 12.8"
                .into(),
        }
        .into());
    }
    Ok(report)
}

impl Toolkits {
    /// `--toolchain auto`: the toolkits on this machine, for the backends the plan is about.
    fn find(&mut self, wanted: &[Backend]) {
        if wanted.contains(&Backend::Cuda)
            && let Some((v, src)) = toolchain::cuda_version(None)
        {
            super::note(&format!(
                "CUDA {v} from `{src}` (override with --cuda VER, or --toolchain none)"
            ));
            self.cuda = Some(v);
            self.cuda_source = src;
        }
        if wanted.contains(&Backend::Hip)
            && let Some((v, src)) = toolchain::rocm_version(None)
        {
            super::note(&format!(
                "ROCm {v} from `{src}` (override with --rocm VER, or --toolchain none)"
            ));
            self.rocm = Some(v);
            self.rocm_source = src;
        }
    }
}

/// Prints the plan in the format asked for.
fn print_plan(
    a: &CmakeFlagsArgs,
    plan: &crate::plan::Plan,
    github_output: Option<&std::ffi::OsStr>,
) -> Result<()> {
    match a.format {
        Format::Shell => print(&emit::shell::render(plan))?,
        Format::Json => super::print_json(&emit::json(plan))?,
        Format::Preset => super::print_json(&emit::preset::render(plan)?)?,
        Format::Args => {
            let configure = configure(a, plan);
            if let Some(m) = &configure.missing {
                super::warn(m);
            }
            print(&args_lines(a, plan, &configure)?)?
        }
        Format::Github => {
            // Checked before planning: present here.
            let Some(output) = github_output else {
                return Ok(());
            };
            let summary = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|v| !v.is_empty());
            let annotations = emit::github::write(
                plan,
                &configure(a, plan),
                Path::new(output),
                summary.as_deref().map(Path::new),
            )?;
            super::print_commands(&annotations)?;
        }
    }
    Ok(())
}

/// What `--format args` and `github` add for the configure on this machine: ROCm's clang for a
/// HIP plan, found as llama.cpp's docs find it (`$(hipconfig -l)/clang`). Not found, a warning
/// says what to add, since CMake could otherwise pick another clang or none.
fn configure(a: &CmakeFlagsArgs, plan: &crate::plan::Plan) -> emit::Configure {
    if plan.backend != Backend::Hip {
        return emit::Configure::default();
    }
    if std::env::var_os("HIPCXX").is_some_and(|v| !v.is_empty()) {
        super::note(
            "HIPCXX is set here: CMake takes the HIP compiler from it (no -DCMAKE_HIP_COMPILER added)",
        );
        return emit::Configure::default();
    }
    let found = match a.toolchain.as_str() {
        "none" => Err("it was not looked for (--toolchain none)".to_string()),
        "auto" => toolchain::hip_clang(None),
        path => toolchain::hip_clang(Some(Path::new(path))),
    };
    // The path goes into a `-D` value and the `cmake-args` output, read as words: one that a
    // shell would split or CMake would read as a list (`;` makes the rest compiler arguments)
    // is not written, and the warning says how to give it instead.
    let found = found.and_then(|clang| {
        let arg = format!("-DCMAKE_HIP_COMPILER={}", clang.display());
        if crate::neutral::is_plain_word(&arg) && !arg.contains(';') {
            Ok(clang)
        } else {
            Err(format!(
                "its path `{}` holds a space, `;`, quote or other character a CMake argument cannot carry as one word",
                crate::neutral::inline(&clang.display().to_string())
            ))
        }
    });
    match found {
        Ok(clang) => emit::Configure {
            hip_compiler: Some(clang.display().to_string()),
            missing: None,
        },
        Err(why) => emit::Configure {
            hip_compiler: None,
            missing: Some(format!(
                "no ROCm clang for the configure: {why}. llama.cpp's docs build HIP with HIPCXX=\"$(hipconfig -l)/clang\": set it where you configure, or add -DCMAKE_HIP_COMPILER=<ROCm>/llvm/bin/clang"
            )),
        },
    }
}

/// `--format args`: one line per group, or the one `--group` names.
fn args_lines(
    a: &CmakeFlagsArgs,
    plan: &crate::plan::Plan,
    configure: &emit::Configure,
) -> Result<String> {
    let groups: Vec<_> = match &a.group {
        Some(name) => {
            let g: Vec<_> = plan.groups.iter().filter(|g| &g.name == name).collect();
            if g.is_empty() {
                let names: Vec<&str> = plan.groups.iter().map(|g| g.name.as_str()).collect();
                return Err(crate::Error::input(
                    "--group",
                    format!("no group named `{name}`"),
                    format!("use one of: {}", names.join(", ")),
                )
                .into());
            }
            g
        }
        None => plan.groups.iter().collect(),
    };
    if groups.len() > 1 {
        crate::neutral::eprintln(&format!(
            "gpuprobe: note: {} build groups, one line each ({}); pick one with --group",
            groups.len(),
            groups
                .iter()
                .map(|g| g.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let lines = groups
        .iter()
        .map(|g| emit::args::render(g, configure))
        .collect::<Result<String, _>>()?;
    Ok(lines)
}
