//! `gpuprobe quirks record`: failures measured on this machine become local quirk records, written
//! into a TOML file in place (its comments and order kept), ready to be sent upstream with the
//! report they came from.

use std::path::Path;

use toml_edit::{Array, ArrayOfTables, DocumentMut, Item, Table, value};

use crate::error::{Error, Result};
use crate::files;
use crate::report::{Device, Report, SmokeOutcome, SmokeStage};

const HEADER: &str = "\
# Local quirk records, measured on this machine by `gpuprobe quirks record`.
# gpuprobe merges this directory over its bundled profiles/quirks.toml (same format), so these
# records take part in every plan made here. Edit freely: comments and order are kept when
# gpuprobe adds or replaces a record. To share one, send it upstream with the
# `gpuprobe detect --json` report it came from.
";

/// One record to write: its id and the table.
pub struct Record {
    pub id: String,
    pub table: Table,
}

/// Records for every device whose smoke test failed, hung or crashed (one per architecture,
/// outcome and stage).
pub fn from_report(report: &Report) -> Vec<Record> {
    let mut out: Vec<Record> = Vec::new();
    for d in &report.devices {
        if !matches!(
            d.smoke.outcome,
            SmokeOutcome::Fail | SmokeOutcome::Hang | SmokeOutcome::Crash
        ) || !d.arch_known()
        {
            continue;
        }
        let stage = d.smoke.stage.as_ref().map_or("init", SmokeStage::as_str);
        let id = format!(
            "LOCAL-{}-{}-{}",
            d.arch,
            d.smoke.outcome.as_str(),
            stage.replace('_', "-")
        );
        if out.iter().any(|r| r.id == id) {
            continue;
        }
        out.push(Record {
            table: table_for(report, d, &id, stage),
            id,
        });
    }
    out
}

fn table_for(report: &Report, d: &Device, id: &str, stage: &str) -> Table {
    let reason = d.smoke.reason.clone().unwrap_or_default();
    let mut t = Table::new();
    t["id"] = value(id);
    t["title"] = value(format!(
        "{} ({}): VMM smoke test {} at stage {stage}, measured here",
        d.name,
        d.arch,
        d.smoke.outcome.as_str()
    ));
    t["summary"] = value(format!(
        "{reason}. The VMM pool is not safe on this device with this runtime; keep the legacy pool."
    ));
    t["severity"] = value("high");
    t["confidence"] = value("medium");
    let mut measured = vec![format!("gpuprobe {}", report.gpuprobe_version)];
    if let Some(k) = &report.host.kernel {
        measured.push(format!("{} kernel {k}", report.host.os));
    }
    if let Some(r) = &d.runtime_version {
        measured.push(format!("{} runtime {r}", d.backend.name()));
    }
    if let Some(v) = &d.driver_version {
        measured.push(format!("driver {v}"));
    }
    t["measured_on"] = value(measured.join(", "));
    let mut m = Table::new();
    m["vendor"] = value(match d.vendor {
        crate::report::Vendor::Amd => "amd",
        crate::report::Vendor::Nvidia => "nvidia",
    });
    m["archs"] = value(Array::from_iter([d.arch.as_str()]));
    // The same runtime (major.minor) or driver: a fix in a later one should not be denied.
    if let Some(mm) = d
        .runtime_version
        .as_deref()
        .and_then(crate::evidence::series_of)
        .filter(|_| d.backend == crate::report::Backend::Hip)
    {
        m["runtime"] = value(format!("{mm}:{mm}"));
    }
    if let Some(v) = d
        .driver_version
        .as_deref()
        .filter(|v| v.parse::<crate::version::Version>().is_ok())
    {
        m["driver"] = value(format!("{v}:{v}"));
    }
    t["match"] = Item::Table(m);
    let mut e = Table::new();
    e["vmm"] = value("deny");
    e["warn"] = value(format!("measured on this machine: {reason}"));
    t["effect"] = Item::Table(e);
    t["sources"] = value(Array::new());
    t
}

/// Adds or replaces `records` in `path` (created with a header if missing), keeping everything
/// else in the file as it was. Returns, per record, whether it replaced an existing one.
///
/// Concurrent runs take turns (an exclusive lock on `<path>.lock` across the read, edit and
/// write), so none loses another's records; the file is replaced atomically, a symlinked file
/// stays a symlink and an existing file keeps its permissions.
pub fn write(path: &Path, records: Vec<Record>) -> Result<Vec<(String, bool)>> {
    let origin = path.display().to_string();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io_on(dir, "create", e))?;
    }
    let _lock = files::lock_beside(path)?;
    let (text, new_file) = match files::read_bytes(path, files::MAX_INPUT_BYTES) {
        Ok(bytes) => (
            String::from_utf8(bytes).map_err(|_| {
                Error::input(
                    &origin,
                    "is not UTF-8 text",
                    "fix the file by hand, or record into another file with --file",
                )
            })?,
            false,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), true),
        Err(e) => {
            return Err(Error::input(
                &origin,
                format!("cannot read: {e}"),
                "record into a regular file with --file",
            ));
        }
    };
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| Error::Input {
            input: origin.clone(),
            line: e.span().map(|s| crate::toml_file::line_of(&text, s.start)),
            message: format!("not TOML: {}", e.message()),
            fix: "fix the file by hand, or record into another file with --file".into(),
        })?;
    if doc.get("quirk").is_none() {
        doc["quirk"] = Item::ArrayOfTables(ArrayOfTables::new());
    }
    let Some(list) = doc["quirk"].as_array_of_tables_mut() else {
        return Err(Error::input(
            origin,
            "`quirk` is not an array of tables ([[quirk]])",
            "fix the file by hand, or record into another file with --file",
        ));
    };
    let mut done = Vec::new();
    for r in records {
        let existing = list
            .iter_mut()
            .find(|t| t.get("id").and_then(|i| i.as_str()) == Some(r.id.as_str()));
        match existing {
            Some(t) => {
                let decor = t.decor().clone();
                *t = r.table;
                *t.decor_mut() = decor;
                done.push((r.id, true));
            }
            None => {
                list.push(r.table);
                done.push((r.id, false));
            }
        }
    }
    let out = if new_file {
        format!("{HEADER}\n{doc}")
    } else {
        doc.to_string()
    };
    // The file must still load as a quirk file before it replaces the old one.
    let parsed: crate::quirks::QuirkFile = crate::toml_file::parse_toml(&out, &origin)?;
    parsed.validate(&out, &origin)?;
    files::write_atomic(path, out.as_bytes(), "--file")?;
    Ok(done)
}
