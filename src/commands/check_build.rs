//! `gpuprobe check-build`: reads what a llama.cpp build says about itself (running the binary,
//! or from a saved log), measures this machine (or reads a report), and prints the findings.

use std::io::Read;
use std::path::Path;

use anyhow::Result;

use super::detect::probe_options;
use super::print;
use crate::check_build::{self, InputInfo, Options, runner};
use crate::cli::CheckBuildArgs;
use crate::plan::Mode;
use crate::profiles::Knowledge;
use crate::quirks::Os;
use crate::report::Report;

fn read_log(path: &Path) -> Result<String, crate::Error> {
    let shown = path.display().to_string();
    let input = format!("--log {shown}");
    let mut bytes = Vec::new();
    if shown == "-" {
        std::io::stdin().lock().take(64 << 20).read_to_end(&mut bytes).map_err(|e| crate::Error::input(&input, format!("cannot read stdin: {e}"), "pipe llama.cpp's output in, e.g. `llama-cli --version 2>&1 | gpuprobe check-build --log -`"))?;
    } else {
        // A regular file, bounded (a FIFO or device is refused rather than waited on).
        bytes = crate::files::read_bytes(path, crate::files::MAX_INPUT_BYTES).map_err(|e| {
            crate::Error::input(
                &input,
                format!("cannot read: {e}"),
                "check the path; save llama.cpp's output with `llama-cli --version > out.txt 2>&1`",
            )
        })?;
    }
    let text = runner::decode(&bytes);
    if text.trim().is_empty() {
        return Err(crate::Error::input(
            &input,
            "is empty",
            "llama.cpp prints --version and its device lines to stderr: capture both streams, e.g. `llama-cli --version > out.txt 2>&1`",
        ));
    }
    Ok(text)
}

fn host_os(report: Option<&Report>) -> Os {
    let os = report
        .map(|r| r.host.os.clone())
        .unwrap_or_else(|| crate::probe::host().os);
    match os.as_str() {
        "windows" => Os::Windows,
        "wsl" => Os::Wsl,
        _ => Os::Linux,
    }
}

pub fn run(a: &CheckBuildArgs) -> Result<i32> {
    if a.llama_build == Some(0) {
        return Err(crate::Error::input(
            "--llama-build",
            "build 0 is what llama.cpp reports when built without git",
            "give the real build number (the N of tag bN)",
        )
        .into());
    }
    let opts = probe_options(&a.probe)?;
    let k = Knowledge::load()?;
    // Saved report first: a bad --from fails before anything runs.
    let saved: Option<Report> = match &a.from {
        Some(path) => Some(crate::report::read_report(path)?),
        None => None,
    };

    let mut needed = std::collections::BTreeSet::new();
    let (text, input, mut extra) = match (&a.binary, &a.log) {
        (Some(bin), _) => {
            // Will it load here? Read before running it: a missing library or symbol version is
            // named, not left to the loader's one-line error.
            let located = runner::locate(bin)?;
            let load = check_build::elf::check(&located);
            needed.extend(load.program.needed.iter().cloned());
            for (_, l) in &load.backends {
                needed.extend(l.needed.iter().cloned());
            }
            let load_findings = check_build::elf::findings(&load);
            if load.cannot_start() {
                eprintln!(
                    "gpuprobe: {} cannot start on this machine (see the findings); it was not run",
                    crate::host::printable(&bin.display().to_string())
                );
                (
                    String::new(),
                    InputInfo {
                        kind: "binary".into(),
                        path: bin.display().to_string(),
                        runs: Vec::new(),
                    },
                    load_findings,
                )
            } else {
                let mut out = runner::examine(bin, opts.timeout)?;
                out.findings.extend(load_findings);
                (
                    out.text,
                    InputInfo {
                        kind: "binary".into(),
                        path: bin.display().to_string(),
                        runs: out.runs,
                    },
                    out.findings,
                )
            }
        }
        (None, Some(log)) => {
            let text = read_log(log)?;
            (
                text,
                InputInfo {
                    kind: "log".into(),
                    path: log.display().to_string(),
                    runs: Vec::new(),
                },
                Vec::new(),
            )
        }
        (None, None) => {
            return Err(crate::Error::input("check-build", "nothing to check", "pass --binary PATH (a llama.cpp program) or --log FILE (its saved output; - for stdin)").into());
        }
    };

    let probed: Option<Report> = if saved.is_none() && !a.no_probe {
        eprintln!(
            "gpuprobe: probing this machine's GPUs (skip with --no-probe, or use --from REPORT.json)..."
        );
        Some(crate::probe::detect(&opts))
    } else {
        None
    };
    let (machine, report_path) = match (&saved, &probed) {
        (Some(r), _) => {
            let p = a
                .from
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            (
                Some(check_build::machine_from(
                    r,
                    Mode::Report,
                    format!("report {p}"),
                )),
                Some(p),
            )
        }
        (None, Some(r)) => (
            Some(check_build::machine_from(
                r,
                Mode::Probe,
                "this machine's probe",
            )),
            None,
        ),
        _ => (None, None),
    };
    // The toolkit the build's libraries reveal, against the driver measured here.
    if let Some(m) = machine.as_ref()
        && let Some(driver) = crate::host::toolkit::driver_cuda(m.report)
    {
        let module = crate::host::toolkit::driver_module(m.report);
        for (backend, major, lib) in check_build::elf::toolkits(&needed) {
            if backend != crate::report::Backend::Cuda {
                continue;
            }
            if let Some(mm) = crate::host::toolkit::cuda_vs_driver(
                &format!("the build needs {lib}, so it was built with"),
                &crate::version::Version::from_number(major),
                &driver,
                module.as_deref(),
            ) {
                extra.push(
                    check_build::Finding::new(
                        "toolkit-newer-than-driver",
                        match mm.level {
                            crate::report::CheckLevel::Error => check_build::Level::Error,
                            _ => check_build::Level::Warning,
                        },
                        format!("built with CUDA {major}, newer than this driver supports"),
                        mm.message,
                    )
                    .fix(mm.fix),
                );
            }
        }
    }
    let env_set = match machine.as_ref() {
        Some(m) if m.mode == Mode::Report => m
            .report
            .environment
            .iter()
            .map(|e| e.name.clone())
            .collect(),
        _ => {
            // The watched variables, and any runtime variable a quirk recommends that is
            // already set here (advice that is already followed is only information).
            let mut names = crate::probe::env::set_names();
            for q in &k.quirks {
                for name in q.effect.env.keys() {
                    if std::env::var_os(name).is_some() && !names.contains(name) {
                        names.push(name.clone());
                    }
                }
            }
            names
        }
    };
    let options = Options {
        knowledge: &k,
        binary_dir: None,
        os: host_os(machine.as_ref().map(|m| m.report)),
        machine,
        llama_build: a.llama_build,
        env_set,
        report_path,
    };
    let report = check_build::check(&text, input, extra, &options);
    if a.json {
        print(&(serde_json::to_string_pretty(&report)? + "\n"))?;
    } else {
        print(&check_build::render(&report))?;
    }
    Ok(report.summary.exit_code)
}
