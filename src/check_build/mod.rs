//! `gpuprobe check-build`: judge an existing llama.cpp build against this machine.
//!
//! The build describes itself ([`parse`]: `--version`, `--list-devices`, startup logs); the
//! machine is probed or read from a saved report; the resolver says what gpuprobe would build
//! here; [`judge`] compares the two and turns every difference, and every quirk that applies at
//! run time, into a finding with a level, a reason and a fix. [`runner`] runs a binary safely.

// The stages, in pipeline order: a module imports only from its own stage or earlier ones
// (tests/architecture.rs holds the graph to that, and to no cycle).
// 1. Read lines: the inputs as numbered lines (comments told from output), and the facts the
// build prints about itself.
pub mod corpus;
pub mod parse;
mod pattern;
pub mod text;
// 2. Facts about the build and the machine, and the finding every stage from here on gives.
pub mod binary;
pub mod build_number;
pub mod elf;
pub mod finding;
pub mod kernel;
pub mod machine;
pub mod named_targets;
pub mod plan_summary;
pub mod runner;
// 3. Explanations: known failures (signatures), quirks, lines no signature explains, CMake's
// unused variables.
mod attribute;
pub mod cmake_unused;
pub mod input;
pub mod legacy_advice;
pub mod open_world;
pub mod signatures;
// 4. Ranked findings.
pub mod judge;
pub mod rank;
// 5. The document and its human rendering.
pub mod render;
pub mod report;
// 6. Beside the pipeline: llama.cpp's own tests run on each GPU (`--exercise`).
pub mod exercise;

pub use build_number::{BuildNumber, BuildSource};
pub use finding::{Finding, Level};
pub use judge::VmmVerdict;
pub use machine::{Machine, machine_from};
pub use parse::BuildFacts;
pub use plan_summary::PlanSummary;
pub use render::{render, render_verbose};
pub use report::{
    BuildSummary, CheckReport, Flags, InputInfo, InputKind, MachineDevice, MachineSummary, Missing,
    SCHEMA, Summary,
};
pub use runner::Invocation;

use crate::platform::Os;
use crate::profiles::Knowledge;

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
    let number = build_number::build_number(opts.llama_build, &facts);
    let backend = facts.gpu_backend().map(str::to_string);
    let script_hint = script_hint(number.value, backend.as_deref(), opts);
    let judged = judge::judge(&input::Input {
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
    let explained: Vec<corpus::At> = findings
        .iter()
        .filter(|f| f.level != Level::Note)
        .flat_map(|f| f.evidence.iter())
        .filter_map(|q| corpus.place_of(q))
        .collect();
    findings.extend(opts.signatures.unrecognised(corpus, &hits, &explained));
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
    rank::name_quirks(&mut findings, opts.knowledge);
    rank::rank(&mut findings);
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
