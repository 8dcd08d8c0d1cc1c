//! The resolver: devices (measured or declared) + toolkit + llama.cpp build + quirks → a plan.
//!
//! Every flag, env recommendation and warning carries its reason and the quirk ids behind it.

use std::collections::BTreeMap;

use crate::evidence::{Evidence, Key, Level};
use crate::llama::LlamaTarget;
use crate::llama::options::Plain12x;
use crate::plan::{EnvAdvice, Flag, Group, LlamaRef, Mode, Note, Plan, SCHEMA, ToolkitRef};
use crate::platform::Os;
use crate::profiles::Knowledge;
use crate::quirks::{Context, Evaluation, Quirk, Severity, SmokeCondition, Tri, ids};
use crate::report::{ApiError, Backend, Device, Report, SmokeOutcome, SmokeStage, Vendor};
use crate::version::Version;

/// What the plan is for.
#[derive(Debug, Clone)]
pub enum Devices<'a> {
    /// Target names, already expanded (`gfx1100`, `sm_90`): builds for machines not known here.
    Declared(Vec<String>),
    /// The GPUs of one machine, one name per GPU (`gfx1201`, `gfx1103`; `sm_75`, `sm_75` for two
    /// of a kind): one build for all of them.
    Machine(Vec<String>),
    /// A detect report, measured now (`Probe`) or read from a file (`Report`).
    Measured { report: &'a Report, mode: Mode },
}

#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub devices: Devices<'a>,
    /// Restrict to one backend when devices of both vendors are present.
    pub backend: Option<Backend>,
    pub llama: LlamaTarget,
    /// ROCm toolkit version that will build llama.cpp (HIP plans).
    pub rocm: Option<Version>,
    /// CUDA toolkit version that will build llama.cpp (CUDA plans).
    pub cuda: Option<Version>,
    /// Where `rocm` and `cuda` came from (`--rocm`, `hipconfig --version`...).
    pub rocm_source: String,
    pub cuda_source: String,
    pub os: Os,
    /// Names of relevant environment variables that are set where the plan is made.
    pub env_set: Vec<String>,
    /// Force the legacy pool whatever was measured (for comparisons and tests).
    pub force_no_vmm: bool,
    /// Measured VMM records to draw on: `--from` documents and profiles/measured.toml. A
    /// measured plan adds its own report's smoke results.
    pub evidence: Evidence,
}

impl Request<'_> {
    /// The toolkit version that will build for `backend`, and where it came from.
    fn toolkit(&self, backend: Backend) -> (Option<&Version>, &str) {
        match backend {
            Backend::Hip => (self.rocm.as_ref(), &self.rocm_source),
            Backend::Cuda => (self.cuda.as_ref(), &self.cuda_source),
        }
    }
}

/// One architecture in the plan, with the devices of that architecture if measured.
struct Unit<'a> {
    arch: String,
    vendor: Vendor,
    apu: Option<bool>,
    devices: Vec<&'a Device>,
    /// How many GPUs of this architecture the machine has (declared machines).
    count: usize,
}

/// The VMM decision for one architecture.
struct VmmDecision {
    vmm: bool,
    reason: String,
    quirks: Vec<String>,
    lift: Option<String>,
}

impl VmmDecision {
    fn legacy(reason: impl Into<String>, quirks: Vec<String>, lift: Option<String>) -> Self {
        VmmDecision {
            vmm: false,
            reason: reason.into(),
            quirks,
            lift,
        }
    }
}

pub fn resolve(k: &Knowledge, req: &Request<'_>) -> Result<Plan, crate::Error> {
    let mut acc = PlanNotes::default();
    let (mode, mut units, report) = collect_units(k, req)?;
    let known_ids: Vec<String> = k.quirks.iter().map(|q| q.id.clone()).collect();

    let (backend, switch) = choose_backend(k, req, &mut units)?;

    // Buildability is a question for the toolkit that will compile; runtime quirks are a question
    // for the runtime the devices were measured with, when there is one.
    let toolkit = req.toolkit(backend).0.cloned();
    let measured = measured_runtime(report, backend);
    let runtime = measured.clone().or_else(|| toolkit.clone());
    check_toolkit_for_targets(k, backend, toolkit.as_ref(), &units, &known_ids, &mut acc);

    let build = req.llama.effective_build(&k.options);
    // A checkout of unknown build number: its build is not the table's newest, so say nothing.
    if req.llama.build.is_some() || req.llama.checkout.is_none() {
        check_build_facts(k, req, backend, build, toolkit.as_ref(), &units, &mut acc);
    }
    let driver = report
        .and_then(|r| r.devices.first())
        .and_then(|d| d.driver_version.as_deref())
        .and_then(|s| s.parse().ok());
    let kernel = report
        .and_then(|r| r.host.kernel.as_deref())
        .and_then(Version::of_kernel);
    let (multi_gpu, igpu_with_dgpu, mixed_archs) = machine_traits(k, mode, &units, report, backend);
    let peer_problem = report.map(|r| {
        r.peers
            .iter()
            .any(|p| p.can_access == Some(false) || p.copy_ok == Some(false))
    });
    let scope = Scope {
        k,
        req,
        backend,
        build,
        runtime,
        driver,
        kernel,
        multi_gpu,
        igpu_with_dgpu,
        mixed_archs,
        peer_problem,
        evidence: evidence_for(req, report, mode),
        vmm_switch: vmm_switch(k, req, backend),
        known_ids: &known_ids,
    };

    // The toolkit that will build against the driver that was measured (CUDA only).
    toolkit_vs_driver(req, backend, toolkit.as_ref(), report, &mut acc);
    let planned: Vec<Planned> = units
        .iter()
        .map(|u| plan_unit(&scope, u, &mut acc))
        .collect();

    let one_machine = matches!(mode, Mode::Probe | Mode::Report | Mode::Machine);
    let mut groups = group(k, req, backend, switch, mode, planned, one_machine);
    drop_overrides_for_unbuilt_targets(&mut groups, &mut acc.notes);
    warn_environment(report, &known_ids, &mut acc.warnings);
    dedup_notes(&mut acc.warnings);
    dedup_notes(&mut acc.notes);
    dedup_notes(&mut acc.refusals);
    let mut plan = Plan {
        schema: SCHEMA,
        gpuprobe_version: env!("CARGO_PKG_VERSION"),
        mode,
        backend,
        os: req.os,
        llama: LlamaRef {
            build: req.llama.build,
            effective_build: build,
            source: req.llama.source.clone(),
        },
        toolkit: toolkit_ref(req, backend, measured.as_ref()),
        groups,
        warnings: acc.warnings,
        notes: acc.notes,
        refusals: acc.refusals,
        trace: acc.trace,
    };
    plan.cite_quirks(&known_ids);
    Ok(plan)
}

/// What every unit of one plan shares: the request, the backend and build, and the machine.
struct Scope<'a> {
    k: &'a Knowledge,
    req: &'a Request<'a>,
    backend: Backend,
    build: u64,
    /// The runtime quirks are judged against: measured, else the toolkit given.
    runtime: Option<Version>,
    driver: Option<Version>,
    /// The Linux kernel of the measured machine (unknown for declared targets).
    kernel: Option<Version>,
    multi_gpu: Option<bool>,
    igpu_with_dgpu: Option<bool>,
    /// The GPUs used together are of more than one architecture.
    mixed_archs: Option<bool>,
    peer_problem: Option<bool>,
    evidence: Evidence,
    vmm_switch: VmmSwitch,
    known_ids: &'a [String],
}

/// One unit (an architecture and its devices): its VMM decision, how the build expresses it,
/// and the quirks that apply to it.
fn plan_unit(s: &Scope<'_>, u: &Unit<'_>, acc: &mut PlanNotes) -> Planned {
    let (k, req, build) = (s.k, s.req, s.build);
    let smoke = unit_smoke(u);
    let base_ctx = Context {
        targets: &k.targets,
        vendor: u.vendor,
        arch: &u.arch,
        os: Some(req.os),
        runtime: s.runtime.as_ref(),
        driver: s.driver.as_ref(),
        llama_build: if req.llama.checkout.is_some() && req.llama.build.is_none() {
            None
        } else {
            Some(build)
        },
        kernel: s.kernel.as_ref(),
        apu: u.apu,
        multi_gpu: s.multi_gpu,
        igpu_with_dgpu: s.igpu_with_dgpu,
        mixed_archs: s.mixed_archs,
        vmm_build: None,
        uma: None,
        peer_problem: s.peer_problem,
        smoke,
        env_set: &req.env_set,
    };
    refuse_unusable_devices(u, &mut acc.refusals);

    let decision = match &s.vmm_switch {
        VmmSwitch::CompiledOut => VmmDecision::legacy(
            format!(
                "llama.cpp build {build} has no VMM pool for HIP (it was compiled for HIP from build 4548 on): the legacy pool whatever the flags"
            ),
            vec![],
            None,
        ),
        VmmSwitch::Flag(flag) => decide_vmm(
            k,
            req,
            s.backend,
            flag,
            u,
            &base_ctx,
            s.runtime.as_ref(),
            &s.evidence,
            &mut acc.trace,
        ),
    };
    let vmm = decision.vmm;
    let mut out = UnitOut::default();
    match express_vmm(k, req, &s.vmm_switch, &decision, &u.arch, s.known_ids) {
        Expressed::Flag(f) => out.flags.push(f),
        Expressed::Note(n) => acc.notes.push(n),
    }

    // Two passes: the first finds whether unified memory is recommended (quirks may depend on it).
    let mut ctx = base_ctx.clone();
    ctx.vmm_build = Some(vmm);
    apply_quirks(k, req, u, build, ctx, &mut out, acc);
    Planned {
        arch: u.arch.clone(),
        devices: u.devices.iter().map(|d| d.index).collect(),
        vmm,
        flags: out.flags,
        env: out.env,
    }
}

/// The toolkit the plan names: the version declared (how), else the runtime measured.
fn toolkit_ref(req: &Request<'_>, backend: Backend, measured: Option<&Version>) -> ToolkitRef {
    let (declared, declared_source) = req.toolkit(backend);
    ToolkitRef {
        name: backend.toolkit(),
        version: declared.or(measured).map(|v| v.to_string()),
        source: if declared.is_some() {
            declared_source.to_string()
        } else if measured.is_some() {
            "measured runtime".into()
        } else {
            "unknown".into()
        },
    }
}

/// The records a decision may draw on: the given ones plus this plan's own measurements.
fn evidence_for(req: &Request<'_>, report: Option<&Report>, mode: Mode) -> Evidence {
    let mut evidence = req.evidence.clone();
    if let Some(r) = report {
        let origin = match mode {
            Mode::Probe => "this machine's probe".to_string(),
            _ => "the report planned for".to_string(),
        };
        evidence.add_report(r, &origin);
    }
    evidence
}

/// Variables set in the measured environment that change what the runtime does.
fn warn_environment(report: Option<&Report>, known_ids: &[String], warnings: &mut Vec<Note>) {
    for e in report.map(|r| r.environment.as_slice()).unwrap_or_default() {
        let message = format!("{}={} is set: {}", e.name, e.value, e.effect);
        // The effect text cites the record that explains it (HSA_OVERRIDE_GFX_VERSION: Q9).
        let cited = crate::plan::named_quirks(&message, known_ids);
        warnings.push(note(Severity::Medium, message, &cited, &[]));
    }
}

/// The backend to plan for (the one asked for, else the one the units' vendor implies) and the
/// option that switches it on in this llama.cpp build; units of other vendors are dropped.
fn choose_backend(
    k: &Knowledge,
    req: &Request<'_>,
    units: &mut Vec<Unit<'_>>,
) -> Result<(Backend, &'static str), crate::Error> {
    let vendors: Vec<Vendor> = dedup(units.iter().map(|u| u.vendor));
    let backend = match (req.backend, vendors.as_slice()) {
        (Some(b), _) => {
            units.retain(|u| u.vendor == b.vendor());
            b
        }
        (None, [Vendor::Amd]) => Backend::Hip,
        (None, [Vendor::Nvidia]) => Backend::Cuda,
        (None, []) => {
            return Err(crate::Error::Environment {
                message: "no GPU device or target to plan for".into(),
                fix: "declare targets with --targets (e.g. gfx1100,gfx120X or sm_90), or plan from a report of a machine whose GPUs were found".into(),
            });
        }
        (None, _) => {
            let names: Vec<String> = units.iter().map(|u| u.arch.clone()).collect();
            return Err(crate::Error::Refused {
                reasons: vec![format!(
                    "CUDA and HIP targets in one build ({}): llama.cpp builds one of them at a time; \
                     run once with --backend cuda and once with --backend hip",
                    names.join(", ")
                )],
            });
        }
    };
    let switch = backend_switch(k, req, backend).ok_or_else(|| crate::Error::Refused {
        reasons: vec![format!(
            "llama.cpp build {} declares none of the {} backend options gpuprobe knows ({}); \
             plan for a newer llama.cpp, or pass --llama-cpp DIR with the tree you build",
            req.llama.effective_build(&k.options),
            backend.name(),
            backend.switch_names().join(", ")
        )],
    })?;
    if units.is_empty() {
        return Err(crate::Error::Environment {
            message: format!("no {} device or target to plan for", backend.name()),
            fix: "declare targets with --targets (e.g. gfx1100,gfx120X or sm_90)".into(),
        });
    }
    Ok((backend, switch))
}

/// Targets the toolkit cannot build (refused), or, with the toolkit unknown, what each target
/// needs (noted).
fn check_toolkit_for_targets(
    k: &Knowledge,
    backend: Backend,
    toolkit: Option<&Version>,
    units: &[Unit<'_>],
    known_ids: &[String],
    acc: &mut PlanNotes,
) {
    let toolkit_name = backend.toolkit();
    if let Some(v) = toolkit {
        // The build's toolkit sets the driver the running machine needs: say which, once.
        if backend == Backend::Cuda
            && !units.is_empty()
            && let Some((row, linux, windows)) = crate::host::toolkit::oldest_full_driver(v)
        {
            let archs: Vec<String> = units.iter().map(|u| u.arch.clone()).collect();
            // The table stops at some release: past it the row is only a lower bound.
            let floor = if row.major_minor() == v.major_minor() {
                format!(
                    "a CUDA {v} build runs fully on NVIDIA drivers from {linux} (Linux) / {windows} (Windows), the CUDA {row} row of the toolkit release notes"
                )
            } else {
                format!(
                    "a CUDA {v} build needs an NVIDIA driver of at least {linux} (Linux) / {windows} (Windows), the CUDA {row} row of the toolkit release notes (the newest row gpuprobe holds; CUDA {v} may need a newer one)"
                )
            };
            acc.notes.push(note(
                Severity::Low,
                format!(
                    "{floor}. An older driver of the same major version starts it only through minor-version compatibility, which does not JIT its PTX (`the provided PTX was compiled with an unsupported toolchain`), and a CUDA 12.8 build crashed at its first matrix multiplication on driver 535 where the same build with CUDA 12.6 ran (Mesh-LLM/mesh-llm#304): update the driver, or build with the CUDA version `nvidia-smi` reports"
                ),
                &[],
                &archs,
            ));
        }
        for u in units {
            if let Some(t) = k.targets.get(&u.arch)
                && let Some(why) = t.unbuildable_with(v)
            {
                // The target table's note may cite the record behind the bound (gfx1152: Q20).
                let cited = crate::plan::named_quirks(&why, known_ids);
                acc.refusals.push(note(
                    Severity::High,
                    why,
                    &cited,
                    std::slice::from_ref(&u.arch),
                ));
            }
        }
    } else {
        acc.trace.push(format!(
            "{toolkit_name} version unknown: quirks with a version range count as possibly matching; \
             give --{} VER to be precise",
            backend.toolkit_option()
        ));
        // What the target table knows about the toolkit each target needs, said where it cannot
        // be checked.
        for u in units {
            if let Some(t) = k.targets.get(&u.arch)
                && let Some(need) = t.toolkit_requirement()
            {
                let cited = crate::plan::named_quirks(&need, known_ids);
                acc.notes.push(note(
                    Severity::Medium,
                    format!(
                        "needs {need}. The {toolkit_name} version is unknown, so this plan could not check it: give --{} VER",
                        backend.toolkit_option()
                    ),
                    &cited,
                    std::slice::from_ref(&u.arch),
                ));
            }
        }
    }
}

/// What llama.cpp's own sources say about this build, toolkit and targets
/// (`profiles/llama-facts.toml`): refusals for what will not configure or compile, warnings for
/// targets the build's kernels do not know.
fn check_build_facts(
    k: &Knowledge,
    req: &Request<'_>,
    backend: Backend,
    build: u64,
    toolkit: Option<&Version>,
    units: &[Unit<'_>],
    acc: &mut PlanNotes,
) {
    for u in units {
        if let Some(why) = k.targets.get(&u.arch).and_then(|t| t.unsupported.as_ref()) {
            acc.refusals.push(note(
                Severity::High,
                format!("{}: {why}", u.arch),
                &[],
                std::slice::from_ref(&u.arch),
            ));
        }
    }
    let targets: Vec<String> = units.iter().map(|u| u.arch.clone()).collect();
    let inputs = crate::build_facts::Inputs {
        build,
        backend,
        toolkit,
        os: req.os,
        targets: &targets,
    };
    for f in crate::build_facts::check(&k.facts, &inputs) {
        let n = note(Severity::High, f.message, &[], &f.targets);
        if f.refuse {
            acc.refusals.push(n);
        } else {
            acc.warnings.push(n);
        }
    }
}

/// The toolkit that will build against the driver that was measured (CUDA only).
fn toolkit_vs_driver(
    req: &Request<'_>,
    backend: Backend,
    toolkit: Option<&Version>,
    report: Option<&Report>,
    acc: &mut PlanNotes,
) {
    if backend == Backend::Cuda
        && let (Some(tk), Some(r)) = (toolkit, report)
        && let Some(drv) = crate::host::toolkit::driver_cuda(r)
        && let Some(m) = crate::host::toolkit::cuda_vs_driver(
            &format!("the toolkit ({}) builds with", req.cuda_source),
            tk,
            &drv,
            crate::host::toolkit::driver_module(r).as_deref(),
        )
    {
        let n = note(
            Severity::High,
            format!("{}; fix: {}", m.message, m.fix),
            &[],
            &[],
        );
        match m.level {
            crate::report::CheckLevel::Error => acc.refusals.push(n),
            _ => acc.warnings.push(n),
        }
    }
}

/// Devices no build can use: a crash at driver initialisation, or an architecture that could not
/// be measured (never emit `...ARCHITECTURES=unknown`).
fn refuse_unusable_devices(u: &Unit<'_>, refusals: &mut Vec<Note>) {
    for d in &u.devices {
        if d.smoke.outcome == SmokeOutcome::Crash
            && matches!(
                d.smoke.stage,
                None | Some(SmokeStage::Context | SmokeStage::Init)
            )
        {
            refusals.push(note(
                Severity::Critical,
                format!(
                    "device {} ({}) crashes at driver initialisation{}: no llama.cpp build can use it until the runtime or driver is fixed",
                    d.index,
                    d.name,
                    d.smoke.signal.map(|s| format!(" (signal {s})")).unwrap_or_default()
                ),
                &[],
                std::slice::from_ref(&u.arch),
            ));
        } else if !d.arch_known() {
            // Known only from /proc or sysfs because its probe failed before reporting:
            // there is no architecture to build for (never emit `...ARCHITECTURES=unknown`).
            refusals.push(note(
                Severity::Critical,
                format!(
                    "device {} ({}): its architecture could not be measured ({}): fix that, or declare the targets with --targets",
                    d.index,
                    d.name,
                    d.smoke.reason.as_deref().unwrap_or("no probe result")
                ),
                &[],
                std::slice::from_ref(&u.arch),
            ));
        }
    }
}

/// How a VMM decision reaches the plan: the switch as a flag, or a note where the build cannot
/// express it (the option undeclared, or no VMM pool for HIP at all).
enum Expressed {
    Flag(Flag),
    Note(Note),
}

fn express_vmm(
    k: &Knowledge,
    req: &Request<'_>,
    vmm_switch: &VmmSwitch,
    decision: &VmmDecision,
    arch: &str,
    known_ids: &[String],
) -> Expressed {
    let build = req.llama.effective_build(&k.options);
    let vmm = decision.vmm;
    match &vmm_switch {
        VmmSwitch::Flag(flag) if req.llama.declares(&k.options, flag) => {
            // Cited before the lift command, which must stay the end of the text.
            let mut reason = decision.reason.clone();
            let quirks = decision.quirks.clone();
            crate::plan::cite_quirks(&mut reason, &quirks, known_ids);
            if let Some(l) = &decision.lift {
                reason = format!("{reason}; to lift it: {l}");
            }
            Expressed::Flag(Flag {
                name: flag.clone(),
                value: if vmm { "OFF" } else { "ON" }.into(),
                reason,
                quirks,
                lift: decision.lift.clone(),
            })
        }
        VmmSwitch::Flag(flag) => Expressed::Note(note(
            Severity::Info,
            format!(
                "{flag} is not declared in llama.cpp build {build}; the VMM decision ({}) cannot be expressed as a flag there",
                if vmm { "VMM on" } else { "legacy pool" }
            ),
            &[],
            &[arch.to_string()],
        )),
        VmmSwitch::CompiledOut => Expressed::Note(note(
            Severity::Info,
            decision.reason.clone(),
            &[],
            &[arch.to_string()],
        )),
    }
}

/// Every quirk that could match one unit, evaluated against it (after the VMM decision, which
/// some conditions read), and applied to its flags, env advice and notes.
fn apply_quirks(
    k: &Knowledge,
    req: &Request<'_>,
    u: &Unit<'_>,
    build: u64,
    mut ctx: Context<'_>,
    out: &mut UnitOut,
    acc: &mut PlanNotes,
) {
    let uma = k.quirks.iter().filter(|q| !q.contested).any(|q| {
        q.effect.env.contains_key("GGML_CUDA_ENABLE_UNIFIED_MEMORY")
            && q.evaluate(&ctx).verdict == Tri::Yes
    });
    ctx.uma = Some(uma);
    let verdicts: Vec<(&Quirk, Evaluation)> = k
        .quirks
        .iter()
        .filter(|q| !q.contested)
        .map(|q| (q, q.evaluate(&ctx)))
        .filter(|(_, e)| e.verdict.possible())
        .collect();
    // A record that shows another record's env advice to be harmful here withdraws it (and
    // the advice's own warning, which would recommend it).
    let withdrawn: Vec<(&String, &str)> = verdicts
        .iter()
        .filter(|(_, e)| e.verdict == Tri::Yes)
        .flat_map(|(q, _)| q.effect.withdraw_env.iter().map(|n| (n, q.id.as_str())))
        .collect();
    for (q, evaluation) in &verdicts {
        let verdict = &evaluation.verdict;
        acc.trace.push(format!(
            "{} {}: {} [{}]",
            u.arch,
            q.id,
            tri_word(*verdict),
            evaluation.explain()
        ));
        let by: Vec<&str> = q
            .effect
            .env
            .keys()
            .filter_map(|n| withdrawn.iter().find(|(w, _)| *w == n).map(|(_, by)| *by))
            .collect();
        if !q.effect.env.is_empty() && by.len() == q.effect.env.len() {
            acc.trace.push(format!(
                "{}: {}'s advice withdrawn: {} matches",
                u.arch,
                q.id,
                by.join(", ")
            ));
            continue;
        }
        apply_quirk(k, req, (q, *verdict), u, build, out, acc);
    }
    out.env
        .retain(|e| !withdrawn.iter().any(|(n, _)| *n == &e.name));
    if req.llama.build.is_none() && req.llama.checkout.is_none() {
        older_build_notes(k, u, build, &ctx, acc);
    }
}

/// No build was given, so the plan is for the newest build gpuprobe knows (`newest`); but an
/// unknown build is no evidence that a fix is in. Every record whose range ends at a fixed
/// llama.cpp build, and that would match the build just before that fix, is named as a note
/// for whoever runs an older build (a packaged or prebuilt llama.cpp, an old checkout). Its
/// flags and env stay out of the plan, which is for `newest`.
fn older_build_notes(
    k: &Knowledge,
    u: &Unit<'_>,
    newest: u64,
    ctx: &Context<'_>,
    acc: &mut PlanNotes,
) {
    for q in k.quirks.iter().filter(|q| !q.contested) {
        let Some(fixed) = q.fixed_in.as_ref().and_then(|f| f.llama_build) else {
            continue;
        };
        // A fix past `newest` leaves the record in range: it was judged above like any other.
        if fixed == 0 || fixed > newest {
            continue;
        }
        let mut before = ctx.clone();
        before.llama_build = Some(fixed - 1);
        let evaluation = q.evaluate(&before);
        if evaluation.verdict != Tri::Yes {
            continue;
        }
        acc.trace.push(format!(
            "{} {}: matches builds before {fixed} [{}]",
            u.arch,
            q.id,
            evaluation.explain()
        ));
        let what = match &q.effect.warn {
            Some(w) => w.clone(),
            None => {
                let set: Vec<String> = q
                    .effect
                    .set
                    .iter()
                    .map(|(n, v)| format!("-D{n}={v}"))
                    .collect();
                if set.is_empty() {
                    q.title.clone()
                } else {
                    format!(
                        "{}; a plan for such a build sets {}.",
                        q.title,
                        set.join(" ")
                    )
                }
            }
        };
        acc.notes.push(note(
            q.severity.min(Severity::Medium),
            format!(
                "{}, with a llama.cpp build before {fixed}: {what} (No build was given: this plan is for build {newest}; to plan for an older build, pass its number with --llama-build N.)",
                q.id
            ),
            std::slice::from_ref(&q.id),
            std::slice::from_ref(&u.arch),
        ));
    }
}

/// Several GPUs used together, and an iGPU next to a dGPU: known for a measured or declared
/// machine, unknown for targets built for machines not known here.
fn machine_traits(
    k: &Knowledge,
    mode: Mode,
    units: &[Unit<'_>],
    report: Option<&Report>,
    backend: Backend,
) -> (Option<bool>, Option<bool>, Option<bool>) {
    if let Some(r) = report {
        let ds: Vec<&Device> = r.devices.iter().filter(|d| d.backend == backend).collect();
        let igpu = ds.iter().any(|d| d.integrated == Some(true))
            && ds.iter().any(|d| d.integrated == Some(false));
        let mixed = ds.iter().any(|d| d.arch != ds[0].arch);
        return (Some(ds.len() > 1), Some(igpu), Some(mixed));
    }
    if mode != Mode::Machine {
        return (None, None, None);
    }
    let count: usize = units.iter().map(|u| u.count).sum();
    let apu = |u: &Unit<'_>| k.targets.get(&u.arch).is_some_and(|t| t.apu);
    let igpu = units.iter().any(apu) && units.iter().any(|u| !apu(u));
    let mixed = units.iter().any(|u| u.arch != units[0].arch);
    (Some(count > 1), Some(igpu), Some(mixed))
}

/// How a build turns the VMM pool on or off.
enum VmmSwitch {
    /// `GGML_HIP_NO_VMM` / `GGML_CUDA_NO_VMM`: ON compiles the pool out.
    Flag(String),
    /// HIP before build 4548: no VMM pool whatever the flags.
    CompiledOut,
}

fn vmm_switch(k: &Knowledge, req: &Request<'_>, backend: Backend) -> VmmSwitch {
    match backend {
        Backend::Cuda => VmmSwitch::Flag("GGML_CUDA_NO_VMM".into()),
        Backend::Hip => match req.llama.hip_vmm_switch(&k.options) {
            s if s.is_empty() => VmmSwitch::CompiledOut,
            s => VmmSwitch::Flag(s),
        },
    }
}

fn collect_units<'a>(
    k: &Knowledge,
    req: &'a Request<'a>,
) -> Result<(Mode, Vec<Unit<'a>>, Option<&'a Report>), crate::Error> {
    let declared = |names: &Vec<String>, what: &str| -> Result<Vec<Unit<'a>>, crate::Error> {
        let mut units: Vec<Unit<'a>> = Vec::new();
        for n in names {
            let t = k.targets.get(n).ok_or_else(|| {
                crate::Error::input(
                    what,
                    format!("unknown GPU target `{n}`"),
                    "see `gpuprobe quirks targets`",
                )
            })?;
            match units.iter_mut().find(|u| u.arch == t.name) {
                Some(u) => u.count += 1,
                None => units.push(Unit {
                    arch: t.name.clone(),
                    vendor: t.vendor,
                    apu: Some(t.apu),
                    devices: Vec::new(),
                    count: 1,
                }),
            }
        }
        Ok(units)
    };
    match &req.devices {
        Devices::Declared(names) => Ok((Mode::Targets, declared(names, "--targets")?, None)),
        Devices::Machine(names) => Ok((Mode::Machine, declared(names, "--machine")?, None)),
        Devices::Measured { report, mode } => {
            let mut units: Vec<Unit<'a>> = Vec::new();
            for d in &report.devices {
                if let Some(u) = units
                    .iter_mut()
                    .find(|u| u.arch == d.arch && u.vendor == d.vendor)
                {
                    u.devices.push(d);
                    u.count += 1;
                } else {
                    let apu = d
                        .integrated
                        .or_else(|| k.targets.get(&d.arch).map(|t| t.apu));
                    units.push(Unit {
                        arch: d.arch.clone(),
                        vendor: d.vendor,
                        apu,
                        devices: vec![d],
                        count: 1,
                    });
                }
            }
            Ok((*mode, units, Some(report)))
        }
    }
}

/// The runtime version a report measured, as a toolkit version (HIP `6.2.41133` → ROCm 6.2).
fn measured_runtime(report: Option<&Report>, backend: Backend) -> Option<Version> {
    let r = report?;
    let status = r.backends.iter().find(|b| b.backend == backend)?;
    let text = match backend {
        Backend::Hip => status.runtime_version.as_deref()?,
        Backend::Cuda => return None,
    };
    crate::evidence::series_of(text)
}

/// The unit's smoke result, worst device first (`not-run` for declared targets).
fn unit_smoke(u: &Unit<'_>) -> Option<SmokeCondition> {
    if u.devices.is_empty() {
        // Declared targets: nothing was measured, so measured-outcome conditions cannot hold.
        return Some(SmokeCondition::NotRun);
    }
    let rank = |c: SmokeCondition| -> u8 {
        match c {
            SmokeCondition::Crash => 6,
            SmokeCondition::Hang => 5,
            SmokeCondition::ReserveFail | SmokeCondition::Fail => 4,
            SmokeCondition::BadOutput => 3,
            // Partial: nothing wrong seen, but too few cycles to count as a pass: lifts no deny.
            SmokeCondition::NotRun | SmokeCondition::Partial => 2,
            SmokeCondition::Pass => 1,
        }
    };
    u.devices
        .iter()
        .map(|d| SmokeCondition::of(&d.smoke))
        .max_by_key(|c| rank(*c))
}

/// HIP VMM departs from llama.cpp's default only on evidence about the same architecture,
/// runtime series and OS: at least a smoke pass, and a workload pass where a record asks for it.
/// CUDA keeps its default (VMM on) unless a record denies it.
#[allow(clippy::too_many_arguments)]
fn decide_vmm(
    k: &Knowledge,
    req: &Request<'_>,
    backend: Backend,
    flag: &str,
    u: &Unit<'_>,
    ctx: &Context<'_>,
    runtime: Option<&Version>,
    evidence: &Evidence,
    trace: &mut Vec<String>,
) -> VmmDecision {
    if req.force_no_vmm {
        return VmmDecision::legacy("legacy pool forced with --force-no-vmm", vec![], None);
    }
    // Measured facts first: the attribute, then the smoke test.
    if let Some(d) = measured_decision(u, trace) {
        return d;
    }

    // What the quirk records ask for.
    let (denied, raising) = vmm_records(k, u, ctx, trace);
    // The evidence needed: HIP departs from its default only on a measured pass.
    let baseline = (backend == Backend::Hip).then_some(Level::Smoke);
    let needed = raising.iter().map(|(_, l, _)| *l).chain(baseline).max();
    // Every record that asks for evidence is named: those asking for the level needed, then
    // those a weaker pass would satisfy (the stronger pass covers them).
    if !denied.is_empty() {
        return deny_decision(backend, &denied, &raising, needed, runtime);
    }

    let ids: Vec<String> = raising.iter().map(|(q, _, _)| q.id.clone()).collect();
    let Some(needed) = needed else {
        let measured_pass = !u.devices.is_empty()
            && u.devices
                .iter()
                .all(|d| d.smoke.outcome == SmokeOutcome::Pass);
        return VmmDecision {
            vmm: true,
            reason: if measured_pass {
                "VMM smoke test passed on every device of this architecture and no deny quirk matches".into()
            } else {
                "CUDA default: the VMM pool; no deny quirk can match".into()
            },
            quirks: vec![],
            lift: None,
        };
    };
    let asked = Asked {
        why_needed: why_needed(&raising, needed),
        needed,
        ids,
    };
    evidence_decision(req, (backend, flag), u, runtime, evidence, asked, trace)
}

/// What the quirk records ask of the evidence for one unit: the level, said for people, and the
/// records that asked.
struct Asked {
    needed: Level,
    why_needed: String,
    ids: Vec<String>,
}

/// The VMM decision where a measured pass is needed: a failure on record decides, else a pass at
/// the level needed, else the legacy pool with the command that would record the pass.
fn evidence_decision(
    req: &Request<'_>,
    (backend, flag): (Backend, &str),
    u: &Unit<'_>,
    runtime: Option<&Version>,
    evidence: &Evidence,
    asked: Asked,
    trace: &mut Vec<String>,
) -> VmmDecision {
    let Asked {
        needed,
        why_needed,
        ids,
    } = asked;
    let kit = backend.toolkit();
    let series = runtime.and_then(|v| crate::evidence::series_of(&v.to_string()));
    let Some(series) = series else {
        return VmmDecision::legacy(
            format!(
                "{}: VMM needs a measured {why_needed} pass for {} on the {kit} series the binaries run on, and the {kit} version is unknown",
                legacy_prefix(backend),
                u.arch
            ),
            with_q1(backend, ids),
            Some(format!(
                "give the {kit} version the binaries will run with (--{} VER)",
                backend.toolkit_option()
            )),
        );
    };
    let key = Key {
        arch: &u.arch,
        backend,
        series: Some(&series),
        os: req.os,
    };
    let finding = evidence.find(&key);
    let on = format!("{} on {kit} {series} ({})", u.arch, req.os.as_str());
    if let Some(f) = finding.failures.first() {
        return VmmDecision::legacy(
            format!(
                "{}: a measured failure is on record for {on}: {} ({})",
                legacy_prefix(backend),
                f.detail,
                f.origin
            ),
            // The failure decides; records that ask for evidence are moot.
            with_q1(backend, vec![]),
            None,
        );
    }
    match finding.best_pass {
        Some(p) if p.level >= needed => {
            let lifted = with_q1(backend, ids);
            trace.push(format!(
                "{}: {} pass on record ({}) meets the {why_needed} evidence needed",
                u.arch,
                p.level.as_str(),
                p.origin
            ));
            VmmDecision {
                vmm: true,
                reason: format!(
                    "measured {} pass for {on}: {} ({}){}",
                    p.level.as_str(),
                    p.detail,
                    p.origin,
                    if lifted.is_empty() {
                        String::new()
                    } else {
                        format!("; it lifts {}", lifted.join(", "))
                    }
                ),
                quirks: lifted,
                lift: None,
            }
        }
        best => {
            let have = match best {
                Some(p) => format!(
                    "only a {} pass is on record ({})",
                    p.level.as_str(),
                    p.origin
                ),
                None => "none is on record".to_string(),
            };
            // Said without the architecture, so targets in the same position share one build
            // group and one sentence (the group lists them).
            VmmDecision::legacy(
                format!(
                    "{}: VMM needs a measured {why_needed} pass for the GPU on {kit} {series} ({}); {have}",
                    legacy_prefix(backend),
                    req.os.as_str()
                ),
                with_q1(backend, ids),
                Some(lift_command(needed, flag, kit, &series, req.os)),
            )
        }
    }
}

/// What the devices measured decide: no VMM attribute, or a smoke test that did not pass (one
/// that was not run, or too short to count, is traced and leaves the decision to the records).
fn measured_decision(u: &Unit<'_>, trace: &mut Vec<String>) -> Option<VmmDecision> {
    if let Some(d) = u.devices.iter().find(|d| d.vmm_supported == Some(false)) {
        return Some(VmmDecision::legacy(
            format!("device {} ({}) reports no VMM support", d.index, d.name),
            vec![],
            None,
        ));
    }
    if let Some(d) = u
        .devices
        .iter()
        .find(|d| d.smoke.outcome != SmokeOutcome::Pass)
    {
        let what = smoke_words(d);
        let missing_symbol = d
            .smoke
            .error
            .as_ref()
            .is_some_and(ApiError::is_symbol_not_found);
        let q = if d.smoke.reserve_failed() && !missing_symbol {
            vec![ids::VMM_RESERVE_FAILS.to_string()]
        } else {
            vec![]
        };
        if matches!(
            d.smoke.outcome,
            SmokeOutcome::NotRun | SmokeOutcome::Partial
        ) {
            // Not measured (or too few cycles to count): fall through to the rules below, but say so.
            trace.push(format!(
                "{}: smoke test not run on device {} ({what}); deciding from quirks and records",
                u.arch, d.index
            ));
        } else {
            let named = if q.is_empty() {
                String::new()
            } else {
                format!(" ({})", ids::VMM_RESERVE_FAILS)
            };
            return Some(VmmDecision::legacy(
                format!("device {} ({}): {what}{named}", d.index, d.name),
                q,
                None,
            ));
        }
    }
    None
}

/// The quirk records with a VMM effect that could match: those that deny VMM, and those that
/// ask for evidence of a level.
#[allow(clippy::type_complexity)]
fn vmm_records<'k>(
    k: &'k Knowledge,
    u: &Unit<'_>,
    ctx: &Context<'_>,
    trace: &mut Vec<String>,
) -> (Vec<(&'k Quirk, Tri)>, Vec<(&'k Quirk, Level, Tri)>) {
    let mut denied: Vec<(&Quirk, Tri)> = Vec::new();
    let mut raising: Vec<(&Quirk, Level, Tri)> = Vec::new();
    for q in k.quirks.iter().filter(|q| !q.contested) {
        let Some(effect) = q.effect.vmm else { continue };
        let evaluation = q.evaluate(ctx);
        let verdict = evaluation.verdict;
        if !verdict.possible() {
            continue;
        }
        trace.push(format!(
            "{}: {} {} ({}) [{}]",
            u.arch,
            q.id,
            tri_word(verdict),
            effect.as_str(),
            evaluation.explain()
        ));
        match effect.lifted_by() {
            None => denied.push((q, verdict)),
            Some(level) => raising.push((q, level, verdict)),
        }
    }
    (denied, raising)
}

/// The evidence level needed, with the records that ask for it (then those a weaker pass would
/// satisfy: the stronger pass covers them).
fn why_needed(raising: &[(&Quirk, Level, Tri)], needed: Level) -> String {
    if raising.is_empty() {
        needed.as_str().to_string()
    } else {
        let names: Vec<String> = raising
            .iter()
            .filter(|(_, l, _)| *l == needed)
            .map(|(q, _, v)| format!("{} {}", q.id, tri_word(*v)))
            .chain(
                raising
                    .iter()
                    .filter(|(_, l, _)| *l != needed)
                    .map(|(q, l, v)| format!("{} {} for {}", q.id, tri_word(*v), l.as_str())),
            )
            .collect();
        format!("{} ({})", needed.as_str(), names.join(", "))
    }
}

/// Records deny VMM: the legacy pool, with what would lift it (a runtime with the fixes, or the
/// version that was not given), and the evidence needed past that.
fn deny_decision(
    backend: Backend,
    denied: &[(&Quirk, Tri)],
    raising: &[(&Quirk, Level, Tri)],
    needed: Option<Level>,
    runtime: Option<&Version>,
) -> VmmDecision {
    // The denies decide; the records that ask for evidence are named for what comes after.
    let ids: Vec<String> = denied
        .iter()
        .map(|(q, _)| q)
        .chain(raising.iter().map(|(q, _, _)| q))
        .map(|q| q.id.clone())
        .collect();
    let reasons: Vec<String> = denied
        .iter()
        .map(|(q, v)| {
            let fix = match &q.fixed_in {
                Some(f) => format!("fixed in {}", f.describe(q.when.vendor)),
                None => "no fix known".to_string(),
            };
            let certainty = match v {
                Tri::Yes => "matches",
                _ => "could match (some facts unknown)",
            };
            format!("{} {certainty}: {} ({fix})", q.id, q.title)
        })
        .collect();
    let unknown_only = runtime.is_none() && denied.iter().all(|(_, v)| *v == Tri::Unknown);
    let kit = backend.toolkit();
    let lift = if unknown_only {
        Some(format!(
            "give the {kit} version the binaries will run with (--{} VER)",
            backend.toolkit_option()
        ))
    } else {
        denied.iter().all(|(q, _)| q.fixed_in.is_some()).then(|| {
            let fixes: Vec<String> = denied
                .iter()
                .filter_map(|(q, _)| q.fixed_in.as_ref().map(|f| f.describe(q.when.vendor)))
                .collect();
            format!(
                "run on {} or later, where a measured pass can decide",
                fixes.join(" and ")
            )
        })
    };
    let mut tail = if lift.is_none() {
        "; no measurement lifts it".to_string()
    } else {
        String::new()
    };
    if !raising.is_empty()
        && let Some(n) = needed
    {
        tail.push_str(&format!(
            "; past that, VMM needs a measured {} pass",
            why_needed(raising, n)
        ));
    }
    VmmDecision::legacy(
        format!("{}: {}{tail}", legacy_prefix(backend), reasons.join("; ")),
        with_q1(backend, ids),
        lift,
    )
}

/// Q1 is the background record of every HIP VMM decision.
fn with_q1(backend: Backend, mut quirks: Vec<String>) -> Vec<String> {
    if backend == Backend::Hip && !quirks.iter().any(|i| i == ids::HIP_VMM_OFF_BY_DEFAULT) {
        quirks.push(ids::HIP_VMM_OFF_BY_DEFAULT.into());
    }
    quirks
}

/// One command that produces the missing evidence, and how to hand it back.
fn lift_command(needed: Level, flag: &str, kit: &str, series: &Version, os: Os) -> String {
    let where_ = format!(
        "on a {} machine with that GPU and {kit} {series}",
        os.as_str()
    );
    match needed {
        Level::Workload => format!(
            "{where_}, build llama.cpp with -D{flag}=OFF and run `gpuprobe check-build --binary build/bin/test-backend-ops --exercise --json > exercise.json`, then plan with `--from exercise.json`"
        ),
        Level::Inference => format!(
            "{where_}, build llama.cpp with -D{flag}=OFF and run `gpuprobe check-build ./build --exercise inference --output inference.json`, then plan with `--from inference.json`"
        ),
        _ => format!(
            "{where_}, run `gpuprobe detect --json > detect.json`, then plan with `--from detect.json` (a directory of such reports counts too)"
        ),
    }
}

fn smoke_words(d: &Device) -> String {
    let s = &d.smoke;
    let mut w = format!("VMM smoke test {}", s.outcome.as_str());
    if let Some(stage) = &s.stage {
        w.push_str(&format!(" at stage {stage}"));
    }
    if let Some(e) = &s.error {
        w.push_str(&format!(" ({e})"));
    }
    if let Some(m) = s.mismatches.filter(|m| *m > 0) {
        w.push_str(&format!(", {m} mismatched words"));
    }
    if let Some(r) = &s.reason {
        w.push_str(&format!(": {r}"));
    }
    w
}

#[allow(clippy::too_many_arguments)]
fn apply_quirk(
    k: &Knowledge,
    req: &Request<'_>,
    (q, verdict): (&Quirk, Tri),
    u: &Unit<'_>,
    build: u64,
    out: &mut UnitOut,
    acc: &mut PlanNotes,
) {
    let ids = [q.id.clone()];
    let targets = [u.arch.clone()];
    if verdict == Tri::Unknown {
        let has_effect = q.effect.warn.is_some()
            || !q.effect.set.is_empty()
            || !q.effect.env.is_empty()
            || q.effect.refuse.is_some();
        if has_effect && q.effect.vmm.is_none() {
            acc.notes.push(note(
                q.severity.min(Severity::Medium),
                format!("{} may apply: {}", q.id, q.summary),
                &ids,
                &targets,
            ));
        }
        return;
    }
    for (name, value) in &q.effect.set {
        if req.llama.settable(&k.options, name) {
            if let Some(f) = out.flags.iter_mut().find(|f| &f.name == name) {
                f.quirks.push(q.id.clone());
            } else {
                out.flags.push(Flag {
                    name: name.clone(),
                    value: value.clone(),
                    reason: format!("{}: {}", q.id, q.title),
                    quirks: vec![q.id.clone()],
                    lift: None,
                });
            }
        } else {
            acc.notes.push(note(
                Severity::Info,
                format!(
                    "{} would set {name}={value}, but llama.cpp build {build} does not declare it",
                    q.id
                ),
                &ids,
                &targets,
            ));
        }
    }
    for (name, value) in &q.effect.env {
        if name == "GGML_CUDA_P2P" && value == "0" {
            continue; // checked for presence: =0 would enable P2P
        }
        if let Some(e) = out.env.iter_mut().find(|e| &e.name == name) {
            e.quirks.push(q.id.clone());
        } else {
            out.env.push(EnvAdvice {
                name: name.clone(),
                value: value.clone(),
                reason: format!("{}: {}", q.id, q.title),
                when: q.effect.env_when.clone(),
                quirks: vec![q.id.clone()],
            });
        }
    }
    if let Some(w) = &q.effect.warn {
        let n = note(q.severity, format!("{}: {w}", q.id), &ids, &targets);
        match q.effect.level {
            crate::quirks::WarnLevel::Warning => acc.warnings.push(n),
            crate::quirks::WarnLevel::Note => acc.notes.push(n),
        }
    }
    if let Some(r) = &q.effect.refuse {
        acc.refusals.push(note(
            Severity::Critical,
            format!("{}: {r}", q.id),
            &ids,
            &targets,
        ));
    }
}

/// What the resolver says about the plan as it goes: warnings, notes, refusals and the trace of
/// its decisions.
#[derive(Default)]
struct PlanNotes {
    warnings: Vec<Note>,
    notes: Vec<Note>,
    refusals: Vec<Note>,
    trace: Vec<String>,
}

/// The flags and env advice planned for one unit (target or device).
#[derive(Default)]
struct UnitOut {
    flags: Vec<Flag>,
    env: Vec<EnvAdvice>,
}

/// One architecture's decisions, before grouping.
struct Planned {
    arch: String,
    devices: Vec<u32>,
    vmm: bool,
    flags: Vec<Flag>,
    env: Vec<EnvAdvice>,
}

/// Targets with identical flags and env share one build; each group gets the arch list and the
/// base flags. The GPUs of one machine (measured, or declared with --machine) are used by one
/// process, so they always share one build: the safer value of each decision wins.
fn group(
    k: &Knowledge,
    req: &Request<'_>,
    backend: Backend,
    switch: &'static str,
    mode: Mode,
    mut planned: Vec<Planned>,
    one_machine: bool,
) -> Vec<Group> {
    if one_machine && planned.len() > 1 {
        planned = vec![merge_machine(planned)];
    }
    let mut groups: Vec<Group> = Vec::new();
    // Per group: each env advice and the targets it was given for.
    let mut advice: Vec<Vec<(EnvAdvice, Vec<String>)>> = Vec::new();
    for Planned {
        arch,
        devices,
        vmm,
        mut flags,
        env,
    } in planned
    {
        flags.sort_by(|a, b| a.name.cmp(&b.name));
        let arch: Vec<String> = arch.split(',').map(str::to_string).collect();
        // Runtime advice does not change what is compiled: targets whose flags agree share one
        // build, and each advice keeps the targets it is for.
        if let Some(i) = groups
            .iter()
            .position(|g| g.vmm == vmm && same_flags(&g.flags, &flags))
        {
            add_advice(&mut advice[i], env, &arch);
            let g = &mut groups[i];
            g.targets.extend(arch);
            g.devices.extend(devices);
            for f in flags {
                if let Some(gf) = g.flags.iter_mut().find(|gf| gf.name == f.name) {
                    gf.reason = merge_reasons(&gf.reason, &f.reason);
                    for q in f.quirks {
                        if !gf.quirks.contains(&q) {
                            gf.quirks.push(q);
                        }
                    }
                    // The workload lift lifts every lower level too (as in merge_reasons).
                    let workload = |l: &str| l.contains("--exercise");
                    gf.lift = match (gf.lift.take(), f.lift) {
                        (None, b) => b,
                        (a, None) => a,
                        (Some(a), Some(b)) if a == b || (workload(&a) && !workload(&b)) => Some(a),
                        (Some(a), Some(b)) if workload(&b) && !workload(&a) => Some(b),
                        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                    };
                }
            }
            continue;
        }
        let mut held = Vec::new();
        add_advice(&mut held, env, &arch);
        advice.push(held);
        groups.push(Group {
            name: String::new(),
            targets: arch,
            devices,
            vmm,
            flags,
            env: Vec::new(),
        });
    }
    for (g, held) in groups.iter_mut().zip(advice) {
        g.env = held
            .into_iter()
            .map(|(mut e, who)| {
                if who.len() < g.targets.len() {
                    let only = format!(
                        "the GPU is {} (this build also serves {})",
                        who.join(", "),
                        g.targets
                            .iter()
                            .filter(|t| !who.contains(t))
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                    e.when = Some(match e.when.take() {
                        Some(w) => format!("{only}; {w}"),
                        None => only,
                    });
                }
                e
            })
            .collect();
    }
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let single = groups.len() == 1;
    for g in &mut groups {
        let all_apu = g
            .targets
            .iter()
            .all(|t| k.targets.get(t).is_some_and(|t| t.apu));
        let base = if single {
            backend.as_str().to_string()
        } else {
            format!(
                "{}-{}{}",
                backend.as_str(),
                if g.vmm { "vmm" } else { "legacy-pool" },
                if all_apu { "-apu" } else { "" }
            )
        };
        let n = names.entry(base.clone()).or_insert(0);
        *n += 1;
        g.name = if *n == 1 { base } else { format!("{base}-{n}") };
        let mut head = base_flags(k, req, backend, switch, mode, &g.targets);
        head.append(&mut g.flags);
        g.flags = head;
    }
    groups
}

/// Adds `env`, given for `targets`, to a group's advice: the same advice (name, value and
/// condition) once, with every target it was given for.
fn add_advice(held: &mut Vec<(EnvAdvice, Vec<String>)>, env: Vec<EnvAdvice>, targets: &[String]) {
    for e in env {
        match held
            .iter_mut()
            .find(|(x, _)| x.name == e.name && x.value == e.value && x.when == e.when)
        {
            Some((x, who)) => {
                for q in e.quirks {
                    if !x.quirks.contains(&q) {
                        x.quirks.push(q);
                    }
                }
                who.extend(targets.iter().cloned());
            }
            None => held.push((e, targets.to_vec())),
        }
    }
}

/// One build for every architecture of a machine: the legacy pool if any of them needs it, every
/// flag any of them needs (each reason says for which architecture), every env advice.
fn merge_machine(planned: Vec<Planned>) -> Planned {
    let vmm = planned.iter().all(|p| p.vmm);
    let arch = planned
        .iter()
        .map(|p| p.arch.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let mut flags: Vec<Flag> = Vec::new();
    let mut env: Vec<EnvAdvice> = Vec::new();
    let mut devices = Vec::new();
    for p in &planned {
        devices.extend(p.devices.iter().copied());
        for f in &p.flags {
            let is_vmm_flag = f.name.ends_with("_NO_VMM");
            // For the VMM switch, only the architectures whose decision the build takes explain it.
            if is_vmm_flag && p.vmm != vmm {
                continue;
            }
            let reason = format!("{}: {}", p.arch, f.reason);
            match flags.iter_mut().find(|g| g.name == f.name) {
                Some(g) => {
                    g.reason = format!("{}; {reason}", g.reason);
                    for q in &f.quirks {
                        if !g.quirks.contains(q) {
                            g.quirks.push(q.clone());
                        }
                    }
                    g.lift = match (g.lift.take(), &f.lift) {
                        (Some(a), Some(b)) if &a != b => Some(format!("{a}; {b}")),
                        (a, b) => a.or_else(|| b.clone()),
                    };
                }
                None => flags.push(Flag {
                    reason,
                    ..f.clone()
                }),
            }
        }
        for e in &p.env {
            match env
                .iter_mut()
                .find(|x| x.name == e.name && x.value == e.value)
            {
                Some(x) => {
                    for q in &e.quirks {
                        if !x.quirks.contains(q) {
                            x.quirks.push(q.clone());
                        }
                    }
                }
                None => env.push(e.clone()),
            }
        }
    }
    // An environment variable reaches every GPU of the process: advice for only some of the
    // machine's GPUs holds only where llama.cpp runs on those alone.
    for e in &mut env {
        let holders: Vec<&str> = planned
            .iter()
            .filter(|p| p.env.iter().any(|x| x.name == e.name && x.value == e.value))
            .map(|p| p.arch.as_str())
            .collect();
        if holders.len() < planned.len() {
            let only = format!(
                "a llama.cpp process uses the {} alone (hide the other GPUs with HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES)",
                holders.join(", ")
            );
            e.when = Some(match e.when.take() {
                Some(w) => format!("{only}; {w}"),
                None => only,
            });
        }
    }
    Planned {
        arch,
        devices,
        vmm,
        flags,
        env,
    }
}

/// `HSA_OVERRIDE_GFX_VERSION=11.5.0` makes the GPU run the build's gfx1150 code objects: advice
/// that only helps a binary that has them. Where a group does not build that target the advice
/// is dropped and a note says what would make it usable.
fn drop_overrides_for_unbuilt_targets(groups: &mut [Group], notes: &mut Vec<Note>) {
    for g in groups.iter_mut() {
        let targets = g.targets.clone();
        g.env.retain(|e| {
            if e.name != "HSA_OVERRIDE_GFX_VERSION" {
                return true;
            }
            let Some(t) = override_target(&e.value) else {
                return true;
            };
            if targets.contains(&t) {
                return true;
            }
            notes.push(note(
                Severity::Medium,
                format!(
                    "{}: the stopgap HSA_OVERRIDE_GFX_VERSION={} runs {t} code objects, which this build ({}) does not have: add {t} to the targets to use it",
                    e.quirks.join(", "),
                    e.value,
                    targets.join(", ")
                ),
                &e.quirks,
                &targets,
            ));
            false
        });
    }
}

/// `11.5.0` → `gfx1150`, `9.0.10` → `gfx90a`, `10.3.0` → `gfx1030`.
fn override_target(value: &str) -> Option<String> {
    let mut it = value.trim().split('.');
    let major: u32 = it.next()?.parse().ok()?;
    let minor: u32 = it.next()?.parse().ok()?;
    let step: u32 = it.next().unwrap_or("0").parse().ok()?;
    (it.next().is_none() && minor < 16 && step < 16).then(|| format!("gfx{major}{minor:x}{step:x}"))
}

/// `VMM needs a measured workload (...) pass for ...` → `workload`.
fn need_level(segment: &str) -> Option<&str> {
    segment
        .strip_prefix("VMM needs a measured ")
        .or_else(|| segment.strip_prefix("past that, VMM needs a measured "))
        .and_then(|rest| rest.split([' ', '(']).next())
}

/// Two needs of one level and scope as one, naming every record of both (`workload (Q21
/// matches, Q3 matches for smoke)` and `workload (Q33 matches, Q21 matches)`); None when they
/// differ in level or scope.
fn union_needs(a: &str, b: &str) -> Option<String> {
    let parts = |s: &str| -> Option<(String, Vec<String>, String)> {
        let open = s.find(" (")?;
        let close = open + s[open..].find(')')?;
        let items = s[open + 2..close].split(", ").map(str::to_string).collect();
        Some((s[..open].to_string(), items, s[close + 1..].to_string()))
    };
    if a == b {
        return Some(a.to_string());
    }
    let (head_a, mut items, tail_a) = parts(a)?;
    let (head_b, items_b, tail_b) = parts(b)?;
    if head_a != head_b || tail_a != tail_b {
        return None;
    }
    for i in items_b {
        if !items.contains(&i) {
            items.push(i);
        }
    }
    Some(format!("{head_a} ({}){tail_a}", items.join(", ")))
}

/// Joins two `prefix: a; b` reasons without repeating the prefix or a segment.
fn merge_reasons(a: &str, b: &str) -> String {
    let is_prefix = |p: &str| p == LEGACY_PREFIX || p == LEGACY_PREFIX_HIP;
    let (prefix, first) = match a.split_once(": ") {
        Some((p, rest)) if is_prefix(p) => (Some(p), rest),
        _ => (None, a),
    };
    let second = match b.split_once(": ") {
        Some((p, rest)) if is_prefix(p) => rest,
        _ => b,
    };
    // Each target's reason says what it needs and how to lift it; a group says each thing
    // once: per evidence level the need naming the most records, then the ways to lift it.
    let mut needs: Vec<String> = Vec::new();
    let mut lifts: Vec<&str> = Vec::new();
    let mut segs: Vec<&str> = Vec::new();
    for s in first.split("; ").chain(second.split("; ")) {
        if s.starts_with("to lift it: ") {
            if !lifts.contains(&s) {
                lifts.push(s);
            }
        } else if need_level(s).is_some() {
            match needs.iter().position(|n| union_needs(n, s).is_some()) {
                Some(i) => needs[i] = union_needs(&needs[i], s).unwrap_or_default(),
                None => needs.push(s.to_string()),
            }
        } else if !segs.contains(&s) {
            segs.push(s);
        }
    }
    // A workload pass (check-build --exercise) is evidence at every lower level too: where one
    // is asked for, it alone lifts the group.
    if lifts.iter().any(|l| l.contains("--exercise")) {
        lifts.retain(|l| !l.contains("gpuprobe detect --json"));
    }
    let none_on_record = segs.iter().position(|s| *s == "none is on record");
    let none_on_record = none_on_record.map(|i| segs.remove(i));
    let mut segs: Vec<String> = segs.into_iter().map(str::to_string).collect();
    segs.extend(needs);
    segs.extend(none_on_record.map(str::to_string));
    segs.extend(lifts.into_iter().map(str::to_string));
    match prefix {
        Some(p) => format!("{p}: {}", segs.join("; ")),
        None => segs.join("; "),
    }
}

const LEGACY_PREFIX: &str = "keep the legacy pool";
/// HIP's legacy pool is llama.cpp's default, which Q1 records: said where it is kept.
const LEGACY_PREFIX_HIP: &str = "keep the legacy pool (llama.cpp's HIP default, Q1)";

fn legacy_prefix(backend: Backend) -> &'static str {
    match backend {
        Backend::Hip => LEGACY_PREFIX_HIP,
        Backend::Cuda => LEGACY_PREFIX,
    }
}

fn same_flags(a: &[Flag], b: &[Flag]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.name == y.name && x.value == y.value)
}

fn base_flags(
    k: &Knowledge,
    req: &Request<'_>,
    backend: Backend,
    switch: &'static str,
    mode: Mode,
    targets: &[String],
) -> Vec<Flag> {
    let mut flags = Vec::new();
    let explicit = format!(
        "explicit architectures: never `native`, which finds nothing on a GPU-less build machine ({})",
        ids::NATIVE_ARCH_IN_CI
    );
    match backend {
        Backend::Hip => {
            flags.push(flag(switch, "ON", "build the HIP (ROCm) backend"));
            let var = if req.llama.declares(&k.options, "GPU_TARGETS")
                || !req.llama.declares(&k.options, "AMDGPU_TARGETS")
            {
                "GPU_TARGETS"
            } else {
                "AMDGPU_TARGETS"
            };
            flags.push(Flag {
                name: var.into(),
                value: targets.join(";"),
                reason: explicit.clone(),
                quirks: vec![ids::NATIVE_ARCH_IN_CI.into()],
                lift: None,
            });
        }
        Backend::Cuda => {
            flags.push(flag(switch, "ON", "build the CUDA backend"));
            let plain_12x = req.llama.plain_12x(&k.options);
            let mut spelled = Vec::new();
            let archs: Vec<String> = targets
                .iter()
                .map(|t| {
                    let name = k.targets.get(t).map_or(t.as_str(), |t| t.cmake_name());
                    // Blackwell 12X: builds 7532-7537 fail in ptxas on a plain 120, 7538-7574
                    // stop on it ("use 120a or 120f"), later ones rewrite it to 120a; spell it
                    // 12Xa for all of them.
                    if plain_12x != Plain12x::Accepted && is_plain_12x(name) {
                        spelled.push(format!("{name}a"));
                        format!("{name}a")
                    } else {
                        name.to_string()
                    }
                })
                .collect();
            let mut reason = explicit;
            if !spelled.is_empty() {
                reason.push_str(&format!(
                    "; {} spelled architecture-specific because llama.cpp build {} {} a plain 12X",
                    spelled.join(", "),
                    req.llama.effective_build(&k.options),
                    match plain_12x {
                        Plain12x::Rejected => "rejects",
                        Plain12x::PtxasRejects =>
                            "passes on to ptxas, which rejects its Blackwell MMA kernels for",
                        _ => "rewrites",
                    }
                ));
            }
            flags.push(Flag {
                name: "CMAKE_CUDA_ARCHITECTURES".into(),
                value: archs.join(";"),
                reason,
                quirks: vec![ids::NATIVE_ARCH_IN_CI.into()],
                lift: None,
            });
        }
    }
    if matches!(mode, Mode::Targets | Mode::Machine)
        && req.llama.declares(&k.options, "GGML_NATIVE")
    {
        flags.push(flag(
            "GGML_NATIVE",
            "OFF",
            "a release build must not be tuned to the build machine's CPU",
        ));
    }
    flags.push(flag("CMAKE_BUILD_TYPE", "Release", "optimised build"));
    flags
}

fn backend_switch(k: &Knowledge, req: &Request<'_>, backend: Backend) -> Option<&'static str> {
    backend
        .switch_names()
        .iter()
        .copied()
        .find(|n| req.llama.declares(&k.options, n))
}

fn flag(name: &str, value: &str, reason: &str) -> Flag {
    Flag {
        name: name.into(),
        value: value.into(),
        reason: reason.into(),
        quirks: vec![],
        lift: None,
    }
}

/// `120`, `121`: a Blackwell 12X without an `a`/`f` suffix.
fn is_plain_12x(cmake_name: &str) -> bool {
    cmake_name.len() == 3
        && cmake_name.starts_with("12")
        && cmake_name.chars().all(|c| c.is_ascii_digit())
}

fn note(
    severity: Severity,
    message: impl Into<String>,
    quirks: &[String],
    targets: &[String],
) -> Note {
    Note {
        severity,
        message: message.into(),
        quirks: quirks.to_vec(),
        targets: targets.to_vec(),
    }
}

/// Same message for several targets becomes one note listing them.
fn dedup_notes(notes: &mut Vec<Note>) {
    let mut out: Vec<Note> = Vec::new();
    for n in notes.drain(..) {
        if let Some(o) = out.iter_mut().find(|o| o.message == n.message) {
            for t in n.targets {
                if !o.targets.contains(&t) {
                    o.targets.push(t);
                }
            }
        } else {
            out.push(n);
        }
    }
    out.sort_by_key(|n| std::cmp::Reverse(n.severity));
    *notes = out;
}

fn tri_word(t: Tri) -> &'static str {
    match t {
        Tri::Yes => "matches",
        Tri::No => "does not match",
        Tri::Unknown => "could match",
    }
}

pub(crate) fn dedup<T: PartialEq>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut v = Vec::new();
    for x in it {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}
