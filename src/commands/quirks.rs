use anyhow::Result;

use super::print;
use crate::cli::{QuirksAction, QuirksArgs};
use crate::profiles::Knowledge;

pub fn run(a: &QuirksArgs) -> Result<i32> {
    if let Some(QuirksAction::Record { from, file, probe }) = &a.action {
        // Recording must work even when an existing local file is broken: it is what gets fixed.
        return record(from.as_deref(), file.as_deref(), probe);
    }
    let k = Knowledge::load()?;
    match &a.action {
        None | Some(QuirksAction::List { json: false }) => {
            let mut out = String::new();
            for q in &k.quirks {
                let tag = if q.contested {
                    " (contested: explanation only)"
                } else {
                    ""
                };
                out.push_str(&format!(
                    "{:<14} {:<8} {:<11} {}{tag}\n",
                    q.id,
                    q.severity.as_str(),
                    q.confidence.as_str(),
                    q.title
                ));
            }
            print(&out)?;
        }
        Some(QuirksAction::List { json: true }) => {
            super::print_json(&(serde_json::to_string_pretty(&k.quirks)? + "\n"))?
        }
        Some(QuirksAction::Show { id }) => {
            let Some(q) = k.quirk(id) else {
                let ids: Vec<&str> = k.quirks.iter().map(|q| q.id.as_str()).collect();
                return Err(crate::Error::input(
                    format!("quirk id `{id}`"),
                    "no such quirk",
                    format!("use one of: {}", ids.join(", ")),
                )
                .into());
            };
            let mut out = format!("{}: {}\n\n{}\n\n", q.id, q.title, q.summary);
            out.push_str(&format!(
                "severity: {}\nconfidence: {}\n",
                q.severity.as_str(),
                q.confidence.as_str()
            ));
            if q.contested {
                out.push_str(
                    "contested: yes (recorded for explanation; never turned into a flag or deny)\n",
                );
            }
            out.push_str("\nmatch:\n");
            out.push_str(&indent(&with_range_words(
                &toml::to_string(&q.when).unwrap_or_default(),
            )));
            out.push_str("\neffect:\n");
            out.push_str(&indent(&toml::to_string(&q.effect).unwrap_or_default()));
            out.push_str(&format!("\nevidence that lifts it: {}\n", lifted_by(q)));
            match &q.fixed_in {
                Some(f) => {
                    out.push_str(&format!(
                        "fix: {} (the range ends just below it)\n",
                        f.describe(q.when.vendor)
                    ));
                    if let Some(n) = &f.note {
                        out.push_str(&format!("  {n}\n"));
                    }
                    for s in &f.sources {
                        out.push_str(&format!("  {s}\n"));
                    }
                }
                None => out.push_str("fix: no fix known (the range stays open)\n"),
            }
            out.push_str("\nsources:\n");
            for s in &q.sources {
                out.push_str(&format!("  {s}\n"));
            }
            print(&out)?;
        }
        Some(QuirksAction::Record { from, file, probe }) => {
            return record(from.as_deref(), file.as_deref(), probe);
        }
        Some(QuirksAction::Targets) => {
            let mut out = String::from("families:\n");
            for f in &k.targets.family {
                out.push_str(&format!("  {:<9} = {}\n", f.token, f.members.join(";")));
            }
            out.push_str("targets:\n");
            for t in &k.targets.target {
                out.push_str(&format!(
                    "  {:<8} {:<6} wave{:<3} {}{}; toolkit: {}; {}\n",
                    t.name,
                    format!("{:?}", t.vendor).to_lowercase(),
                    t.wave_size,
                    if t.apu { "apu " } else { "" },
                    t.generation.as_deref().unwrap_or(""),
                    match (&t.unsupported, &t.toolkit.min, &t.toolkit.max) {
                        (Some(_), _, _) => format!("no {} release supports it", t.toolkit_name()),
                        (None, None, None) => format!("any {}", t.toolkit_name()),
                        _ => format!("{} {}", t.toolkit_name(), t.toolkit.describe()),
                    },
                    t.products.as_deref().unwrap_or("")
                ));
            }
            print(&out)?;
        }
    }
    Ok(0)
}

/// `runtime = "7.0:"` gains `# 7.0 and later`: the TOML stays what a quirk file holds, the
/// comment says the range for people.
fn with_range_words(toml_text: &str) -> String {
    toml_text
        .lines()
        .map(|line| {
            let range = line
                .split_once(" = ")
                .map(|(_, v)| v.trim().trim_matches('"'))
                .filter(|v| v.contains(':'))
                .and_then(|v| v.parse::<crate::version::VersionRange>().ok());
            match range {
                Some(r) => format!("{line}   # {}\n", r.describe()),
                None => format!("{line}\n"),
            }
        })
        .collect()
}

fn indent(s: &str) -> String {
    if s.trim().is_empty() {
        return "  (none)\n".into();
    }
    s.lines().map(|l| format!("  {l}\n")).collect()
}

fn record(
    from: Option<&std::path::Path>,
    file: Option<&std::path::Path>,
    probe: &crate::cli::ProbeArgs,
) -> Result<i32> {
    // A saved document: a detect report (smoke failures) or an exercise result (workload
    // failures), told apart by its schema; either is read as untrusted input.
    let (records, skipped) = match from {
        Some(p) => {
            let origin = p.display().to_string();
            let text = crate::files::read_input(
                p,
                &origin,
                crate::files::MAX_INPUT_BYTES,
                "pass a file written by `gpuprobe detect --json`, `gpuprobe check-build ./build --exercise --json` or `gpuprobe check-build ./build --exercise inference --output FILE`",
            )?;
            let value = serde_json::from_str::<serde_json::Value>(&text).ok();
            let schema = value
                .as_ref()
                .and_then(|v| v.get("schema").and_then(|s| s.as_str()).map(str::to_string));
            if schema.as_deref() == Some(crate::inference::SCHEMA) {
                // One that does not match its own published schema is named as such first.
                if let Some(v) = &value {
                    crate::published::enforce(crate::published::Document::Inference, v, &origin)?;
                }
                let doc: crate::inference::Inference =
                    serde_json::from_str(&text).map_err(|e| {
                        crate::Error::input(
                            &origin,
                            format!(
                                "does not match the {} schema: {e}",
                                crate::inference::SCHEMA
                            ),
                            "re-create it with `gpuprobe check-build --exercise inference --output FILE`",
                        )
                    })?;
                crate::inference::records::records(&doc)
            } else {
                crate::check_build::exercise::records_of_document(&text, &origin)?
            }
        }
        None => {
            let report = crate::probe::detect(&super::detect::probe_options(probe)?);
            // Saying "nothing to record" here would read as "every GPU passed".
            if !report.devices.iter().any(|d| d.source.is_runtime()) {
                print(&format!(
                    "nothing to record: {} on this machine, so no smoke test ran. Record a failure measured elsewhere from its document: `gpuprobe quirks record --from report.json` (a `gpuprobe detect --json` report) or `--from exercise.json` (`gpuprobe check-build ./build --exercise --json`).\n",
                    if report.devices.is_empty() {
                        "no GPU was found"
                    } else {
                        "GPUs are present but no GPU runtime could reach them"
                    }
                ))?;
                return Ok(0);
            }
            (crate::quirks::record::from_report(&report), Vec::new())
        }
    };
    for s in &skipped {
        crate::neutral::eprintln(&format!(
            "gpuprobe: not recorded: {}",
            crate::check_build::text::neutralise(s)
        ));
    }
    if records.is_empty() {
        print(
            "nothing to record: no device failed, hung or crashed in a way that implicates the VMM pool\n",
        )?;
        return Ok(0);
    }
    let path = match file {
        Some(p) => p.to_path_buf(),
        None => crate::profiles::config_dir()
            .ok_or_else(|| crate::Error::Environment {
                message: "no HOME or XDG_CONFIG_HOME to find the config directory".into(),
                fix: "pass --file PATH".into(),
            })?
            .join("quirks")
            .join("local.toml"),
    };
    let done = crate::quirks::record::write(&path, records)?;
    let mut out = String::new();
    for (id, replaced) in &done {
        out.push_str(&format!(
            "{} {id} in {}\n",
            if *replaced { "replaced" } else { "added" },
            path.display()
        ));
    }
    out.push_str("Plans made on this machine now keep the legacy pool for these devices. To share a record, send it upstream together with `gpuprobe detect --json` output.\n");
    print(&out)?;
    Ok(0)
}

/// What a record's VMM effect needs before the VMM pool may be used where it matches.
fn lifted_by(q: &crate::quirks::Quirk) -> String {
    use crate::evidence::Level;
    match q.effect.vmm.map(|v| v.lifted_by()) {
        None => "not a VMM record (it does not keep the legacy pool)".into(),
        Some(None) => "none: it keeps the legacy pool wherever it matches".into(),
        Some(Some(Level::Workload)) => "a workload pass: a VMM build of llama.cpp passing `gpuprobe check-build --exercise` (or, stronger, `--exercise inference`) on the same architecture, runtime series (major.minor) and OS".into(),
        Some(Some(Level::Inference)) => "an inference pass: a VMM build of llama.cpp passing `gpuprobe check-build --exercise inference` on the same architecture, runtime series (major.minor) and OS".into(),
        Some(Some(level)) => format!(
            "a {} pass: `gpuprobe detect` (its smoke test) passing on the same architecture, runtime series (major.minor) and OS",
            level.as_str()
        ),
    }
}
