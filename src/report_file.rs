//! Reading a saved report (`--from`): the one loader every command uses.
//!
//! A report may come from another machine or another person, so it is read like any untrusted
//! input (a regular file, at most [`files::MAX_INPUT_BYTES`]) and every field is checked with the
//! rules the CLI applies to the same facts: architecture names as `--targets` reads them, the
//! backend agreeing with the vendor and the architecture, a smoke outcome agreeing with its own
//! counts, and no control characters anywhere. A failure names the file, the device, the field
//! and the fix, and exits 2.

use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::files;
use crate::report::{Device, Report, SmokeOutcome};

const FIX_RECREATE: &str = "re-create the report with `gpuprobe detect --json > report.json` on the machine it describes (a report is not meant to be edited)";

/// Reads, parses and validates the report at `path`.
pub fn read_report(path: &Path) -> Result<Report> {
    let origin = path.display().to_string();
    let text = files::read_input(
        path,
        &origin,
        files::MAX_INPUT_BYTES,
        "pass a file written by `gpuprobe detect --json`",
    )?;
    parse_report(&text, &origin)
}

impl Report {
    /// Parses and validates a saved report, refusing other schemas with a message that names the
    /// fix. Defined here, by the loader, so that `report` (the data) does not import it.
    pub fn from_json(text: &str, origin: &str) -> Result<Self> {
        parse_report(text, origin)
    }
}

/// Parses and validates report text; `origin` names it in errors.
pub fn parse_report(text: &str, origin: &str) -> Result<Report> {
    let value: Value = serde_json::from_str(text).map_err(|e| Error::Input {
        input: origin.to_string(),
        line: Some(e.line()),
        message: format!("not JSON: {e}"),
        fix: "pass a file written by `gpuprobe detect --json`".into(),
    })?;
    // The published schema first, so a document of the wrong shape is named by its JSON path
    // (another schema's document gets its own message from `from_json_value`).
    if value.get("schema").and_then(Value::as_str) == Some(crate::report::SCHEMA) {
        crate::published::enforce(crate::published::Document::Report, &value, origin)?;
    }
    check_strings(&value, &mut String::new(), origin)?;
    let report = Report::from_json_value(value, origin)?;
    validate(&report, origin)?;
    Ok(report)
}

fn invalid(origin: &str, place: &str, message: impl std::fmt::Display, fix: &str) -> Error {
    Error::input(origin, format!("{place}: {message}"), fix)
}

/// `device 0, field `arch`` or `field `host.os``, from a JSON path such as `devices[0].arch`.
fn place_of(path: &str) -> String {
    if let Some(rest) = path.strip_prefix("devices[")
        && let Some((index, field)) = rest.split_once(']')
    {
        let field = field.trim_start_matches('.');
        return if field.is_empty() {
            format!("device entry {index}")
        } else {
            format!("device entry {index}, field `{field}`")
        };
    }
    format!("field `{path}`")
}

/// No string anywhere may hold a control character, except the child's captured stderr lines,
/// which are kept raw as evidence and only ever shown escaped.
fn check_strings(v: &Value, path: &mut String, origin: &str) -> Result<()> {
    match v {
        Value::String(s) => {
            let raw_ok = path.contains(".stderr_tail[") && !s.contains('\0');
            if !raw_ok && let Some(c) = s.chars().find(|c| crate::neutral::is_hostile(*c)) {
                return Err(invalid(
                    origin,
                    &place_of(path),
                    format!(
                        "holds the control character {:?} (`{}`)",
                        c,
                        crate::neutral::inline(&s.chars().take(80).collect::<String>())
                    ),
                    FIX_RECREATE,
                ));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                check_strings(item, path, origin)?;
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                check_strings(item, path, origin)?;
                path.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

/// A report to plan for must list a GPU. A report without one (what `detect --json` writes on a
/// machine without a GPU) is still a valid report, with facts about the machine, for check-build.
pub fn require_devices(r: &Report, origin: &str) -> Result<()> {
    if r.devices.is_empty() {
        let backends: Vec<String> = r
            .backends
            .iter()
            .map(|b| format!("{} {}", b.backend.name(), b.status))
            .collect();
        return Err(Error::input(
            origin,
            format!(
                "the report lists no GPU: `gpuprobe detect` found none on the machine that wrote it{}",
                if backends.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", backends.join(", "))
                }
            ),
            "run `gpuprobe detect --json` on the machine with the GPUs, or plan without a report: --targets gfx1100,gfx120X (or sm_86,sm_90)",
        ));
    }
    Ok(())
}

/// The checks serde cannot make. See the module comment.
pub fn validate(r: &Report, origin: &str) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, d) in r.devices.iter().enumerate() {
        let at = |field: &str| format!("device entry {i} (index {}), field `{field}`", d.index);
        if !seen.insert(d.index) {
            return Err(invalid(
                origin,
                &at("index"),
                format!("device index {} appears twice", d.index),
                FIX_RECREATE,
            ));
        }
        check_device(d, &at, origin)?;
    }
    for (i, p) in r.peers.iter().enumerate() {
        let at = format!("peer entry {i}");
        if !seen.contains(&p.from) || !seen.contains(&p.to) || p.from == p.to {
            return Err(invalid(
                origin,
                &at,
                format!(
                    "names devices {} -> {}, which are not two listed devices",
                    p.from, p.to
                ),
                FIX_RECREATE,
            ));
        }
        if p.outcome == SmokeOutcome::Pass
            && (p.copy_ok == Some(false) || p.mismatches.is_some_and(|m| m > 0))
        {
            return Err(invalid(
                origin,
                &at,
                "says `pass` but its copy failed or found mismatches",
                FIX_RECREATE,
            ));
        }
    }
    for (i, e) in r.environment.iter().enumerate() {
        if !is_env_name(&e.name) {
            return Err(invalid(
                origin,
                &format!("environment entry {i}, field `name`"),
                format!("`{}` is not an environment variable name", e.name),
                FIX_RECREATE,
            ));
        }
    }
    Ok(())
}

fn is_env_name(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_device(d: &Device, at: &dyn Fn(&str) -> String, origin: &str) -> Result<()> {
    if d.backend.vendor() != d.vendor {
        return Err(invalid(
            origin,
            &at("vendor"),
            format!(
                "backend `{}` with vendor `{}`: the CUDA backend is NVIDIA's, HIP is AMD's",
                d.backend.name(),
                serde_json::to_value(d.vendor)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ),
            FIX_RECREATE,
        ));
    }
    // `unknown` is what a probe writes for a device it saw but could not measure.
    if d.arch_known() {
        let canonical = crate::targets::normalise(&d.arch);
        match crate::targets::vendor_of_name(&canonical) {
            Some(v) if canonical == d.arch && v == d.vendor => {}
            Some(v) if canonical == d.arch => {
                return Err(invalid(
                    origin,
                    &at("arch"),
                    format!(
                        "`{}` is an {} architecture, but the device is {}'s",
                        d.arch,
                        if v == crate::report::Vendor::Amd {
                            "AMD"
                        } else {
                            "NVIDIA"
                        },
                        d.backend.name()
                    ),
                    FIX_RECREATE,
                ));
            }
            _ => {
                return Err(invalid(
                    origin,
                    &at("arch"),
                    format!(
                        "`{}` is not a GPU architecture name as --targets reads them (e.g. gfx1201, gfx90a, sm_90)",
                        crate::neutral::inline(&d.arch)
                    ),
                    FIX_RECREATE,
                ));
            }
        }
    }
    if let Some(f) = &d.arch_features
        && !f
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-:_".contains(c))
    {
        return Err(invalid(
            origin,
            &at("arch_features"),
            format!("`{f}` is not a list of target features such as `sramecc+:xnack-`"),
            FIX_RECREATE,
        ));
    }
    let s = &d.smoke;
    if s.outcome == SmokeOutcome::Pass {
        let contradiction = if s.mismatches.is_some_and(|m| m > 0) {
            Some((
                "smoke.mismatches",
                format!("{} mismatches", s.mismatches.unwrap_or(0)),
            ))
        } else if let (Some(done), Some(all)) = (s.cycles_done, s.cycles)
            && done != all
        {
            Some(("smoke.cycles_done", format!("{done} of {all} cycles done")))
        } else if let Some(e) = &s.error {
            Some(("smoke.error", format!("an API error ({e})")))
        } else if let Some(sig) = s.signal {
            Some(("smoke.signal", format!("signal {sig}")))
        } else if let Some(stage) = &s.stage {
            Some(("smoke.stage", format!("a failed stage `{stage}`")))
        } else if d.vmm_supported == Some(false) {
            Some(("vmm_supported", "VMM reported as unsupported".to_string()))
        } else {
            None
        };
        if let Some((field, what)) = contradiction {
            return Err(invalid(
                origin,
                &at(field),
                format!("the smoke outcome is `pass`, but the report also records {what}"),
                FIX_RECREATE,
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../tests/fixtures/nvidia-2x-h200-driver580/detect.json");

    fn edited(edit: impl Fn(&mut Value)) -> Result<Report> {
        let mut v: Value = serde_json::from_str(FIXTURE).unwrap();
        edit(&mut v);
        parse_report(&v.to_string(), "r.json")
    }

    #[test]
    fn a_real_report_is_accepted() {
        assert_eq!(edited(|_| {}).unwrap().devices.len(), 2);
    }

    #[test]
    fn hostile_and_inconsistent_fields_are_refused() {
        type Edit = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(Edit, &str)> = vec![
            (
                Box::new(|v| v["devices"][0]["arch"] = "sm_90\n$(touch x)".into()),
                "device entry 0, field `arch`",
            ),
            (
                Box::new(|v| v["devices"][1]["arch"] = "".into()),
                "device entry 1 (index 1), field `arch`",
            ),
            (
                Box::new(|v| v["devices"][0]["arch"] = "sm_".into()),
                "`sm_` is not a GPU architecture",
            ),
            (
                Box::new(|v| v["devices"][0]["arch"] = "gfx1201; rm -rf ~".into()),
                "not a GPU architecture",
            ),
            (
                Box::new(|v| v["devices"][0]["name"] = "H200\u{0}".into()),
                "field `name`",
            ),
            (
                Box::new(|v| v["devices"][0]["vendor"] = "amd".into()),
                "field `vendor`",
            ),
            (
                Box::new(|v| {
                    v["devices"][0]["backend"] = "hip".into();
                    v["devices"][0]["vendor"] = "amd".into();
                }),
                "is an NVIDIA architecture",
            ),
            (
                Box::new(|v| v["devices"][0]["smoke"]["mismatches"] = 999.into()),
                "999 mismatches",
            ),
            (
                Box::new(|v| v["devices"][0]["smoke"]["cycles_done"] = 3.into()),
                "3 of 200 cycles",
            ),
            (
                Box::new(|v| v["host"]["os"] = "linux\u{1b}[2J".into()),
                "field `host.os`",
            ),
        ];
        for (edit, want) in cases {
            let e = edited(edit).unwrap_err();
            assert_eq!(e.exit_code(), crate::error::exit::USAGE);
            assert!(e.to_string().contains(want), "want {want:?} in: {e}");
            assert!(e.to_string().starts_with("r.json"), "{e}");
        }
    }

    #[test]
    fn a_report_without_devices_is_valid_but_nothing_to_plan_for() {
        let r = edited(|v| {
            v["devices"] = Value::Array(vec![]);
            v["peers"] = Value::Array(vec![]);
        })
        .unwrap();
        let e = require_devices(&r, "r.json").unwrap_err();
        assert!(e.to_string().contains("lists no GPU"), "{e}");
        assert_eq!(e.exit_code(), crate::error::exit::USAGE);
    }

    #[test]
    fn raw_stderr_lines_are_kept_as_evidence() {
        let r = edited(|v| {
            v["devices"][0]["smoke"]["stderr_tail"] = serde_json::json!(["\u{1b}[31mboom\r"])
        })
        .unwrap();
        assert_eq!(r.devices[0].smoke.stderr_tail[0], "\u{1b}[31mboom\r");
    }
}
