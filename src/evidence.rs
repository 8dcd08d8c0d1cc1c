//! Evidence that the VMM pool works, or fails, for one (architecture, backend, runtime series,
//! OS): the only thing that lets a plan depart from llama.cpp's HIP default (VMM compiled out).
//!
//! Levels, weakest to strongest: `attribute` (the device says VMM is supported) < `smoke`
//! (gpuprobe's smoke test passed: a `detect --json` report) < `workload` (a VMM build of
//! llama.cpp passed its operator tests: a `check-build --exercise --json` document) <
//! `inference` (a VMM build ran a whole model in every configuration, agreeing with the CPU:
//! a `check-build --exercise inference --output` document). Documents come
//! from `--from` (files, or directories of `*.json`) and from the measured records shipped in
//! `profiles/measured.toml` (real captures only). A failure on record for the same key keeps the
//! legacy pool whatever passed elsewhere.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::node_labels::NodeDump;
use crate::platform::Os;
use crate::report::{Backend, Report, SmokeOutcome};
use crate::version::Version;

pub const EXERCISE_SCHEMA: &str = "gpuprobe.exercise/v1";
/// What `check-build --exercise inference` writes (the same name as `inference::SCHEMA`, which
/// this module does not import: the inference exercise depends on the evidence, not the reverse).
pub const INFERENCE_SCHEMA: &str = "gpuprobe.inference/v1";
pub const BUNDLED_MEASURED: &str = include_str!("../profiles/measured.toml");

/// Most documents one `--from` may bring in (a directory of a fleet's reports counts each file).
const MAX_DOCUMENTS: usize = 4096;
/// Largest document read; a detect report of a 16-GPU machine is a few hundred KiB, a
/// `kubectl get nodes -o json` dump some 10-30 KiB per node (its image lists dominate).
const MAX_DOCUMENT_BYTES: u64 = 32 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Attribute,
    Smoke,
    Workload,
    Inference,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Attribute => "attribute",
            Level::Smoke => "smoke",
            Level::Workload => "workload",
            Level::Inference => "inference",
        }
    }
}

/// How a device's run of llama.cpp's workload (`check-build --exercise`) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadOutcome {
    Pass,
    Fail,
    Hang,
    Crash,
    NotRun,
}

impl WorkloadOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadOutcome::Pass => "pass",
            WorkloadOutcome::Fail => "fail",
            WorkloadOutcome::Hang => "hang",
            WorkloadOutcome::Crash => "crash",
            WorkloadOutcome::NotRun => "not-run",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
}

/// One measured fact about the VMM pool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    pub arch: String,
    pub backend: Backend,
    /// Runtime series (major.minor) the measurement ran with; `None` when the document lacks it.
    pub series: Option<Version>,
    pub os: Os,
    pub level: Level,
    pub verdict: Verdict,
    /// Where it came from: a file (and device), or a shipped record.
    pub origin: String,
    pub detail: String,
}

/// What a plan asks about: one architecture on one runtime series and OS.
#[derive(Debug, Clone, Copy)]
pub struct Key<'a> {
    pub arch: &'a str,
    pub backend: Backend,
    pub series: Option<&'a Version>,
    pub os: Os,
}

impl Record {
    fn is_for(&self, key: &Key<'_>) -> bool {
        self.backend == key.backend
            && self.arch == key.arch
            && self.os == key.os
            && match (&self.series, key.series) {
                (Some(a), Some(b)) => a == b,
                _ => false,
            }
    }
}

/// Every record a plan may draw on.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    pub records: Vec<Record>,
}

/// What the records say about one key.
#[derive(Debug, Clone, Default)]
pub struct Finding<'a> {
    /// The strongest passing record, if any.
    pub best_pass: Option<&'a Record>,
    /// Every failing record (any level): measured failures on the same key.
    pub failures: Vec<&'a Record>,
}

impl Evidence {
    /// The measured records shipped in `profiles/measured.toml`.
    pub fn bundled() -> Result<Evidence> {
        let file: MeasuredFile =
            crate::toml_file::parse_toml(BUNDLED_MEASURED, "profiles/measured.toml")?;
        let mut ev = Evidence::default();
        for m in file.measured {
            ev.records.push(Record {
                series: Some(series_of(&m.runtime).ok_or_else(|| {
                    Error::input(
                        "profiles/measured.toml",
                        format!(
                            "record `{}`: runtime `{}` is not a version",
                            m.id, m.runtime
                        ),
                        "write the runtime series, e.g. 7.2 or 13.0",
                    )
                })?),
                arch: m.arch,
                backend: m.backend,
                os: m.os,
                level: m.level,
                verdict: m.verdict,
                origin: format!("profiles/measured.toml {} ({})", m.id, m.origin),
                detail: m.note,
            });
        }
        Ok(ev)
    }

    /// Bundled records plus every document given.
    pub fn with_documents(docs: &[(PathBuf, Document)]) -> Result<Evidence> {
        let mut ev = Evidence::bundled()?;
        for (path, doc) in docs {
            ev.add(doc, &path.display().to_string());
        }
        Ok(ev)
    }

    pub fn add(&mut self, doc: &Document, origin: &str) {
        match doc {
            Document::Report(r) => self.add_report(r, origin),
            Document::Exercise(e) => self.add_exercise(e, origin),
            Document::Inference(i) => self.add_inference(i, origin),
            Document::Nodes(n) => self.add_nodes(n, origin),
        }
    }

    /// Smoke evidence per labelled node of a `kubectl get nodes -o json` dump: one record per
    /// architecture with a smoke label (the worst outcome of that node's devices of it).
    pub fn add_nodes(&mut self, dump: &NodeDump, origin: &str) {
        for n in &dump.nodes {
            for (arch, outcome) in &n.archs {
                // A name that is no GPU target (`unknown`, a hand-written label) is no evidence;
                // fleet planning names it.
                let (Some(outcome), Some(vendor)) = (outcome, crate::targets::vendor_of_name(arch))
                else {
                    continue;
                };
                let backend = vendor.backend();
                let verdict = match outcome {
                    SmokeOutcome::Pass => Verdict::Pass,
                    SmokeOutcome::NotRun | SmokeOutcome::Partial => continue,
                    _ => Verdict::Fail,
                };
                self.records.push(Record {
                    arch: arch.clone(),
                    backend,
                    series: n.runtime(backend).and_then(series_of),
                    os: n.os,
                    level: Level::Smoke,
                    verdict,
                    origin: format!("{origin} node {}", n.name),
                    detail: format!("smoke test {} (node label)", outcome.as_str()),
                });
            }
        }
    }

    /// Inference evidence per device of an inference document: on a VMM build, every run on the
    /// device agreeing with the CPU (and the memory run passing) is a pass; a run that hung,
    /// crashed or faulted the GPU is a measured failure. Output that differs from the CPU is
    /// neither: it is a finding about a configuration (graphs, a split, a KV type), not proof
    /// about the pool, and it keeps the device from counting as a pass.
    pub fn add_inference(&mut self, doc: &InferenceEvidence, origin: &str) {
        if doc.build.vmm != Some(true) {
            return;
        }
        let backend = match doc.build.backend.as_str() {
            "cuda" => Backend::Cuda,
            "hip" => Backend::Hip,
            _ => return,
        };
        let os = Os::from_host(&doc.host.os);
        let series = doc.runtime_version.as_deref().and_then(series_of);
        // Each device's runs, indexed once: a document may list many devices and runs, and
        // searching every run's device list per device would be quadratic in its size.
        let mut runs_of: HashMap<&str, Vec<&InferenceRun>> = HashMap::new();
        for r in doc
            .configurations
            .iter()
            .chain(doc.memory.iter().map(|m| &m.run))
        {
            for dev in &r.devices {
                let mine = runs_of.entry(dev.as_str()).or_default();
                // A run that names a device twice is still one run on it.
                if !mine.last().is_some_and(|last| std::ptr::eq(*last, r)) {
                    mine.push(r);
                }
            }
        }
        for d in &doc.build.devices {
            let Some(arch) = d.arch.as_deref().filter(|a| crate::report::arch_known(a)) else {
                continue;
            };
            let mine: &[&InferenceRun] = runs_of.get(d.device.as_str()).map_or(&[], Vec::as_slice);
            let broke = mine.iter().find(|r| {
                matches!(r.outcome.as_str(), "hang" | "crash") || !r.kernel_faults.is_empty()
            });
            let passed = mine.iter().filter(|r| r.outcome == "pass").count();
            let all_pass = passed > 0
                && mine
                    .iter()
                    .all(|r| matches!(r.outcome.as_str(), "pass" | "unsupported" | "not-run"));
            let (verdict, detail) = match broke {
                Some(r) => (
                    Verdict::Fail,
                    format!("llama.cpp inference run `{}` {}", r.name, r.outcome),
                ),
                None if all_pass => (
                    Verdict::Pass,
                    format!("llama.cpp inference pass ({passed} runs agreeing with the CPU)"),
                ),
                None => continue,
            };
            let detail = match doc.build.build {
                Some(b) => format!("{detail}, build {b}"),
                None => detail,
            };
            self.records.push(Record {
                arch: bare_arch(arch),
                backend,
                series: series.clone(),
                os,
                level: Level::Inference,
                verdict,
                origin: format!("{origin} device {}", d.device),
                detail,
            });
        }
    }

    /// Smoke evidence per device of a detect report (and attribute evidence where the device
    /// says it supports VMM). `not-run` is no evidence either way.
    pub fn add_report(&mut self, r: &Report, origin: &str) {
        let os = Os::from_host(&r.host.os);
        for d in &r.devices {
            let runtime = d.runtime_version.as_deref().or_else(|| {
                r.backends
                    .iter()
                    .find(|b| b.backend == d.backend)
                    .and_then(|b| b.runtime_version.as_deref())
            });
            let series = runtime.and_then(series_of);
            let arch = bare_arch(&d.arch);
            let base = |level, verdict, detail: String| Record {
                arch: arch.clone(),
                backend: d.backend,
                series: series.clone(),
                os,
                level,
                verdict,
                origin: format!("{origin} device {}", d.index),
                detail,
            };
            if d.vmm_supported == Some(true) {
                self.records.push(base(
                    Level::Attribute,
                    Verdict::Pass,
                    "the device reports VMM support".into(),
                ));
            }
            let verdict = match d.smoke.outcome {
                SmokeOutcome::Pass => Verdict::Pass,
                // Too few cycles to count either way: no evidence.
                SmokeOutcome::NotRun | SmokeOutcome::Partial => continue,
                _ => Verdict::Fail,
            };
            let detail = match verdict {
                Verdict::Pass => "smoke test passed".to_string(),
                Verdict::Fail => format!("smoke test {}", d.smoke.outcome.as_str()),
            };
            self.records.push(base(Level::Smoke, verdict, detail));
        }
    }

    /// Workload evidence per device of an exercise document: a pass on a VMM build lifts what
    /// needs a workload pass; any other outcome on a VMM build is a measured failure; a binary
    /// without VMM says nothing about VMM.
    pub fn add_exercise(&mut self, e: &Exercise, origin: &str) {
        if e.binary.vmm != Some(true) {
            return;
        }
        let os = Os::from_host(&e.host.os);
        let series = e.runtime_version.as_deref().and_then(series_of);
        for d in &e.devices {
            let verdict = match d.outcome {
                WorkloadOutcome::Pass => Verdict::Pass,
                WorkloadOutcome::NotRun => continue,
                _ => Verdict::Fail,
            };
            let mut detail = format!("llama.cpp workload {}", d.outcome.as_str());
            if !d.ops.is_empty() {
                detail.push_str(&format!(" ({})", d.ops.join(", ")));
            }
            if let Some(b) = e.binary.build {
                detail.push_str(&format!(", build {b}"));
            }
            self.records.push(Record {
                arch: bare_arch(&d.arch),
                backend: e.binary.backend,
                series: series.clone(),
                os,
                level: Level::Workload,
                verdict,
                origin: format!("{origin} device {}", d.index),
                detail,
            });
        }
    }

    pub fn find(&self, key: &Key<'_>) -> Finding<'_> {
        let mut f = Finding::default();
        for r in self.records.iter().filter(|r| r.is_for(key)) {
            match r.verdict {
                Verdict::Fail if r.level >= Level::Smoke => f.failures.push(r),
                Verdict::Fail => {}
                Verdict::Pass => {
                    if f.best_pass.is_none_or(|b| r.level > b.level) {
                        f.best_pass = Some(r);
                    }
                }
            }
        }
        f
    }
}

/// `gfx1201:sramecc+:xnack-` → `gfx1201`.
fn bare_arch(a: &str) -> String {
    a.split(':').next().unwrap_or(a).to_string()
}

/// The runtime series (major.minor) of a version string: `7.2.26015` → 7.2, `13.0` → 13.0,
/// `7.14.0a20260609` → 7.14.
pub fn series_of(text: &str) -> Option<Version> {
    let mut parts = text.trim().trim_start_matches('v').split(['.', '-']);
    let major: u64 = parts.next()?.parse().ok()?;
    let minor_text = parts.next().unwrap_or("0");
    let digits: String = minor_text
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let minor: u64 = digits.parse().ok()?;
    format!("{major}.{minor}").parse().ok()
}

/// One document given with `--from`.
#[derive(Debug, Clone)]
pub enum Document {
    Report(Report),
    Exercise(Exercise),
    Inference(InferenceEvidence),
    /// A `kubectl get nodes -o json` dump of nodes labelled by `detect --format nfd`.
    Nodes(NodeDump),
}

/// The part of a `gpuprobe.exercise/v1` document (written by `check-build --exercise --json`)
/// that is evidence; other fields are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct Exercise {
    pub schema: String,
    pub host: ExerciseHost,
    pub binary: ExerciseBinary,
    #[serde(default)]
    pub runtime_version: Option<String>,
    #[serde(default)]
    pub devices: Vec<ExerciseDevice>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ExerciseHost {
    pub os: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ExerciseBinary {
    #[serde(default)]
    pub build: Option<u64>,
    pub backend: Backend,
    #[serde(default)]
    pub vmm: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ExerciseDevice {
    pub index: u32,
    pub arch: String,
    pub outcome: WorkloadOutcome,
    #[serde(default)]
    pub ops: Vec<String>,
}

/// The part of a `gpuprobe.inference/v1` document that is evidence; other fields are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct InferenceEvidence {
    pub schema: String,
    pub host: ExerciseHost,
    pub build: InferenceBuild,
    #[serde(default)]
    pub runtime_version: Option<String>,
    #[serde(default)]
    pub configurations: Vec<InferenceRun>,
    #[serde(default)]
    pub memory: Option<InferenceMemory>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct InferenceBuild {
    #[serde(default)]
    pub build: Option<u64>,
    pub backend: String,
    #[serde(default)]
    pub vmm: Option<bool>,
    pub devices: Vec<InferenceDevice>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct InferenceDevice {
    pub device: String,
    #[serde(default)]
    pub arch: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct InferenceRun {
    pub name: String,
    pub devices: Vec<String>,
    /// `pass`, `fail`, `hang`, `crash`, `error`, `unsupported`, `not-run`.
    pub outcome: String,
    #[serde(default)]
    pub kernel_faults: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct InferenceMemory {
    pub run: InferenceRun,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MeasuredFile {
    #[serde(default)]
    measured: Vec<Measured>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Measured {
    id: String,
    arch: String,
    backend: Backend,
    runtime: String,
    os: Os,
    level: Level,
    verdict: Verdict,
    /// The capture in this repository the record was read from.
    origin: String,
    note: String,
}

/// Reads one `--from` document and dispatches on its `schema`. Every document enters through
/// here, so a stricter loader replaces this one function.
pub fn load_document(path: &Path) -> Result<Document> {
    let shown = path.display().to_string();
    let fix = "pass a file written by `gpuprobe detect --json`, `gpuprobe check-build ./build --exercise --json` or `gpuprobe check-build ./build --exercise inference --output FILE`, or a `kubectl get nodes -o json` dump of nodes labelled by `gpuprobe detect --format nfd`";
    // Regular files only, bounded (a FIFO or device is refused rather than waited on).
    let text = crate::files::read_input(path, &shown, MAX_DOCUMENT_BYTES, fix)?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::Input {
        input: shown.clone(),
        line: Some(e.line()),
        message: format!("not JSON: {e}"),
        fix: fix.into(),
    })?;
    if crate::node_labels::is_node_dump(&value) {
        return crate::node_labels::read(value, &shown).map(Document::Nodes);
    }
    match value.get("schema").and_then(|s| s.as_str()).unwrap_or("") {
        crate::report::SCHEMA => Ok(Document::Report(Report::from_json(&text, &shown)?)),
        EXERCISE_SCHEMA => {
            crate::published::enforce(crate::published::Document::Exercise, &value, &shown)?;
            serde_json::from_value(value)
                .map(Document::Exercise)
                .map_err(|e| {
                    Error::input(
                        &shown,
                        format!("does not match the {EXERCISE_SCHEMA} schema: {e}"),
                        "re-create it with `gpuprobe check-build ./build --exercise --json`",
                    )
                })
        }
        INFERENCE_SCHEMA => {
            crate::published::enforce(crate::published::Document::Inference, &value, &shown)?;
            serde_json::from_value(value)
                .map(Document::Inference)
                .map_err(|e| {
                    Error::input(
                        &shown,
                        format!("does not match the {INFERENCE_SCHEMA} schema: {e}"),
                        "re-create it with `gpuprobe check-build --exercise inference --output FILE`",
                    )
                })
        }
        other => Err(Error::input(
            &shown,
            format!(
                "schema is `{other}`: this gpuprobe reads `{}`, `{EXERCISE_SCHEMA}` and `{INFERENCE_SCHEMA}`",
                crate::report::SCHEMA
            ),
            fix,
        )),
    }
}

/// What the reader of a plan should know about the documents themselves: in a node dump, the
/// nodes without gpuprobe's labels and each label that could not be read.
pub fn document_notes(docs: &[(PathBuf, Document)]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, d) in docs {
        let Document::Nodes(n) = d else { continue };
        if !n.unlabelled.is_empty() {
            out.push(format!(
                "{}: {} node(s) carry no gpuprobe labels and add nothing to the plan: {}",
                path.display(),
                n.unlabelled.len(),
                n.unlabelled.join(", ")
            ));
        }
        out.extend(
            n.unread
                .iter()
                .map(|u| format!("{}: {u}; it is not used", path.display())),
        );
    }
    out
}

/// Files named directly, plus every `*.json` directly inside a named directory (sorted), each
/// read with [`load_document`].
pub fn load_all(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Document)>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let rd = std::fs::read_dir(p).map_err(|e| Error::io(p, e))?;
            // Every `*.json` is read, so one that is not a regular file (a FIFO, a link to a
            // device) is refused by name rather than skipped without a word.
            let mut inside: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "json") && !f.is_dir())
                .collect();
            inside.sort();
            if inside.is_empty() {
                return Err(Error::input(
                    p.display().to_string(),
                    "the directory holds no *.json document",
                    "put `gpuprobe detect --json` outputs (name.json) in it, or name the files",
                ));
            }
            files.extend(inside);
        } else {
            files.push(p.clone());
        }
    }
    if files.len() > MAX_DOCUMENTS {
        return Err(Error::input(
            "--from",
            format!(
                "{} documents; at most {MAX_DOCUMENTS} are read",
                files.len()
            ),
            "pool fewer reports (one per machine type is enough)",
        ));
    }
    files
        .into_iter()
        .map(|f| load_document(&f).map(|d| (f, d)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_is_major_minor() {
        let s = |t: &str| series_of(t).map(|v| v.to_string());
        assert_eq!(s("7.2.26015").as_deref(), Some("7.2"));
        assert_eq!(s("13.0").as_deref(), Some("13.0"));
        assert_eq!(s("7.14.0a20260609").as_deref(), Some("7.14"));
        assert_eq!(s("6.4.43482-0f2d60242").as_deref(), Some("6.4"));
        assert_eq!(s("7").as_deref(), Some("7.0"));
        assert_eq!(s("x"), None);
    }

    #[test]
    fn bundled_records_load() {
        let ev = Evidence::bundled().unwrap();
        assert!(!ev.records.is_empty());
        assert!(
            ev.records.iter().all(|r| r.backend == Backend::Cuda),
            "no AMD GPU was measured for this project: no AMD record may be shipped"
        );
    }
}
