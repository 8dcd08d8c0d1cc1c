//! Quirks judged against the evidence in the input: which quirks a seen failure is a symptom of
//! (signature findings), which quirks merely have their conditions met (notes), and the flags the
//! evidence adds to the plan, so that the "gpuprobe would build" line and every fix agree.
//!
//! Levels follow one rule: a symptom in the input plus confirmed conditions is an error or
//! warning; conditions alone are a note for quirks whose symptom a log can show (any quirk a
//! signature explains). A multi-GPU condition holds only when the input shows a run split across
//! GPUs of an architecture the quirk covers.

use super::corpus::Quote;
use super::finding::{Finding, Level};
use super::input::Input;
use super::legacy_advice::BuildSeen;
use super::plan_summary::{PlanGroup, PlanSummary, rebuild_command};
use super::signatures::{Class, FixKind, Hit, Signature, SignatureTable, Spec};
use crate::emit::sh_quote;
use crate::llama::LlamaTarget;
use crate::plan::{Flag, Plan};
use crate::quirks::{Condition, Context, Evaluation, Field, Quirk, SmokeCondition, Tri};
use crate::report::{Backend, Vendor};
use crate::version::Version;

/// One place a quirk is evaluated: a machine device, or a device the build listed.
#[derive(Debug, Clone)]
pub struct Subject {
    pub label: String,
    pub vendor: Vendor,
    /// Empty when not known (a log with no device line).
    pub arch: String,
    pub index: Option<u32>,
    pub apu: Option<bool>,
    pub smoke: Option<SmokeCondition>,
    pub driver: Option<Version>,
    /// The build's device line for it, to quote.
    pub line: Option<String>,
    /// False for a stand-in when nothing says whose GPU it is (judged as both vendors).
    pub vendor_known: bool,
}

/// Everything the quirk conditions are evaluated against.
pub struct Scene<'a> {
    pub input: &'a Input<'a>,
    pub backend: Option<Backend>,
    pub subjects: Vec<Subject>,
    pub runtime: Option<Version>,
    /// The pool the build uses: from system_info / device lines, else from what a hit proves.
    pub vmm_build: Option<bool>,
    pub vmm_quotes: Vec<Quote>,
    /// A run split across GPUs (Some(true)), a single-GPU one (Some(false)), or not shown.
    pub multi_gpu: Option<bool>,
    pub run_quotes: Vec<Quote>,
    pub igpu_with_dgpu: Option<bool>,
    /// The devices the log shows are of more than one architecture (unknown below two).
    pub mixed_archs: Option<bool>,
    pub peer_problem: Option<bool>,
    pub uma: bool,
    /// The build is at least / at most this (a flush line proves 8863 or later, the old OOM
    /// statement 8862 or earlier), when its number is unknown.
    pub min_build: Option<u64>,
    pub max_build: Option<u64>,
}

impl Scene<'_> {
    fn context<'b>(&'b self, s: &'b Subject, vmm: Option<bool>, build: Option<u64>) -> Context<'b> {
        let k = self.input.knowledge;
        Context {
            targets: &k.targets,
            vendor: s.vendor,
            arch: &s.arch,
            os: Some(self.input.os),
            runtime: self.runtime.as_ref(),
            driver: s.driver.as_ref(),
            llama_build: build,
            kernel: None,
            apu: s.apu,
            multi_gpu: self.multi_gpu,
            igpu_with_dgpu: self.igpu_with_dgpu,
            mixed_archs: self.mixed_archs,
            vmm_build: vmm,
            uma: Some(self.uma),
            peer_problem: self.peer_problem,
            smoke: s.smoke,
            env_set: &self.input.env_set,
        }
    }

    /// The quirk's own conditions for one subject. `vmm` overrides the build's pool (a hit may
    /// prove which pool a failing device used). An unknown architecture or a build known only
    /// from below leaves the conditions on them open instead of false.
    pub fn evaluate(&self, q: &Quirk, s: &Subject, vmm: Option<bool>) -> Evaluation {
        let vmm = vmm.or(self.vmm_build);
        let mut q = q.clone();
        let arch_unknown = s.arch.is_empty() && !q.when.archs.is_empty();
        if arch_unknown {
            q.when.archs.clear();
        }
        let build = self.input.build.value;
        let Evaluation {
            verdict: mut tri,
            mut conditions,
        } = q.evaluate(&self.context(s, vmm, build));
        let fixed = q.fixed_in.as_ref().and_then(|f| f.llama_build);
        if build.is_none()
            && (self.min_build.is_some() || self.max_build.is_some())
            && (q.when.llama_builds.is_some() || fixed.is_some())
        {
            // The build lies in [lo, hi]: a build condition holds when it holds at both ends,
            // and fails when it fails at both ends and at every bound (range ends, the fixed
            // build) between them.
            let (lo, hi) = (
                self.min_build.unwrap_or(1),
                self.max_build.unwrap_or(u64::MAX / 4),
            );
            let bound = |v: &Option<crate::version::Version>| -> Option<u64> {
                v.as_ref().and_then(|v| v.to_string().parse().ok())
            };
            let range = q.when.llama_builds.as_ref();
            let mut points = vec![lo, hi];
            points.extend(
                [
                    range.and_then(|r| bound(&r.min)),
                    range.and_then(|r| bound(&r.max)),
                    fixed,
                    fixed.map(|f| f.saturating_sub(1)),
                ]
                .into_iter()
                .flatten()
                .filter(|p| (lo..=hi).contains(p)),
            );
            let verdicts: Vec<Evaluation> = points
                .iter()
                .map(|p| q.evaluate(&self.context(s, vmm, Some(*p))))
                .collect();
            if verdicts.iter().all(|e| e.verdict == verdicts[0].verdict) {
                tri = verdicts[0].verdict;
                conditions = verdicts[0].conditions.clone();
                // The build is known only as a range: say so instead of the end point tried.
                let known = match (self.min_build, self.max_build) {
                    (Some(a), Some(b)) => format!("{a} to {b}"),
                    (Some(a), None) => format!("{a} or later"),
                    (None, Some(b)) => format!("{b} or earlier"),
                    (None, None) => String::new(),
                };
                for c in conditions
                    .iter_mut()
                    .filter(|c| c.field == Field::LlamaBuild)
                {
                    c.detail = format!("{known} by what the log prints");
                }
            }
        }
        if arch_unknown {
            if tri == Tri::Yes {
                tri = Tri::Unknown;
            }
            conditions.push(Condition {
                field: Field::Arch,
                verdict: Tri::Unknown,
                detail: "no device line names it".into(),
            });
        }
        Evaluation {
            verdict: tri,
            conditions,
        }
    }

    fn knowledge(&self) -> &crate::profiles::Knowledge {
        self.input.knowledge
    }

    /// The subjects a hit concerns: the device it names, else every subject of its vendor.
    fn subjects_for(&self, hit: &Hit, vendor: Option<Vendor>) -> Vec<Subject> {
        let of_vendor: Vec<&Subject> = self
            .subjects
            .iter()
            .filter(|s| vendor.is_none_or(|v| v == s.vendor))
            .collect();
        if let Some(i) = hit.device
            && let Some(s) = of_vendor.iter().find(|s| s.index == Some(i))
        {
            return vec![(*s).clone()];
        }
        if !of_vendor.is_empty() {
            return of_vendor.into_iter().cloned().collect();
        }
        // Nothing known about the devices: judge against a stand-in of the vendor the line
        // names, or of each vendor when nothing names one.
        let stand_in = |v: Vendor, known: bool| Subject {
            label: String::new(),
            vendor: v,
            arch: String::new(),
            index: hit.device,
            apu: None,
            smoke: None,
            driver: None,
            line: None,
            vendor_known: known,
        };
        match vendor
            .or(self.backend.map(|b| b.vendor()))
            .or_else(|| vendor_named_by(self.input.signatures, hit))
        {
            Some(v) => vec![stand_in(v, true)],
            None => vec![
                stand_in(Vendor::Amd, false),
                stand_in(Vendor::Nvidia, false),
            ],
        }
    }

    /// The plan group that builds for `s`.
    pub fn group_for<'p>(
        &self,
        plan: &'p PlanSummary,
        s: Option<&Subject>,
    ) -> Option<&'p PlanGroup> {
        s.and_then(|s| {
            plan.groups.iter().find(|g| {
                s.index.is_some_and(|i| g.devices.contains(&i)) || g.targets.contains(&s.arch)
            })
        })
        .or_else(|| plan.groups.first())
    }
}

/// Whether some signature can show this quirk's symptom in a log.
pub fn symptom_bearing(signatures: &SignatureTable, id: &str) -> bool {
    signatures
        .rows
        .iter()
        .any(|r| r.spec.explains.iter().any(|e| e.quirk == id))
}

/// Adds to the plan the CMake flags of every quirk whose conditions the input confirms and that
/// the resolver could not know (a multi-GPU run shown only by the log, say), so that the plan
/// line and the fixes that ask for them are one.
pub fn adjust_plan(scene: &Scene<'_>, plan: &mut Plan, llama: &LlamaTarget) {
    let k = scene.knowledge();
    for q in k
        .quirks
        .iter()
        .filter(|q| !q.contested && q.effect.vmm.is_none())
    {
        if q.effect.set.is_empty() {
            continue;
        }
        for s in &scene.subjects {
            if scene.evaluate(q, s, None).verdict != Tri::Yes {
                continue;
            }
            for g in plan.groups.iter_mut().filter(|g| {
                s.index.is_some_and(|i| g.devices.contains(&i)) || g.targets.contains(&s.arch)
            }) {
                for (name, value) in &q.effect.set {
                    if !llama.declares(&k.options, name) || g.flag(name).is_some() {
                        continue;
                    }
                    g.flags.push(Flag {
                        name: name.clone(),
                        value: value.clone(),
                        reason: format!("{}: {} (conditions shown by the input)", q.id, q.title),
                        quirks: vec![q.id.clone()],
                        lift: None,
                    });
                }
            }
        }
    }
}

/// What a fix asks for: the text, and the `-DNAME=VALUE` flags and `NAME=VALUE` variables in it.
#[derive(Default)]
struct Fix {
    text: Vec<String>,
    flags: Vec<String>,
    env: Vec<String>,
}

impl Fix {
    fn apply(self, mut f: Finding) -> Finding {
        if !self.text.is_empty() {
            f.fix = Some(self.text.join("; "));
        }
        f.flags = self.flags;
        f.env = self.env;
        f
    }
}

/// The rebuild command of a group, asking for `want` flags (each kept only if in the group's
/// line: a fix never asks for a flag the plan does not have).
fn rebuild(g: &PlanGroup, want: &[String], hint: &str, fix: &mut Fix) {
    fix.text.push(rebuild_command(g, hint));
    for w in want {
        if g.cmake_args.contains(w) && !fix.flags.contains(w) {
            fix.flags.push(w.clone());
        }
    }
}

/// `gpuprobe check-build --exercise ...` then `gpuprobe quirks record --from ...`.
pub fn record_command(input: &Input<'_>) -> String {
    let tbo = input
        .binary_dir
        .as_deref()
        .map(|d| sh_quote(&format!("{d}/test-backend-ops")))
        .unwrap_or_else(|| "BUILD/bin/test-backend-ops".into());
    format!(
        "reproduce it on this machine and keep it: gpuprobe check-build --exercise --binary {tbo} --json --output exercise.json; gpuprobe quirks record --from exercise.json"
    )
}

fn quirk_effect_fix(
    scene: &Scene<'_>,
    quirks: &[&Quirk],
    group: Option<&PlanGroup>,
    fix: &mut Fix,
) {
    let mut want = Vec::new();
    for q in quirks {
        // A record without flags or environment gives its advice in words (a command-line
        // option, another runtime).
        if q.effect.set.is_empty()
            && q.effect.env.is_empty()
            && let Some(w) = &q.effect.warn
        {
            fix.text.push(w.clone());
        }
        for (name, value) in &q.effect.set {
            want.push(format!("-D{name}={value}"));
        }
        for (name, value) in &q.effect.env {
            let when = q
                .effect
                .env_when
                .as_ref()
                .map(|w| format!(" (only for {w})"))
                .unwrap_or_default();
            if scene.input.env_set.iter().any(|s| s == name) {
                fix.text.push(format!("{name} is already set here{when}"));
            } else {
                fix.text.push(format!(
                    "at run time: export {name}={}{when}",
                    sh_quote(value)
                ));
                fix.env.push(format!("{name}={value}"));
            }
        }
    }
    if !want.is_empty() {
        match group {
            Some(g) if want.iter().all(|w| g.cmake_args.contains(w)) => {
                rebuild(g, &want, &scene.input.script_hint, fix)
            }
            _ => fix.text.push(format!(
                "the build setting it needs is not in this plan (llama.cpp {} may not have it): see `gpuprobe quirks show {}`",
                scene
                    .input
                    .build
                    .value
                    .map_or("of this build".to_string(), |b| format!("build {b}")),
                quirks.iter().map(|q| q.id.as_str()).collect::<Vec<_>>().join("`, `gpuprobe quirks show ")
            )),
        }
    }
}

fn no_vmm_fix(
    scene: &Scene<'_>,
    group: Option<&PlanGroup>,
    subject: Option<&Subject>,
    fix: &mut Fix,
) {
    let Some(b) = scene.backend.or_else(|| {
        subject.filter(|s| s.vendor_known).map(|s| match s.vendor {
            Vendor::Amd => Backend::Hip,
            Vendor::Nvidia => Backend::Cuda,
        })
    }) else {
        fix.text.push(format!(
            "rebuild with the VMM pool compiled out ({}=ON for a CUDA build, {}=ON for a HIP build; {} writes the whole build)",
            Backend::Cuda.no_vmm_flag(),
            Backend::Hip.no_vmm_flag(),
            scene.input.script_hint
        ));
        return;
    };
    let flag = b.no_vmm_flag();
    match group {
        Some(g) if !g.vmm => rebuild(g, &[format!("-D{flag}=ON")], &scene.input.script_hint, fix),
        Some(_) => {
            fix.text.push(format!(
                "this machine's plan would keep the VMM pool (its smoke test passed), but the input shows the pool failing: {}; plans made here then compile it out",
                record_command(scene.input)
            ));
        }
        None => fix.text.push(format!(
            "rebuild with the VMM pool compiled out ({flag}=ON; {} writes the whole build)",
            scene.input.script_hint
        )),
    }
}

fn legacy_pool_fix(scene: &Scene<'_>, group: Option<&PlanGroup>, fix: &mut Fix) {
    if let (Some(g), Some(b)) = (group, scene.backend)
        && g.vmm
    {
        rebuild(
            g,
            &[format!("-D{}=OFF", b.no_vmm_flag())],
            &scene.input.script_hint,
            fix,
        );
        return;
    }
    let seen = BuildSeen {
        number: scene.input.build.value,
        at_least: scene.min_build,
        at_most: scene.max_build,
    };
    // The table always has the advice when a row asks for this fix (SignatureTable::load).
    if let Some(a) = &scene.input.signatures.legacy_pool {
        fix.text.push(a.advice(seen, group.is_some()).join("; "));
    }
}

/// The vendor a hit's line names by what only its builds print (`[line_vendor]` in the table),
/// for logs with no device line.
fn vendor_named_by(signatures: &SignatureTable, hit: &Hit) -> Option<Vendor> {
    signatures.line_vendor.named_by(&hit.quotes.first()?.text)
}

/// One finding per signature and input, for every failure the input shows.
pub fn symptom_findings(
    scene: &Scene<'_>,
    plan: Option<&PlanSummary>,
    out: &mut Vec<Finding>,
) -> Vec<String> {
    let hits = scene.input.hits;
    let mut attributed: Vec<String> = Vec::new();
    let mut groups: Vec<(usize, usize, Vec<&Hit>)> = Vec::new();
    for h in hits {
        if scene.input.signatures.rows[h.row].spec.class == Class::Fact {
            continue;
        }
        match groups
            .iter_mut()
            .find(|(r, i, _)| *r == h.row && *i == h.at.input)
        {
            Some((_, _, v)) => v.push(h),
            None => groups.push((h.row, h.at.input, vec![h])),
        }
    }
    for (row, _, list) in groups {
        let sig = &scene.input.signatures.rows[row];
        out.extend(symptom_finding(scene, plan, sig, &list, &mut attributed));
    }
    attributed
}

fn symptom_finding(
    scene: &Scene<'_>,
    plan: Option<&PlanSummary>,
    sig: &Signature,
    hits: &[&Hit],
    attributed: &mut Vec<String>,
) -> Option<Finding> {
    let k = scene.knowledge();
    let spec = &sig.spec;
    // The first hit carries the quotes; a decoded fault prefers the first block with a status.
    let first = hits
        .iter()
        .find(|h| h.fault.as_ref().is_some_and(|f| f.kind.is_some()))
        .or(hits.first())
        .copied()?;
    let with_context = hits.iter().find(|h| !h.context.is_empty()).copied();
    let subjects = scene.subjects_for(first, spec.vendor);
    let mut yes: Vec<(&Quirk, Option<FixKind>, Vec<String>)> = Vec::new();
    let mut maybe: Vec<(&Quirk, Option<FixKind>, Vec<String>)> = Vec::new();
    let mut devices: Vec<String> = Vec::new();
    for e in &spec.explains {
        let Some(q) = k.quirk(&e.quirk) else { continue };
        let (best, mut notes) = explain_verdict(
            scene,
            &Evidence {
                spec,
                first,
                with_context,
                subjects: &subjects,
            },
            e,
            q,
            &mut devices,
        );
        notes.dedup();
        match best {
            Tri::Yes => yes.push((q, e.fix, notes)),
            Tri::Unknown => maybe.push((q, e.fix, notes)),
            Tri::No => {}
        }
    }
    let (level, chosen, how) = if !yes.is_empty() {
        (spec.confirmed, &yes, How::Confirmed)
    } else if !maybe.is_empty() {
        (spec.unconfirmed, &maybe, How::Possible)
    } else {
        (spec.unexplained, &yes, How::Unexplained)
    };
    for (q, _, _) in chosen {
        attributed.push(q.id.clone());
    }
    let mut reason: Vec<String> = Vec::new();
    if hits.len() > 1 {
        reason.push(format!(
            "{} times in {}",
            hits.len(),
            first_label(first, scene)
        ));
    }
    if let Some(a) = &spec.advice {
        reason.push(a.clone());
    }
    // A build or load error that names an architecture: what builds it, from the target table.
    if matches!(spec.class, Class::BuildError | Class::LoadError)
        && let Some(q) = first.quotes.first()
    {
        reason.extend(super::named_targets::toolkit_sentences(
            &q.text,
            &scene.knowledge().targets,
        ));
    }
    if let Some(fault) = &first.fault {
        reason.push(format!("Decoded: {}.", fault.describe()));
        let pages = consecutive_pages(hits);
        if pages > 1 {
            reason.push(format!(
                "The faults are on {pages} consecutive 4 KiB pages."
            ));
        }
    }
    reason.extend(attribution_sentences(k, spec, how, chosen));
    let evidence = symptom_evidence(scene, first, with_context, how != How::Unexplained);
    let group = plan.and_then(|p| scene.group_for(p, subjects.first()));
    let quirks: Vec<&Quirk> = chosen.iter().map(|(q, _, _)| *q).collect();
    let fix = symptom_fix(scene, spec, chosen, group, subjects.first());
    let ids: Vec<String> = quirks.iter().map(|q| q.id.clone()).collect();
    let title = match (how, ids.first()) {
        (How::Confirmed, Some(_)) => format!("{} ({})", spec.title, ids.join(", ")),
        (How::Possible, Some(_)) => format!("{} (likely {})", spec.title, ids.join(" or ")),
        _ => spec.title.clone(),
    };
    let f = Finding::new(&format!("log-{}", spec.id), level, title, reason.join(" "))
        .quirks(ids)
        .devices(devices)
        .evidence(evidence);
    Some(fix.apply(f))
}

/// How a symptom is attributed to the quirks that explain it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    /// The input shows the symptom and the conditions of a quirk.
    Confirmed,
    /// A quirk explains it if what the input does not show holds.
    Possible,
    /// No known cause holds.
    Unexplained,
}

/// The sentences that attribute a symptom: the quirks confirmed, those possible and what they
/// need, or the known causes ruled out.
fn attribution_sentences(
    k: &crate::profiles::Knowledge,
    spec: &Spec,
    how: How,
    chosen: &[(&Quirk, Option<FixKind>, Vec<String>)],
) -> Vec<String> {
    let mut out = Vec::new();
    match how {
        How::Confirmed => {
            let ids: Vec<String> = chosen
                .iter()
                .map(|(q, _, _)| format!("{} ({})", q.id, q.title))
                .collect();
            out.push(format!(
                "The input shows both the symptom and the conditions of {}.",
                ids.join(", ")
            ));
        }
        How::Possible => {
            for (q, _, notes) in chosen {
                out.push(format!(
                    "It matches {} ({}) if {}.",
                    q.id,
                    q.title,
                    if notes.is_empty() {
                        "its conditions hold".to_string()
                    } else {
                        format!("what the input does not show holds: {}", notes.join(", "))
                    }
                ));
            }
        }
        How::Unexplained => {
            if !spec.explains.is_empty() {
                // Said by title: a finding's quirk ids are the records that apply, and these
                // were ruled out.
                let titles: Vec<String> = spec
                    .explains
                    .iter()
                    .map(|e| {
                        k.quirk(&e.quirk)
                            .map_or_else(|| e.quirk.clone(), |q| q.title.clone())
                    })
                    .collect();
                out.push(format!(
                    "The conditions of the known causes ({}) do not hold for this build.",
                    titles.join("; ")
                ));
            }
        }
    }
    out
}

/// The lines a symptom finding rests on: context, the hit, a decoded fault block's lines, and
/// (when a quirk is named) the lines that show the pool.
fn symptom_evidence(
    scene: &Scene<'_>,
    first: &Hit,
    with_context: Option<&Hit>,
    with_vmm: bool,
) -> Vec<Quote> {
    let mut evidence: Vec<Quote> = Vec::new();
    if let Some(h) = with_context {
        evidence.extend(h.context.iter().take(2).cloned());
    }
    evidence.extend(first.quotes.iter().take(10).cloned());
    if let Some(fault) = &first.fault {
        // The decoded block's lines (status and fields), after the hit line.
        let src = first.at.input;
        for n in fault.lines.iter().filter(|n| **n != first.at.line).take(8) {
            if let Some(q) = scene.input.corpus.quote(super::corpus::At {
                input: src,
                line: *n,
            }) {
                evidence.push(q);
            }
        }
    }
    if with_vmm {
        evidence.extend(scene.vmm_quotes.iter().take(2).cloned());
    }
    evidence
}

/// The fix of a symptom finding: each kind of fix its chosen quirks call for.
fn symptom_fix(
    scene: &Scene<'_>,
    spec: &super::signatures::Spec,
    chosen: &[(&Quirk, Option<FixKind>, Vec<String>)],
    group: Option<&PlanGroup>,
    subject: Option<&Subject>,
) -> Fix {
    // Each kind of fix the chosen quirks call for (the row's own when none is named); when the
    // cause is one of several possible ones, each fix says which cause it is for.
    let mut kinds: Vec<(FixKind, Vec<&Quirk>)> = Vec::new();
    for (q, f, _) in chosen.iter() {
        let kind = f.unwrap_or(spec.fix);
        // A quirk's own effect is that quirk's alone: another quirk's flags or environment must
        // not be offered under its name.
        match kinds
            .iter_mut()
            .find(|(k, _)| *k == kind && kind != FixKind::Quirk)
        {
            Some((_, qs)) => qs.push(*q),
            None => kinds.push((kind, vec![*q])),
        }
    }
    if kinds.is_empty() {
        kinds.push((spec.fix, Vec::new()));
    }
    let mut fix = Fix::default();
    let several = kinds.len() > 1;
    for (kind, qs) in &kinds {
        let mut part = Fix::default();
        match kind {
            FixKind::Rebuild => match group {
                Some(g) => {
                    let archs: Vec<String> = g
                        .cmake_args
                        .iter()
                        .filter(|a| {
                            [
                                "-DCMAKE_CUDA_ARCHITECTURES=",
                                "-DGPU_TARGETS=",
                                "-DAMDGPU_TARGETS=",
                            ]
                            .iter()
                            .any(|p| a.starts_with(p))
                        })
                        .cloned()
                        .collect();
                    rebuild(g, &archs, &scene.input.script_hint, &mut part);
                    hide_instead(scene, subject, &mut part);
                }
                None => part.text.push(format!(
                    "rebuild for this machine's GPUs: {}",
                    scene.input.script_hint
                )),
            },
            FixKind::NoVmm => no_vmm_fix(scene, group, subject, &mut part),
            FixKind::LegacyPool => legacy_pool_fix(scene, group, &mut part),
            FixKind::Quirk => {
                quirk_effect_fix(scene, qs, group, &mut part);
                if qs.is_empty() {
                    part.text.push(record_command(scene.input));
                }
            }
            FixKind::Record => part.text.push(record_command(scene.input)),
            FixKind::Advice => {}
        }
        if several && !qs.is_empty() {
            let ids: Vec<&str> = qs.iter().map(|q| q.id.as_str()).collect();
            part.text = part
                .text
                .into_iter()
                .map(|t| format!("if it is {}: {t}", ids.join(" or ")))
                .collect();
        }
        fix.text.extend(part.text);
        fix.flags.extend(part.flags);
        fix.env.extend(part.env);
    }
    fix
}

/// The other way out when one process sees several GPUs and the failure is on one of them: keep
/// the build and hide that GPU from the process (the rebuild above covers every GPU it sees).
fn hide_instead(scene: &Scene<'_>, subject: Option<&Subject>, fix: &mut Fix) {
    let Some(s) = subject.filter(|s| s.index.is_some()) else {
        return;
    };
    let keep: Vec<String> = scene
        .subjects
        .iter()
        .filter(|o| o.index.is_some() && o.index != s.index)
        .filter_map(|o| o.index.map(|i| i.to_string()))
        .collect();
    if keep.is_empty() {
        return;
    }
    let var = match s.vendor {
        Vendor::Amd => "HIP_VISIBLE_DEVICES",
        _ => "CUDA_VISIBLE_DEVICES",
    };
    fix.text.push(format!(
        "or keep this build and hide {} from the process: export {var}={}",
        s.label,
        keep.join(",")
    ));
}

/// What one failure shows, for judging the quirks it may be a symptom of.
struct Evidence<'e> {
    spec: &'e super::signatures::Spec,
    /// The hit quoted (a decoded fault: the first block with a status).
    first: &'e Hit,
    /// A hit with a `context` line before it, if any.
    with_context: Option<&'e Hit>,
    subjects: &'e [Subject],
}

/// One explained quirk's verdict over the hit's subjects, and what is not known for it.
fn explain_verdict(
    scene: &Scene<'_>,
    ev: &Evidence<'_>,
    e: &super::signatures::Explain,
    q: &Quirk,
    devices: &mut Vec<String>,
) -> (Tri, Vec<String>) {
    let (spec, first, with_context, subjects) = (ev.spec, ev.first, ev.with_context, ev.subjects);
    let implied_vmm = spec.implies.vmm_build;
    let mut per_subject: Vec<(Tri, Vec<String>)> = Vec::new();
    for s in subjects {
        let v = scene.evaluate(q, s, implied_vmm);
        let mut tri = v.verdict;
        let mut why: Vec<String> = v
            .unknowns()
            .map(|c| format!("{} unknown", c.field))
            .collect();
        if let Some(want) = e.vmm_build {
            match implied_vmm.or(scene.vmm_build) {
                Some(have) if have != want => tri = Tri::No,
                Some(_) => {}
                None => {
                    if tri == Tri::Yes {
                        tri = Tri::Unknown;
                    }
                    why.push("whether the VMM pool is compiled in is unknown".into());
                }
            }
        }
        if let Some(want) = e.fault {
            match first.fault.as_ref().and_then(|f| f.kind) {
                Some(have) if have != want => tri = Tri::No,
                Some(_) => {}
                None => {
                    if tri == Tri::Yes {
                        tri = Tri::Unknown;
                    }
                    why.push("the fault's kind (the status word) is not in the log".into());
                }
            }
        }
        if e.context && with_context.is_none() && tri == Tri::Yes {
            tri = Tri::Unknown;
            why.push(format!(
                "no {} line before it (a debug line: run with --verbose to see it; -lv 5 does too, -lv 4 before May 2026 builds)",
                spec.context.join(" / ")
            ));
        }
        if tri == Tri::Yes && !s.label.is_empty() && !devices.contains(&s.label) {
            devices.push(s.label.clone());
        }
        per_subject.push((tri, why));
    }
    // Stand-ins for an unknown vendor must agree; real devices: the best verdict counts.
    let strict = subjects.iter().all(|s| !s.vendor_known);
    let mut best = Tri::No;
    let mut notes: Vec<String> = Vec::new();
    if strict && !per_subject.is_empty() {
        let first_tri = per_subject[0].0;
        best = if per_subject.iter().all(|(t, _)| *t == first_tri) {
            first_tri
        } else {
            Tri::Unknown
        };
        if best == Tri::Unknown {
            notes.push("whose GPU it is (no device line names the vendor)".into());
        }
        for (t, w) in &per_subject {
            if *t == Tri::Unknown {
                notes.extend(w.iter().cloned());
            }
        }
    } else {
        for (tri, why) in per_subject {
            if tri != Tri::No && best != Tri::Yes {
                if tri == Tri::Unknown && best == Tri::Unknown {
                    notes.extend(why);
                } else {
                    best = tri;
                    notes = why;
                }
            }
        }
    }
    notes.dedup();
    (best, notes)
}

fn first_label(h: &Hit, scene: &Scene<'_>) -> String {
    scene
        .input
        .corpus
        .sources
        .get(h.at.input)
        .map(|s| super::text::neutralise(&s.label))
        .unwrap_or_default()
}

/// How many distinct fault pages form one run of consecutive 4 KiB pages (the longest).
fn consecutive_pages(hits: &[&Hit]) -> usize {
    let mut pages: Vec<u64> = hits
        .iter()
        .filter_map(|h| h.fault.as_ref()?.address)
        .map(|a| a >> 12)
        .collect();
    pages.sort_unstable();
    pages.dedup();
    let (mut best, mut run) = (usize::from(!pages.is_empty()), 1usize);
    for w in pages.windows(2) {
        if w[1] == w[0] + 1 {
            run += 1;
            best = best.max(run);
        } else {
            run = 1;
        }
    }
    best
}

/// Notes and warnings for quirks whose conditions the input meets without showing a symptom.
pub fn condition_findings(
    scene: &Scene<'_>,
    plan: Option<&PlanSummary>,
    attributed: &[String],
    skip_legacy_advice: bool,
    out: &mut Vec<Finding>,
) {
    let k = scene.knowledge();
    for q in k.quirks.iter().filter(|q| !q.contested) {
        let e = &q.effect;
        // Build-machine quirks (runner choice) and pure background records say nothing about a
        // finished build; VMM denials are judged against the plan.
        if e.runner.is_some() || e.vmm.is_some() || attributed.contains(&q.id) {
            continue;
        }
        if e.warn.is_none() && e.env.is_empty() && e.set.is_empty() && e.refuse.is_none() {
            continue;
        }
        let legacy_advice = q.when.vmm_build == Some(false)
            && q.when.llama_builds.is_none()
            && q.fixed_in.as_ref().is_none_or(|f| f.llama_build.is_none())
            && e.env.is_empty()
            && e.set.is_empty();
        if legacy_advice && skip_legacy_advice {
            continue;
        }
        let mut yes: Vec<&Subject> = Vec::new();
        let mut maybe: Vec<(&Subject, Vec<Field>)> = Vec::new();
        for s in &scene.subjects {
            let v = scene.evaluate(q, s, None);
            match v.verdict {
                Tri::Yes => yes.push(s),
                Tri::Unknown => maybe.push((s, v.unknowns().map(|c| c.field).collect())),
                Tri::No => {}
            }
        }
        if !yes.is_empty() {
            out.push(quirk_finding(scene, plan, q, legacy_advice, &yes));
        } else if !maybe.is_empty() && (e.warn.is_some() || !e.env.is_empty() || !e.set.is_empty())
        {
            let mut unknown: Vec<String> = Vec::new();
            for field in maybe.iter().flat_map(|(_, w)| w) {
                let w = match field {
                    Field::MultiGpu => {
                        "whether a run is split across GPUs (a log of one shows it)".to_string()
                    }
                    _ => field.to_string(),
                };
                if !unknown.contains(&w) {
                    unknown.push(w);
                }
            }
            let mut evidence = Vec::new();
            for (s, _) in &maybe {
                if let Some(q) = s.line.as_deref().and_then(|l| scene.input.corpus.find(l)) {
                    evidence.push(q);
                }
            }
            out.push(
                Finding::new(
                    &format!("quirk-{}", q.id),
                    Level::Note,
                    format!("{} may apply: {}", q.id, q.title),
                    format!(
                        "{} Whether it applies depends on what is not known here: {}.",
                        q.summary,
                        unknown.join(", ")
                    ),
                )
                .quirks([q.id.clone()])
                .devices(maybe.iter().map(|(s, _)| s.label.clone()))
                .evidence(evidence),
            );
        }
    }
}

fn quirk_finding(
    scene: &Scene<'_>,
    plan: Option<&PlanSummary>,
    q: &Quirk,
    legacy_advice: bool,
    subjects: &[&Subject],
) -> Finding {
    let input = scene.input;
    let e = &q.effect;
    let mut level = Level::of(q.severity);
    let mut reason = e.warn.clone().unwrap_or_else(|| q.summary.clone());
    let mut fix = Fix::default();
    let mut evidence = quirk_evidence(scene, q, subjects);
    if legacy_advice && let Some(a) = &input.signatures.legacy_pool {
        reason = format!("{reason} {}", a.reason(input.build.value));
    }
    if let Some(r) = &e.refuse {
        level = Level::Error;
        reason = format!("{reason} {r}");
    }
    // Flags: already in the build (observable), or the plan's rebuild line that has them.
    let flags = quirk_flags(scene, q);
    fix.text.extend(flags.said);
    evidence.extend(flags.evidence);
    reason.push_str(&flags.reason);
    if !flags.want.is_empty() {
        let group = plan.and_then(|p| scene.group_for(p, subjects.first().copied()));
        match group {
            Some(g) if flags.want.iter().all(|w| g.cmake_args.contains(w)) => {
                rebuild(g, &flags.want, &input.script_hint, &mut fix)
            }
            _ => fix.text.push(format!(
                "see `gpuprobe quirks show {}`: the plan here does not set what it needs",
                q.id
            )),
        }
    }
    if flags.all_set && e.env.is_empty() {
        level = Level::Note;
    }
    let others: Vec<&Subject> = scene
        .subjects
        .iter()
        .filter(|o| !subjects.iter().any(|s| s.label == o.label))
        .collect();
    level = env_advice(input, q, level, (subjects, &others), &mut fix);
    // Conditions alone, for a quirk whose symptom a log would show: a note.
    if symptom_bearing(scene.input.signatures, &q.id) && level > Level::Note {
        level = Level::Note;
        reason.push_str(" Its conditions hold, but the input shows no symptom of it.");
    }
    if fix.text.is_empty() {
        fix.text
            .push(format!("see `gpuprobe quirks show {}`", q.id));
    }
    evidence.dedup();
    let f = Finding::new(
        &format!("quirk-{}", q.id),
        level,
        format!("{}: {}", q.id, q.title),
        reason,
    )
    .quirks([q.id.clone()])
    .devices(subjects.iter().map(|s| s.label.clone()))
    .evidence(evidence);
    fix.apply(f)
}

/// The input lines that show a quirk's conditions: its devices, the pool, the build, the run.
fn quirk_evidence(scene: &Scene<'_>, q: &Quirk, subjects: &[&Subject]) -> Vec<Quote> {
    let input = scene.input;
    let mut evidence: Vec<Quote> = Vec::new();
    for s in subjects {
        if let Some(l) = s.line.as_deref().and_then(|l| input.corpus.find(l)) {
            evidence.push(l);
        }
    }
    if q.when.vmm_build.is_some() {
        evidence.extend(scene.vmm_quotes.iter().take(1).cloned());
    }
    if (q.when.llama_builds.is_some()
        || q.fixed_in.as_ref().is_some_and(|x| x.llama_build.is_some()))
        && let Some(l) = input
            .facts
            .version
            .line
            .as_deref()
            .and_then(|l| input.corpus.find(l))
    {
        evidence.push(l);
    }
    if q.when.multi_gpu.is_some() {
        evidence.extend(scene.run_quotes.iter().cloned());
    }
    evidence
}

/// What the input shows of a quirk's `effect.set` flags.
struct QuirkFlags {
    /// `-DNAME=VALUE` the build may lack.
    want: Vec<String>,
    /// Every flag is set and the build shows it.
    all_set: bool,
    /// Fix lines for the flags the build shows.
    said: Vec<String>,
    evidence: Vec<Quote>,
    /// Sentences for the reason, each with its leading space.
    reason: String,
}

fn quirk_flags(scene: &Scene<'_>, q: &Quirk) -> QuirkFlags {
    let (input, f) = (scene.input, scene.input.facts);
    let registry = || f.cuda_registry().and_then(|r| input.corpus.find(&r.line));
    let mut out = QuirkFlags {
        want: Vec::new(),
        all_set: !q.effect.set.is_empty(),
        said: Vec::new(),
        evidence: Vec::new(),
        reason: String::new(),
    };
    for (flag, value) in &q.effect.set {
        match observable_feature(flag).map(|feat| (feat, f.feature_flag(feat))) {
            Some((feat, Some(true))) if value == "ON" => {
                out.said.push(format!(
                    "the build has {feat} = 1 ({flag}=ON): nothing to do"
                ));
                out.evidence.extend(registry());
            }
            Some((feat, Some(false))) => {
                out.all_set = false;
                out.want.push(format!("-D{flag}={value}"));
                out.evidence.extend(registry());
                out.reason
                    .push_str(&format!(" system_info shows no {feat}."));
            }
            _ => {
                out.all_set = false;
                out.want.push(format!("-D{flag}={value}"));
                out.reason.push_str(&format!(
                    " The output cannot show whether the build used {flag}={value}."
                ));
            }
        }
    }
    out
}

/// The quirk's run-time environment advice, added to `fix`; returns the finding's level (info
/// once the variable is set here, or when it is advice for some runs only).
/// The quirk's runtime variables. A variable holds for the whole process, so where the process
/// also drives GPUs the quirk does not match (a dGPU next to the APU it is for), the advice is a
/// process of its own for the matching GPUs, never the variable in the shared one.
fn env_advice(
    input: &Input<'_>,
    q: &Quirk,
    mut level: Level,
    (subjects, others): (&[&Subject], &[&Subject]),
    fix: &mut Fix,
) -> Level {
    let e = &q.effect;
    if !e.env.is_empty() && !others.is_empty() {
        let indices: Vec<String> = subjects
            .iter()
            .filter_map(|s| s.index.map(|i| i.to_string()))
            .collect();
        let vars: Vec<String> = e
            .env
            .iter()
            .map(|(n, v)| format!("{n}={}", sh_quote(v)))
            .collect();
        let other_names: Vec<&str> = others.iter().map(|s| s.label.as_str()).collect();
        let visible = if indices.is_empty() || indices.len() != subjects.len() {
            "a process that sees only those GPUs (HIP_VISIBLE_DEVICES for ROCm, CUDA_VISIBLE_DEVICES for CUDA)".to_string()
        } else {
            let list = indices.join(",");
            format!(
                "a process of their own: HIP_VISIBLE_DEVICES={list} (ROCm) or CUDA_VISIBLE_DEVICES={list} (CUDA)"
            )
        };
        fix.text.push(format!(
            "not in this process: {} applies to every GPU the process sees, and {} is not one it is for; only in {visible}, with {}",
            vars.join(" "),
            other_names.join(", "),
            vars.join(" ")
        ));
        return level;
    }
    for (name, value) in &e.env {
        let when = e
            .env_when
            .as_ref()
            .map(|w| format!(" (only for {w})"))
            .unwrap_or_default();
        if input.env_set.iter().any(|s| s == name) {
            fix.text.push(format!("{name} is already set here{when}"));
            level = Level::Note;
        } else {
            fix.text.push(format!(
                "at run time: export {name}={}{when}",
                sh_quote(value)
            ));
            fix.env.push(format!("{name}={value}"));
            if e.env_when.is_some() && e.warn.is_none() {
                level = Level::Note;
            }
        }
    }
    level
}

/// Observable counterparts of CMake flags that quirks may set.
fn observable_feature(flag: &str) -> Option<&'static str> {
    match flag {
        "GGML_CUDA_NO_PEER_COPY" => Some("NO_PEER_COPY"),
        "GGML_CUDA_FORCE_MMQ" => Some("FORCE_MMQ"),
        "GGML_CUDA_FORCE_CUBLAS" => Some("FORCE_CUBLAS"),
        _ => None,
    }
}
