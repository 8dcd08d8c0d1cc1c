//! The resolver: devices (measured or declared) + toolkit + llama.cpp build + quirks → a plan.
//!
//! Every flag, env recommendation and warning carries its reason and the quirk ids behind it.

use std::collections::BTreeMap;

use crate::llama::LlamaTarget;
use crate::plan::{EnvAdvice, Flag, Group, LlamaRef, Mode, Note, Plan, SCHEMA, ToolkitRef};
use crate::profiles::Knowledge;
use crate::quirks::{Context, Os, Quirk, Severity, Tri, VmmEffect};
use crate::report::{Backend, Device, Report, SmokeOutcome, Vendor};
use crate::version::Version;

/// What the plan is for.
#[derive(Debug, Clone)]
pub enum Devices<'a> {
    /// Target names, already expanded (`gfx1100`, `sm_90`).
    Declared(Vec<String>),
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
}

/// One architecture in the plan, with the devices of that architecture if measured.
struct Unit<'a> {
    arch: String,
    vendor: Vendor,
    apu: Option<bool>,
    devices: Vec<&'a Device>,
}

pub fn resolve(k: &Knowledge, req: &Request<'_>) -> Result<Plan, crate::Error> {
    let mut trace = Vec::new();
    let mut refusals = Vec::new();
    let (mode, mut units, report) = collect_units(k, req)?;

    let vendors: Vec<Vendor> = dedup(units.iter().map(|u| u.vendor));
    let backend = match (req.backend, vendors.as_slice()) {
        (Some(b), _) => {
            units.retain(|u| u.vendor == b.vendor());
            b
        }
        (None, [Vendor::Amd]) => Backend::Hip,
        (None, [Vendor::Nvidia]) => Backend::Cuda,
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
            switch_names(backend).join(", ")
        )],
    })?;
    if units.is_empty() {
        return Err(crate::Error::Environment {
            message: format!("no {} device or target to plan for", backend.name()),
            fix: "declare targets with --targets (e.g. gfx1100,gfx120X or sm_90)".into(),
        });
    }

    let toolkit_name = match backend {
        Backend::Hip => "ROCm",
        Backend::Cuda => "CUDA",
    };
    let declared = match backend {
        Backend::Hip => req.rocm.clone(),
        Backend::Cuda => req.cuda.clone(),
    };
    // Buildability is a question for the toolkit that will compile; runtime quirks are a question
    // for the runtime the devices were measured with, when there is one.
    let toolkit = declared.clone();
    let measured = measured_runtime(report, backend);
    let runtime = measured.clone().or_else(|| declared.clone());
    if let Some(v) = &toolkit {
        for u in &units {
            if let Some(t) = k.targets.get(&u.arch)
                && let Some(why) = t.unbuildable_with(v)
            {
                refusals.push(note(
                    Severity::High,
                    why,
                    &[],
                    std::slice::from_ref(&u.arch),
                ));
            }
        }
    } else {
        trace.push(format!(
            "{toolkit_name} version unknown: quirks with a version range count as possibly matching; \
             give --{} VER to be precise",
            toolkit_name.to_lowercase()
        ));
    }

    let build = req.llama.effective_build(&k.options);
    let driver = report
        .and_then(|r| r.devices.first())
        .and_then(|d| d.driver_version.as_deref())
        .and_then(|s| s.parse().ok());
    let multi_gpu = report.map(|r| r.devices.iter().filter(|d| d.backend == backend).count() > 1);
    let igpu_with_dgpu = report.map(|r| {
        let ds: Vec<&Device> = r.devices.iter().filter(|d| d.backend == backend).collect();
        ds.iter().any(|d| d.integrated == Some(true))
            && ds.iter().any(|d| d.integrated == Some(false))
    });
    let peer_problem = report.map(|r| {
        r.peers
            .iter()
            .any(|p| p.can_access == Some(false) || p.copy_ok == Some(false))
    });
    let env_set: Vec<String> = req.env_set.clone();

    let mut warnings: Vec<Note> = Vec::new();
    let mut notes: Vec<Note> = Vec::new();
    let mut planned: Vec<Planned> = Vec::new();

    for u in &units {
        let smoke = unit_smoke(u);
        let base_ctx = Context {
            targets: &k.targets,
            vendor: u.vendor,
            arch: &u.arch,
            os: Some(req.os),
            runtime: runtime.as_ref(),
            driver: driver.as_ref(),
            llama_build: if req.llama.checkout.is_some() && req.llama.build.is_none() {
                None
            } else {
                Some(build)
            },
            apu: u.apu,
            multi_gpu,
            igpu_with_dgpu,
            vmm_build: None,
            uma: None,
            peer_problem,
            smoke: smoke.as_deref(),
            env_set: &env_set,
        };
        for d in &u.devices {
            if d.smoke.outcome == SmokeOutcome::Crash
                && matches!(
                    d.smoke.stage.as_deref(),
                    None | Some("context") | Some("init")
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
            } else if d.arch == "unknown" {
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

        let (vmm, vmm_reason, vmm_quirks) =
            decide_vmm(k, req, backend, u, &base_ctx, smoke.as_deref(), &mut trace);
        let mut flags = Vec::new();
        let mut env = Vec::new();
        let vmm_flag = match backend {
            Backend::Hip => "GGML_HIP_NO_VMM",
            Backend::Cuda => "GGML_CUDA_NO_VMM",
        };
        if req.llama.declares(&k.options, vmm_flag) {
            flags.push(Flag {
                name: vmm_flag.into(),
                value: if vmm { "OFF" } else { "ON" }.into(),
                reason: vmm_reason,
                quirks: vmm_quirks,
            });
        } else {
            notes.push(note(
                Severity::Info,
                format!("{vmm_flag} is not declared in llama.cpp build {build}; the VMM decision ({}) cannot be expressed as a flag there", if vmm { "VMM on" } else { "legacy pool" }),
                &[],
                std::slice::from_ref(&u.arch),
            ));
        }

        // Two passes: the first finds whether unified memory is recommended (quirks may depend on it).
        let mut ctx = base_ctx.clone();
        ctx.vmm_build = Some(vmm);
        let uma = k.quirks.iter().filter(|q| !q.contested).any(|q| {
            q.effect.env.contains_key("GGML_CUDA_ENABLE_UNIFIED_MEMORY")
                && q.evaluate(&ctx).0 == Tri::Yes
        });
        ctx.uma = Some(uma);
        for q in k.quirks.iter().filter(|q| !q.contested) {
            let (verdict, why) = q.evaluate(&ctx);
            if verdict == Tri::No {
                continue;
            }
            trace.push(format!(
                "{} {}: {} [{}]",
                u.arch,
                q.id,
                tri_word(verdict),
                why.join("; ")
            ));
            apply_quirk(
                k,
                req,
                q,
                verdict,
                u,
                &mut flags,
                &mut env,
                &mut warnings,
                &mut notes,
                &mut refusals,
                build,
            );
        }
        planned.push((
            u.arch.clone(),
            u.devices.iter().map(|d| d.index).collect(),
            vmm,
            flags,
            env,
        ));
    }

    let groups = group(k, req, backend, switch, mode, planned);
    for e in report.map(|r| r.environment.as_slice()).unwrap_or_default() {
        let message = format!("{}={} is set: {}", e.name, e.value, e.effect);
        warnings.push(note(Severity::Medium, message, &[], &[]));
    }
    dedup_notes(&mut warnings);
    dedup_notes(&mut notes);
    dedup_notes(&mut refusals);
    Ok(Plan {
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
        toolkit: ToolkitRef {
            name: toolkit_name,
            version: toolkit.clone().or(measured.clone()).map(|v| v.to_string()),
            source: if declared.is_some() {
                match backend {
                    Backend::Hip => req.rocm_source.clone(),
                    Backend::Cuda => req.cuda_source.clone(),
                }
            } else if measured.is_some() {
                "measured runtime".into()
            } else {
                "unknown".into()
            },
        },
        groups,
        warnings,
        notes,
        refusals,
        trace,
    })
}

fn collect_units<'a>(
    k: &Knowledge,
    req: &'a Request<'a>,
) -> Result<(Mode, Vec<Unit<'a>>, Option<&'a Report>), crate::Error> {
    match &req.devices {
        Devices::Declared(names) => {
            let units = names
                .iter()
                .map(|n| {
                    let t = k.targets.get(n).ok_or_else(|| {
                        crate::Error::input(
                            "--targets",
                            format!("unknown GPU target `{n}`"),
                            "see `gpuprobe quirks targets`",
                        )
                    })?;
                    Ok(Unit {
                        arch: t.name.clone(),
                        vendor: t.vendor,
                        apu: Some(t.apu),
                        devices: Vec::new(),
                    })
                })
                .collect::<Result<Vec<_>, crate::Error>>()?;
            Ok((Mode::Targets, units, None))
        }
        Devices::Measured { report, mode } => {
            let mut units: Vec<Unit<'a>> = Vec::new();
            for d in &report.devices {
                if let Some(u) = units
                    .iter_mut()
                    .find(|u| u.arch == d.arch && u.vendor == d.vendor)
                {
                    u.devices.push(d);
                } else {
                    let apu = d
                        .integrated
                        .or_else(|| k.targets.get(&d.arch).map(|t| t.apu));
                    units.push(Unit {
                        arch: d.arch.clone(),
                        vendor: d.vendor,
                        apu,
                        devices: vec![d],
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
    let mut parts = text.split(['.', '-']);
    let major = parts.next()?;
    let minor = parts.next()?;
    format!("{major}.{minor}").parse().ok()
}

/// The unit's smoke result, worst device first (`not-run` for declared targets).
fn unit_smoke(u: &Unit<'_>) -> Option<String> {
    if u.devices.is_empty() {
        // Declared targets: nothing was measured, so measured-outcome conditions cannot hold.
        return Some("not-run".into());
    }
    let rank = |d: &Device| -> (u8, String) {
        let s = &d.smoke;
        match s.outcome {
            SmokeOutcome::Crash => (6, "crash".into()),
            SmokeOutcome::Hang => (5, "hang".into()),
            SmokeOutcome::Fail if s.reserve_failed() => (4, "reserve-fail".into()),
            SmokeOutcome::Fail => (4, "fail".into()),
            SmokeOutcome::BadOutput => (3, "bad-output".into()),
            SmokeOutcome::NotRun => (2, "not-run".into()),
            SmokeOutcome::Pass => (1, "pass".into()),
        }
    };
    u.devices
        .iter()
        .map(|d| rank(d))
        .max_by_key(|(r, _)| *r)
        .map(|(_, s)| s)
}

fn decide_vmm(
    k: &Knowledge,
    req: &Request<'_>,
    backend: Backend,
    u: &Unit<'_>,
    ctx: &Context<'_>,
    smoke: Option<&str>,
    trace: &mut Vec<String>,
) -> (bool, String, Vec<String>) {
    if req.force_no_vmm {
        return (
            false,
            "legacy pool forced with --force-no-vmm".into(),
            vec![],
        );
    }
    // Measured facts first: the attribute, then the smoke test.
    if let Some(d) = u.devices.iter().find(|d| d.vmm_supported == Some(false)) {
        return (
            false,
            format!("device {} ({}) reports no VMM support", d.index, d.name),
            vec![],
        );
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
            .is_some_and(|e| e.name.as_deref() == Some("SYMBOL_NOT_FOUND"));
        let q = if d.smoke.reserve_failed() && !missing_symbol {
            vec!["Q15".to_string()]
        } else {
            vec![]
        };
        if d.smoke.outcome == SmokeOutcome::NotRun {
            // Not measured: fall through to the quirk-only rules below, but say so.
            trace.push(format!(
                "{}: smoke test not run on device {} ({what}); deciding from quirks",
                u.arch, d.index
            ));
        } else {
            return (false, format!("device {} ({}): {what}", d.index, d.name), q);
        }
    }
    let measured_pass = smoke == Some("pass");
    let mut denied: Vec<(String, String)> = Vec::new();
    for q in k.quirks.iter().filter(|q| !q.contested) {
        let Some(effect) = q.effect.vmm else { continue };
        let (verdict, why) = q.evaluate(ctx);
        if !verdict.possible() {
            continue;
        }
        if effect == VmmEffect::DenyUnlessSmokePass && measured_pass {
            trace.push(format!(
                "{}: {} would deny VMM but the smoke test passed on this machine [{}]",
                u.arch,
                q.id,
                why.join("; ")
            ));
            continue;
        }
        let certainty = if verdict == Tri::Yes {
            "matches"
        } else {
            "could match (some facts unknown)"
        };
        trace.push(format!(
            "{}: {} {certainty}: deny VMM [{}]",
            u.arch,
            q.id,
            why.join("; ")
        ));
        denied.push((q.id.clone(), format!("{} {certainty}: {}", q.id, q.title)));
    }
    if !denied.is_empty() {
        let ids = denied.iter().map(|(i, _)| i.clone()).collect();
        let reasons: Vec<String> = denied.into_iter().map(|(_, r)| r).collect();
        return (
            false,
            format!("{LEGACY_PREFIX}: {}", reasons.join("; ")),
            ids,
        );
    }
    let why = match (backend, measured_pass) {
        (_, true) => "VMM smoke test passed on every device of this architecture and no deny quirk matches".to_string(),
        (Backend::Hip, false) => {
            "no deny quirk can match this target with the given ROCm version; the VMM pool avoids the legacy pool's VRAM creep (Q2)".into()
        }
        (Backend::Cuda, false) => "CUDA default: the VMM pool; no deny quirk can match".into(),
    };
    (
        true,
        why,
        if backend == Backend::Hip {
            vec!["Q1".into()]
        } else {
            vec![]
        },
    )
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
    q: &Quirk,
    verdict: Tri,
    u: &Unit<'_>,
    flags: &mut Vec<Flag>,
    env: &mut Vec<EnvAdvice>,
    warnings: &mut Vec<Note>,
    notes: &mut Vec<Note>,
    refusals: &mut Vec<Note>,
    build: u64,
) {
    let ids = [q.id.clone()];
    let targets = [u.arch.clone()];
    if verdict == Tri::Unknown {
        let has_effect = q.effect.warn.is_some()
            || !q.effect.set.is_empty()
            || !q.effect.env.is_empty()
            || q.effect.refuse.is_some();
        if has_effect && q.effect.vmm.is_none() {
            notes.push(note(
                q.severity.min(Severity::Medium),
                format!("{} may apply: {}", q.id, q.summary),
                &ids,
                &targets,
            ));
        }
        return;
    }
    for (name, value) in &q.effect.set {
        if req.llama.declares(&k.options, name) {
            if let Some(f) = flags.iter_mut().find(|f| &f.name == name) {
                f.quirks.push(q.id.clone());
            } else {
                flags.push(Flag {
                    name: name.clone(),
                    value: value.clone(),
                    reason: format!("{}: {}", q.id, q.title),
                    quirks: vec![q.id.clone()],
                });
            }
        } else {
            notes.push(note(
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
        if let Some(e) = env.iter_mut().find(|e| &e.name == name) {
            e.quirks.push(q.id.clone());
        } else {
            env.push(EnvAdvice {
                name: name.clone(),
                value: value.clone(),
                reason: format!("{}: {}", q.id, q.title),
                when: q.effect.env_when.clone(),
                quirks: vec![q.id.clone()],
            });
        }
    }
    if let Some(w) = &q.effect.warn {
        warnings.push(note(q.severity, format!("{}: {w}", q.id), &ids, &targets));
    }
    if let Some(r) = &q.effect.refuse {
        refusals.push(note(
            Severity::Critical,
            format!("{}: {r}", q.id),
            &ids,
            &targets,
        ));
    }
}

type Planned = (String, Vec<u32>, bool, Vec<Flag>, Vec<EnvAdvice>);

/// Targets with identical flags and env share one build; each group gets the arch list and the
/// base flags.
fn group(
    k: &Knowledge,
    req: &Request<'_>,
    backend: Backend,
    switch: &'static str,
    mode: Mode,
    planned: Vec<Planned>,
) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for (arch, devices, vmm, mut flags, env) in planned {
        flags.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(g) = groups
            .iter_mut()
            .find(|g| g.vmm == vmm && same_flags(&g.flags, &flags) && g.env == env)
        {
            g.targets.push(arch);
            g.devices.extend(devices);
            for f in flags {
                if let Some(gf) = g.flags.iter_mut().find(|gf| gf.name == f.name) {
                    gf.reason = merge_reasons(&gf.reason, &f.reason);
                    for q in f.quirks {
                        if !gf.quirks.contains(&q) {
                            gf.quirks.push(q);
                        }
                    }
                }
            }
            continue;
        }
        groups.push(Group {
            name: String::new(),
            targets: vec![arch],
            devices,
            vmm,
            flags,
            env,
        });
    }
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let single = groups.len() == 1;
    for g in &mut groups {
        let all_apu = g
            .targets
            .iter()
            .all(|t| k.targets.get(t).is_some_and(|t| t.apu));
        let base = if single {
            backend_word(backend).to_string()
        } else {
            format!(
                "{}-{}{}",
                backend_word(backend),
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

/// Joins two `prefix: a; b` reasons without repeating the prefix or a segment.
fn merge_reasons(a: &str, b: &str) -> String {
    let (prefix, first) = match a.split_once(": ") {
        Some((p, rest)) if p == LEGACY_PREFIX => (Some(p), rest),
        _ => (None, a),
    };
    let second = b
        .strip_prefix(LEGACY_PREFIX)
        .and_then(|r| r.strip_prefix(": "))
        .unwrap_or(b);
    let mut segs: Vec<&str> = first.split("; ").collect();
    for s in second.split("; ") {
        if !segs.contains(&s) {
            segs.push(s);
        }
    }
    match prefix {
        Some(p) => format!("{p}: {}", segs.join("; ")),
        None => segs.join("; "),
    }
}

const LEGACY_PREFIX: &str = "keep the legacy pool";

fn same_flags(a: &[Flag], b: &[Flag]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.name == y.name && x.value == y.value)
}

fn backend_word(b: Backend) -> &'static str {
    match b {
        Backend::Hip => "hip",
        Backend::Cuda => "cuda",
    }
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
    let explicit = "explicit architectures: never `native`, which finds nothing on a GPU-less build machine (Q19)";
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
                reason: explicit.into(),
                quirks: vec!["Q19".into()],
            });
        }
        Backend::Cuda => {
            flags.push(flag(switch, "ON", "build the CUDA backend"));
            let archs: Vec<&str> = targets
                .iter()
                .map(|t| k.targets.get(t).map_or(t.as_str(), |t| t.cmake_name()))
                .collect();
            flags.push(Flag {
                name: "CMAKE_CUDA_ARCHITECTURES".into(),
                value: archs.join(";"),
                reason: explicit.into(),
                quirks: vec!["Q19".into()],
            });
        }
    }
    if mode == Mode::Targets && req.llama.declares(&k.options, "GGML_NATIVE") {
        flags.push(flag(
            "GGML_NATIVE",
            "OFF",
            "a release build must not be tuned to the build machine's CPU",
        ));
    }
    flags.push(flag("CMAKE_BUILD_TYPE", "Release", "optimised build"));
    flags
}

/// Backend switches by era: `GGML_HIPBLAS` was renamed `GGML_HIP` at build 4080.
fn switch_names(backend: Backend) -> &'static [&'static str] {
    match backend {
        Backend::Hip => &["GGML_HIP", "GGML_HIPBLAS"],
        Backend::Cuda => &["GGML_CUDA"],
    }
}

fn backend_switch(k: &Knowledge, req: &Request<'_>, backend: Backend) -> Option<&'static str> {
    switch_names(backend)
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
    }
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

fn dedup<T: PartialEq>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut v = Vec::new();
    for x in it {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v
}
