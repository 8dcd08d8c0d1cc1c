//! The published JSON Schemas (`schemas/`) as gpuprobe holds the documents it reads to them.
//!
//! Every document gpuprobe reads from elsewhere (`--from` reports, exercise results, the report
//! inside a replay dump) is checked against the committed schema file its `schema` field names
//! before anything else reads it: a document that does not meet the published contract is
//! refused with exit 2, naming the file, the JSON path and the fix. This module holds only the
//! files and the check, so every reader may import it; generating the schemas from the types is
//! [`crate::schema`]'s.

use std::sync::OnceLock;

use serde_json::Value;

/// The JSON documents gpuprobe prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Document {
    /// `gpuprobe detect --json`.
    Report,
    /// `gpuprobe cmake-flags --format json`.
    Plan,
    /// `gpuprobe check-build --json`.
    CheckBuild,
    /// `gpuprobe check-build --exercise --json`.
    Exercise,
    /// `gpuprobe check-build --exercise inference --json`.
    Inference,
    /// `gpuprobe prebuilt --format json`.
    Prebuilt,
}

impl Document {
    pub const ALL: [Document; 6] = [
        Document::Report,
        Document::Plan,
        Document::CheckBuild,
        Document::Exercise,
        Document::Inference,
        Document::Prebuilt,
    ];

    /// The value of the document's own `schema` field (each writer's `SCHEMA` constant; a unit
    /// test in `schema` keeps them equal).
    pub fn id(self) -> &'static str {
        match self {
            Document::Report => "gpuprobe.report/v1",
            Document::Plan => "gpuprobe.plan/v1",
            Document::CheckBuild => "gpuprobe.check-build/v1",
            Document::Exercise => "gpuprobe.exercise/v1",
            Document::Inference => "gpuprobe.inference/v1",
            Document::Prebuilt => "gpuprobe.prebuilt/v1",
        }
    }

    /// The document whose `schema` field reads `id`.
    pub fn from_id(id: &str) -> Option<Document> {
        Document::ALL.into_iter().find(|d| d.id() == id)
    }

    /// The name `gpuprobe schema NAME` takes.
    pub fn cli_name(self) -> &'static str {
        match self {
            Document::Report => "report",
            Document::Plan => "plan",
            Document::CheckBuild => "check-build",
            Document::Exercise => "exercise",
            Document::Inference => "inference",
            Document::Prebuilt => "prebuilt",
        }
    }

    /// The committed schema file, as published (the drift test keeps it equal to
    /// [`Document::schema_text`]).
    pub fn published(self) -> &'static str {
        match self {
            Document::Report => include_str!("../schemas/gpuprobe.report.v1.schema.json"),
            Document::Plan => include_str!("../schemas/gpuprobe.plan.v1.schema.json"),
            Document::CheckBuild => include_str!("../schemas/gpuprobe.check-build.v1.schema.json"),
            Document::Exercise => include_str!("../schemas/gpuprobe.exercise.v1.schema.json"),
            Document::Inference => include_str!("../schemas/gpuprobe.inference.v1.schema.json"),
            Document::Prebuilt => include_str!("../schemas/gpuprobe.prebuilt.v1.schema.json"),
        }
    }

    /// The command line that writes it again, as a fix to paste (a build folder where the
    /// command needs one).
    pub fn recreate(self) -> &'static str {
        match self {
            Document::Report => "gpuprobe detect --json > report.json",
            Document::Exercise => "gpuprobe check-build ./build --exercise --json > exercise.json",
            Document::Inference => {
                "gpuprobe check-build ./build --exercise inference --output inference.json"
            }
            other => other.command(),
        }
    }

    /// The command that prints it.
    pub fn command(self) -> &'static str {
        match self {
            Document::Report => "gpuprobe detect --json",
            Document::Plan => "gpuprobe cmake-flags --format json",
            Document::CheckBuild => "gpuprobe check-build --json",
            Document::Exercise => "gpuprobe check-build --exercise --json",
            Document::Inference => "gpuprobe check-build --exercise inference --json",
            Document::Prebuilt => "gpuprobe prebuilt --format json",
        }
    }

    /// The schema's file name under `schemas/`: the id with `/` spelled `.`.
    pub fn file_name(self) -> String {
        format!("{}.schema.json", self.id().replace('/', "."))
    }
}

/// Most schema violations named in one error; the rest are counted.
const MAX_NAMED: usize = 3;
/// Longest violation text kept (a message may quote a property name from the document).
const MAX_VIOLATION_CHARS: usize = 160;

fn validator(doc: Document) -> &'static jsonschema::Validator {
    static VALIDATORS: [OnceLock<jsonschema::Validator>; Document::ALL.len()] =
        [const { OnceLock::new() }; Document::ALL.len()];
    let slot = Document::ALL.iter().position(|d| *d == doc).unwrap_or(0);
    VALIDATORS[slot].get_or_init(|| {
        // Both are files of this crate, checked by the schema tests: a failure is a build bug.
        let schema: Value = serde_json::from_str(doc.published())
            .expect("a committed schema file is JSON (tests/schemas.rs)");
        jsonschema::validator_for(&schema)
            .expect("a committed schema file is a valid JSON Schema (tests/schemas.rs)")
    })
}

/// Holds `value`, a document read from `origin`, to the published schema of `doc`: every
/// violation is found (up to [`MAX_NAMED`] named, with its JSON path), and the error names the
/// file, the schema and the fix (exit 2). The document's values never appear in the message.
pub fn enforce(doc: Document, value: &Value, origin: &str) -> Result<(), crate::Error> {
    let mut named = Vec::new();
    let mut total = 0usize;
    for error in validator(doc).iter_errors(value) {
        total += 1;
        if named.len() < MAX_NAMED {
            let place = match error.instance_path().as_str() {
                "" => "the top level".to_string(),
                p => format!("`{p}`"),
            };
            let text: String = error
                .masked()
                .to_string()
                .chars()
                .take(MAX_VIOLATION_CHARS)
                .collect();
            named.push(format!("at {place}: {text}"));
        }
    }
    if total == 0 {
        return Ok(());
    }
    let more = if total > named.len() {
        format!(" (and {} more)", total - named.len())
    } else {
        String::new()
    };
    Err(crate::Error::input(
        origin,
        format!(
            "does not match the published schema of {} (schemas/{}) {}{more}",
            doc.id(),
            doc.file_name(),
            named.join("; ")
        ),
        format!(
            "re-create it with `{}` (a document is not meant to be edited); `gpuprobe schema {}` prints the schema it must match",
            doc.recreate(),
            doc.cli_name()
        ),
    ))
}
