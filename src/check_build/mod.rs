//! `gpuprobe check-build`: judge an existing llama.cpp build against this machine.
//!
//! The build describes itself ([`parse`]: `--version`, `--list-devices`, startup logs); the
//! machine is probed or read from a saved report; the resolver says what gpuprobe would build
//! here; [`judge`] compares the two and turns every difference, and every quirk that applies at
//! run time, into a finding with a level, a reason and a fix. [`runner`] runs a binary safely.

mod attribute;
pub mod binary;
pub mod cmake_unused;
pub mod corpus;
pub mod elf;
pub mod exercise;
pub mod judge;
pub mod kernel;
pub mod named_targets;
pub mod open_world;
pub mod parse;
mod pattern;
pub mod runner;
pub mod signatures;
pub mod text;

use std::fmt;

use schemars::JsonSchema;
use serde::Serialize;

pub use judge::{BuildNumber, BuildSource, Finding, Level, Machine, PlanSummary, VmmVerdict};
pub use parse::BuildFacts;
pub use runner::Invocation;

use crate::plan::Mode;
use crate::platform::Os;
use crate::profiles::Knowledge;
use crate::report::Report;

/// Bumped when a field changes meaning or disappears; additions keep the number.
pub const SCHEMA: &str = "gpuprobe.check-build/v1";

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CheckReport {
    pub schema: &'static str,
    pub gpuprobe_version: &'static str,
    pub input: InputInfo,
    /// What the build is, as judged (derived from `extracted` and the options).
    pub build: BuildSummary,
    /// Everything recognised in the build's output, as found.
    pub extracted: BuildFacts,
    /// What the output did not show, and how to get it.
    pub not_found: Vec<Missing>,
    pub machine: MachineSummary,
    /// What gpuprobe would build for this machine (or for the build's own devices).
    pub plan: Option<PlanSummary>,
    pub findings: Vec<Finding>,
    pub summary: Summary,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InputInfo {
    /// `binary`, `log` or `binary+log`.
    #[schemars(with = "String")]
    pub kind: InputKind,
    pub path: String,
    /// The binary's runs (empty for a log).
    pub runs: Vec<Invocation>,
}

/// What check-build was given to judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum InputKind {
    #[serde(rename = "binary")]
    Binary,
    #[serde(rename = "log")]
    Log,
    #[serde(rename = "binary+log")]
    BinaryAndLog,
}

impl fmt::Display for InputKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InputKind::Binary => "binary",
            InputKind::Log => "log",
            InputKind::BinaryAndLog => "binary+log",
        })
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BuildSummary {
    pub number: BuildNumber,
    pub commit: Option<String>,
    pub semver: Option<String>,
    /// The GPU backend judged: `CUDA`, `ROCm`, `MUSA`, `Vulkan`, ...; None for CPU-only or unknown.
    pub backend: Option<String>,
    pub backends: Vec<String>,
    pub cpu_only: bool,
    pub vmm: VmmVerdict,
    /// `ARCHS` of a CUDA build (`__CUDA_ARCH_LIST__`: 900 = sm_90).
    pub archs: Option<Vec<u32>>,
    pub flags: Flags,
}

/// Compile-time features visible in system_info (None: not printed).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Flags {
    pub no_vmm: Option<bool>,
    pub no_peer_copy: Option<bool>,
    pub force_mmq: Option<bool>,
    pub force_cublas: Option<bool>,
    pub fa_all_quants: Option<bool>,
    /// CUDA graphs (printed by CUDA builds only; HIP graphs never show).
    pub use_graphs: Option<bool>,
}

#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct Missing {
    pub what: String,
    pub how: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MachineSummary {
    /// `this machine's probe`, `report FILE`, or `none`.
    pub source: String,
    /// How the devices were known: measured now, read from a report, or not at all.
    #[serde(skip)]
    pub mode: Option<Mode>,
    pub os: String,
    pub devices: Vec<MachineDevice>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MachineDevice {
    pub index: u32,
    pub backend: crate::report::Backend,
    pub name: String,
    pub arch: String,
    pub vmm_supported: Option<bool>,
    pub smoke: String,
    pub smoke_reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Summary {
    pub errors: usize,
    pub warnings: usize,
    pub notes: usize,
    /// 0: no problems (notes only); 1: warnings or errors.
    pub exit_code: i32,
}

pub struct Options<'a> {
    pub knowledge: &'a Knowledge,
    /// Failure signatures in llama.cpp and kernel logs.
    pub signatures: &'a signatures::SignatureTable,
    /// The folder of the binary examined (for the `--exercise` command in fixes).
    pub binary_dir: Option<String>,
    pub machine: Option<Machine<'a>>,
    /// `--llama-build N`: overrides what the build reports.
    pub llama_build: Option<u64>,
    pub os: Os,
    pub env_set: Vec<String>,
    /// `--from FILE`, for the cmake-flags command shown in fixes.
    pub report_path: Option<String>,
}

/// Judges `text` (one input, labelled with `input.path`); see [`check_corpus`].
pub fn check(text: &str, input: InputInfo, extra: Vec<Finding>, opts: &Options<'_>) -> CheckReport {
    let corpus = corpus::Corpus::single(input.path.clone(), text);
    check_corpus(&corpus, input, extra, opts)
}

/// Judges every input together (the build's output, saved logs, kernel logs) and returns the
/// whole report. Never fails: unknown or partial text gives a report that says what was and was
/// not found.
pub fn check_corpus(
    corpus: &corpus::Corpus,
    input: InputInfo,
    mut extra: Vec<Finding>,
    opts: &Options<'_>,
) -> CheckReport {
    let text = corpus.joined();
    let facts = parse::parse(&text);
    let hits = opts.signatures.scan(
        corpus,
        &[signatures::LogKind::Llama, signatures::LogKind::Kernel],
    );
    let number = build_number(opts.llama_build, &facts);
    let backend = facts.gpu_backend().map(str::to_string);
    let script_hint = script_hint(number.value, backend.as_deref(), opts);
    let judged = judge::judge(&judge::Input {
        facts: &facts,
        build: number.clone(),
        knowledge: opts.knowledge,
        signatures: opts.signatures,
        machine: opts.machine.clone(),
        os: opts.os,
        env_set: opts.env_set.clone(),
        script_hint: script_hint.clone(),
        corpus,
        hits: &hits,
        binary_dir: opts.binary_dir.clone(),
    });
    let mut findings = judged.findings;
    findings.extend(unrecognised(corpus, &hits, opts.signatures));
    findings.extend(cmake_unused::findings(
        corpus,
        &opts.signatures.unused_variables,
        &opts.knowledge.options,
        &crate::llama::LlamaTarget {
            build: number.value,
            source: number.source.to_string(),
            checkout: None,
        },
        backend.as_deref().and_then(judge::backend_of),
        &script_hint,
    ));
    findings.append(&mut extra);
    name_quirks(&mut findings, opts.knowledge);
    rank(&mut findings);
    let count = |l: Level| findings.iter().filter(|f| f.level == l).count();
    let (errors, warnings, notes) = (
        count(Level::Error),
        count(Level::Warning),
        count(Level::Note),
    );
    let summary = Summary {
        errors,
        warnings,
        notes,
        exit_code: if errors + warnings > 0 {
            crate::error::exit::PROBLEM
        } else {
            crate::error::exit::OK
        },
    };
    let flags = flags_of(&facts);
    let build = BuildSummary {
        number,
        commit: facts.version.commit.clone(),
        semver: facts.version.semver.clone(),
        backend,
        backends: facts.backends.clone(),
        cpu_only: facts.cpu_only(),
        vmm: judged.vmm,
        archs: facts.cuda_archs(),
        flags,
    };
    let machine = machine_summary(opts);
    CheckReport {
        schema: SCHEMA,
        gpuprobe_version: env!("CARGO_PKG_VERSION"),
        not_found: missing(&facts, &input),
        input,
        build,
        extracted: facts,
        machine,
        plan: judged.plan,
        findings,
        summary,
    }
}

/// The decisive finding first: confirmed problems (errors, then warnings), then the failures no
/// signature explains, then notes; within each, the order the stages found them in.
pub fn rank(findings: &mut [Finding]) {
    findings.sort_by_key(|f| {
        let unrecognised = f.id.starts_with("unrecognised-");
        (std::cmp::Reverse(f.level), unrecognised, may_apply(f))
    });
}

/// A note that a quirk may apply (its conditions only, some unknown): folded in the human report.
fn may_apply(f: &Finding) -> bool {
    f.level == Level::Note && f.id.starts_with("quirk-") && f.title.contains(" may apply: ")
}

/// Failure-looking lines that no signature claims (see [`open_world`]).
fn unrecognised(
    corpus: &corpus::Corpus,
    hits: &[signatures::Hit],
    table: &signatures::SignatureTable,
) -> Vec<Finding> {
    let mut claimed = std::collections::BTreeSet::new();
    let mut recognised = Vec::new();
    for h in hits {
        for n in 0..h.quotes.len().max(1) {
            claimed.insert(corpus::At {
                input: h.at.input,
                line: h.at.line + n,
            });
        }
        if table.rows[h.row].spec.class != signatures::Class::Fact {
            recognised.push(h.at);
        }
    }
    table.open_world.findings(corpus, &claimed, &recognised)
}

/// The build number judged: `--llama-build`, else what the output says.
fn build_number(given: Option<u64>, facts: &BuildFacts) -> BuildNumber {
    match (given, facts.version.build) {
        (Some(n), _) => BuildNumber {
            value: Some(n),
            source: BuildSource::Flag,
        },
        (None, Some(n)) => BuildNumber {
            value: Some(n),
            source: facts
                .version
                .source
                .clone()
                .map_or(BuildSource::Output, BuildSource::Line),
        },
        (None, None) => BuildNumber {
            value: None,
            source: BuildSource::Unknown,
        },
    }
}

/// Each finding names the quirk ids it lists (in its title, reason or fix).
fn name_quirks(findings: &mut [Finding], k: &Knowledge) {
    let known: Vec<String> = k.quirks.iter().map(|q| q.id.clone()).collect();
    for f in findings {
        let text = format!(
            "{} {} {}",
            f.title,
            f.reason,
            f.fix.as_deref().unwrap_or("")
        );
        let named = crate::plan::named_quirks(&text, &known);
        let unnamed: Vec<String> = f
            .quirks
            .iter()
            .filter(|q| !named.contains(q))
            .cloned()
            .collect();
        if !unnamed.is_empty() {
            f.reason.push_str(&format!(" (see {})", unnamed.join(", ")));
        }
    }
}

/// Compile-time features the output shows.
fn flags_of(facts: &BuildFacts) -> Flags {
    Flags {
        no_vmm: facts.feature_flag("NO_VMM"),
        no_peer_copy: facts.feature_flag("NO_PEER_COPY"),
        force_mmq: facts.feature_flag("FORCE_MMQ").or(facts.init_force_mmq),
        force_cublas: facts
            .feature_flag("FORCE_CUBLAS")
            .or(facts.init_force_cublas),
        fa_all_quants: facts
            .feature_flag("FA_ALL_QUANTS")
            .map(|b| b || facts.cuda_registry().and_then(|r| r.get("FA_QUANTS")) == Some("all")),
        use_graphs: facts
            .registries
            .iter()
            .find(|r| r.name == "CUDA")
            .map(|r| r.has("USE_GRAPHS")),
    }
}

/// This machine as judged: the report's devices, or none (not probed).
fn machine_summary(opts: &Options<'_>) -> MachineSummary {
    match &opts.machine {
        Some(m) => MachineSummary {
            source: m.label.clone(),
            mode: Some(m.mode),
            os: m.report.host.os.clone(),
            devices: m
                .report
                .devices
                .iter()
                .map(|d| MachineDevice {
                    index: d.index,
                    backend: d.backend,
                    name: d.name.clone(),
                    arch: d.arch.clone(),
                    vmm_supported: d.vmm_supported,
                    smoke: d.smoke.outcome.as_str().to_string(),
                    smoke_reason: d.smoke.reason.clone(),
                })
                .collect(),
        },
        None => MachineSummary {
            source: "none".into(),
            mode: None,
            os: opts.os.as_str().into(),
            devices: Vec::new(),
        },
    }
}

/// `gpuprobe cmake-flags ...` for the commented build script matching this machine.
fn script_hint(build: Option<u64>, backend: Option<&str>, opts: &Options<'_>) -> String {
    let mut s = "gpuprobe cmake-flags".to_string();
    if let Some(p) = &opts.report_path {
        s.push_str(&format!(" --from {}", crate::emit::sh_quote(p)));
    } else if opts.machine.is_none() {
        s.push_str(" --targets <your GPUs>");
    }
    if let Some(b) = backend.and_then(crate::report::Backend::from_llama_name) {
        s.push_str(&format!(" --backend {}", b.as_str()));
    }
    if let Some(b) = build {
        s.push_str(&format!(" --llama-build {b}"));
    }
    s.push_str(" > build.sh");
    s
}

fn missing(f: &BuildFacts, input: &InputInfo) -> Vec<Missing> {
    let mut m = Vec::new();
    if f.version.line.is_none() {
        m.push(Missing { what: "version and build number".into(), how: "`llama-cli --version` prints them (to stderr: capture with 2>&1); or pass --llama-build N".into() });
    }
    let family = f
        .gpu_backend()
        .is_some_and(|b| parse::CUDA_FAMILY.contains(&b));
    if (family || f.gpu_backend().is_none())
        && !f
            .devices
            .iter()
            .any(|d| parse::CUDA_FAMILY.contains(&d.backend.as_str()))
        && !f.cpu_only()
    {
        m.push(Missing {
            what: "per-device lines (`Device 0: ..., VMM: yes/no`)".into(),
            how: if input.kind == InputKind::Binary {
                "the program printed none, even with --verbose --list-devices".into()
            } else {
                "`llama-cli --verbose --list-devices` prints them (newer builds need --verbose)"
                    .into()
            },
        });
    }
    if !f.list_seen && f.listed.is_empty() {
        m.push(Missing {
            what: "the device list (`Available devices:`)".into(),
            how: "`llama-cli --list-devices` prints it".into(),
        });
    }
    if f.registries.is_empty() && !f.cpu_only() && (family || f.gpu_backend().is_none()) {
        m.push(Missing {
            what: "system_info features (NO_VMM, ARCHS, NO_PEER_COPY, FORCE_MMQ...)".into(),
            how: "`--version` and `--list-devices` do not print them; `llama-server -lv 4 -m MODEL.gguf` prints them before loading the model (and llama-completion/llama-bench logs have them): pass that log with --log".into(),
        });
    }
    m
}

fn yes_no(b: Option<bool>) -> &'static str {
    match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "?",
    }
}

/// The human report, with the "may apply" notes folded into one line (see [`render_verbose`]).
pub fn render(r: &CheckReport) -> String {
    render_with(r, false)
}

/// The human report with every note written out.
pub fn render_verbose(r: &CheckReport) -> String {
    render_with(r, true)
}

fn render_with(r: &CheckReport, verbose: bool) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "gpuprobe check-build: {} ({})\n",
        r.input.path, r.input.kind
    ));
    for run in &r.input.runs {
        o.push_str(&format!(
            "  ran {}: {} in {:.1} s\n",
            if run.args.is_empty() {
                "(no args)".into()
            } else {
                run.args.join(" ")
            },
            run.status,
            run.elapsed_ms as f64 / 1000.0
        ));
    }
    o.push_str("\nllama.cpp build\n");
    let b = &r.build;
    let v = &r.extracted.version;
    let number = match (b.number.value, v.reported_build) {
        (Some(n), _) if b.number.source == BuildSource::Flag => {
            format!("build {n} (from --llama-build)")
        }
        (Some(n), _) => format!("build {n}"),
        (None, Some(0)) => "build unknown (it prints build 0: built without git)".into(),
        (None, _) => "build unknown".into(),
    };
    let mut ver = Vec::new();
    if let Some(s) = &b.semver {
        ver.push(s.clone());
    }
    ver.push(number);
    ver.push(format!(
        "commit {}",
        b.commit.as_deref().unwrap_or("unknown")
    ));
    o.push_str(&format!("  version     {}\n", ver.join(", ")));
    if let (Some(c), Some(t)) = (&v.compiler, &v.target) {
        o.push_str(&format!("  built with  {c} for {t}\n"));
    }
    let backend = match (&b.backend, b.cpu_only) {
        (Some(x), _) => {
            let others: Vec<&String> = b.backends.iter().filter(|o| *o != x).collect();
            if others.is_empty() {
                x.clone()
            } else {
                format!(
                    "{x} (also {})",
                    others
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        }
        (None, true) => "none: CPU only (no GPU device listed)".into(),
        (None, false) => "unknown".into(),
    };
    o.push_str(&format!("  backend     {backend}\n"));
    render_build_devices(r, &mut o);
    let vmm = match b.vmm.compiled {
        Some(true) => "compiled in",
        Some(false) => "compiled out (legacy pool)",
        None => "unknown",
    };
    if !b.cpu_only {
        o.push_str(&format!("  VMM pool    {vmm}: {}\n", b.vmm.evidence));
    }
    for reg in &r.extracted.registries {
        if reg.name == "CPU" {
            continue;
        }
        let feats: Vec<String> = reg
            .features
            .iter()
            .map(|f| format!("{} = {}", f.key, f.value))
            .collect();
        o.push_str(&format!(
            "  features    {} : {}\n",
            reg.name,
            feats.join(" | ")
        ));
    }
    for m in &r.not_found {
        o.push_str(&format!("  not found   {}: {}\n", m.what, m.how));
    }

    render_machine(r, &mut o);

    render_findings(r, verbose, &mut o);
    let s = &r.summary;
    o.push_str(&format!(
        "\n{} error(s), {} warning(s), {} note(s): {}\n",
        s.errors,
        s.warnings,
        s.notes,
        if s.exit_code == 0 {
            "no problems (exit 0)"
        } else {
            "problems found (exit 1)"
        }
    ));
    if let Some(first) = r.findings.first().filter(|f| f.level > Level::Note) {
        let at = first
            .evidence
            .first()
            .map(|q| format!(" ({}:{})", q.input, q.line))
            .unwrap_or_default();
        o.push_str(&format!(
            "decisive: {} {}{at}\n",
            first.level.as_str(),
            first.title
        ));
    }
    // Device names, versions and features come from the build's output: nothing from it reaches
    // the terminal un-neutralised.
    o.lines().map(|l| text::neutralise(l) + "\n").collect()
}

/// The devices the build's output lists (or, without device lines, its device list).
fn render_build_devices(r: &CheckReport, o: &mut String) {
    let b = &r.build;
    let mut first = true;
    for d in &r.extracted.devices {
        let mut line = format!("{}{} {}", d.backend, d.index, d.name);
        if let Some(a) = &d.arch {
            line.push_str(&format!("  {a}"));
        } else if let Some(cc) = &d.compute_capability {
            line.push_str(&format!("  cc {cc}"));
        }
        if d.vmm.is_some() {
            line.push_str(&format!("  VMM: {}", yes_no(d.vmm)));
        }
        if let Some(w) = d.wave_size {
            line.push_str(&format!("  wave {w}"));
        }
        if let Some(m) = d.vram_mib {
            line.push_str(&format!("  {m} MiB"));
        }
        o.push_str(&format!(
            "  {}  {line}\n",
            if first { "devices   " } else { "          " }
        ));
        first = false;
    }
    if r.extracted.devices.is_empty() {
        for d in r.extracted.listed.iter().filter(|d| d.gpu) {
            let mem = d
                .total_mib
                .map(|m| format!("  {m} MiB"))
                .unwrap_or_default();
            o.push_str(&format!(
                "  {}  {}: {}{mem}\n",
                if first { "devices   " } else { "          " },
                d.name,
                d.description
            ));
            first = false;
        }
    }
    if first && b.backend.is_some() {
        o.push_str("  devices     none listed\n");
    }
}

/// This machine as check-build saw it, and what gpuprobe would build for it.
fn render_machine(r: &CheckReport, o: &mut String) {
    let source = match r.machine.mode {
        None => "not probed".to_string(),
        Some(Mode::Report) => format!("from {}", r.machine.source),
        Some(_) => "probed now".to_string(),
    };
    o.push_str(&format!("\nthis machine ({source})\n"));
    if r.machine.devices.is_empty() {
        o.push_str(if r.machine.mode.is_none() {
            "  not probed (--no-probe): judged from the build's output and the quirk database\n"
        } else {
            "  no GPU found\n"
        });
    }
    for d in &r.machine.devices {
        o.push_str(&format!(
            "  {}{} {}  {}  VMM attribute {}  smoke {}\n",
            d.backend.name(),
            d.index,
            d.name,
            d.arch,
            yes_no(d.vmm_supported),
            d.smoke
        ));
    }
    if let Some(p) = &r.plan {
        for g in &p.groups {
            o.push_str(&format!(
                "  gpuprobe would build ({}): {}\n",
                g.targets.join(", "),
                g.cmake_args.join(" ")
            ));
        }
    }
}

/// The findings, each with the lines it rests on, why, the fix and its quirks.
fn render_findings(r: &CheckReport, verbose: bool, o: &mut String) {
    o.push_str("\nfindings\n");
    if r.findings.is_empty() {
        o.push_str("  none\n");
    }
    let folded: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| !verbose && may_apply(f))
        .collect();
    for f in r.findings.iter().filter(|f| verbose || !may_apply(f)) {
        o.push_str(&format!("  {:<8} {}", f.level.as_str(), f.title));
        if !f.devices.is_empty() {
            o.push_str(&format!(" [{}]", f.devices.join("; ")));
        }
        o.push('\n');
        for (i, q) in f.evidence.iter().enumerate() {
            o.push_str(&format!(
                "           {} {}\n",
                if i == 0 { "log:" } else { "    " },
                q.render()
            ));
        }
        o.push_str(&format!("           why: {}\n", f.reason));
        if let Some(fix) = &f.fix {
            o.push_str(&format!("           fix: {fix}\n"));
        }
        if !f.quirks.is_empty() {
            o.push_str(&format!(
                "           quirks: {} (gpuprobe quirks show ID)\n",
                f.quirks.join(", ")
            ));
        }
    }
    if !folded.is_empty() {
        let ids: Vec<&str> = folded
            .iter()
            .flat_map(|f| f.quirks.iter().map(String::as_str))
            .collect();
        o.push_str(&format!(
            "  note     {} more quirk(s) may apply, their conditions partly unknown: {} (--verbose or --json lists them)\n",
            folded.len(),
            ids.join(", ")
        ));
    }
}

/// The machine from a report, for [`Options`].
pub fn machine_from(report: &Report, mode: Mode, label: impl Into<String>) -> Machine<'_> {
    Machine {
        report,
        mode,
        label: label.into(),
    }
}
