//! `check-build --exercise inference`: the build's llama-perplexity on a synthetic (or the
//! user's) model, on the CPU and in each GPU configuration, compared; memory over a long context.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use super::print;
use crate::check_build::signatures::SignatureTable;
use crate::cli::CheckBuildArgs;
use crate::inference::memory::{HostRss, KfdVram, NvidiaSmi, Sampler};
use crate::inference::run::{self, ModelSource, Plan};
use crate::inference::{DeviceInfo, process};
use crate::profiles::Knowledge;
use crate::report::Report;

fn secs(flag: &str, v: f64) -> Result<Duration, crate::Error> {
    if v.is_finite() && v > 0.0 && v <= 86_400.0 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(crate::Error::input(
            flag,
            format!("`{v}` is not a usable number of seconds"),
            "give a positive number such as 300",
        ))
    }
}

pub fn run(a: &CheckBuildArgs, k: &Knowledge, saved: Option<&Report>) -> Result<i32> {
    let timeout = secs("--exercise-timeout", a.exercise_timeout)?;
    let budget = secs("--budget", a.budget)?;
    // The probe gives each device its architecture and the runtime version, without which the
    // document is no evidence about any GPU (as for `--exercise ops`).
    let probed: Option<Report> = if saved.is_none() && !a.no_probe && a.devices.is_empty() {
        crate::neutral::eprintln(
            "gpuprobe: probing this machine's GPUs for their architectures and runtime...",
        );
        Some(crate::probe::detect(&super::detect::probe_options(
            &a.probe,
        )?))
    } else {
        None
    };
    let saved = saved.or(probed.as_ref());
    for c in &a.configs {
        if !crate::inference::configs::KEYS.contains(&c.as_str()) {
            return Err(crate::Error::input(
                format!("--configs {c}"),
                "is not a configuration",
                format!(
                    "give some of: {}",
                    crate::inference::configs::KEYS.join(",")
                ),
            )
            .into());
        }
    }
    if !(1..=65536).contains(&a.model_mib) {
        return Err(crate::Error::input(
            "--model-mib",
            format!("{} MiB is not a usable size", a.model_mib),
            "give a size from 1 to 65536 MiB (16 is the default)",
        )
        .into());
    }
    if let Some(m) = &a.model {
        // Fails before anything runs when it is not a GGUF model.
        crate::gguf::read_header(m)?;
    }
    let programs = run::locate(a.binary.as_deref(), a.build_dir.as_deref())?;

    // What the build itself sees: its device lines (names, architectures, VMM).
    let listed = process::run(
        &programs.perplexity,
        &["--list-devices".to_string()],
        &[],
        Duration::from_secs(60),
        None,
        &[],
    );
    let facts = crate::check_build::parse::parse(&listed.output);
    let known = |dev: &str| {
        facts
            .devices
            .iter()
            .find(|d| format!("{}{}", d.backend, d.index) == dev)
    };
    let from_report = |dev: &str| {
        saved.and_then(|r| {
            crate::check_build::exercise::targets_of(r)
                .into_iter()
                .find(|t| t.device == dev)
        })
    };
    let names: Vec<String> = if a.devices.is_empty() {
        let from_init: Vec<String> = facts
            .devices
            .iter()
            .map(|d| format!("{}{}", d.backend, d.index))
            .collect();
        // Builds that print no backend init log with --list-devices (11434 on the H200 printed
        // only its `Available devices:` list) are read from that list.
        if from_init.is_empty() {
            available_devices(&listed.output)
        } else {
            from_init
        }
    } else {
        a.devices.clone()
    };
    if names.is_empty() {
        let tail: Vec<&str> = listed.output.lines().rev().take(5).collect();
        return Err(crate::Error::Environment {
            message: format!(
                "no GPU to exercise: {} --list-devices lists none ({}; it printed: {})",
                programs.perplexity.display(),
                listed.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            ),
            fix: "pass --device NAME (CUDA0, ROCm0) for each device to run the model on".into(),
        }
        .into());
    }
    let devices: Vec<DeviceInfo> = names
        .iter()
        .map(|n| {
            let line = known(n);
            let rep = from_report(n);
            DeviceInfo {
                device: n.clone(),
                name: line
                    .map(|d| d.name.clone())
                    .or_else(|| rep.as_ref().and_then(|t| t.name.clone())),
                arch: line
                    .and_then(|d| d.arch.clone())
                    .or_else(|| rep.and_then(|t| t.arch)),
            }
        })
        .collect();
    let backend = if names.iter().all(|n| n.starts_with("CUDA")) {
        "cuda"
    } else if names.iter().all(|n| n.starts_with("ROCm")) {
        "hip"
    } else {
        "cpu"
    };
    // The build's own device lines say whether the pool is compiled in; builds that print none
    // (11434's --list-devices) are read from their build folder's cache.
    let vmm = facts
        .devices
        .iter()
        .find_map(|d| d.vmm)
        .or_else(|| run::vmm_from_cache(&programs.dir, backend));
    let llama_build = a.llama_build.or(facts.version.build).or_else(|| {
        crate::check_build::binary::build_next_to(&programs.perplexity, Duration::from_secs(30))
    });
    let nvidia_smi = which::which("nvidia-smi").ok();
    let sampler: Box<dyn Sampler> = match (backend, nvidia_smi) {
        ("cuda", Some(p)) => Box::new(NvidiaSmi { program: p }),
        ("hip", _) => Box::new(KfdVram {
            root: PathBuf::from("/sys/class/kfd/kfd/proc"),
        }),
        _ => Box::new(HostRss),
    };
    let temp = match &a.work_dir {
        Some(_) => None,
        None => Some(
            tempfile::Builder::new()
                .prefix("gpuprobe-inference-")
                .tempdir()
                .map_err(|e| {
                    crate::Error::input(
                        "--work-dir",
                        format!("cannot create a temporary folder: {e}"),
                        "pass --work-dir DIR on a writable disk",
                    )
                })?,
        ),
    };
    let work_dir = a
        .work_dir
        .clone()
        .or_else(|| temp.as_ref().map(|t| t.path().to_path_buf()))
        .unwrap_or_default();
    let signatures = SignatureTable::bundled(&k.quirks)?;
    let plan = Plan {
        programs,
        devices,
        backend: backend.into(),
        vmm,
        llama_build,
        runtime_version: saved
            .and_then(|m| m.devices.iter().find_map(|d| d.runtime_version.clone())),
        model: match &a.model {
            Some(p) => ModelSource::User(p.clone()),
            None => ModelSource::Synthetic { mib: a.model_mib },
        },
        work_dir,
        keys: (!a.configs.is_empty()).then(|| a.configs.clone()),
        ctx: 128,
        chunks: 8,
        memory_ctx: a.memory_context,
        memory_passes: 3,
        sampler: Some(sampler.as_ref()),
        sample_every: Duration::from_millis(250),
        timeout,
        budget,
        kernel_log: std::env::var_os("GPUPROBE_DMESG")
            .map(PathBuf::from)
            .or_else(|| which::which("dmesg").ok()),
        signatures: &signatures,
        verbose: true,
    };
    let result = run::run(&plan)?;
    drop(temp);
    let json = serde_json::to_string_pretty(&result)? + "\n";
    if let Some(path) = &a.output {
        crate::files::write_atomic(path, json.as_bytes(), "--output")?;
    }
    if a.json {
        print(&json)?;
    } else {
        print(&result.render())?;
    }
    Ok(result.exit_code())
}

/// The GPU devices in llama.cpp's `--list-devices` answer: the indented `NAME: description (N MiB,
/// M MiB free)` lines after `Available devices:` (the CPU is never listed there).
fn available_devices(output: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_list = false;
    for line in output.lines() {
        if line.trim_end() == "Available devices:" {
            in_list = true;
            continue;
        }
        if !in_list {
            continue;
        }
        let Some(rest) = line.strip_prefix("  ") else {
            break;
        };
        let Some((name, description)) = rest.split_once(": ") else {
            break;
        };
        let plausible = !name.is_empty()
            && name.len() <= 32
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && name.ends_with(|c: char| c.is_ascii_digit())
            && description.trim_end().ends_with(" MiB free)");
        if plausible {
            names.push(name.to_string());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::available_devices;

    #[test]
    fn the_device_list_of_a_build_without_init_log_is_read() {
        // What llama-perplexity 11434 (CUDA, sm_90) printed for --list-devices on the H200.
        let h200 = "Available devices:\n  CUDA0: NVIDIA H200 (143155 MiB, 142629 MiB free)\n";
        assert_eq!(available_devices(h200), ["CUDA0"]);
        let two = "log line\nAvailable devices:\n  ROCm0: AMD Radeon RX 9070 XT (16304 MiB, 16000 MiB free)\n  ROCm1: AMD Radeon 780M (8192 MiB, 8000 MiB free)\nbye\n";
        assert_eq!(available_devices(two), ["ROCm0", "ROCm1"]);
        assert!(available_devices("Available devices:\n  (none)\n").is_empty());
        assert!(available_devices("  CUDA0: NVIDIA H200 (1 MiB, 1 MiB free)\n").is_empty());
    }
}
