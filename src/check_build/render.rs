//! The human report of a check-build document.

use super::build_number::BuildSource;
use super::finding::{Finding, Level};
use super::rank::may_apply;
use super::report::CheckReport;
use super::text;
use crate::plan::Mode;

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
    render_input(r, &mut o);
    render_build(r, &mut o);
    render_machine(r, &mut o);
    render_findings(r, verbose, &mut o);
    render_summary(r, &mut o);
    // Device names, versions and features come from the build's output: nothing from it reaches
    // the terminal un-neutralised.
    o.lines().map(|l| text::neutralise(l) + "\n").collect()
}

/// What was judged, and the runs of the program.
fn render_input(r: &CheckReport, o: &mut String) {
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
}

/// The build as judged: version, compiler, backend, devices, pool, features, what was not shown.
fn render_build(r: &CheckReport, o: &mut String) {
    o.push_str("\nllama.cpp build\n");
    let b = &r.build;
    let v = &r.extracted.version;
    o.push_str(&format!("  version     {}\n", version_words(r)));
    if let (Some(c), Some(t)) = (&v.compiler, &v.target) {
        o.push_str(&format!("  built with  {c} for {t}\n"));
    }
    o.push_str(&format!("  backend     {}\n", backend_words(r)));
    render_build_devices(r, o);
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
}

/// `b7000, build 11434, commit abc1234`: the version as printed, the number judged and its source.
fn version_words(r: &CheckReport) -> String {
    let b = &r.build;
    let number = match (b.number.value, r.extracted.version.reported_build) {
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
    ver.join(", ")
}

/// The GPU backend judged, and the others the build has.
fn backend_words(r: &CheckReport) -> String {
    let b = &r.build;
    match (&b.backend, b.cpu_only) {
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
    }
}

/// The counts, the exit code, and the decisive problem.
fn render_summary(r: &CheckReport, o: &mut String) {
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
