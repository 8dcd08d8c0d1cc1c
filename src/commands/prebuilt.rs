use anyhow::Result;

use super::detect::probe_options;
use super::print;
use crate::cli::{AssetOsChoice, CpuChoice, PrebuiltArgs, PrebuiltFormat};
use crate::devices::machine_gpus;
use crate::evidence::{Document, Evidence};
use crate::plan::Mode;
use crate::prebuilt::driver::Driver;
use crate::prebuilt::table::{AssetOs, AssetTable, Cpu};
use crate::prebuilt::{Gpu, Query, advice, choose, render};
use crate::profiles::Knowledge;
use crate::report::Report;
use crate::resolve::Devices;
use crate::version::Version;

/// Where the GPUs came from, for the `cmake-flags` command that builds instead.
enum Origin<'a> {
    Targets,
    Machine,
    Report(&'a std::path::Path),
    Probe,
}

pub fn run(a: &PrebuiltArgs) -> Result<i32> {
    let table = AssetTable::bundled()?;
    let k = Knowledge::load()?;
    let driver_given = a
        .driver
        .as_deref()
        .map(|s| {
            s.parse::<Version>().map_err(|e| {
                crate::Error::input(
                    "--driver",
                    e.to_string(),
                    "give the NVIDIA driver version, e.g. 550.54.14 or 580.95.05",
                )
            })
        })
        .transpose()?;
    let build = a.llama_build.unwrap_or_else(|| table.newest_sample());
    if build == 0 {
        return Err(crate::Error::input(
            "--llama-build",
            "build 0 is what llama.cpp reports when built without git",
            "give the real build number (the N of tag bN)",
        )
        .into());
    }
    if build > table.newest_sample() {
        super::note(&format!(
            "build {build} is newer than the newest release workflow gpuprobe read (b{}): its assets are inferred from that one",
            table.newest_sample()
        ));
    }
    let cpu = match a.cpu {
        Some(CpuChoice::X64) => Cpu::X64,
        Some(CpuChoice::Arm64) => Cpu::Arm64,
        None => Cpu::here().ok_or_else(|| {
            crate::Error::input(
                "--cpu",
                format!(
                    "this machine's CPU ({}) has no llama.cpp release asset",
                    std::env::consts::ARCH
                ),
                "name the CPU the asset is for: --cpu x64 or --cpu arm64",
            )
        })?,
    };

    let report_owned: Report;
    let (devices, origin) = if let Some(list) = &a.targets {
        (Devices::Declared(k.targets.expand(list)?), Origin::Targets)
    } else if let Some(list) = &a.machine {
        (Devices::Machine(machine_gpus(&k, list)?), Origin::Machine)
    } else if let Some(path) = &a.from {
        report_owned = crate::report_file::read_report(path)?;
        crate::report_file::require_devices(&report_owned, &path.display().to_string())?;
        (
            Devices::Measured {
                report: &report_owned,
                mode: Mode::Report,
            },
            Origin::Report(path),
        )
    } else {
        report_owned = crate::probe::detect(&probe_options(&a.probe)?);
        if report_owned.devices.is_empty() {
            super::eprint(&super::detect::table(&report_owned));
            return Err(crate::Error::Environment {
                message: "no GPU found to choose an asset for".into(),
                fix: "declare the GPUs instead: gpuprobe prebuilt --targets gfx1100 (or sm_86)"
                    .into(),
            }
            .into());
        }
        (
            Devices::Measured {
                report: &report_owned,
                mode: Mode::Probe,
            },
            Origin::Probe,
        )
    };
    let report = match &devices {
        Devices::Measured { report, .. } => Some(*report),
        _ => None,
    };
    let host_os = match report {
        Some(r) => r.host.os.clone(),
        None => std::env::consts::OS.to_string(),
    };
    let wsl = a.os.is_none() && host_os == "wsl";
    let os = match a.os {
        Some(AssetOsChoice::Linux) => AssetOs::Linux,
        Some(AssetOsChoice::Windows) => AssetOs::Windows,
        Some(AssetOsChoice::Macos) => AssetOs::Macos,
        None => match host_os.as_str() {
            "windows" => AssetOs::Windows,
            "macos" => AssetOs::Macos,
            _ => AssetOs::Linux,
        },
    };
    if wsl {
        super::note("WSL: Linux assets, on the Windows driver");
    }
    let gpus = gpus_of(&devices);
    let driver = match (&driver_given, report) {
        (Some(v), _) => Driver::from_version(v, a.driver.as_deref().unwrap_or_default(), os),
        (None, Some(r)) => measured_driver(r),
        (None, None) => Driver::unknown(),
    };
    let docs: Vec<(std::path::PathBuf, Document)> = Vec::new();
    let evidence = Evidence::with_documents(&docs)?;
    let q = Query {
        gpus,
        os,
        cpu,
        build,
        driver,
    };
    let mut advise = |asset: &crate::prebuilt::table::Asset| {
        advice::advise(&k, &devices, &evidence, os, wsl, build, asset)
    };
    let mut outcome = choose(&table, &q, &mut advise)?;
    if outcome.choice.is_none() {
        outcome.build_instead = Some(build_instead(&origin, &devices, a.os, build));
    }
    match a.format {
        PrebuiltFormat::Text => print(&render::text(&outcome))?,
        PrebuiltFormat::Json => print(&format!("{}\n", serde_json::to_string_pretty(&outcome)?))?,
        PrebuiltFormat::Url => match &outcome.choice {
            Some(c) => {
                let mut s = format!("{}\n", c.url);
                if let Some(comp) = &c.companion {
                    s.push_str(&format!("{}\n", comp.url));
                }
                print(&s)?;
            }
            None => super::eprint(&format!(
                "gpuprobe: no release asset fits: {}\ngpuprobe: build instead: {}\n",
                outcome.none_fits.as_deref().unwrap_or(""),
                outcome.build_instead.as_deref().unwrap_or("")
            )),
        },
    }
    Ok(if outcome.choice.is_some() {
        0
    } else {
        crate::error::exit::PROBLEM
    })
}

/// The GPUs an asset must run on.
fn gpus_of(devices: &Devices<'_>) -> Vec<Gpu> {
    match devices {
        Devices::Declared(names) | Devices::Machine(names) => names
            .iter()
            .map(|n| Gpu {
                arch: n.clone(),
                vendor: crate::targets::vendor_of_name(n),
            })
            .collect(),
        Devices::Measured { report, .. } => report
            .devices
            .iter()
            .map(|d| Gpu {
                arch: d.arch.clone(),
                vendor: Some(d.vendor),
            })
            .collect(),
    }
}

/// The NVIDIA driver a report measured (its CUDA version and kernel module), or unknown.
fn measured_driver(r: &Report) -> Driver {
    match crate::host::toolkit::driver_cuda(r) {
        Some(cuda) => Driver {
            cuda: Some(cuda),
            at_least: false,
            module: crate::host::toolkit::driver_module(r),
            source: "measured".into(),
        },
        None => Driver::unknown(),
    }
}

/// The Linux release asset `gpuprobe prebuilt` would choose for a measured node, at the newest
/// build gpuprobe read, with that build's number; None where none fits or the table cannot be
/// read (a label is then left out: the node still gets every measured label).
pub(super) fn for_node(report: &Report) -> Option<(u64, crate::prebuilt::Candidate)> {
    let table = AssetTable::bundled().ok()?;
    let k = Knowledge::load().ok()?;
    let build = table.newest_sample();
    let devices = Devices::Measured {
        report,
        mode: Mode::Report,
    };
    let evidence = Evidence::bundled().ok()?;
    let q = Query {
        gpus: gpus_of(&devices),
        os: AssetOs::Linux,
        cpu: Cpu::here()?,
        build,
        driver: measured_driver(report),
    };
    let wsl = report.host.os == "wsl";
    let mut advise = |asset: &crate::prebuilt::table::Asset| {
        advice::advise(&k, &devices, &evidence, AssetOs::Linux, wsl, build, asset)
    };
    let outcome = choose(&table, &q, &mut advise).ok()?;
    outcome.choice.map(|c| (build, c))
}

/// The `gpuprobe cmake-flags` command for the same GPUs and build, ready to paste.
fn build_instead(
    origin: &Origin<'_>,
    devices: &Devices<'_>,
    os: Option<AssetOsChoice>,
    build: u64,
) -> String {
    let names = |d: &Devices<'_>| match d {
        Devices::Declared(n) | Devices::Machine(n) => n.join(","),
        Devices::Measured { .. } => String::new(),
    };
    let mut cmd = match origin {
        Origin::Targets => format!("gpuprobe cmake-flags --targets {}", names(devices)),
        Origin::Machine => format!("gpuprobe cmake-flags --machine {}", names(devices)),
        Origin::Report(p) => format!(
            "gpuprobe cmake-flags --from {}",
            crate::neutral::sh_word(&p.display().to_string())
        ),
        Origin::Probe => "gpuprobe cmake-flags".to_string(),
    };
    cmd.push_str(&format!(" --llama-build {build}"));
    match os {
        Some(AssetOsChoice::Linux) => cmd.push_str(" --os linux"),
        Some(AssetOsChoice::Windows) => cmd.push_str(" --os windows"),
        Some(AssetOsChoice::Macos) | None => {}
    }
    cmd
}
