//! A llama.cpp binary on this machine: whether it loads, what it says when run, the CUDA toolkit
//! its libraries reveal against the driver measured here, and the environment quirks ask about.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use super::corpus::Corpus;
use super::finding::{Finding, Level};
use super::machine::Machine;
use super::runner;
use crate::error::Result;
use crate::plan::Mode;
use crate::profiles::Knowledge;

/// What examining a binary found.
#[derive(Debug, Default)]
pub struct Examined {
    /// Its runs (none when it cannot start here).
    pub runs: Vec<runner::Invocation>,
    /// The findings so far: whether it loads, what its runs showed.
    pub findings: Vec<Finding>,
    /// Its folder.
    pub binary_dir: Option<String>,
    /// The libraries it and its backends need.
    pub needed: BTreeSet<String>,
}

/// Will the binary load here (its ELF read before it runs: a missing library or symbol version
/// is named, not left to the loader's one-line error), and what it says when run; each run's
/// output goes to `corpus`.
pub fn examine(bin: &Path, timeout: Duration, corpus: &mut Corpus) -> Result<Examined> {
    let mut needed = BTreeSet::new();
    // Will it load here? Read before running it: a missing library or symbol version is
    // named, not left to the loader's one-line error.
    let located = runner::locate(bin)?;
    let binary_dir = located.parent().map(|d| d.display().to_string());
    let load = super::elf::check(&located);
    needed.extend(load.program.needed.iter().cloned());
    for (_, l) in &load.backends {
        needed.extend(l.needed.iter().cloned());
    }
    let load_findings = super::elf::findings(&load);
    if load.cannot_start() {
        crate::neutral::eprintln(&format!(
            "gpuprobe: {} cannot start on this machine (see the findings); it was not run",
            crate::host::printable(&bin.display().to_string())
        ));
        Ok(Examined {
            runs: Vec::new(),
            findings: load_findings,
            binary_dir,
            needed,
        })
    } else {
        let out = runner::examine(bin, timeout)?;
        let short = bin
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| bin.display().to_string());
        for r in &out.runs {
            corpus.push(r.command(Path::new(&short)), &r.output);
        }
        let mut extra = out.findings;
        extra.extend(load_findings);
        Ok(Examined {
            runs: out.runs,
            findings: extra,
            binary_dir,
            needed,
        })
    }
}

/// The CUDA toolkit the build's libraries reveal, against the driver measured here.
pub fn toolkit_findings(m: &Machine<'_>, needed: &BTreeSet<String>) -> Vec<Finding> {
    let mut extra = Vec::new();
    if let Some(driver) = crate::host::toolkit::driver_cuda(m.report) {
        let module = crate::host::toolkit::driver_module(m.report);
        for (backend, major, lib) in super::elf::toolkits(needed) {
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
                    Finding::new(
                        "toolkit-newer-than-driver",
                        match mm.level {
                            crate::report::CheckLevel::Error => Level::Error,
                            _ => Level::Warning,
                        },
                        format!("built with CUDA {major}, newer than this driver supports"),
                        mm.message,
                    )
                    .fix(mm.fix),
                );
            }
        }
    }
    extra
}

/// The environment variables the quirks may ask about: the report's, or the watched ones set
/// here and any runtime variable a quirk recommends that is already set (advice that is already
/// followed is only information).
pub fn env_set_for(k: &Knowledge, machine: Option<&Machine<'_>>) -> Vec<String> {
    match machine {
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
    }
}

/// The build number a program of the same build says (`llama-cli --version`), when it is there.
pub fn build_next_to(tbo: &Path, timeout: Duration) -> Option<u64> {
    let dir = tbo.parent()?;
    let prog = [
        "llama-cli",
        "llama-completion",
        "llama-server",
        "llama-bench",
        "llama-perplexity",
    ]
    .iter()
    .map(|n| dir.join(n))
    .find(|p| p.is_file())?;
    let inv = runner::run(&prog, &["--version"], timeout);
    super::parse::parse(&inv.output).version.build
}
