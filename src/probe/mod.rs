//! Measuring this machine's GPUs, in child processes (`crate::children`) with a timeout; the parent
//! never loads a GPU driver itself. CUDA probes every device in one shared child, one thread per
//! device (`shared_child`); HIP, and CUDA with `--isolate`, start one child per device, all at once.

pub mod child;
pub mod count;
pub mod cuda;
mod cuda_backend;
pub mod env;
pub mod events;
pub mod hip;
pub mod hip_build;
pub mod interpret;
pub mod recorded;
pub mod shared_child;
pub mod smoke_pattern;
pub mod smoke_plan;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::children::orchestrator::{Exit, Outcome};
use crate::children::protocol::{Hello, Peer};
use crate::host::{HostView, checks};
use crate::report::{
    Backend, BackendChoice, BackendRun, BackendState, BackendStatus, ChildMode, Device,
    DeviceSource, Host, PeerResult, PeerRun, PeerVmm, ProbeRun, Report, Smoke, SmokeOutcome,
    SmokeStage, StageTimings, UNKNOWN_ARCH,
};
use interpret::smoke_from;

#[derive(Debug, Clone)]
pub struct ProbeOptions {
    pub backend: BackendChoice,
    pub smoke: bool,
    pub timeout: Duration,
    pub cycles: u32,
    /// One CUDA child per device instead of the shared child (`--isolate`, GPUPROBE_ISOLATE=1).
    pub isolate: bool,
    /// Where facts come from: this machine (under `GPUPROBE_SYSFS_ROOT`), or a replayed dump.
    pub host: Arc<HostView>,
}

/// This machine's OS and kernel.
pub fn host() -> Host {
    host_of(&HostView::live())
}

pub fn host_of(h: &HostView) -> Host {
    let os = if h.env("WSL_DISTRO_NAME").is_some()
        || h.read("/proc/version")
            .is_some_and(|v| v.to_ascii_lowercase().contains("microsoft"))
    {
        "wsl"
    } else {
        std::env::consts::OS
    };
    Host {
        os: os.to_string(),
        kernel: h
            .read("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string()),
    }
}

/// Probes every backend asked for and returns the report. Never fails: what could not be
/// measured is recorded as such.
pub fn detect(opts: &ProbeOptions) -> Report {
    let t0 = Instant::now();
    let h = &*opts.host;
    let mut report = Report::new(host_of(h));
    report.probe_run = Some(ProbeRun::default());
    report.environment = env::notices_of(h);
    let cuda = opts.backend.includes(Backend::Cuda);
    let amd = opts.backend.includes(Backend::Hip);
    if cuda {
        cuda_backend::probe(opts, &mut report, t0);
    }
    if amd {
        hip::probe(opts, &mut report, t0);
    }
    let mut found = checks::run(h, &report, amd, cuda);
    found.append(&mut report.host_checks);
    checks::sort(&mut found);
    report.host_checks = found;
    if h.is_replay() {
        // Nothing ran: a replay says what the machine is, not how long this took.
        report.strip_timings();
    } else if let Some(run) = report.probe_run.as_mut() {
        run.wall_ms = Some(ms(t0.elapsed()));
    }
    report
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Adds one backend's run to the report.
pub(crate) fn record_run(report: &mut Report, run: BackendRun) {
    report
        .probe_run
        .get_or_insert_with(ProbeRun::default)
        .backends
        .push(run);
}

/// How a backend's children are started: `--device N` etc. are appended.
type ChildCommand<'a> = &'a dyn Fn() -> Command;

fn cuda_command() -> Command {
    let exe = std::env::current_exe().unwrap_or_else(|_| "gpuprobe".into());
    let mut c = Command::new(exe);
    c.args(["__child", "cuda"]);
    c
}

fn device_args(cmd: &mut Command, index: u32, opts: &ProbeOptions) {
    cmd.arg("--device")
        .arg(index.to_string())
        .arg("--cycles")
        .arg(opts.cycles.to_string());
    if !opts.smoke {
        cmd.arg("--no-smoke");
    }
}

/// Result of running one backend's children.
pub(crate) struct Children {
    pub(crate) hello: Option<Hello>,
    /// (device index, outcome), in index order.
    pub(crate) devices: Vec<(u32, Outcome)>,
    /// When each device child was started (from the start of `detect`), by device index.
    pub(crate) starts: Vec<(u32, Duration)>,
    /// The peer child and when it started.
    pub(crate) peer: Option<(Duration, Outcome)>,
    pub(crate) count: count::Count,
    /// From the start of `detect` until every child of this backend had exited.
    pub(crate) wall: Duration,
    pub(crate) mode: ChildMode,
    /// The shared child ended early and devices were re-run isolated.
    pub(crate) shared: Option<crate::report::SharedCrash>,
    /// The verdict of a pair the peer checks never reported, where it is not the peer child's
    /// own failure (the shared child's pairs).
    pub(crate) missing_pair: Option<Smoke>,
}

/// Starts device `i`'s own child, named `<key> device <i>` for recording and replay; also says
/// when it started (since `t0`).
pub(crate) fn start_device(
    make: ChildCommand<'_>,
    opts: &ProbeOptions,
    key: &str,
    i: u32,
    t0: Instant,
) -> (u32, Duration, recorded::Started) {
    let at = t0.elapsed();
    let s = recorded::start(
        &opts.host,
        &format!("{key} device {i}"),
        || {
            let mut c = make();
            device_args(&mut c, i, opts);
            c
        },
        opts.timeout,
    );
    (i, at, s)
}

/// Starts a child for every counted device, and the peer child, all at once (issue #13); the
/// runtime's own count (`hello`) then drops children for devices it does not show and starts the
/// ones the count missed. With nothing counted, device 0's child starts first and its `hello`
/// says how many more to start. `only` (with its count) limits the run to some device indices
/// (targets the probe program was built for). Children are named `<key> device N` and
/// `<key> peers` for recording and replay.
pub(crate) fn run_children(
    make: ChildCommand<'_>,
    opts: &ProbeOptions,
    key: &str,
    only: Option<&[u32]>,
    count: count::Count,
    t0: Instant,
) -> Children {
    let h = &*opts.host;
    // Spawned from this thread, which outlives them: the parent-death signal follows the thread.
    let start = |i: u32| start_device(make, opts, key, i, t0);
    let start_peer = || {
        let at = t0.elapsed();
        let s = recorded::start(
            h,
            &format!("{key} peers"),
            || {
                let mut c = make();
                c.arg("--peers");
                c
            },
            opts.timeout,
        );
        (at, s)
    };
    let wants_peer = |n: usize| opts.smoke && n >= 2;
    let first_wave: Vec<u32> = match only {
        Some(o) => o.to_vec(),
        None => (0..count.devices.max(1)).collect(),
    };
    let mut started: Vec<_> = first_wave.iter().map(|i| start(*i)).collect();
    let mut peer = wants_peer(first_wave.len()).then(start_peer);
    if only.is_none()
        && count.source == count::Source::Hello
        && let Some((_, _, first)) = started.first_mut()
        && let Some(hl) = first.wait_for_hello()
    {
        let n = hl.device_count.unwrap_or(0);
        started.extend((1..n).map(start));
        if peer.is_none() && wants_peer(n as usize) {
            peer = Some(start_peer());
        }
    }
    let finish = |started: Vec<(u32, Duration, recorded::Started)>| {
        started
            .into_iter()
            .map(|(i, at, s)| (i, at, s.finish(h)))
            .collect::<Vec<_>>()
    };
    let mut done = finish(started);
    let mut peer = peer.map(|(at, s)| (at, s.finish(h)));
    let hello = done.iter().find_map(|(_, _, o)| o.hello().cloned());
    if let Some(n) = hello.as_ref().and_then(Hello::usable_devices) {
        done.retain(|(i, _, _)| *i < n);
        if only.is_none() {
            // The files counted fewer devices than the runtime shows: start the rest now.
            let have = done.iter().map(|(i, _, _)| i + 1).max().unwrap_or(0);
            let late: Vec<_> = (have..n).map(start).collect();
            let late_peer = (peer.is_none() && wants_peer(n as usize)).then(start_peer);
            done.extend(finish(late));
            if let Some((at, s)) = late_peer {
                peer = Some((at, s.finish(h)));
            }
        }
    }
    done.sort_by_key(|(i, _, _)| *i);
    Children {
        hello,
        starts: done.iter().map(|(i, at, _)| (*i, *at)).collect(),
        devices: done.into_iter().map(|(i, _, o)| (i, o)).collect(),
        peer,
        count,
        // Every child has exited (or been killed) by now.
        wall: t0.elapsed(),
        mode: ChildMode::Isolated,
        shared: None,
        missing_pair: None,
    }
}

impl Children {
    /// The per-stage numbers of device `index`'s child.
    pub(crate) fn timings(&self, index: u32) -> Option<StageTimings> {
        let (_, out) = self.devices.iter().find(|(i, _)| *i == index)?;
        let start = self
            .starts
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, s)| *s);
        let device = out.devices().next().and_then(|d| d.facts());
        Some(StageTimings {
            start_ms: start.map(ms),
            driver_init_ms: out.hello().and_then(|h| h.init_ms),
            context_ms: device.and_then(|d| d.context_ms),
            queries_ms: device.and_then(|d| d.queries_ms),
            smoke_ms: out.smoke().and_then(|s| s.result().elapsed_ms),
            wall_ms: (!matches!(out.exit, Exit::SpawnFailed(_))).then(|| ms(out.elapsed)),
        })
    }

    /// The backend's run for the report (`probe_run`).
    pub(crate) fn backend_run(&self, backend: Backend) -> BackendRun {
        BackendRun {
            backend: Some(backend),
            count_source: self.count.source.as_str().into(),
            counted: self.count.devices,
            wall_ms: Some(ms(self.wall)),
            last_stage: None,
            mode: Some(self.mode),
            shared_crash: self.shared.clone(),
            peer: self.peer.as_ref().map(|(start, out)| {
                let done = out.peers_done();
                PeerRun {
                    start_ms: Some(ms(*start)),
                    wall_ms: Some(ms(out.elapsed)),
                    contexts_ms: done.and_then(|d| d.contexts_ms),
                    elapsed_ms: done.and_then(|d| d.elapsed_ms),
                    pairs: out
                        .peers()
                        .filter_map(|p| {
                            Some(PeerVmm {
                                from: p.from?,
                                to: p.to?,
                                reverse_can_access: p.reverse_can_access,
                                read_ok: p.vmm_ok,
                                mismatches: p.vmm_mismatches.unwrap_or(0),
                                stage: p.vmm_stage.clone(),
                                error: p.vmm_error.clone(),
                            })
                        })
                        .collect(),
                }
            }),
        }
    }
}

/// A backend whose children never said hello: `hang` when its first child was killed at the
/// deadline (with the stage it was in), `error` otherwise.
pub(crate) fn no_hello_status(
    status: &mut BackendStatus,
    run: &mut BackendRun,
    out: Option<&Outcome>,
    smoke: &Smoke,
) {
    if let Some(out) = out.filter(|o| o.exit == Exit::TimedOut) {
        let stage = out.last_stage().unwrap_or(SmokeStage::DriverInit);
        status.status = BackendState::Hang;
        status.detail = Some(format!(
            "the {} probe was killed at the deadline during {stage}: {}",
            status.backend.name(),
            smoke.reason.clone().unwrap_or_default()
        ));
        run.last_stage = Some(stage);
    } else {
        status.status = BackendState::Error;
        status.detail = Some(format!(
            "the {} probe did not start properly: {}",
            status.backend.name(),
            smoke.reason.clone().unwrap_or_default()
        ));
    }
}

/// The peer checks' results for the pairs of `indices` (the devices measured), in pair order:
/// each pair that was reported, even if the child stopped later; for the others, the child's
/// failure (or `missing`, where given).
pub(crate) fn peer_results(
    out: &Outcome,
    indices: &[u32],
    opts: &ProbeOptions,
    missing: Option<&Smoke>,
) -> Vec<PeerResult> {
    let pairs: Vec<(u32, u32)> = indices
        .iter()
        .enumerate()
        .flat_map(|(n, a)| indices[n + 1..].iter().map(move |b| (*a, *b)))
        .collect();
    let reported = |a: u32, b: u32| out.peers().find(|p| p.is_pair(a, b));
    let complete = out.complete();
    let failed = match missing {
        Some(s) => s.clone(),
        None => smoke_from(out, opts.timeout, true),
    };
    pairs
        .into_iter()
        .filter_map(|(a, b)| match reported(a, b) {
            Some(p) => Some(peer_result(a, b, p)),
            // A complete child that skipped a pair said nothing about it.
            None if complete => None,
            None => Some(PeerResult {
                from: a,
                to: b,
                can_access: None,
                copy_ok: None,
                mismatches: None,
                outcome: failed.outcome,
                reason: failed.reason.clone(),
            }),
        })
        .collect()
}

/// One `peer` event: the ordinary peer copy and the VMM pool read from the peer.
fn peer_result(a: u32, b: u32, p: &Peer) -> PeerResult {
    let copy_ok = p.copy_ok;
    let vmm_ok = p.vmm_ok;
    let mut reasons = Vec::new();
    if let Some(e) = &p.error {
        reasons.push(e.to_string());
    }
    if let Some(m) = p.mismatches.filter(|m| *m > 0) {
        reasons.push(format!("{m} words differ after the peer copy"));
    }
    if vmm_ok == Some(false) {
        let stage = p.vmm_stage.as_deref().unwrap_or("peer_verify");
        let mut r = format!(
            "a VMM pool with access granted to the peer (as llama.cpp sets it with GGML_CUDA_P2P or NCCL/RCCL) failed at {stage}"
        );
        if let Some(m) = p.vmm_mismatches.filter(|m| *m > 0) {
            r.push_str(&format!(": {m} words read wrong from the peer"));
        }
        if let Some(e) = &p.vmm_error {
            r.push_str(&format!(": {e}"));
        }
        reasons.push(r);
    }
    PeerResult {
        from: a,
        to: b,
        can_access: p.can_access,
        copy_ok,
        mismatches: p.mismatches,
        outcome: if copy_ok == Some(true) && vmm_ok != Some(false) {
            SmokeOutcome::Pass
        } else {
            SmokeOutcome::Fail
        },
        reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
    }
}

pub(crate) fn unknown_device(index: u32, backend: Backend) -> Device {
    Device::new(index, backend, "unknown", UNKNOWN_ARCH, DeviceSource::None)
}
