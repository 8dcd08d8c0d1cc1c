//! `gpuprobe quirks record --from inference.json`: what an inference document measured on this
//! machine, as local quirk records. A run that hung, crashed or faulted the GPU on a VMM build
//! keeps the legacy pool for that device (the seeds' "VMM hangs on the first real request"); a
//! configuration whose output differs from the CPU, or a pool that kept memory, is a warning that
//! names what to avoid with the measured numbers.

use std::collections::{HashMap, HashSet};

use toml_edit::{Array, Item, Table, value};

use super::{Inference, Outcome, RunResult};
use crate::quirks::record::Record;

/// Records for `doc`, and the runs that could not become one (with why).
pub fn records(doc: &Inference) -> (Vec<Record>, Vec<String>) {
    let mut out: Vec<Record> = Vec::new();
    let mut skipped = Vec::new();
    let vendor = match doc.build.backend.as_str() {
        "cuda" => "nvidia",
        "hip" => "amd",
        _ => {
            if doc.configurations.iter().any(|r| r.outcome.is_failure()) {
                skipped.push(format!(
                    "backend `{}`: no GPU was exercised, nothing to match a record on",
                    doc.build.backend
                ));
            }
            return (out, skipped);
        }
    };
    // Each device's failing runs, indexed once (linear in the document, however many devices
    // and runs it lists).
    let mut failing_on: HashMap<&str, Vec<&RunResult>> = HashMap::new();
    for r in doc
        .configurations
        .iter()
        .chain(doc.memory.iter().map(|m| &m.run))
        .filter(|r| r.outcome.is_failure() || !r.kernel_faults.is_empty())
    {
        for dev in &r.devices {
            let runs = failing_on.entry(dev.as_str()).or_default();
            // A run that names a device twice is still one run on it.
            if !runs.last().is_some_and(|last| std::ptr::eq(*last, r)) {
                runs.push(r);
            }
        }
    }
    let mut ids: HashSet<String> = HashSet::new();
    for d in &doc.build.devices {
        let failing: &[&RunResult] = failing_on.get(d.device.as_str()).map_or(&[], Vec::as_slice);
        if failing.is_empty() {
            continue;
        }
        let Some(arch) = d.arch.as_deref().filter(|a| crate::report::arch_known(a)) else {
            skipped.push(format!(
                "{}: architecture unknown, nothing to match a record on (run without --no-probe)",
                d.device
            ));
            continue;
        };
        for r in failing {
            let broke =
                matches!(r.outcome, Outcome::Hang | Outcome::Crash) || !r.kernel_faults.is_empty();
            if broke && doc.build.vmm != Some(true) {
                skipped.push(format!(
                    "{} ({arch}): `{}` {} with a build whose VMM pool is {}: not evidence against VMM",
                    d.device,
                    r.name,
                    r.outcome.as_str(),
                    if doc.build.vmm == Some(false) {
                        "compiled out"
                    } else {
                        "unknown"
                    }
                ));
                continue;
            }
            let record = if broke {
                vmm_record(doc, vendor, arch, &d.device, r)
            } else {
                warn_record(doc, vendor, arch, &d.device, r)
            };
            if ids.insert(record.id.clone()) {
                out.push(record);
            }
        }
    }
    (out, skipped)
}

/// `CUDA0 fa-on kv-q8_0` → `fa-on-kv-q8-0`: the configuration, without the device.
fn slug(name: &str, device: &str) -> String {
    let rest = name.strip_prefix(device).unwrap_or(name);
    let s: String = rest
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    s.split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

fn measured_on(doc: &Inference) -> String {
    let mut m = vec![format!(
        "gpuprobe {} check-build --exercise inference",
        doc.gpuprobe_version
    )];
    if let Some(k) = &doc.host.kernel {
        m.push(format!("{} kernel {k}", doc.host.os));
    }
    if let Some(r) = &doc.runtime_version {
        m.push(format!("runtime {r}"));
    }
    if let Some(b) = doc.build.build {
        m.push(format!("llama.cpp build {b}"));
    }
    m.join(", ")
}

/// Text of a record made from the document's own strings (device and run names, reasons, the
/// kernel): a quirk's text is one line without control characters, so a name holding a newline,
/// an escape or a bidi control is recorded escaped (`\n`, `\x1b`, `\u{202e}`) rather than
/// making the whole quirk file unreadable.
fn one_line(text: &str) -> String {
    crate::neutral::inline(text).into_owned()
}

/// The common part: id, title, summary, where measured, and the match on this vendor and
/// architecture (and, for HIP, this runtime series: a later one may have the fix).
fn base(
    doc: &Inference,
    vendor: &str,
    arch: &str,
    id: &str,
    title: String,
    summary: String,
) -> Table {
    let mut t = Table::new();
    t["id"] = value(id);
    t["title"] = value(one_line(&title));
    t["summary"] = value(one_line(&summary));
    t["severity"] = value("high");
    t["confidence"] = value("medium");
    t["measured_on"] = value(one_line(&measured_on(doc)));
    let mut m = Table::new();
    m["vendor"] = value(vendor);
    m["archs"] = value(Array::from_iter([arch]));
    if vendor == "amd"
        && let Some(mm) = doc
            .runtime_version
            .as_deref()
            .and_then(crate::evidence::series_of)
    {
        m["runtime"] = value(format!("{mm}:{mm}"));
    }
    t["match"] = Item::Table(m);
    t["sources"] = value(Array::new());
    t
}

fn vmm_record(doc: &Inference, vendor: &str, arch: &str, device: &str, r: &RunResult) -> Record {
    let what = if matches!(r.outcome, Outcome::Hang | Outcome::Crash) {
        r.outcome.as_str()
    } else {
        "fault"
    };
    let id = format!("LOCAL-{arch}-inference-{what}");
    let mut t = base(
        doc,
        vendor,
        arch,
        &id,
        format!("{device} ({arch}): llama.cpp inference {what} with the VMM pool, measured here"),
        format!(
            "`{}`: {}. A llama.cpp build with the VMM pool did not survive a model run on this device; keep the legacy pool.",
            r.name,
            if r.reason.is_empty() {
                r.outcome.as_str()
            } else {
                r.reason.as_str()
            }
        ),
    );
    let mut e = Table::new();
    e["vmm"] = value("deny");
    e["warn"] = value(one_line(&format!(
        "measured on this machine: `{}` {what} with the VMM pool",
        r.name
    )));
    t["effect"] = Item::Table(e);
    Record { id, table: t }
}

fn warn_record(doc: &Inference, vendor: &str, arch: &str, device: &str, r: &RunResult) -> Record {
    let id = format!("LOCAL-{arch}-inference-{}", slug(&r.name, device));
    let numbers = match &r.divergence {
        Some(d) => format!(
            "mean KLD {:.6} against the CPU (limit {:.6}), same top token {:.2}% (limit {:.2}%)",
            d.mean_kld,
            doc.thresholds.max_mean_kld,
            d.same_top_percent,
            doc.thresholds.min_same_top_percent
        ),
        None => r.reason.clone(),
    };
    let avoid = r.avoid.clone().unwrap_or_else(|| format!("`{}`", r.name));
    let mut t = base(
        doc,
        vendor,
        arch,
        &id,
        format!(
            "{device} ({arch}): `{}` {}, measured here",
            r.name,
            r.outcome.as_str()
        ),
        format!("{numbers}. Avoid {avoid}."),
    );
    let mut e = Table::new();
    e["warn"] = value(one_line(&format!(
        "measured on this machine: `{}` {} ({numbers}); avoid {avoid}",
        r.name,
        r.outcome.as_str()
    )));
    t["effect"] = Item::Table(e);
    Record { id, table: t }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_is_named_without_its_device() {
        assert_eq!(slug("CUDA0 fa-on kv-q8_0", "CUDA0"), "fa-on-kv-q8-0");
        assert_eq!(
            slug("CUDA0 memory fa-on kv-q8_0 ctx 32768", "CUDA0"),
            "memory-fa-on-kv-q8-0-ctx-32768"
        );
    }
}
