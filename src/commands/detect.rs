use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use super::print;
use crate::cli::{DetectArgs, DetectFormat, ProbeArgs};
use crate::host::{HostView, dump, printable};
use crate::neutral::inline;
use crate::probe::interpret::human_bytes;
use crate::probe::{ProbeOptions, detect};
use crate::report::{ChildMode, Report, SmokeOutcome};

pub fn probe_options(p: &ProbeArgs) -> Result<ProbeOptions> {
    probe_options_with(p, false)
}

/// The probe options, and where facts come from: this machine, or the dump in
/// `GPUPROBE_REPLAY` (whose own options then apply, since its children ran with them).
/// `record` keeps every input for `--dump`.
fn probe_options_with(p: &ProbeArgs, record: bool) -> Result<ProbeOptions> {
    if !(p.timeout.is_finite() && p.timeout > 0.0 && p.timeout <= 86_400.0) {
        return Err(crate::Error::input(
            "--timeout",
            format!("`{}` is not a usable number of seconds", p.timeout),
            "give a positive number such as 30",
        )
        .into());
    }
    let mut opts = ProbeOptions {
        backend: p.backend,
        smoke: !p.no_smoke,
        timeout: Duration::from_secs_f64(p.timeout),
        cycles: p.cycles,
        isolate: p.isolate
            || std::env::var("GPUPROBE_ISOLATE").is_ok_and(|v| v == "1" || v == "true"),
        host: Arc::new(HostView::live()),
    };
    let replay = std::env::var_os(crate::host::REPLAY_ENV).filter(|v| !v.is_empty());
    let view = match replay {
        Some(path) => {
            let path = Path::new(&path);
            let d = dump::load(path)?;
            opts.backend = d.options.backend;
            opts.smoke = d.options.smoke;
            opts.cycles = d.options.cycles;
            if d.options.timeout_s.is_finite() && d.options.timeout_s > 0.0 {
                opts.timeout = Duration::from_secs_f64(d.options.timeout_s);
            }
            crate::neutral::eprintln(&format!(
                "gpuprobe: replaying {} (taken by gpuprobe {}, --backend {}{}); nothing on this machine is probed",
                printable(&path.display().to_string()),
                printable(&d.gpuprobe_version),
                d.options.backend.as_str(),
                if d.options.smoke { "" } else { " --no-smoke" }
            ));
            dump::view(&d, &path.display().to_string())
        }
        None => HostView::live(),
    };
    opts.host = Arc::new(if record { view.recording() } else { view });
    Ok(opts)
}

pub fn run(a: &DetectArgs) -> Result<i32> {
    let opts = probe_options_with(&a.probe, a.dump.is_some())?;
    let report = detect(&opts);
    if let Some(path) = &a.dump {
        let written = dump::write(
            path,
            dump::Dump {
                schema: dump::SCHEMA.into(),
                gpuprobe_version: env!("CARGO_PKG_VERSION").into(),
                options: dump::Options {
                    backend: opts.backend,
                    smoke: opts.smoke,
                    timeout_s: opts.timeout.as_secs_f64(),
                    cycles: opts.cycles,
                },
                redacted: Vec::new(),
                inputs: opts.host.take_inputs(),
                // Without timings: a replay reproduces what the machine is, not how long it took.
                report: {
                    let mut r = report.clone();
                    r.strip_timings();
                    r
                },
            },
        )?;
        crate::neutral::eprintln(&format!(
            "gpuprobe: wrote {} ({}; redacted: {}). Replay it with: GPUPROBE_REPLAY={} gpuprobe detect",
            printable(&path.display().to_string()),
            dump::summary(&written),
            if written.redacted.is_empty() {
                "nothing identifying found".to_string()
            } else {
                written.redacted.join(", ")
            },
            crate::emit::sh_quote(&printable(&path.display().to_string()))
        ));
    }
    let format = if a.json { DetectFormat::Json } else { a.format };
    let text = match format {
        // JSON gets JSON's own escaping, never the terminal's (which would break it).
        DetectFormat::Json => {
            crate::neutral::json(&(serde_json::to_string_pretty(&report)? + "\n")).into_owned()
        }
        DetectFormat::Nfd => nfd_file(&report, a.expiry)?,
        DetectFormat::Text => {
            let mut text = table(&report);
            if a.verbose {
                text.push_str(&timings(&report));
            }
            text
        }
    };
    match &a.output {
        Some(path) => {
            crate::files::write_atomic(path, text.as_bytes(), "--output")?;
            crate::neutral::eprintln(&format!(
                "gpuprobe: wrote {}",
                printable(&path.display().to_string())
            ));
        }
        None if format == DetectFormat::Json => super::print_json(&text)?,
        None => print(&text)?,
    }
    // A GPU only seen in sysfs/procfs, with no working runtime, does not satisfy --require-gpu.
    let measured = report.devices.iter().any(|d| d.source.is_runtime());
    if a.require_gpu && !measured {
        crate::neutral::eprintln(&format!(
            "gpuprobe: --require-gpu: {}",
            if report.devices.is_empty() {
                "no GPU found"
            } else {
                "GPUs are present but no GPU runtime could reach them"
            }
        ));
        return Ok(crate::error::exit::ENVIRONMENT);
    }
    Ok(0)
}

/// The human table. Every field from the report is one line with its control characters shown
/// escaped ([`inline`]), so a device name or log line cannot redraw the terminal or forge rows.
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
            device_rows(d, &mut o);
        }
    }
    for hd in &r.hidden_devices {
        let d = &hd.device;
        o.push_str(&format!(
            "hidden: GPU {} {}{}{} ({})\n",
            d.index,
            printable(&d.name),
            if !d.arch_known() {
                String::new()
            } else {
                format!(" {}", printable(&d.arch))
            },
            d.pci_bus_id
                .as_deref()
                .map(|p| format!(" at {}", printable(p)))
                .unwrap_or_default(),
            printable(&hd.hidden_by)
        ));
    }
    peer_lines(r, &mut o);
    o.push_str("backends:\n");
    for b in &r.backends {
        o.push_str(&format!("  {:<4} {}", b.backend.name(), b.status));
        if let Some(d) = &b.detail {
            o.push_str(&format!(": {}", inline(d)));
        }
        o.push('\n');
        if let Some(h) = &b.hint {
            o.push_str(&format!("       {}\n", inline(h)));
        }
    }
    for e in &r.environment {
        o.push_str(&format!(
            "warning: {}={} is set: {}\n",
            inline(&e.name),
            inline(&e.value),
            inline(&e.effect)
        ));
    }
    host_check_lines(r, &mut o);
    if r.devices.is_empty() {
        o.push_str(
            "\nTo plan a llama.cpp build without a GPU (e.g. in CI), declare the targets:\n  \
             gpuprobe cmake-flags --targets gfx1100,gfx120X --rocm 6.4   # AMD\n  \
             gpuprobe cmake-flags --targets sm_86,sm_90 --cuda 12.8      # NVIDIA\n",
        );
    } else {
        o.push_str(
            "\nNext: gpuprobe cmake-flags >> build.sh   (or --explain to see every decision)\n\
             Then, once built: gpuprobe check-build ./build --exercise inference   (runs a model on each GPU against the CPU and measures the memory pool: evidence for --from)\n",
        );
    }
    o
}

/// One device: its row in the table, then its facts and the smoke test's words.
fn device_rows(d: &crate::report::Device, o: &mut String) {
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
        Some(f) => format!("{}:{}", inline(&d.arch), inline(f)),
        None => inline(&d.arch).into_owned(),
    };
    o.push_str(&format!(
        "{:<3} {:<5} {:<28} {:<8} {:<22} {:<4} {:<17} {}\n",
        d.index,
        d.backend.name(),
        truncate(&inline(&d.name), 28),
        arch,
        vram,
        vmm,
        gran,
        smoke_word(
            d.smoke.outcome,
            d.smoke
                .stage
                .as_ref()
                .map(|s| inline(s.as_str()))
                .as_deref()
        )
    ));
    let mut facts = Vec::new();
    if let Some(p) = &d.pci_bus_id {
        facts.push(format!("pci {}", inline(p)));
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
        facts.push(format!("driver {}", inline(v)));
    }
    if let Some(v) = &d.runtime_version {
        facts.push(format!(
            "{} {}",
            if d.backend == crate::report::Backend::Cuda {
                "CUDA API"
            } else {
                "HIP"
            },
            inline(v)
        ));
    }
    facts.push(format!("from {}", d.source));
    o.push_str(&format!("    {}\n", facts.join(", ")));
    if let Some(reason) = &d.smoke.reason {
        o.push_str(&format!("    smoke: {}\n", inline(reason)));
    }
    if let Some(sh) = d.smoke.sharing.as_ref().filter(|s| s.shared) {
        let pids: Vec<String> = sh.other_pids.iter().map(u32::to_string).collect();
        let n = sh.other_pids.len();
        o.push_str(&format!(
            "    shared GPU: {n} other compute process{} seen during the smoke test ({}: pid {}){}; weigh the measurement accordingly\n",
            if n == 1 { "" } else { "es" },
            inline(&sh.source),
            pids.join(", "),
            if sh.own_listed {
                ""
            } else {
                "; the driver did not list this probe, so one of them may be the probe itself"
            }
        ));
    }
    for n in &d.smoke.notes {
        o.push_str(&format!("    note: {}\n", inline(n)));
    }
    for l in &d.smoke.stderr_tail {
        o.push_str(&format!("    | {}\n", inline(l)));
    }
}

/// Every pair of devices: peer access, copies, and reading the VMM pool from the peer.
fn peer_lines(r: &Report, o: &mut String) {
    let vmm_reads = |from: u32, to: u32| {
        r.probe_run
            .iter()
            .flat_map(|run| &run.backends)
            .filter_map(|b| b.peer.as_ref())
            .flat_map(|p| &p.pairs)
            .find(|v| v.from == from && v.to == to)
            .and_then(|v| v.read_ok)
            .map(|ok| {
                if ok {
                    ", VMM pool read from the peer ok"
                } else {
                    ", VMM pool read from the peer WRONG"
                }
            })
            .unwrap_or("")
    };
    for p in &r.peers {
        o.push_str(&format!(
            "peer {} -> {}: access {}{}, copy {}{}\n",
            p.from,
            p.to,
            p.can_access.map_or("?", |b| if b { "yes" } else { "no" }),
            vmm_reads(p.from, p.to),
            p.outcome.as_str(),
            p.reason
                .as_ref()
                .map(|r| format!(" ({})", inline(r)))
                .unwrap_or_default()
        ));
    }
}

/// The host checks, each with its fix and the lines it rests on.
fn host_check_lines(r: &Report, o: &mut String) {
    if !r.host_checks.is_empty() {
        o.push_str("host checks:\n");
        for c in &r.host_checks {
            o.push_str(&format!(
                "  {:<7} {}: {}\n",
                c.level.as_str(),
                printable(&c.title),
                printable(&c.detail)
            ));
            if let Some(f) = &c.fix {
                o.push_str(&format!("          fix: {}\n", printable(f)));
            }
            for l in c.evidence.iter().take(12) {
                o.push_str(&format!("          | {}\n", printable(l)));
            }
        }
    }
}

/// Where the time went, per backend and device (`detect --verbose`).
pub fn timings(r: &Report) -> String {
    let Some(run) = &r.probe_run else {
        return String::new();
    };
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let mut o = format!("\ntimings (ms): total {}\n", ms(run.wall_ms));
    for b in &run.backends {
        let name = b.backend.map_or("?", |b| b.name());
        let mode = match b.mode {
            Some(ChildMode::Shared) => "one shared child, a thread per device",
            Some(ChildMode::Isolated) => "one child per device",
            None => "children",
        };
        o.push_str(&format!(
            "  {name}: {mode}; counted {} devices from {}; children done after {}",
            b.counted,
            b.count_source,
            ms(b.wall_ms)
        ));
        if let Some(s) = &b.last_stage {
            o.push_str(&format!("; killed during {s}"));
        }
        o.push('\n');
        if let Some(c) = &b.shared_crash {
            o.push_str(&format!(
                "  the shared child {}; re-run isolated: {:?}\n",
                printable(&c.how),
                c.rerun_isolated
            ));
        }
        let devs: Vec<_> = r
            .devices
            .iter()
            .filter(|d| Some(d.backend) == b.backend)
            .collect();
        if !devs.is_empty() {
            o.push_str(&format!(
                "  {:<3} {:>8} {:>11} {:>8} {:>8} {:>8} {:>8}\n",
                "#", "start", "driver init", "context", "queries", "smoke", "wall"
            ));
        }
        for d in devs {
            let t = d.timings.clone().unwrap_or_default();
            o.push_str(&format!(
                "  {:<3} {:>8} {:>11} {:>8} {:>8} {:>8} {:>8}\n",
                d.index,
                ms(t.start_ms),
                ms(t.driver_init_ms),
                ms(t.context_ms),
                ms(t.queries_ms),
                ms(t.smoke_ms),
                ms(t.wall_ms)
            ));
        }
        if let Some(p) = &b.peer {
            let what = if b.mode == Some(ChildMode::Shared) {
                "peer checks (shared child, contexts reused)"
            } else {
                "peer child"
            };
            o.push_str(&format!(
                "  {what}: start {}, contexts {}, all checks {}, wall {}\n",
                ms(p.start_ms),
                ms(p.contexts_ms),
                ms(p.elapsed_ms),
                ms(p.wall_ms)
            ));
        }
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

/// The NFD feature file for this node: its labels, with the plan gpuprobe makes for this node
/// from what it measured (the newest llama.cpp build it knows, no toolkit: the image that builds
/// llama.cpp is not this node's).
fn nfd_file(report: &Report, expiry_hours: f64) -> Result<String> {
    if !(expiry_hours.is_finite() && expiry_hours > 0.0 && expiry_hours <= 24.0 * 366.0) {
        return Err(crate::Error::input(
            "--expiry",
            format!("`{expiry_hours}` is not a usable number of hours"),
            "give a positive number of hours such as 24 (at most a year)",
        )
        .into());
    }
    let plan = plan_for_node(report);
    let (mut labels, left_out) = crate::emit::nfd::labels(report, plan.as_ref());
    for l in &left_out {
        super::warn(&format!(
            "the label `{}/{l}` is left out of the feature file: Kubernetes accepts a label name and value of at most 63 characters (letters, digits, `-`, `_`, `.`); check that the GPU's architecture is read right with `gpuprobe detect`",
            crate::emit::nfd::PREFIX
        ));
    }
    if let Some((build, asset)) = super::prebuilt::for_node(report) {
        crate::emit::nfd::add_prebuilt(
            &mut labels,
            build,
            &asset.name,
            asset.companion.as_ref().map(|c| c.name.as_str()),
        );
    }
    let file = crate::emit::nfd::feature_file(
        &labels,
        std::time::SystemTime::now(),
        Duration::from_secs_f64(expiry_hours * 3600.0),
    );
    if file.len() > crate::emit::nfd::MAX_FILE_BYTES {
        return Err(crate::Error::Environment {
            message: format!(
                "the feature file would be {} bytes; NFD ignores files over {}",
                file.len(),
                crate::emit::nfd::MAX_FILE_BYTES
            ),
            fix: "report this as a gpuprobe bug, with `gpuprobe detect --json`".into(),
        }
        .into());
    }
    Ok(file)
}

/// The plan for this node, or None (said on stderr) when none can be made: no GPU, GPUs of both
/// vendors (one label set cannot say two builds), or a refusal.
fn plan_for_node(report: &Report) -> Option<crate::plan::Plan> {
    if report.devices.is_empty() {
        return None;
    }
    let made = (|| -> Result<crate::plan::Plan> {
        let k = crate::profiles::Knowledge::load()?;
        let (llama, _) = crate::llama::LlamaTarget::select(None, None, &k.options)?;
        let req = crate::resolve::Request {
            devices: crate::resolve::Devices::Measured {
                report,
                mode: crate::plan::Mode::Probe,
            },
            backend: None,
            llama,
            rocm: None,
            cuda: None,
            rocm_source: "not known on the node".into(),
            cuda_source: "not known on the node".into(),
            os: crate::devices::host_os(Some(report)),
            env_set: report.environment.iter().map(|e| e.name.clone()).collect(),
            force_no_vmm: false,
            evidence: crate::evidence::Evidence::with_documents(&[])?,
        };
        Ok(crate::resolve::resolve(&k, &req)?)
    })();
    match made {
        Ok(p) if !p.refused() => Some(p),
        Ok(p) => {
            let why: Vec<&str> = p.refusals.iter().map(|r| r.message.as_str()).collect();
            super::note(&format!(
                "no build labels: the plan for this node is refused ({})",
                why.join("; ")
            ));
            None
        }
        Err(e) => {
            super::note(&format!("no build labels: {e}"));
            None
        }
    }
}
