use std::time::Duration;

use anyhow::Result;

use super::print;
use crate::cli::{DetectArgs, ProbeArgs};
use crate::probe::interpret::human_bytes;
use crate::probe::{ProbeOptions, detect};
use crate::report::{Report, SmokeOutcome};

pub fn probe_options(p: &ProbeArgs) -> Result<ProbeOptions> {
    if !(p.timeout.is_finite() && p.timeout > 0.0 && p.timeout <= 86_400.0) {
        return Err(crate::Error::input(
            "--timeout",
            format!("`{}` is not a usable number of seconds", p.timeout),
            "give a positive number such as 30",
        )
        .into());
    }
    Ok(ProbeOptions {
        backend: p.backend,
        smoke: !p.no_smoke,
        timeout: Duration::from_secs_f64(p.timeout),
        cycles: p.cycles,
    })
}

pub fn run(a: &DetectArgs) -> Result<i32> {
    let report = detect(&probe_options(&a.probe)?);
    if a.json {
        print(&(serde_json::to_string_pretty(&report)? + "\n"))?;
    } else {
        print(&table(&report))?;
    }
    // A GPU only seen in sysfs/procfs, with no working runtime, does not satisfy --require-gpu.
    let measured = report
        .devices
        .iter()
        .any(|d| d.source == "driver" || d.source == "probe-program");
    if a.require_gpu && !measured {
        eprintln!(
            "gpuprobe: --require-gpu: {}",
            if report.devices.is_empty() {
                "no GPU found"
            } else {
                "GPUs are present but no GPU runtime could reach them"
            }
        );
        return Ok(crate::error::exit::ENVIRONMENT);
    }
    Ok(0)
}

pub fn table(r: &Report) -> String {
    let mut o = String::new();
    if r.devices.is_empty() {
        o.push_str("No GPU found on this machine.\n");
    } else {
        o.push_str(&format!(
            "{:<3} {:<5} {:<28} {:<8} {:<22} {:<4} {:<17} {}\n",
            "#", "api", "name", "arch", "VRAM total (free)", "VMM", "granularity", "smoke"
        ));
        for d in &r.devices {
            let vram = match (d.vram_total_bytes, d.vram_free_bytes) {
                (Some(t), Some(f)) => format!("{} ({})", gib(t), gib(f)),
                (Some(t), None) => gib(t),
                _ => "?".into(),
            };
            let gran = match (d.granularity_min, d.granularity_recommended) {
                (Some(a), Some(b)) => format!("{} / {}", human_bytes(a), human_bytes(b)),
                _ => "-".into(),
            };
            let vmm = match d.vmm_supported {
                Some(true) => "yes",
                Some(false) => "no",
                None => "?",
            };
            let arch = match &d.arch_features {
                Some(f) => format!("{}:{f}", d.arch),
                None => d.arch.clone(),
            };
            o.push_str(&format!(
                "{:<3} {:<5} {:<28} {:<8} {:<22} {:<4} {:<17} {}\n",
                d.index,
                d.backend.name(),
                truncate(&d.name, 28),
                arch,
                vram,
                vmm,
                gran,
                smoke_word(d.smoke.outcome, d.smoke.stage.as_deref())
            ));
            let mut facts = Vec::new();
            if let Some(p) = &d.pci_bus_id {
                facts.push(format!("pci {p}"));
            }
            if let Some(i) = d.integrated {
                facts.push(if i {
                    "integrated (APU)".into()
                } else {
                    "discrete".to_string()
                });
            }
            if let Some(w) = d.wave_size {
                facts.push(format!("wave {w}"));
            }
            if let Some(v) = &d.driver_version {
                facts.push(format!("driver {v}"));
            }
            if let Some(v) = &d.runtime_version {
                facts.push(format!(
                    "{} {v}",
                    if d.backend == crate::report::Backend::Cuda {
                        "CUDA API"
                    } else {
                        "HIP"
                    }
                ));
            }
            facts.push(format!("from {}", d.source));
            o.push_str(&format!("    {}\n", facts.join(", ")));
            if let Some(reason) = &d.smoke.reason {
                o.push_str(&format!("    smoke: {reason}\n"));
            }
            for l in &d.smoke.stderr_tail {
                o.push_str(&format!("    | {l}\n"));
            }
        }
    }
    for p in &r.peers {
        o.push_str(&format!(
            "peer {} -> {}: access {}, copy {}{}\n",
            p.from,
            p.to,
            p.can_access.map_or("?", |b| if b { "yes" } else { "no" }),
            p.outcome.as_str(),
            p.reason
                .as_ref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ));
    }
    o.push_str("backends:\n");
    for b in &r.backends {
        o.push_str(&format!("  {:<4} {}", b.backend.name(), b.status));
        if let Some(d) = &b.detail {
            o.push_str(&format!(": {d}"));
        }
        o.push('\n');
        if let Some(h) = &b.hint {
            o.push_str(&format!("       {h}\n"));
        }
    }
    for e in &r.environment {
        o.push_str(&format!(
            "warning: {}={} is set: {}\n",
            e.name, e.value, e.effect
        ));
    }
    if r.devices.is_empty() {
        o.push_str(
            "\nTo plan a llama.cpp build without a GPU (e.g. in CI), declare the targets:\n  \
             gpuprobe cmake-flags --targets gfx1100,gfx120X --rocm 6.4   # AMD\n  \
             gpuprobe cmake-flags --targets sm_86,sm_90 --cuda 12.8      # NVIDIA\n",
        );
    } else {
        o.push_str(
            "\nNext: gpuprobe cmake-flags >> build.sh   (or --explain to see every decision)\n",
        );
    }
    o
}

fn smoke_word(o: SmokeOutcome, stage: Option<&str>) -> String {
    match (o, stage) {
        (SmokeOutcome::Pass, _) | (SmokeOutcome::NotRun, _) => o.as_str().into(),
        (_, Some(s)) => format!("{} @ {s}", o.as_str()),
        (_, None) => o.as_str().into(),
    }
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}
